// Every public awaitable called the way a newcomer writes it: default arguments, braced
// temporaries for the config, temporaries for inputs, payloads and handlers, all inside the
// `co_await` expression. g++ 12 destroys an aggregate temporary there twice, so the library's
// own types that users brace (run_config) are trivially destructible and every call is a plain
// function that moves its arguments before any coroutine frame exists. This file runs under
// ASan + UBSan in CI: a double destruction fails it.
#include <stategraph/stategraph.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/json_graph.hpp>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;

namespace {

struct ask_state {
    std::string question;
    std::string answer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(ask_state, (), (question, answer, log))
auto reducers(sg::for_state<ask_state>) { return sg::reducers{sg::reduce<&ask_state::log>(sg::append)}; }

struct approval {
    std::string action;
    std::vector<std::string> options;
};
BOOST_DESCRIBE_STRUCT(approval, (), (action, options))

boost::asio::awaitable<sg::update<ask_state>> ask(const ask_state& s, sg::context& ctx) {
    // A string temporary as payload, inside co_await.
    auto answer = co_await ctx.interrupt<std::string>(std::string("approve ") + s.question + "?");
    // A user's aggregate as payload, without co_await (the spelling g++ 12 allows for braced ones).
    auto second = ctx.interrupt_now<std::string>(approval{"send", {"yes", "no"}});
    std::vector<std::string> entry{"ask:" + answer + "/" + second};
    co_return sg::update<ask_state>{}.set<&ask_state::answer>(answer).set<&ask_state::log>(std::move(entry));
}

sg::update<ask_state> done(const ask_state&) {
    std::vector<std::string> entry{"done"};
    return sg::update<ask_state>{}.set<&ask_state::log>(std::move(entry));
}

sg::compiled_graph<ask_state> build(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<ask_state> g("natural");
    g.add_node("ask", ask).add_node("done", done);
    g.add_edge(sg::START, "ask").add_edge("ask", "done").add_edge("done", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

sg::compiled_graph<ask_state> build_stateless() {
    sg::state_graph<ask_state> g("stateless");
    g.add_node("done", done);
    g.add_edge(sg::START, "done").add_edge("done", sg::END);
    return g.compile();
}

boost::asio::awaitable<void> newcomer(sg::compiled_graph<ask_state> app, sg::compiled_graph<ask_state> plain) {
    // invoke with the default config.
    auto r0 = co_await plain.invoke(sg::update<ask_state>{}.set<&ask_state::question>("hi"));
    BOOST_TEST(r0.values.log == std::vector<std::string>{"done"});

    // invoke with a temporary update holding heap memory (a long string, a list).
    auto long_question = co_await plain.invoke(
        sg::update<ask_state>{}.set<&ask_state::question>(std::string(200, 'q')).set<&ask_state::log>(std::vector<std::string>(1, std::string(100, 'l'))));
    BOOST_TEST(long_question.values.question.size() == 200u);
    BOOST_TEST(long_question.values.log.size() == 2u);

    // invoke with a braced config and a temporary update.
    auto r1 = co_await app.invoke(sg::update<ask_state>{}.set<&ask_state::question>("deploy"), {.thread_id = "t1"});
    BOOST_TEST(r1.interrupted());
    BOOST_TEST(r1.interrupts.at(0).value.as_string() == "approve deploy?");

    // get_state without a checkpoint id, and with one built inline.
    auto s0 = co_await app.get_state("t1");
    BOOST_TEST(s0.next == std::vector<std::string>{"ask"});
    auto s1 = co_await app.get_state("t1", std::optional<std::string>(r1.checkpoint_id));
    BOOST_TEST(s1.checkpoint_id == r1.checkpoint_id);

    // resume twice with temporaries: the first answers the first interrupt, the second the next.
    auto r2 = co_await app.invoke(sg::resume(std::string("yes")), {.thread_id = "t1", .recursion_limit = 10});
    BOOST_TEST(r2.interrupted());
    BOOST_TEST(r2.interrupts.at(0).value.at("action").as_string() == "send");
    auto r3 = co_await app.invoke(sg::resume("no"), {.thread_id = "t1"});
    BOOST_TEST(!r3.interrupted());
    BOOST_TEST(r3.values.log == (std::vector<std::string>{"ask:yes/no", "done"}));

    // stream with a braced config and a lambda temporary as handler.
    int events = 0;
    auto r4 = co_await app.stream(sg::update<ask_state>{}.set<&ask_state::question>("x"), {.thread_id = "t2"},
                                  sg::stream_mode::updates | sg::stream_mode::values,
                                  [&events](const sg::stream_event&) { ++events; });
    BOOST_TEST(r4.interrupted());
    BOOST_TEST(events >= 2);

    // stream with a handler that keeps what it collects by value (a shared_ptr, a string longer
    // than the small-string buffer). Built inside the co_await expression, g++ 12 destroys its
    // captures twice (a double free under ASan); there it does not compile (see
    // tests/dsl/compile_fail/stream_handler_by_value.cpp), and named first it is safe.
    auto seen = std::make_shared<std::vector<std::string>>();
    auto keep = [seen, prefix = std::string("an event of the tasks or checkpoints stream: ")](const sg::stream_event& e) {
        seen->push_back(prefix + e.node);
    };
    auto r5 = co_await app.stream(sg::update<ask_state>{}.set<&ask_state::question>("y"), {.thread_id = "t3"},
                                  sg::stream_mode::tasks | sg::stream_mode::checkpoints, keep);
    BOOST_TEST(r5.interrupted());
    BOOST_TEST(seen.use_count() == 2); // ours and keep's: the call's copies are gone, each once
    BOOST_TEST(seen->size() >= 4u);    // 3 checkpoints, the start of ask and its result

    // history and update_state with their defaults.
    auto h = co_await app.get_state_history("t1");
    BOOST_TEST(h.size() >= 4u);
    auto id = co_await app.update_state("t1", sg::update<ask_state>{}.set<&ask_state::answer>("edited"));
    BOOST_TEST(!id.empty());
    auto s2 = co_await app.get_state("t1");
    BOOST_TEST(s2.values.answer == "edited");

    // A saver call with temporaries.
    auto t = co_await app.checkpointer()->get("t1", "", std::nullopt);
    BOOST_TEST(t.has_value());

    // get_state with braced options: an id longer than the small-string buffer, made inline.
    const std::string cp_id = r1.checkpoint_id;
    auto s3 = co_await app.get_state("t1", {.checkpoint_id = std::string(cp_id), .subgraphs = true});
    BOOST_TEST(s3.checkpoint_id == r1.checkpoint_id);
    BOOST_TEST(s3.next == std::vector<std::string>{"ask"});

    // History and a saver's list with braced filters (ids held inline).
    auto everything = co_await app.get_state_history("t1");
    const auto before_count = std::count_if(everything.begin(), everything.end(),
                                            [&](const auto& snap) { return snap.checkpoint_id < cp_id; });
    BOOST_TEST(before_count >= 1);
    auto older = co_await app.get_state_history("t1", {.before = std::string(cp_id), .limit = 5});
    BOOST_TEST(older.size() == static_cast<std::size_t>(std::min<std::ptrdiff_t>(before_count, 5)));
    for (const auto& snap : older) BOOST_TEST(snap.checkpoint_id < cp_id);
    auto newest = co_await app.get_state_history("t1", {.limit = 1});
    BOOST_TEST(newest.size() == 1u);
    BOOST_TEST(newest.at(0).checkpoint_id == everything.at(0).checkpoint_id);
    auto loops = co_await app.checkpointer()->list("t1", "", {.limit = 1, .source = "loop"});
    BOOST_TEST(loops.size() == 1u);
    BOOST_TEST(loops.at(0).cp.source == "loop");

    // Breakpoints of one call, braced inside co_await: a named list, a temporary one, an empty one
    // (no breakpoint) and an unknown node (refused by name). (A list written `{"a", "b"}` inside
    // co_await is g++ 12's bug 1, a compile error: name it, or build it with parentheses.)
    const std::vector<std::string> before_ask{"ask"};
    auto r6 = co_await app.invoke(sg::update<ask_state>{}.set<&ask_state::question>("b"), {.thread_id = "t4"}, {.before = before_ask});
    BOOST_TEST(r6.interrupted());
    BOOST_TEST(r6.interrupts.empty()); // a breakpoint, not ask's own interrupt
    BOOST_TEST(r6.next == std::vector<std::string>{"ask"});
    auto r7 = co_await app.invoke(sg::update<ask_state>{}.set<&ask_state::question>("b"), {.thread_id = "t5"},
                                  sg::run_breakpoints{.before = std::vector<std::string>(1, "*")});
    BOOST_TEST(r7.interrupts.empty());
    BOOST_TEST(r7.next == std::vector<std::string>{"ask"});
    auto r8 = co_await app.invoke(sg::update<ask_state>{}.set<&ask_state::question>("b"), {.thread_id = "t6"},
                                  {.before = std::vector<std::string>{}});
    BOOST_TEST(r8.interrupts.at(0).value.as_string() == "approve b?"); // ran into ask's own interrupt
    std::string refused;
    try {
        (void)co_await app.invoke(sg::update<ask_state>{}.set<&ask_state::question>("b"), {.thread_id = "t7"},
                                  {.after = std::vector<std::string>(1, std::string(40, 'x'))});
    } catch (const sg::graph_error& e) {
        refused = e.what();
    }
    BOOST_TEST(refused.find(std::string(40, 'x')) != std::string::npos, refused);

    // The JSON face: its arguments are classes with constructors, safe as temporaries.
    sg::json_graph jg(app);
    auto js = co_await jg.get_state("t1", {.checkpoint_id = cp_id});
    BOOST_TEST(js.checkpoint_id == r1.checkpoint_id);
    sg::json_update u;
    u.thread_id = "t1";
    u.values = boost::json::object{{"answer", std::string(64, 'j')}};
    auto jid = co_await jg.update_state(std::move(u));
    BOOST_TEST(!jid.empty());
}

} // namespace

BOOST_AUTO_TEST_CASE(every_public_awaitable_takes_the_natural_spelling) {
    auto app = build(std::make_shared<sg::checkpoint::memory_saver>());
    sg::run_sync(newcomer(app, build_stateless()));
}

BOOST_AUTO_TEST_CASE(run_sync_returns_the_result_and_rethrows_errors) {
    auto plain = build_stateless();
    auto r = sg::run_sync(plain.invoke(sg::update<ask_state>{}.set<&ask_state::question>("q")));
    BOOST_TEST(r.values.question == "q");
    auto app = build(std::make_shared<sg::checkpoint::memory_saver>());
    // A graph with a checkpointer needs a thread id: the typed error comes out of run_sync.
    try {
        sg::run_sync(app.invoke(sg::continue_run));
        BOOST_FAIL("expected thread_error");
    } catch (const sg::thread_error& e) {
        BOOST_TEST(e.kind() == sg::errc::invalid_input);
    }
}

BOOST_AUTO_TEST_CASE(ids_longer_than_255_bytes_are_refused_by_name) {
    const std::string long_id(300, 'x');
    try {
        sg::run_config cfg{.thread_id = long_id};
        BOOST_FAIL("expected graph_error, got a config for " << cfg.thread_id);
    } catch (const sg::graph_error& e) {
        BOOST_TEST(e.kind() == sg::errc::invalid_input);
        BOOST_TEST(std::string(e.what()).find("300 bytes") != std::string::npos);
    }
    sg::run_config ok{.thread_id = std::string(255, 'y')};
    BOOST_TEST(ok.thread_id.size() == 255u);
}

// Issue 12, feature 2: the caller's dependencies reach the nodes (and a subgraph's nodes) through
// run_config::runtime, written braced inside co_await; with execution information: the call's run
// id, shared with its subgraph, and the checkpoint the step started from. A node reading a type
// the call did not pass gets a typed error naming it.
namespace {
struct deps {
    std::string user_id;
    int model_budget = 0;
};
struct info_state {
    std::vector<std::string> seen;
};
BOOST_DESCRIBE_STRUCT(info_state, (), (seen))
auto reducers(sg::for_state<info_state>) { return sg::reducers{sg::reduce<&info_state::seen>(sg::append)}; }

sg::update<info_state> note_runtime(const info_state&, sg::context& ctx) {
    const auto& d = ctx.runtime<deps>();
    return sg::update<info_state>{}.set<&info_state::seen>(
        {ctx.node() + ":" + d.user_id + ":" + std::to_string(d.model_budget), "run:" + ctx.run_id(),
         "cp:" + std::string(ctx.checkpoint_id().empty() ? "none" : "some")});
}

boost::asio::awaitable<void> call_with_runtime(sg::compiled_graph<info_state>& app) {
    deps d{"anna", 7};
    auto r = co_await app.invoke(sg::update<info_state>{}, {.thread_id = "rt", .runtime = sg::runtime_of(d)});
    const auto& seen = r.values.seen;
    BOOST_REQUIRE_EQUAL(seen.size(), 6u);
    BOOST_TEST(seen[0] == "outer:anna:7");
    BOOST_TEST(seen[3] == "inner:anna:7");
    BOOST_TEST(seen[1] == seen[4]); // one run id for the call and its subgraph
    BOOST_TEST(seen[1].size() > 4u);
    BOOST_TEST(seen[2] == "cp:some");
    auto again = co_await app.invoke(sg::update<info_state>{}, {.thread_id = "rt2", .runtime = sg::runtime_of(d)});
    BOOST_TEST(again.values.seen[1] != seen[1]); // a new call, a new run id
    try {
        const int wrong = 3;
        co_await app.invoke(sg::update<info_state>{}, {.thread_id = "rt3", .runtime = sg::runtime_of(wrong)});
        BOOST_FAIL("expected graph_error");
    } catch (const sg::graph_error& e) {
        BOOST_TEST(e.kind() == sg::errc::invalid_input);
        BOOST_TEST(std::string(e.what()).find("'outer'") != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("deps") != std::string::npos, e.what());
    }
}
} // namespace

BOOST_AUTO_TEST_CASE(runtime_context_and_execution_info_reach_every_node) {
    sg::state_graph<info_state> inner;
    inner.add_node("inner", note_runtime).add_edge(sg::START, "inner").add_edge("inner", sg::END);
    sg::state_graph<info_state> outer;
    outer.add_node("outer", note_runtime).add_node("sub", inner.compile());
    outer.add_edge(sg::START, "outer").add_edge("outer", "sub").add_edge("sub", sg::END);
    auto app = outer.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_sync(call_with_runtime(app));
}
