// The PostgreSQL saver's thread maintenance: delete_thread, prune, stats, holds_thread,
// rewind_thread, copy_thread, list_threads and sweep.
#include "postgres_saver_impl.hpp"

#include <climits>

namespace stategraph::checkpoint {

namespace {

#define STATEGRAPH_PG_CP "id, parent_id, step, source, record"
constexpr std::string_view sql_kept = "SELECT " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                      "WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC LIMIT $3::bigint";
constexpr std::string_view sql_heads = "SELECT thread_id, " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                       "WHERE ns = '' AND (thread_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))";
#undef STATEGRAPH_PG_CP
constexpr std::string_view sql_delete_writes = "DELETE FROM stategraph_writes WHERE thread_id = $1";
constexpr std::string_view sql_delete_blobs = "DELETE FROM stategraph_blobs WHERE thread_id = $1";
constexpr std::string_view sql_delete_checkpoints = "DELETE FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_delete_expired_lease =
    "DELETE FROM stategraph_leases WHERE thread_id = $1 AND owner <> $2 AND expires_at <= stategraph_now_ms()";
// rewind_thread: everything of a thread newer than one of its checkpoints (every namespace).
constexpr std::string_view sql_rewind_target =
    "SELECT EXISTS(SELECT 1 FROM stategraph_checkpoints WHERE thread_id = $1 AND id = $2)::int";
constexpr std::string_view sql_rewind_writes = "DELETE FROM stategraph_writes WHERE thread_id = $1 AND checkpoint_id > $2";
// Values kept apart under a version that a checkpoint going made (its own id, same namespace).
constexpr std::string_view sql_rewind_blobs =
    "DELETE FROM stategraph_blobs b WHERE b.thread_id = $1 AND b.version > $2 AND EXISTS(SELECT 1 FROM "
    "stategraph_checkpoints c WHERE c.thread_id = b.thread_id AND c.ns = b.ns AND c.id = b.version)";
constexpr std::string_view sql_rewind_checkpoints =
    "WITH gone AS (DELETE FROM stategraph_checkpoints WHERE thread_id = $1 AND id > $2 RETURNING 1) "
    "SELECT count(*) FROM gone";
constexpr std::string_view sql_thread_namespaces =
    "SELECT ns FROM stategraph_checkpoints WHERE thread_id = $1 UNION SELECT ns FROM stategraph_blobs WHERE thread_id = $1";
constexpr std::string_view sql_prune_writes =
    "DELETE FROM stategraph_writes WHERE thread_id = $1 AND ns = $2 AND checkpoint_id IN (SELECT id FROM "
    "stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC OFFSET $3::bigint)";
constexpr std::string_view sql_prune_checkpoints =
    "DELETE FROM stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 AND id IN (SELECT id FROM "
    "stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC OFFSET $3::bigint)";
constexpr std::string_view sql_prune_blobs =
    "DELETE FROM stategraph_blobs WHERE thread_id = $1 AND ns = $2 AND (channel, version) NOT IN "
    "(SELECT * FROM unnest($3::text[], $4::text[]))";
constexpr std::string_view sql_clear_parent =
    "UPDATE stategraph_checkpoints SET parent_id = '', record = $4 WHERE thread_id = $1 AND ns = $2 AND id = $3";
constexpr std::string_view sql_stats_checkpoints =
    "SELECT count(*)::bigint, coalesce(sum(length(record)), 0)::bigint FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_stats_blobs =
    "SELECT count(*)::bigint, coalesce(sum(length(value)), 0)::bigint FROM stategraph_blobs WHERE thread_id = $1";
constexpr std::string_view sql_stats_row_values =
    "SELECT vals FROM stategraph_checkpoints WHERE thread_id = $1 AND vals IS NOT NULL";
// prune: values a kept checkpoint needs that were inside the row of one going.
constexpr std::string_view sql_keep_row_values =
    "INSERT INTO stategraph_blobs(thread_id, ns, channel, version, value) "
    "SELECT $1, $2, c, v, b FROM unnest($3::text[], $4::text[], $5::bytea[]) AS t(c, v, b) "
    "ON CONFLICT (thread_id, ns, channel, version) DO NOTHING";
constexpr std::string_view sql_stats_writes =
    "SELECT count(*)::bigint, coalesce(sum(length(value)), 0)::bigint FROM stategraph_writes WHERE thread_id = $1";
constexpr std::string_view sql_lock_lease =
    "SELECT owner, expires_at, (expires_at > stategraph_now_ms())::int FROM stategraph_leases WHERE thread_id = $1 "
    "FOR UPDATE";
// Thread maintenance.
constexpr std::string_view sql_thread_exists =
    "SELECT (EXISTS(SELECT 1 FROM stategraph_checkpoints WHERE thread_id = $1) OR EXISTS(SELECT 1 FROM "
    "stategraph_writes WHERE thread_id = $1) OR EXISTS(SELECT 1 FROM stategraph_blobs WHERE thread_id = $1))::int";
constexpr std::string_view sql_copy_source_checkpoints =
    "SELECT ns, id, parent_id, step, source, record, vals FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_thread_checkpoint_ids =
    "SELECT ns, id FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_copy_source_writes =
    "SELECT ns, checkpoint_id, task_id, task_name, channel, value, seq FROM stategraph_writes WHERE thread_id = $1";
constexpr std::string_view sql_copy_checkpoint =
    "INSERT INTO stategraph_checkpoints(thread_id, ns, id, parent_id, step, source, record, vals) "
    "VALUES($1, $2, $3, $4, $5::bigint, $6, $7, $8)";
constexpr std::string_view sql_copy_blobs =
    "INSERT INTO stategraph_blobs(thread_id, ns, channel, version, value) "
    "SELECT $2, ns, channel, version, value FROM stategraph_blobs WHERE thread_id = $1";
constexpr std::string_view sql_copy_write =
    "INSERT INTO stategraph_writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES($1, $2, $3, $4, $5, $6, $7, $8::bigint)";
constexpr std::string_view sql_list_threads =
    "SELECT thread_id, max(id), count(*)::bigint, max(id) FILTER (WHERE ns = '') FROM stategraph_checkpoints "
    "GROUP BY thread_id ORDER BY 2 DESC, 1 LIMIT $1::bigint OFFSET $2::bigint";
constexpr std::string_view sql_expired_threads =
    "SELECT thread_id FROM stategraph_checkpoints GROUP BY thread_id HAVING max(id) < $1";
constexpr std::string_view sql_thread_newest =
    "SELECT max(id), count(*)::bigint FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_count_checkpoints =
    "SELECT count(*)::bigint FROM stategraph_checkpoints WHERE thread_id = $1";

} // namespace

/// The statements deleting a thread's rows and an expired lease of another owner.
void postgres_saver::impl::delete_rows(std::vector<pg::statement>& batch, const std::string& thread) const {
    for (auto sql : {sql_delete_writes, sql_delete_blobs, sql_delete_checkpoints}) {
        batch.emplace_back(sql);
        batch.back().text(thread);
    }
    batch.emplace_back(sql_delete_expired_lease);
    batch.back().text(thread).text(owner);
}

asio::awaitable<void> postgres_saver::impl::delete_thread(const std::string& thread) {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    batch.emplace_back(sql_fence);
    delete_rows(batch, thread);
    batch.emplace_back(sql_commit);
    call c{thread, "deleting the thread", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        batch[1] = fence(cc);
        (void)co_await conn.run(batch, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

/// `prune` inside the caller's transaction (its lease checked): per namespace, the newest
/// `keep_last` checkpoints stay with the values they need (appended chains included).
asio::awaitable<void> postgres_saver::impl::prune_thread(pg::connection& conn, const std::string& thread,
                                                         std::size_t keep_last) {
    if (keep_last == 0) keep_last = 1;
    const auto keep = static_cast<std::int64_t>(std::min<std::size_t>(keep_last, INT64_MAX));
    std::vector<pg::statement> first;
    first.emplace_back(sql_thread_namespaces);
    first.back().text(thread);
    auto res = co_await conn.run(first, query_timeout());
    std::vector<std::string> namespaces;
    for (int i = 0; i < res[0].rows(); ++i) namespaces.push_back(res[0].text(i, 0));
    for (const auto& ns : namespaces) {
        std::vector<pg::statement> read;
        read.emplace_back(sql_kept);
        read.back().text(thread).text(ns).integer(keep);
        auto kept_rows = co_await conn.run(read, query_timeout());
        std::vector<checkpoint> kept;
        for (int i = 0; i < kept_rows[0].rows(); ++i) kept.push_back(read_row(kept_rows[0], i, 0, thread, ns));
        std::set<std::pair<std::string, std::string>> wanted;
        for (const auto& cp : kept)
            for (const auto& [channel, version] : cp.versions)
                if (!version.empty()) wanted.insert({channel, version});
        value_map values;
        std::set<std::pair<std::string, std::string>> from_rows;
        co_await fetch_values(conn, thread, ns, wanted, values, nullptr, nullptr, &from_rows);
        const auto needed = common::values_kept(
            kept,
            [&](const std::string& channel, const std::string& version) -> std::optional<std::string> {
                auto f = values.find({channel, version});
                if (f == values.end()) return std::nullopt;
                return f->second;
            },
            [&](const std::string& detail, const std::string& channel) { corrupt(thread, ns, detail, {thread, channel}); });
        std::vector<std::string> channels, versions;
        for (const auto& [channel, version] : needed) {
            channels.push_back(channel);
            versions.push_back(version);
        }
        // A needed value inside the row of a checkpoint going moves to stategraph_blobs first.
        std::set<std::string> kept_ids;
        for (const auto& cp : kept) kept_ids.insert(cp.id);
        std::vector<std::string> moved_channels, moved_versions, moved;
        for (const auto& key : needed)
            if (from_rows.count(key) && !kept_ids.count(key.second)) {
                moved_channels.push_back(key.first);
                moved_versions.push_back(key.second);
                moved.push_back(codec::seal(values.at(key), {key.first, key.second}));
            }
        std::vector<pg::statement> batch;
        if (!moved.empty()) {
            batch.emplace_back(sql_keep_row_values);
            batch.back().text(thread).text(ns).bytes(array_of(binary_array::text_oid, moved_channels))
                .bytes(array_of(binary_array::text_oid, moved_versions));
            batch.back().bytes(array_of(binary_array::bytea_oid, moved));
        }
        for (auto sql : {sql_prune_writes, sql_prune_checkpoints}) {
            batch.emplace_back(sql);
            batch.back().text(thread).text(ns).integer(keep);
        }
        batch.emplace_back(sql_prune_blobs);
        batch.back().text(thread).text(ns).text(text_array(channels)).text(text_array(versions));
        // The oldest checkpoint kept loses its parent: its record is sealed again without it.
        if (!kept.empty() && !kept.back().parent_id.empty()) {
            auto oldest = kept.back();
            oldest.parent_id.clear();
            batch.emplace_back(sql_clear_parent);
            batch.back().text(thread).text(ns).text(oldest.id).bytes(
                seal_record(codec::encode_record(oldest), thread, ns, oldest));
        }
        (void)co_await conn.run(batch, query_timeout());
    }
}

asio::awaitable<void> postgres_saver::impl::prune(const std::string& thread, std::size_t keep_last) {
    call c{thread, "pruning the thread", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        std::vector<pg::statement> begin;
        begin.emplace_back(sql_begin);
        begin.push_back(fence(cc));
        (void)co_await conn.run(begin, query_timeout());
        co_await prune_thread(conn, thread, keep_last);
        co_await finish(conn, sql_commit, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

asio::awaitable<thread_stats> postgres_saver::impl::stats(const std::string& thread) {
    call c{thread, "reading storage statistics", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<thread_stats> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin_snapshot);
        for (auto sql : {sql_stats_checkpoints, sql_stats_blobs, sql_stats_writes, sql_stats_row_values}) {
            batch.emplace_back(sql);
            batch.back().text(thread);
        }
        batch.emplace_back(sql_commit);
        auto res = co_await conn.run(batch, query_timeout());
        thread_stats st;
        st.checkpoints = static_cast<std::size_t>(res[1].integer(0, 0));
        st.record_bytes = static_cast<std::size_t>(res[1].integer(0, 1));
        // Every value is sealed: its checksum counts with the records, not the values.
        st.blobs = static_cast<std::size_t>(res[2].integer(0, 0));
        st.writes = static_cast<std::size_t>(res[3].integer(0, 0));
        const auto seals = (st.blobs + st.writes) * codec::seal_overhead;
        st.bytes = static_cast<std::size_t>(res[2].integer(0, 1) + res[3].integer(0, 1)) - seals;
        st.record_bytes += seals;
        // Values inside checkpoint rows count as values.
        for (int i = 0; i < res[4].rows(); ++i) common::count_row_values(st, res[4].bytes(i, 0), thread, where());
        co_return st;
    };
    co_return co_await with_retry<thread_stats>(c, body);
}

asio::awaitable<bool> postgres_saver::impl::holds_thread(const std::string& thread) {
    call c{thread, "checking whether the thread is stored", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_thread_exists);
        batch.back().text(thread);
        auto res = co_await conn.run(batch, query_timeout());
        co_return res[0].integer(0, 0) != 0;
    };
    co_return co_await with_retry<bool>(c, body);
}

/// `rewind_thread`: the target checked and everything newer deleted in one transaction under
/// the thread's fence. A retry after a lost answer finds the target still there and nothing
/// newer: it removes nothing more, as the first try did everything.
asio::awaitable<std::size_t> postgres_saver::impl::rewind_thread(const std::string& thread,
                                                                 const std::string& checkpoint_id) {
    call c{thread, "rewinding the thread", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<std::size_t> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.push_back(fence(cc));
        batch.emplace_back(sql_rewind_target);
        batch.back().text(thread).text(checkpoint_id);
        auto res = co_await conn.run(batch, query_timeout());
        if (res[2].integer(0, 0) == 0) {
            co_await finish(conn, sql_rollback, query_timeout());
            throw common::rewind_target_missing(thread, checkpoint_id, where());
        }
        std::vector<pg::statement> out;
        for (auto sql : {sql_rewind_writes, sql_rewind_blobs, sql_rewind_checkpoints}) {
            out.emplace_back(sql);
            out.back().text(thread).text(checkpoint_id);
        }
        out.emplace_back(sql_commit);
        auto done = co_await conn.run(out, query_timeout());
        co_return static_cast<std::size_t>(done[2].integer(0, 0));
    };
    co_return co_await with_retry<std::size_t>(c, body);
}

asio::awaitable<void> postgres_saver::impl::copy_thread(const std::string& from, const std::string& to) {
    call c{to, "copying the thread", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.push_back(fence(cc));
        batch.emplace_back(sql_thread_exists);
        batch.back().text(to);
        batch.emplace_back(sql_copy_source_checkpoints);
        batch.back().text(from);
        batch.emplace_back(sql_copy_source_writes);
        batch.back().text(from);
        auto res = co_await conn.run(batch, query_timeout());
        const bool exists = res[2].integer(0, 0) != 0;
        const bool missing = res[3].rows() == 0;
        if (exists && !missing && cc.attempt > 0) {
            // A retry after a dropped connection: the first try may have committed the copy
            // before its answer was lost. The target holding exactly the source's checkpoints
            // is that copy: done.
            std::vector<pg::statement> ids;
            ids.emplace_back(sql_thread_checkpoint_ids);
            ids.back().text(to);
            auto got = co_await conn.run(ids, query_timeout());
            std::set<std::pair<std::string, std::string>> source, target;
            for (int i = 0; i < res[3].rows(); ++i) source.insert({res[3].text(i, 0), res[3].text(i, 1)});
            for (int i = 0; i < got[0].rows(); ++i) target.insert({got[0].text(i, 0), got[0].text(i, 1)});
            if (source == target) {
                co_await finish(conn, sql_commit, query_timeout());
                co_return true;
            }
        }
        if (exists || missing) {
            co_await finish(conn, sql_rollback, query_timeout());
            if (exists) throw common::copy_target_exists(from, to, where());
            throw common::copy_source_missing(from, to, where());
        }
        // Records and pending writes are sealed to their thread: each is opened and sealed
        // again under the new id. Values are sealed to (channel, version) and copy as they are.
        std::vector<pg::statement> out;
        const auto& cps = res[3];
        for (int i = 0; i < cps.rows(); ++i) {
            const std::string ns = cps.text(i, 0);
            checkpoint cols;
            cols.id = cps.text(i, 1);
            cols.parent_id = cps.text(i, 2);
            cols.step = cps.integer(i, 3);
            cols.source = cps.text(i, 4);
            std::string record;
            try {
                const std::string step = std::to_string(cols.step);
                record = seal_record(
                    codec::unseal(cps.bytes(i, 5), {from, ns, cols.id, cols.parent_id, step, cols.source}), to, ns, cols);
            } catch (const codec::corrupt& e) {
                corrupt(from, ns, "checkpoint " + cols.id + ": its record cannot be read: " + e.what(), {from});
            }
            out.emplace_back(sql_copy_checkpoint);
            out.back().text(to).text(ns).text(cols.id).text(cols.parent_id).integer(cols.step).text(cols.source);
            out.back().bytes(std::move(record));
            // Values inside the row are sealed to (channel, version): they copy as they are.
            if (cps.is_null(i, 6)) out.back().null();
            else out.back().bytes(std::string(cps.bytes(i, 6)));
        }
        out.emplace_back(sql_copy_blobs);
        out.back().text(from).text(to);
        const auto& ws = res[4];
        for (int i = 0; i < ws.rows(); ++i) {
            const std::string ns = ws.text(i, 0), id = ws.text(i, 1), task = ws.text(i, 2), name = ws.text(i, 3),
                              channel = ws.text(i, 4);
            std::string value;
            try {
                value = codec::seal(codec::unseal(ws.bytes(i, 5), {from, ns, id, task, name, channel}),
                                    {to, ns, id, task, name, channel});
            } catch (const codec::corrupt& e) {
                pending_write w;
                w.task_id = task;
                w.task_name = name;
                w.channel = channel;
                corrupt(from, ns, common::write_label(id, w) + " cannot be read: " + e.what(), {from, channel, name});
            }
            out.emplace_back(sql_copy_write);
            out.back().text(to).text(ns).text(id).text(task).text(name).text(channel).bytes(std::move(value));
            out.back().integer(ws.integer(i, 6));
        }
        out.emplace_back(sql_commit);
        (void)co_await conn.run(out, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

asio::awaitable<std::vector<thread_info>> postgres_saver::impl::list_threads(const thread_query& q,
                                                                             const json::object* match) {
    static const std::string none;
    call c{none, "listing threads", {}};
    const bool filtered = match && !match->empty();
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::vector<thread_info>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin_snapshot);
        batch.emplace_back(sql_list_threads);
        // Without a filter, the server pages; with one, every thread's head is read and matched here.
        const auto clamp = [](std::size_t n) { return static_cast<std::int64_t>(std::min<std::size_t>(n, INT64_MAX)); };
        if (!filtered && q.limit) batch.back().integer(clamp(q.limit));
        else batch.back().null();
        batch.back().integer(filtered ? 0 : clamp(q.offset));
        auto res = co_await conn.run(batch, query_timeout());
        std::vector<thread_info> infos;
        std::vector<std::string> threads, heads;
        const auto& r = res[1];
        for (int i = 0; i < r.rows(); ++i) {
            thread_info info;
            info.thread_id = r.text(i, 0);
            info.newest_id = r.text(i, 1);
            info.checkpoints = static_cast<std::size_t>(r.integer(i, 2));
            if (!r.is_null(i, 3)) {
                threads.push_back(info.thread_id);
                heads.push_back(r.text(i, 3));
            }
            infos.push_back(std::move(info));
        }
        std::vector<pg::statement> more;
        more.emplace_back(sql_heads);
        more.back().text(text_array(threads)).text(text_array(heads));
        more.emplace_back(sql_commit);
        auto head_rows = co_await conn.run(more, query_timeout());
        std::map<std::string, checkpoint> head_of;
        static const std::string root;
        for (int i = 0; i < head_rows[0].rows(); ++i) {
            auto thread = head_rows[0].text(i, 0);
            auto cp = read_row(head_rows[0], i, 1, thread, root);
            head_of.emplace(std::move(thread), std::move(cp));
        }
        for (auto& info : infos)
            if (auto it = head_of.find(info.thread_id); it != head_of.end()) {
                info.checkpoint_id = it->second.id;
                info.created_at = checkpoint_time(info.checkpoint_id);
                info.metadata = std::move(it->second.metadata);
            }
        co_return common::page_threads(std::move(infos), q, match);
    };
    co_return co_await with_retry<std::vector<thread_info>>(c, body);
}

asio::awaitable<sweep_result> postgres_saver::impl::sweep(ttl_policy policy) {
    const std::string cutoff =
        checkpoint_id_at(std::chrono::system_clock::now() - std::max(policy.older_than, std::chrono::milliseconds(0)));
    static const std::string none;
    call scan{none, "sweeping threads", {}};
    auto find = [&](pg::connection& conn, call&) -> asio::awaitable<std::vector<std::string>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_expired_threads);
        batch.back().text(cutoff);
        auto res = co_await conn.run(batch, query_timeout());
        std::vector<std::string> out;
        for (int i = 0; i < res[0].rows(); ++i) out.push_back(res[0].text(i, 0));
        co_return out;
    };
    const auto expired = co_await with_retry<std::vector<std::string>>(scan, find);
    sweep_result result;
    for (const auto& thread : expired) {
        // Each thread in a transaction of its own, its age and lease checked again inside it.
        call c{thread, "sweeping threads", {}};
        auto one = [&](pg::connection& conn, call&) -> asio::awaitable<sweep_result> {
            sweep_result r;
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_begin);
            batch.emplace_back(sql_lock_lease);
            batch.back().text(thread);
            batch.emplace_back(sql_thread_newest);
            batch.back().text(thread);
            auto res = co_await conn.run(batch, query_timeout());
            if (res[2].rows() == 0 || res[2].is_null(0, 0) || !(res[2].text(0, 0) < cutoff)) {
                co_await finish(conn, sql_commit, query_timeout());
                co_return r;
            }
            const auto before = static_cast<std::size_t>(res[2].integer(0, 1));
            ++r.expired;
            bool busy = false;
            {
                std::lock_guard lock(mutex);
                busy = held.count(thread) && !lost.count(thread);
            }
            if (!busy && res[1].rows() > 0) {
                const auto holder = res[1].text(0, 0);
                busy = res[1].integer(0, 2) != 0 && (holder == owner || !lease_owner::is_gone(holder));
            }
            if (busy) {
                ++r.skipped_busy;
                co_await finish(conn, sql_commit, query_timeout());
                co_return r;
            }
            if (policy.action == ttl_action::delete_thread) {
                std::vector<pg::statement> del;
                delete_rows(del, thread);
                del.emplace_back(sql_commit);
                (void)co_await conn.run(del, query_timeout());
                ++r.deleted;
                r.checkpoints_removed += before;
                co_return r;
            }
            co_await prune_thread(conn, thread, 1);
            std::vector<pg::statement> count;
            count.emplace_back(sql_count_checkpoints);
            count.back().text(thread);
            count.emplace_back(sql_commit);
            auto after = co_await conn.run(count, query_timeout());
            const auto left = static_cast<std::size_t>(after[0].integer(0, 0));
            const auto removed = before - std::min(before, left);
            r.checkpoints_removed += removed;
            if (removed) ++r.pruned;
            co_return r;
        };
        const auto r = co_await with_retry<sweep_result>(c, one);
        result.expired += r.expired;
        result.deleted += r.deleted;
        result.pruned += r.pruned;
        result.checkpoints_removed += r.checkpoints_removed;
        result.skipped_busy += r.skipped_busy;
    }
    co_return result;
}

// =============================================================================================

asio::awaitable<void> postgres_saver::delete_thread(std::string thread_id) { co_await impl_->delete_thread(thread_id); }

asio::awaitable<void> postgres_saver::prune(std::string thread_id, std::size_t keep_last) {
    co_await impl_->prune(thread_id, keep_last);
}

asio::awaitable<thread_stats> postgres_saver::stats(std::string thread_id) { co_return co_await impl_->stats(thread_id); }

asio::awaitable<bool> postgres_saver::holds_thread(std::string thread_id) {
    co_return co_await impl_->holds_thread(thread_id);
}

asio::awaitable<void> postgres_saver::copy_thread(std::string from, std::string to) {
    co_await impl_->copy_thread(from, to);
}

asio::awaitable<std::size_t> postgres_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    co_return co_await impl_->rewind_thread(thread_id, checkpoint_id);
}

asio::awaitable<std::vector<thread_info>> postgres_saver::list_threads(thread_query query) {
    // The filter is a view: copied before the first suspension.
    std::optional<json::object> match;
    if (query.metadata.get()) match.emplace(*query.metadata.get());
    co_return co_await impl_->list_threads(query, match ? &*match : nullptr);
}

asio::awaitable<sweep_result> postgres_saver::sweep(ttl_policy policy) { co_return co_await impl_->sweep(policy); }

} // namespace stategraph::checkpoint
