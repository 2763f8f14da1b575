// Mistake: a reducer declared on a field left out of BOOST_DESCRIBE_STRUCT.
// expect: static assertion failed: stategraph: this field of the state (M = &S::field, named in the lines above) is not listed in BOOST_DESCRIBE_STRUCT(S, (), (...))
#include <stategraph/dsl/dsl.hpp>

#include <string>
#include <vector>

struct ticket {
    std::string text;
    std::vector<std::string> notes;
};
#ifndef STATEGRAPH_FIXED
BOOST_DESCRIBE_STRUCT(ticket, (), (text))
#else
BOOST_DESCRIBE_STRUCT(ticket, (), (text, notes))
#endif
inline auto reducers(stategraph::for_state<ticket>) {
    return stategraph::reducers{stategraph::reduce<&ticket::notes>(stategraph::append)};
}

int main() {
    using namespace stategraph::dsl;
    auto triage = [](const ticket& t) { return stategraph::update<ticket>{}.set<&ticket::text>(t.text + "!"); };
    auto app = graph<ticket>("g", "triage"_n = triage, start >> "triage"_n >> end).compile();
    (void)app;
}
