// The savers' storage codec (checkpoint/src/codec.hpp): records and values read back exactly as
// written, damaged bytes of every kind are reported as `codec::corrupt` (never a crash or a
// wrong value), and records stay small.
#include <boost/test/unit_test.hpp>

#include "codec.hpp"

#include <stategraph/checkpoint/saver.hpp>

#include <boost/json.hpp>

#include <limits>
#include <map>
#include <set>
#include <string>

namespace {

namespace json = boost::json;
namespace codec = stategraph::checkpoint::codec;
using stategraph::checkpoint::checkpoint;
using stategraph::checkpoint::new_checkpoint_id;

checkpoint sample() {
    checkpoint cp;
    cp.id = new_checkpoint_id();
    const auto own = *codec::id_number(cp.id);
    cp.step = 7;
    cp.source = "loop";
    cp.versions = {
        {"same", cp.id},                         // written here
        {"older", codec::id_text(own - 123456)}, // written earlier
        {"newer", codec::id_text(own + 5)},      // (a fork may point forward)
        {"__graph__", "0123456789abcdef"},       // a signature
        {"legacy", "00000000000000000001"},      // a 20-hex-digit id of the first format
        {"odd name \xe2\x9c\x93", "text"},       // anything else
        {"never", ""},
    };
    cp.frontier = json::object{
        {"pull", json::array{"n6", "n7"}},
        {"push", json::array{json::object{{"node", "worker"}, {"arg", json::object{{"x", -3}, {"y", 2.5}}}}}},
        {"barriers", json::array{json::array{true, false}}},
        {"seen", ""},
        {"custom key", json::array{nullptr, std::numeric_limits<std::uint64_t>::max(),
                                   std::numeric_limits<std::int64_t>::min(), "h\xc3\xa9llo \"q\"\n"}},
    };
    cp.metadata = json::object{{"writers", json::array{"n5"}}, {"step", 7}, {"delta", json::object{}}, {"source", "loop"}};
    cp.signature = "fedcba9876543210";
    return cp;
}

checkpoint decoded(const std::string& bytes, const checkpoint& like) {
    checkpoint back;
    back.id = like.id;
    back.step = like.step;
    back.source = like.source;
    codec::decode_record(bytes, back);
    return back;
}

} // namespace

BOOST_AUTO_TEST_SUITE(codec_tests)

BOOST_AUTO_TEST_CASE(ids_read_back_as_numbers) {
    for (std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{63}, std::uint64_t{64},
                            std::uint64_t{1} << 59, std::numeric_limits<std::uint64_t>::max()}) {
        const auto text = codec::id_text(n);
        BOOST_TEST(text.size() == 11u);
        BOOST_TEST((codec::id_number(text) == n));
    }
    std::string prev;
    for (int i = 0; i < 100; ++i) {
        auto id = new_checkpoint_id();
        BOOST_TEST(codec::id_number(id).has_value());
        BOOST_TEST(prev < id); // text order is time order
        prev = id;
    }
    BOOST_TEST(!codec::id_number("").has_value());
    BOOST_TEST(!codec::id_number("0123456789").has_value());      // too short
    BOOST_TEST(!codec::id_number("0000000000000000").has_value()); // a signature, not an id
    BOOST_TEST(!codec::id_number("0YeP8ySxv9!").has_value());      // not an id symbol
    BOOST_TEST(!codec::id_number("zzzzzzzzzzz").has_value());      // beyond 64 bits
}

BOOST_AUTO_TEST_CASE(records_read_back_exactly) {
    const auto cp = sample();
    const auto bytes = codec::encode_record(cp);
    const auto back = decoded(bytes, cp);
    BOOST_TEST((back.versions == cp.versions));
    BOOST_TEST(back.frontier == cp.frontier);
    BOOST_TEST(back.metadata == cp.metadata);
    BOOST_TEST(json::serialize(back.metadata) == json::serialize(cp.metadata)); // same key order
    BOOST_TEST(back.signature == cp.signature);

    // step/source are left out only when they repeat the record's columns.
    auto other = cp;
    other.metadata = json::object{{"step", 8}, {"source", "input"}, {"writers", json::array{}}};
    const auto b2 = decoded(codec::encode_record(other), other);
    BOOST_TEST(json::serialize(b2.metadata) == json::serialize(other.metadata));
    other.signature = "not hex";
    BOOST_TEST(decoded(codec::encode_record(other), other).signature == "not hex");
    other.signature.clear();
    BOOST_TEST(decoded(codec::encode_record(other), other).signature.empty());
}

BOOST_AUTO_TEST_CASE(a_chain_step_record_is_small) {
    checkpoint cp;
    cp.id = new_checkpoint_id();
    const auto own = *codec::id_number(cp.id);
    cp.step = 6;
    cp.source = "loop";
    cp.versions = {{"count", cp.id}, {"log", cp.id}, {"__graph__", "0123456789abcdef"}, {"other", codec::id_text(own - 9000)}};
    cp.frontier = json::object{{"pull", json::array{"n7"}}};
    cp.metadata = json::object{{"writers", json::array{"n6"}}, {"step", 6}, {"source", "loop"}};
    const auto bytes = codec::encode_record(cp);
    BOOST_TEST_MESSAGE("chain step record: " << bytes.size() << " bytes");
    BOOST_TEST(bytes.size() <= 56u);
    const auto as_json = json::serialize(cp.frontier).size() + json::serialize(cp.metadata).size() + 4 * 20;
    BOOST_TEST(bytes.size() * 2 < as_json);
}

BOOST_AUTO_TEST_CASE(damaged_records_are_corrupt_never_wrong) {
    const auto cp = sample();
    const auto bytes = codec::encode_record(cp);
    for (std::size_t n = 0; n < bytes.size(); ++n)
        BOOST_CHECK_THROW(decoded(bytes.substr(0, n), cp), codec::corrupt); // every truncation
    BOOST_CHECK_THROW(decoded(bytes + '\0', cp), codec::corrupt);           // trailing bytes
    auto bad = bytes;
    bad[0] = 9; // unknown format
    BOOST_CHECK_THROW(decoded(bad, cp), codec::corrupt);
    BOOST_CHECK_THROW(decoded(std::string("\x01\x01\x00", 3) + std::string(12, '\xff'), cp), codec::corrupt); // varint
    // Flipping any byte either reads back as something or is corrupt: never a crash.
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        auto flipped = bytes;
        flipped[i] = static_cast<char>(flipped[i] ^ 0x5a);
        try {
            (void)decoded(flipped, cp);
        } catch (const codec::corrupt&) {
        }
    }
    // Nesting beyond the limit is refused on both sides.
    json::value deep = json::array{};
    for (int i = 0; i < 5000; ++i) deep = json::array{std::move(deep)};
    auto too_deep = cp;
    too_deep.frontier = deep;
    BOOST_CHECK_THROW((void)codec::encode_record(too_deep), std::length_error);
}

BOOST_AUTO_TEST_CASE(values_and_append_chains) {
    const std::string v1 = new_checkpoint_id(), v2 = new_checkpoint_id(), v3 = new_checkpoint_id();
    std::map<std::string, std::string> stored{
        {v1, codec::encode_value(json::array{"a"}, nullptr, v1)},
        {v2, codec::encode_value(json::array{"b", "c"}, &v1, v2)},
        {v3, codec::encode_value(json::array{json::object{{"d", 1}}}, &v2, v3)},
    };
    BOOST_TEST(stored[v1] == "[\"a\"]"); // a whole value is its JSON text
    // ... the very text Boost.JSON writes (escapes, control characters, UTF-8, numbers, nesting).
    const json::value samples[] = {
        nullptr, true, -42, std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::int64_t>::min(), 2.5,
        "quote\" backslash\\ slash/ \b\f\n\r\t \x01\x1f h\xc3\xa9llo \xe2\x9c\x93",
        json::array{1, json::array{}, json::object{}, json::object{{"k\n", json::array{"v", nullptr}}}},
        json::object{{"", ""}, {"a", json::object{{"b", -0.5}}}},
    };
    for (const auto& v : samples) BOOST_TEST(codec::encode_value(v, nullptr, v1) == json::serialize(v));
    const auto parts = codec::split_value(stored[v3], v3);
    BOOST_TEST((parts.extends == v2));
    BOOST_TEST(parts.json == "[{\"d\":1}]");
    auto fetch = [&](const std::string& v) -> std::optional<std::string> {
        auto it = stored.find(v);
        if (it == stored.end()) return std::nullopt;
        return it->second;
    };
    BOOST_TEST(codec::resolve_value(v3, fetch) == (json::array{"a", "b", "c", json::object{{"d", 1}}}));
    BOOST_TEST(codec::resolve_value(v2, fetch) == (json::array{"a", "b", "c"}));
    BOOST_TEST(codec::resolve_value(v1, fetch) == (json::array{"a"}));

    // A missing link, a base that is not a list, items that are not a list, a link that is not
    // older: each is corrupt, with the versions in the message.
    auto missing = stored;
    missing.erase(v1);
    auto fetch_missing = [&](const std::string& v) -> std::optional<std::string> {
        auto it = missing.find(v);
        if (it == missing.end()) return std::nullopt;
        return it->second;
    };
    try {
        (void)codec::resolve_value(v3, fetch_missing);
        BOOST_FAIL("a missing link must be reported");
    } catch (const codec::corrupt& e) {
        BOOST_TEST(std::string(e.what()).find(v1) != std::string::npos, e.what());
    }
    stored[v1] = "{\"not\":\"a list\"}";
    BOOST_CHECK_THROW((void)codec::resolve_value(v2, fetch), codec::corrupt);
    stored[v1] = codec::encode_value(json::array{"a"}, nullptr, v1);
    stored[v2] = codec::encode_value(json::object{}, &v1, v2);
    BOOST_CHECK_THROW((void)codec::resolve_value(v2, fetch), codec::corrupt);
    stored[v2] = codec::encode_value(json::array{}, &v3, v2); // points forward: a cycle in waiting
    BOOST_CHECK_THROW((void)codec::resolve_value(v2, fetch), codec::corrupt);
    stored[v2] = "{oops";
    BOOST_CHECK_THROW((void)codec::resolve_value(v2, fetch), codec::corrupt);
    BOOST_CHECK_THROW((void)codec::resolve_value("nowhere", fetch), codec::corrupt);
}

BOOST_AUTO_TEST_CASE(inline_values_read_back) {
    const std::string big(300, 'x');
    const auto bytes = codec::encode_inline({{"count", "5"}, {"writers", "[\"n1\"]"}, {"long name here", big}});
    const auto back = codec::decode_inline(bytes);
    BOOST_TEST_REQUIRE(back.size() == 3u);
    BOOST_TEST(back[0].first == "count");
    BOOST_TEST(back[0].second == "5");
    BOOST_TEST(back[1].first == "writers");
    BOOST_TEST(back[2].first == "long name here");
    BOOST_TEST(back[2].second == big);
    BOOST_TEST(codec::decode_inline(codec::encode_inline({})).empty());
    for (std::size_t n = 0; n < bytes.size(); ++n)
        BOOST_CHECK_THROW((void)codec::decode_inline(std::string_view(bytes).substr(0, n)), codec::corrupt);
    BOOST_CHECK_THROW((void)codec::decode_inline(bytes + "x"), codec::corrupt);
}

BOOST_AUTO_TEST_CASE(inline_helpers_merge_measure_and_mark) {
    // merge: fresh replaces, old stays unless written again here or elsewhere.
    const auto old = codec::encode_inline({{"a", "1"}, {"b", "2"}, {"c", "3"}});
    const auto merged = codec::merge_inline(old, {{"a", "10"}}, [](std::string_view c) { return c == "c"; });
    const auto back = codec::decode_inline(merged);
    BOOST_TEST_REQUIRE(back.size() == 2u);
    BOOST_TEST(back[0].first == "a");
    BOOST_TEST(back[0].second == "10");
    BOOST_TEST(back[1].first == "b");
    BOOST_TEST(codec::merge_inline("", {}, [](std::string_view) { return false; }).empty());
    BOOST_TEST(codec::merge_inline(codec::encode_inline({{"a", "1"}}), {}, [](std::string_view) { return true; }).empty());

    // measure: values and their bytes; the rest is framing.
    const auto m = codec::measure_inline(old);
    BOOST_TEST(m.values == 3u);
    BOOST_TEST(m.value_bytes == 3u);
    BOOST_CHECK_THROW((void)codec::measure_inline(old.substr(0, old.size() - 1)), codec::corrupt);

    // mark: a version and every version its appended items extend; a missing link ends the walk.
    const std::string v1 = new_checkpoint_id(), v2 = new_checkpoint_id(), v3 = new_checkpoint_id();
    std::map<std::string, std::string> stored{{v1, "[1]"},
                                              {v2, codec::encode_value(json::array{2}, &v1, v2)},
                                              {v3, codec::encode_value(json::array{3}, &v2, v3)}};
    auto fetch = [&](const std::string& v) -> std::optional<std::string> {
        auto it = stored.find(v);
        if (it == stored.end()) return std::nullopt;
        return it->second;
    };
    std::set<std::pair<std::string, std::string>> needed;
    codec::mark_needed("log", v3, fetch, needed);
    BOOST_TEST(needed.size() == 3u);
    BOOST_TEST(needed.count({"log", v1}) == 1u);
    stored.erase(v1);
    std::set<std::pair<std::string, std::string>> partial;
    codec::mark_needed("log", v2, fetch, partial);
    BOOST_TEST(partial.size() == 2u); // v2 and the missing v1 it names
}

BOOST_AUTO_TEST_SUITE_END()
