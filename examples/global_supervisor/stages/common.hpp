#ifndef GLOBAL_SUPERVISOR_STAGES_COMMON_HPP
#define GLOBAL_SUPERVISOR_STAGES_COMMON_HPP

/// @file stages/common.hpp
/// @brief What every stage file uses: the state, the services, the DSL, and two shorthands.

#include "services.hpp"
#include "state.hpp"

#include <stategraph/context.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>

namespace global_supervisor {

/// @brief The graph's state and its partial update.
using state = supervisor_state;
using update = stategraph::update<supervisor_state>;
/// @brief A stage of the supervisor graph (a DSL declaration, composed in graph.cpp).
using stage_decl = stategraph::dsl::stage_decl<supervisor_state>;

/// @brief An update that only records that `node` ran (every node appends its name to `trace`).
inline update traced(const char* node) { return update{}.set<&state::trace>({node}); }

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_COMMON_HPP
