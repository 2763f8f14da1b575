#include <stategraph/checkpoint/postgres_saver.hpp>
#include <stategraph/detail/spawned.hpp>
#include <stategraph/checkpoint/reserved.hpp>

#include <stategraph/error.hpp>

#include "codec.hpp"
#include "lease_owner.hpp"
#include "pg_connection.hpp"
#include "saver_common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <ctime>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>

namespace stategraph::checkpoint {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// ---------------------------------------------------------------------------------------------
// Schema. Migration i (0-based) brings the schema to version i+1, in one transaction under an
// advisory lock (several processes may open a fresh database at once). Never edit a released
// migration: append one and bump postgres_saver::schema_version. Text columns compare bytewise
// (COLLATE "C"): checkpoint ids are ordered as text, whatever the database's locale.
// Stored bytes are sealed as in the SQLite saver (codec::seal): records to (thread, ns, id,
// parent, step, source), values to (channel, version), pending writes to (thread, ns, checkpoint,
// task id, task name, channel), cache entries to ("__cache__", ns, key, expiry).
constexpr const char* migration_v1[] = {R"sql(
CREATE TABLE stategraph_checkpoints (
    thread_id text COLLATE "C" NOT NULL,
    ns        text COLLATE "C" NOT NULL,
    id        text COLLATE "C" NOT NULL,
    parent_id text COLLATE "C" NOT NULL DEFAULT '',
    step      bigint NOT NULL,
    source    text COLLATE "C" NOT NULL,
    record    bytea NOT NULL,
    PRIMARY KEY (thread_id, ns, id)
);
)sql", R"sql(
CREATE TABLE stategraph_blobs (
    thread_id text COLLATE "C" NOT NULL,
    ns        text COLLATE "C" NOT NULL,
    channel   text COLLATE "C" NOT NULL,
    version   text COLLATE "C" NOT NULL,
    value     bytea NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
);
)sql", R"sql(
CREATE TABLE stategraph_writes (
    thread_id     text COLLATE "C" NOT NULL,
    ns            text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    task_name     text COLLATE "C" NOT NULL,
    channel       text COLLATE "C" NOT NULL,
    value         bytea NOT NULL,
    seq           bigint NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
);
)sql", R"sql(
CREATE TABLE stategraph_graphs (
    version text COLLATE "C" PRIMARY KEY,
    value   bytea NOT NULL
);
)sql", R"sql(
CREATE TABLE stategraph_leases (
    thread_id  text COLLATE "C" PRIMARY KEY,
    owner      text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL
);
)sql", R"sql(
CREATE TABLE stategraph_cache (
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      bytea NOT NULL,
    expires_at bigint,
    PRIMARY KEY (ns, key)
);
)sql", R"sql(
-- Lease times are the server's: one clock for every host.
CREATE FUNCTION stategraph_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
)sql", R"sql(
-- The fence of every write, run first in its transaction: raises SG001 (lease lost: the holder's
-- name in the message, '' when the lease was broken) when this saver holds the thread (p_ours)
-- and the lease is no longer its own, SG002 ("<holder> <expires ms>") while another owner's
-- lease is live (unless that owner is p_gone: a dead process of the caller's host); renews our
-- own lease once half of its time is gone. The lease row stays locked until the write commits.
CREATE FUNCTION stategraph_fence(p_thread text, p_owner text, p_ours boolean, p_gone text, p_ttl bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    h text;
    e bigint;
    now_ms bigint := stategraph_now_ms();
BEGIN
    SELECT owner, expires_at INTO h, e FROM stategraph_leases WHERE thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        IF p_ours THEN RAISE EXCEPTION USING ERRCODE = 'SG001', MESSAGE = ''; END IF;
        RETURN;
    END IF;
    IF h <> p_owner THEN
        IF p_ours THEN RAISE EXCEPTION USING ERRCODE = 'SG001', MESSAGE = h; END IF;
        IF e > now_ms AND h IS DISTINCT FROM p_gone THEN
            RAISE EXCEPTION USING ERRCODE = 'SG002', MESSAGE = e::text || ' ' || h;
        END IF;
        RETURN;
    END IF;
    IF e - now_ms <= p_ttl / 2 THEN
        UPDATE stategraph_leases SET expires_at = now_ms + p_ttl WHERE thread_id = p_thread;
    END IF;
END $$;)sql"};

// Version 2: the answers of calls whose effect is not idempotent (break_lease's holder,
// cache_clear's count), kept a few minutes under the call's id: a call retried after a dropped
// connection, whose first attempt had committed, reads its answer instead of acting again.
constexpr const char* migration_v2[] = {R"sql(
CREATE TABLE stategraph_answers (
    call_id text COLLATE "C" PRIMARY KEY,
    answer  text,
    at      bigint NOT NULL
);
)sql"};

constexpr std::string_view sql_fence = "SELECT stategraph_fence($1, $2, $3::boolean, $4, $5::bigint)";
constexpr std::string_view sql_begin = "BEGIN";
constexpr std::string_view sql_begin_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
constexpr std::string_view sql_commit = "COMMIT";
constexpr std::string_view sql_rollback = "ROLLBACK";

constexpr std::string_view sql_put_checkpoint =
    "INSERT INTO stategraph_checkpoints(thread_id, ns, id, parent_id, step, source, record) "
    "VALUES($1, $2, $3, $4, $5::bigint, $6, $7) ON CONFLICT (thread_id, ns, id) DO UPDATE SET "
    "parent_id = excluded.parent_id, step = excluded.step, source = excluded.source, record = excluded.record";
// A step's values in one statement: $3 channels, $4 versions (text arrays), $5 the stored bytes
// (a bytea array in binary form: no escaping); a step has one value per channel.
constexpr std::string_view sql_put_blobs =
    "INSERT INTO stategraph_blobs(thread_id, ns, channel, version, value) "
    "SELECT $1, $2, c, v, b FROM unnest($3::text[], $4::text[], $5::bytea[]) AS t(c, v, b) "
    "ON CONFLICT (thread_id, ns, channel, version) DO UPDATE SET value = excluded.value";
constexpr std::string_view sql_put_graph =
    "INSERT INTO stategraph_graphs(version, value) VALUES($1, $2) ON CONFLICT (version) DO NOTHING";
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
constexpr std::string_view sql_kept = "SELECT " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                      "WHERE thread_id = $1 AND ns = $2 ORDER BY id DESC LIMIT $3::bigint";
constexpr std::string_view sql_heads = "SELECT thread_id, " STATEGRAPH_PG_CP " FROM stategraph_checkpoints "
                                       "WHERE ns = '' AND (thread_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))";
#undef STATEGRAPH_PG_CP
constexpr std::string_view sql_get_blobs =
    "SELECT channel, version, value FROM stategraph_blobs WHERE thread_id = $1 AND ns = $2 "
    "AND (channel, version) IN (SELECT * FROM unnest($3::text[], $4::text[]))";
// The links of appended-value chains: every version of each channel up to the newest link missing.
constexpr std::string_view sql_get_chains =
    "SELECT b.channel, b.version, b.value FROM stategraph_blobs b JOIN unnest($3::text[], $4::text[]) AS w(channel, upto) "
    "ON b.channel = w.channel AND b.version <= w.upto COLLATE \"C\" WHERE b.thread_id = $1 AND b.ns = $2";
constexpr std::string_view sql_get_graphs = "SELECT version, value FROM stategraph_graphs WHERE version = ANY($1::text[])";
constexpr std::string_view sql_get_graph = "SELECT value FROM stategraph_graphs WHERE version = $1";
constexpr std::string_view sql_get_writes =
    "SELECT checkpoint_id, task_id, task_name, channel, value FROM stategraph_writes "
    "WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = ANY($3::text[]) ORDER BY checkpoint_id, seq";
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
constexpr std::string_view sql_stats_writes =
    "SELECT count(*)::bigint, coalesce(sum(length(value)), 0)::bigint FROM stategraph_writes WHERE thread_id = $1";
// Leases.
constexpr std::string_view sql_take_lease =
    "INSERT INTO stategraph_leases(thread_id, owner, expires_at) VALUES($1, $2, stategraph_now_ms() + $3::bigint) "
    "ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE stategraph_leases.owner = excluded.owner OR stategraph_leases.expires_at <= stategraph_now_ms() "
    "OR stategraph_leases.owner = $4 RETURNING owner";
constexpr std::string_view sql_get_lease =
    "SELECT owner, expires_at, (expires_at > stategraph_now_ms())::int FROM stategraph_leases WHERE thread_id = $1";
constexpr std::string_view sql_lock_lease =
    "SELECT owner, expires_at, (expires_at > stategraph_now_ms())::int FROM stategraph_leases WHERE thread_id = $1 "
    "FOR UPDATE";
constexpr std::string_view sql_renew_lease =
    "UPDATE stategraph_leases SET expires_at = stategraph_now_ms() + $3::bigint WHERE thread_id = $1 AND owner = $2";
constexpr std::string_view sql_release_lease = "DELETE FROM stategraph_leases WHERE thread_id = $1 AND owner = $2";
constexpr std::string_view sql_release_all_leases = "DELETE FROM stategraph_leases WHERE owner = $1";
// $1: the thread, $2: the call's id. Acts only when the call has no answer yet (a retry whose
// first attempt committed); the answer is read back by sql_answer in the same transaction.
constexpr std::string_view sql_break_lease =
    "WITH gone AS (DELETE FROM stategraph_leases WHERE thread_id = $1 AND NOT EXISTS "
    "(SELECT 1 FROM stategraph_answers WHERE call_id = $2) RETURNING owner) "
    "INSERT INTO stategraph_answers(call_id, answer, at) SELECT $2, (SELECT owner FROM gone), stategraph_now_ms() "
    "ON CONFLICT (call_id) DO NOTHING";
constexpr std::string_view sql_answer = "SELECT answer FROM stategraph_answers WHERE call_id = $1";
constexpr std::string_view sql_forget_answers = "DELETE FROM stategraph_answers WHERE at < stategraph_now_ms() - 600000";
// Thread maintenance.
constexpr std::string_view sql_thread_exists =
    "SELECT (EXISTS(SELECT 1 FROM stategraph_checkpoints WHERE thread_id = $1) OR EXISTS(SELECT 1 FROM "
    "stategraph_writes WHERE thread_id = $1) OR EXISTS(SELECT 1 FROM stategraph_blobs WHERE thread_id = $1))::int";
constexpr std::string_view sql_copy_source_checkpoints =
    "SELECT ns, id, parent_id, step, source, record FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_thread_checkpoint_ids =
    "SELECT ns, id FROM stategraph_checkpoints WHERE thread_id = $1";
constexpr std::string_view sql_copy_source_writes =
    "SELECT ns, checkpoint_id, task_id, task_name, channel, value, seq FROM stategraph_writes WHERE thread_id = $1";
constexpr std::string_view sql_copy_checkpoint =
    "INSERT INTO stategraph_checkpoints(thread_id, ns, id, parent_id, step, source, record) "
    "VALUES($1, $2, $3, $4, $5::bigint, $6, $7)";
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
// Node cache.
constexpr std::string_view sql_cache_get = "SELECT value, expires_at FROM stategraph_cache WHERE ns = $1 AND key = $2";
constexpr std::string_view sql_cache_purge =
    "DELETE FROM stategraph_cache WHERE ns = $1 AND expires_at IS NOT NULL AND expires_at <= $2::bigint";
constexpr std::string_view sql_cache_put =
    "INSERT INTO stategraph_cache(ns, key, value, expires_at) VALUES($1, $2, $3, $4::bigint) "
    "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at";
// $1: the namespaces (NULL: all), $2: the call's id (as sql_break_lease).
constexpr std::string_view sql_cache_clear =
    "WITH gone AS (DELETE FROM stategraph_cache WHERE ($1::text[] IS NULL OR ns = ANY($1::text[])) AND NOT EXISTS "
    "(SELECT 1 FROM stategraph_answers WHERE call_id = $2) RETURNING 1) "
    "INSERT INTO stategraph_answers(call_id, answer, at) SELECT $2, count(*)::text, stategraph_now_ms() FROM gone "
    "ON CONFLICT (call_id) DO NOTHING";

/// The channel holding the graph's shape lines, versioned by the graph signature.
constexpr std::string_view graph_channel = reserved::graph;
/// The channel a cache entry is sealed to, beside its namespace, key and expiry.
constexpr std::string_view cache_channel = "__cache__";

using common::now_ms;
using common::quote;

/// A PostgreSQL array literal of text ("{"a","b"}"), for a `$n::text[]` parameter.
std::string text_array(const std::vector<std::string>& items) {
    std::string out = "{";
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        out += '"';
        for (char ch : items[i]) {
            if (ch == '"' || ch == '\\') out += '\\';
            out += ch;
        }
        out += '"';
    }
    out += '}';
    return out;
}

/// A one-dimensional bytea[] in PostgreSQL's binary array form, for a `$n::bytea[]` parameter
/// sent as bytes: the header (1 dimension, no NULLs, element type bytea), then each item's
/// length and bytes, all integers big-endian.
std::string bytea_array(const std::vector<std::string>& items) {
    std::string out;
    auto put32 = [&](std::uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((v >> shift) & 0xff));
    };
    constexpr std::uint32_t bytea_oid = 17;
    put32(1);
    put32(0);
    put32(bytea_oid);
    put32(static_cast<std::uint32_t>(items.size()));
    put32(1);
    for (const auto& item : items) {
        put32(static_cast<std::uint32_t>(item.size()));
        out += item;
    }
    return out;
}

using pg::identifier;

/// Runs `work` to completion on a private io_context (the constructor and destructor).
template <class T>
T run_blocking(asio::awaitable<T> work) {
    asio::io_context io;
    auto f = asio::co_spawn(io, std::move(work), asio::use_future);
    io.run();
    return f.get();
}

/// A value's stored bytes, keyed by (channel, version), already checked (unsealed).
using value_map = std::map<std::pair<std::string, std::string>, std::string>;

} // namespace

// =============================================================================================

struct postgres_saver::impl {
    postgres_options opt;
    std::string owner;
    pg::pool pool;

    std::mutex mutex; ///< guards `held`, `lost`, `stored_graphs`
    /// Threads whose lease this saver took and has not released; `lost`: those another owner
    /// took over (or broke). Writes on a thread in `held` must find our lease.
    std::set<std::string> held, lost;
    std::set<std::string> stored_graphs;

    /// The lease keeper: one thread with an io_context of its own, renewing the leases in `held`
    /// every third of their time to live (started by the first `acquire`).
    struct keeper_state {
        asio::io_context io;
        std::optional<asio::steady_timer> timer;
        std::thread thread;
        std::atomic<bool> stopping{false};
        std::once_flag started;
    } keeper;

    explicit impl(postgres_options o)
        : opt(std::move(o)), owner(lease_owner::make()),
          pool(opt.conninfo, identifier(opt.schema) + ", pg_catalog", opt.pool_size, opt.connect_timeout) {}

    std::string where() const { return " (PostgreSQL schema " + opt.schema + ")"; }
    std::chrono::milliseconds query_timeout() const {
        return std::max(opt.retry_for, std::chrono::milliseconds(30000));
    }
    std::int64_t lease_ms() const { return opt.lease_ttl.count(); }

    // -- errors -------------------------------------------------------------------------------
    [[noreturn]] void corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                              std::vector<std::string> names) const {
        throw common::corrupt(thread, ns, detail, where(), std::move(names));
    }

    static std::vector<std::string> names_of(const std::string& thread) {
        if (thread.empty()) return {};
        return {thread};
    }

    [[noreturn]] void throw_lost(const std::string& thread, const std::string& holder) {
        {
            std::lock_guard lock(mutex);
            lost.insert(thread);
        }
        throw common::lease_lost(thread, owner, holder, where());
    }

    [[noreturn]] void throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const {
        throw common::thread_busy(thread, holder, expires, where());
    }

    // -- one call, retried ----------------------------------------------------------------------
    /// What one call knows across its attempts.
    struct call {
        const std::string& thread; ///< named in errors ("" for calls about no thread)
        const char* what;          ///< "saving a checkpoint", ...
        std::string gone;          ///< a lease holder found provably gone: the fence lets it pass
        int attempt = 0;           ///< 0 on the first try; more when a dropped connection is retried
    };

    /// The fence of a write on `c.thread` (first in its transaction, after BEGIN).
    pg::statement fence(const call& c) {
        bool ours = false;
        {
            std::lock_guard lock(mutex);
            ours = held.count(c.thread) != 0;
        }
        pg::statement s(sql_fence);
        s.text(c.thread).text(owner).text(ours ? "true" : "false");
        if (c.gone.empty()) s.null();
        else s.text(c.gone);
        s.integer(lease_ms());
        return s;
    }

    /// Runs `body(connection, call)` on a pooled connection. A dropped connection, or a server
    /// that cannot be reached, is retried with backoff (the body must be idempotent: every write
    /// here is an upsert in one transaction) until `retry_for` is spent; then `storage_failure`
    /// naming the thread. The fence's refusals become `lease_lost` / `thread_busy`; other errors
    /// of the server `storage_failure`.
    template <class R, class Body>
    asio::awaitable<R> with_retry(call& c, Body& body) {
        const auto deadline = std::chrono::steady_clock::now() + opt.retry_for;
        auto pause = opt.backoff;
        std::string why;
        for (int attempt = 0;; ++attempt) {
            c.attempt = attempt;
            bool retry_now = false;
            try {
                auto conn = co_await pool.get();
                try {
                    co_return co_await body(*conn, c);
                } catch (const pg::connection_lost&) {
                    conn.discard();
                    throw;
                }
            } catch (const pg::connection_lost& e) {
                why = e.what();
            } catch (const pg::server_error& e) {
                if (e.sqlstate() == "SG001") throw_lost(c.thread, e.primary());
                if (e.sqlstate() == "SG002") {
                    const std::string& text = e.primary(); // "<expires ms> <holder>"
                    const auto space = text.find(' ');
                    const std::int64_t expires = std::atoll(text.substr(0, space).c_str());
                    const std::string holder = space == std::string::npos ? std::string() : text.substr(space + 1);
                    if (c.gone != holder && lease_owner::is_gone(holder)) {
                        c.gone = holder;
                        retry_now = true;
                    } else {
                        throw_busy(c.thread, holder, expires);
                    }
                } else if (e.transient()) {
                    why = e.what();
                } else {
                    throw checkpoint_error(errc::storage_failure,
                                           (c.thread.empty() ? std::string() : "thread " + quote(c.thread) + ": ") +
                                               "the PostgreSQL server refused " + c.what + ": " + e.what() + where(),
                                           names_of(c.thread));
                }
            }
            if (retry_now) continue;
            if (std::chrono::steady_clock::now() >= deadline)
                throw checkpoint_error(errc::storage_failure,
                                       (c.thread.empty() ? std::string() : "thread " + quote(c.thread) + ": ") +
                                           "cannot reach the PostgreSQL server while " + c.what + " (" +
                                           std::to_string(attempt + 1) + " attempts in " +
                                           std::to_string(opt.retry_for.count()) + " ms): " + why + where(),
                                       names_of(c.thread));
            pool.clear(); // the others are likely gone too
            asio::steady_timer t(co_await asio::this_coro::executor, pause);
            co_await t.async_wait(asio::use_awaitable);
            pause = std::min(pause * 2, opt.max_backoff);
        }
    }

    // -- reading rows -----------------------------------------------------------------------------
    std::string seal_record(std::string_view record, const std::string& thread, const std::string& ns,
                            const checkpoint& cp) const {
        const std::string step = std::to_string(cp.step);
        return codec::seal(record, {thread, ns, cp.id, cp.parent_id, step, cp.source});
    }

    /// A checkpoint row (columns from `col`: id, parent_id, step, source, record) without values.
    checkpoint read_row(const pg::result& r, int row, int col, const std::string& thread, const std::string& ns) const {
        checkpoint cp;
        cp.id = r.text(row, col);
        cp.parent_id = r.text(row, col + 1);
        cp.step = r.integer(row, col + 2);
        cp.source = r.text(row, col + 3);
        try {
            const std::string step = std::to_string(cp.step);
            codec::decode_record(codec::unseal(r.bytes(row, col + 4), {thread, ns, cp.id, cp.parent_id, step, cp.source}),
                                 cp);
        } catch (const std::exception& e) {
            corrupt(thread, ns, "checkpoint " + cp.id + ": its record cannot be read: " + e.what(), {thread});
        }
        return cp;
    }

    /// Fetches the stored values `wanted` (channel, version) of (thread, ns) into `values`, with
    /// every version their appended items extend; `__graph__` values from the shared graphs
    /// first. Missing ones are simply absent. The first round trip asks for `wanted` exactly; when
    /// appended items extend versions not read yet, the next asks, per channel, for every version
    /// up to the newest such link, so a chain of any length costs one more round trip, not one
    /// per link.
    /// `also` (when given) rides in the first round trip; its rows come back in `also_rows`.
    asio::awaitable<void> fetch_values(pg::connection& conn, const std::string& thread, const std::string& ns,
                                       std::set<std::pair<std::string, std::string>> wanted, value_map& values,
                                       const pg::statement* also, pg::result* also_rows) {
        if (also && wanted.empty()) {
            std::vector<pg::statement> alone{*also};
            auto res = co_await conn.run(alone, query_timeout());
            *also_rows = std::move(res.back());
            co_return;
        }
        std::set<std::pair<std::string, std::string>> asked;
        for (bool first = true; !wanted.empty(); first = false) {
            std::vector<std::string> channels, versions, graphs;
            std::map<std::string, std::string> upto; // later rounds: channel -> newest link missing
            for (const auto& k : wanted) {
                asked.insert(k);
                if (first) {
                    channels.push_back(k.first);
                    versions.push_back(k.second);
                    if (k.first == graph_channel) graphs.push_back(k.second);
                } else if (auto& u = upto[k.first]; u < k.second) {
                    u = k.second;
                }
            }
            for (const auto& [channel, version] : upto) {
                channels.push_back(channel);
                versions.push_back(version);
            }
            std::vector<pg::statement> batch;
            batch.emplace_back(first ? sql_get_blobs : sql_get_chains);
            batch.back().text(thread).text(ns).text(text_array(channels)).text(text_array(versions));
            if (!graphs.empty()) {
                batch.emplace_back(sql_get_graphs);
                batch.back().text(text_array(graphs));
            }
            if (first && also) batch.push_back(*also);
            auto res = co_await conn.run(batch, query_timeout());
            if (first && also) {
                *also_rows = std::move(res.back());
                res.pop_back();
            }
            std::vector<std::pair<std::pair<std::string, std::string>, std::string_view>> got;
            if (res.size() > 1)
                for (int i = 0; i < res[1].rows(); ++i)
                    got.push_back({{std::string(graph_channel), res[1].text(i, 0)}, res[1].bytes(i, 1)});
            for (int i = 0; i < res[0].rows(); ++i) got.push_back({{res[0].text(i, 0), res[0].text(i, 1)}, res[0].bytes(i, 2)});
            wanted.clear();
            for (auto& [key, stored] : got) {
                if (values.count(key)) continue; // a graph shape before a thread's own copy
                const auto& [channel, version] = key;
                std::string payload;
                try {
                    payload = std::string(codec::unseal(stored, {channel, version}));
                    if (auto ext = codec::split_value(payload, version).extends) {
                        std::pair<std::string, std::string> link{channel, *ext};
                        if (!asked.count(link) && !values.count(link)) wanted.insert(std::move(link));
                    }
                } catch (const std::exception& e) {
                    corrupt(thread, ns, "channel " + quote(channel) + " (version " + version + ") cannot be read: " + e.what(),
                            {thread, channel});
                }
                values.emplace(key, std::move(payload));
            }
            std::erase_if(wanted, [&](const auto& k) { return values.count(k) != 0; }); // came in this round
        }
    }

    json::value parse(std::string_view text, const std::string& thread, const std::string& ns, const std::string& what,
                      std::vector<std::string> names) const {
        return common::parse_stored(text, thread, ns, what, where(), std::move(names));
    }

    /// Fills the values and pending writes of `tuples` (all of one thread and namespace).
    asio::awaitable<void> assemble(pg::connection& conn, std::vector<checkpoint_tuple>& tuples) {
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

    static asio::awaitable<void> finish(pg::connection& conn, std::string_view sql, std::chrono::milliseconds timeout) {
        std::vector<pg::statement> end;
        end.emplace_back(sql);
        (void)co_await conn.run(end, timeout);
    }

    // -- the operations -------------------------------------------------------------------------
    asio::awaitable<void> put(const std::string& thread, const std::string& ns, const checkpoint& cp) {
        // Everything is encoded before the round trip: BEGIN, fence, checkpoint row, values, COMMIT.
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_fence); // filled per attempt
        batch.emplace_back(sql_put_checkpoint);
        batch.back().text(thread).text(ns).text(cp.id).text(cp.parent_id).integer(cp.step).text(cp.source);
        batch.back().bytes(seal_record(codec::encode_record(cp), thread, ns, cp));
        std::vector<std::string> graphs, channels, versions, stored;
        for (const auto& [channel, value] : cp.values) {
            const std::string name(channel);
            auto v = cp.versions.find(name);
            const std::string& version = v == cp.versions.end() ? cp.id : v->second;
            auto x = cp.extends.find(name);
            const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
            auto bytes = codec::seal(codec::encode_value(value, extends, version), {name, version});
            // A `__graph__` value keyed by the graph signature is one row for all threads.
            if (name == graph_channel && !extends && version != cp.id) {
                {
                    std::lock_guard lock(mutex);
                    if (stored_graphs.count(version)) continue;
                }
                batch.emplace_back(sql_put_graph);
                batch.back().text(version).bytes(std::move(bytes));
                graphs.push_back(version);
                continue;
            }
            channels.push_back(name);
            versions.push_back(version);
            stored.push_back(std::move(bytes));
        }
        if (!stored.empty()) {
            batch.emplace_back(sql_put_blobs);
            batch.back().text(thread).text(ns).text(text_array(channels)).text(text_array(versions));
            batch.back().bytes(bytea_array(stored));
        }
        batch.emplace_back(sql_commit);
        call c{thread, "saving a checkpoint", {}};
        auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
            batch[1] = fence(cc);
            (void)co_await conn.run(batch, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
        std::lock_guard lock(mutex);
        stored_graphs.insert(graphs.begin(), graphs.end());
    }

    asio::awaitable<void> put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                     const std::vector<pending_write>& writes) {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_fence);
        for (const auto& w : writes) {
            batch.emplace_back(sql_put_write);
            batch.back().text(thread).text(ns).text(checkpoint_id).text(w.task_id).text(w.task_name).text(w.channel);
            batch.back().bytes(
                codec::seal(json::serialize(w.value), {thread, ns, checkpoint_id, w.task_id, w.task_name, w.channel}));
        }
        batch.emplace_back(sql_commit);
        call c{thread, "saving pending writes", {}};
        auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
            batch[1] = fence(cc);
            (void)co_await conn.run(batch, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
    }

    asio::awaitable<std::optional<checkpoint_tuple>> get(const std::string& thread, const std::string& ns,
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

    asio::awaitable<std::vector<checkpoint_tuple>> list(const std::string& thread, const std::string& ns,
                                                        const list_options& o) {
        call c{thread, "listing checkpoints", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::vector<checkpoint_tuple>> {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_begin_snapshot);
            batch.emplace_back(sql_list);
            auto& s = batch.back();
            s.text(thread).text(ns);
            if (o.before) s.text(*o.before);
            else s.null();
            if (o.source) s.text(*o.source);
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

    /// The statements deleting a thread's rows and an expired lease of another owner.
    void delete_rows(std::vector<pg::statement>& batch, const std::string& thread) const {
        for (auto sql : {sql_delete_writes, sql_delete_blobs, sql_delete_checkpoints}) {
            batch.emplace_back(sql);
            batch.back().text(thread);
        }
        batch.emplace_back(sql_delete_expired_lease);
        batch.back().text(thread).text(owner);
    }

    asio::awaitable<void> delete_thread(const std::string& thread) {
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
    asio::awaitable<void> prune_thread(pg::connection& conn, const std::string& thread, std::size_t keep_last) {
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
            co_await fetch_values(conn, thread, ns, wanted, values, nullptr, nullptr);
            std::set<std::pair<std::string, std::string>> needed;
            for (const auto& cp : kept)
                for (const auto& [channel, version] : cp.versions) {
                    if (version.empty()) continue;
                    auto fetch = [&, &ch = channel](const std::string& v) -> std::optional<std::string> {
                        auto f = values.find({ch, v});
                        if (f == values.end()) return std::nullopt;
                        return f->second;
                    };
                    try {
                        codec::mark_needed(channel, version, fetch, needed);
                    } catch (const codec::corrupt& e) {
                        corrupt(thread, ns,
                                "checkpoint " + cp.id + ": channel " + quote(channel) + " (version " + version +
                                    ") cannot be read: " + e.what(),
                                {thread, channel});
                    }
                }
            std::vector<std::string> channels, versions;
            for (const auto& [channel, version] : needed) {
                channels.push_back(channel);
                versions.push_back(version);
            }
            std::vector<pg::statement> batch;
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

    asio::awaitable<void> prune(const std::string& thread, std::size_t keep_last) {
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

    asio::awaitable<thread_stats> stats(const std::string& thread) {
        call c{thread, "reading storage statistics", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<thread_stats> {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_begin_snapshot);
            for (auto sql : {sql_stats_checkpoints, sql_stats_blobs, sql_stats_writes}) {
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
            co_return st;
        };
        co_return co_await with_retry<thread_stats>(c, body);
    }

    asio::awaitable<bool> holds_thread(const std::string& thread) {
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
    asio::awaitable<std::size_t> rewind_thread(const std::string& thread, const std::string& checkpoint_id) {
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

    asio::awaitable<void> copy_thread(const std::string& from, const std::string& to) {
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

    asio::awaitable<std::vector<thread_info>> list_threads(const thread_query& q, const json::object* match) {
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

    asio::awaitable<sweep_result> sweep(ttl_policy policy) {
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

    // -- node cache -------------------------------------------------------------------------------
    asio::awaitable<std::optional<json::value>> cache_get(const std::string& ns, const std::string& key) {
        static const std::string none;
        call c{none, "reading the node cache", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<json::value>> {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_cache_get);
            batch.back().text(ns).text(key);
            auto res = co_await conn.run(batch, query_timeout());
            const auto& r = res[0];
            if (r.rows() == 0) co_return std::nullopt;
            const std::string expires = r.is_null(0, 1) ? std::string() : std::to_string(r.integer(0, 1));
            if (!r.is_null(0, 1) && r.integer(0, 1) <= now_ms()) co_return std::nullopt;
            std::string_view text;
            try {
                text = codec::unseal(r.bytes(0, 0), {cache_channel, ns, key, expires});
            } catch (const codec::corrupt& e) {
                throw common::cache_corrupt(ns, key, e.what(), where());
            }
            co_return common::cache_value(text, ns, key, where());
        };
        co_return co_await with_retry<std::optional<json::value>>(c, body);
    }

    asio::awaitable<void> cache_put(const std::string& ns, const std::string& key, const json::value& value,
                                    std::chrono::milliseconds ttl) {
        const auto now = now_ms();
        const std::optional<std::int64_t> expires =
            ttl.count() > 0 ? std::optional<std::int64_t>(now + ttl.count()) : std::nullopt;
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_cache_purge);
        batch.back().text(ns).integer(now);
        batch.emplace_back(sql_cache_put);
        batch.back().text(ns).text(key).bytes(codec::seal(
            json::serialize(value), {cache_channel, ns, key, expires ? std::to_string(*expires) : std::string()}));
        if (expires) batch.back().integer(*expires);
        else batch.back().null();
        batch.emplace_back(sql_commit);
        static const std::string none;
        call c{none, "writing the node cache", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
            (void)co_await conn.run(batch, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
    }

    /// A new id for a call whose answer is kept (sql_answer): this saver's owner name and a count.
    std::string call_id() {
        static std::atomic<std::uint64_t> calls{0};
        return owner + "#" + std::to_string(++calls);
    }

    asio::awaitable<std::size_t> cache_clear(const std::vector<std::string>& namespaces) {
        const std::string id = call_id();
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_cache_clear);
        if (namespaces.empty()) batch.back().null();
        else batch.back().text(text_array(namespaces));
        batch.back().text(id);
        batch.emplace_back(sql_answer);
        batch.back().text(id);
        batch.emplace_back(sql_forget_answers);
        batch.emplace_back(sql_commit);
        static const std::string none;
        call c{none, "clearing the node cache", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::size_t> {
            auto res = co_await conn.run(batch, query_timeout());
            co_return static_cast<std::size_t>(std::stoull(res[2].text(0, 0)));
        };
        co_return co_await with_retry<std::size_t>(c, body);
    }

    asio::awaitable<void> put_graph(const std::string& signature, const std::vector<std::string>& shape) {
        {
            std::lock_guard lock(mutex);
            if (stored_graphs.count(signature)) co_return;
        }
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_put_graph);
        batch.back().text(signature).bytes(
            codec::seal(codec::encode_value(codec::shape_json(shape), nullptr, signature), {graph_channel, signature}));
        static const std::string none;
        call c{none, "saving the graph's shape", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
            (void)co_await conn.run(batch, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
        std::lock_guard lock(mutex);
        stored_graphs.insert(signature);
    }

    asio::awaitable<std::optional<std::vector<std::string>>> get_graph(const std::string& signature) {
        static const std::string none;
        call c{none, "reading the graph's shape", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<std::vector<std::string>>> {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_get_graph);
            batch.back().text(signature);
            auto res = co_await conn.run(batch, query_timeout());
            if (res[0].rows() == 0) co_return std::nullopt;
            try {
                co_return codec::shape_from(codec::unseal(res[0].bytes(0, 0), {graph_channel, signature}), signature);
            } catch (const codec::corrupt& e) {
                throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what() + where(),
                                       {signature});
            }
        };
        co_return co_await with_retry<std::optional<std::vector<std::string>>>(c, body);
    }

    // -- leases -----------------------------------------------------------------------------------
    asio::awaitable<void> acquire(const std::string& thread) {
        call c{thread, "taking the thread's lease", {}};
        auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
            for (;;) {
                std::vector<pg::statement> batch;
                batch.emplace_back(sql_take_lease);
                batch.back().text(thread).text(owner).integer(lease_ms());
                if (cc.gone.empty()) batch.back().null();
                else batch.back().text(cc.gone);
                batch.emplace_back(sql_get_lease);
                batch.back().text(thread);
                auto res = co_await conn.run(batch, query_timeout());
                if (res[0].rows() > 0) co_return true;
                if (res[1].rows() == 0) continue; // released meanwhile: try again
                const auto holder = res[1].text(0, 0);
                if (holder != cc.gone && lease_owner::is_gone(holder)) {
                    cc.gone = holder;
                    continue;
                }
                throw_busy(thread, holder, res[1].integer(0, 1));
            }
        };
        (void)co_await with_retry<bool>(c, body);
        {
            std::lock_guard lock(mutex);
            held.insert(thread);
            lost.erase(thread);
        }
        start_keeper();
    }

    asio::awaitable<void> release(const std::string& thread) {
        // Forgotten first: a release that fails leaves a row that simply expires.
        {
            std::lock_guard lock(mutex);
            held.erase(thread);
            lost.erase(thread);
        }
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_release_lease);
        batch.back().text(thread).text(owner);
        call c{thread, "releasing the thread's lease", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
            (void)co_await conn.run(batch, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
    }

    asio::awaitable<std::optional<std::string>> break_lease(const std::string& thread) {
        const std::string id = call_id();
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        batch.emplace_back(sql_break_lease);
        batch.back().text(thread).text(id);
        batch.emplace_back(sql_answer);
        batch.back().text(id);
        batch.emplace_back(sql_forget_answers);
        batch.emplace_back(sql_commit);
        call c{thread, "breaking the thread's lease", {}};
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<std::string>> {
            auto res = co_await conn.run(batch, query_timeout());
            if (res[2].rows() == 0 || res[2].is_null(0, 0)) co_return std::nullopt;
            co_return res[2].text(0, 0);
        };
        auto holder = co_await with_retry<std::optional<std::string>>(c, body);
        if (holder == owner) {
            std::lock_guard lock(mutex);
            lost.insert(thread);
        }
        co_return holder;
    }

    /// Extends every lease in `held` (not lost) by a full time to live, in one round trip; a
    /// lease found gone joins `lost`. A failed renewal is tried again at the next tick.
    asio::awaitable<void> renew_held() {
        std::vector<std::string> threads;
        {
            std::lock_guard lock(mutex);
            for (const auto& t : held)
                if (!lost.count(t)) threads.push_back(t);
        }
        if (threads.empty()) co_return;
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        for (const auto& t : threads) {
            batch.emplace_back(sql_renew_lease);
            batch.back().text(t).text(owner).integer(lease_ms());
        }
        batch.emplace_back(sql_commit);
        try {
            auto conn = co_await pool.get();
            try {
                auto res = co_await conn->run(batch, opt.lease_ttl);
                std::lock_guard lock(mutex);
                for (std::size_t i = 0; i < threads.size(); ++i)
                    if (res[i + 1].affected() == 0 && held.count(threads[i])) lost.insert(threads[i]);
            } catch (const pg::connection_lost&) {
                conn.discard();
            }
        } catch (const std::exception&) {
        }
    }

    static asio::awaitable<void> keep_leases(impl* self) {
        const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(self->lease_ms() / 3),
                                                                std::chrono::milliseconds(10));
        auto& k = self->keeper;
        while (!k.stopping) {
            k.timer->expires_after(period);
            auto [ec] = co_await k.timer->async_wait(asio::as_tuple(asio::use_awaitable));
            if (k.stopping) break;
            (void)ec;
            co_await self->renew_held();
        }
    }

    void start_keeper() {
        std::call_once(keeper.started, [this] {
            keeper.timer.emplace(keeper.io);
            asio::co_spawn(keeper.io, keep_leases(this), stategraph::detail::report_to("postgres_saver: the lease keeper"));
            keeper.thread = std::thread([this] { keeper.io.run(); });
        });
    }

    void stop_keeper() {
        keeper.stopping = true;
        if (!keeper.thread.joinable()) return;
        asio::post(keeper.io, [this] { keeper.timer->cancel(); });
        keeper.thread.join();
    }

    // -- opening ----------------------------------------------------------------------------------
    asio::awaitable<void> migrate() {
        static const std::string none;
        call c{none, "creating the schema", {}};
        // Created only when missing: a role that may use the schema need not create schemas.
        const std::string schema_sql = pg::create_schema_if_missing(opt.schema);
        auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_begin);
            // One process migrates at a time (the key: this schema's name).
            batch.emplace_back("SELECT pg_advisory_xact_lock(8128, hashtext($1))");
            batch.back().text(opt.schema);
            batch.emplace_back(schema_sql);
            batch.emplace_back("CREATE TABLE IF NOT EXISTS stategraph_schema (version integer NOT NULL)");
            batch.emplace_back("SELECT coalesce(max(version), 0) FROM stategraph_schema");
            auto res = co_await conn.run(batch, query_timeout());
            const auto version = res[4].integer(0, 0);
            if (version > postgres_saver::schema_version) {
                co_await finish(conn, sql_rollback, query_timeout());
                throw checkpoint_error(errc::schema_too_new,
                                       "postgres_saver: schema " + opt.schema + " has version " + std::to_string(version) +
                                           ", newer than this stategraph knows (" +
                                           std::to_string(postgres_saver::schema_version) +
                                           "); upgrade stategraph to open it");
            }
            // Each migration is a list of statements (the extended protocol takes one per query).
            static const std::vector<std::vector<const char*>> migrations{
                {std::begin(migration_v1), std::end(migration_v1)},
                {std::begin(migration_v2), std::end(migration_v2)},
            };
            if (migrations.size() != static_cast<std::size_t>(postgres_saver::schema_version))
                throw std::logic_error("postgres_saver: one migration per schema version");
            std::vector<pg::statement> steps;
            for (auto v = version; v < postgres_saver::schema_version; ++v)
                for (const char* sql : migrations[static_cast<std::size_t>(v)]) steps.emplace_back(sql);
            steps.emplace_back("DELETE FROM stategraph_schema");
            steps.emplace_back("INSERT INTO stategraph_schema(version) VALUES($1::integer)");
            steps.back().integer(postgres_saver::schema_version);
            steps.emplace_back(sql_commit);
            (void)co_await conn.run(steps, query_timeout());
            co_return true;
        };
        (void)co_await with_retry<bool>(c, body);
    }

    asio::awaitable<void> release_all() {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_release_all_leases);
        batch.back().text(owner);
        auto conn = co_await pool.get();
        try {
            (void)co_await conn->run(batch, opt.connect_timeout);
        } catch (const pg::connection_lost&) {
            conn.discard();
        }
    }
};

// =============================================================================================

postgres_saver::postgres_saver(postgres_options options) : impl_(std::make_shared<impl>(std::move(options))) {
    if (impl_->opt.conninfo.empty())
        throw checkpoint_error(errc::storage_failure, "postgres_saver: postgres_options::conninfo is empty");
    if (impl_->opt.schema.empty())
        throw checkpoint_error(errc::storage_failure, "postgres_saver: postgres_options::schema is empty");
    run_blocking(impl_->migrate());
}

postgres_saver::~postgres_saver() {
    impl_->stop_keeper();
    try { // best effort: leave no lease of ours behind
        run_blocking(impl_->release_all());
    } catch (...) {
    }
}

const std::string& postgres_saver::owner() const noexcept { return impl_->owner; }
const postgres_options& postgres_saver::options() const noexcept { return impl_->opt; }
std::vector<int> postgres_saver::backend_pids() const { return impl_->pool.idle_pids(); }

std::uint64_t postgres_saver::round_trips() const noexcept { return impl_->pool.round_trips(); }

asio::awaitable<void> postgres_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    return impl_->put(thread_id, ns, cp);
}

asio::awaitable<void> postgres_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                 std::vector<pending_write> writes) {
    co_await impl_->put_writes(thread_id, ns, checkpoint_id, writes);
}

asio::awaitable<std::optional<checkpoint_tuple>> postgres_saver::get(std::string thread_id, std::string ns,
                                                                     std::optional<std::string> checkpoint_id) {
    co_return co_await impl_->get(thread_id, ns, checkpoint_id);
}

asio::awaitable<std::vector<checkpoint_tuple>> postgres_saver::list(std::string thread_id, std::string ns,
                                                                    list_options options) {
    co_return co_await impl_->list(thread_id, ns, options);
}

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

asio::awaitable<std::optional<json::value>> postgres_saver::cache_get(std::string ns, std::string key) {
    co_return co_await impl_->cache_get(ns, key);
}

asio::awaitable<void> postgres_saver::cache_put(std::string ns, std::string key, json::value value,
                                                std::chrono::milliseconds ttl) {
    co_await impl_->cache_put(ns, key, value, ttl);
}

asio::awaitable<std::size_t> postgres_saver::cache_clear(std::vector<std::string> namespaces) {
    co_return co_await impl_->cache_clear(namespaces);
}

asio::awaitable<void> postgres_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    co_await impl_->put_graph(signature, shape);
}

asio::awaitable<std::optional<std::vector<std::string>>> postgres_saver::get_graph(std::string signature) {
    co_return co_await impl_->get_graph(signature);
}

asio::awaitable<void> postgres_saver::acquire(std::string thread_id) { co_await impl_->acquire(thread_id); }

asio::awaitable<void> postgres_saver::release(std::string thread_id) { co_await impl_->release(thread_id); }

asio::awaitable<std::optional<std::string>> postgres_saver::break_lease(std::string thread_id) {
    co_return co_await impl_->break_lease(thread_id);
}

} // namespace stategraph::checkpoint
