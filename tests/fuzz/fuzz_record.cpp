// libFuzzer target: any bytes as a stored checkpoint record. They either read back or are
// `codec::corrupt`, promptly; what reads back is encoded again, and that encoding reads back to
// the same record (its encoding is then the same bytes).
#include "fuzz_support.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

namespace codec = stategraph::checkpoint::codec;
using stategraph::checkpoint::checkpoint;

checkpoint blank() {
    checkpoint cp;
    cp.id = codec::id_text(stategraph::fuzz::record_id);
    cp.step = 3;
    cp.source = "loop";
    return cp;
}

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_record: %s\n", what);
    std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    auto cp = blank();
    try {
        codec::decode_record(bytes, cp);
    } catch (const codec::corrupt&) {
        return 0;
    }
    const auto once = codec::encode_record(cp);
    auto back = blank();
    try {
        codec::decode_record(once, back);
    } catch (const codec::corrupt& e) {
        std::fprintf(stderr, "%s\n", e.what());
        broken("a decoded record, encoded again, does not read back");
    }
    if (back.versions != cp.versions || back.signature != cp.signature) broken("versions or signature changed");
    if (codec::encode_record(back) != once) broken("encoding a record read back gives other bytes");
    return 0;
}
