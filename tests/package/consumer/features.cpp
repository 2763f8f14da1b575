// Issue 27's newer features used from a separate project, the way a newcomer writes them (this
// program also runs under ASan and UBSan in CI, in the sanitizer build's package tests):
//
//   desk:     START --> intake --> team --> wrap_up --> END        (c: reached by the handoff)
//                                   |
//   team:                           +--> START --> triage --(to_parent: go to "escalate")--> ...
//                                                  ask (an interrupt inside the subgraph)
//
// 1. Command.PARENT: the subgraph's "triage" hands off to the parent's "escalate" with an update.
// 2. get_state(t, {.subgraphs = true}) while the subgraph waits at "ask": its state, from outside.
// 3. A state migration: a thread paused by version 1 of a state is resumed by version 2 from a
//    new saver on the same SQLite file, as a redeployed process would.
// 4. Issue 25: one SQLite saver pauses a thread and resumes it from its memory
//    (`sqlite_saver::remembered()`), the graph's held state leaving the values out
//    (`sqlite_saver::omitted_values()`), and `acquire_and_get_held` called with temporaries.
// Usage: consumer_features <database file>
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/migration.hpp>
#include <stategraph/stategraph.hpp>

#include <iostream>
#include <memory>

namespace sg = stategraph;

struct desk {
    std::string request;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(desk, (), (request, trail))
auto reducers(sg::for_state<desk>) { return sg::reducers{sg::reduce<&desk::trail>(sg::append)}; }

bool check(bool ok, const char* what) {
    if (!ok) std::cout << "consumer_features: FAILED: " << what << '\n';
    return ok;
}

// -- 1 and 2: a subgraph that hands off to its parent, and one that asks a human ----------------
boost::asio::awaitable<bool> subgraphs(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<desk> team("team");
    team.add_node("triage", [](const desk& d) -> sg::command<desk> {
        if (d.request == "urgent")
            return sg::command<desk>{}.to_parent(sg::command<desk>{}.with(sg::update<desk>{}.set<&desk::trail>({"handed off"})).go_to("escalate"));
        return sg::command<desk>{}.with(sg::update<desk>{}.set<&desk::trail>({"triage"}));
    });
    team.add_node("ask", [](const desk&, sg::context& ctx) {
        auto who = ctx.interrupt_now<std::string>("who takes it?");
        return sg::update<desk>{}.set<&desk::trail>({"taken by " + who});
    });
    team.add_edge(sg::START, "triage").add_edge("triage", "ask").add_edge("ask", sg::END);

    sg::state_graph<desk> g("desk");
    g.add_node("intake", [](const desk&) { return sg::update<desk>{}.set<&desk::trail>({"intake"}); });
    g.add_node("team", team.compile(), {.ends = {"escalate"}}); // where its to_parent may go
    g.add_node("escalate", [](const desk&) { return sg::update<desk>{}.set<&desk::trail>({"escalate"}); });
    g.add_node("wrap_up", [](const desk&) { return sg::update<desk>{}.set<&desk::trail>({"wrap_up"}); });
    g.add_edge(sg::START, "intake").add_edge("intake", "team").add_edge("team", "wrap_up").add_edge("wrap_up", sg::END);
    g.add_edge("escalate", sg::END);
    auto app = g.compile({.checkpointer = saver});

    // 1. The handoff: the parent takes the update as team's writes and runs escalate beside wrap_up.
    auto urgent = co_await app.invoke(sg::update<desk>{}.set<&desk::request>("urgent"), {.thread_id = "urgent-1"});
    bool ok = check(urgent.values.trail == std::vector<std::string>{"intake", "handed off", "escalate", "wrap_up"} ||
                        urgent.values.trail == std::vector<std::string>{"intake", "handed off", "wrap_up", "escalate"},
                    "Command.PARENT: the parent runs escalate with the handed-off update");

    // 2. The subgraph waits at ask; its state from outside, then the resume.
    auto waiting = co_await app.invoke(sg::update<desk>{}.set<&desk::request>("routine"), {.thread_id = "routine-1"});
    ok &= check(!waiting.next.empty(), "the routine request waits");
    auto snap = co_await app.get_state("routine-1", {.subgraphs = true});
    ok &= check(snap.tasks.size() == 1 && snap.tasks.front().state != nullptr, "get_state with subgraphs: the team's state");
    if (ok) {
        const auto& inner = *snap.tasks.front().state;
        ok &= check(inner.next == std::vector<std::string>{"ask"}, "the team waits at ask");
        ok &= check(inner.ns.rfind("team:", 0) == 0, "its namespace names the team node");
        ok &= check(boost::json::serialize(inner.values.at("trail")).find("triage") != std::string::npos, "its trail holds triage");
    }
    auto done = co_await app.invoke(sg::resume("ann"), {.thread_id = "routine-1"});
    ok &= check(done.values.trail.back() == "wrap_up" && done.values.trail.size() == 4, "the resume finishes the desk");
    co_return ok;
}

// -- 3: a migration ------------------------------------------------------------------------------
struct ticket_v1 {
    std::string owner;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(ticket_v1, (), (owner, trail))
auto reducers(sg::for_state<ticket_v1>) { return sg::reducers{sg::reduce<&ticket_v1::trail>(sg::append)}; }

struct ticket {
    std::vector<std::string> owners; // version 2: several owners
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(ticket, (), (owners, trail))
auto reducers(sg::for_state<ticket>) { return sg::reducers{sg::reduce<&ticket::trail>(sg::append)}; }

template <class S>
sg::state_graph<S> ticket_graph() {
    sg::state_graph<S> g("ticket");
    g.add_node("open", [](const S&) { return sg::update<S>{}.template set<&S::trail>({"open"}); });
    g.add_node("approve", [](const S&, sg::context& ctx) {
        auto verdict = ctx.interrupt_now<std::string>("approve?");
        return sg::update<S>{}.template set<&S::trail>({"approve:" + verdict});
    });
    g.add_edge(sg::START, "open").add_edge("open", "approve").add_edge("approve", sg::END);
    return g;
}

boost::asio::awaitable<bool> migration(std::string db) {
    {
        auto v1 = ticket_graph<ticket_v1>().compile(
            {.checkpointer = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = db})});
        auto paused = co_await v1.invoke(sg::update<ticket_v1>{}.set<&ticket_v1::owner>("ann"), {.thread_id = "ticket-1"});
        if (!check(paused.next == std::vector<std::string>{"approve"}, "version 1 pauses at approve")) co_return false;
    }
    auto g = ticket_graph<ticket>();
    g.set_state_version(2).add_migration(1, [](const ticket_v1& old) {
        ticket t;
        t.owners = {old.owner};
        t.trail = old.trail;
        return t;
    });
    auto v2 = g.compile({.checkpointer = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = db})});
    auto done = co_await v2.invoke(sg::resume("yes"), {.thread_id = "ticket-1"});
    co_return check(done.values.owners == std::vector<std::string>{"ann"} &&
                        done.values.trail == std::vector<std::string>{"open", "approve:yes"},
                    "version 2 resumes the thread with its state migrated");
}

// -- 4: a paused thread resumed from the saver's memory ------------------------------------------
boost::asio::awaitable<bool> resumes(std::string db) {
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = db + "-resumes"});
    auto app = ticket_graph<ticket>().compile({.checkpointer = saver});
    // Named first: g++ 12 rejects a braced list inside a co_await expression ("array used as initializer").
    auto opened = sg::update<ticket>{}.set<&ticket::owners>({"bo"});
    auto paused = co_await app.invoke(std::move(opened), {.thread_id = "ticket-2"});
    const auto kept = saver->remembered();
    auto done = co_await app.invoke(sg::resume("no"), {.thread_id = "ticket-2"});
    const auto [threads, recalled] = saver->remembered();
    // The graph held the state it paused with: the saver left the values out of the resume.
    const auto omitted = saver->omitted_values();
    // The saver call itself, spelled with temporaries: a thread with no checkpoint, nothing held.
    auto none = co_await saver->acquire_and_get_held("ticket-3", "", "no such checkpoint");
    co_await saver->release("ticket-3");
    co_return check(paused.next == std::vector<std::string>{"approve"} && kept.threads == 1 && kept.recalled == 0 &&
                        threads == 0 && recalled == 1 && omitted == 1 && !none &&
                        done.values.trail == std::vector<std::string>{"open", "approve:no"},
                    "a paused thread resumes from the saver's memory");
}

int main(int argc, char** argv) {
    if (argc != 2) return std::cerr << "usage: consumer_features <database file>\n", 2;
    bool ok = sg::run_sync(subgraphs(std::make_shared<sg::checkpoint::memory_saver>()));
    ok = sg::run_sync(migration(argv[1])) && ok;
    ok = sg::run_sync(resumes(argv[1])) && ok;
    std::cout << (ok ? "consumer_features: ok" : "consumer_features: WRONG RESULT") << std::endl;
    return ok ? 0 : 1;
}
