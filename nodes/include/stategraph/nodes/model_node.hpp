#ifndef STATEGRAPH_NODES_MODEL_NODE_HPP
#define STATEGRAPH_NODES_MODEL_NODE_HPP

/// @file
/// @brief `model_node<&S::messages>(model, tools)`: a node that sends the conversation to a chat
/// model and appends its answer; it streams tokens in the `messages` stream mode.

#include <stategraph/context.hpp>
#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/model_span.hpp>
#include <stategraph/nodes/tool_node.hpp>
#include <stategraph/state.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief What a model node sends besides the conversation.
/// Thread safety: a plain value, copied into the node (shared const between its copies).
struct model_options {
    std::string system_prompt;         ///< @brief Put first as a "system" message when not empty.
    std::vector<tool_definition> tools;///< @brief Tools offered to the model.
    std::optional<double> temperature; ///< @brief Sampling temperature, when set.
};

/// @brief A chunk as the `messages` stream mode shows it: LangGraph's AIMessageChunk
/// `{"type":"AIMessageChunk","id","content","tool_call_chunks":[{"name","args","id","index"}]}`.
/// @param chunk the streamed piece.
/// @param id the message id the chunks of one answer share.
inline boost::json::object message_chunk_json(chat_chunk const& chunk, std::string const& id) {
    boost::json::array calls;
    for (auto const& c : chunk.tool_calls)
        calls.push_back(boost::json::object{{"type", "tool_call_chunk"}, {"index", c.index}, {"id", c.id},
                                            {"name", c.name}, {"args", c.arguments}});
    return boost::json::object{{"type", "AIMessageChunk"}, {"id", id}, {"content", chunk.content},
                               {"tool_call_chunks", std::move(calls)}};
}

/// @brief The node returned by model_node().
/// @tparam Messages `&S::messages`.
/// Thread safety: immutable; one node object serves every run at once (the model is shared, so it
/// must be safe to call concurrently).
template <auto Messages>
class model_node_fn {
public:
    using state_type = typename member_traits<Messages>::state_type;

    /// @param model the chat model; null throws `std::invalid_argument`.
    /// @param options system prompt, tools offered and temperature.
    model_node_fn(std::shared_ptr<chat_model> model, model_options options)
        : model_(std::move(model)), options_(std::make_shared<model_options const>(std::move(options))) {
        if (!model_) throw std::invalid_argument("stategraph::nodes::model_node: no chat model");
    }

    boost::asio::awaitable<update<state_type>> operator()(state_type const& s, stategraph::context& ctx) const {
        auto model = model_;
        auto options = options_;
        chat_request request = make_request(*options, s.*Messages);
        std::string const model_name = request.model.empty() ? model->model_name() : request.model;
        std::string const id = "ai:" + ctx.run_id() + ":" + std::to_string(ctx.step()) + ":" + ctx.node();
        chat_response response;
        auto span = start_model_span(ctx, model_name);
        try {
            if (ctx.streams_messages()) {
                auto* context = &ctx;
                chunk_handler on_chunk = [context, id](chat_chunk const& chunk) {
                    context->write_message(message_chunk_json(chunk, id));
                };
                response = co_await model->stream(std::move(request), std::move(on_chunk));
            } else {
                response = co_await model->complete(std::move(request));
            }
        } catch (std::exception const& e) {
            record_failure(span, e);
            throw;
        }
        record_answer(span, response);
        span.end();
        if (response.usage().total_tokens() != 0) ctx.report_usage(model_name, response.usage());
        std::vector<chat_message> answer(1, response.to_message());
        answer.front().id = id;
        co_return update<state_type>{}.template set<Messages>(std::move(answer));
    }

    static chat_request make_request(model_options const& options, std::vector<chat_message> const& conversation) {
        chat_request request;
        if (!options.system_prompt.empty()) request.messages.push_back(chat_message{"system", options.system_prompt});
        for (auto const& m : conversation) request.messages.push_back(m);
        request.tools = options.tools;
        request.temperature = options.temperature;
        return request;
    }

private:
    std::shared_ptr<chat_model> model_;
    std::shared_ptr<model_options const> options_;
};

/// @brief A node over the state holding `Messages`: it sends the system prompt and the messages
/// to @p model (offering `options.tools`) and appends the answer as an "assistant" message.
/// When the run streams `messages`, it asks the model to stream and writes each chunk with
/// `ctx.write_message` (as LangGraph's AIMessageChunk) as it arrives.
/// Model errors (e.g. chat_error from the OpenAI client) propagate, so the node's retry policy applies.
/// @tparam Messages `&S::messages`: a `std::vector<chat_message>` field with a reducer.
/// @param model the chat model, shared by every run; null throws `std::invalid_argument`.
/// @param options system prompt (sent first when not empty), tools offered, temperature.
/// @return the node: a coroutine node taking `(const S&, context&)`; its model call is awaited on
/// the run's executor.
/// Thread safety: a pure function; any thread.
template <auto Messages>
model_node_fn<Messages> model_node(std::shared_ptr<chat_model> model, model_options options = {}) {
    static_assert(messages_field<Messages>,
                  "model_node<&S::field>(model): the field must be a std::vector<stategraph::nodes::chat_message> "
                  "member of the state");
    detail::check_messages_reducer<Messages>();
    return model_node_fn<Messages>(std::move(model), std::move(options));
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_MODEL_NODE_HPP
