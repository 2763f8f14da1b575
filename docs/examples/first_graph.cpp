// The README's first graph, as a whole program (docs/getting-started.md walks through it).
//
//   START -> classify -> account ---+--> draft --(low)--> reply -> END
//                     -> search  ---+        \--(high)--> page (a human approves first) -> reply
//
// A ticket is classified, two lookups run in the same step, a join waits for both, and a route on
// the ticket's urgency pages a human (the run stops before `page`) or replies at once.
// [snippet first_graph]
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>
#include <iostream>
namespace sg = stategraph;
using namespace sg::dsl;

enum class urgency { low, high };
BOOST_DESCRIBE_ENUM(urgency, low, high)
struct ticket {
    std::string text;
    urgency level = urgency::low;
    std::vector<std::string> trail; // each node appends its name
};
BOOST_DESCRIBE_STRUCT(ticket, (), (text, level, trail))
auto reducers(sg::for_state<ticket>) { return sg::reducers{sg::reduce<&ticket::trail>(sg::append)}; }

// A node that only appends its name to the trail.
auto step(std::string name) { return [name](const ticket&) { return sg::update<ticket>{}.set<&ticket::trail>({name}); }; }
sg::update<ticket> classify(const ticket& t) {
    return sg::update<ticket>{}.set<&ticket::level>(t.text.find("down") != std::string::npos ? urgency::high : urgency::low);
}

// clang-format off
auto triage() {
    return graph<ticket>("triage",
        "classify"_n = classify,  "account"_n = step("account"),  "search"_n = step("search"),
        "draft"_n = step("draft"),  "page"_n = step("page") | interrupt_before,  "reply"_n = step("reply"),
        start >> "classify"_n >> parallel("account"_n, "search"_n),
        join("account"_n, "search"_n) >> "draft"_n,
        "draft"_n >> on(&ticket::level, {{urgency::low, "reply"_n}, {urgency::high, "page"_n}}),
        "page"_n >> "reply"_n >> end);
}
// clang-format on

int main() {
    auto app = triage().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    auto r = sg::run_sync(app.invoke(sg::update<ticket>{}.set<&ticket::text>("site is down"), {.thread_id = "ticket-1"}));
    std::cout << "stopped before " << r.next.at(0) << '\n';      // stopped before page
    r = sg::run_sync(app.invoke(sg::continue_run, {.thread_id = "ticket-1"})); // a human approved
    for (const auto& name : r.values.trail) std::cout << name << ' '; // account search draft page reply
    std::cout << '\n';
}
// [end]
