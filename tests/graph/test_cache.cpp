// The node cache (cache.hpp): a hit skips the node and replays its writes, Command targets
// included, streamed as cached; time to live, clear_cache, key functions, the cache kept in the
// checkpointer.
#include <stategraph/cache.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/conformance.hpp>
#include <stategraph/checkpoint/memory_saver.hpp>

#include "run_awaitable.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <sstream>
#include <thread>

namespace sg = stategraph;
using sg::test::run;
using namespace std::chrono_literals;

namespace cache_test {
struct q {
    std::string query;
    int n = 0;
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(q, (), (query, n, log))
inline auto reducers(sg::for_state<q>) { return sg::reducers{sg::reduce<&q::log>(sg::append)}; }

/// A graph START -> lookup -> END whose node counts its calls in `*calls`.
inline sg::state_graph<q> lookup_graph(std::shared_ptr<int> calls, sg::node_options options) {
    sg::state_graph<q> g("search");
    g.add_node(
        "lookup",
        [calls](const q& s) {
            ++*calls;
            std::vector<std::string> line{"answer:" + s.query};
            return sg::update<q>{}.set<&q::log>(std::move(line));
        },
        std::move(options));
    g.add_edge(sg::START, "lookup").add_edge("lookup", sg::END);
    return g;
}

inline sg::update<q> input(std::string query, int n = 0) {
    return sg::update<q>{}.set<&q::query>(std::move(query)).set<&q::n>(n);
}

/// A node cache of the user's own: only the `node_cache` interface, in a map, counting its calls.
/// No checkpoints, threads, leases or graph shapes: the engine needs none of those for a cache.
/// It passes the node-cache conformance checks (registered below).
class map_cache final : public sg::checkpoint::node_cache {
public:
    using clock = std::chrono::steady_clock;
    struct entry {
        boost::json::value value;
        std::optional<clock::time_point> expires;
    };
    boost::asio::awaitable<std::optional<boost::json::value>> cache_get(std::string ns, std::string key) override {
        ++gets;
        auto it = entries.find(ns + "|" + key);
        if (it == entries.end() || (it->second.expires && clock::now() >= *it->second.expires)) co_return std::nullopt;
        co_return it->second.value;
    }
    boost::asio::awaitable<void> cache_put(std::string ns, std::string key, boost::json::value value,
                                           std::chrono::milliseconds ttl) override {
        ++puts;
        entry e{std::move(value), std::nullopt};
        if (ttl.count() > 0) e.expires = clock::now() + ttl;
        entries.insert_or_assign(ns + "|" + key, std::move(e));
        co_return;
    }
    boost::asio::awaitable<std::size_t> cache_clear(std::vector<std::string> namespaces) override {
        std::size_t n = 0;
        for (auto it = entries.begin(); it != entries.end();) {
            const auto ns = it->first.substr(0, it->first.find('|'));
            const bool match = namespaces.empty() || std::find(namespaces.begin(), namespaces.end(), ns) != namespaces.end();
            if (match) {
                it = entries.erase(it);
                ++n;
            } else {
                ++it;
            }
        }
        co_return n;
    }
    std::map<std::string, entry> entries;
    int gets = 0, puts = 0;
};
} // namespace cache_test
using cache_test::q;
using cache_test::input;

// The user's cache passes the node-cache checks every saver passes (the part that needs nothing
// but `node_cache`).
STATEGRAPH_NODE_CACHE_CONFORMANCE(map_cache_conformance, [] { return std::make_shared<cache_test::map_cache>(); })

BOOST_AUTO_TEST_SUITE(node_cache)

BOOST_AUTO_TEST_CASE(a_hit_skips_the_node_and_replays_its_writes) {
    auto calls = std::make_shared<int>(0);
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}}).compile();
    auto first = run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 1);
    auto second = run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 1); // not run again
    BOOST_TEST(second.values.log == (std::vector<std::string>{"answer:zurich"}), boost::test_tools::per_element());
    BOOST_TEST(first.values.log == second.values.log, boost::test_tools::per_element());
    run(app.invoke(input("basel")));
    BOOST_TEST(*calls == 2); // another input, another key
}

BOOST_AUTO_TEST_CASE(without_a_policy_nothing_is_cached) {
    auto calls = std::make_shared<int>(0);
    auto app = cache_test::lookup_graph(calls, {}).compile();
    run(app.invoke(input("zurich")));
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 2);
}

BOOST_AUTO_TEST_CASE(an_entry_expires_after_its_ttl) {
    auto calls = std::make_shared<int>(0);
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{.ttl = 150ms}}).compile();
    run(app.invoke(input("zurich")));
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 1);
    std::this_thread::sleep_for(300ms);
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 2); // expired: ran again
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 2); // and cached again
}

BOOST_AUTO_TEST_CASE(clear_cache_all_or_by_node) {
    auto calls = std::make_shared<int>(0);
    auto g = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}});
    g.add_node("other", [](const q&) { return sg::update<q>{}; });
    g.add_edge("lookup", "other").add_edge("other", sg::END);
    auto app = g.compile();
    run(app.invoke(input("zurich")));
    run(app.invoke(input("basel")));
    BOOST_TEST(*calls == 2);
    BOOST_TEST(run(app.clear_cache(std::vector<std::string>{"other"})) == 0u); // not lookup's entries
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 2);
    BOOST_TEST(run(app.clear_cache()) == 2u);
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 3);
    BOOST_TEST(run(app.clear_cache(std::vector<std::string>{"lookup"})) == 1u);
    run(app.invoke(input("zurich")));
    BOOST_TEST(*calls == 4);
    try {
        run(app.clear_cache(std::vector<std::string>{"lokup"}));
        BOOST_FAIL("an unknown node must be refused");
    } catch (const sg::graph_error& e) {
        BOOST_TEST(e.kind() == sg::errc::unknown_node);
        BOOST_TEST(std::string(e.what()).find("did you mean 'lookup'") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(the_key_function_decides_what_is_the_same_input) {
    auto calls = std::make_shared<int>(0);
    auto by_query = [](const boost::json::value& in) { return std::string(in.at("query").as_string()); };
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{.key = by_query}}).compile();
    run(app.invoke(input("zurich", 1)));
    run(app.invoke(input("zurich", 2))); // n differs; the key ignores it
    BOOST_TEST(*calls == 1);
    run(app.invoke(input("basel", 1)));
    BOOST_TEST(*calls == 2);

    auto whole = std::make_shared<int>(0);
    auto plain = cache_test::lookup_graph(whole, {.cache = sg::cache_policy{}}).compile();
    run(plain.invoke(input("zurich", 1)));
    run(plain.invoke(input("zurich", 2))); // the default key is the whole input
    BOOST_TEST(*whole == 2);
}

BOOST_AUTO_TEST_CASE(cached_updates_are_streamed_marked_cached) {
    auto calls = std::make_shared<int>(0);
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}}).compile();
    for (bool expect_cached : {false, true}) {
        BOOST_TEST_CONTEXT("run " << (expect_cached ? "second" : "first")) {
            std::vector<sg::stream_event> events;
            sg::run_config cfg;
            run(app.stream(input("zurich"), cfg, sg::stream_mode::updates,
                           [&](const sg::stream_event& e) { events.push_back(e); }));
            BOOST_TEST_REQUIRE(events.size() == 1u);
            BOOST_TEST(events[0].node == "lookup");
            BOOST_TEST(events[0].cached == expect_cached);
            BOOST_TEST(events[0].data == (boost::json::object{{"log", boost::json::array{"answer:zurich"}}}));
        }
    }
}

BOOST_AUTO_TEST_CASE(a_cached_command_routes_as_the_node_did) {
    auto calls = std::make_shared<int>(0);
    sg::state_graph<q> g("router");
    g.add_node(
        "pick",
        [calls](const q& s) {
            ++*calls;
            return sg::command<q>{}.go_to(s.query == "left" ? "left" : "right");
        },
        {.ends = {"left", "right"}, .cache = sg::cache_policy{}});
    for (std::string side : {"left", "right"}) {
        g.add_node(side, [side](const q&) {
            std::vector<std::string> line{side};
            return sg::update<q>{}.set<&q::log>(std::move(line));
        });
        g.add_edge(side, sg::END);
    }
    g.add_edge(sg::START, "pick");
    auto app = g.compile();
    auto first = run(app.invoke(input("left")));
    auto second = run(app.invoke(input("left")));
    BOOST_TEST(*calls == 1);
    BOOST_TEST(second.values.log == (std::vector<std::string>{"left"}), boost::test_tools::per_element());
    BOOST_TEST(first.values.log == second.values.log, boost::test_tools::per_element());
    auto right = run(app.invoke(input("right")));
    BOOST_TEST(*calls == 2);
    BOOST_TEST(right.values.log == (std::vector<std::string>{"right"}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_cache_lives_in_the_checkpointer) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto calls = std::make_shared<int>(0);
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}}).compile({.checkpointer = saver});
    sg::run_config cfg;
    cfg.thread_id = "t1";
    run(app.invoke(input("zurich"), cfg));
    // Another compiled graph on the same saver, on another thread, finds the entry.
    auto again = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}}).compile({.checkpointer = saver});
    cfg.thread_id = "t2";
    auto r = run(again.invoke(input("zurich"), cfg));
    BOOST_TEST(*calls == 1);
    BOOST_TEST(r.values.log == (std::vector<std::string>{"answer:zurich"}), boost::test_tools::per_element());
    // The replayed writes are the thread's like any other: in its checkpoint.
    auto state = run(again.get_state("t2"));
    BOOST_TEST(state.values.log == (std::vector<std::string>{"answer:zurich"}), boost::test_tools::per_element());
    // Kept under "<graph>:<node>" in the saver.
    BOOST_TEST(run(saver->cache_clear(std::vector<std::string>{"search:lookup"})) == 1u);
    cfg.thread_id = "t3";
    run(again.invoke(input("zurich"), cfg));
    BOOST_TEST(*calls == 2);
}

BOOST_AUTO_TEST_CASE(graphs_without_a_checkpointer_keep_a_cache_each) {
    auto calls = std::make_shared<int>(0);
    auto g = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}});
    auto a = g.compile();
    auto b = g.compile();
    run(a.invoke(input("zurich")));
    run(b.invoke(input("zurich")));
    BOOST_TEST(*calls == 2); // in process memory, one cache per compiled graph
    run(a.invoke(input("zurich")));
    BOOST_TEST(*calls == 2);
    // compile_options::cache shares one.
    auto shared = std::make_shared<sg::checkpoint::memory_saver>();
    auto c = g.compile({.cache = shared});
    auto d = g.compile({.cache = shared});
    run(c.invoke(input("zurich")));
    run(d.invoke(input("zurich")));
    BOOST_TEST(*calls == 3);
}

BOOST_AUTO_TEST_CASE(a_cache_of_the_users_own_implements_node_cache_alone) {
    auto calls = std::make_shared<int>(0);
    auto cache = std::make_shared<cache_test::map_cache>();
    // with a checkpointer too: compile_options::cache takes precedence for cached outcomes
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{}}).compile({.checkpointer = saver, .cache = cache});
    sg::run_config cfg;
    cfg.thread_id = "t1";
    run(app.invoke(input("zurich"), cfg));
    BOOST_TEST(*calls == 1);
    BOOST_TEST(cache->puts == 1);
    BOOST_TEST(cache->entries.size() == 1u);
    BOOST_TEST(cache->entries.begin()->first.starts_with("search:lookup|"));
    cfg.thread_id = "t2";
    auto second = run(app.invoke(input("zurich"), cfg));
    BOOST_TEST(*calls == 1); // served by the user's cache
    BOOST_TEST(cache->gets == 2);
    BOOST_TEST(second.values.log == (std::vector<std::string>{"answer:zurich"}), boost::test_tools::per_element());
    BOOST_TEST(run(saver->cache_clear(std::vector<std::string>{})) == 0u); // nothing went to the checkpointer's cache
    BOOST_TEST(run(app.clear_cache()) == 1u);       // clear_cache reaches the user's cache
    BOOST_TEST(cache->entries.empty());
}

BOOST_AUTO_TEST_CASE(send_targets_are_cached_by_their_payload) {
    auto calls = std::make_shared<int>(0);
    sg::state_graph<q> g("fan");
    g.add_node("square",
               [calls](const int& x) {
                   ++*calls;
                   std::vector<std::string> line{std::to_string(x * x)};
                   return sg::update<q>{}.set<&q::log>(std::move(line));
               },
               {.cache = sg::cache_policy{}});
    g.add_conditional_edges(
        sg::START,
        [](const q& s) {
            std::vector<sg::send> sends;
            for (int x = 1; x <= s.n; ++x) sends.push_back(sg::send("square", x));
            return sends;
        },
        std::vector<std::string>{"square"});
    g.add_edge("square", sg::END);
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile({.checkpointer = saver});
    sg::run_config cfg;
    cfg.thread_id = "a";
    auto first = run(app.invoke(input("", 3), cfg));
    BOOST_TEST(*calls == 3);
    cfg.thread_id = "b";
    std::vector<sg::stream_event> events;
    auto second = run(app.stream(input("", 4), cfg, sg::stream_mode::updates,
                                 [&](const sg::stream_event& e) { events.push_back(e); }));
    BOOST_TEST(*calls == 4); // only the payload 4 is new
    BOOST_TEST(second.values.log == (std::vector<std::string>{"1", "4", "9", "16"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(events.size() == 4u);
    int cached = 0;
    for (const auto& e : events) cached += e.cached;
    BOOST_TEST(cached == 3);
    // The step's writes, cached or not, are saved with its checkpoint.
    auto state = run(app.get_state("b"));
    BOOST_TEST(state.values.log == second.values.log, boost::test_tools::per_element());
    (void)first;
}

BOOST_AUTO_TEST_CASE(a_throwing_key_function_fails_the_node) {
    auto calls = std::make_shared<int>(0);
    auto bad_key = [](const boost::json::value&) -> std::string { throw std::runtime_error("no key"); };
    auto app = cache_test::lookup_graph(calls, {.cache = sg::cache_policy{.key = bad_key}}).compile();
    try {
        run(app.invoke(input("zurich")));
        BOOST_FAIL("the key function's error must fail the node");
    } catch (const sg::node_error& e) {
        BOOST_TEST(e.node() == "lookup");
        BOOST_TEST(std::string(e.what()).find("no key") != std::string::npos);
    }
    BOOST_TEST(*calls == 0);
}

BOOST_AUTO_TEST_CASE(cached_nodes_are_drawn_so) {
    auto calls = std::make_shared<int>(0);
    auto g = cache_test::lookup_graph(calls, {});
    g.add_node("plain", [](const q&) { return sg::update<q>{}; }, {.use_defaults = false});
    g.add_edge("lookup", "plain").add_edge("plain", sg::END);
    g.set_node_defaults({.cache = sg::cache_policy{}});
    std::ostringstream os;
    g.compile().write_dot(os);
    const std::string dot = os.str();
    BOOST_TEST(dot.find("lookup\\n(cached)") != std::string::npos); // from the defaults
    BOOST_TEST(dot.find("plain\\n(cached)") == std::string::npos);  // opted out
}

BOOST_AUTO_TEST_SUITE_END()
