#pragma once
// A saver that forwards every call to another one: the base of the test savers that watch,
// count, refuse or slow down what the engine asks to store. Shared by the test process and the
// helper program durable_child (no Boost.Test here).

#include <stategraph/checkpoint/saver.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace durable {

class forwarding_saver : public stategraph::checkpoint::saver {
public:
    using checkpoint = stategraph::checkpoint::checkpoint;
    using pending_write = stategraph::checkpoint::pending_write;

    explicit forwarding_saver(std::shared_ptr<stategraph::checkpoint::saver> inner) : inner_(std::move(inner)) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& c) override {
        co_await inner_->put(thread_id, ns, c);
    }
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<pending_write> writes) override {
        co_await inner_->put_writes(std::move(thread_id), std::move(ns), std::move(checkpoint_id), std::move(writes));
    }
    boost::asio::awaitable<std::optional<stategraph::checkpoint::checkpoint_tuple>>
    get(std::string thread_id, std::string ns, std::optional<std::string> id) override {
        co_return co_await inner_->get(std::move(thread_id), std::move(ns), std::move(id));
    }
    boost::asio::awaitable<std::vector<stategraph::checkpoint::checkpoint_tuple>>
    list(std::string thread_id, std::string ns, stategraph::checkpoint::list_options o) override {
        co_return co_await inner_->list(std::move(thread_id), std::move(ns), std::move(o));
    }
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override {
        co_await inner_->delete_thread(std::move(thread_id));
    }
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override {
        co_await inner_->prune(std::move(thread_id), keep_last);
    }
    boost::asio::awaitable<stategraph::checkpoint::thread_stats> stats(std::string thread_id) override {
        co_return co_await inner_->stats(std::move(thread_id));
    }
    boost::asio::awaitable<void> copy_thread(std::string from, std::string to) override {
        co_await inner_->copy_thread(std::move(from), std::move(to));
    }
    boost::asio::awaitable<std::vector<stategraph::checkpoint::thread_info>>
    list_threads(stategraph::checkpoint::thread_query query) override {
        co_return co_await inner_->list_threads(query);
    }
    boost::asio::awaitable<stategraph::checkpoint::sweep_result> sweep(stategraph::checkpoint::ttl_policy policy) override {
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

protected:
    stategraph::checkpoint::saver& inner() { return *inner_; }

private:
    std::shared_ptr<stategraph::checkpoint::saver> inner_;
};

/// Forwards to another saver, but each checkpoint `put` first waits `delay` on a timer, so that a
/// write is visibly in flight; `note(event, step)` is told "put" when a put starts and "stored"
/// once the inner saver has stored it.
class slow_put_saver final : public forwarding_saver {
public:
    using note_fn = std::function<void(const char* event, std::int64_t step)>;
    slow_put_saver(std::shared_ptr<stategraph::checkpoint::saver> inner, std::chrono::milliseconds delay, note_fn note)
        : forwarding_saver(std::move(inner)), delay_(delay), note_(std::move(note)) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const checkpoint& c) override {
        if (note_) note_("put", c.step);
        if (delay_.count() > 0) {
            boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, delay_);
            co_await t.async_wait(boost::asio::use_awaitable);
        }
        co_await inner().put(thread_id, ns, c);
        if (note_) note_("stored", c.step);
    }

private:
    std::chrono::milliseconds delay_;
    note_fn note_;
};

} // namespace durable
