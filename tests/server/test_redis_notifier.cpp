#define BOOST_TEST_MODULE server_redis_notifier
// Wake-ups through Redis pub/sub (issue 24): the notifier alone (a wake-up published on one is
// heard on another, not across prefixes or databases; the subscription is made again after its
// connection drops; an unreachable server or a bad URL is a typed error), then two server
// instances on one SQLite run store that poll only once a minute, so that a run created on one
// and executed by the other, and its cancellation, can only be that quick through a wake-up; and
// instances whose Redis is gone fall back to polling.
//
// Against the server named by STATEGRAPH_TEST_REDIS (scripts/redis-server start); the cases that
// need it are skipped, saying so, when it is unset.

#include <stategraph/server/redis_notifier.hpp>

#include "redis_connection.hpp" // checkpoint/src: the URL's parts
#include "server_test_support.hpp"
#include "shared_files.hpp"
#include "tcp_proxy.hpp" // tests/checkpoint

#include <stategraph/server/notifier.hpp>

#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>

#include <unistd.h>

namespace {

std::string redis_url() {
    const char* url = std::getenv("STATEGRAPH_TEST_REDIS");
    return url ? url : "";
}

/// Skips a case without a Redis server to run against.
struct needs_redis {
    boost::test_tools::assertion_result operator()(boost::unit_test::test_unit_id) const {
        boost::test_tools::assertion_result r(!redis_url().empty());
        r.message() << "STATEGRAPH_TEST_REDIS is not set (e.g. redis://127.0.0.1:6379; scripts/redis-server start "
                       "prints one): the Redis notifier is not tested";
        return r;
    }
};

/// A channel prefix no other case (or test run) uses.
std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "sgtest-wake:" + std::to_string(::getpid()) + ":" + std::to_string(n++) + ":" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// `url` with its database number replaced.
std::string with_db(const std::string& url, int db) {
    const auto host = url.find("://") + 3;
    const auto slash = url.find('/', host);
    return url.substr(0, slash) + "/" + std::to_string(db);
}

/// The test's Redis server: host and port, for a proxy in front of it.
std::pair<std::string, int> redis_host_port() {
    const auto ep = sg::checkpoint::redis::parse_url(redis_url());
    return {ep.host, std::stoi(ep.port)};
}

/// How many connections subscribe to `channel` (PUBSUB NUMSUB), asked on a connection of the test's own.
long long subscribers_of(const std::string& channel) {
    auto ask = [](std::string ch) -> net::awaitable<long long> {
        sg::checkpoint::redis::connection c(co_await net::this_coro::executor, std::chrono::seconds(5));
        const auto where = sg::checkpoint::redis::parse_url(redis_url());
        co_await c.connect(where);
        std::vector<sg::checkpoint::redis::command> cmds{sg::checkpoint::redis::command{"PUBSUB", "NUMSUB", ch}};
        auto r = co_await c.run(cmds);
        co_return r.at(0).elements.at(1).integer;
    };
    return sg::checkpoint::testing::run(ask(channel));
}

/// The URL of `proxy` in front of the test's Redis (database 0).
std::string through(const sg::checkpoint::testing::tcp_proxy& proxy) {
    return "redis://127.0.0.1:" + std::to_string(proxy.port()) + "/0";
}

std::shared_ptr<srv::notifier> open_notifier(const std::string& url, const std::string& prefix,
                                             std::function<void(std::string_view)> log = nullptr) {
    srv::redis_notifier_options o;
    o.url = url;
    o.channel_prefix = prefix;
    o.timeout = std::chrono::milliseconds(2000);
    o.log = std::move(log);
    return srv::open_redis_notifier(std::move(o));
}

/// The wake-ups a subscriber heard, in order; `next` waits (bounded) for the next one.
class heard {
public:
    srv::notifier::handler sink() {
        return [this](std::string channel, std::string payload) {
            std::lock_guard lock(mutex_);
            got_.emplace_back(std::move(channel), std::move(payload));
            cv_.notify_all();
        };
    }
    std::optional<std::pair<std::string, std::string>> next(std::chrono::milliseconds within = std::chrono::seconds(10)) {
        std::unique_lock lock(mutex_);
        if (!cv_.wait_for(lock, within, [&] { return !got_.empty(); })) return std::nullopt;
        auto out = std::move(got_.front());
        got_.pop_front();
        return out;
    }

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::pair<std::string, std::string>> got_;
};

/// Lines a notifier logged.
struct log_lines {
    std::mutex mutex;
    std::vector<std::string> lines;
    std::function<void(std::string_view)> sink() {
        return [this](std::string_view line) {
            std::lock_guard lock(mutex);
            lines.emplace_back(line);
        };
    }
    bool any_with(std::string_view text) {
        std::lock_guard lock(mutex);
        for (const auto& l : lines)
            if (l.find(text) != std::string::npos) return true;
        return false;
    }
};

void publish(srv::notifier& n, std::string_view channel, std::string_view payload) {
    sg::checkpoint::testing::run(n.publish(channel, payload));
}

/// A server instance on the case's run store file with wake-ups through `wakeups` (null: none),
/// polling every `poll`. `workers` 0: API only; otherwise a worker that serves no API.
srv::server_options instance(const temp_dir& d, std::shared_ptr<srv::notifier> wakeups, std::size_t workers,
                             std::chrono::milliseconds poll) {
    auto o = test_options();
    srv::run_store_options ro;
    ro.notifier = std::move(wakeups);
    o.runs = srv::open_sqlite_run_store((d.path / "runs.db").string(), ro);
    o.max_runs_in_flight = workers;
    o.serve_api = workers == 0;
    o.poll_interval = poll;
    return o;
}
/// `call` on a thread of its own, waited for at most `within` (nullopt: it did not answer).
template <class F>
std::optional<reply> within(std::chrono::seconds limit, F call) {
    auto f = std::async(std::launch::async, std::move(call));
    if (f.wait_for(limit) != std::future_status::ready) return std::nullopt;
    return f.get();
}

/// Polling every minute: anything quicker is a wake-up.
constexpr std::chrono::milliseconds rare_poll = std::chrono::seconds(60);

/// Two instances on one SQLite run store, polling every minute, waking each other through Redis:
/// A takes requests only, B runs runs only; a thread made on A.
struct api_and_worker {
    temp_dir d{"sg-wakeups"};
    std::string prefix = fresh_prefix();
    running_server a{instance(d, open_notifier(redis_url(), prefix), 0, rare_poll), {}, chat_saver(d)};
    running_server b{instance(d, open_notifier(redis_url(), prefix), 8, rare_poll), {}, chat_saver(d)};
    std::string tid = new_thread(a.port);
};

} // namespace

BOOST_AUTO_TEST_SUITE(redis_notifier)

// open_redis_notifier checks the server answers: a port nobody listens on, and a URL that is not
// redis://, are typed errors naming what is wrong. Needs no Redis server.
BOOST_AUTO_TEST_CASE(an_unreachable_server_or_a_bad_url_is_a_typed_error) {
    unsigned short closed_port = 0;
    {
        net::io_context io;
        tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
        closed_port = a.local_endpoint().port();
    }
    const std::string url = "redis://127.0.0.1:" + std::to_string(closed_port);
    try {
        (void)open_notifier(url, "x");
        BOOST_FAIL("a Redis server nobody runs was opened");
    } catch (const srv::notifier_error& e) {
        BOOST_TEST((e.kind() == srv::notifier_errc::unreachable));
        BOOST_TEST((e.code() == srv::notifier_errc::unreachable));
        BOOST_TEST(e.code().category().name() == std::string("stategraph.server.notifier"));
        BOOST_TEST(std::string(e.what()).find("127.0.0.1:" + std::to_string(closed_port)) != std::string::npos, e.what());
    }
    try {
        (void)open_notifier("http://127.0.0.1:6379", "x");
        BOOST_FAIL("an http:// URL was taken");
    } catch (const srv::notifier_error& e) {
        BOOST_TEST((e.kind() == srv::notifier_errc::bad_url));
        BOOST_TEST(std::string(e.what()).find("redis://") != std::string::npos, e.what());
    }
    BOOST_CHECK_THROW((void)open_notifier("redis://127.0.0.1:70000", "x"), srv::notifier_error);
    BOOST_CHECK_THROW((void)open_notifier("redis://127.0.0.1:6379/0", ""), srv::notifier_error);
}

// A wake-up published on one notifier is heard on another of the same prefix and database, on
// the channels it subscribed to only; notifiers of another prefix or database are not heard.
BOOST_AUTO_TEST_CASE(a_wake_up_is_heard_by_the_same_prefix_and_database_only, *boost::unit_test::precondition(needs_redis())) {
    const auto prefix = fresh_prefix();
    heard on_b, on_prefix, on_db; // before the notifiers that call them: they outlive them
    auto a = open_notifier(with_db(redis_url(), 0), prefix);
    auto b = open_notifier(with_db(redis_url(), 0), prefix);
    BOOST_TEST(b->subscribe({"sg_runs"}, on_b.sink()));
    BOOST_TEST(b->describe().find(prefix + ":0:") != std::string::npos, b->describe());

    publish(*a, "sg_runs", "run-1");
    auto got = on_b.next();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->first == "sg_runs");
    BOOST_TEST(got->second == "run-1");

    // Its own wake-ups too (as PostgreSQL's NOTIFY reaches the sender's LISTEN).
    publish(*b, "sg_runs", "run-2");
    got = on_b.next();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->second == "run-2");

    // Another prefix, another database: each heard by its own subscriber, not by b.
    auto other_prefix = open_notifier(with_db(redis_url(), 0), prefix + "-other");
    auto other_db = open_notifier(with_db(redis_url(), 1), prefix);
    BOOST_TEST(other_prefix->subscribe({"sg_runs"}, on_prefix.sink()));
    BOOST_TEST(other_db->subscribe({"sg_runs"}, on_db.sink()));
    publish(*other_prefix, "sg_runs", "elsewhere-1");
    publish(*other_db, "sg_runs", "elsewhere-2");
    publish(*a, "sg_events", "not-subscribed"); // a channel b did not ask for
    BOOST_TEST_REQUIRE(on_prefix.next().has_value()); // Redis has sent both to every subscriber
    BOOST_TEST_REQUIRE(on_db.next().has_value());
    publish(*a, "sg_runs", "last");
    got = on_b.next();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->second == "last"); // nothing of the others came before it
}

// The subscription's connection cut (as a restarted Redis does): the notifier connects again,
// reports the channel once with an empty payload (what was sent in the gap is lost), logs the
// loss and the return, and hears the wake-ups sent after it.
BOOST_AUTO_TEST_CASE(a_dropped_subscription_is_made_again, *boost::unit_test::precondition(needs_redis())) {
    const auto where = redis_host_port();
    sg::checkpoint::testing::tcp_proxy proxy(where.first, where.second);
    const auto prefix = fresh_prefix();
    log_lines logged;
    heard on_sub; // before the notifier that calls it: it outlives it
    auto sub = open_notifier(through(proxy), prefix, logged.sink());
    auto pub = open_notifier(with_db(redis_url(), 0), prefix);
    BOOST_TEST(sub->subscribe({"sg_runs", "sg_events"}, on_sub.sink()));
    publish(*pub, "sg_runs", "before");
    auto got = on_sub.next();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->second == "before");

    proxy.drop();
    std::set<std::string> reported;
    for (int i = 0; i < 2; ++i) { // each channel once, empty
        got = on_sub.next();
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->second == "");
        reported.insert(got->first);
    }
    BOOST_TEST((reported == std::set<std::string>{"sg_events", "sg_runs"}));
    publish(*pub, "sg_events", "after");
    got = on_sub.next();
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->first == "sg_events");
    BOOST_TEST(got->second == "after");
    BOOST_TEST(logged.any_with("failed"));
    BOOST_TEST(logged.any_with("subscribed again"));
}

// Two instances on one SQLite run store, polling once a minute: A takes requests only, B runs
// runs only. A run created on A is executed by B and A's runs/wait answers within seconds: the
// news crossed through Redis both ways (queued: A to B; done: B to A).
BOOST_AUTO_TEST_CASE(a_run_made_on_one_instance_runs_on_another_at_once, *boost::unit_test::precondition(needs_redis())) {
    api_and_worker w;
    auto& a = w.a;
    const auto tid = w.tid;

    for (int turn = 0; turn < 3; ++turn) { // more than once: no lucky first claim at start-up
        auto body = json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}};
        auto w = within(std::chrono::seconds(10), [&] { return post(a.port, "/threads/" + tid + "/runs/wait", body); });
        BOOST_TEST_REQUIRE(w.has_value(), "runs/wait on A did not answer within 10 s (polling is once a minute)");
        BOOST_TEST_REQUIRE(w->status == 200u, w->body);
        BOOST_TEST(json::parse(w->body).at("log").as_array().size() == 2u * (turn + 1));
    }
    auto runs = get(a.port, "/threads/" + tid + "/runs").json().as_array();
    BOOST_TEST(runs.size() == 3u);
    for (const auto& r : runs) BOOST_TEST(r.at("status") == "success");
}

// The same two instances: a run that would take 30 s, running on B, cancelled through A, stops
// within seconds and A's cancel?wait=1 answers: the cancellation reached B, and its end reached A.
BOOST_AUTO_TEST_CASE(a_cancellation_crosses_instances_at_once, *boost::unit_test::precondition(needs_redis())) {
    api_and_worker w;
    auto& a = w.a;
    const auto tid = w.tid;
    auto body = json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "stall"}}}};
    auto created = post(a.port, "/threads/" + tid + "/runs", body);
    BOOST_TEST_REQUIRE(created.status == 200u, created.body);
    const std::string rid(created.json().at("run_id").as_string());
    for (int i = 0; i < 200 && status_of(a.port, tid, rid) != "running"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST_REQUIRE(status_of(a.port, tid, rid) == "running");

    auto cancelled = within(std::chrono::seconds(10), [&] {
        return post(a.port, "/threads/" + tid + "/runs/" + rid + "/cancel?wait=1", json::object{});
    });
    BOOST_TEST_REQUIRE(cancelled.has_value(), "cancel?wait=1 on A did not answer within 10 s");
    BOOST_TEST(cancelled->status == 204u, cancelled->body);
    BOOST_TEST(status_of(a.port, tid, rid) == "interrupted");
    BOOST_TEST(get(a.port, "/threads/" + tid).json().at("status") != "busy");
}

// Redis gone after the instances started (the proxy stops listening and cuts every connection):
// requests do not wait on it, a line says so, and runs still cross through the run store at the
// next poll.
BOOST_AUTO_TEST_CASE(instances_poll_when_redis_is_gone, *boost::unit_test::precondition(needs_redis())) {
    const auto where = redis_host_port();
    sg::checkpoint::testing::tcp_proxy proxy(where.first, where.second);
    temp_dir d("sg-wakeups");
    const auto prefix = fresh_prefix();
    log_lines logged;
    const auto poll = std::chrono::milliseconds(200);
    running_server a(instance(d, open_notifier(through(proxy), prefix, logged.sink()), 0, poll), {}, chat_saver(d));
    running_server b(instance(d, open_notifier(through(proxy), prefix, logged.sink()), 8, poll), {}, chat_saver(d));
    // Both subscribed (the worker subscribes as it starts, on its own thread), then Redis goes.
    for (int i = 0; i < 200 && subscribers_of(prefix + ":0:sg_runs") < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    BOOST_TEST_REQUIRE(subscribers_of(prefix + ":0:sg_runs") == 2);
    const auto tid = new_thread(a.port);
    proxy.stop();

    auto body = json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}};
    auto w = within(std::chrono::seconds(20), [&] { return post(a.port, "/threads/" + tid + "/runs/wait", body); });
    BOOST_TEST_REQUIRE(w.has_value(), "runs/wait on A did not answer within 20 s with Redis gone");
    BOOST_TEST_REQUIRE(w->status == 200u, w->body);
    BOOST_TEST(json::parse(w->body).at("log").as_array().size() == 2u);
    for (int i = 0; i < 100 && !logged.any_with("failed"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    BOOST_TEST(logged.any_with("at their next poll"));
}

BOOST_AUTO_TEST_SUITE_END()
