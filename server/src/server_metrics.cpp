// GET /metrics: the server's metrics in Prometheus's text format (server_metrics.hpp), and the
// runs' token usage as JSON (run_meter.hpp).
#include "run_meter.hpp"

namespace stategraph::server {

void server_metrics::node_ended(const std::string& graph, std::string_view node, std::chrono::steady_clock::duration took,
                                bool failed) {
    auto key = std::make_pair(graph, std::string(node));
    auto it = node_seconds.find(key);
    if (it == node_seconds.end()) it = node_seconds.try_emplace(key, histogram::default_seconds()).first;
    it->second.observe(seconds_of(took));
    if (failed) ++node_failures[key];
}

std::string server_metrics::render(const std::map<std::string, std::int64_t>& runs_by_status) const {
    prometheus_text t;
    t.family("stategraph_runs", "Runs in the run store by status (every instance's; finished ones as many as the store keeps).",
             "gauge");
    for (const char* s : {"pending", "running", "success", "error", "interrupted", "timeout"}) {
        auto it = runs_by_status.find(s);
        t.sample("stategraph_runs", {{"status", s}}, it == runs_by_status.end() ? 0.0 : static_cast<double>(it->second));
    }
    for (const auto& [s, n] : runs_by_status)
        if (s != "pending" && s != "running" && s != "success" && s != "error" && s != "interrupted" && s != "timeout")
            t.sample("stategraph_runs", {{"status", s}}, static_cast<double>(n));
    t.family("stategraph_queue_depth", "Runs waiting for a worker (status pending) in the run store.", "gauge");
    auto pending = runs_by_status.find("pending");
    t.sample("stategraph_queue_depth", {}, pending == runs_by_status.end() ? 0.0 : static_cast<double>(pending->second));
    t.family("stategraph_runs_started_total", "Runs this instance began to execute (a takeover or resume counts again).",
             "counter");
    t.sample("stategraph_runs_started_total", {}, static_cast<double>(runs_started));
    t.family("stategraph_runs_ended_total", "Runs this instance executed to their end, by final status.", "counter");
    for (const auto& [s, n] : runs_ended) t.sample("stategraph_runs_ended_total", {{"status", s}}, static_cast<double>(n));
    t.family("stategraph_run_duration_seconds", "How long this instance executed a run (claim to end).", "histogram");
    t.histogram_samples("stategraph_run_duration_seconds", {}, run_seconds);
    t.family("stategraph_node_duration_seconds", "How long a node's task took, retries included, by graph and node.",
             "histogram");
    for (const auto& [key, h] : node_seconds)
        t.histogram_samples("stategraph_node_duration_seconds", {{"graph", key.first}, {"node", key.second}}, h);
    t.family("stategraph_node_failures_total", "Node tasks that failed (after their retries), by graph and node.", "counter");
    for (const auto& [key, n] : node_failures)
        t.sample("stategraph_node_failures_total", {{"graph", key.first}, {"node", key.second}}, static_cast<double>(n));
    t.family("stategraph_checkpoint_write_duration_seconds", "How long writing one checkpoint (saver put) took.", "histogram");
    t.histogram_samples("stategraph_checkpoint_write_duration_seconds", {}, checkpoint_write_seconds);
    t.family("stategraph_model_tokens_total",
             "Tokens the models of this instance's runs used, by model and kind (input: prompt, output: completion).",
             "counter");
    for (const auto& [model, u] : tokens_by_model) {
        t.sample("stategraph_model_tokens_total", {{"model", model}, {"kind", "input"}}, static_cast<double>(u.input_tokens));
        t.sample("stategraph_model_tokens_total", {{"model", model}, {"kind", "output"}}, static_cast<double>(u.output_tokens));
    }
    return std::move(t).str();
}

namespace {
boost::json::object usage_object(const token_usage& u) {
    return boost::json::object{
        {"input_tokens", u.input_tokens}, {"output_tokens", u.output_tokens}, {"total_tokens", u.total_tokens()}};
}
token_usage usage_of(const boost::json::object& o) {
    token_usage u;
    if (const auto* v = o.if_contains("input_tokens"); v && v->is_int64()) u.input_tokens = v->get_int64();
    if (const auto* v = o.if_contains("output_tokens"); v && v->is_int64()) u.output_tokens = v->get_int64();
    return u;
}
} // namespace

boost::json::object usage_json(const usage_tally& t) {
    boost::json::object out = usage_object(t.total());
    boost::json::object models;
    for (const auto& [m, u] : t.by_model()) models[m.empty() ? std::string("unknown") : m] = usage_object(u);
    out["by_model"] = std::move(models);
    return out;
}

boost::json::object add_usage(const boost::json::value* a, const boost::json::object& b) {
    usage_tally sum;
    const auto fold = [&sum](const boost::json::object& o) {
        const auto* models = o.if_contains("by_model");
        if (models && models->is_object())
            for (const auto& [m, u] : models->get_object())
                if (u.is_object()) sum.on_usage(m, usage_of(u.get_object()));
    };
    if (a && a->is_object()) fold(a->get_object());
    fold(b);
    return usage_json(sum);
}

} // namespace stategraph::server
