// metrics_server: the server the Prometheus scrape test (prometheus_test.sh) starts. It serves
// one graph ("counter": START -> tick -> END) with the API key given, so that GET /metrics is
// read with `Authorization: Bearer <key>` as Prometheus's scrape config sends it.
//
//   metrics_server API_KEY
//
// Binds 127.0.0.1 on a free port and prints "listening on 127.0.0.1:PORT". SIGTERM/SIGINT: exit 0.
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/server/server.hpp>
#include <stategraph/stategraph.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace srv = stategraph::server;
namespace net = boost::asio;

namespace {

struct counter_state {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(counter_state, (), (log))
auto reducers(sg::for_state<counter_state>) { return sg::reducers{sg::reduce<&counter_state::log>(sg::append)}; }

sg::update<counter_state> tick(const counter_state&, sg::context&) {
    std::vector<std::string> one{"tick"};
    return sg::update<counter_state>{}.set<&counter_state::log>(std::move(one));
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: metrics_server API_KEY\n";
        return 2;
    }
    srv::server_options so;
    so.host = "127.0.0.1";
    so.port = 0;
    so.api_keys = {argv[1]};
    net::io_context io;
    srv::server server(io.get_executor(), so);
    sg::state_graph<counter_state> g("counter");
    g.add_node("tick", tick);
    g.add_edge(sg::START, "tick").add_edge("tick", sg::END);
    server.add(srv::make_assistant("counter", g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()})));
    const auto port = server.listen();
    std::cout << "listening on 127.0.0.1:" << port << std::endl;
    net::signal_set signals(io, SIGTERM, SIGINT);
    signals.async_wait([&](const boost::system::error_code&, int) {
        server.stop();
        io.stop();
    });
    io.run();
    return 0;
}
