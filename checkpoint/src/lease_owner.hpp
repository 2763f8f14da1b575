#pragma once
/// @file lease_owner.hpp
/// @brief Who holds a thread's lease, in a form other processes can check (private to
/// checkpoint/src; every saver with cross-process leases names its owners this way).
///
/// An owner is "<host>:<pid>:<random>:<pid namespace>": the host and pid say where the holder
/// runs, the random part tells two savers of one process apart, and the pid namespace (the inode
/// of /proc/self/ns/pid) keeps two containers that share a host name from judging each other's pids.

#include <string>
#include <string_view>

namespace stategraph::checkpoint::lease_owner {

/// @brief A new owner name for a saver of this process.
std::string make();

/// @brief True only when `holder` is provably gone: it names this host and this pid namespace,
/// is not this process, and its pid no longer exists. Anything else (another host, an owner
/// written by an older stategraph, a pid that is alive, even reused) is treated as alive, so a
/// lease is never taken from a live holder; at worst one waits out the lease's time to live.
bool is_gone(std::string_view holder) noexcept;

} // namespace stategraph::checkpoint::lease_owner
