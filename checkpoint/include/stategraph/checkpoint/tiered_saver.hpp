#pragma once
/// @file tiered_saver.hpp
/// @brief Two savers as one: a fast front (Redis) before a durable back (PostgreSQL), as the
/// Global Supervisor's "State Persistence" describes (Redis first, PostgreSQL as the fallback
/// when Redis no longer has a thread). Generic over any two savers.
///
/// Semantics:
/// - **Writes** on a thread (`put`, `put_writes`, `prune`, `copy_thread`) go to the back first:
///   it is the durable copy, and a failure there (`storage_failure`, `thread_busy`, `lease_lost`,
///   ...) fails the call with nothing written to the front. Then the front gets the same write,
///   but only when it holds the thread (or the thread is new: the back had nothing of it either),
///   asked with `holds_thread` (on Redis one `EXISTS`; never `stats`, which reads every value).
///   While this saver holds the thread's lease (`acquire` to `release`) the answer is known from
///   the two tiers' counts, which `acquire` reads at once (both in one round trip's wait), and
///   kept, not asked again before every write: a step then costs one round trip to each tier,
///   not two to the front, and an invoke five round trips' waits (the lease and the back's read;
///   the counts; the back's write; the front's; the lease given back). The kept answer is
///   forgotten by this saver's own `delete_thread`, `prune`, `rewind_thread`, `copy_thread` (its
///   target), `sweep` and by a front write that failed (the thread is then dropped from the
///   front and stays out of it for the lease).
///   So the front holds, per thread, either everything the back holds or nothing at all: a thread
///   that the front lost (evicted, `FLUSHDB`, its TTL) is not written there half again, and stays
///   served by the back. When the front fails a write after the back took it, the thread is
///   dropped from the front (`delete_thread` there) and the call succeeds, the reads falling back
///   to the back; when that drop fails too, the call fails with `storage_failure`.
/// - `delete_thread` deletes from the front first, then from the back (a failure in between
///   leaves the front without the thread, which is a state it may always be in).
/// - `sweep` is the back's (its result is returned; busy threads are skipped there), then the
///   front drops every thread the policy's age selects (`ttl_action::delete_thread`, busy or not).
/// - `put_graph` and `cache_put` go to the back, then the front; a failure in either fails the
///   call. `cache_clear` clears the front, then the back (whose count it returns).
/// - **Reads** (`get`, `list`, `stats`, `get_graph`, `cache_get`) ask the front; when it has
///   nothing (no such thread, checkpoint, graph or entry), the back. An error from the front
///   (unreachable, `corrupt_checkpoint`) fails the read: there is no silent fallback on errors.
///   `list_threads` is the back's (authoritative).
/// - **Leases** (`acquire`, `release`, `break_lease`) are the back's alone (the front takes
///   none), so fencing across hosts is the back's: a write whose lease was lost stores nothing.
///   Once `acquire` holds the back's lease it compares the thread's checkpoint and write counts
///   in both tiers and drops the front's copy when they differ (a writer killed between the
///   back's write and the front's left the front one write behind).
///
/// Availability: an unreachable front fails the calls that ask it (every read, and every write,
/// which asks it first whether it holds the thread) with its `storage_failure`: the tiered saver
/// works while both servers do.
///
/// Durability: a call that returned has its data in the back (for PostgreSQL: committed). A
/// front that loses data loses only speed. Limits: a reader that takes no lease may see a front
/// left one write behind by a killed writer until the next `acquire` (or the front's TTL). Races: a front flushed between the check "does the
/// front hold the thread" and the front's write keeps only that write of the thread; a later
/// read may then see a partial front. Under a lease that check is made once, so the window is
/// the lease's whole span: other processes flushing Redis (or sweeping the front) while a run
/// writes should delete the thread's keys under its lease, or accept that window; the next
/// `acquire` compares the tiers and drops a front copy that differs.

#include <stategraph/checkpoint/saver.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace stategraph::checkpoint {

/// @brief A saver reading from `front` first and writing to `back` first (see the file comment).
/// Thread safety: all members may be called concurrently from any thread (the kept lease answers
/// are guarded by a mutex); each call awaits the front's and back's calls in turn on the awaiting
/// coroutine, so it completes where they do (on the caller's executor for this library's savers).
class tiered_saver final : public saver {
public:
    /// @brief Throws `checkpoint_error(storage_failure)` when either saver is null.
    /// @param front the fast tier, read first (a `redis_saver`, say); shared, kept alive by this saver.
    /// @param back the durable tier, written first and holding the leases (a `postgres_saver`, say).
    tiered_saver(std::shared_ptr<saver> front, std::shared_ptr<saver> back);
    ~tiered_saver() override;
    tiered_saver(const tiered_saver&) = delete;
    tiered_saver& operator=(const tiered_saver&) = delete;

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) override;
    /// @brief As `put`, with the batch written whole to each saver (PostgreSQL: one round trip;
    /// Redis: one script call).
    boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                          std::span<const checkpoint> cps) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
    /// @brief The call's checkpoints and writes as one `end_call` to the back (one PostgreSQL
    /// round trip), then one to the front when it holds the thread (one Redis script call), then
    /// the back's lease given back: the front is written while the lease is still held.
    boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end) override;
    /// @brief The back's `acquire_and_get` (its lease and its read together), then the front's
    /// copy checked as `acquire` does; the back's checkpoint is returned.
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) override;
    boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                std::optional<std::string> checkpoint_id) override;
    boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                               list_options options) override;
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override;
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override;
    /// @brief The front's answer when it holds the thread, else the back's.
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

    boost::asio::awaitable<void> acquire(std::string thread_id) override;
    boost::asio::awaitable<void> release(std::string thread_id) override;
    boost::asio::awaitable<std::optional<std::string>> break_lease(std::string thread_id) override;

    /// @brief The savers it was made with.
    const std::shared_ptr<saver>& front() const noexcept { return front_; }
    const std::shared_ptr<saver>& back() const noexcept { return back_; }

private:
    /// Whether a write on `thread` should go to the front too (asked before the back's write).
    boost::asio::awaitable<bool> front_takes(const std::string& thread);
    /// Runs `write` (a front write on `thread`); when it fails, drops the thread from the front,
    /// or throws `storage_failure` when that fails too.
    boost::asio::awaitable<void> write_front(const std::string& thread, boost::asio::awaitable<void> write);
    /// With the back's lease just taken: drops a front copy whose counts differ from the back's,
    /// and keeps whether the front takes the thread's writes; on failure gives the lease back.
    boost::asio::awaitable<void> check_front(std::string thread_id);
    /// The front's `rewind_thread`, as a write for `write_front`.
    boost::asio::awaitable<void> rewind_front(std::string thread_id, std::string checkpoint_id);

    /// The kept answer of `front_takes` for `thread` (nullopt: not leased here, or not known).
    std::optional<bool> kept_takes(const std::string& thread);
    /// Keeps `takes` for `thread` while its lease is held here (nothing otherwise).
    void keep_takes(const std::string& thread, bool takes);
    /// Forgets the kept answer of `thread` (asked again at its next write).
    void forget_takes(const std::string& thread);

    std::shared_ptr<saver> front_;
    std::shared_ptr<saver> back_;
    /// Threads whose back lease this saver holds, with the answer of `front_takes` once known.
    std::mutex mutex_;
    std::map<std::string, std::optional<bool>> leased_;
};

} // namespace stategraph::checkpoint
