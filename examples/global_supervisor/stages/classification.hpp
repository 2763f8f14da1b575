#ifndef GLOBAL_SUPERVISOR_STAGES_CLASSIFICATION_HPP
#define GLOBAL_SUPERVISOR_STAGES_CLASSIFICATION_HPP

/// @file stages/classification.hpp
/// @brief Stage 3, "Intent Classification": intent_classification.

#include "stages/common.hpp"

namespace global_supervisor {

boost::asio::awaitable<update> intent_classification(services& svc, const state& s);

stage_decl classification_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_CLASSIFICATION_HPP
