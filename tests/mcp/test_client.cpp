// The MCP client (mcp/include/stategraph/mcp/client.hpp) against real servers from npm:
// server-everything over stdio and streamable HTTP, server-filesystem over stdio, a paginating
// server on the official SDK (paginated_server.mjs); and servers
// that fail: missing, exiting, hanging, killed mid-call, a call past its time limit, a call the
// caller cancels.
#include <stategraph/mcp/client.hpp>

#include "mcp_checks.hpp"
#include "mcp_servers.hpp"
#include "temp_dir.hpp"

#include <stategraph/run_sync.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <thread>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace mcp = stategraph::mcp;
namespace servers = stategraph::test::mcp_servers;
using namespace std::chrono_literals;
using stategraph::run_sync;
using stategraph::test::mcp_checks::contains;
using stategraph::test::mcp_checks::error_of;

bool has_tool(std::vector<mcp::tool_info> const& tools, std::string const& name) {
    return std::any_of(tools.begin(), tools.end(), [&](mcp::tool_info const& t) { return t.name == name; });
}

/// Wait (polling) until @p pred holds, at most @p limit.
template <class P>
bool eventually(P pred, std::chrono::milliseconds limit = 10s) {
    auto const end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

/// A "server" that is a line of JavaScript run by node.
mcp::server_config node_script(std::string name, std::string script) {
    mcp::server_config cfg;
    cfg.name = std::move(name);
    cfg.command = "node";
    cfg.args = {"-e", std::move(script)};
    return cfg;
}

mcp::call_result call(mcp::client const& c, std::string tool, std::string const& args_json) {
    auto args = json::parse(args_json).as_object();
    return run_sync(c.call_tool(std::move(tool), std::move(args)));
}

/// What both transports must do with server-everything: its tools, echo, get-sum, structured
/// content, progress of a long operation, the tool list changing after the handshake, ping.
void exercise_everything(mcp::client const& c) {
    BOOST_TEST(c.protocol_version() == "2025-11-25");
    BOOST_TEST(c.server_info().at("name").as_string() == "mcp-servers/everything");
    BOOST_TEST(c.connected());
    auto const tools = c.tools();
    for (auto const* name : {"echo", "get-sum", "get-structured-content", "trigger-long-running-operation"})
        BOOST_TEST(has_tool(tools, name), name);
    auto const echo = std::find_if(tools.begin(), tools.end(), [](auto const& t) { return t.name == "echo"; });
    BOOST_REQUIRE(echo != tools.end());
    BOOST_TEST(!echo->description.empty());
    BOOST_TEST(echo->input_schema.at("properties").as_object().contains("message"));

    // The server registers more tools once initialized and says so (notifications/tools/list_changed).
    BOOST_TEST(eventually([&] { return has_tool(c.tools(), "simulate-research-query"); }));

    auto const echoed = call(c, "echo", R"({"message":"hello mcp"})");
    BOOST_TEST(!echoed.is_error);
    BOOST_TEST(echoed.text() == "Echo: hello mcp");

    auto const sum = call(c, "get-sum", R"({"a":2,"b":40})");
    BOOST_TEST(contains(sum.text(), "42"));

    auto const weather = call(c, "get-structured-content", R"({"location":"Chicago"})");
    BOOST_TEST(weather.structured_content.at("temperature").to_number<double>() == 36.0);
    BOOST_TEST(weather.structured_content.at("conditions").as_string() == "Light rain / drizzle");

    // Progress: four notifications, 1/4 .. 4/4, before the result.
    std::mutex m;
    std::vector<mcp::progress> steps;
    mcp::call_options options;
    options.on_progress = [&](mcp::progress const& p) {
        std::lock_guard lock(m);
        steps.push_back(p);
    };
    auto args = json::parse(R"({"duration":0.4,"steps":4})").as_object();
    auto const long_op = run_sync(c.call_tool("trigger-long-running-operation", std::move(args), std::move(options)));
    BOOST_TEST(contains(long_op.text(), "Long running operation completed"));
    std::lock_guard lock(m);
    BOOST_REQUIRE_EQUAL(steps.size(), 4u);
    BOOST_TEST(steps.back().value == 4.0);
    BOOST_TEST(steps.back().total.value_or(0) == 4.0);

    run_sync(c.ping());

    // An unknown tool: the server answers with a JSON-RPC error or an isError result.
    try {
        auto const r = call(c, "no-such-tool", "{}");
        BOOST_TEST(r.is_error);
    } catch (mcp::mcp_error const& e) {
        BOOST_TEST((e.code() == mcp::errc::server_error));
        BOOST_TEST(contains(e.what(), c.name()));
    }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(client_stdio)

BOOST_AUTO_TEST_CASE(server_everything_over_stdio) {
    auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
    BOOST_REQUIRE(c.pid().has_value());
    int const pid = *c.pid();
    std::atomic<int> changes{0};
    c.on_tools_changed([&](std::vector<mcp::tool_info> const&) { ++changes; });
    exercise_everything(c);
    BOOST_TEST(run_sync(c.list_tools()).size() == c.tools().size());
    run_sync(c.close());
    BOOST_TEST(!c.connected());
    BOOST_TEST(::kill(pid, 0) != 0);  // stopped and reaped
    auto const e = error_of([&] { call(c, "echo", R"({"message":"late"})"); });
    BOOST_TEST((e.code() == mcp::errc::closed));
    BOOST_TEST(contains(e.what(), "MCP server 'everything' is not connected"));
}

// A client that is simply dropped stops its server too.
BOOST_AUTO_TEST_CASE(the_last_copy_stops_the_server) {
    int pid = 0;
    {
        auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
        pid = c.pid().value();
        BOOST_TEST(::kill(pid, 0) == 0);
    }
    BOOST_TEST(::kill(pid, 0) != 0);
}

BOOST_AUTO_TEST_CASE(server_filesystem_lists_and_reads_a_directory) {
    stategraph::test::temp_dir dir;
    std::ofstream(dir.file("hello.txt")) << "hello from the test\n";
    std::filesystem::create_directory(dir.path / "sub");
    auto c = run_sync(mcp::client::connect(servers::filesystem_stdio(dir.path.string())));
    BOOST_TEST(has_tool(c.tools(), "list_directory"));
    BOOST_TEST(has_tool(c.tools(), "read_text_file"));
    auto const listing = call(c, "list_directory", json::serialize(json::object{{"path", dir.path.string()}}));
    BOOST_TEST(!listing.is_error);
    BOOST_TEST(contains(listing.text(), "[FILE] hello.txt"));
    BOOST_TEST(contains(listing.text(), "[DIR] sub"));
    auto const text = call(c, "read_text_file", json::serialize(json::object{{"path", dir.file("hello.txt")}}));
    BOOST_TEST(contains(text.text(), "hello from the test"));
    // Outside the allowed directory: the tool says so (isError), the client goes on.
    auto const outside = call(c, "read_text_file", R"({"path":"/etc/hostname"})");
    BOOST_TEST(outside.is_error);
    run_sync(c.close());
}

// tools/list over three pages (nextCursor), and a ping the server sends the client during a call.
BOOST_AUTO_TEST_CASE(tools_are_listed_across_pages_and_the_servers_ping_is_answered) {
    mcp::server_config cfg;
    cfg.name = "paginated";
    cfg.command = "node";
    cfg.args = {std::string(STATEGRAPH_SOURCE_DIR) + "/tests/mcp/paginated_server.mjs"};
    cfg.timeout = 30s;
    auto c = run_sync(mcp::client::connect(cfg));
    std::vector<std::string> names;
    for (auto const& t : c.tools()) names.push_back(t.name);
    std::vector<std::string> const expected{"alpha", "beta", "gamma", "delta", "ping-client"};
    BOOST_TEST(names == expected, boost::test_tools::per_element());
    BOOST_TEST(run_sync(c.list_tools()).size() == 5u);
    BOOST_TEST(call(c, "delta", "{}").text() == "called delta");
    BOOST_TEST(call(c, "ping-client", "{}").text() == "the client answered ping");
    run_sync(c.close());
}

// A server that answers initialize with the revision given as its argument (and lists no tools):
// the client accepts an older revision it speaks and refuses one it does not.
constexpr char const* fixed_revision_server = R"(
const revision = process.argv[1];
require("readline").createInterface({ input: process.stdin }).on("line", (line) => {
  const m = JSON.parse(line);
  if (m.id === undefined) return;
  const result = m.method === "initialize"
    ? { protocolVersion: revision, capabilities: { tools: {} }, serverInfo: { name: "fixed", version: "1" } }
    : { tools: [] };
  process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: m.id, result }) + "\n");
});)";

BOOST_AUTO_TEST_CASE(the_server_chooses_the_protocol_revision) {
    auto older = node_script("older", fixed_revision_server);
    older.args.push_back("2025-03-26");
    auto c = run_sync(mcp::client::connect(older));
    BOOST_TEST(c.protocol_version() == "2025-03-26");
    BOOST_TEST(c.tools().empty());
    run_sync(c.close());

    auto unknown = node_script("future", fixed_revision_server);
    unknown.args.push_back("2031-01-01");
    auto const e = error_of([&] { run_sync(mcp::client::connect(unknown)); });
    BOOST_TEST((e.code() == mcp::errc::protocol_error));
    BOOST_TEST(contains(e.what(), "MCP server 'future' chose protocol revision '2031-01-01', which this client does not speak"));
}

BOOST_AUTO_TEST_CASE(a_missing_command_fails_to_start) {
    auto cfg = servers::everything_stdio();
    cfg.name = "ghost";
    cfg.command = "/nonexistent/mcp-server";
    auto const e = error_of([&] { run_sync(mcp::client::connect(cfg)); });
    BOOST_TEST((e.code() == mcp::errc::start_failed));
    BOOST_TEST(e.server() == "ghost");
    BOOST_TEST(contains(e.what(), "MCP server 'ghost' could not be started: `/nonexistent/mcp-server"));
}

BOOST_AUTO_TEST_CASE(a_server_that_exits_at_once_fails_to_start_with_its_stderr) {
    auto const cfg = node_script("broken", "console.error('no config file'); process.exit(3)");
    auto const e = error_of([&] { run_sync(mcp::client::connect(cfg)); });
    BOOST_TEST((e.code() == mcp::errc::start_failed));
    BOOST_TEST(contains(e.what(), "MCP server 'broken' did not complete the initialize handshake"));
    BOOST_TEST(contains(e.what(), "exited with status 3"));
    BOOST_TEST(contains(e.what(), "no config file"));
}

BOOST_AUTO_TEST_CASE(a_server_that_never_answers_times_out) {
    auto cfg = node_script("mute", "setInterval(() => {}, 1000)");
    cfg.timeout = 500ms;
    auto const start = std::chrono::steady_clock::now();
    auto const e = error_of([&] { run_sync(mcp::client::connect(cfg)); });
    BOOST_TEST((e.code() == mcp::errc::timeout));
    BOOST_TEST(contains(e.what(), "MCP server 'mute': the request 'initialize' got no answer within 500 ms"));
    BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
}

// SIGKILL of the server during a 20 s call: the call fails at once, naming server and tool.
BOOST_AUTO_TEST_CASE(a_server_killed_mid_call_fails_the_call_quickly) {
    auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
    int const pid = c.pid().value();
    std::thread killer([pid] {
        std::this_thread::sleep_for(500ms);
        ::kill(pid, SIGKILL);
    });
    auto const start = std::chrono::steady_clock::now();
    auto const e = error_of([&] { call(c, "trigger-long-running-operation", R"({"duration":20,"steps":2})"); });
    auto const took = std::chrono::steady_clock::now() - start;
    killer.join();
    BOOST_TEST((e.code() == mcp::errc::server_exited));
    BOOST_TEST(e.server() == "everything");
    BOOST_TEST(e.tool() == "trigger-long-running-operation");
    BOOST_TEST(contains(e.what(), "MCP server 'everything' was killed by signal 9"));
    BOOST_TEST(contains(e.what(), "during the call of tool 'trigger-long-running-operation'"));
    BOOST_TEST((took < 5s));
    BOOST_TEST(!c.connected());
    // Later calls fail at once with the same kind.
    auto const later = error_of([&] { call(c, "echo", R"({"message":"x"})"); });
    BOOST_TEST((later.code() == mcp::errc::server_exited));
    BOOST_TEST(contains(later.what(), "is not connected (was killed by signal 9"));
}

// A call past its time limit: errc::timeout, notifications/cancelled sent, and the session goes
// on (the late answer, if the server still sends one, is dropped).
BOOST_AUTO_TEST_CASE(a_call_past_its_time_limit_times_out_and_the_session_goes_on) {
    auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
    mcp::call_options options;
    options.timeout = 300ms;
    auto args = json::parse(R"({"duration":1,"steps":2})").as_object();
    auto const start = std::chrono::steady_clock::now();
    auto const e = error_of([&] {
        run_sync(c.call_tool("trigger-long-running-operation", std::move(args), std::move(options)));
    });
    BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));  // 300 ms, with room for a loaded CI machine
    BOOST_TEST((e.code() == mcp::errc::timeout));
    BOOST_TEST(contains(e.what(), "MCP server 'everything': the call of tool 'trigger-long-running-operation' got no "
                                  "answer within 300 ms (the server was sent notifications/cancelled)"));
    std::this_thread::sleep_for(1200ms);  // past the operation's end
    BOOST_TEST(call(c, "echo", R"({"message":"still here"})").text() == "Echo: still here");
    run_sync(c.close());
}

// A 2 s operation reporting every 0.25 s under a 1 s time limit: cut without
// reset_timeout_on_progress, completed with it.
BOOST_AUTO_TEST_CASE(progress_can_restart_the_time_limit) {
    auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
    auto options_for = [](bool reset) {
        mcp::call_options options;
        options.timeout = 1s;
        options.on_progress = [](mcp::progress const&) {};
        options.reset_timeout_on_progress = reset;
        return options;
    };
    auto args = json::parse(R"({"duration":2,"steps":8})").as_object();
    auto const cut = error_of([&] {
        run_sync(c.call_tool("trigger-long-running-operation", args, options_for(false)));
    });
    BOOST_TEST((cut.code() == mcp::errc::timeout));
    auto const done = run_sync(c.call_tool("trigger-long-running-operation", args, options_for(true)));
    BOOST_TEST(contains(done.text(), "Long running operation completed"));
    run_sync(c.close());
}

asio::awaitable<mcp::call_result> long_call(mcp::client c) {
    auto args = json::parse(R"({"duration":10,"steps":2})").as_object();
    auto op = c.call_tool("trigger-long-running-operation", std::move(args));
    co_return co_await std::move(op);
}

// The awaiting coroutine is cancelled (as a node's time limit does): errc::cancelled.
BOOST_AUTO_TEST_CASE(a_call_the_caller_cancels_throws_cancelled) {
    auto c = run_sync(mcp::client::connect(servers::everything_stdio()));
    asio::io_context io;
    asio::cancellation_signal signal;
    std::exception_ptr failure;
    bool finished = false;
    auto handler = [&](std::exception_ptr e, mcp::call_result) {
        failure = e;
        finished = true;
    };
    asio::co_spawn(io, long_call(c), asio::bind_cancellation_slot(signal.slot(), handler));
    asio::steady_timer timer(io, 300ms);
    timer.async_wait([&](boost::system::error_code) { signal.emit(asio::cancellation_type::terminal); });
    auto const start = std::chrono::steady_clock::now();
    io.run();
    BOOST_TEST(finished);
    BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
    auto const e = error_of([&] { std::rethrow_exception(failure); });
    BOOST_TEST((e.code() == mcp::errc::cancelled));
    BOOST_TEST(contains(e.what(), "MCP server 'everything': the call of tool 'trigger-long-running-operation' was "
                                  "cancelled by the caller"));
    BOOST_TEST(call(c, "echo", R"({"message":"after"})").text() == "Echo: after");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(client_http)

BOOST_AUTO_TEST_CASE(server_everything_over_streamable_http) {
    servers::everything_http server;
    auto c = run_sync(mcp::client::connect(server.config()));
    BOOST_TEST(!c.pid().has_value());
    exercise_everything(c);
    run_sync(c.close());
    BOOST_TEST(!c.connected());
}

BOOST_AUTO_TEST_CASE(an_http_call_past_its_time_limit_times_out) {
    servers::everything_http server;
    auto c = run_sync(mcp::client::connect(server.config()));
    mcp::call_options options;
    options.timeout = 300ms;
    auto args = json::parse(R"({"duration":5,"steps":2})").as_object();
    auto const e = error_of([&] {
        run_sync(c.call_tool("trigger-long-running-operation", std::move(args), std::move(options)));
    });
    BOOST_TEST((e.code() == mcp::errc::timeout));
    BOOST_TEST(contains(e.what(), "MCP server 'everything-http'"));
    BOOST_TEST(call(c, "echo", R"({"message":"on"})").text() == "Echo: on");
    run_sync(c.close());
}

// https://: server-everything behind a TLS front (tls_proxy.mjs) with a certificate made here for
// localhost. Not trusted: the handshake fails, naming the server. Trusted through SSL_CERT_FILE
// (OpenSSL's default trust store): the session works.
BOOST_AUTO_TEST_CASE(server_everything_over_https) {
    stategraph::test::temp_dir dir;
    std::string const cert = dir.file("cert.pem"), key = dir.file("key.pem");
    std::string const make_cert = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                                  "-addext subjectAltName=DNS:localhost -keyout " + key + " -out " + cert +
                                  " >/dev/null 2>&1";
    BOOST_REQUIRE(std::system(make_cert.c_str()) == 0);
    servers::everything_http server;
    servers::tls_front front(cert, key, server.port());
    auto cfg = server.config();
    cfg.name = "everything-https";
    cfg.url = "https://localhost:" + std::to_string(front.port()) + "/mcp";

    auto const untrusted = error_of([&] { run_sync(mcp::client::connect(cfg)); });
    BOOST_TEST((untrusted.code() == mcp::errc::start_failed));
    BOOST_TEST(contains(untrusted.what(), "MCP server 'everything-https' did not complete the initialize handshake"));
    BOOST_TEST(contains(untrusted.what(), "certificate verify failed"));

    ::setenv("SSL_CERT_FILE", cert.c_str(), 1);
    auto c = run_sync(mcp::client::connect(cfg));
    ::unsetenv("SSL_CERT_FILE");
    BOOST_TEST(c.protocol_version() == "2025-11-25");
    BOOST_TEST(call(c, "echo", R"({"message":"over tls"})").text() == "Echo: over tls");
    BOOST_TEST(eventually([&] { return has_tool(c.tools(), "simulate-research-query"); }));  // the GET stream, over TLS
    run_sync(c.close());
}

BOOST_AUTO_TEST_CASE(an_unreachable_http_server_fails_to_start) {
    mcp::server_config cfg;
    cfg.name = "nowhere";
    cfg.type = mcp::transport_kind::http;
    cfg.url = "http://127.0.0.1:" + std::to_string(servers::free_port()) + "/mcp";
    auto const e = error_of([&] { run_sync(mcp::client::connect(cfg)); });
    BOOST_TEST((e.code() == mcp::errc::start_failed));
    BOOST_TEST(contains(e.what(), "MCP server 'nowhere' did not complete the initialize handshake"));
    BOOST_TEST(contains(e.what(), "cannot reach http://127.0.0.1:"));
}

// The HTTP server dies during a call: the call fails with connection_lost, naming the tool.
BOOST_AUTO_TEST_CASE(an_http_server_killed_mid_call_fails_the_call) {
    auto server = std::make_unique<servers::everything_http>();
    auto c = run_sync(mcp::client::connect(server->config()));
    std::thread killer([&server] {
        std::this_thread::sleep_for(500ms);
        server.reset();
    });
    auto const start = std::chrono::steady_clock::now();
    auto const e = error_of([&] { call(c, "trigger-long-running-operation", R"({"duration":20,"steps":2})"); });
    killer.join();
    BOOST_TEST((std::chrono::steady_clock::now() - start < 10s));
    BOOST_TEST((e.code() == mcp::errc::connection_lost));
    BOOST_TEST(e.tool() == "trigger-long-running-operation");
    BOOST_TEST(contains(e.what(), "MCP server 'everything-http': the call of tool 'trigger-long-running-operation' failed"));
}

BOOST_AUTO_TEST_SUITE_END()
