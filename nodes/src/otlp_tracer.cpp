// otlp_tracer: spans kept while open, batched when they end, and sent as OTLP/HTTP JSON by a
// thread of the tracer's own (its own io_context, one connection per batch).

#include <stategraph/nodes/otlp_tracer.hpp>

#include <stategraph/core/http_url.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/traceparent.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>

namespace stategraph {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

[[noreturn]] void bad(const std::string& what) { throw nodes::agent_error(nodes::errc::bad_otlp_endpoint, what); }

/// The collector's URL: the shared parser (stategraph/core/http_url.hpp), http only, and
/// OTLP's default path when the URL has none.
struct endpoint_parts {
    std::string host, port, target, host_header;
};

endpoint_parts parse_endpoint(const std::string& url) {
    const std::string where = "otlp_tracer: endpoint \"" + url + "\"";
    const auto parsed = parse_http_url(url);
    if (!parsed) bad(where + ": " + parsed.error + " (e.g. http://127.0.0.1:4318/v1/traces)");
    if (parsed.url->tls)
        bad(where + ": https is not supported; export to a collector over http:// (a local agent or sidecar)");
    const http_url& u = *parsed.url;
    return {u.host, u.port, u.path.empty() && u.query.empty() ? std::string("/v1/traces") : u.target(), u.host_header()};
}

std::string hex(std::uint64_t v) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 15];
    return out;
}

bool parse_hex(std::string_view s, std::uint64_t& out) {
    out = 0;
    for (char c : s) {
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        out = (out << 4) | static_cast<std::uint64_t>(d);
    }
    return true;
}

struct trace_id {
    std::uint64_t hi = 0, lo = 0;
    bool valid() const noexcept { return hi || lo; }
    std::string text() const { return hex(hi) + hex(lo); }
};

/// The ids of a W3C traceparent (is_traceparent checked its form).
bool parse_traceparent(std::string_view s, trace_id& trace, std::uint64_t& parent) {
    if (!is_traceparent(s)) return false;
    return parse_hex(s.substr(3, 16), trace.hi) && parse_hex(s.substr(19, 16), trace.lo) && parse_hex(s.substr(36, 16), parent);
}

std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

// Spans are written as OTLP JSON text at once, on the run's thread, into one string each: no
// JSON tree, and one allocation the exporter thread frees (a tree built on one thread and freed
// on another made the two fight over malloc's lock).

/// `s` as a JSON string (quotes included), escaped as JSON asks.
void put_string(std::string& out, std::string_view s) {
    static constexpr char digits[] = "0123456789abcdef";
    out.push_back('"');
    for (char c : s) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(c);
        } else if (u < 0x20) {
            out += "\\u00";
            out.push_back(digits[u >> 4]);
            out.push_back(digits[u & 15]);
        } else {
            out.push_back(c);
        }
    }
    out.push_back('"');
}

/// An attribute's AnyValue: 64-bit integers as decimal strings (OTLP's JSON encoding); a double
/// that JSON cannot write (NaN, infinities) as the string protobuf's JSON mapping uses.
void put_value(std::string& out, const span_value& v) {
    if (const auto* s = std::get_if<std::string_view>(&v)) {
        out += "{\"stringValue\":";
        put_string(out, *s);
    } else if (const auto* i = std::get_if<std::int64_t>(&v)) {
        out += "{\"intValue\":\"" + std::to_string(*i) + "\"";
    } else if (const auto* d = std::get_if<double>(&v)) {
        out += "{\"doubleValue\":";
        if (std::isnan(*d)) out += "\"NaN\"";
        else if (std::isinf(*d)) out += *d > 0 ? "\"Infinity\"" : "\"-Infinity\"";
        else {
            char buf[32];
            auto r = std::to_chars(buf, buf + sizeof buf, *d);
            out.append(buf, r.ptr);
        }
    } else if (const auto* b = std::get_if<bool>(&v)) {
        out += *b ? "{\"boolValue\":true" : "{\"boolValue\":false";
    } else {
        out += "{\"arrayValue\":{\"values\":[";
        bool first = true;
        for (auto item : std::get<std::span<const std::string_view>>(v)) {
            if (!first) out.push_back(',');
            first = false;
            out += "{\"stringValue\":";
            put_string(out, item);
            out.push_back('}');
        }
        out += "]}";
    }
    out.push_back('}');
}

/// `{"key":...,"value":...}` for each attribute, comma-separated, after what `out` holds.
void put_attributes(std::string& out, std::span<const span_attribute> attributes) {
    for (const auto& a : attributes) {
        if (!out.empty()) out.push_back(',');
        out += "{\"key\":";
        put_string(out, a.key);
        out += ",\"value\":";
        put_value(out, a.value);
        out.push_back('}');
    }
}

std::string percent_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        std::uint64_t v = 0;
        if (s[i] == '%' && i + 2 < s.size() && parse_hex(s.substr(i + 1, 2), v)) {
            out.push_back(static_cast<char>(v));
            i += 2;
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return std::string(s);
}

/// "k=v,k2=v2" (OpenTelemetry's list form for headers and resource attributes).
std::vector<std::pair<std::string, std::string>> key_values(const char* text) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!text) return out;
    std::string_view rest(text);
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos) continue;
        auto key = trim(item.substr(0, eq));
        if (key.empty()) continue;
        out.emplace_back(std::move(key), percent_decode(trim(item.substr(eq + 1))));
    }
    return out;
}

} // namespace

otlp_options otlp_options::from_environment() {
    otlp_options o;
    if (const char* e = std::getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); e && *e) {
        o.endpoint = e;
    } else if (const char* base = std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); base && *base) {
        std::string b(base);
        while (!b.empty() && b.back() == '/') b.pop_back();
        o.endpoint = b + "/v1/traces";
    }
    if (const char* name = std::getenv("OTEL_SERVICE_NAME"); name && *name) o.service_name = name;
    o.headers = key_values(std::getenv("OTEL_EXPORTER_OTLP_HEADERS"));
    o.resource_attributes = key_values(std::getenv("OTEL_RESOURCE_ATTRIBUTES"));
    return o;
}

struct otlp_tracer::impl {
    otlp_options options;
    endpoint_parts where;

    struct open_span {
        trace_id trace;
        std::uint64_t span_id = 0, parent_id = 0;
        std::uint64_t start_ns = 0;
        span_kind kind = span_kind::other;
        std::string name;
        std::string attributes; // JSON text: the attributes given at the start, comma-separated
    };

    mutable std::mutex m;
    std::condition_variable wake;      // the exporter: spans to send, a flush, or stop
    std::condition_variable exported;  // flush(): a round of exports ended
    std::mt19937_64 random{std::random_device{}()};
    std::uint64_t next_handle = 1;
    std::unordered_map<std::uint64_t, open_span> open;
    std::vector<std::string> ended; // finished spans, each as OTLP JSON text
    otlp_stats counts;
    std::uint64_t flush_wanted = 0, flush_done = 0; // flush rounds asked for / finished
    bool stopping = false;
    std::thread worker;

    std::uint64_t random_id() {
        std::uint64_t v = 0;
        while (v == 0) v = random();
        return v;
    }

    std::string resource() const {
        std::string attributes;
        const span_attribute fixed[] = {{"service.name", std::string_view(options.service_name)},
                                        {"telemetry.sdk.name", std::string_view("stategraph")},
                                        {"telemetry.sdk.language", std::string_view("cpp")},
                                        {"telemetry.sdk.version", std::string_view("0.1.0")}};
        put_attributes(attributes, fixed);
        for (const auto& [k, v] : options.resource_attributes) {
            const span_attribute extra[] = {{k, std::string_view(v)}};
            put_attributes(attributes, extra);
        }
        return "{\"attributes\":[" + attributes + "]}";
    }

    /// An ExportTraceServiceRequest holding `spans` (JSON texts).
    std::string body(const std::vector<std::string>& spans) const {
        std::string out = "{\"resourceSpans\":[{\"resource\":" + resource() +
                          ",\"scopeSpans\":[{\"scope\":{\"name\":\"stategraph\",\"version\":\"0.1.0\"},\"spans\":[";
        std::size_t size = out.size() + 8;
        for (const auto& s : spans) size += s.size() + 1;
        out.reserve(size);
        for (std::size_t i = 0; i < spans.size(); ++i) {
            if (i) out.push_back(',');
            out += spans[i];
        }
        out += "]}]}]}";
        return out;
    }

    /// One POST of `payload`; "" when the collector answered 2xx, else what went wrong.
    std::string post(const std::string& payload) const {
        asio::io_context io;
        std::string problem = "timed out after " + std::to_string(options.timeout.count()) + " ms";
        auto send = [&]() -> asio::awaitable<void> {
            boost::system::error_code ec;
            auto token = asio::redirect_error(asio::use_awaitable, ec);
            tcp::resolver resolver(io);
            auto found = co_await resolver.async_resolve(where.host, where.port, tcp::resolver::numeric_service, token);
            if (ec) {
                problem = "cannot resolve " + where.host + ": " + ec.message();
                co_return;
            }
            beast::tcp_stream stream(io);
            stream.expires_after(options.timeout);
            co_await stream.async_connect(found, token);
            if (ec) {
                problem = "cannot connect: " + ec.message();
                co_return;
            }
            http::request<http::string_body> req(http::verb::post, where.target, 11);
            req.set(http::field::host, where.host_header);
            req.set(http::field::content_type, "application/json");
            req.set(http::field::user_agent, "stategraph-otlp/0.1.0");
            for (const auto& [k, v] : options.headers) req.set(k, v);
            req.body() = payload;
            req.prepare_payload();
            co_await http::async_write(stream, req, token);
            if (ec) {
                problem = "sending failed: " + ec.message();
                co_return;
            }
            beast::flat_buffer buffer;
            http::response<http::string_body> res;
            co_await http::async_read(stream, buffer, res, token);
            if (ec) {
                problem = "reading the answer failed: " + ec.message();
                co_return;
            }
            beast::error_code ignored;
            stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
            if (res.result_int() / 100 != 2) {
                problem = "HTTP " + std::to_string(res.result_int()) + ": " + res.body().substr(0, 200);
                co_return;
            }
            problem.clear();
        };
        // An exception out of the POST (memory, a throwing socket call) is its problem, not lost.
        asio::co_spawn(io, send, [&problem](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                problem = std::string("the POST failed: ") + x.what();
            } catch (...) {
                problem = "the POST failed with a non-standard exception";
            }
        });
        io.run();
        return problem;
    }

    void run() {
        std::unique_lock lock(m);
        for (;;) {
            wake.wait_for(lock, options.flush_interval, [&] {
                return stopping || flush_wanted != flush_done || ended.size() >= options.max_batch;
            });
            const std::uint64_t round = flush_wanted;
            const bool stop = stopping;
            bool ok = true;
            while (!ended.empty()) {
                std::vector<std::string> batch;
                const std::size_t n = std::min(ended.size(), options.max_batch);
                batch.reserve(n);
                for (std::size_t i = 0; i < n; ++i) batch.push_back(std::move(ended[i]));
                ended.erase(ended.begin(), ended.begin() + static_cast<std::ptrdiff_t>(n));
                lock.unlock();
                const std::string payload = body(batch);
                const std::string problem = post(payload);
                lock.lock();
                if (problem.empty()) {
                    counts.spans_exported += n;
                } else {
                    ok = false;
                    ++counts.exports_failed;
                    counts.spans_dropped += n;
                    counts.last_error = "POST " + options.endpoint + ": " + problem;
                    break; // the rest waits for the next round
                }
            }
            (void)ok;
            flush_done = round;
            exported.notify_all();
            if (stop) return;
        }
    }
};

otlp_tracer::otlp_tracer(otlp_options options) : impl_(std::make_unique<impl>()) {
    impl_->where = parse_endpoint(options.endpoint);
    if (options.max_batch == 0 || options.max_queue == 0 || options.timeout.count() <= 0 || options.flush_interval.count() <= 0)
        bad("otlp_tracer: max_batch, max_queue, timeout and flush_interval must be more than 0");
    impl_->options = std::move(options);
    impl_->worker = std::thread([p = impl_.get()] { p->run(); });
}

otlp_tracer::~otlp_tracer() {
    {
        std::lock_guard lock(impl_->m);
        impl_->stopping = true;
    }
    impl_->wake.notify_all();
    impl_->worker.join();
}

bool otlp_tracer::flush(std::chrono::milliseconds within) {
    std::unique_lock lock(impl_->m);
    const std::uint64_t failed_before = impl_->counts.exports_failed;
    const std::uint64_t round = ++impl_->flush_wanted;
    impl_->wake.notify_all();
    const bool done = impl_->exported.wait_for(lock, within, [&] { return impl_->flush_done >= round; });
    return done && impl_->counts.exports_failed == failed_before && impl_->ended.empty();
}

otlp_stats otlp_tracer::stats() const {
    std::lock_guard lock(impl_->m);
    return impl_->counts;
}

const otlp_options& otlp_tracer::options() const noexcept { return impl_->options; }

std::uint64_t otlp_tracer::on_span_begin(const span_start& s) {
    impl::open_span span;
    span.kind = s.kind;
    span.name = std::string(s.name);
    span.start_ns = now_ns();
    put_attributes(span.attributes, s.attributes);
    trace_id remote;
    std::uint64_t remote_parent = 0;
    const bool continues = !s.parent && !s.remote_parent.empty() && parse_traceparent(s.remote_parent, remote, remote_parent);
    std::lock_guard lock(impl_->m);
    span.span_id = impl_->random_id();
    if (s.parent) {
        if (auto it = impl_->open.find(s.parent); it != impl_->open.end()) {
            span.trace = it->second.trace;
            span.parent_id = it->second.span_id;
        }
    } else if (continues) {
        span.trace = remote;
        span.parent_id = remote_parent;
    }
    if (!span.trace.valid()) span.trace = trace_id{impl_->random_id(), impl_->random_id()};
    const std::uint64_t handle = impl_->next_handle++;
    impl_->open.emplace(handle, std::move(span));
    return handle;
}

void otlp_tracer::on_span_end(std::uint64_t id, const span_end& e) {
    const std::uint64_t end_ns = now_ns();
    impl::open_span span;
    {
        std::lock_guard lock(impl_->m);
        auto it = impl_->open.find(id);
        if (it == impl_->open.end()) return;
        span = std::move(it->second);
        impl_->open.erase(it);
    }
    // (the engine and trace_span give a key at the start or at the end, not at both)
    put_attributes(span.attributes, e.attributes);
    if (e.failed && !e.error_type.empty()) {
        const span_attribute error_type[] = {{"error.type", e.error_type}};
        put_attributes(span.attributes, error_type);
    }
    // OTLP's SpanKind: 1 internal, 3 client (a model called over the network)
    const char* kind = span.kind == span_kind::model ? "3" : "1";
    std::string out;
    out.reserve(200 + span.name.size() + span.attributes.size() + e.message.size());
    out += "{\"traceId\":\"" + span.trace.text() + "\",\"spanId\":\"" + hex(span.span_id) + "\"";
    if (span.parent_id) out += ",\"parentSpanId\":\"" + hex(span.parent_id) + "\"";
    out += ",\"name\":";
    put_string(out, span.name);
    out += ",\"kind\":";
    out += kind;
    out += ",\"startTimeUnixNano\":\"" + std::to_string(span.start_ns) + "\",\"endTimeUnixNano\":\"" +
           std::to_string(std::max(end_ns, span.start_ns)) + "\",\"attributes\":[";
    out += span.attributes;
    out += "]";
    if (e.failed) { // STATUS_CODE_ERROR
        out += ",\"status\":{\"code\":2,\"message\":";
        put_string(out, e.message);
        out += "}";
    }
    out += "}";
    bool wake = false;
    {
        std::lock_guard lock(impl_->m);
        ++impl_->counts.spans_ended;
        if (impl_->ended.size() >= impl_->options.max_queue) {
            ++impl_->counts.spans_dropped;
            return;
        }
        impl_->ended.push_back(std::move(out));
        wake = impl_->ended.size() == impl_->options.max_batch;
    }
    if (wake) impl_->wake.notify_one();
}

std::string otlp_tracer::trace_parent(std::uint64_t id) const {
    std::lock_guard lock(impl_->m);
    auto it = impl_->open.find(id);
    if (it == impl_->open.end()) return {};
    return "00-" + it->second.trace.text() + "-" + hex(it->second.span_id) + "-01";
}

} // namespace stategraph
