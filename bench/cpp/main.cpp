// stategraph_bench: one scenario with one checkpointer in this process, one JSON line on stdout.
// See harness.hpp for the command line and bench/README.md for the scenarios.
#include "harness.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#ifdef STATEGRAPH_HAVE_POSTGRES
#include <stategraph/checkpoint/postgres_saver.hpp>
#endif
#ifdef STATEGRAPH_HAVE_REDIS
#include <stategraph/checkpoint/redis_saver.hpp>
#endif
#ifdef STATEGRAPH_HAVE_TIERED
#include <stategraph/checkpoint/tiered_saver.hpp>
#endif

#include <boost/json/serialize.hpp>
#include <boost/version.hpp>

#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <numeric>
#include <string_view>

#ifndef STATEGRAPH_VERSION
#define STATEGRAPH_VERSION "unknown"
#endif
#ifndef STATEGRAPH_BENCH_BUILD_TYPE
#define STATEGRAPH_BENCH_BUILD_TYPE "unknown"
#endif

namespace stategraph::bench {

checkpointer::~checkpointer() {
    saver.reset(); // closes the SQLite connection before its directory goes
    for (const auto& remove : cleanup) {
        try {
            remove();
        } catch (const std::exception& e) {
            std::fprintf(stderr, "stategraph_bench: %s (left in place)\n", e.what());
        }
    }
    if (!dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
}

namespace {
std::string sqlite_pragma_text(const std::filesystem::path& file, const char* pragma) {
    sqlite3* db = nullptr;
    std::string out;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, pragma, -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
            out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
    }
    sqlite3_close_v2(db);
    return out;
}
/// The server URL of a server checkpointer: STATEGRAPH_BENCH_<NAME>, else STATEGRAPH_TEST_<NAME>.
[[maybe_unused]] std::string server_url(const char* bench_var, const char* test_var) {
    for (const char* v : {bench_var, test_var})
        if (const char* u = std::getenv(v); u && *u) return u;
    throw bench_error(std::string("no server: set ") + bench_var + " (or " + test_var +
                      "); scripts/bench starts one");
}

/// A server checkpointer's floor: {name: measure(url, n)}.
template <class Measure>
[[maybe_unused]] std::function<boost::json::object(int)> floor_of(const char* name, std::string url, Measure measure) {
    return [name, url = std::move(url), measure](int n) {
        boost::json::object o;
        o[name] = measure(url, n);
        return o;
    };
}

/// A name no other run uses: "bench_<pid>_<microseconds>".
[[maybe_unused]] std::string fresh_name() {
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                  std::chrono::system_clock::now().time_since_epoch()).count();
    return "bench_" + std::to_string(getpid()) + "_" + std::to_string(us);
}
} // namespace

std::unique_ptr<checkpointer> make_checkpointer(const std::string& kind, const std::string& db_dir) {
    auto cp = std::make_unique<checkpointer>();
    cp->kind = kind;
    if (kind == "none") return cp;
    if (kind == "memory") {
        cp->saver = std::make_shared<checkpoint::memory_saver>();
        return cp;
    }
#ifdef STATEGRAPH_HAVE_POSTGRES
    auto postgres = [&] {
        checkpoint::postgres_options o;
        o.conninfo = server_url("STATEGRAPH_BENCH_POSTGRES", "STATEGRAPH_TEST_POSTGRES");
        o.schema = fresh_name(); // made on first use, dropped at the end
        cp->config["postgres_schema"] = o.schema;
        cp->cleanup.push_back([url = o.conninfo, schema = o.schema] { postgres_drop_schema(url, schema); });
        cp->config["pool_size"] = o.pool_size;
        return std::make_shared<checkpoint::postgres_saver>(o);
    };
    auto postgres_url = [] { return server_url("STATEGRAPH_BENCH_POSTGRES", "STATEGRAPH_TEST_POSTGRES"); };
    if (kind == "postgres") {
        auto s = postgres();
        cp->saver = s;
        cp->round_trips = [s] { return s->round_trips(); };
        cp->round_trips_by_server = [s] { return std::map<std::string, std::uint64_t>{{"postgres", s->round_trips()}}; };
        cp->floor = floor_of("postgres", postgres_url(), postgres_floor);
        return cp;
    }
#endif
#ifdef STATEGRAPH_HAVE_REDIS
    auto redis = [&] {
        checkpoint::redis_options o;
        o.url = server_url("STATEGRAPH_BENCH_REDIS", "STATEGRAPH_TEST_REDIS");
        o.key_prefix = fresh_name(); // its keys deleted at the end
        cp->config["redis_key_prefix"] = o.key_prefix;
        cp->cleanup.push_back([url = o.url, prefix = o.key_prefix] { (void)redis_delete_prefix(url, prefix); });
        cp->config["pool_size"] = o.pool_size;
        return std::make_shared<checkpoint::redis_saver>(o);
    };
    auto redis_url = [] { return server_url("STATEGRAPH_BENCH_REDIS", "STATEGRAPH_TEST_REDIS"); };
    if (kind == "redis") {
        auto s = redis();
        cp->saver = s;
        cp->round_trips = [s] { return s->round_trips(); };
        cp->round_trips_by_server = [s] { return std::map<std::string, std::uint64_t>{{"redis", s->round_trips()}}; };
        cp->floor = floor_of("redis", redis_url(), redis_floor);
        return cp;
    }
#endif
#ifdef STATEGRAPH_HAVE_TIERED
    if (kind == "tiered") { // Redis first, PostgreSQL behind it (every write reaches both)
        auto back = postgres();
        auto front = redis();
        cp->round_trips = [back, front] { return back->round_trips() + front->round_trips(); };
        cp->round_trips_by_server = [back, front] {
            return std::map<std::string, std::uint64_t>{{"postgres", back->round_trips()}, {"redis", front->round_trips()}};
        };
        cp->floor = [pg = floor_of("postgres", postgres_url(), postgres_floor),
                     rd = floor_of("redis", redis_url(), redis_floor)](int n) {
            auto o = pg(n);
            o["redis"] = rd(n).at("redis");
            return o;
        };
        cp->saver = std::make_shared<checkpoint::tiered_saver>(std::move(front), std::move(back));
        return cp;
    }
#endif
    using mode = checkpoint::sqlite_options::sync_mode;
    mode sync;
    if (kind == "sqlite_normal") sync = mode::normal;
    else if (kind == "sqlite_full") sync = mode::full;
    else throw std::invalid_argument("unknown checkpointer \"" + kind + "\"");

    std::string parent = db_dir;
    if (parent.empty()) {
        const char* t = std::getenv("TMPDIR");
        parent = t && *t ? t : "/tmp";
    }
    std::string templ = (std::filesystem::path(parent) / "stategraph-bench-XXXXXX").string();
    if (!mkdtemp(templ.data())) throw std::runtime_error("cannot make a temp dir under " + parent);
    cp->dir = templ;
    cp->file = cp->dir / "checkpoints.sqlite";
    checkpoint::sqlite_options o;
    o.path = cp->file.string();
    o.synchronous = sync;
    // STATEGRAPH_BENCH_SQLITE_OWN_THREAD=1: the SQLite work on the saver's own thread
    // (own_thread = true), to compare with the default (on the callers' threads, group commit).
    const char* own_env = std::getenv("STATEGRAPH_BENCH_SQLITE_OWN_THREAD");
    o.own_thread = own_env && *own_env && std::string_view(own_env) != "0";
    // STATEGRAPH_BENCH_SQLITE_PAGE_SIZE=N: the file's page size (default: sqlite_options').
    if (const char* ps = std::getenv("STATEGRAPH_BENCH_SQLITE_PAGE_SIZE"); ps && *ps) o.page_size = std::atoi(ps);
    cp->saver = std::make_shared<checkpoint::sqlite_saver>(o);
    auto journal = sqlite_pragma_text(cp->file, "PRAGMA journal_mode");
    if (journal != "wal") throw bench_error("SQLite file is not in WAL mode (journal_mode=" + journal + ")");
    cp->config["journal_mode"] = journal;
    cp->config["synchronous"] = sync == mode::normal ? "NORMAL" : "FULL";
    cp->config["sqlite"] = sqlite3_libversion();
    cp->config["sqlite_own_thread"] = o.own_thread;
    cp->config["page_size"] = sqlite_pragma_text(cp->file, "PRAGMA page_size");
    return cp;
}

std::string fresh_thread(const std::string& prefix) {
    static const std::string tag = std::to_string(getpid()) + "-" +
                                   std::to_string(std::chrono::system_clock::now().time_since_epoch().count() % 1000000007);
    static std::atomic<unsigned long> seq{0};
    return prefix + "-" + tag + "-" + std::to_string(++seq);
}

double peak_rss_mb() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0; // ru_maxrss is in kilobytes on Linux
}

namespace {

double median(std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    const auto n = xs.size();
    return n % 2 ? xs[(n - 1) / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

/// Nearest-rank percentile, as the JS half.
double percentile(std::vector<double> xs, double p) {
    std::sort(xs.begin(), xs.end());
    auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(xs.size()))));
    return xs[rank - 1];
}

double round3(double x) { return std::round(x * 1000.0) / 1000.0; }

/// JSON text as boost::json::serialize writes it, except doubles: shortest round-trip decimal
/// ("12.5", not "1.25E1"), so the line reads like the JS half's.
void write_json(std::string& out, const boost::json::value& v) {
    switch (v.kind()) {
    case boost::json::kind::double_: {
        double d = v.get_double();
        if (!std::isfinite(d)) {
            out += "null";
            break;
        }
        char buf[64];
        auto r = std::to_chars(buf, buf + sizeof buf, d);
        out.append(buf, r.ptr);
        break;
    }
    case boost::json::kind::object: {
        out += '{';
        bool first = true;
        for (const auto& [k, x] : v.get_object()) {
            if (!first) out += ',';
            first = false;
            out += boost::json::serialize(boost::json::string_view(k));
            out += ':';
            write_json(out, x);
        }
        out += '}';
        break;
    }
    case boost::json::kind::array: {
        out += '[';
        bool first = true;
        for (const auto& x : v.get_array()) {
            if (!first) out += ',';
            first = false;
            write_json(out, x);
        }
        out += ']';
        break;
    }
    default:
        out += boost::json::serialize(v);
    }
}

[[noreturn]] void usage(const std::vector<scenario>& all, const std::string& msg) {
    if (!msg.empty()) std::cerr << "stategraph_bench: " << msg << "\n";
    std::cerr << "usage: stategraph_bench <scenario> <checkpointer> [--runs N] [--warmup N] [--smoke] [--db-dir DIR] [--durability sync|async|exit]\n"
                 "       stategraph_bench --list\nscenarios:";
    for (const auto& s : all) std::cerr << " " << s.name;
    std::cerr << "\ncheckpointers: none memory sqlite_normal sqlite_full\n";
    std::exit(2);
}

int count_arg(const std::vector<scenario>& all, const std::string& flag, const char* v) {
    if (!v) usage(all, flag + " needs a value");
    std::string s(v);
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
        usage(all, flag + " needs a whole number, got \"" + s + "\"");
    return std::atoi(v);
}

boost::json::object versions() {
    boost::json::object v;
    v["stategraph"] = STATEGRAPH_VERSION;
    v["compiler"] = "g++ " __VERSION__;
    v["boost"] = std::to_string(BOOST_VERSION / 100000) + "." + std::to_string(BOOST_VERSION / 100 % 1000) + "." +
                 std::to_string(BOOST_VERSION % 100);
    v["sqlite"] = sqlite3_libversion();
    v["build"] = STATEGRAPH_BENCH_BUILD_TYPE;
#ifdef NDEBUG
    v["assertions"] = false;
#else
    v["assertions"] = true;
#endif
    return v;
}

int run_main(int argc, char** argv) {
    std::vector<scenario> all;
    add_scenarios(all);
    add_sqlite_floor_scenario(all);

    std::vector<std::string> positional;
    std::optional<int> runs_arg, warmup_arg;
    bool smoke = false, list = false;
    std::string db_dir;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        const char* next = i + 1 < argc ? argv[i + 1] : nullptr;
        if (a == "--runs") runs_arg = count_arg(all, a, next), ++i;
        else if (a == "--warmup") warmup_arg = count_arg(all, a, next), ++i;
        else if (a == "--smoke") smoke = true;
        else if (a == "--list") list = true;
        else if (a == "--durability") {
            const std::string m = next ? next : "";
            if (m == "sync") bench_durability() = durability::sync;
            else if (m == "async") bench_durability() = durability::async;
            else if (m == "exit") bench_durability() = durability::exit;
            else usage(all, "--durability takes sync, async or exit");
            ++i;
        }
        else if (a == "--db-dir") {
            if (!next) usage(all, "--db-dir needs a value");
            db_dir = next;
            ++i;
        } else if (a == "-h" || a == "--help") usage(all, "");
        else if (!a.empty() && a[0] == '-') usage(all, "unknown option " + a);
        else positional.push_back(a);
    }
    if (list) {
        for (const auto& s : all)
            for (const auto& c : s.checkpointers) std::cout << s.name << " " << c << "\n";
        return 0;
    }
    if (positional.size() != 2) usage(all, "need <scenario> <checkpointer>");
    const auto& name = positional[0];
    const auto& kind = positional[1];
    auto it = std::find_if(all.begin(), all.end(), [&](const scenario& s) { return s.name == name; });
    if (it == all.end()) usage(all, "unknown scenario \"" + name + "\"");
    const scenario& sc = *it;
    if (std::find(all_checkpointers.begin(), all_checkpointers.end(), kind) == all_checkpointers.end() &&
        std::find(server_checkpointers.begin(), server_checkpointers.end(), kind) == server_checkpointers.end())
        usage(all, "unknown checkpointer \"" + kind + "\"");
    if (std::find(sc.checkpointers.begin(), sc.checkpointers.end(), kind) == sc.checkpointers.end()) {
        std::string list_s;
        for (const auto& c : sc.checkpointers) list_s += (list_s.empty() ? "" : ", ") + c;
        usage(all, "scenario " + name + " does not run with checkpointer \"" + kind + "\" (it runs with: " + list_s + ")");
    }

    const int warmup = warmup_arg.value_or(smoke ? 0 : sc.warmup);
    std::vector<metric_def> metrics = sc.metrics;
    if (sc.metrics_for)
        if (auto m = sc.metrics_for(kind)) metrics = *m;

    // The process's checkpointer (SQLite: a fresh file in a fresh directory).
    auto cp = sc.own_storage ? std::make_unique<checkpointer>() : make_checkpointer(kind, db_dir);
    cp->kind = kind;
    setup_context ctx;
    ctx.kind = kind;
    ctx.cp = cp.get();
    ctx.smoke = smoke;
    ctx.db_dir = db_dir;
    ctx.make_cp = [kind, db_dir] { return make_checkpointer(kind, db_dir); };

    bench_run b = sc.setup(ctx);
    auto warm = b.warmup_run ? b.warmup_run : b.run;
    std::vector<double> warm_times;
    for (int i = 0; i < warmup; ++i) {
        double w0 = now_us();
        warm();
        warm_times.push_back(now_us() - w0);
    }

    int runs;
    if (runs_arg) runs = *runs_arg;
    else if (smoke) runs = 2;
    else if (sc.default_runs) runs = *sc.default_runs;
    else {
        // Mean of the late warm-up runs, or one extra run when there were none.
        std::vector<double> late(warm_times.begin() + static_cast<std::ptrdiff_t>(warm_times.size() / 2), warm_times.end());
        double per_run;
        if (!late.empty() && !b.warmup_run) {
            per_run = std::accumulate(late.begin(), late.end(), 0.0) / static_cast<double>(late.size());
        } else {
            double c0 = now_us();
            b.run();
            per_run = now_us() - c0;
        }
        double r = std::ceil(sc.target_seconds * 1e6 / std::max(per_run, 1.0));
        runs = static_cast<int>(std::min<double>(sc.max_runs, std::max<double>(sc.min_runs, r)));
    }
    if (runs < 1) usage(all, "--runs must be at least 1");

    std::map<std::string, std::vector<double>> data;
    for (const auto& m : metrics) data[m.name];
    double t0 = now_us();
    for (int i = 0; i < runs; ++i) {
        auto s = b.run();
        for (const auto& m : metrics)
            if (auto f = s.find(m.name); f != s.end()) data[m.name].push_back(f->second);
    }
    double timed_seconds = (now_us() - t0) / 1e6;
    samples fin;
    if (b.finish) fin = b.finish();
    for (const auto& [m, v] : fin) data[m] = {v};

    boost::json::object out;
    out["scenario"] = name;
    out["checkpointer"] = kind;
    boost::json::array ms;
    for (const auto& m : metrics) {
        const auto& xs = data[m.name];
        if (xs.empty()) throw bench_error("no samples for metric " + m.name);
        boost::json::object o;
        o["metric"] = m.name;
        o["unit"] = m.unit;
        o["median"] = round3(median(xs));
        o["p90"] = round3(percentile(xs, 90));
        o["runs"] = fin.count(m.name) ? runs : static_cast<int>(xs.size());
        ms.push_back(std::move(o));
    }
    out["metrics"] = std::move(ms);
    out["versions"] = versions();
    boost::json::object config;
    config["runs"] = runs;
    config["warmup"] = warmup;
    config["smoke"] = smoke;
    config["timed_seconds"] = round3(timed_seconds);
    config["durability"] = sc.name == "durability"                  ? "per metric: sync, async, exit"
                           : bench_durability() == durability::async ? "async (LangGraph's default: a step's checkpoint put while the next step runs)"
                           : bench_durability() == durability::exit  ? "exit (one checkpoint, when the call ends)"
                                                                     : "sync (every checkpoint written before the next step)";
    for (const auto& [k, v] : cp->config) config[k] = v;
    if (const char* otlp = std::getenv("STATEGRAPH_BENCH_OTLP"); otlp && *otlp) config["otlp"] = otlp; // traced runs
    out["config"] = std::move(config);
    boost::json::object detail;
    if (b.detail) detail = b.detail();
    if (kind.rfind("sqlite_", 0) == 0 && !sc.own_storage) {
        // The physical floor in this process, right after the timed runs: fsync costs swing
        // with the machine's load, so a floor measured minutes apart would not compare.
        detail["floor"] = commit_floor(db_dir, kind == "sqlite_full", smoke ? 5 : 100);
        // Throughput: the same runs' rows alone, 64 runs a commit (all in flight), on SQLite's
        // one writer: 11 rows a run (the input and ten steps) of 85 bytes (a 74-byte record and
        // 11 bytes of values inside the row, as checkpoint_size measures this chain's checkpoints).
        // HITL: the same two calls' SQLite statements alone, the rows as this run stored them.
        if (sc.name == "hitl") detail["calls_floor"] = calls_floor(cp->file, db_dir, kind == "sqlite_full", smoke ? 5 : 2000);
        if (sc.name == "throughput")
            detail["rows_floor"] = rows_floor(db_dir, kind == "sqlite_full", smoke ? 64 : 2000, 11, 85, 64);
    }
    if (cp->floor) detail["floor"] = cp->floor(smoke ? 5 : 1000); // the same, for a server
    if (!detail.empty()) out["detail"] = std::move(detail);
    std::string line;
    write_json(line, out);
    std::cout << line << std::endl;
    return 0;
}

} // namespace
} // namespace stategraph::bench

int main(int argc, char** argv) {
    try {
        return stategraph::bench::run_main(argc, argv);
    } catch (const stategraph::bench::bench_error& e) {
        std::cerr << "stategraph_bench: " << e.what() << "\n";
    } catch (const std::exception& e) {
        std::cerr << "stategraph_bench: error: " << e.what() << "\n";
    }
    return 1;
}
