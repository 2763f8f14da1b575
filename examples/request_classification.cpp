// request_classification: seed 004's request categories as a supervisor classifier.
//
//   START --> desk --> END        desk = nodes::supervisor<&job::sup>("desk"):
//
//     START --> supervisor --(classifier, round 0)--> answer | planning | coding | infrastructure
//                                                     operations | documentation | verifier | escalate
//                                                     (one intent runs, then END)
//
//   classify(text) -> category (no_action, answer_only, read_only_analysis, code_fix, feature_small,
//   feature_medium, feature_large, refactor_scoped, test_generation, documentation_update,
//   infrastructure_change, noc_operation, high_risk_escalation) -> the worker intent for it.
//
// The classifier here is keyword rules; an LLM classifier is the same function calling a model.
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/nodes/supervisor.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <iostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using namespace sg::dsl;

struct job {
    std::string text;
    std::string category;
    std::string handled_by;
    nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(job, (), (text, category, handled_by, sup))

/// The seed's category of a request (first matching rule wins; the riskiest rules come first).
std::string classify(std::string_view text) {
    auto has = [text](std::string_view w) { return text.find(w) != std::string_view::npos; };
    if (has("production") && (has("drop") || has("delete"))) return "high_risk_escalation";
    if (has("kubectl") || has("restart") || has("monitoring")) return "noc_operation";
    if (has("terraform") || has("helm") || has("cdk")) return "infrastructure_change";
    if (has("docs") || has("readme")) return "documentation_update";
    if (has("tests for")) return "test_generation";
    if (has("refactor")) return "refactor_scoped";
    if (has("fix") || has("bug")) return "code_fix";
    if (has("feature")) return has("large") ? "feature_large" : has("medium") ? "feature_medium" : "feature_small";
    if (has("analy") || has("explain")) return "read_only_analysis";
    if (has("?")) return "answer_only";
    return "no_action";
}

/// The intent (a seed 004 worker, or answer / escalate) that handles a category.
std::string intent_for(std::string const& category) {
    if (category == "no_action" || category == "answer_only") return "answer";
    if (category == "read_only_analysis") return "planning";
    if (category == "infrastructure_change") return "infrastructure";
    if (category == "noc_operation") return "operations";
    if (category == "documentation_update") return "documentation";
    if (category == "test_generation") return "verifier";
    if (category == "high_risk_escalation") return "escalate";
    return "coding";  // code_fix, feature_*, refactor_scoped
}

int main() {
    using intent = nodes::intent<job>;
    nodes::supervisor<&job::sup> desk("desk");
    for (std::string name : {"answer", "planning", "coding", "infrastructure", "operations", "documentation", "verifier",
                             "escalate"}) {
        auto handle = [name](const job& j) {
            return sg::update<job>{}.set<&job::category>(classify(j.text)).set<&job::handled_by>(name);
        };
        desk.add(intent(name, handle));
    }
    desk.classifier([](const job& j) { return intent_for(classify(j.text)); });
    desk.route([](const job&) { return nodes::decision::finish(); });

    // clang-format off
    auto app = graph<job>("platform",
        "desk"_n = desk.compile(),
        start >> "desk"_n >> end).compile();
    // clang-format on

    const std::vector<std::pair<std::string, std::string>> cases{
        {"fix the login bug", "coding"},
        {"write tests for the parser", "verifier"},
        {"update the terraform module", "infrastructure"},
        {"restart the api pods with kubectl", "operations"},
        {"drop the users table in production", "escalate"},
        {"what does this service do?", "answer"}};
    int wrong = 0;
    for (const auto& [text, expected] : cases) {
        boost::asio::io_context io;
        auto input = sg::update<job>{}.set<&job::text>(text);
        auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
        io.run();
        const job j = done.get().values;
        std::cout << text << " -> " << j.category << " -> " << j.handled_by << '\n';
        if (j.handled_by != expected) ++wrong;
    }
    return wrong == 0 ? 0 : 1;
}
