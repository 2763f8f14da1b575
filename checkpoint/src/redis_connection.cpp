#include "redis_connection.hpp"

#include <hiredis/hiredis.h>
#include <hiredis/read.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <variant>

namespace stategraph::checkpoint::redis {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

endpoint parse_url(std::string_view url) {
    constexpr std::string_view scheme = "redis://";
    if (url.substr(0, scheme.size()) != scheme)
        throw std::invalid_argument("a Redis URL starts with redis:// (got '" + std::string(url) + "')");
    auto rest = url.substr(scheme.size());
    endpoint ep;
    if (auto at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1); // no AUTH support
    std::string_view path;
    if (auto slash = rest.find('/'); slash != std::string_view::npos) {
        path = rest.substr(slash + 1);
        rest = rest.substr(0, slash);
    }
    std::string_view host = rest;
    if (auto colon = rest.rfind(':'); colon != std::string_view::npos) {
        host = rest.substr(0, colon);
        const auto port = rest.substr(colon + 1);
        int n = 0;
        auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), n);
        if (ec != std::errc() || p != port.data() + port.size() || n <= 0 || n > 65535)
            throw std::invalid_argument("bad port in Redis URL '" + std::string(url) + "'");
        ep.port = std::string(port);
    }
    if (!host.empty()) ep.host = std::string(host);
    if (!path.empty()) {
        auto [p, ec] = std::from_chars(path.data(), path.data() + path.size(), ep.db);
        if (ec != std::errc() || p != path.data() + path.size() || ep.db < 0)
            throw std::invalid_argument("bad database number in Redis URL '" + std::string(url) + "'");
    }
    return ep;
}

std::string format(const command& cmd) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    argv.reserve(cmd.size());
    lens.reserve(cmd.size());
    for (const auto& a : cmd) {
        argv.push_back(a.data());
        lens.push_back(a.size());
    }
    char* out = nullptr;
    const int n = redisFormatCommandArgv(&out, static_cast<int>(argv.size()), argv.data(), lens.data());
    if (n < 0 || !out) throw std::bad_alloc();
    std::string bytes(out, static_cast<std::size_t>(n));
    redisFreeCommand(out);
    return bytes;
}

namespace {

reply convert(const redisReply& r) {
    reply out;
    switch (r.type) {
    case REDIS_REPLY_STRING:
        out.type = reply::kind::string;
        out.str.assign(r.str, r.len);
        break;
    case REDIS_REPLY_STATUS:
        out.type = reply::kind::status;
        out.str.assign(r.str, r.len);
        break;
    case REDIS_REPLY_ERROR:
        out.type = reply::kind::error;
        out.str.assign(r.str, r.len);
        break;
    case REDIS_REPLY_INTEGER:
        out.type = reply::kind::integer;
        out.integer = r.integer;
        break;
    case REDIS_REPLY_ARRAY:
        out.type = reply::kind::array;
        out.elements.reserve(r.elements);
        for (std::size_t i = 0; i < r.elements; ++i) out.elements.push_back(convert(*r.element[i]));
        break;
    default:
        out.type = reply::kind::nil;
    }
    return out;
}

[[noreturn]] void throw_timeout() {
    throw network_error("no answer from the Redis server in time");
}

} // namespace

void connection::reader_deleter::operator()(void* r) const noexcept { redisReaderFree(static_cast<redisReader*>(r)); }

connection::connection(asio::any_io_executor ex, std::chrono::milliseconds timeout)
    : timeout_(timeout), buffer_(16 * 1024) {
    bind_to(ex);
}

connection::~connection() { close(); }

void connection::close() noexcept {
    boost::system::error_code ignored;
    if (socket_) socket_->close(ignored);
    if (parked_ >= 0) ::close(parked_);
    parked_ = -1;
    reader_.reset();
}

void connection::bind_to(const asio::any_io_executor& ex) {
    if (socket_) return;
    timer_.emplace(ex);
    socket_.emplace(ex);
    if (parked_ < 0) return;
    boost::system::error_code ec;
    socket_->assign(protocol_, parked_, ec);
    if (ec) {
        ::close(parked_);
        reader_.reset();
    }
    parked_ = -1;
}

void connection::unbind() noexcept {
    if (!socket_) return;
    if (socket_->is_open()) {
        boost::system::error_code ec;
        const auto local = socket_->local_endpoint(ec);
        if (!ec) protocol_ = local.protocol();
        const int fd = ec ? -1 : socket_->release(ec);
        if (ec) close();
        else parked_ = fd;
    }
    socket_.reset();
    timer_.reset();
}

asio::awaitable<void> connection::connect(const endpoint& where) {
    close();
    asio::ip::tcp::resolver resolver(socket_->get_executor());
    auto resolving = resolver.async_resolve(where.host, where.port, asio::as_tuple(asio::use_awaitable));
    auto [rec, results] = co_await std::move(resolving);
    if (rec) throw network_error("resolving " + where.host + ": " + rec.message());
    timer_->expires_after(timeout_);
    auto connecting = asio::async_connect(*socket_, results, asio::as_tuple(asio::use_awaitable));
    auto waiting = timer_->async_wait(asio::as_tuple(asio::use_awaitable));
    auto done = co_await (std::move(connecting) || std::move(waiting));
    if (done.index() == 1) {
        close();
        throw_timeout();
    }
    if (auto ec = std::get<0>(std::get<0>(done)); ec) {
        close();
        throw network_error("connecting to " + where.host + ":" + where.port + ": " + ec.message());
    }
    socket_->set_option(asio::ip::tcp::no_delay(true));
    reader_.reset(redisReaderCreate());
    if (!reader_) throw std::bad_alloc();
    if (where.db != 0) {
        std::vector<command> select{command{"SELECT", std::to_string(where.db)}};
        auto r = co_await run(select);
        if (r.at(0).is_error()) {
            close();
            throw protocol_error("SELECT " + std::to_string(where.db) + ": " + r[0].str);
        }
    }
}

asio::awaitable<std::optional<std::size_t>> connection::read_some(char* data, std::size_t size, std::chrono::milliseconds wait) {
    if (!socket_ || !socket_->is_open() || !timer_) throw network_error("the Redis connection was closed");
    timer_->expires_after(wait);
    auto reading = socket_->async_read_some(asio::buffer(data, size), asio::as_tuple(asio::use_awaitable));
    auto waiting = timer_->async_wait(asio::as_tuple(asio::use_awaitable));
    auto done = co_await (std::move(reading) || std::move(waiting));
    if (done.index() == 1) co_return std::nullopt;
    auto [ec, n] = std::get<0>(done);
    if (ec) {
        close();
        throw network_error("reading from the Redis server: " + ec.message());
    }
    co_return n;
}

std::optional<reply> connection::take_parsed() {
    // Closed while a read or write was in flight (by a stop, or a reconnect on the same executor):
    // the completion may still resume the caller, which then finds no reader.
    if (!reader_) throw network_error("the Redis connection was closed");
    auto* rd = static_cast<redisReader*>(reader_.get());
    void* got = nullptr;
    if (redisReaderGetReply(rd, &got) != REDIS_OK) {
        std::string why = rd->errstr;
        close();
        throw protocol_error("unreadable reply from the Redis server: " + why);
    }
    if (!got) return std::nullopt;
    auto* r = static_cast<redisReply*>(got);
    auto out = convert(*r);
    freeReplyObject(r);
    return out;
}

asio::awaitable<void> connection::send(const std::vector<command>& cmds) {
    if (!socket_ || !socket_->is_open() || !reader_) throw network_error("the Redis connection is not open");
    std::string out;
    for (const auto& c : cmds) out += format(c);
    auto writing = asio::async_write(*socket_, asio::buffer(out), asio::as_tuple(asio::use_awaitable));
    auto [wec, written] = co_await std::move(writing);
    (void)written;
    if (wec) {
        close();
        throw network_error("writing to the Redis server: " + wec.message());
    }
}

asio::awaitable<std::optional<reply>> connection::receive(std::chrono::milliseconds wait) {
    if (!socket_ || !socket_->is_open() || !reader_) throw network_error("the Redis connection is not open");
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
        if (auto r = take_parsed()) co_return r;
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
        if (left <= std::chrono::milliseconds::zero()) co_return std::nullopt;
        const auto n = co_await read_some(buffer_.data(), buffer_.size(), left);
        if (!n) co_return std::nullopt;
        feed(*n);
    }
}

void connection::feed(std::size_t n) {
    if (!reader_) throw network_error("the Redis connection was closed");
    auto* rd = static_cast<redisReader*>(reader_.get());
    if (redisReaderFeed(rd, buffer_.data(), n) != REDIS_OK) {
        std::string why = rd->errstr;
        close();
        throw protocol_error("unreadable reply from the Redis server: " + why);
    }
}

asio::awaitable<std::vector<reply>> connection::run(const std::vector<command>& cmds) {
    co_await send(cmds);
    std::vector<reply> replies;
    replies.reserve(cmds.size());
    while (replies.size() < cmds.size()) {
        if (auto r = take_parsed()) {
            replies.push_back(std::move(*r));
            continue;
        }
        const auto n = co_await read_some(buffer_.data(), buffer_.size(), timeout_);
        if (!n) {
            close();
            throw_timeout();
        }
        feed(*n);
    }
    co_return replies;
}

} // namespace stategraph::checkpoint::redis
