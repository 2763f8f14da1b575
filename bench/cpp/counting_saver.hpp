#pragma once
/// @file counting_saver.hpp
/// @brief A saver that forwards to another one (a `forwarding_saver`) and counts what passes through: the calls
/// (how many storage transactions a run costs) and, per thread, the serialized bytes of the
/// checkpoint records (versions, frontier, metadata, signature) that `thread_stats::bytes`
/// does not include. Used only in untimed passes and in `checkpoint_size`.

#include <stategraph/checkpoint/forwarding_saver.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <utility>

namespace stategraph::bench {

class counting_saver final : public checkpoint::forwarding_saver {
public:
    struct calls {
        std::size_t put = 0, put_many = 0, in_batches = 0, put_writes = 0, get = 0, list = 0, acquire = 0, release = 0,
                    end_call = 0, acquire_and_get = 0;
        boost::json::object json() const {
            boost::json::object o;
            o["put"] = put; // checkpoints, whether put alone or in a put_many
            o["put_many"] = put_many;     // batches
            o["in_batches"] = in_batches; // the checkpoints in them
            o["put_writes"] = put_writes;
            o["get"] = get;
            o["list"] = list;
            o["acquire"] = acquire;                 // leases asked for alone
            o["acquire_and_get"] = acquire_and_get; // a call's start: its lease and its read
            o["release"] = release;
            o["end_call"] = end_call; // a call's last checkpoints, writes and release: one commit
            return o;
        }
    };
    struct bytes {
        std::size_t record = 0; ///< versions + frontier + metadata + signature, as JSON text
        std::size_t values = 0; ///< channel values and pending-write values, as JSON text
    };

    explicit counting_saver(std::shared_ptr<checkpoint::saver> inner) : forwarding_saver(std::move(inner)) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns,
                                     const checkpoint::checkpoint& cp) override {
        count(thread_id, cp);
        co_await inner().put(thread_id, ns, cp);
    }
    /// Forwarded whole (async durability's batches keep the inner saver's one transaction).
    boost::asio::awaitable<void> put_many(const std::string& thread_id, const std::string& ns,
                                          std::span<const checkpoint::checkpoint> cps) override {
        {
            std::lock_guard lock(mutex_);
            ++calls_.put_many;
            calls_.in_batches += cps.size();
        }
        for (const auto& cp : cps) count(thread_id, cp);
        co_await inner().put_many(thread_id, ns, cps);
    }
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<checkpoint::pending_write> writes) override {
        {
            std::lock_guard lock(mutex_);
            ++calls_.put_writes;
            auto& b = bytes_[thread_id];
            for (const auto& w : writes) b.values += boost::json::serialize(w.value).size();
        }
        co_await inner().put_writes(std::move(thread_id), std::move(ns), std::move(checkpoint_id), std::move(writes));
    }
    /// Forwarded whole (the inner saver's one transaction): counted as itself and a get.
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>>
    acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& id) override {
        bump(&calls::acquire_and_get);
        bump(&calls::get);
        co_return co_await inner().acquire_and_get(thread_id, ns, id);
    }
    /// Forwarded whole (the inner saver's one transaction); its checkpoints count as batched.
    boost::asio::awaitable<void> end_call(const std::string& thread_id, const std::string& ns, call_end& end) override {
        {
            std::lock_guard lock(mutex_);
            ++calls_.end_call;
            calls_.in_batches += end.checkpoints.size();
            auto& b = bytes_[thread_id];
            for (const auto& w : end.writes) b.values += boost::json::serialize(w.value).size();
        }
        for (const auto& cp : end.checkpoints) count(thread_id, cp);
        co_await inner().end_call(thread_id, ns, end);
    }
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                            std::optional<std::string> id) override {
        bump(&calls::get);
        co_return co_await inner().get(std::move(thread_id), std::move(ns), std::move(id));
    }
    boost::asio::awaitable<std::vector<checkpoint::checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                                           checkpoint::list_options o) override {
        bump(&calls::list);
        co_return co_await inner().list(std::move(thread_id), std::move(ns), std::move(o));
    }
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override {
        {
            std::lock_guard lock(mutex_);
            bytes_.erase(thread_id);
        }
        co_await inner().delete_thread(std::move(thread_id));
    }
    boost::asio::awaitable<void> acquire(std::string thread_id) override {
        bump(&calls::acquire);
        co_await inner().acquire(std::move(thread_id));
    }
    boost::asio::awaitable<void> release(std::string thread_id) override {
        bump(&calls::release);
        co_await inner().release(std::move(thread_id));
    }

    calls take_calls() {
        std::lock_guard lock(mutex_);
        return std::exchange(calls_, calls{});
    }
    bytes bytes_of(const std::string& thread_id) {
        std::lock_guard lock(mutex_);
        auto it = bytes_.find(thread_id);
        return it == bytes_.end() ? bytes{} : it->second;
    }

private:
    void count(const std::string& thread_id, const checkpoint::checkpoint& cp) {
        std::lock_guard lock(mutex_);
        ++calls_.put;
        auto& b = bytes_[thread_id];
        boost::json::object versions;
        for (const auto& [k, v] : cp.versions) versions[k] = v;
        b.record += boost::json::serialize(versions).size() + boost::json::serialize(cp.frontier).size() +
                    boost::json::serialize(cp.metadata).size() + cp.signature.size();
        for (const auto& [k, v] : cp.values) b.values += boost::json::serialize(v).size();
    }

    void bump(std::size_t calls::*m) {
        std::lock_guard lock(mutex_);
        ++(calls_.*m);
    }

    std::mutex mutex_;
    calls calls_;
    std::map<std::string, bytes> bytes_;
};

} // namespace stategraph::bench
