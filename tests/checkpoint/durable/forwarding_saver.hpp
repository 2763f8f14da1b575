#pragma once
// The test savers' base (stategraph::checkpoint::forwarding_saver, which forwards every call) and
// slow_put_saver. Shared by the test process and the helper program durable_child (no Boost.Test
// here).

#include <stategraph/checkpoint/forwarding_saver.hpp>

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

using stategraph::checkpoint::forwarding_saver;

/// Forwards to another saver, but each checkpoint `put` first waits `delay` on a timer, so that a
/// write is visibly in flight; `note(event, step)` is told "put" when a put starts and "stored"
/// once the inner saver has stored it.
class slow_put_saver final : public forwarding_saver {
public:
    using note_fn = std::function<void(const char* event, std::int64_t step)>;
    slow_put_saver(std::shared_ptr<stategraph::checkpoint::saver> inner, std::chrono::milliseconds delay, note_fn note)
        : forwarding_saver(std::move(inner)), delay_(delay), note_(std::move(note)) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns,
                                     const stategraph::checkpoint::checkpoint& c) override {
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
