// A served graph with a subgraph, for the SDK's stream tests (subgraphs.mjs): the Global
// Supervisor has none. Same server as `global_supervisor serve`, another graph:
//
//   travel_desk:  START --> triage --> research --> reply --> END
//                                        |
//   research:                            +--> START --> search --> draft --> confirm --> END
//
// search writes a custom event, draft streams its plan as message chunks (three words), confirm
// asks a human (an interrupt inside the subgraph) whether to book it. The fields are shared, so
// what research writes comes back as its update.
//
// usage: subgraph_server [--port 0] [--verbosity full|events|result]
// Prints "serving on http://127.0.0.1:PORT"; SIGTERM or SIGINT drains and stops.

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/server/server.hpp>
#include <stategraph/stategraph.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/json/object.hpp>

#include <csignal>
#include <iostream>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace srv = stategraph::server;

namespace {

struct trip {
    std::string request;
    std::string plan;
    std::string booked;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(trip, (), (request, plan, booked, log))
auto reducers(sg::for_state<trip>) { return sg::reducers{sg::reduce<&trip::log>(sg::append)}; }

sg::update<trip> step(std::string name) {
    std::vector<std::string> entry{std::move(name)};
    return sg::update<trip>{}.set<&trip::log>(std::move(entry));
}

struct search_event {
    std::string searching;
};
BOOST_DESCRIBE_STRUCT(search_event, (), (searching))

sg::update<trip> search(const trip& t, sg::context& ctx) {
    ctx.write(search_event{t.request});
    return step("search");
}

sg::update<trip> draft(const trip& t, sg::context& ctx) {
    const std::vector<std::string> words{"Fly ", "to ", t.request.empty() ? std::string("Mallorca") : t.request};
    std::string plan;
    for (const auto& w : words) {
        plan += w;
        ctx.write_message(boost::json::object{{"type", "AIMessageChunk"}, {"content", w}, {"id", "plan-1"}});
    }
    return step("draft").set<&trip::plan>(std::move(plan));
}

sg::update<trip> confirm(const trip& t, sg::context& ctx) {
    auto answer = ctx.interrupt_now<std::string>("book '" + t.plan + "'?");
    return step("confirm").set<&trip::booked>(std::move(answer));
}

sg::compiled_graph<trip> research_graph() {
    sg::state_graph<trip> g("research");
    g.add_node("search", search).add_node("draft", draft).add_node("confirm", confirm);
    g.add_edge(sg::START, "search").add_edge("search", "draft").add_edge("draft", "confirm").add_edge("confirm", sg::END);
    return g.compile();
}

sg::compiled_graph<trip> travel_desk() {
    sg::state_graph<trip> g("travel_desk");
    g.add_node("triage", [](const trip&) { return step("triage"); });
    g.add_node("research", research_graph());
    g.add_node("reply", [](const trip&) { return step("reply"); });
    g.add_edge(sg::START, "triage").add_edge("triage", "research").add_edge("research", "reply").add_edge("reply", sg::END);
    return g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
}

} // namespace

int main(int argc, char** argv) {
    srv::server_options so;
    so.port = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--port") {
            so.port = static_cast<unsigned short>(std::stoi(value));
        } else if (flag == "--verbosity") {
            auto v = sg::parse_verbosity(value);
            if (!v) {
                std::cerr << "subgraph_server: --verbosity takes full, events or result (got '" << value << "')\n";
                return 2;
            }
            so.verbosity = *v;
        } else {
            std::cerr << "usage: subgraph_server [--port N] [--verbosity full|events|result]\n";
            return 2;
        }
    }
    boost::asio::io_context io;
    srv::server server(io.get_executor(), so);
    server.add(srv::make_assistant("travel_desk", travel_desk()));
    const auto port = server.listen();
    std::cout << "subgraph_server: serving on http://127.0.0.1:" << port << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code&, int) { server.drain([&io] { io.stop(); }); });
    io.run();
    return 0;
}
