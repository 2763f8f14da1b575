#define BOOST_TEST_MODULE test_redis_saver
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/redis_saver.hpp>

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/stategraph.hpp>

#include "redis_connection.hpp" // checkpoint/src: a second connection, to damage data and kill clients
#include "redis_test_support.hpp"
#include "round_trips.hpp"
#include "tcp_proxy.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

namespace {

using namespace stategraph::checkpoint;
using namespace stategraph::checkpoint::testing;
using namespace stategraph::checkpoint::redis_testing;
using stategraph::errc;
namespace asio = boost::asio;
using namespace std::chrono_literals;

boost::test_tools::assertion_result redis_configured(boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result r(!redis_url().empty());
    if (!r)
        r.message() << "STATEGRAPH_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379): the Redis saver is not tested; "
                       "scripts/test starts a private redis-server and sets it";
    return r;
}

std::shared_ptr<saver> make_conformance_saver() { return make_saver(options_with(fresh_prefix())); }

/// Damages what `s` stored, through a connection of the test's own.
bool damage_stored(saver& s, const damage& where) {
    return redis_testing::damage_stored(dynamic_cast<redis_saver&>(s).options().key_prefix, where);
}

capabilities redis_capabilities() {
    capabilities c;
    c.open_same_storage = [](saver& first) -> std::shared_ptr<saver> {
        // Same prefix: another process on the same server. Its keys stay: the first owns them.
        return std::make_shared<redis_saver>(dynamic_cast<redis_saver&>(first).options());
    };
    c.exclusive_leases = true;
    c.lease_ttl = 600ms;
    c.corrupt = damage_stored;
    return c;
}

/// The conformance suite, when a server is configured; otherwise one skipped case that says why.
[[maybe_unused]] const bool conformance_registered = [] {
    if (!redis_url().empty()) {
        register_suite("redis_saver_conformance", make_conformance_saver, redis_capabilities());
        return true;
    }
    auto* tc = boost::unit_test::make_test_case([] {}, "redis_saver_conformance", __FILE__, __LINE__);
    tc->add_precondition(redis_configured);
    boost::unit_test::framework::master_test_suite().add(tc);
    return false;
}();

/// `o` with its URL sent through `proxy` (same database).
redis_options through_proxy(redis_options o, const tcp_proxy& proxy) {
    const auto where = redis::parse_url(o.url);
    o.url = "redis://127.0.0.1:" + std::to_string(proxy.port());
    if (where.db) o.url += "/" + std::to_string(where.db);
    return o;
}

/// A port nothing listens on.
std::string closed_port() {
    asio::io_context io;
    asio::ip::tcp::acceptor a(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const auto port = a.local_endpoint().port();
    a.close();
    return std::to_string(port);
}

} // namespace

BOOST_AUTO_TEST_SUITE(redis_saver_server, *boost::unit_test::precondition(redis_configured))

/// Every key of a thread expires together after `thread_ttl` without writes; each write starts
/// it again.
BOOST_AUTO_TEST_CASE(thread_ttl_expires_the_whole_thread) {
    auto o = options_with(fresh_prefix());
    o.thread_ttl = 700ms;
    auto s = make_saver(o);
    auto cp1 = next_cp(nullptr, -1, "input", boost::json::object{{"a", 1}});
    put(*s, "t", "", cp1);
    std::vector<pending_write> w{write_of("task", "node", "a", 2)};
    run(s->put_writes("t", "", cp1.id, w));
    put(*s, "keep", "", next_cp(nullptr, -1, "input", boost::json::object{{"k", 1}}));
    for (const char* what : {"ids", "cp", "vals", "writes", "wseq", "meta"}) {
        const auto ttl = raw1({"PTTL", o.key_prefix + ":{t}:" + what});
        BOOST_TEST_CONTEXT(what) { BOOST_TEST((ttl.integer > 0 && ttl.integer <= 700)); }
    }
    // Writes refresh the time to live: "keep" is written again before it runs out, "t" is not.
    std::this_thread::sleep_for(400ms);
    auto keep = get(*s, "keep", "");
    BOOST_TEST_REQUIRE(keep.has_value());
    put(*s, "keep", "", next_cp(&keep->cp, 0, "loop", boost::json::object{{"k", 2}}));
    std::this_thread::sleep_for(500ms);
    BOOST_TEST(!get(*s, "t", "").has_value());
    BOOST_TEST(run(s->stats("t")).checkpoints == 0u);
    auto raw_left = raw1({"KEYS", o.key_prefix + ":{t}:*"});
    BOOST_TEST(raw_left.elements.empty()); // nothing of it is left behind
    BOOST_TEST(get(*s, "keep", "").has_value());
    auto threads = run(s->list_threads({}));
    BOOST_TEST_REQUIRE(threads.size() == 1u);
    BOOST_TEST(threads[0].thread_id == "keep");
    // The expired thread can start again from nothing.
    put(*s, "t", "", next_cp(nullptr, -1, "input", boost::json::object{{"a", 5}}));
    BOOST_TEST(get(*s, "t", "")->cp.values.at("a") == 5);
}

/// Kills every connection named `name` (CLIENT KILL from another client); returns how many.
std::size_t kill_clients(const std::string& name) {
    const auto listed = raw1({"CLIENT", "LIST", "TYPE", "normal"});
    std::size_t killed = 0;
    std::istringstream lines(listed.str);
    for (std::string line; std::getline(lines, line);) {
        if (line.find(" name=" + name + " ") == std::string::npos) continue;
        const auto id = line.substr(3, line.find(' ') - 3); // "id=N addr=..."
        killed += static_cast<std::size_t>(raw1({"CLIENT", "KILL", "ID", id}).integer);
    }
    return killed;
}

/// Connections killed by the server (CLIENT KILL from another client) are made again and the
/// operation retried: nothing is lost or stored twice.
BOOST_AUTO_TEST_CASE(dropped_connection_is_retried) {
    auto o = options_with(fresh_prefix());
    o.client_name = "sgtest-dropped-" + std::to_string(::getpid());
    auto s = make_saver(o);
    auto cp1 = next_cp(nullptr, -1, "input", boost::json::object{{"a", 1}});
    put(*s, "t", "", cp1);
    BOOST_TEST_REQUIRE(get(*s, "t", "").has_value());
    for (int round = 0; round < 3; ++round) {
        BOOST_TEST(kill_clients(o.client_name) >= 1u);
        auto prev = get(*s, "t", ""); // the first command on a dead connection: retried on a new one
        BOOST_TEST_REQUIRE(prev.has_value());
        BOOST_TEST(kill_clients(o.client_name) >= 1u);
        auto next = next_cp(&prev->cp, round, "loop", boost::json::object{{"a", round + 2}});
        put(*s, "t", "", next);
        std::vector<pending_write> w{write_of("task", "node", "a", round)};
        BOOST_TEST(kill_clients(o.client_name) >= 1u);
        run(s->put_writes("t", "", next.id, w));
    }
    auto all = list(*s, "t", "", list_options{});
    BOOST_TEST(all.size() == 4u);
    BOOST_TEST(all.front().cp.values.at("a") == 4);
    BOOST_TEST(all.front().writes.size() == 1u);
}

/// The engine on the Redis saver: a run interrupted by one saver is resumed by another on the
/// same server (another process), with its history and pending interrupt kept there.
BOOST_AUTO_TEST_CASE(graph_interrupt_resume_on_redis) {
    auto a = make_saver(options_with(fresh_prefix()));
    auto first = chat_graph(a);
    auto input = stategraph::update<chat>{}.set<&chat::question>("Thomas");
    auto r = stategraph::run_sync(first.invoke(std::move(input), {.thread_id = "chat-42"}));
    BOOST_TEST_REQUIRE(r.interrupted());
    BOOST_TEST(r.interrupts.at(0).value.as_string() == "which Thomas?");
    {
        auto b = std::make_shared<redis_saver>(a->options());
        auto second = chat_graph(b);
        auto state = stategraph::run_sync(second.get_state("chat-42"));
        BOOST_TEST(state.next == std::vector<std::string>{"ask"});
        auto done = stategraph::run_sync(second.invoke(stategraph::resume(std::string("Thomas Berger")), {.thread_id = "chat-42"}));
        BOOST_TEST(!done.interrupted());
        BOOST_TEST(done.values.log == (std::vector<std::string>{"ask:Thomas Berger", "reply:Thomas Berger"}),
                   boost::test_tools::per_element());
        auto history = stategraph::run_sync(second.get_state_history("chat-42"));
        BOOST_TEST(history.size() >= 3u);
    }
    auto last = run(a->get("chat-42", "", std::nullopt));
    BOOST_TEST_REQUIRE(last.has_value());
    BOOST_TEST(last->cp.values.at("answer") == "Thomas Berger");
}

/// How long a step's write and a read take here (printed with --log_level=message; no threshold:
/// loopback round trips on a shared machine vary tenfold).
BOOST_AUTO_TEST_CASE(latency_report) {
    auto s = make_saver(options_with(fresh_prefix()));
    auto prev = next_cp(nullptr, -1, "input", boost::json::object{{"messages", boost::json::array{"hi"}}});
    put(*s, "t", "", prev);
    std::vector<double> puts, gets;
    for (int i = 0; i < 300; ++i) {
        auto cp = next_cp(&prev, i, "loop", boost::json::object{{"n", i}, {"text", std::string(200, 'x')}});
        auto t0 = std::chrono::steady_clock::now();
        put(*s, "t", "", cp);
        auto t1 = std::chrono::steady_clock::now();
        (void)get(*s, "t", "");
        auto t2 = std::chrono::steady_clock::now();
        puts.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        gets.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
        prev = cp;
    }
    std::sort(puts.begin(), puts.end());
    std::sort(gets.begin(), gets.end());
    BOOST_TEST_MESSAGE("redis_saver on " << redis_url() << ": put median " << puts[puts.size() / 2] << " us, get median "
                                         << gets[gets.size() / 2] << " us (300 steps)");
    BOOST_TEST(list(*s, "t", "", list_options{}).size() == 301u);
}

/// An appended channel 60 links long: the newest, an old one by id, a listing and a pruned
/// thread all read back whole (the chain script reads the links in one round trip, however many).
BOOST_AUTO_TEST_CASE(long_appended_chains_read_back_whole) {
    auto s = make_saver(options_with(fresh_prefix()));
    auto prev = next_cp(nullptr, -1, "input", boost::json::object{{"log", boost::json::array{0}}, {"n", 0}});
    put(*s, "chain", "", prev);
    put(*s, "chain", "other", next_cp(nullptr, -1, "input", boost::json::object{{"log", boost::json::array{-1}}}));
    std::vector<checkpoint> all{prev};
    constexpr int links = 60;
    for (int i = 1; i <= links; ++i) {
        auto cp = next_cp(&prev, i - 1, "loop", boost::json::object{{"log", boost::json::array{i}}, {"n", i}});
        cp.extends["log"] = prev.versions.at("log");
        put(*s, "chain", "", cp);
        all.push_back(cp);
        prev = cp;
    }
    auto upto = [](int n) {
        boost::json::array a;
        for (int i = 0; i <= n; ++i) a.push_back(i);
        return a;
    };
    std::vector<double> took;
    for (int i = 0; i < 20; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        auto got = get(*s, "chain", "");
        took.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->cp.values.at("log") == upto(links));
    }
    std::sort(took.begin(), took.end());
    BOOST_TEST_MESSAGE("redis_saver: get of a " << links << "-link appended channel, median " << took[took.size() / 2]
                                                << " us");
    auto old = get(*s, "chain", "", all[10].id);
    BOOST_TEST_REQUIRE(old.has_value());
    BOOST_TEST(old->cp.values.at("log") == upto(10));
    BOOST_TEST(old->cp.values.at("n") == 10);
    auto listed = list(*s, "chain", "", list_options{});
    BOOST_TEST_REQUIRE(listed.size() == static_cast<std::size_t>(links + 1));
    BOOST_TEST(listed.front().cp.values.at("log") == upto(links));
    BOOST_TEST(listed.back().cp.values.at("log") == upto(0));
    // The other namespace's versions of "log" are not links of this one.
    BOOST_TEST(get(*s, "chain", "other")->cp.values.at("log") == (boost::json::array{-1}));
    run(s->prune("chain", 2));
    auto kept = get(*s, "chain", "");
    BOOST_TEST_REQUIRE(kept.has_value());
    BOOST_TEST(kept->cp.values.at("log") == upto(links));
    BOOST_TEST(list(*s, "chain", "", list_options{}).size() == 2u);
}

/// break_lease whose first try ran but whose answer was lost with the connection: the retry
/// reads the answer the script kept under the call's key instead of breaking again (it found no
/// lease and answered "none" when the call was a bare GETDEL).
BOOST_AUTO_TEST_CASE(retried_break_lease_keeps_its_answer) {
    tcp_proxy proxy(redis::parse_url(redis_url()).host, std::stoi(redis::parse_url(redis_url()).port));
    auto holder = make_saver(options_with(fresh_prefix()));
    auto s = make_saver(through_proxy(holder->options(), proxy));
    run(s->get("t", "", std::nullopt)); // connected, scripts loaded
    check_break_answer_survives_a_cut(*holder, *s, proxy, ":answer:");
    BOOST_TEST(!run(s->break_lease("nobody")).has_value());
    run(s->release("t"));
}

/// end_call (checkpoints, writes and the lease given back, one script call) whose first try ran
/// but whose answer was lost with the connection: the retry finds the lease already gone and
/// must not read that as a lost lease; a stale writer's retry is still refused.
BOOST_AUTO_TEST_CASE(a_retried_end_call_whose_first_attempt_ran_succeeds) {
    tcp_proxy proxy(redis::parse_url(redis_url()).host, std::stoi(redis::parse_url(redis_url()).port));
    auto other = make_saver(options_with(fresh_prefix()));
    auto s = make_saver(through_proxy(other->options(), proxy));
    check_end_call_survives_a_cut(*s, *other, proxy, "RELEASE");
}

/// acquire_and_get takes the lease and reads in one round trip (then one for the values).
BOOST_AUTO_TEST_CASE(acquire_and_get_is_one_round_trip_before_the_values) {
    auto o = options_with(fresh_prefix());
    o.lease_ttl = std::chrono::seconds(60); // no renewal (every third of it) among the round trips counted
    auto s = make_saver(o);
    auto other = std::make_shared<redis_saver>(s->options());
    check_acquire_and_get_round_trips(*s, *other);
}

/// A graph's shape goes to the server once, not once per call (each top-level call stores its
/// graph's shape): the second put_graph of a signature costs no round trip.
BOOST_AUTO_TEST_CASE(a_graph_shape_is_sent_once) {
    auto s = make_saver(options_with(fresh_prefix()));
    const std::vector<std::string> shape{"a -> b", "b -> END"};
    const auto before = s->round_trips();
    run(s->put_graph("sig", shape));
    BOOST_TEST(s->round_trips() - before >= 1u);
    const auto after_first = s->round_trips();
    run(s->put_graph("sig", shape));
    BOOST_TEST(s->round_trips() == after_first);
    auto other = make_saver(s->options()); // another process reads it from the server
    auto got = run(other->get_graph("sig"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == shape);
}

/// A server that is not there: a typed error naming the thread, after the configured attempts.
BOOST_AUTO_TEST_CASE(server_down_is_a_typed_error) {
    redis_options o;
    o.url = "redis://127.0.0.1:" + closed_port();
    o.attempts = 2;
    o.timeout = 1s;
    redis_saver s(o);
    auto cp = next_cp(nullptr, -1, "input", boost::json::object{{"a", 1}});
    auto e = expect_error(errc::storage_failure, [&] { put(s, "chat-42", "", cp); });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(contains(e->what(), "chat-42"), e->what());
    BOOST_TEST((!e->names().empty() && e->names().front() == "chat-42"));
    e = expect_error(errc::storage_failure, [&] { (void)get(s, "chat-42", ""); });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(contains(e->what(), "chat-42"), e->what());
}

/// Values of several megabytes, and a step writing thousands of channels, go through (replies
/// arrive in many reads; a script's operations are split below Lua's limit).
BOOST_AUTO_TEST_CASE(large_values_and_many_channels) {
    auto s = make_saver(options_with(fresh_prefix()));
    boost::json::object values{{"big", std::string(3 * 1024 * 1024, 'x')}};
    for (int i = 0; i < 5000; ++i) values["c" + std::to_string(i)] = i;
    auto cp = next_cp(nullptr, -1, "input", values);
    put(*s, "t", "", cp);
    std::vector<pending_write> w;
    for (int i = 0; i < 3000; ++i) w.push_back(write_of("task" + std::to_string(i), "node", "c1", i));
    run(s->put_writes("t", "", cp.id, w));
    auto got = get(*s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp, values);
    BOOST_TEST_REQUIRE(got->writes.size() == 3000u);
    BOOST_TEST(got->writes[2999].task_id == "task2999");
    run(s->copy_thread("t", "u"));
    auto copied = get(*s, "u", "");
    BOOST_TEST_REQUIRE(copied.has_value());
    BOOST_TEST(copied->cp.values.at("big").as_string().size() == 3u * 1024 * 1024);
    BOOST_TEST(copied->writes.size() == 3000u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(malformed_url_is_refused) {
    redis_options o;
    o.url = "http://localhost";
    expect_error(errc::storage_failure, [&] { redis_saver s(o); });
    o.url = "redis://localhost:notaport";
    expect_error(errc::storage_failure, [&] { redis_saver s(o); });
}
