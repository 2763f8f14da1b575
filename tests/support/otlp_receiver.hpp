#pragma once
// A loopback OTLP/HTTP receiver for tests: it takes `POST /v1/traces` with the JSON encoding
// (an ExportTraceServiceRequest), keeps every span it was sent, and answers as a collector
// does (200 with `{}`; or the status a test sets, to play a collector in trouble). Neither
// Debian nor npm packages an OpenTelemetry collector or another OTLP receiver, so the tests
// use this double; it checks what a collector's JSON decoder would refuse (ids as hex of the
// right length, 64-bit times and integers as decimal strings, known attribute value kinds).

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace stategraph::test {

/// One span as received, its attributes flattened (string, int as text, bool as "true"/"false",
/// double as text, arrays as "a,b").
struct received_span {
    std::string trace_id, span_id, parent_span_id, name;
    int kind = 0;
    std::uint64_t start_ns = 0, end_ns = 0;
    int status_code = 0;
    std::string status_message;
    std::map<std::string, std::string> attributes;
    std::map<std::string, std::string> resource;

    const std::string& attr(const std::string& key) const {
        static const std::string none;
        auto it = attributes.find(key);
        return it == attributes.end() ? none : it->second;
    }
};

class otlp_receiver {
public:
    otlp_receiver() : acceptor_(io_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
        port_ = acceptor_.local_endpoint().port();
        thread_ = std::thread([this] { serve(); });
    }
    ~otlp_receiver() {
        stop_ = true;
        boost::system::error_code ec;
        // wake the blocking accept with a connection of our own
        boost::asio::io_context io;
        boost::asio::ip::tcp::socket s(io);
        s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
        thread_.join();
    }
    otlp_receiver(const otlp_receiver&) = delete;
    otlp_receiver& operator=(const otlp_receiver&) = delete;

    std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }
    unsigned short port() const { return port_; }
    /// The status the next requests get (200: accepted).
    void answer_with(int status) { status_ = status; }

    std::vector<received_span> spans() const {
        std::lock_guard lock(m_);
        return spans_;
    }
    std::vector<std::string> problems() const {
        std::lock_guard lock(m_);
        return problems_;
    }
    int requests() const {
        std::lock_guard lock(m_);
        return requests_;
    }
    /// Waits (bounded) until at least `n` spans arrived.
    bool wait_for_spans(std::size_t n, std::chrono::milliseconds within = std::chrono::seconds(10)) const {
        std::unique_lock lock(m_);
        return cv_.wait_for(lock, within, [&] { return spans_.size() >= n; });
    }

private:
    void serve() {
        namespace http = boost::beast::http;
        for (int connections = 0; connections < 10000 && !stop_; ++connections) {
            boost::system::error_code ec;
            boost::asio::ip::tcp::socket socket(io_);
            acceptor_.accept(socket, ec);
            if (ec || stop_) return;
            boost::beast::flat_buffer buffer;
            for (int on_connection = 0; on_connection < 1000; ++on_connection) {
                http::request<http::string_body> req;
                http::read(socket, buffer, req, ec);
                if (ec) break;
                take(req);
                http::response<http::string_body> res(static_cast<http::status>(status_.load()), req.version());
                res.set(http::field::content_type, "application/json");
                res.body() = status_ == 200 ? "{}" : R"({"code":14,"message":"unavailable"})";
                res.keep_alive(req.keep_alive());
                res.prepare_payload();
                http::write(socket, res, ec);
                if (ec || !req.keep_alive()) break;
            }
        }
    }

    template <class Request>
    void take(const Request& req) {
        std::lock_guard lock(m_);
        ++requests_;
        if (req.method() != boost::beast::http::verb::post || req.target() != "/v1/traces")
            problems_.push_back("not POST /v1/traces: " + std::string(req.target()));
        if (req[boost::beast::http::field::content_type] != "application/json")
            problems_.push_back("content type is not application/json");
        if (status_ != 200) return; // refused: not kept
        boost::system::error_code ec;
        auto body = boost::json::parse(req.body(), ec);
        if (ec || !body.is_object()) {
            problems_.push_back("the body is not JSON");
            return;
        }
        try {
            for (const auto& rs : body.at("resourceSpans").as_array()) {
                std::map<std::string, std::string> resource = flatten(rs.at("resource").at("attributes"));
                for (const auto& ss : rs.at("scopeSpans").as_array()) {
                    if (ss.at("scope").at("name").as_string() != "stategraph") problems_.push_back("scope is not stategraph");
                    for (const auto& s : ss.at("spans").as_array()) spans_.push_back(read_span(s.as_object(), resource));
                }
            }
        } catch (const std::exception& e) {
            problems_.push_back(std::string("malformed request: ") + e.what());
        }
        cv_.notify_all();
    }

    static bool hex_of(const boost::json::value& v, std::size_t n) {
        if (!v.is_string() || v.as_string().size() != n) return false;
        for (char c : v.as_string())
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        return true;
    }

    static std::uint64_t decimal(const boost::json::value& v) {
        if (!v.is_string()) throw std::runtime_error("a 64-bit time is not a decimal string");
        return std::stoull(std::string(v.as_string()));
    }

    std::map<std::string, std::string> flatten(const boost::json::value& attributes) {
        std::map<std::string, std::string> out;
        for (const auto& a : attributes.as_array()) {
            const auto& v = a.at("value").as_object();
            std::string text;
            if (auto* s = v.if_contains("stringValue")) text = s->as_string();
            else if (auto* i = v.if_contains("intValue")) text = std::to_string(decimal(*i));
            else if (auto* b = v.if_contains("boolValue")) text = b->as_bool() ? "true" : "false";
            else if (auto* d = v.if_contains("doubleValue")) text = std::to_string(d->to_number<double>());
            else if (auto* arr = v.if_contains("arrayValue")) {
                for (const auto& item : arr->at("values").as_array())
                    text += (text.empty() ? "" : ",") + std::string(item.at("stringValue").as_string());
            } else problems_.push_back("attribute " + std::string(a.at("key").as_string()) + " has no known value kind");
            out[std::string(a.at("key").as_string())] = text;
        }
        return out;
    }

    received_span read_span(const boost::json::object& s, const std::map<std::string, std::string>& resource) {
        received_span r;
        if (!hex_of(s.at("traceId"), 32)) problems_.push_back("traceId is not 32 hex digits");
        if (!hex_of(s.at("spanId"), 16)) problems_.push_back("spanId is not 16 hex digits");
        r.trace_id = s.at("traceId").as_string();
        r.span_id = s.at("spanId").as_string();
        if (auto* p = s.if_contains("parentSpanId")) {
            if (!hex_of(*p, 16)) problems_.push_back("parentSpanId is not 16 hex digits");
            r.parent_span_id = p->as_string();
        }
        r.name = s.at("name").as_string();
        r.kind = static_cast<int>(s.at("kind").to_number<std::int64_t>());
        r.start_ns = decimal(s.at("startTimeUnixNano"));
        r.end_ns = decimal(s.at("endTimeUnixNano"));
        if (r.end_ns < r.start_ns) problems_.push_back("span " + r.name + " ends before it starts");
        if (auto* st = s.if_contains("status")) {
            r.status_code = static_cast<int>(st->at("code").to_number<std::int64_t>());
            if (auto* m = st->is_object() ? st->as_object().if_contains("message") : nullptr) r.status_message = m->as_string();
        }
        r.attributes = flatten(s.at("attributes"));
        r.resource = resource;
        return r;
    }

    boost::asio::io_context io_;
    boost::asio::ip::tcp::acceptor acceptor_;
    unsigned short port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> status_{200};
    mutable std::mutex m_;
    mutable std::condition_variable cv_;
    std::vector<received_span> spans_;
    std::vector<std::string> problems_;
    int requests_ = 0;
    std::thread thread_;
};

} // namespace stategraph::test
