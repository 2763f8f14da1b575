// make_tools (mcp/include/stategraph/mcp/tools.hpp): MCP tools run by tool_node and by a ReAct
// agent with a scripted model, under permission rules; an `ask` rule interrupts, and a second
// connection, then a second process (agent_turn.cpp), resumes the thread.
#include <stategraph/mcp/tools.hpp>

#include "ask_agent.hpp"
#include "mcp_checks.hpp"
#include "mcp_servers.hpp"
#include "temp_dir.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/nodes/react_agent.hpp>
#include <stategraph/nodes/tool_node.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <cstdio>
#include <thread>


namespace {

namespace json = boost::json;
namespace mcp = stategraph::mcp;
namespace nodes = stategraph::nodes;
namespace sg = stategraph;
namespace servers = stategraph::test::mcp_servers;
using mcp_ask_agent::desk;
using namespace std::chrono_literals;
using stategraph::test::mcp_checks::contains;

nodes::chat_message user(std::string text) { return nodes::chat_message{"user", std::move(text)}; }

nodes::chat_message asks_for(std::string id, std::string tool, std::string arguments) {
    nodes::chat_message m;
    m.role = "assistant";
    m.tool_calls.push_back(nodes::tool_call{std::move(id), std::move(tool), std::move(arguments)});
    return m;
}

sg::update<desk> start_with(std::vector<nodes::chat_message> messages) {
    return sg::update<desk>{}.set<&desk::messages>(std::move(messages));
}

/// A graph of one tool node over @p tools.
sg::compiled_graph<desk> tools_only(std::vector<nodes::tool> tools, nodes::permission_rules rules = {}) {
    sg::state_graph<desk> g("mcp_tools");
    g.add_node("tools", nodes::tool_node<&desk::messages>(std::move(tools), std::move(rules)));
    g.add_edge(sg::START, "tools").add_edge("tools", sg::END);
    return g.compile();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mcp_tools)

BOOST_AUTO_TEST_CASE(an_mcp_servers_tools_become_stategraph_tools) {
    auto c = sg::run_sync(mcp::client::connect(servers::everything_stdio()));
    mcp::tool_options options;
    options.prefix = "ev_";
    auto tools = mcp::make_tools(c, options);
    BOOST_REQUIRE(!tools.empty());
    auto const echo = std::find_if(tools.begin(), tools.end(), [](nodes::tool const& t) { return t.name() == "ev_echo"; });
    BOOST_REQUIRE(echo != tools.end());
    BOOST_TEST(!echo->definition().description.empty());
    BOOST_TEST(echo->definition().parameters.at("properties").as_object().contains("message"));
    BOOST_TEST(echo->journaled());

    // Two calls in one tool node: a text result, and structured content (the server sends the
    // JSON text too, which the tool message holds).
    auto app = tools_only(tools);
    auto calls = asks_for("c1", "ev_echo", R"({"message":"from a node"})");
    calls.tool_calls.push_back(nodes::tool_call{"c2", "ev_get-structured-content", R"({"location":"New York"})"});
    auto input = start_with({user("go"), calls});
    auto done = sg::run_sync(app.invoke(std::move(input)));
    auto const& m = done.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 4u);
    BOOST_TEST(m[2].content == "Echo: from a node");
    BOOST_TEST(m[2].error == "");
    BOOST_TEST(json::parse(m[3].content).at("temperature").to_number<double>() == 33.0);
    sg::run_sync(c.close());
}

// isError from the tool and a dead server both become tool messages naming server and tool;
// the run goes on.
BOOST_AUTO_TEST_CASE(tool_errors_and_a_dead_server_answer_the_model) {
    auto c = sg::run_sync(mcp::client::connect(servers::everything_stdio()));
    auto app = tools_only(mcp::make_tools(c));
    // get-sum with a string: the server's validation fails (isError or a JSON-RPC error).
    auto bad = sg::run_sync(app.invoke(start_with({user("x"), asks_for("c1", "get-sum", R"({"a":"two","b":1})")})));
    BOOST_TEST(bad.values.messages.back().error == "tool_failed");
    BOOST_TEST(contains(bad.values.messages.back().content, "MCP server 'everything'"));
    BOOST_TEST(contains(bad.values.messages.back().content, "get-sum"));

    int const pid = c.pid().value();
    std::thread killer([pid] {
        std::this_thread::sleep_for(500ms);
        ::kill(pid, SIGKILL);
    });
    auto const start = std::chrono::steady_clock::now();
    auto dead = sg::run_sync(app.invoke(
        start_with({user("x"), asks_for("c2", "trigger-long-running-operation", R"({"duration":20,"steps":2})")})));
    killer.join();
    BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
    auto const& last = dead.values.messages.back();
    BOOST_TEST(last.error == "tool_failed");
    BOOST_TEST(contains(last.content, "MCP server 'everything' was killed by signal 9 (SIGKILL) during the call of tool "
                                      "'trigger-long-running-operation'"));
}

// A ReAct agent whose model (scripted) asks for the MCP echo tool, under an `ask` rule: the run
// stops for approval; a new connection and a new graph over the same checkpointer (as another
// process builds them) resume the thread, the tool runs, the model answers with its text.
BOOST_AUTO_TEST_CASE(an_ask_rule_interrupts_and_a_second_connection_resumes) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::run_config cfg;
    cfg.thread_id = "mcp-ask";
    {
        auto first_connection = sg::run_sync(mcp::client::connect(servers::everything_stdio()));
        auto app = mcp_ask_agent::build(first_connection, saver);
        auto first = sg::run_sync(app.invoke(start_with({user("say it")}), cfg));
        BOOST_REQUIRE(first.interrupted());
        auto const& question = first.interrupts.at(0).value;
        BOOST_TEST(question.at("type") == json::value("tool_approval"));
        BOOST_TEST(question.at("tool") == json::value("echo"));
        BOOST_TEST(question.at("rule") == json::value("echo"));
        BOOST_TEST(question.at("arguments") == json::parse(R"({"message":"approved text"})"));
    }  // the first server is stopped here
    auto second_connection = sg::run_sync(mcp::client::connect(servers::everything_stdio()));
    auto app = mcp_ask_agent::build(second_connection, saver);
    auto done = sg::run_sync(app.invoke(sg::resume(true), cfg));
    BOOST_REQUIRE(!done.interrupted());
    BOOST_TEST(done.values.messages.back().content == "The server said: Echo: approved text");
    sg::run_sync(second_connection.close());
}

#ifdef STATEGRAPH_MCP_AGENT_TURN
/// Run agent_turn with @p args; its stdout.
std::string agent_turn(std::string const& args, int& status) {
    std::string const command = std::string(STATEGRAPH_MCP_AGENT_TURN) + " " + args;
    std::string out;
    FILE* pipe = ::popen(command.c_str(), "r");
    BOOST_REQUIRE(pipe);
    char chunk[512];
    while (std::size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) out.append(chunk, n);
    status = ::pclose(pipe);
    return out;
}

// The same across processes: one process stops at the approval, a second one (its own server,
// the thread in a SQLite file) resumes it by thread id.
BOOST_AUTO_TEST_CASE(an_ask_rule_interrupts_and_a_second_process_resumes) {
    stategraph::test::temp_dir dir;
    std::string const db = dir.file("threads.db");
    int status = -1;
    auto const first = agent_turn(db + " job-1 start", status);
    BOOST_TEST(status == 0);
    BOOST_TEST(contains(first, R"("type":"tool_approval","tool":"echo")"));
    auto const second = agent_turn(db + " job-1 approve", status);
    BOOST_TEST(status == 0);
    BOOST_TEST(contains(second, "answer: The server said: Echo: approved text"));
}
#endif

BOOST_AUTO_TEST_SUITE_END()
