// Durability modes (issue 12, feature 1), per call as LangGraph's `durability`: which checkpoints
// a call leaves in each mode, that interrupts, breakpoints, failures and drains end at a thread
// that resumes or continues in every mode, that async puts a step's checkpoint while the next
// step's nodes run and returns only once it is stored, and that subgraphs follow their parent.
// What survives a SIGKILL in each mode is in test_processes.cpp.
#include "durable_common.hpp"

#include <stategraph/drain.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_future.hpp>

#include <future>
#include <mutex>

using namespace durable;
using namespace std::chrono_literals;

namespace dm {
struct st {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }

struct step_source {
    std::int64_t step;
    std::string source;
    bool operator==(const step_source&) const = default;
};
inline std::ostream& operator<<(std::ostream& os, const step_source& s) { return os << s.step << ":" << s.source; }
} // namespace dm

namespace {
using dm::st;
using dm::step_source;
using upd = sg::update<st>;
using strings = std::vector<std::string>;

sg::run_config in_mode(const std::string& thread_id, sg::durability mode) {
    sg::run_config c;
    c.thread_id = thread_id;
    c.durability = mode;
    return c;
}

auto logger(counters& side, std::string name) {
    return [&side, name](const st&) {
        side.bump(name);
        return upd{}.set<&st::log>({name});
    };
}

/// a -> b -> c
sg::state_graph<st> chain3(counters& side) {
    sg::state_graph<st> g("chain3");
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b")).add_node("c", logger(side, "c"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    return g;
}

template <class App>
std::vector<step_source> history_of(const App& app, const std::string& thread_id) {
    std::vector<step_source> out;
    for (const auto& s : run(app.get_state_history(thread_id))) out.push_back({s.step, s.source});
    return out;
}
} // namespace

BOOST_TEST_DONT_PRINT_LOG_VALUE(std::vector<step_source>)

BOOST_AUTO_TEST_SUITE(durability_modes)

// sync and async leave a checkpoint per step (input, START, a, b, c); exit leaves one, the last,
// with no parent on a new thread and the thread's previous head as parent on the next call.
BOOST_DATA_TEST_CASE(checkpoints_a_call_leaves, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    auto app = chain3(side).compile({.checkpointer = env.saver});
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(r.step == 3);
    auto h = history_of(app, "t");
    const std::vector<step_source> every_step{{3, "loop"}, {2, "loop"}, {1, "loop"}, {0, "loop"}, {-1, "input"}};
    if (mode == sg::durability::exit) BOOST_TEST((h == std::vector<step_source>{{3, "loop"}}));
    else BOOST_TEST((h == every_step));
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(s.next.empty());
    BOOST_TEST(s.checkpoint_id == r.checkpoint_id);
    const std::string first_head = s.checkpoint_id;
    if (mode == sg::durability::exit) BOOST_TEST(s.parent_checkpoint_id.empty());

    // a second call on the thread: its values build on the first's
    auto r2 = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_TEST(r2.values.log == (strings{"a", "b", "c", "a", "b", "c"}));
    auto h2 = history_of(app, "t");
    BOOST_TEST(h2.size() == (mode == sg::durability::exit ? 2u : 10u));
    BOOST_TEST(h2.front().step == 8);
    auto s2 = run(app.get_state("t"));
    BOOST_TEST(s2.values.log == (strings{"a", "b", "c", "a", "b", "c"}));
    if (mode == sg::durability::exit) BOOST_TEST(s2.parent_checkpoint_id == first_head);
    // every stored checkpoint reads back whole (exit stores the fields of the steps it skipped)
    for (const auto& snap : run(app.get_state_history("t")))
        BOOST_TEST(snap.values.log.size() ==
                       static_cast<std::size_t>(snap.step <= 3 ? std::max<std::int64_t>(0, snap.step)
                                                               : std::max<std::int64_t>(3, snap.step - 2)),
                   "step " << snap.step);
}

// An interrupt in every mode: the call stops with the interrupt stored (exit: the staged step's
// checkpoint is written first, then the interrupt against it), and a resume in the same mode
// finishes without running the finished nodes again, also a parallel sibling of the asker.
BOOST_DATA_TEST_CASE(interrupts_resume_in_every_mode, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g("ask");
    g.add_node("a", logger(side, "a")).add_node("sibling", logger(side, "sibling")).add_node("c", logger(side, "c"));
    g.add_node("ask", [&side](const st&, sg::context& ctx) -> boost::asio::awaitable<upd> {
        side.bump("ask");
        auto pending = ctx.interrupt<int>(json::value("how many?"));
        int n = co_await std::move(pending);
        co_return upd{}.set<&st::log>({"ask=" + std::to_string(n)});
    });
    g.add_edge(sg::START, "a").add_edge("a", "ask").add_edge("a", "sibling").add_edge("ask", "c").add_edge("sibling", "c");
    g.add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_REQUIRE(r.interrupted());
    BOOST_REQUIRE_EQUAL(r.interrupts.size(), 1u);
    BOOST_TEST(r.values.log == (strings{"a", "sibling"}));
    auto h = history_of(app, "t");
    if (mode == sg::durability::exit) BOOST_TEST((h == std::vector<step_source>{{1, "loop"}}));
    else BOOST_TEST(h.size() == 3u);
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.next == (strings{"ask"}));
    BOOST_TEST(s.values.log == (strings{"a", "sibling"})); // the sibling's write was stored
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 2u);
    for (const auto& t : s.tasks) BOOST_TEST(t.interrupts.size() == (t.name == "ask" ? 1u : 0u), t.name);

    auto done = run(app.invoke(sg::resume(7), in_mode("t", mode)));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.log == (strings{"a", "ask=7", "sibling", "c"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["sibling"] == 1);
    BOOST_TEST(side["ask"] == 2);
    BOOST_TEST(run(app.get_state("t")).values.log == (strings{"a", "ask=7", "sibling", "c"}));
    BOOST_TEST(history_of(app, "t").size() == (mode == sg::durability::exit ? 2u : 5u));
}

// A thread paused at an interrupt resumes, in the process that paused it, from the SQLite
// saver's memory (sqlite_saver::remembered): in every mode, through three pauses of one node
// (each resume ends paused again, its resume value stored as a pending write), the runs end as
// they would reading the file, and a second saver of the file reads the same thread.
BOOST_DATA_TEST_CASE(paused_threads_resume_from_the_sqlite_savers_memory, modes(), mode) {
    saver_env env(saver_kind::sqlite);
    auto& mine = dynamic_cast<cp::sqlite_saver&>(*env.saver);
    counters side;
    const auto build = [&side](std::shared_ptr<cp::saver> saver) {
        sg::state_graph<st> g("ask3");
        g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
        g.add_node("ask", [&side](const st&, sg::context& ctx) -> boost::asio::awaitable<upd> {
            side.bump("ask");
            strings answers;
            for (int k = 0; k < 3; ++k) {
                auto pending = ctx.interrupt<std::string>(json::value("question " + std::to_string(k)));
                answers.push_back(co_await std::move(pending));
            }
            co_return upd{}.set<&st::log>(answers);
        });
        g.add_edge(sg::START, "a").add_edge("a", "ask").add_edge("ask", "c").add_edge("c", sg::END);
        return g.compile({.checkpointer = std::move(saver)});
    };
    auto app = build(env.saver);
    auto reader = build(env.open()); // reads the file (another connection)
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_REQUIRE(r.interrupted());
    BOOST_TEST(mine.remembered().threads == 1u);
    for (int k = 0; k < 3; ++k) {
        r = run(app.invoke(sg::resume("x" + std::to_string(k)), in_mode("t", mode)));
        BOOST_TEST(r.interrupted() == (k < 2), "resume " << k);
        if (k < 2) {
            BOOST_REQUIRE_EQUAL(r.interrupts.size(), 1u);
            BOOST_TEST(r.interrupts.front().value == json::value("question " + std::to_string(k + 1)));
        }
        BOOST_TEST(mine.remembered().recalled == static_cast<std::uint64_t>(k + 1), "resume " << k);
        // The graph held the state it paused with (not with exit durability): the saver left the
        // values out, and the run went on from that state.
        BOOST_TEST(mine.omitted_values() == (mode == sg::durability::exit ? 0u : static_cast<std::uint64_t>(k + 1)),
                   "resume " << k);
        BOOST_TEST(mine.remembered().threads == (k < 2 ? 1u : 0u), "resume " << k);
        const auto here = run(app.get_state("t")), there = run(reader.get_state("t"));
        BOOST_TEST(here.values.log == there.values.log, "resume " << k);
        BOOST_TEST(here.next == there.next, "resume " << k);
    }
    BOOST_TEST(r.values.log == (strings{"a", "x0", "x1", "x2", "c"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["ask"] == 4);
    BOOST_TEST(side["c"] == 1);
    // Paused again, then resumed by the second saver: its writes make the first saver's memory
    // stale, and the first saver reads the file.
    r = run(app.invoke(upd{}, in_mode("u", mode)));
    BOOST_REQUIRE(r.interrupted());
    r = run(reader.invoke(sg::resume("y0"), in_mode("u", mode)));
    BOOST_REQUIRE(r.interrupted());
    const auto before = mine.remembered().recalled;
    r = run(app.invoke(sg::resume("y1"), in_mode("u", mode)));
    BOOST_TEST(mine.remembered().recalled == before); // read from the file
    BOOST_REQUIRE(r.interrupted());
    r = run(app.invoke(sg::resume("y2"), in_mode("u", mode)));
    BOOST_TEST(r.values.log == (strings{"a", "y0", "y1", "y2", "c"}));
}

// The state a call paused with is used by its resume only while the thread is as the call left
// it: after an update_state (a new checkpoint), or a resume by another compiled graph (which
// holds nothing) that paused again, the values are read and the resume sees what was written.
BOOST_DATA_TEST_CASE(a_resume_uses_the_paused_state_only_while_the_thread_is_as_left, modes(), mode) {
    saver_env env(saver_kind::sqlite);
    auto& mine = dynamic_cast<cp::sqlite_saver&>(*env.saver);
    counters side;
    sg::state_graph<st> g("ask_twice");
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
    g.add_node("ask", [](const st& s, sg::context& ctx) {
        auto first = ctx.interrupt_now<std::string>(json::value("first"));
        auto second = ctx.interrupt_now<std::string>(json::value("second of " + std::to_string(s.log.size())));
        return upd{}.set<&st::log>({first, second});
    });
    g.add_edge(sg::START, "a").add_edge("a", "ask").add_edge("ask", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    const std::uint64_t per_resume = mode == sg::durability::exit ? 0u : 1u;

    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_REQUIRE(r.interrupted());
    (void)run(app.update_state("t", upd{}.set<&st::log>({"edited"}))); // as a: ask is next, anew
    r = run(app.invoke(sg::continue_run, in_mode("t", mode)));
    BOOST_REQUIRE(r.interrupted());
    BOOST_TEST(mine.omitted_values() == 0u); // read: the update is newer than the pause
    r = run(app.invoke(sg::resume("x"), in_mode("t", mode)));
    BOOST_TEST(mine.omitted_values() == per_resume); // nothing written since its own pause
    BOOST_REQUIRE_EQUAL(r.interrupts.size(), 1u);
    BOOST_TEST(r.interrupts.front().value == json::value("second of 2")); // a, edited
    r = run(app.invoke(sg::resume("y"), in_mode("t", mode)));
    BOOST_TEST(mine.omitted_values() == 2 * per_resume);
    BOOST_TEST(r.values.log == (strings{"a", "edited", "x", "y", "c"}));

    // Another compiled graph holds nothing of the first's pause: its first resume reads the
    // values (its second uses its own pause's), and runs the thread to its end; the first
    // graph's held state, of the older pause, is then not used.
    r = run(app.invoke(upd{}, in_mode("u", mode)));
    BOOST_REQUIRE(r.interrupted());
    auto other = g.compile({.checkpointer = env.saver});
    r = run(other.invoke(sg::resume("p"), in_mode("u", mode)));
    BOOST_REQUIRE(r.interrupted());
    r = run(other.invoke(sg::resume("q"), in_mode("u", mode)));
    BOOST_TEST(!r.interrupted());
    BOOST_TEST(mine.omitted_values() == 3 * per_resume);
    r = run(app.invoke(upd{}, in_mode("u", mode))); // new input, on the state the other left
    BOOST_REQUIRE(r.interrupted());
    BOOST_TEST(mine.omitted_values() == 3 * per_resume);
    BOOST_TEST(r.values.log == (strings{"a", "p", "q", "c", "a"}));
    BOOST_TEST(run(other.get_state("u")).values.log == r.values.log);
}

/// A saver that says it omits held values and leaves out the values of whatever checkpoint is
/// newest, held or not (and, with `omit_on_get`, of every read): against its contract.
class careless_saver final : public cp::forwarding_saver {
public:
    explicit careless_saver(std::shared_ptr<cp::saver> inner) : forwarding_saver(std::move(inner)) {}
    bool omit_on_get = false;

    bool omits_held_values() const noexcept override { return true; }
    boost::asio::awaitable<std::optional<cp::checkpoint_tuple>>
    acquire_and_get_held(const std::string& thread_id, const std::string& ns, const std::string&) override {
        const std::optional<std::string> newest;
        auto got = co_await acquire_and_get(thread_id, ns, newest);
        if (got) omit(*got);
        co_return got;
    }
    boost::asio::awaitable<std::optional<cp::checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                    std::optional<std::string> id) override {
        auto got = co_await inner().get(std::move(thread_id), std::move(ns), std::move(id));
        if (got && omit_on_get) omit(*got);
        co_return got;
    }

private:
    static void omit(cp::checkpoint_tuple& t) {
        t.cp.values = json::object{};
        t.values_omitted = true;
    }
};

// A saver that leaves out the values of a checkpoint other than the one held: the engine reads
// them again and runs on what was written; one that leaves them out of that read too is a
// storage_failure naming the thread and the checkpoint, never a run on missing values.
BOOST_AUTO_TEST_CASE(a_saver_omitting_values_not_held_is_read_again_or_refused) {
    saver_env env(saver_kind::sqlite);
    auto careless = std::make_shared<careless_saver>(env.saver);
    counters side;
    sg::state_graph<st> g("careless");
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
    g.add_node("ask", [](const st&, sg::context& ctx) {
        return upd{}.set<&st::log>({ctx.interrupt_now<std::string>(json::value("q"))});
    });
    g.add_edge(sg::START, "a").add_edge("a", "ask").add_edge("ask", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = careless});
    auto r = run(app.invoke(upd{}, in_mode("t", sg::durability::async)));
    BOOST_REQUIRE(r.interrupted());
    const auto edited = run(app.update_state("t", upd{}.set<&st::log>({"edited"}))); // newer than the pause
    r = run(app.invoke(sg::continue_run, in_mode("t", sg::durability::async)));
    BOOST_REQUIRE(r.interrupted()); // ask again, on the values read again
    BOOST_TEST(r.values.log == (strings{"a", "edited"}));

    const auto again = run(app.update_state("t", upd{}.set<&st::log>({"again"})));
    careless->omit_on_get = true;
    std::string msg;
    std::vector<std::string> names;
    BOOST_TEST(error_of([&] { (void)run(app.invoke(sg::continue_run, in_mode("t", sg::durability::async))); }, &msg, &names) ==
               sg::errc::storage_failure);
    BOOST_TEST(msg.find("thread 't'") != std::string::npos, msg);
    BOOST_TEST(msg.find("without its values") != std::string::npos, msg);
    BOOST_TEST(names == (strings{"t", again}));
    careless->omit_on_get = false;
    BOOST_TEST(run(app.get_state("t")).values.log == (strings{"a", "edited", "again"})); // nothing lost
    BOOST_TEST(edited != again);
}

// A static breakpoint in every mode: the call stops before b with a's step stored; continuing
// passes the breakpoint.
BOOST_DATA_TEST_CASE(breakpoints_continue_in_every_mode, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    auto app = chain3(side).compile({.checkpointer = env.saver, .interrupt_before = {"b"}});
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_TEST(r.interrupted());
    BOOST_TEST(r.next == (strings{"b"}));
    BOOST_TEST(history_of(app, "t").size() == (mode == sg::durability::exit ? 1u : 3u));
    BOOST_TEST(run(app.get_state("t")).next == (strings{"b"}));
    auto done = run(app.invoke(sg::continue_run, in_mode("t", mode)));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(side["a"] == 1);
}

// A node failing for good in every mode: the call fails with the node's error, the thread is at
// the last good step (exit writes it then, once) with the failure recorded on the task, and
// continuing the thread runs only what failed, not a parallel sibling that finished.
BOOST_DATA_TEST_CASE(a_failed_call_leaves_a_thread_that_continues, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    bool fail = true;
    sg::state_graph<st> g("fails");
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b")).add_node("ok", logger(side, "ok"));
    g.add_node("boom", [&side, &fail](const st&) {
        side.bump("boom");
        if (fail) throw std::runtime_error("upstream is down");
        return upd{}.set<&st::log>({"boom"});
    });
    g.add_node("d", logger(side, "d"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "boom").add_edge("b", "ok");
    g.add_edge("boom", "d").add_edge("ok", "d").add_edge("d", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    std::string msg;
    BOOST_TEST(error_of([&] { run(app.invoke(upd{}, in_mode("t", mode))); }, &msg) == sg::errc::node_failed);
    BOOST_TEST(msg.find("upstream is down") != std::string::npos, msg);
    auto h = history_of(app, "t");
    if (mode == sg::durability::exit) BOOST_TEST((h == std::vector<step_source>{{2, "loop"}}));
    else BOOST_TEST(h.size() == 4u);
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.step == 2);
    BOOST_TEST(s.values.log == (strings{"a", "b", "ok"})); // ok's write is stored beside the failure
    BOOST_TEST(s.next == (strings{"boom"}));
    BOOST_REQUIRE_EQUAL(s.tasks.size(), 2u);
    for (const auto& t : s.tasks)
        if (t.name == "boom") BOOST_TEST((t.error && t.error->find("upstream") != std::string::npos));
        else BOOST_TEST(!t.error);

    fail = false;
    auto r = run(app.invoke(sg::continue_run, in_mode("t", mode)));
    BOOST_TEST(r.values.log == (strings{"a", "b", "boom", "ok", "d"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["b"] == 1);
    BOOST_TEST(side["ok"] == 1);
    BOOST_TEST(side["boom"] == 2);
}

// A router that throws after a node's writes with exit durability: the staged state stored by the
// failed call is the one before that node (continuing runs the node once more, and its write is
// not there twice).
BOOST_DATA_TEST_CASE(a_failing_router_in_exit_mode_stores_the_state_before_it, savers(), kind) {
    saver_env env(kind);
    counters side;
    bool fail = true;
    sg::state_graph<st> g("router");
    g.add_node("a", logger(side, "a")).add_node("b", logger(side, "b")).add_node("c", logger(side, "c"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("c", sg::END);
    g.add_conditional_edges("b", [&fail](const st&) -> std::string {
        if (fail) throw std::runtime_error("router broke");
        return "c";
    }, {"c"});
    auto app = g.compile({.checkpointer = env.saver});
    BOOST_CHECK_THROW(run(app.invoke(upd{}, in_mode("t", sg::durability::exit))), std::runtime_error);
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.log == (strings{"a"}));
    BOOST_TEST(s.next == (strings{"b"}));
    fail = false;
    auto r = run(app.invoke(sg::continue_run, in_mode("t", sg::durability::exit)));
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
}

// A drain in exit mode writes the step it stopped at; invoking again continues.
BOOST_DATA_TEST_CASE(a_drain_in_exit_mode_is_stored, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g("drain");
    g.add_node("a", [&side](const st&) {
        side.bump("a");
        sg::request_drain();
        return upd{}.set<&st::log>({"a"});
    });
    g.add_node("b", logger(side, "b"));
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    struct cancel_on_exit {
        ~cancel_on_exit() { sg::cancel_drain(); }
    } cancel;
    auto r = run(app.invoke(upd{}, in_mode("t", sg::durability::exit)));
    sg::cancel_drain();
    BOOST_TEST(r.drained());
    BOOST_TEST((history_of(app, "t") == std::vector<step_source>{{1, "loop"}}));
    BOOST_TEST(run(app.get_state("t")).next == (strings{"b"}));
    auto done = run(app.invoke(sg::continue_run, in_mode("t", sg::durability::exit)));
    BOOST_TEST(done.values.log == (strings{"a", "b"}));
    BOOST_TEST(side["a"] == 1);
}

// async: the put of a step's checkpoint (slowed to 40 ms) is under way while the next node
// waits, and the call returns only once the last put is stored; sync: a node starts only after the
// previous step's put is stored. exit: one put.
BOOST_DATA_TEST_CASE(async_puts_beside_the_next_step, savers() * modes(), kind, mode) {
    saver_env env(kind);
    std::mutex m;
    std::vector<std::string> events;
    auto note = [&](const std::string& e) {
        std::lock_guard l(m);
        events.push_back(e);
    };
    auto slow = std::make_shared<slow_put_saver>(env.saver, 40ms, [&](const char* event, std::int64_t step) {
        note(std::string(event) + " " + std::to_string(step));
    });
    sg::state_graph<st> g("slow");
    for (std::string n : {"a", "b", "c"})
        g.add_node(n, [&note, n](const st&, sg::context& ctx) -> boost::asio::awaitable<upd> {
            note("node " + std::to_string(ctx.step()));
            boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, 20ms);
            co_await t.async_wait(boost::asio::use_awaitable);
            co_return upd{}.set<&st::log>({n});
        });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = slow});
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    const auto seen = events; // what had happened when the call returned
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
    auto at = [&](const std::string& e) {
        auto it = std::find(seen.begin(), seen.end(), e);
        BOOST_TEST_REQUIRE((it != seen.end()), e << " never happened");
        return it - seen.begin();
    };
    if (mode == sg::durability::exit) {
        BOOST_TEST((seen == strings{"node 1", "node 2", "node 3", "put 3", "stored 3"}));
        return;
    }
    for (int step = -1; step <= 3; ++step) BOOST_TEST(at("put " + std::to_string(step)) < at("stored " + std::to_string(step)));
    BOOST_TEST(seen.back() == "stored 3"); // nothing was left in flight
    BOOST_TEST(std::count_if(seen.begin(), seen.end(), [](const std::string& e) { return e.rfind("stored", 0) == 0; }) == 5);
    for (int step = 1; step <= 3; ++step) {
        const auto node = at("node " + std::to_string(step));
        const auto prev_stored = at("stored " + std::to_string(step - 1));
        if (mode == sg::durability::sync) {
            BOOST_TEST(prev_stored < node, "step " << step);
        } else {
            // the queued checkpoints are put while the node waits (it started first: a node that
            // never waits leaves them queued), and stored before the next step starts
            BOOST_TEST(node < prev_stored, "step " << step);
            if (step < 3) BOOST_TEST(prev_stored < at("node " + std::to_string(step + 1)), "step " << step);
        }
    }
}

namespace {
/// Counts the saver's `put` calls and the sizes of its `put_many` batches, which it forwards
/// whole (the inner saver's own batching, SQLite's one transaction, is kept).
class batch_counting_saver final : public cp::forwarding_saver {
public:
    using forwarding_saver::forwarding_saver;
    boost::asio::awaitable<void> put(const std::string& t, const std::string& ns, const cp::checkpoint& c) override {
        {
            std::lock_guard l(m);
            ++puts;
        }
        co_await inner().put(t, ns, c);
    }
    boost::asio::awaitable<void> put_many(const std::string& t, const std::string& ns,
                                          std::span<const cp::checkpoint> cps) override {
        {
            std::lock_guard l(m);
            batches.push_back(cps.size());
        }
        co_await inner().put_many(t, ns, cps);
    }
    std::mutex m;
    std::size_t puts = 0;
    std::vector<std::size_t> batches;
};
} // namespace

// async with nodes that never wait: the checkpoints of a run of such steps are put together, in
// one put_many (one transaction on SQLite), when a node waits or the call ends; a node that waits
// finds the checkpoints queued before it stored. Each checkpoint reads back as sync stores it.
BOOST_DATA_TEST_CASE(async_puts_the_steps_of_nodes_that_never_wait_together, savers(), kind) {
    saver_env env(kind);
    counters side;
    auto batches = std::make_shared<batch_counting_saver>(env.saver);
    auto app = chain3(side).compile({.checkpointer = batches});
    auto r = run(app.invoke(upd{}, in_mode("t", sg::durability::async)));
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(batches->puts == 0u);
    BOOST_TEST(batches->batches == (std::vector<std::size_t>{5}), "input, START, a, b and c in one batch");
    const std::vector<step_source> every_step{{3, "loop"}, {2, "loop"}, {1, "loop"}, {0, "loop"}, {-1, "input"}};
    BOOST_TEST((history_of(app, "t") == every_step));
    auto sync_app = chain3(side).compile({.checkpointer = env.saver});
    run(sync_app.invoke(upd{}, in_mode("s", sg::durability::sync)));
    auto async_history = run(app.get_state_history("t"));
    auto sync_history = run(sync_app.get_state_history("s"));
    BOOST_TEST_REQUIRE(async_history.size() == sync_history.size());
    for (std::size_t i = 0; i < sync_history.size(); ++i) {
        BOOST_TEST(async_history[i].values.log == sync_history[i].values.log, "checkpoint " << i);
        BOOST_TEST(async_history[i].next == sync_history[i].next, "checkpoint " << i);
    }

    // b waits (a timer): what was queued (input, START, a) is put while it waits.
    std::int64_t head_seen_by_b = -99;
    sg::state_graph<st> g("waits");
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
    g.add_node("b", [&](const st&) -> boost::asio::awaitable<upd> {
        boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, 30ms);
        co_await t.async_wait(boost::asio::use_awaitable);
        auto head = co_await env.saver->get("w", "", std::nullopt);
        if (head) head_seen_by_b = head->cp.step;
        co_return upd{}.set<&st::log>({"b"});
    });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    auto waits = std::make_shared<batch_counting_saver>(env.saver);
    auto app2 = g.compile({.checkpointer = waits});
    auto r2 = run(app2.invoke(upd{}, in_mode("w", sg::durability::async)));
    BOOST_TEST(r2.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(head_seen_by_b == 1, "a's checkpoint (step 1) is stored while b waits");
    BOOST_TEST(waits->batches == (std::vector<std::size_t>{3, 2}));
    BOOST_TEST((history_of(app2, "w") == every_step));

    // Many steps that never wait: the queue is put whenever it is full, in order.
    sg::state_graph<st> loop("loop");
    loop.add_node("n", logger(side, "n"));
    loop.add_edge(sg::START, "n");
    loop.add_conditional_edges("n", [](const st& s) { return s.log.size() < 150 ? std::string("n") : std::string(sg::END); },
                               {"n", sg::END});
    auto many = std::make_shared<batch_counting_saver>(env.saver);
    auto app3 = loop.compile({.checkpointer = many});
    sg::run_config c = in_mode("m", sg::durability::async);
    c.recursion_limit = 1000;
    auto r3 = run(app3.invoke(upd{}, c));
    BOOST_TEST(r3.values.log.size() == 150u);
    std::size_t total = 0;
    for (auto n : many->batches) {
        BOOST_TEST(n <= 64u);
        total += n;
    }
    BOOST_TEST(total == 152u); // input, START and 150 steps
    BOOST_TEST(many->batches.size() == 3u);
    BOOST_TEST(run(app3.get_state_history("m")).size() == 152u);
}

namespace {
/// Records the saver calls that write or lease, in order; `end_call` is forwarded whole.
class call_recording_saver final : public cp::forwarding_saver {
public:
    using forwarding_saver::forwarding_saver;
    boost::asio::awaitable<void> put(const std::string& t, const std::string& ns, const cp::checkpoint& c) override {
        note("put");
        co_await inner().put(t, ns, c);
    }
    boost::asio::awaitable<void> put_many(const std::string& t, const std::string& ns,
                                          std::span<const cp::checkpoint> cps) override {
        note("put_many");
        co_await inner().put_many(t, ns, cps);
    }
    boost::asio::awaitable<void> put_writes(std::string t, std::string ns, std::string id,
                                            std::vector<cp::pending_write> ws) override {
        note("put_writes");
        co_await inner().put_writes(std::move(t), std::move(ns), std::move(id), std::move(ws));
    }
    boost::asio::awaitable<void> acquire(std::string t) override {
        note("acquire");
        co_await inner().acquire(std::move(t));
    }
    boost::asio::awaitable<void> release(std::string t) override {
        note("release");
        co_await inner().release(std::move(t));
    }
    boost::asio::awaitable<std::optional<cp::checkpoint_tuple>>
    acquire_and_get(const std::string& t, const std::string& ns, const std::optional<std::string>& id) override {
        note("acquire_and_get");
        co_return co_await inner().acquire_and_get(t, ns, id);
    }
    boost::asio::awaitable<void> end_call(const std::string& t, const std::string& ns, call_end& end) override {
        std::string what = "end_call " + std::to_string(end.checkpoints.size()) + " checkpoints";
        for (const auto& w : end.writes) what += " " + w.channel;
        if (end.release) what += " release";
        note(what);
        co_await inner().end_call(t, ns, end);
    }
    strings take() {
        std::lock_guard l(m);
        return std::exchange(calls, {});
    }

private:
    void note(std::string c) {
        std::lock_guard l(m);
        calls.push_back(std::move(c));
    }
    std::mutex m;
    strings calls;
};
} // namespace

// A top-level call starts with one acquire_and_get (the lease and the thread's checkpoint: one
// transaction on SQLite) and ends with one end_call: the checkpoints async durability queued,
// the writes of the step it stopped in (an interrupt's) and the lease given back together, one
// commit on SQLite instead of three. Another process takes the thread at once after it, and a resume, a
// failure and a call that prunes (keep_last) store and release as before.
BOOST_DATA_TEST_CASE(a_call_ends_with_its_writes_and_the_lease_in_one_end_call, savers(), kind) {
    saver_env env(kind);
    counters side;
    auto rec = std::make_shared<call_recording_saver>(env.saver);
    sg::state_graph<st> g("ask");
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
    g.add_node("ask", [](const st&, sg::context& ctx) -> boost::asio::awaitable<upd> {
        auto pending = ctx.interrupt<std::string>(json::value("ok?"));
        std::string answer = co_await std::move(pending);
        co_return upd{}.set<&st::log>({"ask " + answer});
    });
    g.add_edge(sg::START, "a").add_edge("a", "ask").add_edge("ask", "c").add_edge("c", sg::END);
    auto app = g.compile({.checkpointer = rec});
    for (auto mode : {sg::durability::async, sg::durability::sync}) {
        const std::string t = std::string("t-") + mode_name(mode);
        auto r = run(app.invoke(upd{}, in_mode(t, mode)));
        BOOST_TEST(r.interrupted());
        auto calls = rec->take();
        std::string seen;
        for (const auto& c : calls) seen += "[" + c + "]";
        if (mode == sg::durability::async) {
            // input, START's step and a's step queued; the interrupt's write (no `__resume__`:
            // the task had received no answer yet); the lease
            BOOST_TEST((calls == strings{"acquire_and_get", "end_call 3 checkpoints __interrupt__ release"}), seen);
        } else {
            BOOST_TEST((calls == strings{"acquire_and_get", "put", "put", "put", "end_call 0 checkpoints __interrupt__ release"}),
                       seen);
        }
        // The lease is given back: another saver on the same storage takes the thread at once.
        auto other = env.open();
        run(other->acquire(t));
        run(other->release(t));
        auto state = run(app.get_state(t));
        BOOST_TEST(state.next == (strings{"ask"}));
        BOOST_TEST_REQUIRE(state.tasks.size() == 1u);
        BOOST_TEST(state.tasks[0].interrupts.size() == 1u); // the interrupt's write was stored
        // The resume ends the same way: its checkpoints and the lease in one end_call.
        auto done = run(app.invoke(sg::resume("yes"), in_mode(t, mode)));
        BOOST_TEST(done.values.log == (strings{"a", "ask yes", "c"}));
        calls = rec->take();
        BOOST_TEST_REQUIRE(!calls.empty());
        BOOST_TEST(calls.front() == "acquire_and_get");
        const std::string last = calls.back();
        BOOST_TEST(last.rfind("end_call ", 0) == 0, last);
        BOOST_TEST(last.ends_with(" checkpoints release"), last);
        if (mode == sg::durability::async) BOOST_TEST(last != "end_call 0 checkpoints release", last);
        else BOOST_TEST(last == "end_call 0 checkpoints release", last);
        BOOST_TEST(std::count(calls.begin(), calls.end(), "release") == 0);
        BOOST_TEST(std::count(calls.begin(), calls.end(), "put_many") == 0);
    }
    // A call that prunes after its writes (keep_last) gives the lease back on its own.
    sg::run_config pruning = in_mode("p", sg::durability::async);
    pruning.keep_last = 2;
    run(app.invoke(upd{}, pruning));
    auto calls = rec->take();
    BOOST_TEST(calls.back() == "release");
    BOOST_TEST(std::count(calls.begin(), calls.end(), "end_call 0 checkpoints release") == 0);
    run(env.open()->acquire("p"));
}

// async on a pool of four threads: the put started while a node waits may run on another thread
// than the node; 16 calls at once, nodes that wait and nodes that do not, every checkpoint of
// every thread stored in order.
BOOST_DATA_TEST_CASE(async_on_a_thread_pool, savers(), kind) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g("mixed");
    g.add_node("a", logger(side, "a")).add_node("c", logger(side, "c"));
    g.add_node("b", [](const st&) -> boost::asio::awaitable<upd> {
        boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, 2ms);
        co_await t.async_wait(boost::asio::use_awaitable);
        co_return upd{}.set<&st::log>({"b"});
    });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", "d_");
    g.add_node("d_", logger(side, "d"));
    g.add_edge("d_", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    boost::asio::thread_pool pool(4);
    std::vector<std::future<sg::run_result<st>>> calls;
    std::vector<sg::run_config> configs;
    for (int i = 0; i < 16; ++i) configs.push_back(in_mode("p" + std::to_string(i), sg::durability::async));
    for (int i = 0; i < 16; ++i) {
        auto call = app.invoke(upd{}, configs[static_cast<std::size_t>(i)]);
        calls.push_back(boost::asio::co_spawn(pool, std::move(call), boost::asio::use_future));
    }
    for (auto& c : calls) BOOST_TEST(c.get().values.log == (strings{"a", "b", "c", "d"}));
    pool.join();
    const std::vector<step_source> every_step{{4, "loop"}, {3, "loop"}, {2, "loop"}, {1, "loop"}, {0, "loop"}, {-1, "input"}};
    for (int i = 0; i < 16; ++i) BOOST_TEST((history_of(app, "p" + std::to_string(i)) == every_step), "thread p" << i);
}

// A put that fails in the background is the call's error (async), also when it is noticed after
// the next step's node finished; the thread is at the last stored checkpoint and continues.
BOOST_DATA_TEST_CASE(a_failed_background_put_is_the_calls_error, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    auto failing = std::make_shared<counting_saver>(env.saver);
    failing->fail_puts_from(3); // input, START and a's step are stored; b's is refused
    auto first = chain3(side).compile({.checkpointer = failing});
    std::string msg;
    const auto e = error_of([&] { run(first.invoke(upd{}, in_mode("t", mode))); }, &msg);
    auto app = chain3(side).compile({.checkpointer = env.saver});
    if (mode == sg::durability::exit) {
        // exit puts once, at the end (the first put: stored); then a refused final put leaves
        // the thread as it was before the call
        BOOST_TEST(e == sg::errc::ok, msg);
        BOOST_TEST(history_of(app, "t").size() == 1u);
        failing->fail_puts_from(0);
        BOOST_TEST(error_of([&] { run(first.invoke(upd{}, in_mode("t", mode))); }) == sg::errc::storage_failure);
        BOOST_TEST(history_of(app, "t").size() == 1u); // the thread as before the failed call
        BOOST_TEST(run(app.get_state("t")).values.log == (strings{"a", "b", "c"}));
        return;
    }
    BOOST_TEST(e == sg::errc::storage_failure, msg);
    BOOST_TEST(side["c"] == (mode == sg::durability::async ? 1 : 0)); // async noticed it after c ran
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.step == 1);
    BOOST_TEST(s.values.log == (strings{"a"}));
    auto r = run(app.invoke(sg::continue_run, in_mode("t", mode)));
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
}

// Subgraphs follow their parent's mode: in exit mode the parent and the subgraph each store one
// checkpoint; an interrupt inside the subgraph resumes in every mode.
BOOST_DATA_TEST_CASE(subgraphs_follow_the_parents_mode, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    sg::state_graph<st> sub("sub");
    sub.add_node("s1", logger(side, "s1"));
    sub.add_node("s2", [&side](const st&, sg::context& ctx) -> boost::asio::awaitable<upd> {
        side.bump("s2");
        auto pending = ctx.interrupt<std::string>(json::value("name?"));
        std::string name = co_await std::move(pending);
        co_return upd{}.set<&st::log>({"s2=" + name});
    });
    sub.add_edge(sg::START, "s1").add_edge("s1", "s2").add_edge("s2", sg::END);
    sg::state_graph<st> g("parent");
    g.add_node("pre", logger(side, "pre")).add_node("sub", sub.compile()).add_node("post", logger(side, "post"));
    g.add_edge(sg::START, "pre").add_edge("pre", "sub").add_edge("sub", "post").add_edge("post", sg::END);
    auto counting = std::make_shared<counting_saver>(env.saver);
    auto app = g.compile({.checkpointer = counting});
    auto r = run(app.invoke(upd{}, in_mode("t", mode)));
    BOOST_REQUIRE(r.interrupted());
    // parent: input, START, pre; subgraph: input, START, s1 (exit: one of each)
    BOOST_TEST(counting->puts() == (mode == sg::durability::exit ? 2u : 6u));
    auto done = run(app.invoke(sg::resume(std::string("x")), in_mode("t", mode)));
    BOOST_TEST(done.values.log == (strings{"pre", "s1", "s2=x", "post"}));
    BOOST_TEST(side["s1"] == 1);
    BOOST_TEST(side["pre"] == 1);
}

// Replaying from an earlier checkpoint in exit mode forks the thread with one checkpoint: the
// branch's last step, its parent the checkpoint replayed from; the steps after it run again.
BOOST_DATA_TEST_CASE(replay_in_exit_mode_writes_one_checkpoint_on_the_branch, savers(), kind) {
    saver_env env(kind);
    counters side;
    auto app = chain3(side).compile({.checkpointer = env.saver});
    run(app.invoke(upd{}, in_mode("t", sg::durability::sync)));
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 5u);
    const auto& after_a = h[2]; // step 1: a ran, b next
    BOOST_REQUIRE_EQUAL(after_a.step, 1);
    auto cfg = in_mode("t", sg::durability::exit);
    cfg.checkpoint_id = after_a.checkpoint_id;
    auto r = run(app.invoke(sg::continue_run, cfg));
    BOOST_TEST(r.values.log == (strings{"a", "b", "c"}));
    BOOST_TEST(side["a"] == 1);
    BOOST_TEST(side["b"] == 2);
    auto h2 = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h2.size(), 6u);
    BOOST_TEST(h2[0].checkpoint_id == r.checkpoint_id);
    BOOST_TEST(h2[0].parent_checkpoint_id == after_a.checkpoint_id);
    BOOST_TEST(h2[0].step == 4); // the fork (2), b (3), c (4)
    BOOST_TEST(h2[0].values.log == (strings{"a", "b", "c"}));
}

// The `checkpoints` stream shows every step's checkpoint in every mode, as LangGraph emits them
// whatever the durability; exit stores only the last of them.
BOOST_DATA_TEST_CASE(checkpoint_events_in_every_mode, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    auto app = chain3(side).compile({.checkpointer = env.saver});
    std::vector<std::int64_t> steps;
    std::string last_id;
    sg::stream_handler on_event = [&](const sg::stream_event& e) {
        if (e.mode != sg::stream_mode::checkpoints) return;
        steps.push_back(e.step);
        last_id = std::string(e.data.at("config").at("configurable").at("checkpoint_id").as_string());
    };
    auto r = run(app.stream(upd{}, in_mode("t", mode), sg::stream_mode::checkpoints, on_event));
    BOOST_TEST(steps == (std::vector<std::int64_t>{-1, 0, 1, 2, 3}));
    BOOST_TEST(last_id == r.checkpoint_id);
    BOOST_TEST(run(app.get_state("t")).checkpoint_id == last_id);
}

// keep_last prunes after the final write in every mode.
BOOST_DATA_TEST_CASE(keep_last_prunes_after_the_final_write, savers() * modes(), kind, mode) {
    saver_env env(kind);
    counters side;
    auto app = chain3(side).compile({.checkpointer = env.saver});
    auto cfg = in_mode("t", mode);
    cfg.keep_last = 1;
    run(app.invoke(upd{}, cfg));
    auto r = run(app.invoke(upd{}, cfg));
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 1u);
    BOOST_TEST(h[0].checkpoint_id == r.checkpoint_id);
    BOOST_TEST(h[0].values.log.size() == 6u);
}

BOOST_AUTO_TEST_SUITE_END()
