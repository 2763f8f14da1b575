// The MCP guide's worker (docs/mcp.md), compiled (CTest builds this file when stategraph::mcp is
// built; nothing here runs: tests/mcp runs the same calls against real servers).
// [snippet mcp_includes]
#include <stategraph/mcp/mcp.hpp>                  // stategraph::mcp
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/nodes/react_agent.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/state_graph.hpp>
#include <boost/json.hpp>
namespace sg = stategraph;
namespace mcp = stategraph::mcp;
namespace nodes = stategraph::nodes;
// [end]

#include <memory>
#include <string>
#include <vector>

struct worker_state {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(worker_state, (), (messages))
auto reducers(sg::for_state<worker_state>) { return sg::reducers{sg::reduce<&worker_state::messages>(sg::messages)}; }

// [snippet mcp_config]
// A worker's MCP servers and permission rules, as the supervisor platform configures them.
constexpr char const* worker_config = R"({
  "mcp_servers": [
    {"name": "filesystem", "type": "stdio", "command": "npx",
     "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv/repo"],
     "description": "File read/write"},
    {"name": "github", "type": "http", "url": "http://127.0.0.1:3001/mcp", "timeout": 30,
     "headers": {"Authorization": "Bearer <token>"}, "description": "GitHub PRs and issues"}
  ],
  "permissions": {"allow": ["read_*", "list_*", "search_*"], "deny": ["move_file"], "ask": ["write_file", "edit_file"]}
})";
// [end]

// [snippet mcp_worker]
std::vector<std::string> strings(boost::json::value const& list) {
    std::vector<std::string> out;
    for (auto const& v : list.as_array()) out.emplace_back(v.as_string());
    return out;
}

int run_worker(std::shared_ptr<nodes::chat_model> model) {
    auto const config = boost::json::parse(worker_config);
    // Every problem of the list at once, each naming its server and field (mcp::errc::bad_config).
    auto servers_config = mcp::parse_server_configs(config);
    // Starts `npx ...` (its own process group), reaches the http one, initializes both.
    auto servers = sg::run_sync(mcp::connect_all(std::move(servers_config)));

    auto const& perms = config.at("permissions");
    nodes::react_options options;
    options.name = "coding_worker";
    options.permissions = nodes::permission_rules(strings(perms.at("allow")), strings(perms.at("deny")),
                                                  strings(perms.at("ask")));
    auto tools = mcp::make_tools(servers);  // every tool of both servers, as nodes::tool values
    sg::state_graph<worker_state> g("worker");
    g.add_node("agent", nodes::react_agent<&worker_state::messages>(model, std::move(tools), options));
    g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
    sg::compile_options co;
    co.checkpointer = std::make_shared<sg::checkpoint::memory_saver>();  // an `ask` rule interrupts: keep the thread
    auto app = g.compile(co);

    sg::run_config cfg;
    cfg.thread_id = "job-17";
    auto input = sg::update<worker_state>{}.set<&worker_state::messages>({{"user", "Fix the typo in README.md"}});
    auto turn = sg::run_sync(app.invoke(std::move(input), cfg));
    while (turn.interrupted()) {  // {"type":"tool_approval","tool":"edit_file","arguments":{...},"rule":"edit_file"}
        bool const approved = true;  // ask a human here
        turn = sg::run_sync(app.invoke(sg::resume(approved), cfg));
    }
    for (auto const& s : servers) sg::run_sync(s.close());  // or let the clients go: the servers stop with them
    return 0;
}
// [end]

// [snippet mcp_direct]
boost::asio::awaitable<void> call_directly(mcp::client server) {
    mcp::call_options options;
    options.timeout = std::chrono::seconds(5);
    options.on_progress = [](mcp::progress const& p) { /* p.value of p.total, on the client's thread */ (void)p; };
    auto args = boost::json::object{{"path", "/srv/repo/README.md"}};  // named: no braces inside co_await (g++ 12)
    auto call = server.call_tool("read_text_file", std::move(args), std::move(options));
    try {
        mcp::call_result result = co_await std::move(call);
        if (result.is_error) { /* the tool failed: result.text() says why */ }
    } catch (mcp::mcp_error const& e) {
        // e.code(): mcp::errc::timeout, server_exited, connection_lost, server_error, ...;
        // e.server() and e.tool() name them, and so does e.what().
    }
}
// [end]
