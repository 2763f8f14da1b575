// Private to the PostgreSQL saver: `postgres_saver::impl` (its state, the retried call, the fence
// and reading rows) and what its files share (pg_detail: the transaction statements, the graph
// channel, text arrays). Its members are defined by concern: postgres_saver.cpp (schema, opening,
// closing), postgres_checkpoints.cpp (checkpoints and pending writes), postgres_threads.cpp
// (thread maintenance), postgres_cache.cpp (node cache, graph shapes), postgres_leases.cpp.
#pragma once

#include <stategraph/checkpoint/postgres_saver.hpp>
#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/core/error.hpp>

#include "codec.hpp"
#include "lease_owner.hpp"
#include "pg_connection.hpp"
#include "saver_common.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/value.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace stategraph::checkpoint {

namespace asio = boost::asio;
namespace json = boost::json;

/// What several files of the PostgreSQL saver use.
namespace pg_detail {

inline constexpr std::string_view sql_fence = "SELECT stategraph_fence($1, $2, $3::boolean, $4, $5::bigint)";
inline constexpr std::string_view sql_begin = "BEGIN";
inline constexpr std::string_view sql_begin_snapshot = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
inline constexpr std::string_view sql_commit = "COMMIT";
inline constexpr std::string_view sql_release_lease = "DELETE FROM stategraph_leases WHERE thread_id = $1 AND owner = $2";
/// The fence of a call's last write and its lease's release in one statement, first in the
/// transaction: our lease's row is deleted (and stays locked until the commit, as the fence's
/// `FOR UPDATE` keeps it); when it is not ours any more, `stategraph_fence` raises what it raises
/// for a lost lease (SG001, the holder's name), undoing the transaction. Half the server's time of
/// the fence and the release apart (a plpgsql call and a second statement).
inline constexpr std::string_view sql_fence_and_release =
    "WITH gone AS (DELETE FROM stategraph_leases WHERE thread_id = $1 AND owner = $2 RETURNING 1) "
    "SELECT CASE WHEN EXISTS (SELECT 1 FROM gone) THEN 0 ELSE "
    "(SELECT 1 FROM stategraph_fence($1, $2, true, NULL, $3::bigint)) END";
/// $1 the thread, $2 this saver, $3 the time to live in ms, $4 a holder known to be gone (or
/// null): a row back when the lease is taken (or renewed: it was ours).
inline constexpr std::string_view sql_take_lease =
    "INSERT INTO stategraph_leases(thread_id, owner, expires_at) VALUES($1, $2, stategraph_now_ms() + $3::bigint) "
    "ON CONFLICT (thread_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at "
    "WHERE stategraph_leases.owner = excluded.owner OR stategraph_leases.expires_at <= stategraph_now_ms() "
    "OR stategraph_leases.owner = $4 RETURNING owner";
inline constexpr std::string_view sql_rollback = "ROLLBACK";

inline constexpr std::string_view sql_put_graph =
    "INSERT INTO stategraph_graphs(version, value) VALUES($1, $2) ON CONFLICT (version) DO NOTHING";
inline constexpr std::string_view sql_answer = "SELECT answer FROM stategraph_answers WHERE call_id = $1";
inline constexpr std::string_view sql_forget_answers = "DELETE FROM stategraph_answers WHERE at < stategraph_now_ms() - 600000";

/// The channel holding the graph's shape lines, versioned by the graph signature.
inline constexpr std::string_view graph_channel = reserved::graph;

using common::now_ms;
using common::quote;

/// A PostgreSQL array literal of text ("{"a","b"}"), for a `$n::text[]` parameter.
inline std::string text_array(const std::vector<std::string>& items) {
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

/// A one-dimensional array in PostgreSQL's binary array form, for a `$n::type[]` parameter sent
/// as bytes: the header (1 dimension, no NULLs, the element type), then each item's length and
/// bytes (an element's binary form), all integers big-endian.
class binary_array {
public:
    static constexpr std::uint32_t int8_oid = 20, text_oid = 25, bytea_oid = 17;

    binary_array(std::uint32_t element_oid, std::size_t count) {
        put32(1);
        put32(0);
        put32(element_oid);
        put32(static_cast<std::uint32_t>(count));
        put32(1);
    }
    /// A text or bytea element: its bytes as they are.
    binary_array& add(std::string_view item) {
        put32(static_cast<std::uint32_t>(item.size()));
        out_ += item;
        return *this;
    }
    /// An int8 element.
    binary_array& add(std::int64_t v) {
        put32(8);
        const auto u = static_cast<std::uint64_t>(v);
        for (int shift = 56; shift >= 0; shift -= 8) out_.push_back(static_cast<char>((u >> shift) & 0xff));
        return *this;
    }
    std::string take() && { return std::move(out_); }

private:
    void put32(std::uint32_t v) {
        for (int shift = 24; shift >= 0; shift -= 8) out_.push_back(static_cast<char>((v >> shift) & 0xff));
    }
    std::string out_;
};

template <class T>
inline std::string array_of(std::uint32_t oid, const std::vector<T>& items) {
    binary_array a(oid, items.size());
    for (const auto& item : items) a.add(item);
    return std::move(a).take();
}

using pg::identifier;

/// A value's stored bytes, keyed by (channel, version), already checked (unsealed).
using value_map = std::map<std::pair<std::string, std::string>, std::string>;

} // namespace pg_detail

// The saver's files name these unqualified, as when they were one file.
using namespace pg_detail;

struct postgres_saver::impl {
    postgres_options opt;
    std::string owner;
    pg::pool pool;

    std::mutex mutex; ///< guards `held`, `lost`, `stored_graphs`, `read_graphs`, `chain_hints`
    /// Threads whose lease this saver took and has not released; `lost`: those another owner
    /// took over (or broke). Writes on a thread in `held` must find our lease.
    std::set<std::string> held, lost;
    std::set<std::string> stored_graphs;
    /// Graph shapes read, by version (the stored bytes, sealed, checked again at each use): a row
    /// of `stategraph_graphs` never changes once written, so a process reads each shape once.
    std::map<std::string, std::string> read_graphs;
    /// (thread, ns, channel) whose values this saver met as appended chains (written with an
    /// `extends`, or read as one): a read asks for such a channel's links with its first round
    /// trip instead of with a second. Only a hint: forgotten when it grows large.
    std::set<std::tuple<std::string, std::string, std::string>> chain_hints;
    static constexpr std::size_t max_chain_hints = 4096, max_read_graphs = 64, max_last_written = 1024;
    /// The newest checkpoint this saver stored, per (thread, ns): its id and versions (see
    /// `start_call`). Only a guess: forgotten when it grows large.
    struct written {
        std::string id;
        std::vector<std::pair<std::string, std::string>> versions;
    };
    std::map<std::pair<std::string, std::string>, written> last_written;
    /// A paused thread's state kept for its resume (see `start_call` and
    /// `postgres_saver::remembered`), root namespace only. `running`: per thread whose call this
    /// saver is running (its lease held), the stored bytes of the values the call started from
    /// and of those it wrote since, by (channel, version). `paused`: per thread whose last call
    /// here ended at an interrupt, those bytes, and the id and `xmin` (the writing transaction)
    /// of the thread's newest row as that call's end stored it. A start that finds the newest row
    /// still the same (id and xmin: nobody wrote the thread since, nor put that checkpoint again)
    /// takes the values from here and reads only the row and the pending writes.
    struct paused_thread {
        std::string id, xmin;
        value_map values;
    };
    struct running_call {
        value_map values;
        std::string newest; ///< the newest checkpoint id the call stored so far ("" none yet)
    };
    std::map<std::string, running_call> running;
    std::map<std::string, paused_thread> paused;
    std::uint64_t paused_recalled = 0;
    /// At most this many paused threads' states, of at most `max_paused_bytes` each (a larger
    /// state is read back from the server).
    static constexpr std::size_t max_paused = 64, max_paused_bytes = 1 << 20;
    /// Calls followed at once in `running` (a call beyond them is not kept for its pause).
    static constexpr std::size_t max_running = 1024;
    /// Forgets what `running` holds for `thread` (a write outside the call's end, a release).
    void stop_running(const std::string& thread) {
        std::lock_guard lock(mutex);
        running.erase(thread);
    }
    /// Notes the newest of `cps` (not empty), just stored, as the newest checkpoint of (thread,
    /// ns) this saver stored (`mutex` not held).
    void note_written(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps);
    /// Notes the channels of (thread, ns) met as chains, and forgets those whose value asked for
    /// was whole (`mutex` not held; one lock for a whole batch or read).
    void hint_chains(const std::string& thread, const std::string& ns, const std::set<std::string>& chains,
                     const std::set<std::string>& whole = {}) {
        if (chains.empty() && whole.empty()) return;
        std::lock_guard lock(mutex);
        for (const auto& channel : whole) chain_hints.erase({thread, ns, channel});
        for (const auto& channel : chains) {
            auto key = std::make_tuple(thread, ns, channel);
            if (chain_hints.count(key)) continue;
            if (chain_hints.size() >= max_chain_hints) chain_hints.clear();
            chain_hints.insert(std::move(key));
        }
    }

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
        /// A call's end giving back a lease this saver held: another live holder met by a retry
        /// (`fence(c, true)` lets only a missing row pass) took the lease from us, whether or not
        /// the first try committed: `lease_lost`, not `thread_busy`.
        bool releasing_held = false;
    };

    /// The fence of a write on `c.thread` (first in its transaction, after BEGIN).
    /// `may_be_released`: a retried write that also deletes the lease's row, whose first attempt
    /// may have committed: a missing row then passes (another holder's row is still refused).
    /// The fence and release of a call's last write in one statement (`sql_fence_and_release`),
    /// when this saver holds `c.thread` and no earlier attempt may have committed; nullopt
    /// otherwise (then `fence` first and `sql_release_lease` last).
    std::optional<pg::statement> fence_and_release(const call& c) {
        if (c.attempt > 0 || !c.gone.empty()) return std::nullopt;
        {
            std::lock_guard lock(mutex);
            if (!held.count(c.thread)) return std::nullopt;
        }
        pg::statement s(sql_fence_and_release);
        s.text(c.thread).text(owner).integer(lease_ms());
        return s;
    }

    pg::statement fence(const call& c, bool may_be_released = false) {
        bool ours = false;
        {
            std::lock_guard lock(mutex);
            ours = held.count(c.thread) != 0 && !may_be_released;
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
                    if (c.releasing_held && c.attempt > 0) {
                        throw_lost(c.thread, holder);
                    } else if (c.gone != holder && lease_owner::is_gone(holder)) {
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

    static asio::awaitable<void> finish(pg::connection& conn, std::string_view sql, std::chrono::milliseconds timeout) {
        std::vector<pg::statement> end;
        end.emplace_back(sql);
        (void)co_await conn.run(end, timeout);
    }

    /// A new id for a call whose answer is kept (sql_answer): this saver's owner name and a count.
    std::string call_id() {
        static std::atomic<std::uint64_t> calls{0};
        return owner + "#" + std::to_string(++calls);
    }

    // -- checkpoints and pending writes (postgres_checkpoints.cpp) --------------------------------
    /// Reading values round by round (see `fetch_values`): `add_round` appends the statements
    /// asking for `wanted` to a batch (which may hold other statements), `take_round` reads their
    /// rows into `values` and leaves in `wanted` the links still missing; `finish` runs rounds
    /// until nothing is missing.
    struct value_fetch {
        impl& self;
        const std::string& thread;
        const std::string& ns;
        value_map& values;
        std::set<std::pair<std::string, std::string>> wanted;
        std::set<std::pair<std::string, std::string>> asked = {};
        std::vector<std::pair<std::pair<std::string, std::string>, std::string>> known_graphs = {}; ///< sealed bytes
        /// When given: the keys read from inside checkpoint rows (`vals`) rather than `stategraph_blobs`.
        std::set<std::pair<std::string, std::string>>* from_rows = nullptr;
        int exact_at = -1, chains_at = -1, graphs_at = -1, rows_at = -1, window_at = -1; ///< the last round's statements in its batch
        std::map<std::string, std::string> window_upto = {}; ///< the last round's chains: channel -> newest link asked
        /// Rows read before a chain's newest link, for links stored inside checkpoint rows.
        static constexpr std::int64_t row_window = 48;
        bool first = true;

        void add_round(std::vector<pg::statement>& batch);
        void take_round(const std::vector<pg::result>& res);
        /// Runs the remaining rounds (`also`, when given, in the next one; its rows in `also_rows`).
        asio::awaitable<void> finish(pg::connection& conn, const pg::statement* also, pg::result* also_rows);
    };
    asio::awaitable<void> fetch_values(pg::connection& conn, const std::string& thread, const std::string& ns,
                                       std::set<std::pair<std::string, std::string>> wanted, value_map& values,
                                       const pg::statement* also, pg::result* also_rows,
                                       std::set<std::pair<std::string, std::string>>* from_rows = nullptr);
    /// The (channel, sealed bytes) pairs of a checkpoint row's `vals`; corrupt_checkpoint naming
    /// the checkpoint when they cannot be read.
    std::vector<std::pair<std::string_view, std::string_view>> decode_row_values(const std::string& thread, const std::string& ns,
                                                                                 const std::string& id,
                                                                                 std::string_view bytes) const;
    json::value parse(std::string_view text, const std::string& thread, const std::string& ns, const std::string& what,
                      std::vector<std::string> names) const;
    /// Reads the values and pending writes of `tuples` (one thread and namespace); with `keep`,
    /// leaves there the stored bytes read.
    asio::awaitable<void> assemble(pg::connection& conn, std::vector<checkpoint_tuple>& tuples, value_map* keep = nullptr);
    /// The values of `tuples` (one thread and namespace) resolved from `values`, and their
    /// pending writes from `w` (rows of `sql_get_writes`).
    void fill_tuples(std::vector<checkpoint_tuple>& tuples, const value_map& values, const pg::result& w);
    asio::awaitable<void> put(const std::string& thread, const std::string& ns, const checkpoint& cp);
    /// `cps` in one transaction, sent in one round trip.
    asio::awaitable<void> put_many(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps);
    /// Appends the statements storing `cps` (their rows, their values; shapes not stored yet, listed
    /// in `graphs`): plain INSERTs, a checkpoint's small values inside its row; or, with `upsert`,
    /// upserts that leave the `vals` of a row met again as they were and put every value in
    /// `stategraph_blobs` (read before `vals`).
    /// With `capture`: every value's stored bytes (unsealed) are also copied there, by (channel,
    /// version), as a read would find them.
    void add_puts(std::vector<pg::statement>& batch, std::vector<std::string>& graphs, const std::string& thread,
                  const std::string& ns, std::span<const checkpoint> cps, bool upsert, value_map* capture = nullptr);
    asio::awaitable<void> put_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                     const std::vector<pending_write>& writes);
    /// Appends the statements storing `writes` against `checkpoint_id`.
    void add_writes(std::vector<pg::statement>& batch, const std::string& thread, const std::string& ns,
                    const std::string& checkpoint_id, const std::vector<pending_write>& writes);
    /// The checkpoints, the writes and the lease's release in one transaction, sent in one round trip.
    asio::awaitable<void> end_call(const std::string& thread, const std::string& ns, const saver::call_end& end);
    asio::awaitable<std::optional<checkpoint_tuple>> get(const std::string& thread, const std::string& ns,
                                                         const std::optional<std::string>& id);
    /// The lease taken and the checkpoint's row read in one round trip, its values in one more.
    asio::awaitable<common::call_start> start_call(const std::string& thread, const std::string& ns,
                                                   const std::optional<std::string>& id);
    asio::awaitable<std::vector<checkpoint_tuple>> list(const std::string& thread, const std::string& ns,
                                                        const list_options& o);

    // -- thread maintenance (postgres_threads.cpp) ------------------------------------------------
    void delete_rows(std::vector<pg::statement>& batch, const std::string& thread) const;
    asio::awaitable<void> delete_thread(const std::string& thread);
    asio::awaitable<void> prune_thread(pg::connection& conn, const std::string& thread, std::size_t keep_last);
    asio::awaitable<void> prune(const std::string& thread, std::size_t keep_last);
    asio::awaitable<thread_stats> stats(const std::string& thread);
    asio::awaitable<bool> holds_thread(const std::string& thread);
    asio::awaitable<std::size_t> rewind_thread(const std::string& thread, const std::string& checkpoint_id);
    asio::awaitable<void> copy_thread(const std::string& from, const std::string& to);
    asio::awaitable<std::vector<thread_info>> list_threads(const thread_query& q, const json::object* match);
    asio::awaitable<sweep_result> sweep(ttl_policy policy);

    // -- node cache and graph shapes (postgres_cache.cpp) -----------------------------------------
    asio::awaitable<std::optional<json::value>> cache_get(const std::string& ns, const std::string& key);
    asio::awaitable<void> cache_put(const std::string& ns, const std::string& key, const json::value& value,
                                    std::chrono::milliseconds ttl);
    asio::awaitable<std::size_t> cache_clear(const std::vector<std::string>& namespaces);
    asio::awaitable<void> put_graph(const std::string& signature, const std::vector<std::string>& shape);
    asio::awaitable<std::optional<std::vector<std::string>>> get_graph(const std::string& signature);

    // -- leases (postgres_leases.cpp) -------------------------------------------------------------
    asio::awaitable<void> acquire(const std::string& thread);
    asio::awaitable<void> release(const std::string& thread);
    asio::awaitable<std::optional<std::string>> break_lease(const std::string& thread);
    asio::awaitable<void> renew_held();
    static asio::awaitable<void> keep_leases(impl* self);
    void start_keeper();
    void stop_keeper();
    asio::awaitable<void> release_all();

    // -- opening (postgres_saver.cpp) -------------------------------------------------------------
    asio::awaitable<void> migrate();
};

} // namespace stategraph::checkpoint
