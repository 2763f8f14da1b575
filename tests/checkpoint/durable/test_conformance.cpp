// Conformance cases about durable threads (interrupts, breakpoints, update_state, subgraph
// interrupts), compared with the LangGraph golden traces, on both checkpointers.
// Each case replays the golden file's calls (conformance::replay, tests/support/golden.hpp).
#define BOOST_TEST_MODULE durable
#include "durable_common.hpp"
#include "golden.hpp"

using namespace durable;
namespace cf = stategraph::conformance;

namespace {
/// The side counters as the golden files record them.
std::function<json::object()> counted(counters& side) {
    return [&side] {
        std::lock_guard l(side.m);
        return cf::counters_json(side.c);
    };
}
} // namespace

namespace c11 {
struct st {
    std::string question;
    std::string answer;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(st, (), (question, answer, trail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }
} // namespace c11

namespace c13 {
struct st {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
} // namespace c13

namespace c14 {
struct st {
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(st, (), (trail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }
} // namespace c14

namespace c16 {
struct st {
    std::string value;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(st, (), (value, trail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }
} // namespace c16

namespace c19 {
struct st {
    std::vector<std::string> trail;
    std::string answer;
};
BOOST_DESCRIBE_STRUCT(st, (), (trail, answer))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }
} // namespace c19

BOOST_AUTO_TEST_SUITE(conformance)

// 11_interrupt_resume: interrupt() then resume; the node re-runs from its start; new input
// instead of a resume abandons the interrupt.
BOOST_DATA_TEST_CASE(case_11_interrupt_resume, savers(), kind) {
    using c11::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("prep", [&side](const st&) {
        side.bump("prep");
        return sg::update<st>{}.set<&st::trail>({"prep"});
    });
    g.add_node("ask", [&side](const st& s, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        side.bump("ask.start");
        json::object payload;
        payload["question"] = s.question;
        auto pending = ctx.interrupt<std::string>(payload);
        std::string answer = co_await std::move(pending);
        side.bump("ask.after_interrupt");
        co_return sg::update<st>{}.set<&st::answer>(answer).set<&st::trail>({"ask"});
    });
    g.add_node("done", [](const st& s) { return sg::update<st>{}.set<&st::trail>({"done:" + s.answer}); });
    g.add_edge(sg::START, "prep").add_edge("prep", "ask").add_edge("ask", "done").add_edge("done", sg::END);
    cf::replay<st> c("11_interrupt_resume", g.compile({.checkpointer = env.saver}), counted(side));
    c.run_all();
}

// 13_parallel_interrupts: two parallel interrupts, resume by id map, by one plain value, and
// partially; the finished sibling r never re-runs.
BOOST_DATA_TEST_CASE(case_13_parallel_interrupts, savers(), kind) {
    using c13::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    for (std::string n : {"p", "q"})
        g.add_node(n, [&side, n](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
            side.bump(n + ".start");
            auto pending = ctx.interrupt<std::string>(n + "?");
            std::string v = co_await std::move(pending);
            co_return sg::update<st>{}.set<&st::log>({n + "=" + v});
        });
    g.add_node("r", [&side](const st&) {
        side.bump("r.start");
        return sg::update<st>{}.set<&st::log>({"r"});
    });
    g.add_node("after", [](const st&) { return sg::update<st>{}.set<&st::log>({"after"}); });
    for (std::string n : {"p", "q", "r"}) g.add_edge(sg::START, n).add_edge(n, "after");
    g.add_edge("after", sg::END);
    cf::replay<st> c("13_parallel_interrupts", g.compile({.checkpointer = env.saver}), counted(side));
    c.run_all();
}

// 14_interrupt_before: static breakpoint before b; continuing with no input goes on; new
// input stops there again.
BOOST_DATA_TEST_CASE(case_14_interrupt_before, savers(), kind) {
    using c14::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    for (std::string n : {"a", "b", "c"})
        g.add_node(n, [&side, n](const st&) {
            side.bump(n);
            return sg::update<st>{}.set<&st::trail>({n});
        });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    cf::replay<st> c("14_interrupt_before", g.compile({.checkpointer = env.saver, .interrupt_before = {"b"}}), counted(side));
    c.run_all();
}

// 16_update_state: update_state without as_node (last writer), as node b (b skipped), twice
// in a row; source "update"; the breakpoint does not fire again.
BOOST_DATA_TEST_CASE(case_16_update_state, savers(), kind) {
    using c16::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    for (std::string n : {"a", "b", "c"})
        g.add_node(n, [&side, n](const st& s) {
            side.bump(n);
            return sg::update<st>{}.set<&st::value>(s.value + "+" + n).set<&st::trail>({n});
        });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", sg::END);
    cf::replay<st> c("16_update_state", g.compile({.checkpointer = env.saver, .interrupt_before = {"b"}}), counted(side));
    c.run_all();
}

// 19_subgraph_interrupt: an interrupt inside a subgraph surfaces at the parent and resumes
// from the parent's thread; subgraph nodes before the interrupt do not re-run.
BOOST_DATA_TEST_CASE(case_19_subgraph_interrupt, savers(), kind) {
    using c19::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> sub("sub");
    sub.add_node("s_pre", [&side](const st&) {
        side.bump("s_pre");
        return sg::update<st>{}.set<&st::trail>({"s_pre"});
    });
    sub.add_node("s_ask", [&side](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        side.bump("s_ask.start");
        auto pending = ctx.interrupt<std::string>(std::string("sub question"));
        std::string a = co_await std::move(pending);
        side.bump("s_ask.after");
        co_return sg::update<st>{}.set<&st::answer>(a).set<&st::trail>({"s_ask"});
    });
    sub.add_edge(sg::START, "s_pre").add_edge("s_pre", "s_ask").add_edge("s_ask", sg::END);
    auto sub_app = sub.compile();

    sg::state_graph<st> g("parent");
    g.add_node("before", [&side](const st&) {
        side.bump("before");
        return sg::update<st>{}.set<&st::trail>({"before"});
    });
    g.add_node("sub", sub_app);
    g.add_node("after", [&side](const st& s) {
        side.bump("after");
        return sg::update<st>{}.set<&st::trail>({"after:" + s.answer});
    });
    g.add_edge(sg::START, "before").add_edge("before", "sub").add_edge("sub", "after").add_edge("after", sg::END);
    cf::replay<st> c("19_subgraph_interrupt", g.compile({.checkpointer = env.saver}), counted(side));
    c.patch = [](std::size_t i, json::object& run) {
        if (i != 1) return;
        // DIFFERENCE: the subgraph node's update is only what the subgraph wrote, not its whole
        // final state, so the parent's list prefix is not appended a second time:
        // LangGraph's update {trail: [before, s_pre, s_ask]} is ours {trail: [s_pre, s_ask]}
        // and the final trail is [before, s_pre, s_ask, after:yes] (LangGraph: before twice).
        auto& step2 = run["updates"].as_array()[0].as_object()["events"].as_array();
        for (auto& e : step2) {
            auto& ev = e.as_object();
            if (ev["ns"].as_array().empty()) ev["update"].as_object()["sub"].as_object()["trail"] = json::array{"s_pre", "s_ask"};
        }
        json::array final_trail{"before", "s_pre", "s_ask", "after:yes"};
        run["result"].as_object()["trail"] = final_trail;
        run["state"].as_object()["values"].as_object()["trail"] = final_trail;
    };
    BOOST_REQUIRE_EQUAL(c.file.size(), 2u);
    c.run_one(0);

    // The subgraph keeps its own checkpoint in the parent's thread, in namespace
    // "sub:<task id>" (golden: getState(subgraphs: true) shows it as the sub task's state:
    // values {trail: [before, s_pre]}, next [s_ask], s_ask's interrupt, step 1, source loop).
    auto parent = run(c.app.get_state("t1"));
    const std::string ns = "sub:" + parent.checkpoint_id + ":sub";
    auto sub_head = run(env.saver->get("t1", ns, std::nullopt));
    BOOST_REQUIRE(sub_head.has_value());
    BOOST_TEST(sub_head->cp.step == 1);
    BOOST_TEST(sub_head->cp.source == "loop");
    BOOST_TEST(sub_head->cp.values.at("trail") == (json::value{"before", "s_pre"}));
    BOOST_TEST(sub_head->cp.frontier.at("pull") == (json::value{"s_ask"}));
    bool asks = false;
    for (const auto& w : sub_head->writes)
        if (w.task_name == "s_ask" && w.channel == "__interrupt__")
            asks = w.value.at(0).at("value") == json::value("sub question") &&
                   w.value.at(0).at("id") == json::value(parent.tasks.at(0).interrupts.at(0).id);
    BOOST_TEST(asks);

    c.run_one(1); // patched as above
}

BOOST_AUTO_TEST_SUITE_END()
