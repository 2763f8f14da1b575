#pragma once
/// @file run.hpp
/// @brief For tests (no test framework needed): runs one coroutine to completion on a private
/// io_context and returns its result, or rethrows its exception.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <utility>

namespace stategraph::checkpoint::testing {

template <class T>
T run(boost::asio::awaitable<T> work) {
    boost::asio::io_context io;
    auto result = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
    io.run();
    return result.get();
}

} // namespace stategraph::checkpoint::testing
