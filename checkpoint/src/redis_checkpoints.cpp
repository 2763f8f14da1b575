// The Redis saver's checkpoints and pending writes: put, put_writes, get and list, with the
// reading of values (appended chains, shared graph shapes) and of pending writes.
#include "redis_saver_impl.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <iterator>

namespace stategraph::checkpoint {

namespace {

/// `s` as a literal in a Redis glob pattern.
std::string glob_literal(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

/// The first of `n` consecutive arrival numbers for pending writes: microseconds since the epoch
/// (time-ordered across processes, exact in a sorted set's double score), strictly increasing in
/// this process.
std::int64_t reserve_seq(std::size_t n) {
    static std::atomic<std::int64_t> last{0};
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto cur = last.load();
    std::int64_t start = 0;
    do {
        start = std::max(now, cur + 1);
    } while (!last.compare_exchange_weak(cur, start + static_cast<std::int64_t>(n) - 1));
    return start;
}

const std::string& version_of(const checkpoint& cp, const std::string& channel) {
    auto it = cp.versions.find(channel);
    return it == cp.versions.end() ? cp.id : it->second;
}

} // namespace

/// Plans the operations of `put_many`: the batch's values in one HSET, its entries in one, its
/// ids in one ZADD (each cut at `chunk_words`), the newest id and the thread's name once. One
/// script call runs them all; a command per checkpoint would cost the script its per-call
/// overhead five times for each.
std::vector<command> redis_saver::impl::plan_puts(const std::string& thread, const std::string& ns,
                                                  std::span<const checkpoint> cps) const {
    std::vector<command> ops;
    if (cps.empty()) return ops;
    std::vector<std::string> vals, entries, ids; // field, bytes; field, entry; score, member
    std::set<std::string> shapes;                // graph versions planned
    const std::string* newest = nullptr;
    for (const auto& cp : cps) {
        for (const auto& [channel, value] : cp.values) {
            const std::string name(channel);
            const auto& version = version_of(cp, name);
            auto x = cp.extends.find(name);
            const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
            auto bytes = codec::encode_value(value, extends, version);
            if (codec::shared_shape(name, extends, version, cp.id)) {
                if (shapes.insert(version).second)
                    ops.push_back(command{"HSETNX", graphs_key(), version, codec::seal(bytes, {graph_channel, version})});
                continue;
            }
            vals.push_back(join({ns, name, version}));
            vals.push_back(codec::seal(bytes, {ns, name, version}));
        }
        auto field = join({ns, cp.id});
        entries.push_back(field);
        entries.push_back(entry_of(ns, cp, codec::encode_record(cp)));
        ids.push_back("0");
        ids.push_back(std::move(field));
        if (!newest || cp.id > *newest) newest = &cp.id;
    }
    add_chunked(ops, command{"HSET", tkey(thread, "vals")}, vals, 2);
    add_chunked(ops, command{"HSET", tkey(thread, "cp")}, entries, 2);
    add_chunked(ops, command{"ZADD", tkey(thread, "ids")}, ids, 2);
    ops.push_back(command{"HMAX", tkey(thread, "meta"), "newest", *newest});
    ops.push_back(command{"SADD", threads_key(), thread});
    return ops;
}

/// Plans the operations of `put_writes`: each write's arrival number, then the writes in one HSET.
std::vector<command> redis_saver::impl::plan_writes(const std::string& thread, const std::string& ns,
                                                    const std::string& checkpoint_id,
                                                    const std::vector<pending_write>& writes) const {
    std::vector<command> ops;
    if (writes.empty()) return ops;
    std::vector<std::string> set, seqs; // field, bytes; score, member
    const auto base = reserve_seq(writes.size());
    std::int64_t n = 0;
    for (const auto& w : writes) {
        auto field = join({ns, checkpoint_id, w.task_id, w.channel});
        seqs.push_back(std::to_string(base + n++));
        seqs.push_back(field);
        set.push_back(std::move(field));
        set.push_back(join({w.task_name, codec::seal(boost::json::serialize(w.value),
                                                     {ns, checkpoint_id, w.task_id, w.task_name, w.channel})}));
    }
    add_chunked(ops, command{"ZADD", tkey(thread, "wseq"), "NX"}, seqs, 2);
    add_chunked(ops, command{"HSET", tkey(thread, "writes")}, set, 2);
    return ops;
}

/// A call's end as one fenced script call: its checkpoints, its writes, and (`RELEASE`) the lease.
asio::awaitable<void> redis_saver::impl::end_call_op(const std::string& thread, const std::string& ns,
                                                     saver::call_end& end) {
    if (end.checkpoints.empty() && end.writes.empty()) {
        if (end.release) co_await release_op(thread);
        co_return;
    }
    auto ops = plan_puts(thread, ns, end.checkpoints);
    auto writes = plan_writes(thread, ns, end.writes_to, end.writes);
    ops.insert(ops.end(), std::make_move_iterator(writes.begin()), std::make_move_iterator(writes.end()));
    if (end.release) ops.push_back(command{"RELEASE"});
    (void)co_await fenced(thread, std::move(ops), fence::ours_or_free, nullptr, end.release);
    if (end.release) { // given back: no longer renewed by this saver
        std::lock_guard lock(mutex);
        held.erase(thread);
    }
}

asio::awaitable<void> redis_saver::impl::write_op(std::string thread, std::vector<command> ops) {
    co_await fenced(thread, std::move(ops), fence::ours_or_free);
}

/// Fetches `wanted` values of (thread, ns) and every earlier version their appended items
/// extend, into `got`: one round trip for `wanted`, and, when appended items link to versions
/// not read yet, one more (the read script's chain mode) for every version of those channels up to the
/// newest link missing, so a chain of any length costs two round trips, not one per link.
asio::awaitable<void> redis_saver::impl::fetch_values(std::string thread, std::string ns,
                                                      std::set<std::pair<std::string, std::string>> wanted,
                                                      value_map& got) {
    // Unseals one stored value (or the shared graph copy) into `got`, asking for its link.
    auto take = [&](const std::pair<std::string, std::string>& key, const std::optional<std::string>& stored,
                    const std::optional<std::string>& shared) {
        const auto& [channel, version] = key;
        std::optional<std::string> plain;
        try {
            if (!stored && shared) plain.emplace(codec::unseal(*shared, {graph_channel, version}));
            if (stored) plain.emplace(codec::unseal(*stored, {ns, channel, version}));
            if (plain)
                if (auto parts = codec::split_value(*plain, version); parts.extends) wanted.emplace(channel, *parts.extends);
        } catch (const codec::corrupt& e) {
            corrupt(thread, "channel " + quote(channel) + " (version " + version + ") cannot be read: " + e.what(),
                    {thread, channel});
        }
        got[key] = std::move(plain);
    };
    for (bool first = true;; first = false) {
        std::vector<std::pair<std::string, std::string>> missing;
        for (const auto& w : wanted)
            if (!got.count(w)) missing.push_back(w);
        if (missing.empty()) co_return;
        if (first) {
            command vals{"HMGET", tkey(thread, "vals")};
            command graphs{"HMGET", graphs_key()};
            for (const auto& [channel, version] : missing) {
                vals.push_back(join({ns, channel, version}));
                if (channel == graph_channel) graphs.push_back(version);
            }
            std::vector<command> cmds{std::move(vals)};
            if (graphs.size() > 2) cmds.push_back(std::move(graphs));
            auto r = co_await all(std::move(cmds), thread);
            std::size_t g = 0;
            for (std::size_t i = 0; i < missing.size(); ++i) {
                std::optional<std::string> shared;
                if (missing[i].first == graph_channel) shared = text_of(r.at(1).elements.at(g++));
                take(missing[i], text_of(r[0].elements.at(i)), shared);
            }
            continue;
        }
        // Links: per channel, every stored version up to the newest link missing.
        std::map<std::string, std::string> upto;
        for (const auto& [channel, version] : missing)
            if (auto& u = upto[channel]; u < version) u = version;
        command chain{"EVALSHA", std::string(read_marker), "1", tkey(thread, "vals"), "chain"};
        for (const auto& [channel, version] : upto) chain.push_back(glob_literal(join({ns, channel, ""})) + "*");
        auto r = co_await one(std::move(chain), thread);
        const auto& fv = r.elements;
        for (std::size_t i = 0; i + 1 < fv.size(); i += 2) {
            const auto parts = split(fv[i].str);
            if (parts.size() != 3 || parts[0] != ns) continue;
            std::pair<std::string, std::string> key{std::string(parts[1]), std::string(parts[2])};
            auto u = upto.find(key.first);
            if (u == upto.end() || key.second > u->second || got.count(key)) continue;
            take(key, fv[i + 1].str, std::nullopt);
        }
        for (const auto& m : missing)
            if (!got.count(m)) got[m] = std::nullopt; // not stored: reported by `assemble`
    }
}

/// Fills `cp.values` from `got`. Throws `corrupt_checkpoint`.
void redis_saver::impl::assemble(const std::string& thread, checkpoint& cp, const value_map& got) {
    for (const auto& [channel, version] : cp.versions) {
        if (version.empty()) continue;
        auto fetch = [&, &ch = channel](const std::string& v) -> std::optional<std::string> {
            auto it = got.find({ch, v});
            return it == got.end() ? std::nullopt : it->second;
        };
        try {
            if (!fetch(version))
                corrupt(thread,
                        "checkpoint " + cp.id + " needs channel " + quote(channel) + " at version " + version +
                            ", which is not stored",
                        {thread, channel});
            cp.values[channel] = codec::resolve_value(version, fetch);
        } catch (const codec::corrupt& e) {
            corrupt(thread, "checkpoint " + cp.id + ": channel " + quote(channel) + " cannot be read: " + e.what(),
                    {thread, channel});
        }
    }
}

/// The pending writes found by the read script (fields and values alternating, then their
/// arrival scores), by checkpoint id and in the order they were first saved.
std::map<std::string, std::vector<pending_write>>
redis_saver::impl::writes_of(const std::string& thread, const std::string& ns, const reply& found,
                             const reply& scores) {
    struct item {
        double seq;
        std::string cp;
        pending_write w;
    };
    std::vector<item> items;
    const auto& fv = found.elements;
    for (std::size_t i = 0; i + 1 < fv.size(); i += 2) {
        const std::string& field = fv[i].str;
        const std::string& value = fv[i + 1].str;
        const auto parts = split(field);
        if (parts.size() != 4) corrupt(thread, "a pending write is stored under a malformed field", {thread});
        item it{0, std::string(parts[1]), {}};
        const std::size_t k = i / 2;
        if (k < scores.elements.size() && !scores.elements[k].is_nil())
            it.seq = std::strtod(scores.elements[k].str.c_str(), nullptr);
        it.w.task_id = std::string(parts[2]);
        it.w.channel = std::string(parts[3]);
        const std::string what = "checkpoint " + it.cp + ": pending write of task " + quote(it.w.task_id) +
                                 " to channel " + quote(it.w.channel);
        const auto z = std::string_view(value).find('\0');
        if (z == std::string_view::npos) corrupt(thread, what + " cannot be read: it is cut short", {thread, it.w.channel});
        it.w.task_name = value.substr(0, z);
        try {
            const auto text = codec::unseal(std::string_view(value).substr(z + 1),
                                            {ns, it.cp, it.w.task_id, it.w.task_name, it.w.channel});
            boost::system::error_code ec;
            it.w.value = boost::json::parse(text, ec);
            if (ec) throw codec::corrupt("bad JSON: " + ec.message());
        } catch (const codec::corrupt& e) {
            corrupt(thread, what + " cannot be read: " + e.what(), {thread, it.w.channel, it.w.task_name});
        }
        items.push_back(std::move(it));
    }
    std::stable_sort(items.begin(), items.end(), [](const item& a, const item& b) { return a.seq < b.seq; });
    std::map<std::string, std::vector<pending_write>> out;
    for (auto& it : items) out[it.cp].push_back(std::move(it.w));
    return out;
}

/// Checkpoints of (thread, ns), newest first, with values and writes: the one with `exact`,
/// or those `o` selects. One round trip (the read script: ids, entries and pending writes, as
/// one atomic snapshot), then one for the values, and one more only when appended values
/// link to versions not read yet (the read script's chain mode, whatever the chain's length).
command redis_saver::impl::read_command(const std::string& thread, const std::string& ns, const list_options& o,
                                         const std::optional<std::string>& exact) const {
    command read{"EVALSHA", std::string(read_marker), "4", tkey(thread, "ids"), tkey(thread, "cp"),
                 tkey(thread, "writes"), tkey(thread, "wseq")};
    if (exact) {
        read.push_back("exact");
        read.push_back(join({ns, *exact}));
        read.push_back("");
        read.push_back("");
    } else {
        read.push_back("range");
        read.push_back(o.before ? "(" + join({ns, o.before.str()}) : "(" + ns + '\x01');
        read.push_back("[" + ns + '\0');
        read.push_back(o.limit && !o.source && !o.step ? std::to_string(*o.limit) : std::string());
    }
    read.push_back(glob_literal(join({ns, ""})) + "*");
    return read;
}

asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::impl::load(std::string thread, std::string ns, list_options o,
                                                                       std::optional<std::string> exact) {
    if (o.limit && *o.limit == 0) co_return std::vector<checkpoint_tuple>{};
    auto read = read_command(thread, ns, o, exact);
    auto r = co_await one(std::move(read), thread);
    auto loading = load_from(std::move(thread), std::move(ns), std::move(o), std::move(r));
    co_return co_await std::move(loading);
}

/// The checkpoints the read script answered `r` with, their values read (one more round trip,
/// two when appended values link to versions not read yet).
asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::impl::load_from(std::string thread, std::string ns,
                                                                            list_options o, reply r) {
    std::vector<checkpoint_tuple> out;
    if (!r.is_array() || r.elements.size() != 4) failed(thread, "unexpected answer of the read script");
    const auto& fields = r.elements[0].elements;
    const auto& entries = r.elements[1].elements;
    std::vector<checkpoint> cps;
    for (std::size_t i = 0; i < fields.size() && i < entries.size(); ++i) {
        auto bytes = text_of(entries[i]);
        if (!bytes) continue;
        const std::string id = fields[i].str.substr(ns.size() + 1);
        auto cp = read_entry(thread, ns, id, *bytes);
        if (o.source && cp.source != o.source.view()) continue;
        if (o.step && cp.step != *o.step) continue;
        if (o.limit && cps.size() >= *o.limit) break;
        cps.push_back(std::move(cp));
    }
    if (cps.empty()) co_return out;
    auto writes = writes_of(thread, ns, r.elements[2], r.elements[3]);
    value_map got;
    auto wanted = versions_of(cps);
    co_await fetch_values(thread, ns, std::move(wanted), got);
    out.reserve(cps.size());
    for (auto& cp : cps) {
        assemble(thread, cp, got);
        checkpoint_tuple t{thread, ns, std::move(cp), {}};
        if (auto w = writes.find(t.cp.id); w != writes.end()) t.writes = std::move(w->second);
        out.push_back(std::move(t));
    }
    co_return out;
}

/// `load`, read again once when it finds a value or record missing or unreadable: a prune or
/// delete_thread of another client may have run between its round trips. A second failure is
/// real damage.
asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::impl::load_consistent(std::string thread, std::string ns, list_options o,
                                                                                  std::optional<std::string> exact) {
    for (int attempt = 0;; ++attempt) {
        try {
            co_return co_await load(thread, ns, o, exact);
        } catch (const checkpoint_error& e) {
            if (e.kind() != errc::corrupt_checkpoint || attempt > 0) throw;
        }
    }
}

asio::awaitable<std::optional<checkpoint_tuple>> redis_saver::impl::get_op(std::string thread, std::string ns,
                                                                           std::optional<std::string> id) {
    list_options o;
    o.limit = 1;
    auto got = co_await load_consistent(thread, ns, o, id);
    if (got.empty()) co_return std::nullopt;
    co_return std::move(got.front());
}

asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::impl::list_op(std::string thread, std::string ns,
                                                                          list_options o) {
    std::optional<std::string> any;
    co_return co_await load_consistent(thread, ns, o, any);
}

asio::awaitable<void> redis_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    return put_many(thread_id, ns, std::span<const checkpoint>(&cp, 1)); // a batch of one
}

asio::awaitable<void> redis_saver::put_many(const std::string& thread_id, const std::string& ns,
                                            std::span<const checkpoint> cps) {
    if (cps.empty()) co_return;
    auto ops = impl_->plan_puts(thread_id, ns, cps);
    auto op = impl_->write_op(thread_id, std::move(ops));
    co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                              std::vector<pending_write> writes) {
    if (writes.empty()) co_return;
    auto ops = impl_->plan_writes(thread_id, ns, checkpoint_id, writes);
    auto op = impl_->write_op(thread_id, std::move(ops));
    co_await impl_->call(op);
}

asio::awaitable<std::optional<checkpoint_tuple>> redis_saver::get(std::string thread_id, std::string ns,
                                                                  std::optional<std::string> checkpoint_id) {
    auto op = impl_->get_op(std::move(thread_id), std::move(ns), std::move(checkpoint_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::list(std::string thread_id, std::string ns,
                                                                 list_options options) {
    auto op = impl_->list_op(std::move(thread_id), std::move(ns), std::move(options));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::end_call(const std::string& thread_id, const std::string& ns, call_end& end) {
    auto op = impl_->end_call_op(thread_id, ns, end);
    co_await impl_->call(op);
}

asio::awaitable<std::optional<checkpoint_tuple>>
redis_saver::acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) {
    auto fast = impl_->start_call(thread_id, ns, checkpoint_id);
    auto start = co_await impl_->call(fast);
    if (start.settled) co_return std::move(start.got);
    auto slow = saver::acquire_and_get(thread_id, ns, checkpoint_id); // acquire, then get
    co_return co_await std::move(slow);
}

} // namespace stategraph::checkpoint
