#define BOOST_TEST_MODULE checkpoint
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/checkpoint/forwarding_saver.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

#include <chrono>
#include <cstdio>
#include <type_traits>

// The saver conformance suite (stategraph/checkpoint/conformance.hpp). The in-memory saver's
// storage is its own object: no second instance, no leases to share, nothing to damage.
STATEGRAPH_SAVER_CONFORMANCE(memory_saver_conformance, [] { return std::make_shared<stategraph::checkpoint::memory_saver>(); })
// A forwarding_saver (the base of wrapping savers) must keep every guarantee of the saver it wraps.
STATEGRAPH_SAVER_CONFORMANCE(forwarding_saver_conformance, [] {
    return std::make_shared<stategraph::checkpoint::forwarding_saver>(std::make_shared<stategraph::checkpoint::memory_saver>());
})

BOOST_AUTO_TEST_SUITE(memory_saver)

BOOST_AUTO_TEST_CASE(checkpoint_ids_are_fixed_width_and_increasing) {
    std::string prev;
    for (int i = 0; i < 1000; ++i) {
        auto id = stategraph::checkpoint::new_checkpoint_id();
        BOOST_TEST(id.size() == 11u);
        BOOST_TEST(id.size() <= 15u); // fits the small-string buffer
        BOOST_TEST(id > prev);
        prev = id;
    }
}

BOOST_AUTO_TEST_CASE(checkpoint_ids_tell_their_time) {
    using namespace std::chrono;
    namespace cp = stategraph::checkpoint;
    const auto now = system_clock::now();
    BOOST_TEST((cp::checkpoint_time(cp::checkpoint_id_at(now)) == now));
    const auto id = cp::new_checkpoint_id();
    const auto t = cp::checkpoint_time(id);
    BOOST_TEST_REQUIRE(t.has_value());
    BOOST_TEST((system_clock::now() - *t < minutes(1)));
    const bool in_time_order = cp::checkpoint_id_at(now - hours(1)) < id; // ids sort as their times
    BOOST_TEST(in_time_order);
    // The former form: 20 hex digits of the same nanosecond count.
    char old[32];
    const auto n = duration_cast<nanoseconds>(now.time_since_epoch()).count();
    std::snprintf(old, sizeof old, "%020llx", static_cast<unsigned long long>(n));
    BOOST_TEST((cp::checkpoint_time(old) == now));
    const bool sorts_first = std::string(old) < cp::checkpoint_id_at(now - hours(24 * 365)); // before every new id
    BOOST_TEST(sorts_first);
    BOOST_TEST(!cp::checkpoint_time("not-an-id").has_value());
    BOOST_TEST(!cp::checkpoint_time("").has_value());
}

// The argument structs of the maintenance calls own nothing, so `co_await saver.list_threads({...})`
// and `co_await saver.sweep({...})` are safe under g++ 12; a temporary filter object does not compile.
static_assert(std::is_trivially_destructible_v<stategraph::checkpoint::thread_query>);
static_assert(std::is_trivially_destructible_v<stategraph::checkpoint::ttl_policy>);
static_assert(std::is_constructible_v<stategraph::checkpoint::metadata_filter, const boost::json::object&>);
static_assert(!std::is_constructible_v<stategraph::checkpoint::metadata_filter, boost::json::object&&>);

BOOST_AUTO_TEST_SUITE_END()
