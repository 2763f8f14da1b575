#pragma once
/// @file checkpoint_log.hpp
/// @brief A saver's first concern: checkpoints and the pending writes of their tasks (`put`, `put_writes`,
/// `get`, `list`), and the records they are made of.

#include <stategraph/core/id_text.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
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
    /// Set by `saver::acquire_and_get_held` only: `cp.values` was left empty because the caller
    /// said it holds them (everything else of the checkpoint, and the writes, are there).
    bool values_omitted = false;
};

/// @brief Filters for `list()` and `get_state_history`. Results come newest first:
/// `co_await app.get_state_history("t", {.before = id, .limit = 5})`. Trivially destructible (the
/// ids are held inline), so the braced spelling is safe inside `co_await` under g++ 12.
struct list_options {
    id_text before;                   ///< only checkpoints older than this id (empty: any)
    std::optional<std::size_t> limit; ///< at most this many
    id_text source;                   ///< only this source ("loop", "update", ...; empty: any)
    std::optional<std::int64_t> step; ///< only this step
};
static_assert(std::is_trivially_destructible_v<list_options>,
              "list_options must own nothing (g++ 12 destroys braced temporaries in co_await twice)");

/// @brief Checkpoints and pending writes, per thread and namespace: what the engine reads and writes
/// during a run. Part of `saver`; code that only reads or writes checkpoints can take this interface.
/// Thread safety: an implementation may be shared by many runs on many threads.
class checkpoint_log {
public:
    virtual ~checkpoint_log() = default;

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
    /// @brief Stores several checkpoints of one thread and namespace, in order (each one's parent
    /// before it), as `put` would one by one. The engine hands over this way the checkpoints that
    /// async durability queued (`durability::async`) while no node waited for anything, so a
    /// saver that can write them as one unit saves all but one commit: the SQLite saver writes
    /// them in one transaction. The default calls `put` for each, in order, so a wrapper that
    /// overrides `put` alone (a `forwarding_saver` counting puts) still sees every checkpoint.
    /// A failure may leave a prefix of `cps` stored (the default) or none of them (one
    /// transaction), never a later checkpoint without its parent.
    /// @param thread_id the thread.
    /// @param ns the namespace.
    /// @param cps the checkpoints, oldest first; read during the call only (keep them alive until
    /// the returned awaitable completes). Any contiguous range of checkpoints converts: a named
    /// `std::vector<checkpoint>` or array. On g++ 12 write `std::vector<checkpoint> batch{a, b};
    /// co_await saver.put_many(t, ns, batch);`: a braced list inside `co_await` does not compile
    /// there (the compiler's bug, "array used as initializer"), whatever the parameter's type.
    virtual boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                                  std::span<const checkpoint> cps);
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
};

} // namespace stategraph::checkpoint
