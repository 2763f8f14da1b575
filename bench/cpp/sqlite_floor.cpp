// sqlite_commit: the physical floor of a SQLite checkpointer on this machine, measured in the
// same run as the scenarios: one transaction that inserts 2 KiB, on a fresh file in WAL mode
// with synchronous = NORMAL or FULL (BEGIN IMMEDIATE; INSERT; COMMIT, prepared statements).
// No checkpointer can write a durable checkpoint for less than this. C++ only.
#include "harness.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace stategraph::bench {

namespace {

struct floor_db {
    std::filesystem::path dir;
    sqlite3* db = nullptr;
    sqlite3_stmt *begin = nullptr, *insert = nullptr, *commit = nullptr;
    std::vector<unsigned char> payload = std::vector<unsigned char>(2048, 0x5a);
    std::int64_t next_id = 0;

    void ok(int rc, const char* what) {
        if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
            throw bench_error(std::string("sqlite_commit: ") + what + ": " + sqlite3_errmsg(db));
    }
    void exec(const char* sql) { ok(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), sql); }
    std::string pragma(const char* sql) {
        sqlite3_stmt* s = nullptr;
        ok(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), sql);
        std::string out;
        if (sqlite3_step(s) == SQLITE_ROW) out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        sqlite3_finalize(s);
        return out;
    }

    floor_db(const std::string& db_dir, bool full) {
        std::string parent = db_dir;
        if (parent.empty()) {
            const char* t = std::getenv("TMPDIR");
            parent = t && *t ? t : "/tmp";
        }
        std::string templ = (std::filesystem::path(parent) / "stategraph-floor-XXXXXX").string();
        if (!mkdtemp(templ.data())) throw bench_error("sqlite_commit: cannot make a temp dir under " + parent);
        dir = templ;
        auto file = dir / "floor.sqlite";
        if (sqlite3_open(file.c_str(), &db) != SQLITE_OK) throw bench_error("sqlite_commit: cannot open " + file.string());
        exec("PRAGMA journal_mode = WAL");
        exec(full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL");
        exec("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL)");
        if (pragma("PRAGMA journal_mode") != "wal") throw bench_error("sqlite_commit: WAL mode not in effect");
        if (pragma("PRAGMA synchronous") != (full ? "2" : "1")) throw bench_error("sqlite_commit: synchronous not in effect");
        ok(sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, nullptr), "prepare BEGIN");
        ok(sqlite3_prepare_v2(db, "INSERT INTO t(id, v) VALUES(?1, ?2)", -1, &insert, nullptr), "prepare INSERT");
        ok(sqlite3_prepare_v2(db, "COMMIT", -1, &commit, nullptr), "prepare COMMIT");
    }
    ~floor_db() {
        sqlite3_finalize(begin);
        sqlite3_finalize(insert);
        sqlite3_finalize(commit);
        sqlite3_close_v2(db);
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }

    static void step(floor_db& d, sqlite3_stmt* s, const char* what) {
        d.ok(sqlite3_step(s), what);
        sqlite3_reset(s);
    }

    double one_commit() {
        const double t0 = now_us();
        step(*this, begin, "BEGIN IMMEDIATE");
        sqlite3_bind_int64(insert, 1, ++next_id);
        sqlite3_bind_blob(insert, 2, payload.data(), static_cast<int>(payload.size()), SQLITE_STATIC);
        step(*this, insert, "INSERT");
        step(*this, commit, "COMMIT");
        return now_us() - t0;
    }
};

/// The rows of the throughput scenario, with nothing around them: a checkpoint row a step, keyed
/// as the saver keys them, `runs_per_commit` runs sharing each commit, on one connection. SQLite
/// takes one writer at a time per file, so no saver stores these rows faster than this.
struct rows_db : floor_db {
    sqlite3_stmt* put = nullptr;
    explicit rows_db(const std::string& db_dir, bool full) : floor_db(db_dir, full) {
        exec("CREATE TABLE cp(thread_id TEXT NOT NULL, ns TEXT NOT NULL, id TEXT NOT NULL, parent_id TEXT NOT NULL, "
             "step INTEGER NOT NULL, source TEXT NOT NULL, record BLOB NOT NULL, PRIMARY KEY (thread_id, ns, id)) "
             "WITHOUT ROWID");
        ok(sqlite3_prepare_v2(db, "INSERT INTO cp VALUES(?1, '', ?2, ?3, ?4, ?5, ?6)", -1, &put, nullptr), "prepare INSERT");
    }
    ~rows_db() { sqlite3_finalize(put); }
    rows_db(const rows_db&) = delete;
    rows_db& operator=(const rows_db&) = delete;
};

} // namespace

boost::json::object rows_floor(const std::string& db_dir, bool full, int runs, int rows_per_run, std::size_t row_bytes,
                               int runs_per_commit) {
    rows_db db(db_dir, full);
    const std::vector<unsigned char> record(row_bytes, 0x3c);
    // Ids as the saver's: 11 characters, time-ordered; threads named as fresh_thread names them.
    auto id = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    auto id_text = [&](std::uint64_t n) {
        static const char digits[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
        std::string t(11, '-');
        for (int i = 10; i >= 0; --i, n >>= 6) t[static_cast<std::size_t>(i)] = digits[n & 63];
        return t;
    };
    auto one_run = [&](int run) {
        const std::string thread = fresh_thread("floor") + "-" + std::to_string(run);
        std::string parent;
        for (int r = 0; r < rows_per_run; ++r) {
            const std::string cp = id_text(id += 1000);
            sqlite3_bind_text(db.put, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
            sqlite3_bind_text(db.put, 2, cp.data(), static_cast<int>(cp.size()), SQLITE_STATIC);
            sqlite3_bind_text(db.put, 3, parent.data(), static_cast<int>(parent.size()), SQLITE_STATIC);
            sqlite3_bind_int64(db.put, 4, r - 1);
            sqlite3_bind_text(db.put, 5, r == 0 ? "input" : "loop", -1, SQLITE_STATIC);
            sqlite3_bind_blob(db.put, 6, record.data(), static_cast<int>(record.size()), SQLITE_STATIC);
            floor_db::step(db, db.put, "INSERT");
            parent = cp;
        }
    };
    auto batch = [&](int first, int n) {
        floor_db::step(db, db.begin, "BEGIN IMMEDIATE");
        for (int i = 0; i < n; ++i) one_run(first + i);
        floor_db::step(db, db.commit, "COMMIT");
    };
    for (int i = 0; i < 256; i += runs_per_commit) batch(-1 - i, runs_per_commit); // warm
    const double t0 = now_us();
    for (int i = 0; i < runs; i += runs_per_commit) batch(i, std::min(runs_per_commit, runs - i));
    const double us = now_us() - t0;
    boost::json::object o;
    o["us_per_run"] = us / runs;
    o["runs_per_s"] = runs / (us / 1e6);
    o["runs"] = runs;
    o["rows_per_run"] = rows_per_run;
    o["row_bytes"] = row_bytes;
    o["runs_per_commit"] = runs_per_commit;
    o["transaction"] = "BEGIN IMMEDIATE; " + std::to_string(runs_per_commit) + " runs x " + std::to_string(rows_per_run) +
                       " INSERTs of a " + std::to_string(row_bytes) +
                       "-byte row keyed (thread, ns, id), WITHOUT ROWID; COMMIT; one connection";
    return o;
}

boost::json::object commit_floor(const std::string& db_dir, bool full, int commits) {
    floor_db db(db_dir, full);
    for (int i = 0; i < 5; ++i) db.one_commit(); // page cache and WAL warm
    std::vector<double> xs;
    xs.reserve(static_cast<std::size_t>(commits));
    for (int i = 0; i < commits; ++i) xs.push_back(db.one_commit());
    std::sort(xs.begin(), xs.end());
    const auto n = xs.size();
    boost::json::object o;
    o["us_per_commit"] = n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
    o["commits"] = commits;
    o["transaction"] = "BEGIN IMMEDIATE; INSERT 2048-byte blob; COMMIT";
    return o;
}

void add_sqlite_floor_scenario(std::vector<scenario>& out) {
    scenario s;
    s.name = "sqlite_commit";
    s.checkpointers = sqlite_only;
    s.warmup = 50;
    s.target_seconds = 2;
    s.min_runs = 30;
    s.max_runs = 5000;
    s.metrics = {{"us_per_commit", "us"}};
    s.own_storage = true;
    s.setup = [](setup_context& ctx) {
        auto db = std::make_shared<floor_db>(ctx.db_dir, ctx.kind == "sqlite_full");
        bench_run b;
        b.run = [db] {
            samples x;
            x["us_per_commit"] = db->one_commit();
            return x;
        };
        b.detail = [full = ctx.kind == "sqlite_full"] {
            boost::json::object d;
            d["transaction"] = "BEGIN IMMEDIATE; INSERT 2048-byte blob; COMMIT";
            d["journal_mode"] = "wal";
            d["synchronous"] = full ? "FULL" : "NORMAL";
            return d;
        };
        return b;
    };
    out.push_back(std::move(s));
}

} // namespace stategraph::bench
