// The node cache kept in the SQLite checkpointer (issue 12, feature 4): entries written by one
// process are hits in the next; clear_cache from a third removes them.
#include "durable_common.hpp"
#include "durable_graphs.hpp"
#include "durable_processes.hpp"

using namespace durable;

BOOST_AUTO_TEST_SUITE(node_cache_durable)

BOOST_AUTO_TEST_CASE(the_cache_survives_a_new_process_on_the_same_file) {
    temp_dir dir;
    const std::string db = dir.file("cache.db"), counts = dir.file("counters");
    BOOST_REQUIRE_EQUAL(run_child({"cache-run", db, "t1", counts, "7"}), 0);
    BOOST_TEST(graphs::read_counts(counts)["lookup"] == 1);
    BOOST_REQUIRE_EQUAL(run_child({"cache-run", db, "t2", counts, "7"}), 0); // another process, same input
    BOOST_TEST(graphs::read_counts(counts)["lookup"] == 1);                  // a hit: not run again
    BOOST_REQUIRE_EQUAL(run_child({"cache-run", db, "t3", counts, "8"}), 0); // another input
    BOOST_TEST(graphs::read_counts(counts)["lookup"] == 2);

    // This process, on a saver of its own, sees both entries and clears them.
    auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = db});
    auto app = graphs::cache_graph(counts).compile({.checkpointer = saver});
    auto r = run(app.invoke(sg::update<graphs::ask_state>{}.set<&graphs::ask_state::count>(8), thread("t4")));
    BOOST_TEST(r.values.trail == (std::vector<std::string>{"looked up 8"}), boost::test_tools::per_element());
    BOOST_TEST(graphs::read_counts(counts)["lookup"] == 2);
    BOOST_TEST(run(app.clear_cache()) == 2u);
    BOOST_REQUIRE_EQUAL(run_child({"cache-run", db, "t5", counts, "7"}), 0);
    BOOST_TEST(graphs::read_counts(counts)["lookup"] == 3); // cleared: ran again
}

BOOST_AUTO_TEST_SUITE_END()
