// Stage 2: HITL Resume
//
//   context_loader ──> hitl_handler ──(none)────────────> intent_classification   (stage 3)
//                           │ ───────(disambiguation)──> intent_classification
//                           └════════(agent: Send)═════> agent_execution         (stage 6)
//
// A run that paused for the user is normally continued with `resume` (the engine re-runs the
// paused node with the answer). This stage handles the other case of the seed: a new chat
// message arrives while the thread still waits (hitl.pending, copied by session_init into the
// turn's resume type). A pending disambiguation goes through classification, which takes a
// message naming a candidate as the answer; an agent waiting for permission gets the message as
// its approve / deny and runs again (a Send: agent_execution reads an agent_task, so the "agent"
// value of the route leads nowhere itself and the Send carries the turn on).

#include "stages/hitl_resume.hpp"

namespace global_supervisor {

namespace {
bool agent_waiting(const state& s) { return s.hitl.resume_type == hitl_kind::agent && s.hitl.waiting_task.has_value(); }
} // namespace

update hitl_handler(const state& s) {
    if (s.hitl.resume_type == hitl_kind::none) return {};
    auto h = s.hitl;
    h.user_response = s.conversation.user_message;
    if (agent_waiting(s)) h.waiting_task->decision = is_approval(s.conversation.user_message) ? "approve" : "deny";
    return update{}.set<&state::hitl>(std::move(h));
}

hitl_kind resume_type(const state& s) {
    if (agent_waiting(s)) return hitl_kind::agent;
    // An agent resume type without a waiting task has nothing to resume: classified as usual.
    return s.hitl.resume_type == hitl_kind::disambiguation ? hitl_kind::disambiguation : hitl_kind::none;
}

std::vector<stategraph::send> agent_resume(const state& s) {
    std::vector<stategraph::send> out;
    if (agent_waiting(s)) out.emplace_back("agent_execution", *s.hitl.waiting_task);
    return out;
}

stage_decl hitl_resume_stage() {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("2. HITL Resume",
        "hitl_handler"_n = hitl_handler,

        "hitl_handler"_n >> route(resume_type, {{hitl_kind::none,           "intent_classification"_n},
                                                {hitl_kind::disambiguation, "intent_classification"_n},
                                                {hitl_kind::agent,          end}}), // the Send goes on
        "hitl_handler"_n >> fan_out(agent_resume, {"agent_execution"_n}));
    // clang-format on
}

} // namespace global_supervisor
