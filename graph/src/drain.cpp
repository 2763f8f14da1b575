// request_drain(): the process-wide flag a call checks at each superstep boundary (drain.hpp).
#include <stategraph/drain.hpp>

#include <atomic>

namespace stategraph {

namespace {
std::atomic<bool> drain_flag{false};
static_assert(std::atomic<bool>::is_always_lock_free, "request_drain must be async-signal-safe");
} // namespace

void request_drain() noexcept { drain_flag.store(true, std::memory_order_relaxed); }
bool drain_requested() noexcept { return drain_flag.load(std::memory_order_relaxed); }
void cancel_drain() noexcept { drain_flag.store(false, std::memory_order_relaxed); }

} // namespace stategraph
