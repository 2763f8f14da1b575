// supervisor: a classifier picks the first intent, `next` chains, a route fans out, evaluate stops.
//
//   START --> desk --> END           desk = nodes::supervisor<&ticket::sup>("desk"):
//
//     START --> supervisor --(decision)--> classify ---+
//                 ^   |                    lookup -----+   (lookup and policy run together
//                 |   |                    policy -----+    in one round: a fan-out)
//                 |   |                    reply ------+
//                 |   +--(END)--> END                  |
//                 +------------------------------------+
//
//   round 0  classifier       -> classify
//   round 1  classify.next    -> lookup + policy   (fan-out; notes merged by the append reducer)
//   round 2  route            -> reply
//   then     evaluate         -> END (a reply exists)
//
// lookup and policy also write sources into the artifacts side channel (a JSON bag the reply
// never reads); at the end of each round the supervisor merges the bag into `sources` with a
// finalize that concatenates, then empties it.
//
// A second supervisor shows the failure policy: `deploy` fails twice (its retries), then the
// supervisor escalates to `page_oncall` with the failure recorded in sup.failures.
//
//   ops:  supervisor --> deploy (x2, fails) --(escalate)--> page_oncall --> supervisor --> END
//
// The same supervisor under an LLM router would need a description on every intent; compile()
// reports all such problems at once (shown at the end).
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/supervisor.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;
using nodes::decision;

struct ticket {
    std::string text;
    std::string category;
    std::vector<std::string> notes;
    std::string reply;
    std::vector<std::string> sources;  // from the artifacts side channel
    boost::json::object artifacts;     // the bag intents write during a round
    nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(ticket, (), (text, category, notes, reply, sources, artifacts, sup))
auto reducers(sg::for_state<ticket>) {
    return sg::reducers{sg::reduce<&ticket::notes>(sg::append), sg::reduce<&ticket::artifacts>(nodes::merge_artifacts)};
}

sg::update<ticket> classify(const ticket& t) {
    return sg::update<ticket>{}.set<&ticket::category>(t.text.find("refund") != std::string::npos ? "refund" : "other");
}
sg::update<ticket> lookup(const ticket&) {
    return sg::update<ticket>{}.set<&ticket::notes>({"order A-17: delivered"})
        .set<&ticket::artifacts>(nodes::artifact("sources", std::vector<std::string>{"orders-db"}));
}
sg::update<ticket> policy(const ticket&) {
    return sg::update<ticket>{}.set<&ticket::notes>({"refunds within 30 days"})
        .set<&ticket::artifacts>(nodes::artifact("sources", std::vector<std::string>{"policy.md#refunds"}));
}
/// The finalize: append the round's sources (the default would replace `sources`).
sg::update<ticket> keep_sources(const ticket& t, const boost::json::object& bag) {
    auto sources = t.sources;
    if (const auto* more = bag.if_contains("sources"))
        for (const auto& s : more->as_array()) sources.emplace_back(s.as_string());
    return sg::update<ticket>{}.set<&ticket::sources>(std::move(sources));
}
sg::update<ticket> reply(const ticket& t) {
    std::string text = "Re: " + t.text + " --";
    for (const auto& n : t.notes) text += " " + n + ";";
    return sg::update<ticket>{}.set<&ticket::reply>(text);
}

int main() {
    using intent = nodes::intent<ticket>;
    auto after_classify = [](const ticket& t) -> std::optional<decision> {
        if (t.category == "refund") return decision::to({"lookup", "policy"});
        return std::nullopt;  // let the route decide
    };
    nodes::supervisor<&ticket::sup> desk("desk");
    desk.add(intent("classify", classify).next(after_classify))
        .add(intent("lookup", lookup))
        .add(intent("policy", policy))
        .add(intent("reply", reply))
        .classifier([](const ticket&) { return std::string("classify"); })
        .route([](const ticket& t) { return t.reply.empty() ? decision::to("reply") : decision::finish(); })
        .evaluate([](const ticket& t) { return !t.reply.empty(); })
        .artifacts<&ticket::artifacts>(keep_sources);

    // clang-format off
    auto app = graph<ticket>("support",
        "desk"_n = desk.compile(),
        start >> "desk"_n >> end).compile();
    // clang-format on

    boost::asio::io_context io;
    auto input = sg::update<ticket>{}.set<&ticket::text>("please refund order A-17");
    auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
    io.run();
    const ticket t = done.get().values;
    std::cout << "rounds:";
    for (const auto& r : t.sup.rounds) std::cout << ' ' << r;
    std::cout << "\nended by: " << t.sup.ended_by << "\nreply: " << t.reply << "\nsources:";
    for (const auto& s : t.sources) std::cout << ' ' << s;
    std::cout << '\n';

    // The failure policy: two attempts, then escalate.
    int deploys = 0;
    auto deploy = [&deploys](const ticket&) -> sg::update<ticket> {
        ++deploys;
        throw std::runtime_error("cluster unreachable");
    };
    auto page = [](const ticket&) { return sg::update<ticket>{}.set<&ticket::reply>("paged the on-call engineer"); };
    nodes::failure_policy on_failure;
    on_failure.retry.max_attempts = 2;
    on_failure.retry.initial_interval = std::chrono::milliseconds(10);
    on_failure.escalate_to = "page_oncall";
    nodes::supervisor<&ticket::sup> ops("ops");
    ops.add(intent("deploy", deploy).on_failure(on_failure))
        .add(intent("page_oncall", page))
        .route([](const ticket& t) { return t.reply.empty() ? decision::to("deploy") : decision::finish(); });
    auto ops_app = ops.compile();
    auto ops_done = boost::asio::co_spawn(io, ops_app.invoke(sg::update<ticket>{}), boost::asio::use_future);
    io.restart();
    io.run();
    const ticket o = ops_done.get().values;
    std::cout << "ops rounds:";
    for (const auto& r : o.sup.rounds) std::cout << ' ' << r;
    std::cout << "\nops failure: " << o.sup.failures.at(0).node << " after " << o.sup.failures.at(0).attempts
              << " attempt(s): " << o.sup.failures.at(0).message << "\nops reply: " << o.reply << '\n';

    // Under an LLM router every intent needs a description: all problems come at once.
    nodes::supervisor<&ticket::sup> llm_desk("llm_desk");
    auto model = std::make_shared<nodes::rule_chat_model>([](const nodes::chat_request&) { return nodes::chat_response{}; });
    llm_desk.add(intent("lookup", lookup)).add(intent("reply", reply).describe("Writes the answer"))
        .router({model, nullptr, ""})
        .route([](const ticket&) { return decision::finish(); });
    std::size_t problems = 0;
    try {
        llm_desk.compile();
    } catch (const nodes::agent_error& e) {
        std::cout << e.what() << '\n';
        problems = e.problems().size();
    }

    const std::vector<std::string> rounds{"classify", "lookup+policy", "reply"};
    const std::vector<std::string> ops_rounds{"deploy", "page_oncall"};
    return t.sup.rounds == rounds && t.sup.ended_by == "evaluate" && t.notes.size() == 2 && problems == 2 &&
                   t.sources.size() == 2 && t.artifacts.empty() && o.sup.rounds == ops_rounds && deploys == 2
               ? 0
               : 1;
}
