#pragma once
// Graphs shared by the test process and the helper program `durable_child`, so that both
// build the same shape (same signature) and read each other's threads.

#include <stategraph/state_graph.hpp>

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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

// -- task notes: which process ran which task, and when -------------------------------------
/// One line of a notes file: a task's start or end in some process.
struct task_note {
    std::string event; ///< "start" or "end"
    std::string node;
    std::int64_t step = 0;
    long pid = 0;
    std::int64_t us = 0; ///< steady_clock (CLOCK_MONOTONIC, one clock for every process), in µs
};

/// Appends "<event> <node> <step> <pid> <µs>" to `notes` (one O_APPEND write, as bump_file).
inline void note_task(const std::string& notes, const char* event, const std::string& node, std::int64_t step) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now().time_since_epoch())
                        .count();
    bump_file(notes, std::string(event) + " " + node + " " + std::to_string(step) + " " +
                         std::to_string(static_cast<long>(::getpid())) + " " + std::to_string(us));
}

/// The lines of a notes file from byte `from` on (a SIGKILL never leaves half a line: each is
/// one write() shorter than a page).
inline std::vector<task_note> read_notes(const std::string& notes, std::uintmax_t from = 0) {
    std::vector<task_note> out;
    std::ifstream in(notes);
    in.seekg(static_cast<std::streamoff>(from));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        task_note n;
        if (fields >> n.event >> n.node >> n.step >> n.pid >> n.us) out.push_back(std::move(n));
    }
    return out;
}

/// The common body of the probe and race nodes: notes the task's start, waits `ms` on a timer
/// (so that parallel tasks overlap), notes its end, and returns "<name>@<step>" for the log.
inline boost::asio::awaitable<std::string> timed_task(std::string notes, std::string name, int ms, std::int64_t step) {
    note_task(notes, "start", name, step);
    if (ms > 0) {
        boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, std::chrono::milliseconds(ms));
        co_await t.async_wait(boost::asio::use_awaitable);
    }
    note_task(notes, "end", name, step);
    co_return name + "@" + std::to_string(step);
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

// -- email graph: a side effect (ctx.task) before an interrupt --------------------------------
// "send" appends to the counters file through ctx.task (the email), then, when `block` is set,
// hangs (the test kills the process there), else asks for approval.
inline sg::state_graph<ask_state> email_graph(std::string counters, const bool* block) {
    using st = ask_state;
    sg::state_graph<st> g("email");
    g.add_node("send", [counters, block](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        bump_file(counters, "send.start");
        auto email = [&counters] {
            bump_file(counters, "email");
            return std::string("sent");
        };
        std::string receipt = co_await ctx.task("send-email", email);
        if (block && *block) {
            auto ex = co_await boost::asio::this_coro::executor;
            boost::asio::steady_timer t(ex, std::chrono::hours(1));
            co_await t.async_wait(boost::asio::use_awaitable);
        }
        boost::json::object payload;
        payload["q"] = "approve " + receipt + "?";
        auto pending = ctx.interrupt<int>(payload);
        int n = co_await std::move(pending);
        co_return sg::update<st>{}.set<&st::count>(n).set<&st::trail>({receipt});
    });
    g.add_edge(sg::START, "send").add_edge("send", sg::END);
    return g;
}

// -- cache graph: a cached node, kept in the checkpointer (issue 12, feature 4) ----------------
// START -> lookup -> END; lookup (cached, key: the whole input) counts its runs in the counters file.
inline sg::state_graph<ask_state> cache_graph(std::string counters) {
    using st = ask_state;
    sg::state_graph<st> g("cache");
    g.add_node(
        "lookup",
        [counters](const st& s) {
            bump_file(counters, "lookup");
            std::vector<std::string> line{"looked up " + std::to_string(s.count)};
            return sg::update<st>{}.set<&st::trail>(std::move(line));
        },
        {.cache = sg::cache_policy{}});
    g.add_edge(sg::START, "lookup").add_edge("lookup", sg::END);
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

// -- probe graph: the kill loop's threads -------------------------------------------------------
struct probe_state {
    std::vector<std::string> log; ///< "<node>@<step>", once per task whose writes were applied
    std::string bulk;             ///< a large value: its commit spans many pages, so kills land inside commits
};
BOOST_DESCRIBE_STRUCT(probe_state, (), (log, bulk))
inline auto reducers(sg::for_state<probe_state>) { return sg::reducers{sg::reduce<&probe_state::log>(sg::append)}; }

/// The probe graph's tasks in the order they run: the three fan_ nodes and the three Sends to
/// node `fan_send` (tasks fan_send0..2, one node) share one step.
inline const std::vector<std::string> probe_nodes{"prep",      "fan_a",     "fan_b",     "fan_c", "fan_send0",
                                                  "fan_send1", "fan_send2", "join",      "finish"};
/// The probe graph's fan-out step: parallel branches (nodes) and Send tasks of one node.
inline bool probe_fan_task(const std::string& task) { return task.rfind("fan_", 0) == 0; }

/// The value a node writes into `bulk` (distinct per node, so the final state shows whose it is).
inline std::string probe_bulk(const std::string& node, std::size_t bytes) {
    std::string out;
    out.reserve(bytes + node.size());
    while (out.size() < bytes) out += node + ";";
    return out;
}
inline constexpr std::size_t probe_prep_bulk = 32u << 10, probe_join_bulk = 96u << 10;

/// START -> prep -> fan_a, fan_b, fan_c and three Sends to fan_send -> join -> finish -> END.
/// The fan-out's tasks take 2, 10 and 20 ms (branches) and 5, 14 and 17 ms (the Sends, of one
/// node: issue 23, where two of its tasks saved and the third not read as a finished step), so
/// that their writes are saved one by one well before the step's checkpoint; prep and join also
/// write a large `bulk` value. Every task notes its start and end in `notes`.
inline sg::state_graph<probe_state> probe_graph(std::string notes) {
    using st = probe_state;
    sg::state_graph<st> g("probe");
    auto node = [&g, notes](const std::string& name, int ms, std::size_t bulk) {
        g.add_node(name, [notes, name, ms, bulk](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
            auto entry = co_await timed_task(notes, name, ms, ctx.step());
            sg::update<st> u;
            u.set<&st::log>({entry});
            if (bulk) u.set<&st::bulk>(probe_bulk(name, bulk));
            co_return u;
        });
    };
    node("prep", 3, probe_prep_bulk);
    node("fan_a", 2, 0);
    node("fan_b", 10, 0);
    node("fan_c", 20, 0);
    node("join", 3, probe_join_bulk);
    node("finish", 2, 0);
    g.add_node("fan_send", [notes](const int& k, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
        static constexpr int ms[] = {5, 14, 17};
        const std::string name = "fan_send" + std::to_string(k);
        auto entry = co_await timed_task(notes, name, ms[k % 3], ctx.step());
        sg::update<st> u;
        u.set<&st::log>({entry});
        co_return u;
    });
    g.add_edge(sg::START, "prep");
    for (const char* fan : {"fan_a", "fan_b", "fan_c"}) g.add_edge("prep", fan).add_edge(fan, "join");
    g.add_conditional_edges(
        "prep",
        [](const st&) { return std::vector<sg::send>{sg::send("fan_send", 0), sg::send("fan_send", 1), sg::send("fan_send", 2)}; },
        std::vector<std::string>{"fan_send"});
    g.add_edge("fan_send", "join");
    g.add_edge("join", "finish").add_edge("finish", sg::END);
    return g;
}

// -- race graph: several processes on one thread ------------------------------------------------
struct race_state {
    std::vector<std::string> log; ///< "<node>@<step>" per task whose writes were applied
    int answer = 0;
};
BOOST_DESCRIBE_STRUCT(race_state, (), (log, answer))
inline auto reducers(sg::for_state<race_state>) { return sg::reducers{sg::reduce<&race_state::log>(sg::append)}; }

/// How long the race graph's nodes run, and the lease time to live of the racing processes.
struct race_timing {
    int lease_s = 2;
    int first_ms = 0, middle_ms = 0, last_ms = 0;
};
/// "short": racers started together overlap for a few hundred ms, well within their lease.
/// "long": middle runs 3.5 s under a 1 s lease (issue 11 break 2: a node longer than the lease).
inline race_timing race_scenario(const std::string& name) {
    if (name == "long") return {1, 50, 3500, 50};
    return {2, 50, 200, 150};
}

/// START -> first -> middle -> last -> END; each node notes its start and end in `notes` and
/// appends "<node>@<step>" to log. Before anything else, middle asks for a number when `ask`
/// (the resume race), and fails while the file `fail_file` exists (which leaves a thread whose
/// next step is middle, for the continue races); neither attempt is noted.
inline sg::state_graph<race_state> race_graph(std::string notes, race_timing t, bool ask, std::string fail_file) {
    using st = race_state;
    sg::state_graph<st> g("race");
    auto plain = [&g, notes](const std::string& name, int ms) {
        g.add_node(name, [notes, name, ms](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
            auto entry = co_await timed_task(notes, name, ms, ctx.step());
            co_return sg::update<st>{}.set<&st::log>({entry});
        });
    };
    plain("first", t.first_ms);
    plain("last", t.last_ms);
    g.add_node("middle", [notes, ms = t.middle_ms, ask, fail_file](const st&, sg::context& ctx)
                             -> boost::asio::awaitable<sg::update<st>> {
        const int answer = ask ? ctx.interrupt_now<int>(boost::json::object{{"q", "how many?"}}) : 0;
        if (!fail_file.empty() && std::filesystem::exists(fail_file)) throw std::runtime_error("middle: told to fail");
        auto entry = co_await timed_task(notes, "middle", ms, ctx.step());
        co_return sg::update<st>{}.set<&st::log>({entry}).set<&st::answer>(answer);
    });
    g.add_edge(sg::START, "first").add_edge("first", "middle").add_edge("middle", "last").add_edge("last", sg::END);
    return g;
}

// -- slow chain: what each durability mode keeps when its process is SIGKILLed ---------------
struct chain_state {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(chain_state, (), (log))
inline auto reducers(sg::for_state<chain_state>) { return sg::reducers{sg::reduce<&chain_state::log>(sg::append)}; }

inline constexpr int slow_chain_length = 6;

/// START -> n0 -> n1 -> ... -> n5 -> END; each node notes its start and end in `notes` (with
/// its step) and takes `node_ms` on a timer.
inline sg::state_graph<chain_state> slow_chain_graph(std::string notes, int node_ms) {
    using st = chain_state;
    sg::state_graph<st> g("slow_chain");
    std::string prev(sg::START);
    for (int i = 0; i < slow_chain_length; ++i) {
        const std::string name = "n" + std::to_string(i);
        g.add_node(name, [notes, name, node_ms](const st&, sg::context& ctx) -> boost::asio::awaitable<sg::update<st>> {
            auto entry = co_await timed_task(notes, name, node_ms, ctx.step());
            (void)entry;
            co_return sg::update<st>{}.set<&st::log>({name});
        });
        g.add_edge(prev, name);
        prev = name;
    }
    g.add_edge(prev, sg::END);
    return g;
}

} // namespace durable::graphs
