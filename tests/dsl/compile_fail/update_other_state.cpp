// Mistake: a node of a graph over `order` sets a field of another state type (`invoice`).
// expect: static assertion failed: update<S>::set<&X::field>: the field belongs to another state type than S
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/node.hpp>

struct order {
    int total = 0;
};
BOOST_DESCRIBE_STRUCT(order, (), (total))
struct invoice {
    int total = 0;
};
BOOST_DESCRIBE_STRUCT(invoice, (), (total))

int main() {
    using namespace stategraph::dsl;
#ifndef STATEGRAPH_FIXED
    auto price = [](const order&) { return stategraph::update<order>{}.set<&invoice::total>(42); };
#else
    auto price = [](const order&) { return stategraph::update<order>{}.set<&order::total>(42); };
#endif
    auto g = graph<order>("g", "price"_n = price);
    (void)g;
}
