// The run store's rules, written once over SQL that SQLite and PostgreSQL both take: `?N`
// parameters (a backend rewrites them), 64-bit integer times, JSON as text, row locks named by
// the backend (PostgreSQL locks rows; SQLite's write transaction excludes every other writer).

#include <stategraph/server/notifier.hpp>
#include <stategraph/server/run_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <stategraph/utf8.hpp>

#include <algorithm>
#include <cmath>
#include <charconv>

namespace stategraph::server {

namespace json = boost::json;
namespace net = boost::asio;
using net::awaitable;

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

using params = std::vector<sql_value>;

/// JSON text any reader (and PostgreSQL's TEXT) takes.
std::string text_of(const json::value& v) { return serialize_strict_json(v); }
std::string text_of(const json::object& o) { return text_of(json::value(o)); }

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

// -- threads ------------------------------------------------------------------------------------

constexpr std::string_view thread_cols =
    "key, thread_id, owner, graph_id, created_at, updated_at, state_updated_at, metadata, status, values_json, "
    "interrupts, error, is_temporary";

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

// -- runs ---------------------------------------------------------------------------------------

constexpr std::string_view run_cols =
    "run_id, seq, thread_key, thread_id, assistant_id, graph_id, owner, created_at, updated_at, status, metadata, "
    "kwargs, multitask, spec, not_before, worker, lease_until, attempts, cancel, anchor, result, error";

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

constexpr std::string_view busy_where = "status IN ('pending', 'running')";

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

run_store::~run_store() = default;

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
        throw std::invalid_argument("run_store::list_threads: cannot sort by '" + q.sort_by + "'");
    std::string sql = "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE owner = ?1 AND is_temporary = 0";
    params p{q.owner};
    if (q.status) {
        sql += " AND status = ?2";
        p.emplace_back(*q.status);
    }
    sql += " ORDER BY " + q.sort_by + (q.ascending ? " ASC" : " DESC") + ", key";
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

// -- runs -----------------------------------------------------------------------------------------

namespace {

/// The thread's status once `run` left its queue: busy while others wait, else what it rests at.
awaitable<void> settle_thread_status(run_store_backend::session& s, const std::string& thread_key, std::int64_t when) {
    params p{thread_key, when};
    co_await s.exec("UPDATE sg_threads SET status = CASE WHEN EXISTS (SELECT 1 FROM sg_runs WHERE thread_key = ?1 AND "
                    "status IN ('pending', 'running')) THEN 'busy' ELSE rest_status END, updated_at = ?2 WHERE key = ?1",
                    std::move(p));
}

/// Ends a run no worker holds (cancelled while pending, or out of attempts).
awaitable<void> end_unheld(run_store_backend::session& s, const run_record& r, const std::string& status, const json::value& error,
                           std::int64_t when) {
    params p{r.run_id, status, error.is_null() ? sql_value{} : sql_value{text_of(error)}, when};
    co_await s.exec("UPDATE sg_runs SET status = ?2, error = ?3, worker = '', updated_at = ?4, finished_at = ?4 WHERE run_id = ?1",
                    std::move(p));
    if (!error.is_null()) {
        params t{r.thread_key, text_of(error)};
        co_await s.exec("UPDATE sg_threads SET rest_status = 'error', error = ?2 WHERE key = ?1", std::move(t));
    }
    co_await settle_thread_status(s, r.thread_key, when);
}

/// Removes the oldest finished runs beyond `keep` (their events too).
awaitable<void> trim_finished(run_store_backend::session& s, std::size_t keep) {
    params none;
    auto count = co_await s.query("SELECT COUNT(*) FROM sg_runs WHERE finished_at IS NOT NULL", std::move(none));
    const auto n = count.empty() ? 0 : count.front().integer(0);
    const auto bound = static_cast<std::int64_t>(std::max<std::size_t>(keep, 1));
    if (n <= bound) co_return;
    params p{n - bound};
    const std::string oldest = "SELECT run_id FROM sg_runs WHERE finished_at IS NOT NULL ORDER BY finished_at, seq LIMIT ?1";
    auto rows = co_await s.query(oldest, std::move(p));
    for (const auto& r : rows) {
        params e{r.text(0)};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1", std::move(e));
        params d{r.text(0)};
        co_await s.exec("DELETE FROM sg_runs WHERE run_id = ?1", std::move(d));
    }
    params none2;
    // A stateless run's thread goes with its last run.
    co_await s.exec("DELETE FROM sg_threads WHERE is_temporary = 1 AND NOT EXISTS (SELECT 1 FROM sg_runs WHERE "
                    "sg_runs.thread_key = sg_threads.key)",
                    std::move(none2));
}

} // namespace

awaitable<submit_result> run_store::submit(run_record& run, submit_rules rules) {
    const std::string read_thread =
        "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE key = ?1" + std::string(be_->lock_rows());
    const std::string insert_thread = "INSERT INTO sg_threads (" + std::string(thread_cols) +
                                      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (key) "
                                      "DO NOTHING";
    const std::string queued_sql = "SELECT run_id, cancel FROM sg_runs WHERE thread_key = ?1 AND " + std::string(busy_where) +
                                   " ORDER BY seq" + std::string(be_->lock_rows());
    const std::string insert_run = "INSERT INTO sg_runs (" + std::string(run_cols) +
                                   ", finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                                   "?16, ?17, ?18, ?19, ?20, ?21, ?22, NULL)";
    submit_result out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out = submit_result{};
        const auto when = now();
        params tp{run.thread_key};
        auto rows = co_await s.query(read_thread, std::move(tp));
        std::optional<thread_record> th;
        if (!rows.empty()) th = thread_of(rows.front());
        if (!th || (th->temporary && !(rules.create && rules.create->temporary))) {
            if (!rules.create || th) {
                out.refused = submit_refusal::thread_missing;
                co_return;
            }
            auto p = thread_params(*rules.create);
            if (co_await s.exec(insert_thread, std::move(p)) > 0) {
                th = *rules.create;
                out.created_thread = true;
            } else {
                // Another instance inserted it after the read (on PostgreSQL its row was not yet
                // committed, so the read did not see it): the run goes on that thread.
                params again{run.thread_key};
                auto made = co_await s.query(read_thread, std::move(again));
                if (made.empty() || (thread_of(made.front()).temporary && !rules.create->temporary)) {
                    out.refused = submit_refusal::thread_missing;
                    co_return;
                }
                th = thread_of(made.front());
            }
        }
        const std::string graph = th->graph_id.empty() ? rules.graph_id : th->graph_id;
        if (!rules.graph_id.empty() && !th->graph_id.empty() && th->graph_id != rules.graph_id) {
            out.refused = submit_refusal::other_graph;
            out.graph_id = th->graph_id;
            co_return;
        }
        params qp{run.thread_key};
        auto queue = co_await s.query(queued_sql, std::move(qp));
        std::size_t live = 0;
        for (const auto& q : queue)
            if (q.text(1).empty()) ++live;
        out.queued = live;
        if (rules.reject_if_busy && !queue.empty()) {
            out.refused = submit_refusal::busy;
            out.busy_run = queue.front().text(0);
            co_return;
        }
        if (live >= std::max<std::size_t>(rules.max_queued, 1) && rules.cancel_others.empty()) {
            out.refused = submit_refusal::queue_full;
            co_return;
        }
        if (!rules.cancel_others.empty())
            for (const auto& q : queue) {
                if (!q.text(1).empty()) continue;
                params cp{q.text(0), rules.cancel_others, when};
                co_await s.exec("UPDATE sg_runs SET cancel = ?2, updated_at = ?3 WHERE run_id = ?1", std::move(cp));
                out.cancelled.push_back(q.text(0));
            }
        // Pending runs nobody holds end at once.
        for (const auto& id : out.cancelled) {
            params rp{id};
            auto r = co_await s.query(select_runs("WHERE run_id = ?1"), std::move(rp));
            if (!r.empty()) {
                auto x = run_of(r.front());
                if (x.status == "pending" && x.worker.empty()) {
                    params e{x.run_id, std::string("interrupted"), sql_value{}, when};
                    co_await s.exec("UPDATE sg_runs SET status = ?2, error = ?3, updated_at = ?4, finished_at = ?4 WHERE run_id = ?1",
                                    std::move(e));
                }
            }
        }
        params none;
        auto seq = co_await s.query("UPDATE sg_counters SET value = value + 1 WHERE name = 'run_seq' RETURNING value", std::move(none));
        run.seq = seq.empty() ? 1 : seq.front().integer(0);
        run.status = "pending";
        run.created_at = run.updated_at = when;
        run.worker.clear();
        run.attempts = 0;
        run.cancel.clear();
        run.lease_until = 0;
        params rp{run.run_id,
                  run.seq,
                  run.thread_key,
                  run.thread_id,
                  run.assistant_id,
                  run.graph_id,
                  run.owner,
                  run.created_at,
                  run.updated_at,
                  run.status,
                  text_of(run.metadata),
                  text_of(run.kwargs),
                  run.multitask,
                  text_of(run.spec),
                  run.not_before,
                  run.worker,
                  run.lease_until,
                  std::int64_t{0},
                  std::string(),
                  run.anchor.is_null() ? sql_value{} : sql_value{text_of(run.anchor)},
                  sql_value{},
                  sql_value{}};
        co_await s.exec(insert_run, std::move(rp));
        // The thread: busy, its graph chosen.
        json::object meta = th->metadata;
        if (th->graph_id.empty() && !graph.empty()) {
            meta["graph_id"] = graph;
            for (const auto& [k, v] : rules.graph_metadata) meta[k] = v;
        }
        params up{run.thread_key, graph, text_of(meta), when};
        co_await s.exec("UPDATE sg_threads SET status = 'busy', graph_id = ?2, metadata = ?3, updated_at = ?4 WHERE key = ?1",
                        std::move(up));
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (out.refused != submit_refusal::none) return std::nullopt;
        return notice{"sg_runs", run.run_id};
    };
    co_await commit(work, news);
    co_return out;
}

awaitable<std::optional<run_record>> run_store::get_run(std::string run_id) {
    params p{std::move(run_id)};
    auto rows = co_await be_->query(select_runs("WHERE run_id = ?1"), std::move(p));
    if (rows.empty()) co_return std::nullopt;
    co_return run_of(rows.front());
}

awaitable<std::vector<run_record>> run_store::list_runs(std::string thread_key, std::optional<std::string> status, std::size_t limit,
                                                        std::size_t offset) {
    std::string where = "WHERE thread_key = ?1";
    params p{std::move(thread_key)};
    if (status) {
        where += " AND status = ?4";
    }
    where += " ORDER BY seq DESC LIMIT ?2 OFFSET ?3";
    p.emplace_back(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    p.emplace_back(static_cast<std::int64_t>(std::min<std::size_t>(offset, INT64_MAX)));
    if (status) p.emplace_back(*status);
    auto rows = co_await be_->query(select_runs(where), std::move(p));
    std::vector<run_record> out;
    for (const auto& r : rows) out.push_back(run_of(r));
    co_return out;
}

awaitable<std::vector<run_record>> run_store::runs_after(std::string thread_key, std::int64_t after) {
    params p{std::move(thread_key), after};
    auto rows = co_await be_->query(select_runs("WHERE thread_key = ?1 AND seq > ?2 ORDER BY seq"), std::move(p));
    std::vector<run_record> out;
    for (const auto& r : rows) out.push_back(run_of(r));
    co_return out;
}

awaitable<std::int64_t> run_store::current_seq(std::string thread_key) {
    params p{thread_key};
    auto rows = co_await be_->query("SELECT MIN(seq) FROM sg_runs WHERE thread_key = ?1 AND " + std::string(busy_where), std::move(p));
    if (!rows.empty() && !rows.front().is_null(0)) co_return rows.front().integer(0);
    params q{thread_key};
    auto last = co_await be_->query("SELECT MAX(seq) FROM sg_runs WHERE thread_key = ?1", std::move(q));
    co_return last.empty() || last.front().is_null(0) ? 0 : last.front().integer(0);
}

awaitable<bool> run_store::delete_run(std::string run_id) {
    bool removed = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{run_id};
        auto rows = co_await s.query("SELECT status FROM sg_runs WHERE run_id = ?1" + std::string(be_->lock_rows()), std::move(p));
        removed = false;
        if (rows.empty()) co_return;
        const auto st = rows.front().text(0);
        if (st == "pending" || st == "running") co_return;
        params e{run_id};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1", std::move(e));
        params d{run_id};
        removed = co_await s.exec("DELETE FROM sg_runs WHERE run_id = ?1", std::move(d)) > 0;
    };
    co_await be_->transaction(work);
    co_return removed;
}

awaitable<std::optional<run_record>> run_store::cancel(std::string run_id, std::string action) {
    if (action != "interrupt" && action != "rollback")
        throw std::invalid_argument("run_store::cancel: action must be interrupt or rollback (got '" + action + "')");
    std::optional<run_record> out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out.reset();
        const auto when = now();
        params p{run_id};
        auto rows = co_await s.query(select_runs("WHERE run_id = ?1") + std::string(be_->lock_rows()), std::move(p));
        if (rows.empty()) co_return;
        auto r = run_of(rows.front());
        if (!r.finished()) {
            // rollback wins over interrupt; a run already asked keeps the stronger action
            std::string act = r.cancel == "rollback" ? r.cancel : action;
            params c{r.run_id, act, when};
            co_await s.exec("UPDATE sg_runs SET cancel = ?2, updated_at = ?3 WHERE run_id = ?1", std::move(c));
            r.cancel = act;
            if (r.status == "pending" && r.worker.empty()) {
                co_await end_unheld(s, r, "interrupted", nullptr, when);
                r.status = "interrupted";
            }
        }
        out = std::move(r);
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!out) return std::nullopt;
        return notice{"sg_runs", "cancel:" + run_id};
    };
    co_await commit(work, news);
    co_return out;
}

// -- workers --------------------------------------------------------------------------------------

awaitable<std::optional<run_record>> run_store::claim(std::string worker) {
    const std::string find =
        select_runs("WHERE ((status = 'pending' AND not_before <= ?1) OR (status = 'running' AND lease_until < ?1)) AND seq = "
                    "(SELECT MIN(q.seq) FROM sg_runs q WHERE q.thread_key = sg_runs.thread_key AND q.status IN ('pending', "
                    "'running')) ORDER BY seq LIMIT 8") +
        std::string(be_->lock_rows_skip_locked());
    std::optional<run_record> out;
    bool ended_some = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out.reset();
        ended_some = false;
        const auto when = now();
        params p{when};
        auto rows = co_await s.query(find, std::move(p));
        for (const auto& row : rows) {
            auto r = run_of(row);
            if (!r.cancel.empty()) { // asked to stop before (or while) its worker held it
                co_await end_unheld(s, r, "interrupted", nullptr, when);
                ended_some = true;
                continue;
            }
            if (r.attempts >= std::max(opts_.max_attempts, 1)) {
                json::value err = json::object{
                    {"error", "RunAttemptsExhausted"},
                    {"message", "run '" + r.run_id + "' on thread '" + r.thread_id + "' was started " + std::to_string(r.attempts) +
                                    " times and its worker stopped each time (the most is " + std::to_string(opts_.max_attempts) +
                                    " attempts); it is not started again"}};
                co_await end_unheld(s, r, "error", err, when);
                r.status = "error";
                ended_some = true;
                continue;
            }
            const auto lease = std::chrono::duration_cast<std::chrono::microseconds>(opts_.lease).count();
            r.status = "running";
            r.worker = worker;
            r.lease_until = when + lease;
            ++r.attempts;
            r.updated_at = when;
            params c{r.run_id, worker, r.lease_until, static_cast<std::int64_t>(r.attempts), when};
            co_await s.exec("UPDATE sg_runs SET status = 'running', worker = ?2, lease_until = ?3, attempts = ?4, updated_at = ?5 "
                            "WHERE run_id = ?1",
                            std::move(c));
            out = std::move(r);
            co_return;
        }
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!ended_some) return std::nullopt;
        return notice{"sg_runs", "ended"};
    };
    co_await commit(work, news);
    co_return out;
}

awaitable<std::optional<std::int64_t>> run_store::next_due() {
    params none;
    auto rows = co_await be_->query("SELECT MIN(not_before) FROM sg_runs WHERE status = 'pending'", std::move(none));
    if (rows.empty() || rows.front().is_null(0)) co_return std::nullopt;
    co_return rows.front().integer(0);
}

awaitable<run_store::heartbeat_result> run_store::heartbeat(std::string worker, std::vector<std::string> runs) {
    heartbeat_result out;
    if (runs.empty()) co_return out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out = heartbeat_result{};
        const auto when = now();
        const auto lease = std::chrono::duration_cast<std::chrono::microseconds>(opts_.lease).count();
        for (const auto& id : runs) {
            params p{id, worker, when + lease};
            auto rows = co_await s.query("UPDATE sg_runs SET lease_until = ?3 WHERE run_id = ?1 AND worker = ?2 AND status = "
                                         "'running' RETURNING cancel",
                                         std::move(p));
            if (rows.empty()) out.lost.push_back(id);
            else if (auto c = rows.front().text(0); !c.empty()) out.cancelled.emplace_back(id, c);
        }
    };
    co_await be_->transaction(work);
    co_return out;
}

awaitable<void> run_store::set_anchor(std::string run_id, std::string worker, json::value anchor) {
    params p{run_id, worker, text_of(anchor)};
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params q = p;
        co_await s.exec("UPDATE sg_runs SET anchor = ?3 WHERE run_id = ?1 AND worker = ?2 AND anchor IS NULL", std::move(q));
    };
    co_await be_->transaction(work);
}

awaitable<bool> run_store::finish(const run_record& run, std::string worker, const thread_record* thread) {
    bool held = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        held = false;
        const auto when = now();
        params p{run.run_id, worker};
        auto rows = co_await s.query("SELECT status FROM sg_runs WHERE run_id = ?1 AND worker = ?2 AND status = 'running'" +
                                         std::string(be_->lock_rows()),
                                     std::move(p));
        if (rows.empty()) co_return;
        held = true;
        params u{run.run_id,
                 run.status,
                 run.result.is_null() ? sql_value{} : sql_value{text_of(run.result)},
                 run.error.is_null() ? sql_value{} : sql_value{text_of(run.error)},
                 when,
                 text_of(run.spec)};
        // spec too: the run's token usage (spec.usage) is known only now
        co_await s.exec("UPDATE sg_runs SET status = ?2, result = ?3, error = ?4, updated_at = ?5, finished_at = ?5, worker = '', "
                        "spec = ?6 WHERE run_id = ?1",
                        std::move(u));
        if (thread) {
            thread_record t = *thread;
            t.updated_at = when;
            auto tp = thread_params(t);
            co_await s.exec("UPDATE sg_threads SET thread_id = ?2, owner = ?3, graph_id = ?4, created_at = ?5, updated_at = ?6, "
                            "state_updated_at = ?7, metadata = ?8, rest_status = ?9, values_json = ?10, interrupts = ?11, "
                            "error = ?12, is_temporary = ?13 WHERE key = ?1",
                            std::move(tp));
        }
        co_await settle_thread_status(s, run.thread_key, when);
        // The oldest finished runs go in batches (every 32nd run, and whenever few are kept),
        // not on every finish: counting them reads the whole index.
        if (run.seq % 32 == 0 || opts_.max_finished_runs < 1000) co_await trim_finished(s, opts_.max_finished_runs);
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_runs", "done:" + run.run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<bool> run_store::release(std::string run_id, std::string worker) {
    bool held = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{run_id, worker, now()};
        held = co_await s.exec("UPDATE sg_runs SET status = 'pending', worker = '', lease_until = 0, attempts = CASE WHEN "
                               "attempts > 0 THEN attempts - 1 ELSE 0 END, not_before = 0, updated_at = ?3 WHERE run_id = ?1 AND "
                               "worker = ?2 AND status = 'running'",
                               std::move(p)) > 0;
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_runs", run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<std::vector<std::pair<std::string, std::string>>> run_store::cancel_requests(std::string worker) {
    params p{std::move(worker)};
    auto rows = co_await be_->query("SELECT run_id, cancel FROM sg_runs WHERE worker = ?1 AND status = 'running' AND cancel <> ''",
                                    std::move(p));
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& r : rows) out.emplace_back(r.text(0), r.text(1));
    co_return out;
}

awaitable<std::vector<std::string>> run_store::running_workers() {
    params none;
    auto rows = co_await be_->query("SELECT DISTINCT worker FROM sg_runs WHERE status = 'running' AND worker <> ''", std::move(none));
    std::vector<std::string> out;
    for (const auto& r : rows) out.push_back(r.text(0));
    co_return out;
}

awaitable<std::map<std::string, std::int64_t>> run_store::count_runs() {
    params none;
    auto rows = co_await be_->query("SELECT status, COUNT(*) FROM sg_runs GROUP BY status", std::move(none));
    std::map<std::string, std::int64_t> out;
    for (const auto& r : rows) out[r.text(0)] = r.integer(1);
    co_return out;
}

awaitable<std::size_t> run_store::expire_worker(std::string worker) {
    std::size_t n = 0;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{worker};
        n = static_cast<std::size_t>(
            co_await s.exec("UPDATE sg_runs SET lease_until = 0 WHERE worker = ?1 AND status = 'running'", std::move(p)));
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!n) return std::nullopt;
        return notice{"sg_runs", "expired"};
    };
    co_await commit(work, news);
    co_return n;
}

// -- events ---------------------------------------------------------------------------------------

awaitable<bool> run_store::append_events(std::string run_id, std::string worker, std::vector<run_event> events) {
    if (events.empty()) co_return true;
    bool held = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        held = false;
        params p{run_id, worker};
        auto rows = co_await s.query("SELECT status FROM sg_runs WHERE run_id = ?1 AND worker = ?2 AND status = 'running'" +
                                         std::string(be_->lock_rows()),
                                     std::move(p));
        if (rows.empty()) co_return;
        held = true;
        std::vector<params> each;
        each.reserve(events.size());
        for (const auto& e : events) each.push_back(params{run_id, e.id, e.name, e.data});
        co_await s.exec_many("INSERT INTO sg_run_events (run_id, id, name, data) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, id) "
                             "DO UPDATE SET name = excluded.name, data = excluded.data",
                             each);
        const auto keep = static_cast<std::int64_t>(std::max<std::size_t>(opts_.max_events_per_run, 1));
        if (events.back().id + 1 > keep) { // beyond the bound: the oldest go
            params tp{run_id, events.back().id + 1 - keep};
            co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1 AND id < ?2", std::move(tp));
        }
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_events", run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<std::vector<run_event>> run_store::read_events(std::string run_id, std::int64_t from, std::size_t limit) {
    params p{std::move(run_id), from, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX))};
    auto rows = co_await be_->query("SELECT id, name, data FROM sg_run_events WHERE run_id = ?1 AND id >= ?2 ORDER BY id LIMIT ?3",
                                    std::move(p));
    std::vector<run_event> out;
    out.reserve(rows.size());
    for (const auto& r : rows) out.push_back(run_event{r.integer(0), r.text(1), r.text(2)});
    co_return out;
}

awaitable<std::pair<std::int64_t, std::int64_t>> run_store::event_bounds(std::string run_id) {
    params p{std::move(run_id)};
    auto rows = co_await be_->query("SELECT MIN(id), MAX(id) FROM sg_run_events WHERE run_id = ?1", std::move(p));
    if (rows.empty() || rows.front().is_null(0)) co_return std::pair<std::int64_t, std::int64_t>{0, 0};
    co_return std::pair<std::int64_t, std::int64_t>{rows.front().integer(0), rows.front().integer(1) + 1};
}

} // namespace stategraph::server
