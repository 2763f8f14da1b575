/// @file sqlite_threads.cpp
/// @brief A SQLite saver's thread maintenance: delete_thread, rewind_thread, copy_thread,
/// list_threads, sweep (expired threads deleted or pruned), prune and stats.

#include "sqlite_saver_impl.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>

namespace stategraph::checkpoint {

namespace {

constexpr std::string_view sql_doomed_inline =
    "SELECT id, vals FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND vals IS NOT NULL "
    "ORDER BY id DESC LIMIT -1 OFFSET ?3";
constexpr std::string_view sql_stats_inline =
    "SELECT vals FROM checkpoints WHERE thread_id = ?1 AND vals IS NOT NULL";
constexpr std::string_view sql_delete_checkpoints = "DELETE FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_delete_blobs = "DELETE FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_delete_writes = "DELETE FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_delete_expired_lease =
    "DELETE FROM leases WHERE thread_id = ?1 AND owner <> ?2 AND expires_at <= ?3";
constexpr std::string_view sql_thread_namespaces =
    "SELECT ns FROM checkpoints WHERE thread_id = ?1 UNION SELECT ns FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_prune_writes =
    "DELETE FROM writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id IN (SELECT id FROM checkpoints "
    "WHERE thread_id = ?1 AND ns = ?2 ORDER BY id DESC LIMIT -1 OFFSET ?3)";
constexpr std::string_view sql_prune_checkpoints =
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND ns = ?2 AND id IN (SELECT id FROM checkpoints "
    "WHERE thread_id = ?1 AND ns = ?2 ORDER BY id DESC LIMIT -1 OFFSET ?3)";
constexpr std::string_view sql_blob_keys = "SELECT channel, version FROM blobs WHERE thread_id = ?1 AND ns = ?2";
constexpr std::string_view sql_delete_blob =
    "DELETE FROM blobs WHERE thread_id = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4";
constexpr std::string_view sql_clear_parent =
    "UPDATE checkpoints SET parent_id = '', record = ?4 WHERE thread_id = ?1 AND ns = ?2 AND id = ?3";
constexpr std::string_view sql_stats_checkpoints =
    "SELECT count(*), coalesce(sum(length(record)), 0) FROM checkpoints WHERE thread_id = ?1";
// Column 2 counts the sealed values (codec::seal), column 3 the encrypted ones (codec::cipher).
constexpr std::string_view sql_stats_blobs =
    "SELECT count(*), coalesce(sum(length(value)), 0), coalesce(sum(substr(value, 1, 1) = x'C5'), 0), "
    "coalesce(sum(substr(value, 1, 1) = x'E5'), 0) FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_stats_writes =
    "SELECT count(*), coalesce(sum(length(value)), 0), coalesce(sum(substr(value, 1, 1) = x'C5'), 0), "
    "coalesce(sum(substr(value, 1, 1) = x'E5'), 0) FROM writes WHERE thread_id = ?1";
// Thread maintenance.
constexpr std::string_view sql_thread_exists =
    "SELECT EXISTS(SELECT 1 FROM checkpoints WHERE thread_id = ?1) OR EXISTS(SELECT 1 FROM writes WHERE thread_id = ?1) "
    "OR EXISTS(SELECT 1 FROM blobs WHERE thread_id = ?1)";
constexpr std::string_view sql_copy_source_checkpoints =
    "SELECT ns, id, parent_id, step, source, record, vals, pending FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_copy_checkpoint =
    "INSERT INTO checkpoints(thread_id, ns, id, parent_id, step, source, record, vals, pending) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";
// Pending writes inside checkpoint rows (schema version 9), for stats.
constexpr std::string_view sql_stats_inline_writes =
    "SELECT ns, id, pending FROM checkpoints WHERE thread_id = ?1 AND pending IS NOT NULL";
// The writes of a checkpoint kept as rows: one of them replaces an inline write of its task and channel.
constexpr std::string_view sql_stats_row_writes =
    "SELECT task_id, channel FROM writes WHERE thread_id = ?1 AND ns = ?2 AND checkpoint_id = ?3";
// Values are sealed to (channel, version), not to their thread: their rows are copied as they are.
constexpr std::string_view sql_copy_blobs =
    "INSERT INTO blobs(thread_id, ns, channel, version, value) "
    "SELECT ?2, ns, channel, version, value FROM blobs WHERE thread_id = ?1";
constexpr std::string_view sql_copy_source_writes =
    "SELECT ns, checkpoint_id, task_id, task_name, channel, value, seq FROM writes WHERE thread_id = ?1";
constexpr std::string_view sql_copy_write =
    "INSERT INTO writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)";
// rewind_thread: everything of a thread newer than one of its checkpoints (every namespace).
constexpr std::string_view sql_rewind_target = "SELECT EXISTS(SELECT 1 FROM checkpoints WHERE thread_id = ?1 AND id = ?2)";
constexpr std::string_view sql_rewind_writes = "DELETE FROM writes WHERE thread_id = ?1 AND checkpoint_id > ?2";
// Values kept apart under a version that a checkpoint going made (its own id, same namespace).
constexpr std::string_view sql_rewind_blobs =
    "DELETE FROM blobs WHERE thread_id = ?1 AND version > ?2 AND EXISTS(SELECT 1 FROM checkpoints c "
    "WHERE c.thread_id = blobs.thread_id AND c.ns = blobs.ns AND c.id = blobs.version)";
constexpr std::string_view sql_rewind_checkpoints = "DELETE FROM checkpoints WHERE thread_id = ?1 AND id > ?2";
// Threads by their newest checkpoint (any namespace), with their count and the head of the root
// namespace; ids are time-ordered text, so max(id) is the newest.
constexpr std::string_view sql_list_threads =
    "SELECT thread_id, max(id), count(*), "
    "(SELECT max(h.id) FROM checkpoints h WHERE h.thread_id = c.thread_id AND h.ns = '') "
    "FROM checkpoints c GROUP BY thread_id ORDER BY 2 DESC, 1 LIMIT ?1 OFFSET ?2";
constexpr std::string_view sql_expired_threads =
    "SELECT thread_id FROM checkpoints GROUP BY thread_id HAVING max(id) < ?1";
constexpr std::string_view sql_thread_newest = "SELECT max(id), count(*) FROM checkpoints WHERE thread_id = ?1";
constexpr std::string_view sql_count_checkpoints = "SELECT count(*) FROM checkpoints WHERE thread_id = ?1";

} // namespace

using namespace sqlite_detail;

void sqlite_saver::impl::delete_thread(const std::string& thread) {
    transaction t(*this, true, thread, "deleting the thread");
    auto now = now_ms();
    check_lease(thread, now);
    delete_rows(thread, now);
    t.commit();
}

void sqlite_saver::impl::delete_rows(const std::string& thread, std::int64_t now) {
    forget(thread);
    for (auto sql : {sql_delete_writes, sql_delete_blobs, sql_delete_checkpoints}) {
        stmt s(*this, sql, thread, "deleting the thread");
        s.bind(1, thread);
        s.run();
    }
    stmt l(*this, sql_delete_expired_lease, thread, "deleting the thread");
    l.bind(1, thread).bind(2, owner).bind(3, now);
    l.run();
}

std::size_t sqlite_saver::impl::rewind_thread(const std::string& thread, const std::string& checkpoint_id) {
    const char* what = "rewinding the thread";
    transaction t(*this, true, thread, what);
    check_lease(thread, now_ms());
    forget(thread);
    {
        stmt s(*this, sql_rewind_target, thread, what);
        s.bind_static(1, thread).bind_static(2, checkpoint_id);
        if (!s.step() || s.integer(0) == 0) throw common::rewind_target_missing(thread, checkpoint_id, where());
    }
    std::size_t removed = 0;
    for (auto sql : {sql_rewind_writes, sql_rewind_blobs, sql_rewind_checkpoints}) {
        stmt s(*this, sql, thread, what);
        s.bind_static(1, thread).bind_static(2, checkpoint_id);
        s.run();
        if (sql == sql_rewind_checkpoints) removed = static_cast<std::size_t>(sqlite3_changes64(db.get()));
    }
    t.commit();
    return removed;
}

std::string sqlite_saver::impl::reseal_inline_writes(std::string_view stored, const std::string& from, const std::string& to,
                                                     const std::string& ns, const std::string& id) const {
    std::vector<inline_write> ws;
    try {
        ws = decode_inline_writes(stored);
    } catch (const codec::corrupt& e) {
        corrupt(from, ns, "checkpoint " + id + ": its pending writes cannot be read: " + e.what(), {from});
    }
    std::vector<std::string> sealed;
    sealed.reserve(ws.size()); // never reallocated: `ws` points into it
    for (auto& w : ws) {
        pending_write pw;
        pw.task_id = w.task_id;
        pw.task_name = w.task_name;
        pw.channel = w.channel;
        sealed.push_back(reseal_write(w.value, from, to, ns, id, pw));
        w.value = sealed.back();
    }
    return encode_inline_writes(ws);
}

std::string sqlite_saver::impl::reseal_write(std::string_view stored, const std::string& from, const std::string& to,
                                             const std::string& ns, const std::string& id, const pending_write& w) const {
    std::string plain;
    try {
        return protect(reveal(stored, {from, ns, id, w.task_id, w.task_name, w.channel}, plain),
                       {to, ns, id, w.task_id, w.task_name, w.channel});
    } catch (const codec::corrupt& e) {
        corrupt(from, ns, common::write_label(id, w) + " cannot be read: " + e.what(), {from, w.channel, w.task_name});
    }
}

void sqlite_saver::impl::copy_thread(const std::string& from, const std::string& to) {
    const char* what = "copying the thread";
    transaction t(*this, true, to, what);
    check_lease(to, now_ms());
    forget(to);
    {
        stmt s(*this, sql_thread_exists, to, what);
        s.bind_static(1, to);
        if (s.step() && s.integer(0) != 0) throw common::copy_target_exists(from, to, where());
    }
    // Records and pending writes are sealed (or encrypted) to their thread: each is opened and
    // stored again under the new id. Values are bound to (channel, version) only and copy as
    // they are, inside the checkpoint rows and in `blobs`.
    struct row {
        std::string ns, id, parent_id, source, record;
        std::int64_t step;
        std::optional<std::string> vals, pending;
    };
    std::vector<row> rows;
    {
        stmt s(*this, sql_copy_source_checkpoints, from, what);
        s.bind_static(1, from);
        while (s.step()) {
            row r{s.text(0), s.text(1), s.text(2), s.text(4), {}, s.integer(3), std::nullopt};
            std::string plain;
            try {
                checkpoint cols; // the columns a record is sealed with
                cols.id = r.id;
                cols.parent_id = r.parent_id;
                cols.step = r.step;
                cols.source = r.source;
                r.record = seal_record(unseal_record(s.bytes(5), from, r.ns, cols, plain), to, r.ns, cols);
            } catch (const codec::corrupt& e) {
                corrupt(from, r.ns, "checkpoint " + r.id + ": its record cannot be read: " + e.what(), {from});
            }
            if (!s.is_null(6)) r.vals.emplace(s.bytes(6));
            if (!s.is_null(7)) r.pending = reseal_inline_writes(s.bytes(7), from, to, r.ns, r.id);
            rows.push_back(std::move(r));
        }
    }
    if (rows.empty()) throw common::copy_source_missing(from, to, where());
    for (const auto& r : rows) {
        stmt s(*this, sql_copy_checkpoint, to, what);
        s.bind_static(1, to).bind_static(2, r.ns).bind_static(3, r.id).bind_static(4, r.parent_id);
        s.bind(5, r.step).bind_static(6, r.source).bind_blob_static(7, r.record);
        if (r.vals) s.bind_blob_static(8, *r.vals);
        else s.bind_null(8);
        if (r.pending) s.bind_blob_static(9, *r.pending);
        else s.bind_null(9);
        s.run();
    }
    {
        stmt s(*this, sql_copy_blobs, to, what);
        s.bind_static(1, from).bind_static(2, to);
        s.run();
    }
    struct write_row {
        std::string ns, checkpoint_id, task_id, task_name, channel, value;
        std::int64_t seq;
    };
    std::vector<write_row> writes;
    {
        stmt s(*this, sql_copy_source_writes, from, what);
        s.bind_static(1, from);
        while (s.step()) {
            write_row w{s.text(0), s.text(1), s.text(2), s.text(3), s.text(4), {}, s.integer(6)};
            pending_write pw;
            pw.task_id = w.task_id;
            pw.task_name = w.task_name;
            pw.channel = w.channel;
            w.value = reseal_write(s.bytes(5), from, to, w.ns, w.checkpoint_id, pw);
            writes.push_back(std::move(w));
        }
    }
    for (const auto& w : writes) {
        stmt s(*this, sql_copy_write, to, what);
        s.bind_static(1, to).bind_static(2, w.ns).bind_static(3, w.checkpoint_id).bind_static(4, w.task_id);
        s.bind_static(5, w.task_name).bind_static(6, w.channel).bind_blob_static(7, w.value).bind(8, w.seq);
        s.run();
    }
    t.commit();
}

std::vector<thread_info> sqlite_saver::impl::list_threads(const thread_query& q, const boost::json::object* match) {
    static const std::string none;
    const char* what = "listing threads";
    transaction t(*this, false, none, what);
    struct found {
        std::string thread, newest, head;
        std::size_t count;
    };
    std::vector<found> threads;
    const bool filtered = match && !match->empty();
    {
        // Without a filter, SQLite pages; with one, every thread's head is read and matched here.
        stmt s(*this, sql_list_threads, none, what);
        const auto clamp = [](std::size_t n) { return static_cast<std::int64_t>(std::min<std::size_t>(n, INT64_MAX)); };
        s.bind(1, !filtered && q.limit ? clamp(q.limit) : std::int64_t{-1});
        s.bind(2, filtered ? std::int64_t{0} : clamp(q.offset));
        while (s.step())
            threads.push_back({s.text(0), s.text(1), s.is_null(3) ? std::string() : s.text(3),
                               static_cast<std::size_t>(s.integer(2))});
    }
    std::vector<thread_info> infos;
    for (auto& f : threads) {
        thread_info info;
        info.thread_id = std::move(f.thread);
        info.newest_id = std::move(f.newest);
        info.checkpoints = f.count;
        if (!f.head.empty()) {
            static const std::string root;
            stmt s(*this, sql_get_by_id, info.thread_id, what);
            s.bind_static(1, info.thread_id).bind_static(2, root).bind_static(3, f.head);
            if (s.step()) {
                auto cp = read_row(s, info.thread_id, root);
                info.checkpoint_id = std::move(cp.id);
                info.created_at = checkpoint_time(info.checkpoint_id);
                info.metadata = std::move(cp.metadata);
            }
        }
        infos.push_back(std::move(info));
    }
    t.commit();
    return common::page_threads(std::move(infos), q, match);
}

std::size_t sqlite_saver::impl::count_checkpoints(const std::string& thread) {
    stmt s(*this, sql_count_checkpoints, thread, "sweeping threads");
    s.bind(1, thread);
    return s.step() ? static_cast<std::size_t>(s.integer(0)) : 0;
}

std::vector<std::string> sqlite_saver::impl::expired_threads(const std::string& cutoff) {
    static const std::string none;
    const char* what = "sweeping threads";
    std::vector<std::string> expired;
    transaction t(*this, false, none, what);
    stmt s(*this, sql_expired_threads, none, what);
    s.bind_static(1, cutoff);
    while (s.step()) expired.push_back(s.text(0));
    return expired;
}

void sqlite_saver::impl::sweep_thread(const std::string& thread, const std::string& cutoff, ttl_action action,
                                      sweep_result& result) {
    const char* what = "sweeping threads";
    transaction t(*this, true, thread, what);
    forget(thread);
    std::size_t before = 0;
    {
        stmt s(*this, sql_thread_newest, thread, what);
        s.bind(1, thread);
        if (!s.step() || s.is_null(0) || !(s.text(0) < cutoff)) return;
        before = static_cast<std::size_t>(s.integer(1));
    }
    ++result.expired;
    const auto now = now_ms();
    if (leased(thread, now)) {
        ++result.skipped_busy;
        return;
    }
    if (action == ttl_action::delete_thread) {
        delete_rows(thread, now);
        ++result.deleted;
        result.checkpoints_removed += before;
    } else {
        prune_thread(thread, 1);
        const auto removed = before - std::min(before, count_checkpoints(thread));
        result.checkpoints_removed += removed;
        if (removed) ++result.pruned;
    }
    t.commit();
    inline_rows.clear();
}

void sqlite_saver::impl::prune(const std::string& thread, std::size_t keep_last) {
    transaction t(*this, true, thread, "pruning the thread");
    check_lease(thread, now_ms());
    prune_thread(thread, keep_last);
    t.commit();
}

void sqlite_saver::impl::prune_thread(const std::string& thread, std::size_t keep_last) {
    forget(thread);
    if (keep_last == 0) keep_last = 1;
    const auto keep = static_cast<std::int64_t>(std::min<std::size_t>(keep_last, INT64_MAX));
    std::vector<std::string> namespaces;
    {
        stmt s(*this, sql_thread_namespaces, thread, "pruning the thread");
        s.bind(1, thread);
        while (s.step()) namespaces.push_back(s.text(0));
    }
    for (const auto& ns : namespaces) {
        inline_rows.clear();
        // The values the newest `keep` checkpoints need, with every version their appended items
        // extend; a record we cannot read aborts the prune. `graphs` rows are shared: never pruned.
        std::set<std::pair<std::string, std::string>> needed;
        {
            std::vector<checkpoint> kept;
            {
                stmt s(*this, sql_kept_records, thread, "pruning the thread");
                s.bind_static(1, thread).bind_static(2, ns).bind(3, keep);
                while (s.step()) kept.push_back(read_row(s, thread, ns));
            }
            needed = common::values_kept(
                kept,
                [&](const std::string& channel, const std::string& version) {
                    std::optional<std::string> out;
                    with_stored(thread, ns, channel, version, [&](std::string_view bytes) { out.emplace(bytes); });
                    return out;
                },
                [&](const std::string& detail, const std::string& channel) { corrupt(thread, ns, detail, {thread, channel}); });
        }
        // Values stored in the rows about to go that a kept checkpoint still reads move to `blobs`.
        {
            std::vector<std::tuple<std::string, std::string, std::string>> moved; // channel, version, bytes
            {
                stmt s(*this, sql_doomed_inline, thread, "pruning the thread");
                s.bind_static(1, thread).bind_static(2, ns).bind(3, keep);
                while (s.step()) {
                    const std::string id = s.text(0);
                    for (const auto& [channel, bytes] : decode_inline_of(thread, ns, id, s.bytes(1)))
                        if (needed.count({std::string(channel), id})) moved.emplace_back(channel, id, bytes);
                }
            }
            for (const auto& [channel, version, bytes] : moved) {
                stmt s(*this, sql_put_blob, thread, "pruning the thread");
                s.bind_static(1, thread).bind_static(2, ns).bind_static(3, channel).bind_static(4, version);
                s.bind_blob_static(5, bytes);
                s.run();
            }
        }
        for (auto sql : {sql_prune_writes, sql_prune_checkpoints}) {
            stmt s(*this, sql, thread, "pruning the thread");
            s.bind(1, thread).bind(2, ns).bind(3, keep);
            s.run();
        }
        inline_rows.clear();
        std::vector<std::pair<std::string, std::string>> unneeded;
        {
            stmt s(*this, sql_blob_keys, thread, "pruning the thread");
            s.bind(1, thread).bind(2, ns);
            while (s.step()) {
                std::pair<std::string, std::string> k{s.text(0), s.text(1)};
                if (!needed.count(k)) unneeded.push_back(std::move(k));
            }
        }
        for (const auto& [channel, version] : unneeded) {
            stmt s(*this, sql_delete_blob, thread, "pruning the thread");
            s.bind(1, thread).bind(2, ns).bind(3, channel).bind(4, version);
            s.run();
        }
        // The oldest checkpoint kept loses its parent: its record is sealed again without it.
        std::optional<checkpoint> oldest;
        {
            stmt s(*this, sql_oldest_record, thread, "pruning the thread");
            s.bind_static(1, thread).bind_static(2, ns);
            if (s.step()) oldest = read_row(s, thread, ns);
        }
        if (oldest && !oldest->parent_id.empty()) {
            oldest->parent_id.clear();
            const auto record = seal_record(codec::encode_record(*oldest), thread, ns, *oldest);
            stmt s(*this, sql_clear_parent, thread, "pruning the thread");
            s.bind_static(1, thread).bind_static(2, ns).bind_static(3, oldest->id).bind_blob_static(4, record);
            s.run();
        }
    }
}

thread_stats sqlite_saver::impl::stats(const std::string& thread) {
    transaction t(*this, false, thread, "reading storage statistics");
    thread_stats st;
    {
        stmt s(*this, sql_stats_checkpoints, thread, "reading storage statistics");
        s.bind(1, thread);
        if (s.step()) {
            st.checkpoints = static_cast<std::size_t>(s.integer(0));
            st.record_bytes = static_cast<std::size_t>(s.integer(1));
        }
    }
    {
        stmt s(*this, sql_stats_blobs, thread, "reading storage statistics");
        s.bind(1, thread);
        if (s.step()) {
            // A value's checksum (codec::seal) or encryption frames it: it counts with the records.
            const auto seals = static_cast<std::size_t>(s.integer(2)) * codec::seal_overhead +
                               static_cast<std::size_t>(s.integer(3)) * codec::encrypted_overhead;
            st.blobs = static_cast<std::size_t>(s.integer(0));
            st.bytes += static_cast<std::size_t>(s.integer(1)) - seals;
            st.record_bytes += seals;
        }
    }
    {
        stmt s(*this, sql_stats_writes, thread, "reading storage statistics");
        s.bind(1, thread);
        if (s.step()) {
            const auto seals = static_cast<std::size_t>(s.integer(2)) * codec::seal_overhead +
                               static_cast<std::size_t>(s.integer(3)) * codec::encrypted_overhead;
            st.writes = static_cast<std::size_t>(s.integer(0));
            st.bytes += static_cast<std::size_t>(s.integer(1)) - seals;
            st.record_bytes += seals;
        }
    }
    {
        // Pending writes inside checkpoint rows: counted as rows of `writes` are.
        stmt s(*this, sql_stats_inline_writes, thread, "reading storage statistics");
        s.bind(1, thread);
        while (s.step()) {
            const std::string ns = s.text(0), id = s.text(1);
            const auto bytes = s.bytes(2);
            std::vector<inline_write> ws;
            try {
                ws = decode_inline_writes(bytes);
            } catch (const codec::corrupt& e) {
                corrupt(thread, ns, "checkpoint " + id + ": its pending writes cannot be read: " + e.what(), {thread});
            }
            std::set<std::pair<std::string, std::string>> replaced; // by a row of `writes`, counted there
            {
                stmt r(*this, sql_stats_row_writes, thread, "reading storage statistics");
                r.bind_static(1, thread).bind_static(2, ns).bind_static(3, id);
                while (r.step()) replaced.emplace(r.text(0), r.text(1));
            }
            // A write's value as rows count it (its seal or encryption with the records); the
            // bytes that frame the writes (names, lengths) and a replaced write's with the records.
            std::size_t values = 0, seals = 0, counted = 0;
            for (const auto& w : ws) {
                if (replaced.count({std::string(w.task_id), std::string(w.channel)})) continue;
                ++counted;
                values += w.value.size();
                seals += codec::framing_of(w.value);
            }
            st.writes += counted;
            st.bytes += values - seals;
            st.record_bytes += seals + (bytes.size() - values);
        }
    }
    {
        // Values inside checkpoint rows: their bytes count as values, the bytes that frame them
        // (channel names, lengths) as records.
        stmt s(*this, sql_stats_inline, thread, "reading storage statistics");
        s.bind(1, thread);
        while (s.step()) common::count_row_values(st, s.bytes(0), thread, where());
    }
    t.commit();
    return st;
}

} // namespace stategraph::checkpoint
