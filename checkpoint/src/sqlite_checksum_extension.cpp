/// @file sqlite_checksum_extension.cpp
/// @brief The page-checksum VFS as a loadable SQLite extension, for writing into a checkpoint
/// file by hand: the sqlite3 shell (`.load /path/to/libstategraph_checksum`) or Python
/// (`con.load_extension(...)`) then write through it, and the pages they change keep valid
/// checksums. Loading registers the VFS as the process's default: connections opened after the
/// load use it (the one that loaded it does not). Without it, a page changed by hand reads as
/// damaged (sqlite_checksum_vfs.hpp).

#include "sqlite_checksum_vfs.hpp"

// SQLite derives the entry point's name from the file's: libstategraph_checksum.so ->
// sqlite3_stategraphchecksum_init.
extern "C" int sqlite3_stategraphchecksum_init(sqlite3*, char**, const void*) {
    sqlite3_vfs* vfs = sqlite3_vfs_find(stategraph::checkpoint::detail::checksum_vfs());
    if (!vfs) return SQLITE_ERROR;
    const int rc = sqlite3_vfs_register(vfs, 1);
    return rc == SQLITE_OK ? SQLITE_OK_LOAD_PERMANENTLY : rc;
}
