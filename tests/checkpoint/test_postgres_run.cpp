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

/// START -> note -> ask (pauses three times, one answer each) -> done -> END; `seen` is
/// appended to at every node, so the state holds a chain.
sg::compiled_graph<counter> asking_graph(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<counter> g("ask3");
    g.add_node("note", step);
    g.add_node("ask", [](const counter& c, sg::context& ctx) -> boost::asio::awaitable<sg::update<counter>> {
        std::vector<int> answers;
        for (int k = 0; k < 3; ++k) {
            auto pending = ctx.interrupt<int>(boost::json::value("question " + std::to_string(k)));
            answers.push_back(co_await std::move(pending));
        }
        co_return sg::update<counter>{}.set<&counter::n>(c.n + 1).set<&counter::seen>(std::move(answers));
    });
    g.add_node("done", step);
    g.add_edge(sg::START, "note").add_edge("note", "ask").add_edge("ask", "done").add_edge("done", sg::END);
    sg::compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(o);
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

/// A graph that pauses three times in one node, on the PostgreSQL saver, in every durability
/// mode: each resume by the saver that paused the thread takes its values from the saver's
/// memory (`postgres_saver::remembered`), and ends as a second saver of the same schema reads
/// the thread; a resume by the second saver in between makes the first read the thread again.
BOOST_AUTO_TEST_CASE(resumes_take_a_paused_threads_values_from_memory_in_every_mode) {
    auto mine = make_saver(options_for(fresh_schema()));
    auto theirs = make_saver(mine->options());
    auto app = pg_run::asking_graph(mine);
    auto reader = pg_run::asking_graph(theirs);
    for (auto mode : {sg::durability::sync, sg::durability::async, sg::durability::exit}) {
        BOOST_TEST_CONTEXT("durability " << static_cast<int>(mode)) {
            sg::run_config cfg;
            cfg.thread_id = "ask-" + std::to_string(static_cast<int>(mode));
            cfg.durability = mode;
            const auto recalled = mine->remembered().recalled;
            auto r = sg::run_sync(app.invoke(sg::update<pg_run::counter>{}, cfg));
            BOOST_REQUIRE(r.interrupted());
            BOOST_TEST(mine->remembered().threads >= 1u);
            for (int k = 0; k < 3; ++k) {
                r = sg::run_sync(app.invoke(sg::resume(10 + k), cfg));
                BOOST_TEST(r.interrupted() == (k < 2), "resume " << k);
                BOOST_TEST(mine->remembered().recalled == recalled + static_cast<std::uint64_t>(k + 1), "resume " << k);
                const auto here = sg::run_sync(app.get_state(cfg.thread_id));
                const auto there = sg::run_sync(reader.get_state(cfg.thread_id));
                BOOST_TEST(here.values.seen == there.values.seen, boost::test_tools::per_element());
                BOOST_TEST(here.values.n == there.values.n);
                BOOST_TEST(here.next == there.next, boost::test_tools::per_element());
            }
            BOOST_TEST(r.values.n == 3);
            BOOST_TEST(r.values.seen == (std::vector<int>{1, 10, 11, 12, 3}), boost::test_tools::per_element());

            // Shared with another saver. It answers the first question (and pauses at the next
            // in the same step: no new row, its answer a pending write); this saver's resume
            // still takes the values from memory and the other's answer from the server.
            cfg.thread_id = "ask-shared-" + std::to_string(static_cast<int>(mode));
            r = sg::run_sync(app.invoke(sg::update<pg_run::counter>{}, cfg));
            BOOST_REQUIRE(r.interrupted());
            r = sg::run_sync(reader.invoke(sg::resume(20), cfg));
            BOOST_REQUIRE(r.interrupted());
            const auto before = mine->remembered().recalled;
            r = sg::run_sync(app.invoke(sg::resume(21), cfg));
            BOOST_REQUIRE(r.interrupted());
            BOOST_TEST(mine->remembered().recalled == before + 1);
            // The other finishes the step (new rows): this saver's next call reads the server.
            r = sg::run_sync(reader.invoke(sg::resume(22), cfg));
            BOOST_TEST(!r.interrupted());
            BOOST_TEST(r.values.seen == (std::vector<int>{1, 20, 21, 22, 3}), boost::test_tools::per_element());
            r = sg::run_sync(app.invoke(sg::update<pg_run::counter>{}, cfg));
            BOOST_REQUIRE(r.interrupted());
            BOOST_TEST(mine->remembered().recalled == before + 1);
            BOOST_TEST(r.values.seen == (std::vector<int>{1, 20, 21, 22, 3, 4}), boost::test_tools::per_element());
            const auto there = sg::run_sync(reader.get_state(cfg.thread_id));
            BOOST_TEST(there.values.seen == r.values.seen, boost::test_tools::per_element());
        }
    }
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
