// run_config::observer (run_observer.hpp): node ends with their durations and failures, checkpoint
// writes, usage reported by nodes (a subgraph's too), summed by usage_tally.
#define BOOST_TEST_MODULE stategraph_run_observer
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/context.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/state_graph.hpp>
#include <stategraph/usage_tally.hpp>

#include <boost/test/unit_test.hpp>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg = stategraph;

namespace {

struct obs_st {
    std::vector<std::string> trail;
    bool fail = false;
};
BOOST_DESCRIBE_STRUCT(obs_st, (), (trail, fail))
inline auto reducers(sg::for_state<obs_st>) { return sg::reducers{sg::reduce<&obs_st::trail>(sg::append)}; }

struct recorder : sg::usage_tally {
    std::vector<std::string> ended;     // "<node>" or "<node>!" when failed
    int checkpoint_writes = 0;
    void on_node_end(std::string_view node, std::chrono::steady_clock::duration took, bool failed) override {
        BOOST_TEST(took.count() >= 0);
        ended.push_back(std::string(node) + (failed ? "!" : ""));
    }
    void on_checkpoint_write(std::chrono::steady_clock::duration) override { ++checkpoint_writes; }
};

sg::update<obs_st> mark(const char* name) {
    std::vector<std::string> one{name};
    return sg::update<obs_st>{}.set<&obs_st::trail>(std::move(one));
}

sg::compiled_graph<obs_st> build(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<obs_st> sub("inner");
    sub.add_node("talk", [](const obs_st&, sg::context& ctx) {
        ctx.report_usage("model-a", sg::token_usage{10, 4});
        ctx.report_usage("model-b", sg::token_usage{1, 2});
        return mark("talk");
    });
    sub.add_edge(sg::START, "talk").add_edge("talk", sg::END);
    sg::state_graph<obs_st> g("outer");
    g.add_node("first", [](const obs_st&, sg::context& ctx) {
        ctx.report_usage("model-a", sg::token_usage{5, 1});
        return mark("first");
    });
    g.add_node("inner", sub.compile());
    g.add_node("last", [](const obs_st& s) {
        if (s.fail) throw std::runtime_error("asked to fail");
        return mark("last");
    });
    g.add_edge(sg::START, "first").add_edge("first", "inner").add_edge("inner", "last").add_edge("last", sg::END);
    sg::compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(o);
}

} // namespace

BOOST_AUTO_TEST_CASE(nodes_checkpoints_and_usage) {
    auto app = build(std::make_shared<sg::checkpoint::memory_saver>());
    recorder rec;
    sg::run_config cfg;
    cfg.thread_id = "t1";
    cfg.observer = &rec;
    auto in = sg::update<obs_st>{}.set<&obs_st::fail>(false);
    (void)sg::run_sync(app.invoke(std::move(in), cfg));
    // The subgraph's node first (it ends inside the parent's "inner" task), then "inner".
    const std::vector<std::string> want{"first", "talk", "inner", "last"};
    BOOST_TEST(rec.ended == want, boost::test_tools::per_element());
    BOOST_TEST(rec.checkpoint_writes >= 4); // the input, each step, the subgraph's own
    BOOST_TEST(rec.total().input_tokens == 16);
    BOOST_TEST(rec.total().output_tokens == 7);
    BOOST_TEST(rec.total().total_tokens() == 23);
    BOOST_TEST(rec.by_model().at("model-a").input_tokens == 15);
    BOOST_TEST(rec.by_model().at("model-b").output_tokens == 2);
}

BOOST_AUTO_TEST_CASE(a_failed_node_is_reported_failed) {
    auto app = build(nullptr);
    recorder rec;
    sg::run_config cfg;
    cfg.observer = &rec;
    auto in = sg::update<obs_st>{}.set<&obs_st::fail>(true);
    BOOST_CHECK_THROW((void)sg::run_sync(app.invoke(std::move(in), cfg)), std::exception);
    BOOST_TEST_REQUIRE(!rec.ended.empty());
    BOOST_TEST(rec.ended.back() == "last!");
    BOOST_TEST(rec.checkpoint_writes == 0); // no checkpointer
}

BOOST_AUTO_TEST_CASE(without_an_observer_usage_goes_nowhere) {
    auto app = build(nullptr);
    auto in = sg::update<obs_st>{}.set<&obs_st::fail>(false);
    auto r = sg::run_sync(app.invoke(std::move(in)));
    BOOST_TEST(r.values.trail.size() == 3u);
}
