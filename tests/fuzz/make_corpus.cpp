// Writes the fuzzers' seed corpus: real records, stored values and JSON payloads, encoded by
// the codec itself, one file each under <dir>/<target>/. Run by `scripts/fuzz --seed`; the
// files are kept in tests/fuzz/corpus.
#include "fuzz_support.hpp"

#include <boost/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace {

namespace json = boost::json;
namespace codec = stategraph::checkpoint::codec;
namespace fz = stategraph::fuzz;
using stategraph::checkpoint::checkpoint;

std::filesystem::path root;
int written = 0;

void write(const std::string& target, const std::string& name, const std::string& bytes) {
    const auto dir = root / target;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / name, std::ios::binary) << bytes;
    ++written;
}

checkpoint base_record() {
    checkpoint cp;
    cp.id = codec::id_text(fz::record_id);
    cp.step = 3;
    cp.source = "loop";
    return cp;
}

void records() {
    const auto own = fz::record_id;
    auto cp = base_record();
    write("fuzz_record", "empty", codec::encode_record(cp));

    cp.versions = {{"count", cp.id}, {"log", cp.id}, {"__graph__", "0123456789abcdef"}, {"other", codec::id_text(own - 9000)}};
    cp.frontier = json::object{{"pull", json::array{"n7"}}};
    cp.metadata = json::object{{"writers", json::array{"n6"}}, {"step", 3}, {"source", "loop"}};
    cp.signature = "fedcba9876543210";
    write("fuzz_record", "chain-step", codec::encode_record(cp));

    auto moved = cp;
    moved.metadata = json::object{{"source", "loop"}, {"writers", json::array{}}, {"step", 3}};
    write("fuzz_record", "step-source-swapped", codec::encode_record(moved));
    moved.metadata = json::object{{"step", 4}, {"source", "input"}, {"delta", json::object{{"count", 1}}}};
    write("fuzz_record", "step-source-kept", codec::encode_record(moved));
    moved.metadata = json::object{{"step", 3}};
    write("fuzz_record", "step-only", codec::encode_record(moved));
    moved.metadata = json::object{{"source", "loop"}};
    write("fuzz_record", "source-only", codec::encode_record(moved));

    auto refs = cp;
    refs.versions = {{"same", cp.id},
                     {"older", codec::id_text(own - 123456)},
                     {"newer", codec::id_text(own + 5)},
                     {"first", codec::id_text(0)},
                     {"signature", "0123456789abcdef"},
                     {"legacy", "00000000000000000001"},
                     {"odd name \xe2\x9c\x93", "text"},
                     {"never", ""}};
    write("fuzz_record", "every-version-form", codec::encode_record(refs));
    refs.signature = "not hex";
    write("fuzz_record", "raw-signature", codec::encode_record(refs));
    refs.signature.clear();
    write("fuzz_record", "no-signature", codec::encode_record(refs));

    auto shapes = base_record();
    shapes.frontier = json::object{
        {"pull", json::array{"n6", "n7"}},
        {"push", json::array{json::object{{"node", "worker"}, {"arg", json::object{{"x", -3}, {"y", 2.5}}}}}},
        {"barriers", json::array{json::array{true, false}}},
        {"seen", ""},
        {"deferred", json::array{"late"}},
        {"custom key", json::array{nullptr, std::numeric_limits<std::uint64_t>::max(),
                                   std::numeric_limits<std::int64_t>::min(), "h\xc3\xa9llo \"q\"\n", -0.0, 1e300}}};
    shapes.metadata = json::object{{"writers", json::array{"n5"}}, {"step", 3}, {"delta", json::object{}}, {"source", "loop"},
                                   {"graph", "g"}, {"node", "n5"}, {"id", 12}, {"value", json::object{{"k", "v"}}}};
    write("fuzz_record", "frontier-and-metadata", codec::encode_record(shapes));

    json::value deep = json::array{};
    for (int i = 0; i < 40; ++i) deep = json::array{std::move(deep), i};
    shapes.frontier = deep;
    write("fuzz_record", "nested", codec::encode_record(shapes));

    auto wide = base_record();
    for (int i = 0; i < 40; ++i) wide.versions["channel_" + std::to_string(i)] = codec::id_text(own - static_cast<std::uint64_t>(i) * 977);
    json::array pull;
    for (int i = 0; i < 40; ++i) pull.push_back(json::string("node_" + std::to_string(i)));
    wide.frontier = json::object{{"pull", pull}};
    write("fuzz_record", "wide", codec::encode_record(wide));

    auto numbers = base_record();
    numbers.frontier = json::array{0, 1, -1, 127, 128, -129, 16383, 16384, std::numeric_limits<std::int64_t>::max(),
                                   std::numeric_limits<std::uint64_t>::max(), 0.5, -1e-300, true, false, nullptr};
    write("fuzz_record", "numbers", codec::encode_record(numbers));

    auto distances = base_record();
    const std::uint64_t back[] = {1, 127, 128, 16383, 16384, std::uint64_t{1} << 40, own};
    for (auto d : back) distances.versions["back " + std::to_string(d)] = codec::id_text(own - d);
    for (std::uint64_t d : {std::uint64_t{1}, std::uint64_t{1} << 30}) distances.versions["on " + std::to_string(d)] = codec::id_text(own + d);
    write("fuzz_record", "version-distances", codec::encode_record(distances));

    auto long_text = base_record();
    long_text.versions = {{std::string(200, 'c'), codec::id_text(own - 1)}};
    long_text.frontier = json::object{{std::string(150, 'k'), std::string(300, 'v')}, {"pulls", "not the key pull"}, {"", "empty key"}};
    long_text.signature = std::string(130, 's');
    write("fuzz_record", "long-texts", codec::encode_record(long_text));

    auto positions = base_record();
    positions.metadata = json::object{{"a", 1}, {"b", 2}, {"step", 3}};
    write("fuzz_record", "step-last", codec::encode_record(positions));
    positions.metadata = json::object{{"source", "loop"}, {"a", 1}, {"b", 2}, {"step", 3}};
    write("fuzz_record", "source-first-step-last", codec::encode_record(positions));
    positions.metadata = json::object{{"step", 3}, {"source", "loop"}};
    write("fuzz_record", "step-and-source-only", codec::encode_record(positions));
    positions.metadata = json::object{};
    for (int i = 0; i < 20; ++i) positions.metadata["key " + std::to_string(i)] = i * 1000;
    positions.metadata["step"] = 3;
    write("fuzz_record", "many-metadata-keys", codec::encode_record(positions));

    auto containers = base_record();
    containers.frontier = json::object{{"pull", json::array{}}, {"push", json::array{}}, {"seen", json::object{}}};
    containers.metadata = json::object{{"writes", json::object{}}, {"parents", json::object{{"", "x"}}}};
    write("fuzz_record", "empty-containers", codec::encode_record(containers));

    auto doubles = base_record();
    doubles.frontier = json::array{std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min(), -0.0};
    write("fuzz_record", "odd-doubles", codec::encode_record(doubles));

    auto sends = base_record();
    json::array push;
    for (int i = 0; i < 20; ++i)
        push.push_back(json::object{{"node", "worker"}, {"arg", json::object{{"item", i}, {"text", "t" + std::to_string(i)}}}});
    sends.frontier = json::object{{"push", push}, {"barriers", json::array{json::array{"a", "b"}, json::array{"c"}}}};
    sends.metadata = json::object{{"writers", json::array{"n1", "n2", "n3"}}, {"delta", json::object{{"log", json::array{"x"}}}},
                                  {"node", "n3"}, {"source", "loop"}};
    write("fuzz_record", "sends", codec::encode_record(sends));

    auto nested_objects = base_record();
    json::value obj = json::object{};
    for (int i = 0; i < 30; ++i) obj = json::object{{"k" + std::to_string(i % 3), std::move(obj)}, {"arg", i}};
    nested_objects.frontier = obj;
    write("fuzz_record", "nested-objects", codec::encode_record(nested_objects));

    auto fork = base_record();
    fork.step = 3;
    fork.source = "fork";
    fork.metadata = json::object{{"source", "fork"}, {"step", -1}, {"parents", json::object{{"", codec::id_text(own - 50)}}}};
    write("fuzz_record", "fork-metadata", codec::encode_record(fork));

    auto no_id = base_record(); // an id that is not of the time-ordered form: versions as text
    no_id.id = "custom-id";
    no_id.versions = {{"count", "custom-id"}, {"log", "0YeP8ySxv9A"}};
    auto encoded = codec::encode_record(no_id);
    write("fuzz_record", "versions-as-text", encoded);
}

void values() {
    const auto at = [](std::uint64_t i) { return codec::id_text(fz::value_base + i); };
    const json::value wholes[] = {
        nullptr, true, -42, std::numeric_limits<std::uint64_t>::max(), 2.5,
        "quote\" backslash\\ \b\f\n\r\t \x01 h\xc3\xa9llo",
        json::array{1, json::array{}, json::object{}, json::object{{"k", json::array{"v", nullptr}}}},
        json::object{{"", ""}, {"a", json::object{{"b", -0.5}}}},
        json::array{json::object{{"id", "m1"}, {"role", "user"}, {"content", "hi"}}},
    };
    int n = 0;
    for (const auto& v : wholes) write("fuzz_value", "whole-" + std::to_string(n++), codec::encode_value(v, nullptr, at(0)));
    // Appended items alone (not an inline string): marker, reference, JSON.
    const auto v0 = at(0);
    write("fuzz_value", "appended-alone", codec::encode_value(json::array{"b"}, &v0, at(1)));
    const std::string text = "not an id";
    write("fuzz_value", "appended-to-text", codec::encode_value(json::array{"b"}, &text, at(1)));

    // Inline strings: value i at version base + i, each extending the one before.
    auto chain = [&](std::size_t length, bool first_whole) {
        std::vector<std::string> stored;
        for (std::size_t i = 0; i < length; ++i) {
            const auto version = at(i), previous = i ? at(i - 1) : std::string();
            json::array items{json::string("item " + std::to_string(i))};
            stored.push_back(i == 0 && first_whole ? codec::encode_value(items, nullptr, version)
                                                   : codec::encode_value(items, &previous, version));
        }
        std::vector<std::pair<std::string_view, std::string_view>> pairs;
        for (const auto& s : stored) pairs.emplace_back("log", s);
        return codec::encode_inline(pairs);
    };
    write("fuzz_value", "inline-chain-1", chain(1, true));
    write("fuzz_value", "inline-chain-3", chain(3, true));
    write("fuzz_value", "inline-chain-12", chain(12, true));
    write("fuzz_value", "inline-chain-broken", chain(4, false));
    write("fuzz_value", "inline-empty", codec::encode_inline({}));
    write("fuzz_value", "inline-mixed", codec::encode_inline({{"count", "5"}, {"writers", "[\"n1\"]"}, {"a long channel name", std::string(200, 'x')},
                                                             {"pull", "{\"k\":[1,2]}"}, {"log", "[]"}}));
    const auto newer = at(3);
    const auto forward = codec::encode_value(json::array{1}, &newer, at(0)); // extends a newer version
    write("fuzz_value", "inline-forward", codec::encode_inline({{"log", forward}, {"log", "[0]"}, {"log", "[2]"}, {"log", "[3]"}}));
    write("fuzz_value", "inline-not-a-list", codec::encode_inline({{"log", "{\"a\":1}"}, {"log", codec::encode_value(json::array{2}, &v0, at(1))}}));
}

void json_inputs() {
    const char* inputs[] = {
        R"({"count":5})",
        R"({"route":"left"})",
        R"({"log":["x","y"]})",
        R"({"messages":[{"id":"m1","role":"user","content":"edited"},{"id":"","role":"assistant","content":"new"}]})",
        R"({"messages":[{"id":"m1","role":"remove","content":""}]})",
        R"({"tally":{"a":1,"b":-2}})",
        R"({"score":0.75})",
        R"({"score":null})",
        R"({"count":1,"route":"r","log":[],"messages":[],"tally":{},"score":1e10})",
        R"({"cout":5})",
        R"({"count":"five"})",
        R"({"count":1.5})",
        R"({"count":4294967296})",
        R"({"log":"not a list"})",
        R"({"messages":[{"id":"m1"}]})",
        R"({"tally":{"a":"x"}})",
        R"({})",
        R"(42)",
        R"("yes")",
        R"(true)",
        R"(null)",
        R"(["a","b"])",
        R"({"id":"m2","role":"user","content":"answer"})",
        R"([{"id":"m2","role":"user","content":"answer"}])",
        R"({"a":1,"b":2})",
        R"({"count":1,"count":2})",
        R"({"route":"\u00e9\ud83d\ude00\n"})",
        R"([[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]])",
        R"(-0.0e-400)",
        R"({"log":["x"],"unknown":{"nested":[1,{"deep":true}]}})",
    };
    int n = 0;
    for (const char* text : inputs) write("fuzz_json_input", "input-" + std::to_string(n++), text);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::cerr << "usage: make_corpus DIR (writes DIR/fuzz_record, DIR/fuzz_value, DIR/fuzz_json_input)\n";
        return 2;
    }
    root = argv[1];
    records();
    values();
    json_inputs();
    std::cout << "make_corpus: " << written << " files under " << root.string() << "\n";
    return 0;
}
