#pragma once
// LangGraph conformance: load a golden file (/work/shared/conformance/golden/NN_name.json,
// recorded on real LangGraph JS), record one of our calls in the same JSON layout, and
// compare the two with a readable diff.
//
// Typical use (one BOOST_AUTO_TEST_CASE per golden case):
//
//   conformance::golden_case gc("01_last_value_chain");
//   conformance::id_mapper ids;             // our ids -> "<checkpoint:N>", "<task:N>", "<interrupt:N>"
//   auto ours = conformance::record_invoke(app, input, cfg, {.counters = &counters});
//   conformance::check_run(gc, 0, ours, ids);            // compare with runs[0]
//
// What a recorded run holds (same keys as the golden `runs[i]`): `updates` (grouped by step),
// `values`, `result` (final values, `__interrupt__` when interrupted, or an error object),
// `state` (getState summary, or an error object), `state_without_pending_writes` (when getState
// threw), `pending_writes` (on request), `history_len`, `side_counters` (on request).
//
// Comparison rules (see `compare_options`):
// * only the keys present in the golden run are compared (label, graph and call are ignored);
//   a golden key that we did not record is reported, unless skipped;
// * `updates`: the same sequence of steps; inside a step the events compare as a multiset
//   (LangGraph's completion order is not normative) unless `ordered_events`;
// * `pending_writes` compare as a multiset, keeping only state fields and `__interrupt__`
//   (LangGraph's `branch:to:*` / `__resume__` and our `__goto__` / `__send__` are bookkeeping);
// * object members whose value is null are dropped on both sides (LangGraph leaves a never
//   written channel out of `values`; a C++ state uses std::optional, which serialises as null);
// * error objects: LangGraph's error class names map to our `errc` names (InvalidUpdateError ->
//   invalid_concurrent_update, GraphRecursionError -> recursion_limit, anything else thrown by a
//   node -> node_failed). Only node_failed keeps its message (the node's own exception's
//   message); LangGraph's texts and our texts are not compared.

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/compiled_graph.hpp>

#include <boost/json.hpp>

#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run_awaitable.hpp"

namespace stategraph::conformance {

namespace json = boost::json;

/// Side counters bumped by node bodies (how often a body started), as the golden files'.
using counter_map = std::map<std::string, int>;
json::object counters_json(const counter_map& c);

/// A golden file, read at run time from STATEGRAPH_CONFORMANCE_DIR "/golden/<name>.json".
class golden_case {
public:
    explicit golden_case(std::string name);
    const std::string& name() const { return name_; }
    const json::object& doc() const { return doc_; }
    std::size_t size() const { return doc_.at("runs").as_array().size(); }
    /// A copy of `runs[i]` (patch it freely for a documented DIFFERENCE).
    json::object run(std::size_t i) const;
    /// A short label of run i, for messages: "run 2 (graph 'conflict': continue ...)".
    std::string label(std::size_t i) const;

private:
    std::string name_;
    json::object doc_;
};

/// The path of the golden file of case `name`.
std::string golden_path(std::string_view name);

/// Parses a JSON literal (handy for patches: `parse(R"(["p1","s1"])")`).
json::value parse(std::string_view text);

/// Sets the member at a dotted path ("state.values.trail"; numbers index arrays), creating
/// objects on the way. Used to patch a golden run where our behaviour deliberately differs.
void set_path(json::object& o, std::string_view dotted, json::value v);
/// The member at a dotted path, or nullptr.
const json::value* find_path(const json::object& o, std::string_view dotted);

/// Our error as the comparator sees it: {"error": "<errc name>"} and, for node_failed,
/// "message": the node's own exception's message. Other exceptions: {"error": "exception", "message": what()}.
json::object error_json(std::exception_ptr e);
/// Our `errc` name for a LangGraph error class name ("" = a node's own error: node_failed).
std::string langgraph_error_kind(std::string_view langgraph_class);

/// Records streamed events in the golden layout. Update events are labelled with the step
/// the engine gives them (`stream_event::step`); events from inside a subgraph (non-empty
/// `ns`) are labelled with the parent's current step, as the golden files do.
class recorder {
public:
    /// `start_step`: the thread's step before the call (-2 for a new thread). `subgraphs`:
    /// keep subgraph events, as {"ns": [...], "update": {...}} (else they are dropped).
    explicit recorder(std::int64_t start_step = -2, bool subgraphs = false);
    void on_event(const stream_event& e);
    stream_handler handler() {
        return [this](const stream_event& e) { on_event(e); };
    }
    const json::array& updates() const { return updates_; }
    const json::array& values() const { return values_; }

private:
    std::int64_t root_step_;
    bool subgraphs_;
    json::array updates_;
    json::array values_;
};

/// Replaces our ids by the golden placeholders, numbered per kind in order of first
/// appearance: `ns` segments "node:<task id>" -> "node:<task:N>", ids inside `__interrupt__`
/// lists -> "<interrupt:N>", `checkpoint_id` members -> "<checkpoint:N>". Keep one mapper per
/// case and normalise runs in call order (as the golden file is numbered in document order).
class id_mapper {
public:
    std::string placeholder(const std::string& kind, const std::string& id);
    void normalize(json::value& v);
    void normalize(json::object& o);

private:
    void walk(json::value& v, std::string_view key);
    std::map<std::string, std::map<std::string, std::string>> maps_;
};

struct compare_options {
    /// Dotted paths not compared ("history_len", "state.tasks", "side_counters.spin").
    std::vector<std::string> skip;
    /// Compare the events inside a step in order (default: as a multiset).
    bool ordered_events = false;
    /// Drop null object members on both sides.
    bool null_is_missing = true;
    /// Extra LangGraph error class name -> errc name mappings.
    std::map<std::string, std::string> error_kinds;
};

/// Normalises a golden run for comparison (drops label/graph/call, maps error objects,
/// filters pending writes, drops nulls).
json::object normalize_golden(json::object run, const compare_options& o = {});
/// The differences between our run and a golden run; empty when they agree.
std::vector<std::string> diff_run(const json::object& ours, const json::object& golden, const compare_options& o = {});
/// BOOST_CHECK that `ours` (normalised with `ids`) matches `golden`; the failure message lists
/// every difference and prints both runs.
void check_run(const json::object& ours, const json::object& golden, std::string_view what,
               const compare_options& o = {});
/// The same against `gc.run(i)`; `ours` is normalised with `ids` first.
void check_run(const golden_case& gc, std::size_t i, json::object ours, id_mapper& ids, const compare_options& o = {});
void check_run(const golden_case& gc, std::size_t i, json::object ours, id_mapper& ids, const json::object& golden,
               const compare_options& o = {});

/// JSON with object keys sorted (canonical text, for multiset comparisons and messages).
std::string canonical(const json::value& v);

// -- recording our calls ----------------------------------------------------------------------

template <class S>
json::object values_json(const S& s) {
    return detail::state_ops<S>::state_json(s);
}

/// getState summary as the golden `state`: values, next, tasks (name, interrupts = values,
/// error, result), step, source.
template <class S>
json::object snapshot_json(const state_snapshot<S>& s) {
    json::object o;
    o["values"] = values_json(s.values);
    json::array next;
    for (const auto& n : s.next) next.push_back(json::string(n));
    o["next"] = std::move(next);
    json::array tasks;
    for (const auto& t : s.tasks) {
        json::object to;
        to["name"] = t.name;
        json::array irs;
        for (const auto& i : t.interrupts) irs.push_back(i.value);
        to["interrupts"] = std::move(irs);
        if (t.error) to["error"] = json::object{{"error", "node_failed"}, {"message", *t.error}};
        if (t.result) to["result"] = *t.result;
        tasks.push_back(std::move(to));
    }
    o["tasks"] = std::move(tasks);
    o["step"] = s.step;
    o["source"] = s.source;
    return o;
}

struct invoke_options {
    bool subgraphs = false;          ///< record subgraph update events (with their ns)
    bool pending_writes = false;     ///< record the head checkpoint's pending writes
    const counter_map* counters = nullptr; ///< record `side_counters`
};

/// The step of the thread's latest checkpoint, or -2 when it has none.
template <class S>
std::int64_t head_step(const compiled_graph<S>& g, const std::string& thread) {
    try {
        checkpoint::list_options lo;
        lo.limit = 1;
        auto h = test::run(g.get_state_history(thread, lo));
        return h.empty() ? -2 : h.front().step;
    } catch (...) {
        return -2;
    }
}

/// The pending writes of the thread's head checkpoint: [task name, channel, value] for
/// state fields and `__interrupt__` (as [{id, value}]).
template <class S>
json::array pending_writes_json(const compiled_graph<S>& g, const std::string& thread) {
    json::array out;
    auto t = test::run(g.checkpointer()->get(thread, "", std::nullopt));
    if (!t) return out;
    for (const auto& w : t->writes) {
        if (w.channel == "__interrupt__") {
            json::array list;
            for (const auto& i : w.value.as_array()) list.push_back(json::object{{"id", i.at("id")}, {"value", i.at("value")}});
            out.push_back(json::array{json::string(w.task_name), json::string(w.channel), std::move(list)});
        } else if (detail::state_ops<S>::index_of(w.channel) >= 0) {
            out.push_back(json::array{json::string(w.task_name), json::string(w.channel), w.value});
        }
    }
    return out;
}

/// Adds what the golden records after each call: state (or the error getState threw, plus
/// state_without_pending_writes), pending_writes, history_len, side_counters.
template <class S>
void record_thread(const compiled_graph<S>& g, const std::string& thread, json::object& out, const invoke_options& o) {
    try {
        out["state"] = snapshot_json(test::run(g.get_state(thread)));
    } catch (...) {
        out["state"] = error_json(std::current_exception());
        checkpoint::list_options lo;
        lo.limit = 1;
        auto h = test::run(g.get_state_history(thread, lo));
        if (!h.empty())
            out["state_without_pending_writes"] =
                snapshot_json(test::run(g.get_state(thread, std::optional<std::string>(h.front().checkpoint_id))));
    }
    if (o.pending_writes) out["pending_writes"] = pending_writes_json(g, thread);
    out["history_len"] = test::run(g.get_state_history(thread)).size();
    if (o.counters) out["side_counters"] = counters_json(*o.counters);
}

/// Runs `g.invoke(in, cfg)` streaming updates and values, and records it as a golden run.
template <class S>
json::object record_invoke(const compiled_graph<S>& g, typename compiled_graph<S>::input in, run_config cfg,
                           const invoke_options& o = {}) {
    const std::string thread = cfg.thread_id.str();
    recorder rec(head_step(g, thread), o.subgraphs);
    json::value result;
    try {
        auto r = test::run(g.stream(std::move(in), cfg, stream_mode::updates | stream_mode::values, rec.handler()));
        json::object v = values_json(r.values);
        if (r.interrupted()) {
            json::array list;
            for (const auto& i : r.interrupts) list.push_back(json::object{{"id", i.id}, {"value", i.value}});
            v["__interrupt__"] = std::move(list);
        }
        result = std::move(v);
    } catch (...) {
        result = error_json(std::current_exception());
    }
    json::object out;
    out["updates"] = rec.updates();
    out["values"] = rec.values();
    out["result"] = std::move(result);
    record_thread(g, thread, out, o);
    return out;
}

/// Runs `g.update_state(...)` and records it as a golden run ({"result": {"config": ...}}).
template <class S>
json::object record_update_state(const compiled_graph<S>& g, const std::string& thread, update<S> values,
                                 std::optional<std::string> as_node = std::nullopt, const invoke_options& o = {}) {
    json::object out;
    try {
        auto id = test::run(g.update_state(thread, std::move(values), std::move(as_node)));
        out["result"] = json::object{{"config", json::object{{"thread_id", thread}, {"checkpoint_id", id}}}};
    } catch (...) {
        out["result"] = error_json(std::current_exception());
    }
    record_thread(g, thread, out, o);
    return out;
}

} // namespace stategraph::conformance
