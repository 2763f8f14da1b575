#pragma once
// Runs a coroutine to completion on a single-threaded io_context (deterministic order).
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

namespace stategraph::test {
template <class T>
T run(boost::asio::awaitable<T> a) {
    boost::asio::io_context io;
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.run();
    return f.get();
}
} // namespace stategraph::test
