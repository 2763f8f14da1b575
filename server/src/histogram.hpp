#pragma once
// Internal to stategraph::server: a Prometheus histogram of durations in seconds, observed with
// relaxed atomics (no lock; a scrape reads a consistent-enough snapshot, as Prometheus clients do).

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace stategraph::server {

class histogram {
public:
    /// `bounds`: the buckets' upper bounds, ascending (the +Inf bucket is implicit).
    explicit histogram(std::vector<double> bounds)
        : bounds_(std::move(bounds)), counts_(std::make_unique<std::atomic<std::uint64_t>[]>(bounds_.size() + 1)) {}

    void observe(double v) noexcept {
        std::size_t i = 0;
        while (i < bounds_.size() && v > bounds_[i]) ++i;
        counts_[i].fetch_add(1, std::memory_order_relaxed);
        sum_.fetch_add(v, std::memory_order_relaxed);
    }
    const std::vector<double>& bounds() const noexcept { return bounds_; }
    /// Observations in bucket `i` alone (not cumulative); `i == bounds().size()`: above the last bound.
    std::uint64_t bucket(std::size_t i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }
    double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

    /// Prometheus's default buckets (seconds), for requests and nodes.
    static std::vector<double> default_seconds() { return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}; }

private:
    std::vector<double> bounds_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
    std::atomic<double> sum_{0};
};

} // namespace stategraph::server
