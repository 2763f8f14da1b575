// A graph run on the PostgreSQL saver while a second connection keeps killing the saver's
// backends (pg_terminate_backend): the run goes on, and its history has every step once.
// Also prints what a step costs on this server (no threshold: round trips depend on the machine).
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/postgres_saver.hpp>
#include <stategraph/stategraph.hpp>

#include "postgres_test_support.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace sg = stategraph;

namespace pg_run {

struct counter {
    int n = 0;
    std::vector<int> seen; // each step appends its number: stored as append deltas
};
BOOST_DESCRIBE_STRUCT(counter, (), (n, seen))
auto reducers(sg::for_state<counter>) { return sg::reducers{sg::reduce<&counter::seen>(sg::append)}; }

sg::update<counter> step(const counter& c) {
    std::vector<int> one{c.n + 1};
    return sg::update<counter>{}.set<&counter::n>(c.n + 1).set<&counter::seen>(std::move(one));
}

/// START -> step -> step ... (until n == steps) -> END: one checkpoint per step.
sg::compiled_graph<counter> counting_graph(std::shared_ptr<sg::checkpoint::saver> saver, int steps) {
    sg::state_graph<counter> g("count");
    g.add_node("step", step).add_edge(sg::START, "step");
    std::vector<std::string> targets{"step", std::string(sg::END)};
    g.add_conditional_edges(
        "step", [steps](const counter& c) { return c.n < steps ? std::string("step") : std::string(sg::END); }, targets);
    sg::compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(o);
}

/// The thread's history is one unbroken chain: steps -1..steps, each once, each the parent of the next.
void check_chain(const std::vector<sg::state_snapshot<counter>>& history, int steps) {
    BOOST_TEST_REQUIRE(history.size() == static_cast<std::size_t>(steps + 2)); // the input, then one per step
    std::set<std::string> ids;
    for (std::size_t i = 0; i < history.size(); ++i) {
        const auto& h = history[i];
        ids.insert(h.checkpoint_id);
        BOOST_TEST(h.step == static_cast<std::int64_t>(steps) - static_cast<std::int64_t>(i));
        if (i + 1 < history.size()) BOOST_TEST(h.parent_checkpoint_id == history[i + 1].checkpoint_id);
    }
    BOOST_TEST(ids.size() == history.size());
    BOOST_TEST(history.front().values.n == steps);
    std::vector<int> want(static_cast<std::size_t>(steps));
    for (int i = 0; i < steps; ++i) want[static_cast<std::size_t>(i)] = i + 1;
    BOOST_TEST(history.front().values.seen == want, boost::test_tools::per_element());
}

} // namespace pg_run

using namespace stategraph::checkpoint::pg_testing;

BOOST_AUTO_TEST_SUITE(postgres_saver_graph_run, *boost::unit_test::precondition(server_configured))

BOOST_AUTO_TEST_CASE(run_survives_terminated_backends) {
    const std::string application = "sg_run_" + std::to_string(getpid());
    auto saver = make_saver(under_killer(options_for(fresh_schema(), conninfo_named(application))));
    constexpr int steps = 60;
    auto app = pg_run::counting_graph(saver, steps);
    backend_killer killer(application);
    sg::run_config cfg;
    cfg.thread_id = "run-1";
    cfg.recursion_limit = steps + 10;
    auto r = sg::run_sync(app.invoke(sg::update<pg_run::counter>{}, cfg));
    const int killed = killer.stop();
    BOOST_TEST_MESSAGE("backends terminated during the graph run: " << killed);
    BOOST_TEST(killed > 0);
    BOOST_TEST(r.values.n == steps);
    pg_run::check_chain(sg::run_sync(app.get_state_history("run-1")), steps);
}

/// What one step costs (the engine plus the saver's round trips on this server): printed, not checked.
BOOST_AUTO_TEST_CASE(step_cost) {
    auto saver = make_saver(options_for(fresh_schema()));
    constexpr int steps = 200;
    auto app = pg_run::counting_graph(saver, steps);
    sg::run_config cfg;
    cfg.thread_id = "timed";
    cfg.recursion_limit = steps + 10;
    const auto start = std::chrono::steady_clock::now();
    auto r = sg::run_sync(app.invoke(sg::update<pg_run::counter>{}, cfg));
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST(r.values.n == steps);
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(took).count();
    BOOST_TEST_MESSAGE("PostgreSQL saver: " << steps << " steps in " << us / 1000 << " ms, " << us / steps
                                            << " us a step (one checkpoint each)");
    const auto t0 = std::chrono::steady_clock::now();
    auto state = sg::run_sync(app.get_state("timed"));
    const auto read_us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(state.values.seen.size() == static_cast<std::size_t>(steps));
    BOOST_TEST_MESSAGE("get_state after " << steps << " appended steps: " << read_us << " us");
}

BOOST_AUTO_TEST_SUITE_END()
