#pragma once
/// @file usage_tally.hpp
/// @brief `usage_tally`: a `run_observer` that sums the tokens a run's models used.

#include <stategraph/run_observer.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace stategraph {

/// @brief A `run_observer` that sums the usage reported, in all and by model: set
/// `run_config::observer = &tally` and read it after the call.
class usage_tally : public run_observer {
public:
    void on_usage(std::string_view model, const token_usage& usage) override {
        total_ += usage;
        by_model_[std::string(model)] += usage;
    }
    const token_usage& total() const noexcept { return total_; }
    /// By model name ("" for calls whose model was not named).
    const std::map<std::string, token_usage, std::less<>>& by_model() const noexcept { return by_model_; }
    bool empty() const noexcept { return by_model_.empty(); }

private:
    token_usage total_;
    std::map<std::string, token_usage, std::less<>> by_model_;
};

} // namespace stategraph
