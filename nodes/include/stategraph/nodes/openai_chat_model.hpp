#ifndef STATEGRAPH_NODES_OPENAI_CHAT_MODEL_HPP
#define STATEGRAPH_NODES_OPENAI_CHAT_MODEL_HPP

/// @file
/// @brief A chat_model that talks to an OpenAI-compatible `/chat/completions` endpoint over HTTP(S).

#include <stategraph/nodes/chat_model.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/error_category.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/is_error_code_enum.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

namespace stategraph::nodes {

/// @brief Error codes thrown (inside boost::system::system_error) by openai_chat_model.
enum class chat_error {
    bad_url = 1,     ///< @brief base_url is not a valid http:// or https:// URL.
    bad_request,     ///< @brief The request cannot be sent (e.g. no model name).
    connect_failed,  ///< @brief Host name resolution or TCP connect failed (e.g. connection refused).
    tls_failed,      ///< @brief TLS setup or handshake failed (including certificate verification).
    timeout,         ///< @brief The whole exchange did not finish within openai_options::timeout.
    io_failed,       ///< @brief Sending the request or reading the response failed.
    http_status,     ///< @brief The server answered with a non-2xx HTTP status.
    bad_response,    ///< @brief The response body is not a well-formed chat completion.
};

/// @brief The "stategraph.chat" error category.
///
/// A Boost.System category, so that boost::system::system_error::code() reports it directly;
/// it converts implicitly to a std::error_category, and std::error_code values built from a
/// chat_error carry the same name and messages.
boost::system::error_category const& chat_category() noexcept;

/// @brief Make an error code in chat_category(); found by ADL by both Boost.System and std.
/// The result converts implicitly to std::error_code.
/// @param e the code.
boost::system::error_code make_error_code(chat_error e) noexcept;

}  // namespace stategraph::nodes

template <>
struct boost::system::is_error_code_enum<stategraph::nodes::chat_error> : std::true_type {};

template <>
struct std::is_error_code_enum<stategraph::nodes::chat_error> : std::true_type {};

namespace stategraph::nodes {

/// @brief Connection settings of an openai_chat_model.
/// @code
/// nodes::openai_chat_model model({.base_url = "http://127.0.0.1:8080/v1",   // llama.cpp, vLLM, Ollama: plain http works
///                                 .model = "qwen2.5-7b-instruct"});
/// nodes::openai_chat_model openai({.base_url = "https://api.openai.com/v1",
///                                  .api_key = api_key /* from a secret store or the environment, never the code */, .model = "gpt-4o-mini"});
/// @endcode
/// Thread safety: a plain value, copied by the client's constructor.
struct openai_options {
    /// @brief API root up to and including the version segment: it must end in `/v1` (with or
    /// without a trailing `/`), e.g. `https://api.openai.com/v1` or `http://127.0.0.1:8080/v1`.
    /// The request goes to `{base_url}/chat/completions`, so a root without `/v1` reaches
    /// `/chat/completions` and most servers answer 404 (`chat_error::http_status`).
    /// Both schemes work: `http://` is plain TCP (a model server on this host or a private
    /// network), `https://` is TLS with SNI and peer verification. An unknown scheme or a
    /// malformed URL throws `chat_error::bad_url` from the constructor.
    std::string base_url;
    /// @brief Sent as `Authorization: Bearer <api_key>`; the header is omitted when empty.
    std::string api_key;
    /// @brief Default model, used when chat_request::model is empty.
    std::string model;
    /// @brief Deadline for one whole exchange (resolve, connect, TLS handshake, write, read).
    std::chrono::milliseconds timeout{std::chrono::seconds(30)};
    /// @brief Extra PEM certificate(s) trusted for https:// in addition to the system defaults
    /// (private gateways, tests). Empty: system defaults only.
    std::string extra_ca_pem;
};

/// @brief chat_model client for the OpenAI chat-completions protocol (OpenAI, vLLM, llama.cpp,
/// Ollama, LiteLLM, ...).
///
/// Each exchange runs on the executor of the coroutine that awaits complete() or stream(): the
/// model works the same under `stategraph::run_sync` (which runs the graph on a private
/// io_context), on an io_context of your own, or on a thread pool, and its timeout always applies.
///
/// Each complete() call opens one connection (plain TCP for http://, TLS with SNI and peer
/// verification against the system trust store for https://), POSTs the request, reads one
/// response and closes the connection. Concurrent complete() calls are allowed.
///
/// Failures throw boost::system::system_error whose code() compares equal to a chat_error;
/// the message names the URL and, for HTTP errors, the status and the start of the body.
/// Thread safety: one client may be shared by any number of runs and threads; calls are independent
/// (one connection each) and each completes on the awaiting coroutine's executor.
class openai_chat_model final : public chat_model {
public:
    /// @brief Create a client; its exchanges run on the executor of whichever coroutine awaits them.
    /// @throws boost::system::system_error with chat_error::bad_url if options.base_url is
    /// invalid, or chat_error::tls_failed if the TLS context cannot be set up.
    /// @param options the endpoint root (ending in `/v1`), API key, default model, whole-exchange
    /// timeout (default 30 s) and extra trusted certificates.
    explicit openai_chat_model(openai_options options);
    /// @brief The same: the executor is accepted for existing code and not used (an exchange
    /// runs on the awaiting coroutine's executor, so a model built with an io_context that
    /// nobody runs still works, e.g. under run_sync).
    /// @param executor ignored.
    /// @param options as for the other constructor.
    openai_chat_model(boost::asio::any_io_executor executor, openai_options options);
    ~openai_chat_model() override;

    openai_chat_model(openai_chat_model const&) = delete;
    openai_chat_model& operator=(openai_chat_model const&) = delete;

    /// @brief POST @p request to `{base_url}/chat/completions` and parse the first choice.
    /// @throws boost::system::system_error with a chat_error code.
    /// @param request the messages, tools, model (empty: `openai_options::model`) and sampling settings.
    /// @return the first choice: its text, tool calls and usage.
    boost::asio::awaitable<chat_response> complete(chat_request request) override;

    /// @brief POST @p request with `stream: true` and read the Server-Sent Events as they come:
    /// each `chat.completion.chunk` delta (text and tool-call pieces) goes to @p on_chunk, and the
    /// assembled answer is returned after `data: [DONE]`. A server that answers with a plain
    /// JSON completion instead is accepted (no chunks are handed over then).
    /// @throws boost::system::system_error with a chat_error code (bad_response when the stream
    /// is malformed or ends early).
    /// @param request as for `complete`.
    /// @param on_chunk called for each delta, on the awaiting coroutine's executor, one at a time; an
    /// exception it throws ends the exchange and propagates.
    boost::asio::awaitable<chat_response> stream(chat_request request, chunk_handler on_chunk) override;

    /// @brief The options this client was built with.
    openai_options const& options() const noexcept;
    /// @brief `options().model`.
    std::string model_name() const override;

    /// @brief The full endpoint URL, `{base_url}/chat/completions` (normalized).
    std::string const& endpoint() const noexcept;

private:
    struct impl;
    static boost::asio::awaitable<chat_response> exchange(std::shared_ptr<impl> self, chat_request request,
                                                          std::shared_ptr<chunk_handler> on_chunk);
    std::shared_ptr<impl> impl_;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_OPENAI_CHAT_MODEL_HPP
