// The node-kinds sketch of docs/agents-and-tools.md, compiled (CTest builds this file when
// stategraph::nodes is built; nothing here runs).
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/nodes/react_agent.hpp>

#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;

// [snippet node_kinds_state]
struct chat { std::vector<nodes::chat_message> messages; };
BOOST_DESCRIBE_STRUCT(chat, (), (messages))
auto reducers(sg::for_state<chat>) { return sg::reducers{sg::reduce<&chat::messages>(sg::messages)}; }
// [end]

std::string get_weather(const boost::json::object& args) { return "sunny in " + std::string(args.at("city").as_string()); }
std::string refund(const boost::json::object& args) { return "refunded " + std::string(args.at("order").as_string()); }

void node_kinds(nodes::openai_options options, boost::json::value schema) {
    // [snippet node_kinds_graph]
    auto model = std::make_shared<nodes::openai_chat_model>(options);  // or any chat_model
    std::vector<nodes::tool> tools{nodes::tool("get_weather", "Weather of a city", schema, get_weather),
                                   nodes::tool("refund", "Refund an order", schema, refund).ask_first()};
    auto app = graph<chat>("assistant",
        "agent"_n = nodes::react_agent<&chat::messages>(model, tools),
        start >> "agent"_n >> end).compile();
    // [end]
}
