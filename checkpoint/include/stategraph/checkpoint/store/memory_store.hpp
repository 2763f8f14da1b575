#pragma once
/// @file memory_store.hpp
/// @brief An in-memory store, for tests and for programs that need no durability.

#include <stategraph/checkpoint/store/store.hpp>

#include <map>
#include <memory>
#include <mutex>

namespace stategraph::store {

/// @brief Keeps items in process memory. Full-text scores: the share of the query's words the
/// item holds, each weighted by how rare it is among the candidates (a small tf-idf).
/// Thread safety: one mutex; all members may be called concurrently.
class memory_store final : public base_store {
public:
    /// @param options default ttl, refresh on read and index fields (`store_options`).
    explicit memory_store(store_options options = {}) : base_store(std::move(options)) {}

protected:
    boost::asio::awaitable<void> do_put(write w) override;
    boost::asio::awaitable<std::optional<item>> do_get(namespace_path ns, std::string key, bool refresh) override;
    boost::asio::awaitable<void> do_remove(namespace_path ns, std::string key) override;
    boost::asio::awaitable<std::vector<search_item>> do_search(namespace_path prefix, std::vector<std::string> words,
                                                                std::size_t want) override;
    boost::asio::awaitable<void> do_refresh(std::vector<std::pair<namespace_path, std::string>> items) override;
    boost::asio::awaitable<std::vector<namespace_path>> do_namespaces() override;
    boost::asio::awaitable<std::size_t> do_sweep() override;

private:
    struct entry {
        item it;
        std::optional<std::vector<std::string>> words; // indexed words (nullopt: not indexed)
        std::optional<std::int64_t> ttl_ms;
        std::optional<std::int64_t> expires_ms;
    };
    bool live(const entry& e, std::int64_t now) const noexcept { return !e.expires_ms || *e.expires_ms > now; }
    std::mutex mutex_;
    std::map<std::pair<namespace_path, std::string>, entry> items_;
};

} // namespace stategraph::store
