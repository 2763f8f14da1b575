/// @file sqlite_checkpoints.cpp
/// @brief A SQLite saver's checkpoints: put (a record, its small values inline in its row, the rest
/// in `blobs`, a graph's shape once in `graphs`), put_writes, get and list, and reading rows and
/// values back (sealed or encrypted records, inline values, values stored as appended items).

#include "sqlite_saver_impl.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdint>

namespace stategraph::checkpoint {

namespace {

constexpr std::string_view sql_put_checkpoint =
    "INSERT INTO checkpoints(thread_id, ns, id, parent_id, step, source, record, vals, pending) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) ON CONFLICT(thread_id, ns, id) DO NOTHING";
constexpr std::string_view sql_replace_checkpoint =
    "UPDATE checkpoints SET parent_id = ?4, step = ?5, source = ?6, record = ?7, vals = ?8 "
    "WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_get_inline = "SELECT vals FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_put_write =
    "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, (SELECT coalesce(max(seq), -1) + 1 FROM writes "
    "WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3)) "
    "ON CONFLICT(thread_id, ns, checkpoint_id, task_id, channel) DO UPDATE SET "
    "task_name = excluded.task_name, value = excluded.value";
constexpr std::string_view sql_get_writes = "SELECT task_id, task_name, channel, value FROM writes "
                                            "WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3 ORDER BY seq";
constexpr std::string_view sql_has_writes =
    "SELECT EXISTS(SELECT 1 FROM writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3)";

constexpr unsigned char inline_writes_format = 1;

void put_length(std::string& out, std::size_t n) {
    do {
        auto b = static_cast<unsigned char>(n & 0x7f);
        n >>= 7;
        out.push_back(static_cast<char>(n ? b | 0x80 : b));
    } while (n);
}

} // namespace

using namespace sqlite_detail;

std::string sqlite_detail::encode_inline_writes(const std::vector<inline_write>& writes) {
    std::string out(1, static_cast<char>(inline_writes_format));
    for (const auto& w : writes)
        for (std::string_view field : {w.task_id, w.task_name, w.channel, w.value}) {
            put_length(out, field.size());
            out.append(field);
        }
    return out;
}

std::vector<inline_write> sqlite_detail::decode_inline_writes(std::string_view bytes) {
    if (bytes.empty() || static_cast<unsigned char>(bytes[0]) != inline_writes_format)
        throw codec::corrupt("pending writes in an unknown format");
    std::size_t at = 1;
    auto field = [&]() -> std::string_view {
        std::size_t n = 0;
        for (int shift = 0;; shift += 7) {
            if (at >= bytes.size() || shift > 28) throw codec::corrupt("pending writes cut short");
            const auto b = static_cast<unsigned char>(bytes[at++]);
            n |= static_cast<std::size_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) break;
        }
        if (n > bytes.size() - at) throw codec::corrupt("pending writes cut short");
        const auto f = bytes.substr(at, n);
        at += n;
        return f;
    };
    std::vector<inline_write> out;
    while (at < bytes.size()) {
        inline_write w;
        w.task_id = field();
        w.task_name = field();
        w.channel = field();
        w.value = field();
        out.push_back(w);
    }
    return out;
}

std::string sqlite_saver::impl::seal_record(std::string_view record, const std::string& thread, const std::string& ns,
                                            const checkpoint& cp) const {
    const std::string step = std::to_string(cp.step);
    return protect(record, {thread, ns, cp.id, cp.parent_id, step, cp.source});
}

std::string_view sqlite_saver::impl::unseal_record(std::string_view stored, const std::string& thread,
                                                   const std::string& ns, const checkpoint& cp,
                                                   std::string& buffer) const {
    const std::string step = std::to_string(cp.step);
    try {
        return reveal(stored, {thread, ns, cp.id, cp.parent_id, step, cp.source}, buffer);
    } catch (const codec::corrupt&) {
        return reveal(stored, {thread, ns, cp.id}, buffer);
    }
}

checkpoint sqlite_saver::impl::read_row(const stmt& s, const std::string& thread, const std::string& ns,
                                        std::optional<std::string>* pending) const {
    checkpoint cp;
    if (pending && !s.is_null(5)) pending->emplace(s.bytes(5));
    cp.id = s.text(0);
    cp.parent_id = s.text(1);
    cp.step = s.integer(2);
    cp.source = s.text(3);
    try {
        std::string plain;
        const auto record = unseal_record(s.bytes(4), thread, ns, cp, plain);
        codec::decode_record(record, cp);
        if (capture) {
            capture->record.assign(record);
            capture->id = cp.id;
            capture->parent_id = cp.parent_id;
            capture->step = cp.step;
            capture->source = cp.source;
        }
    } catch (const std::exception& e) { // codec::corrupt, or allocation failure on garbage
        corrupt(thread, ns, "checkpoint " + cp.id + ": its record cannot be read: " + e.what(), {thread});
    }
    return cp;
}

const std::optional<std::string>& sqlite_saver::impl::inline_row(const std::string& thread, const std::string& ns,
                                                                 const std::string& id) {
    auto [it, fresh] = inline_rows.try_emplace({ns, id});
    if (fresh) {
        stmt s(*this, sql_get_inline, thread, "reading a channel value");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, id);
        if (s.step() && !s.is_null(0)) it->second.emplace(s.bytes(0));
    }
    return it->second;
}

std::vector<std::pair<std::string_view, std::string_view>> sqlite_saver::impl::decode_inline_of(
    const std::string& thread, const std::string& ns, const std::string& id, std::string_view bytes) const {
    try {
        return codec::decode_inline(bytes);
    } catch (const codec::corrupt& e) {
        corrupt(thread, ns, "checkpoint " + id + ": its values cannot be read: " + e.what(), {thread});
    }
}

boost::json::value sqlite_saver::impl::read_value(const std::string& thread, const std::string& ns,
                                                  const std::string& id, const std::string& channel,
                                                  const std::string& version) {
    const auto where = [&] { return "checkpoint " + id + ": channel " + quote(channel) + " (version " + version + ")"; };
    try {
        std::optional<boost::json::value> whole;
        const bool found = with_stored(thread, ns, channel, version, [&](std::string_view bytes) {
            if (codec::split_value(bytes, version).extends) return;
            whole = parse(bytes, thread, ns, where(), {thread, channel});
            if (capture && channel != sqlite_detail::graph_channel) // a shape is read from `graphs` again
                capture->values[channel].assign(1, {version, std::string(bytes)});
        });
        if (!found)
            corrupt(thread, ns,
                    "checkpoint " + id + " needs channel " + quote(channel) + " at version " + version +
                        ", which is not stored",
                    {thread, channel});
        if (whole) return std::move(*whole);
        auto fetch = [&](const std::string& v) -> std::optional<std::string> {
            std::optional<std::string> out;
            with_stored(thread, ns, channel, v, [&](std::string_view bytes) { out.emplace(bytes); });
            return out;
        };
        auto value = codec::resolve_value(version, fetch);
        if (capture) // appended items: kept as one whole value
            capture->values[channel].assign(1, {version, codec::encode_value(value, nullptr, version)});
        return value;
    } catch (const codec::corrupt& e) {
        corrupt(thread, ns, where() + " cannot be read: " + e.what(), {thread, channel});
    }
}

void sqlite_saver::impl::assemble(checkpoint_tuple& t, value_memo* memo, const std::optional<std::string>& pending) {
    const auto& thread = t.thread_id;
    const auto& ns = t.ns;
    const auto& id = t.cp.id;
    std::vector<const std::pair<const std::string, std::string>*> fresh;
    for (const auto& entry : t.cp.versions) {
        const auto& [channel, version] = entry;
        if (version.empty()) continue;
        if (memo) {
            if (auto it = memo->find({channel, version}); it != memo->end()) {
                t.cp.values[channel] = *it->second;
                continue;
            }
            fresh.push_back(&entry);
        }
        t.cp.values[channel] = read_value(thread, ns, id, channel, version);
    }
    // Only now: inserting into `values` may move the values inserted before.
    for (const auto* e : fresh)
        memo->emplace(std::pair<std::string_view, std::string_view>(e->first, e->second),
                      &t.cp.values.at(e->first));
    // A write as stored (sealed to its address), opened and parsed into `pw`.
    auto open_write = [&](pending_write& pw, std::string_view stored) {
        const std::string what = common::write_label(id, pw);
        std::string_view text;
        std::string plain;
        try {
            text = reveal(stored, {thread, ns, id, pw.task_id, pw.task_name, pw.channel}, plain);
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, what + " cannot be read: " + e.what(), {thread, pw.channel, pw.task_name});
        }
        pw.value = parse(text, thread, ns, what, {thread, pw.channel, pw.task_name});
    };
    std::size_t inline_count = 0;
    if (pending) {
        std::vector<inline_write> stored;
        try {
            stored = decode_inline_writes(*pending);
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, "checkpoint " + id + ": its pending writes cannot be read: " + e.what(), {thread});
        }
        for (const auto& w : stored) {
            pending_write pw;
            pw.task_id = w.task_id;
            pw.task_name = w.task_name;
            pw.channel = w.channel;
            // Written by schema version 9 or later: always sealed or encrypted (an unmarked value
            // is read unchecked only in rows older than the checksums).
            if (!codec::is_sealed(w.value) && !codec::is_encrypted(w.value))
                corrupt(thread, ns, common::write_label(id, pw) + " cannot be read: it carries no checksum",
                        {thread, pw.channel, pw.task_name});
            open_write(pw, w.value);
            t.writes.push_back(std::move(pw));
        }
        inline_count = t.writes.size();
    }
    stmt w(*this, sql_get_writes, thread, "reading pending writes");
    w.bind_static(1, thread).bind_static(2, ns).bind_static(3, id);
    while (w.step()) {
        pending_write pw;
        pw.task_id = w.text(0);
        pw.task_name = w.text(1);
        pw.channel = w.text(2);
        open_write(pw, w.bytes(3));
        // A later write of a task to a channel written inline replaces it where it was.
        const auto first = t.writes.begin(), last = first + static_cast<std::ptrdiff_t>(inline_count);
        auto same = std::find_if(first, last, [&](const pending_write& x) { return x.task_id == pw.task_id && x.channel == pw.channel; });
        if (same != last) *same = std::move(pw);
        else t.writes.push_back(std::move(pw));
    }
}

sqlite_saver::impl::prepared_put sqlite_saver::impl::prepare_put(const std::string& thread, const std::string& ns,
                                                                 const checkpoint& cp) const {
    prepared_put p;
    p.plain_record = codec::encode_record(cp);
    p.record = seal_record(p.plain_record, thread, ns, cp);
    p.values.reserve(cp.values.size());
    for (const auto& [channel, value] : cp.values) {
        const std::string name(channel); // the maps' comparator is not transparent
        auto v = cp.versions.find(name);
        const std::string& version = v == cp.versions.end() ? cp.id : v->second;
        auto x = cp.extends.find(name);
        const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
        // A `__graph__` value versioned by this checkpoint's own id (an engine that keeps the shape per
        // thread) or holding appended items stays with the thread's blobs.
        const bool shared = codec::shared_shape(name, extends, version, cp.id);
        // Stored once per graph, already there (a thread's remembered state reads it from there too).
        if (shared && graph_known(version)) continue;
        std::string plain = codec::encode_value(value, extends, version);
        std::string bytes = protect(plain, {channel, version});
        p.values.push_back({channel, &version, std::move(plain), std::move(bytes), shared, false});
    }
    // This checkpoint's own small values go into its row, the rest into `blobs`.
    std::vector<std::pair<std::string_view, std::string_view>> in_row;
    std::size_t budget = opt.inline_bytes;
    for (auto& v : p.values)
        if (!v.shared && *v.version == cp.id && v.bytes.size() <= budget) {
            v.in_row = true;
            in_row.emplace_back(v.channel, v.bytes);
            budget -= v.bytes.size();
        }
    if (!in_row.empty()) p.vals = codec::encode_inline(in_row);
    return p;
}

std::string sqlite_saver::impl::prepare_inline_writes(const std::string& thread, const std::string& ns,
                                                      const std::string& id,
                                                      const std::vector<pending_write>& pending) const {
    // Within `inline_bytes` of their own (as the values), else they go to `writes`.
    if (pending.empty() || opt.inline_bytes == 0) return {};
    std::vector<std::string> sealed;
    sealed.reserve(pending.size());
    std::vector<inline_write> ws;
    for (const auto& w : pending) {
        sealed.push_back(protect(boost::json::serialize(w.value), {thread, ns, id, w.task_id, w.task_name, w.channel}));
        inline_write iw{w.task_id, w.task_name, w.channel, sealed.back()};
        auto same = std::find_if(ws.begin(), ws.end(),
                                 [&](const inline_write& x) { return x.task_id == iw.task_id && x.channel == iw.channel; });
        if (same != ws.end()) *same = iw;
        else ws.push_back(iw);
    }
    std::string bytes = encode_inline_writes(ws);
    if (bytes.size() > opt.inline_bytes) bytes.clear();
    return bytes;
}

sqlite_saver::impl::prepared_call sqlite_saver::impl::prepare_many(const std::string& thread, const std::string& ns,
                                                                   std::span<const checkpoint> cps) const {
    prepared_call c;
    c.puts.reserve(cps.size());
    for (const auto& cp : cps) c.puts.push_back(prepare_put(thread, ns, cp));
    return c;
}

sqlite_saver::impl::prepared_call sqlite_saver::impl::prepare_end(const std::string& thread, const std::string& ns,
                                                                  const saver::call_end& end) const {
    prepared_call c = prepare_many(thread, ns, end.checkpoints);
    const bool home = std::any_of(end.checkpoints.begin(), end.checkpoints.end(),
                                  [&](const checkpoint& cp) { return cp.id == end.writes_to; });
    if (home) c.inline_writes = prepare_inline_writes(thread, ns, end.writes_to, end.writes);
    return c;
}

bool sqlite_saver::impl::put(const std::string& thread, const std::string& ns, const checkpoint& cp,
                             const std::vector<pending_write>* pending) {
    auto p = prepare_put(thread, ns, cp);
    return write_put(thread, ns, cp, p, pending ? prepare_inline_writes(thread, ns, cp.id, *pending) : std::string());
}

bool sqlite_saver::impl::write_put(const std::string& thread, const std::string& ns, const checkpoint& cp,
                                   prepared_put& p, std::string pending_bytes) {
    // Everything was encoded before the write lock was taken: the transaction only binds and steps.
    const bool noting = noting_paused(thread, ns); // the unsealed bytes then go to the thread's entry
    inline_rows.clear();

    transaction t(*this, true, thread, "saving a checkpoint");
    check_lease_once(thread, now_ms());
    if (!pending_bytes.empty()) {
        // Rows of `writes` stored for this id before its row (a saver user's order; the engine
        // stores a checkpoint before its writes): the call's writes then follow them there.
        stmt h(*this, sql_has_writes, thread, "saving a checkpoint");
        h.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id);
        if (h.step() && h.integer(0) != 0) pending_bytes.clear();
    }
    {
        // Every buffer bound here outlives `s` (declared above it or owned by the caller).
        stmt s(*this, sql_put_checkpoint, thread, "saving a checkpoint");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
        s.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, p.record);
        if (p.vals.empty()) s.bind_null(8);
        else s.bind_blob_static(8, p.vals);
        if (pending_bytes.empty()) s.bind_null(9);
        else s.bind_blob_static(9, pending_bytes);
        s.run();
    }
    const bool fresh = sqlite3_changes(db.get()) != 0;
    const bool stored_inline = fresh && !pending_bytes.empty();
    if (!fresh) {
        // The id is stored already (rare: a saver user re-putting a checkpoint). It is replaced;
        // the values stored with it before stay unless written again.
        std::string old;
        if (const auto& row = inline_row(thread, ns, cp.id)) old = *row;
        inline_rows.clear();
        std::vector<std::pair<std::string_view, std::string_view>> in_row;
        for (const auto& v : p.values)
            if (v.in_row) in_row.emplace_back(v.channel, v.bytes);
        std::string merged_vals;
        try {
            // A value written again to `blobs` this time leaves no stale copy in the row.
            merged_vals = codec::merge_inline(old, in_row, [&](std::string_view c) {
                return std::any_of(p.values.begin(), p.values.end(),
                                   [&](const prepared_put::value& v) { return !v.in_row && v.channel == c; });
            });
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, "checkpoint " + cp.id + ": its values cannot be read: " + e.what(), {thread});
        }
        stmt s(*this, sql_replace_checkpoint, thread, "saving a checkpoint");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
        s.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, p.record);
        if (merged_vals.empty()) s.bind_null(8);
        else s.bind_blob_static(8, merged_vals);
        s.run();
    }
    for (const auto& v : p.values) {
        if (v.in_row) continue;
        if (v.shared) {
            stmt s(*this, sql_put_graph, thread, "saving the graph's shape");
            s.bind_static(1, *v.version).bind_blob_static(2, v.bytes);
            s.run();
            continue;
        }
        stmt s(*this, sql_put_blob, thread, "saving a channel value");
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, v.channel).bind_static(4, *v.version);
        s.bind_blob_static(5, v.bytes);
        s.run();
    }
    if (noting) {
        paused_write noted;
        for (auto& v : p.values) noted.values.emplace_back(v.channel, std::move(v.plain));
        noted.thread = &thread;
        noted.cp = &cp;
        noted.record = std::move(p.plain_record);
        note_paused(std::move(noted));
    }
    t.commit();
    for (const auto& v : p.values)
        if (v.shared) graph_stored(t, *v.version);
    return stored_inline;
}

void sqlite_saver::impl::put_many(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps,
                                  prepared_call* prepared) {
    transaction t(*this, true, thread, "saving checkpoints");
    std::optional<one_lease_check> fenced;
    if (!cps.empty()) fenced.emplace(*this, thread); // once for the whole batch
    const auto graphs_before = batch_graphs.size();
    for (std::size_t k = 0; k < cps.size(); ++k) { // each one's transaction nested in `t`
        if (prepared) write_put(thread, ns, cps[k], prepared->puts[k], std::string());
        else put(thread, ns, cps[k]);
    }
    t.commit();
    if (!t.nested()) { // alone: the shapes its puts stored are known once `t` committed
        graphs_known(batch_graphs.begin() + static_cast<std::ptrdiff_t>(graphs_before), batch_graphs.end());
        batch_graphs.resize(graphs_before);
    }
}

void sqlite_saver::impl::note_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                     const std::vector<pending_write>& writes) {
    if (!noting_paused(thread, ns)) return;
    paused_write noted;
    noted.thread = &thread;
    noted.writes_to = &checkpoint_id;
    noted.writes = &writes;
    note_paused(std::move(noted));
}

void sqlite_saver::impl::put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                    const std::vector<pending_write>& writes) {
    transaction t(*this, true, thread, "saving pending writes");
    check_lease_once(thread, now_ms());
    for (const auto& w : writes) {
        const std::string text = protect(boost::json::serialize(w.value),
                                         {thread, ns, checkpoint_id, w.task_id, w.task_name, w.channel});
        stmt s(*this, sql_put_write, thread, "saving a pending write"); // declared after `text`: unbinds first
        s.bind_static(1, thread).bind_static(2, ns).bind_static(3, checkpoint_id).bind_static(4, w.task_id);
        s.bind_static(5, w.task_name).bind_static(6, w.channel).bind_blob_static(7, text);
        s.run();
    }
    note_writes(thread, ns, checkpoint_id, writes);
    t.commit();
}

void sqlite_saver::impl::end_call(const std::string& thread, const std::string& ns, const saver::call_end& end,
                                  prepared_call* prepared) {
    // A call that pauses leaves its state remembered for the resume (sqlite_paused.cpp); one that
    // does not is over with the thread, and its writes are not noted.
    const bool pauses = std::any_of(end.writes.begin(), end.writes.end(),
                                    [](const pending_write& w) { return w.channel == reserved::interrupt; });
    if (!pauses) forget(thread);
    transaction t(*this, true, thread, "saving the call's last writes");
    std::optional<one_lease_check> fenced;
    if (!end.checkpoints.empty() || !end.writes.empty()) fenced.emplace(*this, thread); // once for them all
    const auto graphs_before = batch_graphs.size();
    // The writes go inside the row of their checkpoint when this call writes it (an interrupt or
    // a failure in the call's last step, the usual case): one b-tree changed instead of two.
    bool written = end.writes.empty();
    for (std::size_t k = 0; k < end.checkpoints.size(); ++k) { // each one's transaction nested in `t`
        const auto& cp = end.checkpoints[k];
        const bool home = !written && cp.id == end.writes_to;
        const bool in_row = prepared ? write_put(thread, ns, cp, prepared->puts[k], home ? prepared->inline_writes : std::string())
                                     : put(thread, ns, cp, home ? &end.writes : nullptr);
        if (in_row && home) written = true;
    }
    if (!written) put_writes(thread, ns, end.writes_to, end.writes);
    else if (!end.writes.empty()) note_writes(thread, ns, end.writes_to, end.writes);
    if (pauses && !t.nested() && noting_paused(thread, ns)) {
        // Known current at this data version: the call's lease kept every other writer out.
        paused_write noted;
        noted.thread = &thread;
        noted.call_end = true;
        noted.data_version = data_version();
        note_paused(std::move(noted));
    }
    if (end.release) delete_lease(thread); // after the writes: they are fenced by the lease
    t.commit();
    if (!t.nested()) {
        graphs_known(batch_graphs.begin() + static_cast<std::ptrdiff_t>(graphs_before), batch_graphs.end());
        batch_graphs.resize(graphs_before);
    }
}

std::optional<checkpoint_tuple> sqlite_saver::impl::get(const std::string& thread, const std::string& ns,
                                                        const std::optional<std::string>& checkpoint_id) {
    transaction t(*this, false, thread, "reading a checkpoint");
    inline_rows.clear();
    std::optional<checkpoint_tuple> result;
    std::optional<std::string> pending;
    {
        stmt s(*this, checkpoint_id ? sql_get_by_id : sql_get_latest, thread, "reading a checkpoint");
        s.bind_static(1, thread).bind_static(2, ns);
        if (checkpoint_id) s.bind_static(3, *checkpoint_id);
        if (s.step()) result.emplace(checkpoint_tuple{thread, ns, read_row(s, thread, ns, &pending), {}});
    }
    if (!result) return std::nullopt;
    assemble(*result, nullptr, pending);
    t.commit();
    return result;
}

std::vector<checkpoint_tuple> sqlite_saver::impl::list(const std::string& thread, const std::string& ns,
                                                       const list_options& o) {
    transaction t(*this, false, thread, "listing checkpoints");
    inline_rows.clear();
    std::vector<checkpoint> rows;
    std::vector<std::optional<std::string>> pendings;
    {
        stmt s(*this, sql_list, thread, "listing checkpoints");
        s.bind(1, thread).bind(2, ns);
        if (o.before) s.bind(3, o.before.view());
        else s.bind_null(3);
        if (o.source) s.bind(4, o.source.view());
        else s.bind_null(4);
        if (o.step) s.bind(5, *o.step);
        else s.bind_null(5);
        s.bind(6, o.limit ? static_cast<std::int64_t>(std::min<std::size_t>(*o.limit, INT64_MAX))
                          : std::int64_t{-1});
        while (s.step()) {
            pendings.emplace_back();
            rows.push_back(read_row(s, thread, ns, &pendings.back()));
        }
    }
    std::vector<checkpoint_tuple> out;
    out.reserve(rows.size()); // never reallocated below: `memo` points into it
    value_memo memo;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        out.push_back(checkpoint_tuple{thread, ns, std::move(rows[i]), {}});
        assemble(out.back(), &memo, pendings[i]);
    }
    t.commit();
    return out;
}

} // namespace stategraph::checkpoint
