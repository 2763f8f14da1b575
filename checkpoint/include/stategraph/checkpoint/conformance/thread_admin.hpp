#pragma once
/// @file conformance/thread_admin.hpp
/// @brief The saver conformance checks of thread maintenance (prune, stats, delete_thread,
/// copy_thread, rewind_thread, list_threads, sweep). Registered by conformance.hpp.

#include <stategraph/checkpoint/conformance/support.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace stategraph::checkpoint::testing {

// -- thread maintenance: prune, stats, delete, copy, rewind, list_threads, sweep ---------------
// Each takes a fresh, empty saver.

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

} // namespace stategraph::checkpoint::testing
