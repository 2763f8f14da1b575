// The graph description file (write_json / read_json) and the graph diff (diff_graphs,
// diff_summary, write_diff_dot, stategraph-diff, global_supervisor dot --diff), over real edits
// of the Global Supervisor's graph.
#define BOOST_TEST_MODULE graph_description
#include <stategraph/graph_description.hpp>

#include <stategraph/thread_overlay.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/state_graph.hpp>

#include "graph.hpp"
#include "run_awaitable.hpp"
#include "services.hpp"

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace sg = stategraph;
namespace gs = global_supervisor;
namespace json = boost::json;

namespace {

std::string supervisor_json() {
    gs::services::options o;
    o.db = ":memory:";
    o.seed_demo = false;
    gs::services svc(std::move(o));
    auto g = gs::build_graph(nullptr, svc);
    std::ostringstream os;
    sg::write_json(os, g);
    return os.str();
}

std::string slurp(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// Renders DOT with Graphviz; returns the SVG (empty when dot failed).
std::string render(const std::string& dot, const std::string& stem) {
    std::ofstream(stem + ".dot") << dot;
    int rc = std::system(("dot -Tsvg " + stem + ".dot -o " + stem + ".svg").c_str());
    BOOST_TEST(rc == 0);
    auto svg = slurp(stem + ".svg");
    std::remove((stem + ".dot").c_str());
    std::remove((stem + ".svg").c_str());
    return svg;
}

sg::description_error read_error(const std::string& text) {
    try {
        sg::read_json(text);
    } catch (const sg::description_error& e) {
        return e;
    }
    BOOST_FAIL("read_json accepted a bad description: " + text);
    throw;
}

/// The edits a pull request could make, applied to the JSON of the supervisor's graph.
struct edited {
    json::object doc;
    std::string retry_node, breakpoint_node, route_from, route_key, old_target, new_target, removed_from, removed_to;
};

edited edit(const std::string& text) {
    edited e;
    e.doc = json::parse(text).as_object();
    auto& nodes = e.doc["nodes"].as_array();
    // 1. a new node "audit" in the response stage, wired before END
    nodes.push_back(json::object{{"name", "audit"}, {"stage", "response"}, {"kind", "node"}, {"defer", false},
                                 {"retry", nullptr}, {"timeout_ms", 0}, {"cache", false}, {"on_error", ""},
                                 {"interrupt_before", false}, {"interrupt_after", false}, {"ends", json::array{}}});
    auto& edges = e.doc["edges"].as_array();
    // 2. an edge removed (the first one that is not START's)
    for (std::size_t i = 0; i < edges.size(); ++i) {
        auto& ed = edges[i].as_object();
        if (ed["from"].as_string() == sg::START) continue;
        e.removed_from = std::string(ed["from"].as_string());
        e.removed_to = std::string(ed["to"].as_string());
        edges.erase(edges.begin() + static_cast<std::ptrdiff_t>(i));
        break;
    }
    edges.push_back(json::object{{"from", "audit"}, {"to", sg::END}});
    edges.push_back(json::object{{"from", e.removed_from}, {"to", "audit"}});
    // 3. a retry policy changed, 4. a breakpoint added
    for (auto& v : nodes) {
        auto& n = v.as_object();
        if (e.retry_node.empty() && n["retry"].is_string()) {
            e.retry_node = std::string(n["name"].as_string());
            n["retry"] = "attempts=5 initial=250ms backoff=2 max=10000ms jitter timeout=0ms";
        } else if (e.breakpoint_node.empty() && n["kind"].as_string() == "node" && !n["interrupt_before"].as_bool() &&
                   n["name"].as_string() != "audit") {
            e.breakpoint_node = std::string(n["name"].as_string());
            n["interrupt_before"] = true;
        }
    }
    // 5. a route sent elsewhere
    auto& route = e.doc["routes"].as_array().at(0).as_object();
    auto& first = route["routes"].as_array().at(0).as_object();
    e.route_from = std::string(route["from"].as_string());
    e.route_key = std::string(first["key"].as_string());
    e.old_target = std::string(first["target"].as_string());
    e.new_target = e.old_target == sg::END ? "audit" : std::string(sg::END);
    first["target"] = e.new_target;
    return e;
}

} // namespace

BOOST_AUTO_TEST_SUITE(description_file)

BOOST_AUTO_TEST_CASE(stable_across_builds_and_round_trips) {
    auto a = supervisor_json(), b = supervisor_json();
    BOOST_TEST(a == b);
    BOOST_TEST(!contains(a, "0x")); // no addresses
    auto doc = json::parse(a).as_object();
    BOOST_TEST(doc["format"].as_string() == "stategraph-graph");
    BOOST_TEST(doc["nodes"].as_array().size() > 10u);
    BOOST_TEST(!doc["routes"].as_array().empty());
    // nodes sorted by name
    std::vector<std::string> names;
    for (const auto& n : doc["nodes"].as_array()) names.emplace_back(n.as_object().at("name").as_string());
    BOOST_TEST(std::is_sorted(names.begin(), names.end()));
    // the modifiers are there: some node has a retry policy in words, every node a stage
    BOOST_TEST(contains(a, "\"retry\": \"attempts="));
    auto back = sg::read_json(a);
    std::ostringstream again;
    sg::write_json(again, back);
    BOOST_TEST(again.str() == a);
    BOOST_TEST(sg::diff_graphs(back, back).empty());
    BOOST_TEST(sg::diff_summary(sg::diff_graphs(back, back)) == "graph '" + back.name + "': no changes\n");
}

BOOST_AUTO_TEST_CASE(bad_files_name_the_field) {
    auto good = json::parse(supervisor_json()).as_object();

    auto e = read_error("{ not json");
    BOOST_TEST((e.kind() == sg::description_errc::not_json));
    BOOST_TEST((e.code() == sg::description_errc::not_json));

    auto missing = good;
    missing.erase("nodes");
    e = read_error(json::serialize(missing));
    BOOST_TEST((e.kind() == sg::description_errc::missing_field));
    BOOST_TEST(e.field() == "nodes");
    BOOST_TEST(contains(e.what(), "'nodes'"));

    auto wrong = good;
    wrong["nodes"].as_array()[2].as_object()["defer"] = "no";
    e = read_error(json::serialize(wrong));
    BOOST_TEST((e.kind() == sg::description_errc::wrong_type));
    BOOST_TEST(e.field() == "nodes[2].defer");

    auto bad_route = good;
    bad_route["routes"].as_array()[0].as_object()["routes"].as_array()[0].as_object().erase("target");
    e = read_error(json::serialize(bad_route));
    BOOST_TEST((e.kind() == sg::description_errc::missing_field));
    BOOST_TEST(e.field() == "routes[0].routes[0].target");

    auto newer = good;
    newer["version"] = 99;
    e = read_error(json::serialize(newer));
    BOOST_TEST((e.kind() == sg::description_errc::unsupported_version));
    BOOST_TEST(e.field() == "version");
    BOOST_TEST(std::string(sg::description_category().name()) == "stategraph.description");

    auto twice = good;
    auto& nodes = twice["nodes"].as_array();
    nodes.push_back(nodes[1]);
    e = read_error(json::serialize(twice));
    BOOST_TEST((e.kind() == sg::description_errc::duplicate_node));
    BOOST_TEST(e.field() == "nodes[" + std::to_string(nodes.size() - 1) + "].name");
    BOOST_TEST(contains(e.what(), std::string(nodes[1].at("name").as_string())));
}

// Node names with backslashes and quotes are one node each in the drawing, and valid DOT.
BOOST_AUTO_TEST_CASE(write_dot_escapes_every_id_alike) {
    sg::topology t;
    t.name = "odd names";
    for (std::string name : {"a\\b", "back\\", "say \"hi\""}) {
        sg::node_spec n;
        n.name = name;
        n.stage = "stage \\ one";
        t.nodes.push_back(n);
    }
    t.edges = {{sg::START, "a\\b"}, {"a\\b", "back\\"}, {"back\\", "say \"hi\""}, {"say \"hi\"", sg::END}};
    std::ostringstream dot;
    sg::write_dot(dot, t);
    auto svg = render(dot.str(), "stategraph_test_odd_names");
    std::size_t nodes = 0;
    for (auto at = svg.find("class=\"node\""); at != std::string::npos; at = svg.find("class=\"node\"", at + 1)) ++nodes;
    BOOST_TEST(nodes == 5u, dot.str()); // START, END and the three
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(graph_diff)

BOOST_AUTO_TEST_CASE(edits_of_the_supervisor_graph) {
    auto old_text = supervisor_json();
    auto e = edit(old_text);
    BOOST_REQUIRE(!e.retry_node.empty());
    BOOST_REQUIRE(!e.breakpoint_node.empty());
    auto old_graph = sg::read_json(old_text), new_graph = sg::read_json(json::serialize(e.doc));
    auto d = sg::diff_graphs(old_graph, new_graph);
    auto summary = sg::diff_summary(d);
    BOOST_TEST_MESSAGE(summary);
    BOOST_TEST(contains(summary, "+ node 'audit': stage response\n"));
    BOOST_TEST(contains(summary, "+ edge 'audit' -> '__end__'\n"));
    BOOST_TEST(contains(summary, "- edge '" + e.removed_from + "' -> '" + e.removed_to + "'\n"));
    BOOST_TEST(contains(summary, "~ node '" + e.retry_node + "': retry: attempts="));
    BOOST_TEST(contains(summary, "-> attempts=5 initial=250ms backoff=2 max=10000ms jitter timeout=0ms\n"));
    BOOST_TEST(contains(summary, "~ node '" + e.breakpoint_node + "': interrupt_before: no -> yes\n"));
    BOOST_TEST(contains(summary, "~ route '" + e.route_from + "' [" + e.route_key + "]: target: " + e.old_target + " -> " + e.new_target + "\n"));
    // first line: the counts (2 nodes/edges added + the edge into audit, 1 removed, 3 changed)
    BOOST_TEST(summary.rfind("graph '" + new_graph.name + "': 3 added, 1 removed, 3 changed\n", 0) == 0);

    std::ostringstream dot;
    sg::write_diff_dot(dot, old_graph, new_graph);
    auto text = dot.str();
    BOOST_TEST(contains(text, "\"audit\" [label=\"+ audit\", color=\"#1a7f37\""));
    BOOST_TEST(contains(text, "\"" + e.removed_from + "\" -> \"" + e.removed_to + "\" [style=dashed, color=\"#cf222e\""));
    BOOST_TEST(contains(text, "~ interrupt_before: no -> yes"));
    BOOST_TEST(contains(text, "[interrupt before]"));
    BOOST_TEST(contains(text, "label=\"response\""));
    auto svg = render(text, "stategraph_test_diff");
    BOOST_TEST(contains(svg, "<svg"));
    BOOST_TEST(contains(svg, "+ audit"));
    BOOST_TEST(contains(svg, "#cf222e"));
}

// A Send branch gives every target the key "Send": the order of its targets is no change, and a
// new target is an added edge, not a retarget.
BOOST_AUTO_TEST_CASE(send_targets_are_a_set) {
    auto fan_out = [](std::vector<std::string> targets) {
        sg::topology t;
        t.name = "fan";
        for (std::string name : {"x", "a", "b", "c"}) {
            sg::node_spec n;
            n.name = name;
            n.send_only = name != "x";
            t.nodes.push_back(n);
        }
        t.edges = {{sg::START, "x"}};
        sg::branch_spec br;
        br.from = "x";
        br.sends = true;
        for (const auto& to : targets) br.routes.emplace_back("Send", to);
        t.branches.push_back(br);
        return t;
    };
    BOOST_TEST(sg::diff_graphs(fan_out({"a", "b"}), fan_out({"b", "a"})).empty(),
               sg::diff_summary(sg::diff_graphs(fan_out({"a", "b"}), fan_out({"b", "a"}))));
    auto summary = sg::diff_summary(sg::diff_graphs(fan_out({"a", "b"}), fan_out({"a", "b", "c"})));
    BOOST_TEST(!contains(summary, "~ route"), summary);
    BOOST_TEST(contains(summary, "'c'"), summary);
    BOOST_TEST(contains(summary, "1 added, 0 removed, 0 changed"), summary);
    // One target on each side is still a retarget.
    summary = sg::diff_summary(sg::diff_graphs(fan_out({"a"}), fan_out({"c"})));
    BOOST_TEST(contains(summary, "~ route 'x' [Send]: target: a -> c"), summary);
}

BOOST_AUTO_TEST_CASE(removed_node_and_changed_stage) {
    auto old_text = supervisor_json();
    auto doc = json::parse(old_text).as_object();
    auto& nodes = doc["nodes"].as_array();
    std::string gone(nodes[0].as_object()["name"].as_string()), moved(nodes[1].as_object()["name"].as_string());
    nodes.erase(nodes.begin());
    nodes[0].as_object()["stage"] = "elsewhere";
    auto d = sg::diff_graphs(sg::read_json(old_text), sg::read_json(json::serialize(doc)));
    auto summary = sg::diff_summary(d);
    BOOST_TEST(contains(summary, "- node '" + gone + "'"));
    BOOST_TEST(contains(summary, "~ node '" + moved + "': stage: "));
    BOOST_TEST(contains(summary, " -> elsewhere\n"));
    std::ostringstream dot;
    sg::write_diff_dot(dot, sg::read_json(old_text), sg::read_json(json::serialize(doc)));
    BOOST_TEST(contains(dot.str(), "[label=\"- " + gone));
    BOOST_TEST(contains(render(dot.str(), "stategraph_test_diff_removed"), "<svg"));
}

#if defined(STATEGRAPH_DIFF_TOOL) && defined(STATEGRAPH_SUPERVISOR_TOOL)
BOOST_AUTO_TEST_CASE(command_line_tools) {
    // global_supervisor dot --format json is the same description; stategraph-diff and dot --diff agree.
    std::string sup = STATEGRAPH_SUPERVISOR_TOOL, tool = STATEGRAPH_DIFF_TOOL;
    BOOST_TEST(std::system((sup + " dot --format json > stategraph_test_old.json").c_str()) == 0);
    auto old_text = slurp("stategraph_test_old.json");
    BOOST_TEST(old_text == supervisor_json());
    std::ofstream("stategraph_test_new.json") << json::serialize(edit(old_text).doc);
    int same = std::system((tool + " stategraph_test_old.json stategraph_test_old.json --summary > /dev/null").c_str());
    BOOST_TEST(WEXITSTATUS(same) == 0);
    int differ = std::system((tool + " stategraph_test_old.json stategraph_test_new.json --summary > stategraph_test.txt").c_str());
    BOOST_TEST(WEXITSTATUS(differ) == 1);
    BOOST_TEST(contains(slurp("stategraph_test.txt"), "+ node 'audit'"));
    std::system((tool + " stategraph_test_old.json stategraph_test_new.json > stategraph_test_tool.dot").c_str());
    BOOST_TEST(std::system("dot -Tsvg stategraph_test_tool.dot -o stategraph_test_tool.svg") == 0);
    BOOST_TEST(contains(slurp("stategraph_test_tool.svg"), "<svg"));
    // the other way round: the compiled graph against the edited file shows audit removed
    BOOST_TEST(std::system((sup + " dot --diff stategraph_test_new.json --format summary > stategraph_test.txt").c_str()) == 0);
    BOOST_TEST(contains(slurp("stategraph_test.txt"), "- node 'audit'"));
    BOOST_TEST(std::system((sup + " dot --diff stategraph_test_new.json > stategraph_test_tool.dot").c_str()) == 0);
    BOOST_TEST(std::system("dot -Tsvg stategraph_test_tool.dot -o stategraph_test_tool.svg") == 0);
    int usage = std::system((sup + " dot --checkpoint c1 > /dev/null 2> stategraph_test.txt").c_str());
    BOOST_TEST(WEXITSTATUS(usage) == 2);
    BOOST_TEST(contains(slurp("stategraph_test.txt"), "--checkpoint needs --thread"));
    std::ofstream("stategraph_test_bad.json") << "{\"format\": \"stategraph-graph\"}";
    int bad = std::system((tool + " stategraph_test_old.json stategraph_test_bad.json 2> stategraph_test.txt").c_str());
    BOOST_TEST(WEXITSTATUS(bad) == 2);
    BOOST_TEST(contains(slurp("stategraph_test.txt"), "'version'"));
    for (auto f : {"stategraph_test_old.json", "stategraph_test_new.json", "stategraph_test.txt", "stategraph_test_tool.dot",
                   "stategraph_test_tool.svg", "stategraph_test_bad.json"})
        std::remove(f);
}
#endif

BOOST_AUTO_TEST_SUITE_END()

namespace overlay_test {
struct st {
    std::vector<std::string> log;
    bool fail = false;
};
BOOST_DESCRIBE_STRUCT(st, (), (log, fail))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
using upd = sg::update<st>;

sg::compiled_graph<st> graph(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<st> inner;
    inner.add_node("step", [](const st&) { return upd{}.set<&st::log>({"step"}); });
    inner.add_edge(sg::START, "step").add_edge("step", sg::END);
    sg::state_graph<st> g;
    g.add_node("a", [](const st&) { return upd{}.set<&st::log>({"a"}); });
    g.add_node("sub", inner.compile());
    g.add_node("ask", [](const st& s, sg::context& ctx) {
        if (s.fail) throw std::runtime_error("ask broke");
        auto x = ctx.interrupt_now<std::string>("q?");
        return upd{}.set<&st::log>({"ask:" + x});
    });
    g.add_edge(sg::START, "a").add_edge("a", "sub").add_edge("sub", "ask").add_edge("ask", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}
} // namespace overlay_test

BOOST_AUTO_TEST_SUITE(thread_overlays)

BOOST_AUTO_TEST_CASE(path_to_a_checkpoint_and_pending_interrupt) {
    using sg::test::run;
    auto app = overlay_test::graph(std::make_shared<sg::checkpoint::memory_saver>());
    auto r = run(app.invoke(overlay_test::upd{}, {.thread_id = "t1"}));
    BOOST_REQUIRE(r.status == sg::run_status::interrupted);
    auto now = run(sg::thread_overlay(app, "t1"));
    BOOST_TEST(now.visited == (std::vector<std::string>{"a", "sub"}));
    BOOST_TEST(now.interrupted == (std::vector<std::string>{"ask"}));
    BOOST_TEST(now.failed.empty());
    std::ostringstream dot;
    sg::write_dot(dot, app.shape(), now);
    BOOST_TEST(contains(dot.str(), "ask\\n(waiting: interrupt)"));
    BOOST_TEST(contains(dot.str(), "thread t1 at checkpoint"));
    BOOST_TEST(contains(render(dot.str(), "stategraph_test_overlay"), "<svg"));

    // an earlier checkpoint: only the path up to it
    auto history = run(app.get_state_history("t1"));
    const sg::state_snapshot<overlay_test::st>* after_a = nullptr;
    for (const auto& s : history)
        if (s.next == std::vector<std::string>{"sub"}) after_a = &s;
    BOOST_REQUIRE(after_a);
    auto then = run(sg::thread_overlay(app, "t1", after_a->checkpoint_id));
    BOOST_TEST(then.visited == (std::vector<std::string>{"a"}));
    BOOST_TEST(then.current == (std::vector<std::string>{"sub"}));
    BOOST_TEST(then.interrupted.empty());

    try {
        run(sg::thread_overlay(app, "t1", "no-such-checkpoint"));
        BOOST_FAIL("an unknown checkpoint was accepted");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::checkpoint_not_found));
        BOOST_TEST(e.names() == (std::vector<std::string>{"t1", "no-such-checkpoint"}));
    }
    try {
        run(sg::thread_overlay(app, "nobody"));
        BOOST_FAIL("an unknown thread was accepted");
    } catch (const sg::thread_error& e) {
        BOOST_TEST((e.kind() == sg::errc::thread_not_found));
    }
}

BOOST_AUTO_TEST_CASE(failed_node_and_inside_a_subgraph) {
    using sg::test::run;
    auto app = overlay_test::graph(std::make_shared<sg::checkpoint::memory_saver>());
    BOOST_CHECK_THROW(run(app.invoke(overlay_test::upd{}.set<&overlay_test::st::fail>(true), {.thread_id = "t2"})), std::exception);
    auto o = run(sg::thread_overlay(app, "t2"));
    BOOST_TEST(o.failed == (std::vector<std::string>{"ask"}));
    // inside the subgraph: its nodes are named "sub/<node>"
    o.visited.push_back("sub/step");
    std::ostringstream dot;
    sg::write_dot(dot, app.shape(), o);
    auto text = dot.str();
    BOOST_TEST(contains(text, "ask\\n(failed)"));
    auto inner = text.find("\"sub/step\"[label=\"step\"");
    BOOST_REQUIRE(inner != std::string::npos);
    BOOST_TEST(text.substr(inner, 120).find("#cfe2ff") != std::string::npos);
    BOOST_TEST(contains(render(text, "stategraph_test_overlay_failed"), "<svg"));
}

BOOST_AUTO_TEST_SUITE_END()
