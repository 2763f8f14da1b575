// retry_timeout: a retry policy with backoff and a time limit per attempt.
//
//   START --> flaky --> slow --> END
//
//   both nodes: retry(3 attempts, waits of 10 then 20 ms between them, 50 ms per attempt)
//   flaky  throws on attempts 1 and 2, succeeds on attempt 3
//   slow   works for `work_ms`: 5 ms fits the limit (run 1); 200 ms overruns it on every attempt
//          (run 2), so the run fails with graph_error, errc::node_timeout
//
// The time limit cancels a coroutine node (here its timer wait); a plain function node cannot be
// interrupted, so `timeout` applies to coroutine nodes only.
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <iostream>
#include <stdexcept>

namespace sg = stategraph;
using namespace sg::dsl;
using namespace std::chrono_literals;

struct job {
    int work_ms = 0;
    int flaky_attempts = 0; // the attempt that succeeded
    int slow_attempts = 0;
};
BOOST_DESCRIBE_STRUCT(job, (), (work_ms, flaky_attempts, slow_attempts))

sg::update<job> flaky(const job&, sg::context& ctx) {
    std::cout << "  flaky: attempt " << ctx.attempt() << '\n';
    if (ctx.attempt() < 3) throw std::runtime_error("service unavailable");
    return sg::update<job>{}.set<&job::flaky_attempts>(ctx.attempt());
}
boost::asio::awaitable<sg::update<job>> slow(const job& j, sg::context& ctx) {
    std::cout << "  slow:  attempt " << ctx.attempt() << ", " << j.work_ms << " ms of work\n";
    boost::asio::steady_timer work(ctx.executor(), std::chrono::milliseconds(j.work_ms));
    co_await work.async_wait(boost::asio::use_awaitable); // cancelled when the time limit passes
    co_return sg::update<job>{}.set<&job::slow_attempts>(ctx.attempt());
}

boost::asio::awaitable<bool> run_twice(sg::compiled_graph<job> app) {
    sg::run_config cfg; // named, also when empty: see "Running a graph from `main()`" in docs/getting-started.md (g++ 12)
    std::cout << "run 1 (5 ms of work):\n";
    auto quick = sg::update<job>{}.set<&job::work_ms>(5);
    auto r = co_await app.invoke(std::move(quick), cfg);
    std::cout << "  done: flaky on attempt " << r.values.flaky_attempts << ", slow on attempt "
              << r.values.slow_attempts << '\n';
    if (r.values.flaky_attempts != 3 || r.values.slow_attempts != 1) co_return false;

    std::cout << "run 2 (200 ms of work):\n";
    auto too_slow = sg::update<job>{}.set<&job::work_ms>(200);
    try {
        co_await app.invoke(std::move(too_slow), cfg);
    } catch (const sg::graph_error& e) {
        std::cout << "  failed: " << e.what() << '\n';
        co_return e.kind() == sg::errc::node_timeout;
    }
    co_return false;
}

int main() {
    const sg::retry_policy policy{
        .max_attempts = 3, .initial_interval = 10ms, .backoff_factor = 2.0, .jitter = false, .timeout = 50ms};
    // clang-format off
    auto app = graph<job>("retry_timeout",
        "flaky"_n = flaky | retry(policy),  "slow"_n = slow | retry(policy),
        start >> "flaky"_n >> "slow"_n >> end).compile();
    // clang-format on

    boost::asio::io_context io;
    auto ok = boost::asio::co_spawn(io, run_twice(app), boost::asio::use_future);
    io.run();
    return ok.get() ? 0 : 1;
}
