// Checkpoint ids: declared in the saver contract (saver.hpp), used by the engine and every saver.
#include <stategraph/checkpoint/saver.hpp>

#include "codec.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>

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
