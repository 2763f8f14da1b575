// The savers' storage codec (checkpoint/src/codec.hpp): records and values read back exactly as
// written, damaged bytes of every kind are reported as `codec::corrupt` (never a crash or a
// wrong value), and records stay small.
#include <boost/test/unit_test.hpp>

#include "codec.hpp"

#include <stategraph/checkpoint/saver.hpp>

#include <boost/json.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>

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

// ---- hostile bytes ---------------------------------------------------------------------------

// The codec's varint (7 bits a byte, low first), to craft stored bytes by hand.
std::string varint(std::uint64_t v) {
    std::string out;
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7f) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
    return out;
}

std::string bytes_of(std::initializer_list<int> bs) {
    std::string out;
    for (int b : bs) out.push_back(static_cast<char>(b));
    return out;
}

constexpr std::uint64_t huge = std::uint64_t{1} << 56;

enum class outcome { read, corrupt, other_error, hung };

const char* name(outcome o) {
    switch (o) {
    case outcome::read: return "read back";
    case outcome::corrupt: return "corrupt";
    case outcome::other_error: return "another exception";
    case outcome::hung: return "still running after 10 s";
    }
    return "?";
}

// Runs `f` on a thread of its own and says how it ended. A decode that spins is left running
// (detached: it owns copies of everything it reads) so that the test fails instead of hanging.
template <class F>
outcome guarded(F f) {
    auto done = std::make_shared<std::promise<outcome>>();
    auto result = done->get_future();
    std::thread worker([done, f = std::move(f)]() mutable {
        try {
            f();
            done->set_value(outcome::read);
        } catch (const codec::corrupt&) {
            done->set_value(outcome::corrupt);
        } catch (...) {
            done->set_value(outcome::other_error);
        }
    });
    if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
        worker.detach();
        return outcome::hung;
    }
    worker.join();
    return result.get();
}

// A record decoded for a checkpoint with a real id (relative versions need one).
outcome record_outcome(const std::string& bytes) {
    return guarded([bytes] {
        checkpoint cp;
        cp.id = new_checkpoint_id();
        cp.step = 3;
        cp.source = "loop";
        codec::decode_record(bytes, cp);
    });
}

#define EXPECT_CORRUPT(what, expr)                                                                  \
    do {                                                                                            \
        const auto got_ = (expr);                                                                   \
        BOOST_TEST((got_ == outcome::corrupt), what << ": " << name(got_) << ", expected corrupt"); \
    } while (0)

} // namespace

BOOST_AUTO_TEST_SUITE(codec_tests)

BOOST_AUTO_TEST_CASE(the_checksum_is_crc32c_by_instruction_and_by_table_alike) {
    // The check value of CRC-32C (RFC 3720, appendix B.4): "123456789" -> 0xE3069283.
    BOOST_TEST(codec::crc32c("123456789") == 0xE306'9283u);
    BOOST_TEST(codec::crc32c("") == 0u);
    // The fast path (the processor's instruction, 8 bytes at a time, then the tail) and the
    // table agree on every length and alignment.
    std::uint64_t x = 0x9E37'79B9'7F4A'7C15ull;
    std::string bytes(300, '\0');
    for (auto& c : bytes) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c = static_cast<char>(x);
    }
    for (std::size_t from = 0; from < 9; ++from)
        for (std::size_t n = 0; from + n <= bytes.size(); n += 1 + n / 7) {
            const std::string_view part(bytes.data() + from, n);
            const auto* p = reinterpret_cast<const unsigned char*>(part.data());
            const std::uint32_t by_table = ~codec::crc32c_by_table(0xFFFF'FFFFu, p, n);
            BOOST_TEST(codec::crc32c(part) == by_table, "from " << from << ", " << n << " bytes");
        }
    // A sealed value is checked with the same sum: one changed byte is refused.
    std::string sealed = codec::seal("payload", {"t", "ns"});
    BOOST_TEST(codec::unseal(sealed, {"t", "ns"}) == "payload");
    sealed.back() ^= 1;
    BOOST_CHECK_THROW(codec::unseal(sealed, {"t", "ns"}), codec::corrupt);
}

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

// Issue 11: every length, count, position and distance read from stored bytes is checked against
// the bytes present (and the record's own sizes) before it drives a loop or an allocation.
BOOST_AUTO_TEST_CASE(huge_numbers_in_a_record_are_corrupt_promptly) {
    // record: format, versions (count, then key + ref each), frontier, step position, source
    // position, metadata object, signature ref.
    const auto no_versions = bytes_of({1, 0});
    const auto null_frontier = bytes_of({0});
    const auto empty_object = bytes_of({8, 0});
    const auto empty_signature = bytes_of({4, 0});
    auto record = [&](const std::string& step_at, const std::string& source_at, const std::string& metadata = "") {
        return no_versions + null_frontier + step_at + source_at + (metadata.empty() ? empty_object : metadata) +
               empty_signature;
    };
    // The well-formed shape reads (so the cases below fail for the number they change).
    BOOST_TEST((record_outcome(record(varint(0), varint(0))) == outcome::read));
    BOOST_TEST((record_outcome(record(varint(1), varint(2))) == outcome::read));

    // The hang: a metadata position of 2^56 in a short record.
    const auto hang = record(varint(huge), varint(0));
    BOOST_TEST(hang.size() < 24u);
    EXPECT_CORRUPT("step position 2^56", record_outcome(hang));
    EXPECT_CORRUPT("source position 2^56", record_outcome(record(varint(0), varint(huge))));
    // What fuzz_record found against the old decoder within seconds: a source position of 2^42-1.
    EXPECT_CORRUPT("fuzz_record's first find",
                   record_outcome(bytes_of({0x01, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0x08, 0, 0x04, 0, 0, 0,
                                            0x08, 0, 0x04, 0})));
    EXPECT_CORRUPT("both positions 2^63", record_outcome(record(varint(huge << 7), varint(huge << 7))));
    // Positions past the metadata, or both at one place, are not what any encoder wrote.
    EXPECT_CORRUPT("step position past the metadata", record_outcome(record(varint(3), varint(0))));
    EXPECT_CORRUPT("source position past the metadata", record_outcome(record(varint(1), varint(3))));
    EXPECT_CORRUPT("step and source at one position", record_outcome(record(varint(1), varint(1))));
    // `step` both stripped and stored (key code 9 is "step"): two values for one key.
    EXPECT_CORRUPT("step stripped and stored", record_outcome(record(varint(1), varint(0), bytes_of({8, 1, 9, 0}))));

    // Counts and lengths larger than the record.
    EXPECT_CORRUPT("versions count 2^56", record_outcome(bytes_of({1}) + varint(huge) + bytes_of({0, 0, 0, 0})));
    EXPECT_CORRUPT("versions count 2^63",
                   record_outcome(bytes_of({1}) + varint(huge << 7) + bytes_of({0, 0}) + record(varint(0), varint(0))));
    EXPECT_CORRUPT("frontier array of 2^56", record_outcome(no_versions + bytes_of({7}) + varint(huge) + std::string(16, '\0')));
    EXPECT_CORRUPT("frontier object of 2^56", record_outcome(no_versions + bytes_of({8}) + varint(huge) + std::string(16, '\0')));
    EXPECT_CORRUPT("frontier object of more entries than bytes / 2",
                   record_outcome(no_versions + bytes_of({8, 6, 0, 0, 0, 0, 0, 0})));
    EXPECT_CORRUPT("string of 2^56 bytes", record_outcome(no_versions + bytes_of({6}) + varint(huge) + "abc"));
    EXPECT_CORRUPT("key of 2^56 bytes",
                   record_outcome(no_versions + bytes_of({8, 1}) + varint(huge) + "abc" + bytes_of({0, 0, 0, 8, 0, 4, 0})));
    EXPECT_CORRUPT("channel name of 2^56 bytes", record_outcome(bytes_of({1, 1}) + varint(huge) + "abc"));
    EXPECT_CORRUPT("older version 2^63 back", record_outcome(bytes_of({1, 1, 0, 1}) + varint(huge << 7) + null_frontier +
                                                            bytes_of({0, 0}) + empty_object + empty_signature));
    EXPECT_CORRUPT("newer version 2^63 on", record_outcome(bytes_of({1, 1, 0, 2}) + varint(~std::uint64_t{0}) + null_frontier +
                                                          bytes_of({0, 0}) + empty_object + empty_signature));
    EXPECT_CORRUPT("raw version of 2^56 bytes", record_outcome(bytes_of({1, 1, 0, 4}) + varint(huge) + "abc"));
    EXPECT_CORRUPT("signature of 2^56 bytes", record_outcome(record(varint(0), varint(0)).substr(0, 7) + bytes_of({4}) + varint(huge)));
    // A varint wider than 64 bits is corrupt, not silently cut to 64.
    EXPECT_CORRUPT("a 65-bit number", record_outcome(no_versions + bytes_of({4}) + std::string(9, '\xff') + bytes_of({0x03}) +
                                                    bytes_of({0, 0}) + empty_object + empty_signature));
    EXPECT_CORRUPT("an 11-byte varint", record_outcome(no_versions + bytes_of({4}) + std::string(10, '\x80') + bytes_of({0}) +
                                                      bytes_of({0, 0}) + empty_object + empty_signature));
    // The largest 64-bit number still reads.
    BOOST_TEST((record_outcome(no_versions + bytes_of({4}) + varint(~std::uint64_t{0}) + bytes_of({0, 0}) + empty_object +
                               empty_signature) == outcome::read));
}

BOOST_AUTO_TEST_CASE(huge_numbers_in_stored_values_are_corrupt_promptly) {
    const std::string v1 = new_checkpoint_id(), v2 = new_checkpoint_id();
    // Appended items: marker, a reference to the version extended, then JSON text.
    auto split = [](std::string stored, std::string version) {
        return guarded([stored, version] { (void)codec::split_value(stored, version); });
    };
    EXPECT_CORRUPT("extends 2^63 back", split(bytes_of({1, 1}) + varint(huge << 7) + "[]", v2));
    EXPECT_CORRUPT("extends 2^64-1 on", split(bytes_of({1, 2}) + varint(~std::uint64_t{0}) + "[]", v2));
    EXPECT_CORRUPT("extends a raw version of 2^56 bytes", split(bytes_of({1, 4}) + varint(huge) + "[]", v2));
    EXPECT_CORRUPT("extends a 65-bit distance", split(bytes_of({1, 1}) + std::string(9, '\xff') + bytes_of({0x7f}) + "[]", v2));
    EXPECT_CORRUPT("a marker alone", split(bytes_of({1}), v2));
    EXPECT_CORRUPT("an unknown reference form", split(bytes_of({1, 9}) + "[]", v2));

    // The same through the chain walkers.
    auto resolve = [&](std::string stored) {
        return guarded([stored, v1, v2] {
            (void)codec::resolve_value(v2, [&](const std::string& v) -> std::optional<std::string> {
                if (v == v2) return stored;
                if (v == v1) return std::string("[1]");
                return std::nullopt;
            });
        });
    };
    EXPECT_CORRUPT("resolve: extends 2^63 back", resolve(bytes_of({1, 1}) + varint(huge << 7) + "[]"));
    EXPECT_CORRUPT("resolve: extends a raw version of 2^56 bytes", resolve(bytes_of({1, 4}) + varint(huge) + "[]"));
    auto mark = [&](std::string stored) {
        return guarded([stored, v2] {
            std::set<std::pair<std::string, std::string>> needed;
            codec::mark_needed("log", v2, [&](const std::string&) -> std::optional<std::string> { return stored; }, needed);
        });
    };
    EXPECT_CORRUPT("mark: extends 2^63 back", mark(bytes_of({1, 1}) + varint(huge << 7) + "[]"));
    EXPECT_CORRUPT("mark: extends a raw version of 2^56 bytes", mark(bytes_of({1, 4}) + varint(huge) + "[]"));

    // Inline values: count, then per value a channel key and a length-prefixed stored value.
    auto inline_cases = [&](const char* label, const std::string& bytes) {
        EXPECT_CORRUPT(std::string("decode_inline: ") + label, guarded([bytes] { (void)codec::decode_inline(bytes); }));
        EXPECT_CORRUPT(std::string("measure_inline: ") + label, guarded([bytes] { (void)codec::measure_inline(bytes); }));
        EXPECT_CORRUPT(std::string("merge_inline: ") + label, guarded([bytes] {
                           (void)codec::merge_inline(bytes, {{"a", "1"}}, [](std::string_view) { return false; });
                       }));
    };
    inline_cases("count 2^56", varint(huge) + bytes_of({0, 1, '1'}));
    inline_cases("count 2^64-1", varint(~std::uint64_t{0}) + bytes_of({0, 1, '1'}));
    inline_cases("more values than bytes / 2", bytes_of({3, 0, 0, 0, 0}));
    inline_cases("channel of 2^56 bytes", bytes_of({1}) + varint(huge) + "abc");
    inline_cases("value of 2^56 bytes", bytes_of({1, 0}) + varint(huge) + "abc");
    inline_cases("a 65-bit length", bytes_of({1, 0}) + std::string(9, '\xff') + bytes_of({0x7f}));
    BOOST_TEST((guarded([] { (void)codec::decode_inline(bytes_of({1, 0, 1, '1'})); }) == outcome::read));
}

BOOST_AUTO_TEST_SUITE_END()
