#pragma once
/// @file lowering.hpp
/// @brief How DSL declarations become builder calls. Every declaration type has
/// `template <class S> void lower_into(lowering<S>&) const`, which records the builder calls
/// it stands for. Nodes are added before any edge (the builder needs a conditional edge's
/// source to exist), so the calls are kept in two lists and replayed in that order.

#include <stategraph/dsl/checks.hpp>

#include <stategraph/core/error.hpp>
#include <stategraph/state_graph.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::dsl {

namespace detail {

/// @brief The builder calls recorded for one stage (or the top level of a graph).
template <class S>
struct lowering {
    using op = std::function<void(state_graph<S>&)>;
    std::string stage;                  ///< stage of the nodes declared here ("" at the top level)
    std::vector<op> nodes;              ///< add_node and breakpoints
    std::vector<op> edges;              ///< add_edge and add_conditional_edges
    std::vector<graph_problem> problems; ///< mistakes seen while lowering (reported with compile()'s)

    void append(const lowering& other) {
        nodes.insert(nodes.end(), other.nodes.begin(), other.nodes.end());
        edges.insert(edges.end(), other.edges.begin(), other.edges.end());
        problems.insert(problems.end(), other.problems.begin(), other.problems.end());
    }
    /// Replays the recorded calls on `g`: nodes first, then edges.
    void apply(state_graph<S>& g) const {
        for (const auto& f : nodes) f(g);
        for (const auto& f : edges) f(g);
    }
};

/// @brief Something a stage or graph can hold.
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
