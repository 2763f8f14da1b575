// stategraph_bench_server: the benchmark supervisor graph (bench/cpp/supervisor.hpp, the one the
// "supervisor" scenario runs) served through stategraph::server, for the server rows of
// scripts/bench (bench/langgraph-api/load.mjs drives it and the LangGraph JS server alike).
//
//   load.mjs --(HTTP/1.1 keep-alive, 64 clients)--> stategraph_bench_server --> supervisor graph
//                                                         |                       (22 nodes)
//                                                         +--> memory_saver | sqlite_saver
//
//   stategraph_bench_server [--port N] [--checkpointer memory|sqlite] [--db FILE] [--runs FILE]
// The run store is SQLite in memory (the server's default), or the SQLite file --runs FILE.
// Prints "listening <port>" on stdout once it accepts; SIGINT/SIGTERM stops it.
#include "supervisor.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/server/run_store.hpp>
#include <stategraph/server/server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <iostream>
#include <string>

namespace {

int usage(const std::string& why) {
    std::cerr << "stategraph_bench_server: " << why
              << "\nusage: stategraph_bench_server [--port N] [--checkpointer memory|sqlite] [--db FILE] [--runs FILE]\n";
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    namespace srv = stategraph::server;
    namespace sup = stategraph::bench::supervisor;
    unsigned short port = 0;
    std::string kind = "memory", db, runs;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) return usage("missing value after " + a);
        std::string v = argv[++i];
        if (a == "--port") port = static_cast<unsigned short>(std::stoi(v));
        else if (a == "--checkpointer") kind = v;
        else if (a == "--db") db = v;
        else if (a == "--runs") runs = v;
        else return usage("unknown argument " + a);
    }
    std::shared_ptr<stategraph::checkpoint::saver> saver;
    if (kind == "memory") {
        saver = std::make_shared<stategraph::checkpoint::memory_saver>();
    } else if (kind == "sqlite") {
        if (db.empty()) return usage("--checkpointer sqlite needs --db FILE");
        stategraph::checkpoint::sqlite_options o;
        o.path = db;
        saver = std::make_shared<stategraph::checkpoint::sqlite_saver>(o);
    } else {
        return usage("unknown checkpointer '" + kind + "' (memory or sqlite)");
    }

    boost::asio::io_context io(1);
    srv::server_options so;
    so.port = port;
    so.max_runs_in_flight = 256; // above the 64 clients: the queue bound is not what is measured
    if (!runs.empty()) so.runs = srv::open_sqlite_run_store(runs); // else SQLite in memory (the server's default)
    srv::assistant_options ao;
    ao.description = "The benchmark supervisor graph (shared/bench/supervisor_topology.md)";
    ao.recursion_limit = sup::recursion_limit;
    srv::server server(io.get_executor(), so);
    server.add(srv::make_assistant("supervisor", sup::build(saver), std::move(ao)));
    auto bound = server.listen();
    std::cout << "listening " << bound << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code&, int) { server.drain([&io] { io.stop(); }); });
    io.run();
    return 0;
}
