/// @file run_store_postgres.cpp
/// @brief The PostgreSQL backend of `run_store` (`open_postgres_run_store`), over the
/// checkpointer's non-blocking libpq layer (checkpoint/src/pg_connection.hpp).
///
/// - Statements: `?N` becomes `$N`; every statement is prepared once per pooled connection and
///   answers in text form, its columns mapped by type (int2/int4/int8/bool: integers, NULL:
///   none, anything else: its text).
/// - Transactions: BEGIN rides with the body's first statement, COMMIT follows its last, all on
///   one leased connection. A serialization failure, a deadlock or a lost connection runs the
///   whole body again with backoff for `retry_for`; a connection lost during COMMIT is not
///   retried (the commit may have happened) and throws a transient `run_store_error` saying so.
/// - Schema: made when missing; every connection of the pool sets `search_path` to it. Stores
///   opened at once on one schema make its tables one after the other (a session advisory lock
///   held while the store is built).
/// - Notifications: `pg_notify` on channels of the schema's own (`sg_runs` on schema `app` is
///   `sg_runs.app`; on `public`, `sg_runs`), so that stores of two schemas of one database do
///   not wake each other. `listen` keeps one connection of its own on a private thread, LISTENing
///   on the store's channels, and connects again (with backoff) when it drops; after such a gap
///   every channel is reported once with an empty payload, as anything may have happened.

#include <stategraph/core/detail/spawned.hpp>
#include <stategraph/server/run_store.hpp>

#include "pg_connection.hpp"
#include "wakeup_subscribers.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <libpq-fe.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace stategraph::server {

namespace {

namespace asio = boost::asio;
namespace pg = checkpoint::pg;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

/// Opening a connection, at most.
constexpr std::chrono::milliseconds connect_timeout = 5s;
/// One round trip, at most.
constexpr std::chrono::milliseconds statement_timeout = 30s;
/// Transient failures of one call are retried this long, the pauses doubling between these.
constexpr std::chrono::milliseconds retry_for = 15s;
constexpr std::chrono::milliseconds first_pause = 10ms, longest_pause = 500ms;
/// The listener's pauses between attempts to connect again.
constexpr std::chrono::milliseconds listen_first_pause = 50ms, listen_longest_pause = 2s;
/// How often the listener looks whether it is asked to stop.
constexpr std::chrono::milliseconds listen_poll = 100ms;

/// The channels `run_store` notifies on (run_store.cpp): a run queued, cancelled or finished;
/// a run's new events.
constexpr std::array<std::string_view, 2> store_channels{"sg_runs", "sg_events"};

// pg_type OIDs of the columns read as integers.
constexpr unsigned bool_oid = 16, int8_oid = 20, int2_oid = 21, int4_oid = 23;

/// `sql` with `?N` parameters written `$N` (outside quoted literals and identifiers; a `?` not
/// followed by a digit, such as jsonb's operator, stays).
std::string dollar_parameters(std::string_view sql) {
    std::string out;
    out.reserve(sql.size());
    char quote = 0;
    for (std::size_t i = 0; i < sql.size(); ++i) {
        const char ch = sql[i];
        if (quote) {
            if (ch == quote) quote = 0; // a doubled quote closes and opens again: same result
        } else if (ch == '\'' || ch == '"') {
            quote = ch;
        } else if (ch == '?' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9') {
            out += '$';
            continue;
        }
        out += ch;
    }
    return out;
}

pg::statement make_statement(const std::string& sql, const std::vector<sql_value>& params) {
    pg::statement s(sql);
    s.text_results = true;
    for (const auto& p : params) {
        if (const auto* i = std::get_if<std::int64_t>(&p)) s.integer(*i);
        else if (const auto* t = std::get_if<std::string>(&p)) s.text(*t);
        else s.null();
    }
    return s;
}

std::vector<sql_row> rows_of(const pg::result& r) {
    const int cols = r.columns();
    std::vector<unsigned> types(static_cast<std::size_t>(cols));
    for (int c = 0; c < cols; ++c) types[static_cast<std::size_t>(c)] = r.type(c);
    std::vector<sql_row> out(static_cast<std::size_t>(r.rows()));
    for (int row = 0; row < r.rows(); ++row) {
        auto& cells = out[static_cast<std::size_t>(row)].cols;
        cells.reserve(types.size());
        for (int c = 0; c < cols; ++c) {
            if (r.is_null(row, c)) {
                cells.emplace_back(std::monostate{});
                continue;
            }
            const auto text = r.bytes(row, c);
            switch (types[static_cast<std::size_t>(c)]) {
            case bool_oid: cells.emplace_back(std::int64_t{text == "t" ? 1 : 0}); break;
            case int2_oid:
            case int4_oid:
            case int8_oid: {
                std::int64_t v = 0;
                std::from_chars(text.data(), text.data() + text.size(), v);
                cells.emplace_back(v);
                break;
            }
            default: cells.emplace_back(std::string(text));
            }
        }
    }
    return out;
}

/// The first words of a statement, for messages.
std::string excerpt(std::string_view sql) {
    std::string out;
    for (char ch : sql.substr(0, 80)) out += (ch == '\n' || ch == '\t') ? ' ' : ch;
    return sql.size() > 80 ? out + "..." : out;
}

/// "PostgreSQL host:port/db (schema s)", from the connection string (no password).
std::string describe_conninfo(const std::string& conninfo, const std::string& schema) {
    std::string host = "localhost", port = "5432", db, user;
    char* err = nullptr;
    if (PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), &err)) {
        for (auto* o = opts; o->keyword; ++o) {
            if (!o->val || !*o->val) continue;
            const std::string_view k = o->keyword;
            if (k == "host" || (k == "hostaddr" && host == "localhost")) host = o->val;
            else if (k == "port") port = o->val;
            else if (k == "dbname") db = o->val;
            else if (k == "user") user = o->val;
        }
        PQconninfoFree(opts);
    } else {
        PQfreemem(err);
    }
    if (db.empty()) db = user;
    return "PostgreSQL " + host + ":" + port + "/" + db + (schema.empty() ? "" : " (schema " + schema + ")");
}

/// A channel of the schema's own: `channel.schema` (`channel` on public); when that exceeds
/// PostgreSQL's 63 bytes, the schema's part is a hash of it.
std::string schema_channel(std::string_view channel, const std::string& schema) {
    if (schema.empty() || schema == "public") return std::string(channel);
    std::string out = std::string(channel) + "." + schema;
    if (out.size() <= 63) return out;
    std::uint64_t h = 14695981039346656037ull; // FNV-1a
    for (unsigned char ch : schema) h = (h ^ ch) * 1099511628211ull;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::string(channel.substr(0, 63 - 17)) + "." + hex;
}

/// A connection was lost while COMMIT was on its way: the transaction may have committed, so
/// the body is not run again.
class commit_unknown : public run_store_error {
public:
    using run_store_error::run_store_error;
};

class postgres_backend;

/// `notify`, sent alone or in a transaction's COMMIT round trip.
constexpr std::string_view sql_notify = "SELECT pg_catalog.pg_notify($1, $2)";

/// The statements of one transaction on one leased connection.
class pg_session final : public run_store_backend::session {
public:
    pg_session(const postgres_backend& be, pg::connection& conn) : be_(be), conn_(conn) {}

    boost::asio::awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) override {
        auto r = co_await run(sql, params);
        co_return rows_of(r);
    }
    boost::asio::awaitable<std::int64_t> exec(std::string_view sql, std::vector<sql_value> params) override {
        auto r = co_await run(sql, params);
        co_return r.affected();
    }

    /// One pipeline: the statement once per row (and BEGIN first when not sent yet).
    boost::asio::awaitable<std::int64_t> exec_many(std::string_view sql, const std::vector<std::vector<sql_value>>& rows) override;

    bool begun = false;   ///< BEGIN was sent (and the transaction is open unless it failed)
    bool aborted = false; ///< a statement failed: the connection rolled the transaction back
    bool broken = false;  ///< the connection is lost

private:
    asio::awaitable<pg::result> run(std::string_view sql, const std::vector<sql_value>& params);
    /// One pipeline: BEGIN when not sent yet, then `sql` once per row; the rows' results.
    asio::awaitable<std::vector<pg::result>> send(std::string_view sql, const std::vector<const std::vector<sql_value>*>& rows);
    const postgres_backend& be_;
    pg::connection& conn_;
};

class postgres_backend final : public run_store_backend {
public:
    explicit postgres_backend(const postgres_run_store_options& o)
        : conninfo_(o.conninfo), schema_(o.schema), name_(describe_conninfo(o.conninfo, o.schema)),
          prefix_("run store (" + name_ + ")"),
          pool_(o.conninfo, o.schema.empty() ? std::string() : pg::identifier(o.schema) + ", pg_catalog", o.pool_size,
                connect_timeout) {}
    ~postgres_backend() override { stop_listening(); }

    /// Connects, makes the schema when missing and takes the schema's setup lock (blocking;
    /// before the store is built): the store's tables are then made by one instance at a time
    /// (`CREATE TABLE IF NOT EXISTS` run at once by two sessions may fail in one of them). The
    /// lock is the returned connection's: closing it releases it.
    std::unique_ptr<pg::connection> prepare() {
        asio::io_context io;
        auto done = asio::co_spawn(io, make_schema(), asio::use_future);
        io.run();
        try {
            return done.get();
        } catch (const pg::connection_lost& e) {
            throw run_store_error(prefix_ + ": cannot reach the server: " + e.what(), true);
        } catch (const pg::server_error& e) {
            throw run_store_error(prefix_ + ": the server refused to set up the schema: " + e.what(), e.transient());
        }
    }

    // -- run_store_backend ----------------------------------------------------------------------
    asio::awaitable<void> transaction(const body& work) override {
        co_await retrying<bool>("a transaction", [this, &work](pg::pool::lease& conn) -> asio::awaitable<bool> {
            pg_session s(*this, *conn);
            s.at_commit.clear();
            std::exception_ptr failed;
            try {
                co_await work(s);
            } catch (...) {
                failed = std::current_exception();
            }
            if (failed) {
                if (s.broken) conn.discard();
                else if (s.begun && !s.aborted) co_await rollback(conn);
                std::rethrow_exception(failed);
            }
            if (s.aborted || s.broken) // the body caught a statement's error and went on
                throw run_store_error(prefix_ + ": a statement of the transaction failed (the body went on after its "
                                              "error); nothing was committed",
                                      false);
            if (!s.begun) co_return true; // no statement: nothing to commit
            // The notifications go in the COMMIT's round trip: delivered when it commits.
            std::vector<pg::statement> commit;
            for (const auto& [channel, payload] : s.at_commit) {
                commit.emplace_back(sql_notify);
                commit.back().text(schema_channel(channel, schema_)).text(payload);
            }
            commit.emplace_back("COMMIT");
            bool lost = false;
            std::string why;
            try {
                (void)co_await conn->run(commit, statement_timeout);
            } catch (const pg::connection_lost& e) {
                lost = true;
                why = e.what();
            } catch (const pg::server_error& e) {
                throw error("COMMIT", e);
            }
            if (lost) {
                conn.discard();
                throw commit_unknown(prefix_ + ": the connection was lost while committing, so the transaction may or may "
                                             "not have committed: " + why,
                                     true);
            }
            co_return true;
        });
    }

    asio::awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) override {
        const std::string text = dollar_parameters(sql);
        co_return co_await retrying<std::vector<sql_row>>(
            "a statement", [&](pg::pool::lease& conn) -> asio::awaitable<std::vector<sql_row>> {
                std::vector<pg::statement> batch{make_statement(text, params)};
                std::vector<pg::result> r;
                try {
                    r = co_await conn->run(batch, statement_timeout);
                } catch (const pg::server_error& e) {
                    throw error(sql, e);
                }
                co_return rows_of(r.at(0));
            });
    }

    std::string_view lock_rows() const override { return " FOR UPDATE"; }
    std::string_view lock_rows_skip_locked() const override { return " FOR UPDATE SKIP LOCKED"; }
    std::string_view bigint_type() const override { return "BIGINT"; }
    std::string describe() const override { return name_; }

    asio::awaitable<void> notify(std::string_view channel, std::string_view payload) override {
        std::vector<sql_value> params{schema_channel(channel, schema_), std::string(payload)};
        (void)co_await query(sql_notify, std::move(params));
    }
    bool notifies_at_commit() const noexcept override { return true; }

    bool listen(std::function<void(std::string channel, std::string payload)> on) override;

    // -- for the session ------------------------------------------------------------------------
    /// The server's refusal of `sql`, as the store's error.
    run_store_error error(std::string_view sql, const pg::server_error& e) const {
        return run_store_error(prefix_ + ": the server refused `" + excerpt(sql) + "`: " + e.what(), e.transient());
    }
    run_store_error lost(std::string_view sql, const pg::connection_lost& e) const {
        return run_store_error(prefix_ + ": the connection was lost during `" + excerpt(sql) + "`: " + e.what(), true);
    }
    const std::string& prefix() const noexcept { return prefix_; }

private:
    asio::awaitable<std::unique_ptr<pg::connection>> make_schema() {
        auto c = co_await pg::connection::open(conninfo_, connect_timeout);
        if (!schema_.empty()) {
            const std::string sql = pg::create_schema_if_missing(schema_);
            std::vector<pg::statement> batch{pg::statement(sql)};
            try {
                (void)co_await c->run(batch, statement_timeout);
            } catch (const pg::server_error& e) {
                // Another process made it between the check and the CREATE: it is there.
                if (e.sqlstate() != "23505" && e.sqlstate() != "42P06") throw;
            }
        }
        static constexpr std::string_view lock = "SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext($1))";
        std::vector<pg::statement> batch{pg::statement(lock)};
        batch.back().text("stategraph run store " + schema_);
        (void)co_await c->run(batch, statement_timeout);
        co_return c;
    }

    asio::awaitable<void> rollback(pg::pool::lease& conn) {
        std::vector<pg::statement> batch{pg::statement("ROLLBACK")};
        bool ok = true;
        try {
            (void)co_await conn->run(batch, statement_timeout);
        } catch (const std::exception&) {
            ok = false;
        }
        if (!ok) conn.discard();
    }

    /// Runs `attempt` on a pooled connection; a transient failure (a lost connection, a server
    /// restarting, a serialization failure, a deadlock) runs it again with backoff until
    /// `retry_for` is spent, then throws a transient `run_store_error`.
    template <class R, class F>
    asio::awaitable<R> retrying(const char* what, F attempt) {
        const auto deadline = clock::now() + retry_for;
        auto pause = first_pause;
        std::string why;
        for (int tries = 1;; ++tries) {
            bool lost = false;
            try {
                auto conn = co_await pool_.get();
                co_return co_await attempt(conn);
            } catch (const commit_unknown&) {
                throw;
            } catch (const run_store_error& e) {
                if (!e.transient()) throw;
                why = e.what();
            } catch (const pg::connection_lost& e) {
                why = prefix_ + ": cannot reach the server: " + e.what();
                lost = true;
            } catch (const pg::server_error& e) { // setting up a new connection
                if (!e.transient()) throw run_store_error(prefix_ + ": " + e.what(), false);
                why = prefix_ + ": " + e.what();
            }
            if (clock::now() + pause >= deadline)
                throw run_store_error(why + " (" + what + ", given up after " + std::to_string(tries) + " attempts in " +
                                          std::to_string(retry_for.count()) + " ms)",
                                      true);
            if (lost) pool_.clear(); // the others are likely gone too
            asio::steady_timer t(co_await asio::this_coro::executor, pause);
            co_await t.async_wait(asio::use_awaitable);
            pause = std::min(pause * 2, longest_pause);
        }
    }

    // -- listening ----------------------------------------------------------------------------
    struct listener;
    void stop_listening();

    std::string conninfo_, schema_, name_;
    std::string prefix_; ///< "run store (PostgreSQL ...)": how messages begin
    pg::pool pool_;
    std::mutex listen_mutex_;
    std::unique_ptr<listener> listener_;
};

asio::awaitable<std::vector<pg::result>> pg_session::send(std::string_view sql, const std::vector<const std::vector<sql_value>*>& rows) {
    if (aborted || broken)
        throw run_store_error(be_.prefix() + ": `" + excerpt(sql) + "` after the transaction failed", false);
    const std::string text = dollar_parameters(sql);
    std::vector<pg::statement> batch;
    batch.reserve(rows.size() + 1);
    const bool with_begin = !begun;
    if (with_begin) batch.emplace_back("BEGIN");
    for (const auto* row : rows) batch.push_back(make_statement(text, *row));
    std::vector<pg::result> r;
    try {
        r = co_await conn_.run(batch, statement_timeout);
    } catch (const pg::connection_lost& e) {
        broken = true;
        throw be_.lost(sql, e);
    } catch (const pg::server_error& e) {
        begun = true;
        aborted = true;
        throw be_.error(sql, e);
    }
    begun = true;
    if (with_begin) r.erase(r.begin());
    co_return r;
}

asio::awaitable<pg::result> pg_session::run(std::string_view sql, const std::vector<sql_value>& params) {
    const std::vector<const std::vector<sql_value>*> one{&params};
    auto r = co_await send(sql, one);
    co_return std::move(r.back());
}

asio::awaitable<std::int64_t> pg_session::exec_many(std::string_view sql, const std::vector<std::vector<sql_value>>& rows) {
    if (rows.empty()) co_return 0;
    std::vector<const std::vector<sql_value>*> each;
    each.reserve(rows.size());
    for (const auto& row : rows) each.push_back(&row);
    auto r = co_await send(sql, each);
    std::int64_t changed = 0;
    for (const auto& one : r) changed += one.affected();
    co_return changed;
}

/// One connection of its own, on a thread of its own, LISTENing on the store's channels.
struct postgres_backend::listener {
    using callback = std::function<void(std::string, std::string)>;

    listener(std::string conninfo, const std::string& schema) : conninfo(std::move(conninfo)) {
        for (auto ch : store_channels) {
            channels.emplace_back(schema_channel(ch, schema), std::string(ch));
            listen_sql.push_back("LISTEN " + pg::identifier(channels.back().first));
        }
    }
    ~listener() {
        stopping = true;
        if (thread.joinable()) thread.join();
    }

    void start() {
        thread = std::thread([this] {
            asio::co_spawn(io, loop(), stategraph::detail::report_to("postgres run store: the LISTEN connection"));
            io.run();
        });
    }

    /// Waits (up to `timeout`) until the first LISTEN is in place.
    void wait_listening(std::chrono::milliseconds timeout) {
        std::unique_lock lock(mutex);
        cv.wait_for(lock, timeout, [&] { return listening; });
    }

    void add(callback on) { subscribers.add(std::move(on)); }

    void deliver(const std::string& channel, const std::string& payload) { subscribers.deliver(channel, payload); }

    /// The store's name of a channel heard.
    std::string logical(const std::string& physical) const {
        for (const auto& [p, l] : channels)
            if (p == physical) return l;
        return physical;
    }

    asio::awaitable<void> pause(std::chrono::milliseconds d) {
        auto ex = co_await asio::this_coro::executor;
        const auto until = clock::now() + d;
        while (!stopping && clock::now() < until) {
            asio::steady_timer t(ex, std::min<clock::duration>(listen_poll, until - clock::now()));
            co_await t.async_wait(asio::use_awaitable);
        }
    }

    asio::awaitable<void> loop() {
        auto wait = listen_first_pause;
        bool reconnect = false;
        while (!stopping) {
            try {
                auto c = co_await pg::connection::open(conninfo, connect_timeout);
                std::vector<pg::statement> batch;
                for (const auto& sql : listen_sql) batch.emplace_back(sql);
                (void)co_await c->run(batch, statement_timeout);
                {
                    std::lock_guard lock(mutex);
                    listening = true;
                }
                cv.notify_all();
                if (reconnect) // what was sent while nobody listened is lost: anything may have happened
                    for (const auto& [physical, name] : channels) deliver(name, "");
                reconnect = true;
                wait = listen_first_pause;
                while (!stopping)
                    for (auto& n : co_await c->notifications(listen_poll)) deliver(logical(n.channel), n.payload);
            } catch (const std::exception&) {
                // Lost, or not reached: again after a pause.
            }
            co_await pause(wait);
            wait = std::min(wait * 2, listen_longest_pause);
        }
    }

    std::string conninfo;
    std::vector<std::pair<std::string, std::string>> channels; ///< the server's name, the store's
    std::vector<std::string> listen_sql;
    asio::io_context io;
    std::thread thread;
    std::atomic<bool> stopping{false};
    std::mutex mutex; ///< guards `listening`
    std::condition_variable cv;
    bool listening = false;
    detail::wakeup_subscribers subscribers;
};

bool postgres_backend::listen(std::function<void(std::string channel, std::string payload)> on) {
    listener* l = nullptr;
    {
        std::lock_guard lock(listen_mutex_);
        if (!listener_) {
            listener_ = std::make_unique<listener>(conninfo_, schema_);
            listener_->add(std::move(on));
            listener_->start();
        } else {
            listener_->add(std::move(on));
        }
        l = listener_.get();
    }
    // From now on: the LISTEN is in place before this returns (unless the server cannot be
    // reached now; the listener keeps trying).
    l->wait_listening(connect_timeout);
    return true;
}

void postgres_backend::stop_listening() {
    std::unique_ptr<listener> l;
    {
        std::lock_guard lock(listen_mutex_);
        l = std::move(listener_);
    }
}

} // namespace

std::shared_ptr<run_store> open_postgres_run_store(postgres_run_store_options options) {
    auto backend = std::make_shared<postgres_backend>(options);
    const auto setup_lock = backend->prepare();
    return std::make_shared<run_store>(std::move(backend), options.store);
}

} // namespace stategraph::server
