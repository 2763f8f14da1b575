// Tests of otlp_tracer (nodes/src/otlp_tracer.cpp) and of the spans the engine and the node
// kinds open (issue 28, item 3): the span tree of an agent turn as an OTLP/HTTP receiver gets it,
// a resume in a fresh app (as another process would) continuing the interrupted run's trace, a
// caller's traceparent, failures and retries, a collector that is down, bad endpoints, the
// OpenTelemetry environment variables, and a node's own span written the way a user writes it.
#include <stategraph/nodes/otlp_tracer.hpp>

#include "fake_openai_server.hpp"
#include "otlp_receiver.hpp"
#include "run_with_server.hpp"
#include "temp_dir.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/nodes/react_agent.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/traceparent.hpp>
#include <stategraph/usage_tally.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "chat_state.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using nodes_test::chat;
using sg::test::otlp_receiver;
using sg::test::received_span;

sg::otlp_options to(const otlp_receiver& r) {
    sg::otlp_options o;
    o.endpoint = r.endpoint();
    o.service_name = "otlp-test";
    o.flush_interval = std::chrono::milliseconds(50);
    return o;
}

const received_span* by_id(const std::vector<received_span>& spans, const std::string& id) {
    for (const auto& s : spans)
        if (s.span_id == id) return &s;
    return nullptr;
}

std::vector<const received_span*> named(const std::vector<received_span>& spans, const std::string& prefix) {
    std::vector<const received_span*> out;
    for (const auto& s : spans)
        if (s.name.rfind(prefix, 0) == 0) out.push_back(&s);
    return out;
}

/// Whether `s` has an ancestor named `name`.
bool under(const std::vector<received_span>& spans, const received_span& s, const std::string& name) {
    const received_span* at = &s;
    for (int depth = 0; at && depth < 64; ++depth) {
        at = by_id(spans, at->parent_span_id);
        if (at && at->name == name) return true;
    }
    return false;
}

void check_well_formed(const otlp_receiver& receiver) {
    for (const auto& p : receiver.problems()) BOOST_ERROR("the receiver refused: " << p);
}

sg::update<chat> says(std::string text) {
    return sg::update<chat>{}.set<&chat::messages>({nodes::chat_message{"user", std::move(text)}});
}

sg::update<chat> mark(std::string what) { return sg::update<chat>{}.set<&chat::trail>({std::move(what)}); }

} // namespace

BOOST_AUTO_TEST_SUITE(otlp_tracer_spans)

// One agent turn: the run, its step, the agent node, the ReAct subgraph's run and steps, two
// model calls and a tool call, one trace, every parent present, GenAI attributes on the calls.
BOOST_AUTO_TEST_CASE(an_agent_turn_is_one_span_tree) {
    asio::io_context server_io;
    sg::test::fake_openai_server server(server_io, "sk-otlp");
    server.script.push_back(sg::test::scripted_reply{"", {sg::test::fake_tool_call{"call_1", "get_weather", R"({"city":"Oslo"})"}}});
    server.script.push_back(sg::test::scripted_reply{"Sunny in Oslo", {}});
    auto work = asio::make_work_guard(server_io);
    std::thread server_thread([&server_io] { server_io.run(); });

    otlp_receiver receiver;
    sg::otlp_tracer tracer(to(receiver));
    auto weather = [](const json::object& args) { return "sunny in " + std::string(args.at("city").as_string()); };
    auto tool = nodes::tool("get_weather", "Current weather of a city", json::parse(R"({"type":"object"})"), weather);
    auto model = std::make_shared<nodes::openai_chat_model>(sg::test::options_for(server, "sk-otlp"));
    using namespace sg::dsl;
    auto app = graph<chat>("desk", "agent"_n = nodes::react_agent<&chat::messages>(model, {tool}), start >> "agent"_n >> end)
                   .compile();
    sg::run_config cfg;
    cfg.observer = &tracer;
    auto r = sg::run_sync(app.invoke(says("Weather in Oslo?"), cfg));
    asio::post(server_io, [&server] { server.stop(); });
    work.reset();
    server_thread.join();
    BOOST_TEST(r.values.messages.size() == 4u);
    BOOST_REQUIRE(tracer.flush());

    const auto spans = receiver.spans();
    check_well_formed(receiver);
    BOOST_TEST_MESSAGE("spans: " << spans.size());
    std::set<std::string> traces;
    int roots = 0;
    for (const auto& s : spans) {
        traces.insert(s.trace_id);
        if (s.parent_span_id.empty()) ++roots;
        else BOOST_TEST(by_id(spans, s.parent_span_id) != nullptr, "the parent of " << s.name << " was sent");
        BOOST_TEST(s.resource.at("service.name") == "otlp-test");
        BOOST_TEST(s.status_code == 0, s.name << " did not fail");
    }
    BOOST_TEST(traces.size() == 1u);
    BOOST_TEST(roots == 1);
    const auto root = named(spans, "invoke_agent desk");
    BOOST_REQUIRE_EQUAL(root.size(), 1u);
    BOOST_TEST(root[0]->parent_span_id.empty());
    BOOST_TEST(root[0]->attr("gen_ai.operation.name") == "invoke_agent");
    BOOST_TEST(root[0]->attr("stategraph.status") == "done");
    BOOST_TEST(root[0]->attr("stategraph.run_id").size() > 0u);
    // the agent node holds the ReAct subgraph's run, with steps of its own
    // (the ReAct subgraph names its model node "agent" too: the one under the root's step)
    std::vector<const received_span*> agent;
    for (const auto* a : named(spans, "node agent"))
        if (by_id(spans, a->parent_span_id)->parent_span_id == root[0]->span_id) agent.push_back(a);
    BOOST_REQUIRE_EQUAL(agent.size(), 1u);
    BOOST_TEST(by_id(spans, agent[0]->parent_span_id)->name.rfind("step ", 0) == 0);
    BOOST_TEST(agent[0]->attr("stategraph.attempt") == "1");
    const auto runs = named(spans, "invoke_agent ");
    BOOST_REQUIRE_EQUAL(runs.size(), 2u);
    const received_span* sub = runs[0] == root[0] ? runs[1] : runs[0];
    BOOST_TEST(sub->parent_span_id == agent[0]->span_id);
    // two model calls, as the GenAI conventions write them
    const auto calls = named(spans, "chat ");
    BOOST_REQUIRE_EQUAL(calls.size(), 2u);
    std::multiset<std::string> reasons;
    int output_tokens = 0;
    for (const auto* c : calls) {
        BOOST_TEST(c->kind == 3); // client
        BOOST_TEST(c->attr("gen_ai.operation.name") == "chat");
        BOOST_TEST(!c->attr("gen_ai.request.model").empty());
        BOOST_TEST(std::stoi(c->attr("gen_ai.usage.input_tokens")) > 0);
        output_tokens += std::stoi(c->attr("gen_ai.usage.output_tokens")); // the tool call's answer has no words
        BOOST_TEST(under(spans, *c, sub->name));
        BOOST_TEST(by_id(spans, c->parent_span_id)->name.rfind("node ", 0) == 0);
        reasons.insert(c->attr("gen_ai.response.finish_reasons"));
    }
    BOOST_TEST(output_tokens > 0);
    BOOST_TEST(reasons.count("tool_calls") == 1u);
    BOOST_TEST(reasons.count("stop") == 1u);
    const auto tools = named(spans, "execute_tool get_weather");
    BOOST_REQUIRE_EQUAL(tools.size(), 1u);
    BOOST_TEST(tools[0]->attr("gen_ai.tool.name") == "get_weather");
    BOOST_TEST(tools[0]->attr("gen_ai.tool.call.id") == "call_1");
    BOOST_TEST(under(spans, *tools[0], "invoke_agent desk"));
    // children start after and end before their parents
    for (const auto& s : spans)
        if (const auto* p = by_id(spans, s.parent_span_id)) {
            BOOST_TEST(s.start_ns >= p->start_ns, s.name << " starts within " << p->name);
            BOOST_TEST(s.end_ns <= p->end_ns, s.name << " ends within " << p->name);
        }
    const auto st = tracer.stats();
    BOOST_TEST(st.spans_exported == spans.size());
    BOOST_TEST(st.spans_dropped == 0u);
}

// Nodes of one step run side by side: their spans share the step's span; a retried node gives a
// span per attempt, the failed one marked with its error.
BOOST_AUTO_TEST_CASE(parallel_nodes_share_their_step_and_a_retry_is_a_second_attempt) {
    otlp_receiver receiver;
    sg::otlp_tracer tracer(to(receiver));
    int calls = 0;
    auto flaky = [&calls](const chat&) {
        if (++calls == 1) throw std::runtime_error("the lookup service blinked");
        return mark("b");
    };
    auto a = [](const chat&) { return mark("a"); };
    using namespace sg::dsl;
    auto app = graph<chat>("fan", "a"_n = a, "b"_n = flaky | retry({.max_attempts = 2, .initial_interval = std::chrono::milliseconds(1)}),
                           start >> parallel("a"_n, "b"_n), join("a"_n, "b"_n) >> end)
                   .compile();
    sg::run_config cfg;
    cfg.observer = &tracer;
    auto r = sg::run_sync(app.invoke(mark("start"), cfg));
    BOOST_TEST(r.values.trail.size() == 3u);
    BOOST_REQUIRE(tracer.flush());
    const auto spans = receiver.spans();
    check_well_formed(receiver);
    const auto as = named(spans, "node a");
    const auto bs = named(spans, "node b");
    BOOST_REQUIRE_EQUAL(as.size(), 1u);
    BOOST_REQUIRE_EQUAL(bs.size(), 2u);
    BOOST_TEST(as[0]->parent_span_id == bs[0]->parent_span_id);
    BOOST_TEST(bs[0]->parent_span_id == bs[1]->parent_span_id);
    const auto* step = by_id(spans, as[0]->parent_span_id);
    BOOST_REQUIRE(step);
    BOOST_TEST(step->attr("stategraph.tasks") == "2");
    const received_span* first = bs[0]->attr("stategraph.attempt") == "1" ? bs[0] : bs[1];
    const received_span* second = first == bs[0] ? bs[1] : bs[0];
    BOOST_TEST(first->status_code == 2);
    BOOST_TEST(first->status_message.find("blinked") != std::string::npos);
    BOOST_TEST(first->attr("error.type") == "std::runtime_error");
    BOOST_TEST(second->attr("stategraph.attempt") == "2");
    BOOST_TEST(second->status_code == 0);
}

// A run that fails: its node's span, its step's and its own are errors, naming what failed.
BOOST_AUTO_TEST_CASE(a_failed_run_marks_its_node_step_and_run) {
    otlp_receiver receiver;
    sg::otlp_tracer tracer(to(receiver));
    auto broken = [](const chat&) -> sg::update<chat> { throw std::runtime_error("no route to the ledger"); };
    using namespace sg::dsl;
    auto app = graph<chat>("ledger", "post"_n = broken, start >> "post"_n >> end).compile();
    sg::run_config cfg;
    cfg.observer = &tracer;
    BOOST_CHECK_THROW(sg::run_sync(app.invoke(mark("x"), cfg)), sg::node_error);
    BOOST_REQUIRE(tracer.flush());
    const auto spans = receiver.spans();
    const auto run = named(spans, "invoke_agent ledger");
    const auto node = named(spans, "node post");
    const auto step = named(spans, "step ");
    BOOST_REQUIRE(run.size() == 1u && node.size() == 1u && step.size() == 1u);
    BOOST_TEST(node[0]->status_code == 2);
    BOOST_TEST(step[0]->status_code == 2);
    BOOST_TEST(run[0]->status_code == 2);
    BOOST_TEST(run[0]->attr("error.type") == "node_failed");
    BOOST_TEST(run[0]->status_message.find("no route to the ledger") != std::string::npos);
    BOOST_TEST(run[0]->attr("stategraph.status") == "error");
}

// A thread interrupted under one app and resumed under another (a fresh saver on the same file
// and a fresh tracer, as a second process has): the resume's run span continues the first
// run's trace, under its run span. New input on the thread starts a new trace; a caller's
// traceparent is continued as given.
BOOST_AUTO_TEST_CASE(a_resume_elsewhere_continues_the_trace) {
    sg::test::temp_dir dir;
    otlp_receiver receiver;
    auto ask = [](const chat&, sg::context& ctx) -> asio::awaitable<sg::update<chat>> {
        auto question = std::string("approve?");
        auto answer = co_await ctx.interrupt<std::string>(question);
        co_return mark(answer);
    };
    auto open = [&] {
        sg::checkpoint::sqlite_options o;
        o.path = dir.file("threads.db");
        using namespace sg::dsl;
        return graph<chat>("approval", "ask"_n = ask, start >> "ask"_n >> end)
            .compile({.checkpointer = std::make_shared<sg::checkpoint::sqlite_saver>(o)});
    };
    std::string first_trace, first_run;
    {
        sg::otlp_tracer tracer(to(receiver));
        auto app = open();
        sg::run_config cfg;
        cfg.thread_id = "t-1";
        cfg.observer = &tracer;
        auto r = sg::run_sync(app.invoke(mark("in"), cfg));
        BOOST_REQUIRE(r.interrupted());
        BOOST_REQUIRE(tracer.flush());
        const auto got = receiver.spans();
        const auto run = named(got, "invoke_agent approval");
        BOOST_REQUIRE_EQUAL(run.size(), 1u);
        BOOST_TEST(run[0]->attr("stategraph.status") == "interrupted");
        BOOST_TEST(run[0]->attr("gen_ai.conversation.id") == "t-1");
        first_trace = run[0]->trace_id;
        first_run = run[0]->span_id;
    }
    {
        sg::otlp_tracer tracer(to(receiver)); // another tracer, another app: nothing shared in memory
        auto app = open();
        sg::run_config cfg;
        cfg.thread_id = "t-1";
        cfg.observer = &tracer;
        auto r = sg::run_sync(app.invoke(sg::resume(std::string("yes")), cfg));
        BOOST_TEST(r.values.trail.back() == "yes");
        BOOST_REQUIRE(tracer.flush());
        const auto got = receiver.spans();
        const auto runs = named(got, "invoke_agent approval");
        BOOST_REQUIRE_EQUAL(runs.size(), 2u);
        BOOST_TEST(runs[1]->trace_id == first_trace);
        BOOST_TEST(runs[1]->parent_span_id == first_run);
        BOOST_TEST(runs[1]->attr("stategraph.status") == "done");

        // new input: a new trace
        auto again = sg::run_sync(app.invoke(mark("second"), cfg));
        BOOST_TEST(again.interrupted());
        BOOST_REQUIRE(tracer.flush());
        const auto got_all = receiver.spans();
        const auto all = named(got_all, "invoke_agent approval");
        BOOST_REQUIRE_EQUAL(all.size(), 3u);
        BOOST_TEST(all[2]->trace_id != first_trace);
        BOOST_TEST(all[2]->parent_span_id.empty());

        // a caller's trace context wins (a malformed one would be ignored: is_traceparent)
        BOOST_TEST(sg::is_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        BOOST_TEST(!sg::is_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01")); // upper case
        BOOST_TEST(!sg::is_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01")); // zero trace
        BOOST_TEST(!sg::is_traceparent("00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01")); // zero parent
        BOOST_TEST(!sg::is_traceparent("01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")); // version
        BOOST_TEST(!sg::is_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"));    // short
        const std::string caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        cfg.traceparent = caller;
        auto answered = sg::run_sync(app.invoke(sg::resume(std::string("ok")), cfg));
        BOOST_TEST(!answered.interrupted());
        BOOST_REQUIRE(tracer.flush());
        const auto got_last = receiver.spans();
        const auto last = named(got_last, "invoke_agent approval");
        BOOST_REQUIRE_EQUAL(last.size(), 4u);
        BOOST_TEST(last[3]->trace_id == "0af7651916cd43dd8448eb211c80319c");
        BOOST_TEST(last[3]->parent_span_id == "b7ad6b7169203331");
    }
    check_well_formed(receiver);
}

// A node's own span, written as a user writes it: attributes in place, set later, failed.
BOOST_AUTO_TEST_CASE(a_node_opens_its_own_span) {
    otlp_receiver receiver;
    sg::otlp_tracer tracer(to(receiver));
    auto lookup = [](const chat&, sg::context& ctx) -> asio::awaitable<sg::update<chat>> {
        auto span = ctx.start_span(sg::span_kind::other, "crm lookup", {{"crm.customer", "c-42"}, {"crm.shard", 3}});
        span.set("crm.hits", 2);
        span.set("crm.cached", false);
        span.set("crm.score", 0.5);
        span.set("crm.tags", std::vector<std::string>{"vip", "eu"});
        span.fail("crm_timeout", "the CRM answered late");
        co_return mark("looked up");
    };
    using namespace sg::dsl;
    auto app = graph<chat>("crm", "lookup"_n = lookup, start >> "lookup"_n >> end).compile();
    sg::run_config cfg;
    cfg.observer = &tracer;
    sg::run_sync(app.invoke(mark("x"), cfg));
    BOOST_REQUIRE(tracer.flush());
    const auto spans = receiver.spans();
    check_well_formed(receiver);
    const auto own = named(spans, "crm lookup");
    BOOST_REQUIRE_EQUAL(own.size(), 1u);
    BOOST_TEST(by_id(spans, own[0]->parent_span_id)->name == "node lookup");
    BOOST_TEST(own[0]->attr("crm.customer") == "c-42");
    BOOST_TEST(own[0]->attr("crm.shard") == "3");
    BOOST_TEST(own[0]->attr("crm.hits") == "2");
    BOOST_TEST(own[0]->attr("crm.cached") == "false");
    BOOST_TEST(own[0]->attr("crm.tags") == "vip,eu");
    BOOST_TEST(own[0]->attr("error.type") == "crm_timeout");
    BOOST_TEST(own[0]->status_code == 2);

    // without a tracing observer the span is empty and costs a pointer test
    sg::usage_tally tally;
    bool empty = false;
    auto probe = [&empty](const chat&, sg::context& ctx) {
        auto span = ctx.start_span(sg::span_kind::other, "probe");
        empty = !span;
        span.set("ignored", 1);
        return mark("probed");
    };
    auto plain = graph<chat>("plain", "probe"_n = probe, start >> "probe"_n >> end).compile();
    sg::run_config quiet;
    quiet.observer = &tally;
    sg::run_sync(plain.invoke(mark("x"), quiet));
    BOOST_TEST(empty);
}

// A collector that is down or refuses: the run is unaffected, flush() says so, the spans are
// counted as dropped and the error names the endpoint.
BOOST_AUTO_TEST_CASE(a_collector_down_or_refusing_costs_the_run_nothing) {
    auto step = [](const chat&) { return mark("done"); };
    using namespace sg::dsl;
    auto app = graph<chat>("quick", "work"_n = step, start >> "work"_n >> end).compile();
    std::string closed;
    {
        otlp_receiver gone;
        closed = gone.endpoint();
    } // its port is closed now
    sg::otlp_options o;
    o.endpoint = closed;
    o.timeout = std::chrono::milliseconds(2000);
    sg::otlp_tracer tracer(o);
    sg::run_config cfg;
    cfg.observer = &tracer;
    auto r = sg::run_sync(app.invoke(mark("x"), cfg));
    BOOST_TEST(r.values.trail.size() == 2u);
    BOOST_TEST(!tracer.flush());
    auto st = tracer.stats();
    BOOST_TEST(st.spans_ended == 3u); // run, step, node
    BOOST_TEST(st.spans_exported == 0u);
    BOOST_TEST(st.spans_dropped == 3u);
    BOOST_TEST(st.exports_failed >= 1u);
    BOOST_TEST(st.last_error.find(closed) != std::string::npos, st.last_error);

    otlp_receiver refusing;
    refusing.answer_with(503);
    sg::otlp_tracer refused(to(refusing));
    cfg.observer = &refused;
    sg::run_sync(app.invoke(mark("x"), cfg));
    BOOST_TEST(!refused.flush());
    BOOST_TEST(refused.stats().last_error.find("HTTP 503") != std::string::npos, refused.stats().last_error);
    BOOST_TEST(refusing.requests() >= 1);
    BOOST_TEST(refusing.spans().empty());
}

BOOST_AUTO_TEST_CASE(bad_endpoints_and_limits_are_typed_errors) {
    auto refused = [](sg::otlp_options o, const std::string& part) {
        try {
            sg::otlp_tracer t(std::move(o));
            BOOST_ERROR("accepted: " << part);
        } catch (const nodes::agent_error& e) {
            BOOST_TEST((e.code() == nodes::errc::bad_otlp_endpoint));
            BOOST_TEST(std::string(e.what()).find(part) != std::string::npos, e.what());
        }
    };
    for (const char* url : {"https://collector:4318/v1/traces", "ftp://collector/v1/traces", "http:///v1/traces",
                            "http://host:port/v1/traces", "http://host:99999/v1/traces", "http://bad host/v1/traces"}) {
        sg::otlp_options o;
        o.endpoint = url;
        refused(o, url);
    }
    sg::otlp_options zero;
    zero.max_batch = 0;
    refused(zero, "max_batch");
    BOOST_TEST(std::string(nodes::to_string(nodes::errc::bad_otlp_endpoint)) == "bad_otlp_endpoint");
}

BOOST_AUTO_TEST_CASE(opentelemetry_environment_variables) {
    ::setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4999/", 1);
    ::setenv("OTEL_SERVICE_NAME", "desk-supervisor", 1);
    ::setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc, x-tenant = acme", 1);
    ::setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging", 1);
    auto o = sg::otlp_options::from_environment();
    BOOST_TEST(o.endpoint == "http://127.0.0.1:4999/v1/traces");
    BOOST_TEST(o.service_name == "desk-supervisor");
    BOOST_REQUIRE_EQUAL(o.headers.size(), 2u);
    BOOST_TEST(o.headers[0].first == "authorization");
    BOOST_TEST(o.headers[0].second == "Bearer abc");
    BOOST_TEST(o.headers[1].first == "x-tenant");
    BOOST_TEST(o.headers[1].second == "acme");
    BOOST_REQUIRE_EQUAL(o.resource_attributes.size(), 1u);
    ::setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://10.1.2.3:4318/custom/traces", 1);
    BOOST_TEST(sg::otlp_options::from_environment().endpoint == "http://10.1.2.3:4318/custom/traces");
    for (const char* v : {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS",
                          "OTEL_RESOURCE_ATTRIBUTES", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"})
        ::unsetenv(v);
    BOOST_TEST(sg::otlp_options::from_environment().endpoint == "http://127.0.0.1:4318/v1/traces");
}

BOOST_AUTO_TEST_SUITE_END()
