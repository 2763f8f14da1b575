#pragma once
/// @file error_handler.hpp
/// @brief A node's error handler, as LangGraph's `error_handler`: a fallback that runs when the
/// node fails for good (after its retries), receives the failure and the state, and whose update
/// or Command stands in for the node's.

#include <stategraph/core/error.hpp>
#include <stategraph/node.hpp>

#include <boost/asio/awaitable.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <utility>

namespace stategraph {

/// @brief What an error handler is told about the failure.
struct node_failure {
    std::string node;        ///< the node that failed
    std::string message;     ///< its exception's `what()`
    errc code = errc::ok;    ///< the `graph_error`'s kind (say `node_timeout`), `ok` for other exceptions
    int attempts = 1;        ///< attempts made, retries included
    std::exception_ptr error; ///< the exception itself
};

/// @brief Thrown when an error handler itself fails: `errc::node_failed`, naming the node first
/// and the handler second; `nested()` is the handler's exception, `node_failure()` the node's.
/// Thread safety: an immutable exception object; copies may be read from any thread.
class error_handler_error : public graph_error {
public:
    error_handler_error(std::string node, std::string handler, std::exception_ptr handler_error,
                        std::exception_ptr node_error, const std::string& what)
        : graph_error(errc::node_failed, what, {node, handler}), inner_(std::move(handler_error)),
          node_error_(std::move(node_error)) {}
    const std::string& node() const noexcept { return names()[0]; }
    const std::string& handler() const noexcept { return names()[1]; }
    std::exception_ptr nested() const noexcept { return inner_; }
    std::exception_ptr node_failure() const noexcept { return node_error_; }

private:
    std::exception_ptr inner_, node_error_;
};

namespace detail {
template <class F, class S>
concept handler_with_context = std::is_invocable_v<F&, const S&, const node_failure&, context&>;
template <class F, class S>
concept handler_without_context = std::is_invocable_v<F&, const S&, const node_failure&>;

template <class F, class S>
auto handler_result_impl() {
    if constexpr (handler_with_context<F, S>) return std::type_identity<std::invoke_result_t<F&, const S&, const node_failure&, context&>>{};
    else if constexpr (handler_without_context<F, S>) return std::type_identity<std::invoke_result_t<F&, const S&, const node_failure&>>{};
    else return std::type_identity<void_t_marker*>{};
}

template <class F>
auto handler_state_impl() {
    if constexpr (has_first_arg<F>) return std::type_identity<typename first_arg<std::decay_t<F>>::type>{};
    else return std::type_identity<void>{};
}
} // namespace detail

/// @brief `F` is an error handler of a graph over `S`: callable as `f(const S&, const node_failure&)`
/// or `f(const S&, const node_failure&, context&)`, returning what a node may return.
template <class F, class S>
concept error_handler_of = (detail::handler_with_context<F, S> || detail::handler_without_context<F, S>) &&
                           detail::valid_node_result<typename decltype(detail::handler_result_impl<F, S>())::type, S>();

/// @brief An error handler with a name (the name appears in errors and debug events). Built from
/// any callable `f(const S&, const node_failure&[, context&])` returning `update<S>`, `command<S>`,
/// `void`, or an awaitable of those: `node_options{.on_error = apologize}` or
/// `node_options{.on_error = {"apologize", apologize}}`.
/// Thread safety: immutable once built; one handler (or copies) may serve many runs at once, so the
/// callable must be safe to call concurrently. It runs on the run's executor, in the failed node's
/// task; it may not interrupt (that is an `error_handler_error`).
class error_handler {
public:
    error_handler() = default;
    template <class F>
        requires(!std::is_same_v<std::remove_cvref_t<F>, error_handler>)
    /// @brief A handler named "error_handler".
    /// @tparam F the callable's type; its first parameter's type is the state it reads, checked against
    /// the graph's state by `compile()` (`errc::invalid_input`).
    /// @param fn the handler, moved in.
    error_handler(F fn) : error_handler("error_handler", std::move(fn)) {}

    /// @brief A named handler.
    /// @tparam F as above.
    /// @param name shown in errors, debug events and graph descriptions.
    /// @param fn the handler, moved in.
    template <class F>
    error_handler(std::string name, F fn) : name_(std::move(name)) {
        using S = typename decltype(detail::handler_state_impl<F>())::type;
        static_assert(!std::is_void_v<S> && error_handler_of<F, S>,
                      "error_handler: a handler must be callable as f(const S&, const stategraph::node_failure&) or "
                      "f(const S&, const stategraph::node_failure&, stategraph::context&), where S is the graph's state, "
                      "and return stategraph::update<S>, stategraph::command<S>, void, or an awaitable of those");
        if constexpr (!std::is_void_v<S> && error_handler_of<F, S>) {
            state_ = typeid(S);
            make<S>(std::move(fn));
        }
    }

    explicit operator bool() const noexcept { return call_ != nullptr; }
    const std::string& name() const noexcept { return name_; }
    /// @brief The state type the handler reads.
    std::type_index state_type() const noexcept { return state_; }

    /// @brief How the engine calls it (the handler writes its outcome into `out`).
    struct call_type {
        std::function<void(const void* state, const node_failure&, context&, detail::node_result& out)> sync;
        std::function<boost::asio::awaitable<void>(const void* state, const node_failure&, context&, detail::node_result& out)>
            async;
    };
    const call_type& call() const noexcept { return *call_; }

private:
    template <class S, class F>
    void make(F fn) {
        using R = typename decltype(detail::handler_result_impl<F, S>())::type;
        auto invoke = [](F& f, const void* s, const node_failure& e, context& ctx) -> decltype(auto) {
            const S& state = *static_cast<const S*>(s);
            if constexpr (detail::handler_with_context<F, S>) return f(state, e, ctx);
            else return f(state, e);
        };
        auto c = std::make_shared<call_type>();
        if constexpr (detail::is_awaitable<R>::value) {
            using V = typename detail::is_awaitable<R>::value_type;
            c->async = [fn = std::move(fn), invoke](const void* s, const node_failure& e, context& ctx,
                                                    detail::node_result& out) mutable -> boost::asio::awaitable<void> {
                auto a = invoke(fn, s, e, ctx);
                if constexpr (std::is_void_v<V>) {
                    co_await std::move(a);
                } else {
                    V v = co_await std::move(a);
                    detail::to_result<S>(out, std::move(v));
                }
            };
        } else {
            c->sync = [fn = std::move(fn), invoke](const void* s, const node_failure& e, context& ctx,
                                                   detail::node_result& out) mutable {
                if constexpr (std::is_void_v<R>) invoke(fn, s, e, ctx);
                else detail::to_result<S>(out, invoke(fn, s, e, ctx));
            };
        }
        call_ = std::move(c);
    }

    std::string name_;
    std::type_index state_ = typeid(void);
    std::shared_ptr<const call_type> call_;
};

} // namespace stategraph
