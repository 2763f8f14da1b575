// Helper program of the durable-thread tests: runs one call of a shared graph on a SQLite
// checkpoint file, in its own process, so that the tests can kill it mid-step (SIGKILL) and
// continue or resume its thread from another process.
//
//   durable_child crash-start <db> <thread> <counters>      runs the crash graph; slow blocks
//   durable_child crash-continue <db> <thread> <counters>   continues the thread (waits out the lease)
//   durable_child ask-start <db> <thread> <counters> <out>  runs until the interrupt; writes its id to <out>
//   durable_child ask-resume <db> <thread> <counters> <json value>        resume(value)
//   durable_child ask-resume-id <db> <thread> <counters> <id> <json value> resume_map({{id, value}})
//   durable_child disk-full <db> <thread> <limit bytes>     runs the big graph under RLIMIT_FSIZE
//   durable_child email-start <db> <thread> <counters>      sends the email (ctx.task), then hangs
//   durable_child email-continue <db> <thread> <counters>   continues: runs send again, up to its question
//   durable_child email-resume <db> <thread> <counters> <n> answers the question
//   durable_child probe-start <db> <thread> <notes>         the probe graph on new input (kill loop)
//   durable_child probe-continue <db> <thread> <notes>      continues a probe thread
//   durable_child probe-many <db> {<thread> <notes> <start|continue>}...
//       several probe threads at once on one saver, half on each of two threads (io_contexts),
//       so that their checkpoints and pending writes share commits (group commit kill loop)
//   durable_child race-chat|race-continue|race-resume <db> <thread> <dir> <scenario> <together>
//       the race graph (notes in <dir>/notes, fails while <dir>/fail exists) on new input, by
//       continuing, or resuming with 7; no waiting out another's lease: thread_busy is the
//       answer. With together=1 it appends its pid to <dir>/ready once its saver is open and
//       starts when <dir>/go exists (at most 30 s later), so that the racers start at once.
//
//   durable_child durability-chain <db> <thread> <notes> <sync|async|exit> <put ms> <node ms> <input|continue>
//       the slow chain in that durability mode, each checkpoint put slowed by <put ms> and noted
//       ("put"/"stored" of node "checkpoint") in <notes>, on new input or continuing the thread
//
// Exit codes: 0 done as expected, 10 + errc value for a stategraph error, 2 other failures,
// 3 the start signal (race modes) never came.
#include "durable_graphs.hpp"
#include "forwarding_saver.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <thread>

namespace sg = stategraph;
namespace cp = stategraph::checkpoint;
using namespace durable::graphs;
using stategraph::checkpoint::testing::run;

namespace {

std::shared_ptr<cp::saver> open_saver(const std::string& db, std::chrono::milliseconds lease_ttl = std::chrono::seconds(2)) {
    cp::sqlite_options o;
    o.path = db;
    // A killed holder on another host would block the thread for `lease_ttl` at most (one on this
    // host is noticed at once); STATEGRAPH_TEST_LEASE_MS overrides it.
    o.lease_ttl = lease_ttl;
    if (const char* ms = std::getenv("STATEGRAPH_TEST_LEASE_MS")) o.lease_ttl = std::chrono::milliseconds(std::atol(ms));
    return std::make_shared<cp::sqlite_saver>(o);
}

/// Retries while another (killed) process still holds the thread's lease.
template <class F>
auto retry_busy(F f) {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (;;) {
        try {
            return f();
        } catch (const sg::checkpoint_error& e) {
            if (e.kind() != sg::errc::thread_busy || std::chrono::steady_clock::now() > until) throw;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
}

int main_impl(int argc, char** argv) {
    if (argc < 4) {
        std::cerr << "usage: durable_child <mode> <db> <thread> ...\n";
        return 2;
    }
    const std::string mode = argv[1], db = argv[2], thread = argv[3];
    sg::run_config cfg;
    cfg.thread_id = thread;

    if (mode == "crash-start" || mode == "crash-continue") {
        if (argc < 5) return 2;
        static bool block = mode == "crash-start";
        auto app = crash_graph(argv[4], &block).compile({.checkpointer = open_saver(db)});
        sg::run_result<crash_state> r;
        if (block) r = run(app.invoke(sg::update<crash_state>{}, cfg));
        else r = retry_busy([&] { return run(app.invoke(sg::continue_run, cfg)); });
        std::cout << "done: " << r.values.log.size() << " entries\n";
        return 0;
    }
    if (mode == "ask-start" || mode == "ask-resume" || mode == "ask-resume-id") {
        if (argc < 6) return 2;
        auto app = ask_graph(argv[4]).compile({.checkpointer = open_saver(db)});
        if (mode == "ask-start") {
            auto r = run(app.invoke(sg::update<ask_state>{}, cfg));
            if (!r.interrupted() || r.interrupts.size() != 1) return 2;
            std::ofstream(argv[5]) << r.interrupts[0].id;
            return 0;
        }
        sg::run_result<ask_state> r;
        if (mode == "ask-resume") {
            r = run(app.invoke(sg::resume(boost::json::parse(argv[5])), cfg));
        } else {
            if (argc < 7) return 2;
            std::map<std::string, boost::json::value> answers;
            answers[argv[5]] = boost::json::parse(argv[6]);
            r = run(app.invoke(sg::resume_map(std::move(answers)), cfg));
        }
        std::cout << "count " << r.values.count << "\n";
        return r.interrupted() ? 2 : 0;
    }
    if (mode == "email-start" || mode == "email-continue" || mode == "email-resume") {
        if (argc < 5) return 2;
        static bool block = mode == "email-start";
        auto app = email_graph(argv[4], &block).compile({.checkpointer = open_saver(db)});
        sg::run_result<ask_state> r;
        if (mode == "email-start") r = run(app.invoke(sg::update<ask_state>{}, cfg));
        else if (mode == "email-continue") r = run(app.invoke(sg::continue_run, cfg));
        else if (argc < 6) return 2;
        else r = run(app.invoke(sg::resume(std::atoi(argv[5])), cfg));
        std::cout << (r.interrupted() ? "waiting" : "done") << " count " << r.values.count << "\n";
        return 0;
    }
    if (mode == "cache-run") { // <db> <thread> <counters> <count>: one run of the cached graph
        if (argc < 6) return 2;
        auto app = cache_graph(argv[4]).compile({.checkpointer = open_saver(db)});
        auto r = run(app.invoke(sg::update<ask_state>{}.set<&ask_state::count>(std::atoi(argv[5])), cfg));
        std::cout << (r.values.trail.empty() ? std::string("nothing") : r.values.trail.back()) << "\n";
        return r.values.trail == std::vector<std::string>{"looked up " + std::string(argv[5])} ? 0 : 3;
    }
    if (mode == "durability-chain") {
        if (argc < 9) return 2;
        const std::string notes = argv[4], durability = argv[5], input = argv[8];
        if (durability == "sync") cfg.durability = sg::durability::sync;
        else if (durability == "async") cfg.durability = sg::durability::async;
        else if (durability == "exit") cfg.durability = sg::durability::exit;
        else return 2;
        auto slow = std::make_shared<durable::slow_put_saver>(
            open_saver(db), std::chrono::milliseconds(std::atoi(argv[6])),
            [notes](const char* event, std::int64_t step) { note_task(notes, event, "checkpoint", step); });
        auto app = slow_chain_graph(notes, std::atoi(argv[7])).compile({.checkpointer = slow});
        auto r = retry_busy([&] {
            return input == "input" ? run(app.invoke(sg::update<chain_state>{}, cfg)) : run(app.invoke(sg::continue_run, cfg));
        });
        std::cout << "done: " << r.values.log.size() << " entries\n";
        return r.interrupted() ? 2 : 0;
    }
    if (mode == "disk-full") {
        if (argc < 5) return 2;
        // Writing past the limit fails with EFBIG instead of killing the process.
        std::signal(SIGXFSZ, SIG_IGN);
        rlimit lim{};
        lim.rlim_cur = static_cast<rlim_t>(std::stoull(argv[4]));
        lim.rlim_max = RLIM_INFINITY;
        if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 2;
        auto app = big_graph(4u << 20).compile({.checkpointer = open_saver(db)});
        run(app.invoke(sg::update<big_state>{}, cfg));
        return 0; // the huge write did not fail: the test reports it
    }
    if (mode == "probe-start" || mode == "probe-continue") {
        if (argc < 5) return 2;
        auto app = probe_graph(argv[4]).compile({.checkpointer = open_saver(db)});
        auto r = retry_busy([&] {
            return mode == "probe-start" ? run(app.invoke(sg::update<probe_state>{}, cfg))
                                         : run(app.invoke(sg::continue_run, cfg));
        });
        std::cout << "done: " << r.values.log.size() << " entries\n";
        return r.interrupted() ? 2 : 0;
    }
    if (mode == "probe-many") {
        if (argc < 6 || (argc - 3) % 3 != 0) return 2;
        auto saver = open_saver(db);
        struct probe {
            std::string thread, notes;
            bool start;
            sg::compiled_graph<probe_state> app;
            bool done = false;
        };
        std::vector<std::unique_ptr<probe>> probes;
        for (int a = 3; a + 2 < argc; a += 3)
            probes.push_back(std::make_unique<probe>(
                probe{argv[a], argv[a + 1], std::string(argv[a + 2]) == "start",
                      probe_graph(argv[a + 1]).compile({.checkpointer = saver}), false}));
        boost::asio::io_context ios[2];
        std::atomic<int> failures{0};
        for (std::size_t k = 0; k < probes.size(); ++k) {
            auto one = [](probe& p) -> boost::asio::awaitable<void> {
                sg::run_config c;
                c.thread_id = p.thread;
                // A killed child's lease is taken over at once (same host); busy is retried anyway.
                const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
                for (;;) {
                    try {
                        auto call = p.start ? p.app.invoke(sg::update<probe_state>{}, c) : p.app.invoke(sg::continue_run, c);
                        auto r = co_await std::move(call);
                        p.done = !r.interrupted();
                        co_return;
                    } catch (const sg::checkpoint_error& e) {
                        if (e.kind() != sg::errc::thread_busy || std::chrono::steady_clock::now() > until) throw;
                    }
                    boost::asio::steady_timer wait(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(100));
                    co_await wait.async_wait(boost::asio::use_awaitable);
                }
            };
            auto work = one(*probes[k]);
            boost::asio::co_spawn(ios[k % 2], std::move(work), [&failures](std::exception_ptr e) {
                if (!e) return;
                ++failures;
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& x) {
                    std::cerr << "probe-many: " << x.what() << "\n";
                }
            });
        }
        std::thread second([&ios] { ios[1].run(); });
        ios[0].run();
        second.join();
        for (const auto& p : probes)
            if (!p->done) ++failures;
        std::cout << "done: " << probes.size() << " threads, " << failures.load() << " failed\n";
        return failures.load() == 0 ? 0 : 2;
    }
    if (mode == "race-chat" || mode == "race-continue" || mode == "race-resume") {
        if (argc < 7) return 2;
        const std::filesystem::path dir = argv[4];
        const auto timing = race_scenario(argv[5]);
        auto app = race_graph((dir / "notes").string(), timing, mode == "race-resume", (dir / "fail").string())
                       .compile({.checkpointer = open_saver(db, std::chrono::seconds(timing.lease_s))});
        if (std::string(argv[6]) == "1") {
            bump_file((dir / "ready").string(), std::to_string(::getpid()));
            auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            while (!std::filesystem::exists(dir / "go")) {
                if (std::chrono::steady_clock::now() > until) return 3;
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
        }
        sg::run_result<race_state> r;
        if (mode == "race-chat") r = run(app.invoke(sg::update<race_state>{}, cfg));
        else if (mode == "race-continue") r = run(app.invoke(sg::continue_run, cfg));
        else r = run(app.invoke(sg::resume(7), cfg));
        std::cout << "done: " << r.values.log.size() << " entries\n";
        return r.interrupted() ? 2 : 0;
    }
    std::cerr << "unknown mode " << mode << "\n";
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return main_impl(argc, argv);
    } catch (const sg::graph_error& e) {
        std::cerr << "stategraph error " << sg::to_string(e.kind()) << ": " << e.what() << "\n";
        return 10 + static_cast<int>(e.kind());
    } catch (const std::exception& e) {
        std::cerr << "error: " << e.what() << "\n";
        return 2;
    }
}
