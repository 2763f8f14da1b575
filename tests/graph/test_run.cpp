// Running graphs: sync and coroutine nodes, stream modes, typed run-time errors, many threads.
#include <stategraph/state_graph.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

#include <atomic>

namespace sg = stategraph;
namespace asio = boost::asio;
using sg::test::run;

namespace run_test {
struct msg {
    std::string id, role, content;
};
BOOST_DESCRIBE_STRUCT(msg, (), (id, role, content))
struct st {
    int total = 0;
    std::vector<std::string> log;
    std::vector<msg> messages;
};
BOOST_DESCRIBE_STRUCT(st, (), (total, log, messages))
inline auto reducers(sg::for_state<st>) {
    return sg::reducers{sg::reduce<&st::log>(sg::append), sg::reduce<&st::messages>(sg::messages),
                        sg::reduce<&st::total>([](int a, int b) { return a + b; })};
}

asio::awaitable<sg::update<st>> slow_add(const st&, sg::context& ctx) {
    asio::steady_timer t(ctx.executor(), std::chrono::milliseconds(1));
    co_await t.async_wait(asio::use_awaitable);
    ctx.write(std::string("halfway"));
    co_return sg::update<st>{}.set<&st::total>(10).set<&st::log>({"slow_add"});
}
// A free coroutine with by-value parameters: a capturing lambda coroutine would outlive its captures.
asio::awaitable<void> one_thread(sg::compiled_graph<st> app, int t, std::atomic<int>* ok) {
    sg::run_config cfg;
    cfg.thread_id = "thread-" + std::to_string(t);
    auto input = sg::update<st>{};
    auto r = co_await app.invoke(input, cfg);
    if (r.values.total == 10 && r.values.log.size() == 10) ++*ok;
}
} // namespace run_test
using run_test::st;
using run_test::msg;

BOOST_AUTO_TEST_CASE(custom_reducer_messages_reducer_and_coroutine_nodes) {
    sg::state_graph<st> g;
    g.add_node("sync_add", [](const st&) { return sg::update<st>{}.set<&st::total>(1).set<&st::log>({"sync_add"}); });
    g.add_node("slow_add", run_test::slow_add);
    g.add_node("chat", [](const st&) {
        return sg::update<st>{}.set<&st::messages>({msg{"m1", "assistant", "edited"}, msg{"", "assistant", "new"},
                                                     msg{"m2", "remove", ""}});
    });
    g.add_edge(sg::START, "sync_add").add_edge(sg::START, "slow_add");
    g.add_edge(std::vector<std::string>{"sync_add", "slow_add"}, "chat").add_edge("chat", sg::END);
    auto app = g.compile();
    std::vector<sg::stream_event> events;
    auto input = sg::update<st>{}.set<&st::total>(100).set<&st::messages>(
        {msg{"m1", "user", "hello"}, msg{"m2", "user", "drop me"}});
    sg::run_config cfg;
    auto r = run(app.stream(input, cfg, sg::stream_mode::updates | sg::stream_mode::custom | sg::stream_mode::debug |
                                            sg::stream_mode::values,
                            [&](const sg::stream_event& e) { events.push_back(e); }));
    BOOST_TEST(r.values.total == 111);
    BOOST_TEST(r.values.log == (std::vector<std::string>{"slow_add", "sync_add"})); // writes applied by node name
    BOOST_REQUIRE(r.values.messages.size() == 2u);
    BOOST_TEST(r.values.messages[0].content == "edited");
    BOOST_TEST(r.values.messages[1].content == "new");
    BOOST_TEST(!r.values.messages[1].id.empty());
    int custom = 0, debug = 0, updates = 0, values = 0;
    for (const auto& e : events) {
        custom += e.mode == sg::stream_mode::custom;
        debug += e.mode == sg::stream_mode::debug;
        updates += e.mode == sg::stream_mode::updates;
        values += e.mode == sg::stream_mode::values;
    }
    BOOST_TEST(custom == 1);
    BOOST_TEST(debug == 6); // start + end for 3 tasks
    BOOST_TEST(updates == 3);
    BOOST_TEST(values == 3); // input, step 1, step 2
}

BOOST_AUTO_TEST_CASE(router_to_unknown_node_is_a_typed_error) {
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return sg::update<st>{}; });
    g.add_node("b", [](const st&) { return sg::update<st>{}; });
    g.add_edge(sg::START, "a").add_edge("b", sg::END);
    g.add_conditional_edges("a", [](const st&) { return std::string("c"); }, std::vector<std::string>{"b", sg::END});
    auto app = g.compile();
    try {
        run(app.invoke(sg::update<st>{}, {}));
        BOOST_FAIL("expected invalid_route");
    } catch (const sg::graph_error& e) {
        BOOST_TEST((e.kind() == sg::errc::invalid_route));
        BOOST_TEST(std::string(e.what()).find("'c'") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(node_exception_names_the_node) {
    sg::state_graph<st> g;
    g.add_node("boom", [](const st&) -> sg::update<st> { throw std::runtime_error("kaput"); });
    g.add_edge(sg::START, "boom").add_edge("boom", sg::END);
    auto app = g.compile();
    try {
        run(app.invoke(sg::update<st>{}, {}));
        BOOST_FAIL("expected node_failed");
    } catch (const sg::node_error& e) {
        BOOST_TEST((e.kind() == sg::errc::node_failed));
        BOOST_TEST(e.node() == "boom");
        BOOST_TEST(std::string(e.what()).find("kaput") != std::string::npos);
        BOOST_CHECK_THROW(e.rethrow_nested(), std::runtime_error);
    }
}

BOOST_AUTO_TEST_CASE(checkpointer_requires_thread_id_and_history_needs_checkpointer) {
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return sg::update<st>{}; }).add_edge(sg::START, "a").add_edge("a", sg::END);
    auto with = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    try {
        run(with.invoke(sg::update<st>{}, {}));
        BOOST_FAIL("expected invalid_input");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::invalid_input));
    }
    auto without = g.compile();
    try {
        run(without.get_state("t"));
        BOOST_FAIL("expected no_checkpointer");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::no_checkpointer));
    }
}

BOOST_AUTO_TEST_CASE(many_threads_run_concurrently_on_a_thread_pool) {
    sg::state_graph<st> g;
    std::vector<std::string> names;
    for (int i = 0; i < 10; ++i) names.push_back("n" + std::to_string(i));
    for (const auto& n : names)
        g.add_node(n, [n](const st&) { return sg::update<st>{}.set<&st::total>(1).set<&st::log>({n}); });
    g.add_edge(sg::START, names.front());
    for (std::size_t i = 0; i + 1 < names.size(); ++i) g.add_edge(names[i], names[i + 1]);
    g.add_edge(names.back(), sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    asio::thread_pool pool(2);
    std::atomic<int> ok{0};
    for (int t = 0; t < 200; ++t) asio::co_spawn(pool, run_test::one_thread(app, t, &ok), asio::detached);
    pool.join();
    BOOST_TEST(ok.load() == 200);
    auto s = run(app.get_state("thread-7"));
    BOOST_TEST(s.values.total == 10);
    BOOST_TEST(s.step == 10);
}

namespace run_test {
struct other {
    std::string text;
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(other, (), (text, n))
/// A value larger than a record arena's first block (2 KiB), naming its thread and node.
std::string big(const std::string& thread, const std::string& node) {
    std::string s = thread + "/" + node + ":";
    s.resize(3000, static_cast<char>('a' + s.size() % 26));
    return s;
}
} // namespace run_test

// A call builds its checkpoints' records in arenas and versions maps that its thread keeps for
// its next calls. Records larger than an arena's first block, call after call, and two graphs
// of different channels taking turns: each call's checkpoints hold its own values only, and the
// arenas do not grow what they ask for (reused as they were, they did, until a bad_alloc).
BOOST_AUTO_TEST_CASE(calls_on_one_thread_reuse_their_record_arenas) {
    using run_test::other;
    const std::vector<std::string> nodes{"w0", "w1", "w2", "w3"};
    sg::state_graph<st> g;
    for (const auto& n : nodes)
        g.add_node(n, [n](const st&, sg::context& ctx) {
            return sg::update<st>{}.set<&st::total>(1).set<&st::log>({run_test::big(ctx.thread_id(), n)});
        });
    g.add_edge(sg::START, "w0").add_edge("w0", "w1").add_edge("w1", "w2").add_edge("w2", "w3").add_edge("w3", sg::END);
    sg::state_graph<other> h;
    h.add_node("x", [](const other&, sg::context& ctx) {
        return sg::update<other>{}.set<&other::text>(run_test::big(ctx.thread_id(), "x")).set<&other::n>(1);
    });
    h.add_node("y", [](const other& s) { return sg::update<other>{}.set<&other::n>(s.n + 1); });
    h.add_edge(sg::START, "x").add_edge("x", "y").add_edge("y", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    auto other_app = h.compile({.checkpointer = saver});
    for (int call = 0; call < 300; ++call) {
        sg::run_config cfg;
        cfg.thread_id = "arena-" + std::to_string(call);
        if (call % 3 == 2) {
            auto r = run(other_app.invoke(sg::update<other>{}, cfg));
            BOOST_TEST(r.values.text == run_test::big(cfg.thread_id, "x"));
            BOOST_TEST(r.values.n == 2);
            continue;
        }
        auto r = run(app.invoke(sg::update<st>{}, cfg));
        BOOST_TEST_REQUIRE(r.values.log.size() == nodes.size());
        for (std::size_t i = 0; i < nodes.size(); ++i) BOOST_TEST(r.values.log[i] == run_test::big(cfg.thread_id, nodes[i]));
    }
    // Every checkpoint of a few threads, as stored: step k holds the first k nodes' values.
    for (int call : {0, 1, 151, 298}) {
        const std::string thread = "arena-" + std::to_string(call);
        auto history = run(app.get_state_history(thread));
        BOOST_TEST_REQUIRE(history.size() == nodes.size() + 2); // the input checkpoint, then one per node
        for (const auto& snap : history) {
            BOOST_TEST_REQUIRE(snap.values.log.size() == static_cast<std::size_t>(std::max<std::int64_t>(snap.step, 0)));
            BOOST_TEST(snap.values.total == static_cast<int>(snap.values.log.size()));
            for (std::size_t i = 0; i < snap.values.log.size(); ++i)
                BOOST_TEST(snap.values.log[i] == run_test::big(thread, nodes[i]));
        }
    }
    auto s = run(other_app.get_state("arena-299"));
    BOOST_TEST(s.values.text == run_test::big("arena-299", "x"));
    BOOST_TEST(s.values.n == 2);
}

// One long call whose every checkpoint record is larger than its arena's first block: the arena
// is emptied and reused from record to record (sync) or queued and reused (async), and must not
// grow what it asks for with each reuse (it did, doubling: a bad_alloc within these 120 steps).
BOOST_AUTO_TEST_CASE(a_long_call_of_large_records_reuses_its_arenas) {
    using run_test::other;
    constexpr int steps = 120;
    sg::state_graph<other> g;
    g.add_node("grow", [](const other& s, sg::context& ctx) {
        return sg::update<other>{}
            .set<&other::text>(run_test::big(ctx.thread_id(), "grow-" + std::to_string(s.n)))
            .set<&other::n>(s.n + 1);
    });
    g.add_edge(sg::START, "grow");
    g.add_conditional_edges(
        "grow", [](const other& s) { return s.n < steps ? std::string("grow") : std::string(sg::END); },
        std::vector<std::string>{"grow", sg::END});
    auto app = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    for (auto mode : {sg::durability::sync, sg::durability::async}) {
        sg::run_config cfg;
        cfg.thread_id = mode == sg::durability::sync ? "long-sync" : "long-async";
        cfg.durability = mode;
        cfg.recursion_limit = steps + 10;
        auto r = run(app.invoke(sg::update<other>{}, cfg));
        BOOST_TEST(r.values.n == steps);
        BOOST_TEST(r.values.text == run_test::big(cfg.thread_id, "grow-" + std::to_string(steps - 1)));
        auto history = run(app.get_state_history(cfg.thread_id));
        BOOST_TEST(history.size() == static_cast<std::size_t>(steps + 2));
        for (const auto& snap : history)
            if (snap.values.n > 0)
                BOOST_TEST(snap.values.text == run_test::big(cfg.thread_id, "grow-" + std::to_string(snap.values.n - 1)));
    }
}

namespace run_test {
// Slow on the first attempt only, so the time limit trips once and the retry succeeds.
asio::awaitable<sg::update<st>> slow_then_fast(const st&, sg::context& ctx) {
    auto delay = ctx.attempt() == 1 ? std::chrono::milliseconds(500) : std::chrono::milliseconds(1);
    asio::steady_timer t(ctx.executor(), delay);
    co_await t.async_wait(asio::use_awaitable);
    co_return sg::update<st>{}.set<&st::log>({"attempt " + std::to_string(ctx.attempt())});
}
asio::awaitable<sg::update<st>> always_slow(const st&, sg::context& ctx) {
    asio::steady_timer t(ctx.executor(), std::chrono::seconds(5));
    co_await t.async_wait(asio::use_awaitable);
    co_return sg::update<st>{};
}
} // namespace run_test

BOOST_AUTO_TEST_CASE(retry_policy_time_limit_retries_then_reports_node_timeout) {
    sg::retry_policy policy;
    policy.max_attempts = 3;
    policy.initial_interval = std::chrono::milliseconds(1);
    policy.jitter = false;
    policy.timeout = std::chrono::milliseconds(30);
    {
        sg::state_graph<st> g;
        g.add_node("agent", run_test::slow_then_fast, {.retry = policy});
        g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
        auto r = run(g.compile().invoke(sg::update<st>{}, {}));
        BOOST_TEST(r.values.log == (std::vector<std::string>{"attempt 2"}));
    }
    {
        sg::state_graph<st> g;
        g.add_node("agent", run_test::always_slow, {.retry = policy});
        g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
        auto start = std::chrono::steady_clock::now();
        try {
            run(g.compile().invoke(sg::update<st>{}, {}));
            BOOST_FAIL("expected node_timeout");
        } catch (const sg::graph_error& e) {
            BOOST_TEST((e.kind() == sg::errc::node_timeout));
            BOOST_TEST(std::string(e.what()).find("attempt 3") != std::string::npos);
        }
        // Three 30 ms attempts, not three 5 s sleeps: the timed-out attempts were cancelled.
        BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(4)));
    }
}

namespace run_test {
asio::awaitable<sg::update<st>> throws_at_once(const st&, sg::context&) {
    throw std::runtime_error("bad input");
    co_return sg::update<st>{};
}
asio::awaitable<sg::update<st>> asks_permission(const st&, sg::context& ctx) {
    auto answer = co_await ctx.interrupt<std::string>(std::string("send the email?"));
    co_return sg::update<st>{}.set<&st::log>({answer});
}
} // namespace run_test

// Regression: the time limit must not hide a node's own error or interrupt (the race ends with
// whichever finishes first, not with the first success).
BOOST_AUTO_TEST_CASE(time_limit_passes_errors_and_interrupts_through_at_once) {
    sg::retry_policy policy;
    policy.max_attempts = 1;
    policy.timeout = std::chrono::seconds(3);
    {
        sg::state_graph<st> g;
        g.add_node("agent", run_test::throws_at_once, {.retry = policy});
        g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
        auto start = std::chrono::steady_clock::now();
        try {
            run(g.compile().invoke(sg::update<st>{}, {}));
            BOOST_FAIL("expected node_failed");
        } catch (const sg::node_error& e) {
            BOOST_TEST(std::string(e.what()).find("bad input") != std::string::npos);
        }
        BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(2)));
    }
    {
        sg::state_graph<st> g;
        g.add_node("agent", run_test::asks_permission, {.retry = policy});
        g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
        auto app = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
        sg::run_config cfg;
        cfg.thread_id = "perm";
        auto start = std::chrono::steady_clock::now();
        auto r = run(app.invoke(sg::update<st>{}, cfg));
        BOOST_TEST(r.interrupted());
        BOOST_TEST((std::chrono::steady_clock::now() - start < std::chrono::seconds(2)));
        r = run(app.invoke(sg::resume(std::string("approve")), cfg));
        BOOST_TEST(r.values.log == (std::vector<std::string>{"approve"}));
    }
}
