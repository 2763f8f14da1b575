#pragma once
/// @file sqlite_checksum_vfs.hpp
/// @brief Page checksums for the SQLite saver's files: a VFS shim over the default VFS.
///
/// A file made through it keeps `page_reserve` reserved bytes at the end of every page (byte 20
/// of the header says so); the last 8 of them hold a checksum of the rest of the page. The shim
/// fills the checksum in whenever a page is written, into the database file or into the WAL
/// (where it then computes the frame's own running checksum again, as SQLite's file format
/// defines it, so that WAL recovery and checkpoints by any connection keep working), and
/// verifies it whenever a page is read from either: a mismatch reads as SQLITE_IOERR_DATA, so a
/// damaged page fails the statement that reads it (and the write that would have rebalanced over
/// it) instead of being read, or built on, as valid. Files without the reserved bytes (made
/// before, or by other tools) are read and written unchecked. A connection that writes into a
/// checksummed file without this VFS leaves pages whose checksums no longer match: they read as
/// damaged (reading through any VFS is harmless, a checkpoint it runs included).

#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace stategraph::checkpoint::detail {

/// Reserved bytes per page of a checksummed file: 8 of checksum, 4 unused (zero). Two bits set,
/// so that no single flipped bit of header byte 20 turns it into 0 (an unchecked file).
inline constexpr int page_reserve = 12;

/// The name of the checksum VFS, registered (not as the default) on first use. Pass it to
/// sqlite3_open_v2 for files the saver owns, and for any connection that writes into them.
const char* checksum_vfs();

/// Asks for checksums on a new database: `page_reserve` bytes per page. Call on a connection
/// opened through `checksum_vfs()` before the file's first page is written; a file that
/// already holds pages keeps its layout (SQLite only notes the wish, for a later VACUUM).
void reserve_checksum_bytes(sqlite3* db);

/// The page (1-based) whose checksum failed last on the main database of `db`, if any.
std::optional<std::int64_t> last_damaged_page(sqlite3* db);

/// The checksum stored in a page's last 8 bytes (exposed for tests).
std::uint64_t page_checksum(const unsigned char* page, std::size_t size);

} // namespace stategraph::checkpoint::detail
