#ifndef STATEGRAPH_NODES_CHAT_MODEL_HPP
#define STATEGRAPH_NODES_CHAT_MODEL_HPP

/// @file
/// @brief The chat-model interface used by graph nodes, plus an offline rule-based implementation.

#include <stategraph/run_observer.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/describe/class.hpp>
#include <boost/json/value.hpp>

#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief One call of a tool requested by the model (OpenAI `tool_calls[i]`, type "function").
struct tool_call {
    std::string id;         ///< @brief Call id chosen by the model; the tool message answers it.
    std::string name;       ///< @brief The tool's name.
    std::string arguments;  ///< @brief The arguments as JSON text, exactly as the model wrote them.

    friend bool operator==(tool_call const&, tool_call const&) = default;
};
BOOST_DESCRIBE_STRUCT(tool_call, (), (id, name, arguments))

/// @brief A tool offered to the model (OpenAI `tools[i]`, type "function").
struct tool_definition {
    std::string name;              ///< @brief Name the model calls it by.
    std::string description;       ///< @brief What it does, for the model.
    boost::json::value parameters; ///< @brief JSON Schema of the arguments object (null: `{"type":"object"}`).

    friend bool operator==(tool_definition const&, tool_definition const&) = default;
};
BOOST_DESCRIBE_STRUCT(tool_definition, (), (name, description, parameters))

/// @brief One message of a chat conversation ("system", "user", "assistant", "tool").
///
/// Usable as the element of a state field reduced with `stategraph::messages` (it has `id` and
/// `role`): a message with the id of an earlier one replaces it.
struct chat_message {
    std::string role;                  ///< @brief Speaker role: "system", "user", "assistant" or "tool".
    std::string content;               ///< @brief Message text.
    std::vector<tool_call> tool_calls; ///< @brief Tools an assistant message asks to run.
    std::string tool_call_id;          ///< @brief For role "tool": the call this message answers.
    std::string id;                    ///< @brief Message id (the `messages` reducer assigns one when empty).
    std::string error;                 ///< @brief For role "tool": the failure kind (a `nodes::errc` name), empty on success.

    friend bool operator==(chat_message const&, chat_message const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_message, (), (role, content, tool_calls, tool_call_id, id, error))

/// @brief A chat-completion request.
///
/// Not an aggregate, on purpose: g++ 12 destroys an aggregate temporary twice when it stands in a
/// `co_await` expression, so `co_await model->complete(chat_request{.model = "m"})` would crash
/// there. With the constructors, `co_await model->complete(chat_request(messages))` and
/// `co_await model->complete(chat_request{})` are safe, and the designated-initializer spelling
/// does not compile.
struct chat_request {
    chat_request() = default;
    /// @brief A request for @p messages to model @p model (empty: the model's configured default).
    /// @param messages the conversation, oldest first.
    /// @param model the model name; empty: the client's default.
    explicit chat_request(std::vector<chat_message> messages, std::string model = {})
        : model(std::move(model)), messages(std::move(messages)) {}

    /// @brief Model name; when empty, the model's configured default is used.
    std::string model;
    /// @brief The conversation so far, oldest first.
    std::vector<chat_message> messages;
    /// @brief Sampling temperature; omitted from the request when unset.
    std::optional<double> temperature;
    /// @brief Ask the model for a single JSON object (OpenAI `response_format: json_object`).
    bool json_mode = false;
    /// @brief Tools the model may call (OpenAI `tools`); omitted from the request when empty.
    std::vector<tool_definition> tools;

    friend bool operator==(chat_request const&, chat_request const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_request, (), (model, messages, temperature, json_mode, tools))

/// @brief The model's answer to a chat_request.
struct chat_response {
    std::string content;        ///< @brief Text of the first choice's message.
    std::string finish_reason;  ///< @brief Why generation stopped ("stop", "length", ...); may be empty.
    int prompt_tokens = 0;      ///< @brief Tokens consumed by the prompt, as reported by the server (0 if not reported).
    int completion_tokens = 0;  ///< @brief Tokens generated, as reported by the server (0 if not reported).
    std::vector<tool_call> tool_calls;  ///< @brief Tools the model asks to run ("tool_calls" finish), in order.

    friend bool operator==(chat_response const&, chat_response const&) = default;

    /// @brief The tokens reported (`context::report_usage` takes it).
    token_usage usage() const noexcept {
        token_usage u;
        u.input_tokens = prompt_tokens;
        u.output_tokens = completion_tokens;
        return u;
    }

    /// @brief The answer as an assistant message (content and tool calls) for the conversation.
    chat_message to_message() const {
        chat_message m;
        m.role = "assistant";
        m.content = content;
        m.tool_calls = tool_calls;
        return m;
    }
};
BOOST_DESCRIBE_STRUCT(chat_response, (), (content, finish_reason, prompt_tokens, completion_tokens, tool_calls))

/// @brief A piece of a tool call while it streams: the first piece of a call carries its id and
/// name, later ones more of its arguments text. `index` tells the calls of one answer apart.
struct tool_call_chunk {
    int index = 0;
    std::string id;
    std::string name;
    std::string arguments;

    friend bool operator==(tool_call_chunk const&, tool_call_chunk const&) = default;
};
BOOST_DESCRIBE_STRUCT(tool_call_chunk, (), (index, id, name, arguments))

/// @brief One streamed piece of an answer (an OpenAI `chat.completion.chunk` delta).
struct chat_chunk {
    std::string content;                      ///< @brief More text (may be empty).
    std::vector<tool_call_chunk> tool_calls;  ///< @brief Pieces of tool calls.

    friend bool operator==(chat_chunk const&, chat_chunk const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_chunk, (), (content, tool_calls))

/// @brief Receives the chunks of a streamed answer, in order, as they arrive.
using chunk_handler = std::function<void(chat_chunk const&)>;

/// @brief Abstract chat model: turns a chat_request into a chat_response asynchronously.
///
/// Implementations report failures by throwing (e.g. boost::system::system_error with a
/// stategraph::nodes::chat_error code for network models).
/// Thread safety: implementations in this library may be shared by many runs and called
/// concurrently; a model of your own that is offered to a graph must be too (every run of the
/// graph calls the same object).
class chat_model {
public:
    virtual ~chat_model() = default;

    /// @brief Complete the conversation in @p request.
    /// @return The first choice produced by the model.
    /// @param request the conversation, tools and settings, moved into the call.
    virtual boost::asio::awaitable<chat_response> complete(chat_request request) = 0;

    /// @brief The model a request without `model` goes to ("" when the implementation does not
    /// say): the name token usage is reported under (`context::report_usage`).
    virtual std::string model_name() const { return {}; }

    /// @brief Complete @p request, handing each piece of the answer to @p on_chunk as it arrives;
    /// returns the whole answer assembled from the pieces. The default implementation calls
    /// complete() and hands the whole answer over as one chunk; network models stream for real.
    /// @param request as for `complete`.
    /// @param on_chunk receives each piece, in order, on the awaiting coroutine (may be empty).
    virtual boost::asio::awaitable<chat_response> stream(chat_request request, chunk_handler on_chunk) {
        // Not a coroutine itself: g++ 12 may destroy a temporary argument of a coroutine twice
        // (`co_await model.stream(request, [&](auto const& c) {...})` must be safe).
        return stream_by_complete(*this, std::move(request), std::move(on_chunk));
    }

protected:
    /// @brief The default stream(): complete() and one chunk with the whole answer.
    static boost::asio::awaitable<chat_response> stream_by_complete(chat_model& model, chat_request request,
                                                                    chunk_handler on_chunk) {
        chat_response response = co_await model.complete(std::move(request));
        chat_chunk whole;
        whole.content = response.content;
        for (std::size_t i = 0; i < response.tool_calls.size(); ++i) {
            auto const& call = response.tool_calls[i];
            whole.tool_calls.push_back(tool_call_chunk{static_cast<int>(i), call.id, call.name, call.arguments});
        }
        if (on_chunk)
            on_chunk(whole);
        co_return response;
    }

    chat_model() = default;
    chat_model(chat_model const&) = default;
    chat_model& operator=(chat_model const&) = default;
};

/// @brief Deterministic, offline chat model that answers with a user-supplied function.
///
/// Useful for tests and for graphs that must run without network access.
/// Exceptions thrown by the rule propagate out of complete().
/// Thread safety: as safe as its rule: `complete` calls the rule on the calling thread, possibly
/// from several runs at once.
class rule_chat_model final : public chat_model {
public:
    /// @brief The signature of the answering function.
    using rule_type = std::function<chat_response(chat_request const&)>;

    /// @brief Wrap @p rule. @throws std::invalid_argument if @p rule is empty.
    /// @param rule the function answering each request; must not be empty.
    explicit rule_chat_model(rule_type rule) : rule_(std::move(rule)) {
        if (!rule_)
            throw std::invalid_argument("stategraph::nodes::rule_chat_model: empty rule");
    }

    /// @brief Answer @p request by calling the rule (synchronously, without suspending).
    /// Not a coroutine itself (g++ 12 destroys a coroutine's by-value argument twice when the
    /// caller writes `co_await model.complete(chat_request{...})`): the rule runs here and its
    /// answer, or its exception, is handed to a coroutine as a named value.
    boost::asio::awaitable<chat_response> complete(chat_request request) override {
        std::exception_ptr failure;
        chat_response answer;
        try {
            answer = rule_(request);
        } catch (...) {
            failure = std::current_exception();
        }
        return deliver(std::move(answer), std::move(failure));
    }

private:
    static boost::asio::awaitable<chat_response> deliver(chat_response answer, std::exception_ptr failure) {
        if (failure) std::rethrow_exception(failure);
        co_return answer;
    }

    rule_type rule_;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_CHAT_MODEL_HPP
