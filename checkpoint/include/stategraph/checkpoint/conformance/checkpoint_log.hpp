#pragma once
/// @file conformance/checkpoint_log.hpp
/// @brief The saver conformance checks of the checkpoint log (put, put_writes, get, list): what
/// is stored reads back exactly, per thread and namespace, from one instance, several OS threads
/// or a second instance, and damaged storage is reported. Registered by conformance.hpp.

#include <stategraph/checkpoint/conformance/support.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::testing {

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

/// put_many: checkpoints stored in order, as put one by one would store them (values of a
/// parent read through its children, the newest is the latest; a checkpoint named twice keeps
/// its later copy); an empty batch stores nothing.
inline void put_many_in_order(saver& s) {
    run(s.put_many("t", "", std::vector<checkpoint>{}));
    BOOST_TEST(!get(s, "t", "").has_value());
    std::vector<checkpoint> cps;
    cps.push_back(next_cp(nullptr, -1, "input", json::object{{"a", 1}, {"b", "x"}}));
    cps.push_back(next_cp(&cps.back(), 0, "loop", json::object{{"a", 2}}));
    cps.push_back(next_cp(&cps.back(), 1, "loop", json::object{{"c", json::array{1, 2}}}));
    run(s.put_many("t", "", cps));
    auto got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cps[2], json::object{{"a", 2}, {"b", "x"}, {"c", json::array{1, 2}}});
    auto all = list(s, "t", "", {});
    BOOST_TEST_REQUIRE(all.size() == 3u);
    BOOST_TEST(all[0].cp.id == cps[2].id);
    BOOST_TEST(all[1].cp.id == cps[1].id);
    check_checkpoint(all[1], "t", "", cps[1], json::object{{"a", 2}, {"b", "x"}});
    check_checkpoint(all[2], "t", "", cps[0], json::object{{"a", 1}, {"b", "x"}});
    // A second batch continues the first; one alone is a put.
    auto cp4 = next_cp(&cps[2], 2, "loop", json::object{{"b", "y"}});
    run(s.put_many("t", "", std::vector<checkpoint>{cp4}));
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cp4, json::object{{"a", 2}, {"b", "y"}, {"c", json::array{1, 2}}});
    BOOST_TEST(!get(s, "t", "sub").has_value());
    // A batch naming a checkpoint twice (same id, same versions) stores what two puts in turn
    // would: the later copy. (One SQL statement may not update a row twice: a saver that sends a
    // batch as one statement must keep the last copy itself.)
    auto cp5 = next_cp(&cp4, 3, "loop", json::object{{"a", 5}});
    auto again = cp5;
    again.values["a"] = 6;
    again.source = "update";
    run(s.put_many("t", "", std::vector<checkpoint>{cp5, again}));
    got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cp5.id);
    BOOST_TEST(got->cp.source == "update");
    BOOST_TEST(got->cp.values.at("a") == 6);
    BOOST_TEST(list(s, "t", "", {}).size() == 5u);
}

/// end_call: a call's last checkpoints, then its pending writes against one of them, then the
/// lease given back, read back as put_many and put_writes would leave them; parts may be empty.
inline void end_call(saver& s) {
    saver::call_end nothing;
    run(s.end_call("t", "", nothing));
    BOOST_TEST(!get(s, "t", "").has_value());
    run(s.acquire("t"));
    std::vector<checkpoint> cps;
    cps.push_back(next_cp(nullptr, -1, "input", json::object{{"a", 1}}));
    cps.push_back(next_cp(&cps.back(), 0, "loop", json::object{{"b", "x"}}));
    saver::call_end end;
    end.checkpoints = cps;
    end.writes_to = cps[1].id;
    end.writes = {write_of("task1", "ask", "__interrupt__", json::object{{"question", "ok?"}}),
                  write_of("task1", "ask", "a", 5)};
    end.release = true;
    run(s.end_call("t", "", end));
    auto got = get(s, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    check_checkpoint(*got, "t", "", cps[1], json::object{{"a", 1}, {"b", "x"}});
    BOOST_TEST_REQUIRE(got->writes.size() == 2u);
    BOOST_TEST(got->writes[0].channel == "__interrupt__");
    BOOST_TEST(got->writes[0].value == (json::object{{"question", "ok?"}}));
    BOOST_TEST(got->writes[1].value == 5);
    BOOST_TEST(list(s, "t", "", {}).size() == 2u);
    // Writes alone, against a checkpoint already stored; the lease taken again and kept.
    run(s.acquire("t"));
    saver::call_end writes_only;
    writes_only.writes_to = cps[0].id;
    writes_only.writes = {write_of("task0", "prep", "b", "y")};
    run(s.end_call("t", "", writes_only));
    auto first = get(s, "t", "", cps[0].id);
    BOOST_TEST_REQUIRE(first.has_value());
    BOOST_TEST_REQUIRE(first->writes.size() == 1u);
    BOOST_TEST(first->writes[0].value == "y");
    run(s.release("t"));
    // acquire_and_get reads as get does (and takes the lease, given back here).
    auto head = run(s.acquire_and_get("t", "", std::nullopt));
    BOOST_TEST_REQUIRE(head.has_value());
    check_checkpoint(*head, "t", "", cps[1], json::object{{"a", 1}, {"b", "x"}});
    BOOST_TEST(head->writes.size() == 2u);
    run(s.release("t"));
    BOOST_TEST(!run(s.acquire_and_get("none", "", std::nullopt)).has_value());
    run(s.release("none"));
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

} // namespace stategraph::checkpoint::testing
