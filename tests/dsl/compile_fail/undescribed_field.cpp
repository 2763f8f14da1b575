// Mistake: a field left out of BOOST_DESCRIBE_STRUCT, set by a node (issue 26: it compiled, then
// failed at run time with "bitset::set: __position (which is 18446744073709551615) >= _Nb").
// expect: static assertion failed: stategraph: this field of the state (M = &S::field, named in the lines above) is not listed in BOOST_DESCRIBE_STRUCT(S, (), (...))
#include <stategraph/dsl/dsl.hpp>

#include <string>

struct ticket {
    std::string text;
    int priority = 0;
};
#ifndef STATEGRAPH_FIXED
BOOST_DESCRIBE_STRUCT(ticket, (), (text))
#else
BOOST_DESCRIBE_STRUCT(ticket, (), (text, priority))
#endif

int main() {
    using namespace stategraph::dsl;
    auto triage = [](const ticket& t) { return stategraph::update<ticket>{}.set<&ticket::priority>(t.text.size() > 10 ? 2 : 1); };
    auto g = graph<ticket>("g", "triage"_n = triage, start >> "triage"_n >> end);
    (void)g;
}
