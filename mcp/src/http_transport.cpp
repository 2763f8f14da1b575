// The streamable HTTP transport: each message POSTed to the endpoint (Accept: application/json,
// text/event-stream), the answer read as JSON or as an SSE stream, the session id kept, a GET
// stream opened for the server's own messages, the session DELETEd at the end. http:// and
// https:// (OpenSSL's default trust store, which SSL_CERT_FILE / SSL_CERT_DIR can point elsewhere).

#include <stategraph/detail/spawned.hpp>
#include "transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/ip/tcp.hpp>
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

#include <chrono>
#include <map>

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

struct url_parts {
    bool tls = false;
    std::string host;
    std::string port;
    std::string target;
};

url_parts parse_url(std::string const& name, std::string const& url) {
    auto bad = [&](std::string const& why) {
        return mcp_error(errc::start_failed, name, server_label(name) + ": url \"" + url + "\": " + why);
    };
    std::string rest;
    url_parts out;
    if (url.rfind("http://", 0) == 0) rest = url.substr(7);
    else if (url.rfind("https://", 0) == 0) rest = url.substr(8), out.tls = true;
    else throw bad("expected http://host[:port]/path or https://...");
    auto const slash = rest.find('/');
    std::string authority = rest.substr(0, slash);
    out.target = slash == std::string::npos ? "/" : rest.substr(slash);
    if (!authority.empty() && authority.front() == '[') {  // [v6]:port
        auto const close = authority.find(']');
        if (close == std::string::npos) throw bad("unclosed [ in the host");
        out.host = authority.substr(1, close - 1);
        if (close + 1 < authority.size() && authority[close + 1] == ':') out.port = authority.substr(close + 2);
    } else if (auto const colon = authority.rfind(':'); colon != std::string::npos) {
        out.host = authority.substr(0, colon);
        out.port = authority.substr(colon + 1);
    } else {
        out.host = authority;
    }
    if (out.host.empty()) throw bad("no host");
    if (out.port.empty()) out.port = out.tls ? "443" : "80";
    return out;
}

/// Server-sent events, fed as bytes arrive: calls @p on_data with the data of each event whose
/// type is empty or "message".
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
            }
        }
        pending_.erase(0, start);
    }

private:
    std::string pending_;
    std::string data_;
    std::string event_;
    bool has_data_ = false;
};

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
        auto stream = it->second;
        open_.erase(it);
        stream->close();  // the POST coroutine sees the error and, abandoned, says nothing
    }

    asio::awaitable<void> stop() override {
        stopping_ = true;
        if (listener_) listener_->close();
        for (auto& [id, stream] : open_) stream->close();
        open_.clear();
        if (session_id_.empty()) co_return;
        // DELETE the session (a server that does not allow it answers 405: fine).
        try {
            auto stream = self_connection();
            auto connect = connect_stream(shared_from_this(), stream, std::chrono::milliseconds(5000));
            co_await std::move(connect);
            http::request<http::empty_body> req{http::verb::delete_, url_.target, 11};
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
        req.set(http::field::host, url_.host + ":" + url_.port);
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

    /// Read the body of @p parser's message, handing each piece to @p on_bytes.
    template <class Stream, class F>
    static asio::awaitable<void> read_body(Stream& stream, beast::flat_buffer& buffer,
                                           http::response_parser<http::buffer_body>& parser, F on_bytes) {
        char chunk[8192];
        while (!parser.is_done()) {
            parser.get().body().data = chunk;
            parser.get().body().size = sizeof chunk;
            auto [ec, n] = co_await http::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
            (void)n;
            if (ec == http::error::need_buffer) ec = {};
            if (ec) throw boost::system::system_error(ec);
            on_bytes(std::string_view(chunk, sizeof chunk - parser.get().body().size));
        }
    }

    void dispatch(std::string_view text) {
        boost::system::error_code ec;
        auto message = json::parse(text, ec);
        if (!ec) events_.message(std::move(message));
    }

    static asio::awaitable<void> post(std::shared_ptr<http_transport> self, std::string body,
                                      std::optional<std::int64_t> id) {
        auto stream = self->self_connection();
        if (id) self->open_[*id] = stream;
        std::string failure;
        errc kind = errc::connection_lost;
        try {
            auto connect = connect_stream(self, stream, self->timeout_);
            co_await std::move(connect);
            http::request<http::string_body> req{http::verb::post, self->url_.target, 11};
            self->set_headers(req);
            req.set(http::field::content_type, "application/json");
            req.set(http::field::accept, "application/json, text/event-stream");
            req.body() = std::move(body);
            req.prepare_payload();
            auto exchange = [&](auto& s) { return post_exchange(self, s, req, id, failure, kind); };
            auto op = stream->with(exchange);
            co_await std::move(op);
            boost::system::error_code ignored;
            stream->tcp().socket().shutdown(tcp::socket::shutdown_both, ignored);
        } catch (boost::system::system_error const& e) {
            failure = "cannot reach " + self->url_text_ + ": " + e.code().message();
        }
        bool const abandoned = id && !self->open_.count(*id);
        if (id) self->open_.erase(*id);
        // The answer, if any, has been dispatched by now; a request still waiting failed.
        if (!failure.empty() && id && !abandoned && !self->stopping_) self->events_.request_failed(*id, kind, failure);
        else if (failure.empty() && id && !abandoned && !self->stopping_)
            self->events_.request_failed(*id, errc::connection_lost,
                                         "the reply from " + self->url_text_ + " ended without an answer");
    }

    /// Send @p req and read the reply: JSON or SSE messages are dispatched; a failure is left
    /// in @p failure (with its kind).
    template <class Stream>
    static asio::awaitable<void> post_exchange(std::shared_ptr<http_transport> self, Stream& stream,
                                               http::request<http::string_body>& req, std::optional<std::int64_t> id,
                                               std::string& failure, errc& kind) {
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
            std::string text;
            auto collect = [&text](std::string_view piece) {
                if (text.size() < 2000) text.append(piece.substr(0, 2000 - text.size()));
            };
            auto reading = read_body(stream, buffer, parser, collect);
            co_await std::move(reading);
            bool const gone = status == 404 && !self->session_id_.empty();
            kind = gone ? errc::connection_lost : errc::protocol_error;
            failure = "HTTP " + std::to_string(status) + (gone ? " (the session is gone)" : std::string()) + " from " +
                      self->url_text_ + (text.empty() ? std::string() : ": " + text);
        } else if (status == 202 || status == 204 || !id) {
            // accepted (a notification or an answer of ours)
        } else if (type.rfind("text/event-stream", 0) == 0) {
            sse_reader sse;
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
            http::request<http::empty_body> req{http::verb::get, self->url_.target, 11};
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
    url_parts url_;
    std::map<std::string, std::string> headers_;
    std::chrono::milliseconds timeout_;
    transport_events events_;
    std::string session_id_;
    std::string protocol_version_;
    std::unique_ptr<asio::ssl::context> tls_;  // https only
    std::map<std::int64_t, std::shared_ptr<connection>> open_;
    std::shared_ptr<connection> listener_;
    bool stopping_ = false;
};

}  // namespace

std::shared_ptr<transport> make_http_transport(asio::any_io_executor io, server_config const& config) {
    return std::make_shared<http_transport>(io, config);
}

}  // namespace stategraph::mcp::detail
