/// @file checkpoint_log.cpp
/// @brief `checkpoint_log`'s one default, `put_many` as `put` after `put`, and `saver::end_call`'s:
/// `put_many`, `put_writes`, `release`; and `saver::acquire_and_get`'s: `acquire`, `get`.
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

boost::asio::awaitable<std::optional<checkpoint_tuple>>
saver::acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) {
    co_await acquire(thread_id);
    std::exception_ptr failed;
    try {
        co_return co_await get(thread_id, ns, checkpoint_id);
    } catch (...) {
        failed = std::current_exception();
    }
    co_await release(thread_id); // the read failed: the lease is not kept
    std::rethrow_exception(failed);
}

boost::asio::awaitable<std::optional<checkpoint_tuple>>
saver::acquire_and_get_held(const std::string& thread_id, const std::string& ns, const std::string&) {
    static const std::optional<std::string> newest; // outlives the awaitable handed out
    return acquire_and_get(thread_id, ns, newest);
}

} // namespace stategraph::checkpoint
