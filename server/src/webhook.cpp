// A run's webhook (LangGraph's `webhook` run field): when the run ends, the instance that ran it
// POSTs the run to the URL as JSON: the run's record (run_id, thread_id, assistant_id, status,
// metadata, kwargs, ...) with `values` (the run's final values), `error` when it failed,
// `run_started_at`, `run_ended_at` and `webhook_sent_at`. http:// and, in a build with OpenSSL,
// https:// (the peer's certificate verified against the system's roots, with its host name).
// A webhook that fails (no connection, a timeout, an answer not 2xx) is tried three times in all,
// a second apart, then logged with the run's id; the run's outcome is not changed by it. It is
// sent once the run's end is stored: an instance killed between the two sends none.

#include "impl.hpp"

#if STATEGRAPH_SERVER_TLS
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <openssl/ssl.h>
#endif

namespace stategraph::server {

namespace {

constexpr int webhook_attempts = 3;
constexpr auto webhook_timeout = std::chrono::seconds(10);
constexpr auto webhook_pause = std::chrono::seconds(1);

template <class Stream>
awaitable<unsigned> post_over(Stream& stream, const webhook_target& to, const std::string& body) {
    http::request<http::string_body> req{http::verb::post, to.target, 11};
    req.set(http::field::host, to.host);
    req.set(http::field::content_type, "application/json");
    req.set(http::field::user_agent, "stategraph-server");
    req.body() = body;
    req.prepare_payload();
    co_await http::async_write(stream, req, net::use_awaitable);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    co_await http::async_read(stream, buffer, res, net::use_awaitable);
    co_return res.result_int();
}

/// One attempt: the answer's status, or throws.
awaitable<unsigned> post_once(const webhook_target& to, const std::string& body) {
    auto ex = co_await net::this_coro::executor;
    net::ip::tcp::resolver resolver(ex);
    auto endpoints = co_await resolver.async_resolve(to.host, to.port, net::use_awaitable);
    beast::tcp_stream tcp(ex);
    tcp.expires_after(webhook_timeout);
    co_await tcp.async_connect(endpoints, net::use_awaitable);
    if (!to.tls) co_return co_await post_over(tcp, to, body);
#if STATEGRAPH_SERVER_TLS
    net::ssl::context ctx(net::ssl::context::tls_client);
    ctx.set_default_verify_paths();
    ctx.set_verify_mode(net::ssl::verify_peer);
    ctx.set_verify_callback(net::ssl::host_name_verification(to.host));
    beast::ssl_stream<beast::tcp_stream> tls(std::move(tcp), ctx);
    if (!SSL_set_tlsext_host_name(tls.native_handle(), to.host.c_str()))
        throw std::runtime_error("could not set the TLS server name '" + to.host + "'");
    co_await tls.async_handshake(net::ssl::stream_base::client, net::use_awaitable);
    co_return co_await post_over(tls, to, body);
#else
    throw std::runtime_error("this server was built without OpenSSL");
#endif
}

} // namespace

webhook_target parse_webhook(std::string_view url) {
    auto bad = [&](const std::string& why) -> webhook_target {
        throw http_error(422, "field 'webhook' ('" + std::string(url) + "') " + why);
    };
    webhook_target out;
    std::string_view rest;
    if (url.starts_with("http://")) {
        rest = url.substr(7);
        out.port = "80";
    } else if (url.starts_with("https://")) {
        rest = url.substr(8);
        out.tls = true;
        out.port = "443";
#if !STATEGRAPH_SERVER_TLS
        return bad("is https, and this server was built without OpenSSL (install libssl-dev and rebuild, or use http://)");
#endif
    } else {
        return bad("must be an absolute http:// or https:// URL");
    }
    const auto slash = rest.find('/');
    std::string_view authority = rest.substr(0, slash);
    out.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
    if (authority.find('@') != std::string_view::npos) return bad("must not carry a user name or password");
    if (authority.starts_with("[")) { // [::1]:8080
        const auto close = authority.find(']');
        if (close == std::string_view::npos) return bad("has an unclosed '[' in its host");
        out.host = std::string(authority.substr(1, close - 1));
        authority.remove_prefix(close + 1);
        if (authority.starts_with(":")) out.port = std::string(authority.substr(1));
        else if (!authority.empty()) return bad("has something after its host");
    } else if (const auto colon = authority.rfind(':'); colon != std::string_view::npos) {
        out.host = std::string(authority.substr(0, colon));
        out.port = std::string(authority.substr(colon + 1));
    } else {
        out.host = std::string(authority);
    }
    if (out.host.empty()) return bad("has no host");
    if (out.port.empty() || out.port.size() > 5 || !std::all_of(out.port.begin(), out.port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(out.port) == 0 || std::stoi(out.port) > 65535)
        return bad("has a port that is not a number from 1 to 65535");
    return out;
}

awaitable<void> server::impl::send_webhook(std::shared_ptr<impl> self, std::string url, std::string body, std::string run_id) {
    std::string failure;
    try {
        const webhook_target to = parse_webhook(url);
        for (int attempt = 1; attempt <= webhook_attempts; ++attempt) {
            try {
                const unsigned status = co_await post_once(to, body);
                if (status >= 200 && status < 300) co_return;
                failure = "answered " + std::to_string(status);
            } catch (const std::exception& e) {
                failure = e.what();
            }
            if (attempt < webhook_attempts) {
                net::steady_timer pause(self->ex, webhook_pause);
                co_await pause.async_wait(net::use_awaitable);
            }
        }
    } catch (const std::exception& e) {
        failure = e.what();
    }
    self->log_line("run '" + run_id + "': its webhook " + url + " failed after " + std::to_string(webhook_attempts) +
                   " attempts: " + failure);
}

} // namespace stategraph::server
