// The smallest whole program: a graph run from main() with run_sync, its thread kept in SQLite
// (docs/getting-started.md). Prints "triage: site is down".
// [snippet from_main]
#include <stategraph/stategraph.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <iostream>
namespace sg = stategraph;

struct ticket { std::string text; std::vector<std::string> trail; };
BOOST_DESCRIBE_STRUCT(ticket, (), (text, trail))
auto reducers(sg::for_state<ticket>) { return sg::reducers{sg::reduce<&ticket::trail>(sg::append)}; }

sg::update<ticket> triage(const ticket& t) {
    std::vector<std::string> step{"triage: " + t.text};
    return sg::update<ticket>{}.set<&ticket::trail>(std::move(step));
}

int main() {
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = "tickets.db"});
    sg::state_graph<ticket> g("triage");
    g.add_node("triage", triage).add_edge(sg::START, "triage").add_edge("triage", sg::END);
    auto app = g.compile({.checkpointer = saver});
    auto r = sg::run_sync(app.invoke(sg::update<ticket>{}.set<&ticket::text>("site is down"), {.thread_id = "ticket-1"}));
    std::cout << r.values.trail.front() << '\n'; // triage: site is down
}
// [end]
