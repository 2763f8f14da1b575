// Tests of the Global Supervisor graph: every route through it (the node sequence of each),
// the interrupt and its resume from a second "process" (new services, saver and graph on the same
// files), a new message while a question is pending, retries that succeed and retries that run
// out, the permission interrupt, summarization, a turn's messages persisted all or nothing and once,
// and the DOT drawing rendered by `dot -Tsvg`.
#define BOOST_TEST_MODULE global_supervisor
#include <boost/test/unit_test.hpp>

#include "graph.hpp"
#include "services.hpp"
#include "stages/memory.hpp"
#include "stages/planning.hpp"
#include "stages/response.hpp"
#include "state.hpp"

#include "print_enums.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/core/error.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace gs = global_supervisor;
namespace sg = stategraph;
namespace fs = std::filesystem;

namespace {

using nodes_t = std::vector<std::string>;

template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.restart();
    io.run();
    return f.get();
}

/// A directory removed at the end of the test.
struct temp_dir {
    fs::path path;
    temp_dir() {
        static std::atomic<int> counter{0};
        path = fs::temp_directory_path() /
               ("gs_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                std::to_string(std::random_device{}()));
        fs::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

/// Fast agent settings for tests: the same policy shape, shorter waits.
gs::agent_settings test_agents() {
    gs::agent_settings a;
    a.retry.max_attempts = 3;
    a.retry.initial_interval = std::chrono::milliseconds(2);
    a.retry.backoff_factor = 2.0;
    a.retry.jitter = true;
    a.retry.timeout = std::chrono::milliseconds(300);
    return a;
}

/// One "process": services on the memory database, a SQLite saver on the checkpoint file, the
/// compiled graph, and an io_context. Two of them on the same files are two processes.
struct process {
    boost::asio::io_context io;
    gs::services svc;
    gs::supervisor_graph graph;

    explicit process(const fs::path& db, std::shared_ptr<gs::brain> brain = nullptr,
                     gs::agent_settings agents = test_agents())
        : svc(options(db, std::move(brain), std::move(agents))),
          graph(gs::build_graph(std::make_shared<sg::checkpoint::sqlite_saver>(
                                    sg::checkpoint::sqlite_options{.path = gs::checkpoint_path(db.string())}),
                                svc)) {}

    static gs::services::options options(const fs::path& db, std::shared_ptr<gs::brain> brain,
                                         gs::agent_settings agents = test_agents()) {
        gs::services::options o;
        o.db = db;
        o.user_id = "u1";
        o.today = "2026-11-22";
        o.agents = std::move(agents);
        o.model = std::move(brain);
        return o;
    }

    gs::turn_outcome chat(const std::string& thread, const std::string& message) {
        return run(io, gs::chat(graph, thread, message, "u1"));
    }
    gs::turn_outcome resume(const std::string& thread, const std::string& answer) {
        return run(io, gs::resume(graph, thread, answer));
    }
    std::vector<gs::chat_message> messages(const std::string& thread) {
        return svc.with_store([&](gs::memory_store& m) { return m.load_messages(thread); });
    }
    std::vector<gs::fact> facts_of(const std::string& full_name) {
        return svc.with_store([&](gs::memory_store& m) {
            for (const auto& c : m.find_contacts_by_name("u1", full_name.substr(0, full_name.find(' '))))
                if (c.full_name == full_name) return m.facts_for_contact(c.id);
            return std::vector<gs::fact>{};
        });
    }
};

const nodes_t entry_nodes = {"session_init", "summarization_check", "context_loader", "hitl_handler",
                             "intent_classification", "retrieval_router"};

nodes_t concat(nodes_t a, const nodes_t& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool has_fact(const std::vector<gs::fact>& facts, const std::string& text) {
    for (const auto& f : facts)
        if (f.text == text) return true;
    return false;
}

} // namespace

// -- the routes through the graph ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(greeting_takes_the_fast_path) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("greet", "Hi there!");
    BOOST_TEST(!t.interrupted);
    // No retrieval, no fact extraction: the optimization flags skip them.
    BOOST_TEST(t.nodes == concat(entry_nodes, {"memory_assembly", "extraction_merge", "ui_router", "simple_text",
                                               "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(t.trace == t.nodes, boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Hello"));
    BOOST_TEST(contains(t.reply, "Dentist appointment")); // the agenda loaded by context_loader
    auto msgs = p.messages("greet");
    BOOST_REQUIRE(msgs.size() == 2u);
    BOOST_TEST(msgs[0].role == "user");
    BOOST_TEST(msgs[1].content == t.reply);
}

BOOST_AUTO_TEST_CASE(flat_input_and_output_schemas) {
    // The graph's input schema (supervisor_input) maps a flat turn onto the namespaced state; its
    // output schema (supervisor_output) is what a caller gets back, the Thomas question included.
    temp_dir dir;
    process p(dir.path / "m.db");
    gs::supervisor_input in;
    in.user_message = "Thomas is traveling to Mallorca";
    in.avatar_id = "owl";
    in.model = "rules";
    auto t = run(p.io, gs::chat(p.graph, "flat", in, gs::turn_watch{}));
    BOOST_TEST(t.interrupted);
    BOOST_TEST(t.output.chat_id == "flat");   // left out: the thread id
    BOOST_TEST(t.output.user_id == "u1");     // left out: the served user
    BOOST_TEST(t.output.avatar_id == "owl");
    BOOST_TEST(t.output.model == "rules");
    BOOST_REQUIRE(t.output.question.has_value());
    BOOST_TEST(contains(*t.output.question, "Which Thomas"));
    BOOST_TEST(t.output.options.size() == 2u);
    // The path names the nodes that finished; `nodes` also names the one waiting (last).
    BOOST_TEST(t.output.path == nodes_t(t.nodes.begin(), t.nodes.end() - 1), boost::test_tools::per_element());
    BOOST_TEST(t.nodes.back() == "disambiguation_blocking");
    auto r = p.resume("flat", "Thomas Berger");
    BOOST_TEST(!r.output.question.has_value());
    BOOST_TEST(r.output.reply == r.reply);
    BOOST_TEST(r.output.avatar_id == "owl"); // kept for the thread's later turns
    // A model this supervisor does not serve, or a member the input lacks, is refused before anything runs.
    gs::supervisor_input other;
    other.user_message = "Hi";
    other.model = "gpt-9";
    BOOST_CHECK_THROW(run(p.io, gs::chat(p.graph, "flat", other, gs::turn_watch{})), sg::graph_error);
    boost::json::object typo{{"user_mesage", "Hi"}};
    BOOST_CHECK_THROW(run(p.io, p.graph.invoke(sg::as_input(typo), {.thread_id = "flat"})), sg::unknown_member_error);
    BOOST_TEST(p.messages("flat").size() == 4u);
}

BOOST_AUTO_TEST_CASE(question_takes_semantic_retrieval_without_extraction) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("q", "Tell me about Anna");
    BOOST_TEST(t.values.memory.path == gs::retrieval_path::semantic);
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "semantic_retrieval", "temporal_retrieval",
                                               "memory_assembly", "extraction_merge", "ui_router", "simple_text",
                                               "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Anna likes Italian food"));
    BOOST_TEST(t.values.memory.temporal_facts.empty());
}

BOOST_AUTO_TEST_CASE(statement_runs_extraction_in_parallel_with_entity_resolution) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("s", "Anna is moving to Berlin");
    // entity_resolution and fact_extraction run in one superstep; extraction_merge waits for both.
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "fact_extraction", "semantic_retrieval",
                                               "temporal_retrieval", "memory_assembly", "extraction_merge",
                                               "ui_router", "simple_text", "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(has_fact(p.facts_of("Anna Keller"), "Anna is moving to Berlin"));
    BOOST_TEST(contains(t.reply, "Noted: Anna is moving to Berlin (Anna Keller)"));
}

BOOST_AUTO_TEST_CASE(time_question_takes_parallel_retrieval) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("time", "What is coming up this week?");
    BOOST_TEST(t.values.memory.path == gs::retrieval_path::parallel);
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "semantic_retrieval", "temporal_retrieval",
                                               "memory_assembly", "extraction_merge", "ui_router", "simple_text",
                                               "message_persist"}),
               boost::test_tools::per_element());
    BOOST_REQUIRE(!t.values.memory.temporal_facts.empty());
    BOOST_TEST(contains(t.reply, "Dentist appointment with Dr. Meier"));
}

BOOST_AUTO_TEST_CASE(non_blocking_disambiguation_answers_and_asks_by_the_way) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("nb", "What does Thomas like?");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "semantic_retrieval", "temporal_retrieval",
                                               "memory_assembly", "extraction_merge", "disambiguation_simple",
                                               "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Thomas Berger loves sailing"));
    BOOST_TEST(contains(t.reply, "By the way, which Thomas did you mean: Thomas Anderson or Thomas Berger?"));
    BOOST_TEST(t.values.hitl.pending == gs::hitl_kind::none);
}

BOOST_AUTO_TEST_CASE(complex_request_runs_agents_in_parallel) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("c", "Plan my week: book flights to Zurich and review my portfolio");
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "semantic_retrieval", "temporal_retrieval",
                                               "memory_assembly", "extraction_merge", "global_planner",
                                               "agent_execution", "agent_execution", "ui_router", "complex_text",
                                               "message_persist"}),
               boost::test_tools::per_element());
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 2u);
    BOOST_TEST(t.values.planning.batch.size() == 2u); // one batch: both agents in one superstep
    BOOST_TEST(contains(t.reply, "Productivity: Planned"));
    BOOST_TEST(contains(t.reply, "Window seat requested")); // the preference from memory
    BOOST_TEST(contains(t.reply, "Wealth: Portfolio review"));
}

// -- blocking disambiguation, interrupt and resume ----------------------------------------------------

BOOST_AUTO_TEST_CASE(blocking_disambiguation_pauses_and_resumes_from_another_process) {
    temp_dir dir;
    const auto db = dir.path / "m.db";
    const nodes_t before = concat(entry_nodes, {"entity_resolution", "fact_extraction", "semantic_retrieval",
                                                "temporal_retrieval", "memory_assembly", "extraction_merge",
                                                "disambiguation_blocking"});
    {
        process first(db);
        auto t = first.chat("thomas", "Thomas is traveling to Mallorca");
        BOOST_TEST(t.interrupted);
        BOOST_TEST(t.nodes == before, boost::test_tools::per_element());
        BOOST_REQUIRE(t.interrupts.size() == 1u);
        const auto& v = t.interrupts[0].value.as_object();
        BOOST_TEST(v.at("kind").as_string() == "disambiguation");
        BOOST_TEST(t.reply == "Which Thomas do you mean: 1) Thomas Anderson (colleague) or 2) Thomas Berger "
                              "(brother-in-law)?");
        // The question is the assistant's message while the thread waits; the fact is not stored.
        auto msgs = first.messages("thomas");
        BOOST_REQUIRE(msgs.size() == 2u);
        BOOST_TEST(msgs[1].role == "assistant");
        BOOST_TEST(msgs[1].content == t.reply);
        BOOST_TEST(!has_fact(first.facts_of("Thomas Anderson"), "Thomas is traveling to Mallorca"));
        BOOST_TEST(!has_fact(first.facts_of("Thomas Berger"), "Thomas is traveling to Mallorca"));
    }
    {
        process second(db); // a new process: nothing shared but the files
        auto t = second.resume("thomas", "2");
        BOOST_TEST(!t.interrupted);
        BOOST_TEST(t.nodes == (nodes_t{"disambiguation_blocking", "message_persist"}), boost::test_tools::per_element());
        BOOST_TEST(has_fact(second.facts_of("Thomas Berger"), "Thomas is traveling to Mallorca"));
        BOOST_TEST(!has_fact(second.facts_of("Thomas Anderson"), "Thomas is traveling to Mallorca"));
        BOOST_TEST(contains(t.reply, "saved that for Thomas Berger"));
        // The whole path of the turn, across both processes.
        BOOST_TEST(t.trace == concat(before, {"message_persist"}), boost::test_tools::per_element());
        auto msgs = second.messages("thomas");
        BOOST_REQUIRE(msgs.size() == 4u); // user, question, answer, reply: the question not stored twice
        BOOST_TEST(msgs[2].content == "2");
        BOOST_TEST(msgs[3].content == t.reply);
        // Nothing is pending any more.
        BOOST_CHECK_THROW(second.resume("thomas", "1"), sg::thread_error);
    }
}

BOOST_AUTO_TEST_CASE(an_answer_naming_no_candidate_gets_the_question_again) {
    temp_dir dir;
    process p(dir.path / "m.db");
    BOOST_TEST(p.chat("again", "Thomas is traveling to Mallorca").interrupted);
    auto t = p.resume("again", "the tall one");
    BOOST_TEST(t.interrupted);
    BOOST_TEST(contains(t.reply, "Sorry, I didn't get that."));
    t = p.resume("again", "Thomas Anderson");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(has_fact(p.facts_of("Thomas Anderson"), "Thomas is traveling to Mallorca"));
    auto msgs = p.messages("again");
    BOOST_TEST(msgs.size() == 6u); // user, q1, bad answer, q2, answer, reply
}

BOOST_AUTO_TEST_CASE(new_message_while_disambiguation_pending_goes_through_hitl_handler) {
    temp_dir dir;
    process p(dir.path / "m.db");
    BOOST_TEST(p.chat("pending", "Thomas is traveling to Mallorca").interrupted);
    // Not a resume: a new chat message that names a candidate answers the question.
    auto t = p.chat("pending", "I meant Thomas Berger");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.hitl.resume_type == gs::hitl_kind::disambiguation);
    BOOST_TEST(t.nodes == concat(entry_nodes, {"memory_assembly", "extraction_merge", "ui_router", "simple_text",
                                               "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(has_fact(p.facts_of("Thomas Berger"), "Thomas is traveling to Mallorca"));
    BOOST_TEST(contains(t.reply, "saved that for Thomas Berger"));
    BOOST_TEST(t.values.hitl.pending == gs::hitl_kind::none);
}

BOOST_AUTO_TEST_CASE(new_message_that_moves_on_drops_the_pending_question) {
    temp_dir dir;
    process p(dir.path / "m.db");
    BOOST_TEST(p.chat("moveon", "Thomas is traveling to Mallorca").interrupted);
    auto t = p.chat("moveon", "Hello");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.hitl.pending == gs::hitl_kind::none);
    BOOST_TEST(!has_fact(p.facts_of("Thomas Berger"), "Thomas is traveling to Mallorca"));
    BOOST_CHECK_THROW(p.resume("moveon", "2"), sg::thread_error);
}

// -- agents: retries, time limits, permission -------------------------------------------------------

BOOST_AUTO_TEST_CASE(retry_succeeds_after_a_transient_failure) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("flaky", "Research flaky battery suppliers");
    BOOST_TEST(!t.interrupted);
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].agent == gs::agent_kind::research);
    BOOST_TEST(results[0].status == gs::agent_status::ok);
    BOOST_TEST(results[0].attempts == 2);
    BOOST_TEST(contains(t.reply, "Research on"));
}

BOOST_AUTO_TEST_CASE(retry_after_an_attempt_overruns_its_time_limit) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto start = std::chrono::steady_clock::now();
    auto t = p.chat("slow", "Research slow battery suppliers");
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].status == gs::agent_status::ok);
    BOOST_TEST(results[0].attempts == 2);
    // The first attempt was cut at the 300 ms limit, not left to sleep its 600 ms.
    BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::milliseconds(590)));
}

BOOST_AUTO_TEST_CASE(retries_that_run_out_are_reported_not_thrown) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("down", "Research unreachable battery suppliers");
    BOOST_TEST(!t.interrupted);
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].status == gs::agent_status::failed);
    BOOST_TEST(results[0].attempts == 3);
    BOOST_TEST(contains(t.reply, "I couldn't reach the research agent after 3 attempts"));
    BOOST_TEST(t.nodes.back() == "message_persist");
}

BOOST_AUTO_TEST_CASE(permission_is_asked_and_approved_from_another_process) {
    temp_dir dir;
    const auto db = dir.path / "m.db";
    {
        process first(db);
        auto t = first.chat("mail", "Send an email to Anna about dinner on Friday");
        BOOST_TEST(t.interrupted);
        BOOST_TEST(t.nodes.back() == "agent_execution");
        const auto& v = t.interrupts.at(0).value.as_object();
        BOOST_TEST(v.at("kind").as_string() == "agent");
        BOOST_TEST(v.at("action").as_string() == "send_email");
        BOOST_TEST(v.at("to").as_string() == "Anna Keller");
        BOOST_TEST(t.values.hitl.pending == gs::hitl_kind::agent);
        BOOST_TEST(first.messages("mail").back().content == t.reply);
    }
    process second(db);
    auto t = second.resume("mail", "approve");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.nodes == (nodes_t{"agent_execution", "ui_router", "hitl_text", "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Done, with your approval"));
    auto facts = second.facts_of("Anna Keller");
    BOOST_TEST(std::any_of(facts.begin(), facts.end(), [](const gs::fact& f) { return f.text.rfind("Email sent to Anna Keller", 0) == 0; }));
}

BOOST_AUTO_TEST_CASE(permission_denied_does_nothing) {
    temp_dir dir;
    process p(dir.path / "m.db");
    BOOST_TEST(p.chat("deny", "Send an email to Anna about dinner on Friday").interrupted);
    auto t = p.resume("deny", "deny");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(contains(t.reply, "I did not send the email"));
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].status == gs::agent_status::denied);
    auto facts = p.facts_of("Anna Keller");
    BOOST_TEST(std::none_of(facts.begin(), facts.end(), [](const gs::fact& f) { return f.text.rfind("Email sent", 0) == 0; }));
}

// -- permission rules (nodes::permission_rules over "agent(task)") ---------------------------------

static gs::agent_settings agents_with_rules(std::vector<std::string> allow, std::vector<std::string> deny,
                                     std::vector<std::string> ask) {
    auto a = test_agents();
    a.permissions = sg::nodes::permission_rules(std::move(allow), std::move(deny), std::move(ask));
    return a;
}

BOOST_AUTO_TEST_CASE(a_deny_rule_reports_the_step_denied_without_asking) {
    temp_dir dir;
    process p(dir.path / "m.db", nullptr, agents_with_rules({}, {"productivity(*email*)"}, {}));
    auto t = p.chat("rd", "Send an email to Anna about dinner on Friday");
    BOOST_TEST(!t.interrupted);
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].status == gs::agent_status::denied);
    BOOST_TEST(!results[0].asked_permission);
    BOOST_TEST(contains(results[0].summary, "\"productivity(*email*)\""));
    auto facts = p.facts_of("Anna Keller");
    BOOST_TEST(std::none_of(facts.begin(), facts.end(), [](const gs::fact& f) { return f.text.rfind("Email sent", 0) == 0; }));
}

BOOST_AUTO_TEST_CASE(an_allow_rule_runs_the_step_without_asking) {
    temp_dir dir;
    process p(dir.path / "m.db", nullptr, agents_with_rules({"productivity(*)"}, {}, {}));
    auto t = p.chat("ra", "Send an email to Anna about dinner on Friday");
    BOOST_TEST(!t.interrupted);
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u);
    BOOST_TEST(results[0].status == gs::agent_status::ok);
    BOOST_TEST(!results[0].asked_permission);
}

BOOST_AUTO_TEST_CASE(an_ask_rule_asks_for_a_step_the_brain_would_run) {
    temp_dir dir;
    process p(dir.path / "m.db", nullptr, agents_with_rules({}, {}, {"wealth(*)"}));
    auto t = p.chat("rq", "Plan my week: book flights to Zurich and review my portfolio");
    BOOST_TEST(t.interrupted);
    BOOST_REQUIRE(!t.interrupts.empty());
    BOOST_TEST(t.interrupts.at(0).value.as_object().at("agent").as_string() == "wealth");
    auto results = gs::current_results(t.values);
    BOOST_REQUIRE(results.size() == 1u); // productivity ran in the first batch; wealth waits
    BOOST_TEST(results[0].agent == gs::agent_kind::productivity);
    t = p.resume("rq", "approve");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST_MESSAGE("reply: " << t.reply);
    BOOST_TEST(contains(t.reply, "Done, with your approval"));
    auto after = gs::current_results(t.values);
    BOOST_TEST(std::any_of(after.begin(), after.end(), [](const gs::agent_result& r) {
        return r.agent == gs::agent_kind::wealth && r.status == gs::agent_status::ok && r.asked_permission;
    }));
}

BOOST_AUTO_TEST_CASE(a_malformed_rule_is_a_typed_error_naming_it) {
    try {
        agents_with_rules({}, {"(oops"}, {});
        BOOST_FAIL("expected agent_error");
    } catch (const sg::nodes::agent_error& e) {
        BOOST_TEST(e.kind() == sg::nodes::errc::bad_permission_rule);
        BOOST_TEST(contains(e.what(), "(oops"));
    }
}

namespace {
/// The rules, except that every agent is unreachable.
class unreachable_agents final : public gs::brain {
public:
    std::string name() const override { return "rules"; }
    boost::asio::awaitable<gs::intent> classify(std::string m, std::vector<std::string> k) override {
        return rules_.classify(std::move(m), std::move(k));
    }
    boost::asio::awaitable<std::vector<gs::extracted_fact>> extract_facts(std::string m, std::vector<std::string> e) override {
        return rules_.extract_facts(std::move(m), std::move(e));
    }
    boost::asio::awaitable<std::vector<gs::planned_step>> plan(std::string m, std::vector<gs::agent_kind> d) override {
        return rules_.plan(std::move(m), std::move(d));
    }
    boost::asio::awaitable<std::string> run_agent(gs::agent_task, std::string) override {
        throw gs::agent_unavailable("agent host down");
    }
    boost::asio::awaitable<std::string> summarize(std::vector<gs::turn_message> m) override {
        return rules_.summarize(std::move(m));
    }

private:
    gs::rule_brain rules_;
};
} // namespace

BOOST_AUTO_TEST_CASE(agents_run_as_intents_of_the_agent_desk) {
    temp_dir dir;
    process p(dir.path / "m.db");
    gs::agent_task t;
    t.agent = gs::agent_kind::research;
    t.task = "compare flight prices";
    auto report = run(p.io, gs::run_at_desk(p.svc, t, std::string()));
    BOOST_TEST(report.rounds == (nodes_t{"research"}), boost::test_tools::per_element());
    BOOST_TEST(report.ended_by == "classifier"); // the desk's classifier picked the task's agent
    BOOST_TEST(report.summary.rfind("Research on \"compare flight prices\"", 0) == 0u);

    // The agent's own exception comes out of the desk as thrown, and a turn reports it.
    process q(dir.path / "q.db", std::make_shared<unreachable_agents>());
    BOOST_CHECK_THROW(run(q.io, gs::run_at_desk(q.svc, t, std::string())), gs::agent_unavailable);
    auto turn = q.chat("desk", "Research flights to Zurich");
    auto results = gs::current_results(turn.values);
    BOOST_REQUIRE(!results.empty());
    BOOST_TEST(results[0].status == gs::agent_status::failed);
    BOOST_TEST(contains(results[0].summary, "agent host down"));
}

BOOST_AUTO_TEST_CASE(new_message_while_agent_waits_goes_to_agent_execution) {
    temp_dir dir;
    process p(dir.path / "m.db");
    BOOST_TEST(p.chat("agentmsg", "Send an email to Anna about dinner on Friday").interrupted);
    auto t = p.chat("agentmsg", "yes, go ahead");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.hitl.resume_type == gs::hitl_kind::agent);
    BOOST_TEST(t.nodes == (nodes_t{"session_init", "summarization_check", "context_loader", "hitl_handler",
                                   "agent_execution", "ui_router", "hitl_text", "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Done, with your approval"));
}

BOOST_AUTO_TEST_CASE(planner_loops_while_more_agents_remain) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("loop", "Research Italian restaurants and send an email to Anna about dinner");
    // Batch 1: research (no permission); "More agents?" yes; batch 2: the email, which asks.
    BOOST_TEST(t.interrupted);
    BOOST_TEST(t.nodes == concat(entry_nodes, {"entity_resolution", "semantic_retrieval", "temporal_retrieval",
                                               "memory_assembly", "extraction_merge", "global_planner",
                                               "agent_execution", "global_planner", "agent_execution"}),
               boost::test_tools::per_element());
    t = p.resume("loop", "approve");
    BOOST_TEST(t.nodes == (nodes_t{"agent_execution", "ui_router", "hitl_text", "message_persist"}),
               boost::test_tools::per_element());
    BOOST_TEST(contains(t.reply, "Research on"));
    BOOST_TEST(gs::current_results(t.values).size() == 2u);
}

BOOST_AUTO_TEST_CASE(email_without_recipient_asks_for_one) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("who", "Send an email about the budget meeting");
    BOOST_TEST(!t.interrupted);
    BOOST_TEST(t.values.response.kind == gs::response_kind::hitl);
    BOOST_TEST(contains(t.reply, "Who should I send the email to?"));
}

// -- persisting a turn: one transaction, idempotent (issue 11, break 8) -----------------------------

namespace {

/// Runs constant SQL on the memory database through a connection of its own: how the tests
/// inject a fault (a trigger that makes an insert fail) into the store the services use.
void exec_sql(const fs::path& db, const std::string& sql) {
    sqlite3* conn = nullptr;
    BOOST_REQUIRE_EQUAL(sqlite3_open(db.string().c_str(), &conn), SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(conn, sql.c_str(), nullptr, nullptr, &err);
    const std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(conn);
    BOOST_REQUIRE_MESSAGE(rc == SQLITE_OK, msg);
}

/// The state message_persist sees at the end of a turn of chat "c" that began with `base`
/// messages stored.
gs::supervisor_state finished_turn(std::size_t base, std::string message, std::string reply) {
    gs::supervisor_state s;
    s.conversation.chat_id = "c";
    s.conversation.user_id = "u1";
    s.conversation.turn = 7;
    s.conversation.message_count = base;
    s.conversation.user_message = std::move(message);
    s.response.reply = std::move(reply);
    return s;
}

/// "role: content" of each stored message of chat "c", oldest first.
nodes_t stored_lines(process& p) {
    nodes_t out;
    for (const auto& m : p.messages("c")) out.push_back(m.role + ": " + m.content);
    return out;
}

/// Stores `before` in chat "c" of a fresh database, then runs message_persist twice on `s`, as
/// the engine does when a kill right after the node lost its checkpoint; returns what the chat holds.
nodes_t persisted_twice(const std::vector<gs::turn_message>& before, const gs::supervisor_state& s) {
    temp_dir dir;
    process p(dir.path / "m.db");
    p.svc.with_store([&](gs::memory_store& m) {
        for (const auto& msg : before) m.append_message("c", msg.role, msg.content);
    });
    gs::message_persist(p.svc, s);
    gs::message_persist(p.svc, s);
    return stored_lines(p);
}

} // namespace

BOOST_AUTO_TEST_CASE(message_persist_run_twice_stores_the_turn_once) {
    auto s = finished_turn(2, "hello", "hi there");
    BOOST_TEST(persisted_twice({{"user", "earlier"}, {"assistant", "earlier reply"}}, s) ==
                   (nodes_t{"user: earlier", "assistant: earlier reply", "user: hello", "assistant: hi there"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(message_persist_completes_an_exchange_stored_while_waiting_once) {
    auto s = finished_turn(0, "Thomas is traveling", "Saved for Thomas Berger.");
    s.hitl.exchange = {{"user", "Thomas is traveling"}, {"assistant", "Which Thomas?"}, {"user", "Berger"}};
    // Before: what disambiguation_blocking stored before it paused, the message and the question.
    BOOST_TEST(persisted_twice({{"user", "Thomas is traveling"}, {"assistant", "Which Thomas?"}}, s) ==
                   (nodes_t{"user: Thomas is traveling", "assistant: Which Thomas?", "user: Berger",
                            "assistant: Saved for Thomas Berger."}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_failed_reply_insert_leaves_no_half_stored_turn) {
    temp_dir dir;
    const auto db = dir.path / "m.db";
    process p(db);
    // The fault: the reply's insert fails, as a kill between the two inserts would stop it.
    exec_sql(db, "CREATE TRIGGER fail_reply BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
                 "BEGIN SELECT RAISE(ABORT, 'injected: the reply is not stored'); END");
    auto s = finished_turn(0, "hello", "hi there");
    try {
        gs::message_persist(p.svc, s);
        BOOST_FAIL("the reply's insert was made to fail");
    } catch (const gs::memory_error& e) {
        BOOST_TEST(e.code() == gs::memory_errc::constraint_failed, e.what());
    }
    // All or nothing: the user's message is not left without its reply.
    BOOST_TEST(stored_lines(p).empty(), "stored: " << stored_lines(p).size() << " message(s)");

    // Once the fault is gone, the node's re-run stores the whole turn, once.
    exec_sql(db, "DROP TRIGGER fail_reply");
    gs::message_persist(p.svc, s);
    gs::message_persist(p.svc, s);
    BOOST_TEST(stored_lines(p) == (nodes_t{"user: hello", "assistant: hi there"}), boost::test_tools::per_element());
}

// -- summarization ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(long_history_is_summarized) {
    temp_dir dir;
    process p(dir.path / "m.db");
    p.svc.with_store([](gs::memory_store& m) {
        for (int i = 0; i < 12; ++i) {
            m.append_message("long", "user", "message number " + std::to_string(i));
            m.append_message("long", "assistant", "answer number " + std::to_string(i));
        }
    });
    auto t = p.chat("long", "Hi");
    BOOST_TEST(t.nodes == (nodes_t{"session_init", "summarization_check", "summarization", "context_loader",
                                   "hitl_handler", "intent_classification", "retrieval_router", "memory_assembly",
                                   "extraction_merge", "ui_router", "simple_text", "message_persist"}),
               boost::test_tools::per_element());
    auto msgs = p.messages("long");
    BOOST_REQUIRE(msgs.size() == 9u); // summary + 6 kept + this turn's 2
    BOOST_TEST(msgs[0].role == "summary");
    BOOST_TEST(contains(msgs[0].content, "Summary of 18 earlier messages"));
    // Short histories are not summarized.
    auto again = p.chat("long", "Hi");
    BOOST_TEST((std::find(again.nodes.begin(), again.nodes.end(), "summarization") == again.nodes.end()));
}

BOOST_AUTO_TEST_CASE(many_tokens_trigger_summarization) {
    temp_dir dir;
    process p(dir.path / "m.db");
    p.svc.with_store([](gs::memory_store& m) {
        for (int i = 0; i < 9; ++i) m.append_message("tokens", "user", std::string(2000, 'x'));
    });
    auto t = p.chat("tokens", "Hi");
    BOOST_TEST((std::find(t.nodes.begin(), t.nodes.end(), "summarization") != t.nodes.end()));
}

// -- errors and the graph's shape ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(missing_thread_and_nothing_pending_are_errors) {
    temp_dir dir;
    process p(dir.path / "m.db");
    try {
        p.resume("nobody", "2");
        BOOST_FAIL("expected thread_not_found");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::thread_not_found));
    }
    p.chat("done", "Hi");
    try {
        p.resume("done", "2");
        BOOST_FAIL("expected nothing_to_resume");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::nothing_to_resume));
    }
    // The thread is intact.
    auto state = run(p.io, gs::state_json(p.graph, "done"));
    BOOST_TEST(state.at("status").as_string() == "done");
}

BOOST_AUTO_TEST_CASE(history_lists_a_checkpoint_per_superstep) {
    temp_dir dir;
    process p(dir.path / "m.db");
    auto t = p.chat("h", "Hi there!");
    auto list = run(p.io, gs::history_json(p.graph, "h"));
    // The input checkpoint, the START step, and one per node (each node runs alone here).
    BOOST_TEST(list.size() == t.nodes.size() + 2);
}

BOOST_AUTO_TEST_CASE(the_graph_has_every_node_of_the_flowchart_in_its_stage) {
    gs::services svc(process::options(":memory:", nullptr));
    auto g = gs::declare_graph(svc);
    const auto& shape = g.shape();
    const std::vector<std::pair<std::string, std::string>> expected = {
        {"session_init", "1. Entry & Session"},         {"summarization_check", "1. Entry & Session"},
        {"summarization", "1. Entry & Session"},        {"context_loader", "1. Entry & Session"},
        {"hitl_handler", "2. HITL Resume"},             {"intent_classification", "3. Intent Classification"},
        {"retrieval_router", "4. Memory Pipeline"},     {"entity_resolution", "4. Memory Pipeline"},
        {"semantic_retrieval", "4. Memory Pipeline"},   {"temporal_retrieval", "4. Memory Pipeline"},
        {"memory_assembly", "4. Memory Pipeline"},      {"fact_extraction", "4. Memory Pipeline"},
        {"extraction_merge", "4. Memory Pipeline"},     {"disambiguation_blocking", "5. Disambiguation"},
        {"disambiguation_simple", "5. Disambiguation"}, {"global_planner", "6. Planning & Execution"},
        {"agent_execution", "6. Planning & Execution"}, {"ui_router", "7. Response Generation"},
        {"simple_text", "7. Response Generation"},      {"complex_text", "7. Response Generation"},
        {"hitl_text", "7. Response Generation"},        {"message_persist", "7. Response Generation"},
    };
    BOOST_TEST(shape.nodes.size() == expected.size());
    for (const auto& [name, stage] : expected) {
        const auto* n = shape.find(name);
        BOOST_REQUIRE_MESSAGE(n != nullptr, name);
        BOOST_TEST(n->stage == stage);
    }
    BOOST_TEST(shape.find("extraction_merge")->deferred);
    BOOST_TEST(shape.find("agent_execution")->send_only);
    BOOST_TEST(shape.find("agent_execution")->has_retry);
    BOOST_TEST(sg::validate(shape).empty());
}

BOOST_AUTO_TEST_CASE(every_route_is_keyed_by_a_described_enum_or_a_bool) {
    // Each conditional edge as "from -(value)-> to"; Sends as "from =Send=> to". No string keys.
    gs::services svc(process::options(":memory:", nullptr));
    auto g = gs::declare_graph(svc);
    std::vector<std::string> routes;
    for (const auto& b : g.shape().branches)
        for (const auto& [label, to] : b.routes)
            routes.push_back(b.from + (b.sends ? " =Send=> " : " -(" + label + ")-> ") + to);
    std::sort(routes.begin(), routes.end());
    const std::vector<std::string> expected = {
        "agent_execution -(false)-> ui_router",
        "agent_execution -(true)-> global_planner",
        "extraction_merge -(blocking)-> disambiguation_blocking",
        "extraction_merge -(complex)-> global_planner",
        "extraction_merge -(non_blocking)-> disambiguation_simple",
        "extraction_merge -(simple)-> ui_router",
        "global_planner -(agents)-> __end__",
        "global_planner -(nothing_to_run)-> ui_router",
        "global_planner =Send=> agent_execution",
        "hitl_handler -(agent)-> __end__",
        "hitl_handler -(disambiguation)-> intent_classification",
        "hitl_handler -(none)-> intent_classification",
        "hitl_handler =Send=> agent_execution",
        "retrieval_router -(extract)-> fact_extraction",
        "retrieval_router -(none)-> __end__",
        "retrieval_router -(parallel)-> entity_resolution",
        "retrieval_router -(semantic)-> entity_resolution",
        "retrieval_router -(skip)-> memory_assembly",
        "summarization_check -(false)-> context_loader",
        "summarization_check -(true)-> summarization",
        "ui_router -(complex)-> complex_text",
        "ui_router -(hitl)-> hitl_text",
        "ui_router -(simple)-> simple_text",
    };
    BOOST_TEST(routes == expected, boost::test_tools::per_element());
}

namespace barrier_variant {
using S = gs::supervisor_state;
sg::update<S> noop(const S&) { return {}; }
std::vector<std::string> routes(const S&) { return {"skip"}; }
} // namespace barrier_variant

BOOST_AUTO_TEST_CASE(a_barrier_join_instead_of_the_deferred_merge_is_rejected) {
    // The memory stage's join as a barrier: fact_extraction can be skipped, so it never fires.
    using namespace stategraph::dsl;
    using barrier_variant::noop;
    std::vector<sg::graph_problem> problems;
    // clang-format off
    auto g = sg::dsl::graph<gs::supervisor_state>("barrier",
        "retrieval_router"_n = noop, "memory_assembly"_n = noop, "fact_extraction"_n = noop, "extraction_merge"_n = noop,
        start >> "retrieval_router"_n,
        "retrieval_router"_n >> route(barrier_variant::routes, {{"skip", "memory_assembly"_n}, {"extract", "fact_extraction"_n}}),
        join("memory_assembly"_n, "fact_extraction"_n) >> "extraction_merge"_n,
        "extraction_merge"_n >> end);
    // clang-format on
    auto compiled = g.compile({}, problems);
    BOOST_TEST(!compiled.has_value());
    BOOST_TEST(std::any_of(problems.begin(), problems.end(),
                           [](const sg::graph_problem& p) { return p.code == sg::errc::join_never_fires; }));
}

BOOST_AUTO_TEST_CASE(dot_shows_the_path_and_renders_with_graphviz) {
    temp_dir dir;
    process p(dir.path / "m.db");
    p.chat("dot", "Thomas is traveling to Mallorca");
    std::ostringstream os;
    run(p.io, gs::write_dot(p.graph, os, "dot"));
    std::string text = os.str();
    BOOST_TEST(contains(text, "digraph"));
    BOOST_TEST(contains(text, "cluster"));
    BOOST_TEST(contains(text, "#ffd966")); // the current position: disambiguation_blocking
    BOOST_TEST(contains(text, "#cfe2ff")); // the path taken
    auto dot_file = dir.path / "g.dot", svg_file = dir.path / "g.svg";
    std::ofstream(dot_file) << text;
    if (std::system("command -v dot >/dev/null 2>&1") != 0) {
        BOOST_TEST_MESSAGE("graphviz is not installed: SVG rendering not checked");
        return;
    }
    std::string cmd = "dot -Tsvg '" + dot_file.string() + "' -o '" + svg_file.string() + "'";
    BOOST_TEST(std::system(cmd.c_str()) == 0);
    std::ifstream in(svg_file);
    std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_TEST(contains(svg, "<svg"));
    BOOST_TEST(contains(svg, "disambiguation_blocking"));
}
