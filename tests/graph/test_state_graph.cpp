#define BOOST_TEST_MODULE graph
#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

namespace sg = stategraph;
using sg::test::run;

namespace smoke {
struct st {
    int count = 0;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (count, log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
} // namespace smoke

BOOST_AUTO_TEST_CASE(chain_runs_and_appends) {
    using smoke::st;
    sg::state_graph<st> g;
    for (std::string n : {"a", "b", "c"})
        g.add_node(n, [n](const st& s) { return sg::update<st>{}.set<&st::count>(s.count + 1).set<&st::log>({n}); });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    sg::run_config cfg;
    cfg.thread_id = "t1";
    auto in = sg::update<st>{}.set<&st::log>({"x"});
    auto r = run(app.invoke(in, cfg));
    BOOST_TEST(r.values.count == 3);
    BOOST_TEST(r.values.log == (std::vector<std::string>{"x", "a", "b", "c"}));
    BOOST_TEST(r.step == 3);
    auto hist = run(app.get_state_history("t1"));
    BOOST_TEST(hist.size() == 5u);
}
