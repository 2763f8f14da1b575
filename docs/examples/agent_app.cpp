// A support desk: a ReAct agent with two tools, one needing a human's approval, its thread kept
// in SQLite and resumed by a second call, the graph drawn with write_dot (docs/agents-and-tools.md).
//
//   START -> desk -> END        desk: a react_agent subgraph  agent <-> tools
//
// With a model server, set STATEGRAPH_MODEL_URL (e.g. http://127.0.0.1:8080/v1 for llama.cpp's
// llama-server, https://api.openai.com/v1 with OPENAI_API_KEY) and STATEGRAPH_MODEL; without
// it a scripted model stands in (CTest docs_example_agent_app runs it that way).
// Usage: agent_app DB   (a SQLite file; the thread is "customer-1")
// [snippet agent_includes]
#include <stategraph/dsl/dsl.hpp>                      // the DSL and run_sync
#include <stategraph/checkpoint/sqlite_saver.hpp>      // stategraph::sqlite
#include <stategraph/nodes/openai_chat_model.hpp>      // stategraph::nodes
#include <stategraph/nodes/react_agent.hpp>
#include <boost/json.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;
// [end]

// The offline stand-in: asks for the order's status and a refund, then answers from the results.
nodes::chat_response scripted(const nodes::chat_request& request) {
    nodes::chat_response out;
    if (request.messages.back().role == "user") {
        out.tool_calls = {{"c1", "order_status", R"({"order":"A-17"})"}, {"c2", "refund", R"({"order":"A-17"})"}};
        return out;
    }
    for (const auto& m : request.messages)
        if (m.role == "tool") out.content += m.content + " ";
    return out;
}

// [snippet agent_state]
struct desk {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(desk, (), (messages))
// Without this reducer each step would replace the conversation; react_agent refuses to compile.
auto reducers(sg::for_state<desk>) { return sg::reducers{sg::reduce<&desk::messages>(sg::messages)}; }

// A tool may return any type Boost.JSON converts: a described struct becomes a JSON object.
struct order_status {
    std::string order;
    std::string status;
};
BOOST_DESCRIBE_STRUCT(order_status, (), (order, status))
// [end]

// [snippet agent_model]
std::shared_ptr<nodes::chat_model> make_model() {
    const char* url = std::getenv("STATEGRAPH_MODEL_URL"); // must end in /v1; http:// and https:// both work
    if (!url) return std::make_shared<nodes::rule_chat_model>(scripted);
    const char* key = std::getenv("OPENAI_API_KEY");
    const char* model = std::getenv("STATEGRAPH_MODEL");
    return std::make_shared<nodes::openai_chat_model>(nodes::openai_options{
        .base_url = url, .api_key = key ? key : "", .model = model ? model : "gpt-4o-mini",
        .timeout = std::chrono::seconds(60)});
}
// [end]

// [snippet agent_graph]
auto support_desk(std::shared_ptr<nodes::chat_model> model, std::shared_ptr<sg::checkpoint::saver> saver) {
    auto schema = boost::json::parse(R"({"type":"object","properties":{"order":{"type":"string"}},"required":["order"]})");
    auto status = [](const boost::json::object& args) {
        return order_status{std::string(args.at("order").as_string()), "arrived damaged"};
    };
    auto refund = [](const boost::json::object& args) { return "refunded " + std::string(args.at("order").as_string()); };
    std::vector<nodes::tool> tools{nodes::tool("order_status", "Where an order is", schema, status),
                                   nodes::tool("refund", "Refund an order", schema, refund).ask_first()};
    nodes::react_options options{.name = "desk", .system_prompt = "You help customers of an online shop.", .max_steps = 6};
    return graph<desk>("support", "desk"_n = nodes::react_agent<&desk::messages>(model, tools, options),
                       start >> "desk"_n >> end)
        .compile({.checkpointer = std::move(saver)});
}
// [end]

int main(int argc, char** argv) {
    if (argc < 2) {
        std::cerr << "usage: agent_app DB\n";
        return 2;
    }
// [snippet agent_run]
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = argv[1]});
    auto app = support_desk(make_model(), saver);
    std::ofstream dot("support.dot"); // the drawing: dot -Tsvg support.dot -o support.svg
    app.write_dot(dot);

    std::vector<nodes::chat_message> question{{"user", "Order A-17 arrived broken, please refund it"}};
    auto r = sg::run_sync(app.invoke(sg::update<desk>{}.set<&desk::messages>(question), {.thread_id = "customer-1"}));
    if (r.interrupted()) // refund is ask_first: {"type":"tool_approval","tool":"refund",...}
        std::cout << "approval asked: " << boost::json::serialize(r.interrupts.at(0).value) << '\n';

    // Later, from this process or another one on the same file: a human approves.
    r = sg::run_sync(app.invoke(sg::resume(true), {.thread_id = "customer-1"}));
    std::cout << "assistant: " << r.values.messages.back().content << '\n';
    for (const auto& snap : sg::run_sync(app.get_state_history("customer-1")))
        std::cout << "  checkpoint step " << snap.step << " (" << snap.source << "), next: " << snap.next.size() << " node(s)\n";
// [end]
}
