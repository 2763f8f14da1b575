#pragma once
// Graphs shared by the test process and the helper program `durable_child`, so that both
// build the same shape (same signature) and read each other's threads.

#include <stategraph/state_graph.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace durable::graphs {

namespace sg = stategraph;

/// Appends `name` as one line to `file` (O_APPEND: lines from several processes never mix;
/// a SIGKILL right after write() keeps the line, it is in the page cache).
inline void bump_file(const std::string& file, const std::string& name) {
    if (file.empty()) return;
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    std::string line = name + "\n";
    ssize_t n = ::write(fd, line.data(), line.size());
    (void)n;
    ::close(fd);
}

/// Counts the lines of a counters file by name.
inline std::map<std::string, int> read_counts(const std::string& file) {
    std::map<std::string, int> out;
    std::ifstream in(file);
    std::string line;
    while (std::getline(in, line))
        if (!line.empty()) ++out[line];
    return out;
}

// -- crash graph: two parallel nodes, one finishes, the other may block for an hour ----------
struct crash_state {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(crash_state, (), (log))
inline auto reducers(sg::for_state<crash_state>) { return sg::reducers{sg::reduce<&crash_state::log>(sg::append)}; }

/// START -> fast, START -> slow; fast, slow -> after -> END. `*block` makes slow wait an hour.
inline sg::state_graph<crash_state> crash_graph(std::string counters, const bool* block) {
    using st = crash_state;
    sg::state_graph<st> g("crash");
    g.add_node("fast", [counters](const st&) {
        bump_file(counters, "fast");
        return sg::update<st>{}.set<&st::log>({"fast"});
    });
    g.add_node("slow", [counters, block](const st&) -> boost::asio::awaitable<sg::update<st>> {
        bump_file(counters, "slow");
        if (block && *block) {
            auto ex = co_await boost::asio::this_coro::executor;
            boost::asio::steady_timer t(ex, std::chrono::hours(1));
            co_await t.async_wait(boost::asio::use_awaitable);
        }
        co_return sg::update<st>{}.set<&st::log>({"slow"});
    });
    g.add_node("after", [counters](const st&) {
        bump_file(counters, "after");
        return sg::update<st>{}.set<&st::log>({"after"});
    });
    g.add_edge(sg::START, "fast").add_edge(sg::START, "slow");
    g.add_edge("fast", "after").add_edge("slow", "after").add_edge("after", sg::END);
    return g;
}

// -- ask graph: an interrupt asking for a number ----------------------------------------------
struct ask_state {
    int count = 0;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(ask_state, (), (count, trail))
inline auto reducers(sg::for_state<ask_state>) { return sg::reducers{sg::reduce<&ask_state::trail>(sg::append)}; }

/// START -> prep -> ask -> END; ask calls interrupt<int>({"q": "how many?"}).
inline sg::state_graph<ask_state> ask_graph(std::string counters) {
    using st = ask_state;
    sg::state_graph<st> g("ask");
    g.add_node("prep", [counters](const st&) {
        bump_file(counters, "prep");
        return sg::update<st>{}.set<&st::trail>({"prep"});
    });
    g.add_node("ask", [counters](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        bump_file(counters, "ask.start");
        boost::json::object payload;
        payload["q"] = "how many?";
        auto pending = ctx.interrupt<int>(payload);
        int n = co_await std::move(pending);
        bump_file(counters, "ask.after");
        co_return sg::update<st>{}.set<&st::count>(n).set<&st::trail>({"ask"});
    });
    g.add_edge(sg::START, "prep").add_edge("prep", "ask").add_edge("ask", sg::END);
    return g;
}

// -- big graph: a node writes a large field (disk-full test) ----------------------------------
struct big_state {
    std::string big;
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(big_state, (), (big, n))

/// START -> small -> huge -> END; small sets n, huge writes `huge_bytes` bytes into big.
inline sg::state_graph<big_state> big_graph(std::size_t huge_bytes) {
    using st = big_state;
    sg::state_graph<st> g("big");
    g.add_node("small", [](const st& s) { return sg::update<st>{}.set<&st::n>(s.n + 1); });
    g.add_node("huge", [huge_bytes](const st&) { return sg::update<st>{}.set<&st::big>(std::string(huge_bytes, 'x')); });
    g.add_edge(sg::START, "small").add_edge("small", "huge").add_edge("huge", sg::END);
    return g;
}

} // namespace durable::graphs
