// A newcomer serves a graph over the LangGraph HTTP API: the package's stategraph::server, with
// the spellings of its README (`{.port = 0}` braced in the constructor, `make_assistant`), on the
// SQLite checkpointer and Store. A plain socket then drives it as the SDK would: create a thread,
// run it to the breakpoint before "ship", read the thread's state, continue it by thread id.
// Usage: consumer_server <database file>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/server/server.hpp>
#include <stategraph/checkpoint/store/sqlite_store.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>

#include <iostream>
#include <unistd.h>
#include <thread>

namespace sg = stategraph;
namespace json = boost::json;
using namespace sg::dsl;
using boost::asio::ip::tcp;

struct parcel {
    int weight = 0;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(parcel, (), (weight, log))
auto reducers(sg::for_state<parcel>) { return sg::reducers{sg::reduce<&parcel::log>(sg::append)}; }

boost::asio::awaitable<sg::update<parcel>> weigh(const parcel& p, sg::context& ctx) {
    co_await ctx.store().put({"parcels", ctx.thread_id()}, "weighed", {{"kg", p.weight}});
    co_return sg::update<parcel>{}.set<&parcel::log>({"weighed " + std::to_string(p.weight)});
}
boost::asio::awaitable<sg::update<parcel>> ship(const parcel&, sg::context& ctx) {
    auto weighed = co_await ctx.store().get({"parcels", ctx.thread_id()}, "weighed");
    co_return sg::update<parcel>{}.set<&parcel::log>({"shipped " + (weighed ? json::serialize(weighed->value) : "?")});
}

/// One HTTP/1.1 exchange on a new connection (closed by the server after the answer).
std::pair<int, json::value> call(unsigned short port, const std::string& method, const std::string& target,
                                 const std::string& body) {
    boost::asio::io_context io;
    tcp::socket s(io);
    s.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port));
    const std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                                "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                                "\r\n\r\n" + body;
    boost::asio::write(s, boost::asio::buffer(request));
    std::string answer;
    boost::system::error_code ec;
    boost::asio::read(s, boost::asio::dynamic_buffer(answer), ec); // to the end of the stream
    const auto head_end = answer.find("\r\n\r\n");
    if (answer.size() < 12 || head_end == std::string::npos) throw std::runtime_error(method + " " + target + ": no answer");
    std::string payload = answer.substr(head_end + 4);
    if (answer.substr(0, head_end).find("chunked") != std::string::npos) { // de-chunk
        std::string plain;
        for (std::size_t at = 0;;) {
            const auto eol = payload.find("\r\n", at);
            const auto n = std::stoul(payload.substr(at, eol - at), nullptr, 16);
            if (n == 0) break;
            plain += payload.substr(eol + 2, n);
            at = eol + 2 + n + 2;
        }
        payload = plain;
    }
    return {std::stoi(answer.substr(9, 3)), payload.empty() ? json::value() : json::parse(payload)};
}

int main(int argc, char** argv) {
    if (argc != 2) return std::cerr << "usage: consumer_server <database file>\n", 2;
    alarm(90); // a server that never answers kills this program (SIGALRM) instead of hanging the test
    auto saver = std::make_shared<sg::checkpoint::sqlite_saver>(sg::checkpoint::sqlite_options{.path = argv[1]});
    auto memory = std::make_shared<sg::store::sqlite_store>(sg::store::sqlite_store_options{.path = argv[1]});
    auto app = graph<parcel>("parcels", stage<parcel>("all", "weigh"_n = weigh, "ship"_n = ship | interrupt_before,
                                                      start >> "weigh"_n >> "ship"_n >> end))
                   .compile({.checkpointer = saver, .store = memory});

    boost::asio::io_context io;
    sg::server::server srv(io.get_executor(), {.port = 0, .store = memory});
    srv.add(sg::server::make_assistant("parcels", app));
    const unsigned short port = srv.listen();
    std::thread serving([&] { io.run(); });

    bool ok = false;
    try {
        auto [created, thread] = call(port, "POST", "/threads", R"({"metadata": {"owner": "consumer"}})");
        const std::string id(thread.at("thread_id").as_string());
        auto [first, stopped] = call(port, "POST", "/threads/" + id + "/runs/wait",
                                     R"({"assistant_id": "parcels", "input": {"weight": 3}})");
        auto [read, state] = call(port, "GET", "/threads/" + id + "/state", "");
        auto [second, done] = call(port, "POST", "/threads/" + id + "/runs/wait", R"({"assistant_id": "parcels"})");
        auto [got, item] = call(port, "GET", "/store/items?namespace=parcels." + id + "&key=weighed", "");
        std::cout << "statuses: " << created << ' ' << first << ' ' << read << ' ' << second << ' ' << got << "\n"
                  << "stopped: " << json::serialize(stopped) << "\nnext: " << json::serialize(state.at("next"))
                  << "\ndone: " << json::serialize(done) << "\nstore item: " << json::serialize(item) << '\n';
        ok = created == 200 && first == 200 && read == 200 && second == 200 && got == 200 &&
             stopped.at("log") == json::array{"weighed 3"} && state.at("next") == json::array{"ship"} &&
             done.at("log") == json::array{"weighed 3", R"(shipped {"kg":3})"} && item.at("value").at("kg") == 3;
    } catch (const std::exception& e) {
        std::cout << "consumer_server: " << e.what() << '\n';
    }
    boost::asio::post(io, [&] { srv.stop(); io.stop(); });
    serving.join();
    std::cout << (ok ? "consumer_server: ok" : "consumer_server: WRONG RESULT") << std::endl;
    return ok ? 0 : 1;
}
