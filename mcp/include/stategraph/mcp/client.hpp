#ifndef STATEGRAPH_MCP_CLIENT_HPP
#define STATEGRAPH_MCP_CLIENT_HPP

/// @file
/// @brief `client`: a connection to one MCP server (protocol revision 2025-11-25, accepting
/// 2025-06-18, 2025-03-26 and 2024-11-05) over stdio or streamable HTTP (http:// and https://).

#include <stategraph/mcp/call.hpp>
#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>
#include <stategraph/mcp/tool_info.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stategraph::mcp {

namespace detail {
class client_impl;
}

/// @brief The protocol revision the client asks for.
inline constexpr char const* latest_protocol_version = "2025-11-25";

/// @brief A connected MCP server: list its tools, call them, ping it, close it.
///
/// `connect()` starts the server (stdio: the configured command as a child process in a process
/// group of its own; http: nothing to start), runs the initialize handshake and lists the tools.
/// The client's I/O runs on a thread of its own, so it may be awaited from any executor (a graph
/// run under `run_sync`, a server's pool) and outlives any one of them. A `client` is a cheap
/// handle: copies share the connection, which ends when the last copy goes (the child process is
/// stopped and reaped) or at `close()`.
///
/// Failures are mcp_error values naming the server: a server that exits or hangs fails the pending
/// requests (errc::server_exited, errc::connection_lost, errc::timeout), never blocks the caller.
/// Over streamable HTTP, a request's SSE stream that ends before its answer, after the server gave
/// it an event id, is resumed (a GET with Last-Event-ID after the server's `retry` time) within
/// the request's time limit; errc::connection_lost once the server refuses or cannot be reached.
/// A request awaited by a coroutine that is cancelled (terminal or total cancellation) sends
/// `notifications/cancelled` and throws errc::cancelled.
///
/// Thread safety: every member may be called from any thread. The callbacks (progress, tool list
/// changes) run on the client's I/O thread and must not hold a copy of the client: the last copy
/// must not go on that thread.
/// g++ 12: name the arguments before the `co_await` (no braced lists in the expression).
class client {
public:
    /// @brief A client connected to nothing (every call but assignment throws errc::closed);
    /// assign one from connect().
    client() = default;

    /// @brief Start (stdio) or reach (http) the server of @p config, initialize, list its tools.
    /// @throws mcp_error(errc::start_failed) naming the server, with its stderr for stdio;
    /// errc::timeout when the handshake takes longer than `config.timeout`.
    static boost::asio::awaitable<client> connect(server_config config);

    /// @brief The configured server name.
    std::string const& name() const;
    server_config const& config() const;
    /// @brief The revision the server chose (e.g. "2025-06-18").
    std::string const& protocol_version() const;
    /// @brief `serverInfo` and `capabilities` from the handshake, and its `instructions` (may be empty).
    boost::json::object const& server_info() const;
    boost::json::object const& capabilities() const;
    std::string const& instructions() const;
    /// @brief The child's process id (stdio), while it runs.
    std::optional<int> pid() const;
    /// @brief The last lines the server wrote to stderr (stdio; at most 8 KiB).
    std::string stderr_tail() const;
    /// @brief False once the server exited, the connection was lost or the client was closed.
    bool connected() const;

    /// @brief The tools as last listed (by connect(), list_tools(), or after the server's
    /// `notifications/tools/list_changed`).
    std::vector<tool_info> tools() const;
    /// @brief `tools/list`, following `nextCursor` through every page; updates tools().
    boost::asio::awaitable<std::vector<tool_info>> list_tools() const;
    /// @brief Called (on the client's I/O thread) with the new list after the server said its tools changed.
    void on_tools_changed(std::function<void(std::vector<tool_info> const&)> callback) const;

    /// @brief `tools/call` of @p tool with @p arguments. A tool-level failure is not thrown:
    /// the result has `is_error` set (tools adapted by make_tools() throw errc::tool_error).
    /// @throws mcp_error: errc::timeout, errc::cancelled, errc::server_exited, errc::connection_lost,
    /// errc::server_error (e.g. an unknown tool), errc::protocol_error, errc::closed.
    boost::asio::awaitable<call_result> call_tool(std::string tool, boost::json::object arguments,
                                                  call_options options) const;
    /// @brief The same with the server's time limit and no progress callback.
    boost::asio::awaitable<call_result> call_tool(std::string tool, boost::json::object arguments) const;

    /// @brief `ping`. @throws mcp_error as call_tool does.
    boost::asio::awaitable<void> ping() const;

    /// @brief End the session: fail the pending requests with errc::closed, then stdio: close
    /// the child's stdin, wait a second, SIGTERM its process group, two more, SIGKILL; http:
    /// DELETE the session. Safe to call twice.
    boost::asio::awaitable<void> close() const;

private:
    explicit client(std::shared_ptr<detail::client_impl> impl) : impl_(std::move(impl)) {}
    static boost::asio::awaitable<client> do_connect(std::shared_ptr<detail::client_impl> impl);
    std::shared_ptr<detail::client_impl> const& impl() const;
    std::shared_ptr<detail::client_impl> impl_;
};

/// @brief Connect to every server of @p configs, one after the other (a worker's MCP servers).
/// @throws mcp_error of the first that fails (those connected before it are closed).
boost::asio::awaitable<std::vector<client>> connect_all(std::vector<server_config> configs);

}  // namespace stategraph::mcp

#endif  // STATEGRAPH_MCP_CLIENT_HPP
