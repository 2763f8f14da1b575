// Error handlers (error_handler.hpp) and graph-wide node defaults: a fallback that runs when a
// node fails for good, with the failure; its update or Command stands in for the node's.
#include <stategraph/error_handler.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

#include <memory>
#include <sstream>
#include <stdexcept>

namespace sg = stategraph;
namespace asio = boost::asio;
using sg::test::run;
using namespace std::chrono_literals;

namespace handler_test {
struct st {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }

inline sg::update<st> say(std::string word) {
    std::vector<std::string> line{std::move(word)};
    return sg::update<st>{}.set<&st::log>(std::move(line));
}

/// What the handlers saw.
struct seen {
    std::vector<sg::node_failure> failures;
};

asio::awaitable<sg::update<st>> sleepy(const st&, sg::context& ctx) {
    asio::steady_timer t(ctx.executor(), 2s);
    co_await t.async_wait(asio::use_awaitable);
    co_return say("woke");
}

struct other {
    int x = 0;
};
BOOST_DESCRIBE_STRUCT(other, (), (x))

const sg::retry_policy quick{.max_attempts = 3, .initial_interval = 1ms, .jitter = false};
} // namespace handler_test
using handler_test::st;
using handler_test::say;

BOOST_AUTO_TEST_SUITE(error_handlers)

BOOST_AUTO_TEST_CASE(the_handler_gets_the_failure_and_its_update_lands) {
    auto seen = std::make_shared<handler_test::seen>();
    auto attempts = std::make_shared<int>(0);
    auto fallback = [seen](const st& s, const sg::node_failure& f) {
        seen->failures.push_back(f);
        return say("fallback after " + std::to_string(s.log.size()));
    };
    sg::state_graph<st> g("h");
    g.add_node("first", [](const st&) { return say("first"); });
    g.add_node(
        "fetch",
        [attempts](const st&) -> sg::update<st> {
            ++*attempts;
            throw std::runtime_error("boom");
        },
        {.retry = sg::retry_policy{.max_attempts = 2, .initial_interval = 1ms, .jitter = false}, .on_error = fallback});
    g.add_node("after", [](const st&) { return say("after"); });
    g.add_edge(sg::START, "first").add_edge("first", "fetch").add_edge("fetch", "after").add_edge("after", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    std::vector<sg::stream_event> events;
    sg::run_config cfg;
    cfg.thread_id = "t";
    auto r = run(app.stream(sg::update<st>{}, cfg, sg::stream_mode::updates,
                            [&](const sg::stream_event& e) { events.push_back(e); }));
    BOOST_TEST(*attempts == 2); // retried first, then handled
    BOOST_TEST(r.values.log == (std::vector<std::string>{"first", "fallback after 1", "after"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(seen->failures.size() == 1u);
    const auto& f = seen->failures[0];
    BOOST_TEST(f.node == "fetch");
    BOOST_TEST(f.message == "boom");
    BOOST_TEST(f.attempts == 2);
    BOOST_TEST((f.code == sg::errc::ok)); // not a graph_error
    BOOST_TEST(bool(f.error));
    // Streamed, and checkpointed, as the failed node's update.
    BOOST_TEST_REQUIRE(events.size() == 3u);
    BOOST_TEST(events[1].node == "fetch");
    BOOST_TEST(!events[1].cached);
    BOOST_TEST(events[1].data == (boost::json::object{{"log", boost::json::array{"fallback after 1"}}}));
    auto history = run(app.get_state_history("t"));
    BOOST_TEST_REQUIRE(history.size() >= 3u);
    BOOST_TEST(history[1].values.log == (std::vector<std::string>{"first", "fallback after 1"}), boost::test_tools::per_element());
    BOOST_TEST(history[1].next == (std::vector<std::string>{"after"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_graph_error_reaches_the_handler_with_its_code) {
    auto seen = std::make_shared<handler_test::seen>();
    sg::state_graph<st> g("h");
    g.add_node("slow", handler_test::sleepy,
               {.timeout = 20ms, .on_error = {"give_up", [seen](const st&, const sg::node_failure& f) {
                                                  seen->failures.push_back(f);
                                                  return say("gave up");
                                              }}});
    g.add_edge(sg::START, "slow").add_edge("slow", sg::END);
    auto r = run(g.compile().invoke(sg::update<st>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"gave up"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(seen->failures.size() == 1u);
    BOOST_TEST((seen->failures[0].code == sg::errc::node_timeout));
    BOOST_TEST(seen->failures[0].message.find("20 ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_handler_command_routes_the_graph) {
    sg::state_graph<st> g("h");
    g.add_node("charge", [](const st&) -> sg::update<st> { throw std::runtime_error("card declined"); },
               {.ends = {"refund"}, .on_error = [](const st&, const sg::node_failure& f) {
                    return sg::command<st>{}.with(say("compensating: " + f.message)).go_to("refund");
                }});
    g.add_node("ship", [](const st&) { return say("ship"); });
    g.add_node("refund", [](const st&) { return say("refund"); });
    g.add_conditional_edges(
        "charge", [](const st& s) { return std::string(s.log.empty() ? "ship" : "__end__"); },
        std::vector<std::string>{"ship", sg::END});
    g.add_edge(sg::START, "charge").add_edge("ship", sg::END).add_edge("refund", sg::END);
    auto r = run(g.compile().invoke(sg::update<st>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"compensating: card declined", "refund"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_failing_handler_is_a_typed_error_naming_both) {
    sg::state_graph<st> g("h");
    g.add_node("fetch", [](const st&) -> sg::update<st> { throw std::runtime_error("boom"); },
               {.on_error = {"apologize", [](const st&, const sg::node_failure&) -> sg::update<st> {
                                 throw std::runtime_error("no words");
                             }}});
    g.add_edge(sg::START, "fetch").add_edge("fetch", sg::END);
    auto app = g.compile();
    std::ostringstream dot;
    app.write_dot(dot);
    BOOST_TEST(dot.str().find("fetch\\n(on error: apologize)") != std::string::npos);
    try {
        run(app.invoke(sg::update<st>{}));
        BOOST_FAIL("the handler's failure must fail the run");
    } catch (const sg::error_handler_error& e) {
        BOOST_TEST((e.kind() == sg::errc::node_failed));
        BOOST_TEST(e.names() == (std::vector<std::string>{"fetch", "apologize"}), boost::test_tools::per_element());
        BOOST_TEST(e.node() == "fetch");
        BOOST_TEST(e.handler() == "apologize");
        const std::string what = e.what();
        BOOST_TEST(what.find("no words") != std::string::npos);
        BOOST_TEST(what.find("boom") != std::string::npos);
        BOOST_CHECK_THROW(std::rethrow_exception(e.nested()), std::runtime_error);
        BOOST_CHECK_THROW(std::rethrow_exception(e.node_failure()), std::runtime_error);
    }
}

BOOST_AUTO_TEST_CASE(defaults_apply_and_per_node_options_win) {
    auto seen = std::make_shared<handler_test::seen>();
    auto calls = std::make_shared<std::map<std::string, int>>();
    auto failing = [calls](std::string name) {
        return [calls, name](const st&) -> sg::update<st> {
            ++(*calls)[name];
            throw std::runtime_error(name + " failed");
        };
    };
    sg::state_graph<st> g("h");
    g.add_node("a", failing("a"));                                                     // takes every default
    g.add_node("b", failing("b"), {.retry = sg::retry_policy{.max_attempts = 1},      // own retry and handler
                                   .on_error = [](const st&, const sg::node_failure&) { return say("b's own"); }});
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    g.set_node_defaults({.retry = handler_test::quick,
                         .on_error = {"default_handler", [seen](const st&, const sg::node_failure& f) {
                                          seen->failures.push_back(f);
                                          return say("default for " + f.node);
                                      }}});
    auto r = run(g.compile().invoke(sg::update<st>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"default for a", "b's own"}), boost::test_tools::per_element());
    BOOST_TEST((*calls)["a"] == 3); // the default retry policy
    BOOST_TEST((*calls)["b"] == 1); // its own
    BOOST_TEST_REQUIRE(seen->failures.size() == 1u);
    BOOST_TEST(seen->failures[0].attempts == 3);

    // A node that opts out of the defaults fails as before.
    sg::state_graph<st> h("h2");
    h.add_node("c", failing("c"), {.use_defaults = false});
    h.add_edge(sg::START, "c").add_edge("c", sg::END);
    h.set_node_defaults({.retry = handler_test::quick, .on_error = [](const st&, const sg::node_failure&) { return say("x"); }});
    try {
        run(h.compile().invoke(sg::update<st>{}));
        BOOST_FAIL("c takes no default handler");
    } catch (const sg::node_error& e) {
        BOOST_TEST(e.node() == "c");
    }
    BOOST_TEST((*calls)["c"] == 1); // nor the default retry
}

BOOST_AUTO_TEST_CASE(default_timeout_and_cache_with_overrides) {
    auto calls = std::make_shared<std::map<std::string, int>>();
    auto counted = [calls](std::string name) {
        return [calls, name](const st&) {
            ++(*calls)[name];
            return say(name);
        };
    };
    sg::state_graph<st> g("d");
    g.add_node("cached", counted("cached"));
    g.add_node("uncached", counted("uncached"), {.use_defaults = false});
    g.add_node("slow", handler_test::sleepy, {.on_error = [](const st&, const sg::node_failure& f) {
                   return say(std::string(sg::to_string(f.code)));
               }});
    g.add_edge(sg::START, "cached").add_edge("cached", "uncached").add_edge("uncached", "slow").add_edge("slow", sg::END);
    g.set_node_defaults({.timeout = 20ms, .cache = sg::cache_policy{}});
    auto app = g.compile();
    auto r1 = run(app.invoke(sg::update<st>{}));
    auto r2 = run(app.invoke(sg::update<st>{}));
    BOOST_TEST(r1.values.log == (std::vector<std::string>{"cached", "uncached", "node_timeout"}), boost::test_tools::per_element());
    BOOST_TEST(r2.values.log == r1.values.log, boost::test_tools::per_element());
    BOOST_TEST((*calls)["cached"] == 1);   // the default cache policy
    BOOST_TEST((*calls)["uncached"] == 2); // opted out
}

BOOST_AUTO_TEST_CASE(a_coroutine_handler_with_context) {
    sg::state_graph<st> g("h");
    g.add_node("fetch", [](const st&) -> sg::update<st> { throw std::runtime_error("boom"); },
               {.on_error = [](const st&, const sg::node_failure& f, sg::context& ctx) -> asio::awaitable<sg::update<st>> {
                    asio::steady_timer t(ctx.executor(), 1ms);
                    co_await t.async_wait(asio::use_awaitable);
                    co_return say(f.message + " in " + ctx.node() + " at step " + std::to_string(ctx.step()));
                }});
    g.add_edge(sg::START, "fetch").add_edge("fetch", sg::END);
    auto r = run(g.compile().invoke(sg::update<st>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"boom in fetch at step 1"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(handled_tasks_in_a_parallel_step_are_saved_as_the_node_s) {
    auto handled = std::make_shared<int>(0);
    sg::state_graph<st> g("h");
    g.add_node("ok", [](const st&) { return say("ok"); });
    g.add_node("bad", [](const st&) -> sg::update<st> { throw std::runtime_error("bad"); },
               {.on_error = [handled](const st&, const sg::node_failure&) {
                    ++*handled;
                    return say("handled");
                }});
    g.add_node("join", [](const st&) { return say("join"); });
    g.add_edge(sg::START, "ok").add_edge(sg::START, "bad");
    g.add_edge(std::vector<std::string>{"ok", "bad"}, "join").add_edge("join", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    sg::run_config cfg;
    cfg.thread_id = "t";
    auto r = run(app.invoke(sg::update<st>{}, cfg));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"handled", "ok", "join"}), boost::test_tools::per_element());
    BOOST_TEST(*handled == 1);
    auto history = run(app.get_state_history("t"));
    BOOST_TEST_REQUIRE(history.size() >= 2u);
    const auto& step1 = history[1]; // after ok and bad
    BOOST_TEST(step1.values.log == (std::vector<std::string>{"handled", "ok"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_handler_of_another_state_is_a_compile_problem) {
    sg::state_graph<st> g("h");
    g.add_node("a", [](const st&) { return say("a"); },
               {.on_error = {"wrong", [](const handler_test::other&, const sg::node_failure&) { return sg::update<handler_test::other>{}; }}});
    g.add_edge(sg::START, "a").add_edge("a", sg::END);
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!g.compile({}, problems).has_value());
    BOOST_TEST_REQUIRE(problems.size() == 1u);
    BOOST_TEST((problems[0].code == sg::errc::invalid_input));
    BOOST_TEST(problems[0].nodes == (std::vector<std::string>{"a", "wrong"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
