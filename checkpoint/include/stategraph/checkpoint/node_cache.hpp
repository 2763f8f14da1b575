#pragma once
/// @file node_cache.hpp
/// @brief A saver's third concern: the node cache, outcomes of cached nodes by (namespace, key), apart from
/// any thread, with an optional time to live (see `cache_policy`).

#include <boost/asio/awaitable.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace stategraph::checkpoint {

/// @brief The node cache. Part of `saver`: a saver that outlives its process keeps cached outcomes across
/// restarts. Thread safety: an implementation may be shared by many threads.
class node_cache {
public:
    virtual ~node_cache() = default;

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
};

} // namespace stategraph::checkpoint
