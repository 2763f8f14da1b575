// The timed scenarios: chain20, fanout8, hitl, throughput, supervisor, checkpoint_size.
// The same graphs, inputs and checks as bench/langgraphjs/scenarios.mjs.
#include "counting_saver.hpp"
#include "harness.hpp"
#include "supervisor.hpp"

#include <stategraph/state_graph.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#ifdef STATEGRAPH_BENCH_HAVE_OTLP
#include <stategraph/nodes/otlp_tracer.hpp>
#endif

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

namespace stategraph::bench {

run_observer* bench_tracer() {
#ifdef STATEGRAPH_BENCH_HAVE_OTLP
    // STATEGRAPH_BENCH_OTLP=URL: an otlp_tracer exporting there, for every invoke of the process
    // (flushed when the process exits).
    static const std::unique_ptr<otlp_tracer> tracer = []() -> std::unique_ptr<otlp_tracer> {
        const char* url = std::getenv("STATEGRAPH_BENCH_OTLP");
        if (!url || !*url) return nullptr;
        otlp_options o;
        o.endpoint = url;
        o.service_name = "stategraph_bench";
        return std::make_unique<otlp_tracer>(o);
    }();
    return tracer.get();
#else
    return nullptr;
#endif
}

// ---- chains: START -> n1 -> ... -> nN -> END ----------------------------------------------
// count keeps the last value, log appends; each node adds 1 to count and appends its name.
// The "big" variant adds payload, a 1 MiB string that no node touches.
struct chain_state {
    int count = 0;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(chain_state, (), (count, log))
inline auto reducers(for_state<chain_state>) { return stategraph::reducers{reduce<&chain_state::log>(append)}; }

struct big_chain_state {
    int count = 0;
    std::vector<std::string> log;
    std::string payload;
};
BOOST_DESCRIBE_STRUCT(big_chain_state, (), (count, log, payload))
inline auto reducers(for_state<big_chain_state>) { return stategraph::reducers{reduce<&big_chain_state::log>(append)}; }

namespace {

/// "<prefix><i>" (built with append: GCC 12 warns falsely about `"n" + std::to_string(i)` at -O3).
std::string numbered(const char* prefix, int i) { return std::string(prefix).append(std::to_string(i)); }

template <class St>
compiled_graph<St> build_chain(int n, std::shared_ptr<checkpoint::saver> saver) {
    state_graph<St> g(numbered("chain", n));
    for (int i = 1; i <= n; ++i) {
        std::string name = numbered("n", i);
        g.add_node(name, [name](const St& s) {
            return update<St>{}.template set<&St::count>(s.count + 1).template set<&St::log>({name});
        });
        g.add_edge(i == 1 ? std::string(START) : numbered("n", i - 1), name);
    }
    g.add_edge(numbered("n", n), END);
    compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(std::move(o));
}

template <class St>
void check_chain(const run_result<St>& r, int n) {
    check(r.status == run_status::done, "chain" + std::to_string(n) + ": ran to the end");
    check(r.values.count == n, "chain" + std::to_string(n) + ": count = " + std::to_string(n) + " (got " +
                                   std::to_string(r.values.count) + ")");
    check(static_cast<int>(r.values.log.size()) == n && r.values.log.back() == "n" + std::to_string(n),
          "chain" + std::to_string(n) + ": log has " + std::to_string(n) + " entries");
}

run_config invoke_config(std::string thread) {
    run_config c;
    c.thread_id = std::move(thread);
    c.recursion_limit = 100;
    c.durability = bench_durability();
    c.observer = bench_tracer();
    return c;
}

/// One chain invoke on a fresh thread in durability `mode`: sample `metric` = µs per node.
boost::asio::awaitable<samples> chain_once(compiled_graph<chain_state> g, int n, durability mode, const char* metric) {
    run_config cfg = invoke_config(fresh_thread("chain" + std::to_string(n)));
    cfg.durability = mode;
    update<chain_state> in = update<chain_state>{}.set<&chain_state::count>(0);
    const double t0 = now_us();
    auto r = co_await g.invoke(std::move(in), cfg);
    const double t1 = now_us();
    check_chain(r, n);
    samples s;
    s[metric] = (t1 - t0) / n;
    co_return s;
}

// ---- fanout8: START -> split -> p1..p8 (one superstep) -> join -> END ---------------------
struct fan_state {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(fan_state, (), (log))
inline auto reducers(for_state<fan_state>) { return stategraph::reducers{reduce<&fan_state::log>(append)}; }

constexpr int fan = 8;

compiled_graph<fan_state> build_fanout(std::shared_ptr<checkpoint::saver> saver) {
    state_graph<fan_state> g("fanout8");
    g.add_node("split", [](const fan_state&) { return update<fan_state>{}.set<&fan_state::log>({"split"}); });
    for (int i = 1; i <= fan; ++i) {
        std::string b = numbered("p", i);
        g.add_node(b, [b](const fan_state&) { return update<fan_state>{}.set<&fan_state::log>({b}); });
        g.add_edge("split", b).add_edge(b, "join");
    }
    g.add_node("join", [](const fan_state& s) {
        return update<fan_state>{}.set<&fan_state::log>({"join saw " + std::to_string(s.log.size())});
    });
    g.add_edge(START, "split").add_edge("join", END);
    compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(std::move(o));
}

boost::asio::awaitable<samples> fanout_once(compiled_graph<fan_state> g) {
    run_config cfg = invoke_config(fresh_thread("fanout8"));
    update<fan_state> in = update<fan_state>{}.set<&fan_state::log>(std::vector<std::string>());
    const double t0 = now_us();
    auto r = co_await g.invoke(std::move(in), cfg);
    const double t1 = now_us();
    check(r.values.log.size() == fan + 2 && r.values.log.back() == "join saw " + std::to_string(fan + 1),
          "fanout8: join ran once and saw split + 8 branches");
    samples s;
    s["us_per_invoke"] = t1 - t0;
    co_return s;
}

// ---- hitl: START -> prep -> ask (interrupt) -> done -> END ---------------------------------
struct hitl_state {
    std::string question;
    std::string answer;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(hitl_state, (), (question, answer, log))
inline auto reducers(for_state<hitl_state>) { return stategraph::reducers{reduce<&hitl_state::log>(append)}; }

compiled_graph<hitl_state> build_hitl(std::shared_ptr<checkpoint::saver> saver) {
    state_graph<hitl_state> g("hitl");
    g.add_node("prep", [](const hitl_state&) { return update<hitl_state>{}.set<&hitl_state::log>({"prep"}); });
    g.add_node("ask", [](const hitl_state& s, context& ctx) {
        auto answer = ctx.interrupt_now<std::string>(s.question);
        return update<hitl_state>{}.set<&hitl_state::answer>(std::move(answer)).set<&hitl_state::log>({"ask"});
    });
    g.add_node("done", [](const hitl_state& s) {
        return update<hitl_state>{}.set<&hitl_state::log>({"done:" + s.answer});
    });
    g.add_edge(START, "prep").add_edge("prep", "ask").add_edge("ask", "done").add_edge("done", END);
    compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(std::move(o));
}

boost::asio::awaitable<samples> hitl_once(compiled_graph<hitl_state> g) {
    run_config cfg = invoke_config(fresh_thread("hitl"));
    update<hitl_state> in = update<hitl_state>{}.set<&hitl_state::question>("continue?");
    const double t0 = now_us();
    auto r1 = co_await g.invoke(std::move(in), cfg);
    const double t1 = now_us();
    check(r1.interrupted() && r1.interrupts.size() == 1 && r1.interrupts[0].value.is_string() &&
              r1.interrupts[0].value.as_string() == "continue?",
          "hitl: invoke stopped at the interrupt");
    auto answer = resume(std::string("yes"));
    const double t2 = now_us();
    auto r2 = co_await g.invoke(std::move(answer), cfg);
    const double t3 = now_us();
    const std::vector<std::string> want{"prep", "ask", "done:yes"};
    check(r2.status == run_status::done && r2.values.log == want, "hitl: log after resume is [prep, ask, done:yes]");
    samples s;
    s["us_to_interrupt"] = t1 - t0;
    s["us_resume_to_end"] = t3 - t2;
    co_return s;
}

// ---- throughput: 2,000 threads of a 10-node chain, 64 in flight, two io_context threads ----
boost::asio::awaitable<void> throughput_worker(compiled_graph<chain_state> g, int total, int nodes,
                                               std::atomic<int>* next, std::atomic<int>* done) {
    for (int i = next->fetch_add(1); i < total; i = next->fetch_add(1)) {
        run_config cfg = invoke_config(fresh_thread("tp"));
        update<chain_state> in = update<chain_state>{}.set<&chain_state::count>(0);
        auto r = co_await g.invoke(std::move(in), cfg);
        if (r.values.count == nodes) done->fetch_add(1);
    }
}

/// One batch on both cores: two io_contexts, one per thread (concurrency hint 1, so neither
/// scheduler takes a lock), each with half of the in-flight workers, pulling run numbers from
/// one shared counter. The graph and the checkpointer are shared by both threads.
double process_cpu_us() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    auto us = [](const timeval& t) { return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_usec); };
    return us(u.ru_utime) + us(u.ru_stime);
}

samples throughput_batch(setup_context& ctx, int n, int inflight, int nodes, std::vector<double>* cpu_per_run = nullptr) {
    constexpr int io_threads = 2;
    auto cp = ctx.make_cp();
    auto g = build_chain<chain_state>(nodes, cp->saver);
    std::vector<std::unique_ptr<boost::asio::io_context>> ios;
    for (int i = 0; i < io_threads; ++i) ios.push_back(std::make_unique<boost::asio::io_context>(1));
    std::atomic<int> next{0}, done{0};
    std::mutex m;
    std::exception_ptr failure;
    const double c0 = process_cpu_us();
    const double t0 = now_us();
    for (int w = 0; w < std::min(inflight, n); ++w)
        boost::asio::co_spawn(*ios[static_cast<std::size_t>(w % io_threads)], throughput_worker(g, n, nodes, &next, &done),
                              [&](std::exception_ptr e) {
                                  std::lock_guard lock(m);
                                  if (e && !failure) failure = e;
                              });
    std::vector<std::thread> threads;
    for (int i = 1; i < io_threads; ++i) threads.emplace_back([&ios, i] { ios[static_cast<std::size_t>(i)]->run(); });
    ios[0]->run();
    for (auto& t : threads) t.join();
    const double t1 = now_us();
    // the process's CPU (every thread: the io threads and any of the saver's) for the batch
    if (cpu_per_run) cpu_per_run->push_back((process_cpu_us() - c0) / n);
    if (failure) std::rethrow_exception(failure);
    check(done.load() == n, "throughput: all " + std::to_string(n) + " runs finished (got " + std::to_string(done.load()) + ")");
    const double secs = (t1 - t0) / 1e6;
    samples s;
    s["runs_per_s"] = n / secs;
    s["nodes_per_s"] = static_cast<double>(n) * nodes / secs;
    return s;
}

// ---- checkpoint_size ----------------------------------------------------------------------
struct size_result {
    double per_checkpoint = 0;
    boost::json::object detail;
};

template <class St>
boost::asio::awaitable<size_result> measure_size(compiled_graph<St> g, counting_saver* counter, update<St> in,
                                                 std::size_t untouched_bytes) {
    const std::string t = fresh_thread("size");
    run_config cfg = invoke_config(t);
    auto r = co_await g.invoke(std::move(in), cfg);
    check_chain(r, 20);
    auto st = co_await counter->stats(t);
    check(st.checkpoints == 22, "checkpoint_size: 22 checkpoints per chain20 thread (got " + std::to_string(st.checkpoints) + ")");
    auto b = counter->bytes_of(t);
    co_await counter->delete_thread(t);
    size_result out;
    // The same definition as the JS half: what the saver stores for the thread besides keys: the
    // values (blobs), pending-write values and the checkpoint records (versions, frontier,
    // metadata), per checkpoint. The graph's shape is stored once per graph, not per thread.
    const auto stored = st.bytes + st.record_bytes;
    out.per_checkpoint = static_cast<double>(stored) / static_cast<double>(st.checkpoints);
    out.detail["checkpoints"] = st.checkpoints;
    out.detail["blobs"] = st.blobs;
    out.detail["writes"] = st.writes;
    out.detail["value_bytes"] = st.bytes;
    out.detail["record_bytes"] = st.record_bytes;
    out.detail["value_bytes_per_checkpoint"] = static_cast<double>(st.bytes) / static_cast<double>(st.checkpoints);
    out.detail["record_bytes_per_checkpoint"] = static_cast<double>(st.record_bytes) / static_cast<double>(st.checkpoints);
    out.detail["records_as_json_text"] = b.record; // the same records as JSON text, for comparison
    out.detail["values_passed_to_saver_as_json_text"] = b.values;
    if (untouched_bytes) {
        // Flatness: what each checkpoint costs besides the one copy of the untouched field
        // (its JSON text: the string plus two quotes), to compare with plain chain20.
        const auto rest = static_cast<double>(stored) - static_cast<double>(untouched_bytes + 2);
        out.detail["bytes_per_checkpoint_besides_one_copy_of_the_field"] = rest / static_cast<double>(st.checkpoints);
    }
    co_return out;
}

/// Round trips to each server between two counts (`round_trips_by_server`).
boost::json::object trips_since(const std::map<std::string, std::uint64_t>& before,
                                const std::map<std::string, std::uint64_t>& now) {
    boost::json::object o;
    for (const auto& [server, n] : now) {
        auto it = before.find(server);
        o[server] = n - (it == before.end() ? 0 : it->second);
    }
    return o;
}

// ---- supervisor: one complex turn, one blocking turn (interrupt, then resume) ---------------
/// `counter` and `calls`: each turn's saver calls; `trips` and `trip_counts`: each turn's round
/// trips to a server checkpointer (both untimed runs only).
boost::asio::awaitable<samples> supervisor_once(compiled_graph<supervisor::state> g, bool has_saver,
                                                counting_saver* counter = nullptr,
                                                boost::json::object* calls = nullptr,
                                                const checkpointer* server = nullptr,
                                                boost::json::object* trip_counts = nullptr) {
    namespace sup = supervisor;
    samples out;
    using by_server = std::map<std::string, std::uint64_t>;
    std::uint64_t trips_at = server ? server->round_trips() : 0;
    by_server by_at = server && server->round_trips_by_server ? server->round_trips_by_server() : by_server{};
    auto count_trips = [&](const char* turn) {
        if (!server) return;
        const auto now = server->round_trips();
        (*trip_counts)[turn] = now - trips_at;
        trips_at = now;
        if (!server->round_trips_by_server) return;
        auto now_by = server->round_trips_by_server();
        (*trip_counts)[std::string(turn) + "_by_server"] = trips_since(by_at, now_by);
        by_at = std::move(now_by);
    };
    std::string t = fresh_thread("sup-complex");
    run_config cfg = invoke_config(t);
    auto in = sup::turn_input(sup::complex_message, t);
    double t0 = now_us();
    auto rc = co_await g.invoke(std::move(in), cfg);
    double t1 = now_us();
    sup::check_complex_result(rc);
    out["us_complex_turn"] = t1 - t0;
    if (counter) (*calls)["complex_turn"] = counter->take_calls().json();
    count_trips("complex_turn");
    if (!has_saver) co_return out;

    t = fresh_thread("sup-blocking");
    cfg = invoke_config(t);
    in = sup::turn_input(sup::blocking_message, t);
    t0 = now_us();
    auto ri = co_await g.invoke(std::move(in), cfg);
    t1 = now_us();
    sup::check_blocking_interrupt(ri);
    auto answer = resume(sup::blocking_answer);
    const double t2 = now_us();
    auto rr = co_await g.invoke(std::move(answer), cfg);
    const double t3 = now_us();
    sup::check_blocking_end(rr);
    out["us_blocking_turn"] = (t1 - t0) + (t3 - t2);
    if (counter) (*calls)["blocking_turn"] = counter->take_calls().json();
    count_trips("blocking_turn");
    co_return out;
}

/// One chain invoke streamed in `values` mode (the whole state after each step, as LangGraph's
/// `stream(..., {streamMode: "values"})`): sample `metric` = µs per node, the handler counting the
/// events. `in`: the input (the big variant's holds its 1 MiB payload, which no node touches).
template <class St>
boost::asio::awaitable<samples> chain_values_once(compiled_graph<St> g, int n, update<St> in, std::string metric) {
    run_config cfg = invoke_config(fresh_thread("chain_values"));
    std::size_t events = 0, last_log = 0;
    auto on_event = [&](const stream_event& e) {
        ++events;
        last_log = e.data.as_object().at("log").as_array().size();
    };
    const double t0 = now_us();
    auto r = co_await g.stream(std::move(in), cfg, stream_mode::values, on_event);
    const double t1 = now_us();
    check(r.status == run_status::done && r.values.count == n, "chain20_values: ran to the end");
    check(events == static_cast<std::size_t>(n) + 1 && last_log == static_cast<std::size_t>(n),
          "chain20_values: one values event per step with the whole log (got " + std::to_string(events) + ")");
    samples s;
    s[metric] = (t1 - t0) / n;
    co_return s;
}

} // namespace

void add_scenarios(std::vector<scenario>& out) {
    {
        // chain20 in each durability mode (run_config::durability; LangGraph.js: invoke's
        // `durability`), one invoke of each per run, each on a fresh thread.
        scenario s;
        s.name = "durability";
        s.checkpointers = {"memory", "sqlite_normal"};
        s.metrics = {{"us_per_node_sync", "us"}, {"us_per_node_async", "us"}, {"us_per_node_exit", "us"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = build_chain<chain_state>(20, ctx.cp->saver);
            // Untimed: the checkpoints one invoke stores in each mode.
            auto stored = std::make_shared<boost::json::object>();
            static constexpr std::pair<durability, const char*> modes[] = {
                {durability::sync, "sync"}, {durability::async, "async"}, {durability::exit, "exit"}};
            for (const auto& [mode, name] : modes) {
                auto counter = std::make_shared<counting_saver>(ctx.cp->saver);
                auto counted = build_chain<chain_state>(20, counter);
                drive(*io, chain_once(counted, 20, mode, "us"));
                (*stored)[name] = counter->take_calls().put;
            }
            bench_run b;
            b.run = [io, g] {
                samples all;
                for (const auto& [mode, name] : modes) {
                    const std::string metric = std::string("us_per_node_") + name;
                    auto one = drive(*io, chain_once(g, 20, mode, metric.c_str()));
                    all.insert(one.begin(), one.end());
                }
                return all;
            };
            b.detail = [stored] {
                boost::json::object d;
                d["checkpoints_per_invoke"] = *stored;
                return d;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "chain20";
        s.checkpointers = plus_servers(all_checkpointers);
        s.metrics = {{"us_per_node", "us"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = build_chain<chain_state>(20, ctx.cp->saver);
            // One untimed invoke through a counting saver: storage calls per invoke.
            auto calls = std::make_shared<boost::json::object>();
            auto trips = std::make_shared<boost::json::object>();
            if (ctx.cp->saver) {
                auto counter = std::make_shared<counting_saver>(ctx.cp->saver);
                auto counted = build_chain<chain_state>(20, counter);
                // A server checkpointer's round trips per invoke, connections and scripts warm
                // (the first invoke opens them).
                if (ctx.cp->round_trips) drive(*io, chain_once(g, 20, bench_durability(), "us_per_node"));
                const std::uint64_t before = ctx.cp->round_trips ? ctx.cp->round_trips() : 0;
                const auto before_by = ctx.cp->round_trips_by_server ? ctx.cp->round_trips_by_server()
                                                                     : std::map<std::string, std::uint64_t>{};
                drive(*io, chain_once(counted, 20, bench_durability(), "us_per_node"));
                const auto c = counter->take_calls();
                *calls = c.json();
                if (ctx.cp->round_trips) {
                    const auto n = ctx.cp->round_trips() - before;
                    (*trips)["per_invoke"] = n;
                    (*trips)["per_checkpoint"] = c.put ? static_cast<double>(n) / static_cast<double>(c.put) : 0.0;
                    if (ctx.cp->round_trips_by_server) (*trips)["per_invoke_by_server"] = trips_since(before_by, ctx.cp->round_trips_by_server());
                }
            }
            bench_run b;
            b.run = [io, g] { return drive(*io, chain_once(g, 20, bench_durability(), "us_per_node")); };
            b.detail = [calls, trips] {
                boost::json::object d;
                if (!calls->empty()) d["saver_calls_per_invoke"] = *calls;
                if (!trips->empty()) d["round_trips"] = *trips;
                return d;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        // chain20 streamed in `values` mode: what the stream adds per step (the state as JSON).
        scenario s;
        s.name = "chain20_values";
        s.checkpointers = {"none", "memory"};
        s.metrics = {{"us_per_node", "us"}, {"us_per_node_1mb_untouched", "us"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = build_chain<chain_state>(20, ctx.cp->saver);
            auto big = build_chain<big_chain_state>(20, ctx.cp->saver);
            auto payload = std::make_shared<const std::string>(std::size_t(1) << 20, 'x');
            bench_run b;
            b.run = [io, g, big, payload] {
                auto in = update<chain_state>{}.set<&chain_state::count>(0);
                auto all = drive(*io, chain_values_once(g, 20, std::move(in), "us_per_node"));
                auto big_in = update<big_chain_state>{}.set<&big_chain_state::count>(0).set<&big_chain_state::payload>(*payload);
                auto one = drive(*io, chain_values_once(big, 20, std::move(big_in), "us_per_node_1mb_untouched"));
                all.insert(one.begin(), one.end());
                return all;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "fanout8";
        s.checkpointers = all_checkpointers;
        s.metrics = {{"us_per_invoke", "us"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = build_fanout(ctx.cp->saver);
            bench_run b;
            b.run = [io, g] { return drive(*io, fanout_once(g)); };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "hitl";
        s.checkpointers = with_saver;
        s.metrics = {{"us_to_interrupt", "us"}, {"us_resume_to_end", "us"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = build_hitl(ctx.cp->saver);
            bench_run b;
            b.run = [io, g] { return drive(*io, hitl_once(g)); };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "throughput";
        s.checkpointers = all_checkpointers;
        s.warmup = 1;
        s.default_runs = 3;
        s.metrics = {{"runs_per_s", "1/s"}, {"nodes_per_s", "1/s"}, {"peak_rss_mb", "MB"}};
        s.setup = [](setup_context& ctx) {
            const int threads = ctx.smoke ? 128 : 2000;
            const int inflight = 64, nodes = 10;
            bench_run b;
            auto cpu = std::make_shared<std::vector<double>>();
            b.run = [&ctx, threads, cpu] { return throughput_batch(ctx, threads, inflight, nodes, cpu.get()); };
            b.warmup_run = [&ctx, threads] { return throughput_batch(ctx, std::min(threads, 256), inflight, nodes); };
            b.finish = [] {
                samples f;
                f["peak_rss_mb"] = peak_rss_mb();
                return f;
            };
            b.detail = [threads, cpu] {
                boost::json::object d;
                d["threads"] = threads;
                // CPU of the whole process per run (median of the timed batches): what the floor
                // of a saver's rows adds to (scripts/bench's `limit throughput` line)
                if (!cpu->empty()) {
                    auto xs = *cpu;
                    std::sort(xs.begin(), xs.end());
                    d["cpu_us_per_run"] = std::round(xs[xs.size() / 2] * 10) / 10;
                }
                d["inflight"] = inflight;
                d["nodes_per_run"] = nodes;
                d["io_threads"] = "2 threads, one io_context each";
                return d;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "supervisor";
        s.checkpointers = plus_servers(all_checkpointers);
        s.warmup = 20;
        s.target_seconds = 5;
        s.min_runs = 20;
        s.max_runs = 5000;
        s.metrics = {{"us_complex_turn", "us"}, {"us_blocking_turn", "us"}};
        s.metrics_for = [](const std::string& kind) -> std::optional<std::vector<metric_def>> {
            if (kind == "none") return std::vector<metric_def>{{"us_complex_turn", "us"}};
            return std::nullopt;
        };
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto g = supervisor::build(ctx.cp->saver);
            const bool has_saver = ctx.cp->saver != nullptr;
            drive(*io, supervisor::validate(g, has_saver, fresh_thread("sup")));
            // One untimed complex turn and blocking turn through a counting saver.
            auto calls = std::make_shared<boost::json::object>();
            auto trips = std::make_shared<boost::json::object>();
            if (has_saver) {
                auto counter = std::make_shared<counting_saver>(ctx.cp->saver);
                auto counted = supervisor::build(counter);
                const checkpointer* server = ctx.cp->round_trips ? ctx.cp : nullptr;
                drive(*io, supervisor_once(counted, true, counter.get(), calls.get(), server, trips.get()));
            }
            bench_run b;
            b.run = [io, g, has_saver] { return drive(*io, supervisor_once(g, has_saver)); };
            b.detail = [calls, trips] {
                boost::json::object d;
                d["validated"] = "complex, blocking and checked-only paths, checkpoint counts 23/14/16";
                if (!calls->empty()) d["saver_calls_per_turn"] = *calls;
                if (!trips->empty()) d["round_trips_per_turn"] = *trips;
                return d;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
    {
        scenario s;
        s.name = "checkpoint_size";
        s.checkpointers = with_saver;
        s.warmup = 1;
        s.target_seconds = 2;
        s.min_runs = 5;
        s.max_runs = 20;
        s.metrics = {{"bytes_per_checkpoint_chain20", "bytes"}, {"bytes_per_checkpoint_1mb_untouched", "bytes"}};
        s.setup = [](setup_context& ctx) {
            auto io = std::make_shared<boost::asio::io_context>(1);
            auto counter = std::make_shared<counting_saver>(ctx.cp->saver);
            auto small = build_chain<chain_state>(20, counter);
            auto big = build_chain<big_chain_state>(20, counter);
            auto payload = std::make_shared<const std::string>(std::size_t{1} << 20, 'x');
            auto last = std::make_shared<boost::json::object>();
            bench_run b;
            b.run = [io, counter, small, big, payload, last] {
                auto a = drive(*io, measure_size(small, counter.get(), update<chain_state>{}.set<&chain_state::count>(0), 0));
                auto in = update<big_chain_state>{}.set<&big_chain_state::count>(0).set<&big_chain_state::payload>(*payload);
                auto c = drive(*io, measure_size(big, counter.get(), std::move(in), payload->size()));
                (*last)["chain20"] = a.detail;
                (*last)["chain20_1mb_untouched"] = c.detail;
                samples s;
                s["bytes_per_checkpoint_chain20"] = a.per_checkpoint;
                s["bytes_per_checkpoint_1mb_untouched"] = c.per_checkpoint;
                return s;
            };
            b.detail = [last] {
                boost::json::object d;
                d["payload_bytes"] = 1 << 20;
                d["last_run"] = *last;
                return d;
            };
            return b;
        };
        out.push_back(std::move(s));
    }
}

} // namespace stategraph::bench
