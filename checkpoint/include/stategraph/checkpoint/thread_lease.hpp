#pragma once
/// @file thread_lease.hpp
/// @brief A saver's fifth concern: the single-writer lease of a thread, for savers whose storage is shared
/// across processes (the defaults do nothing: a saver of one process needs no lease).

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>

namespace stategraph::checkpoint {

/// @brief The single-writer lease of a thread. Part of `saver`.
/// Thread safety: an implementation may be shared by many threads.
class thread_lease {
public:
    virtual ~thread_lease() = default;

    /// @brief Takes the single-writer lease of a thread for this saver, or throws
    /// `checkpoint_error(thread_busy)`. Savers without cross-process sharing need not lock.
    ///
    /// The lease contract of savers that share storage across processes:
    /// - while held, the saver renews the lease on its own (a timer, not the run's writes), so a
    ///   node may run far longer than the lease's time to live;
    /// - a holder that is provably gone (a dead process on this host) is taken over at once; one
    ///   that may be alive (another host, a frozen process) only after its lease expired;
    /// - writes are fenced: once the lease was taken over (expired while the holder was frozen,
    ///   or broken by `break_lease`), the old holder's writes on the thread are refused with
    ///   `checkpoint_error(lease_lost)` and nothing of them is stored.
    /// @param thread_id the thread (unnamed in this no-op default).
    virtual boost::asio::awaitable<void> acquire(std::string /*thread_id*/) { co_return; }
    /// @brief Releases the lease taken by `acquire`.
    virtual boost::asio::awaitable<void> release(std::string /*thread_id*/) { co_return; }
    /// @brief Removes the thread's lease whoever holds it, for an operator who knows its holder is
    /// gone (a crashed host) and will not wait out its time to live. Returns the holder it removed
    /// (nullopt: none). The old holder's later writes fail with `lease_lost`.
    /// @param thread_id the thread whose lease goes (unnamed in this no-op default, which returns nullopt).
    virtual boost::asio::awaitable<std::optional<std::string>> break_lease(std::string /*thread_id*/) {
        co_return std::nullopt;
    }
};

} // namespace stategraph::checkpoint
