#ifndef STATEGRAPH_NODES_TOOL_NODE_HPP
#define STATEGRAPH_NODES_TOOL_NODE_HPP

/// @file
/// @brief `tool_node<&S::messages>(tools)`: a node that runs the tool calls of the last
/// assistant message in parallel and answers each with a "tool" message.

#include <stategraph/context.hpp>
#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/permissions.hpp>
#include <stategraph/nodes/tool.hpp>
#include <stategraph/reducer.hpp>
#include <stategraph/state.hpp>
#include <stategraph/update.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief `M` points to a state's list of chat messages (`std::vector<chat_message> S::*`).
template <auto M>
concept messages_field = requires {
    typename member_traits<M>::state_type;
    requires std::is_same_v<typename member_traits<M>::value_type, std::vector<chat_message>>;
};

/// @brief `M` is a messages field (messages_field) declared with a reducer: the message nodes
/// return only their new messages, which the reducer adds to the conversation.
template <auto M>
concept reduced_messages_field = messages_field<M> && has_reducer_v<M>;

namespace detail {

/// @brief The check of model_node, tool_node and react_agent (and what they are built into)
/// that their messages field has a reducer; returns whether it has.
template <auto M>
constexpr bool check_messages_reducer() {
    static_assert(!messages_field<M> || reduced_messages_field<M>,
                  "stategraph::nodes: the messages field (M = &S::field, named in the lines above) has no reducer, so "
                  "each node's answer would replace the conversation (the model's next request would hold only the tool "
                  "answers); declare one beside the state: auto reducers(stategraph::for_state<S>) { return "
                  "stategraph::reducers{stategraph::reduce<&S::messages>(stategraph::messages)}; }");
    return reduced_messages_field<M>;
}

/// @brief A tool message answering @p call.
inline chat_message tool_message(tool_call const& call, std::string content, std::string error) {
    chat_message m;
    m.role = "tool";
    m.content = std::move(content);
    m.tool_call_id = call.id;
    m.id = "tool:" + call.id;
    m.error = std::move(error);
    return m;
}

inline chat_message tool_error_message(tool_call const& call, errc kind, std::string const& what) {
    return tool_message(call, "Error: " + what, to_string(kind));
}

/// @brief Run one call; every failure but an interrupt becomes an error message.
inline boost::asio::awaitable<chat_message> run_tool_call(std::shared_ptr<std::vector<tool> const> tools,
                                                          std::shared_ptr<permission_rules const> rules,
                                                          tool_call call, stategraph::context* ctx) {
    // The call's span (a tracing observer): OpenTelemetry's execute_tool, failed when the call
    // ends in an error message.
    auto span = ctx->start_span(span_kind::tool, "execute_tool " + call.name,
                                {{"gen_ai.operation.name", std::string_view("execute_tool")},
                                 {"gen_ai.tool.name", std::string_view(call.name)},
                                 {"gen_ai.tool.call.id", std::string_view(call.id)}});
    auto failed = [&span, &call](errc kind, std::string const& what) {
        span.fail(to_string(kind), what);
        return tool_error_message(call, kind, what);
    };
    tool const* found = nullptr;
    std::string names;
    for (auto const& t : *tools) {
        if (t.name() == call.name) found = &t;
        names += (names.empty() ? "" : ", ") + t.name();
    }
    if (!found)
        co_return failed(errc::unknown_tool,
                                     "unknown tool '" + call.name + "'; the tools are: " + names);
    boost::system::error_code ec;
    auto parsed = boost::json::parse(call.arguments.empty() ? std::string("{}") : call.arguments, ec);
    if (ec || !parsed.is_object())
        co_return failed(errc::bad_tool_arguments,
                                     "the arguments of tool '" + call.name + "' are not a JSON object: " + call.arguments);
    auto const& args = parsed.as_object();
    auto verdict = std::pair<permission, permission_rule const*>(permission::allow, nullptr);
    if (rules) verdict = rules->check(call.name, call_subject(args, found->subject_field()));
    std::string const rule = verdict.second ? verdict.second->text : std::string();
    if (verdict.first == permission::deny)
        co_return failed(errc::tool_denied,
                                     "the call of tool '" + call.name + "' is denied" +
                                         (rule.empty() ? std::string(" by default") : " by rule \"" + rule + "\""));
    if (found->asks_first() || verdict.first == permission::ask) {
        boost::json::object question{{"type", "tool_approval"}, {"tool", call.name}, {"arguments", args},
                                     {"tool_call_id", call.id}, {"rule", rule}};
        span.set("stategraph.asks_human", true);
        auto const answer = ctx->interrupt_now<boost::json::value>(question);
        if (!(answer.is_bool() && answer.get_bool()))
            co_return failed(errc::tool_denied,
                                         "a human denied the call of tool '" + call.name + "'");
    }
    std::exception_ptr failure;
    try {
        boost::json::value result;
        if (found->journaled()) {
            auto run = [&]() { return found->run(args, *ctx); };
            std::string const key = "tool:" + call.id;
            result = co_await ctx->task(key, run);
        } else {
            result = co_await found->run(args, *ctx);
        }
        co_return tool_message(call, result.is_string() ? std::string(result.get_string()) : boost::json::serialize(result),
                               std::string());
    } catch (stategraph::interrupt_signal const&) {
        throw;  // the human is asked; the node runs again on resume
    } catch (agent_error const&) {
        failure = std::current_exception();
    } catch (...) {
        if (found->stops_node_on_failure()) throw;  // fails the node (see tool::failure_stops_node)
        failure = std::current_exception();
    }
    try {
        std::rethrow_exception(failure);
    } catch (agent_error const& e) {
        co_return failed(e.kind(), "tool '" + call.name + "': " + e.what());
    } catch (std::exception const& e) {
        co_return failed(errc::tool_failed, "tool '" + call.name + "' failed: " + e.what());
    } catch (...) {
        co_return failed(errc::tool_failed, "tool '" + call.name + "' failed");
    }
}

/// @brief Run every call of @p calls in parallel; the messages come back in the calls' order.
/// When tools interrupt, the first interrupt (in call order) is rethrown after all calls end.
inline boost::asio::awaitable<std::vector<chat_message>> run_tool_calls(std::shared_ptr<std::vector<tool> const> tools,
                                                                        std::shared_ptr<permission_rules const> rules,
                                                                        std::vector<tool_call> calls,
                                                                        stategraph::context* ctx) {
    using op_type = decltype(boost::asio::co_spawn(ctx->executor(), run_tool_call(tools, rules, tool_call{}, ctx),
                                                   boost::asio::deferred));
    std::vector<op_type> ops;
    ops.reserve(calls.size());
    for (auto const& call : calls)
        ops.push_back(boost::asio::co_spawn(ctx->executor(), run_tool_call(tools, rules, call, ctx), boost::asio::deferred));
    auto group = boost::asio::experimental::make_parallel_group(std::move(ops));
    auto [order, errors, messages] =
        co_await group.async_wait(boost::asio::experimental::wait_for_all(), boost::asio::use_awaitable);
    (void)order;
    for (auto const& e : errors)
        if (e) std::rethrow_exception(e);
    co_return std::move(messages);
}

}  // namespace detail

/// @brief The node returned by tool_node(): runs the last assistant message's tool calls.
/// @tparam Messages `&S::messages`, the state's list of chat messages.
/// Thread safety: immutable (the tools and rules are shared, const); one node object serves every
/// run of the graph at once. Its tool calls run in parallel on the run's executor.
template <auto Messages>
class tool_node_fn {
public:
    using state_type = typename member_traits<Messages>::state_type;

    /// @param tools the tools it can run, moved into shared storage.
    /// @param rules permission rules checked before each call (empty: every call allowed).
    explicit tool_node_fn(std::vector<tool> tools, permission_rules rules = {})
        : tools_(std::make_shared<std::vector<tool> const>(std::move(tools))) {
        if (!rules.empty()) rules_ = std::make_shared<permission_rules const>(std::move(rules));
    }

    /// @brief The tools, as definitions to offer a model.
    std::vector<tool_definition> definitions() const {
        std::vector<tool_definition> out;
        for (auto const& t : *tools_) out.push_back(t.definition());
        return out;
    }

    /// @brief Runs the last assistant message's tool calls (the node's body, called by the engine).
    /// @param s the state; its last message must be an assistant message with tool calls.
    /// @param ctx the node's context (interrupts, side-effect journal).
    /// @return an update appending one tool message per call, in the calls' order.
    /// @throws agent_error(errc::no_tool_calls) when the last message has no tool calls; a tool's
    /// exception when it is marked `failure_stops_node`; `interrupt_signal` for an approval.
    boost::asio::awaitable<update<state_type>> operator()(state_type const& s, stategraph::context& ctx) const {
        auto const& list = s.*Messages;
        if (list.empty() || list.back().role != "assistant" || list.back().tool_calls.empty())
            throw agent_error(errc::no_tool_calls, "tool node '" + ctx.node() +
                                                       "': the last message is not an assistant message with tool calls");
        auto calls = list.back().tool_calls;
        auto tools = tools_;
        auto rules = rules_;
        auto* context = &ctx;
        auto messages = co_await detail::run_tool_calls(std::move(tools), std::move(rules), std::move(calls), context);
        co_return update<state_type>{}.template set<Messages>(std::move(messages));
    }

private:
    std::shared_ptr<std::vector<tool> const> tools_;
    std::shared_ptr<permission_rules const> rules_;
};

/// @brief A node over the state that holds `Messages` (a `std::vector<chat_message>` field with
/// the `stategraph::messages` or `append` reducer): it runs every tool call of the last
/// assistant message in parallel on the run's executor and appends one "tool" message per
/// call, in the calls' order. Failures do not stop the run: an unknown tool, arguments that are
/// not a JSON object, a tool that throws or a denied call each become a tool message whose
/// `error` names the `errc` (the model reads "Error: ..." and can try again). A tool may
/// interrupt the run (`ctx.interrupt_now`, or `ask_first()`); on resume the node runs again:
/// tools whose function does not take the context return their saved result (`ctx.task`, so
/// with a checkpointer this holds across processes too), the others run again (as every tool
/// does in LangGraph's ToolNode). Interrupt answers are matched by position, so a tool should
/// interrupt before its first co_await (tools start in call order).
/// @throws agent_error(errc::no_tool_calls) when the last message asks for no tool call.
///
/// With @p rules, each call is checked first (permission_rules): a denied call answers the model
/// with a `tool_denied` message naming the rule; an "ask" call interrupts as `ask_first()` does
/// (its payload names the rule).
/// @tparam Messages `&S::messages`: a `std::vector<chat_message>` field with a reducer (a
/// `static_assert` says what to write otherwise).
/// @param tools the tools, each with a distinct name.
/// @param rules permission rules (allow, ask, deny), checked before each call.
/// @return the node, to pass to `add_node` or `"tools"_n = ...`.
/// Thread safety: a pure function; any thread.
template <auto Messages>
tool_node_fn<Messages> tool_node(std::vector<tool> tools, permission_rules rules = {}) {
    static_assert(messages_field<Messages>,
                  "tool_node<&S::field>(tools): the field must be a std::vector<stategraph::nodes::chat_message> "
                  "member of the state, e.g. tool_node<&chat::messages>(tools)");
    detail::check_messages_reducer<Messages>();
    return tool_node_fn<Messages>(std::move(tools), std::move(rules));
}

/// @brief The route after a model node: "tools" when the last message asks for tool calls,
/// else END (LangGraph's `tools_condition`).
/// @tparam Messages `&S::messages`.
/// @param s the state after the model node.
/// @return "tools" or END's name ("__end__"). Thread safety: pure; any thread.
template <auto Messages>
std::string tools_condition(typename member_traits<Messages>::state_type const& s) {
    auto const& list = s.*Messages;
    return !list.empty() && !list.back().tool_calls.empty() ? std::string("tools") : std::string("__end__");
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_TOOL_NODE_HPP
