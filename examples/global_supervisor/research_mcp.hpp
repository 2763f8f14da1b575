// The research agent's MCP tool servers (`--mcp FILE`: the seed's `mcp_servers` list).
//
//   --mcp FILE ──> connect_research_servers ──> research_tools ──(research task)──> each server's
//                  (at start: handshake,          (kept by the       search tool, or its tool of one
//                   tools listed)                  services)          string argument ──> "From server/tool: ..."
//
// The research agent reports what the user's notes say (the brain), then what each configured
// MCP server's tool answers for the task. A server that fails or dies is reported in the summary,
// never a failed turn.
#pragma once

#include <stategraph/mcp/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>
#include <utility>
#include <vector>

namespace global_supervisor {

/// @brief The MCP servers the research agent asks. Thread safety: `ask` may run on any thread,
/// several at once (each client serializes its own requests).
class research_tools {
public:
    /// @param clients Connected clients (`connect_research_servers`), kept for the process.
    explicit research_tools(std::vector<stategraph::mcp::client> clients) : clients_(std::move(clients)) {}

    bool empty() const noexcept { return clients_.empty(); }
    const std::vector<stategraph::mcp::client>& clients() const noexcept { return clients_; }

    /// @brief What the servers' tools say about `task`: for each server, its tools taking exactly
    /// one required string argument (those whose name has "search" first) are called with the
    /// task until one answers (a tool that fails or that the server refuses to run gives way to
    /// the next, three at most). One sentence per server ("From server/tool: ..."; "The MCP server 'x' ..." when it
    /// fails); "" without servers.
    /// @param task The research task, as the planner wrote it.
    boost::asio::awaitable<std::string> ask(std::string task) const;

    /// @brief The tools `ask` may call on `client`, in order, each with the argument it fills.
    static std::vector<std::pair<std::string, std::string>> tools_for(const stategraph::mcp::client& client);

private:
    std::vector<stategraph::mcp::client> clients_;
};

/// @brief Reads `file` (JSON: `{"mcp_servers": [...]}` or the bare list, as
/// `stategraph::mcp::parse_server_configs` takes it), starts or reaches every server, and lists
/// its tools. Blocking (a private io_context). Throws `std::runtime_error` naming the file for a
/// file that cannot be read, and the `mcp::mcp_error` naming the server for one that fails.
std::vector<stategraph::mcp::client> connect_research_servers(const std::string& file);

} // namespace global_supervisor
