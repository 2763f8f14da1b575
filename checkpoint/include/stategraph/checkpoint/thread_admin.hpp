#pragma once
/// @file thread_admin.hpp
/// @brief A saver's second concern: maintenance of whole threads (delete, prune, stats, copy, rewind,
/// list by metadata, a time to live).

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace stategraph::checkpoint {

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

/// @brief Maintenance of whole threads (every namespace): what an operator or a server does between runs.
/// Part of `saver`. Thread safety: an implementation may be shared by many threads.
class thread_admin {
public:
    virtual ~thread_admin() = default;

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
};

} // namespace stategraph::checkpoint
