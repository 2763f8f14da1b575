/// @file thread_locks.cpp
/// @brief thread_locks: open-file-description locks on one byte per thread id.

#include "thread_locks.hpp"

#include <cerrno>
#include <fcntl.h>
#include <system_error>
#include <sys/types.h>
#include <unistd.h>

namespace stategraph::checkpoint::detail {

bool thread_locks::available() noexcept {
#ifdef F_OFD_SETLK
    return true;
#else
    return false;
#endif
}

thread_locks::thread_locks(std::string path, unsigned mode) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, static_cast<mode_t>(mode & 0777u));
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "cannot open the lease lock file " + path_);
}

thread_locks::~thread_locks() {
    if (fd_ >= 0) ::close(fd_); // drops every lock this object holds
}

std::int64_t thread_locks::offset_of(const std::string& thread) noexcept {
    // FNV-1a over the id, then a finalizer spreading every bit; the top two bits are dropped,
    // so offsets run from 2^62 to 2^63 - 1: far past any byte SQLite or a reader ever uses.
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char c : thread) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return static_cast<std::int64_t>((std::uint64_t{1} << 62) | (h >> 2));
}

bool thread_locks::lock(std::int64_t at, bool take) const {
#ifdef F_OFD_SETLK
    struct flock f {};
    f.l_type = take ? F_WRLCK : F_UNLCK;
    f.l_whence = SEEK_SET;
    f.l_start = static_cast<off_t>(at);
    f.l_len = 1;
    if (::fcntl(fd_, F_OFD_SETLK, &f) == 0) return true;
    if (take && (errno == EAGAIN || errno == EACCES)) return false;
    throw std::system_error(errno, std::generic_category(), "locking a byte of " + path_);
#else
    (void)at;
    (void)take;
    throw std::system_error(ENOSYS, std::generic_category(), "no open-file-description locks here");
#endif
}

bool thread_locks::take(const std::string& thread, use u) {
    auto it = mine_.find(thread);
    if (it == mine_.end()) {
        if (!lock(offset_of(thread), true)) return false;
        it = mine_.emplace(thread, uses{}).first;
    }
    if (u == use::lease) it->second.lease = true;
    else ++it->second.writes;
    return true;
}

void thread_locks::drop(const std::string& thread, use u) noexcept {
    auto it = mine_.find(thread);
    if (it == mine_.end()) return;
    if (u == use::lease) it->second.lease = false;
    else if (it->second.writes > 0) --it->second.writes;
    if (it->second.lease || it->second.writes > 0) return;
    mine_.erase(it);
    try {
        lock(offset_of(thread), false);
    } catch (...) { // an unlock fails only on a bad descriptor: the lock then went with it
    }
}

bool thread_locks::leased(const std::string& thread) const noexcept {
    auto it = mine_.find(thread);
    return it != mine_.end() && it->second.lease;
}

bool thread_locks::held_elsewhere(const std::string& thread) const {
    if (mine_.count(thread)) return false;
#ifdef F_OFD_GETLK
    struct flock f {};
    f.l_type = F_WRLCK;
    f.l_whence = SEEK_SET;
    f.l_start = static_cast<off_t>(offset_of(thread));
    f.l_len = 1;
    if (::fcntl(fd_, F_OFD_GETLK, &f) != 0)
        throw std::system_error(errno, std::generic_category(), "testing a lock of " + path_);
    return f.l_type != F_UNLCK;
#else
    return false;
#endif
}

} // namespace stategraph::checkpoint::detail
