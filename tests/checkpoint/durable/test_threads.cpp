// Durable threads on both checkpointers: pending writes survive an abandoned step, interrupts
// (several per node, typed answers, maps), bad input as typed errors that lose nothing,
// breakpoints, get_state / history / update_state, replay and fork, drift, subgraphs.
#include "durable_common.hpp"
#include "durable_graphs.hpp"

#include <stategraph/drain.hpp>

#include <boost/asio/detached.hpp>
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <set>

using namespace durable;
using namespace std::chrono_literals;

namespace th {
struct st {
    std::string value;
    std::vector<std::string> log;
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(st, (), (value, log, n))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }

/// Same fields plus one more: a different state shape for drift tests.
struct st2 {
    std::string value;
    std::vector<std::string> log;
    int n = 0;
    double extra = 0;
};
BOOST_DESCRIBE_STRUCT(st2, (), (value, log, n, extra))
inline auto reducers(sg::for_state<st2>) { return sg::reducers{sg::reduce<&st2::log>(sg::append)}; }
} // namespace th

namespace {
using th::st;
using upd = sg::update<st>;
using awaitable_update = boost::asio::awaitable<upd>;

/// A node appending its name to `value` and `log`, counting its starts.
auto letter(counters& side, std::string name) {
    return [&side, name](const st& s) {
        side.bump(name);
        return upd{}.set<&st::value>(s.value + name).set<&st::log>({name});
    };
}

/// A node appending its name to `log` only, counting its starts.
auto logger(counters& side, std::string name) {
    return [&side, name](const st&) {
        side.bump(name);
        return upd{}.set<&st::log>({name});
    };
}

/// A node asking `question` (interrupt<T>) and logging "<name>=<answer>".
template <class T>
auto asker(counters& side, std::string name, std::string question) {
    return [&side, name, question](const st&, sg::context& ctx) -> awaitable_update {
        side.bump(name + ".start");
        auto pending = ctx.interrupt<T>(question);
        T answer = co_await std::move(pending);
        side.bump(name + ".after");
        co_return upd{}.set<&st::log>({name + "=" + json::serialize(json::value_from(answer))});
    };
}

json::value snap_json(const sg::state_snapshot<st>& s) {
    json::object o;
    o["values"] = sg::detail::state_ops<st>::state_json(s.values);
    o["next"] = json::value_from(s.next);
    json::array tasks;
    for (const auto& t : s.tasks) {
        json::array ints;
        for (const auto& i : t.interrupts) ints.push_back(json::object{{"id", i.id}, {"node", i.node}, {"value", i.value}});
        json::object to{{"id", t.id}, {"name", t.name}, {"interrupts", ints}};
        if (t.result) to["result"] = *t.result;
        tasks.push_back(to);
    }
    o["tasks"] = tasks;
    o["step"] = s.step;
    o["source"] = s.source;
    o["checkpoint_id"] = s.checkpoint_id;
    return o;
}

bool has_write(const std::optional<cp::checkpoint_tuple>& head, const std::string& task, const std::string& channel) {
    if (!head) return false;
    for (const auto& w : head->writes)
        if (w.task_name == task && w.channel == channel) return true;
    return false;
}
} // namespace

BOOST_AUTO_TEST_SUITE(threads)

// A checkpoint after every node: a finished node's writes are saved the moment it finishes;
// when the run dies mid-step, continuing the thread runs only the unfinished node.
BOOST_DATA_TEST_CASE(finished_sibling_survives_an_abandoned_step, savers(), kind) {
    using graphs::crash_state;
    saver_env env(kind);
    const std::string counts = env.dir.file("counters");
    bool block = true;
    auto app = graphs::crash_graph(counts, &block).compile({.checkpointer = env.saver});
    {
        boost::asio::io_context io;
        boost::asio::co_spawn(io, app.invoke(sg::update<crash_state>{}, thread("t")), boost::asio::detached);
        bool seen = false;
        for (int i = 0; i < 400 && !seen; ++i) {
            io.run_for(5ms);
            seen = has_write(run(env.saver->get("t", "", std::nullopt)), "fast", "log") &&
                   graphs::read_counts(counts)["slow"] == 1;
        }
        BOOST_REQUIRE_MESSAGE(seen, "fast's pending write never became visible while slow was running");
        // Its field and its (empty) route are stored; an empty list of Sends is not.
        const auto head = run(env.saver->get("t", "", std::nullopt));
        BOOST_TEST(has_write(head, "fast", "__goto__"));
        BOOST_TEST(!has_write(head, "fast", "__send__"));
    } // the io_context dies with `slow` suspended mid-step: what a crash leaves behind

    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.log == (std::vector<std::string>{"fast"}));
    BOOST_TEST(s.next == (std::vector<std::string>{"slow"}));
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 2u);
    BOOST_TEST(s.tasks[0].name == "fast");
    BOOST_TEST(s.tasks[0].result.has_value());
    BOOST_TEST(!s.tasks[1].result.has_value());

    if (kind == saver_kind::sqlite) {
        // Another owner (another process, here a second connection) cannot take the thread
        // while the dead run's lease is live.
        auto other = graphs::crash_graph(counts, &block).compile({.checkpointer = env.open()});
        BOOST_TEST(error_of([&] { run(other.invoke(sg::continue_run, thread("t"))); }) == sg::errc::thread_busy);
    }

    block = false;
    auto r = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.values.log == (std::vector<std::string>{"fast", "slow", "after"}));
    auto c = graphs::read_counts(counts);
    BOOST_TEST(c["fast"] == 1); // never re-run
    BOOST_TEST(c["slow"] == 2);
    BOOST_TEST(c["after"] == 1);
}

// A node that fails in a parallel step: the run fails with the node's error, the finished
// sibling's writes stay saved, and continuing the thread runs only the failed node again.
BOOST_DATA_TEST_CASE(failed_node_reruns_alone, savers(), kind) {
    saver_env env(kind);
    counters side;
    bool fail = true;
    sg::state_graph<st> g;
    g.add_node("ok", logger(side, "ok"));
    g.add_node("flaky", [&side, &fail](const st&) {
        side.bump("flaky");
        if (fail) throw std::runtime_error("upstream is down");
        return upd{}.set<&st::log>({"flaky"});
    });
    g.add_node("after", logger(side, "after"));
    g.add_edge(sg::START, "ok").add_edge(sg::START, "flaky").add_edge("ok", "after").add_edge("flaky", "after");
    g.add_edge("after", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    std::string msg;
    BOOST_TEST(error_of([&] { run(app.invoke(upd{}, thread("t"))); }, &msg) == sg::errc::node_failed);
    BOOST_TEST(msg.find("upstream is down") != std::string::npos, msg);
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.log == (std::vector<std::string>{"ok"}));
    BOOST_TEST(s.next == (std::vector<std::string>{"flaky"}));
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 2u);
    BOOST_TEST(s.tasks[0].name == "ok"); // declaration order, as LangGraph
    BOOST_TEST(!s.tasks[0].error);
    BOOST_TEST(s.tasks[1].name == "flaky");
    BOOST_TEST((s.tasks[1].error && s.tasks[1].error->find("upstream is down") != std::string::npos));
    fail = false;
    auto r = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"flaky", "ok", "after"}));
    BOOST_TEST(side["ok"] == 1);
    BOOST_TEST(side["flaky"] == 2);
}

// Issue 11, break 7: a process that dies after a step's tasks saved their writes but before the
// step's checkpoint left `next == []`, and the CLI printed "done". The step's nodes stay next;
// continuing completes the step from the saved writes without running them again.
BOOST_DATA_TEST_CASE(a_step_without_its_checkpoint_is_still_next, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b")).add_node("c", logger(side, "c"));
    g.add_edge(sg::START, "a").add_edge(sg::START, "b").add_edge("a", "c").add_edge("b", "c").add_edge("c", sg::END);
    auto dying = std::make_shared<counting_saver>(env.saver);
    dying->fail_puts_from(2); // the input and START checkpoints are written; the step's is not
    auto first = g.compile({.checkpointer = dying});
    BOOST_TEST(error_of([&] { run(first.invoke(upd{}, thread("t"))); }) == sg::errc::storage_failure);
    auto app = g.compile({.checkpointer = env.saver});
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.next == (std::vector<std::string>{"a", "b"}));
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 2u);
    BOOST_TEST((s.tasks[0].result && s.tasks[1].result));
    BOOST_TEST(s.values.log == (std::vector<std::string>{"a", "b"})); // their writes, applied
    auto r = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["b"] == 1);
    BOOST_TEST(run(app.get_state("t")).next.empty());
}

namespace {
/// As a process killed right after it stored its `n`-th task write: the first `n` task writes
/// go through (counted as they are asked for, so that two in flight at once are told apart);
/// every later write (a task's, or the step's checkpoint once a task write went through) never
/// returns, and the io_context that runs the call is then destroyed with the call suspended in it.
class dies_after_writes final : public forwarding_saver {
public:
    dies_after_writes(std::shared_ptr<cp::saver> inner, int n) : forwarding_saver(std::move(inner)), n_(n) {}

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const cp::checkpoint& c) override {
        if (admitted_ > 0 && admitted_ >= n_) co_await forever();
        co_await inner().put(thread_id, ns, c);
    }
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<cp::pending_write> writes) override {
        if (admitted_ >= n_) co_await forever();
        ++admitted_;
        co_await inner().put_writes(std::move(thread_id), std::move(ns), std::move(checkpoint_id), std::move(writes));
    }

private:
    static boost::asio::awaitable<void> forever() {
        boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, std::chrono::hours(24));
        co_await t.async_wait(boost::asio::use_awaitable);
    }
    int n_;
    int admitted_ = 0;
};

/// START -> prep; prep -> side (a parallel branch) and three Sends to work (tasks of one node,
/// finishing in the order w0, side, w1, w2); work, side -> after -> END.
sg::state_graph<st> fan_out_graph(counters& side) {
    sg::state_graph<st> g;
    g.add_node("prep", logger(side, "prep"));
    auto wait_then_log = [&side](std::string name, int ms) -> awaitable_update {
        side.bump(name);
        boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(ms));
        co_await t.async_wait(boost::asio::use_awaitable);
        co_return upd{}.set<&st::log>({name});
    };
    g.add_node("side", [wait_then_log](const st&) {
        std::string name = "side";
        return wait_then_log(std::move(name), 6);
    });
    g.add_node("work", [wait_then_log](const int& i) {
        std::string name = "w" + std::to_string(i);
        return wait_then_log(std::move(name), 1 + 10 * i);
    });
    g.add_node("after", logger(side, "after"));
    g.add_edge(sg::START, "prep").add_edge("prep", "side");
    g.add_conditional_edges(
        "prep",
        [](const st&) { return std::vector<sg::send>{sg::send("work", 0), sg::send("work", 1), sg::send("work", 2)}; },
        std::vector<std::string>{"work"});
    g.add_edge("work", "after").add_edge("side", "after").add_edge("after", sg::END);
    return g;
}
} // namespace

// Issue 23, break 1: a process killed while the tasks of a fan-out step run, at every point
// between their writes. A node leaves `next` only once all of its tasks finished: with w0 saved
// and w1, w2 not, `work` stays next (before, the thread read as done and the rest was lost);
// continuing runs only the tasks without saved writes, and the thread ends as an unbroken run.
BOOST_DATA_TEST_CASE(a_fan_out_killed_between_its_tasks_writes_is_not_done, savers(), kind) {
    // The finishing order of the step's tasks, and the node of each.
    const std::vector<std::pair<std::string, std::string>> order{{"w0", "work"}, {"side", "side"}, {"w1", "work"}, {"w2", "work"}};
    for (int n = 0; n <= 4; ++n) {
        BOOST_TEST_CONTEXT("killed after " << n << " of the step's 4 task writes were stored") {
            saver_env env(kind);
            counters side;
            auto g = fan_out_graph(side);
            {
                auto dying = std::make_shared<dies_after_writes>(env.saver, n);
                auto first = g.compile({.checkpointer = dying});
                boost::asio::io_context io;
                boost::asio::co_spawn(io, first.invoke(upd{}, thread("t")), boost::asio::detached);
                io.run_for(300ms); // the tasks take at most 21 ms; then the call hangs in the saver
            } // the io_context dies with the call suspended: what a SIGKILL leaves
            auto app = g.compile({.checkpointer = env.saver});
            auto s = run(app.get_state("t"));
            std::set<std::string> waiting, saved{"prep"};
            for (int k = 0; k < 4; ++k) {
                if (k < n) saved.insert(order[static_cast<std::size_t>(k)].first);
                else waiting.insert(order[static_cast<std::size_t>(k)].second);
            }
            // All four stored but not the step's checkpoint: the step is still to complete.
            if (n == 4) waiting = {"side", "work"};
            BOOST_TEST(s.next == (std::vector<std::string>(waiting.begin(), waiting.end())), boost::test_tools::per_element());
            BOOST_TEST(std::set<std::string>(s.values.log.begin(), s.values.log.end()) == saved);
            BOOST_TEST(s.tasks.size() == 4u);

            auto r = run(app.invoke(sg::continue_run, thread("t")));
            BOOST_TEST(!r.interrupted());
            std::multiset<std::string> log(r.values.log.begin(), r.values.log.end());
            BOOST_TEST(log == (std::multiset<std::string>{"prep", "side", "w0", "w1", "w2", "after"}));
            for (const auto& [task, node] : order)
                BOOST_TEST(side[task] == (saved.count(task) ? 1 : 2), "task " << task << " ran " << side[task] << " times");
            BOOST_TEST(side["after"] == 1);
            BOOST_TEST(run(app.get_state("t")).next.empty());
        }
    }
}

// Found by the kill loop (issue 11): a process that dies between the input checkpoint and the
// first step's checkpoint lost the input, and the thread looked finished (next == [], and
// continuing ran nothing). The input is kept in the input checkpoint's record, as LangGraph keeps
// it in the `__start__` task's writes: `__start__` is next, and continuing applies it and runs.
BOOST_DATA_TEST_CASE(an_input_without_its_first_step_is_still_to_run, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    auto dying = std::make_shared<counting_saver>(env.saver);
    dying->fail_puts_from(1); // the input checkpoint is written; the first step's is not
    auto first = g.compile({.checkpointer = dying});
    BOOST_TEST(error_of([&] { run(first.invoke(upd{}.set<&st::value>("in"), thread("t"))); }) ==
               sg::errc::storage_failure);
    auto app = g.compile({.checkpointer = env.saver});
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.next == (std::vector<std::string>{"__start__"}));
    BOOST_TEST(s.values.value.empty()); // not applied yet
    BOOST_TEST(side["a"] == 0);
    auto r = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.values.value == "in");
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(run(app.get_state("t")).next.empty());
    // The history reads as LangGraph's: input (next __start__), then one checkpoint per step.
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 4u);
    BOOST_TEST(h.back().next == (std::vector<std::string>{"__start__"}));
    BOOST_TEST(h.back().step == -1);
}

// Issue 12, fix 2: replaying from a checkpoint whose next step has several tasks runs them
// again; the writes they saved on the old branch are not reused (before, they came back as
// cached events and the nodes did not run).
BOOST_DATA_TEST_CASE(replay_reruns_a_parallel_step, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b")).add_node("c", logger(side, "c"));
    g.add_edge(sg::START, "a").add_edge(sg::START, "b").add_edge("a", "c").add_edge("b", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    run(app.invoke(upd{}, thread("t")));
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 4u); // input, START, a+b, c
    BOOST_REQUIRE(h[2].next == (std::vector<std::string>{"a", "b"}));
    auto cfg = thread("t");
    cfg.checkpoint_id = h[2].checkpoint_id;
    std::vector<sg::stream_event> events;
    auto r = run(app.stream(sg::continue_run, cfg, sg::stream_mode::updates,
                            [&](const sg::stream_event& e) { events.push_back(e); }));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c"}));
    BOOST_TEST(side["a"] == 2);
    BOOST_TEST(side["b"] == 2);
    BOOST_TEST(side["c"] == 2);
    for (const auto& e : events) BOOST_TEST(!e.cached, "replayed " << e.node << " as cached");
}

// Issue 12, feature 3: ctx.task runs a side effect at most once per task. The node sends an
// "email", then asks for approval: the resume runs the node again from its start, and the send
// returns its saved result instead of sending again. Two calls of one name are two effects; a
// retried attempt gets the results of the failed one.
BOOST_DATA_TEST_CASE(side_effects_run_once_per_task, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("mail", [&side](const st& s, sg::context& ctx) -> awaitable_update {
        auto send = [&side, &s]() -> std::string {
            side.bump("sent");
            return "msg-" + std::to_string(side["sent"]) + " to " + s.value;
        };
        std::string id = co_await ctx.task("send-email", send);
        // the natural spelling: a temporary lambda capturing by reference, and an awaitable result
        std::string id2 = co_await ctx.task("send-email", [&]() -> boost::asio::awaitable<std::string> {
            side.bump("sent");
            co_return "second-" + std::to_string(side["sent"]);
        });
        co_await ctx.task("log", [&] { side.bump("logged"); }); // no result
        const bool ok = co_await ctx.interrupt<bool>(std::string("sent " + id + ", " + id2 + "; ok?"));
        co_return upd{}.set<&st::log>({id, id2, ok ? "approved" : "rejected"});
    });
    g.add_node("flaky", [&side](const st&, sg::context& ctx) -> awaitable_update {
        auto charge = [&side] {
            side.bump("charged");
            return 42;
        };
        const int receipt = co_await ctx.task("charge", charge);
        if (ctx.attempt() == 1) throw std::runtime_error("network down after charging");
        co_return upd{}.set<&st::n>(receipt);
    }, {.retry = sg::retry_policy{.max_attempts = 2, .initial_interval = std::chrono::milliseconds(1)}});
    g.add_edge(sg::START, "mail").add_edge("mail", "flaky").add_edge("flaky", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}.set<&st::value>("anna"), thread("t")));
    BOOST_REQUIRE(r1.interrupted());
    BOOST_TEST(side["sent"] == 2);
    BOOST_TEST(side["logged"] == 1);
    auto r2 = run(app.invoke(sg::resume(true), thread("t")));
    BOOST_TEST(!r2.interrupted());
    BOOST_TEST(side["sent"] == 2); // the node ran again; the emails were not sent again
    BOOST_TEST(side["logged"] == 1);
    BOOST_TEST(r2.values.log == (std::vector<std::string>{"msg-1 to anna", "second-2", "approved"}));
    BOOST_TEST(side["charged"] == 1); // the retry got the first attempt's receipt
    BOOST_TEST(r2.values.n == 42);

    // A later run of the node is a new task: its effects run again.
    run(app.invoke(upd{}.set<&st::value>("bob"), thread("t")));
    BOOST_TEST(side["sent"] == 4);
}

// Issue 12, feature 6: request_drain() (a SIGTERM handler's call) stops a run at its next
// superstep boundary with the step saved: here the drain is asked for while b runs (b and its
// parallel sibling finish, their step is saved), the call returns drained with c next, and
// invoking the thread again (as a restarted process would) continues it.
BOOST_DATA_TEST_CASE(drain_stops_at_the_next_step_boundary, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c")).add_node("d", logger(side, "d"));
    g.add_node("b", [&side](const st&) {
        side.bump("b");
        sg::request_drain(); // as SIGTERM would, while the step runs
        return upd{}.set<&st::log>({"b"});
    });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("a", "d").add_edge("b", "c").add_edge("d", "c");
    g.add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    struct cancel_on_exit {
        ~cancel_on_exit() { sg::cancel_drain(); }
    } cancel;
    auto r = run(app.invoke(upd{}, thread("t")));
    sg::cancel_drain();
    BOOST_TEST(r.drained());
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.next == (std::vector<std::string>{"c"}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "d"}));
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.next == (std::vector<std::string>{"c"})); // saved
    BOOST_TEST(side["c"] == 0);
    auto done = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!done.drained());
    BOOST_TEST(done.values.log == (std::vector<std::string>{"a", "b", "d", "c"}));
    BOOST_TEST(side["b"] == 1);
    BOOST_TEST(side["d"] == 1);

    // A call made while a drain is requested runs its first step, then stops.
    sg::request_drain();
    auto first = run(app.invoke(upd{}, thread("u")));
    sg::cancel_drain();
    BOOST_TEST(first.drained());
    BOOST_TEST(first.values.log == (std::vector<std::string>{"a"}));
    auto second = run(app.invoke(sg::continue_run, thread("u"))); // b asks for a drain again
    sg::cancel_drain();
    BOOST_TEST(second.drained());
    BOOST_TEST(second.values.log.size() == 3u);
    BOOST_TEST(run(app.invoke(sg::continue_run, thread("u"))).values.log.size() == 4u);
}

// A node may call interrupt several times; each resume re-runs it from its start and every
// earlier call gets its answer by position; answers are converted to the requested types.
BOOST_DATA_TEST_CASE(several_interrupts_in_one_node, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("form", [&side](const st&, sg::context& ctx) -> awaitable_update {
        side.bump("form.start");
        auto a1 = ctx.interrupt<std::string>(std::string("name?"));
        std::string name = co_await std::move(a1);
        side.bump("form.name");
        auto a2 = ctx.interrupt<int>(std::string("age?"));
        int age = co_await std::move(a2);
        auto a3 = ctx.interrupt<bool>(std::string("sure?"));
        bool sure = co_await std::move(a3);
        co_return upd{}.set<&st::value>(name + ":" + std::to_string(age) + ":" + (sure ? "yes" : "no"));
    });
    g.add_edge(sg::START, "form").add_edge("form", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}, thread("t")));
    BOOST_REQUIRE(r1.interrupted());
    BOOST_REQUIRE_EQUAL(r1.interrupts.size(), 1u);
    BOOST_TEST(r1.interrupts[0].value == json::value("name?"));
    BOOST_TEST(r1.interrupts[0].node == "form");
    BOOST_TEST(r1.next == (std::vector<std::string>{"form"}));
    auto s1 = run(app.get_state("t"));
    BOOST_REQUIRE_EQUAL(s1.tasks.size(), 1u);
    BOOST_REQUIRE_EQUAL(s1.tasks[0].interrupts.size(), 1u);
    BOOST_TEST(s1.tasks[0].interrupts[0].id == r1.interrupts[0].id);

    // The pending writes stored: the first interrupt's, and no list of answers (none received yet).
    auto answers_stored = [&]() -> std::optional<json::value> {
        auto head = run(env.saver->get("t", "", std::nullopt));
        BOOST_REQUIRE(head.has_value());
        std::optional<json::value> answers;
        int interrupts = 0;
        for (const auto& w : head->writes) {
            if (w.task_name != "form") continue;
            if (w.channel == "__interrupt__") ++interrupts;
            if (w.channel == "__resume__") answers = w.value;
        }
        BOOST_TEST(interrupts == 1);
        return answers;
    };
    BOOST_TEST(!answers_stored().has_value());

    auto r2 = run(app.invoke(sg::resume(std::string("ann")), thread("t")));
    BOOST_REQUIRE(r2.interrupted());
    BOOST_TEST(r2.interrupts[0].value == json::value("age?"));
    // The second interrupt stores the answer the node already received, for the next resume
    // (by any process) to hand it back in place.
    const auto answered = answers_stored();
    BOOST_TEST((answered == std::optional<json::value>(json::array{"ann"})));
    BOOST_TEST(r2.interrupts[0].id != r1.interrupts[0].id);
    auto r3 = run(app.invoke(sg::resume(41), thread("t")));
    BOOST_REQUIRE(r3.interrupted());
    BOOST_TEST(r3.interrupts[0].value == json::value("sure?"));
    BOOST_TEST(r3.interrupts[0].id != r2.interrupts[0].id);
    // The answer may also name the interrupt by id.
    std::map<std::string, json::value> by_id;
    by_id[r3.interrupts[0].id] = true;
    auto r4 = run(app.invoke(sg::resume_map(by_id), thread("t")));
    BOOST_TEST(!r4.interrupted());
    BOOST_TEST(r4.values.value == "ann:41:yes");
    BOOST_TEST(side["form.start"] == 4);
    BOOST_TEST(side["form.name"] == 3);
    // Nothing is pending any more.
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("t"))); }) == sg::errc::nothing_to_resume);
}

// Bad input on an interrupted thread: typed errors naming what is wrong; the thread keeps its
// state, its pending interrupt and its finished sibling's writes; a good resume then works.
BOOST_DATA_TEST_CASE(bad_resumes_are_typed_errors_and_lose_nothing, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("p", asker<int>(side, "p", "how many?"));
    g.add_node("r", letter(side, "r"));
    g.add_edge(sg::START, "p").add_edge(sg::START, "r").add_edge("p", sg::END).add_edge("r", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}.set<&st::value>("v"), thread("t")));
    BOOST_REQUIRE(r1.interrupted());
    BOOST_REQUIRE_EQUAL(r1.interrupts.size(), 1u);
    BOOST_TEST(r1.values.log == (std::vector<std::string>{"r"})); // the finished sibling's write
    const std::string id = r1.interrupts[0].id;
    const auto before = snap_json(run(app.get_state("t")));
    const auto history = run(app.get_state_history("t")).size();
    auto unchanged = [&](const char* what) {
        BOOST_TEST(snap_json(run(app.get_state("t"))) == before, what);
        BOOST_TEST(run(app.get_state_history("t")).size() == history, what);
        BOOST_TEST(side["r"] == 1, what);
    };

    std::string msg;
    std::vector<std::string> names;
    // A value that does not convert to the type the node asked for names the node and the type.
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(std::string("lots")), thread("t"))); }, &msg, &names) ==
               sg::errc::resume_type_mismatch);
    BOOST_TEST(msg.find("'p'") != std::string::npos, msg);
    BOOST_TEST(msg.find("int") != std::string::npos, msg);
    BOOST_TEST(msg.find("lots") != std::string::npos, msg);
    BOOST_TEST((!names.empty() && names[0] == "p"));
    unchanged("after a mismatched resume");

    // An interrupt id that is not pending.
    std::map<std::string, json::value> wrong;
    wrong["0123456789abcdef"] = 3;
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume_map(wrong), thread("t"))); }, &msg, &names) ==
               sg::errc::unknown_interrupt_id);
    BOOST_TEST(msg.find("0123456789abcdef") != std::string::npos, msg);
    BOOST_TEST(msg.find(id) != std::string::npos, msg); // lists what is pending
    unchanged("after an unknown interrupt id");

    // A checkpoint id that does not exist, for every call taking one.
    auto cfg = thread("t");
    cfg.checkpoint_id = "ffffffffffffffffffff";
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(3), cfg)); }) == sg::errc::checkpoint_not_found);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::continue_run, cfg)); }) == sg::errc::checkpoint_not_found);
    BOOST_TEST(error_of([&] { run(app.get_state("t", std::string("ffffffffffffffffffff"))); }) ==
               sg::errc::checkpoint_not_found);
    BOOST_TEST(error_of([&] {
                   run(app.update_state("t", upd{}.set<&st::n>(1), std::nullopt, std::string("ffffffffffffffffffff")));
               }) == sg::errc::checkpoint_not_found);
    unchanged("after unknown checkpoint ids");

    auto done = run(app.invoke(sg::resume(3), thread("t")));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.log == (std::vector<std::string>{"p=3", "r"}));
    BOOST_TEST(side["r"] == 1);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(3), thread("t"))); }) == sg::errc::nothing_to_resume);

    // The last step was written by two nodes: update_state must be told which one it speaks for.
    BOOST_TEST(error_of([&] { run(app.update_state("t", upd{}.set<&st::n>(1))); }, &msg, &names) ==
               sg::errc::invalid_input);
    BOOST_TEST(msg.find("as_node") != std::string::npos, msg);
    BOOST_TEST(names == (std::vector<std::string>{"p", "r"}));
    run(app.update_state("t", upd{}.set<&st::n>(1), std::string("r")));
    BOOST_TEST(run(app.get_state("t")).values.n == 1);
}

// Unknown thread ids and missing thread ids.
BOOST_DATA_TEST_CASE(unknown_threads, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", letter(side, "a"));
    g.add_edge(sg::START, "a").add_edge("a", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    std::string msg;
    BOOST_TEST(error_of([&] { run(app.invoke(sg::continue_run, thread("ghost"))); }, &msg) == sg::errc::thread_not_found);
    BOOST_TEST(msg.find("ghost") != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("ghost"))); }) == sg::errc::thread_not_found);
    BOOST_TEST(error_of([&] { run(app.get_state("ghost")); }) == sg::errc::thread_not_found);
    BOOST_TEST(run(app.get_state_history("ghost")).empty());
    // update_state on a thread with no checkpoint makes its first one (step 0, as if from START
    // without as_node), as LangGraph's updateState does.
    BOOST_TEST(!run(app.update_state("ghost", upd{}.set<&st::n>(1))).empty());
    auto first = run(app.get_state("ghost"));
    BOOST_TEST(first.step == 0);
    BOOST_TEST(first.source == "update");
    BOOST_TEST((first.next == std::vector<std::string>{"a"}));
    BOOST_TEST(run(app.get_state_history("ghost")).size() == 1u);
    BOOST_TEST(error_of([&] { run(app.invoke(upd{}, sg::run_config{})); }) == sg::errc::invalid_input);
    BOOST_TEST(side["a"] == 0);
    // A graph without a checkpointer has no threads.
    auto plain = g.compile();
    BOOST_TEST(error_of([&] { run(plain.get_state("t")); }) == sg::errc::no_checkpointer);
}

// Static breakpoints: interrupt_after (compile option) and interrupt_before (builder);
// continuing with no input goes on; a resume at a breakpoint has nothing to answer.
BOOST_DATA_TEST_CASE(static_breakpoints, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    for (std::string n : {"a", "b", "c"}) g.add_node(n, letter(side, n));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    g.interrupt_before({"c"});
    auto app = g.compile({.checkpointer = env.saver, .interrupt_after = {"a"}});

    auto r1 = run(app.invoke(upd{}, thread("t")));
    BOOST_TEST(r1.interrupted());
    BOOST_TEST(r1.interrupts.empty());
    BOOST_TEST(r1.next == (std::vector<std::string>{"b"}));
    BOOST_TEST(r1.values.value == "a");
    auto s1 = run(app.get_state("t"));
    BOOST_TEST(s1.next == (std::vector<std::string>{"b"}));
    BOOST_REQUIRE_EQUAL(s1.tasks.size(), 1u);
    BOOST_TEST(s1.tasks[0].interrupts.empty());
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("t"))); }) == sg::errc::nothing_to_resume);

    auto r2 = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(r2.interrupted());
    BOOST_TEST(r2.next == (std::vector<std::string>{"c"}));
    BOOST_TEST(r2.values.value == "ab");
    BOOST_TEST(side["c"] == 0);

    auto r3 = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r3.interrupted());
    BOOST_TEST(r3.values.value == "abc");
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["b"] == 1);
    BOOST_TEST(side["c"] == 1);
}

// get_state and get_state_history: values, next, tasks with their interrupts, steps, sources,
// parents; history newest first with its filters and limit.
BOOST_DATA_TEST_CASE(state_and_history, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("a", letter(side, "a"));
    g.add_node("b", asker<std::string>(side, "b", "ok?"));
    g.add_node("c", letter(side, "c"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r = run(app.invoke(upd{}.set<&st::value>("x"), thread("t")));
    BOOST_REQUIRE(r.interrupted());
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.value == "xa");
    BOOST_TEST(s.next == (std::vector<std::string>{"b"}));
    BOOST_TEST(s.step == 1);
    BOOST_TEST(s.source == "loop");
    BOOST_TEST(s.checkpoint_id == r.checkpoint_id);
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 1u);
    BOOST_TEST(s.tasks[0].name == "b");
    BOOST_REQUIRE_EQUAL(s.tasks[0].interrupts.size(), 1u);
    BOOST_TEST(s.tasks[0].interrupts[0].id == r.interrupts[0].id);
    BOOST_TEST(s.tasks[0].interrupts[0].node == "b");
    BOOST_TEST(s.tasks[0].interrupts[0].value == json::value("ok?"));

    run(app.invoke(sg::resume(std::string("y")), thread("t")));
    auto h = run(app.get_state_history("t"));
    // input (-1), START applied (0), a (1), b (2), c (3): newest first.
    BOOST_REQUIRE_EQUAL(h.size(), 5u);
    std::vector<std::int64_t> steps;
    for (const auto& x : h) steps.push_back(x.step);
    BOOST_TEST(steps == (std::vector<std::int64_t>{3, 2, 1, 0, -1}));
    BOOST_TEST(h.back().source == "input");
    BOOST_TEST(h.back().parent_checkpoint_id.empty());
    for (std::size_t i = 0; i + 1 < h.size(); ++i) {
        BOOST_TEST(h[i].checkpoint_id > h[i + 1].checkpoint_id);
        BOOST_TEST(h[i].parent_checkpoint_id == h[i + 1].checkpoint_id);
    }
    BOOST_TEST(h[0].values.log == (std::vector<std::string>{"a", "b=\"y\"", "c"}));
    BOOST_TEST(h[2].values.log == (std::vector<std::string>{"a"}));
    BOOST_TEST(h[2].next == (std::vector<std::string>{"b"}));
    BOOST_TEST(h[0].next.empty());

    cp::list_options o;
    o.limit = 2;
    auto limited = run(app.get_state_history("t", o));
    BOOST_REQUIRE_EQUAL(limited.size(), 2u);
    BOOST_TEST(limited[0].checkpoint_id == h[0].checkpoint_id);
    BOOST_TEST(limited[1].checkpoint_id == h[1].checkpoint_id);
    cp::list_options by_source;
    by_source.source = "input";
    auto inputs = run(app.get_state_history("t", by_source));
    BOOST_REQUIRE_EQUAL(inputs.size(), 1u);
    BOOST_TEST(inputs[0].step == -1);
    cp::list_options by_step;
    by_step.step = 1;
    auto one = run(app.get_state_history("t", by_step));
    BOOST_REQUIRE_EQUAL(one.size(), 1u);
    BOOST_TEST(one[0].checkpoint_id == h[2].checkpoint_id);
    cp::list_options before;
    before.before = h[2].checkpoint_id;
    before.limit = 10;
    auto older = run(app.get_state_history("t", before));
    BOOST_REQUIRE_EQUAL(older.size(), 2u);
    BOOST_TEST(older[0].step == 0);
    BOOST_TEST(older[1].step == -1);
    // An earlier checkpoint by id.
    auto at1 = run(app.get_state("t", h[2].checkpoint_id));
    BOOST_TEST(at1.values.value == "xa");
    BOOST_TEST(at1.next == (std::vector<std::string>{"b"}));
}

// update_state: as the last writer (next unchanged), as another node (its successors next),
// unknown as_node; on an earlier checkpoint it forks the thread.
BOOST_DATA_TEST_CASE(update_state_and_time_travel, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    for (std::string n : {"a", "b", "c"}) g.add_node(n, letter(side, n));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto done = run(app.invoke(upd{}.set<&st::value>("x"), thread("t")));
    BOOST_TEST(done.values.value == "xabc");
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 5u);
    const std::string final_id = h[0].checkpoint_id, after_a = h[2].checkpoint_id;
    BOOST_REQUIRE_EQUAL(h[2].step, 1);

    // Replay from the checkpoint after a: b and c run again, a does not.
    auto cfg = thread("t");
    cfg.checkpoint_id = after_a;
    auto replay = run(app.invoke(sg::continue_run, cfg));
    BOOST_TEST(replay.values.value == "xabc");
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["b"] == 2);
    BOOST_TEST(side["c"] == 2);
    // The replay forked the thread (issue 12, fix 1): a copy of the checkpoint after a, one step
    // later and its child, then b and c from the copy.
    auto h2 = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h2.size(), 8u);
    BOOST_TEST(h2[2].source == "fork");
    BOOST_TEST(h2[2].parent_checkpoint_id == after_a);
    BOOST_TEST(h2[2].step == 2);
    BOOST_TEST(h2[2].values.value == "xa");
    BOOST_TEST(h2[1].parent_checkpoint_id == h2[2].checkpoint_id); // the replayed b hangs off the fork
    BOOST_TEST(h2[1].step == 3);
    // Continuing from the newest checkpoint forks nothing.
    cfg.checkpoint_id = h2[0].checkpoint_id;
    run(app.invoke(sg::continue_run, cfg));
    BOOST_TEST(run(app.get_state_history("t")).size() == 8u);

    // Fork: write into the checkpoint after a as if a had returned it; continue from there.
    auto fork_id = run(app.update_state("t", upd{}.set<&st::value>("fork"), std::string("a"), after_a));
    auto f = run(app.get_state("t", fork_id));
    BOOST_TEST(f.source == "update");
    BOOST_TEST(f.parent_checkpoint_id == after_a);
    BOOST_TEST(f.step == 2);
    BOOST_TEST(f.values.value == "fork");
    BOOST_TEST(f.values.log == (std::vector<std::string>{"a"}));
    BOOST_TEST(f.next == (std::vector<std::string>{"b"}));
    auto forked = run(app.invoke(sg::continue_run, thread("t"))); // the fork is the newest checkpoint
    BOOST_TEST(forked.values.value == "forkbc");
    // The original branch is still there.
    BOOST_TEST(run(app.get_state("t", final_id)).values.value == "xabc");

    // As node c: nothing runs next; as the last writer (c) by default.
    auto as_c = run(app.update_state("t", upd{}.set<&st::n>(7).set<&st::log>({"manual"}), std::string("c")));
    auto sc = run(app.get_state("t"));
    BOOST_TEST(sc.checkpoint_id == as_c);
    BOOST_TEST(sc.next.empty());
    BOOST_TEST(sc.values.n == 7);
    BOOST_TEST(sc.values.log.back() == "manual"); // through the reducer
    run(app.update_state("t", upd{}.set<&st::n>(8)));
    BOOST_TEST(run(app.get_state("t")).values.n == 8);
    // As node a: b and c run next.
    run(app.update_state("t", upd{}.set<&st::value>("y"), std::string("a")));
    BOOST_TEST(run(app.get_state("t")).next == (std::vector<std::string>{"b"}));
    BOOST_TEST(run(app.invoke(sg::continue_run, thread("t"))).values.value == "ybc");

    std::string msg;
    BOOST_TEST(error_of([&] { run(app.update_state("t", upd{}, std::string("bb"))); }, &msg) == sg::errc::unknown_node);
    BOOST_TEST(msg.find("did you mean 'b'") != std::string::npos, msg);
}

// Drift: a thread written by another graph shape is refused with a typed error listing what
// changed, unless run_config::allow_drift; the thread is left as it was.
BOOST_DATA_TEST_CASE(drift_detection, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> v1;
    v1.add_node("a", letter(side, "a"));
    v1.add_node("b", asker<int>(side, "b", "n?"));
    v1.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    auto app1 = v1.compile({.checkpointer = env.saver});
    auto r = run(app1.invoke(upd{}, thread("t")));
    BOOST_REQUIRE(r.interrupted());
    const auto before = snap_json(run(app1.get_state("t")));

    sg::state_graph<st> v2;
    v2.add_node("a", letter(side, "a"));
    v2.add_node("b", asker<int>(side, "b", "n?"));
    v2.add_node("c", letter(side, "c"));
    v2.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto app2 = v2.compile({.checkpointer = env.saver});
    BOOST_TEST(app1.signature() != app2.signature());

    std::string msg;
    std::vector<std::string> names;
    BOOST_TEST(error_of([&] { run(app2.invoke(sg::resume(1), thread("t"))); }, &msg, &names) == sg::errc::graph_drift);
    BOOST_TEST(msg.find("allow_drift") != std::string::npos, msg);
    BOOST_TEST(msg.find("+ ") != std::string::npos, msg); // lines of the new shape
    BOOST_TEST(msg.find("c") != std::string::npos, msg);
    BOOST_TEST((!names.empty() && names[0] == "t"));
    BOOST_TEST(error_of([&] { run(app2.invoke(sg::continue_run, thread("t"))); }) == sg::errc::graph_drift);
    // update_state through the new shape is refused as well (it would stamp the new signature).
    BOOST_TEST(error_of([&] { run(app2.update_state("t", upd{}.set<&st::n>(1), std::string("a"))); }) ==
               sg::errc::graph_drift);
    BOOST_TEST(snap_json(run(app1.get_state("t"))) == before);
    BOOST_TEST(side["b.start"] == 1);

    // A different state type is drift too, and the message names the new field.
    sg::state_graph<th::st2> v3;
    v3.add_node("a", [](const th::st2&) { return sg::update<th::st2>{}; });
    v3.add_node("b", [](const th::st2&) { return sg::update<th::st2>{}; });
    v3.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    auto app3 = v3.compile({.checkpointer = env.saver});
    BOOST_TEST(error_of([&] { run(app3.invoke(sg::resume(1), thread("t"))); }, &msg) == sg::errc::graph_drift);
    BOOST_TEST(msg.find("extra") != std::string::npos, msg);

    // Forced: the new shape resumes the thread and runs its new node.
    auto cfg = thread("t");
    cfg.allow_drift = true;
    auto done = run(app2.invoke(sg::resume(5), cfg));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.log == (std::vector<std::string>{"a", "b=5", "c"}));
    // From then on the thread carries the new signature: no drift for v2 any more.
    auto again = run(app2.invoke(upd{}, thread("t")));
    BOOST_TEST(again.interrupted());
}

// Interrupts inside a subgraph surface at the parent and resume from the parent's thread:
// twice in one subgraph node, answered by value and by id; subgraph nodes that finished and the
// parent's finished sibling do not run again.
BOOST_DATA_TEST_CASE(subgraph_interrupts_resume_from_the_parent, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> sub("sub");
    sub.add_node("s1", logger(side, "s1"));
    sub.add_node("s2", [&side](const st&, sg::context& ctx) -> awaitable_update {
        side.bump("s2.start");
        auto a1 = ctx.interrupt<std::string>(std::string("first?"));
        std::string x = co_await std::move(a1);
        auto a2 = ctx.interrupt<std::string>(std::string("second?"));
        std::string y = co_await std::move(a2);
        co_return upd{}.set<&st::log>({"s2:" + x + y});
    });
    sub.add_edge(sg::START, "s1").add_edge("s1", "s2").add_edge("s2", sg::END);

    sg::state_graph<st> g("parent");
    g.add_node("pre", logger(side, "pre"));
    g.add_node("sub", sub.compile());
    g.add_node("side", logger(side, "side"));
    g.add_node("post", logger(side, "post"));
    g.add_edge(sg::START, "pre").add_edge("pre", "sub").add_edge("pre", "side");
    g.add_edge("sub", "post").add_edge("side", "post").add_edge("post", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}, thread("t")));
    BOOST_REQUIRE(r1.interrupted());
    BOOST_REQUIRE_EQUAL(r1.interrupts.size(), 1u);
    BOOST_TEST(r1.interrupts[0].value == json::value("first?"));
    BOOST_TEST(r1.interrupts[0].node == "s2");
    BOOST_TEST(r1.values.log == (std::vector<std::string>{"pre", "side"}));
    auto s1 = run(app.get_state("t"));
    BOOST_TEST(s1.next == (std::vector<std::string>{"sub"}));
    BOOST_REQUIRE_EQUAL(s1.tasks.size(), 2u);
    BOOST_TEST(s1.tasks[0].name == "sub"); // declaration order, as LangGraph
    BOOST_REQUIRE_EQUAL(s1.tasks[0].interrupts.size(), 1u);
    BOOST_TEST(s1.tasks[0].interrupts[0].id == r1.interrupts[0].id);
    BOOST_TEST(s1.tasks[1].name == "side");
    BOOST_TEST(s1.tasks[1].result.has_value()); // side finished

    std::map<std::string, json::value> wrong;
    wrong["nope"] = "x";
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume_map(wrong), thread("t"))); }) == sg::errc::unknown_interrupt_id);

    auto r2 = run(app.invoke(sg::resume(std::string("A")), thread("t")));
    BOOST_REQUIRE(r2.interrupted());
    BOOST_REQUIRE_EQUAL(r2.interrupts.size(), 1u);
    BOOST_TEST(r2.interrupts[0].value == json::value("second?"));
    BOOST_TEST(r2.interrupts[0].id != r1.interrupts[0].id);

    std::map<std::string, json::value> answer;
    answer[r2.interrupts[0].id] = "B";
    auto r3 = run(app.invoke(sg::resume_map(answer), thread("t")));
    BOOST_TEST(!r3.interrupted());
    // Writes of one step are applied in node name order: side, then sub's (s1, s2).
    BOOST_TEST(r3.values.log == (std::vector<std::string>{"pre", "side", "s1", "s2:AB", "post"}));
    BOOST_TEST(side["pre"] == 1);
    BOOST_TEST(side["side"] == 1);
    BOOST_TEST(side["s1"] == 1);
    BOOST_TEST(side["s2.start"] == 3);
    BOOST_TEST(side["post"] == 1);
}

// A static breakpoint inside a subgraph stops the parent too (an interrupt without payload);
// continuing the parent goes on inside the subgraph from its own checkpoint.
BOOST_DATA_TEST_CASE(subgraph_breakpoint_surfaces_at_the_parent, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> sub("sub");
    sub.add_node("s1", logger(side, "s1"));
    sub.add_node("s2", logger(side, "s2"));
    sub.add_edge(sg::START, "s1").add_edge("s1", "s2").add_edge("s2", sg::END);
    sg::state_graph<st> g("parent");
    g.add_node("sub", sub.compile({.interrupt_before = {"s2"}}));
    g.add_node("post", logger(side, "post"));
    g.add_edge(sg::START, "sub").add_edge("sub", "post").add_edge("post", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}, thread("t")));
    BOOST_TEST(r1.interrupted());
    BOOST_TEST(r1.interrupts.empty());
    BOOST_TEST(r1.next == (std::vector<std::string>{"sub"}));
    BOOST_TEST(r1.values.log.empty());
    BOOST_TEST(side["post"] == 0);
    auto r2 = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r2.interrupted());
    BOOST_TEST(r2.values.log == (std::vector<std::string>{"s1", "s2", "post"}));
    BOOST_TEST(side["s1"] == 1);
    BOOST_TEST(side["s2"] == 1);
}

// A run that dies inside a subgraph: continuing the parent thread continues the subgraph from
// its own last checkpoint; subgraph nodes that finished do not run again.
BOOST_DATA_TEST_CASE(abandoned_subgraph_step_continues_inside_the_subgraph, savers(), kind) {
    saver_env env(kind);
    counters side;
    bool block = true;
    sg::state_graph<st> sub("sub");
    sub.add_node("s1", logger(side, "s1"));
    sub.add_node("s2", [&side, &block](const st&) -> awaitable_update {
        side.bump("s2");
        if (block) {
            boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, std::chrono::hours(1));
            co_await t.async_wait(boost::asio::use_awaitable);
        }
        co_return upd{}.set<&st::log>({"s2"});
    });
    sub.add_edge(sg::START, "s1").add_edge("s1", "s2").add_edge("s2", sg::END);
    sg::state_graph<st> g("parent");
    g.add_node("sub", sub.compile());
    g.add_node("post", logger(side, "post"));
    g.add_edge(sg::START, "sub").add_edge("sub", "post").add_edge("post", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    {
        boost::asio::io_context io;
        boost::asio::co_spawn(io, app.invoke(upd{}, thread("t")), boost::asio::detached);
        for (int i = 0; i < 400 && side["s2"] == 0; ++i) io.run_for(5ms);
        BOOST_REQUIRE(side["s2"] == 1);
    } // dies inside the subgraph, s1 done
    block = false;
    auto r = run(app.invoke(sg::continue_run, thread("t")));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(r.values.log == (std::vector<std::string>{"s1", "s2", "post"}));
    BOOST_TEST(side["s1"] == 1);
    BOOST_TEST(side["s2"] == 2);

    // Replaying the parent from before the subgraph runs the subgraph again, from its start,
    // and its output is only what this run wrote (not the earlier run's writes as well).
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 4u);
    BOOST_REQUIRE_EQUAL(h[2].step, 0);
    auto cfg = thread("t");
    cfg.checkpoint_id = h[2].checkpoint_id;
    auto replay = run(app.invoke(sg::continue_run, cfg));
    BOOST_TEST(replay.values.log == (std::vector<std::string>{"s1", "s2", "post"}));
    BOOST_TEST(side["s1"] == 2);
    BOOST_TEST(side["s2"] == 3);
}

// Interrupts in Send tasks (map-reduce): each task has its own interrupt id; a plain value
// answers them all, a map answers some; finished Send tasks do not run again.
BOOST_DATA_TEST_CASE(interrupts_in_send_tasks, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("fan", [](const st&) { return upd{}; });
    g.add_node("worker", [&side](const std::string& item, sg::context& ctx) -> awaitable_update {
        side.bump("worker." + item);
        if (item == "easy") co_return upd{}.set<&st::log>({"easy"});
        auto pending = ctx.interrupt<std::string>("check " + item);
        std::string verdict = co_await std::move(pending);
        co_return upd{}.set<&st::log>({item + ":" + verdict});
    });
    g.add_edge(sg::START, "fan");
    g.add_conditional_edges(
        "fan",
        [](const st&) {
            return std::vector<sg::send>{sg::send("worker", std::string("x")), sg::send("worker", std::string("easy")),
                                         sg::send("worker", std::string("y")), sg::send("worker", std::string("z"))};
        },
        std::vector<std::string>{"worker"});
    g.add_edge("worker", sg::END);
    auto app = g.compile({.checkpointer = env.saver});

    auto r1 = run(app.invoke(upd{}, thread("t")));
    BOOST_REQUIRE(r1.interrupted());
    BOOST_REQUIRE_EQUAL(r1.interrupts.size(), 3u);
    std::set<std::string> ids;
    for (const auto& i : r1.interrupts) ids.insert(i.id);
    BOOST_TEST(ids.size() == 3u);
    BOOST_TEST(r1.interrupts[0].value == json::value("check x"));
    BOOST_TEST(r1.interrupts[2].value == json::value("check z"));
    BOOST_TEST(r1.values.log == (std::vector<std::string>{"easy"}));

    // Answer x only: y and z ask again with the same ids.
    std::map<std::string, json::value> some;
    some[r1.interrupts[0].id] = "ok";
    auto r2 = run(app.invoke(sg::resume_map(some), thread("t")));
    BOOST_REQUIRE(r2.interrupted());
    BOOST_REQUIRE_EQUAL(r2.interrupts.size(), 2u);
    BOOST_TEST(r2.interrupts[0].id == r1.interrupts[1].id);
    BOOST_TEST(r2.interrupts[1].id == r1.interrupts[2].id);
    BOOST_TEST(r2.values.log == (std::vector<std::string>{"x:ok", "easy"}));

    auto r3 = run(app.invoke(sg::resume(std::string("fine")), thread("t")));
    BOOST_TEST(!r3.interrupted());
    BOOST_TEST(r3.values.log == (std::vector<std::string>{"x:ok", "easy", "y:fine", "z:fine"})); // Send order
    BOOST_TEST(side["worker.easy"] == 1);
    BOOST_TEST(side["worker.x"] == 2);
    BOOST_TEST(side["worker.y"] == 3);
    BOOST_TEST(side["worker.z"] == 3);
}

/// START -> p (asks for an int) and r (writes its name), both -> END: one step that ends with
/// an interrupt beside a finished sibling.
static sg::state_graph<st> asker_and_letter(counters& side) {
    sg::state_graph<st> g;
    g.add_node("p", asker<int>(side, "p", "n?"));
    g.add_node("r", letter(side, "r"));
    g.add_edge(sg::START, "p").add_edge(sg::START, "r").add_edge("p", sg::END).add_edge("r", sg::END);
    return g;
}

// Corrupt stored data (written through the saver interface): typed errors, never a crash, and
// nothing is overwritten; the last good checkpoint stays readable by id.
BOOST_DATA_TEST_CASE(corrupt_checkpoints_are_reported, savers(), kind) {
    saver_env env(kind);
    counters side;
    auto app = asker_and_letter(side).compile({.checkpointer = env.saver});

    // Thread "values": a checkpoint whose value of `n` is not a number.
    run(app.invoke(upd{}, thread("values")));
    auto head = *run(env.saver->get("values", "", std::nullopt));
    const std::string good = head.cp.id;
    cp::checkpoint bad = head.cp;
    bad.id = cp::new_checkpoint_id();
    bad.parent_id = good;
    bad.values = json::object{{"n", "not a number"}};
    bad.versions["n"] = bad.id;
    run(env.saver->put("values", "", bad));
    std::string msg;
    BOOST_TEST(error_of([&] { run(app.get_state("values")); }, &msg) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(msg.find("'n'") != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("values"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(error_of([&] { run(app.invoke(upd{}, thread("values"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(run(env.saver->get("values", "", std::nullopt))->cp.id == bad.id); // not overwritten
    BOOST_TEST(run(app.get_state("values", good)).tasks.size() == 2u);           // last good one

    // Thread "writes": a pending write of the finished sibling holding the wrong type.
    run(app.invoke(upd{}, thread("writes")));
    auto h2 = *run(env.saver->get("writes", "", std::nullopt));
    std::string r_task;
    for (const auto& w : h2.writes)
        if (w.task_name == "r") r_task = w.task_id;
    BOOST_REQUIRE(!r_task.empty());
    run(env.saver->put_writes("writes", "", h2.cp.id, {cp::pending_write{r_task, "r", "log", 42}}));
    BOOST_TEST(error_of([&] { run(app.get_state("writes")); }, &msg) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(msg.find("'r'") != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("writes"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(side["r"] == 2); // once per thread: the corrupt write did not make r run again
}

// Issue 11, break 6: stored data that is well-formed but wrong is checked against the graph that
// wrote it. Before the fix, an unknown node in a stored frontier was dropped (the pending
// question disappeared and a resume did nothing), and malformed pending writes failed with bare
// messages ("array required", "not an object") naming nothing.
BOOST_DATA_TEST_CASE(stored_names_are_checked_against_the_graph, savers(), kind) {
    saver_env env(kind);
    counters side;
    auto app = asker_and_letter(side).compile({.checkpointer = env.saver});

    // A frontier naming a node this graph does not have (the graph that wrote it is this one).
    run(app.invoke(upd{}, thread("frontier")));
    auto head = *run(env.saver->get("frontier", "", std::nullopt));
    cp::checkpoint bad = head.cp;
    bad.id = cp::new_checkpoint_id();
    bad.parent_id = head.cp.id;
    bad.values = json::object{};
    bad.frontier.as_object()["pull"] = json::array{"p", "ghost"};
    run(env.saver->put("frontier", "", bad));
    std::string msg;
    BOOST_TEST(error_of([&] { run(app.get_state("frontier")); }, &msg) == sg::errc::corrupt_checkpoint);
    for (const char* part : {"'frontier'", "'ghost'", "thread 'frontier'"})
        BOOST_TEST(msg.find(part) != std::string::npos, msg);
    BOOST_TEST(msg.find(bad.id) != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread("frontier"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(run(env.saver->get("frontier", "", std::nullopt))->cp.id == bad.id); // nothing written

    // Pending writes that do not fit what their channel stores, each on a thread of its own.
    struct bad_write {
        const char* thread;
        const char* task_name; // nullptr: the finished sibling r
        const char* channel;
        json::value value;
        const char* says;
    };
    const bad_write cases[] = {
        {"w_interrupt", nullptr, "__interrupt__", json::value("oops"), "not a list"},
        {"w_interrupt_item", nullptr, "__interrupt__", json::array{json::object{{"value", 1}}}, "an interrupt without"},
        {"w_goto", nullptr, "__goto__", json::array{"ghost"}, "'ghost'"},
        {"w_send", nullptr, "__send__", json::array{json::object{{"x", 1}}}, "a Send without"},
        {"w_error", nullptr, "__error__", json::value(12), "not a message"},
        {"w_field", nullptr, "nofield", json::value(1), "not a field"},
        {"w_node", "ghost", "log", json::array{"x"}, "node 'ghost'"},
    };
    for (const auto& c : cases) {
        BOOST_TEST_CONTEXT(c.thread) {
            run(app.invoke(upd{}, thread(c.thread)));
            auto h = *run(env.saver->get(c.thread, "", std::nullopt));
            std::string r_task;
            for (const auto& w : h.writes)
                if (w.task_name == "r") r_task = w.task_id;
            BOOST_REQUIRE(!r_task.empty());
            run(env.saver->put_writes(c.thread, "", h.cp.id,
                                      {cp::pending_write{r_task, c.task_name ? c.task_name : "r", c.channel, c.value}}));
            BOOST_TEST(error_of([&] { run(app.get_state(c.thread)); }, &msg) == sg::errc::corrupt_checkpoint);
            for (const std::string& part : {std::string("thread '") + c.thread + "'", h.cp.id, std::string("pending write"),
                                           std::string("'") + c.channel + "'", std::string(c.says)})
                BOOST_TEST(msg.find(part) != std::string::npos, part << " in: " << msg);
            BOOST_TEST(error_of([&] { run(app.invoke(sg::resume(1), thread(c.thread))); }) == sg::errc::corrupt_checkpoint);
        }
    }
}

namespace {
/// A coroutine node that waits `ms` on a timer (so that its siblings interleave with it) and
/// logs its name.
auto waiter(counters& side, std::string name, int ms) {
    return [&side, name, ms](const st&, sg::context& ctx) -> awaitable_update {
        side.bump(name);
        boost::asio::steady_timer t(ctx.executor(), std::chrono::milliseconds(ms));
        co_await t.async_wait(boost::asio::use_awaitable);
        co_return upd{}.set<&st::log>({name});
    };
}
// A free coroutine with by-value parameters (g++ 12: a capturing lambda would lose its captures).
boost::asio::awaitable<void> run_fan_out(sg::compiled_graph<st> app, std::string id, std::atomic<int>* ok) {
    auto cfg = thread(id);
    auto input = upd{};
    auto r = co_await app.invoke(input, cfg);
    auto log = r.values.log;
    if (log.size() != 5 || log.back() != "join") co_return;
    std::sort(log.begin(), log.end() - 1);
    if (log == std::vector<std::string>{"a", "b", "c", "d", "join"}) ++*ok;
}
} // namespace

// Parallel branches of many threads at once on a multi-threaded executor, one saver for all (for
// the ThreadSanitizer run, scripts/test --tsan): each step's tasks on a strand of the pool, the
// SQLite work on the saver's own thread, the leases renewed by its keeper thread meanwhile
// (lease_ttl 300 ms: every 100 ms), a time limit racing node d.
BOOST_DATA_TEST_CASE(parallel_branches_of_many_threads_on_a_thread_pool, savers(), kind) {
    saver_env env(kind);
    cp::sqlite_options o;
    o.lease_ttl = 300ms;
    auto saver = kind == saver_kind::sqlite ? env.open(o) : env.saver;
    counters side;
    sg::retry_policy limit;
    limit.timeout = std::chrono::seconds(5);
    sg::state_graph<st> g;
    g.add_node("a", waiter(side, "a", 3)).add_node("b", waiter(side, "b", 1)).add_node("c", logger(side, "c"));
    g.add_node("d", waiter(side, "d", 2), {.retry = limit}).add_node("join", logger(side, "join"));
    for (const char* n : {"a", "b", "c", "d"}) g.add_edge(sg::START, n).add_edge(n, "join");
    g.add_edge("join", sg::END);
    auto app = g.compile({.checkpointer = saver});

    constexpr int threads = 40;
    std::atomic<int> ok{0};
    {
        boost::asio::thread_pool pool(2);
        for (int t = 0; t < threads; ++t)
            boost::asio::co_spawn(pool, run_fan_out(app, "fan-" + std::to_string(t), &ok), boost::asio::detached);
        pool.join();
    }
    BOOST_TEST(ok.load() == threads);
    for (const char* n : {"a", "b", "c", "d", "join"}) BOOST_TEST(side[n] == threads, n);
    auto s = run(app.get_state("fan-7"));
    BOOST_TEST(s.next.empty());
    BOOST_TEST(s.values.log.size() == 5u);
}

BOOST_AUTO_TEST_SUITE_END()
