#pragma once
/// @file memory_saver.hpp
/// @brief An in-memory checkpointer, for tests and for runs that need no durability.

#include <stategraph/checkpoint/saver.hpp>

#include <array>
#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <utility>

namespace stategraph::checkpoint {

/// @brief Keeps checkpoints, channel values and pending writes in process memory, in the same
/// compact form the SQLite saver writes to disk (binary records, values as JSON text, appended
/// items stored once), so that a process holding many threads stays small.
/// Thread safety: all members may be called concurrently. Threads are spread over independent
/// shards by id, so runs of different threads rarely wait for each other.
/// Every call completes at once, in the awaiting coroutine (no I/O, no executor hop), blocking only
/// on the mutexes it takes (its thread's shard; `list_threads` and `sweep` take each shard in
/// turn). Nothing survives the process.
class memory_saver final : public saver {
public:
    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
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

private:
    using key = std::pair<std::string, std::string>; // thread, ns
    struct stored_checkpoint {
        std::string id;
        std::string parent_id;
        std::int64_t step = -1;
        std::string source;
        std::string record; // codec::encode_record
        std::string vals;   // the values this checkpoint wrote (codec::encode_inline), or empty
    };
    struct thread_data {
        std::vector<stored_checkpoint> checkpoints;                      // sorted by id
        std::map<std::pair<std::string, std::string>, std::string> blobs; // (version, channel) -> codec::encode_value,
                                                                          // for values not inside their checkpoint's entry
        std::map<std::string, std::vector<pending_write>> writes;        // checkpoint id -> writes
    };
    using key_view = std::pair<std::string_view, std::string_view>;
    // Transparent: a put finds its thread by views of its arguments, without copying them into a key.
    struct key_hash {
        using is_transparent = void;
        static std::size_t of(std::string_view thread, std::string_view ns) noexcept {
            std::size_t h = std::hash<std::string_view>{}(thread);
            return h ^ (std::hash<std::string_view>{}(ns) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
        }
        std::size_t operator()(const key& k) const noexcept { return of(k.first, k.second); }
        std::size_t operator()(const key_view& k) const noexcept { return of(k.first, k.second); }
    };
    struct key_equal {
        using is_transparent = void;
        template <class A, class B>
        bool operator()(const A& a, const B& b) const noexcept {
            return std::string_view(a.first) == std::string_view(b.first) &&
                   std::string_view(a.second) == std::string_view(b.second);
        }
    };
    struct shard {
        std::mutex mutex;
        std::unordered_map<key, thread_data, key_hash, key_equal> threads;
        /// The data of (thread, ns), made when new (the key copied only then).
        thread_data& data_of(std::string_view thread, std::string_view ns) {
            if (auto it = threads.find(key_view(thread, ns)); it != threads.end()) return it->second;
            return threads.try_emplace(key(thread, ns)).first->second;
        }
    };
    static constexpr std::size_t shard_count = 16;

    shard& shard_of(std::string_view thread_id) {
        return shards_[std::hash<std::string_view>{}(thread_id) % shard_count];
    }
    checkpoint_tuple assemble(const key& k, const thread_data& d, const stored_checkpoint& s) const;
    /// The stored bytes of `channel` at `version` (the shared graphs, the checkpoint's entry, then
    /// the values kept apart); nullopt when missing. Throws codec::corrupt.
    std::optional<std::string> stored_value(const thread_data& d, const std::string& channel,
                                            const std::string& version) const;
    static const stored_checkpoint* find_checkpoint(const thread_data& d, const std::string& id);
    /// `prune` of one namespace of a thread, with its shard's mutex held; returns how many
    /// checkpoints went. Throws codec::corrupt.
    std::size_t prune_locked(thread_data& d, std::size_t keep_last) const;

    std::array<shard, shard_count> shards_;
    mutable std::mutex graphs_mutex_;             // taken after a shard's mutex, never before
    std::map<std::string, std::string> graphs_;   // `__graph__` values by version (graph signature)
    struct cache_entry {
        std::string json; // the value's JSON text
        std::optional<std::chrono::steady_clock::time_point> expires;
    };
    std::mutex cache_mutex_;
    std::map<std::pair<std::string, std::string>, cache_entry> cache_; // (ns, key) -> entry
    std::size_t cache_puts_ = 0;
};

} // namespace stategraph::checkpoint
