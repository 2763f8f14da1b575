#pragma once
/// @file stage.hpp
/// @brief `stage<S>("name", ...)`: a named group of declarations, written as a table in its own
/// function (or file) and composed into a graph. Nodes declared in a stage are drawn in one
/// Graphviz cluster. A stage may hold nodes, chains, routes, joins, breakpoints and other stages
/// (a node keeps the stage it was declared in).
/// @code
/// stategraph::dsl::stage_decl<turn> memory_stage() {
///     using namespace stategraph::dsl;
///     // clang-format off
///     return stage<turn>("memory",
///         "resolve"_n  = resolve_entities,
///         "retrieve"_n = retrieve | retry({.max_attempts = 3}),
///         "resolve"_n >> "retrieve"_n);
///     // clang-format on
/// }
/// @endcode

#include <stategraph/dsl/checks.hpp>
#include <stategraph/dsl/lowering.hpp>

#include <string>
#include <type_traits>
#include <utility>

namespace stategraph::dsl {

/// @brief A stage: its name and the builder calls its declarations lower to. Cheap to copy.
/// @tparam S the state of the graph the stage goes into (checked by a `static_assert`).
/// Thread safety: immutable after construction; copies may be used from any thread.
template <class S>
class stage_decl {
public:
    using state_type = S;

    stage_decl(std::string name, detail::lowering<S> body) : name_(std::move(name)), body_(std::move(body)) {}

    /// @brief The stage's name (its cluster label).
    const std::string& name() const noexcept { return name_; }

    /// @brief Adds the stage's declarations to the enclosing stage or graph.
    template <class G>
    [[gnu::cold]] void lower_into(detail::lowering<G>& out) const {
        static_assert(std::is_same_v<S, G>,
                      "stage<X>(...) placed in a graph<S> (or stage<S>) of another state type; declare the stage "
                      "with the graph's state: stage<S>(\"name\", ...)");
        if constexpr (std::is_same_v<S, G>) out.append(body_);
    }

private:
    std::string name_;
    detail::lowering<S> body_;
};

/// @brief Declares stage `name` of a graph over `S`.
/// @tparam S the graph's state type.
/// @tparam Items the declarations' types (as for `graph<S>(...)`).
/// @param name the stage's name: the Graphviz cluster label and `node_spec::stage` of its nodes.
/// @param items nodes, chains, routes, joins, breakpoints and nested stages, copied.
/// @return the stage, to pass to `graph<S>(...)` or to another stage.
/// Thread safety: a pure function; any thread.
template <class S, class... Items>
[[gnu::cold]] stage_decl<S> stage(std::string name, const Items&... items) {
    detail::lowering<S> body;
    if constexpr (check::described_state<S>()) {
        body.stage = name;
        (detail::lower_item(body, items), ...);
    }
    return stage_decl<S>(std::move(name), std::move(body));
}

} // namespace stategraph::dsl
