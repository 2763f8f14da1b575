#ifndef STATEGRAPH_NODES_REACT_AGENT_HPP
#define STATEGRAPH_NODES_REACT_AGENT_HPP

/// @file
/// @brief `react_agent<&S::messages>(model, tools)`: model ⇄ tools until the model answers
/// without tool calls, as a compiled subgraph usable as one node.

#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/model_node.hpp>
#include <stategraph/nodes/permissions.hpp>
#include <stategraph/nodes/tool.hpp>
#include <stategraph/nodes/tool_node.hpp>
#include <stategraph/state_graph.hpp>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief What a ReAct agent does when its model still asks for tools after max_steps calls.
enum class on_step_limit {
    error,          ///< @brief Throw agent_error(errc::step_limit) (the run fails; the default).
    final_message,  ///< @brief Append LangGraph's "Sorry, need more steps to process this request." and end.
};

/// @brief Settings of a ReAct agent (the third argument of `react_agent`); every field has a
/// default, so name only the ones you change.
/// @code
/// auto agent = nodes::react_agent<&desk::messages>(model, tools,
///     {.name = "support", .system_prompt = "You answer customers of an online shop.", .max_steps = 6,
///      .at_limit = nodes::on_step_limit::final_message,
///      .permissions = nodes::permission_rules({}, {}, {"refund(*)"})});   // ask a human before each refund
/// @endcode
/// An aggregate: build it outside a `co_await` expression (g++ 12 destroys an aggregate
/// temporary standing in one twice).
/// Thread safety: a plain value, copied by `react_agent`.
struct react_options {
    std::string name = "react_agent";  ///< @brief Graph name (drawings, error messages).
    std::string system_prompt;         ///< @brief First message of every model call; empty: none is sent.
    int max_steps = 10;                ///< @brief Model calls per user turn (since the last "user" message); keep the run's recursion_limit above 2 * max_steps + 1.
    on_step_limit at_limit = on_step_limit::error; ///< @brief What a call past max_steps does: throw (default) or end with a final message.
    permission_rules permissions;      ///< @brief Checked before each tool call (see tool_node): allow, deny, or ask a human (an interrupt). Default: allow all.
};

/// @brief How many assistant messages follow the last user message.
/// @param messages the conversation. Thread safety: pure; any thread.
inline int steps_since_user(std::vector<chat_message> const& messages) {
    int n = 0;
    for (auto it = messages.rbegin(); it != messages.rend() && it->role != "user"; ++it)
        if (it->role == "assistant") ++n;
    return n;
}

namespace detail {

/// @brief A model call that first checks the step limit of @p options (see react_agent).
template <auto Messages, class Call>
auto step_limited(Call call, react_options const& options) {
    using S = typename member_traits<Messages>::state_type;
    return [call = std::move(call), name = options.name, max_steps = options.max_steps,
            at_limit = options.at_limit](S const& s, stategraph::context& ctx) -> boost::asio::awaitable<update<S>> {
        int const used = steps_since_user(s.*Messages);
        if (used >= max_steps) {
            if (at_limit == on_step_limit::error)
                throw agent_error(errc::step_limit, "react agent '" + name + "': the model still asks for tools after " +
                                                        std::to_string(used) + " calls (max_steps " +
                                                        std::to_string(max_steps) + ")");
            std::vector<chat_message> last(1, chat_message{"assistant", "Sorry, need more steps to process this request."});
            co_return update<S>{}.template set<Messages>(std::move(last));
        }
        auto pending = call(s, ctx);
        co_return co_await std::move(pending);
    };
}

}  // namespace detail

/// @brief A ReAct agent over the state holding `Messages`, as a compiled graph (use it as a
/// subgraph node: `"agent"_n = react_agent<&chat::messages>(model, tools)`):
///
///     START --> agent --(tool calls)--> tools --> agent
///                 |
///                 +----(no tool call)--> END
///
/// `agent` is a model_node offered the tools' definitions; `tools` a tool_node. The step limit
/// counts model calls since the last "user" message: before a call past `max_steps` the agent
/// throws agent_error(errc::step_limit) naming the agent and the limit, or, with
/// `on_step_limit::final_message`, ends with LangGraph's final message instead (LangGraph's
/// `create_react_agent` does the latter when its `remaining_steps` run out, and raises
/// GraphRecursionError at the recursion limit). Keep the run's recursion_limit above
/// 2 * max_steps + 1.
/// @tparam Messages `&S::messages`: a `std::vector<chat_message>` field with a reducer (checked by a
/// `static_assert`).
/// @param model the chat model, shared by every run of the agent (it must be safe to call
/// concurrently, as `openai_chat_model` is); awaited from the agent node's coroutine.
/// @param tools the tools offered to the model and run by the `tools` node.
/// @param options name, system prompt, step limit, what happens at the limit, permission rules.
/// @return the agent as a compiled graph without a checkpointer of its own (as a subgraph node it
/// uses its parent's).
/// @throws std::invalid_argument when `options.max_steps` is below 1.
/// Thread safety: call from any thread; the graph it returns is a `compiled_graph` (shareable).
template <auto Messages>
compiled_graph<typename member_traits<Messages>::state_type> react_agent(std::shared_ptr<chat_model> model,
                                                                         std::vector<tool> tools,
                                                                         react_options options = {}) {
    static_assert(messages_field<Messages>,
                  "react_agent<&S::field>(model, tools): the field must be a "
                  "std::vector<stategraph::nodes::chat_message> member of the state");
    detail::check_messages_reducer<Messages>();
    using S = typename member_traits<Messages>::state_type;
    if (options.max_steps < 1)
        throw std::invalid_argument("react_agent '" + options.name + "': max_steps must be at least 1");
    auto tools_fn = tool_node<Messages>(std::move(tools), options.permissions);
    model_options mo;
    mo.system_prompt = options.system_prompt;
    mo.tools = tools_fn.definitions();
    auto call = model_node<Messages>(std::move(model), std::move(mo));
    auto agent = detail::step_limited<Messages>(std::move(call), options);
    state_graph<S> g(options.name);
    g.add_node("agent", std::move(agent));
    g.add_node("tools", std::move(tools_fn));
    g.add_edge(START, "agent");
    std::map<std::string, std::string> routes{{"tools", "tools"}, {END, END}};
    g.add_conditional_edges("agent", tools_condition<Messages>, routes);
    g.add_edge("tools", "agent");
    return g.compile();
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_REACT_AGENT_HPP
