// The Global Supervisor: the seven stages composed into one graph.
//
//   1. Entry & Session      session_init, summarization_check, summarization, context_loader
//   2. HITL Resume          hitl_handler
//   3. Intent Classification intent_classification
//   4. Memory Pipeline      retrieval_router, entity_resolution, semantic_retrieval, temporal_retrieval,
//                           memory_assembly, fact_extraction, extraction_merge (deferred join)
//   5. Disambiguation       disambiguation_blocking, disambiguation_simple
//   6. Planning & Execution global_planner, agent_execution (Send per agent, retry policy)
//   7. Response Generation  ui_router, simple_text, complex_text, hitl_text, message_persist
//
// Every stage declares its own nodes and the edges that leave them (see stages/*.cpp); the
// graph is their composition. compile() checks the whole: every name known, every node reachable
// and able to reach END, every enum route mapped.

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
#include <ostream>

namespace global_supervisor {

namespace json = boost::json;
namespace sg = stategraph;

sg::state_graph<supervisor_state> declare_graph(const agent_settings& agents) {
    return sg::dsl::graph<supervisor_state>("global_supervisor",
                                            entry_stage(),
                                            hitl_resume_stage(),
                                            classification_stage(),
                                            memory_stage(),
                                            disambiguation_stage(),
                                            planning_stage(agents),
                                            response_stage());
}

supervisor_graph build_graph(std::shared_ptr<sg::checkpoint::saver> checkpointer, const agent_settings& agents) {
    sg::compile_options o;
    o.checkpointer = std::move(checkpointer);
    return declare_graph(agents).compile(std::move(o));
}

std::string checkpoint_path(const std::string& db_path) { return db_path + ".checkpoints"; }

namespace {

sg::run_config config_for(const std::string& thread_id) {
    sg::run_config cfg;
    cfg.thread_id = thread_id;
    cfg.recursion_limit = 60;
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
                        std::vector<std::pair<std::int64_t, std::string>> ran) {
    turn_outcome out;
    out.thread_id = thread_id;
    out.interrupted = res.interrupted();
    // Nodes of one superstep run in parallel: order them by name for a stable list.
    std::stable_sort(ran.begin(), ran.end());
    for (auto& [step, node] : ran) out.nodes.push_back(std::move(node));
    for (const auto& i : res.interrupts) out.nodes.push_back(i.node);
    out.interrupts = std::move(res.interrupts);
    if (out.interrupted && !out.interrupts.empty()) {
        const auto& v = out.interrupts.front().value;
        if (auto* o = v.if_object(); o && o->contains("question") && o->at("question").is_string())
            out.reply = std::string(o->at("question").as_string());
        else out.reply = json::serialize(v);
    } else {
        out.reply = res.values.response.reply;
    }
    out.values = std::move(res.values);
    return out;
}

} // namespace

boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, std::string message,
                                          std::string user_id) {
    conversation_state c;
    c.chat_id = thread_id;
    c.user_id = std::move(user_id);
    c.user_message = std::move(message);
    auto input = sg::update<supervisor_state>{}.set<&supervisor_state::conversation>(std::move(c));
    std::vector<std::pair<std::int64_t, std::string>> ran;
    const auto cfg = config_for(thread_id);
    auto trace = trace_into(ran);
    auto res = co_await g.stream(std::move(input), cfg, sg::stream_mode::updates, std::move(trace));
    co_return outcome_of(thread_id, std::move(res), std::move(ran));
}

boost::asio::awaitable<turn_outcome> resume(const supervisor_graph& g, std::string thread_id, std::string answer) {
    std::vector<std::pair<std::int64_t, std::string>> ran;
    const auto cfg = config_for(thread_id);
    auto trace = trace_into(ran);
    auto res = co_await g.stream(sg::resume(answer), cfg, sg::stream_mode::updates, std::move(trace));
    co_return outcome_of(thread_id, std::move(res), std::move(ran));
}

json::object to_json(const turn_outcome& t) {
    json::object o;
    o["thread_id"] = t.thread_id;
    o["status"] = t.interrupted ? "interrupted" : "done";
    o["reply"] = t.reply;
    json::array interrupts;
    for (const auto& i : t.interrupts) interrupts.push_back(json::object{{"id", i.id}, {"value", i.value}});
    o["interrupts"] = std::move(interrupts);
    json::array nodes;
    for (const auto& n : t.nodes) nodes.push_back(json::string(n));
    o["nodes"] = std::move(nodes);
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
        o.visited = snap.values.trace;
        o.current = snap.next;
        if (o.current.empty() && !o.visited.empty()) o.current.push_back(o.visited.back());
    }
    g.write_dot(os, o);
}

} // namespace global_supervisor
