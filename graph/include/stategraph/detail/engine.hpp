#pragma once
/// @file detail/engine.hpp
/// @brief The engine's entry points, compiled once in graph/src/engine*.cpp for every state type.
/// Each is a coroutine taking one owned request, so that no argument of a library coroutine is
/// a user's temporary (g++ 12 destroys those twice).

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/command.hpp>
#include <stategraph/context.hpp>
#include <stategraph/detail/gcc12.hpp>
#include <stategraph/detail/graph_core.hpp>
#include <stategraph/detail/state_table.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/run_config.hpp>
#include <stategraph/stream.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

namespace stategraph {

/// @brief How a call ended.
/// How a call ended: at END (or with nothing left to run), stopped for a human, or stopped at a
/// superstep boundary by `request_drain()` (the thread continues when invoked again).
enum class run_status { done, interrupted, drained };

struct subgraph_snapshot;

/// @brief A task of the step a checkpoint is waiting on (see `state_snapshot`).
struct task_snapshot {
    std::string id;                          ///< the task's id (stable across retries and resumes)
    std::string name;                        ///< the node it runs
    std::vector<interrupt_info> interrupts;  ///< its pending interrupts: `id` (for `resume_map`), `node`, `value` (the payload)
    std::optional<std::string> error;        ///< the message of the error it failed with, if it did
    std::optional<boost::json::object> result; ///< writes of a task that already finished
    /// For a subgraph node's task, asked for with `state_options::subgraphs`: the subgraph's own
    /// state in its namespace (LangGraph's `tasks[i].state`); null otherwise or when it has none.
    std::shared_ptr<const subgraph_snapshot> state;
};

/// @brief The state of a subgraph run by a task (its newest checkpoint in its namespace), as JSON:
/// the subgraph's state type is not the graph's.
struct subgraph_snapshot {
    std::string ns;            ///< its checkpoint namespace, `node:task_id` (nested: `…|node:task_id`)
    std::string checkpoint_id;
    boost::json::object values; ///< the subgraph's state fields
    std::vector<std::string> next;
    std::vector<task_snapshot> tasks; ///< with their own subgraphs' states, nested
    std::int64_t step = -1;
    boost::json::object metadata;
};

/// @brief Options of `get_state`: which checkpoint, and whether waiting subgraphs' states are
/// read too (LangGraph's `get_state(config, subgraphs=True)`):
/// `co_await app.get_state("t", {.checkpoint_id = id, .subgraphs = true})`. Trivially
/// destructible (the id is held inline), so the braced spelling is safe inside `co_await` under
/// g++ 12.
struct state_options {
    id_text checkpoint_id; ///< the latest when empty
    bool subgraphs = false; ///< fill `task_snapshot::state` for subgraph nodes' tasks
};
static_assert(detail::safe_in_co_await<state_options>,
              "state_options must own nothing (g++ 12 destroys braced temporaries in co_await twice)");

namespace detail {

/// The input of a call: continue, new values, a resume, or a Command (LangGraph's
/// `Command(update, goto, resume)` given to `invoke`).
struct run_input {
    enum class kind { proceed, values, resume, command } what = kind::proceed;
    /// The new values (`kind::values`), or the command's update (`kind::command`).
    update_box values;
    /// Values as a caller's JSON (with `kind::values`), read once the thread's state is loaded:
    /// through the graph's input schema when it declares one, else as the state's fields (a
    /// nested struct's members left out keep the thread's values).
    std::optional<boost::json::object> json;
    /// The C++ type the JSON was made from (`as_input(I{...})`), checked against the input schema.
    const std::type_info* json_type = nullptr;
    resume_input resume;
    // kind::command: what it holds besides `values` / `json` (its update, as state fields).
    bool has_resume = false;
    std::vector<std::string> go_to;   ///< nodes to run next
    std::vector<send> sends;          ///< Sends to run next
    std::vector<std::pair<std::string, boost::json::value>> json_sends; ///< Sends as JSON: node, its input
};

struct run_request {
    std::shared_ptr<const graph_core> graph;
    run_input input;
    run_config cfg;
    stream_mode modes = stream_mode::none;
    stream_handler on_event;
    /// Per-call breakpoints (LangGraph's `interrupt_before` / `interrupt_after` of a call): when
    /// set, they replace the graph's compiled ones for this call ("*": every node).
    std::optional<std::vector<std::string>> interrupt_before, interrupt_after;
};

struct run_outcome {
    run_status status = run_status::done;
    state_box values;
    std::vector<interrupt_info> interrupts;
    std::string checkpoint_id;
    std::int64_t step = 0;
    std::vector<std::string> next;
    boost::json::object output; ///< the graph's output schema of `values` (empty without one)
};

struct snapshot_data {
    state_box values;
    std::vector<std::string> next;
    std::vector<task_snapshot> tasks;
    std::int64_t step = -1;
    std::string source;
    std::string checkpoint_id;
    std::string parent_checkpoint_id;
    boost::json::object metadata;
};

struct state_request {
    std::shared_ptr<const graph_core> graph;
    std::string thread_id;
    std::optional<std::string> checkpoint_id;
    checkpoint::list_options list;
    bool subgraphs = false; ///< read the states of subgraph nodes' tasks too (get_state)
};

struct update_request {
    std::shared_ptr<const graph_core> graph;
    std::string thread_id;
    /// A subgraph's namespace (`node:task_id`, nested `…|node:task_id`): the update goes to that
    /// subgraph's newest checkpoint there, read against the subgraph's state (JSON values only).
    std::string ns;
    update_box values;
    /// Values as a caller's JSON, read against the checkpoint's state (a nested struct's members
    /// left out keep their values); used instead of `values` when set.
    std::optional<boost::json::object> json;
    std::optional<std::string> as_node;
    std::optional<std::string> checkpoint_id;
    bool allow_drift = false;
};

/// The state `s` (an `S*` of `st`'s type; null: no state) as a JSON object of every field.
boost::json::object state_json(const state_table& st, const void* s);
/// The update holding the fields of `o` (an overwrite's wire form `{"__overwrite__": v}` marks
/// the field overwritten). @throws graph_error `code` naming the field, prefixed by `where`,
/// for an unknown field (with the nearest name) or a value that does not fit the field's type.
update_box update_from_json(const state_table& st, const boost::json::object& o, errc code, const std::string& where);

boost::asio::awaitable<run_outcome> run_graph(std::unique_ptr<run_request> req);
boost::asio::awaitable<snapshot_data> get_state(std::unique_ptr<state_request> req);
boost::asio::awaitable<std::vector<snapshot_data>> get_state_history(std::unique_ptr<state_request> req);
boost::asio::awaitable<std::string> update_state(std::unique_ptr<update_request> req);

/// Clears the node cache of `graph`'s nodes `nodes` (empty: all of them); returns the count removed.
boost::asio::awaitable<std::size_t> clear_cache(std::shared_ptr<const graph_core> graph, std::vector<std::string> nodes);

/// The node call of a compiled graph used as a node of another graph (fields shared by name).
node_call subgraph_call(std::shared_ptr<const graph_core> child, const state_table& parent);

/// An update from a caller's JSON object of state fields, read against `current` (null: the
/// defaults): a last-value field holding a described struct takes only the members the JSON names
/// (stategraph/json_shape.hpp). An unknown field or member is an error naming it (code `code`).
update_box merge_update_from_json(const state_table& st, const boost::json::object& o, const void* current, errc code,
                                  const std::string& where);

/// Reads a caller's input JSON as graph `g` takes it: through its input schema, else as state
/// fields (merge_update_from_json); `current` is the thread's state.
update_box read_input(const graph_core& g, const boost::json::object& in, const std::type_info* type, const void* current,
                      errc code, const std::string& where);

/// The output of `state` for callers: the graph's output schema when it declares one, else the state's fields.
boost::json::object output_of(const graph_core& g, const void* state, const std::vector<std::string>& path);

/// Moves the typed state out of a box.
template <class S>
S take_state(state_box& b) {
    return b ? std::move(*static_cast<S*>(b.get())) : S{};
}

} // namespace detail
} // namespace stategraph
