// Token usage counted in process (docs/observability.md): a node reports its model call's tokens
// with ctx.report_usage, and the call's observer, a usage_tally, sums them by model. Prints
// "tokens: 120 in, 45 out (gpt-4o-mini: 165)".
//
//   START -> draft (reports 120 in / 45 out for gpt-4o-mini) -> END
#include <stategraph/stategraph.hpp>
#include <stategraph/usage_tally.hpp>

#include <iostream>
namespace sg = stategraph;

struct reply { std::string text; };
BOOST_DESCRIBE_STRUCT(reply, (), (text))

boost::asio::awaitable<sg::update<reply>> draft(const reply&, sg::context& ctx) {
    // A node that calls a model itself says what the call cost (model_node does this for you).
    ctx.report_usage("gpt-4o-mini", sg::token_usage{.input_tokens = 120, .output_tokens = 45});
    co_return sg::update<reply>{}.set<&reply::text>("drafted");
}

boost::asio::awaitable<void> run(sg::compiled_graph<reply>& app, sg::update<reply> in) {
    // [snippet usage_tally]
    stategraph::usage_tally tally;
    stategraph::run_config cfg;
    cfg.thread_id = "t1";
    cfg.observer = &tally;
    auto r = co_await app.invoke(std::move(in), cfg);
    // tally.total().input_tokens, tally.by_model()
    // [end]
    std::cout << "tokens: " << tally.total().input_tokens << " in, " << tally.total().output_tokens << " out";
    for (const auto& [model, used] : tally.by_model()) std::cout << " (" << model << ": " << used.total_tokens() << ")";
    std::cout << '\n';
    (void)r;
}

int main() {
    sg::state_graph<reply> g("drafting");
    g.add_node("draft", draft).add_edge(sg::START, "draft").add_edge("draft", sg::END);
    auto app = g.compile();
    sg::run_sync(run(app, sg::update<reply>{}));
}
