// GET /metrics (Prometheus's text format 0.0.4) and token accounting: the exposition text on
// its own, then a server running a model node against the fake OpenAI server (tests/nodes),
// whose usage reaches the run record, the thread's metadata, the stream and the metrics.
#define BOOST_TEST_MODULE stategraph_server_metrics
#include "server_test_support.hpp"

#include "fake_openai_server.hpp" // tests/nodes
#include "prometheus_text.hpp"    // server/src
#include "histogram.hpp"

#include <stategraph/nodes/model_node.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/nodes/otlp_tracer.hpp>

#include "otlp_receiver.hpp" // tests/support
#include "temp_dir.hpp"

#include <sstream>

using namespace server_test;
namespace nodes = stategraph::nodes;

namespace {

/// The value of the sample written exactly `series` (name and labels), or -1 when there is none.
double sample_of(const std::string& text, const std::string& series) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line))
        if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ')
            return std::stod(line.substr(series.size() + 1));
    return -1;
}

struct talk {
    std::vector<nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(talk, (), (messages))
inline auto reducers(sg::for_state<talk>) { return sg::reducers{sg::reduce<&talk::messages>(sg::messages)}; }

} // namespace

BOOST_AUTO_TEST_CASE(exposition_text) {
    srv::prometheus_text t;
    t.family("x_total", "Things\\counted\nhere.", "counter");
    t.sample("x_total", {{"model", "a\"b\\c\nd"}, {"kind", "input"}}, 3);
    t.sample("x_total", {}, 2.5);
    srv::histogram h({0.1, 1});
    h.observe(0.05);
    h.observe(0.1); // on a bound: that bucket (le is "less or equal")
    h.observe(0.5);
    h.observe(7);
    t.family("d_seconds", "Durations.", "histogram");
    t.histogram_samples("d_seconds", {{"node", "n"}}, h);
    const std::string want = "# HELP x_total Things\\\\counted\\nhere.\n"
                             "# TYPE x_total counter\n"
                             "x_total{model=\"a\\\"b\\\\c\\nd\",kind=\"input\"} 3\n"
                             "x_total 2.5\n"
                             "# HELP d_seconds Durations.\n"
                             "# TYPE d_seconds histogram\n"
                             "d_seconds_bucket{node=\"n\",le=\"0.1\"} 2\n"
                             "d_seconds_bucket{node=\"n\",le=\"1\"} 3\n"
                             "d_seconds_bucket{node=\"n\",le=\"+Inf\"} 4\n"
                             "d_seconds_sum{node=\"n\"} 7.65\n"
                             "d_seconds_count{node=\"n\"} 4\n";
    BOOST_TEST(t.str() == want);
    BOOST_TEST(srv::format_sample(std::numeric_limits<double>::infinity()) == "+Inf");
    BOOST_TEST(srv::format_sample(-std::numeric_limits<double>::infinity()) == "-Inf");
    BOOST_TEST(srv::format_sample(std::numeric_limits<double>::quiet_NaN()) == "NaN");
    BOOST_TEST(srv::format_sample(0.005) == "0.005");
}

BOOST_AUTO_TEST_CASE(usage_and_metrics_of_a_model_run) {
    net::io_context fake_io;
    stategraph::test::fake_openai_server fake(fake_io, "sk-test");
    fake.script.push_back({"one two three", {}});
    fake.script.push_back({"four five", {}});
    std::thread fake_thread([&] { fake_io.run(); });
    struct stopper { // the fake stops however the test ends
        net::io_context& io;
        stategraph::test::fake_openai_server& fake;
        std::thread& t;
        ~stopper() {
            net::post(io, [this] { fake.stop(); io.stop(); });
            t.join();
        }
    } stop_fake{fake_io, fake, fake_thread};

    nodes::openai_options mo;
    mo.base_url = fake.base_url();
    mo.api_key = "sk-test";
    mo.model = "gpt-test";
    auto model = std::make_shared<nodes::openai_chat_model>(mo);
    sg::state_graph<talk> g("talker");
    g.add_node("agent", nodes::model_node<&talk::messages>(model));
    g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
    std::vector<srv::assistant_spec> more;
    more.push_back(srv::make_assistant("talker", g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()})));
    auto opts = test_options();
    opts.api_keys = {"k1"};
    const std::map<std::string, std::string> key{{"x-api-key", "k1"}};
    {
        running_server s(opts, std::move(more));
        // The API keys guard /metrics by default: a bearer token of one is what Prometheus sends.
        BOOST_TEST(get(s.port, "/metrics").status == 401u);
        BOOST_TEST(get(s.port, "/metrics", {{"authorization", "Bearer nope"}}).status == 401u);
        auto before = get(s.port, "/metrics", {{"authorization", "Bearer k1"}});
        BOOST_TEST_REQUIRE(before.status == 200u, before.body);
        BOOST_TEST(before.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8");
        BOOST_TEST(sample_of(before.body, "stategraph_runs_started_total") == 0.0);
        BOOST_TEST(sample_of(before.body, "stategraph_queue_depth") == 0.0);

        auto th = post(s.port, "/threads", json::object{}, key);
        BOOST_TEST_REQUIRE(th.status == 200u, th.body);
        const std::string tid(th.json().at("thread_id").as_string());
        const json::object input{{"messages", json::array{json::object{{"role", "user"}, {"content", "hello there"}, {"tool_calls", json::array{}},
                                                                          {"tool_call_id", ""}, {"id", ""}, {"error", ""}}}}};
        // One run streamed: its last event before the end is the metadata with its usage.
        auto r = post(s.port, "/threads/" + tid + "/runs/stream",
                      json::object{{"assistant_id", "talker"}, {"input", input}, {"stream_mode", "values"}}, key);
        BOOST_TEST_REQUIRE(r.status == 200u, r.body);
        auto events = parse_sse(r.body);
        BOOST_TEST_REQUIRE(events.size() >= 2u);
        const std::string run_id(events.front().data.at("run_id").as_string());
        const auto& last = events.back();
        BOOST_TEST_REQUIRE(last.event == "metadata", r.body);
        const auto u1 = last.data.at("usage").as_object();
        BOOST_TEST(u1.at("output_tokens").as_int64() == 3); // the fake counts words: "one two three"
        const auto in1 = u1.at("input_tokens").as_int64();
        BOOST_TEST(in1 > 0);
        BOOST_TEST(u1.at("total_tokens").as_int64() == in1 + 3);
        BOOST_TEST(u1.at("by_model").at("gpt-test").at("output_tokens").as_int64() == 3);

        // The run record has it.
        auto rec = get(s.port, "/threads/" + tid + "/runs/" + run_id, key);
        BOOST_TEST_REQUIRE(rec.status == 200u, rec.body);
        BOOST_TEST(rec.json().at("usage").as_object() == u1);

        // A second run (waited): the thread's metadata sums both.
        auto w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "talker"}, {"input", input}}, key);
        BOOST_TEST_REQUIRE(w.status == 200u, w.body);
        auto thread = get(s.port, "/threads/" + tid, key);
        BOOST_TEST_REQUIRE(thread.status == 200u, thread.body);
        const json::value thread_json = thread.json();
        const auto& tu = thread_json.at("metadata").at("usage").as_object();
        const auto out_total = tu.at("output_tokens").as_int64();
        BOOST_TEST(out_total == 5); // 3 + "four five"
        const auto in_total = tu.at("input_tokens").as_int64();
        BOOST_TEST(in_total > in1); // the second prompt holds the first exchange
        BOOST_TEST(tu.at("by_model").at("gpt-test").at("total_tokens").as_int64() == in_total + out_total);

        // The metrics moved.
        auto m = get(s.port, "/metrics", key);
        BOOST_TEST_REQUIRE(m.status == 200u, m.body);
        const auto& text = m.body;
        BOOST_TEST_MESSAGE(text);
        BOOST_TEST(sample_of(text, "stategraph_runs_started_total") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_runs_ended_total{status=\"success\"}") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_runs{status=\"success\"}") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_runs{status=\"pending\"}") == 0.0);
        BOOST_TEST(sample_of(text, "stategraph_run_duration_seconds_count") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_run_duration_seconds_bucket{le=\"+Inf\"}") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_node_duration_seconds_count{graph=\"talker\",node=\"agent\"}") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_node_duration_seconds_bucket{graph=\"talker\",node=\"agent\",le=\"+Inf\"}") == 2.0);
        BOOST_TEST(sample_of(text, "stategraph_node_duration_seconds_sum{graph=\"talker\",node=\"agent\"}")> 0.0);
        BOOST_TEST(sample_of(text, "stategraph_checkpoint_write_duration_seconds_count") >= 2.0);
        BOOST_TEST(sample_of(text, "stategraph_model_tokens_total{model=\"gpt-test\",kind=\"input\"}") ==
                   static_cast<double>(in_total));
        BOOST_TEST(sample_of(text, "stategraph_model_tokens_total{model=\"gpt-test\",kind=\"output\"}") == 5.0);
        BOOST_TEST(text.find("# TYPE stategraph_node_duration_seconds histogram\n") != std::string::npos);
        BOOST_TEST(text.find("# HELP stategraph_model_tokens_total ") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(metrics_access_option) {
    auto opts = test_options();
    opts.api_keys = {"k1"};
    opts.metrics = srv::metrics_access::open;
    {
        running_server s(opts);
        BOOST_TEST(get(s.port, "/metrics").status == 200u);
    }
    opts.metrics = srv::metrics_access::off;
    running_server s(opts);
    BOOST_TEST(get(s.port, "/metrics", {{"x-api-key", "k1"}}).status == 404u);
}

BOOST_AUTO_TEST_CASE(usage_in_process) {
    // Without a server: the caller's observer sums the usage of the call's model nodes.
    auto model = std::make_shared<nodes::rule_chat_model>([](const nodes::chat_request&) {
        nodes::chat_response a;
        a.content = "ok";
        a.prompt_tokens = 7;
        a.completion_tokens = 2;
        return a;
    });
    sg::state_graph<talk> g("local");
    g.add_node("agent", nodes::model_node<&talk::messages>(model));
    g.add_edge(sg::START, "agent").add_edge("agent", sg::END);
    auto app = g.compile();
    sg::usage_tally tally;
    std::vector<nodes::chat_message> said{nodes::chat_message{"user", "hi"}};
    auto in = sg::update<talk>{}.set<&talk::messages>(std::move(said));
    sg::run_config cfg;
    cfg.observer = &tally;
    (void)sg::run_sync(app.invoke(std::move(in), cfg));
    BOOST_TEST(tally.total().input_tokens == 7);
    BOOST_TEST(tally.total().output_tokens == 2);
    BOOST_TEST(tally.by_model().count("") == 1u); // rule_chat_model names no model
}

// Traces (issue 28, item 3) across server instances: a run created on an API-only instance with
// the caller's W3C `traceparent` runs on another instance, and its span continues the caller's
// trace; the resume of that thread, created without a header, continues the trace the
// interrupted run saved with its checkpoint.
BOOST_AUTO_TEST_CASE(a_runs_trace_follows_its_caller_across_instances) {
    stategraph::test::temp_dir dir;
    stategraph::test::otlp_receiver receiver;
    stategraph::otlp_options to;
    to.endpoint = receiver.endpoint();
    to.flush_interval = std::chrono::milliseconds(50);
    stategraph::otlp_tracer tracer(to);
    auto shared = std::make_shared<sg::checkpoint::memory_saver>(); // both instances' checkpoints
    auto instance = [&](std::size_t workers) {
        auto o = test_options();
        o.runs = srv::open_sqlite_run_store(dir.file("runs.db"));
        o.max_runs_in_flight = workers;
        o.poll_interval = std::chrono::milliseconds(50);
        o.tracer = &tracer;
        return o;
    };
    running_server worker(instance(4), {}, shared);
    running_server api(instance(0), {}, shared);
    const std::string caller_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    const std::string caller_span = "00f067aa0ba902b7";
    auto th = post(api.port, "/threads", json::object{});
    BOOST_TEST_REQUIRE(th.status == 200u, th.body);
    const std::string tid(th.json().at("thread_id").as_string());
    auto first = post(api.port, "/threads/" + tid + "/runs/wait",
                      json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "ask"}}}},
                      {{"traceparent", "00-" + caller_trace + "-" + caller_span + "-01"}});
    BOOST_TEST_REQUIRE(first.status == 200u, first.body);
    BOOST_TEST_REQUIRE(tracer.flush());
    auto runs = [&] {
        std::vector<stategraph::test::received_span> out;
        for (const auto& s : receiver.spans())
            if (s.name == "invoke_agent chat") out.push_back(s);
        return out;
    };
    auto one = runs();
    BOOST_TEST_REQUIRE(one.size() == 1u);
    BOOST_TEST(one[0].trace_id == caller_trace);
    BOOST_TEST(one[0].parent_span_id == caller_span);
    BOOST_TEST(one[0].attr("stategraph.status") == "interrupted");
    BOOST_TEST(one[0].attr("gen_ai.conversation.id") == tid);

    // the answer, sent with no trace context of its own
    auto second = post(api.port, "/threads/" + tid + "/runs/wait",
                       json::object{{"assistant_id", "chat"}, {"command", json::object{{"resume", "yes"}}}});
    BOOST_TEST_REQUIRE(second.status == 200u, second.body);
    BOOST_TEST_REQUIRE(tracer.flush());
    auto two = runs();
    BOOST_TEST_REQUIRE(two.size() == 2u);
    BOOST_TEST(two[1].trace_id == caller_trace);
    BOOST_TEST(two[1].parent_span_id == one[0].span_id);
    BOOST_TEST(two[1].attr("stategraph.status") == "done");
    // the nodes' spans hang under their run's steps
    int nodes_seen = 0;
    for (const auto& s : receiver.spans())
        if (s.name == "node work" || s.name == "node ask") {
            ++nodes_seen;
            BOOST_TEST(s.trace_id == caller_trace);
        }
    BOOST_TEST(nodes_seen >= 3); // work and ask, then ask again on resume
    for (const auto& p : receiver.problems()) BOOST_ERROR("the receiver refused: " << p);
}
