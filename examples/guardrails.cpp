// guardrails: permission rules on an agent's tool calls, and a circuit breaker around a flaky agent.
//
//   START --> tools --> END        tools = tool_node(Bash, permission_rules):
//                                    allow "Bash(git *)"  deny "Bash(git push --force *)", "Bash(rm *)"
//                                    ask   "Bash(git push *)"  -> interrupt; resume true/false
//
//   START --> billing --> END      billing = guarded<S>(breaker, call_billing_backend):
//                                    2 failures in a row open the breaker; calls then fail fast
//                                    with errc::circuit_open until a 100 ms cool-down has passed
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/circuit_breaker.hpp>
#include <stategraph/nodes/tool_node.hpp>

#include <stategraph/run_sync.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;

struct session {
    std::vector<nodes::chat_message> messages;
    int invoices = 0;
};
BOOST_DESCRIBE_STRUCT(session, (), (messages, invoices))
auto reducers(sg::for_state<session>) { return sg::reducers{sg::reduce<&session::messages>(sg::messages)}; }

int main() {
    // -- permissions ----------------------------------------------------------------------
    std::vector<std::string> ran;
    auto bash = [&ran](const boost::json::object& args) {
        ran.emplace_back(args.at("command").as_string());
        return std::string("exit 0");
    };
    nodes::permission_rules rules({"Bash(git *)"}, {"Bash(git push --force *)", "Bash(rm *)"}, {"Bash(git push *)"});
    std::vector<nodes::tool> tools{nodes::tool("Bash", "Run a shell command", nullptr, bash).subject("command")};
    // clang-format off
    auto shell = graph<session>("shell",
        "tools"_n = nodes::tool_node<&session::messages>(tools, rules),
        start >> "tools"_n >> end).compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    // clang-format on
    nodes::chat_message asked{"assistant", ""};
    asked.tool_calls = {{"1", "Bash", R"({"command":"git status"})"},
                        {"2", "Bash", R"({"command":"rm -rf /"})"},
                        {"3", "Bash", R"({"command":"git push --force origin"})"},
                        {"4", "Bash", R"({"command":"git push origin main"})"}};
    std::vector<nodes::chat_message> conversation{{"user", "publish my work"}, asked};
    sg::run_config cfg;
    cfg.thread_id = "shell-1";
    auto paused = sg::run_sync(shell.invoke(sg::update<session>{}.set<&session::messages>(conversation), cfg));
    if (!paused.interrupted()) return 1;
    std::cout << "asked: " << boost::json::serialize(paused.interrupts.at(0).value) << '\n';
    auto done = sg::run_sync(shell.invoke(sg::resume(true), cfg)).values;
    for (const auto& m : done.messages)
        if (m.role == "tool") std::cout << "tool " << m.tool_call_id << ": " << m.content << (m.error.empty() ? "" : "  [" + m.error + "]") << '\n';

    // -- circuit breaker ----------------------------------------------------------------------
    auto breaker = std::make_shared<nodes::circuit_breaker>(
        "billing", nodes::circuit_options{.failure_threshold = 2, .cool_down = std::chrono::milliseconds(100)});
    bool backend_up = false;
    int backend_calls = 0;
    auto call_billing_backend = [&](const session& s) {
        ++backend_calls;
        if (!backend_up) throw std::runtime_error("billing backend unreachable");
        return sg::update<session>{}.set<&session::invoices>(s.invoices + 1);
    };
    // clang-format off
    auto billing = graph<session>("billing",
        "billing"_n = nodes::guarded<session>(breaker, call_billing_backend),
        start >> "billing"_n >> end).compile();
    // clang-format on
    std::vector<std::string> outcomes;
    auto attempt = [&] {
        try {
            sg::run_sync(billing.invoke(sg::update<session>{}));
            outcomes.push_back("ok");
        } catch (const sg::node_error& e) {
            try {
                e.rethrow_nested();
            } catch (const nodes::agent_error& a) {
                outcomes.push_back(nodes::to_string(a.kind()));
            } catch (const std::exception&) {
                outcomes.push_back("failed");
            }
        }
    };
    attempt();
    attempt();
    attempt();  // open: fails fast
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    backend_up = true;
    attempt();  // half-open trial succeeds
    for (const auto& o : outcomes) std::cout << "billing: " << o << '\n';

    const std::vector<std::string> expected_ran{"git status", "git push origin main"};
    const std::vector<std::string> expected_outcomes{"failed", "failed", "circuit_open", "ok"};
    return ran == expected_ran && done.messages.size() == 6 && done.messages[3].error == "tool_denied" &&
                   outcomes == expected_outcomes && backend_calls == 3
               ? 0
               : 1;
}
