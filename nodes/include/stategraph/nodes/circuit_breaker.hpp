#ifndef STATEGRAPH_NODES_CIRCUIT_BREAKER_HPP
#define STATEGRAPH_NODES_CIRCUIT_BREAKER_HPP

/// @file
/// @brief `circuit_breaker`: after N failures in a row an agent fails fast with
/// agent_error(errc::circuit_open); after a cool-down one trial call is let through.

#include <stategraph/context.hpp>
#include <stategraph/node.hpp>
#include <stategraph/nodes/error.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace stategraph::nodes {

/// @brief When a circuit_breaker opens and for how long.
/// Thread safety: a plain value, copied by the breaker.
struct circuit_options {
    int failure_threshold = 3;                        ///< @brief Failures in a row that open the circuit.
    std::chrono::milliseconds cool_down{30'000};      ///< @brief How long it stays open before a trial call.
};

/// @brief The state of a circuit_breaker.
enum class circuit_state { closed, open, half_open };

/// @brief A circuit breaker for one agent (or any node), kept in process memory and shared by
/// the runs that use it. Thread safe.
///
/// closed: calls run; a failure counts, a success resets the count; `failure_threshold`
/// failures in a row open it. open: calls fail fast with agent_error(errc::circuit_open)
/// (naming the breaker and the time left) until `cool_down` has passed; then half_open: one
/// trial call runs (others still fail fast); its success closes the circuit, its failure opens
/// it again for another cool-down. An interrupt is not a failure. Each attempt of a node's
/// retry policy counts, so retries stop early with circuit_open once the circuit opens.
/// Thread safety: every member takes one mutex; share one breaker (by `shared_ptr`) across runs and
/// threads. It is per process: other processes keep their own count.
class circuit_breaker {
public:
    using clock = std::chrono::steady_clock;

    /// @param name shown in the `circuit_open` message.
    /// @param options failures in a row that open it (at least 1, else `std::invalid_argument`) and
    /// the cool-down in milliseconds (default 30 s).
    explicit circuit_breaker(std::string name, circuit_options options = {})
        : name_(std::move(name)), options_(options) {
        if (options_.failure_threshold < 1)
            throw std::invalid_argument("circuit_breaker '" + name_ + "': failure_threshold must be at least 1");
    }

    std::string const& name() const noexcept { return name_; }

    /// @brief The state now (an open circuit whose cool-down has passed reads half_open).
    circuit_state state() const {
        std::lock_guard lock(mutex_);
        if (state_ == circuit_state::open && clock::now() >= opened_at_ + options_.cool_down) return circuit_state::half_open;
        return state_;
    }

    /// @brief Before a call: throws agent_error(errc::circuit_open) when the call may not run.
    void before_call() {
        std::lock_guard lock(mutex_);
        if (state_ == circuit_state::closed) return;
        auto const now = clock::now();
        if (state_ == circuit_state::open && now >= opened_at_ + options_.cool_down && !trial_running_) {
            state_ = circuit_state::half_open;
            trial_running_ = true;
            return;
        }
        auto const left = std::chrono::duration_cast<std::chrono::milliseconds>(opened_at_ + options_.cool_down - now);
        throw agent_error(errc::circuit_open,
                          "circuit breaker '" + name_ + "' is open after " + std::to_string(failures_) +
                              " failure(s) in a row; " +
                              (state_ == circuit_state::half_open ? std::string("a trial call is running")
                                                                   : "next trial in " + std::to_string(left.count()) + " ms"));
    }

    /// @brief After a call that succeeded.
    void on_success() {
        std::lock_guard lock(mutex_);
        state_ = circuit_state::closed;
        failures_ = 0;
        trial_running_ = false;
    }

    /// @brief After a call that stopped for a human (not a failure): a trial may run again.
    void on_interrupt() {
        std::lock_guard lock(mutex_);
        trial_running_ = false;
    }

    /// @brief After a call that failed.
    void on_failure() {
        std::lock_guard lock(mutex_);
        ++failures_;
        trial_running_ = false;
        if (state_ == circuit_state::half_open || failures_ >= options_.failure_threshold) {
            state_ = circuit_state::open;
            opened_at_ = clock::now();
        }
    }

private:
    std::string name_;
    circuit_options options_;
    mutable std::mutex mutex_;
    circuit_state state_ = circuit_state::closed;
    int failures_ = 0;
    bool trial_running_ = false;
    clock::time_point opened_at_{};
};

namespace detail {
template <class R> struct breaker_value { using type = R; };
template <class T, class E> struct breaker_value<boost::asio::awaitable<T, E>> { using type = T; };
}  // namespace detail

/// @brief The node @p node guarded by @p breaker: `"billing"_n = guarded<S>(breaker, billing)`
/// (or as a supervisor intent). The node must return update<S> or command<S> (or an awaitable
/// of one). A call refused by the breaker throws agent_error(errc::circuit_open) without
/// running the node.
/// @tparam S the graph's state type.
/// @tparam F the node: `node(const S&[, context&])` returning `update<S>`, `command<S>` or an
/// awaitable of one (checked by `static_assert`s).
/// @param breaker the shared breaker; null throws `std::invalid_argument`.
/// @param node the guarded node, moved into the returned node.
/// @return a coroutine node `(const S&, context&) -> awaitable<V>`; an exception of `node` counts
/// as a failure and propagates (so the node's retry policy applies), an interrupt does not count.
/// Thread safety: the returned node may run in many runs at once (the breaker is shared).
template <class S, class F>
auto guarded(std::shared_ptr<circuit_breaker> breaker, F node) {
    static_assert(node_of<F, S>,
                  "guarded<S>(breaker, node): node must be a node of a graph over S (callable as node(const S&) or "
                  "node(const S&, stategraph::context&))");
    using R = typename decltype(stategraph::detail::call_result_impl<F, S>())::type;
    using V = typename detail::breaker_value<R>::type;
    static_assert(!std::is_void_v<V>, "guarded<S>(breaker, node): the node must return update<S> or command<S>");
    if (!breaker) throw std::invalid_argument("guarded: no circuit breaker");
    return [breaker, node = std::move(node)](S const& s, stategraph::context& ctx) mutable -> boost::asio::awaitable<V> {
        breaker->before_call();
        std::exception_ptr failure;
        std::optional<V> result;
        try {
            if constexpr (stategraph::detail::is_awaitable<R>::value) {
                auto pending = [&] {
                    if constexpr (stategraph::detail::takes_context<F, S>) return node(s, ctx);
                    else return node(s);
                }();
                result.emplace(co_await std::move(pending));
            } else {
                if constexpr (stategraph::detail::takes_context<F, S>) result.emplace(node(s, ctx));
                else result.emplace(node(s));
            }
        } catch (stategraph::interrupt_signal const&) {
            breaker->on_interrupt();
            failure = std::current_exception();
        } catch (...) {
            breaker->on_failure();
            failure = std::current_exception();
        }
        if (failure) std::rethrow_exception(failure);
        breaker->on_success();
        co_return std::move(*result);
    };
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_CIRCUIT_BREAKER_HPP
