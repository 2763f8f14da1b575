#pragma once
/// @file postgres_saver.hpp
/// @brief A checkpointer storing threads in PostgreSQL (libpq, non-blocking, on Asio).
///
/// Every connection's socket waits on the awaiting coroutine's executor (an Asio
/// `posix::stream_descriptor`): no thread per connection. A step's writes (its checkpoint row,
/// its values and the lease check that fences them) go in one pipeline (libpq's pipeline mode):
/// one round trip, one transaction. Values are sealed as in the SQLite saver (a checksum bound to
/// where they are stored), so a damaged or moved row reads as `corrupt_checkpoint`.

#include <stategraph/checkpoint/saver.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stategraph::checkpoint {

/// @brief How to reach the server and how to behave when it is away.
/// Thread safety: a plain value, copied by the constructor.
struct postgres_options {
    /// @brief libpq connection string: "postgresql://user@host:port/db" or "host=... dbname=...".
    std::string conninfo;
    /// @brief The PostgreSQL schema (namespace) holding the saver's tables; made when missing.
    /// Several savers (applications, tests) may share one database, each in a schema of its own.
    std::string schema = "public";
    /// @brief Connections kept open at most; more concurrent calls wait for one to come back.
    std::size_t pool_size = 4;
    /// @brief How long a thread's lease lives without renewal (the saver renews it every third
    /// of this while held). Another process takes an expired lease over.
    std::chrono::milliseconds lease_ttl = std::chrono::seconds(30);
    /// @brief How long one call keeps retrying (with backoff) a server it cannot reach, or a
    /// connection that dropped, before it fails with `storage_failure` naming the thread.
    std::chrono::milliseconds retry_for = std::chrono::seconds(10);
    /// @brief The first pause between retries; it doubles up to `max_backoff`.
    std::chrono::milliseconds backoff = std::chrono::milliseconds(20);
    std::chrono::milliseconds max_backoff = std::chrono::milliseconds(1000);
    /// @brief Time allowed to open one connection (the TCP connect and the start-up exchange).
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
    /// @brief A checkpoint's own small values (not an array, not appended items) go inside its
    /// row (`stategraph_checkpoints.vals`) up to this many bytes in all: one row per step for the
    /// server to insert and index instead of one per value. Larger values, arrays, and all of
    /// them with 0, go to `stategraph_blobs`.
    std::size_t inline_bytes = 1024;
};

/// @brief A checkpointer storing everything in PostgreSQL 12 or newer (pipeline mode needs
/// libpq 14 on the client side).
///
/// Tables (in `postgres_options::schema`, made and migrated on first use; the version is in
/// `stategraph_schema`): `stategraph_checkpoints`, `stategraph_blobs`, `stategraph_writes`,
/// `stategraph_graphs`, `stategraph_leases`, `stategraph_cache`. A checkpoint's row carries the
/// small values it wrote (`vals`, schema version 3; `postgres_options::inline_bytes`); the
/// others are rows of `stategraph_blobs` keyed by (channel, version). A value stored in both
/// (a checkpoint put again under its own id) is read from `stategraph_blobs`.
///
/// Errors (all `stategraph::checkpoint_error`):
/// - `storage_failure`: the server stayed unreachable for `retry_for`, or refused a statement
///   (the message names the thread and the server's words);
/// - `corrupt_checkpoint`: a stored row cannot be read back (checksum, JSON; names the thread);
/// - `schema_too_new`: the schema was migrated by a newer stategraph;
/// - `thread_busy`, `lease_lost`, `thread_not_found`, `thread_exists` as the interface says.
///
/// A connection that drops (a killed backend, a restarted server) is opened again and the
/// whole call retried with backoff: every write is idempotent (checkpoint ids are unique, rows
/// are upserted), so a retried commit neither loses nor duplicates a checkpoint.
///
/// Thread safety: all members may be called concurrently from any threads; each call runs on
/// the awaiting coroutine's executor. Arguments taken by reference must outlive the `co_await`.
class postgres_saver final : public saver {
public:
    /// @brief The schema version this code writes (and the newest it can read).
    /// 2 added the kept answers of break_lease and cache_clear (retried calls answer exactly);
    /// 3 a checkpoint's small values inside its row (`stategraph_checkpoints.vals`).
    static constexpr int schema_version = 3;

    /// @brief Connects once (blocking, on the calling thread), creates the schema and migrates
    /// it. Throws `checkpoint_error` (`storage_failure` when the server cannot be reached).
    /// @param options connection string, schema, pool size, lease time to live, retry window and
    /// backoff, connect timeout (`postgres_options`; durations in milliseconds).
    explicit postgres_saver(postgres_options options);
    /// @brief Releases the leases this saver still holds and closes the connections.
    ~postgres_saver() override;
    postgres_saver(const postgres_saver&) = delete;
    postgres_saver& operator=(const postgres_saver&) = delete;

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) override;
    /// @brief All of `cps` in one transaction, sent in one round trip; a failure stores none of them.
    boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                          std::span<const checkpoint> cps) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
    /// @brief The checkpoints, the pending writes and the lease's release in one transaction, sent
    /// in one round trip (three where the calls go one by one); a failure stores none of it and
    /// keeps the lease.
    boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end) override;
    /// @brief The lease and the checkpoint's row in one round trip, its values and writes in one
    /// more (the lease held keeps other writers out in between). When this saver stored the
    /// thread's newest checkpoint itself, the values and writes of that checkpoint ride in the
    /// first round trip, and are used when the row read is that checkpoint: one round trip in
    /// all. A thread held by another owner is `thread_busy`; a read that fails gives the lease back.
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) override;
    boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                std::optional<std::string> checkpoint_id) override;
    boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                               list_options options) override;
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override;
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override;
    /// @brief One indexed `EXISTS` query (no values read).
    boost::asio::awaitable<bool> holds_thread(std::string thread_id) override;
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

    /// @brief Takes (or renews) the thread's lease; the saver renews it on a timer of its own
    /// until `release`. A lease of another owner is taken over once expired (by the server's
    /// clock), or at once when its holder is a dead process of this host. Throws `thread_busy`.
    boost::asio::awaitable<void> acquire(std::string thread_id) override;
    boost::asio::awaitable<void> release(std::string thread_id) override;
    boost::asio::awaitable<std::optional<std::string>> break_lease(std::string thread_id) override;

    /// @brief The lease owner name of this saver: "<hostname>:<pid>:<random>:<pid namespace>".
    const std::string& owner() const noexcept;
    /// @brief The options the saver was opened with.
    const postgres_options& options() const noexcept;
    /// @brief Server process ids of the connections open now (for tests that kill them).
    std::vector<int> backend_pids() const;
    /// @brief Round trips to the server so far (one per pipeline sent, the lease keeper's and
    /// retries' included; the set-up of new connections not): what a step costs, for the bench.
    std::uint64_t round_trips() const noexcept;

    /// @brief What `remembered()` reports.
    struct paused_memory {
        std::size_t threads = 0;    ///< paused threads whose state is kept now (at most 64)
        std::uint64_t recalled = 0; ///< call starts that took a thread's values from memory
    };
    /// @brief The paused threads' states this saver keeps in memory for their resumes. A call
    /// (the engine's invoke) that ends paused at an interrupt, on a thread whose state this saver
    /// read or wrote whole during the call, leaves that state in memory as the stored bytes of
    /// its values, with the id of the thread's newest row and the transaction that wrote it
    /// (PostgreSQL's `xmin`). The resume's start, by this saver, takes the lease and reads the
    /// row and its pending writes in its one round trip as before, but no values: when the row
    /// is still the one that call stored (same id, same `xmin`: nobody stored a newer checkpoint
    /// or that one again since, from any process), its values come from memory; otherwise the
    /// thread is read as usual. Pending writes are always read from the server. Only the root
    /// namespace, for 64 threads at most, each state of 1 MiB of stored values at most; each
    /// state is used once.
    paused_memory remembered() const;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

} // namespace stategraph::checkpoint
