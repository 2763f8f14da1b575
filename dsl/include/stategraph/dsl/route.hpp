#pragma once
/// @file route.hpp
/// @brief Conditional edges in the DSL. A route ends a chain:
/// @code
/// "classify"_n >> on(&turn::retrieval, {{retrieval_path::skip,     "assemble"_n},   // on a state field
///                                       {retrieval_path::semantic, "resolve"_n}}),
/// "triage"_n   >> on(&turn::kind, {{kind::lookup, parallel("orders"_n, "account"_n)},  // a value leads to
///                                  {kind::chat,   "agent"_n}}),                         // both (one step)
/// "check"_n    >> route(is_done, {{true, end}, {false, "retry"_n}}),                // on a router's result
/// "pick"_n     >> route(next_node_name, {"a"_n, "b"_n}),                           // router returns names
/// "plan"_n     >> fan_out(one_send_per_task, {"worker"_n}),                         // router returns Sends
/// @endcode
/// The keys of a route map must have the router's (or field's) type: that is checked by the
/// compiler. With a described enum, compile() checks that every value has a route.

#include <stategraph/dsl/checks.hpp>
#include <stategraph/dsl/flow.hpp>
#include <stategraph/dsl/lowering.hpp>
#include <stategraph/dsl/node.hpp>

#include <stategraph/core/error.hpp>
#include <stategraph/detail/keyed_routes.hpp>
#include <stategraph/state_graph.hpp>


#include <concepts>
#include <initializer_list>
#include <typeinfo>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::dsl {

/// @brief One entry of a route map, `{key, "node"_n}`, for routes keyed by `K`; or
/// `{key, parallel("a"_n, "b"_n)}`: that value leads to every node listed, all run in the next
/// step (a conditional fan-out, as a LangGraph router returning a list). The key's type is
/// checked against `K` (the router's result type, or the field's type).
/// @tparam K the route's key type: the router's result type, or the field's type.
/// Thread safety: a plain value; distinct objects are independent.
template <class K>
class route_to {
public:
    /// @tparam Key the key as written; it must convert to `K` (a `static_assert` says what to write).
    /// @param key the route value.
    /// @param target the node (or `end`) it leads to.
    template <class Key>
    route_to(Key key, node_ref target) : route_to(std::move(key), std::vector<std::string>{target.name()}) {}
    /// @tparam Key as above.
    /// @param key the route value.
    /// @param targets the nodes it leads to, all run in the next step.
    template <class Key>
    route_to(Key key, const parallel_nodes& targets) : route_to(std::move(key), targets.names) {}

    const K& key() const noexcept { return key_; }
    /// @brief The node(s) the value leads to.
    const std::vector<std::string>& targets() const noexcept { return targets_; }

private:
    template <class Key>
    route_to(Key key, std::vector<std::string> targets) : targets_(std::move(targets)) {
        static_assert(!std::is_same_v<K, detail::unknown_result>,
                      "route(router, {{key, \"node\"_n}, ...}): the router's result type cannot be seen (a generic "
                      "lambda, or an overloaded call operator); take the state as const S& instead of auto, or name "
                      "the result type: route<R>(router, {...})");
        static_assert(!detail::is_unsupported<K>::value,
                      "route(router, {{key, \"node\"_n}, ...}): a route map needs a router returning an enum, bool, "
                      "integer or string (or a vector of strings); for Sends write fan_out(router, {\"worker\"_n}), "
                      "for a router returning node names write route(router, {\"a\"_n, \"b\"_n})");
        constexpr bool fits = detail::route_key_fits<K, Key>();
        static_assert(fits || std::is_same_v<K, detail::unknown_result> || detail::is_unsupported<K>::value,
                      "route map: a key does not have the router's result type; write each key as a value of the type "
                      "the router returns (or the field's type for on(&S::field, ...)), e.g. {{my_enum::value, "
                      "\"node\"_n}, ...} for a router returning my_enum, or change the router's return type");
        if constexpr (fits) key_ = K(std::move(key));
    }

    K key_{};
    std::vector<std::string> targets_;
};

namespace detail {

/// `'a'` or `'a', 'b'`, for messages.
/// Adds the problem of a route on a member of `state` (of type `field`) that its
/// BOOST_DESCRIBE_STRUCT does not list (compiled in the DSL's library).
void report_undescribed_route(std::vector<graph_problem>& problems, const std::string& from, const std::type_info& state,
                              const std::type_info& field);

/// A route map in key order; a key given twice keeps its first targets and is reported by
/// `compile()` (as `duplicate_route`, naming the edge's source).
template <class K>
[[gnu::cold]] stategraph::detail::keyed_routes<K> keyed(std::initializer_list<route_to<K>> routes) {
    stategraph::detail::keyed_routes<K> out;
    // An unknown or unsupported key type is reported by route_to's static_asserts.
    if constexpr (!std::is_same_v<K, unknown_result> && !is_unsupported<K>::value)
        for (const auto& r : routes) out.insert(r.key(), r.targets());
    return out;
}

template <class R, class F>
using route_key_for = route_key<std::conditional_t<std::is_void_v<R>, typename signature<F>::result, R>>;

} // namespace detail

/// @brief A route on a field of the state: `on(&S::field, {{value, "node"_n}, ...})`.
template <class S, class T>
struct on_field {
    using is_route = void;
    T S::*field;
    stategraph::detail::keyed_routes<T> routes;

    template <class G>
    [[gnu::cold]] void lower_route(detail::lowering<G>& out, const std::string& from) const {
        if constexpr (check::route_field<G, S, T>() && check::described_route_enum<T>()) {
            if (!is_described_member(field)) {
                detail::report_undescribed_route(out.problems, from, typeid(S), typeid(T));
            } // lowered all the same: only this problem is reported, not its consequences
            stategraph::detail::report_duplicates(routes.table, from, out.problems);
            out.routes.push_back([from, f = field, map = routes](state_graph<G>& g) {
                g.add_conditional_edges(from, [f](const G& s) -> T { return s.*f; }, map);
            });
        }
    }
};

/// @brief Routes on `field` of the state: each value in the map leads to its node (or nodes).
/// @tparam S the state type (must be the graph's: checked when placed in `graph<S>`).
/// @tparam T the field's type: a described enum, bool, integer or string.
/// @param field `&S::field`, a member listed in `BOOST_DESCRIBE_STRUCT` (an unlisted one is an
/// `undescribed_field` problem of `compile()`).
/// @param routes value -> node(s); a value mapped twice is a `duplicate_route` problem, a described
/// enum value left out an `unmapped_route` one; an unmapped value at run time fails the call.
/// Thread safety: a pure function; any thread.
template <class S, class T>
on_field<S, T> on(T S::*field, std::initializer_list<route_to<T>> routes) {
    return {field, detail::keyed(routes)};
}

/// @brief A route on a router's result, through a route map.
template <class F, class K>
struct routed_by {
    using is_route = void;
    F router;
    stategraph::detail::keyed_routes<K> routes;

    template <class G>
    [[gnu::cold]] void lower_route(detail::lowering<G>& out, const std::string& from) const {
        // An unknown or unsupported key type was already reported by route_to.
        constexpr bool keyed = !std::is_same_v<K, detail::unknown_result> && !detail::is_unsupported<K>::value;
        if constexpr (keyed && check::router<G, F>()) {
            using R = std::remove_cvref_t<std::invoke_result_t<const F&, const G&>>;
            static_assert(std::is_same_v<detail::route_key<R>, K>,
                          "route<R>(router, {...}): R is not the router's result type; write the type the router "
                          "returns, or leave R out");
            if constexpr (std::is_same_v<detail::route_key<R>, K> && check::described_route_enum<R>()) {
                stategraph::detail::report_duplicates(routes.table, from, out.problems);
                out.routes.push_back([from, router = router, map = routes](state_graph<G>& g) {
                    g.add_conditional_edges(from, router, map);
                });
            }
        }
    }
};

/// @brief A route on a router returning node names (or a list of them) itself, or, for
/// `fan_out` (`Sends`), returning Sends; `targets` lists every node it may lead to.
template <class F, bool Sends>
struct routed_to {
    using is_route = void;
    F router;
    std::vector<std::string> targets;

    template <class G>
    [[gnu::cold]] void lower_route(detail::lowering<G>& out, const std::string& from) const {
        if constexpr (check::router<G, F>()) {
            using R = std::remove_cvref_t<std::invoke_result_t<const F&, const G&>>;
            constexpr bool fits = Sends ? detail::is_send_result_v<R>
                                        : detail::is_name_v<R> || detail::is_name_v<typename detail::vector_of<R>::type>;
            static_assert(fits || !Sends,
                          "fan_out(router, {...}): the router must return stategraph::send or "
                          "std::vector<stategraph::send>; for routes by value write route(router, {{value, \"node\"_n}, ...})");
            static_assert(fits || Sends,
                          "route(router, {\"a\"_n, ...}): with a list of targets, the router must return a node name "
                          "(std::string) or a std::vector of them; for routes by value write route(router, {{value, "
                          "\"node\"_n}, ...}), for Sends fan_out(router, {...})");
            if constexpr (fits) {
                out.routes.push_back([from, router = router, targets = targets](state_graph<G>& g) {
                    g.add_conditional_edges(from, router, targets);
                });
            }
        }
    }
};

/// @brief Routes on `router(state)` through a route map: `route(fn, {{value, "node"_n}, ...})`.
/// The keys must have the router's result type; write `route<R>(fn, ...)` when the router is a
/// generic lambda.
template <class R = void, class F>
routed_by<std::decay_t<F>, detail::route_key_for<R, std::decay_t<F>>>
/// @tparam R the router's result type, needed only for a generic lambda (default: read from `F`).
/// @tparam F the router: callable as `router(const S&)`; called on the run's executor, possibly by
/// several runs at once.
/// @param router copied or moved into the route.
/// @param routes value -> node(s), keyed by the router's result type.
route(F&& router, std::initializer_list<route_to<detail::route_key_for<R, std::decay_t<F>>>> routes) {
    return {std::forward<F>(router), detail::keyed(routes)};
}

/// @brief Routes on a router returning a node name (or a vector of names); `targets` lists
/// every node it may return: `route(fn, {"a"_n, "b"_n})`.
/// @tparam F the router, returning a node name or a `std::vector` of names.
/// @param router copied or moved into the route; a returned name that is not a node fails the call
/// with `graph_error(invalid_route)`.
/// @param targets every node the router may return (checked and drawn).
template <class F>
routed_to<std::decay_t<F>, false> route(F&& router, std::initializer_list<node_ref> targets) {
    routed_to<std::decay_t<F>, false> r{std::forward<F>(router), {}};
    for (const auto& t : targets) r.targets.push_back(t.name());
    return r;
}

/// @brief Map-reduce fan-out: the router returns `send` or `std::vector<send>`; `targets` lists
/// the nodes it sends to: `fan_out(fn, {"worker"_n})`.
/// @tparam F the router, returning `send` or `std::vector<send>`.
/// @param router copied or moved into the route.
/// @param targets every node the Sends address (checked and drawn).
template <class F>
routed_to<std::decay_t<F>, true> fan_out(F&& router, std::initializer_list<node_ref> targets) {
    routed_to<std::decay_t<F>, true> r{std::forward<F>(router), {}};
    for (const auto& t : targets) r.targets.push_back(t.name());
    return r;
}

/// @brief What may end a chain: `on(...)`, `route(...)`, `fan_out(...)`.
template <class T>
concept route_spec = requires { typename std::remove_cvref_t<T>::is_route; };

/// @brief A chain that ends in a route.
template <class Route>
struct routed_flow {
    flow head;
    Route route;

    template <class S>
    [[gnu::cold]] void lower_into(detail::lowering<S>& out) const {
        head.lower_into(out);
        for (const auto& from : head.tail) route.template lower_route<S>(out, from);
    }
};

/// @brief A conditional edge from every node at the end of `from`.
/// @tparam A a node, `parallel(...)` or a chain (not a `join`: a `static_assert`).
/// @tparam R `on(...)`, `route(...)` or `fan_out(...)`.
/// @param from the nodes after which the route runs (each gets the route).
/// @param route the route, moved into the chain.
template <flow_source A, route_spec R>
routed_flow<std::remove_cvref_t<R>> operator>>(const A& from, R&& route) {
    static_assert(!std::same_as<A, join_sources>,
                  "join(a, b) >> route: a join leads to one node; write join(a, b) >> \"c\"_n, then \"c\"_n >> "
                  "route(...)");
    if constexpr (std::same_as<A, join_sources>) {
        return {flow{}, std::forward<R>(route)};
    } else {
        return {detail::as_flow(from), std::forward<R>(route)};
    }
}

/// @brief Nothing follows a route: its targets are where the next chains start.
template <class Route, class X>
routed_flow<Route> operator>>(const routed_flow<Route>& chain, const X&) {
    static_assert(detail::dependent_false<X>,
                  "a >> route(...) >> x: a route ends a chain (it leads to several nodes); start the next chain "
                  "from each route target, e.g. \"target\"_n >> x");
    return chain;
}

} // namespace stategraph::dsl
