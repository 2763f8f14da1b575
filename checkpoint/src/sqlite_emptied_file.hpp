#pragma once
/// @file sqlite_emptied_file.hpp
/// @brief Whether a database file found empty was cut to nothing under a WAL that holds its
/// commits (the SQLite saver refuses to open it: SQLite would delete that WAL and open an empty
/// database, every thread silently gone).
///
/// A file in WAL mode gets its header page before the WAL gets its first frame (SQLite switches
/// to WAL in a rollback-journal transaction that writes page 1), and a database file never
/// shrinks back to nothing by itself. So the WAL is looked at first and the file after it: a
/// file still empty then, beside a WAL that held frames, was cut. Looking at the file first and
/// the WAL after it raced with another process creating the database: the file was empty at
/// the first look, and by the second the creator had written its header page and committed
/// into the WAL (1 open in 480 of `concurrent_first_opens_of_a_fresh_file_all_succeed` was
/// refused).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace stategraph::checkpoint::detail {

/// The size of the file at a path, as the file system says now (nullopt: no such file, or it
/// cannot be looked at).
using size_look = std::function<std::optional<std::uintmax_t>(const std::string& path)>;

/// For a database file `path` found empty: the size of its WAL when the WAL holds more than its
/// 32-byte header and the file, looked at again after the WAL, is still empty (it was cut);
/// nullopt otherwise (a new database, or one another process has just created).
inline std::optional<std::uintmax_t> emptied_beside_wal(const std::string& path, const size_look& look) {
    const auto wal = look(path + "-wal");
    if (!wal || *wal <= 32) return std::nullopt;
    const auto now = look(path);
    if (!now || *now != 0) return std::nullopt;
    return wal;
}

} // namespace stategraph::checkpoint::detail
