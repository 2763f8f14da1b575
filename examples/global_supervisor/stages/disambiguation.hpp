#ifndef GLOBAL_SUPERVISOR_STAGES_DISAMBIGUATION_HPP
#define GLOBAL_SUPERVISOR_STAGES_DISAMBIGUATION_HPP

/// @file stages/disambiguation.hpp
/// @brief Stage 5, "Disambiguation": disambiguation_blocking (asks through an interrupt) and
/// disambiguation_simple (answers, then asks "by the way, which X?").

#include "stages/common.hpp"

#include <string>

namespace global_supervisor {

/// @brief How many times disambiguation_blocking asks before it gives up.
inline constexpr int max_disambiguation_questions = 3;

boost::asio::awaitable<update> disambiguation_blocking(services& svc, const state& s, stategraph::context& ctx);
update disambiguation_simple(const state& s);

/// @brief The answer to a question from what memory_assembly found (shared with simple_text).
std::string answer_from_memory(const state& s);

stage_decl disambiguation_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_DISAMBIGUATION_HPP
