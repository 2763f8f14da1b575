// Mistake: a reducer that does not fit its field's type (append on an int).
// expect: static assertion failed: reduce<&S::field>(op): the reducer does not fit the field's type T
#include <stategraph/dsl/graph.hpp>
#include <stategraph/reducer.hpp>

struct tally {
    int hits = 0;
};
BOOST_DESCRIBE_STRUCT(tally, (), (hits))

inline auto reducers(stategraph::for_state<tally>) {
#ifndef STATEGRAPH_FIXED
    return stategraph::reducers{stategraph::reduce<&tally::hits>(stategraph::append)};
#else
    return stategraph::reducers{stategraph::reduce<&tally::hits>([](int current, int update) { return current + update; })};
#endif
}

int main() {
    auto g = stategraph::dsl::graph<tally>("g");
    (void)g;
}
