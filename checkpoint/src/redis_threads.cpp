// The Redis saver's thread maintenance: delete_thread, prune, stats, holds_thread, copy_thread,
// rewind_thread, list_threads and sweep.
#include "redis_saver_impl.hpp"

#include <algorithm>
#include <iterator>

namespace stategraph::checkpoint {

asio::awaitable<void> redis_saver::impl::delete_op(std::string thread) {
    std::vector<command> ops;
    command del{"DEL"};
    for (auto& k : thread_keys(thread)) del.push_back(std::move(k));
    ops.push_back(std::move(del));
    ops.push_back(command{"SREM", threads_key(), thread});
    co_await fenced(thread, std::move(ops), fence::ours_or_free);
}

/// The operations that keep the newest `keep_last` checkpoints per namespace of `thread` and
/// the values they need; `removed` gets how many checkpoints go.
asio::awaitable<std::vector<command>> redis_saver::impl::plan_prune(std::string thread, std::size_t keep_last,
                                                                    std::size_t& removed) {
    if (keep_last == 0) keep_last = 1;
    std::vector<command> reads{command{"ZRANGE", tkey(thread, "ids"), "0", "-1"}, command{"HKEYS", tkey(thread, "vals")},
                               command{"HKEYS", tkey(thread, "writes")}};
    auto r = co_await all(std::move(reads), thread);
    std::map<std::string, std::vector<std::string>> by_ns; // ns -> ids, oldest first
    for (const auto& m : r[0].elements) {
        const auto z = m.str.find('\0');
        if (z == std::string::npos) continue;
        by_ns[m.str.substr(0, z)].push_back(m.str.substr(z + 1));
    }
    std::set<std::pair<std::string, std::string>> dropped; // (ns, id)
    std::map<std::string, std::set<std::pair<std::string, std::string>>> needed; // ns -> (channel, version)
    std::vector<command> ops;
    command zrem{"ZREM", tkey(thread, "ids")}, hdel_cp{"HDEL", tkey(thread, "cp")};
    std::vector<std::string> gone_ids, gone_entries;
    for (const auto& [ns, ids] : by_ns) {
        const std::size_t drop = ids.size() > keep_last ? ids.size() - keep_last : 0;
        for (std::size_t i = 0; i < drop; ++i) {
            dropped.emplace(ns, ids[i]);
            gone_ids.push_back(join({ns, ids[i]}));
        }
        command entries{"HMGET", tkey(thread, "cp")};
        for (std::size_t i = drop; i < ids.size(); ++i) entries.push_back(join({ns, ids[i]}));
        auto e = co_await one(std::move(entries), thread);
        std::vector<checkpoint> kept;
        for (std::size_t i = drop; i < ids.size(); ++i)
            if (auto bytes = text_of(e.elements.at(i - drop))) kept.push_back(read_entry(thread, ns, ids[i], *bytes));
        value_map got;
        auto wanted = versions_of(kept);
        co_await fetch_values(thread, ns, std::move(wanted), got);
        needed[ns] = common::values_kept(
            kept,
            [&](const std::string& channel, const std::string& version) -> std::optional<std::string> {
                auto it = got.find({channel, version});
                return it == got.end() ? std::nullopt : it->second;
            },
            [&](const std::string& detail, const std::string& channel) { corrupt(thread, detail, {thread, channel}); });
        if (drop && !kept.empty() && !kept.front().parent_id.empty()) {
            // The oldest kept checkpoint has no parent any more (as in the other savers).
            auto first = kept.front();
            first.parent_id.clear();
            first.values.clear();
            ops.push_back(command{"HSET", tkey(thread, "cp"), join({ns, first.id}),
                                  entry_of(ns, first, codec::encode_record(first))});
        }
    }
    removed = gone_ids.size();
    add_chunked(ops, zrem, gone_ids, 1);
    add_chunked(ops, hdel_cp, gone_ids, 1);
    std::vector<std::string> gone_vals;
    for (const auto& f : r[1].elements) {
        const auto parts = split(f.str);
        if (parts.size() != 3) continue;
        auto it = needed.find(std::string(parts[0]));
        if (it == needed.end() || !it->second.count({std::string(parts[1]), std::string(parts[2])}))
            gone_vals.push_back(f.str);
    }
    add_chunked(ops, command{"HDEL", tkey(thread, "vals")}, gone_vals, 1);
    std::vector<std::string> gone_writes;
    for (const auto& f : r[2].elements) {
        const auto parts = split(f.str);
        if (parts.size() == 4 && dropped.count({std::string(parts[0]), std::string(parts[1])}))
            gone_writes.push_back(f.str);
    }
    add_chunked(ops, command{"HDEL", tkey(thread, "writes")}, gone_writes, 1);
    add_chunked(ops, command{"ZREM", tkey(thread, "wseq")}, gone_writes, 1);
    co_return ops;
}

asio::awaitable<void> redis_saver::impl::prune_op(std::string thread, std::size_t keep_last) {
    std::size_t removed = 0;
    auto ops = co_await plan_prune(thread, keep_last, removed);
    co_await fenced(thread, std::move(ops), fence::ours_or_free);
}

asio::awaitable<thread_stats> redis_saver::impl::stats_op(std::string thread) {
    std::vector<command> reads{command{"HVALS", tkey(thread, "cp")}, command{"HVALS", tkey(thread, "vals")},
                               command{"HVALS", tkey(thread, "writes")}};
    auto r = co_await all(std::move(reads), thread);
    thread_stats s;
    s.checkpoints = r[0].elements.size();
    for (const auto& e : r[0].elements) s.record_bytes += e.str.size();
    s.blobs = r[1].elements.size();
    for (const auto& v : r[1].elements) s.bytes += v.str.size() - std::min(v.str.size(), codec::framing_of(v.str));
    s.writes = r[2].elements.size();
    for (const auto& w : r[2].elements) {
        const auto z = w.str.find('\0');
        if (z == std::string::npos) continue;
        const auto sealed = std::string_view(w.str).substr(z + 1);
        s.bytes += sealed.size() - std::min(sealed.size(), codec::framing_of(sealed));
    }
    co_return s;
}

asio::awaitable<bool> redis_saver::impl::holds_op(std::string thread) {
    std::vector<command> reads{command{"EXISTS", tkey(thread, "cp"), tkey(thread, "writes")}};
    auto r = co_await all(std::move(reads), thread);
    co_return r[0].integer > 0;
}

asio::awaitable<void> redis_saver::impl::copy_op(std::string from, std::string to) {
    std::vector<command> reads{command{"ZRANGE", tkey(from, "ids"), "0", "-1"}, command{"HGETALL", tkey(from, "cp")},
                               command{"HGETALL", tkey(from, "vals")},     command{"HGETALL", tkey(from, "writes")},
                               command{"ZRANGE", tkey(from, "wseq"), "0", "-1", "WITHSCORES"},
                               command{"HGET", tkey(from, "meta"), "newest"}};
    auto r = co_await all(std::move(reads), from);
    if (r[0].elements.empty())
        throw checkpoint_error(errc::thread_not_found,
                               "copy_thread: thread " + quote(from) + " has no checkpoint to copy (to " + quote(to) + ")",
                               {from, to});
    std::vector<command> ops{command{"ABSENT", tkey(to, "ids")}, command{"ABSENT", tkey(to, "writes")},
                             command{"ABSENT", tkey(to, "cp")}};
    auto flat = [](const reply& x) {
        std::vector<std::string> out;
        out.reserve(x.elements.size());
        for (const auto& e : x.elements) out.push_back(e.str);
        return out;
    };
    std::vector<std::string> members;
    for (const auto& m : r[0].elements) {
        members.push_back("0");
        members.push_back(m.str);
    }
    add_chunked(ops, command{"ZADD", tkey(to, "ids")}, members, 2);
    add_chunked(ops, command{"HSET", tkey(to, "cp")}, flat(r[1]), 2);
    add_chunked(ops, command{"HSET", tkey(to, "vals")}, flat(r[2]), 2);
    add_chunked(ops, command{"HSET", tkey(to, "writes")}, flat(r[3]), 2);
    std::vector<std::string> seqs; // score, member
    for (std::size_t i = 0; i + 1 < r[4].elements.size(); i += 2) {
        seqs.push_back(r[4].elements[i + 1].str);
        seqs.push_back(r[4].elements[i].str);
    }
    add_chunked(ops, command{"ZADD", tkey(to, "wseq")}, seqs, 2);
    if (!r[5].is_nil()) ops.push_back(command{"HSET", tkey(to, "meta"), "newest", r[5].str});
    ops.push_back(command{"SADD", threads_key(), to});
    bool exec_retried = false;
    auto status = co_await fenced(to, std::move(ops), fence::ours_or_free, &exec_retried);
    if (status == "EXISTS" && exec_retried) {
        // A retried copy whose first try was stored (its answer lost with the connection)
        // finds exactly the source's checkpoints there: that is success, not a clash.
        command ids{"ZRANGE", tkey(to, "ids"), "0", "-1"};
        auto there = co_await one(std::move(ids), to);
        std::vector<std::string> want, got;
        for (const auto& m : r[0].elements) want.push_back(m.str);
        for (const auto& m : there.elements) got.push_back(m.str);
        if (want == got) status = "OK";
    }
    if (status == "EXISTS")
        throw checkpoint_error(errc::thread_exists,
                               "copy_thread: thread " + quote(to) + " exists already (copying " + quote(from) +
                                   " there would mix two threads); delete it first or choose another id",
                               {to, from});
}

/// `rewind_thread`: the thread's keys are read, the removals planned, and the write script
/// applies them all at once, guarded by the thread's newest id (a write in between makes the
/// script refuse, and the plan is made again) and fenced by its lease.
asio::awaitable<std::size_t> redis_saver::impl::rewind_op(std::string thread, std::string target) {
    for (int attempt = 0;; ++attempt) {
        std::vector<command> reads{command{"ZRANGE", tkey(thread, "ids"), "0", "-1"}, command{"HKEYS", tkey(thread, "vals")},
                                   command{"HKEYS", tkey(thread, "writes")}, command{"HGET", tkey(thread, "meta"), "newest"}};
        auto r = co_await all(std::move(reads), thread);
        std::set<std::pair<std::string, std::string>> gone; // (ns, id)
        std::vector<std::string> gone_members;
        std::string newest; // of what stays
        bool known = false;
        for (const auto& m : r[0].elements) {
            const auto z = m.str.find('\0');
            if (z == std::string::npos) continue;
            auto id = m.str.substr(z + 1);
            if (id == target) known = true;
            if (id > target) {
                gone.emplace(m.str.substr(0, z), id);
                gone_members.push_back(m.str);
            } else if (id > newest) {
                newest = id;
            }
        }
        if (!known) throw common::rewind_target_missing(thread, target, "");
        std::vector<command> ops{command{"HEQ", tkey(thread, "meta"), "newest", text_of(r[3]).value_or("")}};
        add_chunked(ops, command{"ZREM", tkey(thread, "ids")}, gone_members, 1);
        add_chunked(ops, command{"HDEL", tkey(thread, "cp")}, gone_members, 1);
        std::vector<std::string> gone_vals, gone_writes;
        for (const auto& f : r[1].elements) {
            const auto parts = split(f.str); // ns, channel, version
            if (parts.size() == 3 && gone.count({std::string(parts[0]), std::string(parts[2])})) gone_vals.push_back(f.str);
        }
        for (const auto& f : r[2].elements) {
            const auto parts = split(f.str); // ns, checkpoint id, task, channel
            if (parts.size() == 4 && parts[1] > target) gone_writes.push_back(f.str);
        }
        add_chunked(ops, command{"HDEL", tkey(thread, "vals")}, gone_vals, 1);
        add_chunked(ops, command{"HDEL", tkey(thread, "writes")}, gone_writes, 1);
        add_chunked(ops, command{"ZREM", tkey(thread, "wseq")}, gone_writes, 1);
        ops.push_back(command{"HSET", tkey(thread, "meta"), "newest", newest});
        auto status = co_await fenced(thread, std::move(ops), fence::ours_or_free);
        if (status == "OK") co_return gone_members.size();
        if (attempt >= 4)
            failed(thread, "rewind_thread: the thread kept changing while it was being rewound; nothing was removed");
    }
}

/// Every listed thread that still has checkpoints, with its newest id of any namespace.
asio::awaitable<std::vector<redis_saver::impl::head>> redis_saver::impl::heads() {
    command cmd{"SMEMBERS", threads_key()};

    auto members = co_await one(std::move(cmd), no_thread);
    std::vector<head> out;
    if (members.elements.empty()) co_return out;
    std::vector<command> cmds;
    for (const auto& m : members.elements) {
        cmds.push_back(command{"HGET", tkey(m.str, "meta"), "newest"});
        cmds.push_back(command{"ZCARD", tkey(m.str, "ids")});
        cmds.push_back(command{"ZREVRANGEBYLEX", tkey(m.str, "ids"), "(\x01", std::string("[\0", 2), "LIMIT", "0", "1"});
    }
    auto r = co_await all(std::move(cmds), no_thread);
    for (std::size_t i = 0; i < members.elements.size(); ++i) {
        head h;
        h.thread = members.elements[i].str;
        h.count = static_cast<std::size_t>(r[3 * i + 1].integer);
        if (auto n = text_of(r[3 * i])) h.newest = *n;
        if (!r[3 * i + 2].elements.empty()) h.root_id = r[3 * i + 2].elements[0].str.substr(1);
        out.push_back(std::move(h));
    }
    co_return out;
}

asio::awaitable<std::vector<thread_info>> redis_saver::impl::list_threads_op(thread_query q) {
    auto hs = co_await heads();
    std::erase_if(hs, [](const head& h) { return h.count == 0; });
    std::sort(hs.begin(), hs.end(), [](const head& a, const head& b) {
        return a.newest != b.newest ? a.newest > b.newest : a.thread < b.thread;
    });
    std::vector<thread_info> out;
    std::size_t skipped = 0;
    // Root heads are read in batches: all of them with a filter, only the page without one.
    const std::size_t batch = q.metadata.empty() && q.limit ? q.offset + q.limit : 256;
    for (std::size_t at = 0; at < hs.size();) {
        const std::size_t end = std::min(hs.size(), at + batch);
        std::vector<command> cmds;
        for (std::size_t i = at; i < end; ++i)
            cmds.push_back(command{"HGET", tkey(hs[i].thread, "cp"), join({"", hs[i].root_id.value_or("")})});
        auto r = co_await all(std::move(cmds), no_thread);
        for (std::size_t i = at; i < end; ++i) {
            thread_info info;
            info.thread_id = hs[i].thread;
            info.newest_id = hs[i].newest;
            info.checkpoints = hs[i].count;
            if (hs[i].root_id)
                if (auto bytes = text_of(r[i - at])) {
                    auto cp = read_entry(hs[i].thread, "", *hs[i].root_id, *bytes);
                    info.checkpoint_id = cp.id;
                    info.created_at = checkpoint_time(cp.id);
                    info.metadata = std::move(cp.metadata);
                }
            if (!q.metadata.empty() && (info.checkpoint_id.empty() || !q.metadata.matches(info.metadata))) continue;
            if (skipped < q.offset) {
                ++skipped;
                continue;
            }
            out.push_back(std::move(info));
            if (q.limit && out.size() >= q.limit) co_return out;
        }
        at = end;
    }
    co_return out;
}

asio::awaitable<sweep_result> redis_saver::impl::sweep_op(ttl_policy policy) {
    const auto cutoff = checkpoint_id_at(std::chrono::system_clock::now() -
                                         std::max(policy.older_than, std::chrono::milliseconds(0)));
    auto hs = co_await heads();
    sweep_result result;
    for (const auto& h : hs) {
        if (h.count == 0) {
            // Its keys expired (thread_ttl) or went: drop it from the list of threads.
            std::vector<command> ops{command{"ABSENT", tkey(h.thread, "ids")}, command{"SREM", threads_key(), h.thread}};
            co_await fenced(h.thread, std::move(ops), fence::nobody);
            continue;
        }
        if (!(h.newest < cutoff)) continue;
        ++result.expired;
        std::vector<command> ops{command{"HEQ", tkey(h.thread, "meta"), "newest", h.newest}};
        std::size_t removed = h.count;
        if (policy.action == ttl_action::delete_thread) {
            command del{"DEL"};
            for (auto& k : thread_keys(h.thread)) del.push_back(std::move(k));
            ops.push_back(std::move(del));
            ops.push_back(command{"SREM", threads_key(), h.thread});
        } else {
            auto more = co_await plan_prune(h.thread, 1, removed);
            ops.insert(ops.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
        }
        auto status = co_await fenced(h.thread, std::move(ops), fence::nobody);
        if (status == "BUSY") {
            ++result.skipped_busy;
            continue;
        }
        if (status != "OK") continue; // written meanwhile: kept
        result.checkpoints_removed += removed;
        if (policy.action == ttl_action::delete_thread) ++result.deleted;
        else if (removed) ++result.pruned;
    }
    co_return result;
}

asio::awaitable<void> redis_saver::delete_thread(std::string thread_id) {
    auto op = impl_->delete_op(std::move(thread_id));
    co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::prune(std::string thread_id, std::size_t keep_last) {
    auto op = impl_->prune_op(std::move(thread_id), keep_last);
    co_await impl_->call(op);
}

asio::awaitable<thread_stats> redis_saver::stats(std::string thread_id) {
    auto op = impl_->stats_op(std::move(thread_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<bool> redis_saver::holds_thread(std::string thread_id) {
    auto op = impl_->holds_op(std::move(thread_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::copy_thread(std::string from, std::string to) {
    auto op = impl_->copy_op(std::move(from), std::move(to));
    co_await impl_->call(op);
}

asio::awaitable<std::size_t> redis_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    auto op = impl_->rewind_op(std::move(thread_id), std::move(checkpoint_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<std::vector<thread_info>> redis_saver::list_threads(thread_query query) {
    auto op = impl_->list_threads_op(query);
    co_return co_await impl_->call(op);
}

asio::awaitable<sweep_result> redis_saver::sweep(ttl_policy policy) {
    auto op = impl_->sweep_op(policy);
    co_return co_await impl_->call(op);
}

} // namespace stategraph::checkpoint
