#ifndef STATEGRAPH_MCP_MCP_HPP
#define STATEGRAPH_MCP_MCP_HPP

/// @file
/// @brief stategraph::mcp, all of it: the MCP client, its configuration, errors, and the
/// adapter to stategraph tools. Link `stategraph::mcp`.

#include <stategraph/mcp/call.hpp>
#include <stategraph/mcp/client.hpp>
#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>
#include <stategraph/mcp/tool_info.hpp>
#include <stategraph/mcp/tools.hpp>

#endif  // STATEGRAPH_MCP_MCP_HPP
