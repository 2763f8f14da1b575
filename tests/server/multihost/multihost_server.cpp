// multihost_server: one instance of the multi-host test and benchmark (issue 24), a small graph
// served through stategraph::server over PostgreSQL.
//
//   START -> prepare -> retrieve -> llm -> tool -> review -> respond -> END
//
// Each node appends its name to `log`. `llm` waits `--node-ms` (default 50 ms; a run's
// `wait_ms` input overrides it) on an Asio timer: an LLM call's stand-in that holds no thread.
//
//   multihost_server --checkpointer postgresql://...|sqlite:FILE|memory [--runs postgresql://...|sqlite:FILE]
//                    [--host H]
//                    [--port N] [--instance NAME] [--workers N] [--lease-ms N] [--node-ms N]
//                    [--pool N] [--trace FILE] [--max-attempts N] [--wakeups redis://HOST:PORT[/DB]]
//
// memory and sqlite:FILE are for the benchmark's one-host rows (bench.sh).
// --max-attempts N: claims of one run at most (run_store_options::max_attempts); the kill loop raises it.
// --workers N: runs executed at once (server_options::max_runs_in_flight); 0: API only.
// --lease-ms N: how long a killed instance's claims (run store) and thread leases (checkpointer)
//   live before another instance takes them over.
// --wakeups redis://...: the instances wake each other through Redis pub/sub
//   (run_store_options::notifier, open_redis_notifier) instead of the run store's own way.
// --trace FILE: one line per node start, appended (O_APPEND, one write each):
//   "<unix µs> <instance> <thread id> <node> <nodes logged before it>"; the test reads it to know
//   which instance runs a thread and when a killed run made progress again elsewhere.
// Prints "listening on HOST:PORT" when it accepts. SIGTERM/SIGINT: server::drain, then exit 0.
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/postgres_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/server/redis_notifier.hpp>
#include <stategraph/server/run_store.hpp>
#include <stategraph/server/server.hpp>
#include <stategraph/stategraph.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace srv = stategraph::server;
namespace net = boost::asio;

namespace {

struct mh_state {
    std::vector<std::string> log; ///< the nodes that ran, in order (appended)
    int wait_ms = 0;              ///< the llm node's wait for this run; 0: --node-ms
    std::string tag;              ///< the client's label for the run (echoed, never read)
};
BOOST_DESCRIBE_STRUCT(mh_state, (), (log, wait_ms, tag))
auto reducers(sg::for_state<mh_state>) { return sg::reducers{sg::reduce<&mh_state::log>(sg::append)}; }

struct settings {
    std::string instance = "mh";
    int node_ms = 50;
    int trace_fd = -1;
} cfg;

void trace(const sg::context& ctx, const mh_state& s, const char* node) {
    if (cfg.trace_fd < 0) return;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
    const std::string line = std::to_string(us) + " " + cfg.instance + " " + ctx.thread_id() + " " + node + " " +
                             std::to_string(s.log.size()) + "\n";
    // One write of a short line with O_APPEND: lines of several processes never interleave.
    [[maybe_unused]] auto n = ::write(cfg.trace_fd, line.data(), line.size());
}

sg::update<mh_state> entry(const char* name) {
    std::vector<std::string> one{name};
    return sg::update<mh_state>{}.set<&mh_state::log>(std::move(one));
}

template <const char* Name>
sg::update<mh_state> step(const mh_state& s, sg::context& ctx) {
    trace(ctx, s, Name);
    return entry(Name);
}

net::awaitable<sg::update<mh_state>> llm(const mh_state& s, sg::context& ctx) {
    trace(ctx, s, "llm");
    net::steady_timer t(ctx.executor());
    t.expires_after(std::chrono::milliseconds(s.wait_ms > 0 ? s.wait_ms : cfg.node_ms));
    co_await t.async_wait(net::use_awaitable);
    co_return entry("llm");
}

constexpr char prepare[] = "prepare", retrieve[] = "retrieve", tool[] = "tool", review[] = "review",
               respond[] = "respond";

sg::compiled_graph<mh_state> build(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<mh_state> g("multihost");
    g.add_node(prepare, step<prepare>)
        .add_node(retrieve, step<retrieve>)
        .add_node("llm", llm)
        .add_node(tool, step<tool>)
        .add_node(review, step<review>)
        .add_node(respond, step<respond>);
    g.add_edge(sg::START, prepare)
        .add_edge(prepare, retrieve)
        .add_edge(retrieve, "llm")
        .add_edge("llm", tool)
        .add_edge(tool, review)
        .add_edge(review, respond)
        .add_edge(respond, sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

int usage(const std::string& why) {
    std::cerr << "multihost_server: " << why
              << "\nusage: multihost_server --checkpointer postgresql://...|sqlite:FILE|memory [--runs postgresql://...|sqlite:FILE]"
                 " [--host H]"
                 " [--port N] [--instance NAME] [--workers N] [--lease-ms N] [--node-ms N] [--pool N] [--max-attempts N]"
                 " [--trace FILE] [--wakeups redis://HOST:PORT[/DB]]\n";
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    srv::server_options so;
    so.host = "127.0.0.1";
    so.port = 8123;
    std::string checkpointer, runs, trace_file, wakeups;
    long lease_ms = 3000, workers = 64, pool = 16, max_attempts = 3;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string a = argv[i];
            if (i + 1 >= argc) return usage("missing value after " + a);
            const std::string v = argv[++i];
            if (a == "--host") so.host = v;
            else if (a == "--port") so.port = static_cast<unsigned short>(std::stoul(v));
            else if (a == "--checkpointer") checkpointer = v;
            else if (a == "--runs") runs = v;
            else if (a == "--instance") cfg.instance = v;
            else if (a == "--workers") workers = std::stol(v);
            else if (a == "--lease-ms") lease_ms = std::stol(v);
            else if (a == "--node-ms") cfg.node_ms = std::stoi(v);
            else if (a == "--pool") pool = std::stol(v);
            else if (a == "--max-attempts") max_attempts = std::stol(v);
            else if (a == "--trace") trace_file = v;
            else if (a == "--wakeups") wakeups = v;
            else return usage("unknown argument " + a);
        }
    } catch (const std::exception&) {
        return usage("a number was expected");
    }
    const auto is_pg = [](const std::string& u) { return u.starts_with("postgresql://") || u.starts_with("postgres://"); };
    if (!is_pg(checkpointer) && !checkpointer.starts_with("sqlite:") && checkpointer != "memory")
        return usage("--checkpointer takes a postgresql:// URL, sqlite:FILE or memory");
    if (!runs.empty() && !is_pg(runs) && !runs.starts_with("sqlite:"))
        return usage("--runs takes a postgresql:// URL or sqlite:FILE");
    if (workers < 0 || lease_ms <= 0 || pool <= 0) return usage("--workers, --lease-ms and --pool must be positive");
    if (!trace_file.empty()) {
        cfg.trace_fd = ::open(trace_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (cfg.trace_fd < 0) return usage("cannot open --trace " + trace_file);
    }
    try {
        std::shared_ptr<sg::checkpoint::saver> saver;
        if (is_pg(checkpointer)) {
            sg::checkpoint::postgres_options po;
            po.conninfo = checkpointer;
            po.pool_size = static_cast<std::size_t>(pool);
            po.lease_ttl = std::chrono::milliseconds(lease_ms);
            saver = std::make_shared<sg::checkpoint::postgres_saver>(po);
        } else if (checkpointer == "memory") {
            saver = std::make_shared<sg::checkpoint::memory_saver>();
        } else {
            sg::checkpoint::sqlite_options o;
            o.path = checkpointer.substr(7);
            saver = std::make_shared<sg::checkpoint::sqlite_saver>(o);
        }

        so.instance_id = cfg.instance;
        so.max_runs_in_flight = static_cast<std::size_t>(workers);
        so.poll_interval = std::chrono::milliseconds(50);
        if (!runs.empty()) {
#if STATEGRAPH_MULTIHOST_HAVE_RUN_STORE
            srv::run_store_options store;
            store.lease = std::chrono::milliseconds(lease_ms);
            store.max_attempts = static_cast<int>(max_attempts);
            if (!wakeups.empty()) {
                srv::redis_notifier_options wo;
                wo.url = wakeups;
                wo.channel_prefix = "multihost";
                wo.log = [name = cfg.instance](std::string_view line) { std::cerr << "multihost_server[" << name << "]: " << line << "\n"; };
                store.notifier = srv::open_redis_notifier(std::move(wo));
            }
            if (is_pg(runs)) {
                srv::postgres_run_store_options ro;
                ro.conninfo = runs;
                ro.pool_size = static_cast<std::size_t>(pool);
                ro.store = store;
                so.runs = srv::open_postgres_run_store(std::move(ro));
            } else {
                so.runs = srv::open_sqlite_run_store(runs.substr(7), store);
            }
#else
            // TODO(issue 24): open_postgres_run_store is declared (run_store.hpp) but not built
            // yet; until the server's run store lands, runs stay in this process's memory and
            // the cross-instance checks of multihost_test.sh fail, naming what is missing.
            std::cerr << "multihost_server[" << cfg.instance
                      << "]: --runs ignored: this server has no run store yet (issue 24); runs live in "
                         "this process's memory\n";
#endif
        }

        net::io_context io(1);
        srv::server server(io.get_executor(), so);
        srv::assistant_options ao;
        ao.description = "issue 24's multi-host test graph: six nodes, llm waits --node-ms";
        server.add(srv::make_assistant("multihost", build(saver), std::move(ao)));
        const auto port = server.listen();
        std::cout << "listening on " << so.host << ":" << port << std::endl;
        net::signal_set signals(io, SIGINT, SIGTERM);
        signals.async_wait([&](const boost::system::error_code&, int) {
            std::cerr << "multihost_server[" << cfg.instance << "]: draining\n";
            server.drain([&io] { io.stop(); });
        });
        io.run();
    } catch (const std::exception& e) {
        std::cerr << "multihost_server[" << cfg.instance << "]: " << e.what() << "\n";
        return 1;
    }
    return 0;
}
