#pragma once
/// @file flow.hpp
/// @brief Edges in the DSL, written as chains:
/// @code
/// start >> "a"_n >> "b"_n >> end,                 // add_edge for each arrow
/// "a"_n >> parallel("b"_n, "c"_n) >> "d"_n,       // a -> b, a -> c, b -> d, c -> d
/// join("b"_n, "c"_n) >> "d"_n,                    // d runs once both b and c have run
/// @endcode
/// A chain may end in a route (see route.hpp): `"a"_n >> on(&S::field, {...})`.

#include <stategraph/dsl/lowering.hpp>
#include <stategraph/dsl/node.hpp>

#include <stategraph/state_graph.hpp>
#include <stategraph/topology.hpp>

#include <concepts>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::dsl {

/// @brief Several nodes side by side: `a >> parallel(b, c)` leads to both, `parallel(b, c) >> d`
/// leads from both (d runs in the step after either; use `join` to wait for all).
struct parallel_nodes {
    std::vector<std::string> names;
};
template <class... N>
    requires(sizeof...(N) > 0 && (std::same_as<N, node_ref> && ...))
/// @tparam N `node_ref` each (`"name"_n`).
/// @param nodes one or more nodes, in the order given.
/// Thread safety: a pure function; any thread.
parallel_nodes parallel(const N&... nodes) {
    return {{nodes.name()...}};
}

/// @brief The sources of a join edge: `join(a, b) >> c` runs c once a and b have both run.
struct join_sources {
    std::vector<std::string> names;
};
template <class... N>
    requires(sizeof...(N) > 0 && (std::same_as<N, node_ref> && ...))
/// @tparam N `node_ref` each.
/// @param sources the nodes that must all have run before the target runs (a source that can be
/// skipped makes `compile()` report `join_never_fires`).
join_sources join(const N&... sources) {
    return {{sources.name()...}};
}

/// @brief A chain of edges, and the nodes at its end (where the next `>>` starts).
/// Thread safety: a plain value; distinct objects are independent.
class flow {
public:
    std::vector<edge_spec> edges;
    std::vector<join_spec> joins;
    std::vector<std::string> tail;

    /// @brief Lowers to `add_edge` calls (one or several sources).
    template <class S>
    [[gnu::cold]] void lower_into(detail::lowering<S>& out) const {
        lower_shape(out);
    }
    /// @brief Adds the chain's edges and joins to `out` (compiled in the DSL's library).
    void lower_shape(detail::lowered& out) const;
};

namespace detail {
template <class T, class... U>
concept one_of = (std::same_as<std::remove_cvref_t<T>, U> || ...);

// Compiled in the DSL's library: a chain's work does not depend on the state type.
flow as_flow(const node_ref& n);
flow as_flow(const parallel_nodes& p);
inline const flow& as_flow(const flow& f) { return f; }
/// `from >> targets`: an edge from each node of from's tail to each target.
flow chain(const flow& from, const std::vector<std::string>& targets);
flow chain(const node_ref& from, const std::vector<std::string>& targets);
flow chain(const parallel_nodes& from, const std::vector<std::string>& targets);
/// `join(sources) >> targets`: a join edge to each target.
flow chain(const join_sources& from, const std::vector<std::string>& targets);
inline const std::vector<std::string>& names_of(const parallel_nodes& p) { return p.names; }
std::vector<std::string> names_of(const node_ref& n);
} // namespace detail

/// @brief What may stand left of `>>`.
template <class T>
concept flow_source = detail::one_of<T, node_ref, parallel_nodes, flow, join_sources>;
/// @brief What may stand right of `>>` (besides a route).
template <class T>
concept flow_target = detail::one_of<T, node_ref, parallel_nodes>;

/// @brief An edge from every node at the end of `from` to every node of `to`
/// (a join edge when `from` is `join(...)`).
/// @tparam A a node, `parallel(...)`, `join(...)` or a chain.
/// @tparam B a node or `parallel(...)` (a route has an overload of its own, in route.hpp).
/// @param from the source(s): the tail of a chain, or every node of `parallel`/`join`.
/// @param to the target node(s); they become the chain's new tail.
/// @return the chain with the new edges; names are checked by `compile()`.
template <flow_source A, flow_target B>
flow operator>>(const A& from, const B& to) {
    return detail::chain(from, detail::names_of(to));
}

} // namespace stategraph::dsl
