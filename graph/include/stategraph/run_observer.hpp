#pragma once
/// @file run_observer.hpp
/// @brief `run_observer`: what a caller learns of a run besides its streams (how long each node
/// took, how long each checkpoint write took, the tokens its models used, and, for a tracing
/// observer, the spans of the run, its steps, node attempts, model and tool calls), through one
/// pointer in `run_config` (null: nothing is measured, nothing costs).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include <stategraph/trace_span.hpp>

namespace stategraph {

/// @brief Tokens of one model call, or a sum of calls.
struct token_usage {
    std::int64_t input_tokens = 0;  ///< prompt tokens
    std::int64_t output_tokens = 0; ///< completion tokens
    std::int64_t total_tokens() const noexcept { return input_tokens + output_tokens; }
    token_usage& operator+=(const token_usage& o) noexcept {
        input_tokens += o.input_tokens;
        output_tokens += o.output_tokens;
        return *this;
    }
};

/// @brief Told of a run's nodes, checkpoint writes and model usage as they happen (on the
/// run's executor, from its tasks: calls of one run do not overlap unless its tasks run on
/// several threads). Set it in `run_config::observer`; it must outlive the call. Its subgraphs
/// report to it too. Every function does nothing unless overridden.
class run_observer {
public:
    virtual ~run_observer() = default;
    /// A task of node `node` ended (done, failed or interrupted; its retries included).
    virtual void on_node_end(std::string_view node, std::chrono::steady_clock::duration took, bool failed) {
        (void)node, (void)took, (void)failed;
    }
    /// A checkpoint of the run was written (`saver::put`).
    virtual void on_checkpoint_write(std::chrono::steady_clock::duration took) { (void)took; }
    /// A node reported a model call's usage (`context::report_usage`): `model` is the model's
    /// name ("" when the node did not know it).
    virtual void on_usage(std::string_view model, const token_usage& usage) { (void)model, (void)usage; }

    /// Whether this observer takes spans (asked once per call; false: the span functions below
    /// are never called and the run builds no span).
    virtual bool traces() const noexcept { return false; }
    /// A span starts: the run (a subgraph's run: under its node's span), a step (under the
    /// run), a node attempt (under its step), a model or tool call (under its node). Returns
    /// the id the observer knows it by (0: not traced; its children then have no parent).
    /// Called from the run's tasks, possibly on several threads at once: make it thread-safe.
    virtual std::uint64_t on_span_begin(const span_start& s) {
        (void)s;
        return 0;
    }
    /// The span `id` ends (each id once).
    virtual void on_span_end(std::uint64_t id, const span_end& e) { (void)id, (void)e; }
    /// The W3C `traceparent` of the open span `id` ("" when unknown). The engine saves the run
    /// span's in the metadata of the checkpoints it writes, so that resuming the thread (in
    /// another process too) continues the same trace.
    virtual std::string trace_parent(std::uint64_t id) const {
        (void)id;
        return {};
    }

protected:
    run_observer() = default;
    run_observer(const run_observer&) = default;
    run_observer& operator=(const run_observer&) = default;
};

} // namespace stategraph
