#define BOOST_TEST_MODULE checkpoint
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

// The saver conformance suite (stategraph/checkpoint/conformance.hpp). The in-memory saver's
// storage is its own object: no second instance, no leases to share, nothing to damage.
STATEGRAPH_SAVER_CONFORMANCE(memory_saver_conformance, [] { return std::make_shared<stategraph::checkpoint::memory_saver>(); })

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

BOOST_AUTO_TEST_SUITE_END()
