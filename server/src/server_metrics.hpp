#pragma once
// Internal to stategraph::server: what `GET /metrics` shows of this instance (counters and
// histograms it keeps since it started) and of the run store (runs by status). Written on the
// server's one io_context thread, as the rest of its state: no lock.

#include "histogram.hpp"
#include "prometheus_text.hpp"

#include <stategraph/run_observer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace stategraph::server {

struct server_metrics {
    std::uint64_t runs_started = 0;                  ///< runs this instance began to execute
    std::map<std::string, std::uint64_t> runs_ended; ///< by final status, on this instance
    histogram run_seconds{{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}};
    /// by graph id, then node name (std::map: a histogram does not move)
    std::map<std::pair<std::string, std::string>, histogram, std::less<>> node_seconds;
    std::map<std::pair<std::string, std::string>, std::uint64_t, std::less<>> node_failures;
    histogram checkpoint_write_seconds{{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};
    std::map<std::string, token_usage, std::less<>> tokens_by_model;

    void node_ended(const std::string& graph, std::string_view node, std::chrono::steady_clock::duration took, bool failed);
    /// The exposition text; `runs_by_status` read from the run store (every instance's runs).
    std::string render(const std::map<std::string, std::int64_t>& runs_by_status) const;
};

/// Seconds of a steady_clock duration.
inline double seconds_of(std::chrono::steady_clock::duration d) { return std::chrono::duration<double>(d).count(); }

} // namespace stategraph::server
