#pragma once
/// @file ask_agent.hpp
/// @brief The graph of the `ask` tests (test_tools.cpp, and agent_turn.cpp in a process of its
/// own): a ReAct agent whose scripted model asks for server-everything's `echo`, under rules that
/// ask a human before each echo.

#include <stategraph/mcp/tools.hpp>

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/nodes/react_agent.hpp>
#include <stategraph/state_graph.hpp>

#include <memory>
#include <string>
#include <vector>

namespace mcp_ask_agent {

struct desk {
    std::vector<stategraph::nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(desk, (), (messages))
inline auto reducers(stategraph::for_state<desk>) {
    return stategraph::reducers{stategraph::reduce<&desk::messages>(stategraph::messages)};
}

/// @brief Asks for echo("approved text"), then answers "The server said: " and the tool's text.
inline std::shared_ptr<stategraph::nodes::chat_model> scripted_model() {
    namespace nodes = stategraph::nodes;
    return std::make_shared<nodes::rule_chat_model>([](nodes::chat_request const& r) {
        nodes::chat_response out;
        auto const& last = r.messages.back();
        if (last.role == "tool") out.content = "The server said: " + last.content;
        else out.tool_calls.push_back(nodes::tool_call{"call_1", "echo", R"({"message":"approved text"})"});
        return out;
    });
}

/// @brief The agent over @p server's tools (get-* allowed, get-env denied, echo asked), its
/// threads kept by @p saver.
inline stategraph::compiled_graph<desk> build(stategraph::mcp::client const& server,
                                              std::shared_ptr<stategraph::checkpoint::saver> saver) {
    namespace nodes = stategraph::nodes;
    namespace sg = stategraph;
    nodes::react_options options;
    options.name = "mcp_agent";
    options.permissions = nodes::permission_rules({"get-*"}, {"get-env"}, {"echo"});
    sg::state_graph<desk> g("desk");
    g.add_node("agent", nodes::react_agent<&desk::messages>(scripted_model(), stategraph::mcp::make_tools(server), options));
    g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
    sg::compile_options co;
    co.checkpointer = std::move(saver);
    return g.compile(co);
}

}  // namespace mcp_ask_agent
