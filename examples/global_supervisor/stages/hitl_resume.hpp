#ifndef GLOBAL_SUPERVISOR_STAGES_HITL_RESUME_HPP
#define GLOBAL_SUPERVISOR_STAGES_HITL_RESUME_HPP

/// @file stages/hitl_resume.hpp
/// @brief Stage 2, "HITL Resume": hitl_handler and the "Resume Type" decision.

#include "stages/common.hpp"

#include <stategraph/command.hpp>

#include <vector>

namespace global_supervisor {

update hitl_handler(const state& s);

/// @brief "Resume Type": none and disambiguation lead to intent_classification; agent (an agent
/// waits for permission) leads on through agent_resume's Send.
hitl_kind resume_type(const state& s);
/// @brief "Resume Type" = agent: the waiting agent task, with the decision the message carries,
/// sent back to agent_execution; empty otherwise.
std::vector<stategraph::send> agent_resume(const state& s);

stage_decl hitl_resume_stage();

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_HITL_RESUME_HPP
