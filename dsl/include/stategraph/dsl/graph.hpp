#pragma once
/// @file graph.hpp
/// @brief `graph<S>("name", ...)`: a whole graph as one declaration. It lowers to the builder
/// (`state_graph<S>`: add_node, add_edge, add_conditional_edges, interrupt_before/after), so a
/// DSL graph and the same graph built by hand have the same shape and run on the same engine.
/// @code
/// auto app = graph<turn>("supervisor",
///                        intake_stage(), memory_stage(), planning_stage(),
///                        start >> "intake"_n,
///                        "respond"_n >> end)
///                .compile({.checkpointer = saver});
/// @endcode
/// Structural mistakes (unknown or misspelled names, unreachable nodes, unmapped enum routes,
/// ...) are reported together by `compile()`, with the nearest declared name.

#include <stategraph/dsl/checks.hpp>
#include <stategraph/dsl/lowering.hpp>

#include <stategraph/core/error.hpp>
#include <stategraph/state_graph.hpp>
#include <stategraph/topology.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::dsl {

namespace detail {
template <class S, class... Items>
[[gnu::cold]] state_graph<S> build(std::string name, std::vector<graph_problem>& problems, const Items&... items) {
    state_graph<S> g(std::move(name));
    if constexpr (check::described_state<S>()) {
        lowering<S> top;
        (lower_item(top, items), ...);
        top.apply(g);
        problems = std::move(top.problems);
    }
    return g;
}
/// Adds `shape`'s own problems (`validate`) to those seen while lowering, then throws them all
/// as one `compile_error` (compiled in the DSL's library).
[[noreturn]] void throw_problems(std::vector<graph_problem> problems, const topology& shape);
/// Adds `shape`'s own problems to those seen while lowering.
void add_shape_problems(std::vector<graph_problem>& problems, const topology& shape);
} // namespace detail

/// @brief Builds the graph declared by `items` (stages, nodes, chains, routes, joins,
/// breakpoints) as a `state_graph<S>`; call `.compile(options)` on it.
/// @throws compile_error when the declaration itself is inconsistent (a route map that maps one
/// value twice); the error lists every structural problem of the graph as well.
/// @tparam S the state: a struct described with `BOOST_DESCRIBE_STRUCT` (a `static_assert` otherwise).
/// @tparam Items the declarations' types; anything else is a compile error naming it.
/// @param name the graph's name (drawings, server, cache keys).
/// @param items stages, node declarations (`"n"_n = fn`), chains, routes, joins and breakpoints, in
/// any order; they are copied into the builder.
/// @return the builder, ready for `.set_node_defaults(...)` and `.compile(options)`; the shape's
/// problems that need the whole graph (unknown names, unreachable nodes) come from `compile()`.
/// Thread safety: a pure function of its arguments; call from any thread. The builder it returns is
/// as `state_graph<S>`'s (one thread at a time).
template <class S, class... Items>
state_graph<S> graph(std::string name, const Items&... items) {
    std::vector<graph_problem> problems;
    auto g = detail::build<S>(std::move(name), problems, items...);
    if (!problems.empty()) detail::throw_problems(std::move(problems), g.shape());
    return g;
}

/// @brief The non-throwing form: on a declaration problem returns nullopt and fills `problems`
/// (with every structural problem of the graph as well).
/// @tparam S as for the throwing form.
/// @tparam Items as for the throwing form.
/// @param problems filled with the problems found (left empty on success).
/// @param name the graph's name.
/// @param items the declarations, as for the throwing form.
/// @return the builder, or nullopt when the declaration has problems; does not throw for them.
template <class S, class... Items>
std::optional<state_graph<S>> graph(std::vector<graph_problem>& problems, std::string name, const Items&... items) {
    auto g = detail::build<S>(std::move(name), problems, items...);
    if (!problems.empty()) {
        detail::add_shape_problems(problems, g.shape());
        return std::nullopt;
    }
    return g;
}

} // namespace stategraph::dsl
