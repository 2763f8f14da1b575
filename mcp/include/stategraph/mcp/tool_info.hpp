#ifndef STATEGRAPH_MCP_TOOL_INFO_HPP
#define STATEGRAPH_MCP_TOOL_INFO_HPP

/// @file
/// @brief `tool_info`: one tool as an MCP server lists it (`tools/list`).

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <string>

namespace stategraph::mcp {

/// @brief A tool of an MCP server.
struct tool_info {
    std::string name;
    std::string title;              ///< @brief Display name (may be empty).
    std::string description;
    boost::json::value input_schema;  ///< @brief JSON Schema of the arguments (`inputSchema`).
    boost::json::value output_schema; ///< @brief JSON Schema of `structuredContent` (null when the server gives none).
    boost::json::object annotations;  ///< @brief Hints such as `readOnlyHint`, as the server sent them.
};

}  // namespace stategraph::mcp

#endif  // STATEGRAPH_MCP_TOOL_INFO_HPP
