// Tests of utf8.hpp: the U+FFFD replacement that keeps the command line's --json output valid
// UTF-8 (issue 11): valid text unchanged, each kind of ill-formed sequence replaced as Unicode
// recommends, validation agreeing with Boost.JSON's strict parser on every short sequence of
// boundary bytes, and JSON values (strings, keys, nesting) repaired so a strict parser reads them.
#include <boost/test/unit_test.hpp>

#include "utf8.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gs = global_supervisor;
namespace json = boost::json;

namespace {

const std::string fffd = "\xEF\xBF\xBD";

/// Whether Boost.JSON's parser, which rejects invalid UTF-8 by default, reads @p text.
bool strict_parse_ok(std::string_view text) {
    boost::system::error_code ec;
    (void)json::parse(text, ec);
    return !ec;
}

} // namespace

BOOST_AUTO_TEST_SUITE(utf8)

BOOST_AUTO_TEST_CASE(valid_text_is_unchanged) {
    using namespace std::string_literals;
    for (const std::string& text : {""s, "plain ascii"s, "caf\xC3\xA9"s, "\xE2\x82\xAC 5"s, "\xF0\x9F\x98\x80"s,
                                    "\xF4\x8F\xBF\xBF"s /* U+10FFFF */, "\xED\x9F\xBF"s /* U+D7FF */,
                                    "\xEE\x80\x80"s /* U+E000 */, "nul\0inside"s, "\x7F"s}) {
        BOOST_TEST(gs::is_valid_utf8(text));
        BOOST_TEST(gs::valid_utf8(text) == text);
    }
}

BOOST_AUTO_TEST_CASE(each_maximal_subpart_becomes_one_replacement) {
    struct example {
        std::string in, out;
    };
    const std::vector<example> examples = {
        {"\xFF\xFE", fffd + fffd},                      // bytes that never start a sequence
        {"caf\xC3", "caf" + fffd},                      // truncated at the end
        {"caf\xC3 au lait", "caf" + fffd + " au lait"}, // truncated before ASCII
        {"\xF0\x9F\x98", fffd},                         // a truncated 4-byte sequence is one
        {"\xE2\x82" "A", fffd + "A"},
        {"\x80", fffd},                                 // a lone continuation byte
        {"\xC0\xAF", fffd + fffd},                      // overlong '/': C0 never starts one
        {"\xE0\x80\xAF", fffd + fffd + fffd},           // overlong: E0 needs A0..BF next
        {"\xED\xA0\x80", fffd + fffd + fffd},           // a surrogate (U+D800)
        {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd}, // above U+10FFFF
        {"\xF5\x80", fffd + fffd},
        // Unicode 15, table 3-8: "a F1 80 80 E1 80 C2 b 80 c 80 BF d".
        {"a\xF1\x80\x80\xE1\x80\xC2" "b\x80" "c\x80\xBF" "d",
         "a" + fffd + fffd + fffd + "b" + fffd + "c" + fffd + fffd + "d"},
    };
    for (const auto& e : examples) {
        BOOST_TEST(!gs::is_valid_utf8(e.in));
        BOOST_TEST(gs::valid_utf8(e.in) == e.out);
        BOOST_TEST(gs::is_valid_utf8(gs::valid_utf8(e.in)));
    }
}

BOOST_AUTO_TEST_CASE(validation_agrees_with_a_strict_json_parser) {
    // Every sequence of up to four bytes drawn from the boundaries of table 3-7 (plus an ASCII
    // letter): 24^4 + 24^3 + 24^2 + 24 strings.
    const std::vector<unsigned char> bytes = {0x61, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                              0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE,
                                              0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFE, 0xFF};
    std::size_t checked = 0, disagreements = 0, bad_repairs = 0;
    std::vector<std::size_t> digits;
    for (std::size_t length = 1; length <= 4; ++length) {
        digits.assign(length, 0);
        for (;;) {
            std::string text;
            for (auto d : digits) text += static_cast<char>(bytes[d]);
            const bool valid = gs::is_valid_utf8(text);
            disagreements += valid != strict_parse_ok("\"" + text + "\"");
            const std::string repaired = gs::valid_utf8(text);
            bad_repairs += !strict_parse_ok("\"" + repaired + "\"") || (valid && repaired != text) ||
                           (!valid && repaired.find(fffd) == std::string::npos);
            ++checked;
            std::size_t i = 0;
            while (i < length && ++digits[i] == bytes.size()) digits[i++] = 0;
            if (i == length) break;
        }
    }
    BOOST_TEST(checked == 24u + 24u * 24u + 24u * 24u * 24u + 24u * 24u * 24u * 24u);
    BOOST_TEST(disagreements == 0u);
    BOOST_TEST(bad_repairs == 0u);
}

BOOST_AUTO_TEST_CASE(json_strings_and_keys_are_repaired_everywhere) {
    json::object inner;
    inner["ok"] = "caf\xC3\xA9";
    inner["bad\xFF"] = json::array{"x\xC3", 42, true, nullptr, json::array{"\xFE"}};
    json::value v = json::object{{"message", "Anna likes \xFF\xFE cake \xC3"}, {"inner", inner}, {"n", 1.5}};

    const std::string text = gs::serialize_valid_utf8(v);
    BOOST_TEST(strict_parse_ok(text), text);
    BOOST_TEST(!strict_parse_ok(json::serialize(v))); // what the command line wrote before

    gs::make_valid_utf8(v);
    const auto& o = v.as_object();
    BOOST_TEST(o.at("message").as_string() == "Anna likes " + fffd + fffd + " cake " + fffd);
    BOOST_TEST(o.at("n").as_double() == 1.5);
    const auto& in = o.at("inner").as_object();
    BOOST_TEST(in.at("ok").as_string() == "caf\xC3\xA9");
    BOOST_TEST_REQUIRE(in.contains("bad" + fffd));
    const auto& a = in.at("bad" + fffd).as_array();
    BOOST_TEST(a.at(0).as_string() == "x" + fffd);
    BOOST_TEST(a.at(1).as_int64() == 42);
    BOOST_TEST(a.at(4).as_array().at(0).as_string() == fffd);
    BOOST_TEST(json::serialize(v) == text);

    // Keys that become equal: the first one's value stays, and the order is kept.
    json::value clash = json::object{{"k\xFF", 1}, {"k\xFE", 2}, {"z", 3}};
    gs::make_valid_utf8(clash);
    BOOST_TEST(clash.as_object().size() == 2u);
    BOOST_TEST(clash.as_object().at("k" + fffd).as_int64() == 1);
    BOOST_TEST(clash.as_object().begin()->key() == "k" + fffd);
}

BOOST_AUTO_TEST_SUITE_END()
