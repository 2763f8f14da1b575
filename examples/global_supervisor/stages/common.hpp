#ifndef GLOBAL_SUPERVISOR_STAGES_COMMON_HPP
#define GLOBAL_SUPERVISOR_STAGES_COMMON_HPP

/// @file stages/common.hpp
/// @brief What every stage file uses: the state, the services, the DSL, and `with_services`.

#include "services.hpp"
#include "state.hpp"

#include <stategraph/context.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>

#include <utility>

namespace global_supervisor {

/// @brief The graph's state and its partial update.
using state = supervisor_state;
using update = stategraph::update<supervisor_state>;
/// @brief A stage of the supervisor graph (a DSL declaration, composed in graph.cpp).
using stage_decl = stategraph::dsl::stage_decl<supervisor_state>;

/// @brief A node that needs the services, as the engine calls it: `with_services(svc, fn)` is
/// called like `fn` without its first parameter, and passes `svc` to it. The stage factory that
/// declares the node receives `svc`; the services must outlive the compiled graph.
template <class R, class... A>
auto with_services(services& svc, R (*fn)(services&, A...)) {
    return [&svc, fn](A... args) -> R { return fn(svc, std::forward<A>(args)...); };
}

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_COMMON_HPP
