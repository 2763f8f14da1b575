#pragma once
// Replays a conformance case (/work/shared/conformance/golden/NN_name.json, recorded with
// LangGraph) against a compiled graph and compares every recorded field of every run:
// streamed updates (per step, as a multiset), the invoke result, get_state, pending writes,
// history length and the side counters. Random ids of the golden file (<interrupt:N>,
// <checkpoint:N>, <task:N>) are matched to our own ids through a bijection built as the
// comparison goes.

#include "durable_common.hpp"

#include <fstream>
#include <regex>
#include <sstream>

namespace durable {

inline json::value read_golden(const std::string& name) {
    std::string path = std::string(STATEGRAPH_CONFORMANCE_DIR) + "/golden/" + name + ".json";
    std::ifstream in(path);
    BOOST_REQUIRE_MESSAGE(in.good(), "cannot open " << path);
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
}

/// Placeholder (as written in the golden file) <-> our id.
struct id_map {
    std::map<std::string, std::string> to_ours, to_golden;
};

/// Structural comparison; strings of the golden side may hold one placeholder.
inline bool match(const json::value& g, const json::value& o, id_map& ids) {
    static const std::regex ph("<(checkpoint|interrupt|task):[0-9]+>");
    if (g.is_string()) {
        if (!o.is_string()) return false;
        std::string gs(g.get_string()), os(o.get_string());
        std::smatch m;
        if (!std::regex_search(gs, m, ph)) return gs == os;
        std::string prefix = m.prefix(), suffix = m.suffix(), key = m.str(0);
        if (os.size() <= prefix.size() + suffix.size() || os.compare(0, prefix.size(), prefix) != 0 ||
            os.compare(os.size() - suffix.size(), suffix.size(), suffix) != 0)
            return false;
        std::string mine = os.substr(prefix.size(), os.size() - prefix.size() - suffix.size());
        auto a = ids.to_ours.find(key);
        auto b = ids.to_golden.find(mine);
        if (a == ids.to_ours.end() && b == ids.to_golden.end()) {
            ids.to_ours[key] = mine;
            ids.to_golden[mine] = key;
            return true;
        }
        return a != ids.to_ours.end() && a->second == mine && b != ids.to_golden.end() && b->second == key;
    }
    if (g.is_object()) {
        if (!o.is_object() || g.get_object().size() != o.get_object().size()) return false;
        for (const auto& [k, v] : g.get_object()) {
            const auto* ov = o.get_object().if_contains(k);
            if (!ov || !match(v, *ov, ids)) return false;
        }
        return true;
    }
    if (g.is_array()) {
        if (!o.is_array() || g.get_array().size() != o.get_array().size()) return false;
        for (std::size_t i = 0; i < g.get_array().size(); ++i)
            if (!match(g.get_array()[i], o.get_array()[i], ids)) return false;
        return true;
    }
    if (g.is_number() && o.is_number()) return g.to_number<double>() == o.to_number<double>();
    return g == o;
}

/// Matches `o` against `g` and commits the ids only on success.
inline bool try_match(const json::value& g, const json::value& o, id_map& ids) {
    id_map trial = ids;
    if (!match(g, o, trial)) return false;
    ids = std::move(trial);
    return true;
}

/// State values: LangGraph leaves out keys never written; ours holds every field, so a key
/// missing on the golden side must hold the field's default value.
inline bool match_values(const json::value& g, const json::value& o, const json::object& defaults, id_map& ids) {
    if (!g.is_object() || !o.is_object()) return false;
    json::object gg = g.get_object();
    for (const auto& [k, v] : o.get_object())
        if (!gg.contains(k)) {
            const auto* d = defaults.if_contains(k);
            if (!d) return false;
            gg[k] = *d;
        }
    return try_match(gg, o, ids);
}

/// Events of one step compared as a multiset (order inside a step is completion order).
inline bool match_steps(const json::array& g, const json::array& o, id_map& ids) {
    if (g.size() != o.size()) return false;
    id_map trial = ids;
    for (std::size_t i = 0; i < g.size(); ++i) {
        const auto& gs = g[i].as_object();
        const auto& os = o[i].as_object();
        if (gs.at("step") != os.at("step")) return false;
        const auto& ge = gs.at("events").as_array();
        auto oe = os.at("events").as_array();
        if (ge.size() != oe.size()) return false;
        std::vector<bool> used(oe.size(), false);
        for (const auto& e : ge) {
            bool found = false;
            for (std::size_t j = 0; j < oe.size() && !found; ++j)
                if (!used[j] && try_match(e, oe[j], trial)) used[j] = found = true;
            if (!found) return false;
        }
    }
    ids = std::move(trial);
    return true;
}

/// Drives one case: builds the calls from the golden `call` objects, records what our
/// runtime does and compares it run by run.
template <class S>
struct golden_case {
    using ops = sg::detail::state_ops<S>;

    std::string name;
    sg::compiled_graph<S> app;
    counters* side = nullptr;
    json::value golden;
    id_map ids;
    /// Adjusts the expected run (deliberate differences), called before comparing run i.
    std::function<void(std::size_t, json::object&)> patch;

    golden_case(std::string n, sg::compiled_graph<S> g, counters& c) : name(std::move(n)), app(std::move(g)), side(&c) {
        golden = read_golden(name);
        BOOST_REQUIRE_EQUAL(std::string(golden.at("case").as_string()), name);
    }

    json::object defaults() const { return ops::state_json(S{}); }

    sg::update<S> to_update(const json::value& v) const {
        return ops::update_from_json(v.as_object(), sg::errc::invalid_input, "golden input");
    }

    typename sg::compiled_graph<S>::input to_input(const json::value& v) const {
        if (v.is_null()) return sg::continue_run;
        if (const auto* c = v.as_object().if_contains("Command")) {
            const auto& resume = c->as_object().at("resume");
            if (resume.is_object()) {
                std::map<std::string, json::value> by_id;
                for (const auto& [k, val] : resume.as_object()) {
                    auto it = ids.to_ours.find(std::string(k));
                    BOOST_REQUIRE_MESSAGE(it != ids.to_ours.end(), name << ": resume map names " << k
                                                                        << ", which no earlier run produced");
                    by_id[it->second] = val;
                }
                return sg::resume_map(std::move(by_id));
            }
            return sg::resume(resume);
        }
        return to_update(v);
    }

    static json::value interrupts_json(const std::vector<sg::interrupt_info>& list) {
        json::array a;
        for (const auto& i : list) a.push_back(json::object{{"id", i.id}, {"value", i.value}});
        return a;
    }

    json::value state_json(const sg::state_snapshot<S>& s) const {
        json::object o;
        o["values"] = ops::state_json(s.values);
        json::array next;
        for (const auto& n : s.next) next.push_back(json::string(n));
        o["next"] = std::move(next);
        json::array tasks;
        for (const auto& t : s.tasks) {
            json::object to;
            to["name"] = t.name;
            json::array ints;
            for (const auto& i : t.interrupts) ints.push_back(i.value);
            to["interrupts"] = std::move(ints);
            if (t.result) to["result"] = *t.result;
            if (t.error) to["error"] = *t.error;
            tasks.push_back(std::move(to));
        }
        o["tasks"] = std::move(tasks);
        o["step"] = s.step;
        o["source"] = s.source;
        return o;
    }

    /// Our pending writes of the thread head, as [task name, channel, value] for the channels
    /// both runtimes share (state fields and __interrupt__).
    json::array pending_json(const std::string& thread) const {
        json::array out;
        auto head = run(app.checkpointer()->get(thread, "", std::nullopt));
        if (!head) return out;
        for (const auto& w : head->writes) {
            if (w.channel == "__interrupt__") {
                json::array list;
                for (const auto& i : w.value.as_array())
                    list.push_back(json::object{{"id", i.at("id")}, {"value", i.at("value")}});
                out.push_back(json::array{json::string(w.task_name), json::string(w.channel), list});
            } else if (ops::index_of(w.channel) >= 0) {
                out.push_back(json::array{json::string(w.task_name), json::string(w.channel), w.value});
            }
        }
        return out;
    }

    static json::array pending_filter(const json::array& g) {
        json::array out;
        for (const auto& e : g) {
            const auto& a = e.as_array();
            std::string ch(a[1].as_string());
            if (ch == "__interrupt__" || ops::index_of(ch) >= 0) out.push_back(e);
        }
        return out;
    }

    static bool match_multiset(const json::array& g, const json::array& o, id_map& ids) {
        if (g.size() != o.size()) return false;
        id_map trial = ids;
        std::vector<bool> used(o.size(), false);
        for (const auto& e : g) {
            bool found = false;
            for (std::size_t j = 0; j < o.size() && !found; ++j)
                if (!used[j] && try_match(e, o[j], trial)) used[j] = found = true;
            if (!found) return false;
        }
        ids = std::move(trial);
        return true;
    }

    void check(const std::string& where, bool ok, const json::value& g, const json::value& o) {
        BOOST_TEST(ok, name << " / " << where << "\n  golden: " << json::serialize(g) << "\n  ours:   "
                            << json::serialize(o));
    }

    /// Runs every call of the case in order and compares.
    void run_all() {
        const auto& runs = golden.at("runs").as_array();
        for (std::size_t i = 0; i < runs.size(); ++i) {
            json::object expected = runs[i].as_object();
            if (patch) patch(i, expected);
            run_one(expected);
        }
    }

    void run_one(const json::object& g) {
        const std::string label = g.contains("label") ? std::string(g.at("label").as_string()) : "";
        BOOST_TEST_CONTEXT(name << ": run '" << label << "'") {
            const auto& call = g.at("call").as_object();
            const std::string method(call.at("method").as_string());
            const std::string thread_id(call.at("config").as_object().at("thread_id").as_string());
            const bool subgraphs = call.contains("subgraphs") && call.at("subgraphs").as_bool();
            json::value ours_result;

            // Updates: grouped by step; events from inside a subgraph are labelled with the
            // parent's step (the step of the parent task that runs the subgraph).
            json::array steps;
            std::int64_t parent_step = 0;
            auto on_event = [&](const sg::stream_event& e) {
                if (e.mode == sg::stream_mode::debug) {
                    if (e.ns.empty()) parent_step = e.step;
                    return;
                }
                if (e.mode != sg::stream_mode::updates) return;
                if (!e.ns.empty() && !subgraphs) return;
                std::int64_t step = e.ns.empty() ? e.step : parent_step;
                json::object upd;
                upd[e.node] = e.data;
                json::object ev;
                if (subgraphs) {
                    json::array ns;
                    for (const auto& s : e.ns) ns.push_back(json::string(s));
                    ev["ns"] = std::move(ns);
                    ev["update"] = std::move(upd);
                } else {
                    ev = std::move(upd);
                }
                if (e.cached) ev["__metadata__"] = json::object{{"cached", true}};
                if (steps.empty() || steps.back().as_object().at("step").as_int64() != step)
                    steps.push_back(json::object{{"step", step}, {"events", json::array{}}});
                steps.back().as_object()["events"].as_array().push_back(std::move(ev));
            };

            if (method == "invoke") {
                sg::run_config cfg;
                cfg.thread_id = thread_id;
                auto in = to_input(call.at("input"));
                auto r = run(app.stream(std::move(in), cfg, sg::stream_mode::updates | sg::stream_mode::debug, on_event));
                json::object res = ops::state_json(r.values);
                if (r.interrupted()) res["__interrupt__"] = interrupts_json(r.interrupts);
                ours_result = std::move(res);
                if (g.contains("result")) {
                    const auto& gr = g.at("result").as_object();
                    json::object gv = gr, ov = ours_result.as_object();
                    bool ok = true;
                    if (gv.contains("__interrupt__") || ov.contains("__interrupt__")) {
                        ok = gv.contains("__interrupt__") && ov.contains("__interrupt__") &&
                             try_match(gv["__interrupt__"], ov["__interrupt__"], ids);
                        gv.erase("__interrupt__");
                        ov.erase("__interrupt__");
                    }
                    ok = ok && match_values(gv, ov, defaults(), ids);
                    check("result", ok, gr, ours_result);
                }
                if (g.contains("updates")) {
                    bool ok = match_steps(g.at("updates").as_array(), steps, ids);
                    check("updates", ok, g.at("updates"), steps);
                }
            } else if (method == "updateState") {
                std::optional<std::string> as_node;
                if (g.at("call").as_object().contains("asNode") && !call.at("asNode").is_null())
                    as_node = std::string(call.at("asNode").as_string());
                auto id = run(app.update_state(thread_id, to_update(call.at("values")), as_node));
                ours_result = json::object{{"config", json::object{{"thread_id", thread_id}, {"checkpoint_id", id}}}};
                if (g.contains("result")) check("result", try_match(g.at("result"), ours_result, ids), g.at("result"), ours_result);
            } else {
                BOOST_FAIL(name << ": method " << method << " is not supported by this driver");
            }

            if (g.contains("state")) {
                auto s = run(app.get_state(thread_id));
                json::value os = state_json(s);
                json::object gs = g.at("state").as_object();
                // Subgraph snapshots of tasks (getState(subgraphs: true)) are compared by the
                // case itself, not here.
                for (auto& t : gs["tasks"].as_array()) t.as_object().erase("state");
                bool ok = match_values(gs.at("values"), os.as_object().at("values"), defaults(), ids);
                json::object g2 = gs, o2 = os.as_object();
                g2.erase("values");
                o2.erase("values");
                ok = try_match(g2, o2, ids) && ok;
                check("state", ok, gs, os);
            }
            if (g.contains("pending_writes")) {
                auto gp = pending_filter(g.at("pending_writes").as_array());
                auto op = pending_json(thread_id);
                check("pending_writes", match_multiset(gp, op, ids), gp, op);
            }
            if (g.contains("history_len")) {
                auto h = run(app.get_state_history(thread_id));
                BOOST_TEST(static_cast<std::int64_t>(h.size()) == g.at("history_len").as_int64(),
                           name << " / history_len");
            }
            if (g.contains("side_counters")) {
                json::object oc;
                {
                    std::lock_guard l(side->m);
                    for (const auto& [k, v] : side->c) oc[k] = v;
                }
                check("side_counters", try_match(g.at("side_counters"), oc, ids), g.at("side_counters"), oc);
            }
        }
    }
};

} // namespace durable
