#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/checkpoint/reserved.hpp>

#include <stategraph/error.hpp>

#include "cipher.hpp"
#include "codec.hpp"
#include "lease_owner.hpp"
#include "saver_common.hpp"
#include "sqlite_checksum_vfs.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <sqlite3.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace stategraph::checkpoint {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema: an ordered list of migrations; migration i (0-based) brings the file to version i+1.
// Never edit a released migration: append a new one and bump sqlite_saver::schema_version.
// A migration is SQL, optionally followed by a C++ step and more SQL, all in one transaction
// (see impl::migrate). Values are stored as BLOBs, so length(value) is their byte size (and
// SQLite computes it without reading the value).

// v1: JSON text columns, rowid tables.
constexpr const char* migration_v1 = R"sql(
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
)sql";

// v2: WITHOUT ROWID tables (one b-tree each instead of a table plus its primary-key index), a
// checkpoint's versions/frontier/metadata/signature in one binary `record` (codec::encode_record),
// values in codec::encode_value form (JSON text, or appended items and the version they extend),
// and `graphs`: one `__graph__` value per graph signature, shared by every thread. The small values
// a checkpoint writes live in its own row (`vals`, codec::encode_inline), so that a typical put
// changes one b-tree page: one WAL frame per commit; larger values go to `blobs`.
// Step 1 creates the new tables under temporary names and copies blobs and writes as they are
// (v1 values are JSON text: the codec's whole-value form); the C++ step converts checkpoint
// rows (impl::convert_v1_checkpoints); step 2 swaps the tables.
constexpr const char* migration_v2_create = R"sql(
CREATE TABLE checkpoints_v2 (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    id        TEXT NOT NULL,
    parent_id TEXT NOT NULL DEFAULT '',
    step      INTEGER NOT NULL,
    source    TEXT NOT NULL,
    record    BLOB NOT NULL,
    vals      BLOB,
    PRIMARY KEY (thread_id, ns, id)
) WITHOUT ROWID;
CREATE TABLE blobs_v2 (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    channel   TEXT NOT NULL,
    version   TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
) WITHOUT ROWID;
CREATE TABLE writes_v2 (
    thread_id     TEXT NOT NULL,
    ns            TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_name     TEXT NOT NULL,
    channel       TEXT NOT NULL,
    value         BLOB NOT NULL,
    seq           INTEGER NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
) WITHOUT ROWID;
CREATE TABLE graphs (
    version TEXT PRIMARY KEY NOT NULL,
    value   BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO blobs_v2(thread_id, ns, channel, version, value)
    SELECT thread_id, ns, channel, version, CAST(value AS BLOB) FROM blobs;
INSERT INTO writes_v2(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq)
    SELECT thread_id, ns, checkpoint_id, task_id, task_name, channel, CAST(value AS BLOB), seq FROM writes;
)sql";
constexpr const char* migration_v2_swap = R"sql(
DROP TABLE checkpoints;
DROP TABLE blobs;
DROP TABLE writes;
ALTER TABLE checkpoints_v2 RENAME TO checkpoints;
ALTER TABLE blobs_v2 RENAME TO blobs;
ALTER TABLE writes_v2 RENAME TO writes;
)sql";
// Version 3 stores records, values and pending writes sealed (codec::seal: a checksum bound to
// where the bytes are stored). Rows of earlier versions stay as they are and are read unchecked;
// the version only keeps older stategraph builds, which cannot read sealed bytes, out.
constexpr const char* migration_v3 = "-- records, values and pending writes may be sealed from now on";
// Version 4 seals a record with the columns beside it too (parent, step, source): a changed
// column is caught like a changed record byte. Records sealed by version 3 still read (bound to
// thread, namespace and id only); the version keeps version-3 builds, which would find every new
// record's checksum wrong, out.
constexpr const char* migration_v4 = "-- records sealed with their parent, step and source from now on";
// Version 5: facts about the whole file. `encryption` marks an encrypted file (a known text
// encrypted with its key: impl::check_encryption); files without it are not encrypted.
constexpr const char* migration_v5 = R"sql(
CREATE TABLE settings (
    name  TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;
)sql";
// Version 6: the node cache (saver::cache_put). Entries belong to no thread; `expires_at` is in
// milliseconds since the epoch (NULL: never). Values are sealed, or encrypted, to (ns, key,
// expires_at), so an entry moved to another key or given another expiry reads as corrupt.
constexpr const char* migration_v6 = R"sql(
CREATE TABLE cache (
    ns         TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
)sql";

constexpr const char* sql_v1_checkpoints =
    "SELECT thread_id, ns, id, parent_id, step, source, versions, frontier, metadata, signature FROM checkpoints";
constexpr const char* sql_v2_put_checkpoint =
    "INSERT INTO checkpoints_v2(thread_id, ns, id, parent_id, step, source, record) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)";

/// The channel holding the graph's shape lines, versioned by the graph signature.
constexpr std::string_view graph_channel = reserved::graph;

// Statements (cached per connection, keyed by their address: each is one constant below).
constexpr std::string_view sql_begin_immediate = "BEGIN IMMEDIATE";
constexpr std::string_view sql_begin_deferred = "BEGIN";
constexpr std::string_view sql_commit = "COMMIT";
// One write of a batch (impl::write_batch): undone alone when it fails.
constexpr std::string_view sql_savepoint = "SAVEPOINT batch_item";
constexpr std::string_view sql_release_savepoint = "RELEASE batch_item";
constexpr std::string_view sql_rollback_savepoint = "ROLLBACK TO batch_item";
constexpr std::string_view sql_put_checkpoint =
    "INSERT INTO checkpoints(thread_id, ns, id, parent_id, step, source, record, vals) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT(thread_id, ns, id) DO NOTHING";
constexpr std::string_view sql_replace_checkpoint =
    "UPDATE checkpoints SET parent_id = ?4, step = ?5, source = ?6, record = ?7, vals = ?8 "
    "WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_get_inline = "SELECT vals FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_doomed_inline =
    "SELECT id, vals FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND vals IS NOT NULL "
    "ORDER BY id DESC LIMIT -1 OFFSET ?3";
constexpr std::string_view sql_stats_inline =
    "SELECT vals FROM checkpoints WHERE thread_id = ?1 AND vals IS NOT NULL";
constexpr std::string_view sql_put_blob =
    "INSERT OR REPLACE INTO blobs(thread_id, ns, channel, version, value) VALUES(?1, ?2, ?3, ?4, ?5)";
constexpr std::string_view sql_put_graph = "INSERT OR IGNORE INTO graphs(version, value) VALUES(?1, ?2)";
constexpr std::string_view sql_put_write =
    "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT coalesce(max(seq), -1) + 1 FROM writes "
    "WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3)) "
    "ON CONFLICT(thread_id, ns, checkpoint_id, task_id, channel) DO UPDATE SET "
    "task_name = excluded.task_name, value = excluded.value";
#define STATEGRAPH_CP_COLUMNS "id, parent_id, step, source, record"
constexpr std::string_view sql_get_latest = "SELECT " STATEGRAPH_CP_COLUMNS
                                            " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                            "ORDER BY id DESC LIMIT 1";
constexpr std::string_view sql_get_by_id = "SELECT " STATEGRAPH_CP_COLUMNS
                                           " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_list = "SELECT " STATEGRAPH_CP_COLUMNS
                                      " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                      "AND (?3 IS NULL OR id < ?3) AND (?4 IS NULL OR source = ?4) "
                                      "AND (?5 IS NULL OR step = ?5) ORDER BY id DESC LIMIT ?6";
constexpr std::string_view sql_kept_records = "SELECT " STATEGRAPH_CP_COLUMNS
                                              " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                              "ORDER BY id DESC LIMIT ?3";
constexpr std::string_view sql_oldest_record = "SELECT " STATEGRAPH_CP_COLUMNS
                                               " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 ORDER BY id LIMIT 1";
#undef STATEGRAPH_CP_COLUMNS
constexpr std::string_view sql_get_blob =
    "SELECT value FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
constexpr std::string_view sql_get_graph = "SELECT value FROM graphs WHERE version = ?1";
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
constexpr std::string_view sql_blob_keys = "SELECT channel, version FROM blobs WHERE thread_id = ?1 AND ns = ?2";
constexpr std::string_view sql_delete_blob =
    "DELETE FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
constexpr std::string_view sql_clear_parent =
    "UPDATE checkpoints SET parent_id = '', record = ?4 WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_stats_checkpoints =
    "SELECT count(*), coalesce(sum(length(record)), 0) FROM checkpoints WHERE thread_id = ?1";
// Column 2 counts the sealed values (codec::seal), column 3 the encrypted ones (codec::cipher).
constexpr std::string_view sql_stats_blobs =
    "SELECT count(*), coalesce(sum(length(value)), 0), coalesce(sum(substr(value, 1, 1) = x'C5'), 0), "
    "coalesce(sum(substr(value, 1, 1) = x'E5'), 0) FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_stats_writes =
    "SELECT count(*), coalesce(sum(length(value)), 0), coalesce(sum(substr(value, 1, 1) = x'C5'), 0), "
    "coalesce(sum(substr(value, 1, 1) = x'E5'), 0) FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_get_lease = "SELECT owner, expires_at FROM leases WHERE thread_id = ?1";
constexpr std::string_view sql_put_lease =
    "INSERT OR REPLACE INTO leases(thread_id, owner, expires_at) VALUES(?1, ?2, ?3)";
constexpr std::string_view sql_renew_lease = "UPDATE leases SET expires_at = ?3 WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_lease = "DELETE FROM leases WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_all_leases = "DELETE FROM leases WHERE owner = ?1";
constexpr std::string_view sql_break_lease = "DELETE FROM leases WHERE thread_id = ?1 RETURNING owner";
// Thread maintenance.
constexpr std::string_view sql_thread_exists =
    "SELECT EXISTS(SELECT 1 FROM checkpoints WHERE thread_id = ?1) OR EXISTS(SELECT 1 FROM writes WHERE thread_id = ?1) "
    "OR EXISTS(SELECT 1 FROM blobs WHERE thread_id = ?1)";
constexpr std::string_view sql_copy_source_checkpoints =
    "SELECT ns, id, parent_id, step, source, record, vals FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_copy_checkpoint =
    "INSERT INTO checkpoints(thread_id, ns, id, parent_id, step, source, record, vals) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
// Values are sealed to (channel, version), not to their thread: their rows are copied as they are.
constexpr std::string_view sql_copy_blobs =
    "INSERT INTO blobs(thread_id, ns, channel, version, value) "
    "SELECT ?2, ns, channel, version, value FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_copy_source_writes =
    "SELECT ns, checkpoint_id, task_id, task_name, channel, value, seq FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_copy_write =
    "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
// rewind_thread: everything of a thread newer than one of its checkpoints (every namespace).
constexpr std::string_view sql_rewind_target = "SELECT EXISTS(SELECT 1 FROM checkpoints WHERE thread_id = ?1 AND id = ?2)";
constexpr std::string_view sql_rewind_writes = "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_id > ?2";
// Values kept apart under a version that a checkpoint going made (its own id, same namespace).
constexpr std::string_view sql_rewind_blobs =
    "DELETE FROM blobs WHERE thread_id = ?1 AND version > ?2 AND EXISTS(SELECT 1 FROM checkpoints c "
    "WHERE c.thread_id = blobs.thread_id AND c.ns = blobs.ns AND c.id = blobs.version)";
constexpr std::string_view sql_rewind_checkpoints = "DELETE FROM checkpoints WHERE thread_id = ?1 AND id > ?2";
// Threads by their newest checkpoint (any namespace), with their count and the head of the root
// namespace; ids are time-ordered text, so max(id) is the newest.
constexpr std::string_view sql_list_threads =
    "SELECT thread_id, max(id), count(*), "
    "(SELECT max(h.id) FROM checkpoints h WHERE h.thread_id = c.thread_id AND h.ns = '') "
    "FROM checkpoints c GROUP BY thread_id ORDER BY 2 DESC, 1 LIMIT ?1 OFFSET ?2";
constexpr std::string_view sql_expired_threads =
    "SELECT thread_id FROM checkpoints GROUP BY thread_id HAVING max(id) < ?1";
constexpr std::string_view sql_thread_newest = "SELECT max(id), count(*) FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_count_checkpoints = "SELECT count(*) FROM checkpoints WHERE thread_id = ?1";
// Encryption.
constexpr std::string_view sql_get_setting = "SELECT value FROM settings WHERE name = ?1";
constexpr std::string_view sql_put_setting = "INSERT INTO settings(name, value) VALUES(?1, ?2)";
constexpr std::string_view sql_holds_data =
    "SELECT EXISTS(SELECT 1 FROM checkpoints) OR EXISTS(SELECT 1 FROM blobs) OR EXISTS(SELECT 1 FROM writes) "
    "OR EXISTS(SELECT 1 FROM graphs) OR EXISTS(SELECT 1 FROM cache)";
// Node cache.
constexpr std::string_view sql_cache_get = "SELECT value, expires_at FROM cache WHERE ns = ?1 AND key = ?2";
constexpr std::string_view sql_cache_put =
    "INSERT OR REPLACE INTO cache(ns, key, value, expires_at) VALUES(?1, ?2, ?3, ?4)";
constexpr std::string_view sql_cache_purge =
    "DELETE FROM cache WHERE ns = ?1 AND expires_at IS NOT NULL AND expires_at <= ?2";
constexpr std::string_view sql_cache_clear_ns = "DELETE FROM cache WHERE ns = ?1";
constexpr std::string_view sql_cache_clear_all = "DELETE FROM cache";
/// The channel name a cache entry is sealed to, beside its namespace, key and expiry.
constexpr std::string_view cache_channel = "__cache__";
/// The settings row of an encrypted file, and the text its value decrypts to with the right key.
constexpr std::string_view encryption_setting = "encryption";
constexpr std::string_view encryption_check = "stategraph encrypted file: xchacha20poly1305-ietf";

using common::now_ms;
using common::quote;

} // namespace

// =============================================================================================

struct sqlite_saver::impl {
    struct db_closer {
        void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
    };
    struct statement_cache {
        // Keyed by the address of the SQL text: every cached statement is one of the constants
        // above, so this saves hashing and comparing the whole text on each use.
        std::unordered_map<const char*, sqlite3_stmt*> map;
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
    /// The thread SQLite work runs on (none with `own_thread = false`, the default: it runs on
    /// the callers' executors). Declared after the connection: joined before it closes.
    std::optional<boost::asio::thread_pool> pool;

    /// One call waiting in `queue`: its SQLite work and the way back to its caller.
    struct job {
        virtual ~job() = default;
        /// The SQLite work, with `mutex` held, maybe inside a batch's transaction (its own then
        /// nested). Throws its error.
        virtual void run() = 0;
        /// Hands `error` (or the result) back: posts the caller's completion to its executor.
        virtual void complete() noexcept = 0;
        /// Where the caller runs (a flush for this job may be posted there).
        virtual boost::asio::any_io_executor executor() const = 0;
        /// A `put` or `put_writes`: queued even when the saver is idle, so that the writes of the
        /// same event-loop turn join it; `thread` names the thread it writes (null: another call).
        bool batched = false;
        const std::string* thread = nullptr;
        const char* what = nullptr;
        std::exception_ptr error;
    };
    /// Calls waiting for the next flush, in arrival order (guarded by `queue_mutex`). A call
    /// that finds the saver idle (`leading` false, nothing queued) becomes the leader and runs
    /// at once, inside the awaiting coroutine, except a write, which queues and posts a flush to
    /// its own executor: the calls of the other coroutines that are ready in the same event-loop
    /// turn, and those arriving while a flush commits, join it (group commit: one transaction,
    /// one fsync) without any timer.
    std::mutex queue_mutex;
    std::vector<std::unique_ptr<job>> queue;
    bool leading = false;     ///< a flush, or an inline call, is running (guarded by `queue_mutex`)
    bool flush_posted = false; ///< a flush is posted and has not started (guarded by `queue_mutex`)
    /// Graph versions stored by the batch's transaction so far; they join `stored_graphs` when it commits.
    std::vector<std::string> batch_graphs;
    /// Leases taken by `acquire` calls inside the batch's transaction so far; they join `held`
    /// when it commits (a batch that fails to commit took no lease).
    std::vector<std::string> batch_leases;

    /// Threads whose lease this saver took and has not released (guarded by `mutex`); `lost`:
    /// those of them another owner took over. Writes on a thread in `held` must find our lease.
    std::set<std::string> held, lost;
    /// The lease keeper: renews the leases in `held` every third of their time to live, on a
    /// thread of its own, so that a lease outlives a node however long it runs (and however busy
    /// the caller's threads are). Started by the first `acquire`.
    struct keeper_state {
        std::mutex mutex;
        std::condition_variable wake;
        bool stopping = false;
        std::thread thread;
    } keeper;

    /// The key of an encrypted file (none: not encrypted).
    std::unique_ptr<codec::cipher> box;

    /// Graph versions known to be in `graphs` (rows there are never deleted).
    std::set<std::string> stored_graphs;
    /// Rows' inline values read during one operation, by (ns, checkpoint id); cleared by each
    /// operation that reads values (a put may change them).
    std::map<std::pair<std::string, std::string>, std::optional<std::string>> inline_rows;

    // -- errors ---------------------------------------------------------------------------
    std::string where() const { return " (file " + opt.path + ")"; }

    /// Damage SQLite found in the file (a page failing its checksum, a broken b-tree): once
    /// set, no write goes into the file (`refuse_write`); the threads whose calls found it.
    /// Guarded by `mutex` like the connection (fail() runs under it).
    mutable std::optional<std::string> damage;
    mutable std::set<std::string> damaged_threads;

    /// Whether a SQLite result code says the file is damaged.
    static bool is_damage(int rc) {
        return (rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB || rc == SQLITE_IOERR_DATA;
    }

    /// What SQLite found, said plainly (a failed page checksum names its page).
    std::string damage_text(int rc, const char* msg) const {
        if (rc != SQLITE_IOERR_DATA) return std::string("the file is damaged: ") + msg;
        const auto page = db ? detail::last_damaged_page(db.get()) : std::nullopt;
        return (page ? "page " + std::to_string(*page) : std::string("a page")) +
               " of the file is damaged (its checksum does not match its bytes)";
    }

    /// Refuses a write into a file found damaged: it would build on a broken b-tree.
    [[noreturn]] void refuse_write(const std::string& thread, const char* what) const {
        std::string affected;
        for (const auto& t : damaged_threads) affected += (affected.empty() ? "" : ", ") + quote(t);
        auto names = names_of(thread);
        for (const auto& t : damaged_threads)
            if (t != thread) names.push_back(t);
        throw checkpoint_error(errc::corrupt_checkpoint,
                               (thread.empty() ? std::string() : "thread " + quote(thread) + ": ") + what +
                                   " refused: the file was found damaged earlier (" + *damage + ")" +
                                   (affected.empty() ? std::string() : ", reading thread " + affected) +
                                   "; nothing more is written into it" + where(),
                               std::move(names));
    }

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
        default:
            if (is_damage(rc)) {
                auto text = damage_text(rc, msg);
                if (!damage) damage = text;
                if (!thread.empty()) damaged_threads.insert(thread);
                throw checkpoint_error(errc::corrupt_checkpoint, prefix + what + ": " + text + where(), names_of(thread));
            }
            throw checkpoint_error(errc::storage_failure, prefix + what + ": " + msg + where(), names_of(thread));
        }
    }

    // -- statements -----------------------------------------------------------------------
    struct uncached_t {};
    static constexpr uncached_t uncached{};

    /// A cached statement in use: binds, steps, reads; resets itself at scope exit.
    class stmt {
    public:
        /// `sql` must be one of the `sql_*` constants (the cache is keyed by its address).
        stmt(impl& owner, std::string_view sql, const std::string& thread, const char* what)
            : im_(owner), thread_(thread), what_(what) {
            auto it = im_.cache.map.find(sql.data());
            if (it == im_.cache.map.end()) {
                it = im_.cache.map.emplace(sql.data(), prepare(sql, SQLITE_PREPARE_PERSISTENT)).first;
            }
            s_ = it->second;
        }
        /// A statement used once (setup and migrations): finalized at scope exit.
        stmt(impl& owner, uncached_t, std::string_view sql, const std::string& thread, const char* what)
            : im_(owner), thread_(thread), what_(what), owned_(true) {
            s_ = prepare(sql, 0);
        }
        stmt(const stmt&) = delete;
        stmt& operator=(const stmt&) = delete;
        ~stmt() {
            if (owned_) {
                sqlite3_finalize(s_);
                return;
            }
            sqlite3_reset(s_);
            sqlite3_clear_bindings(s_);
        }
        /// Ready to bind and run again.
        void reset() {
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
        sqlite3_stmt* prepare(std::string_view sql, unsigned flags) {
            sqlite3_stmt* s = nullptr;
            int rc = sqlite3_prepare_v3(im_.db.get(), sql.data(), static_cast<int>(sql.size()), flags, &s, nullptr);
            if (rc != SQLITE_OK) {
                sqlite3_finalize(s);
                im_.fail(rc, thread_, std::string(what_) + " (preparing a statement)");
            }
            return s;
        }
        void check(int rc) {
            if (rc != SQLITE_OK) im_.fail(rc, thread_, what_);
        }
        impl& im_;
        sqlite3_stmt* s_ = nullptr;
        const std::string& thread_;
        const char* what_;
        bool owned_ = false;
    };

    /// A transaction: BEGIN IMMEDIATE (writes) or BEGIN (a consistent read snapshot); rolled
    /// back at scope exit unless committed. Inside a batch's transaction (impl::write_batch) it
    /// is `nested`: it begins and commits nothing, the batch does (and undoes a failed call's
    /// work with its savepoint).
    class transaction {
    public:
        transaction(impl& owner, bool write, const std::string& thread, const char* what)
            : im_(owner), thread_(thread), what_(what), nested_(!sqlite3_get_autocommit(owner.db.get())) {
            if (write && im_.damage) im_.refuse_write(thread_, what_);
            if (!nested_) stmt(im_, write ? sql_begin_immediate : sql_begin_deferred, thread_, what_).run();
        }
        transaction(const transaction&) = delete;
        transaction& operator=(const transaction&) = delete;
        void commit() {
            if (!nested_) stmt(im_, sql_commit, thread_, what_).run();
            done_ = true;
        }
        /// Whether the batch's transaction, not this one, commits the work.
        bool nested() const noexcept { return nested_; }
        ~transaction() {
            if (!nested_ && !done_ && !sqlite3_get_autocommit(im_.db.get()))
                sqlite3_exec(im_.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
        }

    private:
        impl& im_;
        const std::string& thread_;
        const char* what_;
        bool nested_;
        bool done_ = false;
    };

    /// A graph version is in `graphs` once `t` committed: at once, or when the batch does.
    void graph_stored(const transaction& t, const std::string& version) {
        if (t.nested()) batch_graphs.push_back(version);
        else stored_graphs.insert(version);
    }

    /// The lease of `thread` is ours once `t` committed: at once, or when the batch does.
    void lease_taken(const transaction& t, const std::string& thread) {
        if (t.nested()) {
            batch_leases.push_back(thread);
            return;
        }
        held.insert(thread);
        lost.erase(thread);
    }

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
    explicit impl(sqlite_options o) : opt(std::move(o)), owner(lease_owner::make()) {
        if (opt.own_thread) pool.emplace(1);
        if (opt.path.empty())
            throw checkpoint_error(errc::storage_failure, "sqlite_saver: sqlite_options::path is empty");
        make_cipher();
        check_header();

        int flags = opt.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        flags |= SQLITE_OPEN_NOMUTEX; // one connection, guarded by `mutex`
        sqlite3* raw = nullptr;
        // Through the page-checksum VFS (sqlite_checksum_vfs.hpp): pages are checked as read.
        int rc = sqlite3_open_v2(opt.path.c_str(), &raw, flags, detail::checksum_vfs());
        db.reset(raw);
        if (rc != SQLITE_OK) {
            std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
            throw checkpoint_error(errc::storage_failure,
                                   "sqlite_saver: cannot open " + opt.path + (opt.read_only ? " read-only" : "") +
                                       ": " + msg);
        }
        sqlite3_extended_result_codes(db.get(), 1);
        sqlite3_busy_timeout(db.get(), static_cast<int>(std::min<std::int64_t>(opt.busy_timeout.count(), INT_MAX)));

        // Several processes opening one fresh file race to create it, switch it to WAL and
        // migrate it. SQLite answers some of those steps with SQLITE_BUSY at once, without its busy
        // handler (switching the journal mode while another connection reads, to avoid a
        // deadlock), so the whole set-up is retried, with backoff, until busy_timeout is spent.
        const auto deadline = std::chrono::steady_clock::now() + opt.busy_timeout;
        std::minstd_rand jitter(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(this) ^ getpid()));
        for (int attempt = 0;; ++attempt) {
            try {
                set_up();
                return;
            } catch (const checkpoint_error& e) {
                if (e.kind() != errc::thread_busy || std::chrono::steady_clock::now() >= deadline) throw;
            }
            const auto pause = std::chrono::milliseconds(std::min(1 << std::min(attempt, 6), 50) + jitter() % 5);
            std::this_thread::sleep_for(pause);
        }
    }

    /// Reads the schema version, sets the page size of a new file, switches to WAL and migrates.
    void set_up() {
        // Reading the header is the first access to the file: garbage fails here, untouched.
        auto version = query_int("PRAGMA user_version", "reading the schema version");
        check_version(version);

        // A new file gets the page size asked for and room for page checksums (both can only be
        // set before the first table).
        if (!opt.read_only && version == 0 &&
            query_int("SELECT count(*) FROM sqlite_schema", "reading the schema") == 0) {
            if (opt.page_size != 0) exec("PRAGMA page_size = " + std::to_string(opt.page_size), "setting the page size");
            if (opt.path != ":memory:") detail::reserve_checksum_bytes(db.get());
        }
        if (!opt.read_only && opt.path != ":memory:" &&
            query_text("PRAGMA journal_mode = WAL", "switching to WAL mode") != "wal")
            fail(SQLITE_BUSY, "", "switching to WAL mode"); // another connection kept it from switching
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
        check_encryption();
    }

    // -- encryption -----------------------------------------------------------------------
    /// Makes `box` from the key in the options (and forgets the options' copy of it).
    void make_cipher() {
        if (opt.encryption_key.empty() && opt.encryption_key_file.empty()) return;
        const std::string at = "sqlite_saver: " + opt.path + ": ";
        if (!opt.encryption_key.empty() && !opt.encryption_key_file.empty())
            throw checkpoint_error(errc::storage_failure,
                                   at + "set one of sqlite_options::encryption_key and encryption_key_file, not both");
        if (!codec::cipher::available())
            throw checkpoint_error(errc::storage_failure,
                                   at + "a key was given, but this stategraph was built without libsodium "
                                        "(STATEGRAPH_WITH_SODIUM=OFF) and cannot encrypt");
        std::string text;
        std::string source = "sqlite_options::encryption_key";
        if (!opt.encryption_key_file.empty()) {
            source = "the key file " + opt.encryption_key_file;
            std::ifstream in(opt.encryption_key_file, std::ios::binary);
            if (!in)
                throw checkpoint_error(errc::storage_failure, at + "cannot read the key file " + opt.encryption_key_file);
            text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
        } else {
            text.swap(opt.encryption_key);
        }
        auto wipe = [](std::string& s) {
            std::fill(s.begin(), s.end(), '\0');
            s.clear();
        };
        try {
            auto key = codec::parse_key(text, !opt.encryption_key_file.empty());
            wipe(text);
            box = std::make_unique<codec::cipher>(key);
            std::fill(key.begin(), key.end(), 0);
        } catch (const std::invalid_argument& e) {
            wipe(text);
            throw checkpoint_error(errc::storage_failure, at + source + " is not a key: " + e.what());
        } catch (const std::runtime_error& e) {
            wipe(text);
            throw checkpoint_error(errc::storage_failure, at + e.what());
        }
    }

    [[noreturn]] void key_mismatch(const std::string& why) const {
        throw checkpoint_error(errc::key_mismatch, "sqlite_saver: " + opt.path + " " + why + "; no checkpoint was read or written");
    }

    std::optional<std::string> read_setting(std::string_view name) {
        static const std::string none;
        stmt s(*this, sql_get_setting, none, "reading the file's settings");
        s.bind_static(1, name);
        if (!s.step()) return std::nullopt;
        return s.text(0);
    }

    /// An encrypted file opens only with its key, an unencrypted one that holds data only without
    /// one; the first saver that opens an empty file with a key marks it encrypted.
    void check_encryption() {
        static const std::string none;
        auto verify = [&](const std::string& token) {
            if (!box)
                key_mismatch("is encrypted: open it with its key (sqlite_options::encryption_key or encryption_key_file)");
            bool ok = false;
            try {
                ok = box->open(token, {encryption_setting}) == encryption_check;
            } catch (const codec::corrupt&) {
            }
            if (!ok) key_mismatch("is encrypted with another key: the key given does not open it");
        };
        if (auto token = read_setting(encryption_setting)) return verify(*token);
        if (!box) return;
        auto holds_data = [&] {
            stmt s(*this, sql_holds_data, none, "reading the file's settings");
            return s.step() && s.integer(0) != 0;
        };
        const char* plain = "is not encrypted and holds checkpoints: open it without a key (a file is encrypted from its "
                            "first write on; copy its threads into a new encrypted file to encrypt them)";
        if (opt.read_only) {
            if (holds_data()) key_mismatch(plain);
            return;
        }
        transaction t(*this, true, none, "marking the file encrypted");
        if (auto token = read_setting(encryption_setting)) return verify(*token); // another process was first
        if (holds_data()) key_mismatch(plain);
        const std::string token = box->seal(encryption_check, {encryption_setting});
        {
            stmt s(*this, sql_put_setting, none, "marking the file encrypted");
            s.bind_static(1, encryption_setting).bind_blob_static(2, token);
            s.run();
        }
        t.commit();
    }

    /// Stored form of a payload at `parts`: encrypted with the file's key, or sealed (codec::seal).
    std::string protect(std::string_view payload, std::initializer_list<std::string_view> parts) const {
        return box ? box->seal(payload, parts) : codec::seal(payload, parts);
    }
    /// The payload of stored bytes at `parts` (decrypted into `buffer` in an encrypted file).
    /// Throws codec::corrupt: damaged, moved, encrypted with another key, or encrypted where the
    /// saver has no key and the other way round.
    std::string_view reveal(std::string_view stored, std::initializer_list<std::string_view> parts,
                            std::string& buffer) const {
        if (box) {
            buffer = box->open(stored, parts);
            return buffer;
        }
        if (codec::is_encrypted(stored)) throw codec::corrupt("it is encrypted, and this saver was opened without a key");
        return codec::unseal(stored, parts);
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
        char head[21] = {};
        std::ifstream in(opt.path, std::ios::binary);
        in.read(head, 16);
        if (!in || std::memcmp(head, magic, sizeof magic) != 0)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path +
                                       " is not a SQLite database (bad header); every thread stored in it is affected; the file was left untouched");
        // A database holds at least one page of at least 512 bytes: less is a truncated file.
        if (size < 512)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path + " is truncated (" + std::to_string(size) +
                                       " bytes, shorter than one database page); every thread stored in it is affected; the file was left untouched");
        // SQLite writes whole pages only: a file that ends inside a page was cut short, and SQLite
        // would read the rest of that page as zeros, its rows silently gone. (Unless a WAL holds
        // frames: a process killed while a checkpoint extended the file leaves part of a page that
        // the WAL still has, and SQLite reads that page from the WAL.)
        in.read(head + 16, 5);
        // Byte 20: reserved bytes per page, 0 (no page checksums) or detail::page_reserve. Any
        // other count is a damaged header (no single flipped bit turns one into the other).
        const auto reserve = static_cast<unsigned char>(head[20]);
        if (in && reserve != 0 && reserve != detail::page_reserve)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path + " has a damaged header (" + std::to_string(reserve) +
                                       " reserved bytes per page, where stategraph writes " +
                                       std::to_string(detail::page_reserve) +
                                       " or none); every thread stored in it is affected; the file was left untouched");
        const auto raw_page = static_cast<std::uintmax_t>(static_cast<unsigned char>(head[16]) << 8 |
                                                          static_cast<unsigned char>(head[17]));
        const std::uintmax_t page = raw_page == 1 ? 65536 : raw_page;
        const auto wal = std::filesystem::file_size(opt.path + "-wal", ec);
        const bool wal_has_frames = !ec && wal > 32; // more than a WAL header
        if (in && !wal_has_frames && page >= 512 && page <= 65536 && (page & (page - 1)) == 0 && size % page != 0)
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path + " is truncated (" + std::to_string(size) +
                                       " bytes, not a whole number of its " + std::to_string(page) +
                                       "-byte pages); every thread stored in it is affected; the file was left untouched");
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

    /// One schema step: `sql`, then `convert` (C++ that needs more than SQL), then `finish`.
    struct migration {
        const char* sql;
        void (impl::*convert)() = nullptr;
        const char* finish = nullptr;
    };

    /// Brings the file to `schema_version` in one transaction: on any error (a corrupt row the
    /// conversion cannot read included) everything is rolled back and the file keeps its version.
    void migrate() {
        static const migration migrations[] = {
            {migration_v1},                                                             // -> v1
            {migration_v2_create, &impl::convert_v1_checkpoints, migration_v2_swap},    // -> v2
            {migration_v3},                                                             // -> v3
            {migration_v4},                                                             // -> v4
            {migration_v5},                                                             // -> v5
            {migration_v6},                                                             // -> v6
        };
        static_assert(std::size(migrations) == sqlite_saver::schema_version,
                      "one migration per schema version: bump schema_version with the list");
        static const std::string none;
        transaction t(*this, true, none, "migrating the schema");
        // Another process may have migrated between our read and the lock: read again.
        auto version = query_int("PRAGMA user_version", "reading the schema version");
        check_version(version);
        for (auto v = version; v < sqlite_saver::schema_version; ++v) {
            const auto& m = migrations[v];
            exec(m.sql, "migrating the schema");
            if (m.convert) (this->*m.convert)();
            if (m.finish) exec(m.finish, "migrating the schema");
            exec("PRAGMA user_version = " + std::to_string(v + 1), "migrating the schema");
        }
        t.commit();
    }

    /// v1 -> v2: each checkpoint row's JSON columns become one binary record.
    void convert_v1_checkpoints() {
        static const std::string none;
        const char* what = "migrating the schema to version 2";
        stmt read(*this, uncached, sql_v1_checkpoints, none, what);
        stmt write(*this, uncached, sql_v2_put_checkpoint, none, what);
        std::string record;
        while (read.step()) {
            const std::string thread = read.text(0), ns = read.text(1);
            checkpoint cp = read_v1_row(read, thread, ns);
            try {
                record = codec::encode_record(cp);
            } catch (const std::exception& e) {
                corrupt(thread, ns, "checkpoint " + cp.id + " cannot be converted to schema version 2: " + e.what(),
                        {thread});
            }
            write.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
            write.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, record);
            write.run();
            write.reset();
        }
    }

    // -- JSON -----------------------------------------------------------------------------
    [[noreturn]] void corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                              std::vector<std::string> names) const {
        throw common::corrupt(thread, ns, detail, where(), std::move(names));
    }

    boost::json::value parse(std::string_view text, const std::string& thread, const std::string& ns,
                             const std::string& what, std::vector<std::string> names) const {
        return common::parse_stored(text, thread, ns, what, where(), std::move(names));
    }

    // -- checkpoints ----------------------------------------------------------------------
    /// Reads a v1 checkpoint row (columns: thread_id, ns, id, parent_id, step, source, versions,
    /// frontier, metadata, signature), for the migration to v2.
    checkpoint read_v1_row(const stmt& s, const std::string& thread, const std::string& ns) const {
        checkpoint cp;
        cp.id = s.text(2);
        cp.parent_id = s.text(3);
        cp.step = s.integer(4);
        cp.source = s.text(5);
        cp.signature = s.text(9);
        const std::string at = "cannot migrate the file to schema version 2 (it stays at version 1): checkpoint " + cp.id;
        for (int c : {6, 7, 8})
            if (s.is_null(c))
                corrupt(thread, ns, at + " has no " + (c == 6 ? "versions" : c == 7 ? "frontier" : "metadata"),
                        {thread});
        auto versions = parse(s.bytes(6), thread, ns, at + ": versions", {thread});
        if (!versions.is_object()) corrupt(thread, ns, at + ": versions is not a JSON object", {thread});
        for (const auto& [channel, version] : versions.get_object()) {
            if (!version.is_string())
                corrupt(thread, ns, at + ": versions: the version of channel " + quote(channel) + " is not a string",
                        {thread, std::string(channel)});
            cp.versions[std::string(channel)] = std::string(version.get_string());
        }
        cp.frontier = parse(s.bytes(7), thread, ns, at + ": frontier", {thread});
        auto metadata = parse(s.bytes(8), thread, ns, at + ": metadata", {thread});
        if (!metadata.is_object()) corrupt(thread, ns, at + ": metadata is not a JSON object", {thread});
        cp.metadata = std::move(metadata.get_object());
        return cp;
    }

    /// A record as stored in its row (sealed or encrypted: `protect`), bound to the row's thread,
    /// namespace and id and to the columns beside it (parent, step, source).
    std::string seal_record(std::string_view record, const std::string& thread, const std::string& ns,
                            const checkpoint& cp) const {
        const std::string step = std::to_string(cp.step);
        return protect(record, {thread, ns, cp.id, cp.parent_id, step, cp.source});
    }
    /// The record of a row, verified against its columns (`cp`: id, parent, step, source), or a
    /// record sealed by schema version 3 (bound to thread, namespace and id only); decrypted into
    /// `buffer` in an encrypted file. Throws codec::corrupt when it matches neither.
    std::string_view unseal_record(std::string_view stored, const std::string& thread, const std::string& ns,
                                   const checkpoint& cp, std::string& buffer) const {
        const std::string step = std::to_string(cp.step);
        try {
            return reveal(stored, {thread, ns, cp.id, cp.parent_id, step, cp.source}, buffer);
        } catch (const codec::corrupt&) {
            return reveal(stored, {thread, ns, cp.id}, buffer);
        }
    }

    /// Reads a checkpoint row (columns: STATEGRAPH_CP_COLUMNS) without its values.
    checkpoint read_row(const stmt& s, const std::string& thread, const std::string& ns) const {
        checkpoint cp;
        cp.id = s.text(0);
        cp.parent_id = s.text(1);
        cp.step = s.integer(2);
        cp.source = s.text(3);
        try {
            std::string plain;
            codec::decode_record(unseal_record(s.bytes(4), thread, ns, cp, plain), cp);
        } catch (const std::exception& e) { // codec::corrupt, or allocation failure on garbage
            corrupt(thread, ns, "checkpoint " + cp.id + ": its record cannot be read: " + e.what(), {thread});
        }
        return cp;
    }

    /// Calls `use(bytes)` with the stored bytes of `channel` at `version` (`graphs` first for
    /// `__graph__`) while SQLite holds them; false when nothing is stored there.
    template <class F>
    bool with_stored(const std::string& thread, const std::string& ns, const std::string& channel,
                     const std::string& version, F&& use) {
        // Stored bytes carry a checksum (or an encryption) bound to (channel, version): verified before use.
        std::string plain;
        if (channel == graph_channel) {
            stmt g(*this, sql_get_graph, thread, "reading a channel value");
            g.bind_static(1, version);
            if (g.step()) {
                use(reveal(g.bytes(0), {channel, version}, plain));
                return true;
            }
        }
        if (const auto& row = inline_row(thread, ns, version))
            for (const auto& [c, bytes] : decode_inline_of(thread, ns, version, *row))
                if (c == channel) {
                    use(reveal(bytes, {channel, version}, plain));
                    return true;
                }
        stmt s(*this, sql_get_blob, thread, "reading a channel value");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, channel).bind_static(4, version);
        if (!s.step()) return false;
        use(reveal(s.bytes(0), {channel, version}, plain));
        return true;
    }

    /// The inline values of checkpoint `id` (nullopt: no such row, or none inline), cached for
    /// the current operation.
    const std::optional<std::string>& inline_row(const std::string& thread, const std::string& ns, const std::string& id) {
        auto [it, fresh] = inline_rows.try_emplace({ns, id});
        if (fresh) {
            stmt s(*this, sql_get_inline, thread, "reading a channel value");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, id);
            if (s.step() && !s.is_null(0)) it->second.emplace(s.bytes(0));
        }
        return it->second;
    }

    std::vector<std::pair<std::string_view, std::string_view>> decode_inline_of(const std::string& thread, const std::string& ns,
                                                                                const std::string& id, std::string_view bytes) const {
        try {
            return codec::decode_inline(bytes);
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, "checkpoint " + id + ": its values cannot be read: " + e.what(), {thread});
        }
    }

    /// The whole value of `channel` at `version`. A value stored whole (nearly all) is parsed
    /// straight from SQLite's buffer with the saver's lenient options; a value stored as appended
    /// items is reassembled by codec::resolve_value.
    boost::json::value read_value(const std::string& thread, const std::string& ns, const std::string& id,
                                  const std::string& channel, const std::string& version) {
        const auto where = [&] { return "checkpoint " + id + ": channel " + quote(channel) + " (version " + version + ")"; };
        try {
            std::optional<boost::json::value> whole;
            const bool found = with_stored(thread, ns, channel, version, [&](std::string_view bytes) {
                if (!codec::split_value(bytes, version).extends) whole = parse(bytes, thread, ns, where(), {thread, channel});
            });
            if (!found)
                corrupt(thread, ns,
                        "checkpoint " + id + " needs channel " + quote(channel) + " at version " + version +
                            ", which is not stored",
                        {thread, channel});
            if (whole) return std::move(*whole);
            auto fetch = [&](const std::string& v) -> std::optional<std::string> {
                std::optional<std::string> out;
                with_stored(thread, ns, channel, v, [&](std::string_view bytes) { out.emplace(bytes); });
                return out;
            };
            return codec::resolve_value(version, fetch);
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, where() + " cannot be read: " + e.what(), {thread, channel});
        }
    }

    /// Values already read by one list(), by (channel, version), pointing into tuples that are
    /// complete and will not move: checkpoints listed together share most of their values.
    using value_memo = std::map<std::pair<std::string_view, std::string_view>, const boost::json::value*>;

    /// Adds the values (from blobs) and pending writes of a checkpoint, as memory_saver::assemble.
    /// With `memo`, `t` must stay where it is until the memo is gone.
    void assemble(checkpoint_tuple& t, value_memo* memo = nullptr) {
        const auto& thread = t.thread_id;
        const auto& ns = t.ns;
        const auto& id = t.cp.id;
        std::vector<const std::pair<const std::string, std::string>*> fresh;
        for (const auto& entry : t.cp.versions) {
            const auto& [channel, version] = entry;
            if (version.empty()) continue;
            if (memo) {
                if (auto it = memo->find({channel, version}); it != memo->end()) {
                    t.cp.values[channel] = *it->second;
                    continue;
                }
                fresh.push_back(&entry);
            }
            t.cp.values[channel] = read_value(thread, ns, id, channel, version);
        }
        // Only now: inserting into `values` may move the values inserted before.
        for (const auto* e : fresh)
            memo->emplace(std::pair<std::string_view, std::string_view>(e->first, e->second),
                          &t.cp.values.at(e->first));
        stmt w(*this, sql_get_writes, thread, "reading pending writes");
        w.bind_static(1, thread).bind_static(2, ns).bind_static(3, id);
        while (w.step()) {
            pending_write pw;
            pw.task_id = w.text(0);
            pw.task_name = w.text(1);
            pw.channel = w.text(2);
            const std::string what = common::write_label(id, pw);
            std::string_view text;
            std::string plain;
            try {
                text = reveal(w.bytes(3), {thread, ns, id, pw.task_id, pw.task_name, pw.channel}, plain);
            } catch (const codec::corrupt& e) {
                corrupt(thread, ns, what + " cannot be read: " + e.what(), {thread, pw.channel, pw.task_name});
            }
            pw.value = parse(text, thread, ns, what, {thread, pw.channel, pw.task_name});
            t.writes.push_back(std::move(pw));
        }
    }

    /// Fences a write (inside its transaction): refused with `lease_lost` when this saver took the
    /// thread's lease and it is no longer ours, with `thread_busy` while another owner holds a live
    /// lease (unless that owner is provably gone); renews our own.
    void check_lease(const std::string& thread, std::int64_t now) {
        std::string holder;
        std::int64_t expires = 0;
        const bool ours = held.count(thread) != 0;
        {
            stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
            s.bind(1, thread);
            if (!s.step()) {
                if (ours) throw_lost(thread, "");
                return;
            }
            holder = s.text(0);
            expires = s.integer(1);
        }
        if (holder != owner) {
            if (ours) throw_lost(thread, holder);
            if (expires > now && !lease_owner::is_gone(holder)) throw_busy(thread, holder, expires);
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

    [[noreturn]] void throw_lost(const std::string& thread, const std::string& holder) {
        lost.insert(thread);
        throw common::lease_lost(thread, owner, holder, where());
    }

    [[noreturn]] void throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const {
        throw common::thread_busy(thread, holder, expires, where());
    }

    // -- the operations (called with `mutex` held) ------------------------------------------
    void put(const std::string& thread, const std::string& ns, const checkpoint& cp) {
        // Everything is encoded before the write lock is taken: the transaction only binds and steps.
        const std::string record = seal_record(codec::encode_record(cp), thread, ns, cp);
        struct encoded {
            std::string_view channel;
            const std::string* version;
            std::string bytes;
            bool shared; // a `__graph__` value keyed by the graph signature: one row for all threads
        };
        std::vector<encoded> values;
        values.reserve(cp.values.size());
        for (const auto& [channel, value] : cp.values) {
            const std::string name(channel); // the maps' comparator is not transparent
            auto v = cp.versions.find(name);
            const std::string& version = v == cp.versions.end() ? cp.id : v->second;
            auto x = cp.extends.find(name);
            const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
            // A `__graph__` value versioned by this checkpoint's own id (an engine that keeps the shape per
            // thread) or holding appended items stays with the thread's blobs.
            const bool shared = name == graph_channel && !extends && version != cp.id;
            if (shared && stored_graphs.count(version)) continue; // stored once per graph, already there
            values.push_back({channel, &version, protect(codec::encode_value(value, extends, version), {channel, version}),
                              shared});
        }
        // This checkpoint's own small values go into its row, the rest into `blobs`.
        std::vector<std::pair<std::string_view, std::string_view>> inline_values;
        std::vector<const encoded*> separate;
        std::size_t budget = opt.inline_bytes;
        for (const auto& v : values) {
            if (!v.shared && *v.version == cp.id && v.bytes.size() <= budget) {
                inline_values.emplace_back(v.channel, v.bytes);
                budget -= v.bytes.size();
            } else {
                separate.push_back(&v);
            }
        }
        const std::string vals = inline_values.empty() ? std::string() : codec::encode_inline(inline_values);
        inline_rows.clear();

        transaction t(*this, true, thread, "saving a checkpoint");
        check_lease(thread, now_ms());
        {
            // Every buffer bound here outlives `s` (declared above it or owned by the caller).
            stmt s(*this, sql_put_checkpoint, thread, "saving a checkpoint");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
            s.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, record);
            if (inline_values.empty()) s.bind_null(8);
            else s.bind_blob_static(8, vals);
            s.run();
        }
        if (sqlite3_changes(db.get()) == 0) {
            // The id is stored already (rare: a saver user re-putting a checkpoint). It is replaced;
            // the values stored with it before stay unless written again.
            std::string old;
            if (const auto& row = inline_row(thread, ns, cp.id)) old = *row;
            inline_rows.clear();
            std::string merged_vals;
            try {
                // A value written again to `blobs` this time leaves no stale copy in the row.
                merged_vals = codec::merge_inline(old, inline_values, [&](std::string_view c) {
                    return std::any_of(separate.begin(), separate.end(), [&](const encoded* v) { return v->channel == c; });
                });
            } catch (const codec::corrupt& e) {
                corrupt(thread, ns, "checkpoint " + cp.id + ": its values cannot be read: " + e.what(), {thread});
            }
            stmt s(*this, sql_replace_checkpoint, thread, "saving a checkpoint");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
            s.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, record);
            if (merged_vals.empty()) s.bind_null(8);
            else s.bind_blob_static(8, merged_vals);
            s.run();
        }
        for (const auto* p : separate) {
            const auto& v = *p;
            if (v.shared) {
                stmt s(*this, sql_put_graph, thread, "saving the graph's shape");
                s.bind_static(1, *v.version).bind_blob_static(2, v.bytes);
                s.run();
                continue;
            }
            stmt s(*this, sql_put_blob, thread, "saving a channel value");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, v.channel).bind_static(4, *v.version);
            s.bind_blob_static(5, v.bytes);
            s.run();
        }
        t.commit();
        for (const auto& v : values)
            if (v.shared) graph_stored(t, *v.version);
    }

    void put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                    const std::vector<pending_write>& writes) {
        transaction t(*this, true, thread, "saving pending writes");
        check_lease(thread, now_ms());
        for (const auto& w : writes) {
            const std::string text = protect(boost::json::serialize(w.value),
                                             {thread, ns, checkpoint_id, w.task_id, w.task_name, w.channel});
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
        inline_rows.clear();
        std::optional<checkpoint_tuple> result;
        {
            stmt s(*this, checkpoint_id ? sql_get_by_id : sql_get_latest, thread, "reading a checkpoint");
            s.bind_static(1, thread).bind_static(2, ns);
            if (checkpoint_id) s.bind_static(3, *checkpoint_id);
            if (s.step()) result.emplace(checkpoint_tuple{thread, ns, read_row(s, thread, ns), {}});
        }
        if (!result) return std::nullopt;
        assemble(*result);
        t.commit();
        return result;
    }

    std::vector<checkpoint_tuple> list(const std::string& thread, const std::string& ns, const list_options& o) {
        transaction t(*this, false, thread, "listing checkpoints");
        inline_rows.clear();
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
        out.reserve(rows.size()); // never reallocated below: `memo` points into it
        value_memo memo;
        for (auto& cp : rows) {
            out.push_back(checkpoint_tuple{thread, ns, std::move(cp), {}});
            assemble(out.back(), &memo);
        }
        t.commit();
        return out;
    }

    void delete_thread(const std::string& thread) {
        transaction t(*this, true, thread, "deleting the thread");
        auto now = now_ms();
        check_lease(thread, now);
        delete_rows(thread, now);
        t.commit();
    }

    /// Deletes the thread's rows and an expired lease of another owner (in the caller's transaction).
    void delete_rows(const std::string& thread, std::int64_t now) {
        for (auto sql : {sql_delete_writes, sql_delete_blobs, sql_delete_checkpoints}) {
            stmt s(*this, sql, thread, "deleting the thread");
            s.bind(1, thread);
            s.run();
        }
        stmt l(*this, sql_delete_expired_lease, thread, "deleting the thread");
        l.bind(1, thread).bind(2, owner).bind(3, now);
        l.run();
    }

    // -- thread maintenance -----------------------------------------------------------------
    std::size_t rewind_thread(const std::string& thread, const std::string& checkpoint_id) {
        const char* what = "rewinding the thread";
        transaction t(*this, true, thread, what);
        check_lease(thread, now_ms());
        {
            stmt s(*this, sql_rewind_target, thread, what);
            s.bind_static(1, thread).bind_static(2, checkpoint_id);
            if (!s.step() || s.integer(0) == 0) throw common::rewind_target_missing(thread, checkpoint_id, where());
        }
        std::size_t removed = 0;
        for (auto sql : {sql_rewind_writes, sql_rewind_blobs, sql_rewind_checkpoints}) {
            stmt s(*this, sql, thread, what);
            s.bind_static(1, thread).bind_static(2, checkpoint_id);
            s.run();
            if (sql == sql_rewind_checkpoints) removed = static_cast<std::size_t>(sqlite3_changes64(db.get()));
        }
        t.commit();
        return removed;
    }

    void copy_thread(const std::string& from, const std::string& to) {
        const char* what = "copying the thread";
        transaction t(*this, true, to, what);
        check_lease(to, now_ms());
        {
            stmt s(*this, sql_thread_exists, to, what);
            s.bind_static(1, to);
            if (s.step() && s.integer(0) != 0) throw common::copy_target_exists(from, to, where());
        }
        // Records and pending writes are sealed (or encrypted) to their thread: each is opened and
        // stored again under the new id. Values are bound to (channel, version) only and copy as
        // they are, inside the checkpoint rows and in `blobs`.
        struct row {
            std::string ns, id, parent_id, source, record;
            std::int64_t step;
            std::optional<std::string> vals;
        };
        std::vector<row> rows;
        {
            stmt s(*this, sql_copy_source_checkpoints, from, what);
            s.bind_static(1, from);
            while (s.step()) {
                row r{s.text(0), s.text(1), s.text(2), s.text(4), {}, s.integer(3), std::nullopt};
                std::string plain;
                try {
                    checkpoint cols; // the columns a record is sealed with
                    cols.id = r.id;
                    cols.parent_id = r.parent_id;
                    cols.step = r.step;
                    cols.source = r.source;
                    r.record = seal_record(unseal_record(s.bytes(5), from, r.ns, cols, plain), to, r.ns, cols);
                } catch (const codec::corrupt& e) {
                    corrupt(from, r.ns, "checkpoint " + r.id + ": its record cannot be read: " + e.what(), {from});
                }
                if (!s.is_null(6)) r.vals.emplace(s.bytes(6));
                rows.push_back(std::move(r));
            }
        }
        if (rows.empty()) throw common::copy_source_missing(from, to, where());
        for (const auto& r : rows) {
            stmt s(*this, sql_copy_checkpoint, to, what);
            s.bind_static(1, to).bind_static(2, r.ns).bind_static(3, r.id).bind_static(4, r.parent_id);
            s.bind(5, r.step).bind_static(6, r.source).bind_blob_static(7, r.record);
            if (r.vals) s.bind_blob_static(8, *r.vals);
            else s.bind_null(8);
            s.run();
        }
        {
            stmt s(*this, sql_copy_blobs, to, what);
            s.bind_static(1, from).bind_static(2, to);
            s.run();
        }
        struct write_row {
            std::string ns, checkpoint_id, task_id, task_name, channel, value;
            std::int64_t seq;
        };
        std::vector<write_row> writes;
        {
            stmt s(*this, sql_copy_source_writes, from, what);
            s.bind_static(1, from);
            while (s.step()) {
                write_row w{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), {}, s.integer(6)};
                std::string plain;
                try {
                    w.value = protect(reveal(s.bytes(5), {from, w.ns, w.checkpoint_id, w.task_id, w.task_name, w.channel}, plain),
                                      {to, w.ns, w.checkpoint_id, w.task_id, w.task_name, w.channel});
                } catch (const codec::corrupt& e) {
                    pending_write pw;
                    pw.task_id = w.task_id;
                    pw.task_name = w.task_name;
                    pw.channel = w.channel;
                    corrupt(from, w.ns, common::write_label(w.checkpoint_id, pw) + " cannot be read: " + e.what(),
                            {from, w.channel, w.task_name});
                }
                writes.push_back(std::move(w));
            }
        }
        for (const auto& w : writes) {
            stmt s(*this, sql_copy_write, to, what);
            s.bind_static(1, to).bind_static(2, w.ns).bind_static(3, w.checkpoint_id).bind_static(4, w.task_id);
            s.bind_static(5, w.task_name).bind_static(6, w.channel).bind_blob_static(7, w.value).bind(8, w.seq);
            s.run();
        }
        t.commit();
    }

    std::vector<thread_info> list_threads(const thread_query& q, const boost::json::object* match) {
        static const std::string none;
        const char* what = "listing threads";
        transaction t(*this, false, none, what);
        struct found {
            std::string thread, newest, head;
            std::size_t count;
        };
        std::vector<found> threads;
        const bool filtered = match && !match->empty();
        {
            // Without a filter, SQLite pages; with one, every thread's head is read and matched here.
            stmt s(*this, sql_list_threads, none, what);
            const auto clamp = [](std::size_t n) { return static_cast<std::int64_t>(std::min<std::size_t>(n, INT64_MAX)); };
            s.bind(1, !filtered && q.limit ? clamp(q.limit) : std::int64_t{-1});
            s.bind(2, filtered ? std::int64_t{0} : clamp(q.offset));
            while (s.step())
                threads.push_back({s.text(0), s.text(1), s.is_null(3) ? std::string() : s.text(3),
                                   static_cast<std::size_t>(s.integer(2))});
        }
        std::vector<thread_info> infos;
        for (auto& f : threads) {
            thread_info info;
            info.thread_id = std::move(f.thread);
            info.newest_id = std::move(f.newest);
            info.checkpoints = f.count;
            if (!f.head.empty()) {
                static const std::string root;
                stmt s(*this, sql_get_by_id, info.thread_id, what);
                s.bind_static(1, info.thread_id).bind_static(2, root).bind_static(3, f.head);
                if (s.step()) {
                    auto cp = read_row(s, info.thread_id, root);
                    info.checkpoint_id = std::move(cp.id);
                    info.created_at = checkpoint_time(info.checkpoint_id);
                    info.metadata = std::move(cp.metadata);
                }
            }
            infos.push_back(std::move(info));
        }
        t.commit();
        return common::page_threads(std::move(infos), q, match);
    }

    /// Whether a run holds the thread's lease: this saver (it acquired the thread and did not lose
    /// it), or another owner whose lease is live and who is not provably gone.
    bool leased(const std::string& thread, std::int64_t now) {
        if (held.count(thread) && !lost.count(thread)) return true;
        stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
        s.bind(1, thread);
        if (!s.step()) return false;
        const auto holder = s.text(0);
        const auto expires = s.integer(1);
        return expires > now && (holder == owner || !lease_owner::is_gone(holder));
    }

    std::size_t count_checkpoints(const std::string& thread) {
        stmt s(*this, sql_count_checkpoints, thread, "sweeping threads");
        s.bind(1, thread);
        return s.step() ? static_cast<std::size_t>(s.integer(0)) : 0;
    }

    /// The threads whose newest checkpoint's id sorts before `cutoff` (a `sweep`'s first step).
    std::vector<std::string> expired_threads(const std::string& cutoff) {
        static const std::string none;
        const char* what = "sweeping threads";
        std::vector<std::string> expired;
        transaction t(*this, false, none, what);
        stmt s(*this, sql_expired_threads, none, what);
        s.bind_static(1, cutoff);
        while (s.step()) expired.push_back(s.text(0));
        return expired;
    }

    /// Sweeps one thread in a transaction of its own, adding what it did to `result`: its age and
    /// lease are checked again with the write lock held, so a thread written or taken since the
    /// scan is left alone.
    void sweep_thread(const std::string& thread, const std::string& cutoff, ttl_action action, sweep_result& result) {
        const char* what = "sweeping threads";
        transaction t(*this, true, thread, what);
        std::size_t before = 0;
        {
            stmt s(*this, sql_thread_newest, thread, what);
            s.bind(1, thread);
            if (!s.step() || s.is_null(0) || !(s.text(0) < cutoff)) return;
            before = static_cast<std::size_t>(s.integer(1));
        }
        ++result.expired;
        const auto now = now_ms();
        if (leased(thread, now)) {
            ++result.skipped_busy;
            return;
        }
        if (action == ttl_action::delete_thread) {
            delete_rows(thread, now);
            ++result.deleted;
            result.checkpoints_removed += before;
        } else {
            prune_thread(thread, 1);
            const auto removed = before - std::min(before, count_checkpoints(thread));
            result.checkpoints_removed += removed;
            if (removed) ++result.pruned;
        }
        t.commit();
        inline_rows.clear();
    }

    void prune(const std::string& thread, std::size_t keep_last) {
        transaction t(*this, true, thread, "pruning the thread");
        check_lease(thread, now_ms());
        prune_thread(thread, keep_last);
        t.commit();
    }

    /// `prune` inside the caller's write transaction, its lease checked.
    void prune_thread(const std::string& thread, std::size_t keep_last) {
        if (keep_last == 0) keep_last = 1;
        const auto keep = static_cast<std::int64_t>(std::min<std::size_t>(keep_last, INT64_MAX));
        std::vector<std::string> namespaces;
        {
            stmt s(*this, sql_thread_namespaces, thread, "pruning the thread");
            s.bind(1, thread);
            while (s.step()) namespaces.push_back(s.text(0));
        }
        for (const auto& ns : namespaces) {
            inline_rows.clear();
            // The values the newest `keep` checkpoints need, with every version their appended items
            // extend; a record we cannot read aborts the prune. `graphs` rows are shared: never pruned.
            std::set<std::pair<std::string, std::string>> needed;
            {
                std::vector<checkpoint> kept;
                {
                    stmt s(*this, sql_kept_records, thread, "pruning the thread");
                    s.bind_static(1, thread).bind_static(2, ns).bind(3, keep);
                    while (s.step()) kept.push_back(read_row(s, thread, ns));
                }
                for (const auto& cp : kept)
                    for (const auto& [channel, version] : cp.versions) {
                        // init-capture: clang 14 cannot capture a structured binding (channel) directly
                        auto fetch = [&, &ch = channel](const std::string& v) {
                            std::optional<std::string> out;
                            with_stored(thread, ns, ch, v, [&](std::string_view bytes) { out.emplace(bytes); });
                            return out;
                        };
                        try {
                            codec::mark_needed(channel, version, fetch, needed);
                        } catch (const codec::corrupt& e) {
                            corrupt(thread, ns,
                                    "checkpoint " + cp.id + ": channel " + quote(channel) + " (version " + version +
                                        ") cannot be read: " + e.what(),
                                    {thread, channel});
                        }
                    }
            }
            // Values stored in the rows about to go that a kept checkpoint still reads move to `blobs`.
            {
                std::vector<std::tuple<std::string, std::string, std::string>> moved; // channel, version, bytes
                {
                    stmt s(*this, sql_doomed_inline, thread, "pruning the thread");
                    s.bind_static(1, thread).bind_static(2, ns).bind(3, keep);
                    while (s.step()) {
                        const std::string id = s.text(0);
                        for (const auto& [channel, bytes] : decode_inline_of(thread, ns, id, s.bytes(1)))
                            if (needed.count({std::string(channel), id})) moved.emplace_back(channel, id, bytes);
                    }
                }
                for (const auto& [channel, version, bytes] : moved) {
                    stmt s(*this, sql_put_blob, thread, "pruning the thread");
                    s.bind_static(1, thread).bind_static(2, ns).bind_static(3, channel).bind_static(4, version);
                    s.bind_blob_static(5, bytes);
                    s.run();
                }
            }
            for (auto sql : {sql_prune_writes, sql_prune_checkpoints}) {
                stmt s(*this, sql, thread, "pruning the thread");
                s.bind(1, thread).bind(2, ns).bind(3, keep);
                s.run();
            }
            inline_rows.clear();
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
            // The oldest checkpoint kept loses its parent: its record is sealed again without it.
            std::optional<checkpoint> oldest;
            {
                stmt s(*this, sql_oldest_record, thread, "pruning the thread");
                s.bind_static(1, thread).bind_static(2, ns);
                if (s.step()) oldest = read_row(s, thread, ns);
            }
            if (oldest && !oldest->parent_id.empty()) {
                oldest->parent_id.clear();
                const auto record = seal_record(codec::encode_record(*oldest), thread, ns, *oldest);
                stmt s(*this, sql_clear_parent, thread, "pruning the thread");
                s.bind_static(1, thread).bind_static(2, ns).bind_static(3, oldest->id).bind_blob_static(4, record);
                s.run();
            }
        }
    }

    thread_stats stats(const std::string& thread) {
        transaction t(*this, false, thread, "reading storage statistics");
        thread_stats st;
        {
            stmt s(*this, sql_stats_checkpoints, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) {
                st.checkpoints = static_cast<std::size_t>(s.integer(0));
                st.record_bytes = static_cast<std::size_t>(s.integer(1));
            }
        }
        {
            stmt s(*this, sql_stats_blobs, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) {
                // A value's checksum (codec::seal) or encryption frames it: it counts with the records.
                const auto seals = static_cast<std::size_t>(s.integer(2)) * codec::seal_overhead +
                                   static_cast<std::size_t>(s.integer(3)) * codec::encrypted_overhead;
                st.blobs = static_cast<std::size_t>(s.integer(0));
                st.bytes += static_cast<std::size_t>(s.integer(1)) - seals;
                st.record_bytes += seals;
            }
        }
        {
            stmt s(*this, sql_stats_writes, thread, "reading storage statistics");
            s.bind(1, thread);
            if (s.step()) {
                const auto seals = static_cast<std::size_t>(s.integer(2)) * codec::seal_overhead +
                                   static_cast<std::size_t>(s.integer(3)) * codec::encrypted_overhead;
                st.writes = static_cast<std::size_t>(s.integer(0));
                st.bytes += static_cast<std::size_t>(s.integer(1)) - seals;
                st.record_bytes += seals;
            }
        }
        {
            // Values inside checkpoint rows: their bytes count as values, the bytes that frame them
            // (channel names, lengths) as records.
            stmt s(*this, sql_stats_inline, thread, "reading storage statistics");
            s.bind(1, thread);
            while (s.step()) {
                const auto bytes = s.bytes(0);
                codec::inline_size in;
                try {
                    in = codec::measure_inline(bytes);
                } catch (const codec::corrupt& e) {
                    corrupt(thread, "", std::string("values inside a checkpoint row cannot be read: ") + e.what(), {thread});
                }
                st.blobs += in.values;
                st.bytes += in.value_bytes;
                st.record_bytes += bytes.size() - in.value_bytes;
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
                if (holder != owner && expires > now && !lease_owner::is_gone(holder))
                    throw_busy(thread, holder, expires);
            }
        }
        {
            stmt s(*this, sql_put_lease, thread, "taking the thread's lease");
            s.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
            s.run();
        }
        t.commit();
        lease_taken(t, thread);
        start_keeper();
    }

    /// Starts the lease keeper once (called with `mutex` held).
    void start_keeper() {
        std::lock_guard k(keeper.mutex);
        if (keeper.thread.joinable() || keeper.stopping) return;
        keeper.thread = std::thread([this] { keep_leases(); });
    }

    void keep_leases() {
        const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(lease_ms() / 3),
                                                                std::chrono::milliseconds(10));
        std::unique_lock k(keeper.mutex);
        while (!keeper.stopping) {
            keeper.wake.wait_for(k, period, [&] { return keeper.stopping; });
            if (keeper.stopping) break;
            k.unlock();
            renew_held();
            k.lock();
        }
    }

    /// Extends every lease in `held` by a full time to live; one found gone joins `lost`. A
    /// failed renewal (the database busy beyond busy_timeout, a full disk) is tried again at the
    /// next tick: the lease still has two thirds of its time then.
    void renew_held() noexcept {
        try {
            std::lock_guard lock(mutex);
            if (held.size() == lost.size()) return;
            static const std::string none;
            transaction t(*this, true, none, "renewing leases");
            const auto until = now_ms() + lease_ms();
            for (const auto& thread : held) {
                if (lost.count(thread)) continue;
                stmt r(*this, sql_renew_lease, thread, "renewing the thread's lease");
                r.bind(1, thread).bind(2, owner).bind(3, until);
                r.run();
                if (sqlite3_changes(db.get()) == 0) lost.insert(thread);
            }
            t.commit();
        } catch (...) {
        }
    }

    std::optional<std::string> break_lease(const std::string& thread) {
        transaction t(*this, true, thread, "breaking the thread's lease");
        std::optional<std::string> holder;
        {
            stmt s(*this, sql_break_lease, thread, "breaking the thread's lease");
            s.bind(1, thread);
            if (s.step()) holder = s.text(0);
            while (s.step()) {
            }
        }
        t.commit();
        if (holder == owner) lost.insert(thread);
        return holder;
    }

    void put_graph(const std::string& signature, const std::vector<std::string>& shape) {
        if (stored_graphs.count(signature)) return;
        static const std::string none;
        const auto bytes = protect(codec::encode_value(codec::shape_json(shape), nullptr, signature),
                                   {graph_channel, signature});
        transaction t(*this, true, none, "saving the graph's shape");
        {
            stmt s(*this, sql_put_graph, none, "saving the graph's shape");
            s.bind_static(1, signature).bind_blob_static(2, bytes);
            s.run();
        }
        t.commit();
        graph_stored(t, signature);
    }

    std::optional<std::vector<std::string>> get_graph(const std::string& signature) {
        static const std::string none;
        stmt g(*this, sql_get_graph, none, "reading the graph's shape");
        g.bind_static(1, signature);
        if (!g.step()) return std::nullopt;
        try {
            std::string plain;
            return codec::shape_from(reveal(g.bytes(0), {graph_channel, signature}, plain), signature);
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what() + where(), {signature});
        }
    }

    // -- node cache ---------------------------------------------------------------------------
    std::optional<boost::json::value> cache_get(const std::string& ns, const std::string& key) {
        static const std::string none;
        stmt s(*this, sql_cache_get, none, "reading the node cache");
        s.bind_static(1, ns).bind_static(2, key);
        if (!s.step()) return std::nullopt;
        const std::string expires = s.is_null(1) ? std::string() : std::to_string(s.integer(1));
        if (!s.is_null(1) && s.integer(1) <= now_ms()) return std::nullopt;
        std::string plain;
        std::string_view text;
        try {
            text = reveal(s.bytes(0), {cache_channel, ns, key, expires}, plain);
        } catch (const codec::corrupt& e) {
            throw common::cache_corrupt(ns, key, e.what(), where());
        }
        return common::cache_value(text, ns, key, where());
    }

    void cache_put(const std::string& ns, const std::string& key, const boost::json::value& value,
                   std::chrono::milliseconds ttl) {
        static const std::string none;
        const auto now = now_ms();
        const std::optional<std::int64_t> expires =
            ttl.count() > 0 ? std::optional<std::int64_t>(now + ttl.count()) : std::nullopt;
        const auto bytes = protect(boost::json::serialize(value),
                                   {cache_channel, ns, key, expires ? std::to_string(*expires) : std::string()});
        transaction t(*this, true, none, "writing the node cache");
        {
            stmt s(*this, sql_cache_purge, none, "writing the node cache");
            s.bind_static(1, ns).bind(2, now);
            s.run();
        }
        {
            stmt s(*this, sql_cache_put, none, "writing the node cache");
            s.bind_static(1, ns).bind_static(2, key).bind_blob_static(3, bytes);
            if (expires) s.bind(4, *expires);
            else s.bind_null(4);
            s.run();
        }
        t.commit();
    }

    std::size_t cache_clear(const std::vector<std::string>& namespaces) {
        static const std::string none;
        std::size_t n = 0;
        transaction t(*this, true, none, "clearing the node cache");
        if (namespaces.empty()) {
            stmt s(*this, sql_cache_clear_all, none, "clearing the node cache");
            s.run();
            n = static_cast<std::size_t>(sqlite3_changes64(db.get()));
        }
        for (const auto& ns : namespaces) {
            stmt s(*this, sql_cache_clear_ns, none, "clearing the node cache");
            s.bind_static(1, ns);
            s.run();
            n += static_cast<std::size_t>(sqlite3_changes64(db.get()));
        }
        t.commit();
        return n;
    }

    void release(const std::string& thread) {
        // Forgotten first: a release that fails below (a full disk) leaves a row that simply
        // expires, and never makes this saver fence its own later writes.
        held.erase(thread);
        lost.erase(thread);
        transaction t(*this, true, thread, "releasing the thread's lease");
        {
            stmt s(*this, sql_release_lease, thread, "releasing the thread's lease");
            s.bind(1, thread).bind(2, owner);
            s.run();
        }
        t.commit();
    }

    // -- dispatch and group commit -------------------------------------------------------------
    /// Becomes the leader when the saver is idle (nothing queued, no flush running or posted):
    /// the caller then runs its call in place and ends with `end_lead`. Never with `own_thread`.
    bool try_lead() {
        if (pool) return false;
        std::lock_guard q(queue_mutex);
        if (leading || flush_posted || !queue.empty()) return false;
        leading = true;
        return true;
    }

    /// Ends a leader's turn: work queued meanwhile gets a flush, posted to the executor of the
    /// first call waiting (whose work guard keeps that executor running).
    void end_lead() noexcept {
        std::lock_guard q(queue_mutex);
        leading = false;
        if (!queue.empty() && !flush_posted) post_flush(queue.front()->executor());
    }

    /// Queues a call; the first call queued while nothing leads posts a flush to its executor.
    void enqueue(std::unique_ptr<job> j) {
        std::lock_guard q(queue_mutex);
        queue.push_back(std::move(j));
        if (!leading && !flush_posted) post_flush(queue.back()->executor());
    }

    /// A posted flush; one destroyed unrun (its io_context went first) lets the next call post another.
    struct flush_handler {
        impl* owner;
        explicit flush_handler(impl* i) : owner(i) {}
        flush_handler(flush_handler&& o) noexcept : owner(std::exchange(o.owner, nullptr)) {}
        flush_handler& operator=(flush_handler&&) = delete;
        ~flush_handler() {
            if (!owner) return;
            std::lock_guard q(owner->queue_mutex);
            owner->flush_posted = false;
        }
        void operator()() { std::exchange(owner, nullptr)->flush(); }
    };

    /// Posts a flush (called with `queue_mutex` held): to the saver's thread, or to `ex`.
    void post_flush(const boost::asio::any_io_executor& ex) noexcept {
        flush_posted = true;
        try {
            if (pool) boost::asio::post(*pool, flush_handler(this));
            else boost::asio::post(ex, flush_handler(this));
        } catch (...) {
            flush_posted = false; // the next call posts again
        }
    }

    /// Runs every call queued so far in one transaction (one commit, one fsync), and completes
    /// each caller once that transaction committed.
    void flush() {
        std::vector<std::unique_ptr<job>> jobs;
        {
            std::lock_guard q(queue_mutex);
            flush_posted = false;
            if (leading) return; // the leader posts a flush for what waits when it ends
            leading = true;
            jobs.swap(queue);
        }
        {
            std::lock_guard lock(mutex);
            write_batch(jobs);
        }
        for (auto& j : jobs) j->complete();
        jobs.clear();
        end_lead();
    }

    /// The calls of several callers (writes, reads, leases, maintenance) in one transaction: one
    /// commit, one fsync. Each runs inside a savepoint of its own (its own transaction nested):
    /// one that fails (a lease held by another owner, a value SQLite refuses) is undone alone and
    /// fails its caller only. A failure of the transaction itself (BEGIN busy, COMMIT failing,
    /// SQLite rolling everything back on an I/O error or a full disk) fails every call of the
    /// batch not failed already, each told with its own thread named. A lone call runs as it is,
    /// in its own transaction.
    void write_batch(std::vector<std::unique_ptr<job>>& jobs) {
        static const std::string none;
        batch_graphs.clear();
        batch_leases.clear();
        if (jobs.size() == 1) {
            try {
                jobs.front()->run();
            } catch (...) {
                jobs.front()->error = std::current_exception();
            }
            return;
        }
        try {
            // A damaged file takes no more writes: the batch then only reads, and each write in
            // it is refused by its own (nested) transaction.
            transaction t(*this, !opt.read_only && !damage, none, "saving the work of several calls at once");
            for (auto& j : jobs) {
                const std::string& who = j->thread ? *j->thread : none;
                const char* what = j->what ? j->what : "running a call";
                stmt(*this, sql_savepoint, who, what).run();
                const auto graphs_before = batch_graphs.size();
                const auto leases_before = batch_leases.size();
                try {
                    j->run();
                } catch (...) {
                    j->error = std::current_exception();
                    batch_graphs.resize(graphs_before);
                    batch_leases.resize(leases_before);
                    inline_rows.clear();
                    // SQLite rolled the whole transaction back (an I/O error, a full disk): the
                    // batch fails; otherwise only this call's work is undone.
                    if (sqlite3_get_autocommit(db.get())) throw;
                    stmt(*this, sql_rollback_savepoint, who, what).run();
                }
                stmt(*this, sql_release_savepoint, who, what).run();
            }
            t.commit();
            stored_graphs.insert(batch_graphs.begin(), batch_graphs.end());
            for (const auto& thread : batch_leases) {
                held.insert(thread);
                lost.erase(thread);
            }
        } catch (...) {
            const auto e = std::current_exception();
            for (auto& j : jobs)
                if (!j->error) j->error = batch_error(e, j->thread ? *j->thread : none, jobs.size());
        }
        batch_graphs.clear();
        batch_leases.clear();
        inline_rows.clear();
    }

    /// The calls queued even when the saver is idle (`job::batched`): `thread` is what `job::thread` points to.
    struct put_call {
        static constexpr const char* what = "saving a checkpoint";
        impl* i;
        const std::string& thread; // put's arguments outlive its co_await
        const std::string& ns;
        const checkpoint& cp;
        void operator()() const { i->put(thread, ns, cp); }
    };
    struct put_writes_call {
        static constexpr const char* what = "saving pending writes";
        impl* i;
        std::string thread, ns, checkpoint_id;
        std::vector<pending_write> writes;
        void operator()() const { i->put_writes(thread, ns, checkpoint_id, writes); }
    };

    /// The error of a shared transaction, as the caller writing `thread` is told it: its kind
    /// kept, its thread named.
    static std::exception_ptr batch_error(std::exception_ptr e, const std::string& thread, std::size_t n) {
        try {
            std::rethrow_exception(e);
        } catch (const checkpoint_error& c) {
            if (thread.empty()) return e;
            // what() ends in ": <kind>" (std::system_error): said once, by the new error.
            std::string_view text = c.what();
            const std::string kind = ": " + c.code().message();
            if (text.size() >= kind.size() && text.substr(text.size() - kind.size()) == kind)
                text.remove_suffix(kind.size());
            return std::make_exception_ptr(checkpoint_error(
                c.kind(), "thread " + quote(thread) + ": its write, committed together with " + std::to_string(n - 1) +
                              " other call(s), failed: " + std::string(text),
                {thread}));
        } catch (...) {
            return e;
        }
    }

    ~impl() {
        {
            std::lock_guard k(keeper.mutex);
            keeper.stopping = true;
        }
        keeper.wake.notify_all();
        if (keeper.thread.joinable()) keeper.thread.join();
        if (pool) pool->join();
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

namespace {
/// The value a call hands back, and the moment its completion was posted (see `call::complete`).
template <class R>
struct handback {
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error;
    std::atomic<bool> posted{false};
};

/// A queued call (impl::job) of result `R`: `f` is its SQLite work, `handler` its caller's
/// completion, `work` keeps the caller's executor running while it waits.
template <class Job, class R, class F, class Handler>
struct call final : Job {
    F f;
    Handler handler;
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work;
    std::shared_ptr<handback<R>> h;

    call(F fn, Handler hd, std::shared_ptr<handback<R>> back)
        : f(std::move(fn)), handler(std::move(hd)), work(boost::asio::get_associated_executor(handler)), h(std::move(back)) {}

    void run() override {
        if constexpr (std::is_void_v<R>) f();
        else h->value.emplace(f());
    }
    boost::asio::any_io_executor executor() const override { return work.get_executor(); }

    /// The hand-back: the completion is posted to the caller's executor and, once that post has
    /// returned, the thread that ran the call (a flush serving several callers, maybe of other
    /// threads, or the saver's own thread) touches nothing of the caller's again: the work guard
    /// and the executor travel inside the completion and die on the caller's side; the
    /// completion waits for that moment before it resumes the caller, at most the few
    /// instructions left in `post`. Asio wakes a waiting thread only after unlocking its queue,
    /// so without the wait a caller that resumes and at once destroys its io_context (run_sync,
    /// a context per request, with a saver that outlives them) could do so while this thread is
    /// still signalling it: the data race ThreadSanitizer reported (pthread_cond_signal against
    /// ~io_context; scripts/test --tsan).
    void complete() noexcept override {
        h->error = this->error;
        auto back = h;
        {
            auto ex = work.get_executor();
            boost::asio::post(ex, [back, handler = std::move(handler), work = std::move(work)]() mutable {
                back->posted.wait(false);
                std::move(handler)();
            });
        }
        back->posted.store(true);
        back->posted.notify_one();
    }
};

/// Runs `f` (SQLite work) for the caller. When the saver is idle, in place, inside the awaiting
/// coroutine: no thread hand-off, no post. Otherwise, and always for a write (`Batched`: a put
/// or put_writes, `f.thread` the thread it writes) or with `own_thread`, it queues and is run by
/// the next flush (impl::flush), which batches the writes queued beside it into one transaction;
/// the caller resumes on its own executor once its work is done and, for a write, committed.
template <class R, bool Batched = false, class Impl, class F>
boost::asio::awaitable<R> on_saver_thread(Impl& i, F f) {
    if (!Batched && i.try_lead()) {
        struct unlead {
            Impl& i;
            ~unlead() { i.end_lead(); }
        } u{i};
        std::lock_guard lock(i.mutex);
        co_return f();
    }
    auto h = std::make_shared<handback<R>>();
    auto initiate = [&i, &f, h](auto handler) {
        auto j = std::make_unique<call<typename Impl::job, R, F, decltype(handler)>>(std::move(f), std::move(handler), h);
        if constexpr (Batched) {
            j->batched = true;
            j->thread = &j->f.thread;
            j->what = F::what;
        }
        i.enqueue(std::move(j));
    };
    co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void()>(initiate, boost::asio::use_awaitable);
    if (h->error) std::rethrow_exception(h->error);
    if constexpr (!std::is_void_v<R>) co_return std::move(*h->value);
}
} // namespace

boost::asio::awaitable<void> sqlite_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    return on_saver_thread<void, true>(*impl_, impl::put_call{impl_.get(), thread_id, ns, cp});
}

boost::asio::awaitable<void> sqlite_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    return on_saver_thread<void, true>(*impl_, impl::put_writes_call{impl_.get(), std::move(thread_id), std::move(ns),
                                                                      std::move(checkpoint_id), std::move(writes)});
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> sqlite_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    return on_saver_thread<std::optional<checkpoint_tuple>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id), ns = std::move(ns), checkpoint_id = std::move(checkpoint_id)] {
            return i->get(thread_id, ns, checkpoint_id);
        });
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> sqlite_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    return on_saver_thread<std::vector<checkpoint_tuple>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id), ns = std::move(ns), options = std::move(options)] {
            return i->list(thread_id, ns, options);
        });
}

boost::asio::awaitable<void> sqlite_saver::delete_thread(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->delete_thread(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::prune(std::string thread_id, std::size_t keep_last) {
    return on_saver_thread<void>(*impl_,
                                 [i = impl_.get(), thread_id = std::move(thread_id), keep_last] { i->prune(thread_id, keep_last); });
}

boost::asio::awaitable<thread_stats> sqlite_saver::stats(std::string thread_id) {
    return on_saver_thread<thread_stats>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { return i->stats(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::copy_thread(std::string from, std::string to) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), from = std::move(from), to = std::move(to)] {
        i->copy_thread(from, to);
    });
}

boost::asio::awaitable<std::size_t> sqlite_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    return on_saver_thread<std::size_t>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id),
                                                 checkpoint_id = std::move(checkpoint_id)] {
        return i->rewind_thread(thread_id, checkpoint_id);
    });
}

boost::asio::awaitable<std::vector<thread_info>> sqlite_saver::list_threads(thread_query query) {
    // The filter is a view: copied now, before the caller's object can go.
    std::optional<boost::json::object> match;
    if (query.metadata.get()) match.emplace(*query.metadata.get());
    return on_saver_thread<std::vector<thread_info>>(*impl_, [i = impl_.get(), query, match = std::move(match)] {
        return i->list_threads(query, match ? &*match : nullptr);
    });
}

boost::asio::awaitable<sweep_result> sqlite_saver::sweep(ttl_policy policy) {
    // One hop to the saver's thread per swept thread, each in a transaction of its own: the saver's
    // other calls (the runs of this process) go on between them. (Each lambda is named before the
    // `co_await`: g++ 12 destroys the captures of one built in that expression twice.)
    const std::string cutoff =
        checkpoint_id_at(std::chrono::system_clock::now() - std::max(policy.older_than, std::chrono::milliseconds(0)));
    auto scan = [i = impl_.get(), &cutoff] { return i->expired_threads(cutoff); };
    const auto expired = co_await on_saver_thread<std::vector<std::string>>(*impl_, std::move(scan));
    sweep_result result;
    for (const auto& thread : expired) {
        auto one = [i = impl_.get(), &thread, &cutoff, action = policy.action, &result] {
            i->sweep_thread(thread, cutoff, action, result);
        };
        co_await on_saver_thread<void>(*impl_, std::move(one));
    }
    co_return result;
}

boost::asio::awaitable<std::optional<boost::json::value>> sqlite_saver::cache_get(std::string ns, std::string key) {
    return on_saver_thread<std::optional<boost::json::value>>(
        *impl_, [i = impl_.get(), ns = std::move(ns), key = std::move(key)] { return i->cache_get(ns, key); });
}

boost::asio::awaitable<void> sqlite_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                                     std::chrono::milliseconds ttl) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), ns = std::move(ns), key = std::move(key),
                                          value = std::move(value), ttl] { i->cache_put(ns, key, value, ttl); });
}

boost::asio::awaitable<std::size_t> sqlite_saver::cache_clear(std::vector<std::string> namespaces) {
    return on_saver_thread<std::size_t>(
        *impl_, [i = impl_.get(), namespaces = std::move(namespaces)] { return i->cache_clear(namespaces); });
}

bool sqlite_saver::encryption_available() noexcept { return codec::cipher::available(); }

bool sqlite_saver::encrypted() const noexcept { return impl_->box != nullptr; }

boost::asio::awaitable<void> sqlite_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), signature = std::move(signature), shape = std::move(shape)] {
        i->put_graph(signature, shape);
    });
}

boost::asio::awaitable<std::optional<std::vector<std::string>>> sqlite_saver::get_graph(std::string signature) {
    return on_saver_thread<std::optional<std::vector<std::string>>>(
        *impl_, [i = impl_.get(), signature = std::move(signature)] { return i->get_graph(signature); });
}

boost::asio::awaitable<void> sqlite_saver::acquire(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->acquire(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::release(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->release(thread_id); });
}

boost::asio::awaitable<std::optional<std::string>> sqlite_saver::break_lease(std::string thread_id) {
    return on_saver_thread<std::optional<std::string>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { return i->break_lease(thread_id); });
}

} // namespace stategraph::checkpoint
