// react_agent: a model calls tools until it can answer; one tool asks a human first.
//
//   START --> assistant --> END
//                |
//                +-- react_agent subgraph:
//                      START --> agent --(tool calls)--> tools --> agent
//                                  |                      (parallel; "refund" interrupts
//                                  +--(no tool call)--> END   for approval first)
//
// The model here is a rule_chat_model (offline, deterministic); with a server, use
// `std::make_shared<sg::nodes::openai_chat_model>(options)` instead (it also works under
// `sg::run_sync`): the graph is the same, and tokens stream through stream_mode::messages.
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/react_agent.hpp>

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

struct support_chat {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(support_chat, (), (messages))
auto reducers(sg::for_state<support_chat>) {
    return sg::reducers{sg::reduce<&support_chat::messages>(sg::messages)};
}

// The "model": asks for the order and the refund first, then answers from the tool results.
nodes::chat_response scripted_model(const nodes::chat_request& request) {
    nodes::chat_response out;
    const auto& last = request.messages.back();
    if (last.role == "user") {
        out.tool_calls = {{"c1", "order_status", R"({"order":"A-17"})"}, {"c2", "refund", R"({"order":"A-17"})"}};
        return out;
    }
    std::string facts;
    for (const auto& m : request.messages)
        if (m.role == "tool") facts += (facts.empty() ? "" : "; ") + m.content;
    out.content = "Done: " + facts + ".";
    return out;
}

int main() {
    auto status = [](const boost::json::object& args) {
        return "order " + std::string(args.at("order").as_string()) + " arrived damaged";
    };
    auto refund = [](const boost::json::object& args) {
        return "refunded " + std::string(args.at("order").as_string());
    };
    auto order_schema = boost::json::parse(R"({"type":"object","properties":{"order":{"type":"string"}}})");
    std::vector<nodes::tool> tools{nodes::tool("order_status", "Where an order is", order_schema, status),
                                   nodes::tool("refund", "Refund an order", order_schema, refund).ask_first()};
    auto model = std::make_shared<nodes::rule_chat_model>(scripted_model);

    // clang-format off
    auto app = graph<support_chat>("support",
        "assistant"_n = nodes::react_agent<&support_chat::messages>(model, tools),
        start >> "assistant"_n >> end).compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    // clang-format on

    boost::asio::io_context io;
    sg::run_config cfg;
    cfg.thread_id = "customer-1";
    std::vector<nodes::chat_message> first{{"user", "My order A-17 is broken, refund it"}};
    auto input = sg::update<support_chat>{}.set<&support_chat::messages>(first);
    auto paused = boost::asio::co_spawn(io, app.invoke(std::move(input), cfg), boost::asio::use_future);
    io.run();
    auto r = paused.get();
    if (!r.interrupted()) return 1;
    std::cout << "approval asked: " << boost::json::serialize(r.interrupts.at(0).value) << '\n';

    // The human approves; tokens of the answer arrive through the messages stream mode.
    std::string streamed;
    auto on_event = [&streamed](const sg::stream_event& e) {
        streamed += e.data.as_array().at(0).at("content").as_string();
    };
    io.restart();
    auto done = boost::asio::co_spawn(io, app.stream(sg::resume(true), cfg, sg::stream_mode::messages, on_event),
                                      boost::asio::use_future);
    io.run();
    auto final_state = done.get().values;
    for (const auto& m : final_state.messages)
        std::cout << m.role << ": " << (m.content.empty() ? "(" + std::to_string(m.tool_calls.size()) + " tool calls)" : m.content)
                  << '\n';
    const std::string expected = "Done: order A-17 arrived damaged; refunded A-17.";
    std::cout << "streamed: " << streamed << '\n';
    return final_state.messages.size() == 5 && final_state.messages.back().content == expected && streamed == expected ? 0 : 1;
}
