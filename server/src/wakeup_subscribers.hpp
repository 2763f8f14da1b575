#pragma once
// The handlers a listener calls with each wake-up it hears (the PostgreSQL backend's LISTEN
// connection, the Redis notifier's subscription): added from any thread, called on the
// listener's; a handler's failure is its own.

#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace stategraph::server::detail {

class wakeup_subscribers {
public:
    using handler = std::function<void(std::string channel, std::string payload)>;

    void add(handler on) {
        std::lock_guard lock(mutex_);
        handlers_.push_back(std::move(on));
    }

    /// Calls every handler (outside the lock: a handler may add another).
    void deliver(const std::string& channel, const std::string& payload) const {
        std::vector<handler> to_call;
        {
            std::lock_guard lock(mutex_);
            to_call = handlers_;
        }
        for (auto& on : to_call) {
            try {
                on(channel, payload);
            } catch (...) { // a subscriber's failure is its own
            }
        }
    }

private:
    mutable std::mutex mutex_;
    std::vector<handler> handlers_;
};

} // namespace stategraph::server::detail
