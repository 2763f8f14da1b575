#define BOOST_TEST_MODULE server_durable
// The server's records in a run store on one host (issue 24): two instances on one SQLite file
// serve each other's threads and runs; a SIGKILLed instance loses nothing (its running, queued and
// delayed runs run once after a restart, finished runs stay listed); a drain hands its runs back
// to the queue and starts none.

#include "server_test_support.hpp"
#include "shared_files.hpp"

#include <stategraph/drain.hpp>
#include <stategraph/server/run_store.hpp>

#include <filesystem>
#include <set>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

/// An instance as deployed: the chat graph on an SQLite checkpoint file, records in an SQLite run
/// store file; both files shared by every instance of the case.
srv::server_options instance_options(const temp_dir& d, std::size_t workers, std::chrono::milliseconds lease) {
    auto o = test_options();
    srv::run_store_options ro;
    ro.lease = lease;
    o.runs = srv::open_sqlite_run_store((d.path / "runs.db").string(), ro);
    o.max_runs_in_flight = workers;
    o.poll_interval = std::chrono::milliseconds(50);
    return o;
}

/// A run's status as the run store has it (no server needed).
std::string status_of_store(const temp_dir& d, const std::string& rid) {
    auto store = srv::open_sqlite_run_store((d.path / "runs.db").string());
    auto r = sg::checkpoint::testing::run(store->get_run(rid));
    return r ? r->status : "absent";
}

/// Waits (bounded) until the run leaves pending and running; its last status.
std::string wait_finished(unsigned short port, const std::string& tid, const std::string& rid, int seconds = 30) {
    std::string s;
    for (int i = 0; i < seconds * 20; ++i) {
        s = status_of(port, tid, rid);
        if (s != "pending" && s != "running") return s;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return s;
}

std::string start_run(unsigned short port, const std::string& tid, json::object body) {
    body["assistant_id"] = "chat";
    auto r = post(port, "/threads/" + tid + "/runs", body);
    BOOST_TEST_REQUIRE(r.status == 200u, r.body);
    return std::string(r.json().at("run_id").as_string());
}

json::object ask_for(const std::string& q, const char* multitask = "reject") {
    return json::object{{"input", json::object{{"question", q}}}, {"multitask_strategy", multitask}};
}

/// The thread's log (the state's list every run appends "work", "ask" to) and whether the steps of
/// its checkpoints are unique (no step committed twice).
std::pair<std::vector<std::string>, bool> log_and_unique_steps(unsigned short port, const std::string& tid) {
    std::vector<std::string> log;
    auto st = get(port, "/threads/" + tid + "/state").json();
    if (auto* v = st.at("values").as_object().if_contains("log"))
        for (const auto& e : v->as_array()) log.emplace_back(e.as_string());
    auto hist = post(port, "/threads/" + tid + "/history", json::object{{"limit", 1000}}).json().as_array();
    std::set<std::int64_t> steps;
    bool unique = true;
    for (const auto& h : hist) unique = steps.insert(h.at("metadata").at("step").as_int64()).second && unique;
    return {log, unique};
}

/// A server in a child process (the case SIGKILLs it): returns its pid and port.
std::pair<pid_t, unsigned short> fork_instance(const temp_dir& d) {
    int fds[2];
    BOOST_TEST_REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    BOOST_TEST_REQUIRE(pid >= 0);
    if (pid == 0) { // the child: serve until killed
        ::close(fds[0]);
        try {
            net::io_context io;
            auto o = instance_options(d, 8, std::chrono::milliseconds(1000));
            o.port = 0;
            srv::server s(io.get_executor(), std::move(o));
            s.add(srv::make_assistant("chat", build(chat_saver(d))));
            unsigned short port = s.listen();
            if (::write(fds[1], &port, sizeof port) != sizeof port) ::_exit(3);
            io.run();
        } catch (...) {
            ::_exit(2);
        }
        ::_exit(0);
    }
    ::close(fds[1]);
    unsigned short port = 0;
    auto n = ::read(fds[0], &port, sizeof port);
    ::close(fds[0]);
    BOOST_TEST_REQUIRE(n == static_cast<ssize_t>(sizeof port));
    return {pid, port};
}

} // namespace

BOOST_AUTO_TEST_SUITE(server_durable)

// Two instances on one SQLite file: what one records the other serves. B takes requests only (no
// workers), so every run it is given runs on A, and is joined, streamed and cancelled through B.
BOOST_AUTO_TEST_CASE(two_instances_on_one_sqlite_file) {
    temp_dir d;
    running_server a(instance_options(d, 8, std::chrono::milliseconds(2000)), {}, chat_saver(d));
    running_server b(instance_options(d, 0, std::chrono::milliseconds(2000)), {}, chat_saver(d));

    // A thread made on A is there on B; B does not overwrite it.
    auto tid = new_thread(a.port, json::object{{"metadata", json::object{{"who", "a"}}}});
    auto on_b = get(b.port, "/threads/" + tid);
    BOOST_TEST_REQUIRE(on_b.status == 200u);
    BOOST_TEST(on_b.json().at("metadata").at("who") == "a");
    BOOST_TEST(post(b.port, "/threads", json::object{{"thread_id", tid}, {"metadata", json::object{{"who", "b"}}}}).status == 409u);
    BOOST_TEST(get(a.port, "/threads/" + tid).json().at("metadata").at("who") == "a");

    // A run created on B (API only) runs on A; B waits for its result.
    auto w = post(b.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}});
    BOOST_TEST_REQUIRE(w.status == 200u);
    BOOST_TEST(json::parse(w.body).at("log").as_array().size() == 2u);
    BOOST_TEST(get(a.port, "/threads/" + tid).json().at("status") == "idle");
    BOOST_TEST(get(b.port, "/threads/" + tid).json().at("status") == "idle");

    // A slow run created on A: streamed from B (joined mid-run, then again from an event id).
    auto rid = start_run(a.port, tid, ask_for("slow"));
    auto streamed = parse_sse(get(b.port, "/threads/" + tid + "/runs/" + rid + "/stream").body);
    BOOST_TEST_REQUIRE(streamed.size() >= 2u);
    BOOST_TEST(streamed.front().event == "metadata");
    BOOST_TEST(streamed.back().event == "values");
    auto rejoined = parse_sse(get(b.port, "/threads/" + tid + "/runs/" + rid + "/stream", {{"Last-Event-ID", streamed.front().id}}).body);
    BOOST_TEST(rejoined.size() == streamed.size() - 1);
    BOOST_TEST(status_of(b.port, tid, rid) == "success");
    BOOST_TEST(status_of(a.port, tid, rid) == "success");

    // A run that never ends on its own, on A, cancelled through B.
    auto stall = start_run(b.port, tid, ask_for("stall"));
    for (int i = 0; i < 100 && status_of(b.port, tid, stall) != "running"; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    BOOST_TEST(status_of(b.port, tid, stall) == "running");
    auto started = std::chrono::steady_clock::now();
    BOOST_TEST(post(b.port, "/threads/" + tid + "/runs/" + stall + "/cancel?wait=1", json::object{}).status == 204u);
    BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(5)));
    BOOST_TEST(status_of(a.port, tid, stall) == "interrupted");
    BOOST_TEST(get(a.port, "/threads/" + tid).json().at("status") != "busy");

    // Runs listed alike on both.
    BOOST_TEST(get(a.port, "/threads/" + tid + "/runs").json().as_array().size() == 3u);
    BOOST_TEST(get(b.port, "/threads/" + tid + "/runs").json().as_array().size() == 3u);
}

// SIGKILL of the only instance with a run in flight, runs queued behind it and a delayed run:
// after a restart every run runs exactly once (no step committed twice, no turn lost), and the
// runs finished before the kill are still listed with their results.
BOOST_AUTO_TEST_CASE(sigkill_of_the_only_instance_loses_no_run) {
    temp_dir d;
    auto [pid, port] = fork_instance(d);
    auto done_tid = new_thread(port), busy_tid = new_thread(port), later_tid = new_thread(port);
    auto done_rid = start_run(port, done_tid, ask_for("hi"));
    BOOST_TEST_REQUIRE(wait_finished(port, done_tid, done_rid) == "success");
    // busy: a slow run (1 s in `work`) and two queued behind it
    std::vector<std::string> busy_runs{start_run(port, busy_tid, ask_for("slow"))};
    busy_runs.push_back(start_run(port, busy_tid, ask_for("second", "enqueue")));
    busy_runs.push_back(start_run(port, busy_tid, ask_for("third", "enqueue")));
    // later: a run delayed by 1 s, one queued behind it
    auto delayed = ask_for("hi");
    delayed["after_seconds"] = 1;
    std::vector<std::string> later_runs{start_run(port, later_tid, delayed)};
    later_runs.push_back(start_run(port, later_tid, ask_for("after", "enqueue")));
    for (int i = 0; i < 100 && status_of(port, busy_tid, busy_runs[0]) != "running"; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    BOOST_TEST(status_of(port, busy_tid, busy_runs[0]) == "running");
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // inside the slow node
    BOOST_TEST_REQUIRE(::kill(pid, SIGKILL) == 0);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    BOOST_TEST(WIFSIGNALED(wstatus));

    auto [pid2, port2] = fork_instance(d); // a new process on the same files
    for (const auto& rid : busy_runs) BOOST_TEST(wait_finished(port2, busy_tid, rid) == "success", rid);
    for (const auto& rid : later_runs) BOOST_TEST(wait_finished(port2, later_tid, rid) == "success", rid);
    auto [busy_log, busy_unique] = log_and_unique_steps(port2, busy_tid);
    BOOST_TEST(busy_log.size() == 6u); // three runs, each work then ask, once
    BOOST_TEST(busy_unique);
    auto [later_log, later_unique] = log_and_unique_steps(port2, later_tid);
    BOOST_TEST(later_log.size() == 4u);
    BOOST_TEST(later_unique);
    // The run finished before the kill: still listed, its result readable.
    auto listed = get(port2, "/threads/" + done_tid + "/runs").json().as_array();
    BOOST_TEST_REQUIRE(listed.size() == 1u);
    BOOST_TEST(listed[0].at("status") == "success");
    auto joined = get(port2, "/threads/" + done_tid + "/runs/" + done_rid + "/join");
    BOOST_TEST(json::parse(joined.body).at("log").as_array().size() == 2u);
    // The taken-over run says it was attempted again (its events: a second metadata event).
    auto events = parse_sse(get(port2, "/threads/" + busy_tid + "/runs/" + busy_runs[0] + "/stream").body);
    std::size_t attempts = 0;
    for (const auto& e : events) attempts += e.event == "metadata";
    BOOST_TEST(attempts == 2u);
    ::kill(pid2, SIGKILL);
    ::waitpid(pid2, &wstatus, 0);
}

// A drain (SIGTERM) starts no queued run, stops the running one at its next step boundary and
// hands it back to the queue; another instance then runs the thread's turns one after another,
// never interleaved.
BOOST_AUTO_TEST_CASE(a_drain_hands_runs_back_and_starts_none) {
    temp_dir d;
    auto tid = std::string();
    std::vector<std::string> runs;
    {
        running_server a(instance_options(d, 8, std::chrono::milliseconds(1000)), {}, chat_saver(d));
        tid = new_thread(a.port);
        runs.push_back(start_run(a.port, tid, ask_for("slow")));
        runs.push_back(start_run(a.port, tid, ask_for("second", "enqueue")));
        runs.push_back(start_run(a.port, tid, ask_for("third", "enqueue")));
        for (int i = 0; i < 100 && status_of(a.port, tid, runs[0]) != "running"; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        // Clients waiting on the running run through this instance: a join and a stream.
        auto joined = std::async(std::launch::async, [&] { return get(a.port, "/threads/" + tid + "/runs/" + runs[0] + "/join"); });
        auto streamed = std::async(std::launch::async, [&] { return get(a.port, "/threads/" + tid + "/runs/" + runs[0] + "/stream"); });
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        std::promise<void> drained;
        auto started = std::chrono::steady_clock::now();
        net::post(a.io, [&] { a.server->drain([&] { drained.set_value(); }); });
        BOOST_TEST_REQUIRE((drained.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready));
        BOOST_TEST((std::chrono::steady_clock::now() - started < std::chrono::seconds(5)));
        // Each is told the instance stopped before the run ended: never a silent partial result.
        auto j = joined.get();
        BOOST_TEST(j.status == 200u);
        BOOST_TEST(json::parse(j.body).at("__error__").at("error") == "ServerDraining", j.body);
        auto events = parse_sse(streamed.get().body);
        BOOST_TEST_REQUIRE(!events.empty());
        BOOST_TEST(events.back().event == "error");
        BOOST_TEST(events.back().data.at("error") == "ServerDraining");
        // The queued runs were not started here; the drained one went back to the queue.
        for (const auto& rid : runs) BOOST_TEST(status_of_store(d, rid) == "pending", rid);
    }
    stategraph::cancel_drain(); // the drain flag is process-wide; the next instance runs normally
    running_server b(instance_options(d, 8, std::chrono::milliseconds(1000)), {}, chat_saver(d));
    for (const auto& rid : runs) BOOST_TEST(wait_finished(b.port, tid, rid) == "success", rid);
    auto [log, unique] = log_and_unique_steps(b.port, tid);
    const std::vector<std::string> in_turns{"work", "ask", "work", "ask", "work", "ask"};
    BOOST_TEST(log == in_turns, boost::test_tools::per_element());
    BOOST_TEST(unique);
    auto hist = post(b.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array();
    // The turns' inputs in order of their checkpoints (newest first in the history).
    std::vector<std::string> questions;
    for (auto it = hist.rbegin(); it != hist.rend(); ++it) {
        auto q = std::string(it->at("values").as_object().contains("question") ? it->at("values").at("question").as_string() : "");
        if (questions.empty() || questions.back() != q) questions.push_back(q);
    }
    questions.erase(std::remove(questions.begin(), questions.end(), std::string()), questions.end());
    const std::vector<std::string> order{"slow", "second", "third"};
    BOOST_TEST(questions == order, boost::test_tools::per_element());
}

// A worker that committed every step of a run and died before it stored the steps' events (events
// are written apart from checkpoints): the instance that takes the run over has nothing left to
// run, and the run's stream still ends on the final state, not on the last values the dead
// worker stored (seen once in the multihost kill loop under ASan: a stream that ended after 2 of
// 6 nodes).
BOOST_AUTO_TEST_CASE(a_takeover_after_the_last_step_ends_the_stream_on_the_final_state) {
    temp_dir d;
    std::string tid, rid;
    {
        running_server api(instance_options(d, 0, std::chrono::milliseconds(300)), {}, chat_saver(d)); // no workers
        tid = new_thread(api.port);
        rid = start_run(api.port, tid, ask_for("hi"));
    }
    // The dead worker "ghost": claims the run, anchors it, stores the run's first events only,
    // and commits both steps.
    auto store = srv::open_sqlite_run_store((d.path / "runs.db").string());
    auto claimed = sg::checkpoint::testing::run(store->claim("ghost"));
    BOOST_TEST_REQUIRE(claimed.has_value());
    BOOST_TEST_REQUIRE(claimed->run_id == rid);
    sg::checkpoint::testing::run(store->set_anchor(rid, "ghost", json::value(std::string())));
    std::vector<srv::run_event> early{
        {0, "metadata", json::serialize(json::object{{"run_id", rid}, {"attempt", 1}})},
        {1, "values", json::serialize(json::object{{"question", "hi"}, {"log", json::array{}}})}};
    BOOST_TEST_REQUIRE(sg::checkpoint::testing::run(store->append_events(rid, "ghost", early)));
    {
        auto app = build(chat_saver(d));
        auto done = sg::run_sync(app.invoke(sg::update<chat_state>{}.set<&chat_state::question>("hi"), {.thread_id = tid}));
        BOOST_TEST_REQUIRE(done.values.log.size() == 2u);
    }
    // An instance with workers takes the run over once the ghost's claim expires.
    running_server b(instance_options(d, 4, std::chrono::milliseconds(300)), {}, chat_saver(d));
    BOOST_TEST(wait_finished(b.port, tid, rid) == "success");
    auto events = parse_sse(get(b.port, "/threads/" + tid + "/runs/" + rid + "/stream").body);
    const sse* last_values = nullptr;
    for (const auto& e : events)
        if (e.event == "values") last_values = &e;
    BOOST_TEST_REQUIRE(last_values != nullptr);
    BOOST_TEST(last_values->data.at("log").as_array().size() == 2u, json::serialize(last_values->data));
    auto [log, unique] = log_and_unique_steps(b.port, tid);
    BOOST_TEST(log.size() == 2u); // the steps ran once, by the ghost
    BOOST_TEST(unique);
}

// The run store's tables in the checkpointer's own file: the store writes through the saver's
// page checksums, so neither damages the other (a run store writing the file without them made
// every page it touched read as damaged to the saver).
BOOST_AUTO_TEST_CASE(runs_and_checkpoints_share_one_file) {
    temp_dir d;
    sg::checkpoint::sqlite_options so;
    so.path = (d.path / "one.db").string();
    auto o = test_options();
    o.runs = srv::open_sqlite_run_store(so.path);
    o.poll_interval = std::chrono::milliseconds(50);
    {
        running_server s(o, {}, std::make_shared<sg::checkpoint::sqlite_saver>(so));
        auto tid = new_thread(s.port);
        for (const char* q : {"one", "two", "three"}) {
            auto w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", q}}}});
            BOOST_TEST_REQUIRE(w.status == 200u, w.body);
            BOOST_TEST(json::parse(w.body).at("question") == q);
        }
        auto [log, unique] = log_and_unique_steps(s.port, tid);
        BOOST_TEST(log.size() == 6u);
        BOOST_TEST(unique);
    }
    // A fresh saver and store on the file read everything back, nothing damaged.
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(so);
    sg::checkpoint::thread_query q;
    auto threads = sg::checkpoint::testing::run(saver->list_threads(q));
    BOOST_TEST(threads.size() == 1u);
    auto store = srv::open_sqlite_run_store(so.path);
    auto keys = sg::checkpoint::testing::run(store->thread_keys());
    BOOST_TEST(keys.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
