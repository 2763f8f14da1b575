// The run store's rules, written once over SQL that SQLite and PostgreSQL both take: `?N`
// parameters (a backend rewrites them), 64-bit integer times, JSON as text, row locks named by
// the backend (PostgreSQL locks rows; SQLite's write transaction excludes every other writer).
// This file holds what the rest stands on (rows, transactions and their notifications, the
// tables), assistants and threads; runs and their queue are in run_store_queue.cpp, claims,
// workers and events in run_store_workers.cpp, the rows and shared steps in run_store_sql.hpp.

#include "run_store_sql.hpp"

#include <stategraph/server/notifier.hpp>
#include <stategraph/server/run_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <stategraph/core/utf8.hpp>

#include <algorithm>
#include <cmath>
#include <charconv>

namespace stategraph::server {

namespace json = boost::json;
namespace net = boost::asio;
using net::awaitable;

using namespace run_store_sql;

std::int64_t sql_row::integer(std::size_t i) const {
    const auto& c = cols.at(i);
    if (const auto* n = std::get_if<std::int64_t>(&c)) return *n;
    if (const auto* s = std::get_if<std::string>(&c)) {
        std::int64_t v = 0;
        std::from_chars(s->data(), s->data() + s->size(), v);
        return v;
    }
    return 0;
}

std::string sql_row::text(std::size_t i) const {
    const auto& c = cols.at(i);
    if (const auto* s = std::get_if<std::string>(&c)) return *s;
    if (const auto* n = std::get_if<std::int64_t>(&c)) return std::to_string(*n);
    return {};
}

awaitable<std::int64_t> run_store_backend::session::exec_many(std::string_view sql, const std::vector<std::vector<sql_value>>& rows) {
    std::int64_t changed = 0;
    for (const auto& row : rows) {
        std::vector<sql_value> p = row;
        changed += co_await exec(sql, std::move(p));
    }
    co_return changed;
}

awaitable<void> run_store_backend::notify(std::string_view, std::string_view) { co_return; }
bool run_store_backend::listen(std::function<void(std::string, std::string)>) { return false; }

awaitable<void> run_store::notify(std::string_view channel, std::string_view payload) {
    if (opts_.notifier) co_await opts_.notifier->publish(channel, payload);
    else co_await be_->notify(channel, payload);
}

awaitable<void> run_store::commit(const run_store_backend::body& work, const news_of& news) {
    const bool with_commit = !opts_.notifier && be_->notifies_at_commit();
    std::optional<notice> after;
    const run_store_backend::body wrapped = [&](run_store_backend::session& s) -> awaitable<void> {
        after.reset();
        co_await work(s);
        auto n = news();
        if (!n) co_return;
        if (with_commit) s.at_commit.emplace_back(std::move(n->channel), std::move(n->payload));
        else after = std::move(n);
    };
    co_await be_->transaction(wrapped);
    if (after) co_await notify(after->channel, after->payload);
}

bool run_store::listen(std::function<void(std::string channel, std::string payload)> on) {
    // The channels this file notifies on: a run queued, cancelled or ended; a run's new events.
    if (opts_.notifier) return opts_.notifier->subscribe({"sg_runs", "sg_events"}, std::move(on));
    return be_->listen(std::move(on));
}

namespace {

json::value value_of(const std::string& s) {
    if (s.empty()) return nullptr;
    boost::system::error_code ec;
    auto v = json::parse(s, ec);
    return ec ? json::value(nullptr) : v;
}
json::object object_of(const std::string& s) {
    auto v = value_of(s);
    return v.is_object() ? std::move(v.get_object()) : json::object{};
}

} // namespace

namespace run_store_sql {

std::string text_of(const json::value& v) { return serialize_strict_json(v); }
std::string text_of(const json::object& o) { return text_of(json::value(o)); }

// -- threads ------------------------------------------------------------------------------------

thread_record thread_of(const sql_row& r) {
    thread_record t;
    t.key = r.text(0);
    t.thread_id = r.text(1);
    t.owner = r.text(2);
    t.graph_id = r.text(3);
    t.created_at = r.integer(4);
    t.updated_at = r.integer(5);
    t.state_updated_at = r.integer(6);
    t.metadata = object_of(r.text(7));
    t.status = r.text(8);
    t.values = value_of(r.text(9));
    t.interrupts = object_of(r.text(10));
    t.error = value_of(r.text(11));
    t.temporary = r.integer(12) != 0;
    return t;
}

params thread_params(const thread_record& t) {
    return params{t.key,
                  t.thread_id,
                  t.owner,
                  t.graph_id,
                  t.created_at,
                  t.updated_at,
                  t.state_updated_at,
                  text_of(t.metadata),
                  t.status,
                  t.values.is_null() ? sql_value{} : sql_value{text_of(t.values)},
                  text_of(t.interrupts),
                  t.error.is_null() ? sql_value{} : sql_value{text_of(t.error)},
                  std::int64_t{t.temporary ? 1 : 0}};
}

// -- runs ---------------------------------------------------------------------------------------

run_record run_of(const sql_row& r) {
    run_record x;
    x.run_id = r.text(0);
    x.seq = r.integer(1);
    x.thread_key = r.text(2);
    x.thread_id = r.text(3);
    x.assistant_id = r.text(4);
    x.graph_id = r.text(5);
    x.owner = r.text(6);
    x.created_at = r.integer(7);
    x.updated_at = r.integer(8);
    x.status = r.text(9);
    x.metadata = object_of(r.text(10));
    x.kwargs = object_of(r.text(11));
    x.multitask = r.text(12);
    x.spec = object_of(r.text(13));
    x.not_before = r.integer(14);
    x.worker = r.text(15);
    x.lease_until = r.integer(16);
    x.attempts = static_cast<int>(r.integer(17));
    x.cancel = r.text(18);
    x.anchor = value_of(r.text(19));
    x.result = value_of(r.text(20));
    x.error = value_of(r.text(21));
    return x;
}

std::string select_runs(std::string_view where) {
    return "SELECT " + std::string(run_cols) + " FROM sg_runs " + std::string(where);
}

} // namespace run_store_sql

namespace {

// -- assistants ---------------------------------------------------------------------------------

constexpr std::string_view assistant_cols =
    "assistant_id, version, owner, graph_id, name, description, config, context, metadata, created_at, updated_at";

assistant_record assistant_of(const sql_row& r) {
    assistant_record a;
    a.assistant_id = r.text(0);
    a.version = r.integer(1);
    a.owner = r.text(2);
    a.graph_id = r.text(3);
    a.name = r.text(4);
    a.description = r.text(5);
    a.config = object_of(r.text(6));
    a.context = object_of(r.text(7));
    a.metadata = object_of(r.text(8));
    a.created_at = r.integer(9);
    a.updated_at = r.integer(10);
    return a;
}

params assistant_params(const assistant_record& a) {
    return params{a.assistant_id,       a.version,           a.owner,          a.graph_id,   a.name,      a.description,
                  text_of(a.config),    text_of(a.context),  text_of(a.metadata), a.created_at, a.updated_at};
}

} // namespace

// ---------------------------------------------------------------------------------------------

run_store::run_store(std::shared_ptr<run_store_backend> backend, run_store_options options)
    : be_(std::move(backend)), opts_(options) {
    if (!be_) throw std::invalid_argument("run_store: no backend");
    const std::string big(be_->bigint_type());
    const std::vector<std::string> ddl = {
        "CREATE TABLE IF NOT EXISTS sg_threads (key TEXT PRIMARY KEY, thread_id TEXT NOT NULL, owner TEXT NOT NULL, "
        "graph_id TEXT NOT NULL, created_at " + big + " NOT NULL, updated_at " + big + " NOT NULL, state_updated_at " + big +
            " NOT NULL, metadata TEXT NOT NULL, status TEXT NOT NULL, values_json TEXT, interrupts TEXT NOT NULL, error TEXT, "
            "is_temporary INTEGER NOT NULL, rest_status TEXT NOT NULL DEFAULT 'idle')",
        "CREATE TABLE IF NOT EXISTS sg_runs (run_id TEXT PRIMARY KEY, seq " + big + " NOT NULL, thread_key TEXT NOT NULL, "
        "thread_id TEXT NOT NULL, assistant_id TEXT NOT NULL, graph_id TEXT NOT NULL, owner TEXT NOT NULL, created_at " + big +
            " NOT NULL, updated_at " + big + " NOT NULL, status TEXT NOT NULL, metadata TEXT NOT NULL, kwargs TEXT NOT NULL, "
            "multitask TEXT NOT NULL, spec TEXT NOT NULL, not_before " + big + " NOT NULL, worker TEXT NOT NULL, lease_until " +
            big + " NOT NULL, attempts INTEGER NOT NULL, cancel TEXT NOT NULL, anchor TEXT, result TEXT, error TEXT, finished_at " +
            big + ")",
        "CREATE INDEX IF NOT EXISTS sg_runs_by_thread ON sg_runs (thread_key, seq)",
        "CREATE INDEX IF NOT EXISTS sg_runs_by_status ON sg_runs (status, seq)",
        // claim: a running run is looked at only when its lease is over (not read row by row)
        "CREATE INDEX IF NOT EXISTS sg_runs_by_lease ON sg_runs (status, lease_until)",
        "CREATE INDEX IF NOT EXISTS sg_runs_by_finish ON sg_runs (finished_at)",
        "CREATE TABLE IF NOT EXISTS sg_run_events (run_id TEXT NOT NULL, id " + big +
            " NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, id))",
        "CREATE TABLE IF NOT EXISTS sg_counters (name TEXT PRIMARY KEY, value " + big + " NOT NULL)",
        "CREATE TABLE IF NOT EXISTS sg_assistants (assistant_id TEXT NOT NULL, version " + big +
            " NOT NULL, owner TEXT NOT NULL, graph_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL, "
            "config TEXT NOT NULL, context TEXT NOT NULL, metadata TEXT NOT NULL, created_at " + big + " NOT NULL, updated_at " +
            big + " NOT NULL, latest INTEGER NOT NULL, PRIMARY KEY (assistant_id, version))",
        "INSERT INTO sg_counters (name, value) VALUES ('run_seq', 0) ON CONFLICT (name) DO NOTHING",
    };
    auto be = be_;
    auto migrate = [be, ddl]() -> awaitable<void> {
        const run_store_backend::body work = [&ddl](run_store_backend::session& s) -> awaitable<void> {
            for (const auto& sql : ddl) {
                params none;
                co_await s.exec(sql, std::move(none));
            }
        };
        co_await be->transaction(work);
    };
    net::io_context io;
    auto done = net::co_spawn(io, migrate(), net::use_future);
    io.run();
    done.get();
}

run_store::run_store(run_store_options options) : opts_(std::move(options)) {}

run_store::~run_store() = default;

run_store_backend& run_store::backend() const {
    if (!be_) throw std::logic_error("run_store::backend: this store is kept in memory, over no SQL (open_memory_run_store)");
    return *be_;
}

std::int64_t run_store::now() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// -- assistants -----------------------------------------------------------------------------------

awaitable<bool> run_store::create_assistant(const assistant_record& a) {
    const std::string find = "SELECT 1 FROM sg_assistants WHERE assistant_id = ?1";
    const std::string insert = "INSERT INTO sg_assistants (" + std::string(assistant_cols) +
                               ", latest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1) "
                               "ON CONFLICT (assistant_id, version) DO NOTHING";
    bool inserted = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        inserted = false; // a body may run again (a transient failure is retried)
        params id{a.assistant_id};
        if (!(co_await s.query(find, std::move(id))).empty()) co_return;
        auto p = assistant_params(a);
        p[1] = std::int64_t{1}; // the first version
        inserted = co_await s.exec(insert, std::move(p)) > 0;
    };
    co_await be_->transaction(work);
    co_return inserted;
}

awaitable<std::optional<assistant_record>> run_store::get_assistant(std::string id, std::int64_t version) {
    const std::string sql = "SELECT " + std::string(assistant_cols) + " FROM sg_assistants WHERE assistant_id = ?1 AND " +
                            (version > 0 ? "version = ?2" : "latest = 1");
    params p{std::move(id)};
    if (version > 0) p.emplace_back(version);
    auto rows = co_await be_->query(sql, std::move(p));
    if (rows.empty()) co_return std::nullopt;
    co_return assistant_of(rows.front());
}

awaitable<std::optional<assistant_record>> run_store::add_assistant_version(assistant_record a) {
    const std::string newest = "SELECT version FROM sg_assistants WHERE assistant_id = ?1 ORDER BY version DESC LIMIT 1" +
                               std::string(be_->lock_rows());
    const std::string clear = "UPDATE sg_assistants SET latest = 0 WHERE assistant_id = ?1";
    const std::string insert = "INSERT INTO sg_assistants (" + std::string(assistant_cols) +
                               ", latest) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, 1)";
    bool found = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        found = false;
        params id{a.assistant_id};
        auto rows = co_await s.query(newest, std::move(id));
        if (rows.empty()) co_return;
        found = true;
        a.version = rows.front().integer(0) + 1;
        params c{a.assistant_id};
        co_await s.exec(clear, std::move(c));
        auto p = assistant_params(a);
        co_await s.exec(insert, std::move(p));
    };
    co_await be_->transaction(work);
    if (!found) co_return std::nullopt;
    co_return a;
}

awaitable<bool> run_store::set_latest_assistant(std::string id, std::int64_t version) {
    bool found = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        found = false;
        params p{id, version};
        if ((co_await s.query("SELECT 1 FROM sg_assistants WHERE assistant_id = ?1 AND version = ?2", std::move(p))).empty())
            co_return;
        found = true;
        params q{id, version};
        co_await s.exec("UPDATE sg_assistants SET latest = CASE WHEN version = ?2 THEN 1 ELSE 0 END WHERE assistant_id = ?1",
                        std::move(q));
    };
    co_await be_->transaction(work);
    co_return found;
}

awaitable<std::vector<assistant_record>> run_store::list_assistants(std::string owner) {
    const std::string sql =
        "SELECT " + std::string(assistant_cols) + " FROM sg_assistants WHERE owner = ?1 AND latest = 1 ORDER BY created_at, assistant_id";
    params p{std::move(owner)};
    std::vector<assistant_record> out;
    for (const auto& r : co_await be_->query(sql, std::move(p))) out.push_back(assistant_of(r));
    co_return out;
}

awaitable<std::vector<assistant_record>> run_store::assistant_versions(std::string id) {
    const std::string sql = "SELECT " + std::string(assistant_cols) + " FROM sg_assistants WHERE assistant_id = ?1 ORDER BY version DESC";
    params p{std::move(id)};
    std::vector<assistant_record> out;
    for (const auto& r : co_await be_->query(sql, std::move(p))) out.push_back(assistant_of(r));
    co_return out;
}

awaitable<bool> run_store::delete_assistant(std::string id) {
    bool removed = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{std::move(id)};
        removed = co_await s.exec("DELETE FROM sg_assistants WHERE assistant_id = ?1", std::move(p)) > 0;
    };
    co_await be_->transaction(work);
    co_return removed;
}

// -- threads --------------------------------------------------------------------------------------

awaitable<bool> run_store::create_thread(const thread_record& t) {
    const std::string sql = "INSERT INTO sg_threads (" + std::string(thread_cols) +
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (key) DO NOTHING";
    bool inserted = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        auto p = thread_params(t);
        inserted = co_await s.exec(sql, std::move(p)) > 0;
    };
    co_await be_->transaction(work);
    co_return inserted;
}

awaitable<std::optional<thread_record>> run_store::get_thread(std::string key) {
    const std::string sql = "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE key = ?1";
    params p{std::move(key)};
    auto rows = co_await be_->query(sql, std::move(p));
    if (rows.empty()) co_return std::nullopt;
    co_return thread_of(rows.front());
}

awaitable<bool> run_store::put_thread(const thread_record& t) {
    const std::string sql =
        "UPDATE sg_threads SET thread_id = ?2, owner = ?3, graph_id = ?4, created_at = ?5, updated_at = ?6, "
        "state_updated_at = ?7, metadata = ?8, values_json = ?10, interrupts = ?11, error = ?12, is_temporary = ?13, "
        "rest_status = CASE WHEN ?9 = 'busy' THEN rest_status ELSE ?9 END, status = CASE WHEN EXISTS (SELECT 1 FROM "
        "sg_runs WHERE thread_key = ?1 AND status IN ('pending', 'running')) THEN 'busy' WHEN ?9 = 'busy' THEN "
        "rest_status ELSE ?9 END WHERE key = ?1";
    bool found = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        auto p = thread_params(t);
        found = co_await s.exec(sql, std::move(p)) > 0;
    };
    co_await be_->transaction(work);
    co_return found;
}

awaitable<std::optional<thread_record>> run_store::patch_thread(std::string key, json::object metadata) {
    const std::string read = "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE key = ?1" + std::string(be_->lock_rows());
    const std::string write = "UPDATE sg_threads SET metadata = ?2, updated_at = ?3 WHERE key = ?1";
    std::optional<thread_record> out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out.reset();
        params p{key};
        auto rows = co_await s.query(read, std::move(p));
        if (rows.empty()) co_return;
        auto t = thread_of(rows.front());
        for (const auto& [k, v] : metadata) t.metadata[k] = v;
        t.updated_at = now();
        params w{key, text_of(t.metadata), t.updated_at};
        co_await s.exec(write, std::move(w));
        out = std::move(t);
    };
    co_await be_->transaction(work);
    co_return out;
}

awaitable<bool> run_store::delete_thread(std::string key) {
    const std::string busy = "SELECT run_id FROM sg_runs WHERE thread_key = ?1 AND " + std::string(busy_where);
    bool removed = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        removed = false;
        params p{key};
        auto rows = co_await s.query(busy, std::move(p));
        if (!rows.empty()) co_return;
        params e{key};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id IN (SELECT run_id FROM sg_runs WHERE thread_key = ?1)", std::move(e));
        params r{key};
        co_await s.exec("DELETE FROM sg_runs WHERE thread_key = ?1", std::move(r));
        params t{key};
        removed = co_await s.exec("DELETE FROM sg_threads WHERE key = ?1", std::move(t)) > 0;
    };
    co_await be_->transaction(work);
    co_return removed;
}

awaitable<std::vector<thread_record>> run_store::list_threads(thread_query q) {
    static const std::vector<std::string> sortable = {"created_at", "updated_at", "state_updated_at", "thread_id", "status"};
    if (std::find(sortable.begin(), sortable.end(), q.sort_by) == sortable.end())
        throw std::invalid_argument("run_store::list_threads: cannot sort by '" + q.sort_by.str() + "'");
    std::string sql = "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE owner = ?1 AND is_temporary = 0";
    params p{q.owner.str()};
    if (!q.status.empty()) {
        sql += " AND status = ?2";
        p.emplace_back(q.status.str());
    }
    sql += " ORDER BY " + q.sort_by.str() + (q.ascending ? " ASC" : " DESC") + ", key";
    auto rows = co_await be_->query(sql, std::move(p));
    std::vector<thread_record> out;
    out.reserve(rows.size());
    for (const auto& r : rows) {
        auto t = thread_of(r);
        if (q.keys && std::find(q.keys->begin(), q.keys->end(), t.key) == q.keys->end()) continue;
        out.push_back(std::move(t));
    }
    co_return out;
}

awaitable<std::vector<std::string>> run_store::thread_keys() {
    params none;
    auto rows = co_await be_->query("SELECT key FROM sg_threads", std::move(none));
    std::vector<std::string> out;
    for (const auto& r : rows) out.push_back(r.text(0));
    co_return out;
}

} // namespace stategraph::server
