// Which SQLite commits are synced: with sync_mode::full every commit that stores data is, and a
// commit that only takes, renews, gives back or breaks a lease is not (sqlite_saver.hpp,
// `sqlite_options::synchronous`). The syncs are counted by a VFS of this file, made SQLite's
// default before main, so the saver's checksum VFS (which wraps the default one) runs on it.
#include <boost/test/unit_test.hpp>

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/checkpoint/conformance.hpp>

#include <sqlite3.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace {

using namespace stategraph::checkpoint;
using namespace stategraph::checkpoint::testing;

// ---- a VFS that counts xSync calls and forwards everything else to the one it wraps ----------
std::atomic<long> syncs{0};
sqlite3_vfs* wrapped = nullptr;

struct counted_file {
    sqlite3_file base;
    sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};
counted_file* of(sqlite3_file* f) { return reinterpret_cast<counted_file*>(f); }
sqlite3_file* real_of(sqlite3_file* f) { return of(f)->real(); }

int c_close(sqlite3_file* f) { return real_of(f)->pMethods->xClose(real_of(f)); }
int c_read(sqlite3_file* f, void* b, int n, sqlite3_int64 at) { return real_of(f)->pMethods->xRead(real_of(f), b, n, at); }
int c_write(sqlite3_file* f, const void* b, int n, sqlite3_int64 at) {
    return real_of(f)->pMethods->xWrite(real_of(f), b, n, at);
}
int c_truncate(sqlite3_file* f, sqlite3_int64 n) { return real_of(f)->pMethods->xTruncate(real_of(f), n); }
int c_sync(sqlite3_file* f, int flags) {
    ++syncs;
    return real_of(f)->pMethods->xSync(real_of(f), flags);
}
int c_size(sqlite3_file* f, sqlite3_int64* n) { return real_of(f)->pMethods->xFileSize(real_of(f), n); }
int c_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int c_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int c_check(sqlite3_file* f, int* out) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), out); }
int c_control(sqlite3_file* f, int op, void* arg) { return real_of(f)->pMethods->xFileControl(real_of(f), op, arg); }
int c_sector(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int c_device(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }
int c_shm_map(sqlite3_file* f, int pg, int sz, int extend, void volatile** p) {
    return real_of(f)->pMethods->xShmMap(real_of(f), pg, sz, extend, p);
}
int c_shm_lock(sqlite3_file* f, int at, int n, int flags) { return real_of(f)->pMethods->xShmLock(real_of(f), at, n, flags); }
void c_shm_barrier(sqlite3_file* f) { real_of(f)->pMethods->xShmBarrier(real_of(f)); }
int c_shm_unmap(sqlite3_file* f, int del) { return real_of(f)->pMethods->xShmUnmap(real_of(f), del); }
int c_fetch(sqlite3_file* f, sqlite3_int64 at, int n, void** p) { return real_of(f)->pMethods->xFetch(real_of(f), at, n, p); }
int c_unfetch(sqlite3_file* f, sqlite3_int64 at, void* p) { return real_of(f)->pMethods->xUnfetch(real_of(f), at, p); }

// Version 3 (with xFetch), as the checksum VFS above it asks of the files below it.
const sqlite3_io_methods counted_methods = {
    3, c_close, c_read, c_write, c_truncate, c_sync, c_size, c_lock, c_unlock, c_check, c_control, c_sector, c_device,
    c_shm_map, c_shm_lock, c_shm_barrier, c_shm_unmap, c_fetch, c_unfetch};

int c_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
    auto* real = of(f)->real();
    const int rc = wrapped->xOpen(wrapped, name, real, flags, out);
    f->pMethods = real->pMethods ? &counted_methods : nullptr;
    return rc;
}
int c_delete(sqlite3_vfs*, const char* name, int dir_sync) { return wrapped->xDelete(wrapped, name, dir_sync); }
int c_access(sqlite3_vfs*, const char* name, int flags, int* out) { return wrapped->xAccess(wrapped, name, flags, out); }
int c_full(sqlite3_vfs*, const char* name, int n, char* out) { return wrapped->xFullPathname(wrapped, name, n, out); }
void* c_dl_open(sqlite3_vfs*, const char* name) { return wrapped->xDlOpen(wrapped, name); }
void c_dl_error(sqlite3_vfs*, int n, char* out) { wrapped->xDlError(wrapped, n, out); }
void (*c_dl_sym(sqlite3_vfs*, void* h, const char* name))(void) { return wrapped->xDlSym(wrapped, h, name); }
void c_dl_close(sqlite3_vfs*, void* h) { wrapped->xDlClose(wrapped, h); }
int c_random(sqlite3_vfs*, int n, char* out) { return wrapped->xRandomness(wrapped, n, out); }
int c_sleep(sqlite3_vfs*, int us) { return wrapped->xSleep(wrapped, us); }
int c_time(sqlite3_vfs*, double* out) { return wrapped->xCurrentTime(wrapped, out); }
int c_error(sqlite3_vfs*, int n, char* out) { return wrapped->xGetLastError(wrapped, n, out); }
int c_time64(sqlite3_vfs*, sqlite3_int64* out) { return wrapped->xCurrentTimeInt64(wrapped, out); }

sqlite3_vfs counting_vfs{};

/// Made SQLite's default VFS before main, so before any saver registers its checksum VFS.
const bool counting_vfs_registered = [] {
    sqlite3_initialize();
    wrapped = sqlite3_vfs_find(nullptr);
    counting_vfs.iVersion = 2;
    counting_vfs.szOsFile = static_cast<int>(sizeof(counted_file)) + wrapped->szOsFile;
    counting_vfs.mxPathname = wrapped->mxPathname;
    counting_vfs.zName = "stategraph-test-counting";
    counting_vfs.xOpen = c_open;
    counting_vfs.xDelete = c_delete;
    counting_vfs.xAccess = c_access;
    counting_vfs.xFullPathname = c_full;
    counting_vfs.xDlOpen = c_dl_open;
    counting_vfs.xDlError = c_dl_error;
    counting_vfs.xDlSym = c_dl_sym;
    counting_vfs.xDlClose = c_dl_close;
    counting_vfs.xRandomness = c_random;
    counting_vfs.xSleep = c_sleep;
    counting_vfs.xCurrentTime = c_time;
    counting_vfs.xGetLastError = c_error;
    counting_vfs.xCurrentTimeInt64 = c_time64;
    return sqlite3_vfs_register(&counting_vfs, 1) == SQLITE_OK;
}();

/// A fresh file path in a directory removed at scope exit.
struct sync_dir {
    std::filesystem::path dir;
    sync_dir() {
        std::string t = (std::filesystem::temp_directory_path() / "stategraph-sync-XXXXXX").string();
        if (!mkdtemp(t.data())) throw std::runtime_error("mkdtemp failed");
        dir = t;
    }
    ~sync_dir() {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    }
};

sqlite_options options(const std::filesystem::path& file, sqlite_options::sync_mode mode) {
    sqlite_options o;
    o.path = file.string();
    o.synchronous = mode;
    return o;
}

/// The syncs `f` made.
template <class F>
long syncs_of(F&& f) {
    const long before = syncs.load();
    f();
    return syncs.load() - before;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sqlite_saver_sync)

BOOST_AUTO_TEST_CASE(full_syncs_data_commits_and_not_lease_commits) {
    BOOST_TEST_REQUIRE(counting_vfs_registered);
    sync_dir d;
    sqlite_saver s(options(d.dir / "full.sqlite", sqlite_options::sync_mode::full));
    auto cp1 = next_cp(nullptr, 0, "input", boost::json::object{{"a", 1}});
    BOOST_TEST(syncs_of([&] { put(s, "warm", "", cp1); }) >= 1); // the counter sees this file's syncs

    BOOST_TEST(syncs_of([&] { run(s.acquire("t")); }) == 0);
    BOOST_TEST(syncs_of([&] { put(s, "t", "", cp1); }) >= 1); // data under the lease: synced
    BOOST_TEST(syncs_of([&] { run(s.release("t")); }) == 0);
    BOOST_TEST(syncs_of([&] { (void)run(s.acquire_and_get("t", "", std::nullopt)); }) == 0);
    auto cp2 = next_cp(&cp1, 1, "loop", boost::json::object{{"a", 2}});
    BOOST_TEST(syncs_of([&] { put(s, "t", "", cp2); }) >= 1);
    BOOST_TEST(syncs_of([&] { (void)run(s.break_lease("t")); }) == 0);
    // FULL is back after each lease commit: a data commit with no lease in sight is synced.
    auto other = next_cp(nullptr, 0, "input", boost::json::object{{"b", 1}});
    BOOST_TEST(syncs_of([&] { put(s, "u", "", other); }) >= 1);
    BOOST_TEST(get(s, "t", "")->cp.id == cp2.id);
}

BOOST_AUTO_TEST_CASE(normal_syncs_no_commit) {
    BOOST_TEST_REQUIRE(counting_vfs_registered);
    sync_dir d;
    sqlite_saver s(options(d.dir / "normal.sqlite", sqlite_options::sync_mode::normal));
    auto cp1 = next_cp(nullptr, 0, "input", boost::json::object{{"a", 1}});
    put(s, "warm", "", cp1); // the first commit of a new file may sync its WAL header
    BOOST_TEST(syncs_of([&] {
                   run(s.acquire("t"));
                   put(s, "t", "", cp1);
                   run(s.release("t"));
               }) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
