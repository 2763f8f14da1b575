#pragma once
// Round-trip counts of the server savers (PostgreSQL, Redis), which both count what they send
// (`round_trips()`).
#include <stategraph/checkpoint/conformance/support.hpp>
#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>
#include <stategraph/core/error.hpp>

#include <boost/json/value.hpp>
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>

namespace stategraph::checkpoint::testing {

/// `s.acquire_and_get` takes the lease and reads the checkpoint in one round trip, and its values
/// and writes in one more (`trips`; a saver that asks for the values of the checkpoint it stored
/// last in the first round trip: 1); a thread with nothing stored costs the one round trip
/// alone. `other` (the same storage) is refused with `thread_busy` meanwhile. Give `s` a long
/// `lease_ttl`: its lease keeper's renewals are round trips too.
template <class Saver>
void check_acquire_and_get_round_trips(Saver& s, saver& other, std::uint64_t trips = 2) {
    run(s.acquire("t"));
    auto cp = next_cp(nullptr, -1, "input", boost::json::object{{"n", 3}});
    run(s.put("t", "", cp));
    run(s.put_writes("t", "", cp.id, {write_of("task1", "node", "n", 4)}));
    run(s.release("t"));
    const auto before = s.round_trips();
    auto got = run(s.acquire_and_get("t", "", std::nullopt));
    BOOST_TEST(s.round_trips() - before == trips);
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("n") == 3);
    BOOST_TEST_REQUIRE(got->writes.size() == 1u);
    BOOST_TEST(got->writes[0].value == 4);
    BOOST_CHECK_EXCEPTION(run(other.acquire_and_get("t", "", std::nullopt)), checkpoint_error,
                          [](const checkpoint_error& e) { return e.kind() == errc::thread_busy; });
    run(s.release("t"));
    const auto empty_before = s.round_trips();
    BOOST_TEST(!run(s.acquire_and_get("new", "", std::nullopt)).has_value());
    BOOST_TEST(s.round_trips() - empty_before == 1u); // nothing stored: no values to read
    run(s.release("new"));
}

} // namespace stategraph::checkpoint::testing
