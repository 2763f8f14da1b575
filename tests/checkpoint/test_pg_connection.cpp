// libpq on Asio (checkpoint/src/pg_connection.hpp) against a real server: statements prepared
// once per connection, and a pool whose waiters are woken by the connection given back, not by a
// timer. Part of test_postgres (STATEGRAPH_TEST_POSTGRES; unset: skipped, saying so).
#include "pg_connection.hpp"

#include <boost/test/unit_test.hpp>

#include "postgres_test_support.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace pg = stategraph::checkpoint::pg;
using namespace std::chrono_literals;
using stategraph::checkpoint::pg_testing::server_configured;
using stategraph::checkpoint::pg_testing::server_url;

namespace {

template <class T>
T run_on(asio::io_context& io, asio::awaitable<T> work) {
    auto f = asio::co_spawn(io, std::move(work), asio::use_future);
    io.restart();
    io.run();
    return f.get();
}

asio::awaitable<std::unique_ptr<pg::connection>> open() {
    co_return co_await pg::connection::open(server_url(), 10s);
}

asio::awaitable<std::vector<pg::result>> run(pg::connection& c, std::vector<pg::statement> batch) {
    co_return co_await c.run(batch, 10s);
}

std::vector<pg::statement> select_plus(std::int64_t n) {
    std::vector<pg::statement> b;
    b.emplace_back("SELECT $1::bigint + 1");
    b.back().integer(n);
    return b;
}

asio::awaitable<void> take(pg::pool& pool, std::optional<pg::pool::lease>& slot, std::vector<int>& order, int i) {
    slot.emplace(co_await pool.get());
    order.push_back(i);
}

} // namespace

BOOST_AUTO_TEST_SUITE(pg_connection, *boost::unit_test::precondition(server_configured))

BOOST_AUTO_TEST_CASE(statements_are_prepared_once_per_connection) {
    asio::io_context io;
    auto c = run_on(io, open());
    BOOST_TEST(c->prepared() == 0u);
    auto r = run_on(io, run(*c, select_plus(41)));
    BOOST_TEST(r.at(0).integer(0, 0) == 42);
    BOOST_TEST(c->prepared() == 1u);
    r = run_on(io, run(*c, select_plus(1)));
    BOOST_TEST(r.at(0).integer(0, 0) == 2);
    BOOST_TEST(c->prepared() == 1u); // executed by name, not prepared again
    BOOST_TEST(c->round_trips() == 2u);
    // The server holds exactly the statements the connection says it prepared.
    std::vector<pg::statement> ask;
    ask.emplace_back("SELECT count(*)::bigint FROM pg_prepared_statements");
    r = run_on(io, run(*c, ask));
    BOOST_TEST(r.at(0).integer(0, 0) == 2); // SELECT + 1 and this one
    BOOST_TEST(c->prepared() == 2u);
}

BOOST_AUTO_TEST_CASE(a_failed_batch_prepares_what_ran_and_nothing_else) {
    asio::io_context io;
    auto c = run_on(io, open());
    std::vector<pg::statement> batch;
    batch.emplace_back("SELECT 1 / $1::int");
    batch.back().integer(0);
    batch.emplace_back("SELECT 'never parsed'::text");
    BOOST_CHECK_EXCEPTION(run_on(io, run(*c, batch)), pg::server_error,
                          [](const pg::server_error& e) { return e.sqlstate() == "22012"; });
    // The division's Parse ran (its execution failed); the second was skipped by the server.
    BOOST_TEST(c->prepared() == 1u);
    BOOST_TEST(c->idle());
    // Both run afterwards: the skipped one is prepared now, the other reused.
    std::vector<pg::statement> second;
    second.emplace_back("SELECT 'never parsed'::text");
    auto r = run_on(io, run(*c, second));
    BOOST_TEST(r.at(0).text(0, 0) == "never parsed");
    BOOST_TEST(c->prepared() == 2u);
    // A syntax error is the Parse's own failure: reported, and not counted as prepared.
    std::vector<pg::statement> bad;
    bad.emplace_back("SELEC 1");
    BOOST_CHECK_EXCEPTION(run_on(io, run(*c, bad)), pg::server_error,
                          [](const pg::server_error& e) { return e.sqlstate() == "42601"; });
    BOOST_TEST(c->prepared() == 2u);
}

BOOST_AUTO_TEST_CASE(prepared_statements_follow_a_changed_table) {
    asio::io_context io;
    auto c = run_on(io, open());
    const std::string table = "pg_connection_t_" + std::to_string(::getpid());
    const std::string create = "CREATE TABLE " + table + "(a bigint)";
    const std::string drop = "DROP TABLE " + table;
    const std::string insert = "INSERT INTO " + table + "(a) VALUES ($1::bigint)";
    const std::string select = "SELECT * FROM " + table;
    auto exec = [&](const std::string& sql, std::optional<std::int64_t> v = std::nullopt) {
        std::vector<pg::statement> b;
        b.emplace_back(sql);
        if (v) b.back().integer(*v);
        return run_on(io, run(*c, b));
    };
    (void)exec(create);
    (void)exec(insert, 1);
    BOOST_TEST(exec(select).at(0).integer(0, 0) == 1);
    // The table changes shape under the prepared statements: the server plans them again.
    (void)exec(drop);
    (void)exec("CREATE TABLE " + table + "(b text, a bigint)");
    (void)exec(insert, 7);
    // A prepared SELECT * now returns other columns: the server refuses it once, the connection
    // forgets what it prepared (DEALLOCATE ALL), and the error says a retry may succeed.
    BOOST_CHECK_EXCEPTION(exec(select), pg::server_error, [](const pg::server_error& e) {
        return e.sqlstate() == "0A000" && e.transient();
    });
    BOOST_TEST(c->prepared() == 0u);
    BOOST_TEST(c->idle());
    auto r = exec(select);
    BOOST_TEST(r.at(0).is_null(0, 0));
    BOOST_TEST(r.at(0).integer(0, 1) == 7);
    (void)exec(drop);
}

BOOST_AUTO_TEST_CASE(pool_waiters_are_woken_by_the_connection_given_back_in_order) {
    asio::io_context io;
    pg::pool pool(server_url(), "", 1, 10s);
    std::optional<pg::pool::lease> held;
    std::vector<int> order;
    run_on(io, take(pool, held, order, -1));
    order.clear();
    std::vector<std::optional<pg::pool::lease>> got(3);
    for (int i = 0; i < 3; ++i) asio::co_spawn(io, take(pool, got[static_cast<std::size_t>(i)], order, i), asio::detached);
    io.restart();
    io.poll();
    BOOST_TEST(pool.waiting() == 3u);
    BOOST_TEST(order.empty());
    // Given back: the first waiter has it at once (poll runs no timer that is not due).
    held.reset();
    io.poll();
    BOOST_TEST(order == std::vector<int>{0});
    BOOST_TEST(pool.waiting() == 2u);
    got[0].reset();
    io.poll();
    BOOST_TEST((order == std::vector<int>{0, 1}));
    // A connection closed instead of given back lets the next waiter open a new one.
    got[1]->discard();
    got[1].reset();
    io.run_for(5s); // it connects (socket waits), then holds it
    BOOST_TEST((order == std::vector<int>{0, 1, 2}));
    BOOST_TEST(pool.waiting() == 0u);
    got[2].reset();
    BOOST_TEST(pool.idle_pids().size() == 1u);
}

BOOST_AUTO_TEST_CASE(text_results_carry_their_column_types) {
    asio::io_context io;
    auto c = run_on(io, open());
    std::vector<pg::statement> b;
    b.emplace_back("SELECT $1::bigint, 7::int2, true, 'x'::text, 1.5::numeric, NULL::int4");
    b.back().integer(-42);
    b.back().text_results = true;
    auto r = run_on(io, run(*c, std::move(b)));
    const auto& row = r.at(0);
    BOOST_REQUIRE_EQUAL(row.columns(), 6);
    BOOST_TEST(row.type(0) == 20u); // int8
    BOOST_TEST(row.type(1) == 21u); // int2
    BOOST_TEST(row.type(2) == 16u); // bool
    BOOST_TEST(row.type(3) == 25u); // text
    BOOST_TEST(row.text(0, 0) == "-42"); // printed, not binary
    BOOST_TEST(row.text(0, 2) == "t");
    BOOST_TEST(row.text(0, 4) == "1.5");
    BOOST_TEST(row.is_null(0, 5));
    // The same text prepared once serves both forms.
    auto binary = run_on(io, run(*c, select_plus(1)));
    BOOST_TEST(binary.at(0).integer(0, 0) == 2);
}

BOOST_AUTO_TEST_CASE(notifications_arrive_on_a_listening_connection) {
    asio::io_context io;
    auto listener = run_on(io, open());
    auto sender = run_on(io, open());
    std::vector<pg::statement> listen;
    listen.emplace_back("LISTEN sg_test_channel");
    (void)run_on(io, run(*listener, std::move(listen)));
    // Nothing yet: the wait ends empty at its timeout.
    const auto before = std::chrono::steady_clock::now();
    BOOST_TEST(run_on(io, listener->notifications(100ms)).empty());
    BOOST_TEST((std::chrono::steady_clock::now() - before >= 90ms));
    std::vector<pg::statement> notify;
    notify.emplace_back("SELECT pg_notify('sg_test_channel', $1)");
    notify.back().text("hello");
    (void)run_on(io, run(*sender, notify));
    auto got = run_on(io, listener->notifications(5s));
    BOOST_REQUIRE_EQUAL(got.size(), 1u);
    BOOST_TEST(got[0].channel == "sg_test_channel");
    BOOST_TEST(got[0].payload == "hello");
    BOOST_TEST(got[0].sender_pid == sender->backend_pid());
    // A connection that drops says so.
    stategraph::checkpoint::pg_testing::admin admin;
    admin.query("SELECT pg_terminate_backend($1)", {std::to_string(listener->backend_pid())});
    auto wait_a_while = [&] {
        for (int i = 0; i < 50; ++i) (void)run_on(io, listener->notifications(100ms));
    };
    BOOST_CHECK_THROW(wait_a_while(), pg::connection_lost);
}

BOOST_AUTO_TEST_SUITE_END()
