/// @file checkpoint_log.cpp
/// @brief `checkpoint_log`'s one default, `put_many` as `put` after `put`, and `saver::end_call`'s:
/// `put_many`, `put_writes`, `release`.
#include <stategraph/checkpoint/checkpoint_log.hpp>
#include <stategraph/checkpoint/saver.hpp>

namespace stategraph::checkpoint {

boost::asio::awaitable<void> checkpoint_log::put_many(const std::string& thread_id, const std::string& ns,
                                                      std::span<const checkpoint> cps) {
    for (const checkpoint& cp : cps) co_await put(thread_id, ns, cp);
}

boost::asio::awaitable<void> saver::end_call(const std::string& thread_id, const std::string& ns, call_end& end) {
    if (!end.checkpoints.empty()) co_await put_many(thread_id, ns, end.checkpoints);
    if (!end.writes.empty()) {
        auto writes = std::move(end.writes);
        co_await put_writes(thread_id, ns, end.writes_to, std::move(writes));
    }
    if (end.release) co_await release(thread_id);
}

} // namespace stategraph::checkpoint
