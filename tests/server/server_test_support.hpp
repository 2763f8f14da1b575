#pragma once
// What the server's tests share: the graph they serve ("chat": work, slow or failing on request,
// then ask, which interrupts on request, and its nested forms), a server on its own thread, and a
// blocking Beast client (get, post, call, SSE parsing).

#include <stategraph/server/run_store.hpp>
#include <stategraph/server/server.hpp>

#include <stategraph/checkpoint/forwarding_saver.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>
#include <stategraph/checkpoint/store/memory_store.hpp>
#include <stategraph/stategraph.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace sg = stategraph;
namespace srv = stategraph::server;
namespace net = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;


namespace server_test {


// -- the graph served: work (slow or failing on request) then ask (interrupts on request) ------
struct chat_state {
    std::string question;
    std::string answer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(chat_state, (), (question, answer, log))
inline auto reducers(sg::for_state<chat_state>) { return sg::reducers{sg::reduce<&chat_state::log>(sg::append)}; }

inline net::awaitable<sg::update<chat_state>> work(const chat_state& s, sg::context& ctx) {
    if (s.question == "slow") {
        net::steady_timer t(ctx.executor());
        t.expires_after(std::chrono::milliseconds(1000)); // long enough to see the thread busy under load
        co_await t.async_wait(net::use_awaitable);
    }
    if (s.question == "stall") { // until cancelled (a client leaving with on_disconnect cancel)
        net::steady_timer t(ctx.executor());
        t.expires_after(std::chrono::seconds(30));
        co_await t.async_wait(net::use_awaitable);
    }
    if (s.question == "fail") throw std::runtime_error("work failed on purpose");
    std::vector<std::string> entry{"work"};
    co_return sg::update<chat_state>{}.set<&chat_state::log>(std::move(entry));
}

inline sg::update<chat_state> ask(const chat_state& s, sg::context& ctx) {
    std::vector<std::string> entry{"ask"};
    auto u = sg::update<chat_state>{};
    if (s.question == "ask") {
        auto answer = ctx.interrupt_now<std::string>(std::string("approve?"));
        u.set<&chat_state::answer>(answer);
    }
    u.set<&chat_state::log>(std::move(entry));
    return u;
}

inline sg::compiled_graph<chat_state> build(std::shared_ptr<sg::checkpoint::saver> saver = nullptr) {
    sg::state_graph<chat_state> g("chat");
    g.add_node("work", work).add_node("ask", ask);
    g.add_edge(sg::START, "work").add_edge("work", "ask").add_edge("ask", sg::END);
    if (!saver) saver = std::make_shared<sg::checkpoint::memory_saver>();
    return g.compile({.checkpointer = std::move(saver)});
}

/// `ask`, which also takes its time (1 s) when the answer is "slow": a resumed run to cancel.
inline net::awaitable<sg::update<chat_state>> ask_then_wait(const chat_state& s, sg::context& ctx) {
    std::vector<std::string> entry{"ask"};
    auto u = sg::update<chat_state>{};
    if (s.question == "ask") {
        auto answer = ctx.interrupt_now<std::string>(std::string("approve?"));
        if (answer == "slow") {
            net::steady_timer t(ctx.executor());
            t.expires_after(std::chrono::milliseconds(1000));
            co_await t.async_wait(net::use_awaitable);
        }
        u.set<&chat_state::answer>(answer);
    }
    u.set<&chat_state::log>(std::move(entry));
    co_return u;
}

/// The same two nodes inside a subgraph: START -> inner (work -> ask) -> END. The subgraph's
/// checkpoints go to the parent's saver, in namespaces of their own.
inline sg::compiled_graph<chat_state> build_nested(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<chat_state> inner("inner");
    inner.add_node("work", work).add_node("ask", ask_then_wait);
    inner.add_edge(sg::START, "work").add_edge("work", "ask").add_edge("ask", sg::END);
    auto sub = inner.compile();
    sg::state_graph<chat_state> g("nested");
    g.add_node("inner", sub);
    g.add_edge(sg::START, "inner").add_edge("inner", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

/// The nested graph one level deeper: root -> "middle" (a subgraph) -> "inner" (a subgraph).
inline sg::compiled_graph<chat_state> build_deep(std::shared_ptr<sg::checkpoint::saver> saver) {
    sg::state_graph<chat_state> inner("inner");
    inner.add_node("work", work).add_node("ask", ask_then_wait);
    inner.add_edge(sg::START, "work").add_edge("work", "ask").add_edge("ask", sg::END);
    sg::state_graph<chat_state> middle("middle");
    middle.add_node("inner", inner.compile());
    middle.add_edge(sg::START, "inner").add_edge("inner", sg::END);
    sg::state_graph<chat_state> g("deep");
    g.add_node("middle", middle.compile());
    g.add_edge(sg::START, "middle").add_edge("middle", sg::END);
    return g.compile({.checkpointer = std::move(saver)});
}

/// A saver whose `rewind_thread` fails when told to (a storage outage in the middle of a
/// rollback): the rollback must then change nothing.
class failing_rewind_saver final : public sg::checkpoint::forwarding_saver {
public:
    using forwarding_saver::forwarding_saver;
    std::atomic<bool> fail{false};
    net::awaitable<std::size_t> rewind_thread(std::string thread_id, std::string checkpoint_id) override {
        if (fail) throw sg::checkpoint_error(sg::errc::storage_failure, "the storage went away mid-rollback", {thread_id});
        co_return co_await inner().rewind_thread(std::move(thread_id), std::move(checkpoint_id));
    }
};

// -- a server on its own thread ------------------------------------------------------------
struct running_server {
    net::io_context io;
    std::unique_ptr<srv::server> server;
    unsigned short port = 0;
    std::thread thread;

    /// `chat_saver`: the chat graph's checkpointer (null: a new one); pass the same one to a
    /// second server to restart on the same storage.
    explicit running_server(srv::server_options o, std::vector<srv::assistant_spec> more = {},
                            std::shared_ptr<sg::checkpoint::saver> chat_saver = nullptr) {
        o.port = 0;
        server = std::make_unique<srv::server>(io.get_executor(), std::move(o));
        server->add(srv::make_assistant("chat", build(std::move(chat_saver))));
        for (auto& a : more) server->add(std::move(a));
        port = server->listen();
        thread = std::thread([this] { io.run(); });
    }
    ~running_server() {
        net::post(io, [this] { server->stop(); io.stop(); });
        thread.join();
        server.reset();
    }
};

inline srv::server_options test_options() {
    srv::server_options o;
    o.body_limit = 64 << 10;
    o.header_limit = 8 << 10;
    o.read_timeout = std::chrono::milliseconds(500);
    return o;
}

struct reply {
    unsigned status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
    json::value json() const { return json::parse(body); }
    std::string detail() const { return std::string(json::parse(body).at("detail").as_string()); }
};

inline reply call(unsigned short port, http::verb verb, const std::string& target, const std::string& body = "",
           const std::map<std::string, std::string>& headers = {}) {
    net::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (!body.empty()) {
        req.set(http::field::content_type, "application/json");
        req.body() = body;
    }
    req.prepare_payload();
    http::write(sock, req);
    boost::beast::flat_buffer buf;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    http::read(sock, buf, parser);
    auto res = parser.release();
    reply r;
    r.status = res.result_int();
    for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
    r.body = res.body();
    return r;
}
inline reply get(unsigned short port, const std::string& target, const std::map<std::string, std::string>& h = {}) {
    return call(port, http::verb::get, target, "", h);
}
inline reply post(unsigned short port, const std::string& target, const json::value& body,
           const std::map<std::string, std::string>& h = {}) {
    return call(port, http::verb::post, target, json::serialize(body), h);
}

struct sse {
    std::string event;
    json::value data;
    std::string id;
};
inline std::vector<sse> parse_sse(const std::string& text) {
    std::vector<sse> out;
    sse cur;
    std::size_t i = 0;
    while (i < text.size()) {
        auto j = text.find('\n', i);
        if (j == std::string::npos) j = text.size();
        std::string line = text.substr(i, j - i);
        i = j + 1;
        if (line.empty()) {
            if (!cur.event.empty()) out.push_back(cur);
            cur = {};
        } else if (line.rfind("event: ", 0) == 0) cur.event = line.substr(7);
        else if (line.rfind("data: ", 0) == 0) cur.data = json::parse(line.substr(6));
        else if (line.rfind("id: ", 0) == 0) cur.id = line.substr(4);
    }
    return out;
}

inline std::string new_thread(unsigned short port, const json::object& body = {}) {
    auto r = post(port, "/threads", body);
    BOOST_TEST_REQUIRE(r.status == 200u);
    return std::string(r.json().at("thread_id").as_string());
}

/// A raw exchange: sends `bytes`, waits `pause`, returns what the server answered.
inline std::string raw(unsigned short port, const std::string& bytes) {
    net::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    net::write(sock, net::buffer(bytes));
    std::string out;
    boost::system::error_code ec;
    char buf[4096];
    for (;;) {
        auto n = sock.read_some(net::buffer(buf), ec);
        out.append(buf, n);
        if (ec) break;
    }
    return out;
}


/// Reads from `sock` until what came holds `marker` (a failed read fails the test), for at most
/// `limit` between reads; returns all it read.
inline std::string read_until(tcp::socket& sock, std::string_view marker, std::chrono::milliseconds limit) {
    std::string got;
    char buf[4096];
    const auto began = std::chrono::steady_clock::now();
    while (got.find(marker) == std::string::npos && std::chrono::steady_clock::now() - began < limit) {
        boost::system::error_code ec;
        auto n = sock.read_some(net::buffer(buf), ec);
        BOOST_TEST_REQUIRE(!ec);
        got.append(buf, n);
    }
    return got;
}

/// The status of run `rid` of thread `tid` once it is neither pending nor running, or as it is
/// after `limit`.
inline std::string run_status_settled(unsigned short port, const std::string& tid, const std::string& rid,
                                      std::chrono::milliseconds limit) {
    const auto began = std::chrono::steady_clock::now();
    std::string status;
    while (std::chrono::steady_clock::now() - began < limit) {
        status = std::string(get(port, "/threads/" + tid + "/runs/" + rid).json().at("status").as_string());
        if (status != "running" && status != "pending") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status;
}

} // namespace server_test
using namespace server_test;
