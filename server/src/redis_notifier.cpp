/// @file redis_notifier.cpp
/// @brief `open_redis_notifier` (<stategraph/server/redis_notifier.hpp>): wake-ups through
/// Redis pub/sub, over the Redis saver's RESP connection (checkpoint/src/redis_connection.hpp:
/// hiredis parses, the socket is Asio's).
///
/// One thread of the notifier's own runs a private io_context with two loops, each on a
/// connection of its own: the publisher (a queue of wake-ups, sent as pipelined PUBLISH) and the
/// subscriber (SUBSCRIBE on the channels asked for, made again with backoff when it drops).
/// Every member below marked "io_" is touched on that thread only.

#include <stategraph/core/detail/spawned.hpp>
#include <stategraph/server/redis_notifier.hpp>

#include "redis_connection.hpp" // checkpoint/src
#include "wakeup_subscribers.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

namespace stategraph::server {

namespace {

namespace asio = boost::asio;
namespace redis = checkpoint::redis;
using namespace std::chrono_literals;

/// The first pause before connecting again; it doubles up to `longest_pause`.
constexpr std::chrono::milliseconds first_pause = 50ms;
/// Wake-ups waiting to be published, at most; beyond it the oldest go (each is only a hint).
constexpr std::size_t max_queued = 10'000;
/// PUBLISH commands sent in one write, at most.
constexpr std::size_t max_batch = 256;

/// "message" pushed to a subscriber: {"message", channel, payload}.
bool is_push(const redis::reply& r, std::string_view kind, std::size_t size) {
    return r.is_array() && r.elements.size() == size && r.elements[0].str == kind;
}

class redis_notifier final : public notifier {
public:
    redis_notifier(redis::endpoint where, redis_notifier_options opt)
        : where_(std::move(where)), opt_(std::move(opt)),
          prefix_(opt_.channel_prefix + ":" + std::to_string(where_.db) + ":"),
          name_("Redis " + where_.host + ":" + where_.port + "/" + std::to_string(where_.db) + " (channels " + prefix_ + "*)") {
        pub_.emplace(io_.get_executor(), opt_.timeout);
        sub_.emplace(io_.get_executor(), opt_.timeout);
        asio::co_spawn(io_, publishing(), stategraph::detail::report_to("wake-ups through " + name_ + ": publishing", opt_.log));
        thread_ = std::thread([this] { io_.run(); });
    }

    ~redis_notifier() override {
        asio::post(io_, [this] {
            stopping_ = true;
            doorbell_.cancel();
            pub_pause_.cancel();
            sub_pause_.cancel();
            pub_->close();
            sub_->close();
        });
        if (thread_.get_id() == std::this_thread::get_id()) thread_.detach(); // the last owner was a subscriber
        else thread_.join();
    }

    asio::awaitable<void> publish(std::string_view channel, std::string_view payload) override {
        enqueue(prefix_ + std::string(channel), std::string(payload));
        co_return;
    }

    bool subscribe(std::vector<std::string> channels, handler on) override {
        subscribers_.add(std::move(on));
        std::unique_lock lock(mutex_);
        bool added = false;
        for (auto& c : channels) added = channels_.insert(std::move(c)).second || added;
        if (added) {
            ++wanted_;
            if (!subscribing_) {
                subscribing_ = true;
                asio::co_spawn(io_, subscribing(), stategraph::detail::report_to("wake-ups through " + name_ + ": subscribing", opt_.log));
            } else {
                // New channels on a live subscription: it is made again with all of them.
                asio::post(io_, [this] { sub_->close(); });
            }
        }
        // From now on: the subscription is in place before this returns (unless Redis cannot be
        // reached now: it keeps trying, and reports every channel once it is back).
        const auto want = wanted_;
        if (!cv_.wait_for(lock, opt_.timeout, [&] { return subscribed_ >= want; })) missed_ = true;
        return true;
    }

    std::string describe() const override { return name_; }

private:
    void enqueue(std::string channel, std::string payload) {
        auto push = [this, channel = std::move(channel), payload = std::move(payload)]() mutable {
            if (stopping_) return;
            if (queue_.size() >= max_queued) queue_.pop_front();
            queue_.emplace_back(std::move(channel), std::move(payload));
            doorbell_.cancel();
        };
        asio::post(io_, std::move(push));
    }

    void log(const std::string& line) const {
        if (!opt_.log) return;
        try {
            opt_.log(line);
        } catch (...) { // a logger's failure is its own
        }
    }
    /// One line when a direction is lost, one when it is back (not one per attempt).
    void lost(bool& down, std::string_view what, const std::string& why) {
        if (down) return;
        down = true;
        log("wake-ups through " + name_ + ": " + std::string(what) + " failed (" + why +
            "); the instances find new runs, cancellations and events at their next poll until it is back");
    }
    void back(bool& down, std::string_view what) {
        if (!down) return;
        down = false;
        log("wake-ups through " + name_ + ": " + std::string(what) + " again");
    }

    asio::awaitable<void> pause(asio::steady_timer& t, std::chrono::milliseconds d) {
        t.expires_after(d);
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        (void)ec;
    }

    /// The publisher: sends what is queued, pipelined; a connection found broken is made again
    /// at once, once; when that fails too, what was taken is dropped and the next try waits.
    asio::awaitable<void> publishing() {
        auto wait = first_pause;
        while (!stopping_) {
            if (queue_.empty()) {
                doorbell_.expires_at(asio::steady_timer::time_point::max());
                auto [ec] = co_await doorbell_.async_wait(asio::as_tuple(asio::use_awaitable));
                (void)ec;
                continue;
            }
            std::vector<redis::command> batch;
            const std::size_t n = std::min(queue_.size(), max_batch);
            for (std::size_t i = 0; i < n; ++i) {
                auto& [channel, payload] = queue_.front();
                batch.push_back(redis::command{"PUBLISH", std::move(channel), std::move(payload)});
                queue_.pop_front();
            }
            std::string why;
            bool sent = false;
            for (int attempt = 0; attempt < 2 && !sent && !stopping_; ++attempt) {
                try {
                    if (!pub_->is_open()) co_await pub_->connect(where_);
                    auto replies = co_await pub_->run(batch);
                    sent = true;
                    for (const auto& r : replies)
                        if (r.is_error()) {
                            why = "PUBLISH: " + r.str;
                            sent = false;
                        }
                    if (!sent) attempt = 2; // the server refuses: connecting again will not help
                } catch (const std::exception& e) {
                    why = e.what();
                    pub_->close();
                }
            }
            if (stopping_) break;
            if (sent) {
                back(pub_down_, "publishing");
                wait = first_pause;
                continue;
            }
            lost(pub_down_, "publishing", why);
            co_await pause(pub_pause_, wait);
            wait = std::min(wait * 2, opt_.longest_pause);
        }
    }

    /// The subscriber: SUBSCRIBE on every channel asked for, then each message to the
    /// subscribers; made again with backoff when the connection drops or stops answering.
    asio::awaitable<void> subscribing() {
        auto wait = first_pause;
        bool again = false; // subscribed before: what was sent in the gap is lost
        while (!stopping_) {
            std::string why;
            try {
                redis::command cmd{"SUBSCRIBE"};
                std::uint64_t generation = 0;
                {
                    std::lock_guard lock(mutex_);
                    for (const auto& c : channels_) cmd.push_back(prefix_ + c);
                    generation = wanted_;
                }
                const std::size_t count = cmd.size() - 1;
                std::vector<redis::command> subscribe_cmds{std::move(cmd)};
                co_await sub_->connect(where_);
                co_await sub_->send(subscribe_cmds);
                for (std::size_t confirmed = 0; confirmed < count;) {
                    auto r = co_await sub_->receive(opt_.timeout);
                    if (!r) throw redis::network_error("no answer to SUBSCRIBE in time");
                    if (r->is_error()) throw redis::protocol_error("SUBSCRIBE: " + r->str);
                    if (is_push(*r, "subscribe", 3)) ++confirmed;
                }
                bool report_all = again;
                {
                    std::lock_guard lock(mutex_);
                    subscribed_ = generation;
                    report_all = report_all || std::exchange(missed_, false);
                }
                cv_.notify_all();
                back(sub_down_, "subscribed");
                if (report_all)
                    for (const auto& c : channel_names()) deliver(c, "");
                again = true;
                wait = first_pause;
                co_await relay_messages();
            } catch (const std::exception& e) {
                why = e.what();
            }
            sub_->close();
            if (stopping_) break;
            lost(sub_down_, "the subscription", why.empty() ? "closed" : why);
            co_await pause(sub_pause_, wait);
            wait = std::min(wait * 2, opt_.longest_pause);
        }
    }

    /// Delivers messages until the connection fails (throws) or the notifier stops; a PING
    /// after `ping_after` of silence, and a second silence that long is a dead connection.
    asio::awaitable<void> relay_messages() {
        const std::vector<redis::command> ping{redis::command{"PING"}};
        bool pinged = false;
        while (!stopping_) {
            auto r = co_await sub_->receive(opt_.ping_after);
            if (!r) {
                if (pinged) throw redis::network_error("no answer to PING in " + std::to_string(opt_.ping_after.count()) + " ms");
                co_await sub_->send(ping);
                pinged = true;
                continue;
            }
            pinged = false;
            if (is_push(*r, "message", 3) && r->elements[1].str.rfind(prefix_, 0) == 0)
                deliver(r->elements[1].str.substr(prefix_.size()), r->elements[2].str);
        }
    }

    std::vector<std::string> channel_names() {
        std::lock_guard lock(mutex_);
        return {channels_.begin(), channels_.end()};
    }

    void deliver(const std::string& channel, const std::string& payload) { subscribers_.deliver(channel, payload); }

    const redis::endpoint where_;
    const redis_notifier_options opt_;
    const std::string prefix_; ///< "<channel_prefix>:<db>:"
    const std::string name_;

    asio::io_context io_;
    std::optional<redis::connection> pub_, sub_; ///< io_
    asio::steady_timer doorbell_{io_}, pub_pause_{io_}, sub_pause_{io_}; ///< io_
    std::deque<std::pair<std::string, std::string>> queue_; ///< io_: channel (with prefix), payload
    bool stopping_ = false;                                 ///< io_
    bool pub_down_ = false, sub_down_ = false;              ///< io_: lost, and said so

    detail::wakeup_subscribers subscribers_;
    std::mutex mutex_; ///< guards what follows
    std::condition_variable cv_;
    std::set<std::string> channels_;
    std::uint64_t wanted_ = 0, subscribed_ = 0; ///< generations of `channels_`: asked for, in place
    bool subscribing_ = false;
    bool missed_ = false; ///< a subscribe returned before its subscription was in place

    std::thread thread_; ///< last: started once everything above exists
};

} // namespace

std::shared_ptr<notifier> open_redis_notifier(redis_notifier_options options) {
    redis::endpoint where;
    try {
        where = redis::parse_url(options.url);
    } catch (const std::invalid_argument& e) {
        throw notifier_error(notifier_errc::bad_url, std::string("open_redis_notifier: ") + e.what());
    }
    if (options.channel_prefix.empty())
        throw notifier_error(notifier_errc::bad_url, "open_redis_notifier(" + options.url + "): channel_prefix is empty");
    // Once, before anything relies on it: does it answer?
    auto check = [](redis::endpoint ep, std::chrono::milliseconds timeout) -> asio::awaitable<void> {
        auto ex = co_await asio::this_coro::executor;
        redis::connection c(ex, timeout);
        co_await c.connect(ep);
        std::vector<redis::command> ping{redis::command{"PING"}};
        auto r = co_await c.run(ping);
        if (r.at(0).is_error()) throw redis::protocol_error("PING: " + r[0].str);
    };
    try {
        asio::io_context io;
        auto done = asio::co_spawn(io, check(where, options.timeout), asio::use_future);
        io.run();
        done.get();
    } catch (const std::exception& e) {
        throw notifier_error(notifier_errc::unreachable, "open_redis_notifier: the Redis server at " + where.host + ":" +
                                                             where.port + " cannot be used: " + e.what());
    }
    return std::make_shared<redis_notifier>(std::move(where), std::move(options));
}

} // namespace stategraph::server
