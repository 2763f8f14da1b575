#pragma once
/// @file options.hpp
/// @brief `server_options`: where the server listens, its limits and its API keys.

#include <stategraph/run_observer.hpp>
#include <stategraph/verbosity.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <string_view>

namespace stategraph::store {
class base_store;
}

namespace stategraph::server {

class run_store;

/// @brief How much of a run a stream shows (the supervisor platform's three levels), on top of
/// the stream modes the client asked for: the one filter of <stategraph/verbosity.hpp>.
using verbosity = stategraph::verbosity;

/// @brief Who may read `GET /metrics` (Prometheus's text format; docs/observability.md).
enum class metrics_access {
    off,   ///< no /metrics (404)
    open,  ///< anyone who reaches the port, API keys or not
    keyed, ///< with API keys set, one of them as `x-api-key` or `Authorization: Bearer <key>` (what
           ///< Prometheus's scrape config sends); without API keys, anyone
};

/// @brief How the server listens and what it accepts.
/// Thread safety: a plain value, copied by the server's constructor; `log` is called on the server's
/// executor.
struct server_options {
    std::string host = "127.0.0.1"; ///< the address to bind (loopback unless told otherwise)
    unsigned short port = 8123;     ///< the LangGraph SDK's default; 0 picks a free port
    std::size_t body_limit = 1 << 20;  ///< larger request bodies get 413
    std::size_t header_limit = 16 << 10; ///< larger request headers get 431
    /// a request must arrive whole within this time (slow clients get 408 and are closed)
    std::chrono::milliseconds read_timeout{30'000};
    /// `x-api-key` values accepted; empty: no authentication. A thread belongs to the key that
    /// created it: another key gets 404 for it. Keys are never logged.
    std::set<std::string> api_keys;
    /// one line per request (method, path, status); null: silent
    std::function<void(std::string_view)> log;
    /// runs this instance executes at once (its workers); more wait (status pending), oldest
    /// first, for this instance or any other on the same run store. 0: an API-only instance,
    /// which queues runs for the others and runs none itself.
    std::size_t max_runs_in_flight = 64;
    /// where thread records, runs, their queue and their events live (<stategraph/server/run_store.hpp>):
    /// SQLite for one host (any number of instances on one file), PostgreSQL for many. Null: a
    /// store in this process's memory (`open_memory_run_store`), lost at exit (set
    /// max_finished_runs and max_events_per_run there through its run_store_options).
    std::shared_ptr<run_store> runs;
    /// this instance's name in the run store (its claims, the logs); "" makes one of the host
    /// name, the process id and a random part
    std::string instance_id;
    /// how long `server::drain` waits for the runs of this instance to stop at a step boundary
    /// and go back to the queue; a run still in a node after it keeps its claim until the claim
    /// expires, and another instance takes it over from its last checkpoint
    std::chrono::milliseconds drain_timeout{30'000};
    /// false: a worker-only instance (listen() binds nothing; it runs queued runs)
    bool serve_api = true;
    /// how often an instance looks for new runs, cancellations and events of other instances
    /// when nothing woke it (PostgreSQL notifications wake it at once)
    std::chrono::milliseconds poll_interval{100};
    /// finished runs kept (their record, events and result) when the server makes its own
    /// store (`runs` null); the oldest are dropped
    std::size_t max_finished_runs = 10'000;
    /// events kept per run for replay when the server makes its own store (joining a stream
    /// with `Last-Event-ID`); beyond it the oldest go first. A join asking for events older than
    /// those kept gets 410 with a detail naming the oldest id kept; a stream that falls that far
    /// behind ends with an `error` event saying so.
    std::size_t max_events_per_run = 10'000;
    /// runs pending or running on one thread (multitask_strategy enqueue); one more gets 429 with
    /// a detail naming the thread and the bound
    std::size_t max_queued_runs_per_thread = 100;
    /// connections open at once; a connection over the bound is answered 503 (`Retry-After: 1`,
    /// a detail naming the bound) and closed
    std::size_t max_connections = 1024;
    /// how much of a run every stream shows
    stategraph::server::verbosity verbosity = verbosity::full;
    /// browser origins allowed to call the server (CORS, for `useStream` in a web page): exact
    /// origins such as "http://localhost:3000", or "*" for any; empty: no CORS headers
    std::set<std::string> cors_origins;
    /// the `version` that `GET /info` reports
    std::string version = "0.1.0";
    /// the long-term memory Store served at `/store/...` (`PUT/GET/DELETE /store/items`,
    /// `POST /store/items/search`, `POST /store/namespaces`); null: those answer 404
    std::shared_ptr<stategraph::store::base_store> store;
    /// the Graphviz program that draws `GET /assistants/{id}/graph?format=svg` (and the studio
    /// page's graph), looked up on PATH unless it has a '/'; when it cannot be run that answer
    /// is 501 with a detail naming it (install graphviz, or ask for ?format=dot)
    std::string dot_program = "dot";
    /// how long `dot` may take; it is killed after that and the answer is 504
    std::chrono::milliseconds dot_timeout{10'000};
    /// who may read `GET /metrics`: by default the callers the API keys let in
    metrics_access metrics = metrics_access::keyed;
    /// told of every run's spans (a tracing `run_observer`, e.g. `stategraph::otlp_tracer`);
    /// it must outlive the server. A request's W3C `traceparent` header is kept with the run,
    /// so the run's span continues the caller's trace on whichever instance executes it.
    /// Null (the default): no span is built.
    run_observer* tracer = nullptr;
};

} // namespace stategraph::server
