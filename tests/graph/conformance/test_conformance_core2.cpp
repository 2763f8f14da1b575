// LangGraph conformance, core runtime (part 2): cases 09, 10, 18, 20 (Send, Command, subgraph,
// retry). Same approach as test_conformance_core.cpp; deliberate differences are patched into
// the golden run and explained in comments starting with "DIFFERENCE:".
#include <stategraph/state_graph.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include <cctype>
#include <chrono>
#include <stdexcept>
#include <variant>

#include "golden.hpp"

namespace sg = stategraph;
namespace cf = stategraph::conformance;
namespace json = boost::json;

namespace {
sg::run_config thread_cfg(std::string thread) {
    sg::run_config c;
    c.thread_id = std::move(thread);
    return c;
}
sg::compile_options with_memory() { return {.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()}; }

boost::asio::awaitable<void> sleep_ms(const boost::asio::any_io_executor& ex, int ms) {
    boost::asio::steady_timer t(ex, std::chrono::milliseconds(ms));
    co_await t.async_wait(boost::asio::use_awaitable);
}
} // namespace

// ---------------------------------------------------------------------------------------------
namespace c09 {
struct st {
    std::vector<std::string> items;
    std::vector<std::string> results;
    std::optional<std::string> summary;
};
BOOST_DESCRIBE_STRUCT(st, (), (items, results, summary))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::results>(sg::append)}; }

/// What a worker reads: only its Send payload, not the graph state.
struct worker_input {
    std::string item;
    int idx = 0;
};
BOOST_DESCRIBE_STRUCT(worker_input, (), (item, idx))
} // namespace c09

BOOST_AUTO_TEST_CASE(case_09_send_map_reduce) {
    using c09::st;
    using c09::worker_input;
    cf::golden_case gc("09_send_map_reduce");
    BOOST_TEST(gc.size() == 1u);
    cf::id_mapper ids;
    cf::counter_map counters;
    sg::state_graph<st> g;
    g.add_node("plan", [](const st&) { return sg::update<st>{}.set<&st::results>({"plan"}); });
    // The worker waits (3 - idx) * 15 ms so item 0 finishes last; zz_audit waits 60 ms and finishes
    // after every worker: the writes must still be applied zz_audit first, then Sends in Send order.
    g.add_node("worker", [&counters](const worker_input& in, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        co_await sleep_ms(ctx.executor(), (3 - in.idx) * 15);
        ++counters["worker"];
        std::string upper = in.item;
        for (auto& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        std::vector<std::string> keys;
        const boost::json::value as_json = boost::json::value_from(in);
        for (const auto& [k, v] : as_json.as_object()) keys.emplace_back(k);
        std::sort(keys.begin(), keys.end());
        std::string joined;
        for (const auto& k : keys) joined += (joined.empty() ? "" : "+") + k;
        std::vector<std::string> out{std::to_string(in.idx) + ":" + upper + ":keys=" + joined};
        co_return sg::update<st>{}.set<&st::results>(std::move(out));
    });
    g.add_node("zz_audit", [](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        co_await sleep_ms(ctx.executor(), 60);
        std::vector<std::string> out{"zz_audit"};
        co_return sg::update<st>{}.set<&st::results>(std::move(out));
    });
    g.add_node("reduce", [](const st& s) {
        std::string joined;
        for (const auto& r : s.results) joined += (joined.empty() ? "" : ",") + r;
        return sg::update<st>{}.set<&st::summary>(joined);
    });
    g.add_edge(sg::START, "plan").add_edge("plan", "zz_audit").add_edge("zz_audit", "reduce");
    g.add_conditional_edges(
        "plan",
        [](const st& s) {
            std::vector<sg::send> sends;
            for (std::size_t i = 0; i < s.items.size(); ++i) sends.emplace_back("worker", worker_input{s.items[i], static_cast<int>(i)});
            return sends;
        },
        std::vector<std::string>{"worker"});
    g.add_edge("worker", "reduce").add_edge("reduce", sg::END);
    auto app = g.compile(with_memory());

    auto in = sg::update<st>{}.set<&st::items>({"a", "bb", "ccc", "dddd"});
    auto ours = cf::record_invoke(app, in, thread_cfg("t1"), {.counters = &counters});
    // Events inside a step are in completion order (LangGraph's are too, and the delays force the
    // same order here), but only the order in which writes are applied is normative: compared
    // through `values` and `result` exactly, the events per step as a multiset.
    cf::check_run(gc, 0, ours, ids);
    // The completion order itself, for information: worker 3, 2, 1, 0, then zz_audit.
    const auto* step2 = cf::find_path(ours, "updates.1.events");
    BOOST_TEST_MESSAGE("case 09 step 2 completion order: " << (step2 ? cf::canonical(*step2) : "?"));
}

// ---------------------------------------------------------------------------------------------
namespace c10 {
struct st {
    std::variant<std::string, std::vector<std::string>> choice; // a node name or a list of names
    std::optional<std::string> value;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(st, (), (choice, value, trail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }
} // namespace c10

BOOST_AUTO_TEST_CASE(case_10_command_goto_update) {
    using c10::st;
    cf::golden_case gc("10_command_goto_update");
    BOOST_TEST(gc.size() == 3u);
    cf::id_mapper ids;
    cf::counter_map counters;
    sg::state_graph<st> g;
    g.add_node(
        "router",
        [](const st& s) {
            std::vector<std::string> targets;
            if (const auto* one = std::get_if<std::string>(&s.choice)) targets.push_back(*one);
            else targets = std::get<std::vector<std::string>>(s.choice);
            return sg::command<st>{}.go_to(std::move(targets)).with(
                sg::update<st>{}.set<&st::value>("routed").set<&st::trail>({"router"}));
        },
        sg::node_options{.ends = {"a", "b"}});
    for (std::string n : {"a", "b", "c"})
        g.add_node(n, [n](const st& s) { return sg::update<st>{}.set<&st::trail>({n + " saw " + s.value.value_or("?")}); });
    g.add_edge(sg::START, "router").add_edge("router", "c");
    g.add_edge("a", sg::END).add_edge("b", sg::END).add_edge("c", sg::END);
    auto app = g.compile(with_memory());

    cf::invoke_options o{.counters = &counters};
    cf::check_run(gc, 0, cf::record_invoke(app, sg::update<st>{}.set<&st::choice>(std::string("b")), thread_cfg("t1"), o), ids);
    cf::check_run(gc, 1,
                  cf::record_invoke(app, sg::update<st>{}.set<&st::choice>(std::vector<std::string>{"a", "b"}), thread_cfg("t2"), o),
                  ids);
    cf::check_run(gc, 2, cf::record_invoke(app, sg::update<st>{}.set<&st::choice>(std::vector<std::string>{}), thread_cfg("t3"), o),
                  ids);
}

// ---------------------------------------------------------------------------------------------
namespace c18 {
struct parent_st {
    std::string value;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(parent_st, (), (value, trail))
inline auto reducers(sg::for_state<parent_st>) { return sg::reducers{sg::reduce<&parent_st::trail>(sg::append)}; }

struct sub_st {
    std::string value;
    std::vector<std::string> trail;
    std::optional<std::string> sub_only; // private to the subgraph
};
BOOST_DESCRIBE_STRUCT(sub_st, (), (value, trail, sub_only))
inline auto reducers(sg::for_state<sub_st>) { return sg::reducers{sg::reduce<&sub_st::trail>(sg::append)}; }
} // namespace c18

BOOST_AUTO_TEST_CASE(case_18_subgraph_shared_keys) {
    using c18::parent_st;
    using c18::sub_st;
    cf::golden_case gc("18_subgraph_shared_keys");
    BOOST_TEST(gc.size() == 1u);
    cf::id_mapper ids;
    cf::counter_map counters;

    sg::state_graph<sub_st> sg_b("sub");
    sg_b.add_node("s1", [](const sub_st&) { return sg::update<sub_st>{}.set<&sub_st::sub_only>("secret").set<&sub_st::trail>({"s1"}); });
    sg_b.add_node("s2", [](const sub_st& s) {
        return sg::update<sub_st>{}.set<&sub_st::value>(s.value + ">sub(" + s.sub_only.value_or("?") + ")").set<&sub_st::trail>({"s2"});
    });
    sg_b.add_edge(sg::START, "s1").add_edge("s1", "s2").add_edge("s2", sg::END);
    auto sub = sg_b.compile(); // no checkpointer of its own

    sg::state_graph<parent_st> g("parent");
    g.add_node("p1", [](const parent_st& s) { return sg::update<parent_st>{}.set<&parent_st::value>(s.value + ">p1").set<&parent_st::trail>({"p1"}); });
    g.add_node("sub", sub);
    g.add_node("p2", [](const parent_st& s) {
        return sg::update<parent_st>{}.set<&parent_st::trail>({"p2 saw " + std::to_string(s.trail.size())});
    });
    g.add_edge(sg::START, "p1").add_edge("p1", "sub").add_edge("sub", "p2").add_edge("p2", sg::END);
    auto app = g.compile(with_memory());

    // DIFFERENCE: our subgraph node returns to the parent only what the subgraph wrote to the
    // shared keys (its delta), not its whole final state, so the parent's list reducer does not
    // append the parent's own prefix a second time: the "sub" update is trail ["s1", "s2"]
    // (LangGraph: ["p1", "s1", "s2"]) and the parent's trail becomes ["p1", "s1", "s2"]
    // (LangGraph: ["p1", "p1", "s1", "s2"]), so p2 sees 3 items, not 4.
    auto g0 = gc.run(0);
    cf::set_path(g0, "updates.1.events.2.update.sub.trail", cf::parse(R"(["s1", "s2"])"));
    cf::set_path(g0, "updates.2.events.0.update.p2.trail", cf::parse(R"(["p2 saw 3"])"));
    const auto final_trail = cf::parse(R"(["p1", "s1", "s2", "p2 saw 3"])");
    cf::set_path(g0, "result.trail", final_trail);
    cf::set_path(g0, "state.values.trail", final_trail);

    auto ours = cf::record_invoke(app, sg::update<parent_st>{}.set<&parent_st::value>("in").set<&parent_st::trail>({}),
                                  thread_cfg("t1"), {.subgraphs = true, .counters = &counters});
    cf::check_run(gc, 0, ours, ids, g0);

    // The private key never reaches the parent: not in its state, nor in any parent update.
    const auto* values = cf::find_path(ours, "state.values");
    BOOST_TEST_REQUIRE(values != nullptr);
    BOOST_TEST(!values->as_object().contains("sub_only"));
    for (const auto& group : ours.at("updates").as_array())
        for (const auto& ev : group.at("events").as_array())
            if (ev.at("ns").as_array().empty())
                for (const auto& [node, upd] : ev.at("update").as_object()) BOOST_TEST(!upd.as_object().contains("sub_only"));
}

// ---------------------------------------------------------------------------------------------
namespace c20 {
struct st {
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(st, (), (trail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::trail>(sg::append)}; }

struct flaky_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};
} // namespace c20

BOOST_AUTO_TEST_CASE(case_20_retry_policy) {
    using c20::st;
    cf::golden_case gc("20_retry_policy");
    BOOST_TEST(gc.size() == 4u);
    cf::id_mapper ids;
    cf::counter_map counters;
    auto build = [&](const std::string& name, std::optional<int> max_attempts) {
        sg::state_graph<st> g(name);
        g.add_node("a", [](const st&) { return sg::update<st>{}.set<&st::trail>({"a"}); });
        sg::node_options opts;
        if (max_attempts) {
            sg::retry_policy p;
            p.max_attempts = *max_attempts;
            p.initial_interval = std::chrono::milliseconds(1);
            p.backoff_factor = 1;
            p.jitter = false;
            opts.retry = p;
        }
        g.add_node(
            "flaky",
            [&counters, name](const st&) {
                int n = ++counters[name + ".flaky"];
                if (n <= 2) throw c20::flaky_error("attempt " + std::to_string(n) + " failed");
                return sg::update<st>{}.set<&st::trail>({"flaky ok on attempt " + std::to_string(n)});
            },
            opts);
        g.add_node("z", [](const st&) { return sg::update<st>{}.set<&st::trail>({"z"}); });
        g.add_edge(sg::START, "a").add_edge("a", "flaky").add_edge("flaky", "z").add_edge("z", sg::END);
        return g.compile(with_memory());
    };
    auto max3 = build("max3", 3);
    auto max2 = build("max2", 2);
    auto none = build("no_policy", std::nullopt);
    auto input = sg::update<st>{}.set<&st::trail>({});
    cf::invoke_options o{.counters = &counters};
    cf::check_run(gc, 0, cf::record_invoke(max3, input, thread_cfg("max3"), o), ids);
    cf::check_run(gc, 1, cf::record_invoke(max2, input, thread_cfg("max2"), o), ids);
    cf::check_run(gc, 2, cf::record_invoke(max2, sg::continue_run, thread_cfg("max2"), o), ids);
    cf::check_run(gc, 3, cf::record_invoke(none, input, thread_cfg("no_policy"), o), ids);
}

// ---------------------------------------------------------------------------------------------
// The comparator itself: it must report what differs (so a passing case means something).
BOOST_AUTO_TEST_CASE(conformance_comparator_reports_differences) {
    cf::golden_case gc("06_uneven_branches_defer");
    const auto golden = gc.run(0);
    // Our run in the golden's shape: identical after normalisation.
    auto same = cf::normalize_golden(golden);
    BOOST_TEST(cf::diff_run(same, golden).empty());

    // Events of one step in another order: equal as a multiset, different when ordered.
    auto reordered = same;
    auto& ev = reordered["updates"].as_array()[1].as_object()["events"].as_array();
    std::swap(ev[0], ev[1]);
    BOOST_TEST(cf::diff_run(reordered, golden).empty());
    BOOST_TEST(!cf::diff_run(reordered, golden, {.ordered_events = true}).empty());

    // A wrong event, a wrong step, a wrong final value, a missing key, a wrong error kind.
    auto wrong_event = same;
    cf::set_path(wrong_event, "updates.2.events.0.join.items", cf::parse(R"(["join saw a+c+b"])"));
    BOOST_TEST(cf::diff_run(wrong_event, golden).size() == 1u);
    auto wrong_step = same;
    cf::set_path(wrong_step, "updates.2.step", 4);
    BOOST_TEST(cf::diff_run(wrong_step, golden).size() == 1u);
    auto wrong_result = same;
    cf::set_path(wrong_result, "result.items.0", "z");
    auto d = cf::diff_run(wrong_result, golden);
    BOOST_TEST_REQUIRE(d.size() == 1u);
    BOOST_TEST(d[0].find("result.items[0]") != std::string::npos);
    auto missing = same;
    missing.erase("history_len");
    BOOST_TEST(cf::diff_run(missing, golden).size() == 1u);
    BOOST_TEST(cf::diff_run(missing, golden, {.skip = {"history_len"}}).empty());
    auto extra_counter = same;
    cf::set_path(extra_counter, "side_counters.other", 1);
    BOOST_TEST(cf::diff_run(extra_counter, golden).size() == 1u);

    auto g08 = cf::golden_case("08_recursion_limit").run(0);
    auto err = cf::normalize_golden(g08);
    BOOST_TEST(cf::canonical(err.at("result")) == R"({"error":"recursion_limit"})");
    cf::set_path(err, "result", cf::parse(R"({"error": "invalid_concurrent_update"})"));
    BOOST_TEST(cf::diff_run(err, g08).size() == 1u);

    // Node errors keep the node's own message; nulls count as missing.
    auto g20 = cf::golden_case("20_retry_policy").run(1);
    auto n20 = cf::normalize_golden(g20);
    BOOST_TEST(cf::canonical(n20.at("result")) == R"({"error":"node_failed","message":"attempt 2 failed"})");
    cf::set_path(n20, "state.values.extra", nullptr);
    BOOST_TEST(cf::diff_run(n20, g20).empty());

    // Ids map to placeholders in order of first appearance, per kind.
    cf::id_mapper ids;
    auto run = cf::parse(R"({"updates": [{"step": 1, "events": [{"ns": ["sub:cp9:sub"], "update": {"__interrupt__": [{"id": "ab12", "value": 1}]}},
                                                               {"ns": ["sub:cp9:sub"], "update": {"__interrupt__": [{"id": "cd34", "value": 2}]}}]}],
                             "result": {"config": {"checkpoint_id": "0001"}}})");
    ids.normalize(run);
    BOOST_TEST(cf::canonical(run) ==
               R"({"result":{"config":{"checkpoint_id":"<checkpoint:1>"}},"updates":[{"events":[{"ns":["sub:<task:1>"],"update":{"__interrupt__":[{"id":"<interrupt:1>","value":1}]}},{"ns":["sub:<task:1>"],"update":{"__interrupt__":[{"id":"<interrupt:2>","value":2}]}}],"step":1}]})");
}
