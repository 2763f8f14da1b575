// The client that the client checks of @modelcontextprotocol/conformance run
// (tests/mcp/conformance_test.sh): stategraph::mcp over streamable HTTP against the scenario's
// test server, whose URL the framework appends as the last argument; the scenario is in
// MCP_CONFORMANCE_SCENARIO.
//   conformance_client [SCENARIO] URL
// It connects (the initialize handshake), lists the tools when the server has them, then:
//   initialize   nothing more
//   tools_call   calls add_numbers with a=2, b=3 and prints the result (it must say 5)
//   sse-retry    calls test_reconnection, whose answer comes on a resumed stream (SEP-1699)
//   elicitation-sep1034-client-defaults
//                calls test_client_elicitation_defaults, which asks the client for input
//                (elicitation/create): this client has no elicitation, it answers -32601, and the
//                scenario's checks fail (conformance-baseline.yml)
// and closes the session. Exit 0 when every step went through (the framework's checks judge the
// scenario); 1 when one failed (the message says which and why); 2 on bad arguments or a scenario
// this client does not know (the auth/ ones: it has no OAuth).
#include <stategraph/mcp/client.hpp>
#include <stategraph/run_sync.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace mcp = stategraph::mcp;

/// A step that did not go as the scenario expects (not an mcp_error: the server answered).
struct scenario_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

char const* const elicitation = "elicitation-sep1034-client-defaults";

bool has_tool(std::vector<mcp::tool_info> const& tools, std::string const& name) {
    return std::any_of(tools.begin(), tools.end(), [&](mcp::tool_info const& t) { return t.name == name; });
}

asio::awaitable<mcp::call_result> call(mcp::client const& c, std::string tool, json::object arguments) {
    if (!has_tool(c.tools(), tool))
        throw scenario_failure("the server did not list the tool '" + tool + "' this scenario calls");
    std::cout << "calling " << tool << " " << json::serialize(arguments) << std::endl;
    auto op = c.call_tool(tool, std::move(arguments));
    auto result = co_await std::move(op);
    std::cout << tool << " answered" << (result.is_error ? " (isError)" : "") << ": " << result.text() << std::endl;
    if (result.is_error) throw scenario_failure("the tool '" + tool + "' reported an error: " + result.text());
    co_return result;
}

asio::awaitable<void> run(std::string scenario, std::string url) {
    mcp::server_config cfg;
    cfg.name = "conformance";
    cfg.type = mcp::transport_kind::http;
    cfg.url = url;
    cfg.timeout = std::chrono::seconds(10);
    auto connecting = mcp::client::connect(cfg);
    mcp::client c = co_await std::move(connecting);
    std::cout << "connected to " << url << ": protocol " << c.protocol_version() << ", server "
              << json::serialize(c.server_info()) << std::endl;
    std::exception_ptr failure;
    try {
        if (c.capabilities().contains("tools")) {
            auto listing = c.list_tools();
            auto tools = co_await std::move(listing);
            std::cout << tools.size() << " tool(s):";
            for (auto const& t : tools) std::cout << " " << t.name;
            std::cout << std::endl;
        } else {
            std::cout << "the server has no tools capability: tools/list not sent" << std::endl;
        }
        if (scenario == "tools_call") {
            json::object args{{"a", 2}, {"b", 3}};
            auto op = call(c, "add_numbers", std::move(args));
            auto result = co_await std::move(op);
            if (result.text().find('5') == std::string::npos)
                throw scenario_failure("add_numbers(2, 3) answered \"" + result.text() + "\", without 5");
        } else if (scenario == "sse-retry") {
            auto op = call(c, "test_reconnection", json::object());
            co_await std::move(op);
        } else if (scenario == elicitation) {
            auto op = call(c, "test_client_elicitation_defaults", json::object());
            co_await std::move(op);
        }
    } catch (...) {
        failure = std::current_exception();
    }
    auto closing = c.close();
    co_await std::move(closing);
    if (failure) std::rethrow_exception(failure);
}

}  // namespace

int main(int argc, char** argv) {
    char const* env = std::getenv("MCP_CONFORMANCE_SCENARIO");
    std::string scenario = env ? env : "";
    if (argc == 3) scenario = argv[1];
    if ((argc != 2 && argc != 3) || scenario.empty()) {
        std::cerr << "usage: conformance_client [SCENARIO] URL (or the scenario in MCP_CONFORMANCE_SCENARIO)\n";
        return 2;
    }
    if (scenario != "initialize" && scenario != "tools_call" && scenario != "sse-retry" && scenario != elicitation) {
        std::cerr << "conformance_client: scenario '" << scenario << "' is not supported (initialize, tools_call, "
                  << "sse-retry and " << elicitation << " are)\n";
        return 2;
    }
    std::string const url = argv[argc - 1];
    try {
        stategraph::run_sync(run(scenario, url));
    } catch (mcp::mcp_error const& e) {
        std::cerr << "conformance_client: " << scenario << " failed: " << e.what() << " (errc::" << mcp::to_string(e.kind())
                  << ")\n";
        return 1;
    } catch (std::exception const& e) {
        std::cerr << "conformance_client: " << scenario << " failed: " << e.what() << "\n";
        return 1;
    }
    std::cout << "conformance_client: " << scenario << ": done (the framework's checks judge it)" << std::endl;
    return 0;
}
