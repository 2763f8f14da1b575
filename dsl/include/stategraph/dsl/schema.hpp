#pragma once
/// @file schema.hpp
/// @brief `input_schema<I>(map)` and `output_schema<O>(map)` as items of `graph<S>(...)` (or of a
/// stage): the shapes callers send and get back, apart from the state (LangGraph's
/// `input_schema` / `output_schema`). They lower to `state_graph<S>::input_schema` /
/// `output_schema`, which say what `map` may be.
/// @code
/// graph<turn>("chat",
///             input_schema<chat_input>([](const chat_input& in, const turn& now) { return ...; }),
///             output_schema<chat_output>([](const turn& s) { return chat_output{s.reply}; }),
///             stages...);
/// @endcode

#include <stategraph/dsl/lowering.hpp>

#include <stategraph/state_graph.hpp>

#include <utility>

namespace stategraph::dsl {

namespace detail {

/// The input schema `I`, mapped by `F` (or by name when `F` is void).
template <class I, class F>
struct input_schema_decl {
    F map;
    template <class S>
    void lower_into(lowering<S>& out) const {
        out.nodes.push_back([m = map](state_graph<S>& g) { g.template input_schema<I>(m); });
    }
};
template <class I>
struct input_schema_decl<I, void> {
    template <class S>
    void lower_into(lowering<S>& out) const {
        out.nodes.push_back([](state_graph<S>& g) { g.template input_schema<I>(); });
    }
};

/// The output schema `O`, mapped by `F` (or by name when `F` is void).
template <class O, class F>
struct output_schema_decl {
    F map;
    template <class S>
    void lower_into(lowering<S>& out) const {
        out.nodes.push_back([m = map](state_graph<S>& g) { g.template output_schema<O>(m); });
    }
};
template <class O>
struct output_schema_decl<O, void> {
    template <class S>
    void lower_into(lowering<S>& out) const {
        out.nodes.push_back([](state_graph<S>& g) { g.template output_schema<O>(); });
    }
};

} // namespace detail

/// @brief The graph's input `I`, turned into a state update by `map(const I&, const S& current)`
/// or `map(const I&)`.
/// @tparam I a described struct: what callers send.
/// @tparam F `map`'s type; checked when the graph is built (`state_graph::input_schema`).
/// @param map copied into the graph; called once per call that sends an `I`, on the run's executor.
/// Thread safety: a pure function; any thread.
template <class I, class F>
detail::input_schema_decl<I, F> input_schema(F map) {
    return {std::move(map)};
}
/// @brief The graph's input `I`, whose members are state fields of the same names.
/// @tparam I a described struct whose members are state fields (others: a `compile()` problem).
template <class I>
detail::input_schema_decl<I, void> input_schema() {
    return {};
}
/// @brief The graph's output `O`, made by `map(const S&)` or `map(const S&, const output_context&)`.
/// @tparam O a described struct: what callers get back.
/// @tparam F `map`'s type; checked when the graph is built (`state_graph::output_schema`).
/// @param map copied into the graph; called at the end of each call, on the run's executor.
template <class O, class F>
detail::output_schema_decl<O, F> output_schema(F map) {
    return {std::move(map)};
}
/// @brief The graph's output `O`, whose members are state fields of the same names.
/// @tparam O a described struct whose members are state fields (others: a `compile()` problem).
template <class O>
detail::output_schema_decl<O, void> output_schema() {
    return {};
}

} // namespace stategraph::dsl
