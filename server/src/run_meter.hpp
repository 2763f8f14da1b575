#pragma once
// Internal to stategraph::server: the run_observer of one run this instance executes. It sums
// the run's token usage (its record's and its thread's `usage`) and feeds the server's metrics.

#include "server_metrics.hpp"

#include <stategraph/usage_tally.hpp>

#include <boost/json/object.hpp>

#include <string>
#include <string_view>

namespace stategraph::server {

class run_meter : public usage_tally {
public:
    server_metrics* metrics = nullptr; ///< null: the run's usage is summed, nothing else
    std::string graph_id;
    run_observer* tracer = nullptr; ///< the server's tracer (server_options::tracer): spans go to it

    bool traces() const noexcept override { return tracer && tracer->traces(); }
    std::uint64_t on_span_begin(const span_start& s) override { return tracer->on_span_begin(s); }
    void on_span_end(std::uint64_t id, const span_end& e) override { tracer->on_span_end(id, e); }
    std::string trace_parent(std::uint64_t id) const override { return tracer->trace_parent(id); }

    void on_node_end(std::string_view node, std::chrono::steady_clock::duration took, bool failed) override {
        if (metrics) metrics->node_ended(graph_id, node, took, failed);
    }
    void on_checkpoint_write(std::chrono::steady_clock::duration took) override {
        if (metrics) metrics->checkpoint_write_seconds.observe(seconds_of(took));
    }
    void on_usage(std::string_view model, const token_usage& usage) override {
        usage_tally::on_usage(model, usage);
        if (metrics) metrics->tokens_by_model[std::string(model.empty() ? std::string_view("unknown") : model)] += usage;
    }
};

/// `{input_tokens, output_tokens, total_tokens, by_model: {name: {...}}}` of a tally.
boost::json::object usage_json(const usage_tally& t);
/// `a` plus `b`, both in usage_json's shape (a missing or malformed `a` counts as none).
boost::json::object add_usage(const boost::json::value* a, const boost::json::object& b);

} // namespace stategraph::server
