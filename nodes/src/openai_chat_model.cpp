/// @file
/// @brief OpenAI chat-completions client on Boost.Beast (plain TCP or OpenSSL).

#include <stategraph/nodes/openai_chat_model.hpp>

#include <stategraph/core/http_url.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/field.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/system/system_error.hpp>

#include <openssl/ssl.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <limits>
#include <map>
#include <string_view>
#include <utility>

namespace stategraph::nodes {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = boost::asio::ip::tcp;
using clock_type = std::chrono::steady_clock;

/// @brief Largest response body accepted from the server.
constexpr std::uint64_t max_response_body = 16u * 1024u * 1024u;

/// @brief How many bytes of a response body are quoted in error messages.
constexpr std::size_t body_excerpt_length = 200;

class chat_category_impl final : public boost::system::error_category {
public:
    /// Fixed identifier so that categories compare equal across shared-library boundaries.
    constexpr chat_category_impl() noexcept : boost::system::error_category(0x8f3c52a1d6e04b97ull) {}

    char const* name() const noexcept override { return "stategraph.chat"; }

    using boost::system::error_category::message;

    std::string message(int value) const override {
        switch (static_cast<chat_error>(value)) {
        case chat_error::bad_url: return "invalid base URL";
        case chat_error::bad_request: return "invalid chat request";
        case chat_error::connect_failed: return "cannot connect to the chat server";
        case chat_error::tls_failed: return "TLS failure";
        case chat_error::timeout: return "chat request timed out";
        case chat_error::io_failed: return "I/O error talking to the chat server";
        case chat_error::http_status: return "chat server returned an HTTP error status";
        case chat_error::bad_response: return "malformed chat completion response";
        }
        return "unknown stategraph.chat error";
    }
};

/// @brief Throw boost::system::system_error carrying @p e and @p message.
[[noreturn]] void fail(chat_error e, std::string const& message) {
    boost::system::error_code const code = e;
    throw boost::system::system_error(code, message);
}

/// @brief The start of @p body, printable, for error messages.
std::string excerpt(std::string_view body) {
    std::string out;
    auto const n = std::min(body.size(), body_excerpt_length);
    out.reserve(n + 3);
    for (char c : body.substr(0, n))
        out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
    if (body.size() > n)
        out += "...";
    return out;
}

/// @brief The pieces of a base URL needed to send a request.
struct url_parts {
    bool tls = false;
    std::string host;         ///< Host name or IP literal, without IPv6 brackets.
    std::string port;         ///< Decimal port.
    std::string host_header;  ///< Value of the Host header.
    std::string target;       ///< Request target, e.g. "/v1/chat/completions".
    std::string endpoint;     ///< Full normalized URL, for messages.
};

bool is_ip_literal(std::string const& host) {
    boost::system::error_code ec;
    asio::ip::make_address(host, ec);
    return !ec;
}

/// @brief Split @p url (the shared parser, stategraph/core/http_url.hpp) and add the chat
/// completions path; throws chat_error::bad_url.
url_parts parse_base_url(std::string_view url) {
    auto const bad = [url](std::string_view why) {
        fail(chat_error::bad_url, "invalid base_url \"" + excerpt(url) + "\": " + std::string(why));
    };
    auto const parsed = parse_http_url(url);
    if (!parsed)
        bad(parsed.error);
    if (!parsed.url->query.empty() || url.find('?') != std::string_view::npos)
        bad("query strings are not supported");
    url_parts out;
    out.tls = parsed.url->tls;
    out.host = parsed.url->host;
    out.port = parsed.url->port;
    out.host_header = parsed.url->host_header();
    std::string path = parsed.url->path;
    while (!path.empty() && path.back() == '/')
        path.pop_back();
    out.target = path + "/chat/completions";
    out.endpoint = parsed.url->origin() + out.target;
    return out;
}

/// @brief Serialize the OpenAI request body (with `stream: true` when @p stream).
std::string make_body(chat_request const& request, std::string const& model, bool stream) {
    json::object body;
    body["model"] = model;
    json::array messages;
    messages.reserve(request.messages.size());
    for (auto const& m : request.messages) {
        json::object message;
        message["role"] = m.role;
        if (m.role == "assistant" && !m.tool_calls.empty() && m.content.empty())
            message["content"] = nullptr;
        else
            message["content"] = m.content;
        if (!m.tool_calls.empty()) {
            json::array calls;
            for (auto const& c : m.tool_calls) {
                json::object function;
                function["name"] = c.name;
                function["arguments"] = c.arguments;
                json::object call;
                call["id"] = c.id;
                call["type"] = "function";
                call["function"] = std::move(function);
                calls.emplace_back(std::move(call));
            }
            message["tool_calls"] = std::move(calls);
        }
        if (!m.tool_call_id.empty())
            message["tool_call_id"] = m.tool_call_id;
        messages.emplace_back(std::move(message));
    }
    body["messages"] = std::move(messages);
    if (request.temperature)
        body["temperature"] = *request.temperature;
    if (request.json_mode) {
        json::object format;
        format["type"] = "json_object";
        body["response_format"] = std::move(format);
    }
    if (!request.tools.empty()) {
        json::array tools;
        for (auto const& t : request.tools) {
            json::object function;
            function["name"] = t.name;
            if (!t.description.empty())
                function["description"] = t.description;
            if (t.parameters.is_null())
                function["parameters"] = json::object{{"type", "object"}, {"properties", json::object{}}};
            else
                function["parameters"] = t.parameters;
            json::object tool;
            tool["type"] = "function";
            tool["function"] = std::move(function);
            tools.emplace_back(std::move(tool));
        }
        body["tools"] = std::move(tools);
    }
    if (stream) {
        body["stream"] = true;
        body["stream_options"] = json::object{{"include_usage", true}};
    }
    return json::serialize(body);
}

/// @brief A string member of @p o, or "" when absent or null; @p bad is called when it is not a string.
template <class Bad>
std::string string_member(json::object const& o, std::string_view key, std::string const& where, Bad const& bad) {
    auto const* v = o.if_contains(key);
    if (!v || v->is_null())
        return {};
    if (!v->is_string())
        bad(where + "." + std::string(key) + " is not a string");
    return std::string(v->get_string());
}

/// @brief Read an optional integer token count; absent or null gives 0.
int token_count(json::object const& usage, std::string_view key, std::string const& context) {
    auto const* v = usage.if_contains(key);
    if (!v || v->is_null())
        return 0;
    boost::system::error_code ec;
    auto const n = v->to_number<std::int64_t>(ec);
    if (ec || n < 0 || n > std::numeric_limits<int>::max())
        fail(chat_error::bad_response, context + ": usage." + std::string(key) + " is not a token count");
    return static_cast<int>(n);
}

/// @brief Parse a chat.completion body into a chat_response; throws chat_error::bad_response.
chat_response parse_completion(std::string const& body, std::string const& endpoint) {
    auto const context = "POST " + endpoint;
    auto const bad = [&](std::string_view why) {
        fail(chat_error::bad_response, context + ": " + std::string(why) + ": " + excerpt(body));
    };

    boost::system::error_code ec;
    json::value doc = json::parse(body, ec);
    if (ec)
        bad("response is not JSON (" + ec.message() + ")");
    auto const* root = doc.if_object();
    if (!root)
        bad("response is not a JSON object");
    auto const* choices_value = root->if_contains("choices");
    auto const* choices = choices_value ? choices_value->if_array() : nullptr;
    if (!choices || choices->empty())
        bad("response has no choices");
    auto const* choice = choices->front().if_object();
    if (!choice)
        bad("choices[0] is not an object");
    auto const* message_value = choice->if_contains("message");
    auto const* message = message_value ? message_value->if_object() : nullptr;
    if (!message)
        bad("choices[0].message is missing");

    chat_response out;
    if (auto const* content = message->if_contains("content"); content && !content->is_null()) {
        if (!content->is_string())
            bad("choices[0].message.content is not a string");
        out.content = std::string(content->get_string());
    }
    if (auto const* calls_value = message->if_contains("tool_calls"); calls_value && !calls_value->is_null()) {
        auto const* calls = calls_value->if_array();
        if (!calls)
            bad("choices[0].message.tool_calls is not an array");
        for (std::size_t i = 0; i < calls->size(); ++i) {
            std::string const where = "choices[0].message.tool_calls[" + std::to_string(i) + "]";
            auto const* call = (*calls)[i].if_object();
            auto const* function_value = call ? call->if_contains("function") : nullptr;
            auto const* function = function_value ? function_value->if_object() : nullptr;
            if (!function)
                bad(where + ".function is missing");
            tool_call c;
            c.id = string_member(*call, "id", where, bad);
            c.name = string_member(*function, "name", where + ".function", bad);
            c.arguments = string_member(*function, "arguments", where + ".function", bad);
            if (c.name.empty())
                bad(where + ".function.name is missing");
            out.tool_calls.push_back(std::move(c));
        }
    }
    if (auto const* reason = choice->if_contains("finish_reason"); reason && !reason->is_null()) {
        if (!reason->is_string())
            bad("choices[0].finish_reason is not a string");
        out.finish_reason = std::string(reason->get_string());
    }
    if (auto const* usage_value = root->if_contains("usage"); usage_value && !usage_value->is_null()) {
        auto const* usage = usage_value->if_object();
        if (!usage)
            bad("usage is not an object");
        out.prompt_tokens = token_count(*usage, "prompt_tokens", context);
        out.completion_tokens = token_count(*usage, "completion_tokens", context);
    }
    return out;
}

/// @brief Turns the body of a streamed answer (Server-Sent Events of `chat.completion.chunk`
/// objects, ended by `data: [DONE]`) into chunks for the handler and, at the end, the whole answer.
class sse_assembler {
public:
    sse_assembler(std::string endpoint, chunk_handler const& on_chunk)
        : context_("POST " + std::move(endpoint)), on_chunk_(on_chunk) {}

    /// @brief Whether the server answered with an event stream (set by round_trip).
    bool active = false;

    /// @brief Process the complete lines of @p body (the whole body received so far).
    void feed(std::string_view body) {
        for (;;) {
            auto const nl = body.find('\n', offset_);
            if (nl == std::string_view::npos)
                return;
            auto line = body.substr(offset_, nl - offset_);
            offset_ = nl + 1;
            if (!line.empty() && line.back() == '\r')
                line.remove_suffix(1);
            if (line.empty()) {
                if (has_data_)
                    event(data_);
                data_.clear();
                has_data_ = false;
            } else if (line.rfind("data:", 0) == 0) {
                auto value = line.substr(5);
                if (!value.empty() && value.front() == ' ')
                    value.remove_prefix(1);
                if (has_data_)
                    data_ += '\n';
                data_ += value;
                has_data_ = true;
            }  // other fields (event:, id:, retry:) and comments (":") carry nothing here
        }
    }

    /// @brief The whole answer; throws chat_error::bad_response if the stream was cut short.
    chat_response finish(std::string_view body) {
        feed(body);
        if (has_data_)
            event(data_);
        if (!done_ && out_.finish_reason.empty())
            fail(chat_error::bad_response, context_ + ": the event stream ended before [DONE]");
        for (auto& [index, call] : calls_)
            out_.tool_calls.push_back(std::move(call));
        return std::move(out_);
    }

private:
    [[noreturn]] void bad(std::string const& why, std::string_view data) const {
        fail(chat_error::bad_response, context_ + ": " + why + ": " + excerpt(data));
    }

    void event(std::string const& data) {
        if (data == "[DONE]") {
            done_ = true;
            return;
        }
        boost::system::error_code ec;
        json::value doc = json::parse(data, ec);
        if (ec)
            bad("stream chunk is not JSON (" + ec.message() + ")", data);
        auto const* root = doc.if_object();
        if (!root)
            bad("stream chunk is not a JSON object", data);
        auto const on_bad = [&](std::string const& why) { bad(why, data); };
        if (auto const* error = root->if_contains("error"))
            bad("the server reported an error in the stream", json::serialize(*error));
        if (auto const* usage_value = root->if_contains("usage"); usage_value && usage_value->is_object()) {
            out_.prompt_tokens = token_count(usage_value->get_object(), "prompt_tokens", context_);
            out_.completion_tokens = token_count(usage_value->get_object(), "completion_tokens", context_);
        }
        auto const* choices_value = root->if_contains("choices");
        auto const* choices = choices_value ? choices_value->if_array() : nullptr;
        if (!choices)
            bad("stream chunk has no choices", data);
        if (choices->empty())
            return;  // the usage chunk
        auto const* choice = choices->front().if_object();
        if (!choice)
            bad("choices[0] is not an object", data);
        chat_chunk chunk;
        if (auto const* delta_value = choice->if_contains("delta"); delta_value && delta_value->is_object()) {
            auto const& delta = delta_value->get_object();
            chunk.content = string_member(delta, "content", "delta", on_bad);
            if (auto const* calls = delta.if_contains("tool_calls"); calls && calls->is_array()) {
                for (auto const& item : calls->get_array()) {
                    auto const* call = item.if_object();
                    if (!call)
                        bad("delta.tool_calls[] is not an object", data);
                    tool_call_chunk piece;
                    if (auto const* index = call->if_contains("index"); index && index->is_int64())
                        piece.index = static_cast<int>(index->get_int64());
                    piece.id = string_member(*call, "id", "delta.tool_calls[]", on_bad);
                    if (auto const* f = call->if_contains("function"); f && f->is_object()) {
                        piece.name = string_member(f->get_object(), "name", "function", on_bad);
                        piece.arguments = string_member(f->get_object(), "arguments", "function", on_bad);
                    }
                    auto& whole = calls_[piece.index];
                    whole.id += piece.id;
                    whole.name += piece.name;
                    whole.arguments += piece.arguments;
                    chunk.tool_calls.push_back(std::move(piece));
                }
            }
        }
        if (auto const reason = string_member(*choice, "finish_reason", "choices[0]", on_bad); !reason.empty())
            out_.finish_reason = reason;
        out_.content += chunk.content;
        if ((!chunk.content.empty() || !chunk.tool_calls.empty()) && on_chunk_)
            on_chunk_(chunk);
    }

    std::string context_;
    chunk_handler const& on_chunk_;
    std::size_t offset_ = 0;
    std::string data_;
    bool has_data_ = false;
    bool done_ = false;
    chat_response out_;
    std::map<int, tool_call> calls_;
};

bool timed_out(boost::system::error_code const& ec, clock_type::time_point deadline) {
    return ec == beast::error::timeout ||
           (ec == asio::error::operation_aborted && clock_type::now() >= deadline);
}

}  // namespace

boost::system::error_category const& chat_category() noexcept {
    static chat_category_impl const category;
    return category;
}

boost::system::error_code make_error_code(chat_error e) noexcept {
    return {static_cast<int>(e), chat_category()};
}

struct openai_chat_model::impl {
    openai_options options;
    url_parts url;
    std::unique_ptr<asio::ssl::context> tls;  ///< Set for https:// only.
};

namespace {

using response_type = http::response<http::string_body>;

/// @brief Write @p request on @p stream and read one response; @p stream is connected
/// (and TLS-established) and its lowest layer carries the deadline.
template <class Stream>
asio::awaitable<response_type> round_trip(Stream& stream, http::request<http::string_body>& request,
                                          std::string const& endpoint, clock_type::time_point deadline,
                                          sse_assembler* sse) {
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);

    co_await http::async_write(stream, request, token);
    if (ec) {
        if (timed_out(ec, deadline))
            fail(chat_error::timeout, "POST " + endpoint + ": timed out sending the request");
        fail(chat_error::io_failed, "POST " + endpoint + ": sending the request failed: " + ec.message());
    }

    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(max_response_body);
    if (sse) {
        co_await http::async_read_header(stream, buffer, parser, token);
        auto const& head = parser.get();
        sse->active = !ec && head.result_int() / 100 == 2 &&
                      head[http::field::content_type].starts_with("text/event-stream");
    }
    if (sse && sse->active) {
        while (!ec && !parser.is_done()) {
            co_await http::async_read_some(stream, buffer, parser, token);
            sse->feed(parser.get().body());
        }
    } else if (!ec) {
        co_await http::async_read(stream, buffer, parser, token);
    }
    if (ec) {
        if (timed_out(ec, deadline))
            fail(chat_error::timeout, "POST " + endpoint + ": timed out waiting for the response");
        fail(chat_error::io_failed, "POST " + endpoint + ": reading the response failed: " + ec.message());
    }
    co_return parser.release();
}

/// @brief Connect @p stream (a beast::tcp_stream) to @p endpoints before @p deadline.
asio::awaitable<void> connect(beast::tcp_stream& stream, tcp::resolver::results_type const& endpoints,
                              url_parts const& url, clock_type::time_point deadline) {
    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    stream.expires_at(deadline);
    co_await stream.async_connect(endpoints, token);
    if (ec) {
        if (timed_out(ec, deadline))
            fail(chat_error::timeout, "POST " + url.endpoint + ": timed out connecting to " + url.host_header);
        fail(chat_error::connect_failed,
             "POST " + url.endpoint + ": cannot connect to " + url.host_header + ": " + ec.message());
    }
}

/// @brief Resolve the host of @p url, giving up at @p deadline.
asio::awaitable<tcp::resolver::results_type> resolve(asio::any_io_executor executor, url_parts const& url,
                                                     clock_type::time_point deadline) {
    auto resolver = std::make_shared<tcp::resolver>(executor);
    asio::steady_timer guard(executor);
    guard.expires_at(deadline);
    std::weak_ptr<tcp::resolver> weak_resolver = resolver;
    auto on_deadline = [weak_resolver](boost::system::error_code const& ec) {
        if (!ec)
            if (auto r = weak_resolver.lock())
                r->cancel();
    };
    guard.async_wait(on_deadline);

    boost::system::error_code ec;
    auto token = asio::redirect_error(asio::use_awaitable, ec);
    auto const flags = tcp::resolver::numeric_service;
    auto results = co_await resolver->async_resolve(url.host, url.port, flags, token);
    guard.cancel();
    if (ec) {
        if (timed_out(ec, deadline))
            fail(chat_error::timeout, "POST " + url.endpoint + ": timed out resolving " + url.host);
        fail(chat_error::connect_failed, "POST " + url.endpoint + ": cannot resolve " + url.host + ": " + ec.message());
    }
    co_return results;
}

}  // namespace

openai_chat_model::openai_chat_model(asio::any_io_executor, openai_options options)
    : openai_chat_model(std::move(options)) {}

openai_chat_model::openai_chat_model(openai_options options) : impl_(std::make_shared<impl>()) {
    impl_->url = parse_base_url(options.base_url);
    impl_->options = std::move(options);
    if (impl_->url.tls) {
        auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
        boost::system::error_code ec;
        ctx->set_default_verify_paths(ec);
        if (!ec && !impl_->options.extra_ca_pem.empty())
            ctx->add_certificate_authority(asio::buffer(impl_->options.extra_ca_pem), ec);
        if (!ec)
            ctx->set_verify_mode(asio::ssl::verify_peer, ec);
        if (ec)
            fail(chat_error::tls_failed, "TLS setup for " + impl_->url.endpoint + " failed: " + ec.message());
        ::SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
        impl_->tls = std::move(ctx);
    }
}

openai_chat_model::~openai_chat_model() = default;

openai_options const& openai_chat_model::options() const noexcept { return impl_->options; }

std::string openai_chat_model::model_name() const { return impl_->options.model; }

std::string const& openai_chat_model::endpoint() const noexcept { return impl_->url.endpoint; }

asio::awaitable<chat_response> openai_chat_model::complete(chat_request request) {
    std::shared_ptr<impl> self = impl_;
    return exchange(std::move(self), std::move(request), nullptr);
}

asio::awaitable<chat_response> openai_chat_model::stream(chat_request request, chunk_handler on_chunk) {
    std::shared_ptr<impl> self = impl_;
    auto handler = std::make_shared<chunk_handler>(std::move(on_chunk));
    return exchange(std::move(self), std::move(request), std::move(handler));
}

asio::awaitable<chat_response> openai_chat_model::exchange(std::shared_ptr<impl> self, chat_request request,
                                                           std::shared_ptr<chunk_handler> on_chunk) {
    // self keeps the configuration alive for the whole exchange, independently of *this.
    url_parts const& url = self->url;
    openai_options const& options = self->options;

    std::string const& model = request.model.empty() ? options.model : request.model;
    if (model.empty())
        fail(chat_error::bad_request, "POST " + url.endpoint + ": no model given in the request or the options");

    http::request<http::string_body> http_request(http::verb::post, url.target, 11);
    http_request.set(http::field::host, url.host_header);
    http_request.set(http::field::user_agent, "stategraph/0.1");
    http_request.set(http::field::content_type, "application/json");
    http_request.set(http::field::accept, on_chunk ? "text/event-stream" : "application/json");
    if (!options.api_key.empty())
        http_request.set(http::field::authorization, "Bearer " + options.api_key);
    http_request.body() = make_body(request, model, on_chunk != nullptr);
    std::optional<sse_assembler> sse;
    if (on_chunk)
        sse.emplace(url.endpoint, *on_chunk);
    sse_assembler* const sse_ptr = sse ? &*sse : nullptr;
    http_request.prepare_payload();

    // The exchange runs on the executor of the coroutine awaiting it, whatever executor the model
    // was built with: under run_sync (a private io_context), on a thread pool, or on the context
    // the model was given, its sockets and timers make progress as long as the caller does.
    asio::any_io_executor const executor = co_await asio::this_coro::executor;
    auto const deadline = clock_type::now() + options.timeout;
    auto const endpoints = co_await resolve(executor, url, deadline);

    response_type response;
    if (self->tls) {
        beast::ssl_stream<beast::tcp_stream> stream(executor, *self->tls);
        if (!is_ip_literal(url.host) && !::SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str()))
            fail(chat_error::tls_failed, "POST " + url.endpoint + ": cannot set TLS server name");
        stream.set_verify_callback(asio::ssl::host_name_verification(url.host));
        co_await connect(beast::get_lowest_layer(stream), endpoints, url, deadline);

        boost::system::error_code ec;
        auto token = asio::redirect_error(asio::use_awaitable, ec);
        co_await stream.async_handshake(asio::ssl::stream_base::client, token);
        if (ec) {
            if (timed_out(ec, deadline))
                fail(chat_error::timeout, "POST " + url.endpoint + ": timed out in the TLS handshake");
            fail(chat_error::tls_failed, "POST " + url.endpoint + ": TLS handshake failed: " + ec.message());
        }
        response = co_await round_trip(stream, http_request, url.endpoint, deadline, sse_ptr);
        // No TLS close_notify exchange: the response is complete and the connection is discarded.
        beast::get_lowest_layer(stream).close();
    } else {
        beast::tcp_stream stream(executor);
        co_await connect(stream, endpoints, url, deadline);
        response = co_await round_trip(stream, http_request, url.endpoint, deadline, sse_ptr);
        boost::system::error_code ignored;
        stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
        stream.close();
    }

    if (response.result_int() / 100 != 2) {
        auto const reason = response.reason();
        fail(chat_error::http_status, "POST " + url.endpoint + ": HTTP " + std::to_string(response.result_int()) +
                                          (reason.empty() ? "" : " " + std::string(reason)) + ": " +
                                          excerpt(response.body()));
    }
    if (sse && sse->active)
        co_return sse->finish(response.body());
    co_return parse_completion(response.body(), url.endpoint);
}

}  // namespace stategraph::nodes
