#pragma once
/// @file conformance/node_cache.hpp
/// @brief The saver conformance checks of the node cache (cache_get, cache_put, cache_clear).
/// Registered by conformance.hpp.

#include <stategraph/checkpoint/conformance/support.hpp>
#include <stategraph/checkpoint/node_cache.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace stategraph::checkpoint::testing {

/// The node cache alone (a `node_cache` of any kind, a saver or not): a miss, then the value put
/// (any JSON, replaced by a later put), kept per namespace, cleared per namespace or all at once
/// with the count of entries removed. `between` runs after the puts, before the clears (`cache`
/// deletes and sweeps threads there).
inline void cache_entries(node_cache& s, const std::function<void()>& between = {}) {
    using namespace std::chrono_literals;
    BOOST_TEST(!run(s.cache_get("g:a", "k1")).has_value());
    const json::value v1 = json::object{{"writes", json::object{{"x", 1}, {"list", json::array{"a", "b"}}}},
                                        {"goto", json::array{"b"}}, {"text", "caf\xc3\xa9 \"q\""}};
    run(s.cache_put("g:a", "k1", v1, 0ms));
    auto got = run(s.cache_get("g:a", "k1"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == v1);
    BOOST_TEST(!run(s.cache_get("g:a", "k2")).has_value());
    BOOST_TEST(!run(s.cache_get("g:b", "k1")).has_value()); // namespaces are apart
    run(s.cache_put("g:a", "k1", json::value(2), 0ms));     // replaced
    got = run(s.cache_get("g:a", "k1"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == json::value(2));
    run(s.cache_put("g:a", "k2", json::value(nullptr), 0ms));
    run(s.cache_put("g:b", "k1", json::value("b"), 0ms));
    got = run(s.cache_get("g:a", "k2"));
    BOOST_TEST_REQUIRE(got.has_value()); // a stored null is a hit, not a miss
    BOOST_TEST(got->is_null());

    if (between) between();

    std::vector<std::string> only_a{"g:a", "g:none"};
    BOOST_TEST(run(s.cache_clear(only_a)) == 2u);
    BOOST_TEST(!run(s.cache_get("g:a", "k1")).has_value());
    BOOST_TEST(!run(s.cache_get("g:a", "k2")).has_value());
    got = run(s.cache_get("g:b", "k1"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(*got == json::value("b"));
    run(s.cache_put("g:c", "k", json::value(3), 0ms));
    BOOST_TEST(run(s.cache_clear(std::vector<std::string>{})) == 2u); // every namespace
    BOOST_TEST(!run(s.cache_get("g:b", "k1")).has_value());
    BOOST_TEST(!run(s.cache_get("g:c", "k")).has_value());
}

/// The node cache of a saver: `cache_entries`, and the cache apart from threads (deleting or
/// sweeping threads leaves it).
inline void cache(saver& s) {
    cache_entries(s, [&] {
        auto cp = next_cp(nullptr, -1, "input", json::object{{"x", 1}});
        put(s, "t", "", cp);
        run(s.delete_thread("t"));
        run(s.sweep(ttl_policy{}));
        BOOST_TEST(run(s.cache_get("g:b", "k1")).has_value());
    });
}

/// Cache entries with a time to live are hits until it passes, then misses; a later put of the
/// same key starts a new time to live; zero keeps an entry for good.
inline void cache_expiry(node_cache& s) {
    using namespace std::chrono_literals;
    run(s.cache_put("g:a", "short", json::value(1), 150ms));
    run(s.cache_put("g:a", "forever", json::value(2), 0ms));
    BOOST_TEST(run(s.cache_get("g:a", "short")).has_value());
    std::this_thread::sleep_for(300ms);
    BOOST_TEST(!run(s.cache_get("g:a", "short")).has_value());
    auto kept = run(s.cache_get("g:a", "forever"));
    BOOST_TEST_REQUIRE(kept.has_value());
    BOOST_TEST(*kept == json::value(2));
    run(s.cache_put("g:a", "short", json::value(3), 60s)); // put again: alive again
    auto again = run(s.cache_get("g:a", "short"));
    BOOST_TEST_REQUIRE(again.has_value());
    BOOST_TEST(*again == json::value(3));
}

/// A second instance on the same storage (another process, or the file opened again) reads the
/// cache the first wrote, its time to live included, and a clear by one is seen by the other.
inline void cache_across_instances(saver& a, const capabilities& caps) {
    using namespace std::chrono_literals;
    run(a.cache_put("g:a", "k", json::object{{"x", 1}}, 0ms));
    run(a.cache_put("g:a", "brief", json::value(1), 200ms));
    {
        auto b = caps.open_same_storage(a);
        BOOST_TEST_REQUIRE(b != nullptr);
        auto got = run(b->cache_get("g:a", "k"));
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(*got == (json::object{{"x", 1}}));
        std::this_thread::sleep_for(400ms);
        BOOST_TEST(!run(b->cache_get("g:a", "brief")).has_value()); // the expiry was stored too
        run(b->cache_put("g:b", "k", json::value(2), 0ms));
    }
    auto from_b = run(a.cache_get("g:b", "k"));
    BOOST_TEST_REQUIRE(from_b.has_value());
    BOOST_TEST(*from_b == json::value(2));
    auto c = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(c != nullptr);
    BOOST_TEST(run(c->cache_clear(std::vector<std::string>{"g:a"})) == 2u);
    BOOST_TEST(!run(a.cache_get("g:a", "k")).has_value());
    BOOST_TEST(run(a.cache_get("g:b", "k")).has_value());
}

} // namespace stategraph::checkpoint::testing
