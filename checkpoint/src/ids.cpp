// Checkpoint ids: declared in the saver contract (saver.hpp), used by the engine and every saver.
#include <stategraph/checkpoint/saver.hpp>

#include "codec.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace stategraph::checkpoint {

std::string new_checkpoint_id() {
    static std::atomic<std::uint64_t> last{0};
    auto now = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());
    std::uint64_t prev = last.load(std::memory_order_relaxed), next;
    do {
        next = now > prev ? now : prev + 1;
    } while (!last.compare_exchange_weak(prev, next, std::memory_order_relaxed));
    // 11 symbols of a 64-symbol alphabet in ASCII order: fixed width, sortable as text, and short
    // enough for the small-string buffer (no allocation per copy). Ids of the former 20-hex-digit
    // format ("0000...") sort before these ("0Y..." onwards), so a store holding both stays time-ordered.
    return codec::id_text(next);
}

} // namespace stategraph::checkpoint

namespace stategraph::checkpoint {

std::string checkpoint_id_at(std::chrono::system_clock::time_point t) {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    return codec::id_text(ns < 0 ? 0 : static_cast<std::uint64_t>(ns));
}

std::optional<std::chrono::system_clock::time_point> checkpoint_time(std::string_view id) {
    std::optional<std::uint64_t> n = codec::id_number(id);
    if (!n && id.size() == 20) { // the former form: 20 hex digits of the same nanosecond count
        std::uint64_t v = 0;
        bool ok = true;
        for (char c : id) {
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
            if (d < 0 || (v >> 60) != 0) {
                ok = false;
                break;
            }
            v = (v << 4) | static_cast<std::uint64_t>(d);
        }
        if (ok) n = v;
    }
    if (!n || *n > static_cast<std::uint64_t>(INT64_MAX)) return std::nullopt;
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(static_cast<std::int64_t>(*n))));
}

} // namespace stategraph::checkpoint
