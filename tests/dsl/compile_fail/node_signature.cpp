// Mistake: a node whose signature is not a node's (it returns the new count, not an update).
// expect: static assertion failed: "name"_n = fn: a node must return stategraph::update<S>, stategraph::command<S>, void, or boost::asio::awaitable<> of one of those
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/node.hpp>

struct counter {
    int count = 0;
};
BOOST_DESCRIBE_STRUCT(counter, (), (count))

int main() {
    using namespace stategraph::dsl;
#ifndef STATEGRAPH_FIXED
    auto bump = [](const counter& s) { return s.count + 1; };
#else
    auto bump = [](const counter& s) { return stategraph::update<counter>{}.set<&counter::count>(s.count + 1); };
#endif
    auto g = graph<counter>("g", "bump"_n = bump);
    (void)g;
}
