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
/// @tparam T the coroutine's result type.
/// @param work the coroutine, e.g. `app.invoke(...)`; it runs on the new `io_context`, on the
/// calling thread, and every node and saver call awaited inside it completes there.
/// @return `work`'s result; its exception, if any, is rethrown here.
/// Thread safety: call from any thread that is not running an `io_context` it needs; it blocks that
/// thread until `work` ends. Anything `work` waits for on another executor (an I/O object of your
/// own bound to an `io_context` nobody runs) never completes: run that context on a thread of its
/// own, or `co_spawn` the call onto it instead. This library's savers and `openai_chat_model` run
/// on the awaiting coroutine's executor, so they work under `run_sync`.
template <class T>
T run_sync(boost::asio::awaitable<T> work) {
    boost::asio::io_context io;
    auto result = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
    io.run();
    return result.get();
}

} // namespace stategraph
