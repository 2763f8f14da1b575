// A program that uses the installed (or add_subdirectory'd) stategraph the way a newcomer writes
// it: a two-node graph on the SQLite checkpointer that stops before "ship"; a second saver on the
// same file, as a second process would, continues the thread. "pack" reserves stock once through
// `ctx.task` with the caller's warehouse passed as the runtime context, and "ship" resets the trail
// with an overwrite; the calls (durability async) are `co_await`ed with braced configs and a `[&]` lambda built in
// place, the spellings g++ 12 must survive (this program also runs under ASan in CI). "pack" also
// writes the order to the long-term memory Store (a SQLite store in the same file) with the
// namespace and the value braced inside the co_await, and "ship" reads it back from there.
// Usage: consumer <database file>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/checkpoint/store/sqlite_store.hpp>
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <iostream>
#include <memory>

namespace sg = stategraph;
using namespace sg::dsl;

struct order {
    int items = 0;
    int reserved = 0;
    std::vector<std::string> trail; // each node appends its name
};
BOOST_DESCRIBE_STRUCT(order, (), (items, reserved, trail))
auto reducers(sg::for_state<order>) { return sg::reducers{sg::reduce<&order::trail>(sg::append)}; }

/// The caller's dependencies: never checkpointed, read by the nodes.
struct warehouse {
    int* reservations; // how often stock was really reserved
    int reserve(int n) const { return ++*reservations, n; }
};

boost::asio::awaitable<sg::update<order>> pack(const order& o, sg::context& ctx) {
    const auto& w = ctx.runtime<warehouse>();
    int reserved = co_await ctx.task("reserve", [&] { return w.reserve(o.items); }); // at most once
    co_await ctx.store().put({"orders", ctx.thread_id()}, "packed", {{"items", o.items * 2}, {"by", "pack"}});
    co_return sg::update<order>{}.set<&order::items>(o.items * 2).set<&order::reserved>(reserved).set<&order::trail>({"pack"});
}
boost::asio::awaitable<sg::update<order>> ship(const order& o, sg::context& ctx) {
    auto packed = co_await ctx.store().get({"orders", ctx.thread_id()}, "packed");
    const auto from_store = packed ? packed->value.at("items").to_number<int>() : -1;
    co_return sg::update<order>{}.overwrite<&order::trail>(
        {"shipped " + std::to_string(o.items), "store says " + std::to_string(from_store)});
}

boost::asio::awaitable<sg::run_result<order>> call(sg::compiled_graph<order> app, sg::compiled_graph<order>::input in,
                                                   const warehouse& w, std::shared_ptr<int> tasks) {
    // Named first: a lambda capturing by value built inside co_await does not compile under g++ 12.
    auto count_starts = [tasks](const sg::stream_event& e) { *tasks += e.data.as_object().contains("input"); };
    co_return co_await app.stream(std::move(in),
                                  {.thread_id = "order-1", .runtime = sg::runtime_of(w), .durability = sg::durability::async},
                                  sg::stream_mode::tasks, count_starts);
}

template <class Input>
sg::run_result<order> run(const std::string& db, Input in, const warehouse& w, std::shared_ptr<int> tasks) {
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = db});
    auto memory = std::make_shared<sg::store::sqlite_store>(sg::store::sqlite_store_options{.path = db});
    auto app = graph<order>("orders", stage<order>("all", "pack"_n = pack, "ship"_n = ship | interrupt_before,
                                                   start >> "pack"_n >> "ship"_n >> end))
                   .compile({.checkpointer = saver, .store = memory});
    boost::asio::io_context io;
    auto f = boost::asio::co_spawn(io, call(app, std::move(in), w, std::move(tasks)), boost::asio::use_future);
    io.run();
    return f.get();
}

int main(int argc, char** argv) {
    if (argc != 2) return std::cerr << "usage: consumer <database file>\n", 2;
    int reservations = 0;
    const warehouse w{&reservations};
    auto tasks = std::make_shared<int>(0);
    auto first = run(argv[1], sg::update<order>{}.set<&order::items>(21), w, tasks);
    auto second = run(argv[1], sg::continue_run, w, tasks);
    std::cout << "stopped before: " << (first.next.empty() ? "-" : first.next.front()) << "\n"
              << "items: " << second.values.items << ", reserved: " << second.values.reserved << " (" << reservations
              << " reservation), tasks started: " << *tasks << ", trail:";
    for (const auto& t : second.values.trail) std::cout << ' ' << t;
    std::cout << '\n';
    bool ok = first.next == std::vector<std::string>{"ship"} && second.values.items == 42 && second.values.reserved == 21 &&
              reservations == 1 && *tasks == 2 && tasks.use_count() == 1 &&
              second.values.trail == std::vector<std::string>{"shipped 42", "store says 42"};
    std::cout << (ok ? "consumer: ok" : "consumer: WRONG RESULT") << std::endl;
    return ok ? 0 : 1;
}
