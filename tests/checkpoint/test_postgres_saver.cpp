// The PostgreSQL saver against a real server: the conformance suite, dropped connections
// (pg_terminate_backend from a second connection, and a proxy that drops every connection as a
// restarting server would), and a server that stays unreachable.
//
// The server comes from STATEGRAPH_TEST_POSTGRES (a libpq URL; scripts/test starts a private one
// with scripts/pg-server and sets it). Unset: every case here is skipped, saying so.
#define BOOST_TEST_MODULE postgres
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/postgres_saver.hpp>

#include <stategraph/checkpoint/conformance.hpp>

#include "postgres_test_support.hpp"
#include "round_trips.hpp"
#include "tcp_proxy.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <libpq-fe.h>

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace stategraph;
using namespace stategraph::checkpoint;
using namespace stategraph::checkpoint::testing;
using namespace stategraph::checkpoint::pg_testing;
namespace asio = boost::asio;
using cp_t = stategraph::checkpoint::checkpoint;

std::shared_ptr<saver> make_conformance_saver() { return make_saver(options_for(fresh_schema())); }

/// Damages a stored row behind the saver's back: garbage, or one byte changed in the middle.
bool damage_rows(postgres_saver& s, const damage& d) {
    admin a;
    const std::string schema = quoted(s.options().schema);
    const std::string set = d.flip ? "set_byte(value, length(value) / 2, get_byte(value, length(value) / 2) # 1)"
                                   : "convert_to('garbage!', 'UTF8')";
    std::vector<std::string> changed;
    switch (d.what) {
    case part::value: {
        // A value too big for its checkpoint's row, or an array, has a row in stategraph_blobs; a
        // small one is inside `vals` of the row of the checkpoint that wrote it.
        changed = a.query("UPDATE " + schema + ".stategraph_blobs SET value = " + set +
                              " WHERE thread_id = $1 AND ns = $2 AND channel = $3 AND version = $4",
                          {d.thread_id, d.ns, d.channel, d.checkpoint_id});
        if (!changed.empty() && changed.back() != "0") break;
        std::string vset = set;
        for (std::size_t p; (p = vset.find("value")) != std::string::npos;) vset.replace(p, 5, "vals");
        changed = a.query("UPDATE " + schema + ".stategraph_checkpoints SET vals = " + vset +
                              " WHERE thread_id = $1 AND ns = $2 AND id = $3 AND vals IS NOT NULL",
                          {d.thread_id, d.ns, d.checkpoint_id});
        break;
    }
    case part::record: {
        std::string rset = set;
        for (std::size_t p; (p = rset.find("value")) != std::string::npos;) rset.replace(p, 5, "record");
        changed = a.query("UPDATE " + schema + ".stategraph_checkpoints SET record = " + rset +
                              " WHERE thread_id = $1 AND ns = $2 AND id = $3",
                          {d.thread_id, d.ns, d.checkpoint_id});
        break;
    }
    case part::write:
        changed = a.query("UPDATE " + schema + ".stategraph_writes SET value = " + set +
                              " WHERE thread_id = $1 AND ns = $2 AND checkpoint_id = $3 AND channel = $4",
                          {d.thread_id, d.ns, d.checkpoint_id, d.channel});
        break;
    }
    return !changed.empty() && changed.back() != "0";
}

capabilities postgres_capabilities() {
    capabilities c;
    c.open_same_storage = [](saver& first) -> std::shared_ptr<saver> {
        return std::make_shared<postgres_saver>(dynamic_cast<postgres_saver&>(first).options());
    };
    c.exclusive_leases = true;
    c.lease_ttl = std::chrono::seconds(1);
    c.corrupt = [](saver& s, const damage& d) { return damage_rows(dynamic_cast<postgres_saver&>(s), d); };
    return c;
}

[[maybe_unused]] const bool conformance_registered = [] {
    auto* suite = register_suite("postgres_saver_conformance", make_conformance_saver, postgres_capabilities());
    suite->add_precondition(server_configured);
    return true;
}();

/// A run of `steps` checkpoints on thread `t` (each with a pending write), as the engine makes
/// them: every step's put and put_writes must land exactly once, whatever happens to the connections.
std::vector<cp_t> run_steps(saver& s, const std::string& thread, int steps) {
    std::vector<cp_t> cps;
    for (int i = 0; i < steps; ++i) {
        json::object values{{"n", i}};
        if (i == 0) values["big"] = std::string(3000, 'x');
        cps.push_back(next_cp(cps.empty() ? nullptr : &cps.back(), i, i == 0 ? "input" : "loop", values));
        put(s, thread, "", cps.back());
        std::vector<pending_write> w{write_of("task" + std::to_string(i), "node", "n", i + 1)};
        run(s.put_writes(thread, "", cps.back().id, w));
    }
    return cps;
}

/// The history of `thread` is exactly `cps`: no gap, no duplicate, every value and write in place.
void check_history(saver& s, const std::string& thread, const std::vector<cp_t>& cps) {
    auto all = list(s, thread, "", list_options{});
    BOOST_TEST_REQUIRE(all.size() == cps.size());
    for (std::size_t i = 0; i < cps.size(); ++i) {
        const auto& got = all[cps.size() - 1 - i];
        BOOST_TEST(got.cp.id == cps[i].id);
        BOOST_TEST(got.cp.parent_id == cps[i].parent_id);
        BOOST_TEST(got.cp.values.at("n") == static_cast<std::int64_t>(i));
        BOOST_TEST(got.cp.values.at("big") == json::value(std::string(3000, 'x')));
        BOOST_TEST_REQUIRE(got.writes.size() == 1u);
        BOOST_TEST(got.writes[0].value == static_cast<std::int64_t>(i + 1));
    }
}

} // namespace

BOOST_AUTO_TEST_SUITE(postgres_saver_server, *boost::unit_test::precondition(server_configured))

/// pg_terminate_backend from a second connection, again and again while a run writes: every
/// step is retried on a new connection and lands once.
BOOST_AUTO_TEST_CASE(terminated_backends_mid_run) {
    const std::string application = "sg_drop_" + std::to_string(getpid());
    auto o = under_killer(options_for(fresh_schema(), conninfo_named(application)));
    auto s = make_saver(o);
    backend_killer killer(application);
    auto cps = run_steps(*s, "t", 80);
    const int killed = killer.stop();
    BOOST_TEST_MESSAGE("backends terminated during the run: " << killed);
    BOOST_TEST(killed > 0);
    check_history(*s, "t", cps);
    admin a;
    auto rows = a.query("SELECT count(*) FROM " + quoted(o.schema) + ".stategraph_checkpoints WHERE thread_id = 't'");
    BOOST_TEST(rows.at(0) == std::to_string(cps.size()));
}

/// Every connection cut at once (a restarted server, seen from the client), several times during a run.
BOOST_AUTO_TEST_CASE(connections_cut_mid_run) {
    const auto [host, port] = server_address();
    tcp_proxy proxy(host, port);
    auto s = make_saver(options_for(fresh_schema(), conninfo_named("sg_cut", "127.0.0.1", proxy.port())));
    std::vector<cp_t> cps;
    for (int round = 0; round < 4; ++round) {
        auto more = run_steps(*s, "t" + std::to_string(round), 10);
        proxy.drop();
        cps = std::move(more);
        check_history(*s, "t" + std::to_string(round), cps);
        proxy.drop();
    }
}

/// Options for a saver on the schema of `base` whose connections (named `name`) go through
/// `proxy`, retried after 5 ms.
postgres_options through_proxy(const postgres_options& base, const tcp_proxy& proxy, const std::string& name) {
    auto o = options_for(base.schema, conninfo_named(name, "127.0.0.1", proxy.port()));
    o.backoff = std::chrono::milliseconds(5);
    return o;
}

/// break_lease and cache_clear whose first attempt committed but whose answer was lost with the
/// connection: the retry reads the answer kept under the call's id instead of acting again (it
/// found no lease and no entries, and answered "none" and 0, before schema version 2).
BOOST_AUTO_TEST_CASE(retried_calls_keep_their_answers) {
    const auto [host, port] = server_address();
    tcp_proxy proxy(host, port);
    auto holder = make_saver(options_for(fresh_schema()));
    auto s = make_saver(through_proxy(holder->options(), proxy, "sg_answers"));
    check_break_answer_survives_a_cut(*holder, *s, proxy, "WITH gone AS (DELETE FROM stategraph_leases");

    for (int i = 0; i < 3; ++i) run(s->cache_put("ns", "k" + std::to_string(i), i, std::chrono::milliseconds(0)));
    run(s->cache_put("other", "k", 1, std::chrono::milliseconds(0)));
    proxy.cut_answer_to("WITH gone AS (DELETE FROM stategraph_cache");
    BOOST_TEST(run(s->cache_clear({"ns"})) == 3u);
    BOOST_TEST(proxy.cuts() == 2);
    BOOST_TEST(!run(s->cache_get("ns", "k0")).has_value());
    BOOST_TEST(run(s->cache_get("other", "k")).has_value());
    run(s->release("t"));
}

/// An end_call (the checkpoints, the writes and the lease's release in one transaction) whose
/// first attempt committed but whose answer was lost with the connection: the retry finds the
/// lease already given back and still succeeds (it is not refused as a lost lease), everything is
/// stored once, and another saver takes the thread at once. A stale writer's retried end_call is
/// still refused, as a lost lease (its retry meets the new holder's live lease).
BOOST_AUTO_TEST_CASE(a_retried_end_call_whose_first_attempt_committed_succeeds) {
    const auto [host, port] = server_address();
    tcp_proxy proxy(host, port);
    auto other = make_saver(options_for(fresh_schema()));
    auto s = make_saver(through_proxy(other->options(), proxy, "sg_end_call"));
    // The lease's holder fences and releases in one statement on the first try, then apart.
    check_end_call_survives_a_cut(*s, *other, proxy,
                                  "WITH gone AS (DELETE FROM stategraph_leases WHERE thread_id = $1 AND owner = $2");
}

/// acquire_and_get takes the lease and reads the row in one round trip, and the values and
/// writes in one more; a new thread costs the one round trip alone. The saver that stored the
/// thread's newest checkpoint asks for its values and writes in the first round trip already,
/// and uses them when the row read is that checkpoint: one round trip. When another saver wrote
/// since, the guess is dropped and the values are read as usual.
BOOST_AUTO_TEST_CASE(acquire_and_get_is_one_round_trip_before_the_values) {
    auto o = options_for(fresh_schema());
    o.lease_ttl = std::chrono::seconds(60); // no renewal (every third of it) among the round trips counted
    auto s = make_saver(o);
    auto other = make_saver(s->options());
    check_acquire_and_get_round_trips(*s, *other, 1);

    auto reader = make_saver(s->options()); // wrote nothing: no guess
    run(s->acquire("g"));
    auto cp1 = next_cp(nullptr, -1, "input", boost::json::object{{"n", 1}});
    run(s->put("g", "", cp1));
    run(s->put_writes("g", "", cp1.id, {write_of("task1", "node", "n", 2)}));
    run(s->release("g"));
    auto before = reader->round_trips();
    auto got = run(reader->acquire_and_get("g", "", std::nullopt));
    BOOST_TEST(reader->round_trips() - before == 2u);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST_REQUIRE(got->writes.size() == 1u);
    run(reader->release("g"));

    // Another saver stores a newer checkpoint: the first one's guess is stale, and it reads the
    // newer one whole (its values and its writes, none), in the usual two round trips.
    run(reader->acquire("g"));
    auto cp2 = next_cp(&cp1, 0, "loop", boost::json::object{{"n", 5}, {"m", "x"}});
    run(reader->put("g", "", cp2));
    run(reader->release("g"));
    before = s->round_trips();
    got = run(s->acquire_and_get("g", "", std::nullopt));
    BOOST_TEST(s->round_trips() - before == 2u);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp2.id);
    BOOST_TEST(got->cp.values.at("n") == 5);
    BOOST_TEST(got->cp.values.at("m") == "x");
    BOOST_TEST(got->writes.empty());
    run(s->release("g"));
}

namespace {
/// A call as the engine makes it on `s`: its start (the lease and the thread read), then its end
/// (`cps`, a pending write against the newest, the lease given back); `pause` makes that write
/// an `__interrupt__`. Returns what the start read.
std::optional<checkpoint_tuple> call_on(saver& s, const std::string& thread, const std::vector<cp_t>& cps, bool pause) {
    auto got = run(s.acquire_and_get(thread, "", std::nullopt));
    saver::call_end end;
    end.checkpoints = cps;
    end.writes_to = cps.back().id;
    if (pause) end.writes = {write_of("ask", "human", "__interrupt__", "which one?")};
    end.release = true;
    run(s.end_call(thread, "", end));
    return got;
}
} // namespace

/// A call that ends paused at an interrupt leaves the thread's state in its saver's memory; the
/// resume's start by that saver takes its values from there (it reads the row and the pending
/// writes, in its one round trip) and gets exactly what a read from the server gives: whole
/// values, values kept apart (too large for the row), appended chains. Anything another saver
/// stored since (a newer checkpoint, the same checkpoint put again, which changes the row's
/// xmin) makes the resume read the thread from the server; a pending write another saver added
/// is read with the row, always.
BOOST_AUTO_TEST_CASE(a_paused_calls_state_is_kept_for_its_resume) {
    auto o = options_for(fresh_schema());
    o.lease_ttl = std::chrono::seconds(60); // no renewal among the round trips counted
    auto s = make_saver(o);
    auto other = make_saver(o);
    const json::value big(std::string(3000, 'b'));
    auto state_of = [&](saver& reader, const std::string& t) {
        auto got = run(reader.get(t, "", std::nullopt));
        BOOST_TEST_REQUIRE(got.has_value());
        return *got;
    };
    auto same = [](const checkpoint_tuple& a, const checkpoint_tuple& b) {
        BOOST_TEST(a.cp.id == b.cp.id);
        BOOST_TEST(a.cp.values == b.cp.values);
        BOOST_TEST(a.cp.versions == b.cp.versions);
        BOOST_TEST_REQUIRE(a.writes.size() == b.writes.size());
        for (std::size_t i = 0; i < a.writes.size(); ++i) {
            BOOST_TEST(a.writes[i].channel == b.writes[i].channel);
            BOOST_TEST(a.writes[i].value == b.writes[i].value);
        }
    };

    // Turn 1 of a new thread pauses: its state is kept.
    std::vector<cp_t> turn1;
    turn1.push_back(next_cp(nullptr, -1, "input", json::object{{"n", 1}, {"log", json::array{"a"}}, {"big", big}}));
    turn1.push_back(next_cp(&turn1.back(), 0, "loop", json::object{{"n", 2}, {"log", json::array{"b"}}}));
    turn1.back().extends["log"] = turn1[0].id;
    BOOST_TEST(!call_on(*s, "p", turn1, true).has_value());
    BOOST_TEST(s->remembered().threads == 1u);
    BOOST_TEST(s->remembered().recalled == 0u);

    // Its resume: one round trip, the values from memory, equal to the server's.
    auto before = s->round_trips();
    auto resumed = run(s->acquire_and_get("p", "", std::nullopt));
    BOOST_TEST(s->round_trips() - before == 1u);
    BOOST_TEST(s->remembered().recalled == 1u);
    BOOST_TEST(s->remembered().threads == 0u); // used once
    BOOST_TEST_REQUIRE(resumed.has_value());
    BOOST_TEST(resumed->cp.values == (json::object{{"n", 2}, {"log", json::array{"a", "b"}}, {"big", big}}));
    BOOST_TEST_REQUIRE(resumed->writes.size() == 1u);
    BOOST_TEST(resumed->writes[0].channel == "__interrupt__");
    same(*resumed, state_of(*other, "p"));

    // The resumed call pauses again (its state: what it started from and what it wrote), and
    // again its resume takes it from memory.
    std::vector<cp_t> turn2{next_cp(&turn1.back(), 1, "loop", json::object{{"m", "x"}, {"log", json::array{"c"}}})};
    turn2.back().extends["log"] = turn1.back().id;
    saver::call_end end;
    end.checkpoints = turn2;
    end.writes_to = turn2.back().id;
    end.writes = {write_of("ask", "human", "__interrupt__", "and now?")};
    end.release = true;
    run(s->end_call("p", "", end));
    BOOST_TEST(s->remembered().threads == 1u);
    resumed = run(s->acquire_and_get("p", "", std::nullopt));
    BOOST_TEST(s->remembered().recalled == 2u);
    BOOST_TEST_REQUIRE(resumed.has_value());
    BOOST_TEST(resumed->cp.values == (json::object{{"n", 2}, {"log", json::array{"a", "b", "c"}}, {"big", big}, {"m", "x"}}));
    same(*resumed, state_of(*other, "p"));
    // A call that ends without pausing keeps nothing.
    std::vector<cp_t> turn3{next_cp(&turn2.back(), 2, "loop", json::object{{"n", 3}})};
    end.checkpoints = turn3;
    end.writes_to = turn3.back().id;
    end.writes.clear();
    run(s->end_call("p", "", end));
    BOOST_TEST(s->remembered().threads == 0u);

    // Another saver stores `cp` while the thread is paused: the resume reads it from the server.
    auto stored_by_other = [&](const cp_t& cp, std::int64_t n) {
        run(other->acquire("p"));
        put(*other, "p", "", cp);
        run(other->release("p"));
        auto got = run(s->acquire_and_get("p", "", std::nullopt));
        BOOST_TEST(s->remembered().recalled == 2u);
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->cp.id == cp.id);
        BOOST_TEST(got->cp.values.at("n") == n);
        same(*got, state_of(*other, "p"));
        run(s->release("p"));
    };
    // A newer checkpoint ...
    std::vector<cp_t> turn4{next_cp(&turn3.back(), 3, "loop", json::object{{"n", 4}})};
    (void)call_on(*s, "p", turn4, true);
    BOOST_TEST(s->remembered().threads == 1u);
    auto newer = next_cp(&turn4.back(), 4, "update", json::object{{"n", 40}});
    stored_by_other(newer, 40);
    // ... or the paused checkpoint put again, with another value (an upsert: a new xmin).
    std::vector<cp_t> turn5{next_cp(&newer, 5, "loop", json::object{{"n", 5}})};
    (void)call_on(*s, "p", turn5, true);
    auto again = turn5.back();
    again.values = json::object{{"n", 50}};
    stored_by_other(again, 50);

    // A pending write another saver adds to the paused checkpoint is read with the row; the
    // values still come from memory.
    std::vector<cp_t> turn6{next_cp(&again, 6, "loop", json::object{{"n", 6}})};
    (void)call_on(*s, "p", turn6, true);
    run(other->acquire("p"));
    run(other->put_writes("p", "", turn6.back().id, {write_of("side", "tool", "n", 7)}));
    run(other->release("p"));
    resumed = run(s->acquire_and_get("p", "", std::nullopt));
    BOOST_TEST(s->remembered().recalled == 3u);
    BOOST_TEST_REQUIRE(resumed.has_value());
    BOOST_TEST(resumed->writes.size() == 2u);
    same(*resumed, state_of(*other, "p"));
    run(s->release("p"));
}

/// Checkpoints and values go in with plain INSERTs (no ON CONFLICT probe per row): new rows cost
/// one round trip. A batch meeting a row already stored (an id put again, in put_many or in
/// end_call) is refused by the server, undone whole (a ROLLBACK), and sent again as an upsert:
/// three round trips, and the later copy is what is read, with nothing half-written in between.
BOOST_AUTO_TEST_CASE(rows_met_again_are_replaced_after_the_plain_insert_is_refused) {
    auto o = options_for(fresh_schema());
    o.lease_ttl = std::chrono::seconds(60); // no renewal among the round trips counted
    auto s = make_saver(o);
    run(s->acquire("t"));
    std::vector<cp_t> cps;
    cps.push_back(next_cp(nullptr, -1, "input", boost::json::object{{"a", 1}}));
    cps.push_back(next_cp(&cps.back(), 0, "loop", boost::json::object{{"a", 2}, {"b", "x"}}));
    auto before = s->round_trips();
    run(s->put_many("t", "", cps));
    BOOST_TEST(s->round_trips() - before == 1u);

    // The second checkpoint again, its values changed, after a new one: the batch is refused
    // once and stored whole as an upsert.
    auto next = next_cp(&cps.back(), 1, "loop", boost::json::object{{"c", 3}});
    auto again = cps.back();
    again.values["a"] = 20;
    again.metadata["note"] = "rewritten";
    before = s->round_trips();
    run(s->put_many("t", "", std::vector<cp_t>{again, next}));
    BOOST_TEST(s->round_trips() - before == 3u);
    auto got = run(s->get("t", "", again.id));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.metadata.at("note") == "rewritten");
    BOOST_TEST(got->cp.values.at("a") == 20);
    got = run(s->get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == next.id);
    BOOST_TEST(got->cp.values.at("c") == 3);

    // The same through end_call, with its writes and the lease's release in the transaction.
    saver::call_end end;
    auto last = next;
    last.metadata["note"] = "ended";
    const std::vector<cp_t> ending{last};
    end.checkpoints = ending;
    end.writes_to = last.id;
    end.writes.push_back(write_of("task1", "node", "a", 7));
    end.release = true;
    before = s->round_trips();
    run(s->end_call("t", "", end));
    BOOST_TEST(s->round_trips() - before == 3u);
    got = run(s->get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.metadata.at("note") == "ended");
    BOOST_TEST_REQUIRE(got->writes.size() == 1u);
    BOOST_TEST(got->writes[0].value == 7);
    BOOST_TEST(run(s->list("t", "", {})).size() == 3u);
    auto other = make_saver(s->options()); // the lease was given back in the same transaction
    BOOST_TEST(run(other->acquire_and_get("t", "", std::nullopt)).has_value());
    run(other->release("t"));
}

/// A channel stored as appended items (`checkpoint::extends`) reads its links with the rest of
/// the values when the saver met it as a chain before (it wrote it, or read it once): a resume
/// by the saver that wrote it is one round trip (the values of the checkpoint it stored last
/// asked for with the lease and the row), by one that read it once two (the lease and the row,
/// then the values with their links). A saver meeting the chain for the first time needs one
/// more for the links, and not one per link.
BOOST_AUTO_TEST_CASE(appended_channels_are_read_with_their_links_in_one_round_trip) {
    auto o = options_for(fresh_schema());
    o.lease_ttl = std::chrono::seconds(60); // no renewal among the round trips counted
    auto writer = make_saver(o);
    std::vector<cp_t> cps;
    cps.push_back(next_cp(nullptr, 0, "loop", boost::json::object{{"log", boost::json::array{"a"}}, {"n", 1}}));
    for (int i = 1; i < 6; ++i) {
        cps.push_back(next_cp(&cps.back(), i, "loop", boost::json::object{{"log", boost::json::array{std::string(1, char('a' + i))}}}));
        cps.back().extends["log"] = cps[cps.size() - 2].id;
    }
    run(writer->put_many("t", "", cps));
    const boost::json::array whole{"a", "b", "c", "d", "e", "f"};

    auto before = writer->round_trips();
    auto got = run(writer->acquire_and_get("t", "", std::nullopt));
    BOOST_TEST(writer->round_trips() - before == 1u); // the writer asks for the values it stored at once
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("log") == whole);
    run(writer->release("t"));

    auto reader = make_saver(writer->options());
    before = reader->round_trips();
    got = run(reader->acquire_and_get("t", "", std::nullopt));
    BOOST_TEST(reader->round_trips() - before == 3u); // met for the first time: one more, for all the links
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("log") == whole);
    run(reader->release("t"));
    before = reader->round_trips();
    got = run(reader->acquire_and_get("t", "", std::nullopt));
    BOOST_TEST(reader->round_trips() - before == 2u); // and now it knows
    BOOST_TEST(got->cp.values.at("log") == whole);
    BOOST_TEST(got->cp.values.at("n") == 1);
    run(reader->release("t"));
}

/// How many rows of `table` (stategraph_blobs, or stategraph_checkpoints with values inside) thread
/// `thread` has in `schema`.
long rows_of(const std::string& schema, const std::string& table, const std::string& thread) {
    admin a;
    const std::string extra = table == "stategraph_checkpoints" ? " AND vals IS NOT NULL" : "";
    return std::stol(a.query("SELECT count(*) FROM " + quoted(schema) + "." + table + " WHERE thread_id = $1" + extra,
                             {thread})
                         .at(0));
}

/// A checkpoint's own small values, whole or appended items, go inside its row: a step is one row
/// for the server to insert. A value over `inline_bytes` goes to stategraph_blobs, as every value
/// does with `inline_bytes` 0. Either way the saver, and another saver that never wrote the thread,
/// read the same values, stats count them alike, and a copy of the thread reads them too.
BOOST_AUTO_TEST_CASE(a_checkpoints_small_values_live_in_its_row) {
    const json::value big(std::string(5000, 'v'));
    for (const std::size_t inline_bytes : {std::size_t(1024), std::size_t(0)}) {
        BOOST_TEST_CONTEXT("inline_bytes " << inline_bytes) {
            auto o = options_for(fresh_schema());
            o.inline_bytes = inline_bytes;
            auto s = make_saver(o);
            std::vector<cp_t> cps;
            cps.push_back(next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"log", json::array{"x"}}, {"big", big}}));
            cps.push_back(next_cp(&cps.back(), 0, "loop", json::object{{"a", 2}, {"log", json::array{"y"}}}));
            cps.back().extends["log"] = cps[0].id;
            cps.push_back(next_cp(&cps.back(), 1, "loop", json::object{{"b", json::object{{"k", "z"}}}}));
            run(s->put_many("t", "", cps));
            if (inline_bytes > 0) {
                BOOST_TEST(rows_of(o.schema, "stategraph_blobs", "t") == 1); // `big` alone
                BOOST_TEST(rows_of(o.schema, "stategraph_checkpoints", "t") == 3);
            } else {
                BOOST_TEST(rows_of(o.schema, "stategraph_blobs", "t") == 6);
                BOOST_TEST(rows_of(o.schema, "stategraph_checkpoints", "t") == 0);
            }
            const json::object want{{"a", 2}, {"log", json::array{"x", "y"}}, {"big", big}, {"b", json::object{{"k", "z"}}}};
            auto other = make_saver(s->options());
            for (auto* reader : {s.get(), other.get()}) {
                auto got = run(reader->get("t", "", std::nullopt));
                BOOST_TEST_REQUIRE(got.has_value());
                BOOST_TEST(got->cp.values == want);
                auto all = run(reader->list("t", "", {}));
                BOOST_TEST_REQUIRE(all.size() == 3u);
                BOOST_TEST(all[2].cp.values == (json::object{{"a", 1}, {"log", json::array{"x"}}, {"big", big}}));
            }
            const auto st = run(s->stats("t"));
            BOOST_TEST(st.checkpoints == 3u);
            BOOST_TEST(st.blobs == 6u); // every value, wherever it lives
            run(s->copy_thread("t", "t2"));
            auto copied = run(other->get("t2", "", std::nullopt));
            BOOST_TEST_REQUIRE(copied.has_value());
            BOOST_TEST(copied->cp.values == want);
        }
    }
}

/// A chain of appended items longer than the rows read before its newest link (each link inside
/// its checkpoint's row) is read whole, by a saver that meets it for the first time and by one
/// that knows it; and so is a short chain whose links are far older than the long one's.
BOOST_AUTO_TEST_CASE(a_chain_longer_than_the_rows_window_reads_whole) {
    auto o = options_for(fresh_schema());
    auto s = make_saver(o);
    std::vector<cp_t> cps;
    json::array whole, early{"e0", "e1", "e2"};
    // "early": a chain of three links in the first three steps; "log": a chain from step 70 on,
    // more than a window of rows after the first
    cps.push_back(next_cp(nullptr, 0, "loop", json::object{{"early", json::array{"e0"}}}));
    for (int i = 1; i < 200; ++i) {
        json::object writes;
        if (i < 3) writes["early"] = json::array{"e" + std::to_string(i)};
        // every third step writes another channel only: the chain's links are not in every row
        else if (i < 70 || i % 3 == 0) writes["n"] = i;
        else writes["log"] = json::array{i};
        const auto& before = cps.back().versions;
        const auto prev_early = before.at("early");
        const auto prev_log = before.count("log") ? before.at("log") : std::string();
        cps.push_back(next_cp(&cps.back(), i, "loop", writes));
        if (i < 3) cps.back().extends["early"] = prev_early;
        if (writes.contains("log")) {
            if (!prev_log.empty()) cps.back().extends["log"] = prev_log;
            whole.push_back(i);
        }
    }
    run(s->put_many("t", "", cps));
    BOOST_TEST(rows_of(o.schema, "stategraph_blobs", "t") == 0);
    auto reader = make_saver(o);
    for (int round = 0; round < 2; ++round) {
        auto got = run(reader->get("t", "", std::nullopt));
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->cp.values.at("log") == whole);
        BOOST_TEST(got->cp.values.at("early") == early);
        BOOST_TEST(got->cp.values.at("n") == 198);
    }
}

/// prune keeps the newest checkpoints with the values they need: a value inside the row of a
/// checkpoint that goes moves to stategraph_blobs, and nothing else stays.
BOOST_AUTO_TEST_CASE(prune_moves_the_values_kept_out_of_rows_that_go) {
    auto o = options_for(fresh_schema());
    auto s = make_saver(o);
    std::vector<cp_t> cps;
    cps.push_back(next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"b", "x"}, {"log", json::array{"p"}}}));
    cps.push_back(next_cp(&cps.back(), 0, "loop", json::object{{"a", 2}, {"log", json::array{"q"}}}));
    cps.back().extends["log"] = cps[0].id;
    cps.push_back(next_cp(&cps.back(), 1, "loop", json::object{{"c", 3}}));
    run(s->put_many("t", "", cps));
    BOOST_TEST(rows_of(o.schema, "stategraph_blobs", "t") == 0);
    run(s->prune("t", 1));
    // a@cp2, b@cp1 and both links of log moved; cp3's own value stays in its row
    BOOST_TEST(rows_of(o.schema, "stategraph_blobs", "t") == 4);
    BOOST_TEST(rows_of(o.schema, "stategraph_checkpoints", "t") == 1);
    auto reader = make_saver(o);
    auto got = run(reader->get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values ==
               (json::object{{"a", 2}, {"b", "x"}, {"log", json::array{"p", "q"}}, {"c", 3}}));
    BOOST_TEST(run(reader->list("t", "", {})).size() == 1u);
}

/// A schema of version 2 (no `vals`) is migrated when a saver opens it: what it held reads as
/// before, and new checkpoints keep their small values inside their rows.
BOOST_AUTO_TEST_CASE(a_version_2_schema_gains_values_inside_rows) {
    auto o = options_for(fresh_schema());
    o.inline_bytes = 0;
    std::vector<cp_t> cps;
    cps.push_back(next_cp(nullptr, -1, "input", json::object{{"a", 1}}));
    auto first = make_saver(o); // (the schema goes with it, at the end)
    run(first->put_many("t", "", cps));
    admin a;
    a.query("ALTER TABLE " + quoted(o.schema) + ".stategraph_checkpoints DROP COLUMN vals");
    a.query("UPDATE " + quoted(o.schema) + ".stategraph_schema SET version = 2");
    o.inline_bytes = 1024;
    auto s = make_saver(o);
    BOOST_TEST(a.query("SELECT version FROM " + quoted(o.schema) + ".stategraph_schema").at(0) == "3");
    cps.push_back(next_cp(&cps.back(), 0, "loop", json::object{{"a", 2}, {"b", "y"}}));
    run(s->put("t", "", cps.back()));
    BOOST_TEST(rows_of(o.schema, "stategraph_checkpoints", "t") == 1);
    auto reader = make_saver(o);
    auto got = run(reader->get("t", "", cps[0].id));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("a") == 1);
    got = run(reader->get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values == (json::object{{"a", 2}, {"b", "y"}}));
}

/// Skips a case when the tests were not given a way to restart the server.
boost::test_tools::assertion_result restart_configured(boost::unit_test::test_unit_id) {
    const char* cmd = std::getenv("STATEGRAPH_TEST_POSTGRES_RESTART");
    boost::test_tools::assertion_result r(cmd && *cmd);
    if (!r)
        r.message() << "STATEGRAPH_TEST_POSTGRES_RESTART is not set (scripts/test sets it to \"scripts/pg-server restart\"): "
                       "the server is not restarted mid-run";
    return r;
}

/// The real server restarted (fast shutdown: every connection cut, the server away for a moment)
/// while a run writes: the run goes on once it is back, and its history has every step once.
BOOST_AUTO_TEST_CASE(server_restarted_mid_run, *boost::unit_test::precondition(restart_configured)) {
    auto s = make_saver(options_for(fresh_schema()));
    auto before = run_steps(*s, "before", 5);
    std::atomic<int> status{-1};
    std::thread restarter([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
        status = std::system(std::getenv("STATEGRAPH_TEST_POSTGRES_RESTART"));
    });
    std::vector<cp_t> during;
    try {
        during = run_steps(*s, "during", 150); // a few hundred ms: the restart lands inside it
    } catch (...) {
        restarter.join();
        throw;
    }
    restarter.join();
    BOOST_TEST(status.load() == 0);
    check_history(*s, "before", before);
    check_history(*s, "during", during);
}

/// A server that stays away: the call fails after `retry_for` with storage_failure naming the thread.
BOOST_AUTO_TEST_CASE(unreachable_server_names_the_thread) {
    const auto [host, port] = server_address();
    tcp_proxy proxy(host, port);
    auto o = options_for(fresh_schema(), conninfo_named("sg_gone", "127.0.0.1", proxy.port()));
    o.retry_for = std::chrono::milliseconds(1500);
    auto s = make_saver(o);
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    put(*s, "reachable", "", cp1);
    proxy.stop();
    const auto start = std::chrono::steady_clock::now();
    auto cp2 = next_cp(nullptr, 0, "loop", json::object{{"a", 2}});
    auto e = expect_error(errc::storage_failure, [&] { put(*s, "lonely-thread", "", cp2); });
    const auto took = std::chrono::steady_clock::now() - start;
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(has_name(*e, "lonely-thread"));
    BOOST_TEST(contains(e->what(), "lonely-thread"), e->what());
    BOOST_TEST(took >= std::chrono::milliseconds(1400));
    BOOST_TEST(took < std::chrono::seconds(10));
    // Reads fail the same way.
    auto r = expect_error(errc::storage_failure, [&] { (void)get(*s, "reachable", ""); });
    if (r) BOOST_TEST(has_name(*r, "reachable"));
}

/// A server that is not there at all when the saver opens: storage_failure at once.
BOOST_AUTO_TEST_CASE(no_server_at_open) {
    auto o = options_for(fresh_schema(), "host=127.0.0.1 port=1 dbname=x user=x connect_timeout=2");
    o.retry_for = std::chrono::milliseconds(300);
    try {
        postgres_saver s(o);
        BOOST_ERROR("opened a saver without a server");
    } catch (const checkpoint_error& e) {
        BOOST_TEST(e.kind() == errc::storage_failure, e.what());
    }
}

/// The schema version is recorded; a newer one is refused with schema_too_new.
BOOST_AUTO_TEST_CASE(schema_version) {
    const auto schema = fresh_schema();
    {
        auto s = make_saver(options_for(schema));
        admin a;
        BOOST_TEST(a.query("SELECT version FROM " + quoted(schema) + ".stategraph_schema").at(0) ==
                   std::to_string(postgres_saver::schema_version));
        a.query("UPDATE " + quoted(schema) + ".stategraph_schema SET version = 999");
        try {
            postgres_saver again(options_for(schema));
            BOOST_ERROR("opened a schema of a newer version");
        } catch (const checkpoint_error& e) {
            BOOST_TEST(e.kind() == errc::schema_too_new, e.what());
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
