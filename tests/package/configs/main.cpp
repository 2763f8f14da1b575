// One node over the installed package: prints "configs_app: ok" when the graph ran.
#include <stategraph/dsl/dsl.hpp>

#include <iostream>

namespace sg = stategraph;
using namespace sg::dsl;

struct count {
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(count, (), (n))

sg::update<count> bump(const count& c) { return sg::update<count>{}.set<&count::n>(c.n + 1); }

int main() {
    auto app = graph<count>("configs", "bump"_n = bump, start >> "bump"_n >> end).compile();
    auto r = sg::run_sync(app.invoke(sg::update<count>{}.set<&count::n>(41)));
    std::cout << (r.values.n == 42 ? "configs_app: ok" : "configs_app: wrong") << '\n';
    return r.values.n == 42 ? 0 : 1;
}
