#ifndef STATEGRAPH_NODES_MODEL_SPAN_HPP
#define STATEGRAPH_NODES_MODEL_SPAN_HPP

/// @file
/// @brief The trace span of one model call, as OpenTelemetry's GenAI conventions name it
/// (`chat <model>`: `gen_ai.operation.name`, `gen_ai.request.model`, the usage and finish
/// reason of the answer, `error.type` of a failure). `model_node`, the ReAct agent and the
/// supervisor's LLM router open one per call; a node that calls a model itself may too. Empty,
/// and nearly free, when the run has no tracing observer.

#include <stategraph/context.hpp>
#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/trace_span.hpp>

#include <boost/core/demangle.hpp>

#include <exception>
#include <string>
#include <string_view>
#include <system_error>
#include <typeinfo>

namespace stategraph::nodes {

/// @brief Opens the span of a call of model @p model_name for the node of @p ctx.
/// @return the span; give it the answer with `record_answer`, or a failure with `record_failure`.
/// Thread safety: as `context`: the node's own call only.
inline trace_span start_model_span(stategraph::context const& ctx, std::string const& model_name) {
    return ctx.start_span(span_kind::model, "chat " + model_name,
                          {{"gen_ai.operation.name", std::string_view("chat")},
                           {"gen_ai.request.model", std::string_view(model_name)}});
}

/// @brief Records the model's answer on @p span: input and output tokens, finish reason, how
/// many tool calls it asked for.
inline void record_answer(trace_span& span, chat_response const& answer) {
    if (!span) return;
    span.set("gen_ai.usage.input_tokens", answer.prompt_tokens);
    span.set("gen_ai.usage.output_tokens", answer.completion_tokens);
    if (!answer.finish_reason.empty()) span.set("gen_ai.response.finish_reasons", std::vector<std::string>{answer.finish_reason});
    span.set("stategraph.tool_calls", answer.tool_calls.size());
}

/// @brief Marks @p span failed with @p e: `error.type` is an error code's category and value
/// (`stategraph.nodes:20`), else the exception's type.
inline void record_failure(trace_span& span, std::exception const& e) {
    if (!span) return;
    if (auto const* s = dynamic_cast<std::system_error const*>(&e))
        span.fail(std::string(s->code().category().name()) + ":" + std::to_string(s->code().value()), e.what());
    else
        span.fail(boost::core::demangle(typeid(e).name()), e.what());
}

}  // namespace stategraph::nodes

#endif
