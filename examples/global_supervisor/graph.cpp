// The Global Supervisor: the seven stages composed into one graph.
//
//    START
//      │                                                                                  1. Entry & Session
//      v
//    session_init ──> summarization_check ──(true)──> summarization
//                       │ (false)                       │
//                       v                               │
//                     context_loader <──────────────────┘
//                       │
//      ┌────────────────┘                                                                 2. HITL Resume
//      v
//    hitl_handler ══(agent: Send)═════════════════════════════════════════════════════╗
//      │ (none | disambiguation)                                                      ║   3. Intent Classification
//      v                                                                              ║
//    intent_classification                                                            ║
//      │                                                                              ║   4. Memory Pipeline
//      v                                                                              ║
//    retrieval_router ──(extract)──────────────────────────────────> fact_extraction  ║
//      │   └──(semantic | parallel)──> entity_resolution                   │          ║
//      │ (skip)                          │                                 │          ║
//      │                                 v                                 │          ║
//      │                               semantic_retrieval                  │          ║
//      │                                 │                                 │          ║
//      │                                 v                                 │          ║
//      │                               temporal_retrieval                  │          ║
//      v                                 │                                 │          ║
//    memory_assembly <───────────────────┘                                 │          ║
//      │                                                                   │          ║
//      v                                                                   │          ║
//    extraction_merge (deferred: once every branch that started is done) <─┘          ║
//      ├──(blocking)─────> disambiguation_blocking (interrupt) ─────────────┐         ║   5. Disambiguation
//      ├──(non_blocking)─> disambiguation_simple ───────────────────────────┤         ║
//      │                                                                    │         ║
//      ├──(complex)──> global_planner <──────────────────────┐              │         ║   6. Planning & Execution
//      │                 ║  └──(nothing_to_run)───┐          │              │         ║
//      │                 ║ (agents: Send)         │          │              │         ║
//      │                 v                        │          │              │         ║
//      │               agent_execution <══════════│══════════│══════════════│═════════╝
//      │                 ├──(more agents: true)───│──────────┘              │
//      │                 └──(false)──────────┐    │                         │
//      │                                     v    v                         │
//      └──(simple)─────────────────────────> ui_router                      │           7. Response Generation
//                                              ├──(simple)──> simple_text ──┤
//                                              ├──(complex)─> complex_text ─┤
//                                              └──(hitl)────> hitl_text ────┤
//                                                                           v
//                                                                    message_persist ──> END
//
// ── a plain edge, ──(value)──> a route on a described enum (or a bool), ══> a Send (the
// payload is an agent_task). Every route is keyed by a described enum or a bool, so compile()
// proves each value has a target: an enum value left out is an `unmapped_route` problem.
// Three routes map one value to END, which starts nothing from that edge:
//   retrieval_router  extraction_route   none            no fact extraction branch
//   hitl_handler      resume_type        agent           agent_resume's Send carries the turn on
//   global_planner    planned            agents          dispatch_agents's Sends carry it on
//
// Every stage declares its own nodes and the edges that leave them (see stages/*.cpp); the
// graph is their composition. The services (memory database, brain, agent settings) are handed
// to each stage, which passes them to the nodes that use them.
//
// The nodes a call ran come from the engine's stream (stream_mode::updates), the path of the
// whole turn (across a pause and its resume) from the checkpoints, each of which names the
// nodes that wrote it: no node records its own name.

#include "graph.hpp"

#include "stages/classification.hpp"
#include "stages/disambiguation.hpp"
#include "stages/entry.hpp"
#include "stages/hitl_resume.hpp"
#include "stages/memory.hpp"
#include "stages/planning.hpp"
#include "stages/response.hpp"

#include <stategraph/dsl/dsl.hpp>

#include <algorithm>
#include <optional>
#include <ostream>

namespace global_supervisor {

namespace json = boost::json;
namespace sg = stategraph;

sg::update<supervisor_state> state_update_of(services& svc, const supervisor_input& in,
                                             const supervisor_state& now) {
    if (in.model && *in.model != svc.model().name())
        throw sg::graph_error(sg::errc::invalid_input,
                              "input.model: '" + *in.model + "' is not served by this supervisor (it serves '" +
                                  svc.model().name() + "')",
                              {"model", *in.model});
    // A fresh conversation: session_init loads the rest (history, counts) for the turn.
    conversation_state c;
    c.chat_id = in.chat_id.empty() ? now.conversation.chat_id : in.chat_id;
    c.user_id = in.user_id.empty() ? now.conversation.user_id : in.user_id;
    c.user_message = in.user_message;
    auto u = sg::update<supervisor_state>{}.set<&supervisor_state::conversation>(std::move(c));
    if (in.avatar_id) {
        auto r = now.response;
        r.presentation.avatar = *in.avatar_id;
        u.set<&supervisor_state::response>(std::move(r));
    }
    return u;
}

supervisor_output output_of(const supervisor_state& s, const sg::output_context& ctx) {
    supervisor_output o;
    o.chat_id = s.conversation.chat_id;
    o.user_id = s.conversation.user_id;
    o.user_message = s.conversation.user_message;
    o.model = s.conversation.model;
    o.avatar_id = s.response.presentation.avatar;
    o.reply = s.response.reply;
    if (s.hitl.pending != hitl_kind::none) {
        o.question = s.hitl.question;
        o.options = s.hitl.options;
    }
    o.followup = s.response.followup;
    o.path = ctx.path;
    return o;
}

sg::state_graph<supervisor_state> declare_graph(services& svc) {
    using sg::dsl::input_schema, sg::dsl::output_schema;
    auto read_input = [&svc](const supervisor_input& in, const supervisor_state& now) { return state_update_of(svc, in, now); };
    return sg::dsl::graph<supervisor_state>("global_supervisor",
                                            input_schema<supervisor_input>(read_input),
                                            output_schema<supervisor_output>(output_of),
                                            entry_stage(svc),
                                            hitl_resume_stage(),
                                            classification_stage(svc),
                                            memory_stage(svc),
                                            disambiguation_stage(svc),
                                            planning_stage(svc),
                                            response_stage(svc));
}

supervisor_graph build_graph(std::shared_ptr<sg::checkpoint::saver> checkpointer, services& svc) {
    sg::compile_options o;
    o.checkpointer = std::move(checkpointer);
    return declare_graph(svc).compile(std::move(o));
}

std::string checkpoint_path(const std::string& db_path) { return db_path + ".checkpoints"; }

namespace {

/// The nodes named by one checkpoint's metadata ("writers": the nodes of its superstep).
std::vector<std::string> writers_of(const sg::checkpoint::checkpoint& cp) {
    std::vector<std::string> out;
    if (const auto* w = cp.metadata.if_contains(sg::checkpoint::reserved::writers); w && w->is_array())
        for (const auto& n : w->as_array())
            if (n.is_string()) out.emplace_back(n.as_string());
    return out;
}

sg::run_config config_for(const std::string& thread_id, sg::run_observer* observer) {
    sg::run_config cfg;
    cfg.thread_id = thread_id;
    cfg.recursion_limit = 60;
    cfg.observer = observer;
    return cfg;
}

/// Records the nodes that ran (the updates stream of the top-level graph).
sg::stream_handler trace_into(std::vector<std::pair<std::int64_t, std::string>>& ran) {
    return [&ran](const sg::stream_event& e) {
        if (!e.ns.empty() || e.cached || e.interrupt) return;
        ran.emplace_back(e.step, e.node);
    };
}

turn_outcome outcome_of(const std::string& thread_id, sg::run_result<supervisor_state> res,
                        std::vector<std::pair<std::int64_t, std::string>> ran, std::vector<std::string> trace) {
    turn_outcome out;
    out.thread_id = thread_id;
    out.interrupted = res.interrupted();
    out.drained = res.drained();
    // Nodes of one superstep run in parallel: order them by name for a stable list.
    std::stable_sort(ran.begin(), ran.end());
    for (auto& [step, node] : ran) out.nodes.push_back(std::move(node));
    for (const auto& i : res.interrupts) out.nodes.push_back(i.node);
    out.trace = std::move(trace);
    out.interrupts = std::move(res.interrupts);
    if (out.interrupted && !out.interrupts.empty()) {
        const auto& v = out.interrupts.front().value;
        if (auto* o = v.if_object(); o && o->contains("question") && o->at("question").is_string())
            out.reply = std::string(o->at("question").as_string());
        else out.reply = json::serialize(v);
    } else {
        out.reply = res.values.response.reply;
    }
    out.output = res.output_as<supervisor_output>();
    out.values = std::move(res.values);
    return out;
}

} // namespace

boost::asio::awaitable<std::vector<std::string>> turn_trace(const supervisor_graph& g, std::string thread_id) {
    std::vector<std::string> out;
    const auto& saver = g.checkpointer();
    if (!saver) co_return out;
    // The checkpoints' own records (no state decoded), newest first, a page at a time, back to
    // the checkpoint of the turn's input message.
    std::vector<std::vector<std::string>> steps;
    sg::checkpoint::list_options page;
    page.limit = 24;
    for (bool turn_began = false; !turn_began;) {
        auto list = co_await saver->list(thread_id, "", page);
        if (list.empty()) break;
        for (const auto& t : list) {
            turn_began = t.cp.source == "input";
            if (turn_began) break;
            auto writers = writers_of(t.cp);
            bool start_only = writers.size() == 1 && writers.front() == sg::START;
            if (t.cp.source != "loop" || start_only) continue;
            steps.push_back(std::move(writers));
        }
        page.before = list.back().cp.id;
    }
    for (auto step = steps.rbegin(); step != steps.rend(); ++step) {
        // Nodes of one superstep run in parallel: ordered by name, as turn_outcome::nodes.
        std::sort(step->begin(), step->end());
        out.insert(out.end(), step->begin(), step->end());
    }
    co_return out;
}

namespace {
/// The trace of the call's updates, and the events the caller watches.
sg::stream_handler watched(std::vector<std::pair<std::int64_t, std::string>>& ran, const turn_watch& watch) {
    auto trace = trace_into(ran);
    if (!watch.on_event || watch.modes == sg::stream_mode::none) return trace;
    return [trace = std::move(trace), &watch](const sg::stream_event& e) {
        if (e.mode == sg::stream_mode::updates) trace(e);
        if (sg::has_mode(watch.modes, e.mode)) watch.on_event(e);
    };
}

const turn_watch& no_watch() {
    static const turn_watch none;
    return none;
}
} // namespace

boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, std::string message,
                                          std::string user_id) {
    return chat(g, std::move(thread_id), std::move(message), std::move(user_id), no_watch());
}

namespace {
/// What a killed call left of the thread's turn: nothing (a new thread, a finished turn, a
/// question waiting for its answer), or steps still to run (`next` without an interrupt).
/// The steps a killed call left to run on the thread (its `next`), or none: no thread, a turn
/// that ended, or one that waits for an answer.
boost::asio::awaitable<std::vector<std::string>> turn_left_unfinished(const supervisor_graph& g, const std::string& thread_id) {
    std::optional<sg::state_snapshot<supervisor_state>> snap;
    try {
        snap = co_await g.get_state(thread_id);
    } catch (const sg::thread_error& e) {
        if (e.code() != sg::errc::thread_not_found) throw;
    }
    if (!snap || snap->next.empty()) co_return std::vector<std::string>{};
    const bool waits = std::any_of(snap->tasks.begin(), snap->tasks.end(), [](const auto& t) { return !t.interrupts.empty(); });
    if (waits) co_return std::vector<std::string>{};
    co_return std::vector<std::string>(snap->next.begin(), snap->next.end());
}

/// Finishes a turn a killed call left (a crash, a full disk, a SIGTERM drain between two
/// steps): the thread is continued with no input, as LangGraph continues a thread invoked with
/// none. Completed steps are not run again; their tasks' saved writes are used.
boost::asio::awaitable<sg::run_result<supervisor_state>> finish_left_turn(const supervisor_graph& g,
                                                                          const std::string& thread_id,
                                                                          const turn_watch& watch,
                                                                          std::vector<std::pair<std::int64_t, std::string>>& ran) {
    const auto cfg = config_for(thread_id, watch.observer);
    auto on_event = watched(ran, watch);
    const auto modes = sg::stream_mode::updates | watch.modes;
    co_return co_await g.stream(sg::continue_run, cfg, modes, std::move(on_event));
}

std::vector<std::string> node_names(std::vector<std::pair<std::int64_t, std::string>> ran) {
    std::stable_sort(ran.begin(), ran.end());
    std::vector<std::string> out;
    for (auto& [step, node] : ran) out.push_back(std::move(node));
    return out;
}
} // namespace

boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, std::string message,
                                          std::string user_id, const turn_watch& watch) {
    supervisor_input in;
    in.chat_id = thread_id;
    in.user_id = std::move(user_id);
    in.user_message = std::move(message);
    return chat(g, std::move(thread_id), std::move(in), watch);
}

boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, supervisor_input in,
                                          const turn_watch& watch) {
    // A turn a killed call left is finished first: a new message would abandon its steps (new
    // input starts from START), and the answer or the reply it was about to persist would be lost.
    std::vector<std::string> recovered;
    auto pending = co_await turn_left_unfinished(g, thread_id);
    if (!pending.empty()) {
        std::vector<std::pair<std::int64_t, std::string>> left;
        auto finished = co_await finish_left_turn(g, thread_id, watch, left);
        recovered = node_names(std::move(left));
        // A step left pending that only asks (disambiguation_blocking interrupts before it
        // completes) ran too, though no step completed: it is what finished the left turn.
        if (recovered.empty()) recovered = std::move(pending);
        if (finished.drained()) {
            // SIGTERM again while finishing it: the new message is not started.
            auto trace = co_await turn_trace(g, thread_id);
            auto out = outcome_of(thread_id, std::move(finished), {}, std::move(trace));
            out.recovered = std::move(recovered);
            co_return out;
        }
    }
    // The input schema (supervisor_input) maps the turn onto the state.
    auto input = sg::as_input(in);
    std::vector<std::pair<std::int64_t, std::string>> ran;
    const auto cfg = config_for(thread_id, watch.observer);
    auto on_event = watched(ran, watch);
    const auto modes = sg::stream_mode::updates | watch.modes;
    auto res = co_await g.stream(std::move(input), cfg, modes, std::move(on_event));
    auto trace = co_await turn_trace(g, thread_id);
    auto out = outcome_of(thread_id, std::move(res), std::move(ran), std::move(trace));
    out.recovered = std::move(recovered);
    co_return out;
}

boost::asio::awaitable<turn_outcome> resume(const supervisor_graph& g, std::string thread_id, std::string answer) {
    return resume(g, std::move(thread_id), std::move(answer), no_watch());
}

boost::asio::awaitable<turn_outcome> resume(const supervisor_graph& g, std::string thread_id, std::string answer,
                                            const turn_watch& watch) {
    std::vector<std::pair<std::int64_t, std::string>> ran;
    auto pending = co_await turn_left_unfinished(g, thread_id);
    if (!pending.empty()) {
        // No question waits, but a killed call left steps to run (for instance after the answer
        // was saved and before the reply was persisted): they are finished, the answer is not
        // needed again.
        auto res = co_await finish_left_turn(g, thread_id, watch, ran);
        auto trace = co_await turn_trace(g, thread_id);
        auto out = outcome_of(thread_id, std::move(res), std::move(ran), std::move(trace));
        out.recovered = out.nodes;
        if (out.recovered.empty()) out.recovered = std::move(pending); // a step that only asked
        co_return out;
    }
    const auto cfg = config_for(thread_id, watch.observer);
    auto on_event = watched(ran, watch);
    const auto modes = sg::stream_mode::updates | watch.modes;
    auto res = co_await g.stream(sg::resume(answer), cfg, modes, std::move(on_event));
    auto trace = co_await turn_trace(g, thread_id);
    co_return outcome_of(thread_id, std::move(res), std::move(ran), std::move(trace));
}

json::object to_json(const turn_outcome& t) {
    json::object o;
    o["thread_id"] = t.thread_id;
    o["status"] = t.interrupted ? "interrupted" : t.drained ? "drained" : "done";
    o["reply"] = t.reply;
    json::array interrupts;
    for (const auto& i : t.interrupts) interrupts.push_back(json::object{{"id", i.id}, {"value", i.value}});
    o["interrupts"] = std::move(interrupts);
    json::array nodes;
    for (const auto& n : t.nodes) nodes.push_back(json::string(n));
    o["nodes"] = std::move(nodes);
    json::array recovered;
    for (const auto& n : t.recovered) recovered.push_back(json::string(n));
    o["recovered"] = std::move(recovered);
    o["output"] = json::value_from(t.output);
    return o;
}

boost::asio::awaitable<json::object> state_json(const supervisor_graph& g, std::string thread_id) {
    auto snap = co_await g.get_state(thread_id);
    json::object o;
    o["thread_id"] = thread_id;
    json::array interrupts;
    for (const auto& t : snap.tasks)
        for (const auto& i : t.interrupts) interrupts.push_back(json::object{{"id", i.id}, {"value", i.value}});
    o["status"] = !interrupts.empty() ? "interrupted" : snap.next.empty() ? "done" : "pending";
    json::array next;
    for (const auto& n : snap.next) next.push_back(json::string(n));
    o["next"] = std::move(next);
    o["interrupts"] = std::move(interrupts);
    o["step"] = snap.step;
    o["checkpoint_id"] = snap.checkpoint_id;
    auto path = co_await turn_trace(g, thread_id);
    json::array trace;
    for (const auto& n : path) trace.push_back(json::string(n));
    o["trace"] = std::move(trace);
    o["values"] = json::value_from(snap.values);
    co_return o;
}

boost::asio::awaitable<json::array> history_json(const supervisor_graph& g, std::string thread_id) {
    auto list = co_await g.get_state_history(thread_id);
    if (list.empty())
        throw sg::thread_error(sg::errc::thread_not_found, "thread '" + thread_id + "' has no checkpoint", {thread_id});
    json::array out;
    for (const auto& s : list) {
        json::object o;
        o["checkpoint_id"] = s.checkpoint_id;
        o["step"] = s.step;
        o["source"] = s.source;
        o["writers"] = s.metadata.contains("writers") ? s.metadata.at("writers") : json::array{};
        json::array next;
        for (const auto& n : s.next) next.push_back(json::string(n));
        o["next"] = std::move(next);
        out.push_back(std::move(o));
    }
    co_return out;
}

boost::asio::awaitable<void> write_dot(const supervisor_graph& g, std::ostream& os, std::string thread_id) {
    sg::dot_options o;
    if (!thread_id.empty()) {
        auto snap = co_await g.get_state(thread_id);
        o.visited = co_await turn_trace(g, thread_id);
        o.current = snap.next;
        if (o.current.empty() && !o.visited.empty()) o.current.push_back(o.visited.back());
    }
    g.write_dot(os, o);
}

} // namespace global_supervisor
