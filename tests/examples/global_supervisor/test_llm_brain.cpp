// The chat-model brain: the supervisor's decisions asked of an OpenAI-compatible server (a
// loopback server speaking the chat-completions protocol), and the fall back to the rules when
// the answer is not the JSON asked for.
#include <boost/test/unit_test.hpp>

#include "graph.hpp"
#include "services.hpp"

#include "print_enums.hpp"

#include "../../nodes/fake_openai_server.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <unistd.h>

#include <filesystem>
#include <random>

namespace gs = global_supervisor;
namespace sg = stategraph;
namespace fs = std::filesystem;

namespace {

template <class T>
T run_on(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.restart();
    while (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) io.run_one();
    return f.get();
}

struct llm_fixture {
    fs::path dir = fs::temp_directory_path() /
                   ("gs_llm_" + std::to_string(::getpid()) + "_" + std::to_string(std::random_device{}()));
    boost::asio::io_context io;
    sg::test::fake_openai_server server{io, "test-key"};
    std::shared_ptr<gs::llm_brain> brain;
    std::unique_ptr<gs::services> svc;
    gs::supervisor_graph graph;

    llm_fixture() {
        fs::create_directories(dir);
        sg::nodes::openai_options o;
        o.base_url = server.base_url();
        o.api_key = "test-key";
        o.model = "fake-model";
        brain = std::make_shared<gs::llm_brain>(std::make_shared<sg::nodes::openai_chat_model>(io.get_executor(), o),
                                                "fake-model");
        gs::services::options so;
        so.db = dir / "m.db";
        so.user_id = "u1";
        so.today = "2026-11-22";
        so.model = brain;
        so.agents.retry.initial_interval = std::chrono::milliseconds(1);
        svc = std::make_unique<gs::services>(std::move(so));
        graph = gs::build_graph(std::make_shared<sg::checkpoint::memory_saver>(), *svc);
    }
    ~llm_fixture() {
        server.stop();
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(a_turn_with_the_chat_model_brain, llm_fixture) {
    // One answer that every prompt of the turn can read: classification, plan and agent report.
    server.reply_content = R"({"route": "complex", "entities": ["Anna"], "has_extractable_facts": false,
        "has_preferences": false, "needs_semantic_retrieval": true,
        "steps": [{"agent": "wealth", "task": "check the dinner budget", "needs_permission": false}],
        "summary": "The dinner budget is fine."})";
    auto t = run_on(io, gs::chat(graph, "llm", "Can I afford dinner with Anna?", "u1"));
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.conversation.model == "fake-model");
    BOOST_TEST(t.values.intent.route == gs::route_kind::complex);
    BOOST_TEST(t.values.intent.entities == std::vector<std::string>{"Anna"}, boost::test_tools::per_element());
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].agent == gs::agent_kind::wealth);
    BOOST_TEST(t.reply.find("The dinner budget is fine.") != std::string::npos);
    // The requests were JSON-mode chat completions for the named model.
    BOOST_REQUIRE(server.requests.size() >= 3u);
    const auto& body = server.requests.front().body.as_object();
    BOOST_TEST(body.at("model").as_string() == "fake-model");
    BOOST_TEST(body.at("response_format").at("type").as_string() == "json_object");
    BOOST_TEST(brain->fallbacks() == 0);
}

BOOST_FIXTURE_TEST_CASE(an_answer_that_is_not_json_falls_back_to_the_rules, llm_fixture) {
    server.reply_content = "I am not JSON.";
    auto t = run_on(io, gs::chat(graph, "fallback", "Hi there!", "u1"));
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.intent.route == gs::route_kind::greeting);
    BOOST_TEST(brain->fallbacks() >= 1);
}

BOOST_FIXTURE_TEST_CASE(a_plan_without_steps_goes_straight_to_the_response, llm_fixture) {
    // The planner's "nothing to run" route: a model that plans no agent for a complex request.
    server.reply_content = R"({"route": "complex", "entities": [], "has_extractable_facts": false,
        "needs_semantic_retrieval": false, "steps": []})";
    auto t = run_on(io, gs::chat(graph, "empty", "Organise everything", "u1"));
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.nodes == (std::vector<std::string>{"session_init", "summarization_check", "context_loader",
                                                    "hitl_handler", "intent_classification", "retrieval_router",
                                                    "memory_assembly", "extraction_merge", "global_planner",
                                                    "ui_router", "complex_text", "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(t.reply.find("I couldn't find an agent for that.") != std::string::npos);
}

namespace {
/// Decides with the rules, runs agents through the model.
class agents_through_model final : public gs::brain {
public:
    explicit agents_through_model(std::shared_ptr<gs::brain> model) : model_(std::move(model)) {}
    std::string name() const override { return "rules+" + model_->name(); }
    boost::asio::awaitable<gs::intent> classify(std::string m, std::vector<std::string> k) override {
        return rules_.classify(std::move(m), std::move(k));
    }
    boost::asio::awaitable<std::vector<gs::extracted_fact>> extract_facts(std::string m,
                                                                          std::vector<std::string> e) override {
        return rules_.extract_facts(std::move(m), std::move(e));
    }
    boost::asio::awaitable<std::vector<gs::planned_step>> plan(std::string m, std::vector<gs::agent_kind> d) override {
        return rules_.plan(std::move(m), std::move(d));
    }
    boost::asio::awaitable<std::string> run_agent(gs::agent_task t, std::string c) override {
        return model_->run_agent(std::move(t), std::move(c));
    }
    boost::asio::awaitable<std::string> summarize(std::vector<gs::turn_message> m) override {
        return rules_.summarize(std::move(m));
    }

private:
    std::shared_ptr<gs::brain> model_;
    gs::rule_brain rules_;
};
} // namespace

BOOST_FIXTURE_TEST_CASE(an_unreachable_model_makes_the_agent_report_failure, llm_fixture) {
    gs::services::options so;
    so.db = dir / "m2.db";
    so.user_id = "u1";
    so.model = std::make_shared<agents_through_model>(brain);
    so.agents.retry.initial_interval = std::chrono::milliseconds(1);
    gs::services svc2(std::move(so));
    auto graph2 = gs::build_graph(std::make_shared<sg::checkpoint::memory_saver>(), svc2);
    server.stop(); // every agent attempt now fails to connect
    auto t = run_on(io, gs::chat(graph2, "down", "Research hotels in Zurich", "u1"));
    BOOST_TEST(!t.interrupted);
    BOOST_TEST_MESSAGE("reply: " << t.reply);
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(!results.empty());
    for (const auto& r : results) {
        BOOST_TEST(r.status == gs::agent_status::failed);
        BOOST_TEST(r.attempts == 3);
    }
    BOOST_TEST(t.reply.find("I couldn't reach the research agent after 3 attempts") != std::string::npos);
    BOOST_TEST(t.reply.find("Connection refused") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(the_planner_plans_through_tool_calls, llm_fixture) {
    // One tool per agent not done yet; each call is a step (a done agent's call and a second call
    // of one agent are ignored).
    server.script.push_back(sg::test::scripted_reply{
        "",
        {sg::test::fake_tool_call{"c1", "research", R"({"task": "compare flight prices"})"},
         sg::test::fake_tool_call{"c2", "wealth", R"({"task": "move 500 to savings", "needs_permission": true})"},
         sg::test::fake_tool_call{"c3", "productivity", R"({"task": "book it"})"},
         sg::test::fake_tool_call{"c4", "research", R"({"task": "again"})"}}});
    std::vector<gs::agent_kind> done{gs::agent_kind::productivity};
    auto steps = run_on(io, brain->plan("Find cheap flights and save 500", done));
    BOOST_REQUIRE_EQUAL(steps.size(), 2u);
    BOOST_TEST(steps[0].agent == gs::agent_kind::research);
    BOOST_TEST(steps[0].task == "compare flight prices");
    BOOST_TEST(!steps[0].needs_permission);
    BOOST_TEST(steps[1].agent == gs::agent_kind::wealth);
    BOOST_TEST(steps[1].needs_permission);
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    const auto& tools = server.requests[0].body.at("tools").as_array();
    BOOST_REQUIRE_EQUAL(tools.size(), 2u);  // productivity is done: not offered
    BOOST_TEST(tools[0].at("function").at("name").as_string() == "wealth");
    BOOST_TEST(tools[1].at("function").at("name").as_string() == "research");
    BOOST_TEST(tools[0].at("function").at("parameters").at("required").as_array().at(0).as_string() == "task");
    BOOST_TEST(brain->fallbacks() == 0);

    // No tool call and no JSON: the rules plan, counted as a fall back.
    server.script.push_back(sg::test::scripted_reply{"no idea", {}});
    auto ruled = run_on(io, brain->plan("Review my portfolio", {}));
    BOOST_TEST(!ruled.empty());
    BOOST_TEST(brain->fallbacks() == 1);
}
