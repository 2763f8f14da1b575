#ifndef GLOBAL_SUPERVISOR_STAGES_RESPONSE_HPP
#define GLOBAL_SUPERVISOR_STAGES_RESPONSE_HPP

/// @file stages/response.hpp
/// @brief Stage 7, "Response Generation": ui_router, simple_text, complex_text, hitl_text,
/// message_persist.

#include "stages/common.hpp"

namespace global_supervisor {

update ui_router(const state& s);
update simple_text(const state& s);
update complex_text(const state& s);
update hitl_text(const state& s);
update message_persist(services& svc, const state& s);
/// @brief The message_persist node: streams the reply (stream mode "messages"), then `message_persist`.
update message_persist_node(services& svc, const state& s, stategraph::context& ctx);

/// @brief "Response Type" (the conditional edge after ui_router).
response_kind response_type(const state& s);

stage_decl response_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_RESPONSE_HPP
