#pragma once
/// @file run_sync.hpp
/// @brief `run_sync(awaitable)`: runs one coroutine to completion from plain code (`main()`, a
/// CLI command, a test) on a private `io_context`, and returns its result or rethrows its error.
/// @code
/// int main() {
///     auto app = build_graph();
///     auto r = stategraph::run_sync(app.invoke(stategraph::update<ticket>{}.set<&ticket::text>("down"),
///                                              {.thread_id = "ticket-1"}));
/// }
/// @endcode
/// Inside a program that already runs an `io_context`, `co_await` the call instead (or
/// `co_spawn` it onto that context).

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <utility>

namespace stategraph {

/// @brief Runs `work` on a new single-threaded `io_context` until it completes.
template <class T>
T run_sync(boost::asio::awaitable<T> work) {
    boost::asio::io_context io;
    auto result = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
    io.run();
    return result.get();
}

} // namespace stategraph
