#ifndef STATEGRAPH_MCP_SERVER_CONFIG_HPP
#define STATEGRAPH_MCP_SERVER_CONFIG_HPP

/// @file
/// @brief `server_config`: how to reach one MCP server (seed 004's `mcp_servers` entries), and
/// `parse_server_configs` for the JSON form.

#include <boost/json/value.hpp>

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace stategraph::mcp {

/// @brief How the client talks to the server.
enum class transport_kind {
    stdio, ///< @brief The client starts `command args...` and speaks over its stdin/stdout.
    http,  ///< @brief Streamable HTTP: JSON-RPC POSTed to `url`.
};

/// @brief One MCP server as a worker configures it: set its members by name (or parse them with
/// `parse_server_configs`), then `co_await client::connect(config)`.
struct server_config {
    /// A class, not an aggregate, on purpose: g++ 12 destroys an aggregate that owns memory twice
    /// when it is braced inside a `co_await` expression; `server_config{}` calls this constructor.
    server_config() = default;
    std::string name;                           ///< @brief Names the server in errors (and, with a prefix, its tools).
    transport_kind type = transport_kind::stdio;
    std::string command;                        ///< @brief stdio: the program (looked up in PATH).
    std::vector<std::string> args;              ///< @brief stdio: its arguments.
    std::map<std::string, std::string> env;     ///< @brief stdio: variables set on top of this process's environment.
    std::string url;                            ///< @brief http: the endpoint, `http://host[:port]/path` or `https://...`.
    std::map<std::string, std::string> headers; ///< @brief http: sent with every request (e.g. Authorization).
    std::chrono::milliseconds timeout{60000};   ///< @brief Time limit of each request (the handshake included).
    std::string description;                    ///< @brief Free text (seed 004); not sent anywhere.
};
static_assert(!std::is_aggregate_v<server_config>,
              "server_config must not be an aggregate (g++ 12 destroys braced temporaries in co_await twice)");

/// @brief Parse a list of servers: a JSON array of objects, or an object whose `mcp_servers`
/// member is one. Each object has `name`, `type` ("stdio" or "http"), then `command` and
/// optionally `args` and `env` (stdio), or `url` and optionally `headers` (http), and optionally
/// `timeout` (seconds, a number) and `description`.
/// @throws mcp_error(errc::bad_config) listing every problem, each naming the server and field.
std::vector<server_config> parse_server_configs(boost::json::value const& json);

/// @brief The same from JSON text. @throws mcp_error(errc::bad_config), also for text that is not JSON.
std::vector<server_config> parse_server_configs(std::string_view json_text);
/// @brief The same from JSON text (a string literal or `std::string`: the natural spellings, which
/// would otherwise be ambiguous between the text and a `boost::json::value` made from it).
inline std::vector<server_config> parse_server_configs(char const* json_text) {
    return parse_server_configs(std::string_view(json_text));
}
inline std::vector<server_config> parse_server_configs(std::string const& json_text) {
    return parse_server_configs(std::string_view(json_text));
}

}  // namespace stategraph::mcp

#endif  // STATEGRAPH_MCP_SERVER_CONFIG_HPP
