#pragma once
// The state the node-kind tests share: chat messages (the `messages` reducer) and a trail of
// what ran (appended).
#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/reducer.hpp>
#include <stategraph/state.hpp>

#include <string>
#include <vector>

namespace nodes_test {

struct chat {
    std::vector<stategraph::nodes::chat_message> messages;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(chat, (), (messages, trail))
inline auto reducers(stategraph::for_state<chat>) {
    return stategraph::reducers{stategraph::reduce<&chat::messages>(stategraph::messages),
                                stategraph::reduce<&chat::trail>(stategraph::append)};
}

} // namespace nodes_test
