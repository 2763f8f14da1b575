// interrupt_resume: a run pauses for a human in one process and is resumed in another.
//
//   START --> draft --> ask --> reply --> END
//                        |
//                        ctx.interrupt(question): the run stops, its checkpoint is in the SQLite
//                        file, the process exits. A later process answers by thread id; `ask`
//                        runs again from its start and interrupt() returns the answer.
//
//   interrupt_resume ask    DB THREAD          # prints the question, exits 0 when paused
//   interrupt_resume answer DB THREAD VALUE    # prints the reply,    exits 0 when done
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json/value_to.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;

struct booking {
    std::string request, question, day, reply;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(booking, (), (request, question, day, reply, trail))
auto reducers(sg::for_state<booking>) { return sg::reducers{sg::reduce<&booking::trail>(sg::append)}; }

sg::update<booking> draft(const booking& b) {
    return sg::update<booking>{}
        .set<&booking::question>("Which day for " + b.request + "?")
        .set<&booking::trail>({"draft"});
}
// [snippet hitl_node]
boost::asio::awaitable<sg::update<booking>> ask(const booking& b, sg::context& ctx) {
    auto day = co_await ctx.interrupt<std::string>(b.question); // stops here until answered
    std::vector<std::string> trail{"ask"}; // named: g++ 12 mishandles braced temporaries in coroutines
    co_return sg::update<booking>{}.set<&booking::day>(day).set<&booking::trail>(std::move(trail));
}
// [end]
sg::update<booking> reply(const booking& b) {
    return sg::update<booking>{}
        .set<&booking::reply>("Booked " + b.request + " on " + b.day + ".")
        .set<&booking::trail>({"reply"});
}

// [snippet hitl_processes]
// Process 1: start the thread; it stops at the interrupt.
boost::asio::awaitable<bool> ask_mode(sg::compiled_graph<booking> app, sg::run_config cfg) {
    auto input = sg::update<booking>{}.set<&booking::request>("a table for two");
    auto r = co_await app.invoke(std::move(input), cfg);
    if (!r.interrupted()) co_return false;
    auto question = boost::json::value_to<std::string>(r.interrupts.at(0).value);
    std::cout << "thread " << cfg.thread_id << " paused in '" << r.interrupts[0].node << "': " << question << '\n';
    co_return true;
}

// Process 2: read the pending question back from the file, then answer it.
boost::asio::awaitable<bool> answer_mode(sg::compiled_graph<booking> app, sg::run_config cfg, std::string value) {
    auto saved = co_await app.get_state(cfg.thread_id);
    for (const auto& task : saved.tasks)
        for (const auto& pending : task.interrupts)
            std::cout << "pending in '" << task.name << "': " << boost::json::value_to<std::string>(pending.value)
                      << "\nanswer:  " << value << '\n';
    auto answer = sg::resume(value);
    auto r = co_await app.invoke(std::move(answer), cfg);
    std::cout << "reply:   " << r.values.reply << "\ntrail:  ";
    for (const auto& node : r.values.trail) std::cout << ' ' << node;
    std::cout << '\n';
    const std::vector<std::string> expected{"draft", "ask", "reply"};
    co_return !r.interrupted() && r.values.day == value && r.values.trail == expected;
}
// [end]

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const bool ask_args = args.size() == 3 && args[0] == "ask";
    const bool answer_args = args.size() == 4 && args[0] == "answer";
    if (!ask_args && !answer_args) {
        std::cerr << "usage: interrupt_resume ask DB THREAD | answer DB THREAD VALUE\n";
        return 2;
    }
    sg::checkpoint::sqlite_options db;
    db.path = args[1];
    // clang-format off
    auto app = graph<booking>("booking",
        "draft"_n = draft,  "ask"_n = ask,  "reply"_n = reply,
        start >> "draft"_n >> "ask"_n >> "reply"_n >> end)
        .compile({.checkpointer = std::make_shared<sg::checkpoint::sqlite_saver>(db)});
    // clang-format on
    sg::run_config cfg;
    cfg.thread_id = args[2];

    boost::asio::io_context io;
    auto ok = ask_args ? boost::asio::co_spawn(io, ask_mode(app, cfg), boost::asio::use_future)
                       : boost::asio::co_spawn(io, answer_mode(app, cfg, args[3]), boost::asio::use_future);
    io.run();
    try {
        return ok.get() ? 0 : 1;
    } catch (const sg::graph_error& e) {
        std::cerr << "error: " << e.what() << '\n';
        return 1;
    }
}
