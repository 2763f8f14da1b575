// The floor of bench/compile/measure.sh: triage.cpp's own kind of code without stategraph, the
// same described state with its JSON conversion both ways, Asio coroutines waiting on timers and
// a co_spawn'd driver. What an -O2 compile of it costs, no graph library can save.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/describe.hpp>
#include <boost/json.hpp>
#include <iostream>
#include <optional>
#include <string>
#include <vector>
#include <chrono>
using namespace std::chrono_literals;
enum class category { unknown, billing, outage, account, spam };
BOOST_DESCRIBE_ENUM(category, unknown, billing, outage, account, spam)
enum class severity { low, high, critical };
BOOST_DESCRIBE_ENUM(severity, low, high, critical)
struct note { std::string author; std::string text; };
BOOST_DESCRIBE_STRUCT(note, (), (author, text))
struct ticket {
    std::string id; std::string text; category kind = category::unknown; severity level = severity::low;
    std::vector<std::string> trail; std::vector<note> notes; std::vector<std::string> tags;
    std::optional<std::string> assignee; int lookups = 0; double confidence = 0.0; std::string reply;
};
BOOST_DESCRIBE_STRUCT(ticket, (), (id, text, kind, level, trail, notes, tags, assignee, lookups, confidence, reply))
using awaitable_ticket = boost::asio::awaitable<ticket>;
awaitable_ticket step(ticket t, const char* name) {
    auto executor = co_await boost::asio::this_coro::executor;
    boost::asio::steady_timer timer(executor, 1ms);
    co_await timer.async_wait(boost::asio::use_awaitable);
    t.trail.push_back(name);
    co_return t;
}
boost::asio::awaitable<ticket> classify(ticket t) { auto r = co_await step(std::move(t), "classify"); r.kind = category::outage; co_return r; }
boost::asio::awaitable<ticket> status_page(ticket t) { auto r = co_await step(std::move(t), "status"); r.notes.push_back({"a", "b"}); co_return r; }
boost::asio::awaitable<ticket> escalate(ticket t) { auto r = co_await step(std::move(t), "escalate"); r.assignee = "alice"; co_return r; }
boost::asio::awaitable<ticket> draft(ticket t) { auto r = co_await step(std::move(t), "draft"); r.reply = "hi"; co_return r; }
boost::asio::awaitable<int> run_triage() {
    ticket t; t.id = "T-7";
    t = co_await classify(std::move(t));
    t = co_await status_page(std::move(t));
    t = co_await escalate(std::move(t));
    t = co_await draft(std::move(t));
    auto v = boost::json::value_from(t);
    std::cout << boost::json::serialize(v) << '\n';
    auto back = boost::json::value_to<ticket>(v);
    co_return back.trail.size() == 4 ? 0 : 1;
}
int main() {
    boost::asio::io_context io;
    int status = 1;
    boost::asio::co_spawn(io, run_triage(), [&](std::exception_ptr e, int rc) { if (!e) status = rc; });
    io.run();
    return status;
}
