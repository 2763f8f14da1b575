#pragma once
/// @file compiled_graph.hpp
/// @brief `compiled_graph<S>`: runs a graph in LangGraph's supersteps on Asio coroutines, with a
/// checkpoint after every step (and each task's writes saved the moment it finishes).
///
/// This header only declares and converts types: the engine itself is compiled once, in
/// graph/src/engine*.cpp, and reaches the state type through `detail::state_table`.
///
/// Every call returns an awaitable and is a plain function: arguments are moved into the call
/// before anything is awaited, so temporaries and default arguments are safe under g++ 12.
/// @code
/// auto r = co_await app.invoke(update<turn>{}.set<&turn::question>("hi"), {.thread_id = "chat-42"});
/// @endcode

#include <stategraph/command.hpp>
#include <stategraph/detail/engine.hpp>
#include <stategraph/detail/gcc12.hpp>
#include <stategraph/detail/graph_core.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/json_shape.hpp>
#include <stategraph/run_config.hpp>
#include <stategraph/stream.hpp>
#include <stategraph/topology.hpp>
#include <stategraph/update.hpp>

#include <stategraph/checkpoint/saver.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace stategraph {

template <class S>
class state_graph;

/// @brief What `invoke` returns.
/// @tparam S the graph's state type.
/// Thread safety: a plain value; distinct objects are independent.
template <class S>
struct run_result {
    run_status status = run_status::done;
    S values{};
    std::vector<interrupt_info> interrupts; ///< empty for a static breakpoint
    std::string checkpoint_id;
    std::int64_t step = 0;
    std::vector<std::string> next;          ///< nodes that run when the thread continues
    /// The output callers get: the graph's output schema of `values` (`state_graph::output_schema`);
    /// empty when it declares none.
    boost::json::object output;
    bool interrupted() const { return status == run_status::interrupted; }
    /// @brief The output as the graph's output schema type `O`.
    /// @tparam O the output schema's type (`state_graph::output_schema<O>`).
    /// @throws graph_error(invalid_input) when `output` does not read as an `O` (for instance when
    /// the graph declares no output schema and `output` is empty while `O` has required members).
    template <class O>
    O output_as() const {
        return read_json<O>(output, errc::invalid_input, "run_result::output_as");
    }
    /// @brief Stopped by `request_drain()` at a superstep boundary: `next` runs when the thread
    /// is invoked again (`continue_run`).
    bool drained() const { return status == run_status::drained; }
};

/// @brief What `get_state` and `get_state_history` return: one checkpoint of a thread, as
/// LangGraph's `StateSnapshot`.
/// @code
/// auto snap = co_await app.get_state("ticket-1");          // or run_sync(app.get_state("ticket-1"))
/// if (!snap.next.empty()) std::cout << "waiting before " << snap.next.front() << '\n';
/// for (auto const& t : snap.tasks)
///     for (auto const& i : t.interrupts) std::cout << t.name << " asks " << boost::json::serialize(i.value) << '\n';
/// @endcode
/// @tparam S the graph's state type.
/// Thread safety: a plain value; distinct objects are independent.
template <class S>
struct state_snapshot {
    S values{};                        ///< the state at this checkpoint (a default `S` for a thread with none)
    std::vector<std::string> next;     ///< nodes that run when the thread continues; empty when it has ended
    std::vector<task_snapshot> tasks;  ///< this step's tasks: their pending interrupts, errors, finished writes
    std::int64_t step = -1;            ///< superstep number, as LangGraph counts: -1 for the input checkpoint, then 0, 1, ...
    std::string source;                ///< how the checkpoint was made: "input", "loop", "update" (update_state) or "fork"
    std::string checkpoint_id;         ///< its id: pass it as `run_config::checkpoint_id` to replay or fork from here; empty for a thread with none
    std::string parent_checkpoint_id;  ///< the checkpoint before it (empty for the first)
    boost::json::object metadata;      ///< the checkpoint's metadata as LangGraph writes it: `source`, `step`, and `writes` (the input) on an input checkpoint
};

/// @brief Options of `compile()`.
/// Thread safety: a plain value; the savers and store it points to are shared with every run.
struct compile_options {
    /// Where checkpoints go (`memory_saver`, `sqlite_saver`, ...); null: no threads, no interrupts,
    /// no `get_state` (those throw `thread_error(no_checkpointer)`). Shared with every run.
    std::shared_ptr<checkpoint::saver> checkpointer;
    /// Added to the builder's `interrupt_before` nodes (static breakpoints, by name).
    std::vector<std::string> interrupt_before;
    /// Added to the builder's `interrupt_after` nodes.
    std::vector<std::string> interrupt_after;
    /// Replaces the builder's graph name when not empty.
    std::string name;
    /// Where cached nodes keep their outcomes (`cache_policy`); empty: the checkpointer, or, for a
    /// graph without one, a memory saver private to the compiled graph. Any saver is a node cache;
    /// so is a class of your own that implements only `checkpoint::node_cache`.
    std::shared_ptr<checkpoint::node_cache> cache;
    /// The long-term memory store its nodes reach with `ctx.store()` (shared by every thread and
    /// run; subgraphs use their parent's). `run_config::store` overrides it for one call.
    std::shared_ptr<store::base_store> store;
};

namespace detail {
template <class S>
run_result<S> to_result(run_outcome o) {
    return {o.status, take_state<S>(o.values), std::move(o.interrupts), std::move(o.checkpoint_id), o.step,
            std::move(o.next), std::move(o.output)};
}
template <class S>
state_snapshot<S> to_snapshot(snapshot_data d) {
    return {take_state<S>(d.values), std::move(d.next), std::move(d.tasks), d.step, std::move(d.source),
            std::move(d.checkpoint_id), std::move(d.parent_checkpoint_id), std::move(d.metadata)};
}
template <class S>
boost::asio::awaitable<run_result<S>> typed_run(std::unique_ptr<run_request> req) {
    auto outcome = co_await run_graph(std::move(req));
    co_return to_result<S>(std::move(outcome));
}
template <class S>
boost::asio::awaitable<state_snapshot<S>> typed_state(std::unique_ptr<state_request> req) {
    auto data = co_await get_state(std::move(req));
    co_return to_snapshot<S>(std::move(data));
}
template <class S>
boost::asio::awaitable<std::vector<state_snapshot<S>>> typed_history(std::unique_ptr<state_request> req) {
    auto list = co_await get_state_history(std::move(req));
    std::vector<state_snapshot<S>> out;
    out.reserve(list.size());
    for (auto& d : list) out.push_back(to_snapshot<S>(std::move(d)));
    co_return out;
}
} // namespace detail

/// @brief A compiled graph over state `S`: cheap to copy (a shared handle), safe to run from
/// many coroutines and threads at once (each call has its own state).
/// @tparam S the state type of the `state_graph<S>` it was compiled from.
/// Thread safety: every member is const; one object (or copies of it) may run any number of calls
/// at once from any threads. A call runs on the executor of the coroutine that awaits it: the
/// tasks of a step interleave on one strand of it (a node that blocks holds up the others of its
/// run). Make one call at a time per thread id: a saver's lease (SQLite, Postgres, Redis) keeps other
/// processes off a thread (`thread_busy`), not a second call of this process.
template <class S>
class compiled_graph {
public:
    using state_type = S;
    /// @brief Input of a call: new values (reduced into the thread's state), a caller's JSON or a
    /// value of the graph's input schema (`as_input`), a resume, a `command<S>` (LangGraph's
    /// `Command` as input: update, goto and resume in one), or nothing.
    using input = std::variant<continue_input, update<S>, resume_input, schema_input, command<S>>;

    compiled_graph() = default;
    explicit compiled_graph(std::shared_ptr<const detail::graph_core> core) : core_(std::move(core)) {}

    /// @brief Runs the graph until it ends or interrupts.
    /// @param in the input (`update<S>`, `as_input(...)`, `resume_input`, `command<S>`, or
    /// `continue_input{}`); moved into the call.
    /// @return the call's result: `done`, `interrupted` or `drained`, with the final state.
    /// @throws thread_error(invalid_input) when the graph has a checkpointer (a thread id is needed);
    /// otherwise as the overload with a `run_config`.
    boost::asio::awaitable<run_result<S>> invoke(input in) const { return invoke(std::move(in), run_config{}); }
    /// @brief Runs the graph until it ends or interrupts, on the thread `cfg.thread_id`.
    /// @param in the input: new values reduced into the thread's state (starting a new run of the
    /// graph from START), a resume for a pending interrupt, a command, or `continue_input{}` to go on
    /// from the latest checkpoint (after a breakpoint or a drain).
    /// @param cfg thread id (required with a checkpointer), checkpoint to replay or fork from,
    /// recursion limit (supersteps, default 25), durability, retention, runtime context and store;
    /// copied into the call.
    /// @return the result: status, final state, pending interrupts, the last checkpoint id and step,
    /// the nodes that run next, and the output schema's JSON.
    /// @throws node_error (node_failed, the node's exception nested) when a node fails for good;
    /// invalid_update_error, recursion_limit_error, graph_error (invalid_route, unmapped_route,
    /// invalid_input, node_timeout); thread_error (thread_not_found, checkpoint_not_found,
    /// nothing_to_resume, unknown_interrupt_id, resume_type_mismatch); drift_error; checkpoint_error
    /// from the saver (thread_busy, storage_failure, ...). A failed call still leaves its last good
    /// checkpoint stored.
    boost::asio::awaitable<run_result<S>> invoke(input in, const run_config& cfg) const {
        return detail::typed_run<S>(request(std::move(in), cfg, stream_mode::none, {}));
    }

    /// @brief Runs the graph with breakpoints of this call's own (LangGraph's `interrupt_before` /
    /// `interrupt_after` given to `invoke`): those set replace the compiled ones for the call; "*"
    /// names every node. An unknown node is a graph_error(unknown_node) naming it.
    /// @param in as for `invoke(in, cfg)`.
    /// @param cfg as for `invoke(in, cfg)`.
    /// @param breakpoints `before` and/or `after` node lists; each one set replaces the compiled
    /// breakpoints of its kind for this call only.
    /// @return as `invoke(in, cfg)`; errors as there.
    boost::asio::awaitable<run_result<S>> invoke(input in, const run_config& cfg, run_breakpoints breakpoints) const {
        auto req = request(std::move(in), cfg, stream_mode::none, {});
        if (breakpoints.before) req->interrupt_before.emplace(breakpoints.before->begin(), breakpoints.before->end());
        if (breakpoints.after) req->interrupt_after.emplace(breakpoints.after->begin(), breakpoints.after->end());
        return detail::typed_run<S>(std::move(req));
    }

    /// @brief Runs the graph, calling `on_event(const stream_event&)` for the chosen stream modes.
    /// `on_event` is a `stream_handler`, or any callable, stored for the call. Under g++ 12, pass
    /// a lambda that captures by value as a named object: g++ 12 destroys the captures of a lambda
    /// built inside a `co_await` expression twice (a compiler bug; it crashes), so such a
    /// temporary does not compile there, with a message saying what to write.
    /// @tparam H the handler's type: callable as `on_event(const stream_event&)`.
    /// @param in as for `invoke`.
    /// @param cfg as for `invoke`.
    /// @param modes the event kinds wanted, combined with `|` (values, updates, messages, custom,
    /// checkpoints, tasks, debug; `stream_mode::none`: no events).
    /// @param on_event called synchronously, one event at a time, on the call's executor, before the
    /// run goes on (a slow handler slows the run); copied or moved into the call. An exception it
    /// throws propagates: from an event a node writes (custom, messages) it fails that node (its
    /// retry policy applies), from the others it fails the call.
    /// @return as `invoke`; errors as there.
    template <class H>
    boost::asio::awaitable<run_result<S>> stream(input in, const run_config& cfg, stream_mode modes, H&& on_event) const {
        static_assert(std::is_invocable_v<std::remove_cvref_t<H>&, const stream_event&>,
                      "app.stream(input, cfg, modes, on_event): on_event must be callable as "
                      "on_event(const stategraph::stream_event&)");
        static_assert(!detail::gcc12_unsafe_callable<H> || std::is_same_v<std::remove_cvref_t<H>, stream_handler>,
                      "co_await app.stream(..., [captures by value](const stream_event&){...}): g++ 12 destroys the "
                      "captures of a lambda built in a co_await expression twice (a compiler bug; it crashes). Name "
                      "the handler first: `auto on_event = [..](const stategraph::stream_event& e) {...}; "
                      "co_await app.stream(input, cfg, modes, on_event);`, or capture by reference ([&])");
        return detail::typed_run<S>(request(std::move(in), cfg, modes, stream_handler(std::forward<H>(on_event))));
    }

    /// @brief The thread's state at its latest checkpoint. The writes of tasks that already
    /// finished in the unfinished step are applied.
    /// @param thread_id the thread.
    /// @return its latest checkpoint as a snapshot (migrated to the current state version if needed).
    /// @throws thread_error(no_checkpointer) for a graph without a checkpointer;
    /// thread_error(thread_not_found) for a thread with no checkpoint; checkpoint_error from the saver.
    boost::asio::awaitable<state_snapshot<S>> get_state(std::string thread_id) const {
        return get_state(std::move(thread_id), std::nullopt);
    }
    /// @brief The thread's state at checkpoint `checkpoint_id` (the latest when empty).
    /// @param thread_id the thread.
    /// @param checkpoint_id a checkpoint id from a snapshot or `run_result`; nullopt: the latest.
    /// @throws as the overload above, and thread_error(checkpoint_not_found) for an unknown id.
    boost::asio::awaitable<state_snapshot<S>> get_state(std::string thread_id,
                                                        std::optional<std::string> checkpoint_id) const {
        auto req = std::make_unique<detail::state_request>();
        req->graph = core_;
        req->thread_id = std::move(thread_id);
        req->checkpoint_id = std::move(checkpoint_id);
        return detail::typed_state<S>(std::move(req));
    }

    /// @brief The thread's state as `get_state` gives it, at `o.checkpoint_id`; with `o.subgraphs`
    /// each subgraph node's task also carries its subgraph's state (`task_snapshot::state`, JSON,
    /// nested for nested subgraphs), as LangGraph's `get_state(config, subgraphs=True)`:
    /// `co_await app.get_state("t", {.subgraphs = true})`.
    /// @param thread_id the thread.
    /// @param o which checkpoint (`checkpoint_id`, empty: the latest) and whether subgraph states are
    /// included (`subgraphs`).
    /// @throws as `get_state(thread_id, checkpoint_id)`.
    boost::asio::awaitable<state_snapshot<S>> get_state(std::string thread_id, state_options o) const {
        auto req = std::make_unique<detail::state_request>();
        req->graph = core_;
        req->thread_id = std::move(thread_id);
        if (o.checkpoint_id) req->checkpoint_id = o.checkpoint_id.str();
        req->subgraphs = o.subgraphs;
        return detail::typed_state<S>(std::move(req));
    }

    /// @brief The thread's checkpoints, newest first.
    /// @param thread_id the thread; a thread with no checkpoints gives an empty list.
    /// @throws thread_error(no_checkpointer) for a graph without a checkpointer; checkpoint_error from
    /// the saver.
    boost::asio::awaitable<std::vector<state_snapshot<S>>> get_state_history(std::string thread_id) const {
        return get_state_history(std::move(thread_id), checkpoint::list_options{});
    }
    /// @brief The thread's checkpoints, newest first, filtered and limited by `options`.
    /// @param thread_id the thread.
    /// @param options `before` (a checkpoint id: only older ones), `limit` (at most this many),
    /// `source` and `step` filters (`checkpoint::list_options`), applied by the saver.
    /// @throws as the overload above.
    boost::asio::awaitable<std::vector<state_snapshot<S>>> get_state_history(std::string thread_id,
                                                                             checkpoint::list_options options) const {
        auto req = std::make_unique<detail::state_request>();
        req->graph = core_;
        req->thread_id = std::move(thread_id);
        req->list = std::move(options);
        return detail::typed_history<S>(std::move(req));
    }

    /// @brief Writes `values` into the thread's state as if node `as_node` had returned them
    /// (default: the node that wrote last), in a new checkpoint with source "update".
    /// The next nodes are the successors of `as_node`. Returns the new checkpoint id.
    /// @throws thread_error(invalid_input) without `as_node` when several nodes wrote last;
    /// drift_error when the thread was written by another graph shape, unless `allow_drift`.
    /// @param thread_id the thread; one with no checkpoint starts from the state's defaults (its first
    /// checkpoint, as if written from START).
    /// @param values the fields to write, through their reducers.
    /// @param as_node the node the update counts as written by (its outgoing edges decide `next`);
    /// an unknown name is a graph_error(unknown_node).
    /// @param checkpoint_id the checkpoint to update (a fork from there); nullopt: the latest. An
    /// unknown id is a thread_error(checkpoint_not_found).
    /// @param allow_drift true: update a thread written by another graph shape.
    /// @return the id of the new checkpoint.
    /// @throws also thread_error(no_checkpointer) without a checkpointer, and checkpoint_error from
    /// the saver (thread_busy when another process holds the thread's lease).
    boost::asio::awaitable<std::string> update_state(std::string thread_id, update<S> values,
                                                     std::optional<std::string> as_node = std::nullopt,
                                                     std::optional<std::string> checkpoint_id = std::nullopt,
                                                     bool allow_drift = false) const {
        auto req = update_request(std::move(thread_id), std::move(as_node), std::move(checkpoint_id), allow_drift);
        req->values = detail::update_box::of<S>(std::move(values));
        return detail::update_state(std::move(req));
    }

    /// @brief `update_state` from a caller's JSON object of state fields: a nested struct's
    /// members left out keep the checkpoint's values (stategraph/json_shape.hpp); an unknown field
    /// or member is an `unknown_member_error`.
    /// @param thread_id as for the typed overload.
    /// @param values field name -> JSON value; read with the state's JSON conversions (a value that
    /// does not convert is a graph_error(invalid_input)).
    /// @param as_node as for the typed overload.
    /// @param checkpoint_id as for the typed overload.
    /// @param allow_drift as for the typed overload.
    /// @return the id of the new checkpoint; errors as the typed overload.
    boost::asio::awaitable<std::string> update_state(std::string thread_id, boost::json::object values,
                                                     std::optional<std::string> as_node = std::nullopt,
                                                     std::optional<std::string> checkpoint_id = std::nullopt,
                                                     bool allow_drift = false) const {
        auto req = update_request(std::move(thread_id), std::move(as_node), std::move(checkpoint_id), allow_drift);
        req->json = std::move(values);
        return detail::update_state(std::move(req));
    }

    /// @brief The JSON Schema of the input callers send (the input schema's, else the state's).
    const boost::json::object& input_json_schema() const {
        return core_->input ? core_->input->json_schema : core_->state_schema;
    }
    /// @brief The JSON Schema of the output callers get (the output schema's, else the state's).
    const boost::json::object& output_json_schema() const {
        return core_->output ? core_->output->json_schema : core_->state_schema;
    }

    /// @brief Removes the cached outcomes of every node of this graph (LangGraph's `clear_cache`);
    /// returns how many entries went. Entries of other graphs in the same saver stay.
    boost::asio::awaitable<std::size_t> clear_cache() const { return detail::clear_cache(core_, {}); }
    /// @brief Removes the cached outcomes of the nodes `nodes` only.
    /// @param nodes node names of this graph whose cached outcomes go.
    /// @return how many entries were removed. Runs on the awaiting coroutine's executor.
    boost::asio::awaitable<std::size_t> clear_cache(std::vector<std::string> nodes) const {
        return detail::clear_cache(core_, std::move(nodes));
    }

    /// @brief The graph's shape (for drawing and validation).
    const topology& shape() const { return core_->topo; }
    /// @brief Writes the graph as Graphviz DOT to @p os (a `std::ofstream`, `std::cout`, a
    /// `std::ostringstream`); include `<fstream>` or `<sstream>` yourself. Render it with
    /// `dot -Tsvg graph.dot -o graph.svg`.
    /// @code
    /// std::ofstream out("triage.dot");
    /// app.write_dot(out);
    /// @endcode
    /// Conditional edges are dashed and labelled with their route key, joins drawn as junction
    /// points, breakpoints red, stages and subgraphs as clusters (see `stategraph::write_dot`).
    /// Thread safety: const; any thread, concurrently with runs.
    void write_dot(std::ostream& os) const { stategraph::write_dot(os, core_->topo, dot_options{}); }
    /// @brief The same, with a thread's path, its current nodes, pending interrupts or failed
    /// nodes highlighted and a caption (`dot_options`).
    /// @param os where the DOT text goes
    /// @param o what to highlight
    void write_dot(std::ostream& os, const dot_options& o) const { stategraph::write_dot(os, core_->topo, o); }
    /// @brief Mermaid flowchart of the graph.
    /// @param os where the Mermaid text goes. Thread safety: as `write_dot`.
    void write_mermaid(std::ostream& os) const { stategraph::write_mermaid(os, core_->topo); }
    /// @brief The checkpointer the graph was compiled with (may be null).
    const std::shared_ptr<checkpoint::saver>& checkpointer() const { return core_->saver; }
    /// @brief The graph signature stamped on every checkpoint.
    const std::string& signature() const { return core_->signature; }

    /// @brief The engine's tables (for subgraph nodes and tools).
    const std::shared_ptr<const detail::graph_core>& core() const noexcept { return core_; }

private:
    std::unique_ptr<detail::update_request> update_request(std::string thread_id, std::optional<std::string> as_node,
                                                           std::optional<std::string> checkpoint_id, bool allow_drift) const {
        auto req = std::make_unique<detail::update_request>();
        req->graph = core_;
        req->thread_id = std::move(thread_id);
        req->as_node = std::move(as_node);
        req->checkpoint_id = std::move(checkpoint_id);
        req->allow_drift = allow_drift;
        return req;
    }

    std::unique_ptr<detail::run_request> request(input in, const run_config& cfg, stream_mode modes,
                                                 stream_handler on_event) const {
        auto req = std::make_unique<detail::run_request>();
        req->graph = core_;
        req->cfg = cfg;
        req->modes = modes;
        req->on_event = std::move(on_event);
        if (auto* u = std::get_if<update<S>>(&in)) {
            req->input.what = detail::run_input::kind::values;
            req->input.values = detail::update_box::of<S>(std::move(*u));
        } else if (auto* r = std::get_if<resume_input>(&in)) {
            req->input.what = detail::run_input::kind::resume;
            req->input.resume = std::move(*r);
        } else if (auto* j = std::get_if<schema_input>(&in)) {
            req->input.what = detail::run_input::kind::values;
            req->input.json = std::move(j->values);
            req->input.json_type = j->type;
        } else if (auto* c = std::get_if<command<S>>(&in)) {
            req->input.what = detail::run_input::kind::command;
            if (!c->writes.empty()) req->input.values = detail::update_box::of<S>(std::move(c->writes));
            req->input.go_to = std::move(c->targets);
            req->input.sends = std::move(c->sends);
            if (c->resume) {
                req->input.has_resume = true;
                req->input.resume = std::move(*c->resume);
            }
        }
        return req;
    }

    std::shared_ptr<const detail::graph_core> core_;
};

} // namespace stategraph
