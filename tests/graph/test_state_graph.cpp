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

// A Send whose payload is the state type itself, pending in a checkpoint while its node waits for
// a human: a second compiled graph (as another process would) reads the payload back from JSON
// (through the state's table, state_graph.hpp's arg_from_json) and the resumed node sees it whole.
BOOST_AUTO_TEST_CASE(send_of_the_state_type_is_restored_from_a_checkpoint) {
    using smoke::st;
    sg::state_graph<st> g;
    g.add_node("worker", [](const st& in, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        const std::string question = "go " + std::to_string(in.count);
        auto answer = co_await ctx.interrupt<std::string>(question);
        std::string line = answer + ":" + std::to_string(in.count);
        for (const auto& l : in.log) line += ":" + l;
        std::vector<std::string> lines{line};
        co_return sg::update<st>{}.set<&st::log>(std::move(lines));
    });
    g.add_conditional_edges(
        sg::START,
        [](const st&) {
            st payload;
            payload.count = 7;
            payload.log = {"a", "b"};
            return std::vector<sg::send>{sg::send("worker", payload)};
        },
        std::vector<std::string>{"worker"});
    g.add_edge("worker", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::run_config cfg;
    cfg.thread_id = "state-send";
    {
        auto app = g.compile({.checkpointer = saver});
        auto in = sg::update<st>{}.set<&st::log>({"x"});
        auto r = run(app.invoke(in, cfg));
        BOOST_TEST_REQUIRE(r.interrupted());
        BOOST_TEST(r.interrupts.front().value == boost::json::value("go 7"));
    }
    auto again = g.compile({.checkpointer = saver});
    auto answer = sg::resume(std::string("ok"));
    auto r = run(again.invoke(std::move(answer), cfg));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.values.log == (std::vector<std::string>{"x", "ok:7:a:b"}));
}
