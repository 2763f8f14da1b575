// Mistake: an error handler that does not take the failure (it reads the state only).
// expect: static assertion failed: error_handler: a handler must be callable as f(const S&, const stategraph::node_failure&)
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/node.hpp>

struct counter {
    int count = 0;
};
BOOST_DESCRIBE_STRUCT(counter, (), (count))

int main() {
    using namespace stategraph::dsl;
    auto bump = [](const counter& s) { return stategraph::update<counter>{}.set<&counter::count>(s.count + 1); };
#ifndef STATEGRAPH_FIXED
    auto reset = [](const counter&) { return stategraph::update<counter>{}.set<&counter::count>(0); };
#else
    auto reset = [](const counter&, const stategraph::node_failure&) { return stategraph::update<counter>{}.set<&counter::count>(0); };
#endif
    auto g = graph<counter>("g", "bump"_n = bump | on_error(reset));
    (void)g;
}
