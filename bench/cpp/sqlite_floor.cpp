// sqlite_commit: the physical floor of a SQLite checkpointer on this machine, measured in the
// same run as the scenarios: one transaction that inserts 2 KiB, on a fresh file in WAL mode
// with synchronous = NORMAL or FULL (BEGIN IMMEDIATE; INSERT; COMMIT, prepared statements).
// No checkpointer can write a durable checkpoint for less than this. C++ only.
#include "harness.hpp"

#include <sqlite3.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stategraph::bench {

namespace {

/// A checkpoint id as the saver makes them: 11 characters, time-ordered (`n` a clock in ns).
std::string saver_like_id(std::uint64_t n) {
    static const char digits[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
    std::string t(11, '-');
    for (int i = 10; i >= 0; --i, n >>= 6) t[static_cast<std::size_t>(i)] = digits[n & 63];
    return t;
}

std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

double median_of(std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    const auto n = xs.size();
    return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

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
    // Ids as the saver's; threads named as fresh_thread names them.
    auto id = now_ns();
    auto one_run = [&](int run) {
        const std::string thread = fresh_thread("floor") + "-" + std::to_string(run);
        std::string parent;
        for (int r = 0; r < rows_per_run; ++r) {
            const std::string cp = saver_like_id(id += 1000);
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

namespace {

/// One stored row of a timed run, as sizes: what the calls floor writes again.
struct row_shape {
    int record = 0, vals = -1, pending = -1; // -1: NULL
    std::vector<int> writes;                 // the sizes of its rows in `writes`, if any
};

/// The SQLite statements of a HITL pair (the call that stops at the interrupt, then the resume)
/// with nothing else around them, on a fresh file with the saver's own tables: the thread's byte
/// locked in a lease file, a read transaction (the lease row, the latest checkpoint, and for a
/// thread that has one, its values and pending writes), a write transaction with the call's rows,
/// the lock given back. The rows are the sizes of one thread's rows in the timed run's file.
struct calls_db : floor_db {
    int lease_fd = -1;
    sqlite3_stmt *read = nullptr, *lease = nullptr, *latest = nullptr, *vals = nullptr, *writes = nullptr,
                 *put = nullptr, *put_write = nullptr;
    calls_db(const std::string& db_dir, bool full, const std::vector<std::string>& schema) : floor_db(db_dir, full) {
        for (const auto& sql : schema) exec(sql.c_str());
        const auto leases = dir / "floor.sqlite-leases";
        lease_fd = ::open(leases.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lease_fd < 0) throw bench_error("calls floor: cannot open " + leases.string());
        ok(sqlite3_prepare_v2(db, "BEGIN", -1, &read, nullptr), "prepare BEGIN");
        ok(sqlite3_prepare_v2(db, "SELECT owner, expires_at FROM leases WHERE thread_id = ?1", -1, &lease, nullptr),
           "prepare lease");
        ok(sqlite3_prepare_v2(db,
                              "SELECT id, parent_id, step, source, record, pending FROM checkpoints "
                              "WHERE thread_id = ?1 AND ns = '' ORDER BY id DESC LIMIT 1",
                              -1, &latest, nullptr),
           "prepare latest");
        ok(sqlite3_prepare_v2(db, "SELECT vals FROM checkpoints WHERE thread_id = ?1 AND ns = '' AND id = ?2", -1, &vals,
                              nullptr),
           "prepare vals");
        ok(sqlite3_prepare_v2(db,
                              "SELECT task_id, task_name, channel, value FROM writes "
                              "WHERE thread_id = ?1 AND ns = '' AND checkpoint_id = ?2 ORDER BY seq",
                              -1, &writes, nullptr),
           "prepare writes");
        ok(sqlite3_prepare_v2(db,
                              "INSERT INTO checkpoints(thread_id, ns, id, parent_id, step, source, record, vals, pending) "
                              "VALUES(?1, '', ?2, ?3, ?4, 'loop', ?5, ?6, ?7) ON CONFLICT(thread_id, ns, id) DO NOTHING",
                              -1, &put, nullptr),
           "prepare INSERT");
        ok(sqlite3_prepare_v2(db,
                              "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
                              "VALUES(?1, '', ?2, 'task', 'node', ?3, ?4, ?3)",
                              -1, &put_write, nullptr),
           "prepare INSERT write");
    }
    ~calls_db() {
        for (auto* s : {read, lease, latest, vals, writes, put, put_write}) sqlite3_finalize(s);
        if (lease_fd >= 0) ::close(lease_fd);
    }
    calls_db(const calls_db&) = delete;
    calls_db& operator=(const calls_db&) = delete;

    void lock(const std::string& thread, short type) {
        struct flock f {};
        f.l_type = type;
        f.l_whence = SEEK_SET;
        f.l_start = static_cast<off_t>(std::hash<std::string>{}(thread) >> 2);
        f.l_len = 1;
        if (::fcntl(lease_fd, F_OFD_SETLK, &f) != 0) throw bench_error("calls floor: lease lock refused");
    }
    static void drain(floor_db& d, sqlite3_stmt* s, const char* what) {
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        }
        d.ok(rc, what);
        sqlite3_reset(s);
    }

    /// One call: its start (lock, read) and its end (the rows, the commit, the lock given back).
    void call(const std::string& thread, const std::vector<row_shape>& rows, std::vector<std::string>& ids,
              const std::vector<unsigned char>& bytes) {
        lock(thread, F_WRLCK);
        step(*this, read, "BEGIN");
        sqlite3_bind_text(lease, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
        drain(*this, lease, "SELECT lease");
        sqlite3_bind_text(latest, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
        std::string last;
        if (int rc = sqlite3_step(latest); rc == SQLITE_ROW) {
            last = reinterpret_cast<const char*>(sqlite3_column_text(latest, 0));
            (void)sqlite3_column_blob(latest, 4);
        } else {
            ok(rc, "SELECT latest");
        }
        sqlite3_reset(latest);
        if (!last.empty())
            for (auto* s : {vals, writes}) {
                sqlite3_bind_text(s, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
                sqlite3_bind_text(s, 2, last.data(), static_cast<int>(last.size()), SQLITE_STATIC);
                drain(*this, s, "SELECT values");
            }
        step(*this, commit, "COMMIT");
        step(*this, begin, "BEGIN IMMEDIATE");
        auto bind = [&](int col, int n) {
            if (n < 0) sqlite3_bind_null(put, col);
            else sqlite3_bind_blob(put, col, bytes.data(), n, SQLITE_STATIC);
        };
        for (const auto& r : rows) {
            const std::string& id = ids.emplace_back(next_checkpoint_id());
            sqlite3_bind_text(put, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
            sqlite3_bind_text(put, 2, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
            sqlite3_bind_text(put, 3, last.data(), static_cast<int>(last.size()), SQLITE_TRANSIENT);
            sqlite3_bind_int64(put, 4, static_cast<sqlite3_int64>(ids.size()) - 2);
            bind(5, r.record);
            bind(6, r.vals);
            bind(7, r.pending);
            step(*this, put, "INSERT checkpoint");
            for (std::size_t w = 0; w < r.writes.size(); ++w) {
                sqlite3_bind_text(put_write, 1, thread.data(), static_cast<int>(thread.size()), SQLITE_STATIC);
                sqlite3_bind_text(put_write, 2, id.data(), static_cast<int>(id.size()), SQLITE_STATIC);
                sqlite3_bind_int64(put_write, 3, static_cast<sqlite3_int64>(w));
                sqlite3_bind_blob(put_write, 4, bytes.data(), r.writes[w], SQLITE_STATIC);
                step(*this, put_write, "INSERT write");
            }
            last = id;
        }
        step(*this, commit, "COMMIT");
        lock(thread, F_UNLCK);
    }

    /// Ids as the saver's, one clock for the whole floor.
    std::string next_checkpoint_id() { return saver_like_id(clock += 1000); }
    std::uint64_t clock = now_ns();
};

/// Reads, from the timed run's file, the saver's table definitions and one thread's rows (sizes
/// only), split where the first call ended: at the row that holds the interrupt's pending write
/// (inside the row, or in `writes`).
struct timed_rows {
    std::vector<std::string> schema;
    std::vector<row_shape> first, second;
};

timed_rows read_timed_rows(const std::filesystem::path& file) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close_v2(db);
        throw bench_error("calls floor: cannot open " + file.string());
    }
    std::unique_ptr<sqlite3, int (*)(sqlite3*)> guard(db, sqlite3_close_v2);
    auto query = [&](const char* sql, auto&& each) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK)
            throw bench_error(std::string("calls floor: ") + sql + ": " + sqlite3_errmsg(db));
        while (sqlite3_step(s) == SQLITE_ROW) each(s);
        sqlite3_finalize(s);
    };
    timed_rows out;
    query("SELECT sql FROM sqlite_schema WHERE tbl_name IN ('checkpoints', 'writes', 'leases') AND sql IS NOT NULL "
          "ORDER BY type = 'index'",
          [&](sqlite3_stmt* s) { out.schema.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0))); });
    std::string thread;
    query("SELECT thread_id FROM checkpoints WHERE ns = '' AND pending IS NOT NULL "
          "UNION ALL SELECT thread_id FROM writes WHERE ns = '' LIMIT 1",
          [&](sqlite3_stmt* s) { thread = reinterpret_cast<const char*>(sqlite3_column_text(s, 0)); });
    if (thread.empty()) throw bench_error("calls floor: no paused thread in " + file.string());
    const std::string rows_sql = "SELECT length(record), length(vals), length(pending), id FROM checkpoints "
                                 "WHERE thread_id = '" + thread + "' AND ns = '' ORDER BY id";
    bool paused = false;
    query(rows_sql.c_str(), [&](sqlite3_stmt* s) {
        row_shape r;
        r.record = sqlite3_column_int(s, 0);
        r.vals = sqlite3_column_type(s, 1) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 1);
        r.pending = sqlite3_column_type(s, 2) == SQLITE_NULL ? -1 : sqlite3_column_int(s, 2);
        const std::string writes_sql = "SELECT length(value) FROM writes WHERE thread_id = '" + thread +
                                       "' AND ns = '' AND checkpoint_id = '" +
                                       reinterpret_cast<const char*>(sqlite3_column_text(s, 3)) + "' ORDER BY seq";
        query(writes_sql.c_str(), [&](sqlite3_stmt* w) { r.writes.push_back(sqlite3_column_int(w, 0)); });
        const bool interrupt = r.pending >= 0 || !r.writes.empty();
        (paused ? out.second : out.first).push_back(std::move(r));
        if (interrupt) paused = true;
    });
    if (out.schema.empty() || out.second.empty()) throw bench_error("calls floor: no resumed thread in " + file.string());
    return out;
}


} // namespace

boost::json::object calls_floor(const std::filesystem::path& timed_file, const std::string& db_dir, bool full, int pairs) {
    const auto rows = read_timed_rows(timed_file);
    calls_db db(db_dir, full, rows.schema);
    std::size_t widest = 0;
    for (const auto* part : {&rows.first, &rows.second})
        for (const auto& r : *part) {
            widest = std::max({widest, std::size_t(r.record), std::size_t(std::max(r.vals, 0)),
                               std::size_t(std::max(r.pending, 0))});
            for (int w : r.writes) widest = std::max(widest, std::size_t(w));
        }
    const std::vector<unsigned char> bytes(widest, 0x3c);
    std::vector<double> first, second;
    std::vector<std::string> ids;
    // Threads named as the timed run named its own, counted from 1 on this fresh file, so that
    // their rows land where the run's landed in its b-tree (after "-1" comes "-10": in the middle)
    const std::string prefix = "floor-" + std::to_string(::getpid()) + "-";
    for (int i = -50; i < pairs; ++i) { // 50 pairs to warm the page cache, as the run's warm-up
        const std::string thread = prefix + std::to_string(i + 51);
        ids.clear();
        const double t0 = now_us();
        db.call(thread, rows.first, ids, bytes);
        const double t1 = now_us();
        db.call(thread, rows.second, ids, bytes);
        const double t2 = now_us();
        if (i < 0) continue;
        first.push_back(t1 - t0);
        second.push_back(t2 - t1);
    }
    boost::json::object o;
    o["us_first_call"] = median_of(first);
    o["us_second_call"] = median_of(second);
    o["pairs"] = pairs;
    o["rows"] = boost::json::array{rows.first.size(), rows.second.size()};
    o["transaction"] = "per call: the thread's lease-file byte locked; BEGIN; the lease row, the latest checkpoint (and "
                       "its values and pending writes); COMMIT; BEGIN IMMEDIATE; the call's checkpoint rows and pending writes "
                       "(sizes of one thread of the timed run); COMMIT (one, as async durability ends a call; sync "
                       "durability commits each checkpoint); the lock given back";
    return o;
}

boost::json::object commit_floor(const std::string& db_dir, bool full, int commits) {
    floor_db db(db_dir, full);
    for (int i = 0; i < 5; ++i) db.one_commit(); // page cache and WAL warm
    std::vector<double> xs;
    xs.reserve(static_cast<std::size_t>(commits));
    for (int i = 0; i < commits; ++i) xs.push_back(db.one_commit());
    boost::json::object o;
    o["us_per_commit"] = median_of(std::move(xs));
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
