// Tests of the supervisor node kind (nodes/include/stategraph/nodes/supervisor.hpp).
#include <stategraph/nodes/supervisor.hpp>

#include "fake_openai_server.hpp"
#include "run_with_server.hpp"

#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/circuit_breaker.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/usage_tally.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>
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


/// @brief A state with an artifacts bag (the side channel) and a list the finalize fills.
struct studio {
    std::string request;
    std::vector<std::string> log;
    std::vector<std::string> blocks;     // filled from artifacts
    std::string title;                   // spread from an artifact
    int citations = 0;                   // spread from an artifact
    boost::json::object artifacts;
    std::vector<stategraph::nodes::failure_record> failures;  // plain-graph failure_policy
    stategraph::nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(studio, (), (request, log, blocks, title, citations, artifacts, failures, sup))
inline auto reducers(stategraph::for_state<studio>) {
    return stategraph::reducers{stategraph::reduce<&studio::log>(stategraph::append),
                                stategraph::reduce<&studio::failures>(stategraph::append),
                                stategraph::reduce<&studio::artifacts>(stategraph::nodes::merge_artifacts)};
}

/// @brief The same without the bag's reducer (a configuration error).
struct bare {
    boost::json::object artifacts;
    stategraph::nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(bare, (), (artifacts, sup))

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
            } catch (sg::error_handler_error const& h) {
                e = h.nested();
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
    sg::usage_tally tally; // the router's calls report their tokens to the run's observer
    sg::run_config cfg;
    cfg.observer = &tally;
    auto r = stategraph::test::run_with_server(ioc, &server, app.invoke(std::move(input), cfg));
    // The fake counts words: 2 + 1 + 1 in the three answers.
    BOOST_TEST(tally.by_model().at("gpt-test").output_tokens == 4);
    BOOST_TEST(tally.total().input_tokens > 0);

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

// -- the artifacts side channel (seeds 000/001) -------------------------------------------------

namespace {

using supervisor_test::studio;
using sintent = nodes::intent<studio>;

sg::run_result<studio> run_studio(sg::compiled_graph<studio> const& app) {
    return run(app.invoke(sg::update<studio>{}.set<&studio::request>("page")));
}

/// @brief An intent that logs its name and writes @p bag into the artifacts side channel.
sintent emitting(std::string name, boost::json::object bag) {
    auto fn = [name, bag](studio const&) {
        return sg::update<studio>{}.set<&studio::log>({name}).set<&studio::artifacts>(bag);
    };
    return sintent(name, fn);
}

/// @brief The finalize of the seed: concatenate the bag's blocks to the state's.
sg::update<studio> concat_blocks(studio const& s, boost::json::object const& bag) {
    auto blocks = s.blocks;
    if (auto const* more = bag.if_contains("blocks"))
        for (auto const& b : more->as_array()) blocks.emplace_back(b.as_string());
    return sg::update<studio>{}.set<&studio::blocks>(std::move(blocks));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(supervisor_artifacts)

BOOST_AUTO_TEST_CASE(artifacts_spread_into_the_state_before_evaluate_reads_it) {
    auto bag = nodes::artifact("title", std::string("Refunds"));
    bag["citations"] = 3;
    int evaluated_with_title = 0;
    nodes::supervisor<&studio::sup> sup("writer");
    sup.add(emitting("draft", bag))
        .route([](studio const&) { return decision::to("draft"); })
        .evaluate([&](studio const& s) {
            if (!s.title.empty()) ++evaluated_with_title;
            return !s.title.empty();
        })
        .artifacts<&studio::artifacts>();
    auto r = run_studio(sup.compile());
    BOOST_TEST(r.values.title == "Refunds");
    BOOST_TEST(r.values.citations == 3);
    BOOST_TEST(r.values.artifacts.empty());  // the bag resets every iteration
    BOOST_TEST(r.values.sup.ended_by == "evaluate");
    BOOST_TEST(evaluated_with_title == 1);  // merged before evaluate, in the same decision
    BOOST_TEST(r.values.sup.iteration == 1);
}

BOOST_AUTO_TEST_CASE(fan_out_branches_all_contribute_and_finalize_concatenates_across_iterations) {
    auto one = nodes::artifact("blocks", std::vector<std::string>{"a1"});
    auto two = nodes::artifact("blocks", std::vector<std::string>{"b1", "b2"});
    nodes::supervisor<&studio::sup> sup("blocks");
    sup.add(emitting("a", one)).add(emitting("b", two))
        .route([](studio const& s) {
            if (s.log.empty()) return decision::to({"a", "b"});  // fan-out: both write the bag
            if (s.log.size() == 2) return decision::to("a");
            return decision::finish();
        })
        .artifacts<&studio::artifacts>(concat_blocks);
    auto r = run_studio(sup.compile());
    BOOST_REQUIRE_EQUAL(r.values.blocks.size(), 4u);  // a1, b1, b2 (either branch first), then a1
    BOOST_TEST(std::count(r.values.blocks.begin(), r.values.blocks.end(), "a1") == 2);
    BOOST_TEST(std::count(r.values.blocks.begin(), r.values.blocks.end(), "b2") == 1);
    BOOST_TEST(r.values.blocks.back() == "a1");  // the second iteration's bag held only its own block
    BOOST_TEST(r.values.artifacts.empty());
    std::vector<std::string> const rounds{"a+b", "a"};
    BOOST_TEST(r.values.sup.rounds == rounds, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(merge_artifacts_concatenates_arrays_and_keeps_the_later_scalar) {
    boost::json::object a{{"blocks", boost::json::array{1}}, {"title", "x"}};
    boost::json::object b{{"blocks", boost::json::array{2, 3}}, {"title", "y"}, {"more", true}};
    auto m = nodes::merge_artifacts(a, b);
    BOOST_TEST(boost::json::serialize(m) == R"({"blocks":[1,2,3],"title":"y","more":true})");
}

BOOST_AUTO_TEST_CASE(an_artifact_naming_no_field_or_of_the_wrong_type_is_a_typed_error) {
    auto route = [](studio const& s) { return s.log.empty() ? decision::to("draft") : decision::finish(); };
    nodes::supervisor<&studio::sup> unknown("writer");
    unknown.add(emitting("draft", nodes::artifact("subtitle", std::string("x")))).route(route).artifacts<&studio::artifacts>();
    auto const e1 = require_agent_error([&] { run_studio(unknown.compile()); });
    BOOST_TEST((e1.kind() == nodes::errc::unknown_artifact));
    BOOST_TEST(std::string(e1.what()).find("supervisor 'writer': artifact 'subtitle' names no field") == 0u);

    nodes::supervisor<&studio::sup> wrong("writer");
    wrong.add(emitting("draft", nodes::artifact("citations", std::string("many")))).route(route).artifacts<&studio::artifacts>();
    auto const e2 = require_agent_error([&] { run_studio(wrong.compile()); });
    BOOST_TEST((e2.kind() == nodes::errc::bad_artifact));
    BOOST_TEST(std::string(e2.what()).find("artifact 'citations' = \"many\" does not convert") != std::string::npos);

    nodes::supervisor<&studio::sup> reserved("writer");
    reserved.add(emitting("draft", nodes::artifact("sup", 1))).route(route).artifacts<&studio::artifacts>();
    BOOST_TEST((require_agent_error([&] { run_studio(reserved.compile()); }).kind() == nodes::errc::unknown_artifact));
}

BOOST_AUTO_TEST_CASE(a_bag_without_its_reducer_is_a_compile_problem) {
    using supervisor_test::bare;
    nodes::supervisor<&bare::sup> sup("bare");
    sup.add(nodes::intent<bare>("a", [](bare const&) { return sg::update<bare>{}; }))
        .route([](bare const&) { return decision::finish(); })
        .artifacts<&bare::artifacts>();
    auto const e = require_agent_error([&] { sup.compile(); });
    BOOST_TEST((e.kind() == nodes::errc::unknown_artifact));
    BOOST_TEST(std::string(e.what()).find("the artifacts bag 'artifacts' has no reducer") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// -- escalation or re-plan when retries run out (seed 004) --------------------------------------

namespace {

/// @brief Two quick attempts.
nodes::failure_policy two_attempts() {
    nodes::failure_policy p;
    p.retry.max_attempts = 2;
    p.retry.initial_interval = std::chrono::milliseconds(1);
    p.retry.jitter = false;
    return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(supervisor_failure_policy)

BOOST_AUTO_TEST_CASE(after_the_last_retry_the_supervisor_escalates_to_the_named_intent) {
    int calls = 0;
    auto billing = [&calls](studio const&) -> sg::update<studio> {
        ++calls;
        throw std::runtime_error("billing backend down");
    };
    auto policy = two_attempts();
    policy.escalate_to = "human";
    nodes::supervisor<&studio::sup> sup("desk");
    sup.add(sintent("billing", billing).on_failure(policy))
        .add(emitting("human", {}))
        .route([](studio const& s) { return s.log.empty() ? decision::to("billing") : decision::finish(); });
    auto r = run_studio(sup.compile());
    BOOST_TEST(calls == 2);
    std::vector<std::string> const rounds{"billing", "human"};
    BOOST_TEST(r.values.sup.rounds == rounds, boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(r.values.sup.failures.size(), 1u);
    auto const& f = r.values.sup.failures[0];
    BOOST_TEST(f.node == "billing");
    BOOST_TEST(f.attempts == 2);
    BOOST_TEST(f.action == "escalate");
    BOOST_TEST(f.to == "human");
    BOOST_TEST(f.message.find("billing backend down") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_replan_asks_the_route_again_with_the_failure_in_the_state) {
    auto billing = [](studio const&) -> sg::update<studio> { throw std::runtime_error("timeout"); };
    auto policy = two_attempts();
    policy.replan = true;
    std::vector<std::size_t> failures_seen;
    nodes::supervisor<&studio::sup> sup("desk");
    sup.add(sintent("billing", billing).on_failure(policy).next([](studio const&) {
           return std::optional(decision::to("billing"));  // not consulted after a failure
       }))
        .add(emitting("manual", {}))
        .route([&failures_seen](studio const& s) {
            failures_seen.push_back(s.sup.failures.size());
            if (!s.log.empty()) return decision::finish();
            return s.sup.failures.empty() ? decision::to("billing") : decision::to("manual");
        });
    auto r = run_studio(sup.compile());
    std::vector<std::string> const rounds{"billing", "manual"};
    BOOST_TEST(r.values.sup.rounds == rounds, boost::test_tools::per_element());
    std::vector<std::size_t> const seen{0, 1, 1};
    BOOST_TEST(failures_seen == seen, boost::test_tools::per_element());
    BOOST_TEST(r.values.sup.failures.at(0).action == "replan");
}

BOOST_AUTO_TEST_CASE(without_escalation_or_replan_exhausted_retries_are_a_typed_error) {
    int calls = 0;
    auto billing = [&calls](studio const&) -> sg::update<studio> {
        ++calls;
        throw std::runtime_error("billing backend down");
    };
    nodes::supervisor<&studio::sup> sup("desk");
    sup.add(sintent("billing", billing).on_failure(two_attempts()))
        .route([](studio const& s) { return s.log.empty() ? decision::to("billing") : decision::finish(); });
    auto const e = require_agent_error([&] { run_studio(sup.compile()); });
    BOOST_TEST((e.kind() == nodes::errc::retries_exhausted));
    BOOST_TEST(std::string(e.what()).find("supervisor 'desk': intent 'billing' failed after 2 attempt(s)") == 0u);
    BOOST_TEST(std::string(e.what()).find("billing backend down") != std::string::npos);
    BOOST_TEST(calls == 2);
}

BOOST_AUTO_TEST_CASE(bad_failure_policies_are_compile_problems) {
    auto both = two_attempts();
    both.escalate_to = "human";
    both.replan = true;
    auto nowhere = two_attempts();
    nowhere.escalate_to = "nobody";
    auto replan = two_attempts();
    replan.replan = true;
    nodes::supervisor<&studio::sup> sup("desk");
    sup.add(emitting("a", {}).on_failure(both))
        .add(emitting("b", {}).on_failure(nowhere))
        .add(emitting("c", {}).on_failure(replan))
        .add(emitting("human", {}))
        .classifier([](studio const&) { return std::string("a"); });  // nothing to re-plan with
    auto const e = require_agent_error([&] { sup.compile(); });
    BOOST_REQUIRE_EQUAL(e.problems().size(), 3u);
    for (auto const& p : e.problems()) BOOST_TEST((p.code == nodes::errc::bad_failure_policy));
    std::string const what = e.what();
    BOOST_TEST(what.find("node 'a': a failure_policy escalates or re-plans, not both") != std::string::npos);
    BOOST_TEST(what.find("intent 'b': failure_policy escalates to unknown intent 'nobody'") != std::string::npos);
    BOOST_TEST(what.find("intent 'c': failure_policy re-plans, but there is no router or route") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_plain_graph_node_escalates_through_its_error_handler) {
    int calls = 0;
    auto fetch = [&calls](studio const&) -> sg::command<studio> {
        ++calls;
        throw std::runtime_error("upstream 503");
    };
    auto human = [](studio const&) { return sg::update<studio>{}.set<&studio::log>({"human"}); };
    auto policy = two_attempts();
    policy.escalate_to = "human";
    auto options = nodes::with_failure_policy<&studio::failures>("fetch", policy);
    options.ends.push_back(sg::END);
    sg::state_graph<studio> g("plain");
    g.add_node("fetch", fetch, options).add_node("human", human);
    g.add_edge(sg::START, "fetch").add_edge("human", sg::END);
    auto r = run_studio(g.compile());
    BOOST_TEST(calls == 2);
    BOOST_TEST(r.values.log == std::vector<std::string>{"human"}, boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(r.values.failures.size(), 1u);
    BOOST_TEST(r.values.failures[0].node == "fetch");
    BOOST_TEST(r.values.failures[0].to == "human");

    auto no_planner = two_attempts();
    no_planner.replan = true;
    try {
        nodes::with_failure_policy<&studio::failures>("fetch", no_planner);
        BOOST_FAIL("no error");
    } catch (nodes::agent_error const& e) {
        BOOST_TEST((e.kind() == nodes::errc::bad_failure_policy));
        BOOST_TEST(std::string(e.what()).find("node 'fetch'") == 0u);
    }

    sg::state_graph<studio> g2("plain");
    g2.add_node("fetch", fetch, nodes::with_failure_policy<&studio::failures>("fetch", two_attempts()));
    g2.add_edge(sg::START, "fetch").add_edge("fetch", sg::END);
    auto const e = require_agent_error([&] { run_studio(g2.compile()); });
    BOOST_TEST((e.kind() == nodes::errc::retries_exhausted));
    BOOST_TEST(std::string(e.what()).find("'fetch' failed after 2 attempt(s)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
