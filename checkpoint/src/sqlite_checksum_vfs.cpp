#include "sqlite_checksum_vfs.hpp"

#include <bit>
#include <cstring>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::detail {

namespace {

constexpr const char* vfs_name = "stategraph-checksum";
/// sqlite3_file_control opcode: the last page whose checksum failed (an std::int64_t*).
constexpr int fcntl_damaged_page = 0x53470001;
constexpr char magic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f', 'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};

enum class layout { unknown, checked, plain };

/// A WAL's running checksum (its two 32-bit words), as SQLite's file format defines it.
struct frame_sum {
    std::uint32_t s0 = 0, s1 = 0;
    friend bool operator==(const frame_sum&, const frame_sum&) = default;
};

/// Our part of a file object; the underlying VFS's part follows it (`real`).
struct checked_file {
    sqlite3_file base;
    sqlite3_file* real;
    bool main_db, wal;
    layout pages;              ///< main database: whether its pages carry checksums
    checked_file* main;        ///< WAL: the database it belongs to (its `pages` say)
    checked_file* wal_file;    ///< main database: its WAL, while open (to settle it before shared memory is used)
    std::int64_t damaged_page; ///< main database: the last page found damaged (here or in the WAL)

    // WAL only. SQLite writes a frame as its 24-byte header, then its page (see write_wal).
    bool held;                       ///< a frame header written by SQLite, not yet passed on
    sqlite3_int64 held_at;           ///< ... its offset
    unsigned char held_header[24];   ///< ... its bytes
    int deferred_rc;                 ///< passing a held header on failed where no error could be returned
    sqlite3_int64 last_read_at;      ///< the offset of the last read, when nothing was written since; else -1
    bool header_known;               ///< the WAL header as last written or read here:
    bool big_endian;                 ///<   checksums of big-endian words
    unsigned char salts[8];          ///<   its salts (every frame of the same WAL generation repeats them)
    frame_sum header_sum;            ///<   its checksum (which the first frame continues)
    bool chain_known;                ///< the last frame written here (or the header, for frame 1):
    sqlite3_int64 next_at;           ///<   the offset after it
    int page_size;                   ///<   its page size
    frame_sum sqlite_sum;            ///<   the running checksum SQLite computed for it (its page as SQLite had it)
    frame_sum disk_sum;              ///<   the running checksum written (its page with our checksum)
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
std::uint32_t load_le32(const unsigned char* from) {
    return std::uint32_t(from[0]) | std::uint32_t(from[1]) << 8 | std::uint32_t(from[2]) << 16 | std::uint32_t(from[3]) << 24;
}
void store_be32(unsigned char* to, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) to[i] = static_cast<unsigned char>(v >> (24 - 8 * i));
}
frame_sum load_sum(const unsigned char* from) { return {load_be32(from), load_be32(from + 4)}; }
void store_sum(unsigned char* to, frame_sum s) {
    store_be32(to, s.s0);
    store_be32(to + 4, s.s1);
}

// -- the WAL ----------------------------------------------------------------------------------
// A WAL is a 32-byte header and frames of a 24-byte header and a page. A frame's header ends
// with a running checksum (SQLite's file format: over the frame header's first 8 bytes and the
// page, continuing the previous frame's, or the WAL header's for the first frame). SQLite
// computes it before handing us the page, so once the page's own checksum is filled in here,
// the frame's is computed again, continuing the one stored before it.
//
// SQLite writes a frame as its header, then its page at the next byte. The header is held back
// (not written) and goes out with the page, in one write, carrying the corrected running
// checksum. The checksum it continues is remembered from the frame written before, when that
// frame is the one SQLite continued: the running checksum SQLite put in the held header must be
// its own continuation of the one it computed for our last frame (a step of the sum is
// invertible, so equal results mean equal starting points). Otherwise (another connection wrote
// last, a transaction rolled back, frames rewritten in place, a new WAL) it is read from disk.
// Anything else done with the file, or with its database's shared memory, first writes a held
// header as it came, so nobody sees the file without it.
constexpr int wal_header = 32, frame_header = 24;

/// The page's frame, when `amount` bytes at `offset` of a WAL are a frame's page.
bool is_wal_page(int amount, sqlite3_int64 offset) {
    return amount >= 512 && amount <= 65536 && (amount & (amount - 1)) == 0 &&
           offset >= wal_header + frame_header && (offset - wal_header - frame_header) % (amount + frame_header) == 0;
}

/// Continues each of the `count` running checksums in `sums` over the same `n` bytes (a multiple of 8).
template <bool big_endian, int count>
void add_words(frame_sum* sums, const unsigned char* p, std::size_t n) {
    auto word = [](const unsigned char* q) { return big_endian ? load_be32(q) : load_le32(q); };
    for (std::size_t i = 0; i < n; i += 8) {
        const std::uint32_t w0 = word(p + i), w1 = word(p + i + 4);
        for (int k = 0; k < count; ++k) {
            sums[k].s0 += w0 + sums[k].s1;
            sums[k].s1 += w1 + sums[k].s0;
        }
    }
}
template <int count>
void add_words(frame_sum* sums, bool big_endian, const unsigned char* p, std::size_t n) {
    if (big_endian) add_words<true, count>(sums, p, n);
    else add_words<false, count>(sums, p, n);
}

/// The running checksum of a frame: `header` (its first 8 bytes) and `page`, continuing `prev`.
frame_sum frame_checksum(frame_sum prev, bool big_endian, const unsigned char* header, const unsigned char* page,
                         std::size_t size) {
    add_words<1>(&prev, big_endian, header, 8);
    add_words<1>(&prev, big_endian, page, size);
    return prev;
}

/// The main database a page of `f` (the database or its WAL) belongs to; null when unknown.
checked_file* database_of(checked_file& f) { return f.main_db ? &f : f.wal ? f.main : nullptr; }

/// Forgets what was remembered of the WAL's frames (and of its header, when `header` says so).
void forget_chain(checked_file& f, bool header = false) {
    f.chain_known = false;
    if (header) f.header_known = false;
}

/// Notes the WAL header just written or read (32 bytes).
void learn_wal_header(checked_file& f, const unsigned char* head) {
    f.header_known = true;
    f.big_endian = (load_be32(head) & 1) != 0;
    std::memcpy(f.salts, head + 16, 8);
    f.header_sum = load_sum(head + 24);
}

/// Writes a held frame header as SQLite gave it (the page did not follow).
int pass_on_held(checked_file& f) {
    if (!f.held) return SQLITE_OK;
    f.held = false;
    forget_chain(f);
    return f.real->pMethods->xWrite(f.real, f.held_header, frame_header, f.held_at);
}

/// Before anything else is done with `f` (or, for a database, with its WAL or shared memory):
/// writes a held frame header, and returns an error that could not be returned where it happened.
int settle(checked_file& f) {
    checked_file* w = f.wal ? &f : f.main_db ? f.wal_file : nullptr;
    if (!w) return SQLITE_OK;
    const int rc = pass_on_held(*w);
    if (rc != SQLITE_OK) return rc;
    return std::exchange(w->deferred_rc, SQLITE_OK);
}

/// Stores the frame checksum of the frame whose page (`page`, checksummed) is at `offset`,
/// reading what it continues from disk (the page came without its header).
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
    const auto sum = frame_checksum(load_sum(prev), (load_be32(head) & 1) != 0, frame, page, static_cast<std::size_t>(amount));
    unsigned char sums[8];
    store_sum(sums, sum);
    return io->xWrite(f.real, sums, 8, at + 16);
}

/// Writes the held frame header and its page (`page`, as SQLite has it) as one frame: the page
/// with its checksum, the header with the running checksum continuing the frame before.
int write_frame(checked_file& f, const unsigned char* page, int amount) {
    const auto size = static_cast<std::size_t>(amount);
    const sqlite3_int64 at = f.held_at;
    f.held = false;
    // A copy: the buffer is SQLite's page cache (its reserved bytes are ours, but not its memory).
    thread_local std::vector<unsigned char> frame;
    frame.resize(frame_header + size);
    unsigned char* head = frame.data();
    unsigned char* ours = head + frame_header;
    std::memcpy(head, f.held_header, frame_header);
    std::memcpy(ours, page, size);
    store_le(ours + size - 8, page_checksum(ours, size));
    const frame_sum sqlite_said = load_sum(head + 16);

    static constexpr unsigned char zeros[16] = {};
    if (std::memcmp(head + 8, zeros, 16) == 0) {
        // No salts and no checksum: SQLite is rewriting frames of this transaction in place and
        // computes the checksums of all its frames from there on again, from disk, at commit.
        forget_chain(f);
        return f.real->pMethods->xWrite(f.real, head, frame_header + amount, at);
    }
    frame_sum sum;
    bool known = f.chain_known && at == f.next_at && amount == f.page_size && std::memcmp(head + 8, f.salts, 8) == 0;
    if (known) {
        // Both sums at once: SQLite's from the sum it computed for our last frame (to check it
        // continued that one), ours from the sum written there. The pages differ in their last 8 bytes.
        frame_sum sums[2] = {f.sqlite_sum, f.disk_sum};
        add_words<2>(sums, f.big_endian, head, 8);
        add_words<2>(sums, f.big_endian, ours, size - 8);
        add_words<1>(&sums[0], f.big_endian, page + size - 8, 8);
        add_words<1>(&sums[1], f.big_endian, ours + size - 8, 8);
        known = sums[0] == sqlite_said;
        sum = sums[1];
    }
    if (!known) {
        auto* io = f.real->pMethods;
        if (!f.header_known || std::memcmp(head + 8, f.salts, 8) != 0) {
            unsigned char wal_head[wal_header];
            if (const int rc = io->xRead(f.real, wal_head, wal_header, 0); rc != SQLITE_OK) {
                forget_chain(f, true);
                return rc;
            }
            learn_wal_header(f, wal_head);
        }
        frame_sum prev = f.header_sum;
        if (at != wal_header) {
            unsigned char before[8];
            if (const int rc = io->xRead(f.real, before, 8, at - amount - frame_header + 16); rc != SQLITE_OK) {
                forget_chain(f);
                return rc;
            }
            prev = load_sum(before);
        }
        sum = frame_checksum(prev, f.big_endian, head, ours, size);
    }
    store_sum(head + 16, sum);
    const int rc = f.real->pMethods->xWrite(f.real, head, frame_header + amount, at);
    if (rc != SQLITE_OK) {
        forget_chain(f);
        return rc;
    }
    f.chain_known = true;
    f.next_at = at + frame_header + amount;
    f.page_size = amount;
    f.sqlite_sum = sqlite_said;
    f.disk_sum = sum;
    return SQLITE_OK;
}

/// A write into a WAL whose database has page checksums.
int write_wal(checked_file& f, const unsigned char* buffer, int amount, sqlite3_int64 offset) {
    if (f.held && offset == f.held_at + frame_header && is_wal_page(amount, offset)) return write_frame(f, buffer, amount);
    if (const int rc = settle(f); rc != SQLITE_OK) return rc;
    const bool after_read_here = f.last_read_at == offset;
    f.last_read_at = -1;
    auto* io = f.real->pMethods;
    if (amount == frame_header && offset >= wal_header && !after_read_here) {
        // A frame's header (a header SQLite just read the frame of is one rewritten in place,
        // whose page does not follow: that goes out at once).
        f.held = true;
        f.held_at = offset;
        std::memcpy(f.held_header, buffer, frame_header);
        return SQLITE_OK;
    }
    if (offset == 0 && amount == wal_header) { // a new WAL generation: its first frame continues this header
        const int rc = io->xWrite(f.real, buffer, amount, offset);
        forget_chain(f, true);
        if (rc != SQLITE_OK) return rc;
        learn_wal_header(f, buffer);
        const std::uint32_t page = load_be32(buffer + 8);
        f.chain_known = true;
        f.next_at = wal_header;
        f.page_size = page == 1 ? 65536 : static_cast<int>(page);
        f.sqlite_sum = f.disk_sum = f.header_sum;
        return SQLITE_OK;
    }
    forget_chain(f, offset < wal_header);
    if (!is_wal_page(amount, offset)) return io->xWrite(f.real, buffer, amount, offset);
    // A page without its header before it (one rewritten in place): its frame's checksum is read
    // from disk and stored again.
    thread_local std::vector<unsigned char> copy;
    const auto size = static_cast<std::size_t>(amount);
    copy.assign(buffer, buffer + size);
    store_le(copy.data() + size - 8, page_checksum(copy.data(), size));
    int rc = io->xWrite(f.real, copy.data(), amount, offset);
    if (rc == SQLITE_OK) rc = rechain_frame(f, copy.data(), amount, offset);
    return rc;
}

// -- io methods ---------------------------------------------------------------------------------
int x_close(sqlite3_file* file) {
    auto& f = *as_checked(file);
    const int settled = settle(f);
    if (f.wal && f.main && f.main->wal_file == &f) f.main->wal_file = nullptr;
    if (f.main_db && f.wal_file) f.wal_file->main = nullptr;
    const int rc = f.real->pMethods->xClose(f.real);
    return settled != SQLITE_OK ? settled : rc;
}

int x_read(sqlite3_file* file, void* buffer, int amount, sqlite3_int64 offset) {
    auto& f = *as_checked(file);
    if (int rc = settle(f); rc != SQLITE_OK) return rc;
    const int rc = f.real->pMethods->xRead(f.real, buffer, amount, offset);
    if (f.wal) f.last_read_at = offset;
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
    const auto* page = static_cast<const unsigned char*>(buffer);
    if (db && f.wal) {
        if (is_wal_page(amount, offset) && std::memcmp(page, magic, sizeof magic) == 0) learn_layout(*db, page, amount, 0);
        probe_layout(*db);
        if (db->pages == layout::checked) return write_wal(f, page, amount, offset);
    }
    if (int rc = settle(f); rc != SQLITE_OK) return rc;
    if (!db || (f.wal ? !is_wal_page(amount, offset) : !is_page(amount, offset))) {
        if (db) learn_layout(f, buffer, amount, offset);
        return f.real->pMethods->xWrite(f.real, buffer, amount, offset);
    }
    if (std::memcmp(page, magic, sizeof magic) == 0 && (f.wal || offset == 0)) learn_layout(*db, page, amount, 0);
    probe_layout(*db);
    if (db->pages != layout::checked) return f.real->pMethods->xWrite(f.real, buffer, amount, offset);
    // A copy: the buffer is SQLite's page cache (its reserved bytes are ours, but not its memory).
    thread_local std::vector<unsigned char> copy;
    const auto size = static_cast<std::size_t>(amount);
    copy.assign(page, page + size);
    store_le(copy.data() + size - 8, page_checksum(copy.data(), size));
    return f.real->pMethods->xWrite(f.real, copy.data(), amount, offset);
}

int x_truncate(sqlite3_file* file, sqlite3_int64 size) {
    auto& f = *as_checked(file);
    if (int rc = settle(f); rc != SQLITE_OK) return rc;
    if (f.wal) forget_chain(f, size < wal_header);
    return f.real->pMethods->xTruncate(f.real, size);
}
int x_sync(sqlite3_file* file, int flags) {
    if (int rc = settle(*as_checked(file)); rc != SQLITE_OK) return rc;
    return real_of(file)->pMethods->xSync(real_of(file), flags);
}
int x_file_size(sqlite3_file* file, sqlite3_int64* size) {
    if (int rc = settle(*as_checked(file)); rc != SQLITE_OK) return rc;
    return real_of(file)->pMethods->xFileSize(real_of(file), size);
}
int x_lock(sqlite3_file* file, int level) {
    if (int rc = settle(*as_checked(file)); rc != SQLITE_OK) return rc;
    return real_of(file)->pMethods->xLock(real_of(file), level);
}
int x_unlock(sqlite3_file* file, int level) {
    const int settled = settle(*as_checked(file));
    const int rc = real_of(file)->pMethods->xUnlock(real_of(file), level);
    return settled != SQLITE_OK ? settled : rc;
}
int x_check_reserved_lock(sqlite3_file* f, int* out) {
    return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out);
}
int x_file_control(sqlite3_file* file, int op, void* arg) {
    auto& f = *as_checked(file);
    if (op == fcntl_damaged_page) {
        *static_cast<std::int64_t*>(arg) = f.damaged_page;
        return SQLITE_OK;
    }
    if (int rc = settle(f); rc != SQLITE_OK) return rc;
    return f.real->pMethods->xFileControl(f.real, op, arg);
}
int x_sector_size(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int x_device_characteristics(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
// The WAL index in shared memory tells other connections which frames there are: a held frame
// header is written before it is touched.
int x_shm_map(sqlite3_file* file, int region, int size, int extend, void volatile** out) {
    if (int rc = settle(*as_checked(file)); rc != SQLITE_OK) return rc;
    return real_of(file)->pMethods->xShmMap(real_of(file), region, size, extend, out);
}
int x_shm_lock(sqlite3_file* file, int offset, int n, int flags) {
    const int settled = settle(*as_checked(file));
    if (settled != SQLITE_OK && (flags & SQLITE_SHM_LOCK)) return settled;
    const int rc = real_of(file)->pMethods->xShmLock(real_of(file), offset, n, flags);
    return settled != SQLITE_OK ? settled : rc;
}
void x_shm_barrier(sqlite3_file* file) {
    auto& f = *as_checked(file);
    if (f.main_db && f.wal_file && f.wal_file->held) {
        // No error can be returned here: the WAL's next operation returns it.
        if (const int rc = pass_on_held(*f.wal_file); rc != SQLITE_OK) f.wal_file->deferred_rc = rc;
    }
    f.real->pMethods->xShmBarrier(f.real);
}
int x_shm_unmap(sqlite3_file* file, int del) {
    const int settled = settle(*as_checked(file));
    const int rc = real_of(file)->pMethods->xShmUnmap(real_of(file), del);
    return settled != SQLITE_OK ? settled : rc;
}
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
    auto* f = ::new (static_cast<void*>(file)) checked_file{};
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
    f->wal_file = nullptr;
    f->damaged_page = 0;
    f->held = false;
    f->deferred_rc = SQLITE_OK;
    f->last_read_at = -1;
    f->header_known = f->chain_known = false;
    auto* base = underlying();
    const int rc = base->xOpen(base, name, f->real, flags, out_flags);
    // SQLite closes a file whose open failed only when its methods are set.
    if (f->real->pMethods) {
        if (f->real->pMethods->iVersion < 3) { // no WAL support below us: nothing to wrap safely
            f->real->pMethods->xClose(f->real);
            return SQLITE_CANTOPEN;
        }
        f->base.pMethods = &io_methods;
        if (f->main) f->main->wal_file = f;
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
    // Two running sums of the page's 32-bit little-endian words w_0..w_{n-1} (its last 8 bytes
    // left out): `a` changes with any flipped bit, `b` also with words moved. Seeded, so that a
    // page of zeros (a hole, a zeroed block) does not carry a valid checksum of zeros. Defined as
    //   a += w_i; b += a;   for each word in turn, from a = a0, b = b0 (kept mod 2^32),
    // computed here in closed form, which vectorizes:
    //   a = a0 + sum(w_i),   b = b0 + n*a0 + sum((n - i) * w_i).
    const std::uint32_t a0 = 0x5347'6b73u ^ static_cast<std::uint32_t>(size), b0 = 0x7061'6765u;
    const std::size_t n = size >= 12 ? (size - 8) / 4 : 0;
    auto word = [page](std::size_t i) {
        const unsigned char* q = page + 4 * i;
        return std::uint32_t(q[0]) | std::uint32_t(q[1]) << 8 | std::uint32_t(q[2]) << 16 | std::uint32_t(q[3]) << 24;
    };
    std::uint32_t sum = 0, weighted = 0; // sum(w_i), sum((n - i) * w_i)
    std::size_t i = 0;
    if constexpr (std::endian::native == std::endian::little) {
        // Lanes of 4 words (one SSE2 register): after m rows, lane j holds A_j = sum_t w_{4t+j}
        // and B_j = sum_t (m - t) w_{4t+j}; for i = 4t + j, n - i = (n - 4m) + 4(m - t) - j.
        using lanes = std::uint32_t __attribute__((vector_size(16)));
        const std::size_t m = n / 4;
        lanes A{}, B{};
        for (std::size_t t = 0; t < m; ++t) {
            lanes w;
            std::memcpy(&w, page + 16 * t, sizeof w);
            A += w;
            B += A;
        }
        const auto tail_weight = static_cast<std::uint32_t>(n - 4 * m);
        for (int j = 0; j < 4; ++j) {
            sum += A[j];
            weighted += tail_weight * A[j] + 4u * B[j] - static_cast<std::uint32_t>(j) * A[j];
        }
        i = 4 * m;
    }
    for (; i < n; ++i) {
        const std::uint32_t w = word(i);
        sum += w;
        weighted += static_cast<std::uint32_t>(n - i) * w;
    }
    const std::uint32_t a = a0 + sum;
    const std::uint32_t b = b0 + static_cast<std::uint32_t>(n) * a0 + weighted;
    return std::uint64_t(b) << 32 | a;
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
