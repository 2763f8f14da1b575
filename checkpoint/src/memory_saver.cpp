#include <stategraph/checkpoint/memory_saver.hpp>

#include <stategraph/core/error.hpp>

#include "codec.hpp"
#include "saver_common.hpp"

#include <stategraph/checkpoint/reserved.hpp>

#include <boost/container/small_vector.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serializer.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <optional>
#include <set>

namespace stategraph::checkpoint {

namespace {

const std::string& version_of(const checkpoint& cp, const std::string& channel) {
    auto it = cp.versions.find(channel);
    return it == cp.versions.end() ? cp.id : it->second;
}

constexpr std::string_view graph_channel = reserved::graph;

} // namespace

boost::asio::awaitable<void> memory_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    // Encode outside the lock: only moves happen under it. The values this checkpoint writes go
    // into its own entry (as in the SQLite saver's rows); others (an explicit older version, the
    // graph's shape) are kept apart.
    boost::container::small_vector<std::pair<std::string, std::string>, 4> own;     // channel, bytes
    boost::container::small_vector<std::pair<std::pair<std::string, std::string>, std::string>, 2> apart;
    for (const auto& [channel, value] : cp.values) {
        std::string name(channel);
        const auto& version = version_of(cp, name);
        if (name == graph_channel) { // one copy per graph: encoded only the first time it is seen
            std::lock_guard g(graphs_mutex_);
            if (graphs_.count(version)) continue;
        }
        auto ext = cp.extends.find(name);
        auto bytes = codec::encode_value(value, ext == cp.extends.end() ? nullptr : &ext->second, version);
        if (version == cp.id && name != graph_channel) own.emplace_back(std::move(name), std::move(bytes));
        else apart.emplace_back(std::pair(version, std::move(name)), std::move(bytes));
    }
    stored_checkpoint s{cp.id, cp.parent_id, cp.step, cp.source, codec::encode_record(cp), {}};
    if (!own.empty()) {
        boost::container::small_vector<std::pair<std::string_view, std::string_view>, 4> views;
        for (const auto& [c, b] : own) views.emplace_back(c, b);
        s.vals = codec::encode_inline({views.begin(), views.end()});
    }

    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    auto& d = sh.data_of(thread_id, ns);
    for (auto& [k, bytes] : apart) {
        if (k.second == graph_channel && k.first != cp.id) {
            std::lock_guard g(graphs_mutex_);
            graphs_.try_emplace(k.first, std::move(bytes));
            continue;
        }
        d.blobs.insert_or_assign(std::move(k), std::move(bytes));
    }
    auto& cps = d.checkpoints;
    if (cps.empty()) cps.reserve(8);
    if (cps.empty() || cps.back().id < s.id) { // the usual case: the newest checkpoint
        cps.push_back(std::move(s));
        co_return;
    }
    auto at = std::lower_bound(cps.begin(), cps.end(), s.id,
                               [](const stored_checkpoint& a, const std::string& id) { return a.id < id; });
    if (at != cps.end() && at->id == s.id) {
        // Stored already: replaced, keeping the values it stored before unless written again.
        if (!at->vals.empty()) {
            auto fresh = s.vals.empty() ? std::vector<std::pair<std::string_view, std::string_view>>{} : codec::decode_inline(s.vals);
            s.vals = codec::merge_inline(at->vals, fresh, [&](std::string_view c) {
                return std::any_of(apart.begin(), apart.end(), [&](const auto& a) { return a.first.second == c; });
            });
        }
        *at = std::move(s);
    } else {
        cps.insert(at, std::move(s));
    }
    co_return;
}

boost::asio::awaitable<void> memory_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    auto& list = sh.data_of(thread_id, ns).writes[std::move(checkpoint_id)];
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

boost::asio::awaitable<std::optional<boost::json::value>> memory_saver::cache_get(std::string ns, std::string key) {
    std::string text;
    {
        std::lock_guard g(cache_mutex_);
        auto it = cache_.find({ns, key});
        if (it == cache_.end()) co_return std::nullopt;
        if (it->second.expires && *it->second.expires <= std::chrono::steady_clock::now()) {
            cache_.erase(it);
            co_return std::nullopt;
        }
        text = it->second.json;
    }
    co_return boost::json::parse(text);
}

boost::asio::awaitable<void> memory_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                                     std::chrono::milliseconds ttl) {
    cache_entry e{boost::json::serialize(value), std::nullopt};
    if (ttl.count() > 0) e.expires = std::chrono::steady_clock::now() + ttl;
    std::lock_guard g(cache_mutex_);
    // Expired entries go when read, and every 256 puts all at once (those never read again).
    if (++cache_puts_ % 256 == 0) {
        const auto now = std::chrono::steady_clock::now();
        std::erase_if(cache_, [&](const auto& kv) { return kv.second.expires && *kv.second.expires <= now; });
    }
    cache_.insert_or_assign({std::move(ns), std::move(key)}, std::move(e));
    co_return;
}

boost::asio::awaitable<std::size_t> memory_saver::cache_clear(std::vector<std::string> namespaces) {
    std::lock_guard g(cache_mutex_);
    std::size_t n = 0;
    if (namespaces.empty()) {
        n = cache_.size();
        cache_.clear();
        co_return n;
    }
    for (const auto& ns : namespaces) {
        auto it = cache_.lower_bound({ns, std::string()});
        while (it != cache_.end() && it->first.first == ns) {
            it = cache_.erase(it);
            ++n;
        }
    }
    co_return n;
}

boost::asio::awaitable<void> memory_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    {
        std::lock_guard g(graphs_mutex_);
        if (graphs_.count(signature)) co_return;
    }
    auto bytes = codec::encode_shape(shape, signature);
    std::lock_guard g(graphs_mutex_);
    graphs_.try_emplace(std::move(signature), std::move(bytes));
}

boost::asio::awaitable<std::optional<std::vector<std::string>>> memory_saver::get_graph(std::string signature) {
    std::optional<std::string> bytes;
    {
        std::lock_guard g(graphs_mutex_);
        if (auto it = graphs_.find(signature); it != graphs_.end()) bytes = it->second;
    }
    if (!bytes) co_return std::nullopt;
    try {
        co_return codec::shape_from(*bytes, signature);
    } catch (const codec::corrupt& e) {
        throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what(), {signature});
    }
}

std::optional<std::string> memory_saver::stored_value(const thread_data& d, const std::string& channel,
                                                      const std::string& version) const {
    if (channel == graph_channel) {
        std::lock_guard g(graphs_mutex_);
        if (auto it = graphs_.find(version); it != graphs_.end()) return it->second;
    }
    if (const auto* s = find_checkpoint(d, version); s && !s->vals.empty())
        for (const auto& [c, bytes] : codec::decode_inline(s->vals))
            if (c == channel) return std::string(bytes);
    auto it = d.blobs.find({version, channel});
    if (it == d.blobs.end()) return std::nullopt;
    return it->second;
}

const memory_saver::stored_checkpoint* memory_saver::find_checkpoint(const thread_data& d, const std::string& id) {
    auto c = std::lower_bound(d.checkpoints.begin(), d.checkpoints.end(), id,
                              [](const stored_checkpoint& a, const std::string& i) { return a.id < i; });
    return c == d.checkpoints.end() || c->id != id ? nullptr : &*c;
}

checkpoint_tuple memory_saver::assemble(const key& k, const thread_data& d, const stored_checkpoint& s) const {
    checkpoint_tuple t{k.first, k.second, {}, {}};
    auto& cp = t.cp;
    cp.id = s.id;
    cp.parent_id = s.parent_id;
    cp.step = s.step;
    cp.source = s.source;
    std::string channel;
    try {
        codec::decode_record(s.record, cp);
        for (const auto& [name, version] : cp.versions) {
            if (version.empty()) continue;
            channel = name;
            auto fetch = [&](const std::string& v) { return stored_value(d, channel, v); };
            cp.values[channel] = codec::resolve_value(version, fetch);
        }
    } catch (const codec::corrupt& e) {
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "thread '" + k.first + "': checkpoint " + cp.id +
                                   (channel.empty() ? std::string() : ", channel '" + channel + "'") + ": " + e.what(),
                               channel.empty() ? std::vector<std::string>{k.first} : std::vector<std::string>{k.first, channel});
    }
    if (auto w = d.writes.find(cp.id); w != d.writes.end()) t.writes = w->second;
    return t;
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> memory_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    key k{std::move(thread_id), std::move(ns)};
    auto it = sh.threads.find(k);
    if (it == sh.threads.end() || it->second.checkpoints.empty()) co_return std::nullopt;
    const auto& d = it->second;
    if (checkpoint_id) {
        const auto* c = find_checkpoint(d, *checkpoint_id);
        if (!c) co_return std::nullopt;
        co_return assemble(k, d, *c);
    }
    co_return assemble(k, d, d.checkpoints.back());
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> memory_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    std::vector<checkpoint_tuple> out;
    key k{thread_id, ns};
    auto it = sh.threads.find(k);
    if (it == sh.threads.end()) co_return out;
    const auto& cps = it->second.checkpoints;
    for (auto c = cps.rbegin(); c != cps.rend(); ++c) {
        if (options.before && !(c->id < options.before.view())) continue;
        if (options.source && c->source != options.source.view()) continue;
        if (options.step && c->step != *options.step) continue;
        if (options.limit && out.size() >= *options.limit) break;
        out.push_back(assemble(k, it->second, *c));
    }
    co_return out;
}

boost::asio::awaitable<void> memory_saver::delete_thread(std::string thread_id) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    for (auto it = sh.threads.begin(); it != sh.threads.end();) {
        if (it->first.first == thread_id) it = sh.threads.erase(it);
        else ++it;
    }
    co_return;
}

std::size_t memory_saver::prune_locked(thread_data& d, std::size_t keep_last) const {
    if (keep_last == 0) keep_last = 1;
    auto& cps = d.checkpoints;
    const std::size_t drop = cps.size() > keep_last ? cps.size() - keep_last : 0;
    // Every value a kept checkpoint reads, with the versions its appended items extend.
    std::vector<checkpoint> kept(cps.size() - drop);
    for (std::size_t i = drop; i < cps.size(); ++i) {
        checkpoint& cp = kept[i - drop];
        cp.id = cps[i].id;
        codec::decode_record(cps[i].record, cp);
    }
    const auto needed = common::values_kept(
        kept, [&](const std::string& channel, const std::string& version) { return stored_value(d, channel, version); },
        [](const std::string& detail, const std::string&) { throw codec::corrupt(detail); }); // the callers name the thread
    // Values inside the entries about to go that are still read move apart.
    for (std::size_t i = 0; i < drop; ++i) {
        if (!cps[i].vals.empty())
            for (const auto& [channel, bytes] : codec::decode_inline(cps[i].vals))
                if (needed.count({std::string(channel), cps[i].id}))
                    d.blobs.insert_or_assign({cps[i].id, std::string(channel)}, std::string(bytes));
        d.writes.erase(cps[i].id);
    }
    cps.erase(cps.begin(), cps.begin() + static_cast<std::ptrdiff_t>(drop));
    for (auto b = d.blobs.begin(); b != d.blobs.end();) {
        if (!needed.count({b->first.second, b->first.first})) b = d.blobs.erase(b);
        else ++b;
    }
    if (!cps.empty()) cps.front().parent_id.clear();
    return drop;
}

boost::asio::awaitable<void> memory_saver::prune(std::string thread_id, std::size_t keep_last) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    for (auto& [k, d] : sh.threads) {
        if (k.first != thread_id) continue;
        try {
            prune_locked(d, keep_last);
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint, "thread '" + k.first + "': " + e.what(), {k.first});
        }
    }
    co_return;
}

boost::asio::awaitable<thread_stats> memory_saver::stats(std::string thread_id) {
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    thread_stats s;
    for (const auto& [k, d] : sh.threads) {
        if (k.first != thread_id) continue;
        s.checkpoints += d.checkpoints.size();
        for (const auto& c : d.checkpoints) {
            s.record_bytes += c.record.size();
            if (c.vals.empty()) continue;
            const auto in = codec::measure_inline(c.vals);
            s.blobs += in.values;
            s.bytes += in.value_bytes;
            s.record_bytes += c.vals.size() - in.value_bytes; // the framing: channel names and lengths
        }
        s.blobs += d.blobs.size();
        for (const auto& [key, v] : d.blobs) s.bytes += v.size();
        for (const auto& [id, ws] : d.writes) {
            s.writes += ws.size();
            for (const auto& w : ws) s.bytes += boost::json::serialize(w.value).size();
        }
    }
    co_return s;
}

namespace {
bool holds_anything(const auto& d) { return !d.checkpoints.empty() || !d.blobs.empty() || !d.writes.empty(); }
} // namespace

boost::asio::awaitable<void> memory_saver::copy_thread(std::string from, std::string to) {
    // A snapshot of the source under its shard's lock, then the target's check and insertion under
    // the target's: each step is atomic, and no two shard locks are ever held at once.
    std::vector<std::pair<std::string, thread_data>> copies; // ns, data
    {
        auto& sh = shard_of(from);
        std::lock_guard lock(sh.mutex);
        for (const auto& [k, d] : sh.threads)
            if (k.first == from && holds_anything(d)) copies.emplace_back(k.second, d);
    }
    if (std::none_of(copies.begin(), copies.end(), [](const auto& c) { return !c.second.checkpoints.empty(); }))
        throw checkpoint_error(errc::thread_not_found,
                               "copy_thread: thread '" + from + "' has no checkpoint to copy (to '" + to + "')", {from, to});
    auto& sh = shard_of(to);
    std::lock_guard lock(sh.mutex);
    for (const auto& [k, d] : sh.threads)
        if (k.first == to && holds_anything(d))
            throw checkpoint_error(errc::thread_exists,
                                   "copy_thread: thread '" + to + "' exists already (copying '" + from +
                                       "' there would mix two threads); delete it first or choose another id",
                                   {to, from});
    for (auto& [ns, d] : copies) sh.threads.insert_or_assign(key{to, std::move(ns)}, std::move(d));
    co_return;
}

boost::asio::awaitable<std::size_t> memory_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    // One shard holds every namespace of a thread: its lock makes the whole rewind atomic.
    auto& sh = shard_of(thread_id);
    std::lock_guard lock(sh.mutex);
    const bool known = std::any_of(sh.threads.begin(), sh.threads.end(), [&](const auto& kv) {
        return kv.first.first == thread_id && find_checkpoint(kv.second, checkpoint_id) != nullptr;
    });
    if (!known) throw common::rewind_target_missing(thread_id, checkpoint_id, "");
    std::size_t removed = 0;
    for (auto& [k, d] : sh.threads) {
        if (k.first != thread_id) continue;
        auto& cps = d.checkpoints; // sorted by id: the ones to go are at the end
        auto from = std::upper_bound(cps.begin(), cps.end(), checkpoint_id,
                                     [](const std::string& id, const stored_checkpoint& c) { return id < c.id; });
        for (auto c = from; c != cps.end(); ++c) {
            d.writes.erase(c->id);
            // Values kept apart under a version made by a checkpoint that goes go with it.
            for (auto b = d.blobs.lower_bound({c->id, std::string()}); b != d.blobs.end() && b->first.first == c->id;)
                b = d.blobs.erase(b);
        }
        removed += static_cast<std::size_t>(cps.end() - from);
        cps.erase(from, cps.end());
        // Writes saved against an id with no checkpoint (a task of a checkpoint not stored) that is
        // newer than the target go too: they belong to what is rolled back.
        for (auto w = d.writes.upper_bound(checkpoint_id); w != d.writes.end();) w = d.writes.erase(w);
    }
    std::erase_if(sh.threads, [&](const auto& kv) {
        return kv.first.first == thread_id && kv.second.checkpoints.empty() && kv.second.blobs.empty() && kv.second.writes.empty();
    });
    co_return removed;
}

boost::asio::awaitable<std::vector<thread_info>> memory_saver::list_threads(thread_query query) {
    // Heads are copied under their shard's lock and decoded after it: all of them with a metadata
    // filter, only the page returned without one.
    struct head_copy { // of the root head: its record, not its values
        std::string id, source, record;
        std::int64_t step = -1;
    };
    struct found {
        thread_info info;
        const stored_checkpoint* root = nullptr; // valid only under the shard's lock
        std::optional<head_copy> head;
    };
    auto decode = [](found& f) {
        if (!f.head) return;
        checkpoint cp;
        cp.id = f.head->id;
        cp.step = f.head->step;
        cp.source = f.head->source;
        try {
            codec::decode_record(f.head->record, cp);
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "thread '" + f.info.thread_id + "': checkpoint " + cp.id + ": " + e.what(), {f.info.thread_id});
        }
        f.info.checkpoint_id = cp.id;
        f.info.created_at = checkpoint_time(cp.id);
        f.info.metadata = std::move(cp.metadata);
        f.head.reset();
    };
    const bool filtered = !query.metadata.empty();
    std::vector<found> all;
    for (auto& sh : shards_) {
        std::map<std::string_view, found> threads;
        std::lock_guard lock(sh.mutex);
        for (const auto& [k, d] : sh.threads) {
            if (d.checkpoints.empty()) continue;
            auto& f = threads[k.first];
            f.info.checkpoints += d.checkpoints.size();
            if (d.checkpoints.back().id > f.info.newest_id) f.info.newest_id = d.checkpoints.back().id;
            if (k.second.empty()) f.root = &d.checkpoints.back();
        }
        for (auto& [id, f] : threads) {
            f.info.thread_id = std::string(id);
            if (f.root) f.head.emplace(head_copy{f.root->id, f.root->source, f.root->record, f.root->step});
            f.root = nullptr;
            if (filtered) {
                decode(f);
                if (f.info.checkpoint_id.empty() || !query.metadata.matches(f.info.metadata)) continue;
            }
            all.push_back(std::move(f));
        }
    }
    const std::size_t from = std::min(query.offset, all.size());
    const std::size_t to = query.limit ? from + std::min(query.limit, all.size() - from) : all.size();
    // Only the threads up to the page's end need their place.
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(to), all.end(), [](const found& a, const found& b) {
        return a.info.newest_id != b.info.newest_id ? a.info.newest_id > b.info.newest_id : a.info.thread_id < b.info.thread_id;
    });
    std::vector<thread_info> out;
    out.reserve(to - from);
    for (std::size_t i = from; i < to; ++i) {
        decode(all[i]);
        out.push_back(std::move(all[i].info));
    }
    co_return out;
}

boost::asio::awaitable<sweep_result> memory_saver::sweep(ttl_policy policy) {
    // Ids are time-ordered text: a thread is past its time to live when its newest id sorts before
    // the id of the cut-off time. The in-memory saver has no leases: nothing is ever busy.
    const auto cutoff = checkpoint_id_at(std::chrono::system_clock::now() -
                                         std::max(policy.older_than, std::chrono::milliseconds(0)));
    sweep_result result;
    for (auto& sh : shards_) {
        std::lock_guard lock(sh.mutex);
        std::map<std::string, std::string> newest; // thread -> newest id of any namespace
        for (const auto& [k, d] : sh.threads)
            if (!d.checkpoints.empty()) {
                auto& n = newest[k.first];
                if (d.checkpoints.back().id > n) n = d.checkpoints.back().id;
            }
        for (const auto& [thread, id] : newest) {
            if (!(id < cutoff)) continue;
            ++result.expired;
            std::size_t removed = 0;
            for (auto it = sh.threads.begin(); it != sh.threads.end();) {
                if (it->first.first != thread) {
                    ++it;
                    continue;
                }
                if (policy.action == ttl_action::delete_thread) {
                    removed += it->second.checkpoints.size();
                    it = sh.threads.erase(it);
                    continue;
                }
                try {
                    removed += prune_locked(it->second, 1);
                } catch (const codec::corrupt& e) {
                    throw checkpoint_error(errc::corrupt_checkpoint, "thread '" + thread + "': " + e.what(), {thread});
                }
                ++it;
            }
            result.checkpoints_removed += removed;
            if (policy.action == ttl_action::delete_thread) ++result.deleted;
            else if (removed) ++result.pruned;
        }
    }
    co_return result;
}

} // namespace stategraph::checkpoint
