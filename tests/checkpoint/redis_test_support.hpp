#pragma once
// What the Redis saver's tests and the tiered saver's share: where the server is
// (STATEGRAPH_TEST_REDIS), a connection of the tests' own (another client, as another process
// would be), damage to stored data, and the small interrupting graph they run.

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/checkpoint/redis_saver.hpp>
#include <stategraph/stategraph.hpp>

#include "redis_connection.hpp" // checkpoint/src

#include <boost/asio/this_coro.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

namespace stategraph::checkpoint::redis_testing {

namespace asio = boost::asio;

/// The server the tests run against: `STATEGRAPH_TEST_REDIS` (scripts/test starts one and sets it).
inline std::string redis_url() {
    const char* url = std::getenv("STATEGRAPH_TEST_REDIS");
    return url ? url : "";
}

inline asio::awaitable<std::vector<redis::reply>> raw_round(std::vector<redis::command> cmds) {
    auto ex = co_await asio::this_coro::executor;
    redis::connection c(ex, std::chrono::seconds(5));
    const auto where = redis::parse_url(redis_url());
    co_await c.connect(where);
    co_return co_await c.run(cmds);
}

/// Runs `cmds` on a connection of the test's own (another client, as another process would be).
inline std::vector<redis::reply> raw(std::vector<redis::command> cmds) {
    auto op = raw_round(std::move(cmds));
    return testing::run(std::move(op));
}

inline redis::reply raw1(redis::command cmd) {
    std::vector<redis::command> cmds{std::move(cmd)};
    return raw(std::move(cmds)).at(0);
}

/// Deletes every key under `prefix` (what FLUSHDB does to a saver's keys, without touching the
/// other tests' prefixes).
inline void drop_prefix(const std::string& prefix) {
    raw1({"EVAL", "for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end return 0", "0",
          prefix + ":*"});
}

/// A key prefix no other saver (or test run) uses.
inline std::string fresh_prefix() {
    static std::atomic<int> n{0};
    return "sgtest:" + std::to_string(::getpid()) + ":" + std::to_string(n++) + ":" +
           std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

inline redis_options options_with(const std::string& prefix) {
    redis_options o;
    o.url = redis_url();
    o.key_prefix = prefix;
    o.lease_ttl = std::chrono::milliseconds(600);
    return o;
}

/// A saver on a fresh prefix; its keys go with it.
inline std::shared_ptr<redis_saver> make_saver(redis_options o) {
    auto* s = new redis_saver(std::move(o));
    return std::shared_ptr<redis_saver>(s, [](redis_saver* p) {
        const auto prefix = p->options().key_prefix;
        delete p;
        try {
            drop_prefix(prefix);
        } catch (...) {
        }
    });
}

/// Damages what a Redis saver with key prefix `prefix` stored, through a connection of the
/// test's own (`capabilities::corrupt`).
inline bool damage_stored(const std::string& prefix, const testing::damage& where) {
    using testing::part;
    const auto key = [&](const char* what) { return prefix + ":{" + where.thread_id + "}:" + what; };
    std::string hash, field;
    switch (where.what) {
    case part::value:
        hash = key("vals");
        field = redis::join_fields({where.ns, where.channel, where.checkpoint_id});
        break;
    case part::record:
        hash = key("cp");
        field = redis::join_fields({where.ns, where.checkpoint_id});
        break;
    case part::write: {
        hash = key("writes");
        const auto fields = raw1({"HKEYS", hash});
        const auto want = redis::join_fields({where.ns, where.checkpoint_id, ""});
        for (const auto& f : fields.elements)
            if (f.str.rfind(want, 0) == 0 && f.str.size() > where.channel.size() &&
                f.str.compare(f.str.size() - where.channel.size() - 1, std::string::npos, "\0" + where.channel) == 0)
                field = f.str;
        if (field.empty()) return false;
        break;
    }
    }
    auto stored = raw1({"HGET", hash, field});
    if (stored.is_nil()) return false;
    std::string bytes = stored.str;
    if (where.flip) bytes[bytes.size() / 2] ^= 0x01;
    else bytes = "\x01garbage\xff";
    raw1({"HSET", hash, field, bytes});
    return true;
}

// A graph that interrupts: interrupted in one "process", resumed in another.
struct chat {
    std::string question;
    std::string answer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(chat, (), (question, answer, log))
inline auto reducers(stategraph::for_state<chat>) {
    return stategraph::reducers{stategraph::reduce<&chat::log>(stategraph::append)};
}

inline asio::awaitable<stategraph::update<chat>> ask(const chat& s, stategraph::context& ctx) {
    auto question = "which " + s.question + "?";
    auto answer = co_await ctx.interrupt<std::string>(question);
    std::vector<std::string> entry{"ask:" + answer};
    co_return stategraph::update<chat>{}.set<&chat::answer>(answer).set<&chat::log>(std::move(entry));
}

inline stategraph::update<chat> reply(const chat& s) {
    std::vector<std::string> entry{"reply:" + s.answer};
    return stategraph::update<chat>{}.set<&chat::log>(std::move(entry));
}

inline stategraph::compiled_graph<chat> chat_graph(std::shared_ptr<saver> s) {
    stategraph::state_graph<chat> g("chat");
    g.add_node("ask", ask).add_node("reply", reply);
    g.add_edge(stategraph::START, "ask").add_edge("ask", "reply").add_edge("reply", stategraph::END);
    return g.compile({.checkpointer = std::move(s)});
}

} // namespace stategraph::checkpoint::redis_testing
