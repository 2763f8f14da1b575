#ifndef STATEGRAPH_MCP_TOOLS_HPP
#define STATEGRAPH_MCP_TOOLS_HPP

/// @file
/// @brief `make_tools`: a connected MCP server's tools as stategraph tools, for `tool_node` and
/// `react_agent`, under the same permission rules.

#include <stategraph/mcp/call.hpp>
#include <stategraph/mcp/client.hpp>
#include <stategraph/nodes/tool.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace stategraph::mcp {

/// @brief How make_tools() adapts a server's tools.
struct tool_options {
    /// @brief Put before each tool name ("fs_" makes read_file "fs_read_file"): two servers with
    /// a tool of one name can then serve one agent. Permission rules match the prefixed name.
    std::string prefix;
    /// @brief Time limit of each call; zero: the server's `timeout`.
    std::chrono::milliseconds timeout{0};
    /// @brief Ask a human before each call (nodes::tool::ask_first), whatever the rules say.
    bool ask_first = false;
};

/// @brief What the tool message of a call holds: the text items joined (the usual case), else
/// `structuredContent`, else the content items as JSON.
boost::json::value tool_message_content(call_result const& result);

/// @brief The function of an adapted tool: calls @p tool on @p server. Without the context
/// parameter, so the tool node journals its result (a resumed run does not call it twice).
/// @throws mcp_error: errc::tool_error when the tool answers `isError` (the message is its
/// text), and the client's errors; the tool node turns either into a `tool_failed` tool message
/// naming the server and tool, and the run goes on.
struct tool_function {
    client server;
    std::string tool;
    std::chrono::milliseconds timeout{0};

    boost::asio::awaitable<boost::json::value> operator()(boost::json::object const& arguments) const;
};

/// @brief The tools @p server listed (client::tools(), as of now), each a nodes::tool with its
/// name (prefixed), description and input schema, calling the server.
std::vector<nodes::tool> make_tools(client const& server, tool_options const& options = {});

/// @brief The tools of every server, in order (a worker's MCP servers).
std::vector<nodes::tool> make_tools(std::vector<client> const& servers, tool_options const& options = {});

}  // namespace stategraph::mcp

#endif  // STATEGRAPH_MCP_TOOLS_HPP
