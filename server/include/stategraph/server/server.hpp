#pragma once
/// @file server.hpp
/// @brief `server`: the LangGraph Agent Server HTTP API (what `@langchain/langgraph-sdk` calls)
/// over compiled graphs, on Boost.Beast and Asio coroutines.
///
/// @code
/// boost::asio::io_context io;
/// stategraph::server::server srv(io.get_executor(), {.port = 8123});
/// srv.add(stategraph::server::make_assistant("agent", app));
/// srv.listen();
/// io.run();
/// @endcode
/// Link `stategraph::server` (CMake). Threads are kept in each graph's checkpointer; the thread
/// records (metadata, status), the runs, their queue and their events live in a run store
/// (`server_options::runs`, <stategraph/server/run_store.hpp>): SQLite for one host, PostgreSQL for
/// many; any instance on the same store serves any request, and its workers claim queued runs
/// (a dead instance's runs are taken over). At `listen`, threads already stored in the graphs'
/// checkpointers without a record are adopted (without API keys; their metadata is reduced to
/// graph_id and assistant_id). Wire SIGTERM to `drain` (docs/examples/serve.cpp). Thread safety:
/// every call, and the server itself, runs on the executor's one thread.

#include <stategraph/server/assistant.hpp>
#include <stategraph/server/error.hpp>
#include <stategraph/server/options.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>

namespace stategraph::server {

/// Not thread-safe: call every member on the executor's thread (or before `io.run()` starts), and
/// run that executor on one thread; a signal handler reaches `drain` through an
/// `asio::signal_set` on it, not directly.
class server {
public:
    /// @param ex the executor every connection, worker, timer and run of the server runs on (one
    /// thread: an `io_context` run by one thread, or a strand).
    /// @param options address and port, limits, API keys, run store (null: one in memory, lost at
    /// exit), drain timeout, CORS, Store and the rest (`server_options`). Nothing is bound until `listen`.
    server(boost::asio::any_io_executor ex, server_options options);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// @brief Serves a graph as an assistant (before or after `listen`).
    /// @throws std::invalid_argument when the graph id is taken.
    /// @param spec the graph (`make_assistant(id, app, options)`); also throws std::invalid_argument
    /// when it has no checkpointer.
    void add(assistant_spec spec);

    /// @brief Binds `host:port` and starts accepting, and starts this instance's workers (unless
    /// `max_runs_in_flight` is 0); returns the bound port (the chosen one when the port is 0).
    /// A worker-only instance (`serve_api` false) binds nothing and returns 0.
    /// @throws boost::system::system_error when the address is in use.
    unsigned short listen();

    /// @brief Stops accepting and closes idle connections; this instance claims no more runs,
    /// and those running go on to their end.
    void stop();

    /// @brief Graceful shutdown (what SIGTERM should do): stops accepting, starts no queued run,
    /// asks every run of the process to stop at its next superstep boundary with everything
    /// saved (`stategraph::request_drain`, process-wide) and hands each back to the queue
    /// (pending, for any instance on the run store), then calls `done` once none is in flight
    /// here and the webhooks of ended runs are delivered (or given up), or after `server_options::drain_timeout` (a run still in a node then keeps its claim
    /// until it expires, and another instance takes it over). Clients waiting on a handed-back
    /// run through this instance are told `ServerDraining`.
    /// @param done called once, on the server's executor, when the drain is over as said above
    /// (at the latest after `drain_timeout`); exit the process there.
    void drain(std::function<void()> done);

    /// @brief The bound port (0 before `listen`).
    unsigned short port() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

} // namespace stategraph::server
