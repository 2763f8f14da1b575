// A program that uses the installed (or add_subdirectory'd) stategraph: a two-node graph on the
// SQLite checkpointer that stops before "ship"; a second saver on the same file, as a second
// process would, continues the thread. Usage: consumer <database file>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <iostream>

namespace sg = stategraph;
using namespace sg::dsl;

struct order {
    int items = 0;
    std::vector<std::string> trail; // each node appends its name
};
BOOST_DESCRIBE_STRUCT(order, (), (items, trail))
auto reducers(sg::for_state<order>) { return sg::reducers{sg::reduce<&order::trail>(sg::append)}; }

sg::update<order> pack(const order& o) { return sg::update<order>{}.set<&order::items>(o.items * 2).set<&order::trail>({"pack"}); }
sg::update<order> ship(const order&) { return sg::update<order>{}.set<&order::trail>({"ship"}); }

template <class Input> sg::run_result<order> run(const std::string& db, Input in) {
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = db});
    auto app = graph<order>("orders", stage<order>("all", "pack"_n = pack, "ship"_n = ship | interrupt_before,
                                                   start >> "pack"_n >> "ship"_n >> end))
                   .compile({.checkpointer = saver});
    sg::run_config cfg{.thread_id = "order-1"};
    boost::asio::io_context io;
    auto f = boost::asio::co_spawn(io, app.invoke(std::move(in), cfg), boost::asio::use_future);
    io.run();
    return f.get();
}

int main(int argc, char** argv) {
    if (argc != 2) return std::cerr << "usage: consumer <database file>\n", 2;
    auto first = run(argv[1], sg::update<order>{}.set<&order::items>(21));
    auto second = run(argv[1], sg::continue_run);
    std::cout << "stopped before: " << (first.next.empty() ? "-" : first.next.front()) << "\n"
              << "items: " << second.values.items << ", trail:";
    for (const auto& t : second.values.trail) std::cout << ' ' << t;
    std::cout << '\n';
    bool ok = first.next == std::vector<std::string>{"ship"} && second.values.items == 42 &&
              second.values.trail == std::vector<std::string>{"pack", "ship"};
    std::cout << (ok ? "consumer: ok" : "consumer: WRONG RESULT") << std::endl;
    return ok ? 0 : 1;
}
