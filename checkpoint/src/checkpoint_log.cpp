/// @file checkpoint_log.cpp
/// @brief `checkpoint_log`'s one default: `put_many` as `put` after `put`.
#include <stategraph/checkpoint/checkpoint_log.hpp>

namespace stategraph::checkpoint {

boost::asio::awaitable<void> checkpoint_log::put_many(const std::string& thread_id, const std::string& ns,
                                                      std::span<const checkpoint> cps) {
    for (const checkpoint& cp : cps) co_await put(thread_id, ns, cp);
}

} // namespace stategraph::checkpoint
