#ifndef STATEGRAPH_TESTS_NODES_FAKE_OPENAI_SERVER_HPP
#define STATEGRAPH_TESTS_NODES_FAKE_OPENAI_SERVER_HPP

/// @file
/// @brief A loopback HTTP(S) server speaking the OpenAI chat-completions protocol, for tests.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/serializer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <exception>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::test {

/// @brief A self-signed certificate and its private key, both PEM.
struct test_certificate {
    std::string cert_pem;
    std::string key_pem;
};

/// @brief Generate a fresh self-signed P-256 certificate whose subjectAltName is @p san
/// (OpenSSL syntax, e.g. "DNS:localhost,IP:127.0.0.1").
inline test_certificate make_self_signed_certificate(std::string const& san) {
    auto check = [](bool ok, char const* what) {
        if (!ok)
            throw std::runtime_error(std::string("test certificate: ") + what);
    };
    std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(EVP_EC_gen("P-256"), &EVP_PKEY_free);
    check(key != nullptr, "EVP_EC_gen");
    std::unique_ptr<X509, decltype(&X509_free)> cert(X509_new(), &X509_free);
    check(cert != nullptr, "X509_new");
    check(X509_set_version(cert.get(), 2) == 1, "X509_set_version");
    check(ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1) == 1, "serial");
    check(X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr, "notBefore");
    check(X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600) != nullptr, "notAfter");
    check(X509_set_pubkey(cert.get(), key.get()) == 1, "X509_set_pubkey");
    X509_NAME* name = X509_get_subject_name(cert.get());
    auto const* cn = reinterpret_cast<unsigned char const*>("stategraph test");
    check(X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, cn, -1, -1, 0) == 1, "CN");
    check(X509_set_issuer_name(cert.get(), name) == 1, "issuer");

    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
    for (auto const& [nid, value] : {std::pair{NID_subject_alt_name, san},
                                     std::pair{NID_basic_constraints, std::string("critical,CA:TRUE")}}) {
        X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
        check(ext != nullptr, "X509V3_EXT_conf_nid");
        int const added = X509_add_ext(cert.get(), ext, -1);
        X509_EXTENSION_free(ext);
        check(added == 1, "X509_add_ext");
    }
    check(X509_sign(cert.get(), key.get(), EVP_sha256()) > 0, "X509_sign");

    auto to_pem = [&](auto write) {
        std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new(BIO_s_mem()), &BIO_free);
        check(bio != nullptr && write(bio.get()) == 1, "PEM write");
        char* data = nullptr;
        long const size = BIO_get_mem_data(bio.get(), &data);
        return std::string(data, static_cast<std::size_t>(size));
    };
    test_certificate out;
    out.cert_pem = to_pem([&](BIO* b) { return PEM_write_bio_X509(b, cert.get()); });
    out.key_pem = to_pem(
        [&](BIO* b) { return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr); });
    return out;
}

/// @brief What the fake server answers to a request that passes validation.
enum class fake_reply {
    completion,      ///< @brief A well-formed chat.completion.
    malformed_json,  ///< @brief HTTP 200 with a truncated JSON body.
    no_choices,      ///< @brief HTTP 200 with a JSON object lacking "choices".
    hang,            ///< @brief Never answer (until the client goes away).
    cut_stream,      ///< @brief For `stream: true`: send some chunks, then end without `[DONE]`.
};

/// @brief A tool call in a scripted answer.
struct fake_tool_call {
    std::string id;
    std::string name;
    std::string arguments;  ///< JSON text
};

/// @brief One scripted answer: text and/or tool calls (finish_reason "tool_calls" when any).
struct scripted_reply {
    std::string content;
    std::vector<fake_tool_call> tool_calls;
};

/// @brief One request as the fake server saw it.
struct observed_request {
    std::string method;
    std::string target;
    std::string authorization;
    std::string content_type;
    std::string server_name;  ///< @brief TLS SNI host name, empty for plain HTTP or no SNI.
    boost::json::value body;  ///< @brief Parsed JSON body (null if it did not parse).
    unsigned status = 0;      ///< @brief HTTP status answered (0 if none).
};

/// @brief Loopback server on 127.0.0.1:<ephemeral> implementing POST /v1/chat/completions.
///
/// Validation (in this order): method POST (else 405), target /v1/chat/completions (else 404),
/// `Authorization: Bearer <api_key>` (else 401 with an OpenAI-style error), Content-Type
/// application/json (else 415), body a JSON object with a string "model" and a non-empty
/// "messages" array of {role, content} strings (else 400). Then it answers as `reply` says.
/// Token usage is counted in whitespace-separated words. Messages may be assistant messages
/// with `tool_calls` (content null) and "tool" messages (with a `tool_call_id`); a request may
/// offer `tools`. Valid requests take the next answer of `script` (or `reply_content` when the
/// script is empty). With `"stream": true` the answer goes out as Server-Sent Events in HTTP
/// chunks: one `chat.completion.chunk` per word of the text, a tool call's id and name, then its
/// arguments in two pieces, a finish chunk, a usage chunk, and `data: [DONE]`.
class fake_openai_server {
public:
    /// @brief Start accepting on @p ioc; with @p tls non-null, speak HTTPS using that context.
    fake_openai_server(boost::asio::io_context& ioc, std::string api_key,
                       boost::asio::ssl::context* tls = nullptr)
        : ioc_(ioc), acceptor_(ioc), api_key_(std::move(api_key)), tls_(tls) {
        boost::asio::ip::tcp::endpoint const endpoint(boost::asio::ip::make_address("127.0.0.1"), 0);
        acceptor_.open(endpoint.protocol());
        acceptor_.set_option(boost::asio::ip::tcp::acceptor::reuse_address(true));
        acceptor_.bind(endpoint);
        acceptor_.listen();
        port_ = acceptor_.local_endpoint().port();
        boost::asio::co_spawn(ioc_, accept_loop(), rethrow);
    }

    fake_openai_server(fake_openai_server const&) = delete;
    fake_openai_server& operator=(fake_openai_server const&) = delete;

    /// @brief The port the server listens on.
    unsigned short port() const noexcept { return port_; }

    /// @brief `http://127.0.0.1:<port>/v1` (or https:// with TLS, using @p host).
    std::string base_url(std::string const& host = "127.0.0.1") const {
        return std::string(tls_ ? "https://" : "http://") + host + ":" + std::to_string(port_) + "/v1";
    }

    /// @brief Stop accepting and close every open connection.
    void stop() {
        boost::system::error_code ignored;
        acceptor_.close(ignored);
        for (auto& close : closers_)
            close();
        closers_.clear();
    }

    /// @brief What to answer to valid requests.
    fake_reply reply = fake_reply::completion;
    /// @brief The assistant message content of completions.
    std::string reply_content = "Hello from the fake server.";
    /// @brief Scripted answers, taken in order (front first) by valid requests.
    std::deque<scripted_reply> script;
    /// @brief Every request received, in arrival order.
    std::vector<observed_request> requests;

private:
    using request_type = boost::beast::http::request<boost::beast::http::string_body>;
    using response_type = boost::beast::http::response<boost::beast::http::string_body>;
    using tls_stream = boost::beast::ssl_stream<boost::beast::tcp_stream>;

    static void rethrow(std::exception_ptr e) {
        if (e)
            std::rethrow_exception(e);
    }

    static int count_words(std::string const& text) {
        std::istringstream in(text);
        std::string word;
        int n = 0;
        while (in >> word)
            ++n;
        return n;
    }

    boost::asio::awaitable<void> accept_loop() {
        for (;;) {
            boost::system::error_code ec;
            auto token = boost::asio::redirect_error(boost::asio::use_awaitable, ec);
            boost::asio::ip::tcp::socket socket = co_await acceptor_.async_accept(token);
            if (ec)
                co_return;  // closed by stop()
            if (tls_) {
                auto stream = std::make_shared<tls_stream>(std::move(socket), *tls_);
                std::weak_ptr<tls_stream> weak = stream;
                closers_.push_back([weak] {
                    if (auto s = weak.lock())
                        boost::beast::get_lowest_layer(*s).close();
                });
                boost::asio::co_spawn(ioc_, tls_session(std::move(stream)), rethrow);
            } else {
                auto stream = std::make_shared<boost::beast::tcp_stream>(std::move(socket));
                std::weak_ptr<boost::beast::tcp_stream> weak = stream;
                closers_.push_back([weak] {
                    if (auto s = weak.lock())
                        s->close();
                });
                boost::asio::co_spawn(ioc_, session(std::move(stream), std::string()), rethrow);
            }
        }
    }

    boost::asio::awaitable<void> tls_session(std::shared_ptr<tls_stream> stream) {
        boost::system::error_code ec;
        auto token = boost::asio::redirect_error(boost::asio::use_awaitable, ec);
        co_await stream->async_handshake(boost::asio::ssl::stream_base::server, token);
        if (ec)
            co_return;  // e.g. the client rejected our certificate
        char const* sni = SSL_get_servername(stream->native_handle(), TLSEXT_NAMETYPE_host_name);
        std::string server_name = sni ? sni : "";
        co_await session(std::move(stream), std::move(server_name));
    }

    template <class Stream>
    boost::asio::awaitable<void> session(std::shared_ptr<Stream> stream, std::string server_name) {
        boost::beast::flat_buffer buffer;
        for (;;) {
            boost::system::error_code ec;
            auto token = boost::asio::redirect_error(boost::asio::use_awaitable, ec);
            request_type request;
            co_await boost::beast::http::async_read(*stream, buffer, request, token);
            if (ec)
                co_return;  // client closed, or stop()
            requests.emplace_back();
            std::size_t const index = requests.size() - 1;
            requests[index].server_name = server_name;
            std::vector<std::string> events;
            std::optional<response_type> response = handle(request, requests[index], events);
            if (!response)
                continue;  // fake_reply::hang: wait for the client to give up
            requests[index].status = response->result_int();
            if (!events.empty()) {
                co_await write_events(*stream, request, events);
                co_return;
            }
            co_await boost::beast::http::async_write(*stream, *response, token);
            if (ec || !response->keep_alive())
                co_return;
        }
    }

    /// @brief Send @p events as one Server-Sent Event per HTTP chunk, then close.
    template <class Stream>
    static boost::asio::awaitable<void> write_events(Stream& stream, request_type const& request,
                                                     std::vector<std::string> const& events) {
        namespace http = boost::beast::http;
        boost::system::error_code ec;
        auto token = boost::asio::redirect_error(boost::asio::use_awaitable, ec);
        http::response<http::empty_body> head(http::status::ok, request.version());
        head.set(http::field::server, "fake-openai");
        head.set(http::field::content_type, "text/event-stream");
        head.set(http::field::cache_control, "no-cache");
        head.keep_alive(false);
        head.chunked(true);
        http::response_serializer<http::empty_body> serializer(head);
        co_await http::async_write_header(stream, serializer, token);
        for (auto const& event : events) {
            if (ec)
                co_return;
            co_await boost::asio::async_write(stream, http::make_chunk(boost::asio::buffer(event)), token);
        }
        if (!ec)
            co_await boost::asio::async_write(stream, http::make_chunk_last(), token);
        boost::beast::get_lowest_layer(stream).close();
    }

    static std::string sse(boost::json::value const& chunk) { return "data: " + boost::json::serialize(chunk) + "\n\n"; }

    static boost::json::object stream_chunk(std::string const& model, boost::json::object delta,
                                            boost::json::value finish_reason) {
        boost::json::object choice;
        choice["index"] = 0;
        choice["delta"] = std::move(delta);
        choice["finish_reason"] = std::move(finish_reason);
        boost::json::array choices;
        choices.emplace_back(std::move(choice));
        boost::json::object chunk;
        chunk["id"] = "chatcmpl-fake-stream";
        chunk["object"] = "chat.completion.chunk";
        chunk["created"] = 1700000000;
        chunk["model"] = model;
        chunk["choices"] = std::move(choices);
        return chunk;
    }

    /// @brief The events of a streamed @p answer (see the class comment).
    std::vector<std::string> stream_events(std::string const& model, scripted_reply const& answer, int prompt_tokens,
                                           int completion_tokens) const {
        std::vector<std::string> events;
        events.push_back(": a comment line, which clients ignore\n\n");
        std::istringstream words(answer.content);
        std::string word;
        bool first = true;
        while (words >> word) {
            boost::json::object delta;
            if (first)
                delta["role"] = "assistant";
            delta["content"] = (first ? "" : " ") + word;
            first = false;
            events.push_back(sse(stream_chunk(model, std::move(delta), nullptr)));
        }
        for (std::size_t i = 0; i < answer.tool_calls.size(); ++i) {
            auto const& call = answer.tool_calls[i];
            auto const half = call.arguments.size() / 2;
            for (int piece = 0; piece < 3; ++piece) {
                boost::json::object function;
                if (piece == 0)
                    function["name"] = call.name;
                function["arguments"] = piece == 0 ? std::string() : piece == 1 ? call.arguments.substr(0, half)
                                                                               : call.arguments.substr(half);
                boost::json::object item;
                item["index"] = i;
                if (piece == 0) {
                    item["id"] = call.id;
                    item["type"] = "function";
                }
                item["function"] = std::move(function);
                boost::json::object delta;
                delta["tool_calls"] = boost::json::array{std::move(item)};
                events.push_back(sse(stream_chunk(model, std::move(delta), nullptr)));
            }
        }
        if (reply == fake_reply::cut_stream)
            return events;
        events.push_back(sse(stream_chunk(model, boost::json::object{},
                                          answer.tool_calls.empty() ? "stop" : "tool_calls")));
        boost::json::object usage;
        usage["prompt_tokens"] = prompt_tokens;
        usage["completion_tokens"] = completion_tokens;
        usage["total_tokens"] = prompt_tokens + completion_tokens;
        boost::json::object last;
        last["id"] = "chatcmpl-fake-stream";
        last["object"] = "chat.completion.chunk";
        last["choices"] = boost::json::array{};
        last["usage"] = std::move(usage);
        events.push_back(sse(last));
        events.push_back("data: [DONE]\n\n");
        return events;
    }

    static response_type make_response(request_type const& request, unsigned status, std::string body) {
        response_type response(static_cast<boost::beast::http::status>(status), request.version());
        response.set(boost::beast::http::field::server, "fake-openai");
        response.set(boost::beast::http::field::content_type, "application/json");
        response.keep_alive(request.keep_alive());
        response.body() = std::move(body);
        response.prepare_payload();
        return response;
    }

    static response_type error_response(request_type const& request, unsigned status, std::string const& message,
                                        std::string const& code) {
        boost::json::object error;
        error["message"] = message;
        error["type"] = "invalid_request_error";
        error["param"] = nullptr;
        error["code"] = code;
        boost::json::object body;
        body["error"] = std::move(error);
        return make_response(request, status, boost::json::serialize(body));
    }

    std::optional<response_type> handle(request_type const& request, observed_request& seen,
                                        std::vector<std::string>& events) {
        namespace http = boost::beast::http;
        seen.method = std::string(request.method_string());
        seen.target = std::string(request.target());
        seen.authorization = std::string(request[http::field::authorization]);
        seen.content_type = std::string(request[http::field::content_type]);
        boost::system::error_code ec;
        seen.body = boost::json::parse(request.body(), ec);
        if (ec)
            seen.body = nullptr;

        if (request.method() != http::verb::post)
            return error_response(request, 405, "Method not allowed", "method_not_allowed");
        if (request.target() != "/v1/chat/completions")
            return error_response(request, 404, "Unknown path", "not_found");
        if (seen.authorization != "Bearer " + api_key_)
            return error_response(request, 401, "Incorrect API key provided", "invalid_api_key");
        if (seen.content_type != "application/json")
            return error_response(request, 415, "Expected application/json", "unsupported_media_type");

        auto const* body = seen.body.if_object();
        auto const* model = body ? body->if_contains("model") : nullptr;
        auto const* messages = body ? body->if_contains("messages") : nullptr;
        if (!model || !model->is_string() || !messages || !messages->is_array() || messages->get_array().empty())
            return error_response(request, 400, "Expected a model and messages", "invalid_body");
        int prompt_tokens = 0;
        for (auto const& m : messages->get_array()) {
            auto const* message = m.if_object();
            auto const* role = message ? message->if_contains("role") : nullptr;
            auto const* content = message ? message->if_contains("content") : nullptr;
            auto const* calls = message ? message->if_contains("tool_calls") : nullptr;
            bool const content_ok =
                content && (content->is_string() || (content->is_null() && calls && calls->is_array()));
            if (!role || !role->is_string() || !content_ok)
                return error_response(request, 400, "Malformed message", "invalid_body");
            if (role->get_string() == "tool") {
                auto const* id = message->if_contains("tool_call_id");
                if (!id || !id->is_string() || id->get_string().empty())
                    return error_response(request, 400, "A tool message needs a tool_call_id", "invalid_body");
            }
            if (content->is_string())
                prompt_tokens += count_words(std::string(content->get_string()));
        }
        if (auto const* tools = body->if_contains("tools")) {
            if (!tools->is_array())
                return error_response(request, 400, "tools must be an array", "invalid_body");
            for (auto const& t : tools->get_array()) {
                auto const* function = t.is_object() ? t.get_object().if_contains("function") : nullptr;
                auto const* name = function && function->is_object() ? function->get_object().if_contains("name")
                                                                      : nullptr;
                if (!name || !name->is_string())
                    return error_response(request, 400, "Malformed tool", "invalid_body");
            }
        }
        auto const* stream_flag = body->if_contains("stream");
        bool const streaming = stream_flag && stream_flag->is_bool() && stream_flag->get_bool();

        switch (reply) {
        case fake_reply::hang:
            return std::nullopt;
        case fake_reply::malformed_json:
            return make_response(request, 200, R"({"id": "chatcmpl-fake", "choices": [{"index": 0, "mess)");
        case fake_reply::no_choices:
            return make_response(request, 200, R"({"id": "chatcmpl-fake", "object": "chat.completion"})");
        case fake_reply::completion:
        case fake_reply::cut_stream:  // cut only when streaming
            break;
        }

        scripted_reply answer{reply_content, {}};
        if (!script.empty()) {
            answer = std::move(script.front());
            script.pop_front();
        }
        int const completion_tokens = count_words(answer.content);
        if (streaming) {
            events = stream_events(std::string(model->get_string()), answer, prompt_tokens, completion_tokens);
            return make_response(request, 200, "");
        }
        boost::json::object message;
        message["role"] = "assistant";
        if (answer.tool_calls.empty()) {
            message["content"] = answer.content;
        } else {
            message["content"] = answer.content.empty() ? boost::json::value(nullptr) : boost::json::value(answer.content);
            boost::json::array calls;
            for (auto const& c : answer.tool_calls) {
                boost::json::object function;
                function["name"] = c.name;
                function["arguments"] = c.arguments;
                boost::json::object call;
                call["id"] = c.id;
                call["type"] = "function";
                call["function"] = std::move(function);
                calls.emplace_back(std::move(call));
            }
            message["tool_calls"] = std::move(calls);
        }
        boost::json::object choice;
        choice["index"] = 0;
        choice["message"] = std::move(message);
        choice["logprobs"] = nullptr;
        choice["finish_reason"] = answer.tool_calls.empty() ? "stop" : "tool_calls";
        boost::json::array choices;
        choices.emplace_back(std::move(choice));
        boost::json::object usage;
        usage["prompt_tokens"] = prompt_tokens;
        usage["completion_tokens"] = completion_tokens;
        usage["total_tokens"] = prompt_tokens + completion_tokens;
        boost::json::object completion;
        completion["id"] = "chatcmpl-fake-" + std::to_string(requests.size());
        completion["object"] = "chat.completion";
        completion["created"] = 1700000000;
        completion["model"] = model->get_string();
        completion["choices"] = std::move(choices);
        completion["usage"] = std::move(usage);
        completion["system_fingerprint"] = "fp_fake";
        return make_response(request, 200, boost::json::serialize(completion));
    }

    boost::asio::io_context& ioc_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::string api_key_;
    boost::asio::ssl::context* tls_;
    unsigned short port_ = 0;
    std::vector<std::function<void()>> closers_;
};

}  // namespace stategraph::test

#endif  // STATEGRAPH_TESTS_NODES_FAKE_OPENAI_SERVER_HPP
