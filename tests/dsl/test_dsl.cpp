#define BOOST_TEST_MODULE dsl
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sg = stategraph;
using sg::test::run;
using namespace std::chrono_literals;

namespace dsl_test {

enum class path { skip, semantic, parallel };
BOOST_DESCRIBE_ENUM(path, skip, semantic, parallel)

struct turn {
    std::string message;
    path retrieval = path::skip;
    std::vector<std::string> log;
    int round = 0;
};
BOOST_DESCRIBE_STRUCT(turn, (), (message, retrieval, log, round))
inline auto reducers(sg::for_state<turn>) { return sg::reducers{sg::reduce<&turn::log>(sg::append)}; }

struct job {
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(job, (), (n))

/// A node that appends its name to the log.
inline auto log_as(std::string name) {
    return [name](const turn&) { return sg::update<turn>{}.set<&turn::log>({name}); };
}
inline sg::update<turn> count_round(const turn& s) { return sg::update<turn>{}.set<&turn::round>(s.round + 1); }
inline bool done(const turn& s) { return s.round >= 3; }
inline bool needs_more(const turn& s) { return s.round < 1; }
inline std::vector<sg::send> jobs_of(const turn&) {
    return {sg::send("worker", job{1}), sg::send("worker", job{2}), sg::send("worker", job{3})};
}
inline sg::update<turn> work(const job& j) { return sg::update<turn>{}.set<&turn::log>({"job" + std::to_string(j.n)}); }
inline sg::retry_policy no_wait(int attempts) {
    sg::retry_policy p;
    p.max_attempts = attempts;
    p.initial_interval = 0ms;
    p.jitter = false;
    return p;
}
inline boost::asio::awaitable<sg::update<turn>> coro_node(const turn&) {
    std::vector<std::string> entry{"coro"};
    co_return sg::update<turn>{}.set<&turn::log>(std::move(entry));
}

inline sg::compiled_graph<turn> intake_app() {
    using namespace sg::dsl;
    return graph<turn>("intake", "inner"_n = log_as("intake"), start >> "inner"_n >> end).compile();
}

// -- the same graph twice: as DSL stages, and with the builder --------------------------------

inline sg::dsl::stage_decl<turn> retrieval_stage() {
    using namespace sg::dsl;
    // clang-format off
    return stage<turn>("retrieval",
        "router"_n   = log_as("router"),
        "resolve"_n  = log_as("resolve"),
        "semantic"_n = log_as("semantic") | retry(no_wait(3)),
        "temporal"_n = log_as("temporal"),
        "assemble"_n = log_as("assemble"),

        "router"_n >> on(&turn::retrieval, {{path::skip,     "assemble"_n},
                                            {path::semantic, "resolve"_n},
                                            {path::parallel, "resolve"_n}}),
        "resolve"_n >> parallel("semantic"_n, "temporal"_n),
        join("semantic"_n, "temporal"_n) >> "assemble"_n);
    // clang-format on
}

inline sg::dsl::stage_decl<turn> planning_stage() {
    using namespace sg::dsl;
    // clang-format off
    return stage<turn>("planning",
        "plan"_n    = count_round,
        "worker"_n  = work,
        "summary"_n = log_as("summary") | defer,
        "review"_n  = log_as("review") | interrupt_before | ends("plan"_n),

        "plan"_n    >> fan_out(jobs_of, {"worker"_n}),
        "worker"_n  >> "summary"_n >> "review"_n,
        "review"_n  >> route(needs_more, {{true, "plan"_n}, {false, end}}));
    // clang-format on
}

inline sg::state_graph<turn> dsl_graph() {
    using namespace sg::dsl;
    // clang-format off
    return graph<turn>("turn",
        retrieval_stage(),
        planning_stage(),
        "intake"_n = intake_app(),
        interrupt_after("assemble"_n),
        start >> "intake"_n >> "router"_n,
        "assemble"_n >> "plan"_n);
    // clang-format on
}

inline sg::state_graph<turn> builder_graph() {
    sg::state_graph<turn> g("turn");
    const std::string r = "retrieval", p = "planning";
    g.add_node("router", log_as("router"), {.stage = r});
    g.add_node("resolve", log_as("resolve"), {.stage = r});
    g.add_node("semantic", log_as("semantic"), {.stage = r, .retry = no_wait(3)});
    g.add_node("temporal", log_as("temporal"), {.stage = r});
    g.add_node("assemble", log_as("assemble"), {.stage = r});
    g.add_node("plan", count_round, {.stage = p});
    g.add_node("worker", work, {.stage = p});
    g.add_node("summary", log_as("summary"), {.stage = p, .defer = true});
    g.add_node("review", log_as("review"), {.stage = p, .ends = {"plan"}});
    g.add_node("intake", intake_app());
    g.add_conditional_edges("router", [](const turn& s) { return s.retrieval; },
                            std::map<path, std::string>{{path::skip, "assemble"}, {path::semantic, "resolve"}, {path::parallel, "resolve"}});
    g.add_edge("resolve", "semantic").add_edge("resolve", "temporal");
    g.add_edge(std::vector<std::string>{"semantic", "temporal"}, "assemble");
    g.add_conditional_edges("plan", jobs_of, std::vector<std::string>{"worker"});
    g.add_edge("worker", "summary").add_edge("summary", "review");
    g.add_conditional_edges("review", needs_more, std::map<bool, std::string>{{true, "plan"}, {false, sg::END}});
    g.add_edge(sg::START, "intake").add_edge("intake", "router").add_edge("assemble", "plan");
    g.interrupt_before({"review"}).interrupt_after({"assemble"});
    return g;
}

/// What shape_lines leaves out: stages, retries, subgraphs and breakpoints.
inline std::vector<std::string> extra_lines(const sg::topology& t) {
    std::vector<std::string> out;
    for (const auto& n : t.nodes)
        out.push_back(n.name + " stage=" + n.stage + (n.has_retry ? " retry" : "") + (n.subgraph ? " subgraph" : ""));
    for (const auto& n : t.interrupt_before) out.push_back("before " + n);
    for (const auto& n : t.interrupt_after) out.push_back("after " + n);
    std::sort(out.begin(), out.end());
    return out;
}

inline sg::run_config thread(std::string id) {
    sg::run_config cfg;
    cfg.thread_id = std::move(id);
    return cfg;
}

inline std::string all_messages(const sg::compile_error& e) {
    std::string out;
    for (const auto& p : e.problems()) out += p.message + "\n";
    return out;
}

} // namespace dsl_test

using namespace dsl_test;

BOOST_AUTO_TEST_CASE(start_and_end_are_the_builders_entry_and_exit) {
    BOOST_TEST(sg::dsl::start.name() == sg::START);
    BOOST_TEST(sg::dsl::end.name() == sg::END);
}

BOOST_AUTO_TEST_CASE(dsl_lowers_to_the_same_topology_as_the_builder) {
    auto from_dsl = dsl_graph().compile();
    auto from_builder = builder_graph().compile();
    BOOST_TEST(sg::shape_lines(from_dsl.shape()) == sg::shape_lines(from_builder.shape()), boost::test_tools::per_element());
    BOOST_TEST(from_dsl.signature() == from_builder.signature());
    BOOST_TEST(extra_lines(from_dsl.shape()) == extra_lines(from_builder.shape()), boost::test_tools::per_element());
    // The DSL graph has every kind of declaration (spot checks of the lowered shape).
    auto lines = sg::shape_lines(from_dsl.shape());
    for (std::string l : {"join semantic temporal -> assemble", "route router [parallel] -> resolve", "route plan [Send] -> worker",
                          "route review [false] -> __end__", "goto review -> plan", "node summary deferred", "node worker send"})
        BOOST_TEST((std::find(lines.begin(), lines.end(), l) != lines.end()), "missing: " << l);
}

BOOST_AUTO_TEST_CASE(chain_runs_in_order) {
    using namespace sg::dsl;
    auto app = graph<turn>("chain", "a"_n = log_as("a"), "b"_n = log_as("b"), "c"_n = log_as("c"),
                           start >> "a"_n >> "b"_n >> "c"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(coroutine_nodes_and_context_nodes_are_nodes) {
    using namespace sg::dsl;
    auto app = graph<turn>("coro", "a"_n = coro_node,
                           "b"_n = [](const turn&, sg::context& ctx) { return sg::update<turn>{}.set<&turn::log>({ctx.node()}); },
                           start >> "a"_n >> "b"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"coro", "b"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(route_on_an_enum_field_takes_the_mapped_node) {
    using namespace sg::dsl;
    // clang-format off
    auto app = graph<turn>("on_field",
        "fast"_n = log_as("fast"),
        "deep"_n = log_as("deep"),
        start >> on(&turn::retrieval, {{path::skip,     "fast"_n},
                                       {path::semantic, "deep"_n},
                                       {path::parallel, "deep"_n}}),
        "fast"_n >> end,
        "deep"_n >> end).compile();
    // clang-format on
    auto fast = run(app.invoke(sg::update<turn>{}.set<&turn::retrieval>(path::skip)));
    BOOST_TEST(fast.values.log == (std::vector<std::string>{"fast"}), boost::test_tools::per_element());
    auto deep = run(app.invoke(sg::update<turn>{}.set<&turn::retrieval>(path::parallel)));
    BOOST_TEST(deep.values.log == (std::vector<std::string>{"deep"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(route_on_a_string_field) {
    using namespace sg::dsl;
    auto app = graph<turn>("on_string", "hi"_n = log_as("hi"), "bye"_n = log_as("bye"),
                           start >> on(&turn::message, {{"hello", "hi"_n}, {"goodbye", "bye"_n}}), "hi"_n >> end,
                           "bye"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}.set<&turn::message>("goodbye")));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"bye"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(route_on_a_router_function_loops_until_done) {
    using namespace sg::dsl;
    auto app = graph<turn>("loop", "count"_n = count_round, start >> "count"_n,
                           "count"_n >> route(done, {{true, end}, {false, "count"_n}}))
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.round == 3);
}

BOOST_AUTO_TEST_CASE(route_on_a_router_returning_node_names) {
    using namespace sg::dsl;
    auto pick = [](const turn& s) { return s.message == "left" ? std::string("l") : std::string("r"); };
    auto app = graph<turn>("names", "l"_n = log_as("l"), "r"_n = log_as("r"), start >> route(pick, {"l"_n, "r"_n}),
                           "l"_n >> end, "r"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}.set<&turn::message>("left")));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"l"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(route_with_an_explicit_result_type_takes_a_generic_router) {
    using namespace sg::dsl;
    auto app = graph<turn>("generic", "x"_n = log_as("x"),
                           start >> route<bool>([](const auto& s) { return s.round == 0; }, {{true, "x"_n}, {false, end}}),
                           "x"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"x"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(join_waits_for_every_source) {
    using namespace sg::dsl;
    // clang-format off
    auto app = graph<turn>("join",
        "a"_n = log_as("a"), "b"_n = log_as("b"), "b2"_n = log_as("b2"), "c"_n = log_as("c"), "d"_n = log_as("d"),
        start >> "a"_n >> parallel("b"_n, "c"_n),
        "b"_n >> "b2"_n,
        join("b2"_n, "c"_n) >> "d"_n >> end).compile();
    // clang-format on
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c", "b2", "d"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(deferred_node_runs_once_after_the_others) {
    using namespace sg::dsl;
    auto build = [](bool deferred) {
        auto d = deferred ? ("d"_n = log_as("d")).defer() : ("d"_n = log_as("d"));
        return graph<turn>("defer", "a"_n = log_as("a"), "b"_n = log_as("b"), "b2"_n = log_as("b2"), "c"_n = log_as("c"), d,
                           start >> "a"_n >> parallel("b"_n, "c"_n), "b"_n >> "b2"_n >> "d"_n, "c"_n >> "d"_n >> end)
            .compile();
    };
    auto r = run(build(true).invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c", "b2", "d"}), boost::test_tools::per_element());
    auto eager = run(build(false).invoke(sg::update<turn>{}));
    BOOST_TEST(std::count(eager.values.log.begin(), eager.values.log.end(), "d") == 2);
}

BOOST_AUTO_TEST_CASE(send_fan_out_runs_one_worker_per_send) {
    using namespace sg::dsl;
    auto app = graph<turn>("fan_out", "plan"_n = count_round, "worker"_n = work, start >> "plan"_n,
                           "plan"_n >> fan_out(jobs_of, {"worker"_n}), "worker"_n >> end)
                   .compile();
    auto r = run(app.invoke(sg::update<turn>{}));
    auto log = r.values.log;
    std::sort(log.begin(), log.end());
    BOOST_TEST(log == (std::vector<std::string>{"job1", "job2", "job3"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(subgraph_runs_as_a_node) {
    using namespace sg::dsl;
    auto sub = graph<turn>("sub", "inner"_n = log_as("inner"), start >> "inner"_n >> end).compile();
    auto as_assignment = graph<turn>("parent", "sub"_n = sub, "after"_n = log_as("after"), start >> "sub"_n >> "after"_n >> end).compile();
    auto as_call = graph<turn>("parent", subgraph("sub"_n, sub), "after"_n = log_as("after"), start >> "sub"_n >> "after"_n >> end).compile();
    BOOST_TEST(as_assignment.signature() == as_call.signature());
    BOOST_TEST(as_call.shape().find("sub")->subgraph != nullptr);
    auto r = run(as_call.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"inner", "after"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(retry_policy_retries_a_failing_node) {
    using namespace sg::dsl;
    auto flaky = [](const turn&, sg::context& ctx) {
        if (ctx.attempt() < 2) throw std::runtime_error("flaky");
        return sg::update<turn>{}.set<&turn::round>(ctx.attempt());
    };
    auto with_retry = graph<turn>("retry", "flaky"_n = flaky | retry(no_wait(3)), start >> "flaky"_n >> end).compile();
    BOOST_TEST(run(with_retry.invoke(sg::update<turn>{})).values.round == 2);
    auto without = graph<turn>("no_retry", "flaky"_n = flaky, start >> "flaky"_n >> end).compile();
    BOOST_CHECK_THROW(run(without.invoke(sg::update<turn>{})), sg::node_error);
}

BOOST_AUTO_TEST_CASE(cache_on_error_timeout_and_defaults_as_modifiers) {
    using namespace sg::dsl;
    auto calls = std::make_shared<int>(0);
    auto lookup = [calls](const turn& t) {
        ++*calls;
        return sg::update<turn>{}.set<&turn::log>({"lookup " + t.message});
    };
    auto broken = [](const turn&) -> sg::update<turn> { throw std::runtime_error("broken"); };
    auto fallback = [](const turn&, const sg::node_failure& f) {
        return sg::update<turn>{}.set<&turn::log>({"fallback for " + f.node});
    };
    auto slow = [](const turn&, sg::context& ctx) -> boost::asio::awaitable<sg::update<turn>> {
        boost::asio::steady_timer t(ctx.executor(), std::chrono::seconds(2));
        co_await t.async_wait(boost::asio::use_awaitable);
        co_return sg::update<turn>{};
    };
    auto g = graph<turn>("modifiers", "lookup"_n = lookup | cache({.ttl = std::chrono::minutes(1)}),
                         "broken"_n = broken | on_error("fallback", fallback),
                         "slow"_n = (slow | timeout(std::chrono::milliseconds(20))),
                         start >> "lookup"_n >> "broken"_n >> "slow"_n >> end);
    g.set_node_defaults({.on_error = [](const turn&, const sg::node_failure& f) {
        return sg::update<turn>{}.set<&turn::log>({std::string("default: ") + sg::to_string(f.code)});
    }});
    auto app = g.compile();
    auto input = sg::update<turn>{}.set<&turn::message>("hi");
    auto r = run(app.invoke(input));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"lookup hi", "fallback for broken", "default: node_timeout"}),
               boost::test_tools::per_element());
    r = run(app.invoke(input));
    BOOST_TEST(*calls == 1); // cached
    BOOST_TEST(r.values.log.front() == "lookup hi");

    // A member spelling, and a node that opts out of the defaults.
    auto h = graph<turn>("opt_out", ("broken"_n = broken).with(no_defaults), start >> "broken"_n >> end);
    h.set_node_defaults({.on_error = fallback});
    BOOST_CHECK_THROW(run(h.compile().invoke(input)), sg::node_error);
    auto k = graph<turn>("member", ("broken"_n = broken).on_error(fallback), start >> "broken"_n >> end).compile();
    BOOST_TEST(run(k.invoke(input)).values.log == (std::vector<std::string>{"fallback for broken"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(breakpoints_stop_the_run_and_continue_resumes_it) {
    using namespace sg::dsl;
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    // A breakpoint as a node modifier, and one declared on its own: both stop before "b".
    auto before_b = graph<turn>("before", "a"_n = log_as("a"), "b"_n = log_as("b") | interrupt_before, "c"_n = log_as("c"),
                                start >> "a"_n >> "b"_n >> "c"_n >> end);
    auto after_a = graph<turn>("after", "a"_n = log_as("a"), "b"_n = log_as("b"), "c"_n = log_as("c"),
                               interrupt_after("a"_n), start >> "a"_n >> "b"_n >> "c"_n >> end);
    int n = 0;
    for (auto* g : {&before_b, &after_a}) {
        auto app = g->compile({.checkpointer = saver});
        auto cfg = thread("t" + std::to_string(++n));
        auto r = run(app.invoke(sg::update<turn>{}, cfg));
        BOOST_TEST(r.interrupted());
        BOOST_TEST(r.next == (std::vector<std::string>{"b"}), boost::test_tools::per_element());
        BOOST_TEST(r.values.log == (std::vector<std::string>{"a"}), boost::test_tools::per_element());
        r = run(app.invoke(sg::continue_run, cfg));
        BOOST_TEST(!r.interrupted());
        BOOST_TEST(r.values.log == (std::vector<std::string>{"a", "b", "c"}), boost::test_tools::per_element());
    }
}

BOOST_AUTO_TEST_CASE(command_targets_are_declared_with_ends) {
    using namespace sg::dsl;
    auto decide = [](const turn&) { return sg::command<turn>{}.go_to("b"); };
    auto app = graph<turn>("command", "decide"_n = decide | ends("a"_n, "b"_n), "a"_n = log_as("a"), "b"_n = log_as("b"),
                           start >> "decide"_n, "a"_n >> end, "b"_n >> end)
                   .compile();
    auto member_form = graph<turn>("command", ("decide"_n = decide).ends({"a"_n, "b"_n}), "a"_n = log_as("a"),
                                   "b"_n = log_as("b"), start >> "decide"_n, "a"_n >> end, "b"_n >> end)
                           .compile();
    BOOST_TEST(app.signature() == member_form.signature());
    auto lines = sg::shape_lines(app.shape());
    BOOST_TEST((std::find(lines.begin(), lines.end(), "goto decide -> a") != lines.end()));
    auto r = run(app.invoke(sg::update<turn>{}));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"b"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(node_names_can_come_from_data) {
    using namespace sg::dsl;
    std::vector<std::string> names{"first", "second"};
    auto app = graph<turn>("data", node_ref{names[0]} = log_as(names[0]), node_ref{names[1]} = log_as(names[1]),
                           start >> node_ref{names[0]} >> node_ref{names[1]} >> end)
                   .compile();
    BOOST_TEST(run(app.invoke(sg::update<turn>{})).values.log == names, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(stages_nest_and_in_stage_overrides_the_stage) {
    using namespace sg::dsl;
    auto inner = stage<turn>("inner", "x"_n = log_as("x"));
    auto outer = stage<turn>("outer", inner, "y"_n = log_as("y"), "z"_n = log_as("z") | in_stage("elsewhere"),
                             ("w"_n = log_as("w")).with(defer, in_stage("aside")));
    auto g = graph<turn>("nested", outer, "top"_n = log_as("top"),
                         start >> "x"_n >> "y"_n >> "z"_n >> "top"_n >> end, "z"_n >> "w"_n >> end);
    const auto& t = g.shape();
    BOOST_TEST(t.find("x")->stage == "inner");
    BOOST_TEST(t.find("y")->stage == "outer");
    BOOST_TEST(t.find("z")->stage == "elsewhere");
    BOOST_TEST(t.find("w")->stage == "aside");
    BOOST_TEST(t.find("w")->deferred);
    BOOST_TEST(t.find("top")->stage == "");
    BOOST_TEST(inner.name() == "inner");
}

BOOST_AUTO_TEST_CASE(stages_are_clusters_in_the_graphviz_export) {
    auto app = dsl_graph().compile();
    std::ostringstream dot;
    app.write_dot(dot);
    const std::string text = dot.str();
    BOOST_TEST(text.find("subgraph \"cluster_retrieval") != std::string::npos);
    BOOST_TEST(text.find("label=\"retrieval\"") != std::string::npos);
    BOOST_TEST(text.find("subgraph \"cluster_planning") != std::string::npos);
    BOOST_TEST(text.find("label=\"planning\"") != std::string::npos);
    BOOST_TEST(text.find("(subgraph)") != std::string::npos);
#ifdef STATEGRAPH_DOT
    const std::string file = "test_dsl_stages.dot", svg = "test_dsl_stages.svg";
    std::ofstream(file) << text;
    const std::string cmd = std::string(STATEGRAPH_DOT) + " -Tsvg " + file + " -o " + svg;
    BOOST_TEST(std::system(cmd.c_str()) == 0, "dot rejected the export: " << cmd);
    std::ifstream in(svg);
    std::string svg_text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    BOOST_TEST(svg_text.find("<svg") != std::string::npos);
    BOOST_TEST(svg_text.find("retrieval") != std::string::npos);
    std::remove(file.c_str());
    std::remove(svg.c_str());
#else
    BOOST_TEST_MESSAGE("graphviz 'dot' not found: DOT syntax not checked");
#endif
}

BOOST_AUTO_TEST_CASE(compile_reports_every_problem_at_once_with_the_nearest_name) {
    using namespace sg::dsl;
    // clang-format off
    auto g = graph<turn>("mistakes",
        "router"_n  = log_as("router"),
        "planner"_n = log_as("planner"),
        "orphan"_n  = log_as("orphan"),
        start >> "router"_n,
        "router"_n  >> on(&turn::retrieval, {{path::skip,     "planer"_n},     // misspelled
                                             {path::semantic, "planner"_n}}),  // path::parallel unmapped
        "planner"_n >> "sumary"_n,                                             // misspelled, and never declared
        "orphan"_n  >> end,
        interrupt_before("plannr"_n));                                         // misspelled
    // clang-format on
    try {
        (void)g.compile();
        BOOST_FAIL("compile() accepted a graph with mistakes");
    } catch (const sg::compile_error& e) {
        auto has = [&](sg::errc code, const std::string& text) {
            return std::any_of(e.problems().begin(), e.problems().end(),
                               [&](const auto& p) { return p.code == code && p.message.find(text) != std::string::npos; });
        };
        const auto messages = all_messages(e);
        BOOST_TEST_MESSAGE(messages);
        BOOST_TEST(has(sg::errc::unknown_node, "'planer' (did you mean 'planner'?)"), messages);
        BOOST_TEST(has(sg::errc::unknown_node, "'plannr' (did you mean 'planner'?)"), messages);
        BOOST_TEST(has(sg::errc::unknown_node, "'sumary'"), messages);
        BOOST_TEST(has(sg::errc::unreachable_node, "'orphan'"), messages);
        BOOST_TEST(has(sg::errc::unmapped_route, "'parallel'"), messages);
    }
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!g.compile({}, problems).has_value());
    BOOST_TEST(problems.size() >= 5u);
}

BOOST_AUTO_TEST_CASE(a_route_value_mapped_twice_is_reported_with_the_other_problems) {
    using namespace sg::dsl;
    auto declare = [](auto&&... extra) {
        return std::make_tuple("a"_n = log_as("a"), "b"_n = log_as("b"), "a"_n >> end, "b"_n >> end,
                               start >> on(&turn::retrieval, {{path::skip, "a"_n}, {path::skip, "b"_n}, {path::semantic, "b"_n},
                                                              {path::parallel, "a"_n}}),
                               extra...);
    };
    auto items = declare("a"_n >> "nowhere"_n);
    try {
        std::apply([](const auto&... i) { (void)graph<turn>("twice", i...); }, items);
        BOOST_FAIL("graph() accepted a route value mapped twice");
    } catch (const sg::compile_error& e) {
        const auto messages = all_messages(e);
        BOOST_TEST(messages.find("route 'skip' is mapped twice (to 'a' and to 'b')") != std::string::npos, messages);
        BOOST_TEST(messages.find("unknown node 'nowhere'") != std::string::npos, messages);
    }
    std::vector<sg::graph_problem> problems;
    auto g = std::apply([&](const auto&... i) { return graph<turn>(problems, "twice", i...); }, items);
    BOOST_TEST(!g.has_value());
    BOOST_TEST(problems.size() == 2u);
    const bool typed = std::any_of(problems.begin(), problems.end(),
                                   [](const sg::graph_problem& p) { return p.code == sg::errc::duplicate_route; });
    BOOST_TEST(typed); // its own error code, not unmapped_route
    BOOST_TEST(std::string(sg::to_string(sg::errc::duplicate_route)) == "duplicate_route");
}

// A route map is kept in key order (the builder's std::map order), whatever order it was written
// in: the drawing lists the routes by key, a key given twice keeps its first targets even when a
// smaller key comes after it, and each value still leads to its own node at run time.
BOOST_AUTO_TEST_CASE(a_route_map_written_out_of_order_routes_by_key) {
    using namespace sg::dsl;
    std::vector<sg::graph_problem> problems;
    auto twice = graph<turn>(problems, "twice", "a"_n = log_as("a"), "b"_n = log_as("b"), "c"_n = log_as("c"),
                             "a"_n >> end, "b"_n >> end, "c"_n >> end,
                             start >> on(&turn::retrieval, {{path::parallel, "c"_n}, {path::parallel, "b"_n},
                                                            {path::skip, "a"_n}, {path::semantic, "b"_n}}));
    BOOST_TEST(!twice.has_value());
    BOOST_REQUIRE(problems.size() == 1u);
    BOOST_TEST(problems[0].message.find("route 'parallel' is mapped twice (to 'c' and to 'b')") != std::string::npos,
               problems[0].message);

    auto app = graph<turn>("ordered", "a"_n = log_as("a"), "b"_n = log_as("b"), "c"_n = log_as("c"), "a"_n >> end,
                           "b"_n >> end, "c"_n >> end,
                           start >> on(&turn::retrieval, {{path::parallel, "c"_n}, {path::skip, "a"_n},
                                                          {path::semantic, "b"_n}}))
                   .compile();
    BOOST_REQUIRE(app.shape().branches.size() == 1u);
    const auto& routes = app.shape().branches[0].routes;
    BOOST_REQUIRE(routes.size() == 3u);
    BOOST_TEST(routes[0].first == "skip");
    BOOST_TEST(routes[1].first == "semantic");
    BOOST_TEST(routes[2].first == "parallel");
    BOOST_TEST(routes[2].second == "c");
    const std::vector<std::pair<path, std::string>> cases{{path::skip, "a"}, {path::semantic, "b"}, {path::parallel, "c"}};
    for (const auto& [value, node] : cases) {
        auto r = run(app.invoke(sg::update<turn>{}.set<&turn::retrieval>(value)));
        BOOST_TEST(r.values.log == std::vector<std::string>{node}, sg::detail::route_label(value));
    }
}

// -- issue 26: a support desk as a LangGraph user writes it ------------------------------------

namespace newcomer {

enum class category { billing, lookup, chat };
BOOST_DESCRIBE_ENUM(category, billing, lookup, chat)

struct desk {
    std::string question;
    category kind = category::chat;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(desk, (), (question, kind, log))
inline auto reducers(sg::for_state<desk>) { return sg::reducers{sg::reduce<&desk::log>(sg::append)}; }

/// A node that logs its name and the step it ran in.
inline auto stamp(std::string name) {
    return [name](const desk&, sg::context& ctx) {
        return sg::update<desk>{}.set<&desk::log>({name + "@" + std::to_string(ctx.step())});
    };
}
inline sg::update<desk> classify(const desk& d) {
    return sg::update<desk>{}.set<&desk::kind>(d.question.find("order") != std::string::npos ? category::lookup
                                                                                              : category::chat);
}

/// The problems of a graph that graph() or compile() reports, as "code: message" lines.
template <class G>
std::vector<std::string> problems_of(const G& g) {
    std::vector<sg::graph_problem> problems;
    (void)g.compile({}, problems);
    std::vector<std::string> out;
    for (const auto& p : problems) out.push_back(std::string(sg::to_string(p.code)) + ": " + p.message);
    return out;
}

// A field the route reads, left out of BOOST_DESCRIBE_STRUCT.
struct partly_described {
    std::string question;
    category kind = category::chat;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(partly_described, (), (question, log))

} // namespace newcomer

BOOST_AUTO_TEST_CASE(a_route_value_may_lead_to_parallel_nodes_that_run_in_one_step) {
    using namespace sg::dsl;
    using namespace newcomer;
    // clang-format off
    auto app = graph<desk>("support",
        "classify"_n = classify,
        "orders"_n   = stamp("orders"),
        "account"_n  = stamp("account"),
        "agent"_n    = stamp("agent"),
        "respond"_n  = stamp("respond"),
        start >> "classify"_n,
        "classify"_n >> on(&desk::kind, {{category::lookup,  parallel("orders"_n, "account"_n)},
                                         {category::billing, "agent"_n},
                                         {category::chat,    "agent"_n}}),
        join("orders"_n, "account"_n) >> "respond"_n,
        "agent"_n >> "respond"_n,
        "respond"_n >> end).compile();
    // clang-format on
    // Both lookups run in step 2 (their writes are applied in name order), respond after both.
    auto lookup = run(app.invoke(sg::update<desk>{}.set<&desk::question>("where is my order?")));
    BOOST_TEST(lookup.values.log == (std::vector<std::string>{"account@2", "orders@2", "respond@3"}),
               boost::test_tools::per_element());
    auto chat = run(app.invoke(sg::update<desk>{}.set<&desk::question>("hello")));
    BOOST_TEST(chat.values.log == (std::vector<std::string>{"agent@2", "respond@3"}), boost::test_tools::per_element());

    // The drawing and the description show the value leading to both nodes.
    std::vector<std::string> routes;
    for (const auto& line : sg::shape_lines(app.shape()))
        if (line.rfind("route classify [lookup]", 0) == 0) routes.push_back(line);
    BOOST_TEST(routes == (std::vector<std::string>{"route classify [lookup] -> account", "route classify [lookup] -> orders"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_builder_takes_a_path_map_to_several_nodes) {
    using namespace newcomer;
    sg::state_graph<desk> g("support");
    g.add_node("classify", classify).add_node("orders", stamp("orders")).add_node("account", stamp("account"));
    g.add_node("agent", stamp("agent"));
    std::map<category, std::vector<std::string>> paths{{category::lookup, {"orders", "account"}},
                                                       {category::billing, {"agent"}},
                                                       {category::chat, {"agent"}}};
    g.add_conditional_edges("classify", [](const desk& d) { return d.kind; }, paths);
    g.add_edge(sg::START, "classify").add_edge("orders", sg::END).add_edge("account", sg::END).add_edge("agent", sg::END);
    auto r = run(g.compile().invoke(sg::update<desk>{}.set<&desk::question>("order A-17")));
    BOOST_TEST(r.values.log == (std::vector<std::string>{"account@2", "orders@2"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_typo_is_reported_once_without_false_dead_ends) {
    using namespace sg::dsl;
    using namespace newcomer;
    auto declare = [](auto typo_edge, auto route) {
        return graph<desk>("support",
            "classify"_n = classify, "orders"_n = stamp("orders"), "account"_n = stamp("account"),
            "merge"_n = stamp("merge"), "agent"_n = stamp("agent"), "respond"_n = stamp("respond"),
            start >> "classify"_n,
            "classify"_n >> route,
            join("orders"_n, "account"_n) >> "merge"_n,
            typo_edge,
            "agent"_n >> "respond"_n,
            "respond"_n >> end);
    };
    auto lookup_or_agent = [](node_ref agent) {
        return on(&desk::kind, {{category::lookup, parallel("orders"_n, "account"_n)},
                                {category::billing, agent},
                                {category::chat, agent}});
    };
    // A misspelled edge target: 'merge' and the lookups before it are not dead ends.
    auto edge_typo = problems_of(declare("merge"_n >> "respnd"_n, lookup_or_agent("agent"_n)));
    BOOST_TEST(edge_typo == (std::vector<std::string>{
                                "unknown_node: edge 'merge' -> 'respnd' names unknown node 'respnd' (did you mean 'respond'?)"}),
               boost::test_tools::per_element());
    // A misspelled route target: 'agent' is not unreachable.
    auto route_typo = problems_of(declare("merge"_n >> "respond"_n, lookup_or_agent("agnet"_n)));
    BOOST_TEST(route_typo == (std::vector<std::string>{
                                 "unknown_node: route 'billing' of the conditional edge from 'classify' names unknown node "
                                 "'agnet' (did you mean 'agent'?)",
                                 "unknown_node: route 'chat' of the conditional edge from 'classify' names unknown node "
                                 "'agnet' (did you mean 'agent'?)"}),
               boost::test_tools::per_element());
    // Without a typo, a node whose paths stop at a node without an outgoing edge is told so (not "a cycle").
    auto stuck = problems_of(declare("orders"_n >> "merge"_n, lookup_or_agent("agent"_n)));
    BOOST_TEST(stuck == (std::vector<std::string>{
                            "no_path_to_end: node 'orders' has no way to reach END: every path from it stops at 'merge', "
                            "which has no outgoing edge",
                            "no_path_to_end: node 'account' has no way to reach END: every path from it stops at 'merge', "
                            "which has no outgoing edge",
                            "no_path_to_end: node 'merge' has no way to reach END: it has no outgoing edge (add one, e.g. "
                            "to END)"}),
               boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_route_on_a_field_left_out_of_the_description_is_a_declaration_problem) {
    using namespace sg::dsl;
    using namespace newcomer;
    using S = partly_described;
    auto log = [](const S&) { return sg::update<S>{}.set<&S::log>({"a"}); };
    std::vector<sg::graph_problem> problems;
    auto g = graph<S>(problems, "support", "a"_n = log, "b"_n = log,
                      start >> on(&S::kind, {{category::lookup, "a"_n}, {category::billing, "b"_n}, {category::chat, "b"_n}}),
                      "a"_n >> end, "b"_n >> end);
    BOOST_TEST(!g.has_value());
    BOOST_REQUIRE(problems.size() == 1u);
    BOOST_TEST(problems[0].code == sg::errc::undescribed_field);
    BOOST_TEST(problems[0].message ==
               "conditional edge from '__start__' routes on a member of newcomer::partly_described (of type "
               "newcomer::category) that BOOST_DESCRIBE_STRUCT(newcomer::partly_described, (), (...)) does not list; add "
               "it to the list (the engine keeps and saves only the listed fields, so nothing could ever set it)");
    BOOST_TEST(std::string(sg::to_string(sg::errc::undescribed_field)) == "undescribed_field");
}

namespace dsl_schema_test {
struct st {
    std::string text;
    std::string reply;
};
BOOST_DESCRIBE_STRUCT(st, (), (text, reply))
struct ask {
    std::string question;
};
BOOST_DESCRIBE_STRUCT(ask, (), (question))
struct answer {
    std::string reply;
};
BOOST_DESCRIBE_STRUCT(answer, (), (reply))
} // namespace dsl_schema_test

BOOST_AUTO_TEST_CASE(input_and_output_schemas_lower_to_the_builder) {
    using namespace sg::dsl;
    using dsl_schema_test::st;
    auto echo = [](const st& s) { return sg::update<st>{}.set<&st::reply>("re: " + s.text); };
    auto read = [](const dsl_schema_test::ask& in) { return sg::update<st>{}.set<&st::text>(in.question); };
    // clang-format off
    auto app = graph<st>("schemas",
                         input_schema<dsl_schema_test::ask>(read),
                         output_schema<dsl_schema_test::answer>(),
                         "echo"_n = echo,
                         start >> "echo"_n >> end)
                   .compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    // clang-format on
    sg::run_config cfg;
    cfg.thread_id = "t";
    auto r = run(app.invoke(sg::as_input(dsl_schema_test::ask{"hi"}), cfg));
    BOOST_TEST(r.output_as<dsl_schema_test::answer>().reply == "re: hi");
    BOOST_TEST(app.input_json_schema().at("title") == "ask");
    BOOST_TEST(app.output_json_schema().at("title") == "answer");
}
