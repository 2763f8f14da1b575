#define BOOST_TEST_MODULE run_store
// The run store's conformance suite (server/include/stategraph/server/run_store.hpp): one body per
// case, run on each backend: SQLite on a file, SQLite in memory (where one store object is
// enough), and PostgreSQL on a schema of its own per case (the server in STATEGRAPH_TEST_POSTGRES,
// which scripts/test starts; unset: the PostgreSQL suite is skipped, saying so).
#include <stategraph/server/run_store.hpp>

#include <stategraph/checkpoint/testing/run.hpp>

#include "temp_dir.hpp"

#if STATEGRAPH_TEST_WITH_POSTGRES
#include "postgres_test_support.hpp"
#endif

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace srv = stategraph::server;
namespace net = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using stategraph::checkpoint::testing::run;

namespace {

// -- the databases ------------------------------------------------------------------------------

/// One case's database: store objects opened on it (each its own connection(s), as another
/// process would have) share its data, except in memory, where each store is a database alone.
class database {
public:
    virtual ~database() = default;
    std::shared_ptr<srv::run_store> open(srv::run_store_options o = {}) { return make(o); }
    /// Whether two stores opened here share their data.
    virtual bool shared() const = 0;

protected:
    virtual std::shared_ptr<srv::run_store> make(srv::run_store_options o) = 0;
};

class sqlite_file final : public database {
public:
    std::shared_ptr<srv::run_store> make(srv::run_store_options o) override {
        return srv::open_sqlite_run_store(dir_.file("runs.db"), o);
    }
    bool shared() const override { return true; }

private:
    stategraph::test::temp_dir dir_;
};

class sqlite_memory final : public database {
public:
    std::shared_ptr<srv::run_store> make(srv::run_store_options o) override {
        return srv::open_sqlite_run_store(":memory:", o);
    }
    bool shared() const override { return false; }
};

#if STATEGRAPH_TEST_WITH_POSTGRES
namespace pgt = stategraph::checkpoint::pg_testing;

/// A schema of the case's own, dropped after it.
class postgres final : public database {
public:
    explicit postgres(std::string conninfo = pgt::server_url()) : conninfo_(std::move(conninfo)) {}
    ~postgres() override {
        try {
            pgt::admin a;
            a.query("DROP SCHEMA IF EXISTS " + pgt::quoted(schema_) + " CASCADE");
        } catch (...) {
        }
    }
    std::shared_ptr<srv::run_store> make(srv::run_store_options o) override {
        return srv::open_postgres_run_store({.conninfo = conninfo_, .schema = schema_, .pool_size = 4, .store = o});
    }
    bool shared() const override { return true; }
    const std::string& schema() const { return schema_; }

private:
    std::string conninfo_;
    std::string schema_ = pgt::fresh_schema();
};
#endif

/// The store kept in this process's memory, over no SQL (`open_memory_run_store`): each store
/// alone, as SQLite in memory.
class memory final : public database {
public:
    std::shared_ptr<srv::run_store> make(srv::run_store_options o) override { return srv::open_memory_run_store(o); }
    bool shared() const override { return false; }
};

// -- records ------------------------------------------------------------------------------------

srv::thread_record make_thread(const std::string& key, const std::string& owner = "", std::int64_t created = 0) {
    srv::thread_record t;
    t.key = key;
    t.thread_id = "id-" + key;
    t.owner = owner;
    t.created_at = t.updated_at = t.state_updated_at = created ? created : srv::run_store::now();
    t.metadata = json::object{{"a", 1}};
    return t;
}

srv::run_record make_run(const std::string& run_id, const std::string& thread_key) {
    srv::run_record r;
    r.run_id = run_id;
    r.thread_key = thread_key;
    r.thread_id = "id-" + thread_key;
    r.assistant_id = "asst";
    r.graph_id = "g";
    r.spec = json::object{{"input", run_id}};
    return r;
}

srv::submit_rules rules_for(std::string graph = "g") {
    srv::submit_rules r;
    r.graph_id = std::move(graph);
    return r;
}

/// Creates the thread when missing, then queues `run_id` on it; the run as stored.
srv::run_record queue(srv::run_store& s, const std::string& run_id, const std::string& thread_key,
                      srv::submit_rules rules = rules_for()) {
    auto t = make_thread(thread_key);
    (void)run(s.create_thread(t));
    auto r = make_run(run_id, thread_key);
    auto res = run(s.submit(r, rules));
    BOOST_REQUIRE_MESSAGE(res.refused == srv::submit_refusal::none, "submit " << run_id << " refused");
    return r;
}

/// Submits `run_id` as a stateless run does: on a temporary thread `key`, made when missing.
srv::submit_result submit_stateless(srv::run_store& s, const std::string& run_id, const std::string& key) {
    auto temp = make_thread(key);
    temp.temporary = true;
    auto rules = rules_for();
    rules.create = &temp;
    auto r = make_run(run_id, key);
    return run(s.submit(r, rules));
}

srv::run_record stored(srv::run_store& s, const std::string& run_id) {
    auto r = run(s.get_run(run_id));
    BOOST_REQUIRE_MESSAGE(r, "run " << run_id << " is not stored");
    return *r;
}

/// Ends a run `worker` holds as a success.
void finish(srv::run_store& s, const std::string& run_id, const std::string& worker) {
    auto r = stored(s, run_id);
    r.status = "success";
    r.result = json::object{{"done", run_id}};
    BOOST_REQUIRE(run(s.finish(r, worker, nullptr)));
}

std::vector<std::string> keys_of(const std::vector<srv::thread_record>& ts) {
    std::vector<std::string> out;
    for (const auto& t : ts) out.push_back(t.key);
    return out;
}

std::vector<std::string> ids_of(const std::vector<srv::run_record>& rs) {
    std::vector<std::string> out;
    for (const auto& r : rs) out.push_back(r.run_id);
    return out;
}

using strings = std::vector<std::string>;

// Statements of the backend cases (named: g++ 12 cannot take a string literal in a co_await
// expression).
constexpr std::string_view insert_counter = "INSERT INTO sg_counters (name, value) VALUES (?1, ?2)";
constexpr std::string_view bump_kept = "UPDATE sg_counters SET value = value + 1 WHERE name LIKE 'kept%'";

/// Inserts a counter row in `ss`'s transaction.
net::awaitable<std::int64_t> put_counter(srv::run_store_backend::session& ss, std::string name, std::int64_t value) {
    return ss.exec(insert_counter, {std::move(name), value});
}

/// A user's coroutine calling the store as one writes it: rules and queries braced in place inside
/// `co_await`, records made by a function. g++ 12 destroys an aggregate that owns memory twice
/// there (a double free under ASan, which this suite also runs under); the store's argument types
/// are built so that it cannot happen (`detail::safe_in_co_await`). Returns the listed threads'
/// keys: busy ones of `owner`, then idle ones.
net::awaitable<std::pair<strings, strings>> natural_calls(srv::run_store& s, std::string owner) {
    const std::string key = "a-thread-key-longer-than-the-small-string-buffer-" + owner;
    (void)co_await s.create_thread(make_thread(key, owner));
    auto r = make_run("a-run-id-longer-than-the-small-string-buffer-" + owner, key);
    auto res = co_await s.submit(r, {.max_queued = 5, .graph_id = "a-graph-id-longer-than-the-small-string-buffer"});
    BOOST_TEST((res.refused == srv::submit_refusal::none));
    auto busy = co_await s.list_threads({.owner = owner, .status = "busy", .sort_by = "thread_id"});
    auto idle = co_await s.list_threads({.owner = std::string(owner), .status = "idle"});
    co_return std::pair{keys_of(busy), keys_of(idle)};
}

} // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<srv::thread_record>)
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<srv::run_record>)
BOOST_TEST_DONT_PRINT_LOG_VALUE(std::optional<srv::assistant_record>)

// -- one body, every backend ----------------------------------------------------------------------

/// The case `name` in `suite`, on a fresh database of type `db_type`.
#define RUN_STORE_ON(suite, db_type, name)                                                                               \
    BOOST_AUTO_TEST_SUITE(suite)                                                                                         \
    BOOST_AUTO_TEST_CASE(name) {                                                                                         \
        db_type db;                                                                                                      \
        name##_on(db);                                                                                                   \
    }                                                                                                                    \
    BOOST_AUTO_TEST_SUITE_END()

#if STATEGRAPH_TEST_WITH_POSTGRES
// Skipped, saying why, when no server is configured.
BOOST_AUTO_TEST_SUITE(postgres_backend, *boost::unit_test::precondition(pgt::server_configured))
BOOST_AUTO_TEST_SUITE_END()
#define RUN_STORE_ON_POSTGRES(name) RUN_STORE_ON(postgres_backend, postgres, name)
#else
#define RUN_STORE_ON_POSTGRES(name)
#endif

/// A case of every backend whose stores share their database (SQLite file, PostgreSQL); its body
/// follows, given `database& db`.
#define RUN_STORE_SHARED_CASE(name)                                                                                      \
    void name##_on(database& db);                                                                                        \
    RUN_STORE_ON(sqlite_file_backend, sqlite_file, name)                                                                 \
    RUN_STORE_ON_POSTGRES(name)                                                                                          \
    void name##_on(database& db)

/// A case of every SQL backend (SQLite file, SQLite in memory, PostgreSQL); its body follows.
#define RUN_STORE_SQL_CASE(name)                                                                                         \
    void name##_on(database& db);                                                                                        \
    RUN_STORE_ON(sqlite_memory_backend, sqlite_memory, name)                                                             \
    RUN_STORE_SHARED_CASE(name)

/// A case of every store: the SQL backends and the store kept in memory without SQL.
#define RUN_STORE_CASE(name)                                                                                             \
    void name##_on(database& db);                                                                                        \
    RUN_STORE_ON(memory_store, memory, name)                                                                             \
    RUN_STORE_SQL_CASE(name)

// -- the backend seam -----------------------------------------------------------------------------

RUN_STORE_SQL_CASE(backend_statements_and_rollback) {
    auto s = db.open();
    auto& be = s->backend();
    // ?N parameters (out of order, repeated); integers, text and NULL come back as such.
    auto rows = run(be.query("SELECT CAST(?2 AS TEXT) || CAST(?1 AS TEXT), CAST(?3 AS BIGINT) + 1, CAST(?3 AS BIGINT), "
                             "CAST(?4 AS TEXT) IS NULL",
                             {std::string("b"), std::string("a"), std::int64_t{41}, srv::sql_value{}}));
    BOOST_REQUIRE_EQUAL(rows.size(), 1u);
    BOOST_TEST(rows[0].text(0) == "ab");
    BOOST_TEST(rows[0].integer(1) == 42);
    BOOST_TEST(std::holds_alternative<std::int64_t>(rows[0].cols.at(1)));
    BOOST_TEST(rows[0].integer(3) == 1);
    auto nulls = run(be.query("SELECT NULL, 'x'", {}));
    BOOST_TEST(nulls.at(0).is_null(0));
    BOOST_TEST(std::get<std::string>(nulls.at(0).cols.at(1)) == "x");

    // What a body throws rolls its transaction back and reaches the caller.
    const srv::run_store_backend::body failing = [](srv::run_store_backend::session& ss) -> net::awaitable<void> {
        co_await put_counter(ss, std::string("rolled"), 7);
        throw std::domain_error("the body gave up");
    };
    BOOST_CHECK_THROW(run(be.transaction(failing)), std::domain_error);
    auto count = run(be.query("SELECT COUNT(*) FROM sg_counters WHERE name = ?1", {std::string("rolled")}));
    BOOST_TEST(count.at(0).integer(0) == 0);

    // A committed body's writes stay; exec counts the rows it changed.
    std::int64_t changed = -1;
    const srv::run_store_backend::body writing = [&](srv::run_store_backend::session& ss) -> net::awaitable<void> {
        co_await put_counter(ss, std::string("kept"), 1);
        co_await put_counter(ss, std::string("kept2"), 1);
        changed = co_await ss.exec(bump_kept, {});
    };
    run(be.transaction(writing));
    BOOST_TEST(changed == 2);
    auto kept = run(be.query("SELECT value FROM sg_counters WHERE name = ?1", {std::string("kept")}));
    BOOST_TEST(kept.at(0).integer(0) == 2);

    // A statement the database refuses: a run_store_error, not transient, naming the backend.
    try {
        (void)run(be.query("SELECT no_such_column FROM sg_counters", {}));
        BOOST_FAIL("a bad statement was accepted");
    } catch (const srv::run_store_error& e) {
        BOOST_TEST(!e.transient());
        BOOST_TEST(std::string(e.what()).find(be.describe()) != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("no_such_column") != std::string::npos, e.what());
    }
}

// -- threads --------------------------------------------------------------------------------------

RUN_STORE_CASE(assistants_versions_latest_list_delete) {
    auto s = db.open();
    srv::assistant_record a;
    a.assistant_id = "0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f61";
    a.owner = "k1";
    a.graph_id = "chat";
    a.name = "first";
    a.config = json::object{{"recursion_limit", 5}};
    a.metadata = json::object{{"team", "a"}};
    a.created_at = a.updated_at = 100;
    BOOST_TEST(run(s->create_assistant(a)));
    BOOST_TEST(!run(s->create_assistant(a))); // the id exists: nothing written
    auto got = run(s->get_assistant(a.assistant_id));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->version == 1);
    BOOST_TEST(got->name == "first");
    BOOST_TEST(got->config.at("recursion_limit").as_int64() == 5);
    auto next = *got;
    next.name = "second";
    auto v2 = run(s->add_assistant_version(next));
    BOOST_TEST_REQUIRE(v2.has_value());
    BOOST_TEST(v2->version == 2);
    BOOST_TEST(run(s->get_assistant(a.assistant_id))->name == "second");
    BOOST_TEST(run(s->get_assistant(a.assistant_id, 1))->name == "first");
    BOOST_TEST(run(s->assistant_versions(a.assistant_id)).size() == 2u);
    BOOST_TEST(run(s->set_latest_assistant(a.assistant_id, 1)));
    BOOST_TEST(!run(s->set_latest_assistant(a.assistant_id, 7)));
    BOOST_TEST(run(s->get_assistant(a.assistant_id))->name == "first");
    auto mine = run(s->list_assistants("k1"));
    BOOST_TEST_REQUIRE(mine.size() == 1u); // latest versions only
    BOOST_TEST(mine[0].version == 1);
    BOOST_TEST(run(s->list_assistants("k2")).empty());
    srv::assistant_record ghost;
    ghost.assistant_id = "0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f62";
    BOOST_TEST(!run(s->add_assistant_version(ghost)).has_value());
    BOOST_TEST(run(s->delete_assistant(a.assistant_id)));
    BOOST_TEST(!run(s->get_assistant(a.assistant_id)).has_value());
    BOOST_TEST(!run(s->delete_assistant(a.assistant_id)));
}

RUN_STORE_CASE(thread_create_get_put_patch_delete) {
    auto s = db.open();
    auto t = make_thread("k1", "alice");
    BOOST_TEST(run(s->create_thread(t)));
    auto again = make_thread("k1", "bob");
    BOOST_TEST(!run(s->create_thread(again))); // a key is created once

    auto got = run(s->get_thread("k1"));
    BOOST_REQUIRE(got);
    BOOST_TEST(got->thread_id == "id-k1");
    BOOST_TEST(got->owner == "alice");
    BOOST_TEST(got->status == "idle");
    BOOST_TEST(got->metadata == (json::object{{"a", 1}}));
    BOOST_TEST(got->values.is_null());
    BOOST_TEST(got->error.is_null());
    BOOST_TEST(!got->temporary);
    BOOST_TEST(got->created_at == t.created_at);
    BOOST_TEST(!run(s->get_thread("nope")));

    auto changed = *got;
    changed.status = "interrupted";
    changed.values = json::object{{"x", 1}};
    changed.interrupts = json::object{{"task", json::array{"ask"}}};
    changed.error = json::object{{"error", "E"}, {"message", "m"}};
    changed.graph_id = "g";
    changed.state_updated_at = t.created_at + 5;
    BOOST_TEST(run(s->put_thread(changed)));
    auto put = run(s->get_thread("k1"));
    BOOST_REQUIRE(put);
    BOOST_TEST(put->status == "interrupted");
    BOOST_TEST(put->values == (json::object{{"x", 1}}));
    BOOST_TEST(put->interrupts == changed.interrupts);
    BOOST_TEST(put->error == changed.error);
    BOOST_TEST(put->graph_id == "g");
    BOOST_TEST(put->state_updated_at == t.created_at + 5);
    auto missing = make_thread("absent");
    BOOST_TEST(!run(s->put_thread(missing)));
    BOOST_TEST(!run(s->get_thread("absent")));

    std::this_thread::sleep_for(2ms);
    auto patched = run(s->patch_thread("k1", json::object{{"b", 2}, {"a", 3}}));
    BOOST_REQUIRE(patched);
    BOOST_TEST(patched->metadata == (json::object{{"a", 3}, {"b", 2}}));
    BOOST_TEST(patched->updated_at > put->updated_at);
    BOOST_TEST(run(s->get_thread("k1"))->metadata == patched->metadata);
    BOOST_TEST(!run(s->patch_thread("absent", json::object{{"b", 2}})));

    auto t2 = make_thread("k2");
    (void)run(s->create_thread(t2));
    auto keys = run(s->thread_keys());
    std::sort(keys.begin(), keys.end());
    BOOST_TEST(keys == (strings{"k1", "k2"}), boost::test_tools::per_element());

    BOOST_TEST(run(s->delete_thread("k1")));
    BOOST_TEST(!run(s->get_thread("k1")));
    BOOST_TEST(!run(s->delete_thread("k1")));
    BOOST_TEST(run(s->thread_keys()) == (strings{"k2"}), boost::test_tools::per_element());
}

RUN_STORE_CASE(thread_list_scoped_sorted_filtered) {
    auto s = db.open();
    auto a1 = make_thread("a1", "alice", 1000), a2 = make_thread("a2", "alice", 3000), a3 = make_thread("a3", "alice", 2000);
    a1.thread_id = "zeta";
    a2.thread_id = "alpha";
    a3.thread_id = "mid";
    a2.status = "interrupted";
    a1.updated_at = 9000;
    auto temp = make_thread("a4", "alice", 4000);
    temp.temporary = true;
    auto b1 = make_thread("b1", "bob", 5000);
    for (auto* t : {&a1, &a2, &a3, &temp, &b1}) BOOST_REQUIRE(run(s->create_thread(*t)));

    srv::thread_query q;
    q.owner = "alice"; // newest first by default; bob's and the temporary thread are not listed
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"a2", "a3", "a1"}), boost::test_tools::per_element());
    q.ascending = true;
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"a1", "a3", "a2"}), boost::test_tools::per_element());
    q.sort_by = "thread_id";
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"a2", "a3", "a1"}), boost::test_tools::per_element());
    q.sort_by = "updated_at";
    q.ascending = false;
    BOOST_TEST(run(s->list_threads(q)).front().key == "a1");
    q.sort_by = "created_at";
    q.status = "idle";
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"a3", "a1"}), boost::test_tools::per_element());
    q.status = {};
    const strings only{"a1", "a2", "b1"};
    q.keys = &only;
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"a2", "a1"}), boost::test_tools::per_element());
    q.keys = nullptr;
    q.owner = "bob";
    BOOST_TEST(keys_of(run(s->list_threads(q))) == (strings{"b1"}), boost::test_tools::per_element());
    q.owner = "carol";
    BOOST_TEST(run(s->list_threads(q)).empty());
    q.sort_by = "key; DROP TABLE sg_threads";
    BOOST_CHECK_THROW(run(s->list_threads(q)), std::invalid_argument);
}

RUN_STORE_CASE(braced_rules_and_queries_inside_co_await) {
    auto s = db.open();
    const std::string owner(70, 'o'); // a key digest's length, past the small-string buffer
    (void)run(s->create_thread(make_thread("idle-one", owner)));
    auto [busy, idle] = run(natural_calls(*s, owner));
    BOOST_TEST(busy == strings{"a-thread-key-longer-than-the-small-string-buffer-" + owner}, boost::test_tools::per_element());
    BOOST_TEST(idle == strings{"idle-one"}, boost::test_tools::per_element());
    auto t = run(s->get_thread("a-thread-key-longer-than-the-small-string-buffer-" + owner));
    BOOST_REQUIRE(t);
    BOOST_TEST(t->graph_id == "a-graph-id-longer-than-the-small-string-buffer"); // the braced graph_id reached the store
}

RUN_STORE_CASE(thread_delete_refused_while_a_run_waits) {
    auto s = db.open();
    queue(*s, "r1", "t");
    BOOST_TEST(run(s->get_thread("t"))->status == "busy");
    BOOST_TEST(!run(s->delete_thread("t")));
    BOOST_TEST(run(s->get_thread("t")));
    BOOST_TEST(run(s->get_run("r1")));
    BOOST_REQUIRE(run(s->cancel("r1", "interrupt")));
    BOOST_TEST(run(s->get_thread("t"))->status == "idle");
    queue(*s, "r2", "t");
    BOOST_REQUIRE(run(s->claim("w")));
    std::vector<srv::run_event> ev{{0, "values", "{}"}};
    BOOST_REQUIRE(run(s->append_events("r2", "w", ev)));
    finish(*s, "r2", "w");
    BOOST_TEST(run(s->delete_thread("t")));
    BOOST_TEST(!run(s->get_run("r1"))); // its runs go with it
    BOOST_TEST(!run(s->get_run("r2")));
    BOOST_TEST(run(s->read_events("r2", 0, 10)).empty()); // and their events
    BOOST_TEST((run(s->event_bounds("r2")) == std::pair<std::int64_t, std::int64_t>{0, 0}));
}

RUN_STORE_CASE(thread_put_while_a_run_waits_reads_busy) {
    auto s = db.open();
    queue(*s, "r1", "t");
    auto t = *run(s->get_thread("t"));
    t.status = "interrupted";
    t.values = json::object{{"v", 1}};
    BOOST_REQUIRE(run(s->put_thread(t)));
    auto busy = run(s->get_thread("t"));
    BOOST_TEST(busy->status == "busy"); // r1 waits
    BOOST_TEST(busy->values == t.values);
    BOOST_REQUIRE(run(s->cancel("r1", "interrupt")));
    BOOST_TEST(run(s->get_thread("t"))->status == "interrupted"); // what it rests at
}

// -- submit ---------------------------------------------------------------------------------------

RUN_STORE_CASE(submit_refusals) {
    auto s = db.open();
    // thread_missing: no thread, nothing to create; nothing stored.
    auto r0 = make_run("r0", "ghost");
    auto res = run(s->submit(r0, rules_for()));
    BOOST_TEST((res.refused == srv::submit_refusal::thread_missing));
    BOOST_TEST(!run(s->get_run("r0")));
    BOOST_TEST(!run(s->get_thread("ghost")));

    // create: the thread is made with the run; it becomes busy and takes the run's graph.
    auto t = make_thread("t");
    auto rules = rules_for("g1");
    rules.create = &t;
    const json::object graph_metadata{{"assistant_id", "asst"}};
    rules.graph_metadata = &graph_metadata;
    auto r1 = make_run("r1", "t");
    res = run(s->submit(r1, rules));
    BOOST_TEST((res.refused == srv::submit_refusal::none));
    BOOST_TEST(res.created_thread);
    BOOST_TEST(res.queued == 0u);
    BOOST_TEST(r1.status == "pending");
    BOOST_TEST(r1.seq > 0);
    auto th = run(s->get_thread("t"));
    BOOST_REQUIRE(th);
    BOOST_TEST(th->status == "busy");
    BOOST_TEST(th->graph_id == "g1");
    BOOST_TEST(th->metadata.at("graph_id") == "g1");
    BOOST_TEST(th->metadata.at("assistant_id") == "asst");
    BOOST_TEST(stored(*s, "r1").status == "pending");

    // other_graph: the thread belongs to g1.
    auto r2 = make_run("r2", "t");
    res = run(s->submit(r2, rules_for("g2")));
    BOOST_TEST((res.refused == srv::submit_refusal::other_graph));
    BOOST_TEST(res.graph_id == "g1");
    BOOST_TEST(!run(s->get_run("r2")));

    // busy: reject while r1 waits, naming it.
    auto busy = rules_for("g1");
    busy.reject_if_busy = true;
    res = run(s->submit(r2, busy));
    BOOST_TEST((res.refused == srv::submit_refusal::busy));
    BOOST_TEST(res.busy_run == "r1");
    BOOST_TEST(!run(s->get_run("r2")));

    // queue_full: two runs on the thread at most.
    auto bounded = rules_for("g1");
    bounded.max_queued = 2;
    res = run(s->submit(r2, bounded));
    BOOST_TEST((res.refused == srv::submit_refusal::none));
    BOOST_TEST(res.queued == 1u);
    auto r3 = make_run("r3", "t");
    res = run(s->submit(r3, bounded));
    BOOST_TEST((res.refused == srv::submit_refusal::queue_full));
    BOOST_TEST(res.queued == 2u);
    BOOST_TEST(!run(s->get_run("r3")));
    BOOST_TEST(run(s->list_runs("t", std::nullopt, 10, 0)).size() == 2u);
}

RUN_STORE_CASE(submit_cancels_the_others) {
    auto s = db.open();
    queue(*s, "r1", "t");
    queue(*s, "r2", "t");
    auto held = run(s->claim("w"));
    BOOST_REQUIRE(held);
    BOOST_TEST(held->run_id == "r1");

    auto rules = rules_for();
    rules.cancel_others = "rollback";
    auto r3 = make_run("r3", "t");
    auto res = run(s->submit(r3, rules));
    BOOST_TEST((res.refused == srv::submit_refusal::none));
    auto cancelled = res.cancelled;
    std::sort(cancelled.begin(), cancelled.end());
    BOOST_TEST(cancelled == (strings{"r1", "r2"}), boost::test_tools::per_element());
    // r2 waited unheld: it ended at once. r1 runs on, asked to stop.
    auto r2 = stored(*s, "r2");
    BOOST_TEST(r2.status == "interrupted");
    BOOST_TEST(r2.finished());
    auto r1 = stored(*s, "r1");
    BOOST_TEST(r1.status == "running");
    BOOST_TEST(r1.cancel == "rollback");
    auto hb = run(s->heartbeat("w", {"r1"}));
    BOOST_REQUIRE_EQUAL(hb.cancelled.size(), 1u);
    BOOST_TEST(hb.cancelled[0].first == "r1");
    BOOST_TEST(hb.cancelled[0].second == "rollback");
    BOOST_TEST(stored(*s, "r3").status == "pending");
    BOOST_TEST(stored(*s, "r3").cancel.empty());
    // r3 starts once r1 ends.
    BOOST_TEST(!run(s->claim("w2")));
    finish(*s, "r1", "w");
    auto next = run(s->claim("w2"));
    BOOST_REQUIRE(next);
    BOOST_TEST(next->run_id == "r3");
}

RUN_STORE_CASE(seq_orders_runs_per_thread) {
    auto s = db.open();
    auto a1 = queue(*s, "a1", "A");
    auto b1 = queue(*s, "b1", "B");
    auto a2 = queue(*s, "a2", "A");
    auto a3 = queue(*s, "a3", "A");
    BOOST_TEST(a1.seq < b1.seq);
    BOOST_TEST(b1.seq < a2.seq);
    BOOST_TEST(a2.seq < a3.seq);
    BOOST_TEST(stored(*s, "a2").seq == a2.seq);

    BOOST_TEST(ids_of(run(s->runs_after("A", 0))) == (strings{"a1", "a2", "a3"}), boost::test_tools::per_element());
    BOOST_TEST(ids_of(run(s->runs_after("A", a1.seq))) == (strings{"a2", "a3"}), boost::test_tools::per_element());
    BOOST_TEST(ids_of(run(s->list_runs("A", std::nullopt, 10, 0))) == (strings{"a3", "a2", "a1"}),
               boost::test_tools::per_element());
    BOOST_TEST(ids_of(run(s->list_runs("A", std::nullopt, 1, 1))) == (strings{"a2"}), boost::test_tools::per_element());
    BOOST_TEST(run(s->current_seq("A")) == a1.seq);

    auto c = run(s->claim("w"));
    BOOST_REQUIRE(c);
    BOOST_TEST(c->run_id == "a1");
    BOOST_TEST(ids_of(run(s->list_runs("A", std::string("pending"), 10, 0))) == (strings{"a3", "a2"}),
               boost::test_tools::per_element());
    BOOST_TEST(ids_of(run(s->list_runs("A", std::string("running"), 10, 0))) == (strings{"a1"}),
               boost::test_tools::per_element());
    finish(*s, "a1", "w");
    BOOST_TEST(run(s->current_seq("A")) == a2.seq);
    BOOST_REQUIRE(run(s->cancel("a2", "interrupt")));
    BOOST_REQUIRE(run(s->cancel("a3", "interrupt")));
    BOOST_TEST(run(s->current_seq("A")) == a3.seq); // none waits: the newest
    BOOST_TEST(run(s->current_seq("nobody")) == 0);
}

// -- claims ---------------------------------------------------------------------------------------

RUN_STORE_CASE(claim_takes_only_the_head_of_each_thread) {
    auto s = db.open();
    queue(*s, "a1", "A");
    queue(*s, "a2", "A");
    queue(*s, "b1", "B");
    auto first = run(s->claim("w"));
    BOOST_REQUIRE(first);
    BOOST_TEST(first->run_id == "a1");
    BOOST_TEST(first->status == "running");
    BOOST_TEST(first->worker == "w");
    BOOST_TEST(first->attempts == 1);
    BOOST_TEST(first->lease_until > srv::run_store::now());
    auto second = run(s->claim("w"));
    BOOST_REQUIRE(second);
    BOOST_TEST(second->run_id == "b1");
    // a2 waits behind a1, which runs: nothing to start, for any worker.
    BOOST_TEST(!run(s->claim("w")));
    BOOST_TEST(!run(s->claim("other")));
    BOOST_TEST(stored(*s, "a1").worker == "w");
    finish(*s, "a1", "w");
    BOOST_TEST(run(s->get_thread("A"))->status == "busy"); // a2 still waits
    auto third = run(s->claim("other"));
    BOOST_REQUIRE(third);
    BOOST_TEST(third->run_id == "a2");
    finish(*s, "a2", "other");
    BOOST_TEST(run(s->get_thread("A"))->status == "idle");
}

RUN_STORE_CASE(claim_waits_for_not_before) {
    auto s = db.open();
    BOOST_TEST(!run(s->next_due()));
    const auto later = srv::run_store::now() + std::int64_t{3600} * 1'000'000;
    (void)run(s->create_thread(make_thread("A")));
    auto delayed = make_run("late", "A");
    delayed.not_before = later;
    BOOST_REQUIRE((run(s->submit(delayed, rules_for())).refused == srv::submit_refusal::none));
    BOOST_TEST(!run(s->claim("w")));
    BOOST_TEST(run(s->next_due()).value_or(0) == later);

    (void)run(s->create_thread(make_thread("B")));
    auto soon = make_run("soon", "B");
    soon.not_before = srv::run_store::now() + 300'000; // 300 ms
    BOOST_REQUIRE((run(s->submit(soon, rules_for())).refused == srv::submit_refusal::none));
    BOOST_TEST(run(s->next_due()).value_or(0) == soon.not_before);
    BOOST_TEST(!run(s->claim("w")));
    std::this_thread::sleep_for(400ms);
    auto c = run(s->claim("w"));
    BOOST_REQUIRE(c);
    BOOST_TEST(c->run_id == "soon");
    BOOST_TEST(!run(s->claim("w")));
}

RUN_STORE_CASE(claim_exactly_once_under_concurrency) {
    // 2 OS threads, each with its own store object (one shared in memory), 4 coroutines each,
    // claiming 200 runs on 50 threads (4 each) and finishing them.
    constexpr int threads = 50, per_thread = 4, total = threads * per_thread;
    auto setup = db.open();
    std::map<std::string, std::string> previous; // run -> the run before it on its thread
    for (int i = 0; i < per_thread; ++i)
        for (int t = 0; t < threads; ++t) {
            const std::string id = "r" + std::to_string(t) + "." + std::to_string(i);
            queue(*setup, id, "t" + std::to_string(t));
            if (i) previous[id] = "r" + std::to_string(t) + "." + std::to_string(i - 1);
        }

    std::mutex m;
    std::map<std::string, int> claimed;
    std::vector<std::string> early; // claimed while the run before it had not ended
    std::atomic<int> done{0};
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    auto worker = [&](std::shared_ptr<srv::run_store> s, std::string name) -> net::awaitable<void> {
        while (done < total && std::chrono::steady_clock::now() < deadline) {
            auto r = co_await s->claim(name);
            if (!r) {
                net::steady_timer t(co_await net::this_coro::executor, 2ms);
                co_await t.async_wait(net::use_awaitable);
                continue;
            }
            if (auto p = previous.find(r->run_id); p != previous.end()) {
                auto before = co_await s->get_run(p->second);
                if (!before || !before->finished()) {
                    std::lock_guard lock(m);
                    early.push_back(r->run_id);
                }
            }
            {
                std::lock_guard lock(m);
                ++claimed[r->run_id];
            }
            r->status = "success";
            const bool held = co_await s->finish(*r, name, nullptr);
            if (held) ++done;
        }
    };
    std::vector<std::thread> os;
    std::vector<std::exception_ptr> errors(2);
    for (int k = 0; k < 2; ++k)
        os.emplace_back([&, k] {
            try {
                auto s = db.shared() ? db.open() : setup;
                net::io_context io;
                std::vector<std::future<void>> fs;
                for (int c = 0; c < 4; ++c)
                    fs.push_back(net::co_spawn(io, worker(s, "w" + std::to_string(k) + "." + std::to_string(c)),
                                               net::use_future));
                io.run();
                for (auto& f : fs) f.get();
            } catch (...) {
                errors[k] = std::current_exception();
            }
        });
    for (auto& t : os) t.join();
    for (auto& e : errors)
        if (e) std::rethrow_exception(e);
    BOOST_TEST(done.load() == total);
    BOOST_TEST(claimed.size() == std::size_t{total});
    for (const auto& [id, n] : claimed) BOOST_TEST(n == 1, "run " << id << " claimed " << n << " times");
    BOOST_TEST(early.empty(), "claimed before the run ahead of it ended: " << early.size());
    BOOST_TEST(!run(setup->claim("late")));
}

RUN_STORE_CASE(takeover_after_the_lease_expires) {
    srv::run_store_options o;
    o.lease = 300ms;
    o.max_attempts = 2;
    auto s = db.open(o);
    queue(*s, "r1", "t");
    auto first = run(s->claim("w1"));
    BOOST_REQUIRE(first);
    BOOST_TEST(first->attempts == 1);
    BOOST_TEST(!run(s->claim("w2"))); // held
    std::this_thread::sleep_for(400ms);
    auto second = run(s->claim("w2"));
    BOOST_REQUIRE(second);
    BOOST_TEST(second->run_id == "r1");
    BOOST_TEST(second->worker == "w2");
    BOOST_TEST(second->attempts == 2);
    // The first worker lost it: its heartbeat says so, its writes are refused.
    auto hb = run(s->heartbeat("w1", {"r1"}));
    BOOST_TEST(hb.lost == (strings{"r1"}), boost::test_tools::per_element());
    BOOST_TEST(run(s->heartbeat("w2", {"r1"})).lost.empty());
    // Past max_attempts: failed, its error naming the run and the count; the thread rests in error.
    std::this_thread::sleep_for(400ms);
    BOOST_TEST(!run(s->claim("w3")));
    auto failed = stored(*s, "r1");
    BOOST_TEST(failed.status == "error");
    BOOST_TEST(failed.worker.empty());
    BOOST_REQUIRE(failed.error.is_object());
    const std::string message = failed.error.as_object().at("message").as_string().c_str();
    BOOST_TEST(message.find("r1") != std::string::npos, message);
    BOOST_TEST(message.find('2') != std::string::npos, message);
    BOOST_TEST(run(s->get_thread("t"))->status == "error");
}

RUN_STORE_CASE(heartbeat_renews_and_reports) {
    srv::run_store_options o;
    o.lease = 300ms;
    auto s = db.open(o);
    queue(*s, "r1", "A");
    queue(*s, "r2", "B");
    BOOST_REQUIRE(run(s->claim("w")));
    BOOST_REQUIRE(run(s->claim("w")));
    // Renewed within the lease, the claims outlive it.
    for (int i = 0; i < 3; ++i) {
        std::this_thread::sleep_for(150ms);
        auto hb = run(s->heartbeat("w", {"r1", "r2"}));
        BOOST_TEST(hb.lost.empty());
        BOOST_TEST(hb.cancelled.empty());
    }
    BOOST_TEST(!run(s->claim("thief")));
    BOOST_REQUIRE(run(s->cancel("r2", "interrupt")));
    auto hb = run(s->heartbeat("w", {"r1", "r2", "unknown"}));
    BOOST_TEST(hb.lost == (strings{"unknown"}), boost::test_tools::per_element());
    BOOST_REQUIRE_EQUAL(hb.cancelled.size(), 1u);
    BOOST_TEST(hb.cancelled[0].first == "r2");
    BOOST_TEST(hb.cancelled[0].second == "interrupt");
    BOOST_TEST(run(s->heartbeat("someone-else", {"r1"})).lost == (strings{"r1"}), boost::test_tools::per_element());
}

RUN_STORE_CASE(finish_is_fenced) {
    auto s = db.open();
    queue(*s, "r1", "t");
    queue(*s, "r2", "t");
    BOOST_REQUIRE(run(s->claim("w")));
    auto r = stored(*s, "r1");
    r.status = "success";
    r.result = json::object{{"answer", 42}};
    auto th = *run(s->get_thread("t"));
    th.values = json::object{{"answer", 42}};
    th.status = "idle";
    // Another worker's finish writes nothing.
    BOOST_TEST(!run(s->finish(r, "intruder", &th)));
    BOOST_TEST(stored(*s, "r1").status == "running");
    BOOST_TEST(run(s->get_thread("t"))->values.is_null());
    run(s->set_anchor("r1", "intruder", json::value("cp-0")));
    BOOST_TEST(stored(*s, "r1").anchor.is_null());
    run(s->set_anchor("r1", "w", json::value("cp-1")));
    run(s->set_anchor("r1", "w", json::value("cp-2"))); // once
    BOOST_TEST(stored(*s, "r1").anchor == json::value("cp-1"));
    // The holder's finish writes the run and the thread; the thread stays busy (r2 waits).
    BOOST_TEST(run(s->finish(r, "w", &th)));
    auto done = stored(*s, "r1");
    BOOST_TEST(done.status == "success");
    BOOST_TEST(done.result == r.result);
    BOOST_TEST(done.worker.empty());
    auto after = run(s->get_thread("t"));
    BOOST_TEST(after->values == th.values);
    BOOST_TEST(after->status == "busy");
    BOOST_TEST(!run(s->finish(r, "w", &th))); // once
}

RUN_STORE_CASE(workers_cancel_requests_and_expiry) {
    auto s = db.open();
    queue(*s, "r1", "A");
    queue(*s, "r2", "B");
    queue(*s, "r3", "C");
    BOOST_TEST(run(s->running_workers()).empty());
    BOOST_REQUIRE(run(s->claim("w1")));
    BOOST_REQUIRE(run(s->claim("w1")));
    BOOST_REQUIRE(run(s->claim("w2")));
    auto workers = run(s->running_workers());
    std::sort(workers.begin(), workers.end());
    BOOST_TEST(workers == (strings{"w1", "w2"}), boost::test_tools::per_element());

    BOOST_TEST(run(s->cancel_requests("w1")).empty());
    BOOST_REQUIRE(run(s->cancel("r2", "rollback")));
    auto asked = run(s->cancel_requests("w1"));
    BOOST_REQUIRE_EQUAL(asked.size(), 1u);
    BOOST_TEST(asked[0].first == "r2");
    BOOST_TEST(asked[0].second == "rollback");
    BOOST_TEST(run(s->cancel_requests("w2")).empty());

    // w1's process is gone: its claims end now, not after the lease (10 s here).
    BOOST_TEST(run(s->expire_worker("w1")) == 2u);
    BOOST_TEST(run(s->expire_worker("nobody")) == 0u);
    auto taken = run(s->claim("w3"));
    BOOST_REQUIRE(taken);
    BOOST_TEST(taken->run_id == "r1");
    BOOST_TEST(taken->attempts == 2);
    // r2 was asked to stop: ended, not started again; r3 stays w2's.
    BOOST_TEST(!run(s->claim("w3")));
    BOOST_TEST(stored(*s, "r2").status == "interrupted");
    BOOST_TEST(stored(*s, "r3").worker == "w2");
    BOOST_TEST(run(s->heartbeat("w1", {"r1"})).lost == (strings{"r1"}), boost::test_tools::per_element());
    workers = run(s->running_workers());
    std::sort(workers.begin(), workers.end());
    BOOST_TEST(workers == (strings{"w2", "w3"}), boost::test_tools::per_element());
}

RUN_STORE_CASE(release_hands_the_run_back_first) {
    auto s = db.open();
    queue(*s, "r1", "t");
    queue(*s, "r2", "t");
    auto c = run(s->claim("w"));
    BOOST_REQUIRE(c);
    BOOST_TEST(!run(s->release("r1", "other")));
    BOOST_TEST(stored(*s, "r1").status == "running");
    BOOST_TEST(run(s->release("r1", "w")));
    auto back = stored(*s, "r1");
    BOOST_TEST(back.status == "pending");
    BOOST_TEST(back.worker.empty());
    BOOST_TEST(back.attempts == 0); // not counted
    BOOST_TEST(!run(s->release("r1", "w")));
    auto again = run(s->claim("w2"));
    BOOST_REQUIRE(again);
    BOOST_TEST(again->run_id == "r1"); // first in its thread still
    BOOST_TEST(again->attempts == 1);
}

RUN_STORE_CASE(cancel_ends_an_unclaimed_run_at_once) {
    auto s = db.open();
    queue(*s, "r1", "t");
    queue(*s, "r2", "t");
    auto c = run(s->cancel("r2", "interrupt"));
    BOOST_REQUIRE(c);
    BOOST_TEST(c->status == "interrupted");
    BOOST_TEST(stored(*s, "r2").status == "interrupted");
    BOOST_TEST(stored(*s, "r2").finished());
    BOOST_REQUIRE(run(s->claim("w")));
    auto held = run(s->cancel("r1", "rollback"));
    BOOST_REQUIRE(held);
    BOOST_TEST(held->status == "running"); // its worker stops it
    BOOST_TEST(held->cancel == "rollback");
    BOOST_TEST(run(s->cancel("r1", "interrupt"))->cancel == "rollback"); // the stronger action stays
    BOOST_TEST(!run(s->claim("w2"))); // r2 ended: nothing else
    BOOST_TEST(!run(s->cancel("absent", "interrupt")));
    BOOST_CHECK_THROW(run(s->cancel("r1", "explode")), std::invalid_argument);
    // A thread whose only waiting run is cancelled is no longer busy.
    queue(*s, "x1", "other");
    BOOST_REQUIRE(run(s->cancel("x1", "interrupt")));
    BOOST_TEST(run(s->get_thread("other"))->status == "idle");
    BOOST_TEST(!run(s->delete_run("r1"))); // running
    BOOST_TEST(run(s->delete_run("x1")));
    BOOST_TEST(!run(s->get_run("x1")));
}

// -- events ---------------------------------------------------------------------------------------

RUN_STORE_CASE(events_append_read_bounds_trim) {
    srv::run_store_options o;
    o.max_events_per_run = 5;
    auto s = db.open(o);
    queue(*s, "r1", "t");
    BOOST_REQUIRE(run(s->claim("w")));
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{0, 0}));
    std::vector<srv::run_event> first;
    for (int i = 0; i < 3; ++i) first.push_back({i, i == 0 ? "metadata" : "values", "{\"i\":" + std::to_string(i) + "}"});
    BOOST_TEST(run(s->append_events("r1", "w", first)));
    auto read = run(s->read_events("r1", 0, 100));
    BOOST_REQUIRE_EQUAL(read.size(), 3u);
    for (int i = 0; i < 3; ++i) {
        BOOST_TEST(read[i].id == i);
        BOOST_TEST(read[i].name == first[i].name);
        BOOST_TEST(read[i].data == first[i].data);
    }
    auto one = run(s->read_events("r1", 1, 1));
    BOOST_REQUIRE_EQUAL(one.size(), 1u);
    BOOST_TEST(one[0].id == 1);
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{0, 3}));

    // Beyond 5 kept, the oldest go.
    std::vector<srv::run_event> more;
    for (int i = 3; i < 10; ++i) more.push_back({i, "updates|sub:1", "{}"});
    BOOST_TEST(run(s->append_events("r1", "w", more)));
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{5, 10}));
    auto kept = run(s->read_events("r1", 0, 100));
    BOOST_REQUIRE_EQUAL(kept.size(), 5u);
    BOOST_TEST(kept.front().id == 5);
    BOOST_TEST(kept.back().id == 9);
    BOOST_TEST(kept.front().name == "updates|sub:1");

    // An event stored again (a flush retried after its answer was lost) replaces the one kept.
    std::vector<srv::run_event> again{{8, "values", "{\"again\":true}"}, {10, "values", "{\"i\":10}"}};
    BOOST_TEST(run(s->append_events("r1", "w", again)));
    auto after = run(s->read_events("r1", 8, 100));
    BOOST_REQUIRE_EQUAL(after.size(), 3u);
    BOOST_TEST(after[0].data == "{\"again\":true}");
    BOOST_TEST(after[0].name == "values");
    BOOST_TEST(after[1].id == 9);
    BOOST_TEST(after[2].id == 10);
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{6, 11}));

    // Not the holder: nothing written.
    std::vector<srv::run_event> stray{{11, "values", "{}"}};
    BOOST_TEST(!run(s->append_events("r1", "intruder", stray)));
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{6, 11}));
    BOOST_TEST(run(s->read_events("unknown", 0, 10)).empty());
    BOOST_TEST((run(s->event_bounds("unknown")) == std::pair<std::int64_t, std::int64_t>{0, 0}));
    // A finished run's events stay for replay; deleting the run takes them.
    finish(*s, "r1", "w");
    BOOST_TEST(run(s->read_events("r1", 0, 100)).size() == 5u);
    BOOST_TEST(run(s->delete_run("r1")));
    BOOST_TEST(run(s->read_events("r1", 0, 100)).empty());
}

RUN_STORE_CASE(a_run_s_last_events_go_with_its_end) {
    srv::run_store_options o;
    o.max_events_per_run = 4;
    auto s = db.open(o);
    queue(*s, "r1", "t");
    BOOST_REQUIRE(run(s->claim("w")));
    std::vector<srv::run_event> first{{0, "metadata", "{\"run_id\":\"r1\"}"}, {1, "values", "{\"i\":1}"}};
    BOOST_REQUIRE(run(s->append_events("r1", "w", first)));

    // Not the holder: neither the end nor its events are written.
    auto r = stored(*s, "r1");
    r.status = "success";
    r.result = json::object{{"done", true}};
    std::vector<srv::run_event> last{{2, "values", "{\"i\":2}"}, {3, "values", "{\"i\":3}"}, {4, "metadata", "{\"usage\":{}}"}};
    BOOST_TEST(!run(s->finish(r, "intruder", nullptr, last)));
    BOOST_TEST(stored(*s, "r1").status == "running");
    BOOST_TEST((run(s->event_bounds("r1")) == std::pair<std::int64_t, std::int64_t>{0, 2}));

    // The holder: the run ends with its last events after those stored, the oldest beyond the
    // bound dropped as append_events drops them.
    BOOST_TEST(run(s->finish(r, "w", nullptr, last)));
    BOOST_TEST(stored(*s, "r1").status == "success");
    auto kept = run(s->read_events("r1", 0, 100));
    BOOST_REQUIRE_EQUAL(kept.size(), 4u);
    BOOST_TEST(kept.front().id == 1);
    BOOST_TEST(kept.back().id == 4);
    BOOST_TEST(kept.back().name == "metadata");
    BOOST_TEST(kept[1].data == "{\"i\":2}");

    // A run ending with no events left to write keeps those it has.
    queue(*s, "r2", "t2");
    BOOST_REQUIRE(run(s->claim("w")));
    std::vector<srv::run_event> one{{0, "values", "{}"}};
    BOOST_REQUIRE(run(s->append_events("r2", "w", one)));
    finish(*s, "r2", "w");
    BOOST_TEST(run(s->read_events("r2", 0, 10)).size() == 1u);
}

RUN_STORE_CASE(finished_runs_kept_up_to_the_bound) {
    srv::run_store_options o;
    o.max_finished_runs = 3;
    auto s = db.open(o);
    for (int i = 0; i < 5; ++i) {
        const std::string id = "r" + std::to_string(i);
        queue(*s, id, "t" + std::to_string(i));
        auto c = run(s->claim("w"));
        BOOST_REQUIRE(c);
        BOOST_REQUIRE(c->run_id == id);
        std::vector<srv::run_event> ev{{0, "values", "{}"}};
        BOOST_REQUIRE(run(s->append_events(id, "w", ev)));
        std::this_thread::sleep_for(1ms); // distinct finish times
        finish(*s, id, "w");
    }
    queue(*s, "waiting", "tw"); // runs not finished are never removed
    for (int i = 0; i < 2; ++i) {
        BOOST_TEST(!run(s->get_run("r" + std::to_string(i))), "r" << i << " is kept");
        BOOST_TEST(run(s->read_events("r" + std::to_string(i), 0, 10)).empty());
    }
    for (int i = 2; i < 5; ++i) {
        BOOST_TEST(run(s->get_run("r" + std::to_string(i))), "r" << i << " is gone");
        BOOST_TEST(run(s->read_events("r" + std::to_string(i), 0, 10)).size() == 1u);
    }
    BOOST_TEST(run(s->get_run("waiting")));
}

RUN_STORE_CASE(a_temporary_thread_goes_with_its_last_run) {
    srv::run_store_options o;
    o.max_finished_runs = 1;
    auto s = db.open(o);
    BOOST_REQUIRE(submit_stateless(*s, "r1", "tmp").created_thread);
    BOOST_REQUIRE(run(s->claim("w")));
    finish(*s, "r1", "w");
    BOOST_TEST(run(s->get_thread("tmp"))); // its run is kept
    queue(*s, "r2", "kept");
    BOOST_REQUIRE(run(s->claim("w")));
    std::this_thread::sleep_for(1ms);
    finish(*s, "r2", "w"); // r1 is trimmed, and its thread with it
    BOOST_TEST(!run(s->get_run("r1")));
    BOOST_TEST(!run(s->get_thread("tmp")));
    BOOST_TEST(run(s->get_thread("kept")));
}

RUN_STORE_CASE(claim_some_takes_the_oldest_runs_one_per_thread) {
    auto s = db.open();
    queue(*s, "r1", "t1");
    queue(*s, "r2", "t1"); // waits behind r1
    queue(*s, "r3", "t2");
    queue(*s, "r4", "t3");
    auto first = run(s->claim_some("w", 2));
    BOOST_REQUIRE_EQUAL(first.size(), 2u);
    BOOST_TEST(first[0].run_id == "r1");
    BOOST_TEST(first[1].run_id == "r3");
    BOOST_TEST(first[0].status == "running");
    BOOST_TEST(first[0].worker == "w");
    BOOST_TEST(first[0].attempts == 1);
    BOOST_TEST(stored(*s, "r3").worker == "w");
    auto rest = run(s->claim_some("w", 5));
    BOOST_REQUIRE_EQUAL(rest.size(), 1u);
    BOOST_TEST(rest[0].run_id == "r4");
    BOOST_TEST(run(s->claim_some("w", 5)).empty());
    BOOST_TEST(run(s->claim_some("w", 0)).empty());
    finish(*s, "r1", "w");
    auto next = run(s->claim_some("other", 5));
    BOOST_REQUIRE_EQUAL(next.size(), 1u);
    BOOST_TEST(next[0].run_id == "r2");
    BOOST_TEST(stored(*s, "r2").worker == "other");
}

RUN_STORE_CASE(a_temporary_thread_goes_with_its_deleted_run_and_only_then) {
    srv::run_store_options o;
    o.max_finished_runs = 2;
    auto s = db.open(o);
    BOOST_REQUIRE(submit_stateless(*s, "r1", "tmp").created_thread);
    BOOST_REQUIRE(run(s->claim("w")));
    finish(*s, "r1", "w");
    // a second run of the same thread
    BOOST_REQUIRE((submit_stateless(*s, "r2", "tmp").refused == srv::submit_refusal::none));
    BOOST_REQUIRE(run(s->claim("w")));
    std::this_thread::sleep_for(1ms);
    finish(*s, "r2", "w");
    BOOST_TEST(run(s->delete_run("r1")));
    BOOST_TEST(run(s->get_thread("tmp")), "r2 still names the thread");
    // A third finished run trims nothing (two are kept): the thread stays with r2.
    queue(*s, "r3", "other");
    BOOST_REQUIRE(run(s->claim("w")));
    std::this_thread::sleep_for(1ms);
    finish(*s, "r3", "w");
    BOOST_TEST(run(s->get_thread("tmp")));
    BOOST_TEST(run(s->delete_run("r2")));
    BOOST_TEST(!run(s->get_thread("tmp")), "its last run deleted, the temporary thread goes");
    BOOST_TEST(run(s->get_thread("other"))); // not temporary: stays
}

// -- several stores on one database ---------------------------------------------------------------

RUN_STORE_SHARED_CASE(two_stores_see_each_others_writes) {
    auto a = db.open();
    auto b = db.open();
    auto t = make_thread("t", "alice");
    BOOST_REQUIRE(run(a->create_thread(t)));
    BOOST_TEST(run(b->get_thread("t")));
    BOOST_TEST(!run(b->create_thread(t)));
    auto r1 = make_run("r1", "t");
    BOOST_REQUIRE((run(a->submit(r1, rules_for())).refused == srv::submit_refusal::none));
    auto r2 = make_run("r2", "t");
    BOOST_REQUIRE((run(b->submit(r2, rules_for())).refused == srv::submit_refusal::none));
    BOOST_TEST(r1.seq < r2.seq); // one sequence
    auto c = run(b->claim("wb"));
    BOOST_REQUIRE(c);
    BOOST_TEST(c->run_id == "r1");
    BOOST_TEST(!run(a->claim("wa"))); // r2 waits behind r1, whichever store asks
    BOOST_TEST(stored(*a, "r1").worker == "wb");
    std::vector<srv::run_event> ev{{0, "values", "{\"from\":\"b\"}"}};
    BOOST_REQUIRE(run(b->append_events("r1", "wb", ev)));
    BOOST_TEST(run(a->read_events("r1", 0, 10)).at(0).data == ev[0].data);
    finish(*b, "r1", "wb");
    auto next = run(a->claim("wa"));
    BOOST_REQUIRE(next);
    BOOST_TEST(next->run_id == "r2");
    BOOST_TEST(run(b->patch_thread("t", json::object{{"by", "b"}})));
    BOOST_TEST(run(a->get_thread("t"))->metadata.at("by") == "b");
}

// -- PostgreSQL only --------------------------------------------------------------------------------

#if STATEGRAPH_TEST_WITH_POSTGRES
namespace {

/// What a store's `listen` heard.
struct heard {
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::pair<std::string, std::string>> items;
    std::function<void(std::string, std::string)> sink() {
        return [this](std::string channel, std::string payload) {
            {
                std::lock_guard lock(m);
                items.emplace_back(std::move(channel), std::move(payload));
            }
            cv.notify_all();
        };
    }
    /// Waits until (channel, payload) is heard; false after `timeout`.
    bool wait_for(const std::string& channel, const std::string& payload, std::chrono::milliseconds timeout) {
        std::unique_lock lock(m);
        return cv.wait_for(lock, timeout, [&] {
            return std::find(items.begin(), items.end(), std::pair{channel, payload}) != items.end();
        });
    }
};

} // namespace

constexpr std::string_view raise_serialization_failure =
    "DO $$ BEGIN RAISE EXCEPTION 'try again' USING ERRCODE = '40001'; END $$";
constexpr std::string_view raise_refusal = "DO $$ BEGIN RAISE EXCEPTION 'not today' USING ERRCODE = '22012'; END $$";

BOOST_AUTO_TEST_SUITE(postgres_backend)

BOOST_AUTO_TEST_CASE(a_notification_reaches_another_store) {
    postgres db;
    auto a = db.open();
    auto b = db.open();
    heard h;
    BOOST_REQUIRE(a->backend().listen(h.sink()));
    queue(*b, "r1", "t");
    BOOST_TEST(h.wait_for("sg_runs", "r1", 5s));
    BOOST_REQUIRE(run(b->claim("w")));
    std::vector<srv::run_event> ev{{0, "values", "{}"}};
    BOOST_REQUIRE(run(b->append_events("r1", "w", ev)));
    BOOST_TEST(h.wait_for("sg_events", "r1", 5s));
    // A store on another schema of the same database hears nothing of these.
    postgres elsewhere;
    auto c = elsewhere.open();
    heard other;
    BOOST_REQUIRE(c->backend().listen(other.sink()));
    queue(*b, "r2", "t2");
    BOOST_TEST(h.wait_for("sg_runs", "r2", 5s));
    std::this_thread::sleep_for(200ms);
    std::lock_guard lock(other.m);
    BOOST_TEST(other.items.empty());
}

BOOST_AUTO_TEST_CASE(listen_connects_again_after_its_connection_drops) {
    const std::string app = "sg_run_store_listen_" + std::to_string(getpid());
    postgres db(pgt::conninfo_named(app));
    auto a = db.open();
    auto b = db.open();
    heard h;
    BOOST_REQUIRE(a->backend().listen(h.sink()));
    pgt::admin admin;
    const auto killed = admin.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                                    "application_name = $1 AND query LIKE 'LISTEN%'",
                                    {app});
    BOOST_REQUIRE(!killed.empty());
    BOOST_TEST(killed[0] == "1");
    // Back: it says anything may have happened, then hears what comes.
    BOOST_TEST(h.wait_for("sg_runs", "", 10s));
    queue(*b, "r1", "t");
    BOOST_TEST(h.wait_for("sg_runs", "r1", 5s));
}

BOOST_AUTO_TEST_CASE(transient_failures_are_retried_others_are_not) {
    postgres db;
    auto s = db.open();
    auto& be = s->backend();
    // A serialization failure on the first attempt: the body runs again and commits.
    int attempts = 0;
    const srv::run_store_backend::body flaky = [&](srv::run_store_backend::session& ss) -> net::awaitable<void> {
        ++attempts;
        co_await put_counter(ss, std::string("flaky"), 1);
        if (attempts == 1) co_await ss.exec(raise_serialization_failure, {});
    };
    run(be.transaction(flaky));
    BOOST_TEST(attempts == 2);
    BOOST_TEST(run(be.query("SELECT value FROM sg_counters WHERE name = ?1", {std::string("flaky")})).at(0).integer(0) == 1);
    // Anything else: thrown at once with the database's words, the transaction rolled back.
    attempts = 0;
    const srv::run_store_backend::body refused = [&](srv::run_store_backend::session& ss) -> net::awaitable<void> {
        ++attempts;
        co_await put_counter(ss, std::string("refused"), 1);
        co_await ss.exec(raise_refusal, {});
    };
    try {
        run(be.transaction(refused));
        BOOST_FAIL("the refusal was not thrown");
    } catch (const srv::run_store_error& e) {
        BOOST_TEST(!e.transient());
        BOOST_TEST(std::string(e.what()).find("not today") != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("PostgreSQL") != std::string::npos, e.what());
    }
    BOOST_TEST(attempts == 1);
    BOOST_TEST(run(be.query("SELECT COUNT(*) FROM sg_counters WHERE name = ?1", {std::string("refused")})).at(0).integer(0) == 0);
    BOOST_TEST(be.lock_rows() == " FOR UPDATE");
    BOOST_TEST(be.lock_rows_skip_locked() == " FOR UPDATE SKIP LOCKED");
    BOOST_TEST(be.bigint_type() == "BIGINT");
    BOOST_TEST(be.describe().find("(schema " + db.schema() + ")") != std::string::npos, be.describe());
}

BOOST_AUTO_TEST_CASE(calls_outlive_dropped_connections) {
    // Every connection of the store's pool is cut between calls: the next calls (a transaction,
    // a single statement) find theirs gone and run again on new ones.
    const std::string app = "sg_run_store_drop_" + std::to_string(getpid());
    postgres db(pgt::conninfo_named(app));
    auto s = db.open();
    queue(*s, "r1", "t");
    BOOST_REQUIRE(run(s->get_run("r1")));
    pgt::admin admin;
    auto cut = [&] {
        auto n = admin.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                             {app});
        std::this_thread::sleep_for(50ms);
        return n.empty() ? 0 : std::stoi(n[0]);
    };
    BOOST_TEST(cut() >= 1);
    queue(*s, "r2", "t");
    BOOST_TEST(cut() >= 1);
    BOOST_TEST(stored(*s, "r2").status == "pending");
    BOOST_TEST(cut() >= 1);
    auto c = run(s->claim("w"));
    BOOST_REQUIRE(c);
    BOOST_TEST(c->run_id == "r1");
}

BOOST_AUTO_TEST_CASE(stores_opened_at_once_on_a_new_schema) {
    postgres db;
    std::vector<std::thread> ts;
    std::atomic<int> opened{0};
    std::mutex m;
    std::vector<std::string> errors;
    for (int i = 0; i < 4; ++i)
        ts.emplace_back([&] {
            try {
                auto s = db.open();
                ++opened;
            } catch (const std::exception& e) {
                std::lock_guard lock(m);
                errors.push_back(e.what());
            }
        });
    for (auto& t : ts) t.join();
    BOOST_TEST(opened.load() == 4);
    for (const auto& e : errors) BOOST_TEST_MESSAGE(e);
    BOOST_TEST(errors.empty());
}

BOOST_AUTO_TEST_CASE(submit_creating_a_thread_another_session_just_created) {
    // Another instance inserts the thread while this submit, asked to create it, runs: the run is
    // queued on that thread (not refused, not an error).
    postgres db;
    auto s = db.open();
    pgt::admin other;
    other.query("BEGIN");
    other.query("INSERT INTO " + pgt::quoted(db.schema()) +
                ".sg_threads (key, thread_id, owner, graph_id, created_at, updated_at, state_updated_at, metadata, status, "
                "interrupts, is_temporary) VALUES ('t', 'id-t', '', '', 1, 1, 1, '{}', 'idle', '{}', 0)");
    auto t = make_thread("t");
    auto rules = rules_for();
    rules.create = &t;
    auto r = make_run("r1", "t");
    auto submitted = std::async(std::launch::async, [&] { return run(s->submit(r, rules)); });
    BOOST_TEST((submitted.wait_for(300ms) == std::future_status::timeout)); // waits on the other's insert
    other.query("COMMIT");
    srv::submit_result res;
    try {
        res = submitted.get();
    } catch (const std::exception& e) {
        BOOST_FAIL("submit failed: " << e.what());
    }
    BOOST_TEST((res.refused == srv::submit_refusal::none));
    BOOST_TEST(!res.created_thread);
    BOOST_TEST(stored(*s, "r1").status == "pending");
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_named) {
    srv::postgres_run_store_options o;
    o.conninfo = "postgresql://postgres@127.0.0.1:1/nowhere?connect_timeout=2";
    try {
        (void)srv::open_postgres_run_store(o);
        BOOST_FAIL("a store opened on a closed port");
    } catch (const srv::run_store_error& e) {
        BOOST_TEST(std::string(e.what()).find("127.0.0.1:1/nowhere") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
#endif

// -- the store kept in memory ---------------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(memory_store)

BOOST_AUTO_TEST_CASE(it_has_no_backend_and_says_so) {
    auto s = srv::open_memory_run_store();
    try {
        (void)s->backend();
        BOOST_FAIL("backend() of the store kept in memory did not throw");
    } catch (const std::logic_error& e) {
        BOOST_TEST(std::string(e.what()).find("open_memory_run_store") != std::string::npos, e.what());
    }
    BOOST_TEST(!s->listen([](std::string, std::string) {}));
}

BOOST_AUTO_TEST_CASE(a_run_id_stored_twice_is_refused_naming_it) {
    auto s = srv::open_memory_run_store();
    (void)queue(*s, "twice", "t1");
    auto again = make_run("twice", "t1");
    try {
        (void)run(s->submit(again, rules_for()));
        BOOST_FAIL("a second run of one id was stored");
    } catch (const srv::run_store_error& e) {
        BOOST_TEST(std::string(e.what()).find("'twice'") != std::string::npos, e.what());
        BOOST_TEST(!e.transient());
    }
    BOOST_TEST(run(s->list_runs("t1", std::nullopt, 10, 0)).size() == 1u);
    // refused before anything is written: the thread a stateless submit would make is not made
    auto temp = make_thread("made-by-a-refused-submit");
    temp.temporary = true;
    auto rules = rules_for();
    rules.create = &temp;
    auto stateless = make_run("twice", "made-by-a-refused-submit");
    BOOST_CHECK_THROW((void)run(s->submit(stateless, rules)), srv::run_store_error);
    BOOST_TEST(!run(s->get_thread("made-by-a-refused-submit")));
}

BOOST_AUTO_TEST_SUITE_END()
