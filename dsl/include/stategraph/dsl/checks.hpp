#pragma once
/// @file checks.hpp
/// @brief The DSL's compile-time checks: one named check per user mistake, each a
/// `static_assert` whose message says what to write instead. Each has a compile-fail test in
/// tests/dsl/compile_fail/.
///
/// The checks return whether they passed, so callers can skip the code that would only add
/// more (and less readable) errors after the first one: `if constexpr (check::node<S, F>()) ...`.

#include <stategraph/command.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/context.hpp>
#include <stategraph/node.hpp>
#include <stategraph/state.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/describe/enumerators.hpp>

#include <string>
#include <type_traits>
#include <vector>

namespace stategraph::dsl {

namespace detail {

template <class...>
inline constexpr bool dependent_false = false;

/// The shape of a non-generic callable: its result and first parameter, or `none`.
struct none {};
template <class T>
struct signature_of {
    static constexpr bool known = false;
    using result = none;
    using first = none;
};
template <class R, class... A>
struct signature_of<R(A...)> {
    static constexpr bool known = true;
    using result = R;
    using first = std::remove_cvref_t<std::tuple_element_t<0, std::tuple<A..., none>>>;
};
template <class R, class... A> struct signature_of<R(A...) noexcept> : signature_of<R(A...)> {};
template <class R, class... A> struct signature_of<R (*)(A...)> : signature_of<R(A...)> {};
template <class R, class... A> struct signature_of<R (*)(A...) noexcept> : signature_of<R(A...)> {};
template <class C, class R, class... A> struct signature_of<R (C::*)(A...)> : signature_of<R(A...)> {};
template <class C, class R, class... A> struct signature_of<R (C::*)(A...) const> : signature_of<R(A...)> {};
template <class C, class R, class... A> struct signature_of<R (C::*)(A...) noexcept> : signature_of<R(A...)> {};
template <class C, class R, class... A> struct signature_of<R (C::*)(A...) const noexcept> : signature_of<R(A...)> {};

template <class F>
auto signature_impl() {
    if constexpr (requires { &F::operator(); }) return std::type_identity<signature_of<decltype(&F::operator())>>{};
    else return std::type_identity<signature_of<F>>{};
}
/// `signature<F>::result` / `::first`: known for function pointers, plain lambdas and functors
/// with one call operator; not for generic lambdas.
template <class F>
using signature = typename decltype(signature_impl<std::decay_t<F>>())::type;

template <class T> struct is_compiled_graph : std::false_type {};
template <class C> struct is_compiled_graph<compiled_graph<C>> : std::true_type {};

template <class T> struct vector_of { using type = none; };
template <class T, class A> struct vector_of<std::vector<T, A>> { using type = T; };

template <class T>
inline constexpr bool is_send_result_v = std::is_same_v<T, send> || std::is_same_v<T, std::vector<send>>;

template <class T>
inline constexpr bool is_name_v = std::is_convertible_v<T, std::string> && !std::is_same_v<T, none>;

/// What a node reads: the state when it can take it, else its first parameter (a Send
/// payload), else `none` (not a node).
template <class F, class S>
auto node_input_impl() {
    if constexpr (stategraph::detail::takes_context<F, S> || stategraph::detail::takes_input<F, S>) return std::type_identity<S>{};
    else return std::type_identity<typename signature<F>::first>{};
}
template <class F, class S>
using node_input = typename decltype(node_input_impl<F, S>())::type;

/// Marks a route map whose router's result type is not visible (a generic lambda).
struct unknown_result {};
/// Marks a route map whose router returns a type that cannot key a route map.
template <class R>
struct unsupported_result {};

/// The key type of a route map for a router returning `R`.
template <class R>
auto route_key_impl() {
    using T = std::remove_cvref_t<R>;
    if constexpr (std::is_same_v<T, none>) return std::type_identity<unknown_result>{};
    else if constexpr (std::is_same_v<T, bool> || std::is_enum_v<T> || std::is_integral_v<T>) return std::type_identity<T>{};
    else if constexpr (is_name_v<T> || is_name_v<typename vector_of<T>::type>) return std::type_identity<std::string>{};
    else return std::type_identity<unsupported_result<T>>{};
}
template <class R>
using route_key = typename decltype(route_key_impl<R>())::type;

template <class T> struct is_unsupported : std::false_type {};
template <class R> struct is_unsupported<unsupported_result<R>> : std::true_type {};

/// Whether a route-map key of type `Key` fits routes keyed by `K`.
template <class K, class Key>
constexpr bool route_key_fits() {
    using T = std::remove_cvref_t<Key>;
    if constexpr (std::is_same_v<K, std::string>) return is_name_v<T>;
    else if constexpr (std::is_same_v<K, bool> || std::is_enum_v<K>) return std::is_same_v<T, K>;
    else if constexpr (std::is_integral_v<K>) return std::is_integral_v<T> && !std::is_same_v<T, bool>;
    else return false;
}

} // namespace detail

/// @brief The named checks. Each returns whether it passed, after failing a `static_assert`
/// that explains the mistake.
namespace check {

/// @brief The graph's state type has Boost.Describe metadata.
template <class S>
constexpr bool described_state() {
    static_assert(stategraph::described_state<S>,
                  "stategraph::dsl: the state type S has no Boost.Describe metadata; add "
                  "BOOST_DESCRIBE_STRUCT(S, (), (field1, field2, ...)) after the struct, listing every field "
                  "(and give S a default constructor)");
    return stategraph::described_state<S>;
}

/// @brief `F` is a node of a graph over `S` (or a compiled graph, used as a subgraph).
template <class S, class F>
constexpr bool node() {
    if constexpr (detail::is_compiled_graph<F>::value) {
        return true;
    } else {
        using In = detail::node_input<F, S>;
        constexpr bool callable = !std::is_same_v<In, detail::none> &&
                                  (stategraph::detail::takes_context<F, In> || stategraph::detail::takes_input<F, In>);
        static_assert(callable,
                      "\"name\"_n = fn: fn is not a node: a node is called as fn(const S&) or "
                      "fn(const S&, stategraph::context&), where S is the graph's state type (a Send target may take "
                      "its payload type instead of S); write e.g. \"name\"_n = [](const S& s) { return "
                      "stategraph::update<S>{}.set<&S::field>(value); }");
        if constexpr (callable) {
            static_assert(node_of<F, S, In>,
                          "\"name\"_n = fn: a node must return stategraph::update<S>, stategraph::command<S>, void, or "
                          "boost::asio::awaitable<> of one of those, where S is the graph's state type; wrap what you "
                          "computed in an update, e.g. return stategraph::update<S>{}.set<&S::field>(value); (an update "
                          "of another state type belongs to a graph over that type)");
            return node_of<F, S, In>;
        } else {
            return false;
        }
    }
}

/// @brief Field `T S::*` belongs to the graph's state `G` and can key routes.
template <class G, class S, class T>
constexpr bool route_field() {
    static_assert(std::is_same_v<S, G>,
                  "on(&X::field, {...}): the field is a member of another state type than the graph's state S; "
                  "route on a field of S (on(&S::field, {...})), or use route(router, {...})");
    constexpr bool keyable = std::is_same_v<T, bool> || std::is_enum_v<T> || std::is_integral_v<T> ||
                             std::is_same_v<T, std::string>;
    static_assert(keyable,
                  "on(&S::field, {...}): routes on a field need an enum, bool, integer or std::string field; for other "
                  "fields write a router: route([](const S& s) { return ...; }, {{value, \"node\"_n}, ...})");
    return std::is_same_v<S, G> && keyable;
}

/// @brief An enum that routes is described, so that compile() can prove every value is mapped.
template <class T>
constexpr bool described_route_enum() {
    if constexpr (std::is_enum_v<T>) {
        static_assert(boost::describe::has_describe_enumerators<T>::value,
                      "routing on an enum needs its Boost.Describe metadata so that compile() can check every value "
                      "has a route; add BOOST_DESCRIBE_ENUM(E, value1, value2, ...) after the enum");
        return boost::describe::has_describe_enumerators<T>::value;
    } else {
        return true;
    }
}

/// @brief `F` is callable as a router of a graph over `S`.
template <class S, class F>
constexpr bool router() {
    static_assert(std::is_invocable_v<const F&, const S&>,
                  "route/fan_out(router, ...): the router must be callable as router(const S&), where S is the graph's "
                  "state type; write e.g. [](const S& s) { return s.field; }");
    return std::is_invocable_v<const F&, const S&>;
}

} // namespace check
} // namespace stategraph::dsl
