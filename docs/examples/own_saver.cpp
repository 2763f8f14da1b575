// The saver conformance line of docs/savers.md ("Writing your own saver"), compiled: `my_saver`
// here forwards to the in-memory saver (a saver of your own implements stategraph::checkpoint::saver).
// CTest builds this file (a Boost.Test program; the memory saver's own test runs the suite).
#include <stategraph/checkpoint/forwarding_saver.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

#include <memory>

class my_saver : public stategraph::checkpoint::forwarding_saver {
public:
    my_saver() : forwarding_saver(std::make_shared<stategraph::checkpoint::memory_saver>()) {}
};

// [snippet own_saver_test]
#define BOOST_TEST_MODULE my_saver
#include <boost/test/unit_test.hpp>
#include <stategraph/checkpoint/conformance.hpp>

STATEGRAPH_SAVER_CONFORMANCE(my_saver_conformance, [] { return std::make_shared<my_saver>(); })
// [end]
