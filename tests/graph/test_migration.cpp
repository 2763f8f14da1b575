// State migrations (issue 27, item 6; migration.hpp): a thread paused by an older version of the
// graph's state is resumed by the new one, its state carried over by typed migrations, on a real
// SQLite file as a redeployed process would find it. LangGraph has no such thing: a changed state
// there leaves paused threads to fail or read wrong.
#include <stategraph/migration.hpp>

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include "run_awaitable.hpp"

#include <filesystem>

namespace sg = stategraph;
using sg::test::run;

namespace migration_test {

// Version 1 of the ticket state, as deployed first.
struct ticket_v1 {
    std::string question;
    std::string answer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(ticket_v1, (), (question, answer, log))
inline auto reducers(sg::for_state<ticket_v1>) { return sg::reducers{sg::reduce<&ticket_v1::log>(sg::append)}; }

// Version 2: several answers, a priority.
struct ticket_v2 {
    std::string question;
    std::vector<std::string> answers;
    int priority = 0;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(ticket_v2, (), (question, answers, priority, log))
inline auto reducers(sg::for_state<ticket_v2>) { return sg::reducers{sg::reduce<&ticket_v2::log>(sg::append)}; }

// Version 3: an owner, from the priority.
struct ticket_v3 {
    std::string question;
    std::vector<std::string> answers;
    int priority = 0;
    std::string owner;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(ticket_v3, (), (question, answers, priority, owner, log))
inline auto reducers(sg::for_state<ticket_v3>) { return sg::reducers{sg::reduce<&ticket_v3::log>(sg::append)}; }

ticket_v2 to_v2(const ticket_v1& old) {
    ticket_v2 n;
    n.question = old.question;
    if (!old.answer.empty()) n.answers.push_back(old.answer);
    n.priority = old.question.find("urgent") != std::string::npos ? 1 : 0;
    n.log = old.log;
    return n;
}

// draft -> review (asks a human) -> send -> END, over each version's state.
sg::compiled_graph<ticket_v1> v1(std::shared_ptr<sg::checkpoint::saver> saver) {
    using S = ticket_v1;
    sg::state_graph<S> g;
    g.add_node("draft", [](const S& s) { return sg::update<S>{}.set<&S::answer>("draft for " + s.question).set<&S::log>({"draft"}); });
    g.add_node("review", [](const S& s, sg::context& ctx) -> boost::asio::awaitable<sg::update<S>> {
        auto question = boost::json::value("approve '" + s.answer + "'?");
        auto verdict = co_await ctx.interrupt<std::string>(question);
        co_return sg::update<S>{}.set<&S::log>({"review:" + verdict});
    });
    g.add_node("send", [](const S&) { return sg::update<S>{}.set<&S::log>({"send"}); });
    g.add_edge(sg::START, "draft").add_edge("draft", "review").add_edge("review", "send").add_edge("send", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

template <class S>
sg::state_graph<S> later(const char* owner_note) {
    sg::state_graph<S> g;
    g.add_node("draft", [](const S& s) { return sg::update<S>{}.template set<&S::answers>({"draft for " + s.question}).template set<&S::log>({"draft"}); });
    g.add_node("review", [](const S& s, sg::context& ctx) -> boost::asio::awaitable<sg::update<S>> {
        auto question = boost::json::value("approve " + std::to_string(s.answers.size()) + " answers?");
        auto verdict = co_await ctx.interrupt<std::string>(question);
        co_return sg::update<S>{}.template set<&S::log>({"review:" + verdict + ":p" + std::to_string(s.priority) + ":" +
                                                          (s.answers.empty() ? std::string("none") : s.answers.front())});
    });
    g.add_node("send", [owner_note](const S&) { return sg::update<S>{}.template set<&S::log>({std::string("send") + owner_note}); });
    g.add_edge(sg::START, "draft").add_edge("draft", "review").add_edge("review", "send").add_edge("send", sg::END);
    return g;
}

sg::compiled_graph<ticket_v2> v2(std::shared_ptr<sg::checkpoint::saver> saver) {
    auto g = later<ticket_v2>("");
    g.set_state_version(2).add_migration(1, to_v2);
    return g.compile({.checkpointer = std::move(saver)});
}

sg::compiled_graph<ticket_v3> v3(std::shared_ptr<sg::checkpoint::saver> saver) {
    auto g = later<ticket_v3>(" (owned)");
    g.set_state_version(3).add_migration(1, to_v2).add_migration(2, [](const ticket_v2& old) {
        ticket_v3 n;
        n.question = old.question;
        n.answers = old.answers;
        n.priority = old.priority;
        n.owner = old.priority > 0 ? "on-call" : "queue";
        n.log = old.log;
        return n;
    });
    return g.compile({.checkpointer = std::move(saver)});
}

/// A fresh SQLite file per case (a redeployed process opens the same file).
struct temp_db {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("sg-migration-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()) + ".db");
    ~temp_db() {
        std::error_code ec;
        for (const char* suffix : {"", "-wal", "-shm", "-leases"}) std::filesystem::remove(path.string() + suffix, ec);
    }
    std::shared_ptr<sg::checkpoint::saver> open() const {
        sg::checkpoint::sqlite_options o;
        o.path = path.string();
        return std::make_shared<sg::checkpoint::sqlite_saver>(o);
    }
};

/// The thread paused at review by version 1: its question is "urgent: refund".
void pause_on_v1(const temp_db& db, const std::string& thread) {
    auto app = v1(db.open());
    auto r = run(app.invoke(sg::update<ticket_v1>{}.set<&ticket_v1::question>("urgent: refund"), {.thread_id = thread}));
    BOOST_TEST_REQUIRE((r.status == sg::run_status::interrupted));
    BOOST_TEST(r.values.answer == "draft for urgent: refund");
}

} // namespace migration_test

using namespace migration_test;

BOOST_AUTO_TEST_SUITE(migration)

// The state type changed (answer -> answers, a priority); the paused thread resumes on it.
BOOST_AUTO_TEST_CASE(a_paused_thread_resumes_on_the_new_state) {
    temp_db db;
    pause_on_v1(db, "t1");
    auto app = v2(db.open()); // "another process": a new saver on the file
    // Read before anything runs: the migrated state, nothing written.
    auto snap = run(app.get_state("t1"));
    BOOST_TEST(snap.values.answers == std::vector<std::string>{"draft for urgent: refund"}, boost::test_tools::per_element());
    BOOST_TEST(snap.values.priority == 1);
    BOOST_TEST(snap.next == std::vector<std::string>{"review"}, boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(snap.tasks.size() == 1u);
    BOOST_TEST(snap.tasks[0].interrupts.size() == 1u);
    const auto before = run(app.get_state_history("t1")).size();
    BOOST_TEST(before >= 3u); // every checkpoint of version 1 reads, migrated
    // The resume runs review on the migrated state, then send.
    auto r = run(app.invoke(sg::resume(std::string("yes")), {.thread_id = "t1"}));
    BOOST_TEST((r.status == sg::run_status::done));
    const std::vector<std::string> log{"draft", "review:yes:p1:draft for urgent: refund", "send"};
    BOOST_TEST(r.values.log == log, boost::test_tools::per_element());
    // Written at version 2, every field whole: a fresh process reads it back without migrating.
    auto again = run(v2(db.open()).get_state("t1"));
    BOOST_TEST(again.values.log == log, boost::test_tools::per_element());
    BOOST_TEST(again.values.answers.size() == 1u);
    BOOST_TEST(again.metadata.at("state_version").as_int64() == 2);
    // The old checkpoints stay as stored (their metadata names no version).
    auto history = run(app.get_state_history("t1"));
    BOOST_TEST(history.size() > before);
    BOOST_TEST(!history.back().metadata.contains("state_version"));
    // And a new turn on the thread runs on version 2 throughout.
    auto next = run(app.invoke(sg::update<ticket_v2>{}.set<&ticket_v2::question>("later"), {.thread_id = "t1"}));
    BOOST_TEST((next.status == sg::run_status::interrupted));
    BOOST_TEST(next.values.answers == std::vector<std::string>{"draft for later"}, boost::test_tools::per_element());
    BOOST_TEST(next.values.log.size() == 4u);
}

// Two steps at once: a version 1 thread read by version 3 (1 -> 2 -> 3), typed at each step.
BOOST_AUTO_TEST_CASE(two_migrations_in_a_row) {
    temp_db db;
    pause_on_v1(db, "t2");
    auto app = v3(db.open());
    auto snap = run(app.get_state("t2"));
    BOOST_TEST(snap.values.owner == "on-call");
    BOOST_TEST(snap.values.answers.size() == 1u);
    auto r = run(app.invoke(sg::resume(std::string("ok")), {.thread_id = "t2"}));
    BOOST_TEST((r.status == sg::run_status::done));
    BOOST_TEST(r.values.log.back() == "send (owned)");
    BOOST_TEST(r.values.owner == "on-call");
    BOOST_TEST(run(app.get_state("t2")).metadata.at("state_version").as_int64() == 3);
}

// update_state on a migrated thread: the update applies to the migrated state, and the checkpoint
// it writes holds every field at the new version.
BOOST_AUTO_TEST_CASE(update_state_on_a_migrated_thread) {
    temp_db db;
    pause_on_v1(db, "t3");
    auto app = v2(db.open());
    auto update = sg::update<ticket_v2>{}.set<&ticket_v2::priority>(5);
    (void)run(app.update_state("t3", update));
    auto fresh = v2(db.open());
    auto snap = run(fresh.get_state("t3"));
    BOOST_TEST(snap.values.priority == 5);
    BOOST_TEST(snap.values.answers == std::vector<std::string>{"draft for urgent: refund"}, boost::test_tools::per_element());
    BOOST_TEST(snap.metadata.at("state_version").as_int64() == 2);
    // As LangGraph: the update stands for the last writer (draft), so review runs and asks again.
    auto asked = run(fresh.invoke(sg::continue_run, {.thread_id = "t3"}));
    BOOST_TEST((asked.status == sg::run_status::interrupted));
    auto r = run(fresh.invoke(sg::resume(std::string("fine")), {.thread_id = "t3"}));
    BOOST_TEST(r.values.log.at(1) == "review:fine:p5:draft for urgent: refund");
}

// A thread no migration reaches keeps the typed drift error, naming the thread and versions:
// a version 1 thread read by a version 2 graph without a migration from 1, and a version 2 thread
// read by the version 1 graph.
BOOST_AUTO_TEST_CASE(a_thread_no_migration_reaches_is_a_drift_error) {
    temp_db db;
    pause_on_v1(db, "t4");
    auto g = later<ticket_v2>("");
    g.set_state_version(2); // no migration
    auto app = g.compile({.checkpointer = db.open()});
    for (int i = 0; i < 2; ++i) {
        try {
            if (i == 0) (void)run(app.invoke(sg::resume(std::string("x")), {.thread_id = "t4"}));
            else (void)run(app.get_state("t4"));
            BOOST_FAIL("no drift error");
        } catch (const sg::drift_error& e) {
            BOOST_TEST((e.code() == sg::errc::graph_drift));
            const std::string what = e.what();
            BOOST_TEST(what.find("thread 't4'") != std::string::npos, what);
            BOOST_TEST(what.find("no migration from version 1") != std::string::npos, what);
        }
    }
    // The thread is untouched: version 1 still resumes it.
    auto r = run(v1(db.open()).invoke(sg::resume(std::string("yes")), {.thread_id = "t4"}));
    BOOST_TEST((r.status == sg::run_status::done));

    // Newer than the graph: no migration goes back.
    pause_on_v1(db, "t5");
    (void)run(v2(db.open()).invoke(sg::resume(std::string("yes")), {.thread_id = "t5"}));
    try {
        (void)run(v1(db.open()).get_state("t5"));
        BOOST_FAIL("no drift error");
    } catch (const sg::drift_error& e) {
        BOOST_TEST(std::string(e.what()).find("no migration goes back") != std::string::npos, e.what());
    }
}

// compile() reports every problem of the chain at once: a gap, a migration reading another type
// than the one before returns, a last one not returning the state, one outside the versions.
BOOST_AUTO_TEST_CASE(compile_reports_a_broken_chain) {
    auto g = later<ticket_v3>("");
    g.set_state_version(4)
        .add_migration(1, to_v2)
        .add_migration(2, [](const ticket_v1& old) { return to_v2(old); }) // reads v1, the one before returns v2
        .add_migration(6, [](const ticket_v2&) { return ticket_v3{}; });   // outside 1..3, and a gap after 2
    try {
        (void)g.compile();
        BOOST_FAIL("compiled");
    } catch (const sg::compile_error& e) {
        std::string all;
        for (const auto& p : e.problems()) all += p.message + "\n";
        BOOST_TEST(all.find("reads ticket_v1, but the migration before it returns ticket_v2") != std::string::npos, all);
        BOOST_TEST(all.find("outside the versions") != std::string::npos, all);
        BOOST_TEST(all.find("has a gap") != std::string::npos, all);
        BOOST_TEST(e.problems().size() >= 3u, all);
    }
    auto h = later<ticket_v3>("");
    h.set_state_version(3).add_migration(1, to_v2).add_migration(2, [](const ticket_v2& o) { return to_v2(ticket_v1{o.question, "", o.log}); });
    try {
        (void)h.compile();
        BOOST_FAIL("compiled");
    } catch (const sg::compile_error& e) {
        BOOST_TEST(std::string(e.what()).find("must return the state ticket_v3, not ticket_v2") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
