// A support-ticket triage supervisor, written from README.md the way a user would in their own
// project: one file, one described state, eleven nodes in three DSL stages, the in-memory saver.
// This is triage.cpp with one deliberate type error (recent_deploys returns update<note>):
// bench/compile/measure.sh times how long `g++ -fsyntax-only` takes to report it.
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <exception>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;
using namespace std::chrono_literals;

// -- the state -------------------------------------------------------------------------------

enum class category { unknown, billing, outage, account, spam };
BOOST_DESCRIBE_ENUM(category, unknown, billing, outage, account, spam)

enum class severity { low, high, critical };
BOOST_DESCRIBE_ENUM(severity, low, high, critical)

struct note {
    std::string author;
    std::string text;
};
BOOST_DESCRIBE_STRUCT(note, (), (author, text))

struct ticket {
    std::string id;
    std::string text;
    category kind = category::unknown;
    severity level = severity::low;
    std::vector<std::string> trail;      // every node appends its name
    std::vector<note> notes;             // findings, appended by the research nodes
    std::vector<std::string> tags;
    std::optional<std::string> assignee; // set by a human when the ticket is escalated
    int lookups = 0;
    double confidence = 0.0;
    std::string reply;
};
BOOST_DESCRIBE_STRUCT(ticket, (), (id, text, kind, level, trail, notes, tags, assignee, lookups, confidence, reply))

auto reducers(sg::for_state<ticket>) {
    return sg::reducers{sg::reduce<&ticket::trail>(sg::append), sg::reduce<&ticket::notes>(sg::append),
                        sg::reduce<&ticket::tags>(sg::append)};
}

using ticket_update = sg::update<ticket>;

bool mentions(const ticket& t, const std::string& word) { return t.text.find(word) != std::string::npos; }

// -- the nodes -------------------------------------------------------------------------------

ticket_update normalize(const ticket& t) {
    std::string text = t.text;
    std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    text.erase(0, text.find_first_not_of(' '));
    return ticket_update{}.set<&ticket::text>(text).set<&ticket::trail>({"normalize"});
}

// A coroutine node, as if it asked a model: waits a little, then picks the category.
boost::asio::awaitable<ticket_update> classify(const ticket& t) {
    auto executor = co_await boost::asio::this_coro::executor;
    boost::asio::steady_timer timer(executor, 1ms);
    co_await timer.async_wait(boost::asio::use_awaitable);
    category kind = category::account;
    if (mentions(t, "invoice") || mentions(t, "refund")) kind = category::billing;
    else if (mentions(t, "down") || mentions(t, "outage") || mentions(t, "500")) kind = category::outage;
    else if (mentions(t, "lottery")) kind = category::spam;
    std::vector<std::string> trail{"classify"};
    co_return ticket_update{}.set<&ticket::kind>(kind).set<&ticket::confidence>(0.8).set<&ticket::trail>(std::move(trail));
}

ticket_update billing_lookup(const ticket& t) {
    std::vector<note> found{{"billing", "last invoice for " + t.id + " was paid"}};
    return ticket_update{}.set<&ticket::notes>(std::move(found)).set<&ticket::lookups>(t.lookups + 1).set<&ticket::trail>({"billing_lookup"});
}

ticket_update account_lookup(const ticket& t, sg::context& ctx) {
    std::vector<note> found{{ctx.node(), "account of " + t.id + " is active"}};
    return ticket_update{}.set<&ticket::notes>(std::move(found)).set<&ticket::lookups>(t.lookups + 1).set<&ticket::trail>({"account_lookup"});
}

ticket_update outage_check(const ticket&) {
    return ticket_update{}.set<&ticket::tags>({"incident"}).set<&ticket::trail>({"outage_check"});
}

// Flaky on its first attempt, like a status page behind a load balancer: the retry policy helps.
boost::asio::awaitable<ticket_update> status_page(const ticket&, sg::context& ctx) {
    if (ctx.attempt() == 1) throw std::runtime_error("status page: 503");
    auto executor = co_await boost::asio::this_coro::executor;
    boost::asio::steady_timer timer(executor, 1ms);
    co_await timer.async_wait(boost::asio::use_awaitable);
    std::vector<note> found{note{"status_page", "api degraded since 09:12"}};
    std::vector<std::string> trail{"status_page"};
    co_return ticket_update{}.set<&ticket::notes>(std::move(found)).set<&ticket::trail>(std::move(trail));
}

// THE DELIBERATE TYPE ERROR: this node returns an update of another type (note, not ticket).
sg::update<note> recent_deploys(const ticket&) {
    return sg::update<note>{}.set<&note::text>("gateway 4.2 rolled out at 09:05");
}

ticket_update assess(const ticket& t) {
    severity level = severity::low;
    if (t.kind == category::outage) level = t.notes.size() >= 2 ? severity::critical : severity::high;
    else if (mentions(t, "urgent")) level = severity::high;
    return ticket_update{}.set<&ticket::level>(level).set<&ticket::trail>({"assess"});
}

// Pauses for a human: who takes the ticket? The answer comes with the resume.
boost::asio::awaitable<ticket_update> escalate(const ticket& t, sg::context& ctx) {
    std::string question = "who takes " + t.id + " (" + std::to_string(t.notes.size()) + " findings)?";
    auto who = co_await ctx.interrupt<std::string>(question);
    std::vector<std::string> tags{"escalated"};
    std::vector<std::string> trail{"escalate"};
    co_return ticket_update{}.set<&ticket::assignee>(who).set<&ticket::tags>(std::move(tags)).set<&ticket::trail>(std::move(trail));
}

boost::asio::awaitable<ticket_update> draft(const ticket& t) {
    std::string reply = "Hello, about " + t.id + ": ";
    for (const auto& n : t.notes) reply += n.text + "; ";
    if (t.assignee) reply += *t.assignee + " is on it.";
    std::vector<std::string> trail{"draft"};
    co_return ticket_update{}.set<&ticket::reply>(reply).set<&ticket::trail>(std::move(trail));
}

ticket_update close_ticket(const ticket& t) {
    std::vector<std::string> tags{t.kind == category::spam ? "spam" : "answered"};
    return ticket_update{}.set<&ticket::tags>(std::move(tags)).set<&ticket::trail>({"close"});
}

// -- the graph -------------------------------------------------------------------------------

sg::retry_policy quick_retry() {
    sg::retry_policy p;
    p.max_attempts = 3;
    p.initial_interval = 5ms;
    p.jitter = false;
    return p;
}

// clang-format off
stage_decl<ticket> intake() {
    return stage<ticket>("intake",
        "normalize"_n = normalize,  "classify"_n = classify,
        start >> "normalize"_n >> "classify"_n,
        "classify"_n >> on(&ticket::kind, {{category::unknown, "account_lookup"_n},
                                           {category::billing, "billing_lookup"_n},
                                           {category::outage,  "outage_check"_n},
                                           {category::account, "account_lookup"_n},
                                           {category::spam,    "close"_n}}));
}
stage_decl<ticket> research() {
    return stage<ticket>("research",
        "billing_lookup"_n = billing_lookup,  "account_lookup"_n = account_lookup,
        "outage_check"_n = outage_check,  "status_page"_n = status_page | retry(quick_retry()),
        "recent_deploys"_n = recent_deploys,
        "outage_check"_n >> parallel("status_page"_n, "recent_deploys"_n),
        join("status_page"_n, "recent_deploys"_n) >> "assess"_n,
        "billing_lookup"_n >> "assess"_n,
        "account_lookup"_n >> "assess"_n);
}
stage_decl<ticket> resolve() {
    return stage<ticket>("resolve",
        "assess"_n = assess,  "escalate"_n = escalate,  "draft"_n = draft,  "close"_n = close_ticket,
        "assess"_n >> on(&ticket::level, {{severity::low,      "draft"_n},
                                          {severity::high,     "escalate"_n},
                                          {severity::critical, "escalate"_n}}),
        "escalate"_n >> "draft"_n >> "close"_n >> end);
}
// clang-format on

// -- running it ------------------------------------------------------------------------------

void print(const char* what, const sg::run_result<ticket>& r) {
    std::cout << what << ": " << (r.interrupted() ? "interrupted" : "done") << ", trail:";
    for (const auto& n : r.values.trail) std::cout << ' ' << n;
    std::cout << '\n';
}

boost::asio::awaitable<int> run_triage() {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::compile_options options;
    options.checkpointer = saver;
    auto app = graph<ticket>("triage", intake(), research(), resolve()).compile(options);

    sg::run_config cfg;
    cfg.thread_id = "ticket-7";
    auto input = ticket_update{}.set<&ticket::id>("T-7").set<&ticket::text>("  Checkout is DOWN, 500 everywhere");
    auto r = co_await app.invoke(std::move(input), cfg);
    print("first call", r);
    if (!r.interrupted() || r.interrupts.empty()) co_return 1;
    std::cout << "question: " << boost::json::serialize(r.interrupts.front().value) << '\n';

    auto state = co_await app.get_state(cfg.thread_id);
    std::cout << "waiting on:";
    for (const auto& n : state.next) std::cout << ' ' << n;
    std::cout << " (step " << state.step << ", " << state.values.notes.size() << " notes)\n";

    auto answer = sg::resume(std::string("alice"));
    r = co_await app.invoke(std::move(answer), cfg);
    print("resumed", r);
    std::cout << "reply: " << r.values.reply << '\n';

    sg::run_config other;
    other.thread_id = "ticket-8";
    auto billing = ticket_update{}.set<&ticket::id>("T-8").set<&ticket::text>("refund for invoice 42?");
    auto b = co_await app.invoke(std::move(billing), other);
    print("billing", b);
    const bool ok = r.values.assignee == "alice" && r.values.trail.back() == "close" && !b.interrupted();
    co_return ok ? 0 : 1;
}

int main() {
    boost::asio::io_context io;
    int status = 1;
    boost::asio::co_spawn(io, run_triage(), [&](std::exception_ptr e, int rc) {
        if (e) {
            try { std::rethrow_exception(e); } catch (const std::exception& ex) { std::cerr << "error: " << ex.what() << '\n'; }
            return;
        }
        status = rc;
    });
    io.run();
    return status;
}
