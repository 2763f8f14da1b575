// Mistake: a state type with no Boost.Describe metadata.
// expect: static assertion failed: stategraph::dsl: the state type S has no Boost.Describe metadata; add BOOST_DESCRIBE_STRUCT(S, (), (field1, field2, ...)) after the struct
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/node.hpp>

struct ticket {
    int id = 0;
};
#ifdef STATEGRAPH_FIXED
BOOST_DESCRIBE_STRUCT(ticket, (), (id))
#endif

int main() {
    using namespace stategraph::dsl;
    auto g = graph<ticket>("g", "triage"_n = [](const ticket&) {});
    (void)g;
}
