// delegation: a supervisor agent delegates to two workers at once, then forwards one answer.
//
//   START --> team --> END        team = nodes::worker_supervisor<&chat::messages>(model, workers):
//
//     START --> supervisor --(tool calls)--> workers --(forward_message)--> forward --> END
//                   ^  |                        |
//                   |  +----(no tool call)------+--> END
//                   +---------------------------+
//
//   model answer 1: delegate(planning, ...) + delegate(coding, ...)   (the two run in parallel)
//   model answer 2: forward_message(coding)   -> coding's answer is the reply, verbatim
//
// The coding worker runs under seed 004's execution limits: it may merge, not push.
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/delegation.hpp>
#include <stategraph/nodes/execution_limits.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;

struct chat {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(chat, (), (messages))
auto reducers(sg::for_state<chat>) { return sg::reducers{sg::reduce<&chat::messages>(sg::messages)}; }

int main() {
    // A scripted model: first two delegations, then a forward.
    auto model = std::make_shared<nodes::rule_chat_model>([](const nodes::chat_request& r) {
        nodes::chat_response a;
        if (r.messages.back().role == "user") {
            a.tool_calls = {{"c1", "delegate", R"({"worker":"planning","instructions":"find the login bug"})"},
                            {"c2", "delegate", R"({"worker":"coding","instructions":"fix the login bug"})"}};
        } else {
            a.tool_calls = {{"c3", "forward_message", R"({"worker":"coding"})"}};
        }
        return a;
    });

    auto limits = nodes::execution_limits::from_json(
        boost::json::parse(R"({"allow_merge": true, "max_attempts": 2, "max_memory_mb": 2048})").as_object());
    auto planning = [](std::string task) -> boost::asio::awaitable<std::string> {
        co_return "plan for '" + task + "': the session cookie expires too early";
    };
    auto coding = [limits](std::string task) -> boost::asio::awaitable<std::string> {
        limits.require(nodes::capability::merge, "coding");  // allowed
        std::string pushed = "not pushed";
        try {
            limits.require(nodes::capability::git_push, "coding");
        } catch (const nodes::agent_error& e) {
            pushed = e.what();
        }
        auto r = limits.for_attempt(1, "coding");
        co_return "done: " + task + " (merged; " + pushed + "; " + std::to_string(static_cast<int>(r.memory_mb)) + " MB)";
    };
    std::vector<nodes::worker> workers{{"planning", "Read-only analysis and planning", planning},
                                       {"coding", "Repository-based code changes", coding}};

    // clang-format off
    auto app = graph<chat>("support",
        "team"_n = nodes::worker_supervisor<&chat::messages>(model, workers),
        start >> "team"_n >> end).compile();
    // clang-format on

    boost::asio::io_context io;
    std::vector<nodes::chat_message> first(1, nodes::chat_message{"user", "Users get logged out. Fix it."});
    auto input = sg::update<chat>{}.set<&chat::messages>(std::move(first));
    auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
    io.run();
    const chat c = done.get().values;
    for (const auto& m : c.messages)
        std::cout << m.role << ": " << (m.content.empty() && !m.tool_calls.empty() ? "(" + std::to_string(m.tool_calls.size()) + " tool calls)" : m.content) << '\n';

    const std::string& reply = c.messages.back().content;
    return reply.rfind("done: fix the login bug (merged; job 'coding': allow_git_push is false", 0) == 0 &&
                   reply.find("2048 MB") != std::string::npos
               ? 0
               : 1;
}
