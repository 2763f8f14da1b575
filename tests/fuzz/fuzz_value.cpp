// libFuzzer target: any bytes as stored channel values. First as an inline-values string (a
// checkpoint row's `vals`): decode, measure and merge it; when it reads, its values become a
// store of versions (value i at version base + i) whose extends chains are split, resolved and
// marked. Otherwise the bytes are one stored value. Everything either reads or is
// `codec::corrupt`, promptly.
#include "fuzz_support.hpp"

#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

namespace codec = stategraph::checkpoint::codec;

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_value: %s\n", what);
    std::abort();
}

// Splits, resolves and marks the first 64 versions of `store` (version -> stored bytes); a chain
// may run through all of them.
void walk(const std::map<std::string, std::string>& store) {
    std::size_t walked = 0;
    auto fetch = [&](const std::string& v) -> std::optional<std::string> {
        auto it = store.find(v);
        if (it == store.end()) return std::nullopt;
        return it->second;
    };
    for (const auto& [version, stored] : store) {
        if (++walked > 64) break;
        try {
            auto parts = codec::split_value(stored, version);
            if (parts.json.size() > stored.size()) broken("split_value: the JSON text is longer than the value");
        } catch (const codec::corrupt&) {
        }
        try {
            (void)codec::resolve_value(version, fetch);
        } catch (const codec::corrupt&) {
        }
        try {
            std::set<std::pair<std::string, std::string>> needed;
            codec::mark_needed("log", version, fetch, needed);
            if (needed.empty()) broken("mark_needed: the version itself is not marked");
        } catch (const codec::corrupt&) {
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    std::vector<std::pair<std::string_view, std::string_view>> values;
    try {
        values = codec::decode_inline(bytes);
    } catch (const codec::corrupt&) {
        // Not an inline string: the bytes as one stored value.
        walk({{codec::id_text(stategraph::fuzz::value_base), std::string(bytes)}});
        try {
            (void)codec::measure_inline(bytes);
            broken("measure_inline reads what decode_inline refuses");
        } catch (const codec::corrupt&) {
        }
        return 0;
    }
    // measure agrees with decode; encoding the values again reads back to the same values.
    const auto size_of = codec::measure_inline(bytes);
    std::size_t value_bytes = 0;
    // (a value's checksum or cipher framing counts as framing, not as the value's bytes)
    for (const auto& v : values) value_bytes += v.second.size() - codec::framing_of(v.second);
    if (size_of.values != values.size() || size_of.value_bytes != value_bytes) broken("measure_inline disagrees");
    const auto again = codec::encode_inline(values);
    if (codec::decode_inline(again) != values) broken("inline values encoded again read back otherwise");
    // Merging keeps the fresh value and every old one not written again.
    const auto merged = codec::merge_inline(bytes, {{"fresh", "1"}}, [](std::string_view c) { return c == "log"; });
    for (const auto& [channel, stored] : codec::decode_inline(merged))
        if (channel == "log") broken("merge_inline kept a value written elsewhere");

    std::map<std::string, std::string> store;
    for (std::size_t i = 0; i < values.size(); ++i)
        store.emplace(codec::id_text(stategraph::fuzz::value_base + i), std::string(values[i].second));
    walk(store);
    return 0;
}
