#pragma once
/// @file conformance/graph_shapes.hpp
/// @brief The saver conformance checks of graph shapes (put_graph, get_graph, and the older
/// `__graph__` value). Registered by conformance.hpp.

#include <stategraph/checkpoint/conformance/support.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

namespace stategraph::checkpoint::testing {

/// `__graph__` is versioned by the graph signature: one value serves every thread, and it
/// outlives the deletion or pruning of any one of them.
/// put_graph / get_graph: a graph's shape stored once per signature (the first one stays),
/// shared by all threads and kept when they are deleted.
inline void graph_shapes(saver& s) {
    const std::vector<std::string> shape{"START -> a", "a -> END"};
    BOOST_TEST(!run(s.get_graph("sig-1")).has_value());
    run(s.put_graph("sig-1", shape));
    run(s.put_graph("sig-1", std::vector<std::string>{"a different shape"}));
    auto got = run(s.get_graph("sig-1"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == shape);
    run(s.put_graph("sig-2", std::vector<std::string>{}));
    auto empty = run(s.get_graph("sig-2"));
    BOOST_TEST_REQUIRE(empty.has_value());
    BOOST_TEST(empty->empty());
    auto cp = next_cp(nullptr, -1, "input", json::object{{"x", 1}});
    cp.versions["__graph__"] = "sig-1";
    put(s, "uses-graph", "", cp);
    run(s.delete_thread("uses-graph"));
    BOOST_TEST(run(s.get_graph("sig-1")).has_value());
}

/// The older form: the shape sent as a `__graph__` value, versioned by the signature.
inline void shared_graph(saver& s) {
    const std::string sig = "0123456789abcdef";
    const json::array lines{"START -> a", "a -> b [cond]", "b -> END"};
    checkpoint last_g2;
    for (const std::string thread : {"g1", "g2"}) {
        auto cp = next_cp(nullptr, -1, "input", json::object{{"x", 1}, {"__graph__", lines}});
        cp.versions["__graph__"] = sig;
        cp.signature = sig;
        put(s, thread, "", cp);
        auto next = next_cp(&cp, 0, "loop", json::object{{"x", 2}}); // names the graph, does not carry it
        next.signature = sig;
        put(s, thread, "", next);
        last_g2 = next;
    }
    for (const std::string thread : {"g1", "g2"}) {
        BOOST_TEST_CONTEXT("thread " << thread) {
            auto all = list(s, thread, "", list_options{});
            BOOST_TEST_REQUIRE(all.size() == 2u);
            for (const auto& t : all) {
                BOOST_TEST(t.cp.versions.at("__graph__") == sig);
                BOOST_TEST(t.cp.values.at("__graph__") == lines);
                BOOST_TEST(t.cp.signature == sig);
            }
            BOOST_TEST(all[0].cp.values.at("x") == 2);
            BOOST_TEST(run(s.stats(thread)).blobs == 2u); // x twice; the shape is shared, not the thread's
        }
    }
    run(s.delete_thread("g1"));
    BOOST_TEST(!get(s, "g1", "").has_value());
    auto got = get(s, "g2", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "g2", "", last_g2, json::object{{"x", 2}, {"__graph__", lines}});
    run(s.prune("g2", 1));
    got = get(s, "g2", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("__graph__") == lines);

    // A new thread of the same graph, and the deleted thread starting over, read it as well.
    for (const std::string thread : {"g3", "g1"}) {
        auto cp = next_cp(nullptr, -1, "input", json::object{{"x", 9}, {"__graph__", lines}});
        cp.versions["__graph__"] = sig;
        put(s, thread, "", cp);
        got = get(s, thread, "");
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->cp.values.at("__graph__") == lines);
    }
}

} // namespace stategraph::checkpoint::testing
