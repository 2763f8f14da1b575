#pragma once
/// @file redis_saver.hpp
/// @brief A checkpointer on a Redis server (7.x): RESP over an Asio TCP socket, hiredis only for
/// its reply reader and command formatter.
///
/// Key layout (`P` is `redis_options::key_prefix`; `{T}` the thread id inside braces, a Redis
/// Cluster hash tag, so that every key of a thread lives on one shard; fields join their parts
/// with a NUL byte):
/// - `P:{T}:ids`: sorted set (all scores 0, ordered as text) of `ns NUL id`, one per checkpoint;
/// - `P:{T}:cp`: hash `ns NUL id` -> the checkpoint's parent, step, source and sealed record;
/// - `P:{T}:vals`: hash `ns NUL channel NUL version` -> the sealed stored value (whole JSON, or
///   the items appended since an earlier version: `checkpoint::extends`);
/// - `P:{T}:writes`: hash `ns NUL checkpoint NUL task NUL channel` -> task name and sealed JSON of
///   a pending write; `P:{T}:wseq` sorted set of the same fields scored by arrival (a rewrite
///   keeps its place);
/// - `P:{T}:meta`: hash; `newest` is the newest checkpoint id of any namespace;
/// - `P:{T}:lease`: the thread's lease, `SET NX PX` (owner name, see `lease_owner`);
/// - `P:threads`: set of thread ids (listing and sweeping; ids whose keys expired are dropped
///   from it when met);
/// - `P:graphs`: hash graph signature -> sealed shape (shared by every thread);
/// - `P:cache:<ns> NUL <key>`: a node-cache entry (string, Redis TTL); `P:cachekeys:<ns>` the set
///   of keys put in a namespace since its last clear and `P:cachens` the set of namespaces (for
///   `cache_clear`, which counts entries that expired on their own too).
///
/// Atomicity: every write on a thread (`put`, `put_writes`, `delete_thread`, `prune`,
/// `copy_thread` on its target, `sweep` of it) is one Lua script (`EVALSHA`), which first checks
/// the thread's lease and then applies all the changes, so it is stored whole or not at all and a
/// write whose lease was taken over stores nothing (`lease_lost`). Reads are several commands and
/// may see a later write's checkpoint beside an earlier one, never half of one.
///
/// Thread TTL (`redis_options::thread_ttl`): every key of a thread (not its lease) gets the same
/// `PEXPIRE` in the script of each write, so a thread idle for that long disappears as a whole.
///
/// Values, records and writes are sealed (CRC-32C bound to where they are stored, as in the
/// SQLite saver) without the thread id, so `copy_thread` copies their bytes unchanged.

#include <stategraph/checkpoint/saver.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace stategraph::checkpoint {

/// @brief How to reach the Redis server and how to lay the data out there.
/// Thread safety: a plain value, copied by the constructor.
struct redis_options {
    /// @brief `redis://host:port[/db]` (host defaults to 127.0.0.1, port to 6379, db to 0).
    std::string url = "redis://127.0.0.1:6379";
    /// @brief Prefix of every key this saver reads or writes (several savers, or tests, can share
    /// a server under different prefixes).
    std::string key_prefix = "stategraph";
    /// @brief Time to live of a thread's keys, refreshed by every write on it; zero: forever.
    std::chrono::milliseconds thread_ttl{0};
    /// @brief Lifetime of a lease taken by `acquire()`; renewed every third of it while held.
    std::chrono::milliseconds lease_ttl{std::chrono::seconds(60)};
    /// @brief How long a connection attempt (or one command round trip) may take.
    std::chrono::milliseconds timeout{std::chrono::seconds(5)};
    /// @brief How many times an operation is tried when the connection drops or cannot be made
    /// (with a short, growing pause in between) before it fails with `storage_failure`.
    int attempts = 4;
    /// @brief The name of the saver's connections on the server (`CLIENT SETNAME`; spaces become
    /// underscores), to tell them apart in `CLIENT LIST`. Empty: unnamed.
    std::string client_name = "stategraph";
    /// @brief At most this many connections are open at once (the others wait for one).
    std::size_t pool_size = 4;
};

/// @brief A checkpointer on a Redis server.
///
/// Errors (all `stategraph::checkpoint_error`, naming the thread): `storage_failure` (the server
/// cannot be reached after `attempts` tries, or answered with an error), `corrupt_checkpoint`,
/// `thread_busy`, `lease_lost`, `thread_not_found`, `thread_exists`.
///
/// Thread safety: all members may be called concurrently from any thread. A call runs in the
/// awaiting coroutine, on its executor: the pooled connection it takes waits on that executor
/// (no hand-off to another thread per call). The saver's own thread only renews the held leases
/// and shuts down.
class redis_saver final : public saver {
public:
    /// @brief Parses the options and starts the saver's thread; connects lazily (the first call).
    /// Throws `checkpoint_error(storage_failure)` for a malformed URL.
    /// @param options URL, key prefix, thread and lease times to live, per-round-trip timeout, attempts,
    /// client name and pool size (`redis_options`; durations in milliseconds).
    explicit redis_saver(redis_options options);
    /// @brief Releases the leases still held, closes the connections and joins the thread.
    ~redis_saver() override;
    redis_saver(const redis_saver&) = delete;
    redis_saver& operator=(const redis_saver&) = delete;

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) override;
    /// @brief All of `cps` as one fenced write (one script call, one round trip); a refused
    /// fence stores none of them.
    boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                          std::span<const checkpoint> cps) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
    /// @brief The checkpoints, the pending writes and the lease's release as one fenced script
    /// call (one round trip, applied all or nothing by the server). A retry after a lost answer
    /// whose first try ran finds the lease already given back and succeeds; another holder's
    /// lease is still refused (`lease_lost`).
    boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end) override;
    /// @brief The lease (`SET NX PX`) and the read of the thread's checkpoint in one round trip
    /// (then one for the values, as `get`). A thread held by another owner is `thread_busy`.
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) override;
    boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                std::optional<std::string> checkpoint_id) override;
    boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                               list_options options) override;
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override;
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override;
    /// @brief One `EXISTS` on the thread's checkpoint and write keys.
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

    /// @brief Takes the thread's lease (`SET NX PX`), or renews this saver's own; a lease whose
    /// holder is provably gone (a dead process on this host) is taken over. Throws `thread_busy`.
    boost::asio::awaitable<void> acquire(std::string thread_id) override;
    /// @brief Deletes this saver's lease on the thread (no-op when another owner holds it).
    boost::asio::awaitable<void> release(std::string thread_id) override;
    /// @brief Deletes the thread's lease whoever holds it; returns the holder it removed.
    boost::asio::awaitable<std::optional<std::string>> break_lease(std::string thread_id) override;

    /// @brief The lease owner name of this saver.
    const std::string& owner() const noexcept;
    /// @brief The options it was made with.
    const redis_options& options() const noexcept;
    /// @brief Round trips to the server so far (one per pipelined round of commands, the lease
    /// keeper's, retries' and script loads included): what a step costs, for the bench.
    std::uint64_t round_trips() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

} // namespace stategraph::checkpoint
