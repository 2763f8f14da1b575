#pragma once
// LangGraph conformance: the one comparator of the golden files (NN_name.json, recorded on real
// LangGraph JS; see conformance/README.md beside them). It loads a golden case, records one of our
// calls in the same JSON layout, and compares the two with a readable diff. Used by the graph
// conformance tests (tests/graph/conformance/, which make the calls by hand) and the durable
// conformance tests (tests/checkpoint/durable/, which replay the golden `call`s with `replay<S>`).
//
// The golden folder is chosen at run time (`golden_dir()`): `set_golden_dir()`, else the test
// program's argument `--golden-dir=<folder>` (after `--`), else $STATEGRAPH_GOLDEN_DIR, else the
// folder the build found (STATEGRAPH_CONFORMANCE_DIR "/golden").
//
// Typical use (one BOOST_AUTO_TEST_CASE per golden case, named after it):
//
//   conformance::golden_case gc("01_last_value_chain");
//   conformance::id_mapper ids;             // golden placeholders <-> our ids, one per case
//   auto ours = conformance::record_invoke(app, input, cfg, {.counters = &counters});
//   conformance::check_run(gc, 0, ours, ids);            // compare with runs[0]
//
//   conformance::replay<S> r("11_interrupt_resume", app, side_counters);
//   r.run_all();                            // every golden call, in order, each compared
//
// What a recorded run holds (same keys as the golden `runs[i]`): `updates` (grouped by step),
// `values`, `result` (final values, `__interrupt__` when interrupted, or an error object),
// `state` (getState summary, or an error object), `state_without_pending_writes` (when getState
// threw), `pending_writes` (on request), `history_len`, `side_counters` (on request).
//
// Comparison rules (see `compare_options`):
// * only the keys present in the golden run are compared (label, graph and call are ignored);
//   a golden key that we did not record is reported, unless skipped;
// * ids: LangGraph's random ids are placeholders in the golden files (`<checkpoint:N>`,
//   `<interrupt:N>`, `<task:N>`, alone or inside a string such as "sub:<task:1>"); each matches
//   one id of ours, the same one everywhere in the case (a bijection kept in `id_mapper`);
// * `updates`: the same sequence of steps; inside a step the events compare as a multiset
//   (LangGraph's completion order is not normative) unless `ordered_events`;
// * `pending_writes` compare as a multiset, keeping only state fields and `__interrupt__`
//   (LangGraph's `branch:to:*` / `__resume__` and our `__goto__` / `__send__` are bookkeeping);
// * object members whose value is null are dropped on both sides (LangGraph leaves a never
//   written channel out of `values`; a C++ state uses std::optional, which serialises as null);
//   with `defaults`, a state field missing from the golden values must hold its default value;
// * error objects: LangGraph's error class names map to our `errc` names (InvalidUpdateError ->
//   invalid_concurrent_update, GraphRecursionError -> recursion_limit, anything else thrown by a
//   node -> node_failed). Only node_failed keeps its message (the node's own exception's
//   message); LangGraph's texts and our texts are not compared.

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/compiled_graph.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <exception>
#include <functional>
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

/// The folder of the golden files, chosen at run time (see the top of this file).
std::string golden_dir();
/// Makes `golden_dir()` return `dir` from now on ("" = back to the default order).
void set_golden_dir(std::string dir);

/// A golden file, `<dir>/<name>.json` (`dir` = `golden_dir()` unless given).
class golden_case {
public:
    explicit golden_case(std::string name, std::string dir = {});
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

/// The path of the golden file of case `name` in `golden_dir()`.
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

/// Our ids and the golden placeholders (`<checkpoint:N>`, `<interrupt:N>`, `<task:N>`) of one case.
/// Comparing binds each placeholder to the id of ours found in its place, one to one for the
/// whole case (keep one mapper per case). `normalize` instead numbers our ids per kind in order
/// of first appearance: `ns` segments "node:<task id>" -> "node:<task:N>", ids inside
/// `__interrupt__` lists -> "<interrupt:N>", `checkpoint_id` members -> "<checkpoint:N>".
class id_mapper {
public:
    std::string placeholder(const std::string& kind, const std::string& id);
    void normalize(json::value& v);
    void normalize(json::object& o);

    /// Binds `placeholder` to `ours`; false when either is bound to another already.
    bool bind(const std::string& placeholder, const std::string& ours);
    /// Our id bound to `placeholder` (for golden inputs that name an earlier id), or nullopt.
    std::optional<std::string> ours_of(const std::string& placeholder) const;
    /// `ours` matches `golden`: same structure, numbers by value, and every placeholder inside a
    /// golden string matches (binding it when new). Binds nothing unless the whole value matches.
    bool match(const json::value& golden, const json::value& ours);

private:
    void walk(json::value& v, std::string_view key);
    bool match_in(const json::value& golden, const json::value& ours, std::map<std::string, std::string>& to_ours,
                  std::map<std::string, std::string>& to_golden) const;
    std::map<std::string, std::map<std::string, std::string>> maps_;
    std::map<std::string, std::string> to_ours_, to_golden_;
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
    /// The state's default values (`values_json(S{})`): a field of ours that the golden values
    /// (`result`, `state.values`, `values[i].value`) leave out must hold its default.
    json::object defaults;
};

/// Normalises a golden run for comparison (drops label/graph/call, maps error objects,
/// filters pending writes, drops nulls).
json::object normalize_golden(json::object run, const compare_options& o = {});
/// The differences between our run and a golden run (placeholders bound in `ids`); empty when
/// they agree.
std::vector<std::string> diff_run(const json::object& ours, const json::object& golden, id_mapper& ids,
                                  const compare_options& o = {});
/// The same with a mapper of its own.
std::vector<std::string> diff_run(const json::object& ours, const json::object& golden, const compare_options& o = {});
/// BOOST_CHECK that `ours` matches `golden`; the failure message lists every difference and
/// prints both runs.
void check_run(const json::object& ours, const json::object& golden, std::string_view what, id_mapper& ids,
               const compare_options& o = {});
void check_run(const json::object& ours, const json::object& golden, std::string_view what,
               const compare_options& o = {});
/// The same against `gc.run(i)` (or a patched copy, `golden`), named after the case and run.
void check_run(const golden_case& gc, std::size_t i, const json::object& ours, id_mapper& ids,
               const compare_options& o = {});
void check_run(const golden_case& gc, std::size_t i, const json::object& ours, id_mapper& ids,
               const json::object& golden, const compare_options& o = {});

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

/// Every checkpoint of the thread, newest first, as the project cases' `getStateHistory` result:
/// [{checkpoint_id, parent_checkpoint_id (null for the first), step, source, values, next}].
template <class S>
json::array history_json(const compiled_graph<S>& g, const std::string& thread) {
    json::array out;
    for (const auto& s : test::run(g.get_state_history(thread))) {
        json::object o;
        o["checkpoint_id"] = s.checkpoint_id;
        o["parent_checkpoint_id"] = s.parent_checkpoint_id.empty() ? json::value(nullptr) : json::value(s.parent_checkpoint_id);
        o["step"] = s.step;
        o["source"] = s.source;
        o["values"] = values_json(s.values);
        json::array next;
        for (const auto& n : s.next) next.push_back(json::string(n));
        o["next"] = std::move(next);
        out.push_back(std::move(o));
    }
    return out;
}

/// Runs `g.get_state_history(thread)` and records it as a golden run ({"result": [...]}).
template <class S>
json::object record_history(const compiled_graph<S>& g, const std::string& thread, const invoke_options& o = {}) {
    json::object out;
    out["result"] = history_json(g, thread);
    record_thread(g, thread, out, o);
    return out;
}

/// Replays a golden case from its recorded `call`s (invoke with new input, `null`, or
/// `{"Command": {"resume": ...}}`; updateState with values and asNode), records what our runtime
/// does after each call and compares it with the golden run. State fields missing from the
/// golden values must hold their default values (`compare_options::defaults`); a task's own
/// subgraph snapshot (`state.tasks[i].state`) is left to the test.
template <class S>
class replay {
public:
    /// `side_counters()` returns the counters the node bodies bumped (as `side_counters`).
    replay(std::string name, compiled_graph<S> graph, std::function<json::object()> side_counters = {})
        : file(std::move(name)), app(std::move(graph)), counters_(std::move(side_counters)) {
        options.defaults = values_json(S{});
    }

    golden_case file;
    compiled_graph<S> app;
    id_mapper ids;
    compare_options options;
    /// Adjusts the expected run i (a deliberate difference) before it is compared.
    std::function<void(std::size_t, json::object&)> patch;

    /// Makes every call of the case in order, comparing after each.
    void run_all() {
        for (std::size_t i = 0; i < file.size(); ++i) run_one(i);
    }

    /// Makes call i and compares it with run i (patched).
    void run_one(std::size_t i) {
        json::object expected = file.run(i);
        if (patch) patch(i, expected);
        if (auto* state = expected.if_contains("state"); state && state->is_object())
            if (auto* tasks = state->as_object().if_contains("tasks"); tasks && tasks->is_array())
                for (auto& t : tasks->as_array())
                    if (t.is_object()) t.as_object().erase("state");
        BOOST_TEST_CONTEXT(file.label(i)) { check_run(file, i, call(file.run(i)), ids, expected, options); }
    }

private:
    using ops = detail::state_ops<S>;

    /// Makes the call of a golden run and records it.
    json::object call(const json::object& run) {
        const auto& request = run.at("call").as_object();
        const std::string method(request.at("method").as_string());
        const auto& config = request.at("config").as_object();
        const std::string thread(config.at("thread_id").as_string());
        invoke_options o;
        o.subgraphs = request.contains("subgraphs") && request.at("subgraphs").as_bool();
        o.pending_writes = run.contains("pending_writes");
        json::object out;
        if (method == "invoke") {
            run_config cfg;
            cfg.thread_id = thread;
            if (const auto* id = config.if_contains("checkpoint_id")) cfg.checkpoint_id = ours(*id);
            if (const auto* limit = config.if_contains("recursionLimit")) cfg.recursion_limit = limit->to_number<int>();
            out = record_invoke(app, input(request.at("input")), std::move(cfg), o);
        } else if (method == "updateState") {
            std::optional<std::string> as_node;
            if (const auto* n = request.if_contains("asNode"); n && !n->is_null()) as_node = std::string(n->as_string());
            out = record_update_state(app, thread, values(request.at("values")), std::move(as_node), o);
        } else {
            BOOST_FAIL(file.name() << ": method " << method << " is not replayed");
        }
        if (counters_) out["side_counters"] = counters_();
        return out;
    }

    /// Our id for a placeholder an earlier run bound.
    std::string ours(const json::value& placeholder) const {
        const std::string p(placeholder.as_string());
        auto id = ids.ours_of(p);
        BOOST_REQUIRE_MESSAGE(id.has_value(), file.name() << ": the call names " << p << ", which no earlier run produced");
        return *id;
    }

    update<S> values(const json::value& v) const {
        return ops::update_from_json(v.as_object(), errc::invalid_input, "golden input");
    }

    typename compiled_graph<S>::input input(const json::value& v) const {
        if (v.is_null()) return continue_run;
        if (const auto* c = v.as_object().if_contains("Command")) {
            const auto& resume_value = c->as_object().at("resume");
            if (!resume_value.is_object()) return resume(resume_value);
            std::map<std::string, json::value> by_id;
            for (const auto& [k, val] : resume_value.as_object()) by_id[ours(json::string(k))] = val;
            return resume_map(std::move(by_id));
        }
        return values(v);
    }

    std::function<json::object()> counters_;
};

} // namespace stategraph::conformance
