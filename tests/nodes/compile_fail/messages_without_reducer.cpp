// Mistake (issue 26): a ReAct agent over a state whose messages field has no reducer. It compiled,
// and each step replaced the conversation: the model's second request held only the tool messages.
// expect: static assertion failed: stategraph::nodes: the messages field (M = &S::field, named in the lines above) has no reducer
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/react_agent.hpp>

#include <boost/json/object.hpp>

#include <memory>
#include <string>
#include <vector>

namespace nodes = stategraph::nodes;
using namespace stategraph::dsl;

struct support {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(support, (), (messages))
#ifdef STATEGRAPH_FIXED
inline auto reducers(stategraph::for_state<support>) {
    return stategraph::reducers{stategraph::reduce<&support::messages>(stategraph::messages)};
}
#endif

int main() {
    auto answer = [](nodes::chat_request const&) { return nodes::chat_response{}; };
    auto model = std::make_shared<nodes::rule_chat_model>(answer);
    auto status = [](boost::json::object const&) { return std::string("arrived"); };
    std::vector<nodes::tool> tools{nodes::tool("order_status", "Where an order is", nullptr, status)};
    auto app = graph<support>("desk", "agent"_n = nodes::react_agent<&support::messages>(model, tools),
                              start >> "agent"_n >> end)
                   .compile();
    (void)app;
}
