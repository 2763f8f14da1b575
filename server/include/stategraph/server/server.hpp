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
/// Threads are kept in each graph's checkpointer; the thread records (metadata, status) and the
/// runs live in the server's memory. At `listen`, the threads already stored in the graphs'
/// checkpointers are found again (without API keys; their metadata is reduced to graph_id and
/// assistant_id). Thread safety: every call, and the server itself, runs on
/// the executor's one thread.

#include <stategraph/server/assistant.hpp>
#include <stategraph/server/error.hpp>
#include <stategraph/server/options.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <functional>
#include <memory>

namespace stategraph::server {

class server {
public:
    server(boost::asio::any_io_executor ex, server_options options);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// @brief Serves a graph as an assistant (before or after `listen`).
    /// @throws std::invalid_argument when the graph id is taken.
    void add(assistant_spec spec);

    /// @brief Binds `host:port` and starts accepting; returns the bound port (the chosen one
    /// when the port is 0). @throws boost::system::system_error when the address is in use.
    unsigned short listen();

    /// @brief Stops accepting and closes idle connections; running runs go on to their end.
    void stop();

    /// @brief Graceful shutdown (what SIGTERM should do): stops accepting, asks every run of the
    /// process to stop at its next superstep boundary with everything saved
    /// (`stategraph::request_drain`, process-wide), and calls `done` once no run is in flight.
    /// A drained run ends `interrupted`; a server started later on the same checkpointer finds
    /// the thread again, and a run with no input continues it.
    void drain(std::function<void()> done);

    /// @brief The bound port (0 before `listen`).
    unsigned short port() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

} // namespace stategraph::server
