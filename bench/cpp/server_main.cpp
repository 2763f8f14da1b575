// stategraph_bench_server: the benchmark supervisor graph (bench/cpp/supervisor.hpp, the one the
// "supervisor" scenario runs) served through stategraph::server, for the server rows of
// scripts/bench (bench/langgraph-api/load.mjs drives it and the LangGraph JS server alike).
//
//   load.mjs --(HTTP/1.1 keep-alive, 64 clients)--> stategraph_bench_server --> supervisor graph
//                                                         |                       (22 nodes)
//                                                         +--> memory_saver | sqlite_saver | postgres_saver
//
//   stategraph_bench_server [--port N] [--checkpointer memory|sqlite|postgres] [--db FILE]
//                           [--postgres URL] [--runs FILE] [--in-process SECONDS] [--label NAME]
// The run store is the server's default (kept in this process's memory, open_memory_run_store), or
// the SQLite file --runs FILE (--runs :memory: for SQLite in memory, the default before 2026-11-29).
// Prints "listening <port>" on stdout once it accepts; SIGINT/SIGTERM stops it.
//
// --in-process SECONDS serves nothing: it invokes the same graph on the same checkpointer in this
// process, as the server's runs do (a fresh thread per run, the run's default durability, one
// io_context thread), for half the time one turn at a time and for the other half with 64 turns
// in flight, and prints one JSON line (scenario "server", checkpointer NAME): the rates the server
// rows are compared with (issue 25: /runs/wait at >= 50% of the rate of the graph in process).
#include "harness.hpp"
#include "supervisor.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#ifdef STATEGRAPH_HAVE_POSTGRES
#include <stategraph/checkpoint/postgres_saver.hpp>
#endif
#include <stategraph/server/run_store.hpp>
#include <stategraph/server/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <unistd.h>

namespace {

namespace sup = stategraph::bench::supervisor;
using bench_clock = std::chrono::steady_clock;

int usage(const std::string& why) {
    std::cerr << "stategraph_bench_server: " << why
              << "\nusage: stategraph_bench_server [--port N] [--checkpointer memory|sqlite|postgres] [--db FILE]"
                 " [--postgres URL] [--runs FILE] [--in-process SECONDS] [--label NAME]\n";
    return 2;
}

/// Complex turns on fresh threads until `end`, one after another; `done` counts them.
boost::asio::awaitable<void> turns(stategraph::compiled_graph<sup::state> g, std::string prefix, bench_clock::time_point end,
                                   std::uint64_t& done, std::exception_ptr& failed) {
    try {
        for (std::uint64_t i = 0; bench_clock::now() < end; ++i) {
            const std::string thread = prefix + std::to_string(i);
            stategraph::run_config cfg;
            cfg.thread_id = thread;
            cfg.recursion_limit = sup::recursion_limit;
            auto in = sup::turn_input(sup::complex_message, thread);
            auto r = co_await g.invoke(std::move(in), cfg);
            sup::check_complex_result(r);
            ++done;
        }
    } catch (...) {
        if (!failed) failed = std::current_exception();
    }
}

/// Runs `lanes` turn loops for `seconds` on `io`: turns per second.
double rate(boost::asio::io_context& io, const stategraph::compiled_graph<sup::state>& g, const std::string& prefix, int lanes,
            double seconds, std::uint64_t& runs) {
    std::uint64_t done = 0;
    std::exception_ptr failed;
    const auto start = bench_clock::now();
    const auto end = start + std::chrono::duration_cast<bench_clock::duration>(std::chrono::duration<double>(seconds));
    for (int l = 0; l < lanes; ++l)
        boost::asio::co_spawn(io, turns(g, prefix + std::to_string(l) + "-", end, done, failed), boost::asio::detached);
    io.restart();
    io.run();
    if (failed) std::rethrow_exception(failed);
    const double took = std::chrono::duration<double>(bench_clock::now() - start).count();
    runs = done;
    return static_cast<double>(done) / took;
}

/// --in-process: the rates the server rows are compared with (see the top of this file).
int in_process(const std::shared_ptr<stategraph::checkpoint::saver>& saver, const std::string& label, double seconds) {
    boost::asio::io_context io(1);
    auto g = sup::build(saver);
    const std::string prefix = "inproc-" + std::to_string(getpid()) + "-";
    std::uint64_t warm = 0, one = 0, many = 0;
    (void)rate(io, g, prefix + "w", 1, 0.3, warm);
    const double r1 = rate(io, g, prefix + "a", 1, seconds / 2, one);
    const double r64 = rate(io, g, prefix + "b", 64, seconds / 2, many);
    namespace json = boost::json;
    json::object line{{"scenario", "server"}, {"checkpointer", label}, {"side", "cpp"}};
    json::array metrics;
    metrics.push_back(json::object{{"metric", "in_process_runs_per_s"}, {"unit", "1/s"}, {"median", r1}, {"n", one}});
    metrics.push_back(json::object{{"metric", "in_process_runs_per_s_64_in_flight"}, {"unit", "1/s"}, {"median", r64}, {"n", many}});
    line["metrics"] = std::move(metrics);
    line["config"] = json::object{{"seconds", seconds}, {"turn", "complex"}, {"durability", "the run's default (sync), as the server's runs"}};
    std::cout << json::serialize(line) << std::endl;
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    namespace srv = stategraph::server;
    unsigned short port = 0;
    std::string kind = "memory", db, runs, postgres, label;
    double in_process_seconds = 0;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (i + 1 >= argc) return usage("missing value after " + a);
        std::string v = argv[++i];
        if (a == "--port") port = static_cast<unsigned short>(std::stoi(v));
        else if (a == "--checkpointer") kind = v;
        else if (a == "--db") db = v;
        else if (a == "--runs") runs = v;
        else if (a == "--postgres") postgres = v;
        else if (a == "--label") label = v;
        else if (a == "--in-process") in_process_seconds = std::stod(v);
        else return usage("unknown argument " + a);
    }
    std::shared_ptr<stategraph::checkpoint::saver> saver;
#ifdef STATEGRAPH_HAVE_POSTGRES
    /// Drops the PostgreSQL schema once the saver (and the server using it) are gone.
    struct schema_dropper {
        std::string url, schema;
        std::shared_ptr<stategraph::checkpoint::saver>* saver;
        schema_dropper(std::string u, std::string s, std::shared_ptr<stategraph::checkpoint::saver>* p)
            : url(std::move(u)), schema(std::move(s)), saver(p) {}
        ~schema_dropper() {
            saver->reset();
            try {
                stategraph::bench::postgres_drop_schema(url, schema);
            } catch (const std::exception& e) {
                std::cerr << "stategraph_bench_server: " << e.what() << " (left in place)\n";
            }
        }
    };
    std::optional<schema_dropper> drop_at_exit;
#endif
    if (kind == "memory") {
        saver = std::make_shared<stategraph::checkpoint::memory_saver>();
    } else if (kind == "sqlite") {
        if (db.empty()) return usage("--checkpointer sqlite needs --db FILE");
        stategraph::checkpoint::sqlite_options o;
        o.path = db;
        saver = std::make_shared<stategraph::checkpoint::sqlite_saver>(o);
#ifdef STATEGRAPH_HAVE_POSTGRES
    } else if (kind == "postgres") {
        if (postgres.empty()) return usage("--checkpointer postgres needs --postgres URL");
        stategraph::checkpoint::postgres_options o;
        o.conninfo = postgres;
        // A schema of its own, made on first use, dropped when this process ends.
        o.schema = "bench_server_" + std::to_string(getpid()) + "_" +
                   std::to_string(std::chrono::system_clock::now().time_since_epoch().count() / 1000);
        saver = std::make_shared<stategraph::checkpoint::postgres_saver>(o);
        drop_at_exit.emplace(o.conninfo, o.schema, &saver);
#endif
    } else {
        return usage("unknown checkpointer '" + kind + "' (memory, sqlite or postgres)");
    }
    if (in_process_seconds > 0) return in_process(saver, label.empty() ? kind : label, in_process_seconds);

    boost::asio::io_context io(1);
    srv::server_options so;
    so.port = port;
    so.max_runs_in_flight = 256; // above the 64 clients: the queue bound is not what is measured
    if (!runs.empty()) so.runs = srv::open_sqlite_run_store(runs); // else the server's default, in memory
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
