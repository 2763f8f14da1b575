#pragma once
/// @file thread_locks.hpp
/// @brief One exclusive lock per thread id, held in the kernel (private to checkpoint/src): the
/// SQLite saver's lease of a run that has stored no lease row yet.
///
/// Each thread id maps to one byte of a side file (`<database>-leases`, never written, only
/// locked) through a 62-bit hash; the byte is locked with a Linux open-file-description lock
/// (`F_OFD_SETLK`). Such a lock belongs to this object's open file, so two savers of one process
/// exclude each other as two processes do, and the kernel drops it when the process dies, however
/// it dies. Two thread ids whose hashes meet share a lock: the second is told `thread_busy` while
/// the first runs (about one chance in 2^31 with 65,536 threads in flight on one file).
///
/// Not thread-safe: the saver calls it with its connection's mutex held.

#include <cstdint>
#include <map>
#include <string>

namespace stategraph::checkpoint::detail {

class thread_locks {
public:
    /// @brief Whether this build and system have open-file-description locks (Linux 3.15+).
    static bool available() noexcept;

    /// @brief Opens `path`, made when missing with permission bits `mode` (less the umask; give
    /// the database file's, as SQLite does for its `-wal` and `-shm`, so that whoever may write
    /// the database may lock here too).
    /// @throws std::system_error when it cannot be opened.
    thread_locks(std::string path, unsigned mode);
    ~thread_locks();
    thread_locks(const thread_locks&) = delete;
    thread_locks& operator=(const thread_locks&) = delete;

    /// @brief What a lock is held for: a lease (until `drop`), or one write transaction.
    enum class use { lease, write };

    /// @brief Takes `thread`'s lock for `u`; false when another open file (another saver, here or
    /// in another process) holds it. Taking one this object holds already only counts the use.
    /// @throws std::system_error on a failure other than the lock being held.
    bool take(const std::string& thread, use u);
    /// @brief Ends one use of `thread`'s lock; the lock goes when its last use does.
    void drop(const std::string& thread, use u) noexcept;
    /// @brief Whether this object holds `thread`'s lock for a lease.
    bool leased(const std::string& thread) const noexcept;
    /// @brief Whether another open file holds `thread`'s lock (a test: takes nothing).
    bool held_elsewhere(const std::string& thread) const;

    const std::string& path() const noexcept { return path_; }

private:
    struct uses {
        bool lease = false;
        int writes = 0;
    };
    static std::int64_t offset_of(const std::string& thread) noexcept;
    bool lock(std::int64_t at, bool take) const;

    std::string path_;
    int fd_ = -1;
    std::map<std::string, uses> mine_;
};

} // namespace stategraph::checkpoint::detail
