// compile() diagnostics and the Graphviz / Mermaid exports.
#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sg = stategraph;

namespace draw_test {
enum class path { fast, slow, other };
BOOST_DESCRIBE_ENUM(path, fast, slow, other)
struct st {
    path route = path::fast;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (route, log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }

sg::update<st> note(const st&) { return {}; }
path pick(const st& s) { return s.route; }
} // namespace draw_test

using draw_test::st;
using draw_test::path;

BOOST_AUTO_TEST_SUITE(compile_diagnostics)

BOOST_AUTO_TEST_CASE(reports_every_problem_at_once_with_nearest_names) {
    sg::state_graph<st> g;
    g.add_node("classify", draw_test::note)
        .add_node("retrieve", draw_test::note)
        .add_node("orphan", draw_test::note)
        .add_node("loop_a", draw_test::note)
        .add_node("loop_b", draw_test::note);
    g.add_edge(sg::START, "classify")
        .add_edge("classify", "retreive") // typo
        .add_edge("retrieve", sg::END)
        .add_edge("orphan", sg::END)
        .add_edge("loop_a", "loop_b")
        .add_edge("loop_b", "loop_a");
    // An enum route that leaves `other` unmapped.
    g.add_conditional_edges("retrieve", draw_test::pick,
                            std::map<path, std::string>{{path::fast, sg::END}, {path::slow, "loop_a"}});
    std::vector<sg::graph_problem> problems;
    auto compiled = g.compile({}, problems);
    BOOST_TEST(!compiled.has_value());
    auto has = [&](sg::errc c, const std::string& text) {
        for (const auto& p : problems)
            if (p.code == c && p.message.find(text) != std::string::npos) return true;
        return false;
    };
    BOOST_TEST(has(sg::errc::unknown_node, "did you mean 'retrieve'?"));
    BOOST_TEST(has(sg::errc::unreachable_node, "'orphan'"));
    BOOST_TEST(has(sg::errc::no_path_to_end, "'loop_a'"));
    BOOST_TEST(has(sg::errc::unmapped_route, "'other'"));
    BOOST_TEST(problems.size() >= 4u);
    // The throwing form carries the same list and names the first kind.
    try {
        g.compile();
        BOOST_FAIL("compile() should throw");
    } catch (const sg::compile_error& e) {
        BOOST_TEST(e.problems().size() == problems.size());
        BOOST_TEST(std::string(e.what()).find("problems") != std::string::npos);
        BOOST_TEST(e.code().category().name() == std::string("stategraph"));
    }
}

BOOST_AUTO_TEST_CASE(join_that_can_be_skipped_is_reported) {
    sg::state_graph<st> g;
    for (std::string n : {"router", "a", "b", "join"}) g.add_node(n, draw_test::note);
    g.add_edge(sg::START, "router");
    g.add_conditional_edges("router", draw_test::pick,
                            std::map<path, std::string>{{path::fast, "a"}, {path::slow, "b"}, {path::other, "a"}});
    g.add_edge(std::vector<std::string>{"a", "b"}, "join").add_edge("join", sg::END);
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!g.compile({}, problems).has_value());
    BOOST_REQUIRE(!problems.empty());
    BOOST_TEST((problems[0].code == sg::errc::join_never_fires));
    BOOST_TEST(problems[0].nodes.front() == "join");
}

BOOST_AUTO_TEST_CASE(join_fed_by_a_fan_out_is_accepted) {
    sg::state_graph<st> g;
    for (std::string n : {"fan", "a", "b", "join"}) g.add_node(n, draw_test::note);
    g.add_edge(sg::START, "fan").add_edge("fan", "a").add_edge("fan", "b");
    g.add_edge(std::vector<std::string>{"a", "b"}, "join").add_edge("join", sg::END);
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(g.compile({}, problems).has_value());
    BOOST_TEST(problems.empty());
}

// LangGraph writes a join as add_edge(["a", "b"], "join"); the same braces here once made the
// call ambiguous (a std::string can be built from two pointers). Written as a newcomer writes it.
BOOST_AUTO_TEST_CASE(a_join_written_with_braces_is_a_join) {
    sg::state_graph<st> g;
    for (std::string n : {"fan", "a", "b", "join"}) g.add_node(n, draw_test::note);
    g.add_edge(sg::START, "fan").add_edge("fan", "a").add_edge("fan", "b");
    g.add_edge({"a", "b"}, "join").add_edge("join", sg::END);
    BOOST_REQUIRE(g.shape().joins.size() == 1u);
    BOOST_TEST(g.shape().joins[0].sources == (std::vector<std::string>{"a", "b"}));
    BOOST_TEST(g.shape().joins[0].target == "join");
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(g.compile({}, problems).has_value());
    BOOST_TEST(problems.empty());
}

BOOST_AUTO_TEST_CASE(duplicate_and_reserved_names) {
    sg::state_graph<st> g;
    g.add_node("a", draw_test::note).add_node("a", draw_test::note).add_node("__start__", draw_test::note);
    g.add_edge(sg::START, "a").add_edge("a", sg::END);
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!g.compile({}, problems).has_value());
    BOOST_TEST(problems.size() == 2u);
    for (const auto& p : problems) BOOST_TEST((p.code == sg::errc::duplicate_node));
}

BOOST_AUTO_TEST_CASE(missing_path_map_and_no_entry) {
    sg::state_graph<st> g;
    g.add_node("a", draw_test::note);
    g.add_conditional_edges("a", [](const st&) { return std::string("x"); }, std::vector<std::string>{});
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!g.compile({}, problems).has_value());
    bool no_entry = false, no_map = false;
    for (const auto& p : problems) {
        no_entry = no_entry || p.code == sg::errc::no_entry_point;
        no_map = no_map || p.code == sg::errc::missing_path_map;
    }
    BOOST_TEST(no_entry);
    BOOST_TEST(no_map);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(drawing)

static sg::compiled_graph<st> staged_graph() {
    sg::state_graph<st> g("review");
    g.add_node("intake", draw_test::note, {.stage = "entry"})
        .add_node("router", draw_test::note, {.stage = "entry"})
        .add_node("fast", draw_test::note, {.stage = "work"})
        .add_node("slow", draw_test::note, {.stage = "work", .retry = sg::retry_policy{}})
        .add_node("audit", draw_test::note, {.stage = "work"})
        .add_node("merge", draw_test::note, {.stage = "finish", .defer = true});
    g.add_edge(sg::START, "intake").add_edge("intake", "router").add_edge("intake", "audit");
    g.add_conditional_edges("router", draw_test::pick,
                            std::map<path, std::string>{{path::fast, "fast"}, {path::slow, "slow"}, {path::other, "fast"}});
    g.add_edge("fast", "merge").add_edge("slow", "merge").add_edge(std::vector<std::string>{"router", "audit"}, "merge");
    g.add_edge("merge", sg::END);
    g.interrupt_before({"slow"});
    return g.compile();
}

BOOST_AUTO_TEST_CASE(dot_has_clusters_dashed_routes_and_joins_and_renders) {
    auto app = staged_graph();
    std::ostringstream os;
    app.write_dot(os);
    const std::string dot = os.str();
    BOOST_TEST(dot.find("subgraph \"cluster_entry") != std::string::npos);
    BOOST_TEST(dot.find("subgraph \"cluster_work") != std::string::npos);
    BOOST_TEST(dot.find("style=dashed, label=\"slow\"") != std::string::npos);
    BOOST_TEST(dot.find("\"join#0\"->merge") != std::string::npos); // the junction leads to the join's target
    BOOST_TEST(dot.find("router->\"join#0\"") != std::string::npos);
    BOOST_TEST(dot.find("router->merge") == std::string::npos);     // no direct edge bypasses the junction
    BOOST_TEST(dot.find("merge\\n(deferred)") != std::string::npos); // one backslash: a line break for dot
    BOOST_TEST(dot.find("(deferred)") != std::string::npos);
    BOOST_TEST(dot.find("interrupt before") != std::string::npos);
    BOOST_TEST(dot.find("label=\"START\"") != std::string::npos);
    const std::string file = "stategraph_test_draw.dot";
    std::ofstream(file) << dot;
    int rc = std::system(("dot -Tsvg " + file + " -o stategraph_test_draw.svg").c_str());
    BOOST_TEST(rc == 0);
    std::ifstream svg("stategraph_test_draw.svg");
    std::string content((std::istreambuf_iterator<char>(svg)), {});
    BOOST_TEST(content.find("<svg") != std::string::npos);
    BOOST_TEST(content.find("merge") != std::string::npos);
    std::remove(file.c_str());
    std::remove("stategraph_test_draw.svg");
}

BOOST_AUTO_TEST_CASE(dot_highlights_path_and_position) {
    auto app = staged_graph();
    std::ostringstream os;
    app.write_dot(os, {.visited = {"intake", "router"}, .current = {"slow"}});
    BOOST_TEST(os.str().find("#cfe2ff") != std::string::npos);
    BOOST_TEST(os.str().find("#ffd966") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(mermaid_lists_stages_and_routes) {
    auto app = staged_graph();
    std::ostringstream os;
    app.write_mermaid(os);
    const std::string m = os.str();
    BOOST_TEST(m.find("flowchart TD") == 0u);
    BOOST_TEST(m.find("subgraph work") != std::string::npos);
    BOOST_TEST(m.find("router -. slow .-> slow") != std::string::npos);
    BOOST_TEST(m.find("join0") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(signature_changes_with_shape) {
    auto a = staged_graph();
    sg::state_graph<st> g;
    g.add_node("x", draw_test::note).add_edge(sg::START, "x").add_edge("x", sg::END);
    auto b = g.compile();
    BOOST_TEST(a.signature() != b.signature());
    BOOST_TEST(a.signature() == staged_graph().signature());
}

BOOST_AUTO_TEST_SUITE_END()
