#pragma once
/// @file sqlite_saver.hpp
/// @brief The embedded default checkpointer: one SQLite file in WAL mode.
///
/// Layout (schema version 4, kept in `PRAGMA user_version`; every table is WITHOUT ROWID, so a
/// row lives in one b-tree, its primary key's). Every record, value and pending write is stored
/// *sealed*: behind a CRC-32C over its bytes and its address (thread, checkpoint, channel,
/// version, task; for a record also its parent, step and source columns), verified on every
/// read, so a changed byte or a row moved elsewhere reads as `corrupt_checkpoint` naming what it
/// was, never as different valid data. (Version 3 sealed records without their parent, step and
/// source, version 2 nothing: their rows are read as they were sealed, or unchecked. Version 5
/// adds the `settings` table.)
/// - `checkpoints(thread_id, ns, id, parent_id, step, source, record, vals, pending)`: one row per
///   checkpoint; `record` holds the channel versions, frontier, metadata and graph signature in a
///   compact binary form (versions relative to the checkpoint's id); `vals` the values this
///   checkpoint wrote when they fit `sqlite_options::inline_bytes` (NULL otherwise), so that a
///   typical step changes one b-tree page; `pending` (version 9) the pending writes a call ended
///   with (an interrupt's, a failure's) when the same call wrote this checkpoint and they fit
///   `inline_bytes`, each sealed as a row of `writes` would be (NULL otherwise): a call that
///   pauses then changes one b-tree, not two; later writes to the checkpoint go to `writes`, a
///   row there replacing an inline write of the same task and channel in its place;
/// - `blobs(thread_id, ns, channel, version, value)`: one row per channel value written outside
///   its checkpoint's row (too large, or kept by `prune` after that row went), keyed by the
///   version that wrote it; `value` is JSON text, or (for an `append` channel) the items
///   appended since an earlier version and that version (`checkpoint::extends`);
/// - `graphs(version, value)`: the `__graph__` value (the graph's shape) once per graph
///   signature, shared by all threads; never deleted by `prune` or `delete_thread`;
/// - `writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq)`: pending
///   writes (JSON text); a task's write to a channel replaces its earlier one (same `seq`);
/// - `leases(thread_id, owner, expires_at)`: the single-writer lease of a thread across
///   processes (`expires_at` in milliseconds since the Unix epoch). Since schema version 8 a
///   lease is also its thread's lock on one byte of the side file `<path>-leases` (a Linux
///   open-file-description lock, dropped by the kernel when its holder dies), taken by every
///   writable saver of the file. A call's start (`acquire_and_get`, outside a group commit) that
///   finds the lock free and no row there holds the thread by the lock alone and writes no row:
///   the start of a run is then a read, not a commit. The lease's row is written once its run
///   has held it for a third of `lease_ttl` (the keeper's tick), so a long run's holder shows
///   and its lease expires should it freeze, as before; a run that ends sooner never writes one.
///   A run holding a thread by the lock alone that freezes (SIGSTOP) before that tick keeps the
///   thread until it is thawed or killed. `acquire` always writes the row.
/// - `settings(name, value)` (version 4): facts about the whole file; `encryption` holds, in an
///   encrypted file, a known text encrypted with the file's key, so that opening it with another
///   key, or without one, fails at once with `key_mismatch` (and a key given for a file that holds
///   unencrypted data too).
///
/// Encryption at rest (`sqlite_options::encryption_key`, builds with libsodium): every record,
/// value, pending write and graph shape is stored as XChaCha20-Poly1305 (IETF) ciphertext with a
/// random 24-byte nonce of its own, authenticated together with its address (the parts the
/// checksum binds: thread, namespace, checkpoint, channel, version, task), so a changed byte, a row
/// moved elsewhere or one encrypted with another key reads as `corrupt_checkpoint` naming the
/// thread, checkpoint and channel. 41 bytes per stored item instead of the checksum's 5. Ids,
/// namespaces, channel and task names, steps and sources, and leases stay readable (they are the
/// keys that SQLite searches).
///
/// A file of schema version 1 (JSON text columns) is migrated when a writable saver opens it, in
/// one transaction: a row that cannot be converted fails the open with `corrupt_checkpoint` and
/// leaves the file at version 1. Processes still running a version-1 stategraph on the same
/// file must be stopped first.
///
/// The side file `<path>-leases` holds no data (nothing is ever written to it; copying or
/// deleting it while no saver has the file open changes nothing). Earlier stategraph builds,
/// which know only lease rows, refuse a file of version 8 (`schema_too_new`), and builds before
/// version 9 (which would not see the writes inside checkpoint rows) a file of version 9.
///
/// Semantics are those of `memory_saver`. Writes (`put`, `put_writes`, `prune`,
/// `delete_thread`, `copy_thread` on its target) are refused with `thread_busy` while another owner holds a live lease on
/// the thread, and with `lease_lost` when this saver took the lease and lost it since (see
/// `saver::acquire`); the check and the write are one transaction.

#include <stategraph/checkpoint/saver.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace stategraph::checkpoint {

/// @brief How to open a SQLite checkpoint file.
/// Thread safety: a plain value, read once by the constructor.
struct sqlite_options {
    /// @brief The database file (created when missing unless `read_only`); ":memory:" also works
    /// (private to the saver, no WAL, no cross-process sharing).
    std::string path;
    /// @brief `PRAGMA synchronous`: `normal` is durable across process crashes in WAL mode;
    /// `full` also across power loss; `off` leaves syncing to the OS. With `full`, a commit that
    /// only takes, renews, gives back or breaks a lease is not synced (no holder outlives a power
    /// loss, and the next data commit syncs its frames): one fsync per run, not two.
    enum class sync_mode { off, normal, full } synchronous = sync_mode::normal;
    /// @brief How long to wait for another connection's write lock before `thread_busy`.
    std::chrono::milliseconds busy_timeout{5000};
    /// @brief Lifetime of a lease taken by `acquire()`: renewed every third of it while held, so
    /// it bounds how long a crashed holder on *another* host blocks the thread (a dead process on
    /// this host is noticed at once), not how long a node may run.
    std::chrono::milliseconds lease_ttl{std::chrono::seconds(60)};
    /// @brief Open with SQLITE_OPEN_READONLY: reads work, every write throws `storage_failure`.
    bool read_only = false;
    /// @brief Values a checkpoint writes, up to this many bytes in all, are stored inside its own
    /// row (one b-tree page per commit in the common case); larger ones, and all of them with 0,
    /// go to the `blobs` table. Likewise the pending writes a call ends with go inside the row of
    /// their checkpoint up to this many bytes of their own (0: all in the `writes` table).
    std::size_t inline_bytes = 1024;
    /// @brief `PRAGMA page_size` of a file this saver creates (0: SQLite's default, 4096). A
    /// commit writes every page it changed to the WAL, so smaller pages make the usual small
    /// checkpoint cheaper to commit; values larger than a page spill into overflow pages.
    int page_size = 4096;
    /// @brief Where SQLite's work runs. `false` (the default): on the callers' threads, with no
    /// thread hand-off. A call that finds the saver idle runs in place, inside the awaiting
    /// coroutine; a write (`put`, `put_writes`) posts itself once to its own executor, so that
    /// the writes of the other coroutines ready in the same event-loop turn, and those arriving
    /// from other threads while a commit runs, share its transaction and its fsync (group commit;
    /// no timer, so a lone run waits for nothing). The trade-off: while a commit runs (an fsync
    /// with `sync_mode::full`), the other coroutines of the thread running it wait.
    /// `true`: every call runs on a thread of the saver's own (batched in the same way) and
    /// completes on the caller's executor, so a slow commit never blocks the caller's thread, at
    /// the price of two cross-thread wake-ups per call (about 8x the time per checkpoint of a
    /// small graph on SQLite NORMAL on a 2-vCPU VM).
    bool own_thread = false;
    /// @brief Encryption at rest: the key as 64 hexadecimal digits (32 bytes; make one with
    /// `openssl rand -hex 32` or `head -c 32 /dev/urandom | xxd -p -c 64`). Empty: no encryption.
    /// The first saver that opens a file with a key makes it an encrypted file (it must hold no
    /// data yet); from then on it opens only with that key (`key_mismatch` otherwise, as for a key
    /// given for an unencrypted file). Needs a build with libsodium (`sqlite_saver::encryption_available()`);
    /// without it a key is refused with `storage_failure`. The saver keeps the key, not this string.
    std::string encryption_key;
    /// @brief The key read from this file instead: 64 hexadecimal digits (surrounding whitespace
    /// ignored) or exactly 32 raw bytes. Set at most one of `encryption_key` and this.
    std::string encryption_key_file;
};

/// @brief A checkpointer storing everything in one SQLite file.
///
/// Errors (all `stategraph::checkpoint_error`):
/// - `corrupt_checkpoint`: the file is not a SQLite database, is damaged, or a stored value
///   cannot be parsed (the message names the path, thread, checkpoint and channel);
/// - `schema_too_new`: the file was written by a newer stategraph;
/// - `thread_busy`: another process holds the thread's lease, or SQLite stayed busy beyond
///   `busy_timeout`;
/// - `lease_lost`: this saver's lease on the thread was taken over; the write was not stored;
/// - `storage_failure`: a write failed (disk full, read-only, I/O error); the transaction is
///   rolled back, so the last good checkpoint stays readable; or the options are unusable (no
///   path, a malformed key, a key in a build without libsodium);
/// - `key_mismatch`: the file is encrypted with another key, or is encrypted and no key was
///   given, or holds unencrypted data and a key was given (names the file; nothing is changed).
///
/// Thread safety: one connection guarded by a mutex; all members may be called concurrently.
/// The SQLite work runs on the callers' threads, or on the saver's own (`sqlite_options::own_thread`);
/// the awaiting coroutine resumes on its own executor. Concurrent writes share a transaction
/// (group commit): each caller resumes only once its write committed; a write that fails (a
/// lease held by another owner, `thread_busy` / `lease_lost`) fails its caller alone, a commit
/// that fails fails every write in it, each error naming its thread. Arguments taken by
/// reference must outlive the `co_await`.
/// Do not carry a saver across `fork()`: open a new one in the child.
class sqlite_saver final : public saver {
public:
    /// @brief The schema version this code writes (and the newest it can read).
    static constexpr int schema_version = 9;
    /// @brief Whether this build can encrypt (it was built with libsodium: `STATEGRAPH_WITH_SODIUM`).
    static bool encryption_available() noexcept;

    /// @brief Opens (creating and migrating if needed) the file. Throws `checkpoint_error`.
    /// @param options the file, durability, busy timeout (ms), lease time to live (ms), read-only,
    /// inline size, page size, own thread and encryption key (`sqlite_options`); the key is parsed and
    /// kept in memory, the string not.
    /// @throws checkpoint_error: `storage_failure` (no path, a file SQLite cannot open or create,
    /// a malformed key, a key without libsodium), `corrupt_checkpoint`, `schema_too_new` or
    /// `key_mismatch`.
    explicit sqlite_saver(sqlite_options options);
    /// @brief Closes the connection and releases the leases this saver still holds.
    ~sqlite_saver() override;
    sqlite_saver(const sqlite_saver&) = delete;
    sqlite_saver& operator=(const sqlite_saver&) = delete;

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) override;
    /// @brief All of `cps` in one transaction (one commit, one fsync), or with the writes of other
    /// calls in the batch's; a failure stores none of them.
    boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                          std::span<const checkpoint> cps) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
    /// @brief The checkpoints, the pending writes and the lease's release in one transaction (one
    /// commit where the three calls take three), or in the batch's; a failure stores none of it
    /// and keeps the lease.
    boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end) override;
    /// @brief The lease taken and the checkpoint read in one transaction; a failure takes no lease.
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) override;
    /// @brief As `acquire_and_get` of the newest checkpoint; when it is `held_id` and this saver
    /// remembers the thread paused there (`remembered()`), its values are left out: the caller
    /// holds them.
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get_held(const std::string& thread_id, const std::string& ns, const std::string& held_id) override;
    /// @brief True: see `acquire_and_get_held`.
    bool omits_held_values() const noexcept override { return true; }
    boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                std::optional<std::string> checkpoint_id) override;
    boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                               list_options options) override;
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override;
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override;
    boost::asio::awaitable<void> copy_thread(std::string from, std::string to) override;
    boost::asio::awaitable<std::size_t> rewind_thread(std::string thread_id, std::string checkpoint_id) override;
    boost::asio::awaitable<std::vector<thread_info>> list_threads(thread_query query) override;
    boost::asio::awaitable<sweep_result> sweep(ttl_policy policy) override;
    boost::asio::awaitable<std::optional<boost::json::value>> cache_get(std::string ns, std::string key) override;
    boost::asio::awaitable<void> cache_put(std::string ns, std::string key, boost::json::value value,
                                           std::chrono::milliseconds ttl) override;
    boost::asio::awaitable<std::size_t> cache_clear(std::vector<std::string> namespaces) override;
    boost::asio::awaitable<void> put_graph(std::string signature, std::vector<std::string> shape) override;
    boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(std::string signature) override;

    /// @brief Takes (or renews) the thread's lease for `lease_ttl`; the saver then renews it every
    /// third of `lease_ttl` on a thread of its own until `release`. An expired lease of another
    /// owner, or one whose process is gone (same host, dead pid), is taken over. Throws
    /// `thread_busy` ("thread 'X' is busy: held by <owner> until <UTC time>") while another
    /// owner's lease is live.
    boost::asio::awaitable<void> acquire(std::string thread_id) override;
    /// @brief Deletes this saver's lease on the thread (no-op when it holds none).
    boost::asio::awaitable<void> release(std::string thread_id) override;
    /// @brief Deletes the thread's lease whoever holds it; returns the holder it removed.
    boost::asio::awaitable<std::optional<std::string>> break_lease(std::string thread_id) override;

    /// @brief The lease owner name of this saver: "<hostname>:<pid>:<random>:<pid namespace>".
    const std::string& owner() const noexcept;
    /// @brief The path the saver was opened with.
    const std::string& path() const noexcept;
    /// @brief Whether the saver encrypts what it stores (it was opened with a key).
    bool encrypted() const noexcept;

    /// @brief What `remembered()` reports.
    struct paused_memory {
        std::size_t threads = 0;    ///< paused threads whose state is kept now (at most 32)
        std::uint64_t recalled = 0; ///< call starts that took a thread's state from memory
    };
    /// @brief The paused threads' states this saver keeps in memory for their resumes. A call
    /// (the engine's invoke) that ends paused at an interrupt leaves the thread's state, as
    /// this saver wrote it, in memory; the resume's start, by this saver, then reads the
    /// thread's lease and no values from the file. The state is used only while it is exactly
    /// what the file holds: when any other connection (another saver, another process) has
    /// committed anything to the file since, or this saver wrote the thread outside the run
    /// (`put` without its lease, `delete_thread`, `prune`, `copy_thread` onto it,
    /// `rewind_thread`, `sweep`), the start reads the file as before (and keeps what it read for
    /// the run's own pause). Only the root namespace's state is kept, for the 32 most recently
    /// used threads at most, each as the encoded bytes it was stored as.
    paused_memory remembered() const;
    /// @brief Of the call starts `remembered()` counts as recalled, those that left the values
    /// out because their caller held them (`acquire_and_get_held`: the engine's resume of a
    /// thread its graph paused).
    std::uint64_t omitted_values() const;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace stategraph::checkpoint
