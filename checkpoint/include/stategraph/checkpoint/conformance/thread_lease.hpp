#pragma once
/// @file conformance/thread_lease.hpp
/// @brief The saver conformance checks of thread leases (acquire, release, break_lease): on one
/// instance, across instances on the same storage, renewed while held, fencing the writes of a
/// holder that lost its lease, and respected by the maintenance writes. Registered by conformance.hpp.

#include <stategraph/checkpoint/conformance/support.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace stategraph::checkpoint::testing {

/// The maintenance writes respect leases: `sweep` leaves a thread alone while any saver holds its
/// lease (another instance's or its own: a run is in progress) and counts it; `copy_thread` onto a
/// thread another instance holds is `thread_busy` and stores nothing.
inline void maintenance_respects_leases(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    const auto old = std::chrono::hours(48);
    put(a, "held", "", aged_cp(nullptr, -1, "input", json::object{{"a", 1}}, old));
    put(a, "free", "", aged_cp(nullptr, -1, "input", json::object{{"a", 1}}, old));
    run(a.acquire("held"));
    auto r = run(b->sweep({.older_than = std::chrono::hours(1)}));
    BOOST_TEST(r.expired == 2u);
    BOOST_TEST(r.deleted == 1u);
    BOOST_TEST(r.skipped_busy == 1u);
    BOOST_TEST(get(*b, "held", "").has_value());
    BOOST_TEST(!get(*b, "free", "").has_value());
    r = run(a.sweep({.older_than = std::chrono::hours(1), .action = ttl_action::keep_latest}));
    BOOST_TEST(r.skipped_busy == 1u);

    put(*b, "src", "", next_cp(nullptr, -1, "input", json::object{{"s", 1}}));
    run(a.acquire("dst"));
    auto e = expect_error(errc::thread_busy, [&] { run(b->copy_thread("src", "dst")); });
    if (e) BOOST_TEST(has_name(*e, "dst"));
    BOOST_TEST(!get(a, "dst", "").has_value());
    run(a.copy_thread("src", "dst")); // the holder may
    BOOST_TEST(get(*b, "dst", "").has_value());
    const auto dst_head = get(*b, "dst", "")->cp.id;
    e = expect_error(errc::thread_busy, [&] { (void)run(b->rewind_thread("dst", dst_head)); });
    if (e) BOOST_TEST(has_name(*e, "dst"));
    BOOST_TEST(run(a.rewind_thread("dst", dst_head)) == 0u); // the holder may
    run(a.release("dst"));
    run(a.release("held"));
    r = run(b->sweep({.older_than = std::chrono::hours(1)}));
    BOOST_TEST(r.deleted == 1u);
    BOOST_TEST(r.skipped_busy == 0u);
    BOOST_TEST(!get(a, "held", "").has_value());
}

/// acquire() / release() on one instance: acquiring again renews, several threads can be held,
/// the holder reads and writes as usual, releasing twice (or what was never acquired) is harmless.
inline void leases(saver& s) {
    run(s.acquire("t"));
    run(s.acquire("t"));
    run(s.acquire("u"));
    auto cp = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    put(s, "t", "", cp);
    std::vector<pending_write> w{write_of("task", "node", "a", 2)};
    run(s.put_writes("t", "", cp.id, w));
    auto got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->writes.size() == 1u);
    run(s.prune("t", 1));
    run(s.release("t"));
    run(s.release("t"));
    run(s.release("never"));
    run(s.acquire("t"));
    run(s.delete_thread("t"));
    BOOST_TEST(!get(s, "t", "").has_value());
    run(s.release("t"));
    run(s.release("u"));
}

/// Leases exclude the other instances on the same storage: their acquire, put and delete_thread
/// throw thread_busy naming the thread, their reads go on; release (or destroying the holder)
/// passes the thread on; releasing what another instance holds does nothing.
inline void leases_across_instances(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    auto cp3 = next_cp(&cp2, 2, "loop", json::object{{"a", 3}});
    run(a.acquire("t"));
    run(a.acquire("t"));
    put(a, "t", "", cp1);
    auto e = expect_error(errc::thread_busy, [&] { run(b->acquire("t")); });
    if (e) BOOST_TEST(has_name(*e, "t"));
    expect_error(errc::thread_busy, [&] { put(*b, "t", "", cp2); });
    expect_error(errc::thread_busy, [&] { run(b->delete_thread("t")); });
    auto got = get(*b, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp1.id);

    // Other threads are free.
    run(b->acquire("u"));
    put(*b, "u", "", next_cp(nullptr, 0, "loop", json::object{{"u", 1}}));
    expect_error(errc::thread_busy, [&] { run(a.acquire("u")); });

    run(b->release("t")); // not b's: no effect
    expect_error(errc::thread_busy, [&] { run(b->acquire("t")); });
    run(a.release("t"));
    run(b->acquire("t"));
    put(*b, "t", "", cp2);
    expect_error(errc::thread_busy, [&] { run(a.acquire("t")); });
    expect_error(errc::thread_busy, [&] { put(a, "t", "", cp3); });
    BOOST_TEST(get(a, "t", "")->cp.id == cp2.id);
    run(b->release("t"));
    run(a.acquire("t"));
    put(a, "t", "", cp3);
    run(a.release("t"));

    // Destroying an instance releases its leases.
    b.reset();
    run(a.acquire("u"));
    run(a.release("u"));
}

/// A held lease is renewed by the saver itself, however long the holder goes without writing
/// (a node running for minutes): another instance stays out well past the time to live.
inline void lease_renewal(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    run(a.acquire("t"));
    std::this_thread::sleep_for(caps.lease_ttl * 3);
    expect_error(errc::thread_busy, [&] { run(b->acquire("t")); });
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    expect_error(errc::thread_busy, [&] { put(*b, "t", "", cp1); });
    put(a, "t", "", cp1); // still the holder: its write is stored
    run(a.release("t"));
    run(b->acquire("t"));
    run(b->release("t"));
}

/// Writes are fenced: once an instance's lease was taken over (here broken by an operator, as
/// after a frozen process outlived its lease), that instance's writes on the thread are refused
/// with lease_lost and nothing of them is stored; the new holder writes on.
inline void broken_lease_fences_writes(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    BOOST_TEST(!run(b->break_lease("t")).has_value()); // nothing to break
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    auto cp3 = next_cp(&cp2, 2, "loop", json::object{{"a", 3}});
    run(a.acquire("t"));
    put(a, "t", "", cp1);
    auto holder = run(b->break_lease("t"));
    BOOST_TEST(holder.has_value());
    run(b->acquire("t"));

    // `a` still believes it holds the thread: every write it makes there is refused.
    auto e = expect_error(errc::lease_lost, [&] { put(a, "t", "", cp2); });
    if (e) BOOST_TEST(has_name(*e, "t"));
    std::vector<pending_write> w{write_of("task", "node", "a", 9)};
    expect_error(errc::lease_lost, [&] { run(a.put_writes("t", "", cp1.id, w)); });
    expect_error(errc::lease_lost, [&] { run(a.prune("t", 1)); });
    // ... a batch of checkpoints too (async durability's put_many): none of it is stored.
    const std::vector<checkpoint> batch{cp2, cp3};
    expect_error(errc::lease_lost, [&] { run(a.put_many("t", "", batch)); });
    auto got = get(*b, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp1.id);
    BOOST_TEST(got->writes.empty());

    // ... and a call's end (end_call): nothing of it is stored, and the new lease stays.
    saver::call_end end;
    end.checkpoints = batch;
    end.writes_to = cp3.id;
    end.writes = {write_of("task", "node", "a", 9)};
    end.release = true;
    expect_error(errc::lease_lost, [&] { run(a.end_call("t", "", end)); });
    BOOST_TEST(get(*b, "t", "")->cp.id == cp1.id);
    expect_error(errc::thread_busy, [&] { run(a.acquire("t")); });

    // The new holder writes on; the old one's release leaves the new lease alone.
    put(*b, "t", "", cp2);
    run(a.release("t"));
    expect_error(errc::thread_busy, [&] { run(a.acquire("t")); });
    run(b->release("t"));
    // A lease taken afresh is not fenced any more.
    run(a.acquire("t"));
    put(a, "t", "", cp3);
    BOOST_TEST(get(*b, "t", "")->cp.id == cp3.id);
    run(a.release("t"));
}

/// acquire_and_get: the lease taken and the checkpoint read together; another instance is then
/// refused; while another holds the thread it throws `thread_busy` and reads nothing.
inline void acquire_and_get_takes_the_lease(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    BOOST_TEST(!run(a.acquire_and_get("t", "", std::nullopt)).has_value()); // a new thread
    expect_error(errc::thread_busy, [&] { run(b->acquire("t")); });
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    put(a, "t", "", cp1);
    put(a, "t", "", cp2);
    run(a.release("t"));
    auto got = run(b->acquire_and_get("t", "", cp1.id));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp1.id);
    BOOST_TEST(got->cp.values.at("a") == 1);
    auto e = expect_error(errc::thread_busy, [&] { run(a.acquire_and_get("t", "", std::nullopt)); });
    if (e) BOOST_TEST(has_name(*e, "t"));
    expect_error(errc::thread_busy, [&] { put(a, "t", "", next_cp(&cp2, 2, "loop", json::object{{"a", 3}})); });
    run(b->release("t"));
    got = run(a.acquire_and_get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp2.id);
    run(a.release("t"));
}

/// end_call with `release`: the writes and the lease's end together; another instance takes the
/// thread at once. Without `release` the lease stays held. A failed end_call keeps the lease.
inline void end_call_gives_the_lease_back(saver& a, const capabilities& caps) {
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"a", 1}});
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"a", 2}});
    run(a.acquire("t"));
    std::vector<checkpoint> first{cp1};
    saver::call_end keep;
    keep.checkpoints = first;
    run(a.end_call("t", "", keep)); // release false: still a's
    expect_error(errc::thread_busy, [&] { run(b->acquire("t")); });
    std::vector<checkpoint> second{cp2};
    saver::call_end end;
    end.checkpoints = second;
    end.writes_to = cp2.id;
    end.writes = {write_of("task", "node", "a", 3)};
    end.release = true;
    run(a.end_call("t", "", end));
    run(b->acquire("t")); // given back with the writes
    auto got = get(*b, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp2.id);
    BOOST_TEST(got->writes.size() == 1u);
    run(b->release("t"));
}

} // namespace stategraph::checkpoint::testing
