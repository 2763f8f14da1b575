// The streamable HTTP transport: each message POSTed to the endpoint (Accept: application/json,
// text/event-stream), the answer read as JSON or as an SSE stream, the session id kept, a GET
// stream opened for the server's own messages, the session DELETEd at the end. http:// and
// https:// (OpenSSL's default trust store, which SSL_CERT_FILE / SSL_CERT_DIR can point elsewhere).
// A request's SSE stream that ends (or breaks) before its answer, after the server gave it an
// event id, is resumed (SEP-1699): after the server's `retry:` time (1 s without one, 100 ms at
// least) a GET with Last-Event-ID; again each time a resumed stream ends without the answer, until
// the request's time limit; given up, with errc::connection_lost, when the server refuses the GET or
// after 3 attempts in a row that got no response.

#include <stategraph/core/http_url.hpp>
#include <stategraph/core/detail/spawned.hpp>
#include "transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>

#include <openssl/err.h>
#include <openssl/ssl.h>

namespace stategraph::mcp::detail {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

http_url parse_url(std::string const& name, std::string const& url) {
    auto parsed = parse_http_url(url);
    if (!parsed)
        throw mcp_error(errc::start_failed, name, server_label(name) + ": url \"" + url + "\": " + parsed.error);
    return std::move(*parsed.url);
}

/// Server-sent events, fed as bytes arrive: calls @p on_data with the data of each event whose
/// type is empty or "message". Keeps the last event id and the reconnection time (`retry:`) as an
/// EventSource does, for resuming the stream.
class sse_reader {
public:
    template <class F>
    void feed(std::string_view bytes, F&& on_data) {
        pending_.append(bytes);
        std::size_t start = 0;
        for (;;) {
            auto const nl = pending_.find('\n', start);
            if (nl == std::string::npos) break;
            std::string_view line(pending_.data() + start, nl - start);
            if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
            start = nl + 1;
            if (line.empty()) {
                last_event_id_ = id_buffer_;  // also for an event without data (a priming event)
                if (!data_.empty() && (event_.empty() || event_ == "message")) on_data(data_);
                data_.clear();
                event_.clear();
                has_data_ = false;
                continue;
            }
            if (line.front() == ':') continue;  // a comment (keep-alive)
            auto const colon = line.find(':');
            std::string_view field = line.substr(0, colon);
            std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
            if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
            if (field == "data") {
                if (has_data_) data_ += '\n';
                data_.append(value);
                has_data_ = true;
            } else if (field == "event") {
                event_ = std::string(value);
            } else if (field == "id") {
                if (value.find('\0') == std::string_view::npos) id_buffer_ = std::string(value);
            } else if (field == "retry") {
                set_retry(value);
            }
        }
        pending_.erase(0, start);
    }

    /// The id of the last event (empty: none, or the server reset it): a stream to resume from.
    std::string const& last_event_id() const { return last_event_id_; }
    /// The reconnection time the server asked for, if it did.
    std::optional<std::chrono::milliseconds> retry() const { return retry_; }
    /// A reader for the stream that resumes this one: the same last event id and retry time.
    sse_reader resumed() const {
        sse_reader next;
        next.id_buffer_ = next.last_event_id_ = last_event_id_;
        next.retry_ = retry_;
        return next;
    }

private:
    void set_retry(std::string_view value) {
        if (value.empty() || value.find_first_not_of("0123456789") != std::string_view::npos) return;
        std::int64_t ms = 0;
        for (char c : value) ms = std::min<std::int64_t>(ms * 10 + (c - '0'), 86'400'000);  // at most a day
        retry_ = std::chrono::milliseconds(ms);
    }

    std::string pending_;
    std::string data_;
    std::string event_;
    bool has_data_ = false;
    std::string id_buffer_;
    std::string last_event_id_;
    std::optional<std::chrono::milliseconds> retry_;
};

/// Calls @p f with the id of each JSON-RPC response (a result or an error) in @p message (or batch).
template <class F>
void for_each_response_id(json::value const& message, F&& f) {
    if (auto const* batch = message.if_array()) {
        for (auto const& m : *batch) for_each_response_id(m, f);
        return;
    }
    auto const* obj = message.if_object();
    if (!obj || obj->contains("method")) return;
    auto const* id = obj->if_contains("id");
    if (!id || (!obj->contains("result") && !obj->contains("error"))) return;
    if (id->is_int64()) f(id->get_int64());
    else if (id->is_uint64()) f(static_cast<std::int64_t>(id->get_uint64()));
}

/// One HTTP connection, plain or TLS. `with(f)` calls f with the stream.
class connection {
public:
    connection(asio::any_io_executor io, asio::ssl::context* tls) {
        if (tls) tls_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, *tls);
        else tcp_ = std::make_unique<beast::tcp_stream>(io);
    }
    beast::tcp_stream& tcp() { return tls_ ? beast::get_lowest_layer(*tls_) : *tcp_; }
    beast::ssl_stream<beast::tcp_stream>* tls() { return tls_.get(); }
    template <class F>
    auto with(F& f) {
        return tls_ ? f(*tls_) : f(*tcp_);
    }
    void close() {
        boost::system::error_code ignored;
        tcp().socket().close(ignored);
    }

private:
    std::unique_ptr<beast::tcp_stream> tcp_;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;
};

class http_transport final : public transport, public std::enable_shared_from_this<http_transport> {
public:
    http_transport(asio::any_io_executor io, server_config const& config)
        : io_(io), name_(config.name), url_text_(config.url), url_(parse_url(config.name, config.url)),
          headers_(config.headers), timeout_(config.timeout) {
        if (url_.tls) {
            tls_ = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
            tls_->set_default_verify_paths();
            tls_->set_verify_mode(asio::ssl::verify_peer);
        }
    }

    asio::awaitable<void> start(transport_events events) override {
        events_ = std::move(events);
        co_return;
    }

    void send(std::string message, std::optional<std::int64_t> request_id) override {
        if (stopping_) return;
        auto op = post(shared_from_this(), std::move(message), request_id);
        asio::co_spawn(io_, std::move(op), stategraph::detail::report_to("MCP server '" + name_ + "': a request"));
    }

    asio::awaitable<void> after_initialize(std::string protocol_version) override {
        protocol_version_ = std::move(protocol_version);
        auto op = open_listener(shared_from_this());
        co_await std::move(op);
    }

    void abandon(std::int64_t request_id) override {
        auto it = open_.find(request_id);
        if (it == open_.end()) return;
        auto request = it->second;
        open_.erase(it);
        request->interrupt();  // the POST coroutine sees the error and, abandoned, says nothing
    }

    asio::awaitable<void> stop() override {
        stopping_ = true;
        if (listener_) listener_->close();
        for (auto& [id, request] : open_) request->interrupt();
        open_.clear();
        if (session_id_.empty()) co_return;
        // DELETE the session (a server that does not allow it answers 405: fine).
        try {
            auto stream = self_connection();
            auto connect = connect_stream(shared_from_this(), stream, std::chrono::milliseconds(5000));
            co_await std::move(connect);
            http::request<http::empty_body> req{http::verb::delete_, url_.target(), 11};
            set_headers(req);
            auto exchange = [&req](auto& s) -> asio::awaitable<void> {
                co_await http::async_write(s, req, asio::use_awaitable);
                beast::flat_buffer buffer;
                http::response<http::string_body> res;
                co_await http::async_read(s, buffer, res, asio::use_awaitable);
            };
            auto op = stream->with(exchange);
            co_await std::move(op);
            stream->close();
        } catch (...) {
            // the session ends with the server anyway
        }
    }

    void stop_now() noexcept override { stopping_ = true; }
    std::optional<int> pid() const override { return std::nullopt; }
    std::string stderr_tail() const override { return {}; }

private:
    template <class Request>
    void set_headers(Request& req) const {
        req.set(http::field::host, url_.host_header());
        req.set(http::field::user_agent, "stategraph-mcp");
        for (auto const& [key, value] : headers_) req.set(key, value);
        if (!session_id_.empty()) req.set("Mcp-Session-Id", session_id_);
        if (!protocol_version_.empty()) req.set("MCP-Protocol-Version", protocol_version_);
    }

    std::shared_ptr<connection> self_connection() { return std::make_shared<connection>(io_, tls_.get()); }

    static asio::awaitable<void> connect_stream(std::shared_ptr<http_transport> self, std::shared_ptr<connection> stream,
                                                std::chrono::milliseconds limit) {
        tcp::resolver resolver(self->io_);
        auto endpoints = co_await resolver.async_resolve(self->url_.host, self->url_.port, asio::use_awaitable);
        stream->tcp().expires_after(limit);
        co_await stream->tcp().async_connect(endpoints, asio::use_awaitable);
        if (auto* tls = stream->tls()) {
            if (!SSL_set_tlsext_host_name(tls->native_handle(), self->url_.host.c_str()))
                throw boost::system::system_error(
                    boost::system::error_code(static_cast<int>(::ERR_get_error()), asio::error::get_ssl_category()));
            tls->set_verify_callback(asio::ssl::host_name_verification(self->url_.host));
            co_await tls->async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
        }
        stream->tcp().expires_never();
    }

    /// Read the body of @p parser's message, handing each piece to @p on_bytes as it arrives
    /// (read_some: an event stream's events are handed on at once, not when 8 KiB came).
    template <class Stream, class F>
    static asio::awaitable<void> read_body(Stream& stream, beast::flat_buffer& buffer,
                                           http::response_parser<http::buffer_body>& parser, F on_bytes) {
        char chunk[8192];
        while (!parser.is_done()) {
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            auto [ec, n] = co_await http::async_read_some(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
            (void)n;
            if (ec == http::error::need_buffer) ec = {};
            if (ec) throw boost::system::system_error(ec);
            on_bytes(std::string_view(chunk, sizeof chunk - parser.get().body().size));
        }
    }

    /// What carries the answer of one request: its POST's connection, then the GET resuming its
    /// stream (or the timer before that GET).
    struct open_request {
        std::shared_ptr<connection> stream;
        std::shared_ptr<asio::steady_timer> delay;  // while waiting to resume
        bool answered = false;
        bool resuming = false;

        /// Stop reading and waiting (the coroutine carrying the request sees why and ends).
        void interrupt() {
            if (stream) stream->close();
            if (delay) delay->cancel();
        }
    };

    /// Hand a message to the client; a request answered by it needs its stream no more (a
    /// resumed stream is closed: the server may keep it open).
    void dispatch(std::string_view text) {
        boost::system::error_code ec;
        auto message = json::parse(text, ec);
        if (ec) return;
        for_each_response_id(message, [this](std::int64_t id) {
            auto it = open_.find(id);
            if (it == open_.end()) return;
            auto& request = *it->second;
            request.answered = true;
            if (request.delay) request.delay->cancel();
            if (request.resuming && request.stream) request.stream->close();
        });
        events_.message(std::move(message));
    }

    /// Whether @p request (of @p id) still waits for its answer here.
    bool awaited(std::int64_t id, std::shared_ptr<open_request> const& request) const {
        auto it = open_.find(id);
        return !stopping_ && it != open_.end() && it->second == request && !request->answered;
    }

    static asio::awaitable<void> post(std::shared_ptr<http_transport> self, std::string body,
                                      std::optional<std::int64_t> id) {
        auto stream = self->self_connection();
        std::shared_ptr<open_request> request;
        if (id) {
            request = std::make_shared<open_request>();
            request->stream = stream;
            self->open_[*id] = request;
        }
        std::string failure;
        errc kind = errc::connection_lost;
        sse_reader sse;
        std::string broke;  // why the connection failed
        try {
            auto connect = connect_stream(self, stream, self->timeout_);
            co_await std::move(connect);
            http::request<http::string_body> req{http::verb::post, self->url_.target(), 11};
            self->set_headers(req);
            req.set(http::field::content_type, "application/json");
            req.set(http::field::accept, "application/json, text/event-stream");
            req.body() = std::move(body);
            req.prepare_payload();
            auto exchange = [&](auto& s) { return post_exchange(self, s, req, id, sse, failure, kind); };
            auto op = stream->with(exchange);
            co_await std::move(op);
            boost::system::error_code ignored;
            stream->tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
        } catch (boost::system::system_error const& e) {
            failure = "cannot reach " + self->url_text_ + ": " + e.code().message();
            broke = e.code().message();
        }
        if (!id) co_return;
        // The answer, if any, has been dispatched by now. A request still waiting resumes its
        // stream when the server gave it an event id, else fails.
        if (self->awaited(*id, request) && !sse.last_event_id().empty()) {
            std::string why = broke.empty() ? "it ended" : "it broke: " + broke;
            auto op = resume(self, *id, request, sse.resumed(), std::move(why));
            co_await std::move(op);
        } else if (self->awaited(*id, request)) {
            self->events_.request_failed(*id, failure.empty() ? errc::connection_lost : kind,
                                         failure.empty() ? "the reply from " + self->url_text_ + " ended without an answer"
                                                         : failure);
        }
        if (auto it = self->open_.find(*id); it != self->open_.end() && it->second == request) self->open_.erase(it);
    }

    /// Send @p req and read the reply: JSON or SSE messages are dispatched (an SSE stream read
    /// through @p sse); a failure is left in @p failure (with its kind).
    template <class Stream>
    static asio::awaitable<void> post_exchange(std::shared_ptr<http_transport> self, Stream& stream,
                                               http::request<http::string_body>& req, std::optional<std::int64_t> id,
                                               sse_reader& sse, std::string& failure, errc& kind) {
        co_await http::async_write(stream, req, asio::use_awaitable);
        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
        auto const& res = parser.get();
        if (auto sid = res.find("Mcp-Session-Id"); sid != res.end() && !sid->value().empty())
            self->session_id_ = std::string(sid->value());
        auto const status = res.result_int();
        std::string const type(res[http::field::content_type]);
        if (status >= 400) {
            auto text_op = read_error_text(stream, buffer, parser);
            std::string text = co_await std::move(text_op);
            bool const gone = status == 404 && !self->session_id_.empty();
            kind = gone ? errc::connection_lost : errc::protocol_error;
            failure = "HTTP " + std::to_string(status) + (gone ? " (the session is gone)" : std::string()) + " from " +
                      self->url_text_ + (text.empty() ? std::string() : ": " + text);
        } else if (status == 202 || status == 204 || !id) {
            // accepted (a notification or an answer of ours)
        } else if (type.rfind("text/event-stream", 0) == 0) {
            auto* raw = self.get();
            auto on_bytes = [&sse, raw](std::string_view piece) {
                sse.feed(piece, [raw](std::string const& data) { raw->dispatch(data); });
            };
            auto reading = read_body(stream, buffer, parser, on_bytes);
            co_await std::move(reading);
        } else {
            std::string text;
            auto collect = [&text](std::string_view piece) { text.append(piece); };
            auto reading = read_body(stream, buffer, parser, collect);
            co_await std::move(reading);
            if (type.rfind("application/json", 0) != 0) {
                kind = errc::protocol_error;
                failure = "unexpected content type \"" + type + "\" from " + self->url_text_;
            } else {
                self->dispatch(text);
            }
        }
    }

    /// The body of an error reply, at most 2000 characters of it.
    template <class Stream>
    static asio::awaitable<std::string> read_error_text(Stream& stream, beast::flat_buffer& buffer,
                                                        http::response_parser<http::buffer_body>& parser) {
        std::string text;
        auto collect = [&text](std::string_view piece) {
            if (text.size() < 2000) text.append(piece.substr(0, 2000 - text.size()));
        };
        auto reading = read_body(stream, buffer, parser, collect);
        co_await std::move(reading);
        co_return text;
    }

    /// Attempts in a row that get no response (cannot connect, the connection breaks before the
    /// headers) before a resumption is given up.
    static constexpr int max_resume_failures = 3;
    /// The wait before resuming when the server sent no `retry:`, and the least wait whatever it
    /// sent (a server that closes at once with `retry: 0` is polled ten times a second at most).
    static constexpr std::chrono::milliseconds default_retry{1000};
    static constexpr std::chrono::milliseconds least_retry{100};

    /// Resume the SSE stream of request @p id, which ended (@p why) before its answer: wait the
    /// retry time, GET with Last-Event-ID, read what it sends; again while a stream ends without
    /// the answer. Ends when the answer came, the request was abandoned (its time limit, a
    /// cancellation) or the transport stops; fails the request (errc::connection_lost) when the
    /// server refuses the GET or cannot be reached max_resume_failures times in a row.
    static asio::awaitable<void> resume(std::shared_ptr<http_transport> self, std::int64_t id,
                                        std::shared_ptr<open_request> request, sse_reader sse, std::string why) {
        int failures = 0;
        int attempts = 0;
        std::string last = why;
        request->resuming = true;
        for (;;) {
            if (!self->awaited(id, request)) co_return;
            if (failures >= max_resume_failures) {
                self->events_.request_failed(
                    id, errc::connection_lost,
                    "the event stream of the reply from " + self->url_text_ + " ended without the answer (" + why +
                        "), and resuming it (GET with Last-Event-ID) failed " + std::to_string(failures) +
                        " times in a row (the last: " + last + ") after " + std::to_string(attempts) + " attempt(s)");
                co_return;
            }
            auto const wait = std::max(sse.retry().value_or(default_retry), least_retry);
            auto timer = std::make_shared<asio::steady_timer>(self->io_, wait);
            request->delay = timer;
            co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
            request->delay.reset();
            if (!self->awaited(id, request)) co_return;
            ++attempts;
            auto stream = self->self_connection();
            request->stream = stream;
            std::string refused;  // the server answered the GET, but not with a stream
            bool responded = false;
            try {
                auto connect = connect_stream(self, stream, self->timeout_);
                co_await std::move(connect);
                http::request<http::empty_body> req{http::verb::get, self->url_.target(), 11};
                self->set_headers(req);
                req.set(http::field::accept, "text/event-stream");
                req.set("Last-Event-ID", sse.last_event_id());
                auto exchange = [&](auto& s) {
                    return resume_exchange(self, s, stream, req, sse, responded, refused);
                };
                auto op = stream->with(exchange);
                co_await std::move(op);
                last = "the resumed stream ended";
            } catch (boost::system::system_error const& e) {
                last = (responded ? "the resumed stream broke: " : "no response from " + self->url_text_ + ": ") +
                       e.code().message();
            }
            stream->close();
            if (!self->awaited(id, request)) co_return;
            if (!refused.empty()) {
                self->events_.request_failed(id, errc::connection_lost,
                                             "the event stream of the reply from " + self->url_text_ +
                                                 " ended without the answer (" + why +
                                                 "), and the server refused to resume it (GET with Last-Event-ID): " +
                                                 refused);
                co_return;
            }
            failures = responded ? 0 : failures + 1;
        }
    }

    /// The GET of resume(): sets @p responded once the headers came; an answer other than an
    /// event stream is left in @p refused; the stream's events are dispatched.
    template <class Stream>
    static asio::awaitable<void> resume_exchange(std::shared_ptr<http_transport> self, Stream& stream,
                                                 std::shared_ptr<connection> conn, http::request<http::empty_body>& req,
                                                 sse_reader& sse, bool& responded, std::string& refused) {
        conn->tcp().expires_after(self->timeout_);
        co_await http::async_write(stream, req, asio::use_awaitable);
        beast::flat_buffer buffer;
        http::response_parser<http::buffer_body> parser;
        parser.body_limit(boost::none);
        co_await http::async_read_header(stream, buffer, parser, asio::use_awaitable);
        conn->tcp().expires_never();
        responded = true;
        auto const status = parser.get().result_int();
        std::string const type(parser.get()[http::field::content_type]);
        if (status != 200 || type.rfind("text/event-stream", 0) != 0) {
            auto text_op = read_error_text(stream, buffer, parser);
            std::string text = co_await std::move(text_op);
            bool const gone = status == 404 && !self->session_id_.empty();
            refused = "HTTP " + std::to_string(status) + (gone ? " (the session is gone)" : std::string()) +
                      (status == 200 ? " with content type \"" + type + "\"" : std::string()) +
                      (text.empty() ? std::string() : ": " + text);
            co_return;
        }
        auto* raw = self.get();
        auto on_bytes = [&sse, raw](std::string_view piece) {
            sse.feed(piece, [raw](std::string const& data) { raw->dispatch(data); });
        };
        auto reading = read_body(stream, buffer, parser, on_bytes);
        co_await std::move(reading);
    }

    using parser_ptr = std::shared_ptr<http::response_parser<http::buffer_body>>;

    /// GET: the stream of messages the server sends on its own (list_changed...). Awaited until
    /// the server answered (or refused: 405), then read in the background.
    static asio::awaitable<void> open_listener(std::shared_ptr<http_transport> self) {
        auto stream = self->self_connection();
        auto parser = std::make_shared<http::response_parser<http::buffer_body>>();
        auto buffer = std::make_shared<beast::flat_buffer>();
        parser->body_limit(boost::none);
        try {
            auto connect = connect_stream(self, stream, std::chrono::milliseconds(5000));
            co_await std::move(connect);
            http::request<http::empty_body> req{http::verb::get, self->url_.target(), 11};
            self->set_headers(req);
            req.set(http::field::accept, "text/event-stream");
            stream->tcp().expires_after(5s);
            auto ask = [&](auto& s) -> asio::awaitable<void> {
                co_await http::async_write(s, req, asio::use_awaitable);
                co_await http::async_read_header(s, *buffer, *parser, asio::use_awaitable);
            };
            auto op = stream->with(ask);
            co_await std::move(op);
            stream->tcp().expires_never();
        } catch (boost::system::system_error const&) {
            co_return;  // no stream of its own: requests still work
        }
        std::string const type(parser->get()[http::field::content_type]);
        if (parser->get().result_int() != 200 || type.rfind("text/event-stream", 0) != 0) co_return;
        self->listener_ = stream;
        auto op = listen(self, stream, parser, buffer);
        asio::co_spawn(self->io_, std::move(op), stategraph::detail::report_to("MCP server '" + self->name_ + "': its event stream"));
    }

    static asio::awaitable<void> listen(std::shared_ptr<http_transport> self, std::shared_ptr<connection> stream,
                                        parser_ptr parser, std::shared_ptr<beast::flat_buffer> buffer) {
        sse_reader sse;
        auto* raw = self.get();
        auto on_bytes = [&sse, raw](std::string_view piece) {
            sse.feed(piece, [raw](std::string const& data) { raw->dispatch(data); });
        };
        try {
            auto read = [&](auto& s) { return read_body(s, *buffer, *parser, on_bytes); };
            auto reading = stream->with(read);
            co_await std::move(reading);
        } catch (boost::system::system_error const&) {
            // closed by stop(), or by the server
        }
        if (self->listener_ == stream) self->listener_.reset();
    }

    asio::any_io_executor io_;
    std::string name_;
    std::string url_text_;
    http_url url_;
    std::map<std::string, std::string> headers_;
    std::chrono::milliseconds timeout_;
    transport_events events_;
    std::string session_id_;
    std::string protocol_version_;
    std::unique_ptr<asio::ssl::context> tls_;  // https only
    std::map<std::int64_t, std::shared_ptr<open_request>> open_;
    std::shared_ptr<connection> listener_;
    bool stopping_ = false;
};

}  // namespace

std::shared_ptr<transport> make_http_transport(asio::any_io_executor io, server_config const& config) {
    return std::make_shared<http_transport>(io, config);
}

}  // namespace stategraph::mcp::detail
