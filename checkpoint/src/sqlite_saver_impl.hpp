#pragma once
/// @file sqlite_saver_impl.hpp
/// @brief The SQLite saver's implementation class, `sqlite_saver::impl` (private to checkpoint/src):
/// its state, the statement, transaction and error helpers every part uses, the small helpers on
/// the put/get path (inline here), and the declarations of the rest, grouped by the file that
/// defines them: sqlite_saver.cpp (opening, errors, dispatch and group commit, the public entry
/// points), sqlite_schema.cpp (set-up, schema migrations, encryption), sqlite_checkpoints.cpp
/// (put, put_writes, get, list), sqlite_threads.cpp (delete, rewind, copy, list_threads, sweep,
/// prune, stats), sqlite_leases.cpp (leases and their keeper), sqlite_cache.cpp (graph shapes and
/// the node cache). `sqlite_detail` holds the statements more than one of those files runs.

#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>

#include "cipher.hpp"
#include "codec.hpp"
#include "saver_common.hpp"
#include "thread_locks.hpp"

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <sqlite3.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace stategraph::checkpoint {

namespace sqlite_detail {

/// The channel holding the graph's shape lines, versioned by the graph signature.
inline constexpr std::string_view graph_channel = reserved::graph;

// Statements (cached per connection, keyed by their address: each is one `sql_*` constant, here
// when several files run it, else in the file that does; these are `inline`, one object each in
// the program, so one key each).
inline constexpr std::string_view sql_begin_immediate = "BEGIN IMMEDIATE";
inline constexpr std::string_view sql_begin_deferred = "BEGIN";
inline constexpr std::string_view sql_commit = "COMMIT";
inline constexpr std::string_view sql_put_blob =
    "INSERT OR REPLACE INTO blobs(thread_id, ns, channel, version, value) VALUES(?1, ?2, ?3, ?4, ?5)";
inline constexpr std::string_view sql_put_graph = "INSERT OR IGNORE INTO graphs(version, value) VALUES(?1, ?2)";
// Checkpoint rows without their values, in the columns impl::read_row reads.
#define STATEGRAPH_CP_COLUMNS "id, parent_id, step, source, record, pending"
inline constexpr std::string_view sql_get_latest = "SELECT " STATEGRAPH_CP_COLUMNS
                                                   " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                                   "ORDER BY id DESC LIMIT 1";
inline constexpr std::string_view sql_get_by_id = "SELECT " STATEGRAPH_CP_COLUMNS
                                                  " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
inline constexpr std::string_view sql_list = "SELECT " STATEGRAPH_CP_COLUMNS
                                             " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                             "AND (?3 IS NULL OR id < ?3) AND (?4 IS NULL OR source = ?4) "
                                             "AND (?5 IS NULL OR step = ?5) ORDER BY id DESC LIMIT ?6";
inline constexpr std::string_view sql_kept_records = "SELECT " STATEGRAPH_CP_COLUMNS
                                                     " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                                     "ORDER BY id DESC LIMIT ?3";
inline constexpr std::string_view sql_oldest_record = "SELECT " STATEGRAPH_CP_COLUMNS
                                                      " FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 "
                                                      "ORDER BY id LIMIT 1";
#undef STATEGRAPH_CP_COLUMNS
inline constexpr std::string_view sql_get_blob =
    "SELECT value FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
inline constexpr std::string_view sql_get_graph = "SELECT value FROM graphs WHERE version = ?1";

using common::now_ms;
using common::quote;

/// One pending write inside a checkpoint row (`checkpoints.pending`, schema version 9): its
/// value as stored (sealed or encrypted, as a row of `writes`, to the thread, namespace,
/// checkpoint id, task id, task name and channel). Views into the column's bytes.
struct inline_write {
    std::string_view task_id, task_name, channel, value;
};
/// The `pending` column: the writes a call ended with, stored with the checkpoint they belong to
/// when the same end_call wrote it (one b-tree row, one page, for both). A format byte, then for
/// each write its four fields, each a length (LEB128) and its bytes.
std::string encode_inline_writes(const std::vector<inline_write>& writes);
/// Throws codec::corrupt when the bytes are not such a column.
std::vector<inline_write> decode_inline_writes(std::string_view bytes);

} // namespace sqlite_detail

// =============================================================================================

struct sqlite_saver::impl {
    struct db_closer {
        void operator()(sqlite3* db) const noexcept { sqlite3_close_v2(db); }
    };
    struct statement_cache {
        // Keyed by the address of the SQL text: every cached statement is one of the `sql_*`
        // constants, so this saves hashing and comparing the whole text on each use.
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
    bool leading = false; ///< a flush, or an inline call, is running (guarded by `queue_mutex`)
    /// The executors a flush is posted to and has not started on, one each (guarded by
    /// `queue_mutex`; the saver's own thread, with `own_thread`, as an empty executor). Calls
    /// queued from several threads post a flush to each: the first of those threads free to run
    /// it writes them all, and the others' flushes find nothing or what came since. Posted to
    /// one thread only, a flush waited there behind the work of the calls the last one completed
    /// (the throughput bench: the writer idle 40% of the time, between flushes).
    std::vector<boost::asio::any_io_executor> posted_to;
    /// What a posted flush holds of the saver: a flush posted beside another that served its
    /// calls may still wait in an io_context when the saver goes (its callers are done), and
    /// then must not touch it. `~impl` clears `owner` and waits for flushes under way.
    struct flush_link {
        std::mutex m;
        std::condition_variable idle;
        impl* owner;
        int running = 0; ///< flush handlers under way (guarded by `m`)
        explicit flush_link(impl* i) : owner(i) {}
    };
    std::shared_ptr<flush_link> link = std::make_shared<flush_link>(this);
    /// Graph versions stored by the batch's transaction so far; they join `stored_graphs` when it commits.
    std::vector<std::string> batch_graphs;
    /// Leases taken by `acquire` calls inside the batch's transaction so far, and whether each
    /// wrote its row; they join `held` when it commits (a batch that fails to commit took no lease).
    std::vector<std::pair<std::string, bool>> batch_leases;

    /// Threads whose lease this saver took and has not released (guarded by `mutex`); `lost`:
    /// those of them another owner took over. Writes on a thread in `held` must find our lease.
    std::set<std::string> held, lost;
    /// The file locks of leases (`<path>-leases`; none for ":memory:", a read-only saver or a
    /// system without open-file-description locks). Every lease of a file saver takes its
    /// thread's lock when it can; a run that finds the lock free and no row takes the lease by
    /// the lock alone and writes no row (`unwritten`): the call's start is then a read, not a
    /// commit. The keeper writes the row of a lease held past one tick (its time to live and its
    /// holder's name then show, as for any lease); a call that ends sooner never writes one.
    std::optional<detail::thread_locks> locks;
    /// Held threads whose lease is the file lock alone, with no row yet (a subset of `held`),
    /// and when each was taken (milliseconds since the epoch): the keeper writes the row of one
    /// held for a third of `lease_ttl`.
    std::map<std::string, std::int64_t> unwritten;
    /// Lease locks taken inside the batch's transaction by its calls so far (`batch_leases`'
    /// companions): dropped again when the call or the batch fails.
    std::vector<std::string> batch_locks;
    /// Locks to drop once the outermost transaction ends (committed or rolled back): a write's
    /// lock on a thread it does not lease, and a released lease's (never before its writes commit).
    std::vector<std::pair<std::string, detail::thread_locks::use>> end_unlocks;
    /// Drops `end_unlocks` and settles `paused_log` (called when the outermost transaction ends).
    void transaction_over(bool committed) noexcept {
        if (locks)
            for (const auto& [thread, use] : end_unlocks) locks->drop(thread, use);
        end_unlocks.clear();
        if (!paused_log.empty()) settle_paused(committed && !in_batch);
        in_batch = false;
    }
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

    /// Graph versions known to be in `graphs` (rows there are never deleted). Guarded by
    /// `graphs_mutex`, not `mutex`: a call's checkpoints are encoded before it takes the
    /// connection (prepare_put), and skip a shape known stored.
    std::set<std::string> stored_graphs;
    mutable std::mutex graphs_mutex;
    bool graph_known(const std::string& version) const {
        std::lock_guard g(graphs_mutex);
        return stored_graphs.count(version) != 0;
    }
    template <class It>
    void graphs_known(It first, It last) {
        if (first == last) return;
        std::lock_guard g(graphs_mutex);
        stored_graphs.insert(first, last);
    }
    /// Rows' inline values read during one operation, by (ns, checkpoint id); cleared by each
    /// operation that reads values (a put may change them).
    std::map<std::pair<std::string, std::string>, std::optional<std::string>> inline_rows;

    /// Threads this saver's runs left paused at an interrupt (sqlite_paused.cpp), by thread
    /// (the root namespace only): the thread's latest checkpoint as this saver wrote it, so that
    /// the resume, by the process that paused the thread, reads no rows of values back. An entry
    /// is made by each call's start that reads the file (what it read; `started` false when the
    /// thread had no checkpoint) and advanced by the run's writes; it stays only if the run
    /// pauses. Kept as the encoded bytes the saver stored (moved, not copied, as each write
    /// commits); decoded when a call's start uses the entry.
    struct paused_thread {
        bool started = false;    ///< the thread has a checkpoint (else: none)
        std::string id, parent_id, source;
        std::int64_t step = -1;
        std::string record;      ///< codec::encode_record of the latest checkpoint (unsealed)
        /// Per channel, its stored values (codec::encode_value, unsealed) by version, oldest
        /// first: the newest, and the ones its appended items extend.
        std::map<std::string, std::vector<std::pair<std::string, std::string>>, std::less<>> values;
        std::vector<pending_write> writes; ///< the pending writes of the latest checkpoint
        bool paused = false;     ///< left so by a call that paused (not a run under way)
        /// PRAGMA data_version when the entry was last known current: it is used only while no
        /// other connection committed to the file since (this connection's commits leave it alone).
        std::int64_t data_version = 0;
        std::uint64_t used = 0; ///< when last used (`paused_clock`): the least recently used goes first
    };
    std::map<std::string, paused_thread, std::less<>> paused;
    std::uint64_t paused_clock = 0;
    std::uint64_t paused_recalled = 0; ///< call starts served from `paused` (sqlite_saver::remembered)
    std::uint64_t paused_omitted = 0;  ///< of those, the ones that left the values out (the caller held them)
    /// The data version the entries in `paused` were last checked against.
    std::int64_t paused_version = -1;
    /// At most this many threads' states are kept, each with at most `paused_links` stored
    /// values per channel (a channel appended to by many runs is then made one whole value again).
    static constexpr std::size_t paused_max = 32, paused_links = 64;
    /// The writes of the outermost transaction to remembered threads, applied to their entries
    /// once it commits (forgotten if it does not, or if it is a batch's, where one call's work
    /// may be undone alone). The pointers are the caller's arguments, alive until then.
    struct paused_write {
        const std::string* thread = nullptr;
        const checkpoint* cp = nullptr;     ///< a checkpoint put (id, parent, step, source)
        std::string record;                 ///< ... its record, unsealed
        std::vector<std::pair<std::string_view, std::string>> values; ///< ... its values, unsealed
        const std::string* writes_to = nullptr; ///< or pending writes put against this checkpoint
        const std::vector<pending_write>* writes = nullptr;
        bool call_end = false;              ///< or the end of a call that paused, at this data version
        std::int64_t data_version = 0;
    };
    std::vector<paused_write> paused_log;
    /// While a call's start reads a thread from the file (`recall_or_get`): the entry its bytes go
    /// to, so that the run's writes and a pause find the whole state in memory.
    paused_thread* capture = nullptr;
    /// Whether the outermost transaction is a batch's (several calls' work in one commit).
    bool in_batch = false;
    /// Graph shapes (`__graph__` values, stored once per graph in `graphs`, never changed) by
    /// version, as read for remembered states (a run carries its graph's shape only the first
    /// time the engine writes it); at most `paused_max`.
    std::map<std::string, boost::json::value, std::less<>> shapes;

    // -- errors (the throwing ones in sqlite_saver.cpp) ----------------------------------
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
    std::string damage_text(int rc, const char* msg) const;

    /// Refuses a write into a file found damaged: it would build on a broken b-tree.
    [[noreturn]] void refuse_write(const std::string& thread, const char* what) const;

    static std::vector<std::string> names_of(const std::string& thread) {
        if (thread.empty()) return {};
        return {thread};
    }

    /// Throws the checkpoint_error matching a SQLite result code.
    [[noreturn]] void fail(int rc, const std::string& thread, const std::string& what) const;

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
            if (!nested_)
                stmt(im_, write ? sqlite_detail::sql_begin_immediate : sqlite_detail::sql_begin_deferred, thread_,
                     what_).run();
        }
        transaction(const transaction&) = delete;
        transaction& operator=(const transaction&) = delete;
        void commit() {
            if (!nested_) stmt(im_, sqlite_detail::sql_commit, thread_, what_).run();
            done_ = true;
            committed_ = !nested_;
        }
        /// Whether the batch's transaction, not this one, commits the work.
        bool nested() const noexcept { return nested_; }
        ~transaction() {
            if (nested_) return;
            if (!done_ && !sqlite3_get_autocommit(im_.db.get()))
                sqlite3_exec(im_.db.get(), "ROLLBACK", nullptr, nullptr, nullptr);
            im_.transaction_over(committed_);
        }

    private:
        impl& im_;
        const std::string& thread_;
        const char* what_;
        bool nested_;
        bool done_ = false;
        bool committed_ = false;
    };

    /// Around a transaction that only takes, renews, gives back or breaks leases (declared
    /// before it, so it outlives it): with `sync_mode::full` the commit skips its fsync
    /// (`PRAGMA synchronous = NORMAL` for that one transaction). A lease needs no durability
    /// across a power loss, which ends every holder with the host; the next data commit's fsync
    /// covers its WAL frames anyway, and SQLite's WAL recovery drops a torn tail. Inside a
    /// batch's transaction it does nothing: the batch commits as the file is set. Should setting
    /// FULL back fail, the file takes no more writes (`damage`): none may commit unsynced.
    class lease_only_commit {
    public:
        explicit lease_only_commit(impl& owner)
            : im_(owner), lowered_(owner.opt.synchronous == sqlite_options::sync_mode::full &&
                                   sqlite3_get_autocommit(owner.db.get()) &&
                                   sqlite3_exec(owner.db.get(), "PRAGMA synchronous = NORMAL", nullptr, nullptr,
                                                nullptr) == SQLITE_OK) {}
        lease_only_commit(const lease_only_commit&) = delete;
        lease_only_commit& operator=(const lease_only_commit&) = delete;
        ~lease_only_commit() {
            if (lowered_ &&
                sqlite3_exec(im_.db.get(), "PRAGMA synchronous = FULL", nullptr, nullptr, nullptr) != SQLITE_OK &&
                !im_.damage)
                im_.damage = "setting PRAGMA synchronous = FULL back after a lease's commit failed";
        }

    private:
        impl& im_;
        bool lowered_;
    };

    /// A graph version is in `graphs` once `t` committed: at once, or when the batch does.
    void graph_stored(const transaction& t, const std::string& version) {
        if (t.nested()) batch_graphs.push_back(version);
        else graphs_known(&version, &version + 1);
    }

    /// How `take_lease` took a lease.
    struct lease_taking {
        bool fresh_lock = false; ///< the file lock was taken for it (not held before)
        bool row = true;         ///< its row was written (false: the lock alone holds it)
    };
    /// The lease of `thread` is ours once `t` committed: at once, or when the batch does (a
    /// file lock taken for it is dropped again should the batch fail).
    void lease_taken(const transaction& t, const std::string& thread, const lease_taking& took) {
        if (t.nested()) {
            batch_leases.emplace_back(thread, took.row);
            if (took.fresh_lock) batch_locks.push_back(thread);
            return;
        }
        lease_held(thread, took.row);
    }
    /// `thread`'s lease is ours (`row`: with its row written; otherwise by its file lock alone).
    void lease_held(const std::string& thread, bool row) {
        held.insert(thread);
        lost.erase(thread);
        if (row) unwritten.erase(thread);
        else unwritten.emplace(thread, sqlite_detail::now_ms());
    }

    // -- stored bytes: sealed or encrypted, and read back -------------------------------
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

    [[noreturn]] void corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                              std::vector<std::string> names) const {
        throw common::corrupt(thread, ns, detail, where(), std::move(names));
    }

    boost::json::value parse(std::string_view text, const std::string& thread, const std::string& ns,
                             const std::string& what, std::vector<std::string> names) const {
        return common::parse_stored(text, thread, ns, what, where(), std::move(names));
    }

    // -- opening and closing (sqlite_saver.cpp) -------------------------------------------
    explicit impl(sqlite_options o);

    ~impl();

    // -- set-up, schema, migrations and encryption (sqlite_schema.cpp) ---------------------
    /// Reports an error of an uncached statement (keeping its message), then finalizes it.
    [[noreturn]] void fail_finalizing(sqlite3_stmt* s, int rc, const char* what);

    /// Runs SQL text without caching (setup only).
    void exec(const std::string& sql, const char* what);
    std::int64_t query_int(const std::string& sql, const char* what);
    std::string query_text(const std::string& sql, const char* what);

    /// Reads the schema version, sets the page size of a new file, switches to WAL and migrates.
    void set_up();

    /// Makes `box` from the key in the options (and forgets the options' copy of it).
    void make_cipher();

    [[noreturn]] void key_mismatch(const std::string& why) const;

    std::optional<std::string> read_setting(std::string_view name);

    /// An encrypted file opens only with its key, an unencrypted one that holds data only without
    /// one; the first saver that opens an empty file with a key marks it encrypted.
    void check_encryption();

    /// A non-empty file must start with the SQLite magic: anything else is reported, not touched.
    void check_header() const;

    void check_version(std::int64_t version) const;

    /// One schema step: `sql`, then `convert` (C++ that needs more than SQL), then `finish`.
    struct migration;

    /// Brings the file to `schema_version` in one transaction: on any error (a corrupt row the
    /// conversion cannot read included) everything is rolled back and the file keeps its version.
    void migrate();

    /// v1 -> v2: each checkpoint row's JSON columns become one binary record.
    void convert_v1_checkpoints();
    /// Schema version 9: `checkpoints.pending`, unless the file has it.
    void add_pending_column();

    /// Reads a v1 checkpoint row (columns: thread_id, ns, id, parent_id, step, source, versions,
    /// frontier, metadata, signature), for the migration to v2.
    checkpoint read_v1_row(const stmt& s, const std::string& thread, const std::string& ns) const;

    // -- checkpoints (sqlite_checkpoints.cpp; the operations are called with `mutex` held) ---
    /// A record as stored in its row (sealed or encrypted: `protect`), bound to the row's thread,
    /// namespace and id and to the columns beside it (parent, step, source).
    std::string seal_record(std::string_view record, const std::string& thread, const std::string& ns,
                            const checkpoint& cp) const;
    /// The record of a row, verified against its columns (`cp`: id, parent, step, source), or a
    /// record sealed by schema version 3 (bound to thread, namespace and id only); decrypted into
    /// `buffer` in an encrypted file. Throws codec::corrupt when it matches neither.
    std::string_view unseal_record(std::string_view stored, const std::string& thread, const std::string& ns,
                                   const checkpoint& cp, std::string& buffer) const;

    /// Reads a checkpoint row (columns: STATEGRAPH_CP_COLUMNS) without its values; with
    /// `pending`, the writes stored inside the row (its `pending` column, as stored), if any.
    checkpoint read_row(const stmt& s, const std::string& thread, const std::string& ns,
                        std::optional<std::string>* pending = nullptr) const;

    /// Calls `use(bytes)` with the stored bytes of `channel` at `version` (`graphs` first for
    /// `__graph__`) while SQLite holds them; false when nothing is stored there.
    template <class F>
    bool with_stored(const std::string& thread, const std::string& ns, const std::string& channel,
                     const std::string& version, F&& use) {
        // Stored bytes carry a checksum (or an encryption) bound to (channel, version): verified before use.
        std::string plain;
        if (channel == sqlite_detail::graph_channel) {
            stmt g(*this, sqlite_detail::sql_get_graph, thread, "reading a channel value");
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
        stmt s(*this, sqlite_detail::sql_get_blob, thread, "reading a channel value");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, channel).bind_static(4, version);
        if (!s.step()) return false;
        use(reveal(s.bytes(0), {channel, version}, plain));
        return true;
    }

    /// The inline values of checkpoint `id` (nullopt: no such row, or none inline), cached for
    /// the current operation.
    const std::optional<std::string>& inline_row(const std::string& thread, const std::string& ns, const std::string& id);

    std::vector<std::pair<std::string_view, std::string_view>> decode_inline_of(const std::string& thread, const std::string& ns,
                                                                                const std::string& id, std::string_view bytes) const;

    /// The whole value of `channel` at `version`. A value stored whole (nearly all) is parsed
    /// straight from SQLite's buffer with the saver's lenient options; a value stored as appended
    /// items is reassembled by codec::resolve_value.
    boost::json::value read_value(const std::string& thread, const std::string& ns, const std::string& id,
                                  const std::string& channel, const std::string& version);

    /// Values already read by one list(), by (channel, version), pointing into tuples that are
    /// complete and will not move: checkpoints listed together share most of their values.
    using value_memo = std::map<std::pair<std::string_view, std::string_view>, const boost::json::value*>;

    /// The `pending` column of checkpoint `id` of thread `from`, each write opened and sealed
    /// again for thread `to` (copy_thread). Throws checkpoint_error (corrupt) naming the write.
    std::string reseal_inline_writes(std::string_view stored, const std::string& from, const std::string& to,
                                     const std::string& ns, const std::string& id) const;
    /// A pending write of checkpoint `id` of thread `from` as stored (`w` names it), opened and
    /// sealed again for thread `to`. Throws checkpoint_error (corrupt) naming the write.
    std::string reseal_write(std::string_view stored, const std::string& from, const std::string& to, const std::string& ns,
                             const std::string& id, const pending_write& w) const;

    /// Adds the values (from blobs) and pending writes of a checkpoint, as memory_saver::assemble:
    /// those stored inside its row (`pending`, the column as read) first, then its rows of
    /// `writes`, a row replacing an inline write of the same task and channel in place (as a
    /// later write of them replaces a row). With `memo`, `t` must stay where it is until the
    /// memo is gone.
    void assemble(checkpoint_tuple& t, value_memo* memo = nullptr, const std::optional<std::string>& pending = std::nullopt);

    /// A checkpoint encoded for its row (its record and values sealed, its small values packed
    /// for the row), made before the call takes the connection: in a group commit each caller
    /// encodes its own on its own thread, and the flush that writes them all only binds and steps.
    /// Reads nothing of the connection's state (`stored_graphs` under `graphs_mutex`).
    struct prepared_put {
        struct value {
            std::string_view channel;
            const std::string* version;
            std::string plain; ///< unsealed: for the thread's paused-state memory
            std::string bytes; ///< as stored
            bool shared;       ///< a `__graph__` value keyed by the graph signature: one row for all threads
            bool in_row;       ///< packed in `vals`, else a row of `blobs` (or `graphs`)
        };
        std::string plain_record, record;
        std::vector<value> values;
        std::string vals; ///< the values `in_row`, packed (codec::encode_inline); empty: none
    };
    prepared_put prepare_put(const std::string& thread, const std::string& ns, const checkpoint& cp) const;
    /// The writes `pending` of checkpoint `id` packed for its row (each sealed as its row of
    /// `writes` would be; a second write of a task to a channel replaces the first); empty when
    /// they do not fit `inline_bytes`.
    std::string prepare_inline_writes(const std::string& thread, const std::string& ns, const std::string& id,
                                      const std::vector<pending_write>& pending) const;
    /// What `end_call`, `put_many` or `put` write, encoded by the caller (prepare_put).
    struct prepared_call {
        std::vector<prepared_put> puts; ///< one per checkpoint, in order
        std::string inline_writes;      ///< prepare_inline_writes of the call's writes, for their checkpoint
    };
    prepared_call prepare_end(const std::string& thread, const std::string& ns, const saver::call_end& end) const;
    prepared_call prepare_many(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps) const;

    /// Stores `cp`; with `pending`, the writes that belong to it go inside its row when the row is
    /// new, no row of `writes` names it yet and they fit `inline_bytes`. Returns whether they went
    /// there: when not, the caller puts them.
    bool put(const std::string& thread, const std::string& ns, const checkpoint& cp,
             const std::vector<pending_write>* pending = nullptr);
    /// `put` of `cp` as `p` encoded it; `inline_writes` (prepare_inline_writes, maybe empty) go
    /// inside its row when they can. Returns whether they went there.
    bool write_put(const std::string& thread, const std::string& ns, const checkpoint& cp, prepared_put& p,
                   std::string inline_writes);
    /// `put` of each of `cps`, in one transaction (or in the batch's); `prepared`: as the caller encoded them.
    void put_many(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps,
                  prepared_call* prepared = nullptr);

    /// Notes `writes`, just stored for `checkpoint_id` (as rows or inside its row), in the
    /// thread's paused-state memory when it keeps one (sqlite_paused.cpp).
    void note_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                     const std::vector<pending_write>& writes);
    void put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                    const std::vector<pending_write>& writes);

    /// `put_many`, `put_writes` and, with `end.release`, `release`, in one transaction (or in the batch's).
    void end_call(const std::string& thread, const std::string& ns, const saver::call_end& end,
                  prepared_call* prepared = nullptr);

    std::optional<checkpoint_tuple> get(const std::string& thread, const std::string& ns,
                                        const std::optional<std::string>& checkpoint_id);

    std::vector<checkpoint_tuple> list(const std::string& thread, const std::string& ns, const list_options& o);

    // -- paused threads' states (sqlite_paused.cpp) -----------------------------------------
    /// PRAGMA data_version: changes when another connection commits to the file (and then the
    /// paused entries of `paused` are dropped; a run under way keeps its entry, its lease keeping
    /// other writers out).
    std::int64_t data_version();
    /// Forgets the remembered state of `thread` (everything when empty).
    void forget(const std::string& thread) noexcept;
    /// A call's start: the thread's latest checkpoint, from `paused` when its entry is current,
    /// else read as `get` does, the bytes read kept as the thread's entry (none read: an empty
    /// thread) for the run's writes to advance. `held`: the caller holds the values of that
    /// checkpoint; when the entry's is that one, they are left out (`values_omitted`).
    std::optional<checkpoint_tuple> recall_or_get(const std::string& thread, const std::string& ns,
                                                  const std::string* held = nullptr);
    /// Whether a write of this saver to (thread, ns) now is to be noted (`note_paused`): the
    /// thread is remembered and this saver holds its lease. A thread remembered whose lease this
    /// saver does not hold is forgotten: another saver may write it before the next call's start.
    bool noting_paused(const std::string& thread, const std::string& ns) noexcept;
    /// Notes a write (inside its transaction): applied to the thread's entry when the
    /// transaction commits.
    void note_paused(paused_write w);
    /// The entry's state as `get` returns it; none when it cannot be made (the entry is then dropped).
    /// `omit_values`: everything but the values (`checkpoint_tuple::values_omitted`).
    std::optional<checkpoint_tuple> recall(const std::string& thread, const std::string& ns, const paused_thread& e,
                                           bool omit_values = false);
    /// Applies `paused_log` to the entries (`apply`), or forgets its threads.
    void settle_paused(bool apply) noexcept;
    /// One write applied to `e`; false when it does not follow from it (the entry is then dropped).
    bool advance_paused(paused_thread& e, paused_write& w);

    // -- thread maintenance (sqlite_threads.cpp) ------------------------------------------
    void delete_thread(const std::string& thread);

    /// Deletes the thread's rows and an expired lease of another owner (in the caller's transaction).
    void delete_rows(const std::string& thread, std::int64_t now);

    std::size_t rewind_thread(const std::string& thread, const std::string& checkpoint_id);

    void copy_thread(const std::string& from, const std::string& to);

    std::vector<thread_info> list_threads(const thread_query& q, const boost::json::object* match);

    std::size_t count_checkpoints(const std::string& thread);

    /// The threads whose newest checkpoint's id sorts before `cutoff` (a `sweep`'s first step).
    std::vector<std::string> expired_threads(const std::string& cutoff);

    /// Sweeps one thread in a transaction of its own, adding what it did to `result`: its age and
    /// lease are checked again with the write lock held, so a thread written or taken since the
    /// scan is left alone.
    void sweep_thread(const std::string& thread, const std::string& cutoff, ttl_action action, sweep_result& result);

    void prune(const std::string& thread, std::size_t keep_last);

    /// `prune` inside the caller's write transaction, its lease checked.
    void prune_thread(const std::string& thread, std::size_t keep_last);

    thread_stats stats(const std::string& thread);

    // -- leases (sqlite_leases.cpp) -------------------------------------------------------
    /// Fences a write (inside its transaction): refused with `lease_lost` when this saver took the
    /// thread's lease and it is no longer ours, with `thread_busy` while another owner holds a live
    /// lease (unless that owner is provably gone); renews our own.
    void check_lease(const std::string& thread, std::int64_t now);
    /// `check_lease`, unless a call writing several things to `thread` in one transaction
    /// checked it already (`one_lease_check`): inside the write transaction the lease cannot
    /// change, so `end_call` and `put_many` read it once, not once per checkpoint.
    void check_lease_once(const std::string& thread, std::int64_t now) {
        if (lease_checked && *lease_checked == thread) return;
        check_lease(thread, now);
    }
    /// The thread whose lease the current write transaction has checked (nullptr: none).
    const std::string* lease_checked = nullptr;
    /// Checks `thread`'s lease once for the writes made in its scope (inside their transaction).
    class one_lease_check {
    public:
        one_lease_check(impl& owner, const std::string& thread) : im_(owner) {
            im_.check_lease_once(thread, sqlite_detail::now_ms());
            if (!im_.lease_checked) {
                im_.lease_checked = &thread;
                set_ = true;
            }
        }
        one_lease_check(const one_lease_check&) = delete;
        one_lease_check& operator=(const one_lease_check&) = delete;
        ~one_lease_check() {
            if (set_) im_.lease_checked = nullptr;
        }

    private:
        impl& im_;
        bool set_ = false;
    };

    std::int64_t lease_ms() const {
        return std::chrono::duration_cast<std::chrono::milliseconds>(opt.lease_ttl).count();
    }

    [[noreturn]] void throw_lost(const std::string& thread, const std::string& holder);

    [[noreturn]] void throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const;

    /// Whether a run holds the thread's lease: this saver (it acquired the thread and did not lose
    /// it), another owner whose lease is live and who is not provably gone, or a run of another
    /// saver holding the thread's file lock alone. When none does, the thread's file lock is held
    /// until the caller's transaction ends (no run starts on it meanwhile).
    bool leased(const std::string& thread, std::int64_t now);

    void acquire(const std::string& thread);
    /// `acquire` and `get` in one transaction (or in the batch's); `held_values`: as recall_or_get's `held`.
    std::optional<checkpoint_tuple> acquire_and_get(const std::string& thread, const std::string& ns,
                                                    const std::optional<std::string>& checkpoint_id,
                                                    const std::string* held_values = nullptr);
    /// The lease taken for this saver inside the caller's transaction (throws `thread_busy`): the
    /// thread's file lock when free, and its row, unless `lock_alone` and the lock was free and
    /// no row is there. On a throw, a lock taken for it is dropped again.
    lease_taking take_lease(const std::string& thread, bool lock_alone);
    /// `thread`'s file lock taken for `u` (false: another saver's run holds it); a failure of the
    /// lock itself is `storage_failure`.
    bool take_lock(const std::string& thread, detail::thread_locks::use u);
    /// `thread`'s file lock taken until the outermost transaction ends (false: another saver's run holds it).
    bool lock_for_transaction(const std::string& thread);
    /// A write's check of a thread it holds no lease on: refused while another saver's run holds
    /// the thread's file lock (`thread_busy`); the lock taken is held until the transaction ends.
    void fence_locked(const std::string& thread);
    [[noreturn]] void throw_busy_locked(const std::string& thread) const;
    /// The file lock of a lease taken but not kept (its call or batch failed).
    void drop_lease_lock(const std::string& thread) noexcept {
        if (locks) locks->drop(thread, detail::thread_locks::use::lease);
    }

    /// Starts the lease keeper once (called with `mutex` held).
    void start_keeper();

    void keep_leases();

    /// Extends every lease in `held` by a full time to live; one found gone joins `lost`. A
    /// failed renewal (the database busy beyond busy_timeout, a full disk) is tried again at the
    /// next tick: the lease still has two thirds of its time then.
    void renew_held() noexcept;

    std::optional<std::string> break_lease(const std::string& thread);

    void release(const std::string& thread);
    /// The lease's row deleted, inside the caller's transaction; forgotten first (see release()).
    void delete_lease(const std::string& thread);

    // -- graph shapes and node cache (sqlite_cache.cpp) -----------------------------------
    void put_graph(const std::string& signature, const std::vector<std::string>& shape);

    std::optional<std::vector<std::string>> get_graph(const std::string& signature);

    std::optional<boost::json::value> cache_get(const std::string& ns, const std::string& key);

    void cache_put(const std::string& ns, const std::string& key, const boost::json::value& value,
                   std::chrono::milliseconds ttl);

    std::size_t cache_clear(const std::vector<std::string>& namespaces);

    // -- dispatch and group commit (sqlite_saver.cpp) -------------------------------------
    /// Becomes the leader when the saver is idle (nothing queued, no flush running or posted):
    /// the caller then runs its call in place and ends with `end_lead`. Never with `own_thread`.
    bool try_lead();

    /// Ends a leader's turn: work queued meanwhile gets a flush, posted to the executor of the
    /// first call waiting (whose work guard keeps that executor running).
    void end_lead() noexcept;

    /// Queues a call; a call queued while nothing leads posts a flush to its executor, unless one
    /// is posted there already.
    void enqueue(std::unique_ptr<job> j);

    /// A posted flush; one destroyed unrun (its io_context went first) lets the next call post another.
    struct flush_handler;

    /// Posts a flush (called with `queue_mutex` held): to the saver's thread, or to `ex`, unless
    /// one is posted there and has not started.
    void post_flush(const boost::asio::any_io_executor& ex) noexcept;
    /// `ex`'s posted flush has started, or is gone (called with `queue_mutex` held).
    void unpost(const boost::asio::any_io_executor& ex) noexcept;
    /// Flushes posted for what is queued (called with `queue_mutex` held, nothing leading): one to
    /// each executor the queued calls come from (the first few).
    void post_flushes() noexcept;

    /// Runs every call queued so far in one transaction (one commit, one fsync), and completes
    /// each caller once that transaction committed.
    void flush(const boost::asio::any_io_executor& ex);

    /// The calls of several callers (writes, reads, leases, maintenance) in one transaction: one
    /// commit, one fsync. Each runs inside a savepoint of its own (its own transaction nested):
    /// one that fails (a lease held by another owner, a value SQLite refuses) is undone alone and
    /// fails its caller only. A failure of the transaction itself (BEGIN busy, COMMIT failing,
    /// SQLite rolling everything back on an I/O error or a full disk) fails every call of the
    /// batch not failed already, each told with its own thread named. A lone call runs as it is,
    /// in its own transaction.
    void write_batch(std::vector<std::unique_ptr<job>>& jobs);

    /// The calls queued even when the saver is idle (`job::batched`): `thread` is what `job::thread` points to.
    struct put_call;
    struct put_many_call;
    struct put_writes_call;
    struct end_call_call;

    /// The error of a shared transaction, as the caller writing `thread` is told it: its kind
    /// kept, its thread named.
    static std::exception_ptr batch_error(std::exception_ptr e, const std::string& thread, std::size_t n);
};

} // namespace stategraph::checkpoint
