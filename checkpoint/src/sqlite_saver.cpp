#include <stategraph/checkpoint/sqlite_saver.hpp>

#include <stategraph/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <sqlite3.h>

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <string_view>
#include <unordered_map>

namespace stategraph::checkpoint {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema: an ordered list of migrations; migration i (0-based) brings the file to version i+1.
// Never edit a released migration: append a new one and bump sqlite_saver::schema_version.
// Values are JSON text stored as BLOBs of UTF-8 bytes, so length(value) is their byte size
// (and SQLite computes it without reading the value).
constexpr const char* migrations[] = {
    // v1
    R"sql(
CREATE TABLE checkpoints (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    id        TEXT NOT NULL,
    parent_id TEXT NOT NULL DEFAULT '',
    step      INTEGER NOT NULL,
    source    TEXT NOT NULL,
    versions  TEXT NOT NULL,
    frontier  TEXT NOT NULL,
    metadata  TEXT NOT NULL,
    signature TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (thread_id, ns, id)
);
CREATE TABLE blobs (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    channel   TEXT NOT NULL,
    version   TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
);
CREATE TABLE writes (
    thread_id     TEXT NOT NULL,
    ns            TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_name     TEXT NOT NULL,
    channel       TEXT NOT NULL,
    value         BLOB NOT NULL,
    seq           INTEGER NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
);
CREATE TABLE leases (
    thread_id  TEXT PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
)sql",
};
static_assert(std::size(migrations) == sqlite_saver::schema_version,
              "one migration per schema version: bump schema_version with the list");

// Statements (cached per connection, keyed by their text).
constexpr std::string_view sql_begin_immediate = "BEGIN IMMEDIATE";
constexpr std::string_view sql_begin_deferred = "BEGIN";
constexpr std::string_view sql_commit = "COMMIT";
constexpr std::string_view sql_put_checkpoint =
    "INSERT OR REPLACE INTO checkpoints(thread_id, ns, id, parent_id, step, source, versions, frontier, metadata, "
    "signature) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";
constexpr std::string_view sql_put_blob =
    "INSERT OR REPLACE INTO blobs(thread_id, ns, channel, version, value) VALUES(?1, ?2, ?3, ?4, ?5)";
constexpr std::string_view sql_put_write =
    "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT coalesce(max(seq), -1) + 1 FROM writes "
    "WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3)) "
    "ON CONFLICT(thread_id, ns, checkpoint_id, task_id, channel) DO UPDATE SET "
    "task_name = excluded.task_name, value = excluded.value";
#define STATEGRAPH_CP_COLUMNS "id, parent_id, step, source, versions, frontier, metadata, signature"
constexpr std::string_view sql_get_latest = "SELECT " STATEGRAPH_CP_COLUMNS
                                            " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                            "ORDER BY id DESC LIMIT 1";
constexpr std::string_view sql_get_by_id = "SELECT " STATEGRAPH_CP_COLUMNS
                                           " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_list = "SELECT " STATEGRAPH_CP_COLUMNS
                                      " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                      "AND (?3 IS NULL OR id < ?3) AND (?4 IS NULL OR source = ?4) "
                                      "AND (?5 IS NULL OR step = ?5) ORDER BY id DESC LIMIT ?6";
#undef STATEGRAPH_CP_COLUMNS
constexpr std::string_view sql_get_blob =
    "SELECT value FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
constexpr std::string_view sql_get_writes = "SELECT task_id, task_name, channel, value FROM writes "
                                            "WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3 ORDER BY seq";
constexpr std::string_view sql_delete_checkpoints = "DELETE FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_delete_blobs = "DELETE FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_delete_writes = "DELETE FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_delete_expired_lease =
    "DELETE FROM leases WHERE thread_id = ?1 AND owner <> ?2 AND expires_at <= ?3";
constexpr std::string_view sql_thread_namespaces =
    "SELECT ns FROM checkpoints WHERE thread_id = ?1 UNION SELECT ns FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_prune_writes =
    "DELETE FROM writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id IN (SELECT id FROM checkpoints "
    "WHERE thread_id = ?1 AND ns = ?2 ORDER BY id DESC LIMIT -1 OFFSET ?3)";
constexpr std::string_view sql_prune_checkpoints =
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id IN (SELECT id FROM checkpoints "
    "WHERE thread_id = ?1 AND ns = ?2 ORDER BY id DESC LIMIT -1 OFFSET ?3)";
constexpr std::string_view sql_kept_versions =
    "SELECT id, versions FROM checkpoints WHERE thread_id = ?1 AND ns = ?2";
constexpr std::string_view sql_blob_keys = "SELECT channel, version FROM blobs WHERE thread_id = ?1 AND ns = ?2";
constexpr std::string_view sql_delete_blob =
    "DELETE FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
constexpr std::string_view sql_clear_oldest_parent =
    "UPDATE checkpoints SET parent_id = '' WHERE thread_id = ?1 AND ns = ?2 AND id = "
    "(SELECT min(id) FROM checkpoints WHERE thread_id = ?1 AND ns = ?2)";
constexpr std::string_view sql_count_checkpoints = "SELECT count(*) FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_stats_blobs =
    "SELECT count(*), coalesce(sum(length(value)), 0) FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_stats_writes =
    "SELECT count(*), coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_get_lease = "SELECT owner, expires_at FROM leases WHERE thread_id = ?1";
constexpr std::string_view sql_put_lease =
    "INSERT OR REPLACE INTO leases(thread_id, owner, expires_at) VALUES(?1, ?2, ?3)";
constexpr std::string_view sql_renew_lease = "UPDATE leases SET expires_at = ?3 WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_lease = "DELETE FROM leases WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_all_leases = "DELETE FROM leases WHERE owner = ?1";

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string format_utc(std::int64_t ms) {
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
    return buf;
}

std::string make_owner() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "unknown-host");
    std::random_device rd;
    std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    char buf[512];
    std::snprintf(buf, sizeof buf, "%s:%ld:%016llx", host, static_cast<long>(getpid()),
                  static_cast<unsigned long long>(r));
    return buf;
}

boost::json::parse_options json_options() {
    boost::json::parse_options o;
    o.max_depth = 4096;         // serialize() has no depth limit; read back what we wrote
    o.allow_invalid_utf8 = true; // likewise for strings holding arbitrary bytes
    return o;
}

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

} // namespace

// =============================================================================================

struct sqlite_saver::impl {
    struct db_closer {
        void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
    };
    struct statement_cache {
        std::unordered_map<std::string_view, sqlite3_stmt*> map;
        statement_cache() = default;
        statement_cache(const statement_cache&) = delete;
        statement_cache& operator=(const statement_cache&) = delete;
        ~statement_cache() {
            for (auto& [sql, s] : map) sqlite3_finalize(s);
        }
    };

    sqlite_options opt;
    std::string owner;
    std::unique_ptr<sqlite3, db_closer> db; // declared before the cache: statements finalize first
    statement_cache cache;
    std::mutex mutex;

    // -- errors ---------------------------------------------------------------------------
    std::string where() const { return " (file " + opt.path + ")"; }

    static std::vector<std::string> names_of(const std::string& thread) {
        if (thread.empty()) return {};
        return {thread};
    }

    /// Throws the checkpoint_error matching a SQLite result code.
    [[noreturn]] void fail(int rc, const std::string& thread, const std::string& what) const {
        const char* msg = db ? sqlite3_errmsg(db.get()) : sqlite3_errstr(rc);
        std::string prefix = thread.empty() ? std::string() : "thread " + quote(thread) + ": ";
        switch (rc & 0xff) {
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
            throw checkpoint_error(errc::thread_busy,
                                   (thread.empty() ? std::string("the database") : "thread " + quote(thread)) +
                                       " is busy: another connection held the database lock longer than "
                                       "busy_timeout (" + std::to_string(opt.busy_timeout.count()) + " ms) while " +
                                       what + ": " + msg + where(),
                                   names_of(thread));
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
            throw checkpoint_error(errc::corrupt_checkpoint, prefix + what + ": " + msg + where(), names_of(thread));
        default:
            throw checkpoint_error(errc::storage_failure, prefix + what + ": " + msg + where(), names_of(thread));
        }
    }

    // -- statements -----------------------------------------------------------------------
    /// A cached statement in use: binds, steps, reads; resets itself at scope exit.
    class stmt {
    public:
        stmt(impl& owner, std::string_view sql, const std::string& thread, const char* what)
            : im_(owner), thread_(thread), what_(what) {
            auto it = im_.cache.map.find(sql);
            if (it == im_.cache.map.end()) {
                sqlite3_stmt* s = nullptr;
                int rc = sqlite3_prepare_v3(im_.db.get(), sql.data(), static_cast<int>(sql.size()),
                                            SQLITE_PREPARE_PERSISTENT, &s, nullptr);
                if (rc != SQLITE_OK) {
                    sqlite3_finalize(s);
                    im_.fail(rc, thread_, std::string(what_) + " (preparing a statement)");
                }
                it = im_.cache.map.emplace(sql, s).first;
            }
            s_ = it->second;
        }
        stmt(const stmt&) = delete;
        stmt& operator=(const stmt&) = delete;
        ~stmt() {
            sqlite3_reset(s_);
            sqlite3_clear_bindings(s_);
        }

        stmt& bind(int i, std::string_view v) {
            check(sqlite3_bind_text64(s_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
            return *this;
        }
        stmt& bind_blob(int i, std::string_view v) {
            // A zero-length blob must not be bound as NULL (NOT NULL column).
            static const char empty = 0;
            check(sqlite3_bind_blob64(s_, i, v.empty() ? &empty : v.data(), v.size(), SQLITE_TRANSIENT));
            return *this;
        }
        /// Binds without a copy: only for buffers that outlive this stmt (it clears its bindings at scope exit).
        stmt& bind_static(int i, std::string_view v) {
            check(sqlite3_bind_text64(s_, i, v.data(), v.size(), SQLITE_STATIC, SQLITE_UTF8));
            return *this;
        }
        stmt& bind_blob_static(int i, std::string_view v) {
            static const char empty = 0;
            check(sqlite3_bind_blob64(s_, i, v.empty() ? &empty : v.data(), v.size(), SQLITE_STATIC));
            return *this;
        }
        stmt& bind(int i, std::int64_t v) {
            check(sqlite3_bind_int64(s_, i, v));
            return *this;
        }
        stmt& bind_null(int i) {
            check(sqlite3_bind_null(s_, i));
            return *this;
        }

        /// true: a row is ready; false: done. Throws on errors.
        bool step() {
            int rc = sqlite3_step(s_);
            if (rc == SQLITE_ROW) return true;
            if (rc == SQLITE_DONE) return false;
            im_.fail(rc, thread_, what_);
        }
        void run() {
            while (step()) {
            }
        }

        bool is_null(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
        std::string_view bytes(int c) const {
            auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
            auto n = static_cast<std::size_t>(sqlite3_column_bytes(s_, c));
            return p ? std::string_view(p, n) : std::string_view();
        }
        std::string text(int c) const { return std::string(bytes(c)); }
        std::int64_t integer(int c) const { return sqlite3_column_int64(s_, c); }

    private:
        void check(int rc) {
            if (rc != SQLITE_OK) im_.fail(rc, thread_, what_);
        }
        impl& im_;
        sqlite3_stmt* s_ = nullptr;
        const std::string& thread_;
        const char* what_;
    };

    /// A transaction: BEGIN IMMEDIATE (writes) or BEGIN (a consistent read snapshot); rolled
    /// back at scope exit unless committed.
    class transaction {
    public:
        transaction(impl& owner, bool write, const std::string& thread, const char* what)
            : im_(owner), thread_(thread), what_(what) {
            stmt(im_, write ? sql_begin_immediate : sql_begin_deferred, thread_, what_).run();
        }
        transaction(const transaction&) = delete;
        transaction& operator=(const transaction&) = delete;
        void commit() {
            stmt(im_, sql_commit, thread_, what_).run();
            done_ = true;
        }
        ~transaction() {
            if (!done_ && !sqlite3_get_autocommit(im_.db.get()))
                sqlite3_exec(im_.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        }

    private:
        impl& im_;
        const std::string& thread_;
        const char* what_;
        bool done_ = false;
    };

    /// Reports an error of an uncached statement (keeping its message), then finalizes it.
    [[noreturn]] void fail_finalizing(sqlite3_stmt* s, int rc, const char* what) {
        try {
            fail(rc, "", what);
        } catch (...) {
            sqlite3_finalize(s);
            throw;
        }
    }

    /// Runs SQL text without caching (setup only).
    void exec(const std::string& sql, const char* what) {
        char* err = nullptr;
        int rc = sqlite3_exec(db.get(), sql.c_str(), nullptr, nullptr, &err);
        sqlite3_free(err);
        if (rc != SQLITE_OK) fail(rc, "", what);
    }
    std::int64_t query_int(const std::string& sql, const char* what) {
        sqlite3_stmt* s = nullptr;
        int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr);
        if (rc != SQLITE_OK) {
            sqlite3_finalize(s);
            fail(rc, "", what);
        }
        rc = sqlite3_step(s);
        std::int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
            fail_finalizing(s, rc, what);
        }
        sqlite3_finalize(s);
        return v;
    }
    std::string query_text(const std::string& sql, const char* what) {
        sqlite3_stmt* s = nullptr;
        int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr);
        if (rc != SQLITE_OK) {
            sqlite3_finalize(s);
            fail(rc, "", what);
        }
        rc = sqlite3_step(s);
        std::string v;
        if (rc == SQLITE_ROW && sqlite3_column_text(s, 0))
            v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_finalizing(s, rc, what);
        sqlite3_finalize(s);
        return v;
    }

    // -- opening --------------------------------------------------------------------------
    explicit impl(sqlite_options o) : opt(std::move(o)), owner(make_owner()) {
        if (opt.path.empty())
            throw checkpoint_error(errc::storage_failure, "sqlite_saver: sqlite_options::path is empty");
        check_header();

        int flags = opt.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        flags |= SQLITE_OPEN_NOMUTEX; // one connection, guarded by `mutex`
        sqlite3* raw = nullptr;
        int rc = sqlite3_open_v2(opt.path.c_str(), &raw, flags, nullptr);
        db.reset(raw);
        if (rc != SQLITE_OK) {
            std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
            throw checkpoint_error(errc::storage_failure,
                                   "sqlite_saver: cannot open " + opt.path + (opt.read_only ? " read-only" : "") +
                                       ": " + msg);
        }
        sqlite3_extended_result_codes(db.get(), 1);
        sqlite3_busy_timeout(db.get(), static_cast<int>(std::min<std::int64_t>(opt.busy_timeout.count(), INT_MAX)));

        // Reading the header is the first access to the file: garbage fails here, untouched.
        auto version = query_int("PRAGMA user_version", "reading the schema version");
        check_version(version);

        if (!opt.read_only) exec("PRAGMA journal_mode = WAL", "switching to WAL mode");
        static constexpr const char* sync_names[] = {"OFF", "NORMAL", "FULL"};
        exec(std::string("PRAGMA synchronous = ") + sync_names[static_cast<int>(opt.synchronous)],
             "setting synchronous");

        if (version < sqlite_saver::schema_version) {
            if (opt.read_only)
                throw checkpoint_error(errc::storage_failure,
                                       "sqlite_saver: " + opt.path + " has schema version " + std::to_string(version) +
                                           " and needs migrating to " +
                                           std::to_string(sqlite_saver::schema_version) +
                                           ", which a read-only saver cannot do");
            migrate();
        }
    }

    /// A non-empty file must start with the SQLite magic: anything else is reported, not touched.
    void check_header() const {
        if (opt.path == ":memory:") return;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(opt.path, ec)) return;
        auto size = std::filesystem::file_size(opt.path, ec);
        if (ec || size == 0) return;
        static constexpr char magic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                           'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
        char head[16] = {};
        std::ifstream in(opt.path, std::ios::binary);
        in.read(head, sizeof head);
        if (!in || std::memcmp(head, magic, sizeof magic) != 0)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path +
                                       " is not a SQLite database (bad header); the file was left untouched");
        // A database holds at least one page of at least 512 bytes: less is a truncated file.
        if (size < 512)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path + " is truncated (" + std::to_string(size) +
                                       " bytes, shorter than one database page); the file was left untouched");
    }

    void check_version(std::int64_t version) const {
        if (version > sqlite_saver::schema_version)
            throw checkpoint_error(errc::schema_too_new,
                                   "sqlite_saver: " + opt.path + " has schema version " + std::to_string(version) +
                                       ", newer than this stategraph knows (" +
                                       std::to_string(sqlite_saver::schema_version) +
                                       "); upgrade stategraph to open it");
        if (version < 0)
            throw checkpoint_error(errc::corrupt_checkpoint, "sqlite_saver: " + opt.path +
                                                                 " has a negative schema version " +
                                                                 std::to_string(version));
    }

    void migrate() {
        static const std::string none;
        transaction t(*this, true, none, "migrating the schema");
        // Another process may have migrated between our read and the lock: read again.
        auto version = query_int("PRAGMA user_version", "reading the schema version");
        check_version(version);
        for (auto v = version; v < sqlite_saver::schema_version; ++v) {
            exec(migrations[v], "migrating the schema");
            exec("PRAGMA user_version = " + std::to_string(v + 1), "migrating the schema");
        }
        t.commit();
    }

    // -- JSON -----------------------------------------------------------------------------
    [[noreturn]] void corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                              std::vector<std::string> names) const {
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "thread " + quote(thread) + (ns.empty() ? "" : " namespace " + quote(ns)) + ": " +
                                   detail + where(),
                               std::move(names));
    }

    boost::json::value parse(std::string_view text, const std::string& thread, const std::string& ns,
                             const std::string& what, std::vector<std::string> names) const {
        static const auto options = json_options();
        boost::system::error_code ec;
        boost::json::value v;
        try {
            v = boost::json::parse(text, ec, {}, options);
        } catch (const std::exception& e) { // allocation failure and the like
            corrupt(thread, ns, what + " cannot be read: " + e.what(), std::move(names));
        }
        if (ec) corrupt(thread, ns, what + " holds invalid JSON (" + ec.message() + ")", std::move(names));
        return v;
    }

    // -- checkpoints ----------------------------------------------------------------------
    /// Reads a checkpoint row (columns: STATEGRAPH_CP_COLUMNS) without its values.
    checkpoint read_row(const stmt& s, const std::string& thread, const std::string& ns) const {
        checkpoint cp;
        cp.id = s.text(0);
        cp.parent_id = s.text(1);
        cp.step = s.integer(2);
        cp.source = s.text(3);
        cp.signature = s.text(7);
        const std::string at = "checkpoint " + cp.id;
        for (int c : {4, 5, 6})
            if (s.is_null(c)) corrupt(thread, ns, at + " has no " + (c == 4 ? "versions" : c == 5 ? "frontier" : "metadata"), {thread});

        auto versions = parse(s.bytes(4), thread, ns, at + ": versions", {thread});
        if (!versions.is_object()) corrupt(thread, ns, at + ": versions is not a JSON object", {thread});
        for (const auto& [channel, version] : versions.get_object()) {
            if (!version.is_string())
                corrupt(thread, ns, at + ": the version of channel " + quote(channel) + " is not a string",
                        {thread, std::string(channel)});
            cp.versions[std::string(channel)] = std::string(version.get_string());
        }
        cp.frontier = parse(s.bytes(5), thread, ns, at + ": frontier", {thread});
        auto metadata = parse(s.bytes(6), thread, ns, at + ": metadata", {thread});
        if (!metadata.is_object()) corrupt(thread, ns, at + ": metadata is not a JSON object", {thread});
        cp.metadata = std::move(metadata.get_object());
        return cp;
    }

    /// Adds the values (from blobs) and pending writes of a checkpoint, as memory_saver::assemble.
    checkpoint_tuple assemble(const std::string& thread, const std::string& ns, checkpoint cp) {
        checkpoint_tuple t{thread, ns, std::move(cp), {}};
        const auto& id = t.cp.id;
        for (const auto& [channel, version] : t.cp.versions) {
            if (version.empty()) continue;
            stmt s(*this, sql_get_blob, thread, "reading a channel value");
            s.bind(1, thread).bind(2, ns).bind(3, channel).bind(4, version);
            if (!s.step())
                corrupt(thread, ns,
                        "checkpoint " + id + " needs channel " + quote(channel) + " at version " + version +
                            ", which is not stored",
                        {thread, channel});
            t.cp.values[channel] = parse(s.bytes(0), thread, ns,
                                         "checkpoint " + id + ": channel " + quote(channel) + " (version " + version + ")",
                                         {thread, channel});
        }
        stmt w(*this, sql_get_writes, thread, "reading pending writes");
        w.bind(1, thread).bind(2, ns).bind(3, id);
        while (w.step()) {
            pending_write pw;
            pw.task_id = w.text(0);
            pw.task_name = w.text(1);
            pw.channel = w.text(2);
            pw.value = parse(w.bytes(3), thread, ns,
                             "checkpoint " + id + ": pending write of task " + quote(pw.task_id) + " (" +
                                 pw.task_name + ") to channel " + quote(pw.channel),
                             {thread, pw.channel, pw.task_name});
            t.writes.push_back(std::move(pw));
        }
        return t;
    }

    /// Refuses to write while another owner holds a live lease; renews our own.
    void check_lease(const std::string& thread, std::int64_t now) {
        std::string holder;
        std::int64_t expires = 0;
        {
            stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
            s.bind(1, thread);
            if (!s.step()) return;
            holder = s.text(0);
            expires = s.integer(1);
        }
        if (holder != owner) {
            if (expires > now) throw_busy(thread, holder, expires);
            return;
        }
        // Our own lease: renew it only once half of its time is gone (one UPDATE less per write).
        if (expires - now > lease_ms() / 2) return;
        stmt r(*this, sql_renew_lease, thread, "renewing the thread's lease");
        r.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
        r.run();
    }

    std::int64_t lease_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(opt.lease_ttl).count();
    }

    [[noreturn]] void throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const {
        throw checkpoint_error(errc::thread_busy,
                               "thread " + quote(thread) + " is busy: held by " + holder + " until " +
                                   format_utc(expires) + where(),
                               {thread});
    }

    // -- the operations (called with `mutex` held) ------------------------------------------
    void put(const std::string& thread, const std::string& ns, const checkpoint& cp) {
        boost::json::object versions;
        for (const auto& [channel, version] : cp.versions) versions[channel] = version;
        const std::string versions_text = boost::json::serialize(versions);
        const std::string frontier_text = boost::json::serialize(cp.frontier);
        const std::string metadata_text = boost::json::serialize(cp.metadata);

        transaction t(*this, true, thread, "saving a checkpoint");
        check_lease(thread, now_ms());
        {
            // Every buffer bound here outlives `s` (declared above it or owned by the caller).
            stmt s(*this, sql_put_checkpoint, thread, "saving a checkpoint");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
            s.bind(5, cp.step).bind_static(6, cp.source);
            s.bind_static(7, versions_text).bind_static(8, frontier_text).bind_static(9, metadata_text);
            s.bind_static(10, cp.signature);
            s.run();
        }
        for (const auto& [channel, value] : cp.values) {
            const std::string text = boost::json::serialize(value);
            stmt s(*this, sql_put_blob, thread, "saving a channel value"); // declared after `text`: unbinds first
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, std::string_view(channel)).bind_static(4, cp.id);
            s.bind_blob_static(5, text);
            s.run();
        }
        t.commit();
    }

    void put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                    const std::vector<pending_write>& writes) {
        transaction t(*this, true, thread, "saving pending writes");
        check_lease(thread, now_ms());
        for (const auto& w : writes) {
            const std::string text = boost::json::serialize(w.value);
            stmt s(*this, sql_put_write, thread, "saving a pending write"); // declared after `text`: unbinds first
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, checkpoint_id).bind_static(4, w.task_id);
            s.bind_static(5, w.task_name).bind_static(6, w.channel).bind_blob_static(7, text);
            s.run();
        }
        t.commit();
    }

    std::optional<checkpoint_tuple> get(const std::string& thread, const std::string& ns,
                                        const std::optional<std::string>& checkpoint_id) {
        transaction t(*this, false, thread, "reading a checkpoint");
        std::optional<checkpoint> cp;
        {
            stmt s(*this, checkpoint_id ? sql_get_by_id : sql_get_latest, thread, "reading a checkpoint");
            s.bind(1, thread).bind(2, ns);
            if (checkpoint_id) s.bind(3, *checkpoint_id);
            if (s.step()) cp = read_row(s, thread, ns);
        }
        if (!cp) return std::nullopt;
        auto result = assemble(thread, ns, std::move(*cp));
        t.commit();
        return result;
    }

    std::vector<checkpoint_tuple> list(const std::string& thread, const std::string& ns, const list_options& o) {
        transaction t(*this, false, thread, "listing checkpoints");
        std::vector<checkpoint> rows;
        {
            stmt s(*this, sql_list, thread, "listing checkpoints");
            s.bind(1, thread).bind(2, ns);
            if (o.before) s.bind(3, *o.before);
            else s.bind_null(3);
            if (o.source) s.bind(4, *o.source);
            else s.bind_null(4);
            if (o.step) s.bind(5, *o.step);
            else s.bind_null(5);
            s.bind(6, o.limit ? static_cast<std::int64_t>(std::min<std::size_t>(*o.limit, INT64_MAX))
                              : std::int64_t{-1});
            while (s.step()) rows.push_back(read_row(s, thread, ns));
        }
        std::vector<checkpoint_tuple> out;
        out.reserve(rows.size());
        for (auto& cp : rows) out.push_back(assemble(thread, ns, std::move(cp)));
        t.commit();
        return out;
    }

    void delete_thread(const std::string& thread) {
        transaction t(*this, true, thread, "deleting the thread");
        auto now = now_ms();
        check_lease(thread, now);
        for (auto sql : {sql_delete_writes, sql_delete_blobs, sql_delete_checkpoints}) {
            stmt s(*this, sql, thread, "deleting the thread");
            s.bind(1, thread);
            s.run();
        }
        stmt l(*this, sql_delete_expired_lease, thread, "deleting the thread");
        l.bind(1, thread).bind(2, owner).bind(3, now);
        l.run();
        t.commit();
    }

    void prune(const std::string& thread, std::size_t keep_last) {
        if (keep_last == 0) keep_last = 1;
        const auto keep = static_cast<std::int64_t>(std::min<std::size_t>(keep_last, INT64_MAX));
        transaction t(*this, true, thread, "pruning the thread");
        check_lease(thread, now_ms());
        std::vector<std::string> namespaces;
        {
            stmt s(*this, sql_thread_namespaces, thread, "pruning the thread");
            s.bind(1, thread);
            while (s.step()) namespaces.push_back(s.text(0));
        }
        for (const auto& ns : namespaces) {
            for (auto sql : {sql_prune_writes, sql_prune_checkpoints}) {
                stmt s(*this, sql, thread, "pruning the thread");
                s.bind(1, thread).bind(2, ns).bind(3, keep);
                s.run();
            }
            // The blobs the kept checkpoints need; a version we cannot read aborts the prune.
            std::set<std::pair<std::string, std::string>> needed;
            {
                stmt s(*this, sql_kept_versions, thread, "pruning the thread");
                s.bind(1, thread).bind(2, ns);
                while (s.step()) {
                    const std::string at = "checkpoint " + s.text(0) + ": versions";
                    auto versions = parse(s.bytes(1), thread, ns, at, {thread});
                    if (!versions.is_object()) corrupt(thread, ns, at + " is not a JSON object", {thread});
                    for (const auto& [channel, version] : versions.get_object())
                        if (version.is_string())
                            needed.emplace(std::string(channel), std::string(version.get_string()));
                }
            }
            std::vector<std::pair<std::string, std::string>> unneeded;
            {
                stmt s(*this, sql_blob_keys, thread, "pruning the thread");
                s.bind(1, thread).bind(2, ns);
                while (s.step()) {
                    std::pair<std::string, std::string> k{s.text(0), s.text(1)};
                    if (!needed.count(k)) unneeded.push_back(std::move(k));
                }
            }
            for (const auto& [channel, version] : unneeded) {
                stmt s(*this, sql_delete_blob, thread, "pruning the thread");
                s.bind(1, thread).bind(2, ns).bind(3, channel).bind(4, version);
                s.run();
            }
            stmt s(*this, sql_clear_oldest_parent, thread, "pruning the thread");
            s.bind(1, thread).bind(2, ns);
            s.run();
        }
        t.commit();
    }

    thread_stats stats(const std::string& thread) {
        transaction t(*this, false, thread, "reading storage statistics");
        thread_stats st;
        {
            stmt s(*this, sql_count_checkpoints, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) st.checkpoints = static_cast<std::size_t>(s.integer(0));
        }
        {
            stmt s(*this, sql_stats_blobs, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) {
                st.blobs = static_cast<std::size_t>(s.integer(0));
                st.bytes += static_cast<std::size_t>(s.integer(1));
            }
        }
        {
            stmt s(*this, sql_stats_writes, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) {
                st.writes = static_cast<std::size_t>(s.integer(0));
                st.bytes += static_cast<std::size_t>(s.integer(1));
            }
        }
        t.commit();
        return st;
    }

    void acquire(const std::string& thread) {
        transaction t(*this, true, thread, "taking the thread's lease");
        auto now = now_ms();
        {
            stmt s(*this, sql_get_lease, thread, "taking the thread's lease");
            s.bind(1, thread);
            if (s.step()) {
                auto holder = s.text(0);
                auto expires = s.integer(1);
                if (holder != owner && expires > now) throw_busy(thread, holder, expires);
            }
        }
        stmt s(*this, sql_put_lease, thread, "taking the thread's lease");
        s.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
        s.run();
        t.commit();
    }

    void release(const std::string& thread) {
        transaction t(*this, true, thread, "releasing the thread's lease");
        {
            stmt s(*this, sql_release_lease, thread, "releasing the thread's lease");
            s.bind(1, thread).bind(2, owner);
            s.run();
        }
        t.commit();
    }

    ~impl() {
        if (!db || opt.read_only) return;
        try { // best effort: leave no lease of ours behind
            static const std::string none;
            std::lock_guard lock(mutex);
            transaction t(*this, true, none, "releasing leases");
            {
                stmt s(*this, sql_release_all_leases, none, "releasing leases");
                s.bind(1, owner);
                s.run();
            }
            t.commit();
        } catch (...) {
        }
    }
};

// =============================================================================================

sqlite_saver::sqlite_saver(sqlite_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

sqlite_saver::~sqlite_saver() = default;

const std::string& sqlite_saver::owner() const noexcept { return impl_->owner; }
const std::string& sqlite_saver::path() const noexcept { return impl_->opt.path; }

boost::asio::awaitable<void> sqlite_saver::put(std::string thread_id, std::string ns, checkpoint cp) {
    std::lock_guard lock(impl_->mutex);
    impl_->put(thread_id, ns, cp);
    co_return;
}

boost::asio::awaitable<void> sqlite_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    std::lock_guard lock(impl_->mutex);
    impl_->put_writes(thread_id, ns, checkpoint_id, writes);
    co_return;
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> sqlite_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    std::lock_guard lock(impl_->mutex);
    co_return impl_->get(thread_id, ns, checkpoint_id);
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> sqlite_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    std::lock_guard lock(impl_->mutex);
    co_return impl_->list(thread_id, ns, options);
}

boost::asio::awaitable<void> sqlite_saver::delete_thread(std::string thread_id) {
    std::lock_guard lock(impl_->mutex);
    impl_->delete_thread(thread_id);
    co_return;
}

boost::asio::awaitable<void> sqlite_saver::prune(std::string thread_id, std::size_t keep_last) {
    std::lock_guard lock(impl_->mutex);
    impl_->prune(thread_id, keep_last);
    co_return;
}

boost::asio::awaitable<thread_stats> sqlite_saver::stats(std::string thread_id) {
    std::lock_guard lock(impl_->mutex);
    co_return impl_->stats(thread_id);
}

boost::asio::awaitable<void> sqlite_saver::acquire(std::string thread_id) {
    std::lock_guard lock(impl_->mutex);
    impl_->acquire(thread_id);
    co_return;
}

boost::asio::awaitable<void> sqlite_saver::release(std::string thread_id) {
    std::lock_guard lock(impl_->mutex);
    impl_->release(thread_id);
    co_return;
}

} // namespace stategraph::checkpoint
