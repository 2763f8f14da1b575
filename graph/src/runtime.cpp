#include <stategraph/context.hpp>
#include <stategraph/reducer.hpp>

#include <atomic>
#include <cstdio>

namespace stategraph {

unsigned long messages_t::next_id() {
    static std::atomic<unsigned long> n{0};
    return ++n;
}

namespace detail {
std::string interrupt_id(const std::string& task_id, std::size_t index) {
    // FNV-1a of the task id and the call's position: stable across re-runs of the task,
    // distinct for each interrupt call of a node and for each task.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : task_id) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (int i = 0; i < 8; ++i) h = (h ^ ((index >> (8 * i)) & 0xff)) * 1099511628211ull;
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}
} // namespace detail
} // namespace stategraph
