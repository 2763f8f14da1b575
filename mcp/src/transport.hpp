#ifndef STATEGRAPH_MCP_SRC_TRANSPORT_HPP
#define STATEGRAPH_MCP_SRC_TRANSPORT_HPP

// The client's two transports behind one interface (private to stategraph::mcp). Every member
// but stop_now(), pid() and stderr_tail() runs on the client's I/O thread.

#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace stategraph::mcp::detail {

/// What a transport reports to the client.
struct transport_events {
    std::function<void(boost::json::value)> message;                     ///< A JSON-RPC message (or batch) arrived.
    std::function<void(errc, std::string)> lost;                        ///< The connection is gone; the text says why.
    std::function<void(std::int64_t, errc, std::string)> request_failed; ///< One request could not be delivered or answered.
};

class transport {
public:
    virtual ~transport() = default;
    /// Start the server (stdio) and begin reading. @throws mcp_error(errc::start_failed).
    virtual boost::asio::awaitable<void> start(transport_events events) = 0;
    /// Queue one serialized message; @p request_id is set for a request expecting an answer.
    virtual void send(std::string message, std::optional<std::int64_t> request_id) = 0;
    /// After the initialize answer, before notifications/initialized (http: open the GET stream).
    virtual boost::asio::awaitable<void> after_initialize(std::string protocol_version) = 0;
    /// The client gave up on this request (timeout, cancellation): drop what carries its answer.
    virtual void abandon(std::int64_t request_id) = 0;
    /// End the session politely.
    virtual boost::asio::awaitable<void> stop() = 0;
    /// End it now, from the destructor, once the I/O thread stopped (stdio: kill and reap the child).
    virtual void stop_now() noexcept = 0;
    virtual std::optional<int> pid() const = 0;
    virtual std::string stderr_tail() const = 0;
};

std::shared_ptr<transport> make_stdio_transport(boost::asio::any_io_executor io, server_config const& config);
std::shared_ptr<transport> make_http_transport(boost::asio::any_io_executor io, server_config const& config);

/// "MCP server 'NAME'", the start of every message.
inline std::string server_label(std::string const& name) { return "MCP server '" + name + "'"; }

}  // namespace stategraph::mcp::detail

#endif  // STATEGRAPH_MCP_SRC_TRANSPORT_HPP
