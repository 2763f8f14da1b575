#ifndef GLOBAL_SUPERVISOR_STAGES_MEMORY_HPP
#define GLOBAL_SUPERVISOR_STAGES_MEMORY_HPP

/// @file stages/memory.hpp
/// @brief Stage 4, "Memory Pipeline": retrieval_router, entity_resolution, semantic_retrieval,
/// temporal_retrieval, memory_assembly, fact_extraction, extraction_merge (the join).

#include "stages/common.hpp"

#include <boost/describe/enum.hpp>

#include <optional>
#include <string>

namespace global_supervisor {

update retrieval_router(const state& s);
update entity_resolution(services& svc, const state& s);
update semantic_retrieval(services& svc, const state& s);
update temporal_retrieval(services& svc, const state& s);
update memory_assembly(const state& s);
boost::asio::awaitable<update> fact_extraction(services& svc, const state& s);
update extraction_merge(services& svc, const state& s);

/// @brief The retrieval router's first decision: the retrieval path it chose.
retrieval_path retrieval_route(const state& s);

/// @brief The retrieval router's second decision: whether fact extraction runs beside retrieval.
enum class extraction_branch { none, extract };
BOOST_DESCRIBE_ENUM(extraction_branch, none, extract)
extraction_branch extraction_route(const state& s);

/// @brief Where extraction_merge leads: "Entity Ambiguity?" and "Route" in one decision.
enum class after_merge { blocking, non_blocking, complex, simple };
BOOST_DESCRIBE_ENUM(after_merge, blocking, non_blocking, complex, simple)
after_merge merge_outcome(const state& s);

/// @brief Stores a fact unless the same text is already stored for the same contact (so a
/// node that re-runs stores nothing twice). Returns what was stored (or found).
stored_fact store_fact_once(memory_store& m, const std::string& user_id, const std::optional<candidate>& contact,
                            const std::string& text, const std::optional<std::string>& event_date);

stage_decl memory_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_MEMORY_HPP
