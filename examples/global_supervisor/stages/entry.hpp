#ifndef GLOBAL_SUPERVISOR_STAGES_ENTRY_HPP
#define GLOBAL_SUPERVISOR_STAGES_ENTRY_HPP

/// @file stages/entry.hpp
/// @brief Stage 1, "Entry & Session": session_init, summarization_check, summarization,
/// context_loader.

#include "stages/common.hpp"

namespace global_supervisor {

/// @brief How many stored messages session_init loads as the recent history.
inline constexpr std::size_t history_window = 10;
/// @brief How many recent messages summarization keeps verbatim.
inline constexpr std::size_t summary_keeps_last = 6;

update session_init(services& svc, const state& s, stategraph::context& ctx);
update summarization_check(const state& s);
boost::asio::awaitable<update> summarization(services& svc, const state& s);
update context_loader(services& svc, const state& s);

/// @brief "needs summarization?" (the conditional edge after summarization_check).
bool needs_summary(const state& s);

/// @brief The stage's declaration: its nodes and the edges that leave them.
stage_decl entry_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_ENTRY_HPP
