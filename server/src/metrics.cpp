// GET /metrics: Prometheus's text exposition format 0.0.4 (server_metrics.hpp), behind the API
// keys unless `server_options::metrics` says otherwise.
#include "impl.hpp"

namespace stategraph::server {

awaitable<void> server::impl::serve_metrics(call& c) {
    if (opts.metrics == metrics_access::off) throw http_error(404, "GET /metrics is off (server_options::metrics)");
    if (opts.metrics == metrics_access::keyed && !opts.api_keys.empty()) {
        std::string key;
        if (auto k = c.req.find("x-api-key"); k != c.req.end()) key = std::string(k->value());
        else if (auto a = c.req.find(http::field::authorization); a != c.req.end()) {
            std::string_view v = a->value();
            if (v.size() > 7 && (v.substr(0, 7) == "Bearer " || v.substr(0, 7) == "bearer ")) key = std::string(v.substr(7));
        }
        if (key.empty()) throw http_error(401, "GET /metrics needs an API key: x-api-key or Authorization: Bearer <key>");
        if (!opts.api_keys.count(key)) throw http_error(401, "unknown API key");
    }
    auto by_status = co_await store->count_runs();
    reply_text(c, 200, metrics.render(by_status), prometheus_text::content_type);
}

} // namespace stategraph::server
