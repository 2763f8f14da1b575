#define BOOST_TEST_MODULE test_tiered_saver
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/tiered_saver.hpp>
#include <stategraph/checkpoint/forwarding_saver.hpp>
#include <stategraph/checkpoint/redis_saver.hpp>
#include <stategraph/checkpoint/postgres_saver.hpp>

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/stategraph.hpp>

#include "postgres_test_support.hpp"
#include "redis_test_support.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace {

using namespace stategraph::checkpoint;
using namespace stategraph::checkpoint::testing;
namespace pg = stategraph::checkpoint::pg_testing;
using namespace stategraph::checkpoint::redis_testing;
using stategraph::errc;
namespace asio = boost::asio;
using namespace std::chrono_literals;

/// Both servers are needed: STATEGRAPH_TEST_REDIS and STATEGRAPH_TEST_POSTGRES.
boost::test_tools::assertion_result servers_configured(boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result r(!redis_url().empty() && pg::server_url() != nullptr);
    if (!r)
        r.message() << "STATEGRAPH_TEST_REDIS and STATEGRAPH_TEST_POSTGRES are not both set: the tiered saver is not "
                       "tested (scripts/test starts both servers and sets them)";
    return r;
}

/// A tiered saver on a fresh Redis prefix and a fresh PostgreSQL schema (both dropped after it).
std::shared_ptr<tiered_saver> make_tiered() {
    return std::make_shared<tiered_saver>(redis_testing::make_saver(options_with(fresh_prefix())),
                                          pg::make_saver(pg::options_for(pg::fresh_schema())));
}

redis_saver& front_of(saver& s) { return dynamic_cast<redis_saver&>(*dynamic_cast<tiered_saver&>(s).front()); }
postgres_saver& back_of(saver& s) { return dynamic_cast<postgres_saver&>(*dynamic_cast<tiered_saver&>(s).back()); }

/// Another tiered saver on the same storage (another process).
std::shared_ptr<tiered_saver> reopen(saver& s) {
    return std::make_shared<tiered_saver>(std::make_shared<redis_saver>(front_of(s).options()),
                                          std::make_shared<postgres_saver>(back_of(s).options()));
}

/// Damages what the front stored (reads come from the front, and report it).
bool damage_front(saver& s, const damage& where) {
    return redis_testing::damage_stored(front_of(s).options().key_prefix, where);
}

capabilities tiered_capabilities() {
    capabilities c;
    c.open_same_storage = [](saver& first) -> std::shared_ptr<saver> { return reopen(first); };
    c.exclusive_leases = true;
    c.lease_ttl = std::chrono::seconds(1); // the back's (pg::options_for)
    c.corrupt = damage_front;
    return c;
}

std::shared_ptr<saver> make_conformance_saver() { return make_tiered(); }

[[maybe_unused]] const bool conformance_registered = [] {
    auto* suite = register_suite("tiered_saver_conformance", make_conformance_saver, tiered_capabilities());
    suite->add_precondition(servers_configured);
    return true;
}();

} // namespace

BOOST_AUTO_TEST_SUITE(tiered_saver_servers, *boost::unit_test::precondition(servers_configured))

/// The test: a run interrupted through the tiered saver; Redis loses every key of the
/// saver (as FLUSHDB from another process would); the resume, by another tiered saver, reads the
/// thread from PostgreSQL and completes; the front is not written half (it stays without the thread).
BOOST_AUTO_TEST_CASE(resume_after_redis_flush_falls_back_to_postgres) {
    auto a = make_tiered();
    auto first = chat_graph(a);
    auto input = stategraph::update<chat>{}.set<&chat::question>("Thomas");
    auto r = stategraph::run_sync(first.invoke(std::move(input), {.thread_id = "chat-42"}));
    BOOST_TEST_REQUIRE(r.interrupted());
    BOOST_TEST(r.interrupts.at(0).value.as_string() == "which Thomas?");
    // Both tiers hold the interrupted thread.
    BOOST_TEST(run(front_of(*a).get("chat-42", "", std::nullopt)).has_value());
    BOOST_TEST(run(back_of(*a).get("chat-42", "", std::nullopt)).has_value());

    drop_prefix(front_of(*a).options().key_prefix);
    BOOST_TEST(!run(front_of(*a).get("chat-42", "", std::nullopt)).has_value());
    {
        auto b = reopen(*a);
        auto second = chat_graph(b);
        auto state = stategraph::run_sync(second.get_state("chat-42"));
        BOOST_TEST(state.next == std::vector<std::string>{"ask"});
        auto done =
            stategraph::run_sync(second.invoke(stategraph::resume(std::string("Thomas Berger")), {.thread_id = "chat-42"}));
        BOOST_TEST(!done.interrupted());
        BOOST_TEST(done.values.log == (std::vector<std::string>{"ask:Thomas Berger", "reply:Thomas Berger"}),
                   boost::test_tools::per_element());
        auto history = stategraph::run_sync(second.get_state_history("chat-42"));
        BOOST_TEST(history.size() >= 3u);
    }
    // The front stayed without the thread (no half copy); the back has all of it.
    BOOST_TEST(!run(front_of(*a).get("chat-42", "", std::nullopt)).has_value());
    auto last = run(a->get("chat-42", "", std::nullopt));
    BOOST_TEST_REQUIRE(last.has_value());
    BOOST_TEST(last->cp.values.at("answer") == "Thomas Berger");
    auto threads = run(a->list_threads({}));
    BOOST_TEST_REQUIRE(threads.size() == 1u);
    BOOST_TEST(threads[0].thread_id == "chat-42");
}

/// A thread the front lost is served by the back; a new thread goes to both; deleting it from the
/// back too makes it gone for every read.
BOOST_AUTO_TEST_CASE(reads_fall_back_per_thread) {
    auto s = make_tiered();
    auto cp1 = next_cp(nullptr, 0, "input", json::object{{"a", 1}});
    put(*s, "kept", "", cp1);
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    put(*s, "kept", "", cp2);
    drop_prefix(front_of(*s).options().key_prefix);
    auto got = get(*s, "kept", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp2.id);
    BOOST_TEST(list(*s, "kept", "", list_options{}).size() == 2u);
    BOOST_TEST(run(s->stats("kept")).checkpoints == 2u);
    // Writes on the lost thread go to the back alone.
    auto cp3 = next_cp(&cp2, 2, "loop", json::object{{"a", 3}});
    put(*s, "kept", "", cp3);
    BOOST_TEST(!run(front_of(*s).get("kept", "", std::nullopt)).has_value());
    BOOST_TEST(get(*s, "kept", "")->cp.values.at("a") == 3);
    // A new thread is in both.
    auto n1 = next_cp(nullptr, 0, "input", json::object{{"b", 1}});
    put(*s, "new", "", n1);
    BOOST_TEST(run(front_of(*s).get("new", "", std::nullopt)).has_value());
    BOOST_TEST(run(back_of(*s).get("new", "", std::nullopt)).has_value());
    run(s->delete_thread("new"));
    BOOST_TEST(!get(*s, "new", "").has_value());
    run(s->delete_thread("kept"));
    BOOST_TEST(!get(*s, "kept", "").has_value());
}

/// A writer killed between PostgreSQL's write and Redis's left Redis one write behind: the next
/// acquire (the next run) sees the counts differ and drops Redis's copy; reads then use PostgreSQL.
BOOST_AUTO_TEST_CASE(acquire_drops_a_front_left_behind) {
    auto s = make_tiered();
    auto cp1 = next_cp(nullptr, 0, "input", json::object{{"a", 1}});
    put(*s, "t", "", cp1);
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    put(back_of(*s), "t", "", cp2); // the back took it; the writer died before the front's write
    std::vector<pending_write> w{write_of("task", "node", "a", 3)};
    run(back_of(*s).put_writes("t", "", cp2.id, w));
    BOOST_TEST(get(*s, "t", "")->cp.id == cp1.id); // stale, as the limit says
    run(s->acquire("t"));
    BOOST_TEST(!run(front_of(*s).get("t", "", std::nullopt)).has_value());
    auto got = get(*s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp2.id);
    BOOST_TEST(got->writes.size() == 1u);
    // A front in step is kept.
    auto n1 = next_cp(nullptr, 0, "input", json::object{{"b", 1}});
    put(*s, "u", "", n1);
    run(s->acquire("u"));
    BOOST_TEST(run(front_of(*s).get("u", "", std::nullopt)).has_value());
    run(s->release("u"));
    run(s->release("t"));
}

namespace {
/// Counts the calls a tiered saver makes on its front that read the stored values of a whole thread.
class counting_front : public forwarding_saver {
public:
    using forwarding_saver::forwarding_saver;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override {
        ++stats_calls;
        co_return co_await inner().stats(std::move(thread_id));
    }
    boost::asio::awaitable<bool> holds_thread(std::string thread_id) override {
        ++holds_calls;
        co_return co_await inner().holds_thread(std::move(thread_id));
    }
    std::atomic<int> stats_calls{0};
    std::atomic<int> holds_calls{0};
};
} // namespace

/// Before each write the tiered saver asks the front whether it holds the thread with the cheap
/// `holds_thread` (one EXISTS on Redis), never with `stats` (which downloads every stored value).
BOOST_AUTO_TEST_CASE(writes_ask_the_front_cheaply) {
    auto redis = redis_testing::make_saver(options_with(fresh_prefix()));
    auto front = std::make_shared<counting_front>(redis);
    tiered_saver s(front, pg::make_saver(pg::options_for(pg::fresh_schema())));
    auto cp1 = next_cp(nullptr, 0, "input", json::object{{"a", 1}});
    put(s, "t", "", cp1);
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    put(s, "t", "", cp2);
    std::vector<pending_write> w{write_of("task", "node", "a", 3)};
    run(s.put_writes("t", "", cp2.id, w));
    run(s.prune("t", 1));
    BOOST_TEST(front->stats_calls.load() == 0);
    BOOST_TEST(front->holds_calls.load() == 4);
    BOOST_TEST(run(redis->holds_thread("t")));
    BOOST_TEST(get(s, "t", "")->cp.id == cp2.id);
}

namespace {
/// A back that says when a `stats` call has started.
class marking_back : public forwarding_saver {
public:
    using forwarding_saver::forwarding_saver;
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override {
        entered = true;
        co_return co_await inner().stats(std::move(thread_id));
    }
    std::atomic<bool> entered{false};
};

/// A front whose `stats` waits (at most 2 s) for the back's `stats` to start: it sees it start
/// only when the tiered saver asks both at once.
class waiting_front : public counting_front {
public:
    waiting_front(std::shared_ptr<saver> inner, std::shared_ptr<marking_back> back)
        : counting_front(std::move(inner)), back_(std::move(back)) {}
    boost::asio::awaitable<thread_stats> stats(std::string thread_id) override {
        asio::steady_timer pause(co_await asio::this_coro::executor);
        for (int i = 0; i < 200 && !back_->entered; ++i) {
            pause.expires_after(10ms);
            co_await pause.async_wait(asio::use_awaitable);
        }
        saw_back_started = back_->entered.load();
        co_return co_await counting_front::stats(std::move(thread_id));
    }
    std::atomic<bool> saw_back_started{false};

private:
    std::shared_ptr<marking_back> back_;
};
} // namespace

/// `acquire` counts the thread in both tiers at once, and what it learns settles whether the
/// front takes the writes: the writes under the lease ask the front nothing more. A new thread
/// goes to both tiers; a thread the back alone holds stays out of the front.
BOOST_AUTO_TEST_CASE(acquire_counts_both_tiers_at_once_and_writes_ask_nothing) {
    auto redis = redis_testing::make_saver(options_with(fresh_prefix()));
    auto back = std::make_shared<marking_back>(pg::make_saver(pg::options_for(pg::fresh_schema())));
    auto front = std::make_shared<waiting_front>(redis, back);
    tiered_saver s(front, back);

    run(s.acquire("new"));
    BOOST_TEST(front->saw_back_started.load()); // asked at once, not one after the other
    BOOST_TEST(front->stats_calls.load() == 1);
    auto cp1 = next_cp(nullptr, 0, "input", json::object{{"a", 1}});
    put(s, "new", "", cp1);
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    put(s, "new", "", cp2);
    BOOST_TEST(front->holds_calls.load() == 0);
    BOOST_TEST(run(redis->holds_thread("new"))); // a new thread: the front has it from its first write
    BOOST_TEST(run(redis->get("new", "", std::nullopt))->cp.id == cp2.id);
    run(s.release("new"));

    // Only the back holds "old" (the front lost it): the writes under the lease skip the front.
    auto o1 = next_cp(nullptr, 0, "input", json::object{{"b", 1}});
    put(*back, "old", "", o1);
    back->entered = false;
    run(s.acquire("old"));
    BOOST_TEST(front->saw_back_started.load());
    auto o2 = next_cp(&o1, 1, "loop", json::object{{"b", 2}});
    put(s, "old", "", o2);
    BOOST_TEST(front->holds_calls.load() == 0);
    BOOST_TEST(!run(redis->holds_thread("old")));
    BOOST_TEST(get(s, "old", "")->cp.id == o2.id); // read from the back
    run(s.release("old"));
}

/// A front that cannot be reached fails the calls that ask it, writes included (they ask it
/// first whether it holds the thread), with storage_failure naming the thread; the back is untouched.
BOOST_AUTO_TEST_CASE(unreachable_front_fails_the_call) {
    asio::io_context io;
    asio::ip::tcp::acceptor closed(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    const auto port = closed.local_endpoint().port();
    closed.close();
    auto o = options_with(fresh_prefix());
    o.url = "redis://127.0.0.1:" + std::to_string(port);
    o.attempts = 1;
    o.timeout = 500ms;
    auto back = pg::make_saver(pg::options_for(pg::fresh_schema()));
    tiered_saver s(std::make_shared<redis_saver>(o), back);
    auto cp1 = next_cp(nullptr, 0, "input", json::object{{"a", 1}});
    auto e = expect_error(errc::storage_failure, [&] { put(s, "far-thread", "", cp1); });
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(contains(e->what(), "far-thread"), e->what());
    BOOST_TEST(!get(*back, "far-thread", "").has_value());
    auto r = expect_error(errc::storage_failure, [&] { (void)get(s, "far-thread", ""); });
    BOOST_TEST(r.has_value());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_CASE(null_savers_are_refused) {
    try {
        tiered_saver s(nullptr, nullptr);
        BOOST_ERROR("made a tiered saver of nothing");
    } catch (const stategraph::checkpoint_error& e) {
        BOOST_TEST(e.kind() == errc::storage_failure);
    }
}
