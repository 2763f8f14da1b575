// parse_server_configs (mcp/include/stategraph/mcp/server_config.hpp): seed 004's mcp_servers
// list, and a clear error naming the server and field for each mistake.
#include <stategraph/mcp/server_config.hpp>

#define BOOST_TEST_MODULE stategraph_mcp
#include <stategraph/mcp/error.hpp>

#include "mcp_checks.hpp"

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <string>

namespace {

namespace mcp = stategraph::mcp;
using stategraph::test::mcp_checks::contains;
using stategraph::test::mcp_checks::error_of;

mcp::mcp_error config_error(std::string const& text) {
    return error_of([&] { mcp::parse_server_configs(std::string_view(text)); });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(server_config)

// The seed's two servers (a stdio one and an http one), as JSON.
BOOST_AUTO_TEST_CASE(the_seeds_servers_parse) {
    auto const servers = mcp::parse_server_configs(std::string_view(R"({"mcp_servers": [
        {"name": "filesystem", "type": "stdio", "command": "npx", "args": ["-y", "@anthropic-ai/mcp-filesystem"],
         "description": "File read/write", "env": {"DEBUG": "1"}, "timeout": 2.5},
        {"name": "github", "type": "http", "url": "https://api.githubcopilot.com/mcp/",
         "description": "GitHub PRs and issues", "headers": {"Authorization": "Bearer x"}}]})"));
    BOOST_REQUIRE_EQUAL(servers.size(), 2u);
    BOOST_TEST(servers[0].name == "filesystem");
    BOOST_TEST((servers[0].type == mcp::transport_kind::stdio));
    BOOST_TEST(servers[0].command == "npx");
    BOOST_TEST(servers[0].args.size() == 2u);
    BOOST_TEST(servers[0].args[1] == "@anthropic-ai/mcp-filesystem");
    BOOST_TEST(servers[0].env.at("DEBUG") == "1");
    BOOST_TEST(servers[0].timeout.count() == 2500);
    BOOST_TEST(servers[0].description == "File read/write");
    BOOST_TEST((servers[1].type == mcp::transport_kind::http));
    BOOST_TEST(servers[1].url == "https://api.githubcopilot.com/mcp/");
    BOOST_TEST(servers[1].headers.at("Authorization") == "Bearer x");
    BOOST_TEST(servers[1].timeout.count() == 60000);  // the default
    // A bare array works too.
    auto const bare = mcp::parse_server_configs(boost::json::parse(R"([{"name":"a","type":"stdio","command":"x"}])"));
    BOOST_TEST(bare.size() == 1u);
}

BOOST_AUTO_TEST_CASE(every_mistake_is_named_with_its_server_and_field) {
    auto const e = config_error(R"([
        {"name": "fs", "type": "stdio", "args": ["a", 3]},
        {"name": "gh", "type": "http", "command": "x"},
        {"name": "odd", "type": "grpc", "timeout": -1, "colour": "red"},
        {"type": "stdio", "command": "y"},
        {"name": "fs", "type": "stdio", "command": "z"}])");
    BOOST_TEST((e.code() == mcp::errc::bad_config));
    std::string const what = e.what();
    BOOST_TEST(contains(what, "mcp_servers[0] (server 'fs'): field 'command' is required for type \"stdio\""));
    BOOST_TEST(contains(what, "mcp_servers[0] (server 'fs'): field 'args[1]' must be a string"));
    BOOST_TEST(contains(what, "mcp_servers[1] (server 'gh'): field 'url' is required for type \"http\""));
    BOOST_TEST(contains(what, "mcp_servers[1] (server 'gh'): field 'command' is for type \"stdio\", not \"http\""));
    BOOST_TEST(contains(what, "mcp_servers[2] (server 'odd'): field 'type' is \"grpc\"; expected \"stdio\" or \"http\""));
    BOOST_TEST(contains(what, "mcp_servers[2] (server 'odd'): field 'timeout' must be a positive number of seconds"));
    BOOST_TEST(contains(what, "mcp_servers[2] (server 'odd'): unknown field 'colour'"));
    BOOST_TEST(contains(what, "mcp_servers[3]: field 'name' is required"));
    BOOST_TEST(contains(what, "mcp_servers[4]: the name \"fs\" is used twice"));
    BOOST_TEST(e.server() == "fs");
}

BOOST_AUTO_TEST_CASE(text_that_is_not_json_or_not_a_list) {
    BOOST_TEST(contains(config_error("[{").what(), "not valid JSON"));
    BOOST_TEST(contains(config_error(R"({"servers": []})").what(), "\"mcp_servers\""));
    BOOST_TEST(contains(config_error(R"([{"name":"h","type":"http","url":"ftp://x"}])").what(),
                   "(server 'h'): field 'url' must start with http:// or https://"));
}

BOOST_AUTO_TEST_CASE(the_category_names_each_error) {
    std::error_code const ec = mcp::errc::server_exited;
    BOOST_TEST(ec.category().name() == std::string("stategraph.mcp"));
    BOOST_TEST(ec.message() == "the MCP server exited");
    BOOST_TEST(mcp::to_string(mcp::errc::tool_error) == std::string("tool_error"));
}

// The spellings a user writes: a string literal and a std::string (both were ambiguous between
// the text and a boost::json::value made from it).
BOOST_AUTO_TEST_CASE(a_literal_and_a_std_string_parse) {
    auto const from_literal = mcp::parse_server_configs(R"([{"name":"a","type":"stdio","command":"x"}])");
    BOOST_TEST(from_literal.size() == 1u);
    std::string const text = R"({"mcp_servers":[{"name":"b","type":"http","url":"http://127.0.0.1:1/mcp"}]})";
    auto const from_string = mcp::parse_server_configs(text);
    BOOST_TEST_REQUIRE(from_string.size() == 1u);
    BOOST_TEST(from_string[0].url == "http://127.0.0.1:1/mcp");
}

BOOST_AUTO_TEST_SUITE_END()
