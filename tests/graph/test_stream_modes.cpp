// Stream modes `tasks`, `checkpoints`, `debug` and `messages` (issue 12, feature 7).
//
// The expected sequences are those LangGraph.js 1.7.3 streamed for the same graph (START -> a ->
// b -> END; `log` appends; b interrupts with "q?" and is resumed with "yes"), recorded with
//   graph.stream({log: ["in"]}, {streamMode: ["tasks"] | ["checkpoints"] | ["debug"], ...})
// Ids and timestamps differ by nature and are compared by shape only. Where we differ: our
// states list every field (LangGraph leaves out a field never written), and a checkpoint's
// parent is `parent_config` (the Agent Server's spelling; LangGraph.js prints `parentConfig`).
#include <stategraph/state_graph.hpp>

#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

namespace sg = stategraph;
using sg::test::run;

namespace stream_modes_test {
struct st {
    std::vector<std::string> log;
    int v = 0;
};
BOOST_DESCRIBE_STRUCT(st, (), (log, v))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
using upd = sg::update<st>;

sg::compiled_graph<st> asking_graph(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return upd{}.set<&st::log>({"a"}).set<&st::v>(1); });
    g.add_node("b", [](const st&, sg::context& ctx) {
        auto x = ctx.interrupt_now<std::string>("q?");
        return upd{}.set<&st::log>({"b:" + x});
    });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

struct recorded {
    std::vector<sg::stream_event> events;
    sg::stream_handler handler() {
        return [this](const sg::stream_event& e) { events.push_back(e); };
    }
};

std::string js(const boost::json::value& v) { return boost::json::serialize(v); }
const boost::json::object& obj(const boost::json::value& v) { return v.as_object(); }

/// A field type that counts its encodings to JSON (the `values` stream's cache, below).
inline int notes_encoded = 0;
struct note {
    std::string text;
};
inline void tag_invoke(boost::json::value_from_tag, boost::json::value& v, const note& n) {
    ++notes_encoded;
    v = n.text;
}
inline note tag_invoke(boost::json::value_to_tag<note>, const boost::json::value& v) { return {std::string(v.as_string())}; }
struct noted {
    int v = 0;
    note n;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(noted, (), (v, n, log))
inline auto reducers(sg::for_state<noted>) { return sg::reducers{sg::reduce<&noted::log>(sg::append)}; }

} // namespace stream_modes_test
using namespace stream_modes_test;

BOOST_AUTO_TEST_SUITE(stream_modes)

BOOST_AUTO_TEST_CASE(tasks_mode_streams_each_task_start_and_result_as_langgraph) {
    auto app = asking_graph(std::make_shared<sg::checkpoint::memory_saver>());
    recorded first, second;
    run(app.stream(upd{}.set<&st::log>({"in"}), {.thread_id = "t"}, sg::stream_mode::tasks, first.handler()));
    run(app.stream(sg::resume(std::string("yes")), {.thread_id = "t"}, sg::stream_mode::tasks, second.handler()));

    const auto& e = first.events;
    BOOST_REQUIRE_EQUAL(e.size(), 4u);
    for (const auto& x : e) BOOST_TEST((x.mode == sg::stream_mode::tasks));
    BOOST_TEST(obj(e[0].data).at("name") == "a");
    BOOST_TEST(js(obj(e[0].data).at("input").at("log")) == R"(["in"])");
    BOOST_TEST(js(obj(e[0].data).at("triggers")) == R"(["branch:to:a"])");
    BOOST_TEST(js(obj(e[0].data).at("interrupts")) == "[]");
    BOOST_TEST(e[0].step == 1);
    BOOST_TEST(obj(e[1].data).at("id") == obj(e[0].data).at("id")); // the result names its task
    BOOST_TEST(js(obj(e[1].data).at("result")) == R"({"log":["a"],"v":1})");
    BOOST_TEST(obj(e[1].data).at("error").is_null());
    BOOST_TEST(js(obj(e[2].data).at("input").at("log")) == R"(["in","a"])");
    BOOST_TEST(js(obj(e[2].data).at("triggers")) == R"(["branch:to:b"])");
    BOOST_TEST(e[2].step == 2);
    BOOST_TEST(js(obj(e[3].data).at("result")) == "{}");
    BOOST_REQUIRE_EQUAL(obj(e[3].data).at("interrupts").as_array().size(), 1u);
    BOOST_TEST(obj(e[3].data).at("interrupts").as_array()[0].at("value") == "q?");

    // The resume runs b again: its start and its result, with the answer's writes.
    const auto& r = second.events;
    BOOST_REQUIRE_EQUAL(r.size(), 2u);
    BOOST_TEST(obj(r[0].data).at("name") == "b");
    BOOST_TEST(obj(r[0].data).at("id") == obj(e[2].data).at("id")); // the same task
    BOOST_TEST(js(obj(r[1].data).at("result")) == R"({"log":["b:yes"]})");
    BOOST_TEST(js(obj(r[1].data).at("interrupts")) == "[]");
}

BOOST_AUTO_TEST_CASE(checkpoints_mode_streams_each_checkpoint_as_get_state_shows_it) {
    auto app = asking_graph(std::make_shared<sg::checkpoint::memory_saver>());
    recorded first, second;
    run(app.stream(upd{}.set<&st::log>({"in"}), {.thread_id = "t"}, sg::stream_mode::checkpoints, first.handler()));
    auto history = run(app.get_state_history("t"));
    run(app.stream(sg::resume(std::string("yes")), {.thread_id = "t"}, sg::stream_mode::checkpoints, second.handler()));

    struct want {
        std::int64_t step;
        const char* source;
        const char* next;
        const char* log;
    };
    auto check = [](const sg::stream_event& e, const want& w) {
        BOOST_TEST((e.mode == sg::stream_mode::checkpoints));
        const auto& p = obj(e.data);
        BOOST_TEST(p.at("metadata").at("step").as_int64() == w.step);
        BOOST_TEST(p.at("metadata").at("source") == w.source);
        BOOST_TEST(js(p.at("next")) == w.next);
        BOOST_TEST(js(p.at("values").at("log")) == w.log);
        BOOST_TEST(p.at("config").at("configurable").at("thread_id") == "t");
        BOOST_TEST(p.at("config").at("configurable").at("checkpoint_ns") == "");
        BOOST_TEST(e.step == w.step);
    };
    const auto& e = first.events;
    BOOST_REQUIRE_EQUAL(e.size(), 3u);
    check(e[0], {-1, "input", R"(["__start__"])", "[]"});
    check(e[1], {0, "loop", R"(["a"])", R"(["in"])"});
    check(e[2], {1, "loop", R"(["b"])", R"(["in","a"])"});
    BOOST_TEST(!obj(e[0].data).contains("parent_config"));
    BOOST_TEST(js(obj(e[0].data).at("tasks").at(0).at("name")) == R"("__start__")");
    // Each event is the checkpoint the history holds, its parent the one before.
    BOOST_REQUIRE_EQUAL(history.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
        BOOST_TEST(obj(e[i].data).at("config").at("configurable").at("checkpoint_id").as_string() == history[2 - i].checkpoint_id);
        if (i > 0)
            BOOST_TEST(obj(e[i].data).at("parent_config").at("configurable").at("checkpoint_id").as_string() ==
                       history[3 - i].checkpoint_id);
    }
    // The resume first shows the checkpoint it goes on from, with b's pending interrupt.
    const auto& r = second.events;
    BOOST_REQUIRE_EQUAL(r.size(), 2u);
    check(r[0], {1, "loop", R"(["b"])", R"(["in","a"])"});
    const auto& task = obj(r[0].data).at("tasks").at(0);
    BOOST_TEST(task.at("name") == "b");
    BOOST_TEST(task.at("interrupts").at(0).at("value") == "q?");
    check(r[1], {2, "loop", "[]", R"(["in","a","b:yes"])"});
    BOOST_TEST(js(obj(r[1].data).at("tasks")) == "[]");
}

BOOST_AUTO_TEST_CASE(debug_mode_wraps_tasks_and_checkpoints_in_langgraphs_envelope) {
    auto app = asking_graph(std::make_shared<sg::checkpoint::memory_saver>());
    recorded first, second;
    run(app.stream(upd{}.set<&st::log>({"in"}), {.thread_id = "t"}, sg::stream_mode::debug, first.handler()));
    run(app.stream(sg::resume(std::string("yes")), {.thread_id = "t"}, sg::stream_mode::debug, second.handler()));
    auto shape = [](const std::vector<sg::stream_event>& events) {
        std::string out;
        for (const auto& e : events) {
            BOOST_TEST((e.mode == sg::stream_mode::debug));
            const auto& d = obj(e.data);
            BOOST_TEST(d.at("timestamp").as_string().size() == 24u); // 2026-11-24T02:00:58.012Z
            BOOST_TEST(d.at("payload").is_object());
            out += std::string(d.at("type").as_string()) + "@" + std::to_string(d.at("step").as_int64()) + " ";
        }
        return out;
    };
    BOOST_TEST(shape(first.events) == "checkpoint@-1 checkpoint@0 task@1 task_result@1 checkpoint@1 task@2 task_result@2 ");
    BOOST_TEST(shape(second.events) == "checkpoint@1 task@2 task_result@2 checkpoint@2 ");
}

// Without a checkpointer there are no checkpoints to stream (as LangGraph); tasks still are.
BOOST_AUTO_TEST_CASE(without_a_checkpointer_debug_streams_tasks_only) {
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return upd{}.set<&st::v>(1); });
    g.add_edge(sg::START, "a").add_edge("a", sg::END);
    recorded rec;
    run(g.compile().stream(upd{}, {}, sg::stream_mode::debug | sg::stream_mode::checkpoints, rec.handler()));
    BOOST_REQUIRE_EQUAL(rec.events.size(), 2u);
    BOOST_TEST(obj(rec.events[0].data).at("type") == "task");
    BOOST_TEST(obj(rec.events[1].data).at("type") == "task_result");
}

// A retried task is one task: one start, one result (its last attempt's).
BOOST_AUTO_TEST_CASE(a_retried_task_streams_one_start_and_one_result) {
    sg::state_graph<st> g;
    auto calls = std::make_shared<int>(0);
    g.add_node("flaky", [calls](const st&) {
        if (++*calls == 1) throw std::runtime_error("transient");
        return upd{}.set<&st::v>(2);
    }, {.retry = sg::retry_policy{.max_attempts = 2, .initial_interval = std::chrono::milliseconds(1)}});
    g.add_edge(sg::START, "flaky").add_edge("flaky", sg::END);
    recorded rec;
    run(g.compile().stream(upd{}, {}, sg::stream_mode::tasks, rec.handler()));
    BOOST_TEST(*calls == 2);
    BOOST_REQUIRE_EQUAL(rec.events.size(), 2u);
    BOOST_TEST(js(obj(rec.events[1].data).at("result")) == R"({"v":2})");
    BOOST_TEST(obj(rec.events[1].data).at("error").is_null());
}

BOOST_AUTO_TEST_CASE(a_failed_task_streams_its_error) {
    sg::state_graph<st> g;
    g.add_node("broken", [](const st&) -> upd { throw std::runtime_error("disk on fire"); });
    g.add_edge(sg::START, "broken").add_edge("broken", sg::END);
    recorded rec;
    BOOST_CHECK_THROW(run(g.compile().stream(upd{}, {}, sg::stream_mode::tasks, rec.handler())), sg::node_error);
    BOOST_REQUIRE_EQUAL(rec.events.size(), 2u);
    BOOST_TEST(std::string(obj(rec.events[1].data).at("error").as_string()) == "disk on fire");
}

// messages: a node streams tokens through ctx; each arrives as [chunk, metadata].
BOOST_AUTO_TEST_CASE(messages_mode_carries_the_tokens_a_node_writes) {
    sg::state_graph<st> g;
    auto asked = std::make_shared<std::vector<bool>>();
    g.add_node("model", [asked](const st&, sg::context& ctx) {
        asked->push_back(ctx.streams_messages());
        for (const char* token : {"Hel", "lo", "!"})
            ctx.write_message(boost::json::object{{"type", "AIMessageChunk"}, {"content", token}, {"id", "run-1"}});
        return upd{}.set<&st::log>({"Hello!"});
    });
    g.add_edge(sg::START, "model").add_edge("model", sg::END);
    auto app = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    recorded rec;
    run(app.stream(upd{}, {.thread_id = "m"}, sg::stream_mode::messages, rec.handler()));
    BOOST_REQUIRE_EQUAL(rec.events.size(), 3u);
    std::string text;
    for (const auto& e : rec.events) {
        BOOST_TEST((e.mode == sg::stream_mode::messages));
        BOOST_TEST(e.node == "model");
        const auto& pair = e.data.as_array();
        BOOST_REQUIRE_EQUAL(pair.size(), 2u);
        text += std::string(pair[0].at("content").as_string());
        BOOST_TEST(pair[1].at("langgraph_node") == "model");
        BOOST_TEST(pair[1].at("langgraph_step").as_int64() == 1);
        BOOST_TEST(pair[1].at("thread_id") == "m");
        BOOST_TEST(!pair[1].at("run_id").as_string().empty());
    }
    BOOST_TEST(text == "Hello!");
    // Not asked for: nothing is built or streamed, and the node can tell.
    recorded none;
    run(app.stream(upd{}, {.thread_id = "m2"}, sg::stream_mode::updates, none.handler()));
    BOOST_TEST(none.events.size() == 1u); // the update only
    BOOST_TEST(*asked == (std::vector<bool>{true, false}));
}

BOOST_AUTO_TEST_CASE(values_mode_encodes_a_field_again_only_in_a_step_that_changed_it) {
    // START -> a -> {b, c} -> d -> END, no checkpointer (nothing else encodes the state): `n` is
    // written by c only. Each values event shows the whole state, but `n` is encoded twice: the
    // input's event, and the step where c ran.
    using nu = sg::update<noted>;
    sg::state_graph<noted> g;
    g.add_node("a", [](const noted& s) { return nu{}.set<&noted::v>(s.v + 1).set<&noted::log>({"a"}); });
    g.add_node("b", [](const noted&) { return nu{}.set<&noted::log>({"b"}); });
    g.add_node("c", [](const noted&) { return nu{}.set<&noted::n>(note{"from c"}); });
    g.add_node("d", [](const noted& s) { return nu{}.set<&noted::v>(s.v + 10).set<&noted::log>({"d"}); });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("a", "c").add_edge("b", "d").add_edge("c", "d");
    g.add_edge("d", sg::END);
    auto app = g.compile();
    recorded values;
    notes_encoded = 0;
    auto r = run(app.stream(nu{}.set<&noted::v>(1), {}, sg::stream_mode::values, values.handler()));
    BOOST_TEST(r.values.n.text == "from c");
    BOOST_TEST(notes_encoded == 2);
    BOOST_REQUIRE_EQUAL(values.events.size(), 4u);
    const char* expected[] = {R"({"v":1,"n":"","log":[]})", R"({"v":2,"n":"","log":["a"]})",
                              R"({"v":2,"n":"from c","log":["a","b"]})", R"({"v":12,"n":"from c","log":["a","b","d"]})"};
    for (std::size_t i = 0; i < 4; ++i) {
        BOOST_TEST((values.events[i].mode == sg::stream_mode::values));
        BOOST_TEST(js(values.events[i].data) == expected[i]);
    }
    // A second call starts from the state again (a cache belongs to one call).
    recorded again;
    notes_encoded = 0;
    run(app.stream(nu{}.set<&noted::v>(5), {}, sg::stream_mode::values, again.handler()));
    BOOST_TEST(notes_encoded == 2);
    BOOST_REQUIRE_EQUAL(again.events.size(), 4u);
    BOOST_TEST(js(again.events.back().data) == R"({"v":16,"n":"from c","log":["a","b","d"]})");
}

BOOST_AUTO_TEST_SUITE_END()
