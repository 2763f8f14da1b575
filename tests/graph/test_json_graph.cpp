// json_graph: a compiled graph with JSON in and out. Each operation (invoke with values, a resume
// by value or by id, a fork, streaming, cancellation; state, history, update, pending interrupts,
// subgraph namespaces; shape and fields; the typed conversions) and each error kind it reports.
#define BOOST_TEST_MODULE json_graph
#include <stategraph/json_graph.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/state_graph.hpp>

#include "run_awaitable.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace asio = boost::asio;
namespace json = boost::json;
using sg::test::run;

namespace json_graph_test {

struct st {
    std::string question;
    std::vector<std::string> log;
    int count = 0;
};
BOOST_DESCRIBE_STRUCT(st, (), (question, log, count))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
using upd = sg::update<st>;

/// START -> note -> ask (interrupts for an answer) -> END
sg::compiled_graph<st> asking(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<st> g;
    g.add_node("note", [](const st& s) { return upd{}.set<&st::log>({"note:" + s.question}).set<&st::count>(s.count + 1); });
    g.add_node("ask", [](const st& s, sg::context& ctx) {
        auto answer = ctx.interrupt_now<std::string>("approve " + s.question + "?");
        return upd{}.set<&st::log>({"ask:" + answer});
    });
    g.add_edge(sg::START, "note").add_edge("note", "ask").add_edge("ask", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

/// START -> a -> sub (a subgraph whose node interrupts) -> END
sg::compiled_graph<st> nested(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<st> inner;
    inner.add_node("inner_ask", [](const st&, sg::context& ctx) {
        auto answer = ctx.interrupt_now<std::string>("inner?");
        return upd{}.set<&st::log>({"inner:" + answer});
    });
    inner.add_edge(sg::START, "inner_ask").add_edge("inner_ask", sg::END);
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return upd{}.set<&st::log>({"a"}); });
    g.add_node("sub", inner.compile());
    g.add_edge(sg::START, "a").add_edge("a", "sub").add_edge("sub", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

/// START -> one -> two -> END, without a checkpointer unless given one.
sg::compiled_graph<st> plain(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<st> g;
    g.add_node("one", [](const st&) { return upd{}.set<&st::log>({"one"}); });
    g.add_node("two", [](const st&) { return upd{}.set<&st::log>({"two"}); });
    g.add_edge(sg::START, "one").add_edge("one", "two").add_edge("two", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

sg::compiled_graph<st> failing() {
    sg::state_graph<st> g;
    g.add_node("boom", [](const st&) -> upd { throw std::runtime_error("boom broke"); });
    g.add_edge(sg::START, "boom").add_edge("boom", sg::END);
    return g.compile();
}

asio::awaitable<upd> wait_long(const st&, sg::context& ctx) {
    asio::steady_timer t(ctx.executor(), std::chrono::seconds(20));
    co_await t.async_wait(asio::use_awaitable);
    co_return upd{}.set<&st::log>({"waited"});
}

sg::compiled_graph<st> slow() {
    sg::state_graph<st> g;
    g.add_node("wait", wait_long);
    g.add_edge(sg::START, "wait").add_edge("wait", sg::END);
    return g.compile();
}

sg::json_run values_run(json::object input, const char* thread) {
    sg::json_run r;
    r.input = std::move(input);
    r.config.thread_id = thread;
    return r;
}

sg::json_run resume_run(sg::resume_input resume, const char* thread) {
    sg::json_run r;
    r.input = std::move(resume);
    r.config.thread_id = thread;
    return r;
}

/// The graph_error `work()` throws (or fails the test when it throws none or another kind).
sg::graph_error error_of(const std::function<void()>& work) {
    try {
        work();
    } catch (const sg::graph_error& e) {
        return e;
    }
    BOOST_FAIL("no graph_error was thrown");
    return sg::graph_error(sg::errc::ok, "");
}

std::vector<std::string> strings(const json::value& v) {
    std::vector<std::string> out;
    for (const auto& x : v.as_array()) out.emplace_back(x.as_string());
    return out;
}

} // namespace json_graph_test

using namespace json_graph_test;

BOOST_AUTO_TEST_SUITE(running)

BOOST_AUTO_TEST_CASE(invoke_with_values_streams_and_returns_json) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    std::vector<sg::stream_event> events;
    auto call = values_run(json::object{{"question", "rm -rf"}, {"log", json::array{"in"}}}, "t1");
    call.modes = sg::stream_mode::values | sg::stream_mode::updates;
    call.on_event = [&](const sg::stream_event& e) { events.push_back(e); };
    auto r = run(g.invoke(std::move(call)));
    BOOST_TEST((r.status == sg::run_status::interrupted));
    BOOST_TEST(r.values.at("question").as_string() == "rm -rf");
    BOOST_TEST(strings(r.values.at("log")) == (std::vector<std::string>{"in", "note:rm -rf"}));
    BOOST_TEST(r.values.at("count").as_int64() == 1);
    BOOST_REQUIRE(r.interrupts.size() == 1u);
    BOOST_TEST(r.interrupts[0].node == "ask");
    BOOST_TEST(r.interrupts[0].value.as_string() == "approve rm -rf?");
    BOOST_TEST(r.next == (std::vector<std::string>{"ask"}));
    BOOST_TEST(!r.checkpoint_id.empty());
    int values = 0, updates = 0;
    for (const auto& e : events) {
        values += e.mode == sg::stream_mode::values;
        updates += e.mode == sg::stream_mode::updates;
    }
    BOOST_TEST(values >= 2);
    BOOST_TEST(updates >= 1);
}

BOOST_AUTO_TEST_CASE(resume_by_value_and_by_interrupt_id) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    auto first = run(g.invoke(values_run(json::object{{"question", "a"}}, "by-value")));
    BOOST_REQUIRE(first.interrupts.size() == 1u);
    auto done = run(g.invoke(resume_run(sg::resume(std::string("yes")), "by-value")));
    BOOST_TEST((done.status == sg::run_status::done));
    BOOST_TEST(strings(done.values.at("log")) == (std::vector<std::string>{"note:a", "ask:yes"}));

    auto second = run(g.invoke(values_run(json::object{{"question", "b"}}, "by-id")));
    BOOST_REQUIRE(second.interrupts.size() == 1u);
    sg::resume_input by_id;
    by_id.is_map = true;
    by_id.by_id[second.interrupts[0].id] = "ok";
    auto done2 = run(g.invoke(resume_run(std::move(by_id), "by-id")));
    BOOST_TEST((done2.status == sg::run_status::done));
    BOOST_TEST(strings(done2.values.at("log")).back() == "ask:ok");
}

BOOST_AUTO_TEST_CASE(continue_and_fork_from_a_checkpoint) {
    sg::json_graph g(plain(std::make_shared<sg::checkpoint::memory_saver>()));
    auto r = run(g.invoke(values_run(json::object{{"question", "x"}}, "fork")));
    BOOST_TEST(strings(r.values.at("log")) == (std::vector<std::string>{"one", "two"}));
    auto history = run(g.get_state_history("fork"));
    // The checkpoint after "one": forking from it runs "two" again, on the state it had then.
    auto after_one = std::find_if(history.begin(), history.end(), [](const sg::json_snapshot& s) {
        return s.next == std::vector<std::string>{"two"};
    });
    BOOST_REQUIRE(after_one != history.end());
    sg::json_run fork;
    fork.config.thread_id = "fork";
    fork.config.checkpoint_id = after_one->checkpoint_id;
    auto forked = run(g.invoke(std::move(fork)));
    BOOST_TEST(strings(forked.values.at("log")) == (std::vector<std::string>{"one", "two"}));
    BOOST_TEST(forked.checkpoint_id != r.checkpoint_id);
    // Continuing a finished thread runs nothing more.
    sg::json_run again;
    again.config.thread_id = "fork";
    auto same = run(g.invoke(std::move(again)));
    BOOST_TEST(strings(same.values.at("log")) == (std::vector<std::string>{"one", "two"}));
}

BOOST_AUTO_TEST_CASE(cancelled_through_the_awaiting_coroutines_slot) {
    sg::json_graph g(slow());
    asio::io_context io;
    asio::cancellation_signal cancel;
    std::exception_ptr failure;
    bool finished = false;
    sg::json_run call;
    call.input = json::object{{"question", "wait"}};
    asio::co_spawn(io, g.invoke(std::move(call)),
                   asio::bind_cancellation_slot(cancel.slot(), [&](std::exception_ptr e, sg::json_result) {
                       failure = e;
                       finished = true;
                   }));
    asio::steady_timer soon(io, std::chrono::milliseconds(20));
    soon.async_wait([&](boost::system::error_code) { cancel.emit(asio::cancellation_type::terminal); });
    const auto t0 = std::chrono::steady_clock::now();
    io.run();
    BOOST_TEST(finished);
    BOOST_TEST(static_cast<bool>(failure)); // the node's 20 s wait was cancelled: the call failed
    BOOST_TEST((std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(state)

BOOST_AUTO_TEST_CASE(state_at_latest_and_at_a_checkpoint_and_history) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    auto r = run(g.invoke(values_run(json::object{{"question", "q"}}, "s1")));
    auto now = run(g.get_state("s1"));
    BOOST_TEST(now.checkpoint_id == r.checkpoint_id);
    BOOST_TEST(now.values.at("question").as_string() == "q");
    BOOST_TEST(now.next == (std::vector<std::string>{"ask"}));
    BOOST_REQUIRE(now.tasks.size() == 1u);
    BOOST_REQUIRE(now.tasks[0].interrupts.size() == 1u);
    BOOST_TEST(now.tasks[0].interrupts[0].value.as_string() == "approve q?");
    BOOST_REQUIRE(!now.parent_checkpoint_id.empty());

    auto history = run(g.get_state_history("s1"));
    BOOST_REQUIRE(history.size() >= 2u);
    BOOST_TEST(history.front().checkpoint_id == now.checkpoint_id); // newest first
    sg::checkpoint::list_options one;
    one.limit = 1;
    BOOST_TEST(run(g.get_state_history("s1", one)).size() == 1u);
    BOOST_TEST(run(g.get_state_history("no-such-thread")).empty());

    const std::optional<std::string> parent = now.parent_checkpoint_id;
    auto before = run(g.get_state("s1", parent));
    BOOST_TEST(before.checkpoint_id == now.parent_checkpoint_id);
    BOOST_TEST(before.values.at("log").as_array().size() < now.values.at("log").as_array().size());
}

BOOST_AUTO_TEST_CASE(update_from_json_as_a_node_at_a_checkpoint) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    auto r = run(g.invoke(values_run(json::object{{"question", "q"}}, "u1")));
    sg::json_update u;
    u.thread_id = "u1";
    u.values = json::object{{"log", json::array{"edited"}}, {"count", 7}};
    u.as_node = "ask"; // as if "ask" had answered: the thread is at END
    auto id = run(g.update_state(std::move(u)));
    auto now = run(g.get_state("u1"));
    BOOST_TEST(now.checkpoint_id == id);
    BOOST_TEST(now.source == "update");
    BOOST_TEST(now.next.empty());
    BOOST_TEST(strings(now.values.at("log")) == (std::vector<std::string>{"note:q", "edited"}));
    BOOST_TEST(now.values.at("count").as_int64() == 7);

    // At an older checkpoint, with no values: a new checkpoint forked from it.
    sg::json_update at_old;
    at_old.thread_id = "u1";
    at_old.checkpoint_id = r.checkpoint_id;
    at_old.as_node = "note";
    auto id2 = run(g.update_state(std::move(at_old)));
    auto forked = run(g.get_state("u1"));
    BOOST_TEST(forked.checkpoint_id == id2);
    BOOST_TEST(forked.next == (std::vector<std::string>{"ask"}));
    BOOST_TEST(forked.values.at("count").as_int64() == 1);
}

BOOST_AUTO_TEST_CASE(pending_interrupts_and_subgraph_namespaces) {
    sg::json_graph g(nested(std::make_shared<sg::checkpoint::memory_saver>()));
    auto r = run(g.invoke(values_run(json::object{}, "n1")));
    BOOST_REQUIRE((r.status == sg::run_status::interrupted));
    auto pending = run(g.pending_interrupts("n1"));
    BOOST_REQUIRE(pending.size() == 1u);
    BOOST_TEST(pending[0].value.as_string() == "inner?");

    auto heads = run(g.subgraph_namespaces("n1"));
    BOOST_REQUIRE(heads.size() == 2u);
    BOOST_TEST(heads[0].ns == "");
    BOOST_TEST(heads[0].checkpoint_id == r.checkpoint_id);
    // The subgraph's namespace is `node:task`, as reserved.hpp spells it.
    auto state = run(g.get_state("n1"));
    BOOST_REQUIRE(state.tasks.size() == 1u);
    BOOST_TEST(heads[1].ns == sg::checkpoint::reserved::task_segment("sub", state.tasks[0].id));
    BOOST_TEST(heads[1].ns == "sub:" + state.tasks[0].id);
    BOOST_TEST(!heads[1].checkpoint_id.empty());
    BOOST_TEST(sg::checkpoint::reserved::child_namespace(heads[1].ns, "x:1") == heads[1].ns + "|x:1");
    BOOST_TEST(sg::checkpoint::reserved::child_namespace("", "x:1") == "x:1");

    auto done = run(g.invoke(resume_run(sg::resume(std::string("fine")), "n1")));
    BOOST_TEST((done.status == sg::run_status::done));
    BOOST_TEST(run(g.pending_interrupts("n1")).empty());
    BOOST_TEST(run(g.subgraph_namespaces("n1")).size() == 1u); // only the graph's own, nothing waits below
    BOOST_TEST(run(g.subgraph_namespaces("no-such-thread")).empty());
}

// Subgraph state from outside (issue 27): get_state with subgraphs gives the waiting subgraph's
// state in its task (typed and JSON faces alike), and update_state by its namespace changes it;
// a namespace that is no subgraph's is an unknown_node error naming it.
BOOST_AUTO_TEST_CASE(subgraph_state_and_update_by_namespace) {
    auto app = nested(std::make_shared<sg::checkpoint::memory_saver>());
    sg::json_graph g(app);
    (void)run(g.invoke(values_run(json::object{{"question", "q"}}, "s1")));
    auto typed = run(app.get_state("s1", {.subgraphs = true}));
    BOOST_REQUIRE(typed.tasks.size() == 1u);
    BOOST_REQUIRE(typed.tasks[0].state != nullptr);
    const auto& sub = *typed.tasks[0].state;
    BOOST_TEST(sub.ns == "sub:" + typed.tasks[0].id);
    BOOST_TEST(sub.next == std::vector<std::string>{"inner_ask"}, boost::test_tools::per_element());
    BOOST_TEST(sub.values.at("question") == "q");
    BOOST_REQUIRE(sub.tasks.size() == 1u);
    BOOST_TEST(sub.tasks[0].interrupts.size() == 1u);
    BOOST_TEST(run(app.get_state("s1")).tasks[0].state == nullptr); // only when asked for
    BOOST_TEST(run(g.get_state("s1", sg::state_options{.subgraphs = true})).tasks[0].state->ns == sub.ns);

    sg::json_update u;
    u.thread_id = "s1";
    u.ns = sub.ns;
    u.values = json::object{{"count", 7}};
    u.as_node = "inner_ask";
    (void)run(g.update_state(u));
    auto after = run(app.get_state("s1", {.subgraphs = true}));
    BOOST_TEST(after.tasks[0].state->values.at("count").as_int64() == 7);
    BOOST_TEST(after.values.count == 0); // the parent's own state is untouched until the subgraph finishes

    u.ns = "nowhere:1";
    try {
        (void)run(g.update_state(u));
        BOOST_FAIL("updated");
    } catch (const sg::graph_error& e) {
        BOOST_TEST((e.kind() == sg::errc::unknown_node));
        BOOST_TEST(std::string(e.what()).find("nowhere") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(shape_and_conversions)

BOOST_AUTO_TEST_CASE(topology_fields_and_typed_conversions) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = asking(saver);
    sg::json_graph g(app);
    BOOST_TEST(static_cast<bool>(g));
    BOOST_TEST(!static_cast<bool>(sg::json_graph{}));
    BOOST_TEST(g.fields() == (std::vector<std::string>{"question", "log", "count"}));
    BOOST_TEST(g.has_node("ask"));
    BOOST_TEST(!g.has_node("nope"));
    BOOST_TEST(g.shape().find("note") != nullptr);
    BOOST_TEST(g.checkpointer() == app.checkpointer());
    BOOST_TEST(g.signature() == app.signature());
    BOOST_TEST(g.core() == app.core());
    sg::json_graph from_core(app.core()); // as the server makes it from an assistant_spec
    BOOST_TEST(from_core.signature() == app.signature());
    BOOST_CHECK_THROW(sg::json_graph(std::shared_ptr<const sg::detail::graph_core>{}), std::invalid_argument);
    BOOST_CHECK_THROW((void)sg::json_graph{}.shape(), std::logic_error);

    st s{"q", {"x", "y"}, 3};
    auto j = sg::json_graph::to_json(s);
    BOOST_TEST(j == (json::object{{"question", "q"}, {"log", json::array{"x", "y"}}, {"count", 3}}));
    auto u = sg::json_graph::update_from_json<st>(json::object{{"count", 5}, {"log", json::object{{"__overwrite__", json::array{"z"}}}}});
    BOOST_TEST(u.has<&st::count>());
    BOOST_TEST(u.get<&st::count>() == 5);
    BOOST_TEST(!u.has<&st::question>());
    BOOST_TEST(u.overwrites<&st::log>()); // LangGraph's wire form of Overwrite, read as the engine reads it
    BOOST_TEST(u.get<&st::log>() == (std::vector<std::string>{"z"}));
    g.check_values(json::object{{"question", "ok"}}, "input");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(invalid_input_names_the_field) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    auto unknown = error_of([&] { g.check_values(json::object{{"questoin", "x"}}, "input"); });
    BOOST_TEST((unknown.kind() == sg::errc::invalid_input));
    BOOST_TEST(unknown.names().at(0) == "questoin");
    BOOST_TEST(std::string(unknown.what()).find("input: unknown field 'questoin' (did you mean 'question'?)") != std::string::npos);

    auto wrong = error_of([&] { (void)g.invoke(values_run(json::object{{"count", "many"}}, "e1")); });
    BOOST_TEST((wrong.kind() == sg::errc::invalid_input));
    BOOST_TEST(wrong.names().at(0) == "count");
    BOOST_TEST(std::string(wrong.what()).find("field 'count'") != std::string::npos);

    sg::json_update u;
    u.thread_id = "e1";
    u.values = json::object{{"log", "not a list"}};
    auto bad_update = error_of([&] { (void)g.update_state(std::move(u)); });
    BOOST_TEST((bad_update.kind() == sg::errc::invalid_input));
    BOOST_TEST(bad_update.names().at(0) == "log");

    auto typed = error_of([&] { (void)sg::json_graph::update_from_json<st>(json::object{{"nope", 1}}); });
    BOOST_TEST((typed.kind() == sg::errc::invalid_input));
    BOOST_TEST(typed.names().at(0) == "nope");
}

BOOST_AUTO_TEST_CASE(thread_checkpoint_and_resume_errors) {
    sg::json_graph g(asking(std::make_shared<sg::checkpoint::memory_saver>()));
    BOOST_TEST((error_of([&] { (void)run(g.get_state("none")); }).kind() == sg::errc::thread_not_found));
    BOOST_TEST((error_of([&] { (void)run(g.pending_interrupts("none")); }).kind() == sg::errc::thread_not_found));
    sg::json_run proceed; // continue a thread that never ran
    proceed.config.thread_id = "none";
    BOOST_TEST((error_of([&] { (void)run(g.invoke(std::move(proceed))); }).kind() == sg::errc::thread_not_found));
    auto r = run(g.invoke(values_run(json::object{{"question", "q"}}, "e2")));
    const std::optional<std::string> missing = std::string("no-such-checkpoint");
    auto cp = error_of([&] { (void)run(g.get_state("e2", missing)); });
    BOOST_TEST((cp.kind() == sg::errc::checkpoint_not_found));
    BOOST_TEST(cp.names().at(0) == "e2");

    sg::json_update at_missing;
    at_missing.thread_id = "e2";
    at_missing.checkpoint_id = "no-such-checkpoint";
    BOOST_TEST((error_of([&] { (void)run(g.update_state(std::move(at_missing))); }).kind() == sg::errc::checkpoint_not_found));
    sg::json_update bad_node;
    bad_node.thread_id = "e2";
    bad_node.as_node = "aks";
    auto node = error_of([&] { (void)run(g.update_state(std::move(bad_node))); });
    BOOST_TEST((node.kind() == sg::errc::unknown_node));
    BOOST_TEST(node.names().at(0) == "aks");

    sg::resume_input wrong_id;
    wrong_id.is_map = true;
    wrong_id.by_id["not-an-interrupt"] = "x";
    BOOST_TEST((error_of([&] { (void)run(g.invoke(resume_run(std::move(wrong_id), "e2"))); }).kind() ==
                sg::errc::unknown_interrupt_id));
    (void)run(g.invoke(resume_run(sg::resume(std::string("y")), "e2")));
    BOOST_TEST((error_of([&] { (void)run(g.invoke(resume_run(sg::resume(std::string("again")), "e2"))); }).kind() ==
                sg::errc::nothing_to_resume));
    BOOST_TEST(!r.checkpoint_id.empty());
}

BOOST_AUTO_TEST_CASE(run_errors_no_checkpointer_and_drift) {
    sg::json_graph bare(plain(nullptr));
    BOOST_TEST((error_of([&] { (void)run(bare.get_state("t")); }).kind() == sg::errc::no_checkpointer));
    BOOST_TEST((error_of([&] { (void)run(bare.get_state_history("t")); }).kind() == sg::errc::no_checkpointer));
    BOOST_TEST((error_of([&] { (void)bare.subgraph_namespaces("t"); }).kind() == sg::errc::no_checkpointer));
    auto ran = run(bare.invoke(values_run(json::object{}, "")));
    BOOST_TEST(strings(ran.values.at("log")) == (std::vector<std::string>{"one", "two"}));

    auto limited = values_run(json::object{}, "");
    limited.config.recursion_limit = 1;
    BOOST_TEST((error_of([&] { (void)run(bare.invoke(std::move(limited))); }).kind() == sg::errc::recursion_limit));

    sg::json_graph broken(failing());
    auto failed = error_of([&] { (void)run(broken.invoke(values_run(json::object{}, ""))); });
    BOOST_TEST((failed.kind() == sg::errc::node_failed));
    BOOST_TEST(failed.names().at(0) == "boom");

    // A thread written by another graph shape: updating it is graph_drift unless allowed.
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::json_graph one(plain(saver)), other(asking(saver));
    (void)run(one.invoke(values_run(json::object{}, "drift")));
    sg::json_update u;
    u.thread_id = "drift";
    u.as_node = "note";
    auto drift = error_of([&] { (void)run(other.update_state(u)); });
    BOOST_TEST((drift.kind() == sg::errc::graph_drift));
    u.allow_drift = true;
    BOOST_TEST(!run(other.update_state(std::move(u))).empty());
}

BOOST_AUTO_TEST_SUITE_END()
