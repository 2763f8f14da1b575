// A graph served over the LangGraph Agent Server API, stopped cleanly by SIGTERM
// (docs/server.md). `serve PORT` serves until SIGTERM or Ctrl-C; `serve --self-test` listens
// on a free port, sends itself SIGTERM and must exit 0 (CTest docs_example_serve).
// `serve PORT --wakeups redis://HOST:PORT/DB` keeps runs in runs.db, shared with every instance
// started so, which wake each other through Redis pub/sub.
//
//   START -> echo -> END     (state: text, and a log each run appends to)
// [snippet serve_includes]
#include <stategraph/server/server.hpp>       // CMake: target_link_libraries(app PRIVATE stategraph::server)
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
// [end]
#include <stategraph/server/redis_notifier.hpp>
#include <stategraph/server/run_store.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;

struct note {
    std::string text;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(note, (), (text, log))
auto reducers(sg::for_state<note>) { return sg::reducers{sg::reduce<&note::log>(sg::append)}; }

sg::update<note> echo(const note& n) { return sg::update<note>{}.set<&note::log>({"echo: " + n.text}); }

// [snippet redis_wakeups]
stategraph::server::server_options wakeups_through_redis(const std::string& url, unsigned short port) {
    namespace srv = stategraph::server;
    srv::run_store_options ro;
    ro.notifier = srv::open_redis_notifier({.url = url}); // notifier_error when Redis does not answer
    srv::server_options so;
    so.port = port;
    so.runs = srv::open_sqlite_run_store("runs.db", ro); // every instance on this file
    so.poll_interval = std::chrono::seconds(5);          // a safety net: wake-ups carry the news
    return so;
}
// [end]

int main(int argc, char** argv) {
    const bool self_test = argc > 1 && std::string_view(argv[1]) == "--self-test";
    const auto port = static_cast<unsigned short>(self_test || argc < 2 ? 0 : std::atoi(argv[1]));
    auto app = graph<note>("echo", "echo"_n = echo, start >> "echo"_n >> end)
                   .compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    if (argc > 3 && std::string_view(argv[2]) == "--wakeups") { // until killed
        boost::asio::io_context io;
        stategraph::server::server srv(io.get_executor(), wakeups_through_redis(argv[3], port));
        srv.add(stategraph::server::make_assistant("echo", app));
        std::cout << "listening on 127.0.0.1:" << srv.listen() << std::endl;
        io.run();
        return 0;
    }
// [snippet serve]
    boost::asio::io_context io;
    stategraph::server::server srv(io.get_executor(), {.port = port});
    srv.add(stategraph::server::make_assistant("echo", app)); // the graph needs a checkpointer
    // SIGTERM (what `docker stop`, systemd and Kubernetes send) drains: no new runs, every run
    // stops at its next superstep boundary with its checkpoint written, then io.run() returns
    // and the process exits 0 (without this, SIGTERM kills it: exit status 143).
    boost::asio::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](boost::system::error_code ec, int) {
        if (!ec) srv.drain([&] { io.stop(); });
    });
    std::cout << "listening on 127.0.0.1:" << srv.listen() << std::endl;
// [end]
    if (self_test) std::raise(SIGTERM); // delivered to the signal_set above, as `kill` would
    io.run();
    std::cout << "drained" << std::endl;
}
