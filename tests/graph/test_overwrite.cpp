// Overwrite for reducer fields (issue 12, feature 10): `update<S>::overwrite<&S::field>(v)` sets a
// field bypassing its reducer, as LangGraph's `Overwrite`. In a step it wins over the other
// writes of the field; two overwrites of one field in one step are an error naming both nodes;
// it survives checkpoints (whole, never as an append delta), pending writes and JSON.
#include <stategraph/state_graph.hpp>

#include <boost/json/parse.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

namespace sg = stategraph;
using sg::test::run;

namespace overwrite_test {
struct st {
    std::vector<std::string> log;
    int total = 0;
    std::string note;
};
BOOST_DESCRIBE_STRUCT(st, (), (log, total, note))
inline auto reducers(sg::for_state<st>) {
    return sg::reducers{sg::reduce<&st::log>(sg::append), sg::reduce<&st::total>([](int a, int b) { return a + b; })};
}
using upd = sg::update<st>;

auto appender(std::string item) {
    return [item](const st&) { return upd{}.set<&st::log>({item}).set<&st::total>(1); };
}
auto resetter(std::vector<std::string> to) {
    return [to](const st&) { return upd{}.overwrite<&st::log>(to).overwrite<&st::total>(100); };
}
} // namespace overwrite_test
using namespace overwrite_test;

BOOST_AUTO_TEST_SUITE(overwrite)

BOOST_AUTO_TEST_CASE(an_overwrite_replaces_a_reducer_field_and_streams_in_langgraph_wire_form) {
    sg::state_graph<st> g;
    g.add_node("a", appender("a"));
    g.add_node("reset", resetter({"fresh"}));
    g.add_node("c", appender("c"));
    g.add_edge(sg::START, "a").add_edge("a", "reset").add_edge("reset", "c").add_edge("c", sg::END);
    auto app = g.compile();
    std::vector<boost::json::object> updates;
    auto on_event = [&](const sg::stream_event& e) {
        if (e.mode == sg::stream_mode::updates) updates.push_back(boost::json::object{{e.node, e.data}});
    };
    auto r = run(app.stream(upd{}.set<&st::log>({"in"}).set<&st::total>(5), {}, sg::stream_mode::updates, on_event));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"fresh", "c"}));
    BOOST_TEST(r.values.total == 101); // 5 + 1, overwritten to 100, + 1
    BOOST_REQUIRE_EQUAL(updates.size(), 3u);
    BOOST_TEST(boost::json::serialize(updates[1]) ==
               R"({"reset":{"log":{"__overwrite__":["fresh"]},"total":{"__overwrite__":100}}})");
}

// START fans out to two nodes in one step; whichever order the tasks run and apply in, the
// overwrite decides the field and the other node's append of that step is dropped (LangGraph's
// BinaryOperatorAggregate does the same). Fields the overwrite does not touch reduce as usual.
BOOST_AUTO_TEST_CASE(an_overwrite_wins_over_the_other_writes_of_its_step_in_either_order) {
    for (bool overwrite_first : {true, false}) {
        sg::state_graph<st> g;
        // Tasks of a step run and apply in node-name order: "a" before "b".
        g.add_node(overwrite_first ? "a" : "b", [](const st&) { return upd{}.overwrite<&st::log>({"over"}); });
        g.add_node(overwrite_first ? "b" : "a", appender("append"));
        g.add_edge(sg::START, "a").add_edge(sg::START, "b").add_edge("a", sg::END).add_edge("b", sg::END);
        auto app = g.compile();
        auto r = run(app.invoke(upd{}.set<&st::log>({"in"})));
        BOOST_TEST(r.values.log == (std::vector<std::string>{"over"}), "overwrite first: " << overwrite_first);
        BOOST_TEST(r.values.total == 1); // the appender's other field still reduces
    }
}

BOOST_AUTO_TEST_CASE(two_overwrites_of_one_field_in_one_step_name_the_field_and_both_nodes) {
    sg::state_graph<st> g;
    g.add_node("left", resetter({"l"}));
    g.add_node("right", [](const st&) { return upd{}.overwrite<&st::log>({"r"}); });
    g.add_edge(sg::START, "left").add_edge(sg::START, "right").add_edge("left", sg::END).add_edge("right", sg::END);
    auto app = g.compile();
    try {
        run(app.invoke(upd{}));
        BOOST_FAIL("two overwrites in one step were accepted");
    } catch (const sg::invalid_update_error& e) {
        BOOST_TEST(e.kind() == sg::errc::invalid_concurrent_update);
        const std::string msg = e.what();
        BOOST_TEST(msg.find("field 'log' was overwritten by 'left', 'right'") != std::string::npos, msg);
        BOOST_TEST(e.names() == (std::vector<std::string>{"log", "left", "right"}));
    }
}

// An append list is checkpointed as deltas while it only grows. An overwrite with a longer list
// must be saved whole: read back by another compiled graph (restored from the saved records),
// the state is what the run ended with.
BOOST_AUTO_TEST_CASE(an_overwrite_is_checkpointed_whole_and_reads_back) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto build = [&] {
        sg::state_graph<st> g;
        g.add_node("a", appender("a"));
        g.add_node("b", appender("b"));
        g.add_node("reset", resetter({"x", "y", "z", "w"}));
        g.add_node("c", appender("c"));
        g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", "reset").add_edge("reset", "c").add_edge("c", sg::END);
        return g.compile({.checkpointer = saver});
    };
    auto app = build();
    auto r = run(app.invoke(upd{}.set<&st::log>({"in"}), {.thread_id = "t"}));
    const std::vector<std::string> expected{"x", "y", "z", "w", "c"};
    BOOST_TEST(r.values.log == expected);
    auto again = build();
    auto s = run(again.get_state("t"));
    BOOST_TEST(s.values.log == expected);
    BOOST_TEST(s.values.total == 101);
    auto h = run(again.get_state_history("t"));
    BOOST_REQUIRE(h.size() >= 4u);
    BOOST_TEST(h[1].values.log == (std::vector<std::string>{"x", "y", "z", "w"})); // after reset
    BOOST_TEST(h[2].values.log == (std::vector<std::string>{"in", "a", "b"}));    // before it
    // A second turn: the list grows (saved as deltas) and is overwritten again by the reset node.
    auto r2 = run(app.invoke(upd{}.set<&st::log>({"turn2"}), {.thread_id = "t"}));
    BOOST_TEST(r2.values.log == expected);
    auto h2 = run(build().get_state_history("t"));
    BOOST_TEST(h2[2].values.log == (std::vector<std::string>{"x", "y", "z", "w", "c", "turn2", "a", "b"}));
    BOOST_TEST(h2[0].values.log == expected);
}

// The input and update_state can overwrite too: a new turn resets the thread's list.
BOOST_AUTO_TEST_CASE(an_input_and_update_state_can_overwrite) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::state_graph<st> g;
    g.add_node("a", appender("a"));
    g.add_edge(sg::START, "a").add_edge("a", sg::END);
    auto app = g.compile({.checkpointer = saver});
    run(app.invoke(upd{}.set<&st::log>({"one"}), {.thread_id = "t"}));
    auto r = run(app.invoke(upd{}.overwrite<&st::log>({"two"}), {.thread_id = "t"}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"two", "a"}));
    run(app.update_state("t", upd{}.overwrite<&st::log>({"edited"})));
    BOOST_TEST(run(app.get_state("t")).values.log == (std::vector<std::string>{"edited"}));
    run(app.update_state("t", upd{}.set<&st::log>({"more"})));
    BOOST_TEST(run(app.get_state("t")).values.log == (std::vector<std::string>{"edited", "more"}));
}

// A finished task's overwrite is saved as a pending write while another task of its step waits
// for a human; on resume it is read back as an overwrite (not an append) and still wins.
BOOST_AUTO_TEST_CASE(an_overwrite_saved_as_a_pending_write_survives_a_resume) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::state_graph<st> g;
    g.add_node("asks", [](const st&, sg::context& ctx) {
        auto answer = ctx.interrupt_now<std::string>("note?");
        return upd{}.set<&st::note>(answer).set<&st::log>({"asked"});
    });
    g.add_node("resets", resetter({"reset"}));
    g.add_edge(sg::START, "asks").add_edge(sg::START, "resets").add_edge("asks", sg::END).add_edge("resets", sg::END);
    auto app = g.compile({.checkpointer = saver});
    auto first = run(app.invoke(upd{}.set<&st::log>({"in"}), {.thread_id = "t"}));
    BOOST_REQUIRE(first.status == sg::run_status::interrupted);
    BOOST_TEST(first.values.log == (std::vector<std::string>{"reset"})); // the finished task's writes
    auto snap = run(app.get_state("t"));
    BOOST_TEST(snap.values.log == (std::vector<std::string>{"reset"}));
    BOOST_REQUIRE_EQUAL(snap.tasks.size(), 2u);
    BOOST_TEST(boost::json::serialize(*snap.tasks[1].result) == R"({"log":{"__overwrite__":["reset"]},"total":{"__overwrite__":100}})");
    auto done = run(app.invoke(sg::resume(std::string("hi")), {.thread_id = "t"}));
    BOOST_TEST(done.values.note == "hi");
    BOOST_TEST(done.values.log == (std::vector<std::string>{"reset"}));
    BOOST_TEST(done.values.total == 100);
}

// JSON: `{"__overwrite__": v}` on a reducer field reads as an overwrite; on a last-value field
// it is an ordinary value (there, an overwrite is a plain set and is written plainly).
BOOST_AUTO_TEST_CASE(the_wire_form_reads_back_only_on_reducer_fields) {
    using ops = sg::detail::state_ops<st>;
    auto u = ops::update_from_json(boost::json::parse(R"({"log":{"__overwrite__":["a"]},"total":3})").as_object(),
                                   sg::errc::invalid_input, "test");
    BOOST_TEST(u.overwrites<&st::log>());
    BOOST_TEST(!u.overwrites<&st::total>());
    BOOST_TEST(u.get<&st::log>() == (std::vector<std::string>{"a"}));
    BOOST_TEST(boost::json::serialize(ops::update_json(u)) == R"({"log":{"__overwrite__":["a"]},"total":3})");
    BOOST_TEST(boost::json::serialize(ops::update_json(upd{}.overwrite<&st::note>("n"))) == R"({"note":"n"})");
    BOOST_CHECK_THROW(ops::update_from_json(boost::json::parse(R"({"note":{"__overwrite__":"n"}})").as_object(),
                                            sg::errc::invalid_input, "test"),
                      sg::graph_error);
}

BOOST_AUTO_TEST_SUITE_END()
