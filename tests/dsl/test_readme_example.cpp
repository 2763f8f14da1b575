// README example: two stages, a route on an enum field, a join and a breakpoint, run with the
// in-memory checkpointer.
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

#include <boost/test/unit_test.hpp>

#include "run_awaitable.hpp"

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

auto step(std::string name) { return [name](const ticket&) { return sg::update<ticket>{}.set<&ticket::trail>({name}); }; }
sg::update<ticket> classify(const ticket& t) {
    return sg::update<ticket>{}.set<&ticket::level>(t.text.find("down") != std::string::npos ? urgency::high : urgency::low);
}

// clang-format off
stage_decl<ticket> intake() {
    return stage<ticket>("intake",
        "classify"_n = classify,  "account"_n = step("account"),  "search"_n = step("search"),
        start >> "classify"_n >> parallel("account"_n, "search"_n));
}
stage_decl<ticket> respond() {
    return stage<ticket>("respond",
        "draft"_n = step("draft"),  "page"_n = step("page") | interrupt_before,  "reply"_n = step("reply"),
        join("account"_n, "search"_n) >> "draft"_n,
        "draft"_n >> on(&ticket::level, {{urgency::low, "reply"_n}, {urgency::high, "page"_n}}),
        "page"_n >> "reply"_n >> end);
}
// clang-format on

BOOST_AUTO_TEST_CASE(readme_example) {
    auto app = graph<ticket>("triage", intake(), respond()).compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg{.thread_id = "ticket-1"};
    auto r = sg::test::run(app.invoke(sg::update<ticket>{}.set<&ticket::text>("site is down"), cfg));
    BOOST_TEST(r.next == (std::vector<std::string>{"page"}), boost::test_tools::per_element()); // stopped before paging
    r = sg::test::run(app.invoke(sg::continue_run, cfg));                                       // a human approved
    BOOST_TEST(r.values.trail == (std::vector<std::string>{"account", "search", "draft", "page", "reply"}),
               boost::test_tools::per_element());
}
