#pragma once
/// @file json_graph.hpp
/// @brief `json_graph`: a compiled graph of any state type seen through JSON (type-erased), for
/// code that does not know the state type at compile time, such as an HTTP server: invoke with
/// JSON input or a resume, read the state and its history as JSON, update it from JSON, list the
/// pending interrupts and the subgraph namespaces, and read the graph's shape and fields.
///
/// State and updates go through the engine's own conversion (the one `checkpoints` and streamed
/// `values` use), so a field reads and writes here exactly as it is stored.
///
/// Every call returns an awaitable and is a plain function: its arguments are moved into the
/// call before anything is awaited. `json_run` and `json_update` are classes with a constructor
/// (set their members by name), so a temporary of either is safe inside `co_await` under g++ 12.
/// @code
/// stategraph::json_graph g(app);                     // any compiled_graph<S>
/// stategraph::json_run run;
/// run.input = boost::json::object{{"question", "hi"}};
/// run.config.thread_id = "chat-42";
/// auto r = co_await g.invoke(std::move(run));        // r.values is a JSON object
/// @endcode
///
/// Errors are the engine's: `graph_error` with an `errc`. A JSON value that does not fit the
/// state throws `invalid_input` naming the field (`graph_error::names()` holds it first).

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/command.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/detail/gcc12.hpp>
#include <stategraph/context.hpp>
#include <stategraph/detail/engine.hpp>
#include <stategraph/detail/graph_core.hpp>
#include <stategraph/run_config.hpp>
#include <stategraph/stream.hpp>
#include <stategraph/topology.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace stategraph {

/// @brief LangGraph's `Command` as a caller's JSON input (`{"update", "goto", "resume"}` of the
/// HTTP API's `command`): see `command<S>` for how a call runs one.
struct json_command {
    std::optional<boost::json::object> update; ///< state fields (nested members left out keep their values)
    std::vector<std::string> go_to;            ///< nodes to run next
    /// Sends to run next: the node and its input (the node's input type as JSON).
    std::vector<std::pair<std::string, boost::json::value>> sends;
    std::optional<resume_input> resume; ///< the answer to the thread's pending interrupts
};

/// @brief One call of `json_graph::invoke`: what goes in, how it runs, what it streams.
/// Thread safety: a plain value, moved into the call.
struct json_run {
    /// A class, not an aggregate, on purpose: set its members by name. (g++ 12 destroys an
    /// aggregate that owns memory twice when it is braced inside a `co_await` expression;
    /// `json_run{...}` now calls this constructor, which is safe.)
    json_run() = default;
    /// Continue the thread (`continue_run`), new values (the graph's input schema when it
    /// declares one, else state fields; read against the thread's state: a nested struct's
    /// members left out keep their values), a resume (one value, or values by interrupt id:
    /// `resume_map`), or a command.
    std::variant<continue_input, boost::json::object, resume_input, json_command> input;
    /// The thread, the checkpoint to start from (replay or fork), the recursion limit, ...
    run_config config;
    /// The stream modes `on_event` receives (none: `on_event` is not called).
    stream_mode modes = stream_mode::none;
    /// Called for each streamed event, on the executor of the awaiting coroutine.
    stream_handler on_event;
    /// Breakpoints of this call, replacing the graph's compiled ones of their kind ("*": every node).
    std::optional<std::vector<std::string>> interrupt_before, interrupt_after;
};

/// @brief What `json_graph::invoke` returns: a `run_result` whose `values` is the state as a
/// JSON object (every field).
using json_result = run_result<boost::json::object>;

/// @brief A checkpoint of a thread: a `state_snapshot` whose `values` is the state as a JSON
/// object (every field).
using json_snapshot = state_snapshot<boost::json::object>;

/// @brief One call of `json_graph::update_state`.
/// Thread safety: a plain value, moved into the call.
struct json_update {
    /// A class, not an aggregate, on purpose, as `json_run`.
    json_update() = default;
    std::string thread_id;
    boost::json::object values;           ///< state fields (none: a checkpoint with no change); nested members left out kept
    std::optional<std::string> as_node;   ///< the node the values come from (default: the last writer)
    std::optional<std::string> checkpoint_id; ///< the checkpoint to update (default: the latest)
    bool allow_drift = false;             ///< update a thread written by another graph shape
    /// A subgraph's checkpoint namespace (`node:task_id`, nested `…|node:task_id`, as
    /// `task_snapshot::state->ns` gives it): the update goes to that subgraph's state there, read
    /// against the subgraph's fields. Empty: the graph's own state.
    std::string ns;
};
static_assert(detail::safe_in_co_await<json_run> && detail::safe_in_co_await<json_update>,
              "json_run and json_update must not be aggregates (g++ 12 destroys braced temporaries in co_await twice)");

/// @brief A checkpoint namespace of a thread and its newest checkpoint there.
struct namespace_head {
    std::string ns; ///< "" for the graph itself, `node:task` (and `…|node:task`) for a subgraph
    std::string checkpoint_id;
};

/// @brief A compiled graph of any state type, with JSON in and out. Cheap to copy (a shared
/// handle); safe to use from many coroutines at once, as `compiled_graph` is.
///
/// Cancellation: a call stops when the awaiting coroutine's cancellation slot is emitted (as
/// `compiled_graph::invoke` does): tasks in flight are cancelled, and what was saved stays.
/// Thread safety: every member is const; one object (or copies) may serve calls from any threads at
/// once, each running on the executor of the coroutine that awaits it (as `compiled_graph`).
class json_graph {
public:
    json_graph() = default;
    /// @brief The JSON face of `g`.
    /// @tparam S the graph's state type.
    /// @param g the compiled graph, shared (not copied).
    template <class S>
    explicit json_graph(const compiled_graph<S>& g) : json_graph(g.core()) {}
    /// @brief The JSON face of a compiled graph's engine tables (`compiled_graph::core()`, or
    /// a server `assistant_spec`'s `core`).
    /// @throws std::invalid_argument when `core` is null.
    /// @param core the engine tables, shared.
    explicit json_graph(std::shared_ptr<const detail::graph_core> core);

    // -- running ---------------------------------------------------------------------------------

    /// @brief Runs the graph until it ends, interrupts or drains.
    /// @throws graph_error `invalid_input` naming the field when `run.input`'s values do not fit
    /// the state (thrown by this call, before anything runs); the engine's errors otherwise
    /// (`nothing_to_resume`, `unknown_interrupt_id`, `checkpoint_not_found`, `recursion_limit`,
    /// `node_failed`, ...).
    /// @param run input, `run_config`, stream modes and handler, per-call breakpoints.
    /// @return status, the state as JSON, interrupts, the last checkpoint id and step, next nodes and
    /// the output schema's JSON.
    boost::asio::awaitable<json_result> invoke(json_run run) const;

    // -- state -----------------------------------------------------------------------------------

    /// @brief The thread's state at its latest checkpoint (writes of tasks that finished in the
    /// unfinished step applied). @throws thread_error `thread_not_found`, `no_checkpointer`.
    /// @param thread_id the thread.
    boost::asio::awaitable<json_snapshot> get_state(std::string thread_id) const;
    /// @brief The thread's state at checkpoint `checkpoint_id` (the latest when empty).
    /// @throws thread_error `checkpoint_not_found` naming the thread.
    /// @param thread_id the thread.
    /// @param checkpoint_id a checkpoint id; nullopt: the latest.
    boost::asio::awaitable<json_snapshot> get_state(std::string thread_id, std::optional<std::string> checkpoint_id) const;
    /// @brief The thread's state at `o.checkpoint_id`, with its waiting subgraphs' states when
    /// `o.subgraphs` (see `compiled_graph::get_state(thread, state_options)`).
    /// @param thread_id the thread.
    /// @param o the checkpoint (empty: the latest) and whether subgraph states are included.
    boost::asio::awaitable<json_snapshot> get_state(std::string thread_id, state_options o) const;
    /// @brief The thread's checkpoints, newest first (empty for an unknown thread).
    /// @param thread_id the thread.
    boost::asio::awaitable<std::vector<json_snapshot>> get_state_history(std::string thread_id) const;
    boost::asio::awaitable<std::vector<json_snapshot>> get_state_history(std::string thread_id,
                                                                         checkpoint::list_options options) const;
    /// @brief Writes `u.values` as if node `u.as_node` had returned them, in a new checkpoint
    /// with source "update"; returns its id.
    /// @throws graph_error `invalid_input` naming the field (thrown by this call), `unknown_node`
    /// for an `as_node` that is not a node, `thread_not_found`, `checkpoint_not_found`,
    /// `graph_drift` (unless `allow_drift`).
    /// @param u the thread, values, `as_node`, checkpoint, drift permission and subgraph namespace.
    boost::asio::awaitable<std::string> update_state(json_update u) const;
    /// @brief The interrupts the thread's latest checkpoint waits on (what a resume answers).
    /// @throws thread_error `thread_not_found` for a thread with no checkpoint.
    /// @param thread_id the thread.
    boost::asio::awaitable<std::vector<interrupt_info>> pending_interrupts(std::string thread_id) const;
    /// @brief The thread's checkpoint namespaces that a resume continues: the graph's own ("")
    /// first, then, depth first, each subgraph namespace holding an interrupted task's subgraph,
    /// with the newest checkpoint of each (namespaces with none are left out).
    /// @throws thread_error `no_checkpointer`.
    /// @param thread_id the thread.
    boost::asio::awaitable<std::vector<namespace_head>> subgraph_namespaces(std::string thread_id) const;

    // -- conversions -----------------------------------------------------------------------------

    /// @brief Checks that `values` fits the state as an update, as `invoke` and `update_state`
    /// would read it. @throws graph_error `invalid_input` naming the field, with `where` first in
    /// the message (as "input: unknown field 'x' (did you mean 'y'?)").
    /// @param values state fields as JSON.
    /// @param where what the values are, for the message ("input", "update").
    void check_values(const boost::json::object& values, std::string_view where) const;
    /// @brief Checks that `input` fits the graph's input (its input schema, else the state's
    /// fields), as `invoke` reads it. @throws graph_error `invalid_input` (an
    /// `unknown_member_error` for a member a struct lacks) with `where` first in the message.
    /// @param input the caller's input object.
    /// @param where what it is, for the message.
    void check_input(const boost::json::object& input, std::string_view where) const;
    /// @brief A typed state as JSON, as this face shows it (every field).
    /// @tparam S the state type.
    /// @param state the state.
    template <class S>
    static boost::json::object to_json(const S& state) {
        return detail::state_json(detail::table_of<S>(), &state);
    }
    /// @brief A typed update from JSON, as this face reads it.
    /// @throws graph_error `invalid_input` naming the field.
    /// @tparam S the state type.
    /// @param values field name -> JSON value.
    template <class S>
    static update<S> update_from_json(const boost::json::object& values) {
        auto box = detail::update_from_json(detail::table_of<S>(), values, errc::invalid_input, "update");
        return std::move(*static_cast<update<S>*>(box.get()));
    }

    // -- shape -----------------------------------------------------------------------------------

    /// @brief Whether the face holds a graph.
    explicit operator bool() const noexcept { return core_ != nullptr; }
    /// @brief The graph's shape: nodes, edges, routes, stages, breakpoints.
    const topology& shape() const;
    /// @brief The state's fields, in declaration order.
    const std::vector<std::string>& fields() const;
    /// @brief Whether `name` is a node of the graph.
    /// @param name a node name.
    bool has_node(const std::string& name) const;
    /// @brief The checkpointer the graph was compiled with (may be null).
    const std::shared_ptr<checkpoint::saver>& checkpointer() const;
    /// @brief The graph signature stamped on every checkpoint.
    const std::string& signature() const;
    /// @brief The engine's tables.
    const std::shared_ptr<const detail::graph_core>& core() const noexcept { return core_; }

private:
    const detail::graph_core& g() const;
    std::shared_ptr<const detail::graph_core> core_;
};

} // namespace stategraph
