#pragma once
/// @file saver.hpp
/// @brief The one asynchronous interface every checkpointer implements (in-memory, SQLite, ...).
///
/// Storage model, as LangGraph's savers but delta-first:
/// - a checkpoint records, per channel (state field), the *version* it holds: the id of the
///   checkpoint whose step last wrote that channel ("" = never written, default value);
/// - `put()` receives only the values of the channels whose version changed in that checkpoint,
///   and the saver stores each as a blob keyed by (thread, ns, channel, version); a channel that
///   only grew (an `append` reducer) may arrive as a delta: its new items and the version they
///   extend (`checkpoint::extends`);
/// - a checkpoint's version of the channel `__graph__` is the signature of the graph that wrote
///   it; the graph's shape itself is stored once per signature, through `put_graph`/`get_graph`
///   (older engines sent it as a `__graph__` value, which savers keep accepting);
/// - `get()`/`list()` reassemble the full `values` from those blobs;
/// - `put_writes()` stores a task's writes the moment the task finishes (pending writes), so a
///   crash mid-step re-runs only the tasks that had not finished.
///
/// Thread maintenance (every saver): `delete_thread`, `copy_thread`, `rewind_thread`, `list_threads` (by the
/// metadata of their newest checkpoint) and `sweep` (a time to live: threads idle longer are
/// deleted or pruned to their newest checkpoint). Ages are read from the checkpoint ids, which
/// are time-ordered (`checkpoint_time`): no clock column is stored.
///
/// Node cache (every saver): `cache_get`, `cache_put` and `cache_clear` keep the outcomes of cached
/// nodes by (namespace, key), apart from any thread, with an optional time to live; the engine
/// stores a node's writes there (see `cache_policy`), so a saver that outlives its process keeps
/// them across restarts.

#include <stategraph/checkpoint/reserved.hpp>

#include <boost/asio/awaitable.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace stategraph::checkpoint {

/// @brief One write of a finished (or interrupted) task, saved before the step ends.
struct pending_write {
    std::string task_id;   ///< deterministic id of the task within its step
    std::string task_name; ///< the node's name
    std::string channel;   ///< a field name, or "__goto__", "__send__", "__interrupt__", "__resume__", "__error__"
    boost::json::value value;
};

/// @brief One checkpoint of one thread (and namespace, for subgraphs).
struct checkpoint {
    std::string id;        ///< time-ordered, fixed width: ids of one thread sort by creation
    std::string parent_id; ///< the checkpoint this one was made from ("" for the first)
    std::int64_t step = -1;
    std::string source;    ///< "input", "loop", "update" or "fork"
    std::map<std::string, std::string> versions; ///< channel -> id of the checkpoint that wrote it
    boost::json::object values;   ///< on put: only the channels written here; on get: all of them
    /// On put only: channel -> the version whose value this checkpoint's value extends. For such a
    /// channel `values` holds just the items appended since that version (a JSON array) and the
    /// saver stores only those; `get()`/`list()` return the whole, reassembled value.
    std::map<std::string, std::string> extends;
    boost::json::value frontier;  ///< what runs next (owned by the engine)
    boost::json::object metadata; ///< free-form (writes of the step, run information)
    std::string signature;        ///< signature of the graph that wrote it (drift detection)
};

/// @brief A checkpoint with its address and the pending writes saved against it.
struct checkpoint_tuple {
    std::string thread_id;
    std::string ns;
    checkpoint cp;
    std::vector<pending_write> writes;
};

/// @brief Filters for `list()`. Results come newest first.
struct list_options {
    std::optional<std::string> before;   ///< only checkpoints older than this id
    std::optional<std::size_t> limit;    ///< at most this many
    std::optional<std::string> source;   ///< only this source ("loop", "update", ...)
    std::optional<std::int64_t> step;    ///< only this step
};

/// @brief Storage statistics of one thread, for retention decisions and reports.
struct thread_stats {
    std::size_t checkpoints = 0;
    std::size_t blobs = 0;
    std::size_t writes = 0;
    std::size_t bytes = 0;        ///< bytes of stored values (blobs and writes)
    std::size_t record_bytes = 0; ///< bytes of the stored checkpoint records (versions, frontier, metadata)
};

/// @brief A metadata filter for `list_threads`: the threads whose newest checkpoint in the root
/// namespace (`thread_info::checkpoint_id`) has metadata holding every key of the object with an
/// equal JSON value. A view, not a copy: the object must
/// outlive the `co_await` of the call (name it first; passing a temporary does not compile), which
/// keeps `thread_query` trivially destructible (see `thread_query`).
class metadata_filter {
public:
    constexpr metadata_filter() noexcept = default;
    /// @param match the keys and values to match; only its address is kept (it must outlive the call).
    metadata_filter(const boost::json::object& match) noexcept : match_(&match) {}
    metadata_filter(boost::json::object&&) = delete; ///< a temporary would be gone before the saver reads it
    /// @brief The object (nullptr: no filter).
    const boost::json::object* get() const noexcept { return match_; }
    bool empty() const noexcept { return !match_ || match_->empty(); }
    /// @brief Whether `metadata` holds every key of the filter with an equal value.
    bool matches(const boost::json::object& metadata) const {
        if (!match_) return true;
        for (const auto& [key, value] : *match_) {
            const auto* got = metadata.if_contains(key);
            if (!got || *got != value) return false;
        }
        return true;
    }

private:
    const boost::json::object* match_ = nullptr;
};

/// @brief Which threads `list_threads` returns: `co_await saver.list_threads({.metadata = m, .limit = 20})`.
/// Trivially destructible on purpose: g++ 12 destroys an aggregate temporary standing in a
/// `co_await` expression twice, so the spelling above must own no memory.
struct thread_query {
    metadata_filter metadata; ///< only threads whose newest root checkpoint's metadata matches (default: all)
    std::size_t limit = 0;    ///< at most this many (0: no limit)
    std::size_t offset = 0;   ///< skip this many matching threads first (paging)
};
static_assert(std::is_trivially_destructible_v<thread_query>,
              "thread_query must stay trivially destructible (g++ 12 destroys braced temporaries in co_await twice)");

/// @brief One thread, as `list_threads` reports it.
struct thread_info {
    std::string thread_id;
    /// The newest checkpoint of the root namespace "" (what `get(thread_id, "")` returns); empty
    /// when the thread has checkpoints only in subgraph namespaces.
    std::string checkpoint_id;
    /// When `checkpoint_id` was made (read from the id; nullopt for an id not made by
    /// `new_checkpoint_id`).
    std::optional<std::chrono::system_clock::time_point> created_at;
    boost::json::object metadata; ///< the metadata of `checkpoint_id`
    /// The newest checkpoint of any namespace: `checkpoint_id` unless a subgraph wrote after it
    /// (an interrupted subgraph). Threads are listed, and aged by `sweep`, by this one.
    std::string newest_id;
    std::size_t checkpoints = 0; ///< checkpoints in all namespaces
};

/// @brief What `sweep` does to a thread whose newest checkpoint is older than its time to live.
enum class ttl_action {
    delete_thread, ///< delete it (as `delete_thread`)
    keep_latest,   ///< keep only its newest checkpoint per namespace (as `prune(thread, 1)`)
};

/// @brief A time to live for `sweep`: `co_await saver.sweep({.older_than = std::chrono::hours(24 * 30)})`.
/// Trivially destructible, as `thread_query`.
struct ttl_policy {
    /// Threads whose newest checkpoint (of any namespace) is older than this are swept; zero or
    /// less: every thread with a checkpoint made before the call.
    std::chrono::milliseconds older_than{0};
    ttl_action action = ttl_action::delete_thread;
};
static_assert(std::is_trivially_destructible_v<ttl_policy>);

/// @brief What one `sweep` did.
struct sweep_result {
    std::size_t expired = 0;             ///< threads found past their time to live
    std::size_t deleted = 0;             ///< threads deleted (`ttl_action::delete_thread`)
    std::size_t pruned = 0;              ///< threads that lost checkpoints (`ttl_action::keep_latest`)
    std::size_t checkpoints_removed = 0; ///< checkpoints deleted in all
    /// Expired threads left alone because a run holds their lease (another process's live lease,
    /// or this saver's own): a run in progress is never swept.
    std::size_t skipped_busy = 0;
};

/// @brief The checkpointer interface. Implementations report failures as
/// `stategraph::checkpoint_error` with codes `storage_failure`, `corrupt_checkpoint`,
/// `thread_busy`, `lease_lost`, `schema_too_new`, `thread_not_found`, `thread_exists` or `key_mismatch`.
/// Thread safety: an implementation may be shared by many runs on many threads.
class saver {
public:
    virtual ~saver() = default;

    /// @brief Stores a checkpoint. `cp.values` holds only the channels whose version is new.
    /// Putting an id that is stored already replaces its record (parent, step, source, versions,
    /// frontier, metadata) and keeps the values stored with it that are not written again: a
    /// checkpoint as `get` returned it, put back with no values and other metadata, changes only
    /// its metadata (the server's `PATCH /threads/{id}/state`; conformance check `metadata_patch`).
    /// Taken by reference (the engine keeps one record per run and updates it in place): the
    /// arguments must outlive the returned awaitable, so `co_await` it where it is called.
    /// @param thread_id the thread.
    /// @param ns the checkpoint namespace ("" at the top level, "node:task" for a subgraph's).
    /// @param cp the checkpoint; read during the call only.
    virtual boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns,
                                             const checkpoint& cp) = 0;
    /// @brief Stores the writes of one task against checkpoint `checkpoint_id` (durable per task).
    /// @param thread_id the thread.
    /// @param ns the namespace.
    /// @param checkpoint_id the checkpoint the task ran from.
    /// @param writes the task's writes; a task's write to a channel replaces its earlier one.
    virtual boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                    std::vector<pending_write> writes) = 0;
    /// @brief The latest checkpoint (or the one with `checkpoint_id`) with its pending writes.
    /// @param thread_id the thread.
    /// @param ns the namespace ("" for the top level).
    /// @param checkpoint_id a checkpoint id; nullopt: the newest.
    /// @return the checkpoint, or nullopt when the thread (or that id) has none; corrupt data throws
    /// `checkpoint_error(corrupt_checkpoint)`.
    virtual boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                        std::optional<std::string> checkpoint_id) = 0;
    /// @brief Checkpoints of a thread, newest first, with their values reassembled.
    /// @param thread_id the thread (no checkpoints: an empty list).
    /// @param ns the namespace ("" for the top level).
    /// @param options `before`, `limit`, `source` and `step` filters.
    virtual boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                                       list_options options) = 0;
    /// @brief Deletes every checkpoint, blob and write of a thread (all namespaces).
    /// @param thread_id the thread; deleting one with nothing stored does nothing. Leased savers throw
    /// `thread_busy` while another owner holds the thread.
    virtual boost::asio::awaitable<void> delete_thread(std::string thread_id) = 0;
    /// @brief Keeps the newest `keep_last` checkpoints of a thread (per namespace) and the blobs
    /// they need; the pending writes of the newest checkpoint are always kept.
    /// @param thread_id the thread.
    /// @param keep_last checkpoints kept per namespace, newest first; 0 counts as 1 in every
    /// saver of this library. Node-cache entries are not touched.
    virtual boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) = 0;
    /// @brief Storage used by a thread.
    /// @param thread_id the thread (none stored: all counts zero).
    virtual boost::asio::awaitable<thread_stats> stats(std::string thread_id) = 0;
    /// @brief Whether the saver holds any checkpoint or pending write of the thread: what `stats`
    /// tells by nonzero counts, without reading the stored values. The default asks `stats`;
    /// savers on a server override it with one cheap query.
    virtual boost::asio::awaitable<bool> holds_thread(std::string thread_id) {
        auto counted = stats(std::move(thread_id));
        const auto s = co_await std::move(counted);
        co_return s.checkpoints > 0 || s.writes > 0;
    }

    /// @brief Copies every checkpoint, value and pending write of thread `from` (all namespaces)
    /// to the new thread `to`, which then reads exactly as `from` (LangGraph's `copy_thread`); the
    /// two are independent afterwards. Throws `checkpoint_error` with `thread_not_found` when
    /// `from` has no checkpoint, `thread_exists` when `to` has any checkpoint or write (delete it
    /// first), and, as every write, `thread_busy` / `lease_lost` for a lease on `to`.
    /// @param from the thread copied (left unchanged).
    /// @param to the new thread's id.
    virtual boost::asio::awaitable<void> copy_thread(std::string from, std::string to) = 0;
    /// @brief Rolls a thread back to its checkpoint `checkpoint_id`: every checkpoint of the thread
    /// newer than it (id greater, in every namespace: subgraphs included), the pending writes saved
    /// against those and the values only they wrote go, in one transaction (one script on Redis),
    /// so a crash leaves the thread either as it was or rolled back, never half. The checkpoint
    /// itself, its pending writes and everything older stay. Returns how many checkpoints went.
    /// Throws `checkpoint_error` with `checkpoint_not_found`, naming the thread and the checkpoint,
    /// when no namespace of the thread has that checkpoint (nothing is removed then), and, as every
    /// write, `thread_busy` / `lease_lost` for a lease held by another saver.
    /// @param thread_id the thread.
    /// @param checkpoint_id the checkpoint that becomes the newest.
    virtual boost::asio::awaitable<std::size_t> rewind_thread(std::string thread_id, std::string checkpoint_id) = 0;
    /// @brief The threads whose newest root checkpoint's metadata matches `query.metadata`, newest
    /// first (by `thread_info::newest_id`, then by thread id), `query.offset` skipped and at most
    /// `query.limit` returned.
    /// @param query metadata filter (a view: keep the object alive across the `co_await`), limit (0: all)
    /// and offset.
    virtual boost::asio::awaitable<std::vector<thread_info>> list_threads(thread_query query) = 0;
    /// @brief Applies a time to live: every thread whose newest checkpoint (any namespace) is older
    /// than `policy.older_than` is deleted or pruned to its newest checkpoint per namespace
    /// (`policy.action`). A thread whose lease is held (a run in progress) is skipped and counted;
    /// the age is checked again, with the lease, in the transaction that removes the thread, so a
    /// thread written meanwhile is kept.
    /// @param policy the age (`older_than`) and what happens to older threads (`action`).
    /// @return counts of what was found, deleted, pruned and skipped.
    virtual boost::asio::awaitable<sweep_result> sweep(ttl_policy policy) = 0;

    /// @brief The node-cache entry at (`ns`, `key`), or nullopt when there is none or it expired.
    /// Throws `checkpoint_error(corrupt_checkpoint)` naming the namespace and key when the stored
    /// entry cannot be read back.
    /// @param ns the cache namespace (the engine uses the graph and node names).
    /// @param key the entry's key.
    virtual boost::asio::awaitable<std::optional<boost::json::value>> cache_get(std::string ns, std::string key) = 0;
    /// @brief Stores (or replaces) the node-cache entry at (`ns`, `key`); it expires `ttl` after
    /// this call (zero or less: never). Entries belong to no thread: `delete_thread`, `prune`,
    /// `copy_thread` and `sweep` leave them alone, and no lease is needed.
    /// @param ns the cache namespace.
    /// @param key the entry's key.
    /// @param value the outcome stored.
    /// @param ttl time to live from now (zero or less: never expires).
    virtual boost::asio::awaitable<void> cache_put(std::string ns, std::string key, boost::json::value value,
                                                   std::chrono::milliseconds ttl) = 0;
    /// @brief Deletes the node-cache entries of the namespaces `namespaces` (empty: of every
    /// namespace); returns how many went, expired ones included.
    /// @param namespaces the namespaces cleared; empty: all.
    virtual boost::asio::awaitable<std::size_t> cache_clear(std::vector<std::string> namespaces) = 0;

    /// @brief Stores the shape of the graph with `signature` (its lines, for explaining drift),
    /// once for all threads; storing a signature that is already there does nothing.
    virtual boost::asio::awaitable<void> put_graph(std::string signature, std::vector<std::string> shape) = 0;
    /// @brief The shape stored for `signature`, or nullopt when none is.
    virtual boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(std::string signature) = 0;

    /// @brief Takes the single-writer lease of a thread for this saver, or throws
    /// `checkpoint_error(thread_busy)`. Savers without cross-process sharing need not lock.
    ///
    /// The lease contract of savers that share storage across processes:
    /// - while held, the saver renews the lease on its own (a timer, not the run's writes), so a
    ///   node may run far longer than the lease's time to live;
    /// - a holder that is provably gone (a dead process on this host) is taken over at once; one
    ///   that may be alive (another host, a frozen process) only after its lease expired;
    /// - writes are fenced: once the lease was taken over (expired while the holder was frozen,
    ///   or broken by `break_lease`), the old holder's writes on the thread are refused with
    ///   `checkpoint_error(lease_lost)` and nothing of them is stored.
    /// @param thread_id the thread (unnamed in this no-op default).
    virtual boost::asio::awaitable<void> acquire(std::string /*thread_id*/) { co_return; }
    /// @brief Releases the lease taken by `acquire`.
    virtual boost::asio::awaitable<void> release(std::string /*thread_id*/) { co_return; }
    /// @brief Removes the thread's lease whoever holds it, for an operator who knows its holder is
    /// gone (a crashed host) and will not wait out its time to live. Returns the holder it removed
    /// (nullopt: none). The old holder's later writes fail with `lease_lost`.
    /// @param thread_id the thread whose lease goes (unnamed in this no-op default, which returns nullopt).
    virtual boost::asio::awaitable<std::optional<std::string>> break_lease(std::string /*thread_id*/) {
        co_return std::nullopt;
    }
};

/// @brief A new checkpoint id: 11 characters of a 64-symbol alphabet in ASCII order (nanoseconds since
/// the epoch; fits the small-string buffer), fixed width, sortable as text, strictly increasing within a process and
/// time-ordered across processes.
std::string new_checkpoint_id();

/// @brief The id `new_checkpoint_id` would have made at time `t` (for tests and imports of old
/// histories; ids made this way are not unique).
/// @param t the time the id encodes.
std::string checkpoint_id_at(std::chrono::system_clock::time_point t);

/// @brief When the checkpoint with `id` was made, read from the id (ids of `new_checkpoint_id`,
/// and of its former 20-hex-digit form); nullopt for any other id.
/// @param id a checkpoint id.
std::optional<std::chrono::system_clock::time_point> checkpoint_time(std::string_view id);

} // namespace stategraph::checkpoint
