// Tests of the supervisor node kind (nodes/include/stategraph/nodes/supervisor.hpp).
#include <stategraph/nodes/supervisor.hpp>

#include "fake_openai_server.hpp"
#include "run_with_server.hpp"

#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/circuit_breaker.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <thread>
#include <optional>
#include <string>
#include <vector>

namespace supervisor_test {

struct desk {
    std::string request;
    std::string category;
    std::string reply;
    std::vector<std::string> log;
    int score = 0;
    stategraph::nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(desk, (), (request, category, reply, log, score, sup))
inline auto reducers(stategraph::for_state<desk>) {
    return stategraph::reducers{stategraph::reduce<&desk::log>(stategraph::append),
                                stategraph::reduce<&desk::score>([](int a, int b) { return a + b; })};
}

}  // namespace supervisor_test

namespace {

namespace asio = boost::asio;
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using supervisor_test::desk;
using nodes::decision;
using intent = nodes::intent<desk>;

/// @brief A callback intent that logs its name and adds @p points to the score.
intent logging(std::string name, int points = 1) {
    auto fn = [name, points](desk const&) {
        return sg::update<desk>{}.set<&desk::log>({name}).set<&desk::score>(points);
    };
    return intent(name, fn);
}

template <class T>
T run(asio::awaitable<T> task) {
    asio::io_context ioc;
    return stategraph::test::run_with_server(ioc, nullptr, std::move(task));
}

sg::run_result<desk> run_supervisor(sg::compiled_graph<desk> const& app, std::string request) {
    return run(app.invoke(sg::update<desk>{}.set<&desk::request>(std::move(request))));
}

/// @brief The agent_error inside @p f's exception (node_error wraps what a node throws).
template <class F>
nodes::agent_error require_agent_error(F&& f) {
    try {
        f();
    } catch (...) {
        std::exception_ptr e = std::current_exception();
        for (int depth = 0; e && depth < 8; ++depth) {
            try {
                std::rethrow_exception(e);
            } catch (nodes::agent_error const& a) {
                BOOST_TEST_MESSAGE("caught: " << a.what());
                return a;
            } catch (sg::node_error const& n) {
                e = n.nested();
            } catch (...) {
                break;
            }
        }
        BOOST_FAIL("the exception holds no agent_error");
    }
    BOOST_FAIL("nothing was thrown");
    throw std::logic_error("unreachable");
}

}  // namespace

BOOST_AUTO_TEST_SUITE(supervisor_configuration)

BOOST_AUTO_TEST_CASE(every_problem_is_reported_at_once) {
    auto model = std::make_shared<nodes::rule_chat_model>([](nodes::chat_request const&) { return nodes::chat_response{}; });
    nodes::supervisor<&desk::sup> sup("desk");
    sup.add(logging("billing").describe("Invoices and refunds"))
        .add(logging("shipping"))
        .add(logging("returns"))
        .add(logging("billing").describe("again"))
        .router({model, nullptr, ""})
        .route([](desk const&) { return decision::finish(); });
    auto const e = require_agent_error([&] { sup.compile(); });
    std::vector<nodes::errc> codes;
    for (auto const& p : e.problems()) codes.push_back(p.code);
    BOOST_REQUIRE_EQUAL(codes.size(), 4u);
    BOOST_TEST((codes[0] == nodes::errc::router_and_route));
    BOOST_TEST((std::count(codes.begin(), codes.end(), nodes::errc::missing_description) == 2));
    BOOST_TEST((std::count(codes.begin(), codes.end(), nodes::errc::duplicate_intent) == 1));
    std::string const what = e.what();
    BOOST_TEST(what.find("intent 'shipping' (callback) has no description") != std::string::npos);
    BOOST_TEST(what.find("intent 'returns'") != std::string::npos);
    BOOST_TEST(what.find("4 problem(s)") == 0u);
    BOOST_TEST(what.find(nodes::make_error_code(nodes::errc::router_and_route).message()) == std::string::npos);
    BOOST_TEST((e.code() == nodes::errc::router_and_route));
    BOOST_TEST(e.code().category().name() == std::string("stategraph.nodes"));
}

BOOST_AUTO_TEST_CASE(a_supervisor_needs_a_way_to_decide) {
    nodes::supervisor<&desk::sup> sup("empty");
    sup.add(logging("a"));
    auto const e = require_agent_error([&] { sup.compile(); });
    BOOST_TEST((e.kind() == nodes::errc::no_router));
    // Without a router, intents need no description: a route alone compiles.
    sup.route([](desk const&) { return decision::finish(); });
    BOOST_CHECK_NO_THROW(sup.compile());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(supervisor_runs)

BOOST_AUTO_TEST_CASE(classifier_then_next_then_route_until_evaluate_is_satisfied) {
    auto compose = [](desk const& d) {
        return sg::update<desk>{}.set<&desk::reply>("Refund for " + d.request).set<&desk::log>({"compose"});
    };
    int route_calls = 0;
    nodes::supervisor<&desk::sup> sup("desk");
    sup.add(logging("classify").next([](desk const&) { return std::optional(decision::to("lookup")); }))
        .add(logging("lookup").next([](desk const&) { return std::optional<decision>(); }))  // falls back to route
        .add(intent("compose", compose))
        .classifier([](desk const&) { return std::string("classify"); })
        .route([&route_calls](desk const& d) {
            ++route_calls;
            return d.reply.empty() ? decision::to("compose") : decision::to("lookup");
        })
        .evaluate([](desk const& d) { return !d.reply.empty(); });

    auto r = run_supervisor(sup.compile(), "order 7");

    std::vector<std::string> const expected{"classify", "lookup", "compose"};
    BOOST_TEST(r.values.log == expected, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.rounds == expected, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.ended_by == "evaluate");  // evaluate outranks the route
    BOOST_TEST(r.values.sup.iteration == 3);
    BOOST_TEST(route_calls == 1);
    BOOST_TEST(r.values.reply == "Refund for order 7");
}

BOOST_AUTO_TEST_CASE(fan_out_runs_intents_in_one_round_merged_by_reducers) {
    nodes::supervisor<&desk::sup> sup("fan");
    sup.add(logging("a", 1)).add(logging("b", 10)).add(logging("c", 100))
        .route([](desk const& d) { return d.score == 0 ? decision::to({"a", "c"}) : decision::finish(); });
    auto app = sup.compile();

    auto r = run_supervisor(app, "x");

    BOOST_TEST(r.values.score == 101);
    BOOST_TEST(r.values.log.size() == 2u);
    std::vector<std::string> const rounds{"a+c"};
    BOOST_TEST(r.values.sup.rounds == rounds, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.ended_by == "route");
    BOOST_TEST(r.step == 3);  // supervisor, a and c together, supervisor

    // Run again on the result: the finished supervision starts over.
    auto again = run(app.invoke(sg::update<desk>::all(r.values)));
    BOOST_TEST(again.values.sup.iteration == 0);
    BOOST_TEST(again.values.sup.ended_by == "route");
}

BOOST_AUTO_TEST_CASE(ack_runs_in_parallel_with_the_first_decision) {
    nodes::supervisor<&desk::sup> sup("acked");
    sup.add(logging("work"))
        .ack([](desk const& d) { return sg::update<desk>{}.set<&desk::reply>("Got it: " + d.request); })
        .route([](desk const& d) { return d.log.empty() ? decision::to("work") : decision::finish(); });
    auto r = run_supervisor(sup.compile(), "invoice");
    BOOST_TEST(r.values.reply == "Got it: invoice");
    BOOST_TEST(r.values.log.size() == 1u);
    BOOST_TEST(r.step == 3);  // ack shares the first superstep with the decision

    nodes::supervisor<&desk::sup> clash("clash");
    clash.add(logging("ack")).ack([](desk const&) { return sg::update<desk>{}; })
        .route([](desk const&) { return decision::finish(); });
    auto const e = require_agent_error([&] { clash.compile(); });
    BOOST_TEST((e.kind() == nodes::errc::duplicate_intent));
}

BOOST_AUTO_TEST_CASE(classifier_alone_ends_after_its_intent) {
    nodes::supervisor<&desk::sup> sup("triage");
    sup.add(logging("billing")).add(logging("shipping"))
        .classifier([](desk const& d) { return d.request.find("invoice") != std::string::npos ? "billing" : "shipping"; });
    auto r = run_supervisor(sup.compile(), "where is my invoice");
    std::vector<std::string> const expected{"billing"};
    BOOST_TEST(r.values.log == expected, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.ended_by == "classifier");
}

BOOST_AUTO_TEST_CASE(max_iterations_is_a_typed_error) {
    int runs = 0;
    auto count = [&runs](desk const&) {
        ++runs;
        return sg::update<desk>{}.set<&desk::score>(1);
    };
    nodes::supervisor<&desk::sup> sup("forever");
    sup.add(intent("again", count)).route([](desk const&) { return decision::to("again"); }).max_iterations(3);
    auto const e = require_agent_error([&] { run_supervisor(sup.compile(), "x"); });
    BOOST_TEST((e.kind() == nodes::errc::max_iterations));
    BOOST_TEST(std::string(e.what()).find("supervisor 'forever': reached max_iterations (3)") != std::string::npos);
    BOOST_TEST(runs == 3);

    // The default is 10 (the run's recursion limit must allow 2 * 10 + 1 steps; 25 does).
    runs = 0;
    nodes::supervisor<&desk::sup> default_cap("forever");
    default_cap.add(intent("again", count)).route([](desk const&) { return decision::to("again"); });
    auto const e10 = require_agent_error([&] { run_supervisor(default_cap.compile(), "x"); });
    BOOST_TEST(std::string(e10.what()).find("max_iterations (10)") != std::string::npos);
    BOOST_TEST(runs == 10);
}

BOOST_AUTO_TEST_CASE(re_entry_within_one_branch_is_a_cycle_error) {
    nodes::supervisor<&desk::sup> sup("loop");
    sup.add(logging("a").next([](desk const&) { return std::optional(decision::to("b")); }))
        .add(logging("b").next([](desk const&) { return std::optional(decision::to("a")); }))
        .route([](desk const&) { return decision::to("a"); });
    auto const e = require_agent_error([&] { run_supervisor(sup.compile(), "x"); });
    BOOST_TEST((e.kind() == nodes::errc::intent_cycle));
    BOOST_TEST(std::string(e.what()).find("intent 'a' was chosen again within one branch: a -> b -> a") !=
               std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_intent_names_the_choices) {
    nodes::supervisor<&desk::sup> sup("typo");
    sup.add(logging("billing")).route([](desk const&) { return decision::to("biling"); });
    auto const e = require_agent_error([&] { run_supervisor(sup.compile(), "x"); });
    BOOST_TEST((e.kind() == nodes::errc::unknown_intent));
    BOOST_TEST(std::string(e.what()).find("route chose unknown intent 'biling'; the intents are: billing") !=
               std::string::npos);
}

BOOST_AUTO_TEST_CASE(llm_router_over_the_loopback_server_with_a_subgraph_intent) {
    using stategraph::test::fake_openai_server;
    using stategraph::test::scripted_reply;
    asio::io_context ioc;
    fake_openai_server server(ioc, "sk-router");
    server.script.push_back(scripted_reply{R"({"next":"research","reasoning":"need facts"})", {}});
    server.script.push_back(scripted_reply{R"({"next":["write","review"]})", {}});
    server.script.push_back(scripted_reply{R"({"next":"END","reasoning":"done"})", {}});
    auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(),
                                                            stategraph::test::options_for(server, "sk-router"));

    sg::state_graph<desk> research_graph("research");
    research_graph.add_node("search", [](desk const&) { return sg::update<desk>{}.set<&desk::log>({"search"}); });
    research_graph.add_node("read", [](desk const&) { return sg::update<desk>{}.set<&desk::log>({"read"}); });
    research_graph.add_edge(sg::START, "search").add_edge("search", "read").add_edge("read", sg::END);

    nodes::supervisor<&desk::sup> sup("writer");
    sup.add(intent("research", research_graph.compile()).describe("Finds facts"))
        .add(logging("write").describe("Writes the text"))
        .add(logging("review").describe("Checks the text"))
        .router({model, [](desk const& d) { return "Task: " + d.request; }, "You plan writing work."});

    using namespace sg::dsl;
    // clang-format off
    auto app = graph<desk>("app",
        "team"_n = sup.compile(),
        start >> "team"_n >> end).compile();
    // clang-format on
    auto input = sg::update<desk>{}.set<&desk::request>("an essay on graphs");
    auto r = stategraph::test::run_with_server(ioc, &server, app.invoke(std::move(input)));

    std::vector<std::string> const rounds{"research", "write+review"};
    BOOST_TEST(r.values.sup.rounds == rounds, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.ended_by == "router");
    BOOST_TEST(r.values.log.size() == 4u);  // search, read, write, review
    BOOST_TEST(r.values.score == 2);
    BOOST_REQUIRE_EQUAL(server.requests.size(), 3u);
    auto const& body = server.requests[0].body.as_object();
    BOOST_TEST(body.at("response_format").at("type") == boost::json::value("json_object"));
    std::string const system(body.at("messages").as_array().at(0).at("content").as_string());
    BOOST_TEST(system.find("You plan writing work.") == 0u);
    BOOST_TEST(system.find("- research: Finds facts") != std::string::npos);
    BOOST_TEST(system.find("- review: Checks the text") != std::string::npos);
    BOOST_TEST(body.at("messages").as_array().at(1).at("content") == boost::json::value("Task: an essay on graphs"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(circuit_breaker_policy)

BOOST_AUTO_TEST_CASE(opens_after_failures_fails_fast_and_half_opens_after_cool_down) {
    auto breaker = std::make_shared<nodes::circuit_breaker>(
        "billing", nodes::circuit_options{2, std::chrono::milliseconds(150)});
    bool failing = true;
    int calls = 0;
    auto billing = [&](desk const&) {
        ++calls;
        if (failing) throw std::runtime_error("billing backend down");
        return sg::update<desk>{}.set<&desk::log>({"billing"});
    };
    nodes::supervisor<&desk::sup> sup("guarded");
    sup.add(intent("billing", nodes::guarded<desk>(breaker, billing)))
        .route([](desk const& d) { return d.log.empty() ? decision::to("billing") : decision::finish(); });
    auto app = sup.compile();
    auto call = [&] { return run_supervisor(app, "invoice"); };

    BOOST_CHECK_THROW(call(), sg::node_error);
    BOOST_TEST((breaker->state() == nodes::circuit_state::closed));
    BOOST_CHECK_THROW(call(), sg::node_error);
    BOOST_TEST((breaker->state() == nodes::circuit_state::open));
    auto const e = require_agent_error(call);
    BOOST_TEST((e.kind() == nodes::errc::circuit_open));
    BOOST_TEST(std::string(e.what()).find("circuit breaker 'billing' is open after 2 failure(s)") != std::string::npos);
    BOOST_TEST(calls == 2);  // failed fast: the intent did not run

    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    BOOST_TEST((breaker->state() == nodes::circuit_state::half_open));
    BOOST_CHECK_THROW(call(), sg::node_error);  // the trial fails: open again at once
    BOOST_TEST(calls == 3);
    BOOST_TEST((breaker->state() == nodes::circuit_state::open));
    BOOST_TEST((require_agent_error(call).kind() == nodes::errc::circuit_open));

    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    failing = false;
    auto r = call();  // the trial succeeds: closed
    BOOST_TEST(r.values.log.size() == 1u);
    BOOST_TEST((breaker->state() == nodes::circuit_state::closed));
    BOOST_TEST(calls == 4);
    BOOST_CHECK_THROW(nodes::circuit_breaker("x", nodes::circuit_options{0}), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
