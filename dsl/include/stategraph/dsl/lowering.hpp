#pragma once
/// @file lowering.hpp
/// @brief How DSL declarations become builder calls. Every declaration type has
/// `template <class S> void lower_into(lowering<S>&) const`, which records the builder calls
/// it stands for: the state-independent part (edges, joins, breakpoints, problems) as data in
/// `lowered`, the rest (add_node, add_conditional_edges) as closures. They are replayed nodes
/// first, then edges and joins, then conditional edges, then breakpoints. Lowering runs once,
/// when a graph is declared, so its templates are marked `[[gnu::cold]]`: GCC and Clang optimize
/// them for size, which also makes them quicker to compile in every graph program.

#include <stategraph/dsl/checks.hpp>

#include <stategraph/core/error.hpp>
#include <stategraph/state_graph.hpp>
#include <stategraph/topology.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::dsl {

namespace detail {

/// @brief The part of a lowered declaration that does not depend on the state type: plain edges,
/// joins, breakpoints and the mistakes seen. Its work is compiled once in the DSL's library, not in
/// every program that declares a graph.
/// Thread safety: a plain value.
struct lowered {
    std::string stage;                   ///< stage of the nodes declared here ("" at the top level)
    std::vector<edge_spec> edges;        ///< add_edge(from, to), in declaration order
    std::vector<join_spec> joins;        ///< add_edge({sources...}, to)
    std::vector<std::string> before;     ///< interrupt_before
    std::vector<std::string> after;      ///< interrupt_after
    std::vector<graph_problem> problems; ///< mistakes seen while lowering (reported with compile()'s)

    lowered();
    lowered(const lowered&);
    lowered(lowered&&) noexcept;
    lowered& operator=(const lowered&);
    lowered& operator=(lowered&&) noexcept;
    ~lowered();

    /// @brief Adds everything of `other` after what is here.
    void append(const lowered& other);
};

/// @brief The builder calls recorded for one stage (or the top level of a graph): the calls that
/// need the state type (add_node, add_conditional_edges, schemas) as closures, the rest as data.
template <class S>
struct lowering : lowered {
    using op = std::function<void(state_graph<S>&)>;
    std::vector<op> nodes;  ///< add_node and the input/output schemas
    std::vector<op> routes; ///< add_conditional_edges

    [[gnu::cold]] void append(const lowering& other) {
        lowered::append(other);
        nodes.reserve(nodes.size() + other.nodes.size());
        for (const auto& f : other.nodes) nodes.push_back(f);
        routes.reserve(routes.size() + other.routes.size());
        for (const auto& f : other.routes) routes.push_back(f);
    }
    [[gnu::cold]] void apply(state_graph<S>& g) const {
        for (const auto& f : nodes) f(g);
        g.add_edges(edges, joins);
        for (const auto& f : routes) f(g);
        if (!before.empty()) g.interrupt_before(before);
        if (!after.empty()) g.interrupt_after(after);
    }
};

template <class T, class S>
concept lowerable = requires(const std::remove_cvref_t<T>& t, lowering<S>& out) { t.template lower_into<S>(out); };

template <class S, class T>
void lower_item(lowering<S>& out, const T& item) {
    if constexpr (lowerable<T, S>) {
        item.template lower_into<S>(out);
    } else {
        static_assert(dependent_false<T>,
                      "stage<S>(...) / graph<S>(...): this argument is not a DSL declaration; write a node "
                      "(\"name\"_n = fn), an edge chain (\"a\"_n >> \"b\"_n >> end), a route (\"a\"_n >> on(&S::field, "
                      "{...})), a join (join(\"a\"_n, \"b\"_n) >> \"c\"_n), a breakpoint (interrupt_before(\"a\"_n)) "
                      "or a stage (stage<S>(\"name\", ...))");
    }
}

} // namespace detail
} // namespace stategraph::dsl
