#include "sqlite_checksum_vfs.hpp"

#include <cstring>
#include <mutex>
#include <vector>

namespace stategraph::checkpoint::detail {

namespace {

constexpr const char* vfs_name = "stategraph-checksum";
/// sqlite3_file_control opcode: the last page whose checksum failed (an std::int64_t*).
constexpr int fcntl_damaged_page = 0x53470001;
constexpr char magic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

enum class layout { unknown, checked, plain };

/// Our part of a file object; the underlying VFS's part follows it (`real`).
struct checked_file {
    sqlite3_file base;
    sqlite3_file* real;
    bool main_db, wal;
    layout pages;              ///< main database: whether its pages carry checksums
    checked_file* main;        ///< WAL: the database it belongs to (its `pages` say)
    std::int64_t damaged_page; ///< main database: the last page found damaged (here or in the WAL)
};
constexpr int header_size = static_cast<int>((sizeof(checked_file) + 7) / 8 * 8);

sqlite3_vfs* underlying() { return static_cast<sqlite3_vfs*>(sqlite3_vfs_find(vfs_name)->pAppData); }
checked_file* as_checked(sqlite3_file* f) { return reinterpret_cast<checked_file*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return as_checked(f)->real; }

/// A whole page at a page boundary (the only reads and writes of a page SQLite makes).
bool is_page(int amount, sqlite3_int64 offset) {
    return amount >= 512 && amount <= 65536 && (amount & (amount - 1)) == 0 && offset % amount == 0;
}

void learn_layout(checked_file& f, const void* buffer, int amount, sqlite3_int64 offset) {
    if (offset != 0 || amount < 100) return;
    if (f.wal) return; // a WAL's offset 0 is its own header
    const auto* p = static_cast<const unsigned char*>(buffer);
    if (std::memcmp(p, magic, sizeof magic) != 0) return;
    f.pages = p[20] == page_reserve ? layout::checked : layout::plain;
}

/// Reads the file's header when its layout is not known yet (another connection made it).
void probe_layout(checked_file& f) {
    if (f.pages != layout::unknown) return;
    unsigned char head[100];
    if (f.real->pMethods->xRead(f.real, head, sizeof head, 0) == SQLITE_OK) learn_layout(f, head, sizeof head, 0);
}

void store_le(unsigned char* to, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) to[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint64_t load_le(const unsigned char* from) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | from[i];
    return v;
}

std::uint32_t load_be32(const unsigned char* from) {
    return std::uint32_t(from[0]) << 24 | std::uint32_t(from[1]) << 16 | std::uint32_t(from[2]) << 8 | from[3];
}
void store_be32(unsigned char* to, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) to[i] = static_cast<unsigned char>(v >> (24 - 8 * i));
}

// -- the WAL ----------------------------------------------------------------------------------
// A WAL is a 32-byte header and frames of a 24-byte header and a page. A frame's header ends
// with a running checksum (SQLite's file format: over the frame header's first 8 bytes and the
// page, continuing the previous frame's, or the WAL header's for the first frame). SQLite
// computes it before handing us the page, so once the page's own checksum is filled in here,
// the frame's is computed again, continuing the one stored before it.
constexpr int wal_header = 32, frame_header = 24;

/// The page's frame, when `amount` bytes at `offset` of a WAL are a frame's page.
bool is_wal_page(int amount, sqlite3_int64 offset) {
    return amount >= 512 && amount <= 65536 && (amount & (amount - 1)) == 0 &&
           offset >= wal_header + frame_header && (offset - wal_header - frame_header) % (amount + frame_header) == 0;
}

/// The main database a page of `f` (the database or its WAL) belongs to; null when unknown.
checked_file* database_of(checked_file& f) { return f.main_db ? &f : f.wal ? f.main : nullptr; }

/// Stores the frame checksum of the frame whose page (`page`, checksummed) is at `offset`.
int rechain_frame(checked_file& f, const unsigned char* page, int amount, sqlite3_int64 offset) {
    auto* io = f.real->pMethods;
    unsigned char head[wal_header], frame[frame_header], prev[8];
    const sqlite3_int64 at = offset - frame_header;
    int rc = io->xRead(f.real, head, wal_header, 0);
    if (rc == SQLITE_OK) rc = io->xRead(f.real, frame, frame_header, at);
    if (rc == SQLITE_OK) {
        if (at == wal_header) std::memcpy(prev, head + 24, 8);
        else rc = io->xRead(f.real, prev, 8, at - amount - frame_header + 16);
    }
    if (rc != SQLITE_OK) return rc;
    const bool big_endian = (load_be32(head) & 1) != 0;
    std::uint32_t s0 = load_be32(prev), s1 = load_be32(prev + 4);
    auto word = [&](const unsigned char* p) {
        return big_endian ? load_be32(p)
                          : std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
    };
    auto add = [&](const unsigned char* p, std::size_t n) {
        for (std::size_t i = 0; i < n; i += 8) {
            s0 += word(p + i) + s1;
            s1 += word(p + i + 4) + s0;
        }
    };
    add(frame, 8);
    add(page, static_cast<std::size_t>(amount));
    unsigned char sums[8];
    store_be32(sums, s0);
    store_be32(sums + 4, s1);
    return io->xWrite(f.real, sums, 8, at + 16);
}

// -- io methods ---------------------------------------------------------------------------------
int x_close(sqlite3_file* f) { return real_of(f)->pMethods->xClose(real_of(f)); }

int x_read(sqlite3_file* file, void* buffer, int amount, sqlite3_int64 offset) {
    auto& f = *as_checked(file);
    const int rc = f.real->pMethods->xRead(f.real, buffer, amount, offset);
    auto* db = database_of(f);
    if (rc != SQLITE_OK || !db) return rc;
    learn_layout(f, buffer, amount, offset);
    if (f.wal ? !is_wal_page(amount, offset) : !is_page(amount, offset)) return rc;
    const auto* page = static_cast<const unsigned char*>(buffer);
    if (f.wal && std::memcmp(page, magic, sizeof magic) == 0) learn_layout(*db, page, amount, 0);
    probe_layout(*db);
    if (db->pages != layout::checked) return rc;
    const auto size = static_cast<std::size_t>(amount);
    if (page_checksum(page, size) == load_le(page + size - 8)) return rc;
    // The page number of a WAL frame is in its header: read it for the message.
    unsigned char frame[4] = {};
    db->damaged_page = !f.wal ? offset / amount + 1
                       : f.real->pMethods->xRead(f.real, frame, 4, offset - frame_header) == SQLITE_OK ? load_be32(frame)
                                                                                                        : -1;
    return SQLITE_IOERR_DATA;
}

int x_write(sqlite3_file* file, const void* buffer, int amount, sqlite3_int64 offset) {
    auto& f = *as_checked(file);
    auto* db = database_of(f);
    if (!db || (f.wal ? !is_wal_page(amount, offset) : !is_page(amount, offset))) {
        if (db) learn_layout(f, buffer, amount, offset);
        return f.real->pMethods->xWrite(f.real, buffer, amount, offset);
    }
    const auto* page = static_cast<const unsigned char*>(buffer);
    if (std::memcmp(page, magic, sizeof magic) == 0 && (f.wal || offset == 0)) learn_layout(*db, page, amount, 0);
    probe_layout(*db);
    if (db->pages != layout::checked) return f.real->pMethods->xWrite(f.real, buffer, amount, offset);
    // A copy: the buffer is SQLite's page cache (its reserved bytes are ours, but not its memory).
    thread_local std::vector<unsigned char> copy;
    const auto size = static_cast<std::size_t>(amount);
    copy.assign(page, page + size);
    store_le(copy.data() + size - 8, page_checksum(copy.data(), size));
    int rc = f.real->pMethods->xWrite(f.real, copy.data(), amount, offset);
    if (rc == SQLITE_OK && f.wal) rc = rechain_frame(f, copy.data(), amount, offset);
    return rc;
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) { return real_of(f)->pMethods->xTruncate(real_of(f), size); }
int x_sync(sqlite3_file* f, int flags) { return real_of(f)->pMethods->xSync(real_of(f), flags); }
int x_file_size(sqlite3_file* f, sqlite3_int64* size) { return real_of(f)->pMethods->xFileSize(real_of(f), size); }
int x_lock(sqlite3_file* f, int level) { return real_of(f)->pMethods->xLock(real_of(f), level); }
int x_unlock(sqlite3_file* f, int level) { return real_of(f)->pMethods->xUnlock(real_of(f), level); }
int x_check_reserved_lock(sqlite3_file* f, int* out) {
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}
int x_file_control(sqlite3_file* file, int op, void* arg) {
    auto& f = *as_checked(file);
    if (op == fcntl_damaged_page) {
        *static_cast<std::int64_t*>(arg) = f.damaged_page;
        return SQLITE_OK;
    }
    return f.real->pMethods->xFileControl(f.real, op, arg);
}
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device_characteristics(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
    return real_of(f)->pMethods->xShmMap(real_of(f), region, size, extend, out);
}
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
    return real_of(f)->pMethods->xShmLock(real_of(f), offset, n, flags);
}
void x_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int x_shm_unmap(sqlite3_file* f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); }
// No memory-mapped reads: every page goes through x_read and its check.
int x_fetch(sqlite3_file*, sqlite3_int64, int, void** out) {
    *out = nullptr;
    return SQLITE_OK;
}
int x_unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

const sqlite3_io_methods io_methods = {
    3,          x_close,         x_read,          x_write,       x_truncate,
    x_sync,     x_file_size,     x_lock,          x_unlock,      x_check_reserved_lock,
    x_file_control, x_sector_size, x_device_characteristics, x_shm_map, x_shm_lock,
    x_shm_barrier, x_shm_unmap,  x_fetch,         x_unfetch,
};

// -- vfs methods ----------------------------------------------------------------------------------
int v_open(sqlite3_vfs*, const char* name, sqlite3_file* file, int flags, int* out_flags) {
    auto* f = as_checked(file);
    f->base.pMethods = nullptr;
    f->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(file) + header_size);
    f->main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
    f->wal = (flags & SQLITE_OPEN_WAL) != 0;
    f->main = nullptr;
    if (f->wal && name) {
        auto* db = sqlite3_database_file_object(name);
        if (db && db->pMethods == &io_methods) f->main = as_checked(db);
    }
    f->pages = layout::unknown;
    f->damaged_page = 0;
    auto* base = underlying();
    const int rc = base->xOpen(base, name, f->real, flags, out_flags);
    // SQLite closes a file whose open failed only when its methods are set.
    if (f->real->pMethods) {
        if (f->real->pMethods->iVersion < 3) { // no WAL support below us: nothing to wrap safely
            f->real->pMethods->xClose(f->real);
            return SQLITE_CANTOPEN;
        }
        f->base.pMethods = &io_methods;
    }
    return rc;
}
int v_delete(sqlite3_vfs*, const char* name, int sync_dir) { return underlying()->xDelete(underlying(), name, sync_dir); }
int v_access(sqlite3_vfs*, const char* name, int flags, int* out) {
    return underlying()->xAccess(underlying(), name, flags, out);
}
int v_full_pathname(sqlite3_vfs*, const char* name, int n, char* out) {
    return underlying()->xFullPathname(underlying(), name, n, out);
}
void* v_dl_open(sqlite3_vfs*, const char* name) { return underlying()->xDlOpen(underlying(), name); }
void v_dl_error(sqlite3_vfs*, int n, char* out) { underlying()->xDlError(underlying(), n, out); }
void (*v_dl_sym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
    return underlying()->xDlSym(underlying(), handle, symbol);
}
void v_dl_close(sqlite3_vfs*, void* handle) { underlying()->xDlClose(underlying(), handle); }
int v_randomness(sqlite3_vfs*, int n, char* out) { return underlying()->xRandomness(underlying(), n, out); }
int v_sleep(sqlite3_vfs*, int micros) { return underlying()->xSleep(underlying(), micros); }
int v_current_time(sqlite3_vfs*, double* out) { return underlying()->xCurrentTime(underlying(), out); }
int v_get_last_error(sqlite3_vfs*, int n, char* out) {
    return underlying()->xGetLastError ? underlying()->xGetLastError(underlying(), n, out) : 0;
}
int v_current_time_int64(sqlite3_vfs*, sqlite3_int64* out) {
    auto* base = underlying();
    if (base->iVersion >= 2 && base->xCurrentTimeInt64) return base->xCurrentTimeInt64(base, out);
    double now = 0;
    const int rc = base->xCurrentTime(base, &now);
    *out = static_cast<sqlite3_int64>(now * 86400000.0);
    return rc;
}

sqlite3_vfs* registered() {
    static sqlite3_vfs vfs{};
    static std::once_flag once;
    std::call_once(once, [] {
        sqlite3_initialize();
        sqlite3_vfs* base = sqlite3_vfs_find(nullptr);
        vfs.iVersion = 2;
        vfs.szOsFile = header_size + base->szOsFile;
        vfs.mxPathname = base->mxPathname;
        vfs.zName = vfs_name;
        vfs.pAppData = base;
        vfs.xOpen = v_open;
        vfs.xDelete = v_delete;
        vfs.xAccess = v_access;
        vfs.xFullPathname = v_full_pathname;
        vfs.xDlOpen = v_dl_open;
        vfs.xDlError = v_dl_error;
        vfs.xDlSym = v_dl_sym;
        vfs.xDlClose = v_dl_close;
        vfs.xRandomness = v_randomness;
        vfs.xSleep = v_sleep;
        vfs.xCurrentTime = v_current_time;
        vfs.xGetLastError = v_get_last_error;
        vfs.xCurrentTimeInt64 = v_current_time_int64;
        sqlite3_vfs_register(&vfs, 0);
    });
    return &vfs;
}

} // namespace

std::uint64_t page_checksum(const unsigned char* page, std::size_t size) {
    // Two running sums of the page's 32-bit little-endian words (its last 8 bytes left out):
    // `a` changes with any flipped bit, `b` also with words moved. Seeded, so that a page of
    // zeros (a hole, a zeroed block) does not carry a valid checksum of zeros.
    std::uint64_t a = 0x5347'6b73 ^ size, b = 0x7061'6765;
    for (std::size_t i = 0; i + 4 <= size - 8; i += 4) {
        const std::uint32_t w = std::uint32_t(page[i]) | std::uint32_t(page[i + 1]) << 8 |
                                std::uint32_t(page[i + 2]) << 16 | std::uint32_t(page[i + 3]) << 24;
        a += w;
        b += a;
    }
    return (b & 0xffff'ffffu) << 32 | (a & 0xffff'ffffu);
}

const char* checksum_vfs() { return registered()->zName; }

void reserve_checksum_bytes(sqlite3* db) {
    int n = page_reserve;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &n);
}

std::optional<std::int64_t> last_damaged_page(sqlite3* db) {
    std::int64_t page = 0;
    if (sqlite3_file_control(db, "main", fcntl_damaged_page, &page) != SQLITE_OK || page <= 0) return std::nullopt;
    return page;
}

} // namespace stategraph::checkpoint::detail
