// Mistake: a route map whose keys are not the router's result type (the router returns
// `severity`, the map is keyed by strings).
// expect: static assertion failed: route map: a key does not have the router's result type
#include <stategraph/dsl/flow.hpp>
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/node.hpp>
#include <stategraph/dsl/route.hpp>

enum class severity { low, high };
BOOST_DESCRIBE_ENUM(severity, low, high)
struct alert {
    severity level = severity::low;
};
BOOST_DESCRIBE_STRUCT(alert, (), (level))

severity classify(const alert& a) { return a.level; }

int main() {
    using namespace stategraph::dsl;
    auto g = graph<alert>("g",
#ifndef STATEGRAPH_FIXED
                          start >> route(classify, {{"low", end}, {"high", "page"_n}}),
#else
                          start >> route(classify, {{severity::low, end}, {severity::high, "page"_n}}),
#endif
                          "page"_n = [](const alert&) {}, "page"_n >> end);
    (void)g;
}
