#include <stategraph/checkpoint/memory_saver.hpp>

#include <stategraph/error.hpp>

#include <boost/json/serializer.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <set>

namespace stategraph::checkpoint {

std::string new_checkpoint_id() {
    static std::atomic<std::uint64_t> last{0};
    auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::uint64_t prev = last.load(std::memory_order_relaxed), next;
    do {
        next = now > prev ? now : prev + 1;
    } while (!last.compare_exchange_weak(prev, next, std::memory_order_relaxed));
    // 11 symbols of a 64-symbol alphabet in ASCII order (66 bits): fixed width, sortable as text, and short
    // enough for the small-string buffer (no allocation per copy). Ids of the former 20-hex-digit format
    // ("0000...") sort before these ("0Y..." onwards), so a store holding both stays time-ordered.
    static constexpr char alphabet[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
    static_assert(sizeof alphabet == 65);
    char buf[11];
    for (int i = 10; i >= 0; --i) {
        buf[i] = alphabet[next & 63u];
        next >>= 6;
    }
    return std::string(buf, sizeof buf);
}

boost::asio::awaitable<void> memory_saver::put(std::string thread_id, std::string ns, checkpoint cp) {
    std::lock_guard lock(mutex_);
    auto& d = threads_.try_emplace(key{std::move(thread_id), std::move(ns)}).first->second;
    for (auto& [channel, value] : cp.values)
        d.blobs.insert_or_assign(std::pair<std::string, std::string>(std::string(channel), cp.id), std::move(value));
    cp.values.clear();
    auto id = cp.id;
    d.checkpoints.insert_or_assign(std::move(id), std::move(cp));
    co_return;
}

boost::asio::awaitable<void> memory_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    std::lock_guard lock(mutex_);
    auto& list = threads_.try_emplace(key{std::move(thread_id), std::move(ns)}).first->second.writes[std::move(checkpoint_id)];
    // A task's writes replace any earlier writes of the same task and channel (a re-run after resume).
    for (auto& w : writes) {
        auto it = std::find_if(list.begin(), list.end(), [&](const pending_write& o) {
            return o.task_id == w.task_id && o.channel == w.channel;
        });
        if (it != list.end()) *it = std::move(w);
        else list.push_back(std::move(w));
    }
    co_return;
}

checkpoint_tuple memory_saver::assemble(const key& k, const thread_data& d, const checkpoint& cp) const {
    checkpoint_tuple t{k.first, k.second, cp, {}};
    for (const auto& [channel, version] : cp.versions) {
        if (version.empty()) continue;
        auto it = d.blobs.find({channel, version});
        if (it == d.blobs.end())
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "thread '" + k.first + "': checkpoint " + cp.id + " needs channel '" + channel +
                                       "' at version " + version + ", which is not stored",
                                   {k.first, channel});
        t.cp.values[channel] = it->second;
    }
    if (auto w = d.writes.find(cp.id); w != d.writes.end()) t.writes = w->second;
    return t;
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> memory_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    std::lock_guard lock(mutex_);
    key k{std::move(thread_id), std::move(ns)};
    auto it = threads_.find(k);
    if (it == threads_.end() || it->second.checkpoints.empty()) co_return std::nullopt;
    const auto& d = it->second;
    if (checkpoint_id) {
        auto c = d.checkpoints.find(*checkpoint_id);
        if (c == d.checkpoints.end()) co_return std::nullopt;
        co_return assemble(k, d, c->second);
    }
    co_return assemble(k, d, d.checkpoints.rbegin()->second);
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> memory_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    std::lock_guard lock(mutex_);
    std::vector<checkpoint_tuple> out;
    key k{thread_id, ns};
    auto it = threads_.find(k);
    if (it == threads_.end()) co_return out;
    for (auto c = it->second.checkpoints.rbegin(); c != it->second.checkpoints.rend(); ++c) {
        const auto& cp = c->second;
        if (options.before && !(cp.id < *options.before)) continue;
        if (options.source && cp.source != *options.source) continue;
        if (options.step && cp.step != *options.step) continue;
        if (options.limit && out.size() >= *options.limit) break;
        out.push_back(assemble(k, it->second, cp));
    }
    co_return out;
}

boost::asio::awaitable<void> memory_saver::delete_thread(std::string thread_id) {
    std::lock_guard lock(mutex_);
    for (auto it = threads_.begin(); it != threads_.end();) {
        if (it->first.first == thread_id) it = threads_.erase(it);
        else ++it;
    }
    co_return;
}

boost::asio::awaitable<void> memory_saver::prune(std::string thread_id, std::size_t keep_last) {
    std::lock_guard lock(mutex_);
    if (keep_last == 0) keep_last = 1;
    for (auto& [k, d] : threads_) {
        if (k.first != thread_id) continue;
        while (d.checkpoints.size() > keep_last) {
            d.writes.erase(d.checkpoints.begin()->first);
            d.checkpoints.erase(d.checkpoints.begin());
        }
        std::set<std::pair<std::string, std::string>> needed;
        for (const auto& [id, cp] : d.checkpoints)
            for (const auto& [channel, version] : cp.versions) needed.insert({channel, version});
        for (auto b = d.blobs.begin(); b != d.blobs.end();) {
            if (!needed.count(b->first)) b = d.blobs.erase(b);
            else ++b;
        }
        if (!d.checkpoints.empty()) d.checkpoints.begin()->second.parent_id.clear();
    }
    co_return;
}

boost::asio::awaitable<thread_stats> memory_saver::stats(std::string thread_id) {
    std::lock_guard lock(mutex_);
    thread_stats s;
    for (const auto& [k, d] : threads_) {
        if (k.first != thread_id) continue;
        s.checkpoints += d.checkpoints.size();
        s.blobs += d.blobs.size();
        for (const auto& [key, v] : d.blobs) s.bytes += boost::json::serialize(v).size();
        for (const auto& [id, ws] : d.writes) {
            s.writes += ws.size();
            for (const auto& w : ws) s.bytes += boost::json::serialize(w.value).size();
        }
    }
    co_return s;
}

} // namespace stategraph::checkpoint
