#pragma once
/// @file node.hpp
/// @brief What a node may be, and how the engine calls it.
///
/// A node is a callable taking the state (or, for a Send target, its payload type) and
/// optionally a `context&`, and returning one of: `update<S>`, `command<S>`, `void`, or an
/// `boost::asio::awaitable` of those.

#include <stategraph/command.hpp>
#include <stategraph/context.hpp>
#include <stategraph/detail/state_table.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <stdexcept>
#include <type_traits>

namespace stategraph {

/// @brief What a node produced: its update plus where it asked to go.
template <class S>
struct node_output {
    update<S> writes;
    std::vector<std::string> targets;
    std::vector<send> sends;
};

struct void_t_marker;

namespace detail {
template <class T> struct is_awaitable : std::false_type {};
template <class T, class E> struct is_awaitable<boost::asio::awaitable<T, E>> : std::true_type { using value_type = T; };

template <class R, class S>
inline constexpr bool is_node_value_v =
    std::is_same_v<R, update<S>> || std::is_same_v<R, command<S>> || std::is_void_v<R>;

template <class R, class S>
constexpr bool valid_node_result() {
    if constexpr (is_awaitable<R>::value) return is_node_value_v<typename is_awaitable<R>::value_type, S>;
    else return is_node_value_v<R, S>;
}

/// First parameter of a non-generic callable.
template <class F> struct first_arg : first_arg<decltype(&F::operator())> {};
template <class R, class A, class... Rest> struct first_arg<R (*)(A, Rest...)> { using type = std::remove_cvref_t<A>; };
template <class R, class A, class... Rest> struct first_arg<R(A, Rest...)> { using type = std::remove_cvref_t<A>; };
template <class C, class R, class A, class... Rest> struct first_arg<R (C::*)(A, Rest...) const> { using type = std::remove_cvref_t<A>; };
template <class C, class R, class A, class... Rest> struct first_arg<R (C::*)(A, Rest...)> { using type = std::remove_cvref_t<A>; };
template <class F> concept has_first_arg = requires { typename first_arg<std::decay_t<F>>::type; };

template <class F, class In>
concept takes_context = std::is_invocable_v<F&, const In&, context&>;
template <class F, class In>
concept takes_input = std::is_invocable_v<F&, const In&>;

template <class F, class In>
auto call_result_impl() {
    if constexpr (takes_context<F, In>) return std::type_identity<std::invoke_result_t<F&, const In&, context&>>{};
    else if constexpr (takes_input<F, In>) return std::type_identity<std::invoke_result_t<F&, const In&>>{};
    else return std::type_identity<void_t_marker*>{};
}
} // namespace detail

/// @brief `F` is a node of a graph over state `S` that reads input `In` (S itself, or a Send payload).
template <class F, class S, class In = S>
concept node_of = (detail::takes_context<F, In> || detail::takes_input<F, In>) &&
                  detail::valid_node_result<typename decltype(detail::call_result_impl<F, In>())::type, S>();

/// @brief The input type a node reads: the state when it can take it, else its first parameter.
template <class F, class S>
auto node_input_type() {
    if constexpr (detail::takes_context<F, S> || detail::takes_input<F, S>) return std::type_identity<S>{};
    else if constexpr (detail::has_first_arg<F>) return std::type_identity<typename detail::first_arg<std::decay_t<F>>::type>{};
    else return std::type_identity<void>{};
}
template <class F, class S>
using node_input_t = typename decltype(node_input_type<F, S>())::type;

namespace detail {

/// What the engine receives from a node of any state type: the update (empty when the node set
/// nothing), and where it asked to go.
struct node_result {
    update_box writes;
    std::vector<std::string> targets;
    std::vector<send> sends;
    std::shared_ptr<parent_handoff> parent; ///< a command for the parent graph (`command<S>::to_parent`)
};

template <class S, class R>
void to_result(node_result& out, R&& r) {
    if constexpr (std::is_same_v<std::decay_t<R>, update<S>>) {
        if (!r.empty()) out.writes = update_box::of<S>(std::move(r));
    } else {
        if (r.resume)
            throw std::invalid_argument("the node returned a command with a resume: a resume answers a thread's interrupts "
                                        "and is a caller's input (app.invoke(command<S>{}.with(resume(...)), cfg))");
        if (!r.writes.empty()) out.writes = update_box::of<S>(std::move(r.writes));
        out.targets = std::move(r.targets);
        out.sends = std::move(r.sends);
        out.parent = std::move(r.parent);
    }
}

/// How the engine calls a node: a plain function when the node is synchronous, else a coroutine.
/// Either writes the node's outcome into `out`.
struct node_call {
    std::function<void(const void* input, context&, node_result& out)> sync;
    std::function<boost::asio::awaitable<void>(const void* input, context&, node_result& out)> async;
};

template <class S, class In, class F>
node_call make_node_call(F fn) {
    using R = typename decltype(call_result_impl<F, In>())::type;
    auto invoke = [](F& f, const void* in, context& ctx) -> decltype(auto) {
        const In& input = *static_cast<const In*>(in);
        if constexpr (takes_context<F, In>) return f(input, ctx);
        else return f(input);
    };
    node_call call;
    if constexpr (is_awaitable<R>::value) {
        using V = typename is_awaitable<R>::value_type;
        call.async = [fn = std::move(fn), invoke](const void* in, context& ctx,
                                                  node_result& out) mutable -> boost::asio::awaitable<void> {
            if constexpr (std::is_void_v<V>) {
                auto a = invoke(fn, in, ctx);
                co_await std::move(a);
            } else {
                auto a = invoke(fn, in, ctx);
                V v = co_await std::move(a);
                to_result<S>(out, std::move(v));
            }
        };
    } else {
        call.sync = [fn = std::move(fn), invoke](const void* in, context& ctx, node_result& out) mutable {
            if constexpr (std::is_void_v<R>) {
                invoke(fn, in, ctx);
            } else {
                to_result<S>(out, invoke(fn, in, ctx));
            }
        };
    }
    return call;
}

} // namespace detail
} // namespace stategraph
