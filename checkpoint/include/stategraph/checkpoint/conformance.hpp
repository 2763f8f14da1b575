#pragma once
/// @file conformance.hpp
/// @brief The conformance suite of the saver interface: the behaviour every checkpointer must
/// share, as Boost.Test cases that one line registers for any saver.
///
/// A test-only header: it includes Boost.Test, so include it only from a Boost.Test program and
/// link `Boost::unit_test_framework` (or the CMake target `stategraph::checkpoint_conformance`,
/// which brings both). The library itself never includes it.
///
/// @code
/// #define BOOST_TEST_MODULE my_saver
/// #include <boost/test/unit_test.hpp>
/// #include <stategraph/checkpoint/conformance.hpp>
///
/// STATEGRAPH_SAVER_CONFORMANCE(my_saver_conformance, [] { return std::make_shared<my_saver>(); })
/// @endcode
///
/// This registers the test suite `my_saver_conformance` with one test case per check (`put_get`,
/// `list_filters`, `prune`, `metadata_patch`, `copy_thread`, `rewind_thread`, `list_threads`, `sweep`, `cache`, ...; the list is `checks()`). Every case calls the factory once and runs
/// on that saver alone, so the factory must return a saver on fresh, empty storage; the
/// `std::shared_ptr`'s deleter may clean the storage up (a temporary file, a database schema).
/// An optional third argument, `capabilities`, says what else the saver supports (a second
/// instance on the same storage, leases that exclude other instances, a way for the test to
/// damage stored data); the cases it needs are reported as skipped when it is missing.
/// `register_suite()` is the same as a function, for savers chosen at start-up (it must run before
/// the tests do: from a static initializer or a custom `init_unit_test()`).
///
/// The helpers (`next_cp`, `write_of`, `check_checkpoint`, `expect_error`, `run` from
/// testing/run.hpp, ...) are public for a saver's own extra tests.
///
/// The checks live in conformance/, one header per concern of the saver: support.hpp (the
/// capabilities and the helpers), checkpoint_log.hpp, thread_admin.hpp, node_cache.hpp,
/// graph_shapes.hpp and thread_lease.hpp. This header includes them all and registers them.

#include <stategraph/checkpoint/conformance/support.hpp>
#include <stategraph/checkpoint/conformance/checkpoint_log.hpp>
#include <stategraph/checkpoint/conformance/thread_admin.hpp>
#include <stategraph/checkpoint/conformance/node_cache.hpp>
#include <stategraph/checkpoint/conformance/graph_shapes.hpp>
#include <stategraph/checkpoint/conformance/thread_lease.hpp>

#include <boost/test/unit_test.hpp>

#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::testing {

// -- registration -------------------------------------------------------------------------------

/// @brief One check of the suite: a test case named `name`.
struct check {
    const char* name;
    void (*body)(saver& s, const capabilities& caps);
    /// The capability it needs (named in the skip message), or nullptr.
    const char* needs = nullptr;
    bool (*supported)(const capabilities& caps) = nullptr;
};

/// @brief Every check, in the order they are registered.
inline const std::vector<check>& checks() {
    static const std::vector<check> all{
        {"put_get", [](saver& s, const capabilities&) { put_get(s); }},
        {"put_many_in_order", [](saver& s, const capabilities&) { put_many_in_order(s); }},
        {"end_call", [](saver& s, const capabilities&) { end_call(s); }},
        {"deltas", [](saver& s, const capabilities&) { deltas(s); }},
        {"writes", [](saver& s, const capabilities&) { writes(s); }},
        {"list_filters", [](saver& s, const capabilities&) { list_filters(s); }},
        {"prune", [](saver& s, const capabilities&) { prune(s); }},
        {"prune_keeps_head_writes", [](saver& s, const capabilities&) { prune_keeps_head_writes(s); }},
        {"append_deltas", [](saver& s, const capabilities&) { append_deltas(s); }},
        {"metadata_patch", [](saver& s, const capabilities&) { metadata_patch(s); }},
        {"stats", [](saver& s, const capabilities&) { stats(s); }},
        {"delete_thread", [](saver& s, const capabilities&) { delete_thread(s); }},
        {"copy_thread", [](saver& s, const capabilities&) { copy_thread(s); }},
        {"rewind_thread", [](saver& s, const capabilities&) { rewind_thread(s); }},
        {"list_threads", [](saver& s, const capabilities&) { list_threads(s); }},
        {"sweep", [](saver& s, const capabilities&) { sweep(s); }},
        {"namespaces", [](saver& s, const capabilities&) { namespaces(s); }},
        {"graph_shapes", [](saver& s, const capabilities&) { graph_shapes(s); }},
        {"shared_graph", [](saver& s, const capabilities&) { shared_graph(s); }},
        {"record_round_trip", [](saver& s, const capabilities&) { record_round_trip(s); }},
        {"concurrent", [](saver& s, const capabilities&) { concurrent(s); }},
        {"leases", [](saver& s, const capabilities&) { leases(s); }},
        {"cache", [](saver& s, const capabilities&) { cache(s); }},
        {"cache_expiry", [](saver& s, const capabilities&) { cache_expiry(s); }},
        {"cache_across_instances", cache_across_instances, "open_same_storage",
         [](const capabilities& c) { return bool(c.open_same_storage); }},
        {"second_instance", second_instance, "open_same_storage",
         [](const capabilities& c) { return bool(c.open_same_storage); }},
        {"leases_across_instances", leases_across_instances, "open_same_storage and exclusive_leases",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases; }},
        {"lease_renewal", lease_renewal, "open_same_storage, exclusive_leases and lease_ttl",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases && c.lease_ttl.count() > 0; }},
        {"broken_lease_fences_writes", broken_lease_fences_writes, "open_same_storage and exclusive_leases",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases; }},
        {"acquire_and_get_takes_the_lease", acquire_and_get_takes_the_lease, "open_same_storage and exclusive_leases",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases; }},
        {"end_call_gives_the_lease_back", end_call_gives_the_lease_back, "open_same_storage and exclusive_leases",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases; }},
        {"maintenance_respects_leases", maintenance_respects_leases, "open_same_storage and exclusive_leases",
         [](const capabilities& c) { return c.open_same_storage && c.exclusive_leases; }},
        {"corruption", corruption, "corrupt", [](const capabilities& c) { return bool(c.corrupt); }},
    };
    return all;
}

/// @brief Registers the test suite `name` (inside the current BOOST_AUTO_TEST_SUITE, if any) with
/// one test case per check, each on a saver from `factory`. Checks whose capability is missing
/// are registered too and reported as skipped. Call it before the tests run: from a static
/// initializer (as `STATEGRAPH_SAVER_CONFORMANCE` does) or from `init_unit_test()`.
inline boost::unit_test::test_suite* register_suite(const std::string& name, saver_factory factory,
                                                    capabilities caps = {},
                                                    std::source_location where = std::source_location::current()) {
    namespace ut = boost::unit_test;
    auto* suite = new ut::test_suite(name, where.file_name(), where.line());
    auto shared_caps = std::make_shared<const capabilities>(std::move(caps));
    for (const auto& c : checks()) {
        auto body = c.body;
        auto* tc = ut::make_test_case(
            [factory, shared_caps, body] {
                auto s = factory();
                BOOST_TEST_REQUIRE(bool(s), "the saver factory returned no saver");
                body(*s, *shared_caps);
            },
            c.name, where.file_name(), where.line());
        if (c.supported && !c.supported(*shared_caps)) {
            const std::string reason = std::string("the saver's capabilities lack ") + c.needs;
            tc->add_precondition([reason](ut::test_unit_id) {
                boost::test_tools::assertion_result r(false);
                r.message() << reason;
                return r;
            });
        }
        suite->add(tc);
    }
    ut::framework::current_auto_test_suite().add(suite);
    return suite;
}

/// @brief Makes a `node_cache` on fresh, empty storage (for `register_node_cache_suite`).
using node_cache_factory = std::function<std::shared_ptr<node_cache>()>;

/// @brief Registers the test suite `name` with the node-cache checks that need nothing but the
/// `node_cache` interface (`cache_entries`, `cache_expiry`), each on a cache from `factory`: the
/// suite of a cache of your own that is not a whole saver (`compile_options::cache`).
inline boost::unit_test::test_suite* register_node_cache_suite(const std::string& name, node_cache_factory factory,
                                                               std::source_location where = std::source_location::current()) {
    namespace ut = boost::unit_test;
    auto* suite = new ut::test_suite(name, where.file_name(), where.line());
    const std::pair<const char*, void (*)(node_cache&)> cache_checks[] = {
        {"cache_entries", [](node_cache& c) { cache_entries(c); }},
        {"cache_expiry", [](node_cache& c) { cache_expiry(c); }},
    };
    for (const auto& [check_name, body] : cache_checks) {
        auto* tc = ut::make_test_case(
            [factory, body = body] {
                auto c = factory();
                BOOST_TEST_REQUIRE(bool(c), "the node cache factory returned no cache");
                body(*c);
            },
            check_name, where.file_name(), where.line());
        suite->add(tc);
    }
    ut::framework::current_auto_test_suite().add(suite);
    return suite;
}

} // namespace stategraph::checkpoint::testing

/// @brief Registers the saver conformance suite as the test suite `suite_name`:
/// `STATEGRAPH_SAVER_CONFORMANCE(suite_name, factory)` or `(suite_name, factory, capabilities)`,
/// where `factory()` returns a `std::shared_ptr` to a saver on fresh, empty storage.
#define STATEGRAPH_SAVER_CONFORMANCE(suite_name, ...)                                                         \
    [[maybe_unused]] static ::boost::unit_test::test_suite* const BOOST_JOIN(stategraph_saver_conformance_,     \
                                                                             suite_name) =                      \
        ::stategraph::checkpoint::testing::register_suite(#suite_name, __VA_ARGS__);

/// @brief Registers the node-cache checks as the test suite `suite_name` for a cache of your own:
/// `STATEGRAPH_NODE_CACHE_CONFORMANCE(suite_name, factory)`, where `factory()` returns a
/// `std::shared_ptr` to a `node_cache` on fresh, empty storage.
#define STATEGRAPH_NODE_CACHE_CONFORMANCE(suite_name, factory)                                                \
    [[maybe_unused]] static ::boost::unit_test::test_suite* const BOOST_JOIN(stategraph_node_cache_conformance_, \
                                                                             suite_name) =                      \
        ::stategraph::checkpoint::testing::register_node_cache_suite(#suite_name, factory);
