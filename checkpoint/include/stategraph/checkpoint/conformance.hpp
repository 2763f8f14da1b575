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

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>
#include <stategraph/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::testing {

namespace json = boost::json;

// -- what a saver supports beyond the interface -------------------------------------------------

/// @brief Which part of a stored checkpoint `capabilities::corrupt` damages.
enum class part {
    value,  ///< the stored value of `channel` at version `checkpoint_id` (its own blob, or its row)
    record, ///< the checkpoint's own record (versions, frontier, metadata)
    write,  ///< the pending write on `channel` saved against `checkpoint_id`
};

/// @brief Where to damage stored data (see `capabilities::corrupt`).
struct damage {
    part what = part::value;
    std::string thread_id;
    std::string ns;
    std::string checkpoint_id;
    std::string channel; ///< for `part::value` and `part::write`
    /// Change one byte in the middle of the stored bytes (a failing disk, a bad edit) rather than
    /// replace them with garbage: the damaged bytes may still be well-formed, so only a checksum
    /// tells.
    bool flip = false;
};

/// @brief What a saver supports beyond the interface; the checks that need a capability are
/// skipped (reported as such) when it is missing.
struct capabilities {
    /// A second saver on the same storage as `first` (another connection: what another process
    /// would see). It is destroyed before `first`. Empty: each instance has storage of its own
    /// (the in-memory saver). Needed by `second_instance` and `leases_across_instances`.
    std::function<std::shared_ptr<saver>(saver& first)> open_same_storage;
    /// `acquire()` takes a lease the other instances see: their `acquire`, `put` and
    /// `delete_thread` on that thread throw `checkpoint_error(thread_busy)` until it is released
    /// or its holder is destroyed; reads are never refused. Needs `open_same_storage`.
    bool exclusive_leases = false;
    /// The time to live of the leases of the savers the factory and `open_same_storage` make,
    /// when it is short enough to wait out in a test (a second or so): `lease_renewal` holds a
    /// lease for several times it. Zero: `lease_renewal` is skipped.
    std::chrono::milliseconds lease_ttl{0};
    /// Damages what `s` stored (behind its back, as a failing disk or a foreign writer would), so
    /// that reading it must throw `checkpoint_error(corrupt_checkpoint)`. Returns false when it
    /// cannot damage that part (that part is then skipped). Empty: `corruption` is skipped.
    std::function<bool(saver& s, const damage& where)> corrupt;
};

/// @brief Makes the saver one check runs on: fresh, empty storage each call.
using saver_factory = std::function<std::shared_ptr<saver>()>;

// -- helpers ------------------------------------------------------------------------------------

/// The checkpoint that follows `prev` (nullptr: the first), writing the channels of `writes`.
inline checkpoint next_cp(const checkpoint* prev, std::int64_t step, const std::string& source,
                          const json::object& writes) {
    checkpoint cp;
    cp.id = new_checkpoint_id();
    cp.parent_id = prev ? prev->id : "";
    cp.step = step;
    cp.source = source;
    if (prev) cp.versions = prev->versions;
    for (const auto& [channel, value] : writes) cp.versions[std::string(channel)] = cp.id;
    cp.values = writes;
    json::array frontier;
    frontier.emplace_back("node_" + std::to_string(step + 1));
    cp.frontier = std::move(frontier);
    cp.metadata["step"] = step;
    cp.metadata["source"] = source;
    cp.signature = "sig-1";
    return cp;
}

inline std::optional<checkpoint_tuple> get(saver& s, const std::string& thread, const std::string& ns,
                                           std::optional<std::string> id = std::nullopt) {
    return run(s.get(thread, ns, std::move(id)));
}
inline std::vector<checkpoint_tuple> list(saver& s, const std::string& thread, const std::string& ns,
                                          list_options options) {
    return run(s.list(thread, ns, std::move(options)));
}
inline void put(saver& s, const std::string& thread, const std::string& ns, const checkpoint& cp) {
    run(s.put(thread, ns, cp));
}
inline pending_write write_of(const std::string& task_id, const std::string& task_name, const std::string& channel,
                              json::value value) {
    pending_write w;
    w.task_id = task_id;
    w.task_name = task_name;
    w.channel = channel;
    w.value = std::move(value);
    return w;
}
inline std::vector<std::string> ids_of(const std::vector<checkpoint_tuple>& ts) {
    std::vector<std::string> out;
    for (const auto& t : ts) out.push_back(t.cp.id);
    return out;
}

/// `got` is `want` (as stored: its fields) holding all of `values`.
inline void check_checkpoint(const checkpoint_tuple& got, const std::string& thread, const std::string& ns,
                             const checkpoint& want, const json::object& values) {
    BOOST_TEST(got.thread_id == thread);
    BOOST_TEST(got.ns == ns);
    BOOST_TEST(got.cp.id == want.id);
    BOOST_TEST(got.cp.parent_id == want.parent_id);
    BOOST_TEST(got.cp.step == want.step);
    BOOST_TEST(got.cp.source == want.source);
    BOOST_TEST((got.cp.versions == want.versions));
    BOOST_TEST(got.cp.values == values);
    BOOST_TEST(got.cp.frontier == want.frontier);
    BOOST_TEST(got.cp.metadata == want.metadata);
    BOOST_TEST(got.cp.signature == want.signature);
}


/// Runs `f`, which must throw `checkpoint_error` with `code`; returns it (nullopt when it did not).
template <class F>
std::optional<checkpoint_error> expect_error(errc code, F&& f) {
    try {
        f();
    } catch (const checkpoint_error& e) {
        BOOST_TEST_MESSAGE(to_string(e.kind()) << ": " << e.what());
        BOOST_CHECK_MESSAGE(e.kind() == code,
                            "expected " << to_string(code) << ", got " << to_string(e.kind()) << ": " << e.what());
        return e;
    } catch (const std::exception& e) {
        BOOST_ERROR("expected checkpoint_error " << to_string(code) << ", got " << e.what());
        return std::nullopt;
    }
    BOOST_ERROR("expected checkpoint_error " << to_string(code) << ", nothing was thrown");
    return std::nullopt;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
/// The error names `name` (a thread, channel or node) among the names it carries.
inline bool has_name(const graph_error& e, const std::string& name) {
    return std::find(e.names().begin(), e.names().end(), name) != e.names().end();
}

// -- the checks ---------------------------------------------------------------------------------
// Each takes a fresh, empty saver.

/// put / get latest / get by id / missing -> nullopt / re-put replaces.
inline void put_get(saver& s) {
    BOOST_TEST(!get(s, "t", "").has_value());

    auto cp1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"b", "x"}});
    cp1.versions["never"] = ""; // a channel not written yet: no value
    put(s, "t", "", cp1);
    auto got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp1, json::object{{"a", 1}, {"b", "x"}});
    BOOST_TEST(got->writes.empty());

    auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"a", 2}});
    put(s, "t", "", cp2);
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp2, json::object{{"a", 2}, {"b", "x"}});

    got = get(s, "t", "", cp1.id);
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp1, json::object{{"a", 1}, {"b", "x"}});

    BOOST_TEST(!get(s, "t", "", std::string("ffffffffffffffffffff")).has_value());
    BOOST_TEST(!get(s, "t", "", std::string("")).has_value());
    BOOST_TEST(!get(s, "other", "").has_value());
    BOOST_TEST(!get(s, "other", "", cp1.id).has_value());
    BOOST_TEST(!get(s, "t", "sub").has_value());

    // Putting the same id again replaces the checkpoint.
    auto again = cp2;
    again.values = json::object{};
    again.metadata["note"] = "rewritten";
    put(s, "t", "", again);
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.metadata.at("note") == "rewritten");
    BOOST_TEST(got->cp.values.at("a") == 2);
}

/// Values are reassembled from deltas: a channel written once still shows later.
inline void deltas(saver& s) {
    json::object odd{{"unicode", "h\xc3\xa9llo \xe2\x9c\x93"},
                     {"escapes", "quote\" backslash\\ newline\n tab\t ctl\x01"},
                     {"i64min", std::numeric_limits<std::int64_t>::min()},
                     {"u64max", std::numeric_limits<std::uint64_t>::max()},
                     {"dbl", 0.1},
                     {"null", nullptr},
                     {"bool", true},
                     {"empty_s", ""},
                     {"empty_o", json::object{}},
                     {"empty_a", json::array{}}};
    auto cp1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"odd", odd}});
    auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"b", json::array{1, 2}}});
    auto cp3 = next_cp(&cp2, 1, "loop", json::object{{"a", 3}, {"c", "new"}});
    for (const auto* cp : {&cp1, &cp2, &cp3}) put(s, "t", "", *cp);

    auto got3 = get(s, "t", "");
    BOOST_TEST_REQUIRE(got3.has_value());
    check_checkpoint(*got3, "t", "", cp3,
                     json::object{{"a", 3}, {"odd", odd}, {"b", json::array{1, 2}}, {"c", "new"}});
    BOOST_TEST(got3->cp.versions.at("odd") == cp1.id);
    BOOST_TEST(got3->cp.versions.at("b") == cp2.id);
    BOOST_TEST(got3->cp.versions.at("a") == cp3.id);
    BOOST_TEST(got3->cp.values.at("odd").at("u64max").is_uint64());
    BOOST_TEST(got3->cp.values.at("odd").at("i64min").as_int64() == std::numeric_limits<std::int64_t>::min());

    auto got2 = get(s, "t", "", cp2.id);
    BOOST_TEST_REQUIRE(got2.has_value());
    check_checkpoint(*got2, "t", "", cp2, json::object{{"a", 1}, {"odd", odd}, {"b", json::array{1, 2}}});

    auto got1 = get(s, "t", "", cp1.id);
    BOOST_TEST_REQUIRE(got1.has_value());
    check_checkpoint(*got1, "t", "", cp1, json::object{{"a", 1}, {"odd", odd}});
}

/// put_writes: attached to their checkpoint, in order, a task's channel write replaced in place.
inline void writes(saver& s) {
    auto cp1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}});
    put(s, "t", "", cp1);
    std::vector<pending_write> first{write_of("task1", "n1", "a", 1), write_of("task1", "n1", "b", 2)};
    run(s.put_writes("t", "", cp1.id, first));
    std::vector<pending_write> second{write_of("task2", "n2", "a", 3)};
    run(s.put_writes("t", "", cp1.id, second));
    std::vector<pending_write> rerun{write_of("task1", "n1", "a", json::object{{"v", 10}})};
    run(s.put_writes("t", "", cp1.id, rerun));
    run(s.put_writes("t", "", cp1.id, std::vector<pending_write>{}));

    auto check = [&](const checkpoint_tuple& t) {
        BOOST_TEST_REQUIRE(t.writes.size() == 3u);
        BOOST_TEST(t.writes[0].task_id == "task1");
        BOOST_TEST(t.writes[0].task_name == "n1");
        BOOST_TEST(t.writes[0].channel == "a");
        BOOST_TEST(t.writes[0].value == (json::object{{"v", 10}}));
        BOOST_TEST(t.writes[1].task_id == "task1");
        BOOST_TEST(t.writes[1].channel == "b");
        BOOST_TEST(t.writes[1].value == 2);
        BOOST_TEST(t.writes[2].task_id == "task2");
        BOOST_TEST(t.writes[2].task_name == "n2");
        BOOST_TEST(t.writes[2].channel == "a");
        BOOST_TEST(t.writes[2].value == 3);
    };
    auto got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check(*got);

    auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"a", 2}});
    put(s, "t", "", cp2);
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->writes.empty());
    got = get(s, "t", "", cp1.id);
    BOOST_TEST_REQUIRE(got.has_value());
    check(*got);
    auto listed = list(s, "t", "", list_options{});
    BOOST_TEST_REQUIRE(listed.size() == 2u);
    BOOST_TEST(listed[0].writes.empty());
    check(listed[1]);

    // Writes are per (thread, namespace).
    auto sub = next_cp(nullptr, -1, "input", json::object{});
    sub.id = cp1.id;
    put(s, "t", "sub", sub);
    got = get(s, "t", "sub");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->writes.empty());
}

/// list(): newest first, with before / limit / source / step filters.
inline void list_filters(saver& s) {
    const std::vector<std::pair<std::int64_t, std::string>> shape{
        {-1, "input"}, {0, "loop"}, {1, "loop"}, {2, "update"}, {3, "loop"}};
    std::vector<checkpoint> cps;
    for (const auto& [step, source] : shape) {
        cps.push_back(next_cp(cps.empty() ? nullptr : &cps.back(), step, source, json::object{{"n", step}}));
        put(s, "t", "", cps.back());
    }
    std::vector<pending_write> w{write_of("task", "node", "n", 99)};
    run(s.put_writes("t", "", cps[2].id, w));
    auto ids = [&](std::initializer_list<int> idx) {
        std::vector<std::string> out;
        for (int i : idx) out.push_back(cps[static_cast<std::size_t>(i)].id);
        return out;
    };

    auto all = list(s, "t", "", list_options{});
    BOOST_TEST(ids_of(all) == ids({4, 3, 2, 1, 0}), boost::test_tools::per_element());
    for (std::size_t i = 0; i < all.size(); ++i) {
        const auto& want = cps[4 - i];
        check_checkpoint(all[i], "t", "", want, json::object{{"n", want.step}});
        BOOST_TEST(all[i].writes.size() == (i == 2 ? 1u : 0u));
    }

    list_options o;
    o.before = cps[3].id;
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({2, 1, 0}), boost::test_tools::per_element());
    o = {};
    o.limit = 2;
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({4, 3}), boost::test_tools::per_element());
    o = {};
    o.source = "loop";
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({4, 2, 1}), boost::test_tools::per_element());
    o = {};
    o.step = 2;
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({3}), boost::test_tools::per_element());
    o = {};
    o.step = -1;
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({0}), boost::test_tools::per_element());
    o = {};
    o.source = "loop";
    o.limit = 2;
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({4, 2}), boost::test_tools::per_element());
    o = {};
    o.before = cps[4].id;
    o.source = "loop";
    BOOST_TEST(ids_of(list(s, "t", "", o)) == ids({2, 1}), boost::test_tools::per_element());
    o = {};
    o.before = cps[0].id;
    BOOST_TEST(list(s, "t", "", o).empty());
    o = {};
    o.limit = 0;
    BOOST_TEST(list(s, "t", "", o).empty());
    o = {};
    o.source = "fork";
    BOOST_TEST(list(s, "t", "", o).empty());
    BOOST_TEST(list(s, "nobody", "", list_options{}).empty());
    BOOST_TEST(list(s, "t", "sub", list_options{}).empty());
}

/// prune(): keeps the newest N per namespace and the blobs they need; stats shrink.
inline void prune(saver& s) {
    const std::string big(10000, 'B');
    std::vector<checkpoint> cps;
    cps.push_back(next_cp(nullptr, -1, "input", json::object{{"big", big}, {"small", 0}}));
    for (int i = 1; i <= 5; ++i) cps.push_back(next_cp(&cps.back(), i - 1, "loop", json::object{{"small", i}}));
    for (const auto& cp : cps) put(s, "t", "", cp);
    std::vector<pending_write> w0{write_of("a", "n", "small", 100)};
    run(s.put_writes("t", "", cps[0].id, w0));
    std::vector<pending_write> w3{write_of("a", "n", "small", 103)};
    run(s.put_writes("t", "", cps[3].id, w3));
    std::vector<pending_write> w5{write_of("a", "n", "small", 105), write_of("b", "m", "big", "bb")};
    run(s.put_writes("t", "", cps[5].id, w5));
    std::vector<checkpoint> sub;
    for (int i = 0; i < 4; ++i) {
        sub.push_back(next_cp(sub.empty() ? nullptr : &sub.back(), i, "loop", json::object{{"x", i}}));
        put(s, "t", "sub", sub.back());
    }
    std::vector<checkpoint> other;
    for (int i = 0; i < 3; ++i) {
        other.push_back(next_cp(other.empty() ? nullptr : &other.back(), i, "loop", json::object{{"y", i}}));
        put(s, "u", "", other.back());
    }

    auto before = run(s.stats("t"));
    BOOST_TEST(before.checkpoints == 10u);
    BOOST_TEST(before.blobs == 11u);
    BOOST_TEST(before.writes == 4u);
    auto other_before = run(s.stats("u"));

    run(s.prune("t", 2));
    auto kept = list(s, "t", "", list_options{});
    BOOST_TEST(ids_of(kept) == (std::vector<std::string>{cps[5].id, cps[4].id}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(kept.size() == 2u);
    BOOST_TEST(kept[0].cp.values == (json::object{{"big", big}, {"small", 5}}));
    BOOST_TEST(kept[1].cp.values == (json::object{{"big", big}, {"small", 4}}));
    BOOST_TEST(kept[1].cp.parent_id == ""); // the oldest kept has no parent any more
    BOOST_TEST(kept[0].cp.parent_id == cps[4].id);
    BOOST_TEST(kept[0].writes.size() == 2u); // the newest checkpoint's writes are kept
    BOOST_TEST(!get(s, "t", "", cps[0].id).has_value());
    BOOST_TEST(!get(s, "t", "", cps[3].id).has_value());
    BOOST_TEST(ids_of(list(s, "t", "sub", list_options{})) == (std::vector<std::string>{sub[3].id, sub[2].id}),
               boost::test_tools::per_element());

    auto after = run(s.stats("t"));
    BOOST_TEST(after.checkpoints == 4u);
    BOOST_TEST(after.blobs == 5u); // big@cp0, small@cp4, small@cp5, x@sub2, x@sub3
    BOOST_TEST(after.writes == 2u);
    BOOST_TEST(after.bytes < before.bytes);
    BOOST_TEST(after.bytes >= big.size() + 2);
    auto other_after = run(s.stats("u"));
    BOOST_TEST(other_after.checkpoints == other_before.checkpoints);
    BOOST_TEST(other_after.blobs == other_before.blobs);
    BOOST_TEST(other_after.bytes == other_before.bytes);

    // keep_last 0 keeps one; the blob written long ago stays because it is still needed.
    run(s.prune("t", 0));
    auto last = list(s, "t", "", list_options{});
    BOOST_TEST_REQUIRE(last.size() == 1u);
    BOOST_TEST(last[0].cp.id == cps[5].id);
    BOOST_TEST(last[0].cp.values == (json::object{{"big", big}, {"small", 5}}));
    auto least = run(s.stats("t"));
    BOOST_TEST(least.checkpoints == 2u);
    BOOST_TEST(least.blobs == 3u);
    BOOST_TEST(least.bytes < after.bytes);

    // Pruning a thread that does not exist, or keeping more than there is, changes nothing.
    run(s.prune("nobody", 3));
    run(s.prune("t", 100));
    auto same = run(s.stats("t"));
    BOOST_TEST(same.checkpoints == least.checkpoints);
    BOOST_TEST(same.bytes == least.bytes);
}

/// stats(): counts and bytes of the serialized values, across namespaces.
inline void stats(saver& s) {
    auto zero = run(s.stats("t"));
    BOOST_TEST(zero.checkpoints == 0u);
    BOOST_TEST(zero.blobs == 0u);
    BOOST_TEST(zero.writes == 0u);
    BOOST_TEST(zero.bytes == 0u);

    auto cp = next_cp(nullptr, -1, "input", json::object{{"a", "xyz"}, {"n", 12}}); // 5 + 2 bytes
    put(s, "t", "", cp);
    auto st = run(s.stats("t"));
    BOOST_TEST(st.checkpoints == 1u);
    BOOST_TEST(st.blobs == 2u);
    BOOST_TEST(st.bytes == 7u);

    std::vector<pending_write> w{write_of("task", "node", "a", true)}; // 4 bytes
    run(s.put_writes("t", "", cp.id, w));
    st = run(s.stats("t"));
    BOOST_TEST(st.writes == 1u);
    BOOST_TEST(st.bytes == 11u);

    put(s, "t", "sub", next_cp(nullptr, 0, "loop", json::object{{"m", nullptr}})); // 4 bytes
    st = run(s.stats("t"));
    BOOST_TEST(st.checkpoints == 2u);
    BOOST_TEST(st.blobs == 3u);
    BOOST_TEST(st.bytes == 15u);
    BOOST_TEST(run(s.stats("tt")).checkpoints == 0u); // no prefix matching
    // holds_thread(): what the counts tell, without the values.
    BOOST_TEST(run(s.holds_thread("t")));
    BOOST_TEST(!run(s.holds_thread("tt")));
    BOOST_TEST(!run(s.holds_thread("")));
}

/// delete_thread(): every namespace of that thread, nothing else.
inline void delete_thread(saver& s) {
    auto a = next_cp(nullptr, -1, "input", json::object{{"a", 1}});
    put(s, "t", "", a);
    std::vector<pending_write> w{write_of("task", "node", "a", 2)};
    run(s.put_writes("t", "", a.id, w));
    put(s, "t", "sub", next_cp(nullptr, 0, "loop", json::object{{"b", 1}}));
    auto u = next_cp(nullptr, -1, "input", json::object{{"c", 1}});
    put(s, "u", "", u);
    put(s, "t2", "", next_cp(nullptr, -1, "input", json::object{{"d", 1}}));

    run(s.delete_thread("t"));
    BOOST_TEST(!get(s, "t", "").has_value());
    BOOST_TEST(!get(s, "t", "sub").has_value());
    BOOST_TEST(list(s, "t", "", list_options{}).empty());
    auto st = run(s.stats("t"));
    BOOST_TEST(st.checkpoints == 0u);
    BOOST_TEST(st.blobs == 0u);
    BOOST_TEST(st.writes == 0u);
    BOOST_TEST(st.bytes == 0u);
    BOOST_TEST(!run(s.holds_thread("t")));
    BOOST_TEST(run(s.holds_thread("u")));
    auto got = get(s, "u", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "u", "", u, json::object{{"c", 1}});
    BOOST_TEST(get(s, "t2", "").has_value());

    run(s.delete_thread("t"));       // again: nothing to do
    run(s.delete_thread("nobody"));  // unknown: nothing to do
    put(s, "t", "", a);              // the thread can start over
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->writes.empty());
}

// -- thread maintenance: copy_thread, list_threads, sweep ----------------------------------------

/// `next_cp`, made `age` ago: its id says so (ids are time-ordered), and it is newer than `prev`.
inline checkpoint aged_cp(const checkpoint* prev, std::int64_t step, const std::string& source, const json::object& writes,
                          std::chrono::system_clock::duration age) {
    auto cp = next_cp(prev, step, source, writes);
    auto at = std::chrono::system_clock::now() - age;
    if (prev)
        if (auto p = checkpoint_time(prev->id); p && at <= *p) at = *p + std::chrono::microseconds(1);
    const std::string fresh = cp.id;
    cp.id = checkpoint_id_at(at);
    for (auto& [channel, version] : cp.versions)
        if (version == fresh) version = cp.id;
    return cp;
}

/// Thread `to` reads, in each of `namespaces`, exactly as thread `from` does: every checkpoint
/// with its values and pending writes.
inline void check_same_thread(saver& s, const std::string& from, const std::string& to,
                              const std::vector<std::string>& namespaces) {
    for (const auto& ns : namespaces) {
        BOOST_TEST_CONTEXT("namespace '" << ns << "'") {
            const auto a = list(s, from, ns, list_options{});
            const auto b = list(s, to, ns, list_options{});
            BOOST_TEST(!a.empty());
            BOOST_TEST_REQUIRE(a.size() == b.size());
            for (std::size_t i = 0; i < a.size(); ++i) {
                check_checkpoint(b[i], to, ns, a[i].cp, a[i].cp.values);
                BOOST_TEST_REQUIRE(a[i].writes.size() == b[i].writes.size());
                for (std::size_t j = 0; j < a[i].writes.size(); ++j) {
                    BOOST_TEST(b[i].writes[j].task_id == a[i].writes[j].task_id);
                    BOOST_TEST(b[i].writes[j].task_name == a[i].writes[j].task_name);
                    BOOST_TEST(b[i].writes[j].channel == a[i].writes[j].channel);
                    BOOST_TEST(b[i].writes[j].value == a[i].writes[j].value);
                }
            }
        }
    }
}

/// copy_thread(): every checkpoint, value (deltas, appended items, large values, the graph's
/// shape) and pending write of every namespace, readable under the new id; the copy and the
/// original are independent afterwards; a missing source is `thread_not_found`, a target that
/// exists (checkpoints or only writes, or the source itself) `thread_exists`, both naming the thread.
inline void copy_thread(saver& s) {
    const std::string big(5000, 'z');
    const json::array shape{"START -> n", "n -> END"};
    auto item = [](char c) { return json::value(std::string(300, c)); };
    auto c1 = next_cp(nullptr, -1, "input",
                      json::object{{"a", 1}, {"big", big}, {"log", json::array{item('a')}}, {"__graph__", shape}});
    c1.versions["__graph__"] = "sig-copy";
    auto c2 = next_cp(&c1, 0, "loop", json::object{{"log", json::array{item('b')}}});
    c2.extends["log"] = c1.id;
    auto c3 = next_cp(&c2, 1, "loop", json::object{{"a", 3}});
    c3.metadata["user"] = "alice";
    for (const auto* cp : {&c1, &c2, &c3}) put(s, "src", "", *cp);
    std::vector<pending_write> w2{write_of("t1", "n1", "a", 7)};
    run(s.put_writes("src", "", c2.id, w2));
    std::vector<pending_write> w3{write_of("t2", "n2", "a", json::object{{"k", "v"}}), write_of("t3", "n3", "log", json::string(big)),
                                  write_of("t2", "n2", "__interrupt__", json::array{json::object{{"value", "ask"}}})};
    run(s.put_writes("src", "", c3.id, w3));
    auto s1 = next_cp(nullptr, 0, "loop", json::object{{"x", "sub"}});
    auto s2 = next_cp(&s1, 1, "loop", json::object{{"x", big}});
    put(s, "src", "sub", s1);
    put(s, "src", "sub", s2);
    std::vector<pending_write> ws{write_of("t4", "n4", "x", 1)};
    run(s.put_writes("src", "sub", s2.id, ws));
    auto other = next_cp(nullptr, -1, "input", json::object{{"o", 1}});
    put(s, "other", "", other);

    const auto before = run(s.stats("src"));
    run(s.copy_thread("src", "dst"));
    check_same_thread(s, "src", "dst", {"", "sub"});
    const auto copied = run(s.stats("dst"));
    BOOST_TEST(copied.checkpoints == before.checkpoints);
    BOOST_TEST(copied.blobs == before.blobs);
    BOOST_TEST(copied.writes == before.writes);
    BOOST_TEST(copied.bytes == before.bytes);
    auto head = get(s, "dst", "");
    BOOST_TEST_REQUIRE(head.has_value());
    check_checkpoint(*head, "dst", "", c3,
                     json::object{{"a", 3}, {"big", big}, {"log", json::array{item('a'), item('b')}}, {"__graph__", shape}});
    BOOST_TEST(head->writes.size() == 3u);

    // Independent: the copy goes on, the original is deleted, neither sees the other.
    auto d4 = next_cp(&c3, 2, "loop", json::object{{"a", 4}});
    put(s, "dst", "", d4);
    BOOST_TEST(get(s, "src", "")->cp.id == c3.id);
    run(s.delete_thread("src"));
    auto first = get(s, "dst", "", c1.id);
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST(first->cp.values == (json::object{{"a", 1}, {"big", big}, {"log", json::array{item('a')}}, {"__graph__", shape}}));
    auto sub = get(s, "dst", "sub");
    BOOST_TEST_REQUIRE(sub.has_value());
    BOOST_TEST(sub->cp.values.at("x") == json::value(json::string(big)));
    BOOST_TEST(sub->writes.size() == 1u);
    BOOST_TEST(get(s, "dst", "")->cp.id == d4.id);

    // Errors name the thread at fault and store nothing.
    auto e = expect_error(errc::thread_not_found, [&] { run(s.copy_thread("src", "x")); });
    if (e) BOOST_TEST(has_name(*e, "src"), e->what());
    BOOST_TEST(!get(s, "x", "").has_value());
    e = expect_error(errc::thread_exists, [&] { run(s.copy_thread("dst", "other")); });
    if (e) BOOST_TEST(has_name(*e, "other"), e->what());
    auto untouched = get(s, "other", "");
    BOOST_TEST_REQUIRE(untouched.has_value());
    check_checkpoint(*untouched, "other", "", other, json::object{{"o", 1}});
    BOOST_TEST(run(s.stats("other")).checkpoints == 1u);
    expect_error(errc::thread_exists, [&] { run(s.copy_thread("dst", "dst")); });
    std::vector<pending_write> stray{write_of("t", "n", "a", 1)};
    run(s.put_writes("writes_only", "", c1.id, stray));
    expect_error(errc::thread_exists, [&] { run(s.copy_thread("dst", "writes_only")); });

    // And back again, under the first id.
    run(s.copy_thread("dst", "src"));
    check_same_thread(s, "dst", "src", {"", "sub"});
}

/// rewind_thread(): a thread rolled back to one of its checkpoints loses, in every namespace, the
/// checkpoints newer than it with their pending writes and the values only they wrote (its
/// storage is then exactly what it was when that checkpoint was the newest), keeps the
/// checkpoint's own writes and all older checkpoints, subgraphs' included, and goes on from
/// there; an unknown checkpoint is `checkpoint_not_found` naming the thread and the id, and
/// changes nothing.
inline void rewind_thread(saver& s) {
    const std::string big(5000, 'r');
    auto item = [](char c) { return json::value(std::string(300, c)); };
    auto c1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"log", json::array{item('a')}}});
    put(s, "t", "", c1);
    auto s1 = next_cp(nullptr, 0, "loop", json::object{{"x", "sub-1"}}); // a subgraph's, before the target
    put(s, "t", "sub", s1);
    auto c2 = next_cp(&c1, 0, "loop", json::object{{"log", json::array{item('b')}}});
    c2.extends["log"] = c1.id;
    put(s, "t", "", c2);
    std::vector<pending_write> w2{write_of("t1", "n1", "a", 7),
                                  write_of("t1", "n1", "__interrupt__", json::array{json::object{{"value", "ask"}}})};
    run(s.put_writes("t", "", c2.id, w2));
    auto u = next_cp(nullptr, -1, "input", json::object{{"u", 1}});
    put(s, "u", "", u);
    const auto at_target = run(s.stats("t"));

    // What a run after c2 wrote: a subgraph checkpoint, large and appended values, pending writes.
    auto s2 = next_cp(&s1, 1, "loop", json::object{{"x", big}});
    put(s, "t", "sub", s2);
    std::vector<pending_write> ws{write_of("t4", "n4", "x", 1)};
    run(s.put_writes("t", "sub", s2.id, ws));
    auto c3 = next_cp(&c2, 1, "loop", json::object{{"a", 3}, {"big", big}, {"log", json::array{item('c')}}});
    c3.extends["log"] = c2.id;
    put(s, "t", "", c3);
    std::vector<pending_write> w3{write_of("t2", "n2", "a", json::string(big))};
    run(s.put_writes("t", "", c3.id, w3));
    auto c4 = next_cp(&c3, 2, "loop", json::object{{"a", 4}});
    put(s, "t", "", c4);

    // Unknown checkpoints: a typed error naming thread and id; nothing removed.
    auto e = expect_error(errc::checkpoint_not_found, [&] { (void)run(s.rewind_thread("t", "no-such-id")); });
    if (e) {
        BOOST_TEST(has_name(*e, "t"), e->what());
        BOOST_TEST(has_name(*e, "no-such-id"), e->what());
    }
    e = expect_error(errc::checkpoint_not_found, [&] { (void)run(s.rewind_thread("nobody", c2.id)); });
    if (e) BOOST_TEST(has_name(*e, "nobody"), e->what());
    expect_error(errc::checkpoint_not_found, [&] { (void)run(s.rewind_thread("u", c2.id)); }); // another thread's id
    BOOST_TEST(list(s, "t", "", list_options{}).size() == 4u);
    BOOST_TEST(list(s, "t", "sub", list_options{}).size() == 2u);

    BOOST_TEST(run(s.rewind_thread("t", c2.id)) == 3u); // c3, c4 and s2
    auto head = get(s, "t", "");
    BOOST_TEST_REQUIRE(head.has_value());
    check_checkpoint(*head, "t", "", c2, json::object{{"a", 1}, {"log", json::array{item('a'), item('b')}}});
    BOOST_TEST_REQUIRE(head->writes.size() == 2u); // the target's own writes stay (an interrupt)
    BOOST_TEST(head->writes[1].channel == "__interrupt__");
    BOOST_TEST(list(s, "t", "", list_options{}).size() == 2u);
    BOOST_TEST(!get(s, "t", "", c3.id).has_value());
    auto sub = list(s, "t", "sub", list_options{});
    BOOST_TEST_REQUIRE(sub.size() == 1u); // the subgraph's earlier checkpoint stays
    check_checkpoint(sub[0], "t", "sub", s1, json::object{{"x", "sub-1"}});
    BOOST_TEST(sub[0].writes.empty());
    const auto after = run(s.stats("t"));
    BOOST_TEST(after.checkpoints == at_target.checkpoints);
    BOOST_TEST(after.blobs == at_target.blobs);
    BOOST_TEST(after.writes == at_target.writes);
    BOOST_TEST(after.bytes == at_target.bytes);
    auto threads = run(s.list_threads({}));
    BOOST_TEST_REQUIRE(threads.size() == 2u);
    BOOST_TEST(threads[0].thread_id == "u");
    BOOST_TEST(threads[1].newest_id == c2.id);
    BOOST_TEST(threads[1].checkpoints == 3u);
    auto other = get(s, "u", "");
    BOOST_TEST_REQUIRE(other.has_value());
    check_checkpoint(*other, "u", "", u, json::object{{"u", 1}});

    // Rewinding to the newest checkpoint removes nothing; the thread goes on from the target.
    BOOST_TEST(run(s.rewind_thread("t", c2.id)) == 0u);
    auto c3b = next_cp(&c2, 1, "loop", json::object{{"log", json::array{item('d')}}});
    c3b.extends["log"] = c2.id;
    put(s, "t", "", c3b);
    head = get(s, "t", "");
    BOOST_TEST_REQUIRE(head.has_value());
    check_checkpoint(*head, "t", "", c3b, json::object{{"a", 1}, {"log", json::array{item('a'), item('b'), item('d')}}});
    // To a subgraph's checkpoint: what every namespace wrote after it goes.
    BOOST_TEST(run(s.rewind_thread("t", s1.id)) == 2u); // c2 and c3b
    BOOST_TEST(get(s, "t", "")->cp.id == c1.id);
    BOOST_TEST(get(s, "t", "sub")->cp.id == s1.id);
    BOOST_TEST(get(s, "t", "")->writes.empty());
}

/// `co_await saver.list_threads({...})` as a user writes it in a coroutine (g++ 12 must neither
/// crash on the braced argument nor reject it).
inline boost::asio::awaitable<std::vector<thread_info>> list_threads_as_written(saver& s, const json::object& match) {
    co_return co_await s.list_threads({.metadata = match, .limit = 1});
}

/// list_threads(): every thread once, newest first (by its newest checkpoint in any namespace),
/// with the head of its root namespace, that head's metadata and time, and its checkpoint count;
/// filtered by equality of metadata keys on the head only; limit and offset page the matches.
inline void list_threads(saver& s) {
    BOOST_TEST(run(s.list_threads({})).empty());
    auto with_meta = [](checkpoint cp, json::object extra) {
        for (auto& [k, v] : extra) cp.metadata[k] = v;
        return cp;
    };
    auto b1 = with_meta(next_cp(nullptr, -1, "input", json::object{{"x", 1}}), {{"user", "bob"}, {"tier", 2}});
    put(s, "b", "", b1);
    auto c1 = with_meta(next_cp(nullptr, -1, "input", json::object{{"x", 1}}), {{"user", "bob"}});
    auto c2 = with_meta(next_cp(&c1, 0, "loop", json::object{{"x", 2}}), {{"user", "alice"}, {"tier", 2}});
    auto c3 = with_meta(next_cp(&c2, 1, "loop", json::object{{"x", 3}}), {{"user", "alice"}, {"tier", 2}});
    for (const auto* cp : {&c1, &c2, &c3}) put(s, "c", "", *cp);
    auto a1 = with_meta(next_cp(nullptr, -1, "input", json::object{{"x", 1}}), {{"user", "alice"}, {"tier", 1}});
    put(s, "a", "", a1);
    put(s, "a", "sub", next_cp(nullptr, 0, "loop", json::object{{"y", 1}}));
    // A thread with subgraph checkpoints only: listed, but without a head or metadata to match.
    auto d1 = with_meta(next_cp(nullptr, 0, "loop", json::object{{"y", 1}}), {{"user", "alice"}});
    put(s, "d", "sub", d1);
    auto a2 = with_meta(next_cp(&a1, 0, "loop", json::object{{"x", 2}}), {{"user", "alice"}, {"tier", 1}});
    put(s, "a", "", a2);

    auto names = [](const std::vector<thread_info>& ts) {
        std::vector<std::string> out;
        for (const auto& t : ts) out.push_back(t.thread_id);
        return out;
    };
    const auto all = run(s.list_threads({}));
    BOOST_TEST(names(all) == (std::vector<std::string>{"a", "d", "c", "b"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(all.size() == 4u);
    BOOST_TEST(all[0].checkpoint_id == a2.id);
    BOOST_TEST(all[0].newest_id == a2.id);
    BOOST_TEST(all[0].checkpoints == 3u);
    BOOST_TEST(all[0].metadata == a2.metadata);
    BOOST_TEST_REQUIRE(all[0].created_at.has_value());
    BOOST_TEST((*all[0].created_at == checkpoint_time(a2.id)));
    const auto age = std::chrono::system_clock::now() - *all[0].created_at;
    BOOST_TEST((age >= std::chrono::seconds(0) && age < std::chrono::minutes(10)));
    BOOST_TEST(all[1].checkpoint_id.empty());
    BOOST_TEST(all[1].newest_id == d1.id);
    BOOST_TEST(!all[1].created_at.has_value());
    BOOST_TEST(all[1].metadata.empty());
    BOOST_TEST(all[1].checkpoints == 1u);
    BOOST_TEST(all[2].checkpoint_id == c3.id);
    BOOST_TEST(all[2].checkpoints == 3u);
    BOOST_TEST(all[3].metadata == b1.metadata);

    const json::object alice{{"user", "alice"}}, alice2{{"user", "alice"}, {"tier", 2}}, bob{{"user", "bob"}},
        carol{{"user", "carol"}}, tier1{{"tier", 1}}, none;
    BOOST_TEST(names(run(s.list_threads({.metadata = alice}))) == (std::vector<std::string>{"a", "c"}),
               boost::test_tools::per_element());
    BOOST_TEST(names(run(s.list_threads({.metadata = alice2}))) == (std::vector<std::string>{"c"}),
               boost::test_tools::per_element());
    // Only the newest checkpoint's metadata counts: c was bob's once.
    BOOST_TEST(names(run(s.list_threads({.metadata = bob}))) == (std::vector<std::string>{"b"}),
               boost::test_tools::per_element());
    BOOST_TEST(run(s.list_threads({.metadata = carol})).empty());
    BOOST_TEST(names(run(s.list_threads({.metadata = tier1}))) == (std::vector<std::string>{"a"}),
               boost::test_tools::per_element());
    BOOST_TEST(run(s.list_threads({.metadata = none})).size() == 4u); // an empty filter matches all

    // Paging.
    BOOST_TEST(names(run(s.list_threads({.limit = 2}))) == (std::vector<std::string>{"a", "d"}),
               boost::test_tools::per_element());
    BOOST_TEST(names(run(s.list_threads({.limit = 2, .offset = 1}))) == (std::vector<std::string>{"d", "c"}),
               boost::test_tools::per_element());
    BOOST_TEST(run(s.list_threads({.offset = 4})).empty());
    BOOST_TEST(names(run(s.list_threads({.metadata = alice, .offset = 1}))) == (std::vector<std::string>{"c"}),
               boost::test_tools::per_element());
    BOOST_TEST(names(run(list_threads_as_written(s, alice))) == (std::vector<std::string>{"a"}),
               boost::test_tools::per_element());

    // Deleted threads leave the list; pruning keeps the head.
    run(s.delete_thread("c"));
    run(s.prune("a", 1));
    const auto left = run(s.list_threads({}));
    BOOST_TEST(names(left) == (std::vector<std::string>{"a", "d", "b"}), boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(left.size() == 3u);
    BOOST_TEST(left[0].checkpoint_id == a2.id);
    BOOST_TEST(left[0].checkpoints == 2u);
}

/// `co_await saver.sweep({...})` as a user writes it in a coroutine.
inline boost::asio::awaitable<sweep_result> sweep_as_written(saver& s) {
    co_return co_await s.sweep({.older_than = std::chrono::hours(1), .action = ttl_action::keep_latest});
}

/// sweep(): threads whose newest checkpoint (any namespace) is older than the time to live are
/// pruned to their newest checkpoint per namespace (values and the head's writes kept) or deleted;
/// a thread with a recent checkpoint anywhere is kept whole; the counts say what happened.
inline void sweep(saver& s) {
    using std::chrono::hours;
    const auto ten_days = hours(24 * 10);
    const std::string big(3000, 'q');
    // "old": three root checkpoints and two subgraph ones, ten days old, with pending writes.
    auto o1 = aged_cp(nullptr, -1, "input", json::object{{"a", 1}, {"big", big}}, ten_days);
    auto o2 = aged_cp(&o1, 0, "loop", json::object{{"a", 2}}, ten_days);
    auto o3 = aged_cp(&o2, 1, "loop", json::object{{"a", 3}}, ten_days);
    auto os1 = aged_cp(nullptr, 0, "loop", json::object{{"s", 1}}, ten_days);
    auto os2 = aged_cp(&os1, 1, "loop", json::object{{"s", 2}}, ten_days);
    for (const auto* cp : {&o1, &o2, &o3}) put(s, "old", "", *cp);
    for (const auto* cp : {&os1, &os2}) put(s, "old", "sub", *cp);
    std::vector<pending_write> w{write_of("t", "n", "a", 9)};
    run(s.put_writes("old", "", o2.id, w));
    run(s.put_writes("old", "", o3.id, w));
    // "single": one old checkpoint (nothing to prune).
    auto single = aged_cp(nullptr, -1, "input", json::object{{"a", 1}}, ten_days);
    put(s, "single", "", single);
    // "busy_sub": an old root, but a subgraph wrote just now: in use, kept.
    auto b1 = aged_cp(nullptr, -1, "input", json::object{{"a", 1}}, ten_days);
    put(s, "busy_sub", "", b1);
    put(s, "busy_sub", "sub", next_cp(nullptr, 0, "loop", json::object{{"s", 1}}));
    // "revived": old checkpoints, then a new one.
    auto r1 = aged_cp(nullptr, -1, "input", json::object{{"a", 1}}, ten_days);
    auto r2 = next_cp(&r1, 0, "loop", json::object{{"a", 2}});
    put(s, "revived", "", r1);
    put(s, "revived", "", r2);
    // "fresh".
    put(s, "fresh", "", next_cp(nullptr, -1, "input", json::object{{"a", 1}}));

    auto none = run(s.sweep({.older_than = hours(24 * 30)}));
    BOOST_TEST(none.expired == 0u);
    BOOST_TEST(none.deleted == 0u);
    BOOST_TEST(run(s.stats("old")).checkpoints == 5u);

    auto pruned = run(s.sweep({.older_than = hours(24 * 5), .action = ttl_action::keep_latest}));
    BOOST_TEST(pruned.expired == 2u); // old, single
    BOOST_TEST(pruned.pruned == 1u);  // single had nothing to lose
    BOOST_TEST(pruned.deleted == 0u);
    BOOST_TEST(pruned.checkpoints_removed == 3u);
    BOOST_TEST(pruned.skipped_busy == 0u);
    auto kept = list(s, "old", "", list_options{});
    BOOST_TEST_REQUIRE(kept.size() == 1u);
    BOOST_TEST(kept[0].cp.id == o3.id);
    BOOST_TEST(kept[0].cp.values == (json::object{{"a", 3}, {"big", big}}));
    BOOST_TEST(kept[0].writes.size() == 1u);
    BOOST_TEST(ids_of(list(s, "old", "sub", list_options{})) == (std::vector<std::string>{os2.id}),
               boost::test_tools::per_element());
    BOOST_TEST(get(s, "single", "").has_value());
    BOOST_TEST(run(s.stats("busy_sub")).checkpoints == 2u);
    BOOST_TEST(run(s.stats("revived")).checkpoints == 2u);
    BOOST_TEST(run(s.stats("fresh")).checkpoints == 1u);

    auto again = run(s.sweep({.older_than = hours(24 * 5), .action = ttl_action::keep_latest}));
    BOOST_TEST(again.expired == 2u);
    BOOST_TEST(again.pruned == 0u);
    BOOST_TEST(again.checkpoints_removed == 0u);

    auto deleted = run(s.sweep({.older_than = hours(24 * 5)}));
    BOOST_TEST(deleted.expired == 2u);
    BOOST_TEST(deleted.deleted == 2u);
    BOOST_TEST(deleted.checkpoints_removed == 3u); // old: one per namespace; single: one
    BOOST_TEST(!get(s, "old", "").has_value());
    BOOST_TEST(!get(s, "old", "sub").has_value());
    BOOST_TEST(run(s.stats("old")).writes == 0u);
    BOOST_TEST(!get(s, "single", "").has_value());
    BOOST_TEST(run(s.list_threads({})).size() == 3u);

    auto written = run(sweep_as_written(s));
    BOOST_TEST(written.expired == 0u);
    BOOST_TEST(run(s.stats("busy_sub")).checkpoints == 2u);
    BOOST_TEST(run(s.stats("revived")).checkpoints == 2u);

    // A time to live of zero: every thread written before the call.
    auto all = run(s.sweep({}));
    BOOST_TEST(all.expired == 3u);
    BOOST_TEST(all.deleted == 3u);
    BOOST_TEST(all.checkpoints_removed == 5u);
    BOOST_TEST(run(s.list_threads({})).empty());
}

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

/// Namespaces of one thread are isolated, even with equal checkpoint ids and channel names.
inline void namespaces(saver& s) {
    auto root = next_cp(nullptr, -1, "input", json::object{{"a", "root"}});
    auto child = root;
    child.values = json::object{{"a", "child"}};
    child.step = 7;
    put(s, "t", "", root);
    put(s, "t", "child", child);
    std::vector<pending_write> w{write_of("task", "node", "a", "w")};
    run(s.put_writes("t", "child", child.id, w));

    auto r = get(s, "t", "");
    auto c = get(s, "t", "child");
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST_REQUIRE(c.has_value());
    check_checkpoint(*r, "t", "", root, json::object{{"a", "root"}});
    check_checkpoint(*c, "t", "child", child, json::object{{"a", "child"}});
    BOOST_TEST(r->writes.empty());
    BOOST_TEST(c->writes.size() == 1u);

    auto root2 = next_cp(&root, 0, "loop", json::object{{"b", 1}});
    put(s, "t", "", root2);
    BOOST_TEST(list(s, "t", "", list_options{}).size() == 2u);
    BOOST_TEST(list(s, "t", "child", list_options{}).size() == 1u);
    BOOST_TEST(get(s, "t", "child")->cp.id == child.id);

    run(s.prune("t", 1));
    BOOST_TEST(list(s, "t", "", list_options{}).size() == 1u);
    c = get(s, "t", "child");
    BOOST_TEST_REQUIRE(c.has_value());
    BOOST_TEST(c->cp.values == (json::object{{"a", "child"}}));
    r = get(s, "t", "");
    BOOST_TEST_REQUIRE(r.has_value());
    BOOST_TEST(r->cp.values == (json::object{{"a", "root"}, {"b", 1}}));
}

/// One saver shared by several OS threads, each with its own run loop and thread id.
inline void concurrent(saver& s) {
    constexpr int workers = 4, steps = 25;
    std::atomic<int> failures{0};
    std::vector<std::thread> pool;
    for (int k = 0; k < workers; ++k) {
        pool.emplace_back([&s, &failures, k] {
            try {
                const std::string thread = "c" + std::to_string(k);
                checkpoint prev;
                for (int i = 0; i < steps; ++i) {
                    auto cp = next_cp(i ? &prev : nullptr, i, "loop", json::object{{"i", i}, {"k", k}});
                    put(s, thread, "", cp);
                    std::vector<pending_write> w{write_of("task", "node", "i", i)};
                    run(s.put_writes(thread, "", cp.id, w));
                    auto got = get(s, thread, "");
                    if (!got || got->cp.id != cp.id || got->cp.values.at("i") != i || got->writes.size() != 1)
                        ++failures;
                    if (i % 10 == 9) {
                        run(s.prune(thread, 5));
                        (void)run(s.stats(thread));
                    }
                    prev = cp;
                }
            } catch (...) {
                ++failures;
            }
        });
    }
    for (auto& t : pool) t.join();
    BOOST_TEST(failures.load() == 0);
    for (int k = 0; k < workers; ++k) {
        auto all = list(s, "c" + std::to_string(k), "", list_options{});
        BOOST_TEST(all.size() == 10u); // pruned to 5 at i = 19, then 5 more
        BOOST_TEST_REQUIRE(!all.empty());
        BOOST_TEST(all[0].cp.values.at("i") == steps - 1);
    }
}

/// A stored checkpoint put again under its own id with no values and other metadata (how a server
/// patches a state's metadata: get, merge, put): its record, metadata included, is replaced; the
/// values it and its ancestors stored (small, large, appended items), its pending writes and the
/// other checkpoints stay as they were; `list_threads` reports the new metadata of a head.
inline void metadata_patch(saver& s) {
    const json::value big(std::string(5000, 'v')); // kept apart from the record by savers that inline small values
    auto cp1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"log", json::array{"x"}}, {"big", big}});
    auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"a", 2}, {"log", json::array{"y"}}, {"big2", big}});
    cp2.extends["log"] = cp1.id;
    cp2.metadata["note"] = "old";
    auto cp3 = next_cp(&cp2, 1, "loop", json::object{{"b", "z"}});
    for (const auto* cp : {&cp1, &cp2, &cp3}) put(s, "t", "", *cp);
    run(s.put_writes("t", "", cp2.id, std::vector<pending_write>{write_of("task", "n", "a", 5)}));
    const json::object values1{{"a", 1}, {"log", json::array{"x"}}, {"big", big}};
    const json::object values2{{"a", 2}, {"log", json::array{"x", "y"}}, {"big", big}, {"big2", big}};
    json::object values3 = values2;
    values3["b"] = "z";
    const auto stats_before = run(s.stats("t"));

    // Patches `id` (nullopt: the head) as a server does; returns the checkpoint it stored.
    auto patch = [&](std::optional<std::string> id, const json::object& keys) {
        auto got = get(s, "t", "", std::move(id));
        BOOST_TEST_REQUIRE(got.has_value());
        auto cp = got->cp;
        for (const auto& [k, v] : keys) cp.metadata[k] = v;
        cp.values.clear();
        put(s, "t", "", cp);
        return cp;
    };

    // Not the head: cp2's metadata is replaced, its values and pending write stay.
    auto want2 = cp2;
    want2.metadata = patch(cp2.id, json::object{{"note", "new"}, {"tag", "reviewed"}}).metadata;
    BOOST_TEST(want2.metadata.at("note") == "new");
    BOOST_TEST(want2.metadata.at("tag") == "reviewed");
    auto got = get(s, "t", "", cp2.id);
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", want2, values2);
    BOOST_TEST_REQUIRE(got->writes.size() == 1u);
    BOOST_TEST(got->writes[0].value == 5);
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp3, values3);
    got = get(s, "t", "", cp1.id);
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp1, values1);
    auto all = list(s, "t", "", list_options{});
    BOOST_TEST_REQUIRE(all.size() == 3u);
    check_checkpoint(all[1], "t", "", want2, values2);

    // The head: read back, listed, and what list_threads matches and reports.
    auto want3 = cp3;
    want3.metadata = patch(std::nullopt, json::object{{"tag", "newest"}}).metadata;
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", want3, values3);
    all = list(s, "t", "", list_options{});
    BOOST_TEST_REQUIRE(all.size() == 3u);
    check_checkpoint(all[0], "t", "", want3, values3);
    check_checkpoint(all[2], "t", "", cp1, values1);
    const json::object match{{"tag", "newest"}};
    auto threads = run(s.list_threads({.metadata = match}));
    BOOST_TEST_REQUIRE(threads.size() == 1u);
    BOOST_TEST(threads[0].thread_id == "t");
    BOOST_TEST(threads[0].checkpoint_id == cp3.id);
    BOOST_TEST(threads[0].metadata == want3.metadata);

    // Nothing stored twice, nothing lost.
    const auto stats_after = run(s.stats("t"));
    BOOST_TEST(stats_after.checkpoints == stats_before.checkpoints);
    BOOST_TEST(stats_after.blobs == stats_before.blobs);
    BOOST_TEST(stats_after.writes == stats_before.writes);
    BOOST_TEST(stats_after.bytes == stats_before.bytes);
}

/// Append deltas: a value that only grew is stored as its new items plus the version they
/// extend (`checkpoint::extends`); get/list return it whole, prune keeps the chain it needs.
inline void append_deltas(saver& s) {
    auto item = [](char c) { return json::value(std::string(200, c)); };
    const json::array a{item('a')}, ab_c{item('a'), item('b'), item('c')},
        abcd{item('a'), item('b'), item('c'), item('d')}, abcde{item('a'), item('b'), item('c'), item('d'), item('e')};

    auto cp1 = next_cp(nullptr, 0, "loop", json::object{{"log", a}, {"n", 1}});
    auto cp2 = next_cp(&cp1, 1, "loop", json::object{{"log", json::array{item('b'), item('c')}}});
    cp2.extends["log"] = cp1.id;
    auto cp3 = next_cp(&cp2, 2, "loop", json::object{{"log", json::array{item('d')}}, {"n", 3}});
    cp3.extends["log"] = cp2.id;
    for (const auto* cp : {&cp1, &cp2, &cp3}) put(s, "d", "", *cp);

    // The same history, each list stored whole.
    auto w1 = cp1, w2 = cp2, w3 = cp3;
    w2.extends.clear();
    w3.extends.clear();
    w2.values["log"] = ab_c;
    w3.values["log"] = abcd;
    for (const auto* cp : {&w1, &w2, &w3}) put(s, "w", "", *cp);

    for (const std::string thread : {"d", "w"}) {
        BOOST_TEST_CONTEXT("thread " << thread) {
            auto got = get(s, thread, "");
            BOOST_TEST_REQUIRE(got.has_value());
            check_checkpoint(*got, thread, "", cp3, json::object{{"log", abcd}, {"n", 3}});
            BOOST_TEST(got->cp.versions.at("log") == cp3.id);
            got = get(s, thread, "", cp2.id);
            BOOST_TEST_REQUIRE(got.has_value());
            check_checkpoint(*got, thread, "", cp2, json::object{{"log", ab_c}, {"n", 1}});
            got = get(s, thread, "", cp1.id);
            BOOST_TEST_REQUIRE(got.has_value());
            check_checkpoint(*got, thread, "", cp1, json::object{{"log", a}, {"n", 1}});
            auto all = list(s, thread, "", list_options{});
            BOOST_TEST_REQUIRE(all.size() == 3u);
            BOOST_TEST(all[0].cp.values.at("log") == abcd);
            BOOST_TEST(all[1].cp.values.at("log") == ab_c);
            BOOST_TEST(all[2].cp.values.at("log") == a);
        }
    }
    const auto delta_stats = run(s.stats("d")), whole_stats = run(s.stats("w"));
    BOOST_TEST(delta_stats.blobs == whole_stats.blobs);
    BOOST_TEST(delta_stats.bytes < whole_stats.bytes);
    BOOST_TEST(delta_stats.bytes < 4u * 210 + 100); // each item stored once (200 bytes + quotes and commas)
    BOOST_TEST(whole_stats.bytes > 6u * 200);

    // prune keeps the versions cp3's list extends, even though no kept checkpoint names them.
    run(s.prune("d", 1));
    auto kept = list(s, "d", "", list_options{});
    BOOST_TEST_REQUIRE(kept.size() == 1u);
    auto orphan = cp3; // the oldest kept checkpoint loses its parent
    orphan.parent_id.clear();
    check_checkpoint(kept[0], "d", "", orphan, json::object{{"log", abcd}, {"n", 3}});
    BOOST_TEST(!get(s, "d", "", cp2.id).has_value());
    BOOST_TEST(run(s.stats("d")).blobs == 4u); // log@cp1, log@cp2, log@cp3, n@cp3

    // The chain keeps growing after the prune; an unrelated write drops the old links.
    auto cp4 = next_cp(&cp3, 3, "loop", json::object{{"log", json::array{item('e')}}});
    cp4.extends["log"] = cp3.id;
    put(s, "d", "", cp4);
    auto got = get(s, "d", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("log") == abcde);
    auto cp5 = next_cp(&cp4, 4, "loop", json::object{{"log", json::array{item('z')}}});
    put(s, "d", "", cp5);
    run(s.prune("d", 1));
    got = get(s, "d", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.values.at("log") == (json::array{item('z')}));
    BOOST_TEST(run(s.stats("d")).blobs == 2u); // log@cp5, n@cp3
}

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

/// The node cache: a miss, then the value put (any JSON, replaced by a later put), kept per
/// namespace, apart from threads (deleting or sweeping threads leaves it), cleared per namespace
/// or all at once with the count of entries removed.
inline void cache(saver& s) {
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

    // Threads' maintenance does not touch the cache.
    auto cp = next_cp(nullptr, -1, "input", json::object{{"x", 1}});
    put(s, "t", "", cp);
    run(s.delete_thread("t"));
    run(s.sweep(ttl_policy{}));
    BOOST_TEST(run(s.cache_get("g:b", "k1")).has_value());

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

/// Cache entries with a time to live are hits until it passes, then misses; a later put of the
/// same key starts a new time to live; zero keeps an entry for good.
inline void cache_expiry(saver& s) {
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

/// Records round-trip exactly: metadata keys in their order (with `step`/`source` that repeat the
/// checkpoint's fields or not), frontier JSON of every kind, versions that are not checkpoint ids.
inline void record_round_trip(saver& s) {
    json::object deep{{"z", json::object{{"y", json::array{json::object{{"x", json::array{1, json::array{2}}}}}}}}};
    json::value frontier = json::object{
        {"pull", json::array{"agent", "tools"}},
        {"push", json::array{json::object{{"node", "worker"}, {"arg", json::object{{"task", "t\xc3\xa9st"}}}}}},
        {"nested", deep},
        {"doubles", json::array{0.1, -2.5e-300, 1e300, 1.0, -0.0, 123456.789}},
        {"ints", json::array{-1, -128, 0, 42, std::numeric_limits<std::int64_t>::min(),
                             std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::uint64_t>::max()}},
        {"unicode", json::array{"h\xc3\xa9llo \xe2\x9c\x93", "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xf0\x9f\x98\x80", ""}},
        {"\xc3\xa9t\xc3\xa9", nullptr},
        {"flags", json::array{true, false, nullptr, json::object{}, json::array{}}},
        {"seen", "abc"}};

    auto cp1 = next_cp(nullptr, 4, "update", json::object{{"a", 1}, {"custom", "c"}});
    cp1.versions["custom"] = "not-a-checkpoint-id"; // the value is keyed by its version, whatever it is
    cp1.versions["later"] = "";
    cp1.frontier = frontier;
    cp1.metadata = json::object{{"zeta", 1},
                                {"step", 4},
                                {"alpha", "x"},
                                {"writes", json::object{{"node", json::object{{"a", 1}}}}},
                                {"source", "update"},
                                {"user", json::array{"\xe2\x9c\x93", -3, 2.5}}};
    cp1.signature = "fedcba9876543210";
    // `step`/`source` that differ from the checkpoint's own, first and last.
    auto cp2 = next_cp(&cp1, 5, "loop", json::object{{"a", 2}});
    cp2.metadata = json::object{{"source", "input"}, {"b", 2}, {"a", 1}, {"step", "five"}};
    cp2.frontier = json::array{-7, 0.5, "\xc3\xa9"};
    auto cp3 = next_cp(&cp2, 6, "fork", json::object{});
    cp3.metadata = json::object{{"source", "fork"}, {"step", 6}}; // both repeat the fields, in reverse order
    cp3.frontier = nullptr;
    cp3.signature = "";
    for (const auto* cp : {&cp1, &cp2, &cp3}) put(s, "r", "", *cp);

    auto same_text = [](const json::value& got, const json::value& want) {
        BOOST_TEST(json::serialize(got) == json::serialize(want));
    };
    auto all = list(s, "r", "", list_options{});
    BOOST_TEST_REQUIRE(all.size() == 3u);
    const checkpoint* want[] = {&cp3, &cp2, &cp1};
    for (std::size_t i = 0; i < 3; ++i) {
        BOOST_TEST_CONTEXT("checkpoint " << i) {
            const auto& got = all[i].cp;
            BOOST_TEST(got.id == want[i]->id);
            BOOST_TEST(got.step == want[i]->step);
            BOOST_TEST(got.source == want[i]->source);
            BOOST_TEST(got.signature == want[i]->signature);
            BOOST_TEST((got.versions == want[i]->versions));
            same_text(got.metadata, want[i]->metadata); // same keys, same order
            same_text(got.frontier, want[i]->frontier);
            BOOST_TEST(got.frontier == want[i]->frontier);
        }
    }
    const auto& f = all[2].cp.frontier.as_object();
    BOOST_TEST(f.at("ints").as_array()[4].is_int64());
    BOOST_TEST(f.at("ints").as_array()[6].is_uint64());
    BOOST_TEST(f.at("doubles").as_array()[3].is_double());
    BOOST_TEST(f.at("doubles").as_array()[1].as_double() == -2.5e-300);
    BOOST_TEST(all[0].cp.values == (json::object{{"a", 2}, {"custom", "c"}}));
    BOOST_TEST(all[2].cp.values == (json::object{{"a", 1}, {"custom", "c"}}));
    auto got = get(s, "r", "", cp1.id);
    BOOST_TEST_REQUIRE(got.has_value());
    same_text(got->cp.metadata, cp1.metadata);
    same_text(got->cp.frontier, frontier);
}

/// prune() keeps the newest checkpoint's pending writes whatever their channel (a task's writes,
/// its interrupts, the resume values), in every namespace, in order; older checkpoints' writes go.
inline void prune_keeps_head_writes(saver& s) {
    std::vector<checkpoint> cps;
    for (int i = 0; i < 4; ++i) {
        cps.push_back(next_cp(cps.empty() ? nullptr : &cps.back(), i, "loop", json::object{{"n", i}}));
        put(s, "t", "", cps.back());
    }
    json::array interrupts{json::object{{"id", "interrupt-1"}, {"value", json::object{{"question", "which one?"}}}}};
    std::vector<pending_write> head{write_of("ask", "ask", "__interrupt__", interrupts),
                                    write_of("done", "done", "n", 9),
                                    write_of("ask", "ask", "__resume__", json::array{"the first"})};
    run(s.put_writes("t", "", cps[3].id, head));
    std::vector<pending_write> old{write_of("old", "old", "n", 1)};
    run(s.put_writes("t", "", cps[1].id, old));
    std::vector<checkpoint> sub;
    for (int i = 0; i < 2; ++i) {
        sub.push_back(next_cp(sub.empty() ? nullptr : &sub.back(), i, "loop", json::object{{"x", i}}));
        put(s, "t", "sub", sub.back());
    }
    std::vector<pending_write> sub_head{write_of("inner", "inner", "__interrupt__", interrupts)};
    run(s.put_writes("t", "sub", sub[1].id, sub_head));

    auto check_heads = [&] {
        auto got = get(s, "t", "");
        BOOST_TEST_REQUIRE(got.has_value());
        BOOST_TEST(got->cp.id == cps[3].id);
        BOOST_TEST_REQUIRE(got->writes.size() == head.size());
        for (std::size_t i = 0; i < head.size(); ++i) {
            BOOST_TEST_CONTEXT("write " << i) {
                BOOST_TEST(got->writes[i].task_id == head[i].task_id);
                BOOST_TEST(got->writes[i].task_name == head[i].task_name);
                BOOST_TEST(got->writes[i].channel == head[i].channel);
                BOOST_TEST(got->writes[i].value == head[i].value);
            }
        }
        auto in_sub = get(s, "t", "sub");
        BOOST_TEST_REQUIRE(in_sub.has_value());
        BOOST_TEST(in_sub->cp.id == sub[1].id);
        BOOST_TEST_REQUIRE(in_sub->writes.size() == 1u);
        BOOST_TEST(in_sub->writes[0].value == interrupts);
    };
    check_heads();
    BOOST_TEST(run(s.stats("t")).writes == 5u);
    run(s.prune("t", 1));
    check_heads();
    BOOST_TEST(run(s.stats("t")).writes == 4u); // the old checkpoint's write went with it
    run(s.prune("t", 0));
    check_heads();
    BOOST_TEST(run(s.stats("t")).checkpoints == 2u);
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

/// A second instance on the same storage reads what the first wrote and the other way round,
/// pending writes and deletions included.
inline void second_instance(saver& a, const capabilities& caps) {
    const json::object first_values{{"a", 1}, {"big", std::string(5000, 'x')}};
    auto cp1 = next_cp(nullptr, -1, "input", first_values);
    put(a, "t", "", cp1);
    std::vector<pending_write> w{write_of("task", "node", "a", 2)};
    run(a.put_writes("t", "", cp1.id, w));
    auto b = caps.open_same_storage(a);
    BOOST_TEST_REQUIRE(b != nullptr);
    auto got = get(*b, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp1, first_values);
    BOOST_TEST(got->writes.size() == 1u);

    auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"a", 3}});
    put(*b, "t", "", cp2);
    got = get(a, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp2, json::object{{"a", 3}, {"big", std::string(5000, 'x')}});
    BOOST_TEST(ids_of(list(a, "t", "", list_options{})) == (std::vector<std::string>{cp2.id, cp1.id}),
               boost::test_tools::per_element());
    run(b->delete_thread("t"));
    BOOST_TEST(!get(a, "t", "").has_value());
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
    auto got = get(*b, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp1.id);
    BOOST_TEST(got->writes.empty());

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

/// Damaged storage (a value, a checkpoint record, a pending write) is reported as
/// checkpoint_error(corrupt_checkpoint) naming the thread, not as a crash or a wrong value;
/// other threads still read.
inline void corruption(saver& s, const capabilities& caps) {
    auto ok = next_cp(nullptr, -1, "input", json::object{{"a", 1}});
    put(s, "ok", "", ok);
    const std::pair<part, const char*> parts[] = {{part::value, "value"}, {part::record, "record"}, {part::write, "write"}};
    for (const bool flip : {false, true})
    for (const auto& [what, label] : parts) {
        BOOST_TEST_CONTEXT("damaged " << label << (flip ? " (one byte changed)" : " (garbage)")) {
            const std::string thread = std::string("damaged_") + label + (flip ? "_flip" : "");
            auto cp1 = next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"b", "x"}});
            auto cp2 = next_cp(&cp1, 0, "loop", json::object{{"a", 2}});
            put(s, thread, "", cp1);
            put(s, thread, "", cp2);
            std::vector<pending_write> w{write_of("task", "node", "w", 1)};
            run(s.put_writes(thread, "", cp2.id, w));
            damage where;
            where.what = what;
            where.thread_id = thread;
            where.checkpoint_id = cp2.id;
            where.channel = what == part::write ? "w" : "a";
            where.flip = flip;
            if (!caps.corrupt(s, where)) {
                BOOST_TEST_MESSAGE("this saver cannot damage a " << label << ": not checked");
                continue;
            }
            auto e = expect_error(errc::corrupt_checkpoint, [&] { (void)get(s, thread, ""); });
            if (e) BOOST_TEST((has_name(*e, thread) || contains(e->what(), thread)), e->what());
            if (what != part::write)
                expect_error(errc::corrupt_checkpoint, [&] { (void)list(s, thread, "", list_options{}); });
            auto fine = get(s, "ok", "");
            BOOST_TEST_REQUIRE(fine.has_value());
            check_checkpoint(*fine, "ok", "", ok, json::object{{"a", 1}});
        }
    }
}

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

} // namespace stategraph::checkpoint::testing

/// @brief Registers the saver conformance suite as the test suite `suite_name`:
/// `STATEGRAPH_SAVER_CONFORMANCE(suite_name, factory)` or `(suite_name, factory, capabilities)`,
/// where `factory()` returns a `std::shared_ptr` to a saver on fresh, empty storage.
#define STATEGRAPH_SAVER_CONFORMANCE(suite_name, ...)                                                         \
    [[maybe_unused]] static ::boost::unit_test::test_suite* const BOOST_JOIN(stategraph_saver_conformance_,     \
                                                                             suite_name) =                      \
        ::stategraph::checkpoint::testing::register_suite(#suite_name, __VA_ARGS__);
