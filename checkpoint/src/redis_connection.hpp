#pragma once
/// @file redis_connection.hpp
/// @brief One RESP connection to a Redis server over an Asio TCP socket (private to
/// checkpoint/src; the tests of the Redis saver use it too). hiredis formats the commands
/// (`redisFormatCommandArgv`) and parses the replies (`redisReader`); the socket is Asio's.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace stategraph::checkpoint::redis {

/// @brief One reply, copied out of hiredis's reply object.
struct reply {
    enum class kind { nil, string, status, integer, array, error };
    kind type = kind::nil;
    std::string str;          ///< string, status or error text
    long long integer = 0;
    std::vector<reply> elements;

    bool is_nil() const noexcept { return type == kind::nil; }
    bool is_error() const noexcept { return type == kind::error; }
    bool is_array() const noexcept { return type == kind::array; }
};

/// @brief Where the server is: from `redis://host:port[/db]`.
struct endpoint {
    std::string host = "127.0.0.1";
    std::string port = "6379";
    int db = 0;
};

/// @brief Parses a `redis://` URL. Throws std::invalid_argument naming what is wrong.
endpoint parse_url(std::string_view url);

/// @brief A command: its name and arguments, binary-safe.
using command = std::vector<std::string>;

/// @brief Parts joined with NUL bytes: how the Redis saver names hash fields and sorted-set
/// members (namespace, checkpoint, channel, version, task).
inline std::string join_fields(std::initializer_list<std::string_view> parts) {
    std::string out;
    for (const auto* p = parts.begin(); p != parts.end(); ++p) {
        if (p != parts.begin()) out.push_back('\0');
        out.append(*p);
    }
    return out;
}

/// @brief The RESP bytes of `cmd` (hiredis's formatter).
std::string format(const command& cmd);

/// @brief The connection failed (refused, reset, closed by the server, timed out); it is closed
/// and may be connected again. The message names what was being done and the system's reason.
class network_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// @brief The server answered with something this client cannot read (a protocol error); the
/// connection is closed.
class protocol_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// @brief A connection. Not thread-safe: one command round at a time, on its executor.
/// Network failures (refused, reset, closed by the server, timed out) are thrown as
/// `network_error`; the connection is then closed and may be connected again.
class connection {
public:
    connection(boost::asio::any_io_executor ex, std::chrono::milliseconds timeout);
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// @brief Connects (resolving the host) and selects the database.
    boost::asio::awaitable<void> connect(const endpoint& where);
    /// @brief Sends every command in one write and reads one reply per command, in order
    /// (pipelining). Error replies are returned, not thrown.
    boost::asio::awaitable<std::vector<reply>> run(const std::vector<command>& cmds);
    /// @brief Sends every command in one write, reading nothing: for a subscribed connection
    /// (SUBSCRIBE, PSUBSCRIBE, PING), whose answers arrive among its messages (`receive`).
    boost::asio::awaitable<void> send(const std::vector<command>& cmds);
    /// @brief The next reply or pushed message (a subscriber's `message` / `pmessage` arrays), or
    /// nullopt when nothing came within `wait`; the connection stays open then.
    boost::asio::awaitable<std::optional<reply>> receive(std::chrono::milliseconds wait);
    bool is_open() const noexcept { return socket_ ? socket_->is_open() : parked_ >= 0; }
    void close() noexcept;
    /// @brief Makes the connection wait on `ex` (the executor of the coroutine about to use it),
    /// keeping it open: the socket is registered with that executor's context until `unbind`.
    /// Nothing when it is bound already.
    void bind_to(const boost::asio::any_io_executor& ex);
    /// @brief Leaves the executor it was bound to (that context may then go away), keeping the
    /// connection open; `bind_to` binds it again. Never while an operation is under way.
    void unbind() noexcept;

private:
    struct reader_deleter {
        void operator()(void* r) const noexcept;
    };
    /// What the server sent, or nullopt when nothing came within `wait` (the read is cancelled,
    /// the connection stays open).
    boost::asio::awaitable<std::optional<std::size_t>> read_some(char* data, std::size_t size, std::chrono::milliseconds wait);
    /// A reply already read whole, if any (throws protocol_error on bytes that are no reply).
    std::optional<reply> take_parsed();
    /// Hands the reader the `n` bytes read into `buffer_`.
    void feed(std::size_t n);

    std::optional<boost::asio::ip::tcp::socket> socket_; ///< bound (see `bind_to`)
    std::optional<boost::asio::steady_timer> timer_;
    int parked_ = -1; ///< the open socket's descriptor while unbound
    boost::asio::ip::tcp protocol_ = boost::asio::ip::tcp::v4();
    std::chrono::milliseconds timeout_;
    std::unique_ptr<void, reader_deleter> reader_;
    std::vector<char> buffer_;
};

} // namespace stategraph::checkpoint::redis
