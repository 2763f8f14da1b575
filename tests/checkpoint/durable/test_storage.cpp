// Storage: checkpoints store only what changed (bytes per node stay flat as another field grows
// to megabytes), retention (keep_last, prune), SQLite files that are corrupt, truncated, not
// SQLite or read-only, and the time per node.
#include "durable_common.hpp"

#include "sqlite_checksum_vfs.hpp" // checkpoint/src: raw edits keep the pages' checksums right

#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <iostream>

using namespace durable;

namespace stor {
struct st {
    std::string big;
    int small = 0;
    int level = 0;
};
BOOST_DESCRIBE_STRUCT(st, (), (big, small, level))

using upd = sg::update<st>;

/// START -> grow -> tick; tick loops 3 times, then grows again, until `sizes` are used up.
/// grow sets `big` to the next size; tick only increments `small`.
sg::state_graph<st> grow_tick_graph(std::vector<std::size_t> sizes, int ticks_per_level = 3) {
    sg::state_graph<st> g("grow_tick");
    g.add_node("grow", [sizes](const st& s) {
        return upd{}.set<&st::big>(std::string(sizes[static_cast<std::size_t>(s.level)], 'x')).set<&st::level>(s.level + 1);
    });
    g.add_node("tick", [](const st& s) { return upd{}.set<&st::small>(s.small + 1); });
    g.add_edge(sg::START, "grow").add_edge("grow", "tick");
    const int levels = static_cast<int>(sizes.size());
    g.add_conditional_edges(
        "tick",
        [levels, ticks_per_level](const st& s) -> std::string {
            if (s.small % ticks_per_level != 0) return "tick";
            return s.level < levels ? "grow" : "end";
        },
        std::map<std::string, std::string>{{"tick", "tick"}, {"grow", "grow"}, {"end", sg::END}});
    return g;
}

/// A list under the append reducer and a counter: each `step` appends one item.
struct lst {
    std::vector<std::string> log;
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(lst, (), (log, n))
inline auto reducers(sg::for_state<lst>) { return sg::reducers{sg::reduce<&lst::log>(sg::append)}; }

/// START -> step (loops until n == total) -> END; step appends "i<n>".
sg::state_graph<lst> append_graph(int total) {
    sg::state_graph<lst> g("append_loop");
    g.add_node("step", [](const lst& s) {
        return sg::update<lst>{}.set<&lst::log>({"i" + std::to_string(s.n)}).set<&lst::n>(s.n + 1);
    });
    g.add_edge(sg::START, "step");
    g.add_conditional_edges(
        "step", [total](const lst& s) -> std::string { return s.n < total ? "step" : "end"; },
        std::map<std::string, std::string>{{"step", "step"}, {"end", sg::END}});
    return g;
}

std::vector<std::string> expected_log(int from, int to) {
    std::vector<std::string> out;
    for (int i = from; i < to; ++i) out.push_back("i" + std::to_string(i));
    return out;
}

std::string writers_of(const sg::state_snapshot<st>& s) {
    std::string out;
    if (const auto* w = s.metadata.if_contains("writers"))
        for (const auto& n : w->as_array()) out += std::string(n.as_string());
    return out;
}
} // namespace stor

namespace {
std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

/// Runs SQL on a file through a separate connection (to damage it on purpose).
void exec_sql(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                                  cp::detail::checksum_vfs()) == SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    BOOST_REQUIRE_MESSAGE(rc == SQLITE_OK, sql << ": " << msg);
}

std::string query_text(const std::string& path, const std::string& sql) {
    sqlite3* db = nullptr;
    BOOST_REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* s = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
        auto p = static_cast<const char*>(sqlite3_column_blob(s, 0));
        out.assign(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, 0)));
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    return out;
}
} // namespace

BOOST_AUTO_TEST_SUITE(storage)

// A checkpoint stores only the channels whose version changed: the bytes written for a node
// that touches one small field stay flat while another field grows from 1 KB to 4 MB.
BOOST_DATA_TEST_CASE(bytes_per_node_stay_flat_as_another_field_grows, savers(), kind) {
    using stor::st;
    saver_env env(kind);
    auto counting = std::make_shared<counting_saver>(env.saver);
    const std::vector<std::size_t> sizes{1u << 10, 1u << 20, 4u << 20};
    auto app = stor::grow_tick_graph(sizes).compile({.checkpointer = counting, .interrupt_after = {"grow", "tick"}});

    // One node per call (a breakpoint after each), measuring what each node made the saver store.
    std::map<int, std::vector<std::size_t>> tick_bytes, tick_stored; // by level
    std::vector<std::size_t> grow_bytes;
    sg::run_result<st> r;
    for (int call = 0; call == 0 || (r.interrupted() && call < 100); ++call) {
        auto bytes0 = counting->bytes();
        auto puts0 = counting->puts();
        auto stored0 = run(counting->stats("t")).bytes;
        if (call == 0) {
            r = run(app.invoke(stor::upd{}, thread("t")));
            // The input checkpoints are not a node's: count from the checkpoint before grow.
            auto h = run(app.get_state_history("t"));
            BOOST_REQUIRE_EQUAL(h.size(), 3u);
            bytes0 = counting->bytes() - counting->last_put_bytes();
            stored0 = 0;
        } else {
            r = run(app.invoke(sg::continue_run, thread("t")));
        }
        auto s = run(app.get_state("t"));
        if (counting->puts() == puts0) continue; // the last call only finds nothing left to run
        auto written = counting->bytes() - bytes0;
        auto stored = run(counting->stats("t")).bytes - stored0;
        BOOST_TEST_MESSAGE("call " << call << ": " << stor::writers_of(s) << " level " << s.values.level << " small "
                                   << s.values.small << " wrote " << written << " stored " << stored);
        if (stor::writers_of(s) == "tick") {
            tick_bytes[s.values.level].push_back(written);
            tick_stored[s.values.level].push_back(stored);
        } else {
            BOOST_TEST(stor::writers_of(s) == "grow");
            grow_bytes.push_back(written);
        }
    }
    BOOST_REQUIRE(!r.interrupted());
    BOOST_TEST(r.values.small == 9);
    BOOST_TEST(r.values.big.size() == sizes.back());
    BOOST_REQUIRE_EQUAL(tick_bytes.size(), 3u);
    std::size_t lo = SIZE_MAX, hi = 0;
    for (const auto& [level, list] : tick_bytes)
        for (auto b : list) lo = std::min(lo, b), hi = std::max(hi, b);
    BOOST_TEST_MESSAGE(kind << ": bytes written per tick node: " << lo << ".." << hi << " (big = 1 KB .. 4 MB); "
                            << "per grow node: " << grow_bytes[0] << ", " << grow_bytes[1] << ", " << grow_bytes[2]);
    std::cout << "[figures] " << kind << ": checkpoint bytes per node touching one int: " << lo << ".." << hi
              << " with a 1 KB / 1 MB / 4 MB other field; stored (saver stats) per tick: "
              << tick_stored[1].front() << " / " << tick_stored[2].front() << " / " << tick_stored[3].front()
              << "; grow nodes: " << grow_bytes[0] << " / " << grow_bytes[1] << " / " << grow_bytes[2] << "\n";
    BOOST_TEST(hi - lo <= 16u);  // flat: only ids and small digits vary
    BOOST_TEST(hi < 2048u);      // and small, with a 4 MB field in the state
    BOOST_TEST(grow_bytes[2] > sizes[2]);
    for (const auto& [level, list] : tick_stored)
        for (auto b : list) BOOST_TEST(b < 64u, "stored bytes of a tick at level " << level << ": " << b);
}

// Issue 25: an input that no node touches is stored once. The input checkpoint carries the
// input's fields (never written before) as their values; the first step's checkpoint names those
// versions instead of storing the values again. History, forks and snapshots read as before.
BOOST_DATA_TEST_CASE(an_untouched_input_is_stored_once, savers(), kind) {
    using stor::st;
    saver_env env(kind);
    sg::state_graph<st> g("tick_once");
    g.add_node("tick", [](const st& s) { return stor::upd{}.set<&st::small>(s.small + 1); });
    g.add_edge(sg::START, "tick").add_edge("tick", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    const std::string payload(1u << 20, 'p');
    auto r = run(app.invoke(stor::upd{}.set<&st::big>(payload), thread("t")));
    BOOST_TEST(r.values.big == payload);
    BOOST_TEST(r.values.small == 1);
    const auto stats = run(env.saver->stats("t"));
    const auto stored = stats.bytes + stats.record_bytes;
    BOOST_TEST_MESSAGE(kind << ": a 1 MiB input stored as " << stats.bytes << " bytes of values and "
                            << stats.record_bytes << " of records");
    BOOST_TEST(stored < payload.size() + payload.size() / 2); // once, not twice

    // History: the input checkpoint shows the state before the input, `__start__` next and the
    // whole input in its metadata; the first step's shows it applied.
    auto h = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(h.size(), 3u); // input, START, tick
    const auto& in = h.back();
    BOOST_TEST(in.step == -1);
    BOOST_TEST(in.next == (std::vector<std::string>{"__start__"}));
    BOOST_TEST(in.values.big.empty());
    const auto* writes = in.metadata.if_contains("writes");
    BOOST_REQUIRE(writes);
    const auto* start = writes->as_object().if_contains("__start__");
    BOOST_REQUIRE(start);
    BOOST_TEST(start->as_object().at("big").as_string() == payload);
    BOOST_TEST(h[1].values.big == payload);
    BOOST_TEST(h[1].next == (std::vector<std::string>{"tick"}));

    // A fork from the input checkpoint applies the input again and runs.
    auto cfg = thread("t");
    cfg.checkpoint_id = in.checkpoint_id;
    auto f = run(app.invoke(sg::continue_run, cfg));
    BOOST_TEST(f.values.big == payload);
    BOOST_TEST(f.values.small == 1);
    BOOST_TEST(run(app.get_state("t")).values.big == payload);

    // A second input on the thread replaces the field (already written: stored as before).
    const std::string second(1000, 'q');
    auto r2 = run(app.invoke(stor::upd{}.set<&st::big>(second), thread("t")));
    BOOST_TEST(r2.values.big == second);
    BOOST_TEST(r2.values.small == 2);
    auto h2 = run(app.get_state_history("t"));
    BOOST_TEST(h2.back().values.big.empty()); // the first input checkpoint still reads as before
}

// A list under the append reducer is stored as the items each step appended (a delta that
// extends the previous version), with a whole copy after a bounded run of deltas and after a
// thread is loaded again; every checkpoint still reads back whole, after pruning too.
BOOST_DATA_TEST_CASE(append_lists_are_stored_as_deltas, savers(), kind) {
    using stor::lst;
    saver_env env(kind);
    auto counting = std::make_shared<counting_saver>(env.saver);
    auto app = stor::append_graph(80).compile({.checkpointer = counting});
    auto t = [] {
        auto cfg = thread("t");
        cfg.recursion_limit = 200;
        return cfg;
    };
    auto r = run(app.invoke(sg::update<lst>{}, t()));
    BOOST_TEST(r.values.log == stor::expected_log(0, 80), boost::test_tools::per_element());

    // Every checkpoint reads back with the whole list as it was then.
    auto history = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(history.size(), 82u); // input, START, 80 steps
    for (const auto& h : history)
        BOOST_TEST(h.values.log == stor::expected_log(0, h.values.n), boost::test_tools::per_element());

    // Stored value bytes grow with the items, not with the square of the list: whole copies of
    // the list at each of the 80 versions would take about 80 * 80 * 5 / 2 = 16,000 bytes.
    auto st = run(env.saver->stats("t"));
    std::size_t whole = 0;
    for (const auto& h : history) whole += json::serialize(json::value_from(h.values.log)).size();
    BOOST_TEST_MESSAGE(kind << ": value bytes " << st.bytes << ", whole lists would be " << whole);
    BOOST_TEST(whole > 15000u);
    BOOST_TEST(st.bytes * 4 < whole);
    BOOST_TEST(st.record_bytes > 0u);
    // compact records: versions, frontier and metadata, and the checksums of the record and its
    // inline value (5 bytes each)
    BOOST_TEST(st.record_bytes < 82u * 74u);

    // Pruning keeps the versions a kept checkpoint's list extends.
    run(env.saver->prune("t", 3));
    auto kept = run(app.get_state_history("t"));
    BOOST_REQUIRE_EQUAL(kept.size(), 3u);
    for (const auto& h : kept) BOOST_TEST(h.values.log == stor::expected_log(0, h.values.n), boost::test_tools::per_element());
    BOOST_TEST(run(env.saver->stats("t")).bytes < st.bytes);

    // The thread goes on after pruning; new items extend the list.
    auto more = run(app.invoke(sg::update<lst>{}.set<&lst::n>(80), t())); // one more step: i80
    BOOST_TEST(more.values.log == stor::expected_log(0, 81), boost::test_tools::per_element());
    auto longer_graph = stor::append_graph(90).compile({.checkpointer = env.saver});
    auto longer = run(longer_graph.invoke(sg::update<lst>{}, t()));
    BOOST_TEST(longer.values.log == stor::expected_log(0, 90), boost::test_tools::per_element());
    BOOST_TEST(run(longer_graph.get_state("t")).values.log == stor::expected_log(0, 90), boost::test_tools::per_element());

    // Stopping after every step (a breakpoint) loads the thread each call: each load starts the
    // next delta from a whole copy, and the list stays right.
    auto stepwise = stor::append_graph(12).compile({.checkpointer = env.saver, .interrupt_after = {"step"}});
    auto s = run(stepwise.invoke(sg::update<lst>{}, thread("steps")));
    for (int call = 0; s.interrupted() && call < 20; ++call) s = run(stepwise.invoke(sg::continue_run, thread("steps")));
    BOOST_TEST(!s.interrupted());
    BOOST_TEST(s.values.log == stor::expected_log(0, 12), boost::test_tools::per_element());
    auto fresh = run(stepwise.get_state("steps"));
    BOOST_TEST(fresh.values.log == stor::expected_log(0, 12), boost::test_tools::per_element());
}

// Retention: keep_last prunes after each call; prune keeps the newest N checkpoints and the
// values they need (even written long before), and the thread continues and resumes.
BOOST_DATA_TEST_CASE(retention_keep_last_and_prune, savers(), kind) {
    using stor::st;
    saver_env env(kind);
    auto app = stor::grow_tick_graph({1000, 2000}, 5).compile({.checkpointer = env.saver});
    auto r = run(app.invoke(stor::upd{}, thread("all")));
    BOOST_TEST(r.values.small == 10);
    auto full = run(app.get_state_history("all"));
    BOOST_TEST(full.size() == 14u); // input, START, grow, 5 ticks, grow, 5 ticks
    auto before = run(env.saver->stats("all"));

    run(env.saver->prune("all", 3));
    auto kept = run(app.get_state_history("all"));
    BOOST_REQUIRE_EQUAL(kept.size(), 3u);
    BOOST_TEST(kept[0].checkpoint_id == full[0].checkpoint_id);
    BOOST_TEST(kept[2].checkpoint_id == full[2].checkpoint_id);
    BOOST_TEST(kept[2].parent_checkpoint_id.empty()); // the oldest kept one has no parent any more
    auto s = run(app.get_state("all"));
    BOOST_TEST(s.values.big.size() == 2000u); // written 6 checkpoints earlier: its value is kept
    BOOST_TEST(s.values.small == 10);
    auto after = run(env.saver->stats("all"));
    BOOST_TEST(after.checkpoints == 3u);
    BOOST_TEST(after.blobs < before.blobs);
    BOOST_TEST(after.bytes < before.bytes);
    // The pruned thread takes new input.
    auto again = run(app.invoke(stor::upd{}.set<&st::level>(0), thread("all")));
    BOOST_TEST(again.values.small == 20);

    // keep_last in the run configuration: after every call at most N checkpoints remain.
    auto cfg = thread("kept");
    cfg.keep_last = 4;
    auto k = run(app.invoke(stor::upd{}, cfg));
    BOOST_TEST(k.values.small == 10);
    BOOST_TEST(run(app.get_state_history("kept")).size() == 4u);
    BOOST_TEST(run(env.saver->stats("kept")).checkpoints == 4u);
}

// Retention on an interrupted thread keeps the pending interrupt and the finished sibling's
// write: the thread resumes and the sibling does not run again.
BOOST_DATA_TEST_CASE(prune_keeps_pending_interrupts, savers(), kind) {
    using stor::st;
    saver_env env(kind);
    counters side;
    sg::state_graph<st> g;
    g.add_node("ask", [&side](const st&, sg::context& ctx) -> boost::asio::awaitable<stor::upd> {
        side.bump("ask");
        auto pending = ctx.interrupt<int>(std::string("n?"));
        int n = co_await std::move(pending);
        co_return stor::upd{}.set<&st::small>(n);
    });
    g.add_node("fill", [&side](const st&) {
        side.bump("fill");
        return stor::upd{}.set<&st::big>(std::string(5000, 'y'));
    });
    g.add_edge(sg::START, "ask").add_edge(sg::START, "fill").add_edge("ask", sg::END).add_edge("fill", sg::END);
    auto app = g.compile({.checkpointer = env.saver});
    auto cfg = thread("t");
    cfg.keep_last = 1;
    auto r = run(app.invoke(stor::upd{}, cfg));
    BOOST_REQUIRE(r.interrupted());
    BOOST_TEST(run(app.get_state_history("t")).size() == 1u);
    auto done = run(app.invoke(sg::resume(6), cfg));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.small == 6);
    BOOST_TEST(done.values.big.size() == 5000u);
    BOOST_TEST(side["fill"] == 1);
    BOOST_TEST(side["ask"] == 2);
}

// SQLite: a damaged row is reported with a typed error naming the thread, channel and file;
// the row is never overwritten; other threads of the file keep working.
BOOST_AUTO_TEST_CASE(sqlite_corrupt_row_is_reported_and_kept) {
    using stor::st;
    saver_env env(saver_kind::sqlite);
    auto app = stor::grow_tick_graph({2000}, 2).compile({.checkpointer = env.saver}); // big: in `blobs`
    run(app.invoke(stor::upd{}, thread("bad")));
    run(app.invoke(stor::upd{}, thread("good")));

    exec_sql(env.db_path, "UPDATE blobs SET value = CAST('{\"trunc' AS BLOB) WHERE thread_id = 'bad' AND channel = 'big'");
    std::string msg;
    std::vector<std::string> names;
    BOOST_TEST(error_of([&] { run(app.get_state("bad")); }, &msg, &names) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(msg.find("'bad'") != std::string::npos, msg);
    BOOST_TEST(msg.find("'big'") != std::string::npos, msg);
    BOOST_TEST(msg.find(env.db_path) != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(app.get_state_history("bad")); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(error_of([&] { run(app.invoke(sg::continue_run, thread("bad"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(error_of([&] { run(app.invoke(stor::upd{}, thread("bad"))); }) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(error_of([&] { run(app.update_state("bad", stor::upd{}.set<&st::small>(1))); }) ==
               sg::errc::corrupt_checkpoint);
    BOOST_TEST(query_text(env.db_path, "SELECT value FROM blobs WHERE thread_id = 'bad' AND channel = 'big'") ==
               "{\"trunc");
    // The other thread of the file is fine.
    BOOST_TEST(run(app.get_state("good")).values.big.size() == 2000u);
    BOOST_TEST(run(app.invoke(stor::upd{}.set<&st::level>(0), thread("good"))).values.small == 4);

    // A damaged checkpoint row (its record cannot be decoded).
    exec_sql(env.db_path, "UPDATE checkpoints SET record = x'01ff' WHERE thread_id = 'good'");
    BOOST_TEST(error_of([&] { run(app.get_state("good")); }, &msg) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(msg.find("record") != std::string::npos, msg);
}

// SQLite: a file that is not a database, or a truncated database, is reported and never
// overwritten.
BOOST_AUTO_TEST_CASE(sqlite_garbage_and_truncated_files) {
    using stor::st;
    temp_dir dir;
    const std::string garbage = dir.file("garbage.db");
    {
        std::ofstream out(garbage, std::ios::binary);
        for (int i = 0; i < 8192; ++i) out.put(static_cast<char>((i * 7919) & 0xff));
    }
    const std::string garbage_bytes = read_file(garbage);
    std::string msg;
    BOOST_TEST(error_of([&] { cp::sqlite_saver s({.path = garbage}); }, &msg) == sg::errc::corrupt_checkpoint);
    BOOST_TEST(msg.find(garbage) != std::string::npos, msg);
    BOOST_TEST(read_file(garbage) == garbage_bytes);

    // A real database with a few threads, closed (WAL folded into the file), then cut short.
    const std::string whole = dir.file("whole.db");
    {
        auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = whole});
        auto app = stor::grow_tick_graph({300000}, 2).compile({.checkpointer = saver});
        for (int i = 0; i < 4; ++i) run(app.invoke(stor::upd{}, thread("t" + std::to_string(i))));
    }
    const std::string truncated = dir.file("truncated.db");
    {
        std::string bytes = read_file(whole);
        BOOST_REQUIRE(bytes.size() > 200000u);
        std::ofstream(truncated, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
    }
    const std::string truncated_bytes = read_file(truncated);
    auto attempt = [&] {
        auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = truncated});
        auto app = stor::grow_tick_graph({300000}, 2).compile({.checkpointer = saver});
        int failures = 0;
        for (int i = 0; i < 4; ++i) {
            auto kind = error_of([&] { run(app.get_state("t" + std::to_string(i))); }, &msg);
            if (kind != sg::errc::ok) {
                ++failures;
                BOOST_TEST((kind == sg::errc::corrupt_checkpoint), "truncated file: " << msg);
            }
        }
        BOOST_TEST(failures > 0, "reading every thread of a file cut in half cannot succeed");
        for (int i = 0; i < 4; ++i) {
            auto k = error_of([&] { run(app.invoke(sg::continue_run, thread("t" + std::to_string(i)))); }, &msg);
            BOOST_TEST_MESSAGE("invoke on truncated thread t" << i << ": " << sg::to_string(k) << " " << msg);
        }
    };
    auto kind = error_of(attempt, &msg);
    BOOST_TEST((kind == sg::errc::ok || kind == sg::errc::corrupt_checkpoint), msg);
    BOOST_TEST(read_file(truncated) == truncated_bytes, "the truncated file was modified");
}

// SQLite: a read-only database serves reads; writes fail with storage_failure and change
// nothing; the last good checkpoint stays readable.
BOOST_AUTO_TEST_CASE(sqlite_read_only_database) {
    using stor::st;
    saver_env env(saver_kind::sqlite);
    auto app = stor::grow_tick_graph({100}, 2).compile({.checkpointer = env.saver});
    run(app.invoke(stor::upd{}, thread("t")));
    const auto history = run(app.get_state_history("t")).size();
    env.saver.reset(); // close the read-write connection
    app = {};

    auto ro = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = env.db_path, .read_only = true});
    auto rapp = stor::grow_tick_graph({100}, 2).compile({.checkpointer = ro});
    auto s = run(rapp.get_state("t"));
    BOOST_TEST(s.values.small == 2);
    BOOST_TEST(run(rapp.get_state_history("t")).size() == history);
    std::string msg;
    BOOST_TEST(error_of([&] { run(rapp.invoke(stor::upd{}, thread("t"))); }, &msg) == sg::errc::storage_failure);
    BOOST_TEST(msg.find(env.db_path) != std::string::npos, msg);
    BOOST_TEST(error_of([&] { run(rapp.invoke(stor::upd{}, thread("new"))); }) == sg::errc::storage_failure);
    BOOST_TEST(error_of([&] { run(rapp.update_state("t", stor::upd{}.set<&st::small>(5))); }) ==
               sg::errc::storage_failure);
    BOOST_TEST(run(rapp.get_state_history("t")).size() == history);
    BOOST_TEST(run(rapp.get_state("t")).values.small == 2);
    BOOST_TEST(run(rapp.get_state_history("new")).empty());
}

// Time per node on SQLite (file, synchronous=normal) and in memory: a chain of ticks, and a
// parallel fan-out where each node's writes are saved on their own.
BOOST_DATA_TEST_CASE(time_per_node, savers(), kind) {
    using stor::st;
    saver_env env(kind);
    const int ticks = 200;
    auto app = stor::grow_tick_graph({64}, ticks).compile({.checkpointer = env.saver});
    auto chain_cfg = thread("chain");
    chain_cfg.recursion_limit = 1000;
    auto t0 = std::chrono::steady_clock::now();
    auto r = run(app.invoke(stor::upd{}, chain_cfg));
    auto chain_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(r.values.small == ticks);
    const double per_node = chain_us / (ticks + 1);

    // The same ticks with a 1 MB field in the state (grow, timed apart, writes it first).
    auto big_app = stor::grow_tick_graph({1u << 20}, 50).compile({.checkpointer = env.saver, .interrupt_after = {"grow"}});
    auto big_cfg = thread("big");
    big_cfg.recursion_limit = 1000;
    t0 = std::chrono::steady_clock::now();
    run(big_app.invoke(stor::upd{}, big_cfg));
    auto grow_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    t0 = std::chrono::steady_clock::now();
    auto big_r = run(big_app.invoke(sg::continue_run, big_cfg));
    auto big_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(big_r.values.small == 50);

    // Fan-out: 4 parallel nodes per step, 25 steps (pending writes per node plus one checkpoint
    // per step), each followed by a join step.
    sg::state_graph<st> g("fan");
    const std::vector<std::string> workers{"w1", "w2", "w3", "w4"};
    for (const auto& n : workers) {
        g.add_node(n, [](const st&) { return stor::upd{}; });
        g.add_edge(sg::START, n).add_edge(n, "join");
    }
    g.add_node("join", [](const st& s) { return stor::upd{}.set<&st::small>(s.small + 1); });
    g.add_conditional_edges(
        "join",
        [workers](const st& s) { return s.small < 25 ? workers : std::vector<std::string>{sg::END}; },
        std::vector<std::string>{"w1", "w2", "w3", "w4", sg::END});
    auto fan = g.compile({.checkpointer = env.saver});
    t0 = std::chrono::steady_clock::now();
    auto cfg = thread("fan");
    cfg.recursion_limit = 1000;
    auto fr = run(fan.invoke(stor::upd{}, cfg));
    auto fan_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    BOOST_TEST(fr.values.small == 25);
    std::cout << "[figures] " << kind << ": " << per_node << " us per node (chain of " << ticks + 1
              << " single-node steps, 64-byte state); " << big_us / 50 << " us per node with a 1 MB field in the state (writing the 1 MB field: " << grow_us / 1000
              << " ms); "
              << "fan-out step of 4 parallel nodes + join: " << fan_us / 25 << " us per step (" << fan_us / 125 << " us per node)\n";
    BOOST_TEST(per_node < 50000.0); // sanity only: 50 ms per node would mean something is badly wrong
}

BOOST_AUTO_TEST_SUITE_END()
