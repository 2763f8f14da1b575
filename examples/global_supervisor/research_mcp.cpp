// The research agent's MCP servers: see research_mcp.hpp.
#include "research_mcp.hpp"

#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>
#include <stategraph/run_sync.hpp>

#include <boost/json/object.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace global_supervisor {

namespace {

/// The one required argument of `tool` when it is a string and the only one required; "" else.
std::string single_string_argument(const stategraph::mcp::tool_info& tool) {
    const auto* schema = tool.input_schema.if_object();
    if (!schema) return {};
    const auto* required = schema->if_contains("required");
    const auto* properties = schema->if_contains("properties");
    if (!required || !required->is_array() || required->as_array().size() != 1 || !properties || !properties->is_object())
        return {};
    const auto& name = required->as_array().front();
    if (!name.is_string()) return {};
    const auto* property = properties->as_object().if_contains(name.as_string());
    const auto* type = property && property->is_object() ? property->as_object().if_contains("type") : nullptr;
    if (!type || !type->is_string() || type->as_string() != "string") return {};
    return std::string(name.as_string());
}

std::string shortened(std::string text, std::size_t most) {
    for (auto& c : text)
        if (c == '\n' || c == '\r') c = ' ';
    if (text.size() > most) text = text.substr(0, most) + "...";
    return text;
}

} // namespace

std::vector<std::pair<std::string, std::string>> research_tools::tools_for(const stategraph::mcp::client& client) {
    std::vector<std::pair<std::string, std::string>> searching, others;
    for (const auto& t : client.tools())
        if (auto arg = single_string_argument(t); !arg.empty())
            (t.name.find("search") != std::string::npos ? searching : others).emplace_back(t.name, arg);
    searching.insert(searching.end(), others.begin(), others.end());
    return searching;
}

boost::asio::awaitable<std::string> research_tools::ask(std::string task) const {
    std::string out;
    for (const auto& client : clients_) {
        std::string said;
        // The candidates in order; one that fails or that the server refuses to run (e.g. a tool
        // that needs MCP task augmentation) gives way to the next, at most three.
        int tried = 0;
        for (const auto& [tool, argument] : tools_for(client)) {
            if (++tried > 3) break;
            try {
                boost::json::object arguments;
                arguments[argument] = task;
                auto pending = client.call_tool(tool, std::move(arguments));
                auto result = co_await std::move(pending);
                if (result.is_error) { // the tool failed: the next one may answer
                    said = "The MCP server '" + client.name() + "' could not answer (" + tool + ": " +
                           shortened(result.text(), 200) + ").";
                    continue;
                }
                said = "From " + client.name() + "/" + tool + ": " + shortened(result.text(), 300) + ".";
                break;
            } catch (const stategraph::mcp::mcp_error& e) {
                said = "The MCP server '" + client.name() + "' did not answer (" + shortened(e.what(), 200) + ").";
                if (e.kind() != stategraph::mcp::errc::server_error) break; // gone, or too slow: not again
            }
        }
        if (!said.empty()) out += (out.empty() ? "" : " ") + said;
    }
    co_return out;
}

std::vector<stategraph::mcp::client> connect_research_servers(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read the MCP configuration '" + file + "'");
    std::ostringstream text;
    text << in.rdbuf();
    std::vector<stategraph::mcp::server_config> configs;
    try {
        configs = stategraph::mcp::parse_server_configs(text.str());
    } catch (const std::exception& e) {
        throw std::runtime_error("the MCP configuration '" + file + "': " + e.what());
    }
    auto connecting = stategraph::mcp::connect_all(std::move(configs));
    return stategraph::run_sync(std::move(connecting));
}

} // namespace global_supervisor
