#ifndef STATEGRAPH_MCP_ERROR_HPP
#define STATEGRAPH_MCP_ERROR_HPP

/// @file
/// @brief Typed errors of the MCP client: an `errc` enum in the "stategraph.mcp" category and the
/// exception `mcp_error`, whose message always names the server (and, for a call, the tool).

#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace stategraph::mcp {

/// @brief What went wrong talking to an MCP server.
enum class errc {
    start_failed = 1, ///< @brief The server could not be started or did not complete the initialize handshake.
    server_exited,    ///< @brief The server's process exited (or closed its stdout) while the client used it.
    connection_lost,  ///< @brief An HTTP server could not be reached, or its reply stopped short.
    timeout,          ///< @brief A request got no answer within its time limit (the server was sent `notifications/cancelled`).
    cancelled,        ///< @brief The caller cancelled the request (the server was sent `notifications/cancelled`).
    protocol_error,   ///< @brief The server broke the protocol: bad JSON-RPC, an unexpected reply, an unsupported revision, an HTTP error status.
    server_error,     ///< @brief The server answered with a JSON-RPC error object (rpc_code() holds its code).
    tool_error,       ///< @brief The tool ran and reported a failure (`isError: true`).
    bad_config,       ///< @brief A server configuration has a missing, unknown or ill-typed field.
    closed,           ///< @brief The client was closed.
};

/// @brief The "stategraph.mcp" error category.
inline std::error_category const& mcp_category() noexcept {
    struct category final : std::error_category {
        char const* name() const noexcept override { return "stategraph.mcp"; }
        std::string message(int value) const override {
            switch (static_cast<errc>(value)) {
            case errc::start_failed: return "the MCP server could not be started";
            case errc::server_exited: return "the MCP server exited";
            case errc::connection_lost: return "the connection to the MCP server was lost";
            case errc::timeout: return "the MCP request timed out";
            case errc::cancelled: return "the MCP request was cancelled";
            case errc::protocol_error: return "the MCP server broke the protocol";
            case errc::server_error: return "the MCP server answered with an error";
            case errc::tool_error: return "the MCP tool reported an error";
            case errc::bad_config: return "invalid MCP server configuration";
            case errc::closed: return "the MCP client is closed";
            }
            return "unknown stategraph.mcp error";
        }
    };
    static category const instance;
    return instance;
}

/// @brief Make an error code in mcp_category() (found by ADL).
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), mcp_category()}; }

/// @brief The enumerator's name, e.g. "server_exited".
inline char const* to_string(errc e) noexcept {
    switch (e) {
    case errc::start_failed: return "start_failed";
    case errc::server_exited: return "server_exited";
    case errc::connection_lost: return "connection_lost";
    case errc::timeout: return "timeout";
    case errc::cancelled: return "cancelled";
    case errc::protocol_error: return "protocol_error";
    case errc::server_error: return "server_error";
    case errc::tool_error: return "tool_error";
    case errc::bad_config: return "bad_config";
    case errc::closed: return "closed";
    }
    return "";
}

/// @brief The exception of the MCP client. `code()` compares equal to an `errc`; `what()` is
/// the message as given, which names the server (and the tool for a tool call).
class mcp_error : public std::system_error {
public:
    mcp_error(errc code, std::string server, std::string const& what, std::string tool = {},
              std::optional<std::int64_t> rpc_code = std::nullopt)
        : std::system_error(make_error_code(code), what), what_(what), server_(std::move(server)),
          tool_(std::move(tool)), rpc_code_(rpc_code) {}

    char const* what() const noexcept override { return what_.c_str(); }
    /// @brief The kind of error.
    errc kind() const noexcept { return static_cast<errc>(code().value()); }
    /// @brief The configured name of the server.
    std::string const& server() const noexcept { return server_; }
    /// @brief The tool of a `tools/call` (empty for other requests).
    std::string const& tool() const noexcept { return tool_; }
    /// @brief The JSON-RPC error code, for errc::server_error.
    std::optional<std::int64_t> rpc_code() const noexcept { return rpc_code_; }

private:
    std::string what_;
    std::string server_;
    std::string tool_;
    std::optional<std::int64_t> rpc_code_;
};

}  // namespace stategraph::mcp

template <>
struct std::is_error_code_enum<stategraph::mcp::errc> : std::true_type {};

#endif  // STATEGRAPH_MCP_ERROR_HPP
