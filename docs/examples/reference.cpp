// The short code of the guides that is not a whole program (docs/nodes.md, human-in-the-loop.md,
// store.md, persistence-and-resume.md): each region is compiled here, inside just enough of a
// program to make it compile (CTest builds this file; nothing here runs).
#include <stategraph/stategraph.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>

#include <boost/json/object.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;

struct turn {
    std::string question, answer, to, text, receipt, status, user_id, user_message;
};
BOOST_DESCRIBE_STRUCT(turn, (), (question, answer, to, text, receipt, status, user_id, user_message))

struct smtp_client {
    std::string send(const std::string& to, const std::string& text) { return "sent to " + to + ": " + text; }
};
struct my_deps {
    smtp_client* mailer = nullptr;
};

// [snippet hitl_ask]
boost::asio::awaitable<sg::update<turn>> ask(const turn& s, sg::context& ctx) {
    auto answer = co_await ctx.interrupt<std::string>(s.question);   // the run stops here
    co_return sg::update<turn>{}.set<&turn::answer>(answer);
}
// [end]

boost::asio::awaitable<void> hitl(sg::compiled_graph<turn> app) {
    // [snippet hitl_calls]
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = "chats.db"});
    // process 1:
    auto r = co_await app.invoke(sg::update<turn>{}.set<&turn::question>("Which Thomas?"), {.thread_id = "chat-42"});
    // r.status == run_status::interrupted, r.interrupts[0].value == "Which Thomas?"
    // process 2, days later:
    r = co_await app.invoke(sg::resume("Thomas Berger"), {.thread_id = "chat-42"});
    // `ask` runs again from its start; interrupt() now returns "Thomas Berger"
    // [end]
    // [snippet hitl_command]
    // LangGraph's Command(resume=..., update=..., goto=...): answer and correct the state at once,
    auto answer = sg::command<turn>{}.with(sg::resume("Thomas Berger")).with(sg::update<turn>{}.set<&turn::status>("checked"));
    r = co_await app.invoke(std::move(answer), {.thread_id = "chat-42"});
    // or, on a finished thread, set a field and run one node again (then its edges).
    auto again = sg::command<turn>{}.with(sg::update<turn>{}.set<&turn::question>("Which Anna?")).go_to("ask");
    r = co_await app.invoke(std::move(again), {.thread_id = "chat-42"});
    // [end]
}

// [snippet node_context]
boost::asio::awaitable<sg::update<turn>> send_mail(const turn& s, sg::context& ctx) {
    const auto& deps = ctx.runtime<my_deps>();               // the caller's dependencies, never saved
    auto send = [&] { return deps.mailer->send(s.to, s.text); };
    std::string receipt = co_await ctx.task("send-email", send); // at most once per task
    bool more = co_await ctx.interrupt<bool>(std::string("sent " + receipt + ", anything else?"));
    co_return sg::update<turn>{}.set<&turn::receipt>(receipt).set<&turn::status>(more ? "more" : "done");
}
// [end]

boost::asio::awaitable<void> call_with_runtime(sg::compiled_graph<turn> app, sg::update<turn> input, smtp_client& smtp) {
    // [snippet node_runtime_call]
    my_deps deps{.mailer = &smtp};
    co_await app.invoke(input, {.thread_id = "chat-42", .runtime = sg::runtime_of(deps)});
    // [end]
}

sg::update<turn> search(const turn&) { return {}; }
sg::update<turn> charge(const turn&) { return {}; }

boost::asio::awaitable<void> node_options(std::shared_ptr<sg::checkpoint::saver> saver) {
    // [snippet node_options]
    sg::state_graph<turn> g("support");
    g.add_node("search", search, {.cache = sg::cache_policy{.ttl = std::chrono::minutes(10)}});
    g.add_node("charge", charge, {.retry = sg::retry_policy{.max_attempts = 3}, .ends = {"refund"},
                                  .on_error = {"compensate", [](const turn&, const sg::node_failure& f) {
                                      auto why = sg::update<turn>{}.set<&turn::status>("charge failed: " + f.message);
                                      return sg::command<turn>{}.with(std::move(why)).go_to("refund");
                                  }}});
    g.set_node_defaults({.retry = sg::retry_policy{.max_attempts = 2}, .timeout = std::chrono::seconds(30)});
    auto app = g.compile({.checkpointer = saver});   // the cache lives in the checkpointer
    co_await app.clear_cache();                     // or app.clear_cache(names), a vector of node names
    // [end]
}

boost::asio::awaitable<void> durability(sg::compiled_graph<turn> app, sg::update<turn> input) {
    // [snippet durability_exit]
    co_await app.invoke(input, {.thread_id = "chat-42", .durability = sg::durability::exit});
    // [end]
}

boost::asio::awaitable<void> maintenance(sg::checkpoint::saver& saver, std::string checkpoint_id) {
    // [snippet thread_maintenance]
    co_await saver.delete_thread("chat-42");
    co_await saver.copy_thread("chat-42", "chat-42-experiment");     // LangGraph's copy_thread
    auto gone = co_await saver.rewind_thread("chat-42", checkpoint_id); // roll back to that checkpoint
    boost::json::object filter{{"user", "alice"}};                    // name the filter first
    auto threads = co_await saver.list_threads({.metadata = filter, .limit = 20, .offset = 40});
    auto swept = co_await saver.sweep({.older_than = std::chrono::hours(24 * 30),
                                       .action = stategraph::checkpoint::ttl_action::keep_latest});
    // [end]
    (void)gone, (void)threads, (void)swept;
}

// [snippet store_node]
#include <stategraph/checkpoint/store/sqlite_store.hpp>

namespace store = stategraph::store;

boost::asio::awaitable<sg::update<turn>> remember(const turn& s, sg::context& ctx) {
    co_await ctx.store().put({"users", s.user_id, "facts"}, "fact-1",
                             {{"text", s.user_message}, {"kind", "preference"}},
                             {.ttl = std::chrono::minutes(60 * 24 * 30)});
    const boost::json::object preferences{{"kind", "preference"}};   // a filter is a view: name it
    auto found = co_await ctx.store().search({"users", s.user_id}, {.filter = preferences, .query = s.user_message, .limit = 5});
    // found[i].value, found[i].score (best first), found[i].key, ...
    co_return sg::update<turn>{};
}
// [end]

void with_store(sg::state_graph<turn>& graph, std::shared_ptr<sg::checkpoint::saver> saver) {
    // [snippet store_compile]
    auto memory = std::make_shared<store::sqlite_store>(store::sqlite_store_options{.path = "memory.db"});
    auto app = graph.compile({.checkpointer = saver, .store = memory});   // or run_config::store per call
    // [end]
}
