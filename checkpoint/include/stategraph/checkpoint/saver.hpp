#pragma once
/// @file saver.hpp
/// @brief The one asynchronous interface every checkpointer implements (in-memory, SQLite, ...),
/// made of five interfaces, one per concern: `checkpoint_log` (checkpoints and pending writes),
/// `thread_admin` (whole threads), `node_cache`, `graph_shapes` and `thread_lease`.
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

#include <stategraph/checkpoint/checkpoint_log.hpp>
#include <stategraph/checkpoint/graph_shapes.hpp>
#include <stategraph/checkpoint/node_cache.hpp>
#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/checkpoint/thread_admin.hpp>
#include <stategraph/checkpoint/thread_lease.hpp>

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace stategraph::checkpoint {

/// @brief The checkpointer interface. Implementations report failures as
/// `stategraph::checkpoint_error` with codes `storage_failure`, `corrupt_checkpoint`,
/// `thread_busy`, `lease_lost`, `schema_too_new`, `thread_not_found`, `thread_exists` or `key_mismatch`.
/// Thread safety: an implementation may be shared by many runs on many threads.
/// A backend implements the five interfaces; code that needs one concern (a cache, a maintenance
/// job) can take that interface alone.
class saver : public checkpoint_log,
              public thread_admin,
              public node_cache,
              public graph_shapes,
              public thread_lease {
public:
    ~saver() override = default;

    /// @brief What a call still has to write as it ends, handed to `end_call` in one piece.
    struct call_end {
        /// Checkpoints to store as `put_many` does, oldest first (may be empty); read during the
        /// call only.
        std::span<const checkpoint> checkpoints;
        /// The checkpoint `writes` belong to (one of `checkpoints` or one already stored).
        std::string writes_to;
        /// Pending writes to store after the checkpoints, as `put_writes` does (may be empty).
        std::vector<pending_write> writes;
        /// Then give the thread's lease back, as `release` does.
        bool release = false;
    };

    /// @brief A call's last writes and the end of its lease, together: the checkpoints, then the
    /// pending writes, then the lease given back. The engine ends each top-level call this way
    /// (an interrupt: the queued checkpoints and the interrupt's writes; a finished call: the
    /// queued checkpoints), so a saver with transactions pays one commit where the three calls
    /// pay three: the SQLite saver does all of it in one transaction. The default calls
    /// `put_many`, `put_writes` and `release` in that order, so a wrapper overriding those
    /// (a `forwarding_saver`) still sees each.
    ///
    /// A failure stores none of it (one transaction) or a prefix (the default, as `put_many`),
    /// and leaves the lease held: the caller then calls `release` itself.
    /// @param thread_id the thread.
    /// @param ns the namespace.
    /// @param end what to write; `end.writes` may be moved from. Kept alive by the caller until
    /// the returned awaitable completes.
    virtual boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end);

    /// @brief A call's start: takes the thread's lease (as `acquire`) and reads its checkpoint (as
    /// `get`), together. The SQLite saver does both in one transaction, where the two calls take
    /// two; the default calls `acquire`, then `get`. When it throws, the lease is not held
    /// (`thread_busy`: another holder; or the read failed and the lease was not kept).
    /// @param thread_id the thread.
    /// @param ns the namespace.
    /// @param checkpoint_id a checkpoint id; nullopt: the newest. The arguments are read during
    /// the call: keep them alive until the returned awaitable completes (as in
    /// `co_await s.acquire_and_get(t, "", std::nullopt)`).
    virtual boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id);

    /// @brief A call's start by a caller that still holds the values of checkpoint `held_id`
    /// (the engine: its last call on the thread paused there, at an interrupt). As
    /// `acquire_and_get(thread_id, ns, std::nullopt)`, except that when `held_id` is still the
    /// thread's newest checkpoint and the saver knows that nothing was written to the thread since
    /// (so the caller's values are that checkpoint's), it may leave `cp.values` empty and set
    /// `checkpoint_tuple::values_omitted`: the resume then reads and parses none of the thread's
    /// values. The default omits nothing (`acquire_and_get`); the SQLite saver omits them while
    /// it remembers the paused thread (`sqlite_saver::remembered`).
    /// @param thread_id the thread.
    /// @param ns the namespace.
    /// @param held_id the checkpoint whose values the caller holds. The arguments are read during
    /// the call: keep them alive until the returned awaitable completes.
    virtual boost::asio::awaitable<std::optional<checkpoint_tuple>>
    acquire_and_get_held(const std::string& thread_id, const std::string& ns, const std::string& held_id);
    /// @brief Whether `acquire_and_get_held` ever omits values: callers keep a paused thread's
    /// values only for a saver that does. The default: false.
    virtual bool omits_held_values() const noexcept { return false; }
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
