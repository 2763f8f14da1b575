#pragma once
/// @file run_observer.hpp
/// @brief `run_observer`: what a caller learns of a run besides its streams (how long each node
/// took, how long each checkpoint write took, the tokens its models used), through one pointer
/// in `run_config` (null: nothing is measured, nothing costs).

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

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

protected:
    run_observer() = default;
    run_observer(const run_observer&) = default;
    run_observer& operator=(const run_observer&) = default;
};

} // namespace stategraph
