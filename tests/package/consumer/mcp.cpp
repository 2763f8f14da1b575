// consumer_mcp: stategraph::mcp from the installed package (component nodes): the seed's MCP
// configuration parsed, and a bad one refused with the typed error naming the server and field.
#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>

#include <iostream>
#include <string>

int main() {
    namespace mcp = stategraph::mcp;
    const std::string good = R"({"mcp_servers": [
        {"name": "filesystem", "type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]},
        {"name": "github", "type": "http", "url": "https://api.githubcopilot.com/mcp/"}]})";
    auto servers = mcp::parse_server_configs(good);
    if (servers.size() != 2 || servers[0].name != "filesystem" || servers[1].url != "https://api.githubcopilot.com/mcp/") {
        std::cerr << "consumer_mcp: the configuration was not read as written\n";
        return 1;
    }
    try {
        (void)mcp::parse_server_configs(R"({"mcp_servers": [{"name": "github", "type": "http"}]})");
        std::cerr << "consumer_mcp: a server without its url was accepted\n";
        return 1;
    } catch (const mcp::mcp_error& e) {
        const std::string what = e.what();
        if (e.code() != mcp::errc::bad_config || what.find("github") == std::string::npos || what.find("url") == std::string::npos) {
            std::cerr << "consumer_mcp: unexpected error: " << what << "\n";
            return 1;
        }
    }
    std::cout << "consumer_mcp: ok\n";
    return 0;
}
