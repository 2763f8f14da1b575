// The PostgreSQL saver's checkpoints and pending writes: put, put_writes, get and list, with the
// reading of values (appended chains, shared graph shapes) and their assembly into tuples.
#include "postgres_saver_impl.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <climits>
#include <map>

namespace stategraph::checkpoint {

namespace {

// A batch's checkpoint rows in one statement: $3 ids, $4 parents, $5 steps, $6 sources, $7 the
// sealed records, $8 the values inside each row (empty: none; all arrays in binary form:
// nothing to escape or parse); each id once.
// Two forms: a plain INSERT, tried first, and an upsert (ON CONFLICT ... DO UPDATE), which costs
// the server an index probe per row before each insert (about 40% more for the statement).
// A row is only met again when a batch is retried after its commit was lost on the way back, or
// when a caller puts an id twice; the server then refuses the plain form (23505) and undoes the
// whole transaction, and the batch runs again as upserts (`add_puts` with `upsert`): the rows'
// values then all go to stategraph_blobs, read before `vals`, and a row met again keeps its
// `vals` (the values of an earlier put of the id that this one does not write again).
constexpr std::string_view sql_insert_checkpoints =
    "INSERT INTO stategraph_checkpoints(thread_id, ns, id, parent_id, step, source, record, vals) "
    "SELECT $1, $2, i, p, s, src, r, nullif(v, ''::bytea) FROM unnest($3::text[], $4::text[], $5::bigint[], "
    "$6::text[], $7::bytea[], $8::bytea[]) AS t(i, p, s, src, r, v)";
constexpr std::string_view sql_put_checkpoints =
    "INSERT INTO stategraph_checkpoints(thread_id, ns, id, parent_id, step, source, record) "
    "SELECT $1, $2, i, p, s, src, r FROM unnest($3::text[], $4::text[], $5::bigint[], $6::text[], $7::bytea[]) "
    "AS t(i, p, s, src, r) ON CONFLICT (thread_id, ns, id) DO UPDATE SET "
    "parent_id = excluded.parent_id, step = excluded.step, source = excluded.source, record = excluded.record";
// A batch's values in one statement: $3 channels, $4 versions, $5 the stored bytes (arrays in
// binary form); each (channel, version) once. Plain first, as the checkpoints.
#define STATEGRAPH_PG_PUT_BLOBS                                            \
    "INSERT INTO stategraph_blobs(thread_id, ns, channel, version, value) " \
    "SELECT $1, $2, c, v, b FROM unnest($3::text[], $4::text[], $5::bytea[]) AS t(c, v, b)"
constexpr std::string_view sql_insert_blobs = STATEGRAPH_PG_PUT_BLOBS;
constexpr std::string_view sql_put_blobs =
    STATEGRAPH_PG_PUT_BLOBS " ON CONFLICT (thread_id, ns, channel, version) DO UPDATE SET value = excluded.value";
#undef STATEGRAPH_PG_PUT_BLOBS
constexpr std::string_view sql_put_write =
    "INSERT INTO stategraph_writes(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq) "
    "VALUES($1, $2, $3, $4, $5, $6, $7, (SELECT coalesce(max(seq), -1) + 1 FROM stategraph_writes "
    "WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3)) "
    "ON CONFLICT (thread_id, ns, checkpoint_id, task_id, channel) DO UPDATE SET "
    "task_name = excluded.task_name, value = excluded.value";
#define STATEGRAPH_PG_CP "id, parent_id, step, source, record"
constexpr std::string_view sql_get_latest = "SELECT " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                            "WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC LIMIT 1";
constexpr std::string_view sql_get_by_id = "SELECT " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                           "WHERE thread_id = $1 AND ns = $2 AND id = $3";
constexpr std::string_view sql_list = "SELECT " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                      "WHERE thread_id = $1 AND ns = $2 AND ($3::text IS NULL OR id < $3) "
                                      "AND ($4::text IS NULL OR source = $4) AND ($5::bigint IS NULL OR step = $5) "
                                      "ORDER BY id DESC LIMIT $6::bigint";
#undef STATEGRAPH_PG_CP
constexpr std::string_view sql_get_blobs =
    "SELECT channel, version, value FROM stategraph_blobs WHERE thread_id = $1 AND ns = $2 "
    "AND (channel, version) IN (SELECT * FROM unnest($3::text[], $4::text[]))";
// The links of appended-value chains: every version of each channel up to the newest link missing.
constexpr std::string_view sql_get_chains =
    "SELECT b.channel, b.version, b.value FROM stategraph_blobs b JOIN unnest($3::text[], $4::text[]) AS w(channel, upto) "
    "ON b.channel = w.channel AND b.version <= w.upto COLLATE \"C\" WHERE b.thread_id = $1 AND b.ns = $2";
// The values inside the rows of checkpoints whose ids are versions asked for.
constexpr std::string_view sql_get_row_values =
    "SELECT id, vals FROM stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 AND id = ANY($3::text[]) "
    "AND vals IS NOT NULL";
// For each id of $3: the values inside the rows of the newest `$4` checkpoints with values up to it.
constexpr std::string_view sql_get_row_window =
    "SELECT c.id, c.vals FROM unnest($3::text[]) AS w(upto) CROSS JOIN LATERAL (SELECT id, vals FROM "
    "stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 AND id <= w.upto COLLATE \"C\" AND vals IS NOT NULL "
    "ORDER BY id DESC LIMIT $4::bigint) c";
// The window's plan made once, generic: planned anew at every execution (the server's choice
// for it) it cost 58 µs of the server's time, its execution 10. Local to the implicit
// transaction of the batch it rides in (it ends at the batch's end).
constexpr std::string_view sql_generic_plans =
    "SELECT pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true)";
// The newest row as start_call reads it, with the transaction that wrote it (see `paused`).
constexpr std::string_view sql_get_latest_xmin =
    "SELECT id, parent_id, step, source, record, xmin::text FROM stategraph_checkpoints "
    "WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC LIMIT 1";
constexpr std::string_view sql_row_xmin =
    "SELECT xmin::text FROM stategraph_checkpoints WHERE thread_id = $1 AND ns = $2 AND id = $3";
constexpr std::string_view sql_get_graphs = "SELECT version, value FROM stategraph_graphs WHERE version = ANY($1::text[])";
constexpr std::string_view sql_get_writes =
    "SELECT checkpoint_id, task_id, task_name, channel, value FROM stategraph_writes "
    "WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = ANY($3::text[]) ORDER BY checkpoint_id, seq";

/// Runs `batch` (BEGIN ... COMMIT, its puts in plain form unless `upsert` already says the thread
/// met a row twice); when the server refuses a plain insert (a row already there: 23505), which
/// undid the transaction, it runs again as upserts (`upsert_form(batch)` rebuilds it so), and
/// `upsert` stays set for retries.
template <class Rebuild>
asio::awaitable<std::vector<pg::result>> run_puts(pg::connection& conn, std::vector<pg::statement>& batch, bool& upsert,
                                                  std::chrono::milliseconds timeout, Rebuild& upsert_form) {
    bool again = false;
    try {
        co_return co_await conn.run(batch, timeout);
    } catch (const pg::server_error& e) {
        if (upsert || e.sqlstate() != "23505") throw;
        again = true;
    }
    upsert = true;
    upsert_form(batch);
    co_return co_await conn.run(batch, timeout);
}

} // namespace

void postgres_saver::impl::value_fetch::add_round(std::vector<pg::statement>& batch) {
    exact_at = chains_at = graphs_at = rows_at = window_at = -1;
    std::vector<std::string> channels, versions, graphs, chain_channels, chain_versions;
    std::map<std::string, std::string> upto; // channel -> newest version to read with its links
    {
        std::lock_guard lock(self.mutex);
        if (first) // graph shapes read before: not asked again
            for (auto it = wanted.begin(); it != wanted.end();) {
                auto g = it->first == graph_channel ? self.read_graphs.find(it->second) : self.read_graphs.end();
                if (g == self.read_graphs.end()) {
                    ++it;
                    continue;
                }
                asked.insert(*it);
                known_graphs.push_back({*it, g->second});
                it = wanted.erase(it);
            }
        for (const auto& k : wanted) {
            asked.insert(k);
            const bool chain = !first || (k.first != graph_channel && self.chain_hints.count({thread, ns, k.first}));
            if (chain) {
                if (auto& u = upto[k.first]; u < k.second) u = k.second;
                continue;
            }
            channels.push_back(k.first);
            versions.push_back(k.second);
            if (k.first == graph_channel) graphs.push_back(k.second);
        }
    }
    wanted.clear();
    for (const auto& [channel, version] : upto) {
        chain_channels.push_back(channel);
        chain_versions.push_back(version);
    }
    if (!channels.empty()) {
        exact_at = static_cast<int>(batch.size());
        batch.emplace_back(sql_get_blobs);
        batch.back().text(thread).text(ns).text(text_array(channels)).text(text_array(versions));
    }
    if (!chain_channels.empty()) {
        chains_at = static_cast<int>(batch.size());
        batch.emplace_back(sql_get_chains);
        batch.back().text(thread).text(ns).text(text_array(chain_channels)).text(text_array(chain_versions));
    }
    if (!graphs.empty()) {
        graphs_at = static_cast<int>(batch.size());
        batch.emplace_back(sql_get_graphs);
        batch.back().text(text_array(graphs));
    }
    // A value may be inside the row of the checkpoint that wrote it (its id is the version): a
    // value asked for exactly is read from that row; the links of a chain from the rows just
    // before its newest link, `row_window` of them (a chain has 32 links at most).
    std::set<std::string> ids;
    for (std::size_t i = 0; i < channels.size(); ++i)
        if (channels[i] != graph_channel) ids.insert(versions[i]);
    if (!ids.empty()) {
        rows_at = static_cast<int>(batch.size());
        batch.emplace_back(sql_get_row_values);
        batch.back().text(thread).text(ns).text(text_array(std::vector<std::string>(ids.begin(), ids.end())));
    }
    window_upto = std::move(upto);
    window_at = -1;
    if (!window_upto.empty()) { // a window before each chain's newest link (one when they share it)
        std::set<std::string> newest;
        for (const auto& [channel, version] : window_upto) newest.insert(version);
        batch.emplace_back(sql_generic_plans);
        window_at = static_cast<int>(batch.size());
        batch.emplace_back(sql_get_row_window);
        batch.back().text(thread).text(ns).text(text_array(std::vector<std::string>(newest.begin(), newest.end())));
        batch.back().integer(row_window);
    }
}

void postgres_saver::impl::value_fetch::take_round(const std::vector<pg::result>& res) {
    std::vector<std::pair<std::pair<std::string, std::string>, std::string_view>> got;
    if (first)
        for (const auto& [key, bytes] : known_graphs) got.push_back({key, bytes}); // (kept until the end)
    first = false;
    if (graphs_at >= 0) {
        const auto& r = res[static_cast<std::size_t>(graphs_at)];
        std::lock_guard lock(self.mutex);
        for (int i = 0; i < r.rows(); ++i) {
            got.push_back({{std::string(graph_channel), r.text(i, 0)}, r.bytes(i, 1)});
            if (self.read_graphs.size() >= max_read_graphs) self.read_graphs.clear();
            self.read_graphs.emplace(r.text(i, 0), std::string(r.bytes(i, 1))); // checked at each use, as read
        }
    }
    for (const int at : {exact_at, chains_at}) {
        if (at < 0) continue;
        const auto& r = res[static_cast<std::size_t>(at)];
        for (int i = 0; i < r.rows(); ++i) got.push_back({{r.text(i, 0), r.text(i, 1)}, r.bytes(i, 2)});
    }
    const std::size_t from_blobs = got.size();
    // After stategraph_blobs: a value stored in both is read from there. Of a window's rows, the
    // values asked for and those of its chains' channels up to their newest link.
    for (const int at : {rows_at, window_at}) {
        if (at < 0) continue;
        const auto& r = res[static_cast<std::size_t>(at)];
        for (int i = 0; i < r.rows(); ++i) {
            std::string id = r.text(i, 0);
            for (const auto& [channel, bytes] : self.decode_row_values(thread, ns, id, r.bytes(i, 1))) {
                std::pair<std::string, std::string> key{std::string(channel), id};
                bool use = asked.count(key) != 0;
                if (!use && at == window_at)
                    if (auto u = window_upto.find(key.first); u != window_upto.end() && id <= u->second) use = true;
                if (use) got.push_back({std::move(key), bytes});
            }
        }
    }
    std::set<std::string> chains, whole;
    for (std::size_t g = 0; g < got.size(); ++g) {
        auto& [key, stored] = got[g];
        if (values.count(key)) continue; // a graph shape before a thread's own copy; a row of blobs before `vals`
        if (from_rows && g >= from_blobs) from_rows->insert(key);
        const auto& [channel, version] = key;
        std::string payload;
        try {
            payload = std::string(codec::unseal(stored, {channel, version}));
            if (auto ext = codec::split_value(payload, version).extends) {
                chains.insert(channel);
                std::pair<std::string, std::string> link{channel, *ext};
                if (!asked.count(link) && !values.count(link)) wanted.insert(std::move(link));
            } else if (channel != graph_channel && asked.count(key)) {
                whole.insert(channel); // a whole value was asked for: no chain to read
            }
        } catch (const std::exception& e) {
            self.corrupt(thread, ns, "channel " + quote(channel) + " (version " + version + ") cannot be read: " + e.what(),
                         {thread, channel});
        }
        values.emplace(key, std::move(payload));
    }
    for (const auto& c : chains) whole.erase(c);
    self.hint_chains(thread, ns, chains, whole);
    std::erase_if(wanted, [&](const auto& k) { return values.count(k) != 0; }); // came in this round
}

/// Fetches the stored values `wanted` (channel, version) of (thread, ns) into `values`, with
/// every version their appended items extend; `__graph__` values from the shared graphs
/// first. Missing ones are simply absent. The first round trip asks for `wanted` exactly, except
/// a channel this saver met as a chain (`chain_hints`), whose every version up to the one wanted
/// it asks for at once; when appended items still extend versions not read, the next asks, per
/// channel, for every version up to the newest such link, so a chain of any length costs at most
/// one more round trip, not one per link. A graph shape read before is not asked again.
/// `also` (when given) rides in the first round trip; its rows come back in `also_rows`.
asio::awaitable<void> postgres_saver::impl::fetch_values(pg::connection& conn, const std::string& thread,
                                                         const std::string& ns,
                                                         std::set<std::pair<std::string, std::string>> wanted,
                                                         value_map& values, const pg::statement* also,
                                                         pg::result* also_rows,
                                                         std::set<std::pair<std::string, std::string>>* from_rows) {
    value_fetch f{*this, thread, ns, values, std::move(wanted)};
    f.from_rows = from_rows;
    co_await f.finish(conn, also, also_rows);
}

std::vector<std::pair<std::string_view, std::string_view>>
postgres_saver::impl::decode_row_values(const std::string& thread, const std::string& ns, const std::string& id,
                                        std::string_view bytes) const {
    try {
        return codec::decode_inline(bytes);
    } catch (const codec::corrupt& e) {
        corrupt(thread, ns, "checkpoint " + id + ": its values cannot be read: " + e.what(), {thread});
    }
}

asio::awaitable<void> postgres_saver::impl::value_fetch::finish(pg::connection& conn, const pg::statement* also,
                                                                pg::result* also_rows) {
    while (first || !wanted.empty()) {
        std::vector<pg::statement> batch;
        add_round(batch);
        int also_at = -1;
        if (also) {
            also_at = static_cast<int>(batch.size());
            batch.push_back(*also);
            also = nullptr; // the first round only
        }
        std::vector<pg::result> res;
        if (!batch.empty()) res = co_await conn.run(batch, self.query_timeout());
        if (also_at >= 0) *also_rows = std::move(res[static_cast<std::size_t>(also_at)]);
        take_round(res);
    }
}

json::value postgres_saver::impl::parse(std::string_view text, const std::string& thread, const std::string& ns, const std::string& what,
                                        std::vector<std::string> names) const {
    return common::parse_stored(text, thread, ns, what, where(), std::move(names));
}

/// Fills the values and pending writes of `tuples` (all of one thread and namespace).
asio::awaitable<void> postgres_saver::impl::assemble(pg::connection& conn, std::vector<checkpoint_tuple>& tuples,
                                                    value_map* keep) {
    if (tuples.empty()) co_return;
    const std::string& thread = tuples.front().thread_id;
    const std::string& ns = tuples.front().ns;
    std::set<std::pair<std::string, std::string>> wanted;
    std::vector<std::string> ids;
    for (const auto& t : tuples) {
        ids.push_back(t.cp.id);
        for (const auto& [channel, version] : t.cp.versions)
            if (!version.empty()) wanted.insert({channel, version});
    }
    value_map values;
    pg::statement writes(sql_get_writes); // in the values' first round trip
    writes.text(thread).text(ns).text(text_array(ids));
    pg::result w;
    co_await fetch_values(conn, thread, ns, std::move(wanted), values, &writes, &w);
    fill_tuples(tuples, values, w);
    if (keep) *keep = std::move(values);
}

void postgres_saver::impl::fill_tuples(std::vector<checkpoint_tuple>& tuples, const value_map& values, const pg::result& w) {
    const std::string& thread = tuples.front().thread_id;
    const std::string& ns = tuples.front().ns;
    std::map<std::pair<std::string, std::string>, json::value> whole; // resolved once per list
    for (auto& t : tuples) {
        for (const auto& [channel, version] : t.cp.versions) {
            if (version.empty()) continue;
            std::pair<std::string, std::string> key{channel, version};
            auto it = whole.find(key);
            if (it == whole.end()) {
                const auto at = [&] {
                    return "checkpoint " + t.cp.id + ": channel " + quote(channel) + " (version " + version + ")";
                };
                if (!values.count(key))
                    corrupt(thread, ns,
                            "checkpoint " + t.cp.id + " needs channel " + quote(channel) + " at version " + version +
                                ", which is not stored",
                            {thread, channel});
                json::value v;
                try {
                    auto fetch = [&, &ch = channel](const std::string& ver) -> std::optional<std::string> {
                        auto f = values.find({ch, ver});
                        if (f == values.end()) return std::nullopt;
                        return f->second;
                    };
                    const auto& payload = values.at(key);
                    if (!codec::split_value(payload, version).extends) v = parse(payload, thread, ns, at(), {thread, channel});
                    else v = codec::resolve_value(version, fetch);
                } catch (const codec::corrupt& e) {
                    corrupt(thread, ns, at() + " cannot be read: " + e.what(), {thread, channel});
                }
                it = whole.emplace(std::move(key), std::move(v)).first;
            }
            t.cp.values[channel] = it->second;
        }
    }
    std::map<std::string, checkpoint_tuple*> by_id;
    for (auto& t : tuples) by_id[t.cp.id] = &t;
    for (int i = 0; i < w.rows(); ++i) {
        const std::string id = w.text(i, 0);
        pending_write pw;
        pw.task_id = w.text(i, 1);
        pw.task_name = w.text(i, 2);
        pw.channel = w.text(i, 3);
        const std::string what = common::write_label(id, pw);
        std::string_view text;
        try {
            text = codec::unseal(w.bytes(i, 4), {thread, ns, id, pw.task_id, pw.task_name, pw.channel});
        } catch (const codec::corrupt& e) {
            corrupt(thread, ns, what + " cannot be read: " + e.what(), {thread, pw.channel, pw.task_name});
        }
        pw.value = parse(text, thread, ns, what, {thread, pw.channel, pw.task_name});
        if (auto it = by_id.find(id); it != by_id.end()) it->second->writes.push_back(std::move(pw));
    }
}

void postgres_saver::impl::add_puts(std::vector<pg::statement>& batch, std::vector<std::string>& graphs,
                                    const std::string& thread, const std::string& ns, std::span<const checkpoint> cps,
                                    bool upsert, value_map* capture) {
    // Every checkpoint's row in one statement and every value kept apart in one (arrays
    // unnested by the server): a batch of 22 checkpoints is 2 statements to execute, not 44. An
    // id or a (channel, version) met twice keeps its last copy: one statement may not update a
    // row twice. A checkpoint's own small values ride inside its row (`vals`), so the server
    // inserts and indexes one row per step, not one more per value.
    std::vector<std::string> ids, parents, sources, records;
    std::vector<std::int64_t> steps;
    std::map<std::string, std::size_t> row_of;
    std::vector<std::vector<std::pair<std::string, std::string>>> row_values; // per row: (channel, sealed bytes)
    std::vector<std::size_t> row_bytes;
    std::vector<std::string> channels, versions, stored;
    std::map<std::pair<std::string, std::string>, std::size_t> value_of;
    std::set<std::string> chains; // channels written as appended items
    const std::size_t budget = upsert ? 0 : opt.inline_bytes;
    for (const auto& cp : cps) {
        auto record = seal_record(codec::encode_record(cp), thread, ns, cp);
        std::size_t row = 0;
        bool again = false;
        if (auto [it, fresh] = row_of.emplace(cp.id, ids.size()); !fresh) {
            row = it->second;
            again = true;
            parents[row] = cp.parent_id;
            steps[row] = cp.step;
            sources[row] = cp.source;
            records[row] = std::move(record);
        } else {
            row = ids.size();
            ids.push_back(cp.id);
            parents.push_back(cp.parent_id);
            steps.push_back(cp.step);
            sources.push_back(cp.source);
            records.push_back(std::move(record));
            row_values.emplace_back();
            row_bytes.push_back(0);
        }
        for (const auto& [channel, value] : cp.values) {
            const std::string name(channel);
            auto v = cp.versions.find(name);
            const std::string& version = v == cp.versions.end() ? cp.id : v->second;
            auto x = cp.extends.find(name);
            const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
            if (extends) chains.insert(name); // read back with its links at once
            auto payload = codec::encode_value(value, extends, version);
            if (capture) capture->insert_or_assign({name, version}, payload);
            auto bytes = codec::seal(payload, {name, version});
            // A `__graph__` value keyed by the graph signature is one row for all threads.
            if (codec::shared_shape(name, extends, version, cp.id)) {
                {
                    std::lock_guard lock(mutex);
                    if (stored_graphs.count(version)) continue;
                }
                if (std::find(graphs.begin(), graphs.end(), version) != graphs.end()) continue;
                batch.emplace_back(sql_put_graph);
                batch.back().text(version).bytes(std::move(bytes));
                graphs.push_back(version);
                continue;
            }
            // Inside the row: a value of this checkpoint's own version (whole or appended items),
            // within the row's budget, and only the first time the batch meets the id (a copy met
            // again replaces what the first wrote, in stategraph_blobs).
            auto& in_row = row_values[row];
            if (again)
                std::erase_if(in_row, [&](const auto& e) { return e.first == name; });
            const std::size_t cost = name.size() + bytes.size() + 4;
            if (!again && version == cp.id && row_bytes[row] + cost <= budget) {
                row_bytes[row] += cost;
                in_row.emplace_back(name, std::move(bytes));
                continue;
            }
            if (auto [it, fresh] = value_of.emplace(std::pair{name, version}, stored.size()); !fresh) {
                stored[it->second] = std::move(bytes);
                continue;
            }
            channels.push_back(name);
            versions.push_back(version);
            stored.push_back(std::move(bytes));
        }
    }
    hint_chains(thread, ns, chains);
    if (!ids.empty()) {
        using a = binary_array;
        batch.emplace_back(upsert ? sql_put_checkpoints : sql_insert_checkpoints);
        batch.back().text(thread).text(ns).bytes(array_of(a::text_oid, ids)).bytes(array_of(a::text_oid, parents));
        batch.back().bytes(array_of(a::int8_oid, steps)).bytes(array_of(a::text_oid, sources));
        batch.back().bytes(array_of(a::bytea_oid, records));
        if (!upsert) {
            binary_array vals(a::bytea_oid, ids.size());
            for (const auto& in_row : row_values) {
                if (in_row.empty()) {
                    vals.add(std::string_view());
                    continue;
                }
                std::vector<std::pair<std::string_view, std::string_view>> pairs(in_row.begin(), in_row.end());
                vals.add(codec::encode_inline(pairs));
            }
            batch.back().bytes(std::move(vals).take());
        }
    }
    if (!stored.empty()) {
        using a = binary_array;
        batch.emplace_back(upsert ? sql_put_blobs : sql_insert_blobs);
        batch.back().text(thread).text(ns).bytes(array_of(a::text_oid, channels)).bytes(array_of(a::text_oid, versions));
        batch.back().bytes(array_of(a::bytea_oid, stored));
    }
}

asio::awaitable<void> postgres_saver::impl::put(const std::string& thread, const std::string& ns,
                                                const checkpoint& cp) {
    return put_many(thread, ns, std::span<const checkpoint>(&cp, 1)); // a batch of one: no frame of its own
}

asio::awaitable<void> postgres_saver::impl::put_many(const std::string& thread, const std::string& ns,
                                                     std::span<const checkpoint> cps) {
    if (cps.empty()) co_return;
    // Everything is encoded before the round trip: BEGIN, fence, each checkpoint's row and
    // values, COMMIT. One round trip, one transaction, for all of them.
    std::vector<std::string> graphs;
    // During a call this saver runs on the thread, its values go into the call's `running` too.
    bool tracking = false;
    if (ns.empty()) {
        std::lock_guard lock(mutex);
        tracking = running.count(thread) != 0;
    }
    value_map captured;
    // BEGIN, the fence (filled per attempt), the puts, COMMIT.
    auto build = [&](std::vector<pg::statement>& batch, bool upsert) {
        batch.clear();
        graphs.clear();
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_fence);
        add_puts(batch, graphs, thread, ns, cps, upsert, tracking ? &captured : nullptr);
        batch.emplace_back(sql_commit);
    };
    std::vector<pg::statement> batch;
    build(batch, false);
    call c{thread, cps.size() == 1 ? "saving a checkpoint" : "saving checkpoints", {}};
    bool upsert = false;
    auto upsert_form = [&](std::vector<pg::statement>& b) {
        auto fenced = std::move(b[1]);
        build(b, true);
        b[1] = std::move(fenced);
    };
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        batch[1] = fence(cc);
        (void)co_await run_puts(conn, batch, upsert, query_timeout(), upsert_form);
        co_return true;
    };
    try {
        (void)co_await with_retry<bool>(c, body);
    } catch (...) {
        if (tracking) stop_running(thread);
        throw;
    }
    note_written(thread, ns, cps);
    std::lock_guard lock(mutex);
    stored_graphs.insert(graphs.begin(), graphs.end());
    if (auto r = tracking ? running.find(thread) : running.end(); r != running.end()) {
        for (auto& [key, bytes] : captured) r->second.values.insert_or_assign(key, std::move(bytes));
        for (const auto& cp : cps) r->second.newest = std::max(r->second.newest, cp.id);
    }
}

void postgres_saver::impl::note_written(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps) {
    // The newest is the greatest id (as `sql_get_latest` orders them), not always the last put.
    const auto& cp = *std::max_element(cps.begin(), cps.end(), [](const checkpoint& a, const checkpoint& b) { return a.id < b.id; });
    written w{cp.id, {cp.versions.begin(), cp.versions.end()}};
    std::lock_guard lock(mutex);
    if (last_written.size() >= max_last_written) last_written.clear();
    last_written.insert_or_assign({thread, ns}, std::move(w));
}

void postgres_saver::impl::add_writes(std::vector<pg::statement>& batch, const std::string& thread, const std::string& ns,
                                      const std::string& checkpoint_id, const std::vector<pending_write>& writes) {
    for (const auto& w : writes) {
        batch.emplace_back(sql_put_write);
        batch.back().text(thread).text(ns).text(checkpoint_id).text(w.task_id).text(w.task_name).text(w.channel);
        batch.back().bytes(
            codec::seal(json::serialize(w.value), {thread, ns, checkpoint_id, w.task_id, w.task_name, w.channel}));
    }
}

asio::awaitable<void> postgres_saver::impl::end_call(const std::string& thread, const std::string& ns,
                                                     const saver::call_end& end) {
    if (end.checkpoints.empty() && end.writes.empty()) {
        if (end.release) co_await release(thread);
        co_return;
    }
    // BEGIN, fence (filled per attempt), the checkpoints, the writes, the lease's row deleted,
    // COMMIT: one round trip. A release by the lease's holder, on the first attempt, is fenced
    // and released in one statement (`fence_and_release`) in place of the fence and the last
    // DELETE.
    std::vector<std::string> graphs;
    bool release_last = end.release; // the batch's form: the release as its own statement last
    // A call of this saver that ends paused at an interrupt (its values followed in `running`)
    // leaves its state in `paused` for its resume, with the newest row's xmin read before the
    // commit.
    value_map captured;
    std::string newest, xmin;
    if (ns.empty() && end.release &&
        std::any_of(end.writes.begin(), end.writes.end(), [](const pending_write& w) { return w.channel == reserved::interrupt; })) {
        std::lock_guard lock(mutex);
        if (auto r = running.find(thread); r != running.end()) { // the call's newest, put before or now
            newest = r->second.newest;
            for (const auto& cp : end.checkpoints) newest = std::max(newest, cp.id);
        }
    }
    std::size_t xmin_at = 0;
    auto build = [&](std::vector<pg::statement>& batch, bool upsert) {
        batch.clear();
        graphs.clear();
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_fence);
        add_puts(batch, graphs, thread, ns, end.checkpoints, upsert, newest.empty() ? nullptr : &captured);
        add_writes(batch, thread, ns, end.writes_to, end.writes);
        if (release_last) {
            batch.emplace_back(sql_release_lease);
            batch.back().text(thread).text(owner);
        }
        if (!newest.empty()) {
            xmin_at = batch.size();
            batch.emplace_back(sql_row_xmin);
            batch.back().text(thread).text(ns).text(newest);
        }
        batch.emplace_back(sql_commit);
    };
    call c{thread, "saving the call's last writes", {}};
    std::optional<pg::statement> first_fence;
    if (end.release) {
        first_fence = fence_and_release(c);
        release_last = !first_fence;
        c.releasing_held = first_fence.has_value();
    }
    std::vector<pg::statement> batch;
    build(batch, false);
    bool upsert = false;
    auto upsert_form = [&](std::vector<pg::statement>& b) {
        auto fenced = std::move(b[1]);
        build(b, true);
        b[1] = std::move(fenced);
    };
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        if (cc.attempt == 0 && first_fence) {
            batch[1] = std::move(*first_fence);
            first_fence.reset();
        } else {
            if (end.release && !release_last) { // a retry: the fence and the DELETE apart again
                release_last = true;
                auto kept = upsert;
                build(batch, kept);
            }
            batch[1] = fence(cc, end.release && cc.attempt > 0);
        }
        auto res = co_await run_puts(conn, batch, upsert, query_timeout(), upsert_form);
        if (!newest.empty() && res.size() > xmin_at && res[xmin_at].rows() > 0) xmin = res[xmin_at].text(0, 0);
        co_return true;
    };
    try {
        (void)co_await with_retry<bool>(c, body);
    } catch (...) {
        stop_running(thread);
        throw;
    }
    if (!end.checkpoints.empty()) note_written(thread, ns, end.checkpoints);
    std::lock_guard lock(mutex);
    stored_graphs.insert(graphs.begin(), graphs.end());
    if (ns.empty() && end.release) { // the call is over: its state kept only when it paused
        if (auto r = running.find(thread); r != running.end()) {
            if (!newest.empty() && !xmin.empty()) {
                auto& values = r->second.values;
                for (auto& [key, bytes] : captured) values.insert_or_assign(key, std::move(bytes));
                std::size_t size = 0;
                for (const auto& [key, bytes] : values) size += bytes.size();
                if (size <= max_paused_bytes) {
                    if (paused.size() >= max_paused) paused.clear();
                    paused.insert_or_assign(thread, paused_thread{newest, std::move(xmin), std::move(values)});
                }
            }
            running.erase(r);
        }
    }
    if (end.release) { // given back: no longer renewed or fenced by this saver
        held.erase(thread);
        lost.erase(thread);
    }
}

asio::awaitable<void> postgres_saver::impl::put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                                       const std::vector<pending_write>& writes) {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    batch.emplace_back(sql_fence);
    add_writes(batch, thread, ns, checkpoint_id, writes);
    batch.emplace_back(sql_commit);
    call c{thread, "saving pending writes", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        batch[1] = fence(cc);
        (void)co_await conn.run(batch, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

asio::awaitable<std::optional<checkpoint_tuple>> postgres_saver::impl::get(const std::string& thread, const std::string& ns,
                                                                           const std::optional<std::string>& id) {
    call c{thread, "reading a checkpoint", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<checkpoint_tuple>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin_snapshot);
        batch.emplace_back(id ? sql_get_by_id : sql_get_latest);
        batch.back().text(thread).text(ns);
        if (id) batch.back().text(*id);
        auto res = co_await conn.run(batch, query_timeout());
        std::vector<checkpoint_tuple> tuples;
        if (res[1].rows() > 0) tuples.push_back(checkpoint_tuple{thread, ns, read_row(res[1], 0, 0, thread, ns), {}});
        co_await assemble(conn, tuples);
        co_await finish(conn, sql_commit, query_timeout());
        if (tuples.empty()) co_return std::nullopt;
        co_return std::move(tuples.front());
    };
    co_return co_await with_retry<std::optional<checkpoint_tuple>>(c, body);
}

asio::awaitable<common::call_start>
postgres_saver::impl::start_call(const std::string& thread, const std::string& ns, const std::optional<std::string>& id) {
    // One round trip: the lease, then the row (each statement its own transaction). With the
    // lease held nobody else writes the thread, so its values are read after it without a
    // snapshot around both; should a value be missing (a prune or delete by hand in between), the
    // call is not settled and the thread is read again as `get` does, in one snapshot.
    // When this saver stored the thread's newest checkpoint itself (`last_written`), the guess
    // that it is still the latest asks for its values and writes in the same round trip; the
    // guess is used only when the row read is that checkpoint.
    enum class outcome { taken, read_again, not_free };
    std::vector<checkpoint_tuple> tuples;
    // A thread this saver's last call left paused (`paused`): the row with its xmin and the
    // pending writes, and when the row is still the one that call stored, the values from memory.
    std::optional<written> guess;
    std::optional<paused_thread> recall;
    {
        std::lock_guard lock(mutex);
        if (ns.empty()) running.erase(thread); // a call's values, from its start
        if (!id && ns.empty())
            if (auto p = paused.find(thread); p != paused.end()) {
                recall = std::move(p->second);
                paused.erase(p);
            }
        if (!id && !recall)
            if (auto it = last_written.find({thread, ns}); it != last_written.end()) guess = it->second;
    }
    value_map values; // the stored bytes of the values read (`running`, for the call's pause)
    bool complete = false; // `values` holds every value of the state read
    call c{thread, "taking the thread's lease and reading it", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<outcome> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_take_lease);
        batch.back().text(thread).text(owner).integer(lease_ms()).null();
        batch.emplace_back(id ? sql_get_by_id : recall ? sql_get_latest_xmin : sql_get_latest);
        batch.back().text(thread).text(ns);
        if (id) batch.back().text(*id);
        if (recall) {
            batch.emplace_back(sql_get_writes);
            const std::vector<std::string> ids{recall->id};
            batch.back().text(thread).text(ns).text(text_array(ids));
        }
        values.clear();
        complete = false;
        std::set<std::pair<std::string, std::string>> guessed;
        if (guess)
            for (const auto& [channel, version] : guess->versions)
                if (!version.empty()) guessed.emplace(channel, version);
        value_fetch f{*this, thread, ns, values, std::move(guessed)};
        std::size_t writes_at = 0;
        if (guess) {
            f.add_round(batch);
            writes_at = batch.size();
            batch.emplace_back(sql_get_writes);
            const std::vector<std::string> ids{guess->id};
            batch.back().text(thread).text(ns).text(text_array(ids));
        }
        auto res = co_await conn.run(batch, query_timeout());
        if (res[0].rows() == 0) co_return outcome::not_free;
        tuples.clear();
        try {
            if (res[1].rows() > 0) tuples.push_back(checkpoint_tuple{thread, ns, read_row(res[1], 0, 0, thread, ns), {}});
            if (recall && !tuples.empty() && tuples.front().cp.id == recall->id && res[1].text(0, 5) == recall->xmin) {
                // Still the row the paused call stored: its values from memory (taken once; a
                // retry reads the thread), a value it lacks (a graph's shape) read as `get` does.
                values = std::move(recall->values);
                recall.reset();
                for (const auto& [channel, version] : tuples.front().cp.versions)
                    if (!version.empty() && !values.count({channel, version})) f.wanted.emplace(channel, version);
                co_await f.finish(conn, nullptr, nullptr);
                fill_tuples(tuples, values, res[2]);
                std::lock_guard lock(mutex);
                ++paused_recalled;
            } else if (recall) {
                recall.reset();
                co_await assemble(conn, tuples, &values);
            } else if (guess && !tuples.empty() && tuples.front().cp.id == guess->id) {
                f.take_round(res);
                for (const auto& [channel, version] : tuples.front().cp.versions) // the row's own, should they differ
                    if (!version.empty() && !values.count({channel, version}) && !f.asked.count({channel, version}))
                        f.wanted.emplace(channel, version);
                co_await f.finish(conn, nullptr, nullptr);
                fill_tuples(tuples, values, res[writes_at]);
            } else {
                co_await assemble(conn, tuples, &values);
            }
        } catch (const checkpoint_error& e) {
            if (e.kind() != errc::corrupt_checkpoint) throw;
            co_return outcome::read_again;
        }
        complete = true;
        co_return outcome::taken;
    };
    const auto got = co_await with_retry<outcome>(c, body);
    common::call_start out;
    if (got == outcome::not_free) co_return out;
    {
        std::lock_guard lock(mutex);
        held.insert(thread);
        lost.erase(thread);
    }
    start_keeper();
    out.settled = got == outcome::taken;
    if (out.settled && complete && ns.empty()) { // followed through the call, for its pause
        std::lock_guard lock(mutex);
        if (running.size() >= max_running) running.clear();
        // The call's newest row so far: the one it starts from (a resume that pauses again in
        // the same step stores no new one).
        running.insert_or_assign(thread, running_call{std::move(values), tuples.empty() ? std::string() : tuples.front().cp.id});
    }
    if (out.settled && !tuples.empty()) out.got = std::move(tuples.front());
    co_return out;
}

asio::awaitable<std::vector<checkpoint_tuple>> postgres_saver::impl::list(const std::string& thread, const std::string& ns,
                                                                          const list_options& o) {
    call c{thread, "listing checkpoints", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::vector<checkpoint_tuple>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin_snapshot);
        batch.emplace_back(sql_list);
        auto& s = batch.back();
        s.text(thread).text(ns);
        if (o.before) s.text(o.before.str());
        else s.null();
        if (o.source) s.text(o.source.str());
        else s.null();
        if (o.step) s.integer(*o.step);
        else s.null();
        if (o.limit) s.integer(static_cast<std::int64_t>(std::min<std::size_t>(*o.limit, INT64_MAX)));
        else s.null();
        auto res = co_await conn.run(batch, query_timeout());
        std::vector<checkpoint_tuple> tuples;
        for (int i = 0; i < res[1].rows(); ++i)
            tuples.push_back(checkpoint_tuple{thread, ns, read_row(res[1], i, 0, thread, ns), {}});
        co_await assemble(conn, tuples);
        co_await finish(conn, sql_commit, query_timeout());
        co_return tuples;
    };
    co_return co_await with_retry<std::vector<checkpoint_tuple>>(c, body);
}

// =============================================================================================

asio::awaitable<void> postgres_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    return impl_->put(thread_id, ns, cp);
}

asio::awaitable<void> postgres_saver::put_many(const std::string& thread_id, const std::string& ns,
                                               std::span<const checkpoint> cps) {
    return impl_->put_many(thread_id, ns, cps);
}

asio::awaitable<void> postgres_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                 std::vector<pending_write> writes) {
    co_await impl_->put_writes(thread_id, ns, checkpoint_id, writes);
}

asio::awaitable<void> postgres_saver::end_call(const std::string& thread_id, const std::string& ns, call_end& end) {
    return impl_->end_call(thread_id, ns, end);
}

asio::awaitable<std::optional<checkpoint_tuple>>
postgres_saver::acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) {
    auto fast = impl_->start_call(thread_id, ns, checkpoint_id);
    auto start = co_await std::move(fast);
    if (start.settled) co_return std::move(start.got);
    // Held by this saver (renewed), a gone process (taken over) or another (thread_busy); or
    // to be read again: the default takes it from there.
    auto slow = saver::acquire_and_get(thread_id, ns, checkpoint_id);
    co_return co_await std::move(slow);
}

asio::awaitable<std::optional<checkpoint_tuple>> postgres_saver::get(std::string thread_id, std::string ns,
                                                                     std::optional<std::string> checkpoint_id) {
    co_return co_await impl_->get(thread_id, ns, checkpoint_id);
}

asio::awaitable<std::vector<checkpoint_tuple>> postgres_saver::list(std::string thread_id, std::string ns,
                                                                    list_options options) {
    co_return co_await impl_->list(thread_id, ns, options);
}

} // namespace stategraph::checkpoint
