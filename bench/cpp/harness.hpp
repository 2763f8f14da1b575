#pragma once
/// @file harness.hpp
/// @brief The C++ half of the benchmark: command line, checkpointer set-ups, the warm-up and
/// timing loop, and the JSON line every run prints. Mirrors bench/langgraphjs/run.mjs so the
/// two halves can be joined metric by metric (scripts/bench does that).
///
///   stategraph_bench <scenario> <checkpointer> [--runs N] [--warmup N] [--smoke] [--db-dir DIR]
///   stategraph_bench --list
///
/// One line on stdout:
///   {"scenario","checkpointer","metrics":[{"metric","unit","median","p90","runs"}],
///    "versions":{...},"config":{...},"detail":{...}}

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/run_config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace stategraph::bench {

/// @brief A failed check: the run is wrong, not slow. Exit status 1.
struct bench_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

inline void check(bool ok, const std::string& what) {
    if (!ok) throw bench_error("check failed: " + what);
}

/// @brief The checkpointer names shared with the JS half.
inline const std::vector<std::string> all_checkpointers{"none", "memory", "sqlite_normal", "sqlite_full"};
inline const std::vector<std::string> with_saver{"memory", "sqlite_normal", "sqlite_full"};
inline const std::vector<std::string> sqlite_only{"sqlite_normal", "sqlite_full"};
/// @brief The checkpointers on a server, compiled in when their saver is (chain20 and supervisor
/// run with them): "postgres" (URL from STATEGRAPH_BENCH_POSTGRES or STATEGRAPH_TEST_POSTGRES, a
/// fresh schema per process) and "redis" (STATEGRAPH_BENCH_REDIS or STATEGRAPH_TEST_REDIS, a
/// fresh key prefix per process), and "tiered" (Redis in front of PostgreSQL, both as above).
/// scripts/bench starts private servers for them.
inline const std::vector<std::string> server_checkpointers{
#ifdef STATEGRAPH_HAVE_POSTGRES
    "postgres",
#endif
#ifdef STATEGRAPH_HAVE_REDIS
    "redis",
#endif
#ifdef STATEGRAPH_HAVE_TIERED
    "tiered",
#endif
};
/// @brief `base` followed by the server checkpointers.
inline std::vector<std::string> plus_servers(std::vector<std::string> base) {
    base.insert(base.end(), server_checkpointers.begin(), server_checkpointers.end());
    return base;
}

/// @brief One checkpointer set-up: the saver (null for "none") and, for SQLite, its file.
struct checkpointer {
    std::string kind;
    std::shared_ptr<checkpoint::saver> saver;
    std::filesystem::path dir;  ///< fresh temp dir (SQLite only), removed on destruction
    std::filesystem::path file; ///< the database file (SQLite only)
    boost::json::object config; ///< journal_mode, synchronous, sqlite version
    /// Server checkpointers: round trips to their servers so far (null for the others).
    std::function<std::uint64_t()> round_trips;
    /// The same, per server ("postgres", "redis"): a tiered saver's go to both.
    std::function<std::map<std::string, std::uint64_t>()> round_trips_by_server;
    /// Server checkpointers: the loopback round trip to each server, measured now with
    /// `round_trips` requests (null for the others); see server_floor.cpp.
    std::function<boost::json::object(int round_trips)> floor;
    /// Server checkpointers: removes what the run stored there (its schema, its keys), called
    /// by the destructor once the saver is closed.
    std::vector<std::function<void()>> cleanup;

    checkpointer() = default;
    checkpointer(const checkpointer&) = delete;
    checkpointer& operator=(const checkpointer&) = delete;
    ~checkpointer();
};

/// @brief Makes a checkpointer of `kind` ("none", "memory", "sqlite_normal", "sqlite_full");
/// SQLite files go in a fresh directory under `db_dir` (default: $TMPDIR or /tmp).
std::unique_ptr<checkpointer> make_checkpointer(const std::string& kind, const std::string& db_dir);

/// @brief Microseconds since an arbitrary epoch (steady clock).
inline double now_us() {
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// @brief A thread id never used before in this process.
std::string fresh_thread(const std::string& prefix);

/// @brief Runs `a` to completion on `io` (which must have no other work) and returns its value.
template <class T>
T drive(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
    std::optional<T> out;
    std::exception_ptr error;
    io.restart();
    boost::asio::co_spawn(io, std::move(a), [&](std::exception_ptr e, T v) {
        error = e;
        if (!e) out.emplace(std::move(v));
    });
    io.run();
    if (error) std::rethrow_exception(error);
    if (!out) throw bench_error("a benchmark coroutine did not finish");
    return std::move(*out);
}

/// @brief `drive` for a coroutine without a value.
inline void drive(boost::asio::io_context& io, boost::asio::awaitable<void> a) {
    bool finished = false;
    std::exception_ptr error;
    io.restart();
    boost::asio::co_spawn(io, std::move(a), [&](std::exception_ptr e) {
        error = e;
        finished = true;
    });
    io.run();
    if (error) std::rethrow_exception(error);
    if (!finished) throw bench_error("a benchmark coroutine did not finish");
}

/// @brief One sample per metric of one run.
using samples = std::map<std::string, double>;

/// @brief What a scenario's set-up returns.
struct bench_run {
    std::function<samples()> run;                 ///< one timed run
    std::function<samples()> warmup_run;          ///< a warm-up run, if it differs from `run`
    std::function<samples()> finish;              ///< metrics measured once, at the end
    std::function<boost::json::object()> detail;  ///< extra information for the JSON line
};

/// @brief What a scenario set-up gets.
struct setup_context {
    std::string kind;           ///< checkpointer name
    checkpointer* cp = nullptr; ///< the checkpointer made for this process
    bool smoke = false;
    std::string db_dir;
    /// @brief Another checkpointer of the same kind (throughput makes one per batch).
    std::function<std::unique_ptr<checkpointer>()> make_cp;
};

struct metric_def {
    std::string name, unit;
};

/// @brief A scenario, with the same run-count policy as the JS half.
struct scenario {
    std::string name;
    std::vector<std::string> checkpointers;
    int warmup = 50;
    double target_seconds = 4;
    int min_runs = 30, max_runs = 20000;
    std::optional<int> default_runs;
    std::vector<metric_def> metrics;
    /// @brief Metrics for one checkpointer, when they differ (supervisor without a saver).
    std::function<std::optional<std::vector<metric_def>>(const std::string&)> metrics_for;
    std::function<bench_run(setup_context&)> setup;
    /// @brief The scenario opens its own storage: no checkpointer is made for it, and no
    /// commit floor is measured after it.
    bool own_storage = false;
};

// The scenarios, one registration function per source file.
void add_scenarios(std::vector<scenario>& out);            // chain20, fanout8, hitl, throughput, supervisor, checkpoint_size
void add_sqlite_floor_scenario(std::vector<scenario>& out); // sqlite_commit (C++ only: the physical floor)

/// @brief The median cost of one SQLite commit (BEGIN IMMEDIATE; INSERT 2 KiB; COMMIT) on a
/// fresh WAL file under `db_dir`, with synchronous FULL or NORMAL: {"us_per_commit","commits",...}.
boost::json::object commit_floor(const std::string& db_dir, bool full, int commits);
/// The SQLite work of the throughput scenario alone: `runs` runs of `rows_per_run` checkpoint rows of
/// `row_bytes` bytes, `runs_per_commit` runs a commit, on one connection (SQLite's one writer).
boost::json::object rows_floor(const std::string& db_dir, bool full, int runs, int rows_per_run, std::size_t row_bytes,
                               int runs_per_commit);

/// The SQLite statements of a HITL pair alone (both calls' starts and ends, as the saver issues
/// them, no graph, no encoding), `pairs` times on a fresh file with the saver's tables and the
/// sizes of one thread's rows read from `timed_file`: {"us_first_call","us_second_call",...}.
boost::json::object calls_floor(const std::filesystem::path& timed_file, const std::string& db_dir, bool full, int pairs);

/// @brief One loopback round trip to a server, on a blocking connection of its own (median of
/// `round_trips` after a warm-up): {"us_per_round_trip","round_trips","request"}.
boost::json::object postgres_floor(const std::string& url, int round_trips); // STATEGRAPH_HAVE_POSTGRES only
boost::json::object redis_floor(const std::string& url, int round_trips);
/// Removes what a run stored on a server: its PostgreSQL schema (STATEGRAPH_HAVE_POSTGRES only),
/// its Redis keys (those starting with `prefix`; their count). Throws bench_error.
void postgres_drop_schema(const std::string& url, const std::string& schema);
std::int64_t redis_delete_prefix(const std::string& url, const std::string& prefix);

/// @brief The durability every scenario's invokes use (`--durability`; default sync), except the
/// durability scenario, which runs each mode.
durability& bench_durability();

/// @brief Peak resident set size of this process, in MB (getrusage).
double peak_rss_mb();

} // namespace stategraph::bench
