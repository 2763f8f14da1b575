#pragma once
/// @file memory_saver.hpp
/// @brief An in-memory checkpointer, for tests and for runs that need no durability.

#include <stategraph/checkpoint/saver.hpp>

#include <functional>
#include <map>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>

namespace stategraph::checkpoint {

/// @brief Keeps checkpoints, blobs and pending writes in process memory.
/// Thread safety: all members may be called concurrently (one mutex).
class memory_saver final : public saver {
public:
    boost::asio::awaitable<void> put(std::string thread_id, std::string ns, checkpoint cp) override;
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override;
    boost::asio::awaitable<std::optional<checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                std::optional<std::string> checkpoint_id) override;
    boost::asio::awaitable<std::vector<checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                               list_options options) override;
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override;
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override;

private:
    using key = std::pair<std::string, std::string>; // thread, ns
    struct thread_data {
        std::map<std::string, checkpoint> checkpoints;                          // id -> checkpoint (values: own blobs)
        std::map<std::pair<std::string, std::string>, boost::json::value> blobs; // (channel, version) -> value
        std::map<std::string, std::vector<pending_write>> writes;               // checkpoint id -> writes
    };
    checkpoint_tuple assemble(const key& k, const thread_data& d, const checkpoint& cp) const;

    struct key_hash {
        std::size_t operator()(const key& k) const noexcept {
            std::size_t h = std::hash<std::string_view>{}(k.first);
            return h ^ (std::hash<std::string_view>{}(k.second) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
        }
    };

    mutable std::mutex mutex_;
    std::unordered_map<key, thread_data, key_hash> threads_;
};

} // namespace stategraph::checkpoint
