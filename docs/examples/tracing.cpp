// Traces of a run sent to an OpenTelemetry collector (docs/observability.md): an otlp_tracer as
// the call's observer, and a node that opens a span of its own. The collector's traces URL is
// the first argument (http://127.0.0.1:4318/v1/traces when none). Prints "traced: lookup done,
// N spans sent".
//
//   START -> lookup (its own span "crm lookup") -> reply -> END
#include <stategraph/nodes/otlp_tracer.hpp>
#include <stategraph/stategraph.hpp>

#include <iostream>
namespace sg = stategraph;

struct ticket {
    std::string customer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(ticket, (), (customer, log))
auto reducers(sg::for_state<ticket>) { return sg::reducers{sg::reduce<&ticket::log>(sg::append)}; }

boost::asio::awaitable<sg::update<ticket>> lookup(const ticket& t, sg::context& ctx) {
    const std::string& id = t.customer;
    const int hits = 2;
    const bool late = false;
    // [snippet own_span]
    auto span = ctx.start_span(stategraph::span_kind::other, "crm lookup", {{"crm.customer", id}});
    span.set("crm.hits", hits);          // text, integers, doubles, flags, lists of texts
    if (late) span.fail("crm_timeout", "the CRM answered after 2 s");
    // the span ends when it goes out of scope (or at span.end())
    // [end]
    co_return sg::update<ticket>{}.set<&ticket::log>({"lookup done"});
}

sg::update<ticket> reply(const ticket&) { return sg::update<ticket>{}.set<&ticket::log>({"replied"}); }

boost::asio::awaitable<void> run(sg::compiled_graph<ticket>& app, sg::update<ticket> in, std::string endpoint) {
    // [snippet tracing]
    stategraph::otlp_options o;                       // or otlp_options::from_environment()
    o.endpoint = "http://127.0.0.1:4318/v1/traces";   // the collector
    o.service_name = "support-desk";
    // [end]
    o.endpoint = endpoint;
    // [snippet tracing_run]
    stategraph::otlp_tracer tracer(o);                // one for the process; runs share it
    stategraph::run_config cfg;
    cfg.observer = &tracer;
    auto r = co_await app.invoke(std::move(in), cfg);
    // [end]
    const bool sent = tracer.flush();
    std::cout << "traced: " << r.values.log.front() << ", " << tracer.stats().spans_exported << " spans sent"
              << (sent ? "" : (" (" + tracer.stats().last_error + ")")) << '\n';
}

int main(int argc, char** argv) {
    sg::state_graph<ticket> g("desk");
    g.add_node("lookup", lookup).add_node("reply", reply);
    g.add_edge(sg::START, "lookup").add_edge("lookup", "reply").add_edge("reply", sg::END);
    auto app = g.compile();
    const std::string endpoint = argc > 1 ? argv[1] : "http://127.0.0.1:4318/v1/traces";
    sg::run_sync(run(app, sg::update<ticket>{}.set<&ticket::customer>("c-42"), endpoint));
}
