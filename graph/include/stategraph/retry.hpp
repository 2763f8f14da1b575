#pragma once
/// @file retry.hpp
/// @brief A node's retry policy, as LangGraph's RetryPolicy: attempts, initial interval,
/// backoff factor, max interval, jitter, and which errors are retried.

#include <chrono>
#include <exception>
#include <functional>
#include <cstdio>
#include <random>
#include <string>

namespace stategraph {

/// @brief How a failing node is retried inside its superstep.
/// A failed attempt is retried when attempts remain and `retry_on` accepts the error; then the
/// node fails for good (`node_error`, or its error handler runs). The wait does not block a thread:
/// it is a timer on the run's executor. Thread safety: a plain value; `retry_on` is called from
/// the runs using the policy, possibly at once.
struct retry_policy {
    int max_attempts = 3;                                   ///< attempts in all, the first included
    std::chrono::milliseconds initial_interval{500};        ///< wait before the second attempt
    double backoff_factor = 2.0;                            ///< each wait is this much longer
    std::chrono::milliseconds max_interval{128000};         ///< no wait is longer than this
    bool jitter = true;                                     ///< add up to 25% random time to a wait
    std::chrono::milliseconds timeout{0};                   ///< per-attempt time limit (0: none)
    std::function<bool(std::exception_ptr)> retry_on;       ///< which errors to retry (empty: all)

    /// @brief The wait before attempt `attempt` (2 for the first retry).
    /// @param attempt the attempt about to start, 2 or more.
    /// @return `initial_interval * backoff_factor^(attempt-2)`, capped at `max_interval`, plus up to
    /// 25% jitter when `jitter`.
    std::chrono::milliseconds delay_before(int attempt) const {
        double ms = static_cast<double>(initial_interval.count());
        for (int i = 2; i < attempt; ++i) ms *= backoff_factor;
        ms = std::min(ms, static_cast<double>(max_interval.count()));
        if (jitter && ms > 0) {
            thread_local std::mt19937 gen{std::random_device{}()};
            ms += std::uniform_real_distribution<double>(0, ms * 0.25)(gen);
        }
        return std::chrono::milliseconds(static_cast<long long>(ms));
    }
};

/// @brief The policy in words, stable across runs (for graph descriptions and diffs):
/// "attempts=3 initial=500ms backoff=2 max=128000ms jitter timeout=0ms" (+ " retry_on" when it filters).
/// @param p the policy.
inline std::string describe_retry(const retry_policy& p) {
    char backoff[32];
    std::snprintf(backoff, sizeof backoff, "%g", p.backoff_factor);
    return "attempts=" + std::to_string(p.max_attempts) + " initial=" + std::to_string(p.initial_interval.count()) +
           "ms backoff=" + backoff + " max=" + std::to_string(p.max_interval.count()) + "ms" + (p.jitter ? " jitter" : "") +
           " timeout=" + std::to_string(p.timeout.count()) + "ms" + (p.retry_on ? " retry_on" : "");
}

} // namespace stategraph
