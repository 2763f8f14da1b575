#pragma once
/// @file forwarding_saver.hpp
/// @brief `forwarding_saver`: a saver that forwards every call to another one. Derive from it to
/// watch, count, refuse or delay what the engine stores, overriding only the calls of interest
/// (the project's test and benchmark savers do).
/// @code
/// class counting : public stategraph::checkpoint::forwarding_saver {
/// public:
///     using forwarding_saver::forwarding_saver;
///     boost::asio::awaitable<void> put(const std::string& t, const std::string& ns, const checkpoint& c) override {
///         ++puts;
///         co_await inner().put(t, ns, c);
///     }
///     std::size_t puts = 0;
/// };
/// @endcode

#include <stategraph/checkpoint/saver.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::checkpoint {

/// @brief Forwards every call of the saver interface to `inner`, except `put_many` and
/// `end_call`: those keep their defaults and call this saver's `put` for each checkpoint (and
/// its `put_writes` and `release`), so a class that overrides `put` sees them all; override them
/// too (calling `inner().put_many`, `inner().end_call`) to keep the inner saver's batching (the
/// SQLite saver's one transaction).
/// Thread safety: as `inner`'s (it adds no state); a derived class guards what it adds.
class forwarding_saver : public saver {
public:
    /// @param inner the saver every call goes to (kept alive by this one); must not be null.
    explicit forwarding_saver(std::shared_ptr<saver> inner) : inner_(std::move(inner)) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& c) override {
        co_await inner_->put(thread_id, ns, c);
    }
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override {
        co_await inner_->put_writes(std::move(thread_id), std::move(ns), std::move(checkpoint_id), std::move(writes));
    }
    boost::asio::awaitable<std::optional<checkpoint_tuple>>
    get(std::string thread_id, std::string ns, std::optional<std::string> id) override {
        co_return co_await inner_->get(std::move(thread_id), std::move(ns), std::move(id));
    }
    boost::asio::awaitable<std::vector<checkpoint_tuple>>
    list(std::string thread_id, std::string ns, list_options o) override {
        co_return co_await inner_->list(std::move(thread_id), std::move(ns), std::move(o));
    }
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override {
        co_await inner_->delete_thread(std::move(thread_id));
    }
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override {
        co_await inner_->prune(std::move(thread_id), keep_last);
    }
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override {
        co_return co_await inner_->stats(std::move(thread_id));
    }
    boost::asio::awaitable<bool> holds_thread(std::string thread_id) override {
        co_return co_await inner_->holds_thread(std::move(thread_id));
    }
    boost::asio::awaitable<void> copy_thread(std::string from, std::string to) override {
        co_await inner_->copy_thread(std::move(from), std::move(to));
    }
    boost::asio::awaitable<std::size_t> rewind_thread(std::string thread_id, std::string checkpoint_id) override {
        co_return co_await inner_->rewind_thread(std::move(thread_id), std::move(checkpoint_id));
    }
    boost::asio::awaitable<std::vector<thread_info>>
    list_threads(thread_query query) override {
        co_return co_await inner_->list_threads(query);
    }
    boost::asio::awaitable<sweep_result> sweep(ttl_policy policy) override {
        co_return co_await inner_->sweep(policy);
    }
    boost::asio::awaitable<std::optional<boost::json::value>> cache_get(std::string ns, std::string key) override {
        co_return co_await inner_->cache_get(std::move(ns), std::move(key));
    }
    boost::asio::awaitable<void> cache_put(std::string ns, std::string key, boost::json::value value,
                                           std::chrono::milliseconds ttl) override {
        co_await inner_->cache_put(std::move(ns), std::move(key), std::move(value), ttl);
    }
    boost::asio::awaitable<std::size_t> cache_clear(std::vector<std::string> namespaces) override {
        co_return co_await inner_->cache_clear(std::move(namespaces));
    }
    boost::asio::awaitable<void> put_graph(std::string signature, std::vector<std::string> shape) override {
        co_await inner_->put_graph(std::move(signature), std::move(shape));
    }
    boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(std::string signature) override {
        co_return co_await inner_->get_graph(std::move(signature));
    }
    boost::asio::awaitable<void> acquire(std::string thread_id) override { co_await inner_->acquire(std::move(thread_id)); }
    boost::asio::awaitable<void> release(std::string thread_id) override { co_await inner_->release(std::move(thread_id)); }
    boost::asio::awaitable<std::optional<std::string>> break_lease(std::string thread_id) override {
        co_return co_await inner_->break_lease(std::move(thread_id));
    }

protected:
    /// @brief The saver calls are forwarded to.
    saver& inner() { return *inner_; }

private:
    std::shared_ptr<saver> inner_;
};

} // namespace stategraph::checkpoint
