#pragma once
/// @file store/conformance.hpp
/// @brief The conformance suite of the store interface: the behaviour every `base_store` must
/// share, as Boost.Test cases that one line registers for any store.
///
/// A test-only header (it includes Boost.Test; link `stategraph::checkpoint_conformance`).
/// @code
/// STATEGRAPH_STORE_CONFORMANCE(my_store_conformance,
///                              [](stategraph::store::store_options o) { return std::make_shared<my_store>(o); })
/// @endcode
/// Every case calls the factory (with the options it needs: a default ttl, refresh on read) and
/// runs on that store alone, so the factory must return a store on fresh, empty storage.

#include <cstdint>
#include <stategraph/checkpoint/testing/run.hpp>
#include <stategraph/checkpoint/store/store.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <source_location>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace stategraph::store::testing {

namespace json = boost::json;
using checkpoint::testing::run;
using store_factory = std::function<std::shared_ptr<base_store>(store_options)>;

inline std::vector<std::string> keys_of(const std::vector<search_item>& items) {
    std::vector<std::string> out;
    for (const auto& i : items) out.push_back(i.key);
    return out;
}

inline void pause_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

/// Runs `fn` and checks that it throws a `store_error` of kind `want` whose message holds `needle`.
template <class F>
void expect_store_error(F fn, store_errc want, const std::string& needle) {
    try {
        fn();
        BOOST_ERROR("expected store_error " << make_error_code(want).message() << " mentioning '" << needle << "'");
    } catch (const store_error& e) {
        BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(want), "got " << e.code().message() << ": " << e.what());
        BOOST_TEST(std::string(e.what()).find(needle) != std::string::npos, e.what() << " does not mention " << needle);
    }
}

inline void put_get(base_store& s) {
    const namespace_path ns{"users", "u1", "facts"};
    const json::object v{{"text", "likes green tea"}, {"n", 1}};
    run(s.put(ns, "f1", v));
    auto got = run(s.get(ns, "f1"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->value == v);
    BOOST_TEST((got->ns == ns));
    BOOST_TEST(got->key == "f1");
    BOOST_TEST((got->created_at == got->updated_at));
    // another namespace or key holds nothing
    const namespace_path other{"users", "u2", "facts"};
    BOOST_TEST(!run(s.get(other, "f1")).has_value());
    BOOST_TEST(!run(s.get(ns, "f2")).has_value());
    // a replacement keeps created_at and moves updated_at
    pause_ms(5);
    const json::object v2{{"text", "likes black coffee"}, {"n", 2}};
    run(s.put(ns, "f1", v2));
    auto again = run(s.get(ns, "f1"));
    BOOST_TEST_REQUIRE(again.has_value());
    BOOST_TEST(again->value == v2);
    BOOST_TEST((again->created_at == got->created_at));
    BOOST_TEST((again->updated_at > got->updated_at));
    // UTF-8 and nested values round-trip
    const json::object v3{{"text", "caf\xc3\xa9 \xe2\x98\x95"}, {"nested", json::object{{"a", json::array{1, 2.5, "x"}}}}};
    run(s.put(ns, "f3", v3));
    BOOST_TEST(run(s.get(ns, "f3"))->value == v3);
}

inline void remove(base_store& s) {
    const namespace_path ns{"docs"};
    const json::object v{{"text", "hello"}};
    run(s.put(ns, "a", v));
    run(s.put(ns, "b", v));
    run(s.remove(ns, "a"));
    BOOST_TEST(!run(s.get(ns, "a")).has_value());
    BOOST_TEST(run(s.get(ns, "b")).has_value());
    run(s.remove(ns, "missing")); // nothing to delete: no error
    const std::string q = "hello";
    BOOST_TEST((keys_of(run(s.search(ns, {.query = q}))) == std::vector<std::string>{"b"}));
}

inline void invalid_input(base_store& s) {
    const json::object v{{"x", 1}};
    const namespace_path empty;
    const namespace_path blank{"users", ""};
    const namespace_path dotted{"users", "a.b"};
    const namespace_path ok{"users"};
    expect_store_error([&] { run(s.put(empty, "k", v)); }, store_errc::invalid_namespace, "empty");
    expect_store_error([&] { run(s.put(blank, "k", v)); }, store_errc::invalid_namespace, "empty label at position 1");
    expect_store_error([&] { run(s.get(dotted, "k")); }, store_errc::invalid_namespace, "\"a.b\" contains '.'");
    expect_store_error([&] { run(s.remove(dotted, "k")); }, store_errc::invalid_namespace, "a.b");
    expect_store_error([&] { run(s.put(ok, "", v)); }, store_errc::invalid_key, "(\"users\")");
    // A NUL byte would end the key or label early in PostgreSQL's text parameters: refused by all.
    const std::string nul_key("a\0b", 3);
    expect_store_error([&] { run(s.put(ok, nul_key, v)); }, store_errc::invalid_key, "NUL byte at offset 1");
    const namespace_path nul_label{"users", std::string("u\0", 2)};
    expect_store_error([&] { run(s.get(nul_label, "k")); }, store_errc::invalid_namespace, "label 1 contains a NUL");
    expect_store_error([&] { run(s.search(blank)); }, store_errc::invalid_namespace, "empty label");
    const json::object bad_op{{"age", json::object{{"$between", json::array{1, 2}}}}};
    expect_store_error([&] { run(s.search(ok, {.filter = bad_op})); }, store_errc::invalid_filter, "$between");
    const json::object bad_operand{{"age", json::object{{"$gt", json::array{1}}}}};
    expect_store_error([&] { run(s.search(ok, {.filter = bad_operand})); }, store_errc::invalid_filter, "'age'");
    // the error carries the namespace and key
    try {
        run(s.put(dotted, "k", v));
    } catch (const store_error& e) {
        BOOST_TEST((e.ns() == dotted));
        BOOST_TEST(e.code().category().name() == std::string("stategraph.store"));
    }
}

inline void search_prefix(base_store& s) {
    const namespace_path a{"users", "u1"}, b{"users", "u1", "facts"}, c{"users", "u10"}, d{"chats", "c1"};
    const json::object v{{"text", "x"}};
    run(s.put(a, "k1", v));
    pause_ms(3);
    run(s.put(b, "k2", v));
    pause_ms(3);
    run(s.put(c, "k3", v));
    pause_ms(3);
    run(s.put(d, "k4", v));
    const namespace_path u1{"users", "u1"}, users{"users"}, all;
    // under ("users", "u1"): itself and below, not ("users", "u10"); newest first
    BOOST_TEST((keys_of(run(s.search(u1))) == std::vector<std::string>{"k2", "k1"}));
    BOOST_TEST((keys_of(run(s.search(users))) == std::vector<std::string>{"k3", "k2", "k1"}));
    BOOST_TEST((keys_of(run(s.search(all))) == std::vector<std::string>{"k4", "k3", "k2", "k1"}));
    BOOST_TEST((keys_of(run(s.search(all, {.limit = 2}))) == std::vector<std::string>{"k4", "k3"}));
    BOOST_TEST((keys_of(run(s.search(all, {.limit = 2, .offset = 2}))) == std::vector<std::string>{"k2", "k1"}));
    BOOST_TEST(run(s.search(all, {.offset = 4})).empty());
    auto items = run(s.search(u1));
    BOOST_TEST_REQUIRE(items.size() == 2u);
    BOOST_TEST((items[0].ns == b));
    BOOST_TEST(!items[0].score.has_value());
}

inline void search_filter(base_store& s) {
    const namespace_path ns{"people"};
    const json::object ann{{"name", "ann"}, {"age", 30}, {"city", "Oslo"}, {"profile", json::object{{"lang", "no"}}}};
    const json::object bob{{"name", "bob"}, {"age", 17}, {"city", "Rome"}, {"profile", json::object{{"lang", "it"}}}};
    const json::object cid{{"name", "cid"}, {"age", 65.5}, {"profile", json::object{{"lang", "no"}}}};
    run(s.put(ns, "ann", ann));
    pause_ms(3);
    run(s.put(ns, "bob", bob));
    pause_ms(3);
    run(s.put(ns, "cid", cid));
    auto keys = [&](const json::object& filter) {
        auto r = keys_of(run(s.search(ns, {.filter = filter})));
        std::sort(r.begin(), r.end());
        return r;
    };
    using names = std::vector<std::string>;
    const json::object eq{{"city", "Oslo"}};
    BOOST_TEST((keys(eq) == names{"ann"}));
    const json::object eq_op{{"age", json::object{{"$eq", 17}}}};
    BOOST_TEST((keys(eq_op) == names{"bob"}));
    const json::object ne{{"city", json::object{{"$ne", "Oslo"}}}};
    BOOST_TEST((keys(ne) == names{"bob", "cid"})); // a missing field is "not equal"
    const json::object range{{"age", json::object{{"$gte", 18}, {"$lt", 65.5}}}};
    BOOST_TEST((keys(range) == names{"ann"}));
    const json::object gt{{"age", json::object{{"$gt", 17}}}};
    BOOST_TEST((keys(gt) == names{"ann", "cid"}));
    const json::object lte{{"age", json::object{{"$lte", 30.0}}}};
    BOOST_TEST((keys(lte) == names{"ann", "bob"}));
    const json::object str_range{{"name", json::object{{"$gt", "b"}}}};
    BOOST_TEST((keys(str_range) == names{"bob", "cid"}));
    const json::object mixed{{"name", json::object{{"$gt", 3}}}}; // a string against a number: no order
    BOOST_TEST(keys(mixed).empty());
    const json::object nested{{"profile.lang", "no"}};
    BOOST_TEST((keys(nested) == names{"ann", "cid"}));
    const json::object both{{"profile.lang", "no"}, {"age", json::object{{"$lt", 40}}}};
    BOOST_TEST((keys(both) == names{"ann"}));
    const json::object whole{{"profile", json::object{{"lang", "it"}}}};
    BOOST_TEST((keys(whole) == names{"bob"}));
    // integers compare exactly, beyond a double's 53 bits, and across signed and unsigned
    const namespace_path ids{"ids"};
    const json::object big{{"id", std::int64_t(9007199254740993)}}, huge{{"id", std::uint64_t(18446744073709551615u)}};
    run(s.put(ids, "big", big));
    run(s.put(ids, "huge", huge));
    auto id_keys = [&](const json::object& filter) {
        auto r = keys_of(run(s.search(ids, {.filter = filter})));
        std::sort(r.begin(), r.end());
        return r;
    };
    const json::object near{{"id", std::int64_t(9007199254740992)}};
    BOOST_TEST(id_keys(near).empty());
    const json::object exact{{"id", std::int64_t(9007199254740993)}};
    BOOST_TEST((id_keys(exact) == names{"big"}));
    const json::object above{{"id", json::object{{"$gt", std::int64_t(9007199254740992)}}}};
    BOOST_TEST((id_keys(above) == names{"big", "huge"}));
    const json::object below_zero{{"id", json::object{{"$lt", -1}}}};
    BOOST_TEST(id_keys(below_zero).empty());
    const json::object under_huge{{"id", json::object{{"$lt", std::uint64_t(18446744073709551615u)}}}};
    BOOST_TEST((id_keys(under_huge) == names{"big"}));
    // paging applies after the filter
    const json::object any_lang{{"profile.lang", json::object{{"$ne", "xx"}}}};
    BOOST_TEST((keys_of(run(s.search(ns, {.filter = any_lang, .limit = 1, .offset = 1}))) == names{"bob"}));
}

inline void search_query(base_store& s) {
    const namespace_path ns{"users", "u1", "facts"};
    const json::object tea{{"text", "Drinks green tea every morning"}, {"kind", "habit"}};
    const json::object both{{"text", "Green tea and jasmine tea, never coffee"}, {"kind", "taste"}};
    const json::object coffee{{"text", "Owns a coffee grinder"}, {"kind", "thing"}};
    const json::object hidden{{"text", "tea tea tea"}};
    const json::object other_field{{"text", "likes trains"}, {"note", "tea"}};
    run(s.put(ns, "tea", tea));
    run(s.put(ns, "both", both));
    run(s.put(ns, "coffee", coffee));
    run(s.put(ns, "hidden", hidden, {.index = index_spec::off()}));
    const std::vector<std::string> text_only{"text"};
    run(s.put(ns, "other", other_field, {.index = text_only}));
    const namespace_path elsewhere{"users", "u2", "facts"};
    run(s.put(elsewhere, "tea2", tea));

    const std::string q1 = "jasmine";
    BOOST_TEST((keys_of(run(s.search(ns, {.query = q1}))) == std::vector<std::string>{"both"}));
    const std::string q2 = "Green TEA";
    auto r = run(s.search(ns, {.query = q2}));
    BOOST_TEST_REQUIRE(r.size() == 2u); // not "hidden" (not indexed), not "other" (its "note" is not indexed)
    BOOST_TEST(r[0].key == "both");     // more matches of the query's words rank higher
    BOOST_TEST(r[1].key == "tea");
    BOOST_TEST_REQUIRE(r[0].score.has_value());
    BOOST_TEST(*r[0].score >= *r[1].score);
    // any word of the query matches
    const std::string q3 = "grinder jasmine";
    auto any = keys_of(run(s.search(ns, {.query = q3})));
    std::sort(any.begin(), any.end());
    BOOST_TEST((any == std::vector<std::string>{"both", "coffee"}));
    // a query with a filter, and paging
    const json::object habit{{"kind", "habit"}};
    BOOST_TEST((keys_of(run(s.search(ns, {.filter = habit, .query = q2}))) == std::vector<std::string>{"tea"}));
    BOOST_TEST((keys_of(run(s.search(ns, {.query = q2, .limit = 1, .offset = 1}))) == std::vector<std::string>{"tea"}));
    // the prefix still applies
    const namespace_path users{"users"};
    BOOST_TEST(run(s.search(users, {.query = q2})).size() == 3u);
    // no word, no match
    const std::string punct = "?!";
    BOOST_TEST(run(s.search(ns, {.query = punct})).empty());
    const std::string none = "submarine";
    BOOST_TEST(run(s.search(ns, {.query = none})).empty());
    // a replaced item is searched by its new text only
    const json::object changed{{"text", "Now prefers submarine sandwiches"}};
    run(s.put(ns, "tea", changed));
    BOOST_TEST((keys_of(run(s.search(ns, {.query = none}))) == std::vector<std::string>{"tea"}));
    BOOST_TEST((keys_of(run(s.search(ns, {.query = q2}))) == std::vector<std::string>{"both"}));
    // UTF-8 words
    const json::object cafe{{"text", "un caf\xc3\xa9 noir"}};
    run(s.put(ns, "cafe", cafe));
    const std::string q4 = "caf\xc3\xa9";
    BOOST_TEST((keys_of(run(s.search(ns, {.query = q4}))) == std::vector<std::string>{"cafe"}));
}

inline void index_fields_default(const store_factory& make) {
    store_options o;
    o.index_fields = {"title"};
    auto s = make(o);
    const namespace_path ns{"notes"};
    const json::object v{{"title", "apples"}, {"body", "pears"}};
    run(s->put(ns, "n", v));
    const std::string apples = "apples", pears = "pears";
    BOOST_TEST(run(s->search(ns, {.query = apples})).size() == 1u);
    BOOST_TEST(run(s->search(ns, {.query = pears})).empty());
    const std::vector<std::string> whole{"$"};
    run(s->put(ns, "n2", v, {.index = whole}));
    BOOST_TEST((keys_of(run(s->search(ns, {.query = pears}))) == std::vector<std::string>{"n2"}));
}

inline void ttl(const store_factory& make) {
    store_options o;
    o.refresh_on_read = true;
    auto s = make(o);
    const namespace_path ns{"tmp"}, other{"keep"};
    const json::object v{{"text", "ephemeral note"}};
    run(s->put(ns, "short", v, {.ttl = std::chrono::milliseconds(150)}));
    run(s->put(other, "forever", v));
    const std::string q = "ephemeral";
    BOOST_TEST(run(s->get(ns, "short")).has_value());
    pause_ms(300);
    BOOST_TEST(!run(s->get(ns, "short")).has_value());
    BOOST_TEST((keys_of(run(s->search({}, {.query = q}))) == std::vector<std::string>{"forever"}));
    const namespace_path all;
    BOOST_TEST(run(s->search(all)).size() == 1u);
    auto names = run(s->list_namespaces());
    BOOST_TEST((names == std::vector<namespace_path>{other}));
    BOOST_TEST(run(s->sweep()) == 1u);
    BOOST_TEST(run(s->sweep()) == 0u);
    // put again after expiry: a new item (new created_at)
    run(s->put(ns, "short", v, {.ttl = std::chrono::milliseconds(150)}));
    pause_ms(300);
    run(s->put(ns, "short", v));
    auto fresh = run(s->get(ns, "short"));
    BOOST_TEST_REQUIRE(fresh.has_value());
    BOOST_TEST((fresh->created_at == fresh->updated_at));
    // a negative ttl never expires
    run(s->put(ns, "neg", v, {.ttl = std::chrono::milliseconds(-1)}));
    pause_ms(5);
    BOOST_TEST(run(s->get(ns, "neg")).has_value());
}

inline void ttl_refresh(const store_factory& make) {
    store_options o;
    o.refresh_on_read = true;
    auto s = make(o);
    const namespace_path ns{"tmp"};
    const json::object v{{"text", "refresh me"}};
    const json::object findme{{"text", "findme please"}};
    run(s->put(ns, "read", v, {.ttl = std::chrono::milliseconds(600)}));
    run(s->put(ns, "searched", findme, {.ttl = std::chrono::milliseconds(600)}));
    run(s->put(ns, "unread", v, {.ttl = std::chrono::milliseconds(600)}));
    const std::string q = "findme";
    for (int i = 0; i < 3; ++i) { // 3 x 300 ms: past the ttl unless reads refresh it
        pause_ms(300);
        BOOST_TEST(run(s->get(ns, "read")).has_value());
        BOOST_TEST(run(s->search(ns, {.query = q})).size() == 1u);
    }
    BOOST_TEST(run(s->get(ns, "read", false)).has_value());
    BOOST_TEST(run(s->get(ns, "searched", false)).has_value());
    BOOST_TEST(!run(s->get(ns, "unread", false)).has_value());
    // without refresh on read, a read does not extend the ttl
    store_options plain;
    plain.refresh_on_read = false;
    auto t = make(plain);
    run(t->put(ns, "read", v, {.ttl = std::chrono::milliseconds(500)}));
    for (int i = 0; i < 2; ++i) {
        pause_ms(300);
        (void)run(t->get(ns, "read"));
    }
    BOOST_TEST(!run(t->get(ns, "read")).has_value());
}

inline void default_ttl(const store_factory& make) {
    store_options o;
    o.default_ttl = std::chrono::milliseconds(150);
    auto s = make(o);
    const namespace_path ns{"tmp"};
    const json::object v{{"x", 1}};
    run(s->put(ns, "d", v));
    run(s->put(ns, "never", v, {.ttl = std::chrono::milliseconds(-1)}));
    pause_ms(300);
    BOOST_TEST(!run(s->get(ns, "d")).has_value());
    BOOST_TEST(run(s->get(ns, "never")).has_value());
}

inline void list_namespaces(base_store& s) {
    const json::object v{{"x", 1}};
    const std::vector<namespace_path> spaces{{"users", "u1", "facts"}, {"users", "u1", "prefs"}, {"users", "u2", "facts"},
                                             {"chats", "c1", "messages"}, {"chats", "c2", "messages"}, {"solo"}};
    for (const auto& ns : spaces) run(s.put(ns, "k", v));
    run(s.put(spaces[0], "k2", v)); // two items, one namespace
    using list = std::vector<namespace_path>;
    auto all = run(s.list_namespaces());
    BOOST_TEST(all.size() == spaces.size());
    BOOST_TEST(std::is_sorted(all.begin(), all.end()));
    const namespace_path users{"users"};
    BOOST_TEST((run(s.list_namespaces({.prefix = &users})) ==
                list{{"users", "u1", "facts"}, {"users", "u1", "prefs"}, {"users", "u2", "facts"}}));
    const namespace_path facts{"facts"};
    BOOST_TEST((run(s.list_namespaces({.suffix = &facts})) == list{{"users", "u1", "facts"}, {"users", "u2", "facts"}}));
    const namespace_path wild{"*", "c1"};
    BOOST_TEST((run(s.list_namespaces({.prefix = &wild})) == list{{"chats", "c1", "messages"}}));
    BOOST_TEST((run(s.list_namespaces({.max_depth = 1})) == list{{"chats"}, {"solo"}, {"users"}}));
    BOOST_TEST((run(s.list_namespaces({.prefix = &users, .max_depth = 2})) == list{{"users", "u1"}, {"users", "u2"}}));
    BOOST_TEST((run(s.list_namespaces({.limit = 2, .offset = 1})) == list{{"chats", "c2", "messages"}, {"solo"}}));
    run(s.remove(spaces[5], "k"));
    BOOST_TEST(run(s.list_namespaces()).size() == spaces.size() - 1);
}

inline void concurrent(base_store& s) {
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&s, t] {
            const namespace_path ns{"load", "t" + std::to_string(t)};
            for (int i = 0; i < 25; ++i) {
                const json::object v{{"text", "word" + std::to_string(i)}, {"i", i}};
                run(s.put(ns, "k" + std::to_string(i), v));
            }
        });
    for (auto& th : threads) th.join();
    const namespace_path load{"load"};
    BOOST_TEST(run(s.search(load, {.limit = 1000})).size() == 100u);
    const std::string q = "word7";
    BOOST_TEST(run(s.search(load, {.query = q, .limit = 1000})).size() == 4u);
}

struct check {
    const char* name;
    std::function<void(const store_factory&)> body;
};

inline const std::vector<check>& checks() {
    auto on = [](void (*f)(base_store&)) {
        return [f](const store_factory& make) {
            auto s = make(store_options{});
            BOOST_TEST_REQUIRE(bool(s), "the store factory returned no store");
            f(*s);
        };
    };
    static const std::vector<check> all{
        {"put_get", on(put_get)},
        {"remove", on(remove)},
        {"invalid_input", on(invalid_input)},
        {"search_prefix", on(search_prefix)},
        {"search_filter", on(search_filter)},
        {"search_query", on(search_query)},
        {"index_fields_default", index_fields_default},
        {"ttl", ttl},
        {"ttl_refresh", ttl_refresh},
        {"default_ttl", default_ttl},
        {"list_namespaces", on(list_namespaces)},
        {"concurrent", on(concurrent)},
    };
    return all;
}

/// @brief Registers the test suite `name` with one case per check, each on stores from `factory`.
inline boost::unit_test::test_suite* register_suite(const std::string& name, store_factory factory,
                                                    std::source_location where = std::source_location::current()) {
    namespace ut = boost::unit_test;
    auto* suite = new ut::test_suite(name, where.file_name(), where.line());
    for (const auto& c : checks()) {
        auto body = c.body;
        suite->add(ut::make_test_case([factory, body] { body(factory); }, c.name, where.file_name(), where.line()));
    }
    ut::framework::current_auto_test_suite().add(suite);
    return suite;
}

} // namespace stategraph::store::testing

/// @brief Registers the store conformance suite as the test suite `suite_name`:
/// `STATEGRAPH_STORE_CONFORMANCE(suite_name, factory)`, where `factory(store_options)` returns a
/// `std::shared_ptr` to a store on fresh, empty storage.
#define STATEGRAPH_STORE_CONFORMANCE(suite_name, ...)                                                          \
    [[maybe_unused]] static ::boost::unit_test::test_suite* const BOOST_JOIN(stategraph_store_conformance_,      \
                                                                             suite_name) =                       \
        ::stategraph::store::testing::register_suite(#suite_name, __VA_ARGS__);
