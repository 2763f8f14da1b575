#ifndef STATEGRAPH_NODES_CHAT_MODEL_HPP
#define STATEGRAPH_NODES_CHAT_MODEL_HPP

/// @file
/// @brief The chat-model interface used by graph nodes, plus an offline rule-based implementation.

#include <boost/asio/awaitable.hpp>
#include <boost/describe/class.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief One message of a chat conversation ("system", "user", "assistant", ...).
struct chat_message {
    std::string role;     ///< @brief Speaker role, e.g. "system", "user" or "assistant".
    std::string content;  ///< @brief Message text.

    friend bool operator==(chat_message const&, chat_message const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_message, (), (role, content))

/// @brief A chat-completion request.
struct chat_request {
    /// @brief Model name; when empty, the model's configured default is used.
    std::string model;
    /// @brief The conversation so far, oldest first.
    std::vector<chat_message> messages;
    /// @brief Sampling temperature; omitted from the request when unset.
    std::optional<double> temperature;
    /// @brief Ask the model for a single JSON object (OpenAI `response_format: json_object`).
    bool json_mode = false;

    friend bool operator==(chat_request const&, chat_request const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_request, (), (model, messages, temperature, json_mode))

/// @brief The model's answer to a chat_request.
struct chat_response {
    std::string content;        ///< @brief Text of the first choice's message.
    std::string finish_reason;  ///< @brief Why generation stopped ("stop", "length", ...); may be empty.
    int prompt_tokens = 0;      ///< @brief Tokens consumed by the prompt, as reported by the server (0 if not reported).
    int completion_tokens = 0;  ///< @brief Tokens generated, as reported by the server (0 if not reported).

    friend bool operator==(chat_response const&, chat_response const&) = default;
};
BOOST_DESCRIBE_STRUCT(chat_response, (), (content, finish_reason, prompt_tokens, completion_tokens))

/// @brief Abstract chat model: turns a chat_request into a chat_response asynchronously.
///
/// Implementations report failures by throwing (e.g. boost::system::system_error with a
/// stategraph::nodes::chat_error code for network models).
class chat_model {
public:
    virtual ~chat_model() = default;

    /// @brief Complete the conversation in @p request.
    /// @return The first choice produced by the model.
    virtual boost::asio::awaitable<chat_response> complete(chat_request request) = 0;

protected:
    chat_model() = default;
    chat_model(chat_model const&) = default;
    chat_model& operator=(chat_model const&) = default;
};

/// @brief Deterministic, offline chat model that answers with a user-supplied function.
///
/// Useful for tests and for graphs that must run without network access.
/// Exceptions thrown by the rule propagate out of complete().
class rule_chat_model final : public chat_model {
public:
    /// @brief The signature of the answering function.
    using rule_type = std::function<chat_response(chat_request const&)>;

    /// @brief Wrap @p rule. @throws std::invalid_argument if @p rule is empty.
    explicit rule_chat_model(rule_type rule) : rule_(std::move(rule)) {
        if (!rule_)
            throw std::invalid_argument("stategraph::nodes::rule_chat_model: empty rule");
    }

    /// @brief Answer @p request by calling the rule (synchronously, without suspending).
    boost::asio::awaitable<chat_response> complete(chat_request request) override {
        co_return rule_(request);
    }

private:
    rule_type rule_;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_CHAT_MODEL_HPP
