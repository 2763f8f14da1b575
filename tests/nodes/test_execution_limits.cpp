// Tests of execution_limits (nodes/include/stategraph/nodes/execution_limits.hpp): parsing seed
// 004's JSON, allow_* flags, max_attempts with a memory multiplier per attempt, max_runtime.
#include <stategraph/nodes/execution_limits.hpp>

#include <stategraph/core/error.hpp>
#include <stategraph/reducer.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <string>
#include <vector>

namespace limits_test {

struct job {
    std::vector<double> memory;  // the memory each attempt got
};
BOOST_DESCRIBE_STRUCT(job, (), (memory))
inline auto reducers(stategraph::for_state<job>) {
    return stategraph::reducers{stategraph::reduce<&job::memory>(stategraph::append)};
}

}  // namespace limits_test

namespace {

namespace asio = boost::asio;
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using limits_test::job;

template <class F>
nodes::agent_error nodes_error_of(F&& f) {
    try {
        f();
    } catch (nodes::agent_error const& e) {
        return e;
    }
    BOOST_FAIL("no agent_error was thrown");
    throw std::logic_error("unreachable");
}

sg::run_result<job> run(sg::compiled_graph<job> const& app) {
    asio::io_context ioc;
    auto f = asio::co_spawn(ioc, app.invoke(sg::update<job>{}), asio::use_future);
    ioc.run();
    return f.get();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(execution_limits)

BOOST_AUTO_TEST_CASE(seed_json_is_parsed_and_everything_is_forbidden_by_default) {
    auto l = nodes::execution_limits::from_json(boost::json::parse(R"({
        "network_access": true, "allow_git_push": false, "max_runtime_minutes": 0.5,
        "max_attempts": 2, "max_memory_mb": 1024, "max_cpus": 1.5})").as_object());
    BOOST_TEST(l.allows(nodes::capability::network_access));
    BOOST_TEST(!l.allows(nodes::capability::git_push));
    BOOST_TEST(!l.allows(nodes::capability::production_change));
    BOOST_TEST(l.max_runtime.count() == 30000);
    BOOST_TEST(l.max_attempts == 2);
    BOOST_TEST(l.max_cpus == 1.5);
    BOOST_TEST(nodes::execution_limits{}.max_attempts == 3);  // the seed's defaults
}

BOOST_AUTO_TEST_CASE(bad_limits_are_all_reported_by_field) {
    auto e = nodes_error_of([] {
        nodes::execution_limits::from_json(
            boost::json::parse(R"({"allow_merge": "yes", "max_attempts": 0, "max_gpus": 1})").as_object());
    });
    BOOST_TEST(e.kind() == nodes::errc::bad_limits);
    BOOST_REQUIRE_EQUAL(e.problems().size(), 3u);
    std::string const what = e.what();
    BOOST_TEST(what.find("\"allow_merge\" must be true or false") != std::string::npos);
    BOOST_TEST(what.find("\"max_attempts\" must be at least") != std::string::npos);
    BOOST_TEST(what.find("unknown field \"max_gpus\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_forbidden_action_is_a_typed_error_naming_job_and_flag) {
    nodes::execution_limits l;
    l.allow(nodes::capability::merge);
    l.require(nodes::capability::merge, "fix-login");  // allowed: no throw
    auto e = nodes_error_of([&] { l.require(nodes::capability::git_push, "fix-login"); });
    BOOST_TEST(e.kind() == nodes::errc::not_allowed);
    BOOST_TEST(std::string(e.what()) == "job 'fix-login': allow_git_push is false in its execution limits");
}

BOOST_AUTO_TEST_CASE(each_retry_gets_more_memory_until_attempts_run_out) {
    nodes::execution_limits l;
    l.max_attempts = 3;
    l.max_memory_mb = 1000;
    l.max_runtime = std::chrono::seconds(5);
    // A job that runs out of memory below 3000 MB: attempt 1 (1000) and 2 (2000) fail, 3 (4000) works.
    auto node = [l](job const&, sg::context& ctx) -> asio::awaitable<sg::update<job>> {
        auto r = l.for_attempt(ctx.attempt(), "etl");
        if (r.memory_mb < 3000) throw std::runtime_error("out of memory at " + std::to_string(r.memory_mb) + " MB");
        std::vector<double> got{r.memory_mb};
        co_return sg::update<job>{}.set<&job::memory>(std::move(got));
    };
    sg::retry_policy base;
    base.initial_interval = std::chrono::milliseconds(1);
    sg::state_graph<job> g("limits");
    g.add_node("etl", node, l.as_node_options(base));
    g.add_edge(sg::START, "etl").add_edge("etl", sg::END);
    auto r = run(g.compile());
    BOOST_REQUIRE_EQUAL(r.values.memory.size(), 1u);
    BOOST_TEST(r.values.memory[0] == 4000.0);

    auto e = nodes_error_of([&] { l.for_attempt(4, "etl"); });
    BOOST_TEST(e.kind() == nodes::errc::attempts_exhausted);
    BOOST_TEST(std::string(e.what()).find("max_attempts 3") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(max_runtime_bounds_each_attempt) {
    nodes::execution_limits l;
    l.max_attempts = 2;
    l.max_runtime = std::chrono::milliseconds(30);
    int attempts = 0;
    auto node = [&attempts](job const&, sg::context& ctx) -> asio::awaitable<sg::update<job>> {
        ++attempts;
        asio::steady_timer t(ctx.executor(), std::chrono::seconds(5));
        co_await t.async_wait(asio::use_awaitable);
        co_return sg::update<job>{};
    };
    sg::retry_policy base;
    base.initial_interval = std::chrono::milliseconds(1);
    sg::state_graph<job> g("limits");
    g.add_node("slow", node, l.as_node_options(base));
    g.add_edge(sg::START, "slow").add_edge("slow", sg::END);
    auto app = g.compile();
    auto const started = std::chrono::steady_clock::now();
    bool timed_out = false;
    std::exception_ptr e;
    try {
        run(app);
    } catch (...) {
        e = std::current_exception();
    }
    // The engine's typed error: node_timeout, on the node or nested in its node_error.
    for (int depth = 0; e && depth < 4; ++depth) {
        try {
            std::rethrow_exception(e);
        } catch (sg::node_error const& n) {
            timed_out = timed_out || n.kind() == sg::errc::node_timeout;
            e = n.nested();
        } catch (sg::graph_error const& g) {
            timed_out = timed_out || g.kind() == sg::errc::node_timeout;
            e = nullptr;
        } catch (...) {
            e = nullptr;
        }
    }
    BOOST_TEST(timed_out);
    BOOST_TEST(attempts == 2);
    BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(3)));
}

BOOST_AUTO_TEST_SUITE_END()
