// Mistake (under g++ 12 only): a stream handler lambda capturing by value, built inside `co_await`.
// g++ 12 destroys its captures twice at run time (a double free under ASan); the library turns it
// into a compile error.
// expect: g++ 12 destroys the captures of a lambda built in a co_await expression twice
#include <stategraph/stategraph.hpp>

#include <memory>

struct turn {
    std::string answer;
};
BOOST_DESCRIBE_STRUCT(turn, (), (answer))

boost::asio::awaitable<void> watch(stategraph::compiled_graph<turn> app) {
    auto seen = std::make_shared<int>(0);
#ifndef STATEGRAPH_FIXED
    co_await app.stream(stategraph::update<turn>{}, {}, stategraph::stream_mode::updates,
                        [seen](const stategraph::stream_event&) { ++*seen; });
#else
    auto on_event = [seen](const stategraph::stream_event&) { ++*seen; };
    co_await app.stream(stategraph::update<turn>{}, {}, stategraph::stream_mode::updates, on_event);
#endif
}

int main() {
    stategraph::state_graph<turn> g;
    g.add_node("ask", [](const turn&) { return stategraph::update<turn>{}.set<&turn::answer>("a"); });
    g.add_edge(stategraph::START, "ask").add_edge("ask", stategraph::END);
    stategraph::run_sync(watch(g.compile()));
}
