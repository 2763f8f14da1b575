// The page-checksum VFS's WAL writes (checkpoint/src/sqlite_checksum_vfs.cpp): it puts each
// frame's header out together with its page, continuing the running checksum it remembers from
// the frame it wrote before. Here three writers (two connections of this process and one of a
// child process) take turns on one WAL, with transactions that spill pages and rewrite them in
// place, a transaction rolled back after spilling, and a WAL restarted half-way; then every
// frame's running checksum and page checksum are checked byte by byte, the file and its WAL
// copied and opened fresh (SQLite recovers the WAL, keeping only frames whose checksums hold),
// and every row read back.
#include <boost/test/unit_test.hpp>

#include "sqlite_checksum_vfs.hpp" // checkpoint/src
#include "temp_dir.hpp"

#include <sqlite3.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
namespace detail = stategraph::checkpoint::detail;

using stategraph::test::temp_dir;

/// SQL on a connection; an empty string when it worked, else the error.
std::string exec(sqlite3* db, const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    std::string out = rc == SQLITE_OK ? "" : sql + ": " + (err ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    return out;
}

std::string text(sqlite3* db, const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    std::string out = "(no row)";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) return std::string("!") + sqlite3_errmsg(db);
    if (const int rc = sqlite3_step(s); rc == SQLITE_ROW) {
        const auto* t = sqlite3_column_text(s, 0);
        out = t ? reinterpret_cast<const char*>(t) : "NULL";
    } else if (rc != SQLITE_DONE) {
        out = std::string("!") + sqlite3_errmsg(db);
    }
    sqlite3_finalize(s);
    return out;
}

/// A connection through the checksum VFS: a small page cache (transactions of a few dozen
/// pages spill, and a page spilled then changed again is rewritten in its frame), no automatic
/// checkpoints (the WAL keeps every frame until the test restarts it).
sqlite3* open_writer(const std::string& path) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, detail::checksum_vfs()) != SQLITE_OK)
        throw std::runtime_error("cannot open " + path);
    sqlite3_busy_timeout(db, 10000);
    for (const char* sql : {"PRAGMA cache_size = 8", "PRAGMA wal_autocheckpoint = 0", "PRAGMA synchronous = NORMAL"})
        if (auto e = exec(db, sql); !e.empty()) throw std::runtime_error(e);
    return db;
}

/// Rows transaction `i` inserts: most write one to three, every seventh thirty (it spills).
int rows_of(int i) { return i % 7 == 3 ? 30 : 1 + i % 3; }
std::size_t body_size(int i, int k) { return 200 + static_cast<std::size_t>(i * 37 + k * 501) % 3000; }

/// Transaction `i`: its rows, the counter row set to `i`, and in a spilling one its first rows
/// written again after the spill (their frames rewritten in place). Empty when it worked.
std::string write_transaction(sqlite3* db, int i) {
    if (auto e = exec(db, "BEGIN IMMEDIATE"); !e.empty()) return e;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, "INSERT INTO t(id, body) VALUES (?, ?)", -1, &s, nullptr) != SQLITE_OK)
        return sqlite3_errmsg(db);
    std::string err;
    for (int k = 0; k < rows_of(i) && err.empty(); ++k) {
        const std::string body(body_size(i, k), static_cast<char>('a' + (i + k) % 26));
        sqlite3_bind_int64(s, 1, std::int64_t(i) * 100 + k);
        sqlite3_bind_blob(s, 2, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
        if (sqlite3_step(s) != SQLITE_DONE) err = std::string("insert: ") + sqlite3_errmsg(db);
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    if (err.empty() && rows_of(i) > 10)
        err = exec(db, "UPDATE t SET body = body WHERE id BETWEEN " + std::to_string(i * 100) + " AND " + std::to_string(i * 100 + 3));
    if (err.empty()) err = exec(db, "UPDATE t SET body = CAST(" + std::to_string(i) + " AS TEXT) WHERE id = -1");
    if (err.empty()) err = exec(db, "COMMIT");
    if (!err.empty()) exec(db, "ROLLBACK");
    return err;
}

/// A transaction that spills frames into the WAL and is rolled back: the next writer writes its
/// frames over them.
std::string rolled_back_transaction(sqlite3* db) {
    std::string err = exec(db, "BEGIN IMMEDIATE");
    if (err.empty())
        err = exec(db, "WITH RECURSIVE n(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM n WHERE v < 40) "
                       "INSERT INTO t(id, body) SELECT -1000 - v, zeroblob(2000) FROM n");
    if (!err.empty()) return err;
    return exec(db, "ROLLBACK");
}

/// A writer in a child process: reads a transaction number from `in`, writes it, answers one
/// byte (0: done) on `out`; -1 ends it.
[[noreturn]] void child_writer(const std::string& path, int in, int out) {
    sqlite3* db = nullptr;
    int code = 0;
    for (int i; read(in, &i, sizeof i) == static_cast<ssize_t>(sizeof i) && i >= 0;) {
        char ok = 0;
        try {
            if (!db) db = open_writer(path);
            ok = write_transaction(db, i).empty() ? 0 : 1;
        } catch (const std::exception&) {
            ok = 1;
        }
        if (write(out, &ok, 1) != 1) code = 2;
    }
    if (db) sqlite3_close(db);
    _exit(code);
}

std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t be32(const std::string& b, std::size_t at) {
    return std::uint32_t(std::uint8_t(b[at])) << 24 | std::uint32_t(std::uint8_t(b[at + 1])) << 16 |
           std::uint32_t(std::uint8_t(b[at + 2])) << 8 | std::uint8_t(b[at + 3]);
}
std::uint64_t le64(const std::string& b, std::size_t at) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = v << 8 | std::uint8_t(b[at + static_cast<std::size_t>(i)]);
    return v;
}

/// The WAL's frames, checked as SQLite's recovery does (salts, the running checksum from the
/// header on) and, beyond it, each frame's page checksum. Frames are counted up to the last
/// commit frame of the unbroken chain.
struct wal_walk {
    std::size_t frames = 0;       ///< frames up to the last commit frame whose chain holds
    std::size_t bad_pages = 0;    ///< of those, pages whose own checksum fails
    std::string stopped;          ///< why the walk stopped
};

wal_walk walk_wal(const std::string& wal) {
    wal_walk out;
    if (wal.size() < 32) {
        out.stopped = "no header";
        return out;
    }
    const bool big_endian = (be32(wal, 0) & 1) != 0;
    const std::size_t page = be32(wal, 8) == 1 ? 65536 : be32(wal, 8);
    std::uint32_t s0 = 0, s1 = 0;
    auto add = [&](std::size_t at, std::size_t n) {
        for (std::size_t i = at; i < at + n; i += 8) {
            auto word = [&](std::size_t j) {
                return big_endian ? be32(wal, j)
                                  : std::uint32_t(std::uint8_t(wal[j])) | std::uint32_t(std::uint8_t(wal[j + 1])) << 8 |
                                        std::uint32_t(std::uint8_t(wal[j + 2])) << 16 |
                                        std::uint32_t(std::uint8_t(wal[j + 3])) << 24;
            };
            s0 += word(i) + s1;
            s1 += word(i + 4) + s0;
        }
    };
    add(0, 24);
    if (s0 != be32(wal, 24) || s1 != be32(wal, 28)) {
        out.stopped = "header checksum";
        return out;
    }
    std::size_t bad_pages = 0;
    for (std::size_t n = 1;; ++n) {
        const std::size_t at = 32 + (n - 1) * (page + 24);
        if (at + 24 + page > wal.size()) {
            out.stopped = "end of file after frame " + std::to_string(n - 1);
            break;
        }
        if (wal.compare(at + 8, 8, wal, 16, 8) != 0) {
            out.stopped = "salts of frame " + std::to_string(n);
            break;
        }
        add(at, 8);
        add(at + 24, page);
        if (s0 != be32(wal, at + 16) || s1 != be32(wal, at + 20)) {
            out.stopped = "running checksum of frame " + std::to_string(n);
            break;
        }
        const auto* p = reinterpret_cast<const unsigned char*>(wal.data() + at + 24);
        if (detail::page_checksum(p, page) != le64(wal, at + 24 + page - 8)) ++bad_pages;
        if (be32(wal, at + 4) != 0) { // a commit frame
            out.frames = n;
            out.bad_pages = bad_pages;
        }
    }
    return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(checksum_vfs)

BOOST_AUTO_TEST_CASE(the_page_checksum_in_closed_form_is_the_running_sums) {
    // The definition the file format stores: two running sums over the page's little-endian
    // words, its last 8 bytes left out, kept mod 2^32. page_checksum computes it in closed form
    // (vectorized); both must agree on every page size and content.
    auto running = [](const unsigned char* page, std::size_t size) {
        std::uint32_t a = 0x5347'6b73u ^ static_cast<std::uint32_t>(size), b = 0x7061'6765u;
        for (std::size_t i = 0; i + 4 <= size - 8; i += 4) {
            a += std::uint32_t(page[i]) | std::uint32_t(page[i + 1]) << 8 | std::uint32_t(page[i + 2]) << 16 |
                 std::uint32_t(page[i + 3]) << 24;
            b += a;
        }
        return std::uint64_t(b) << 32 | a;
    };
    std::vector<unsigned char> page(65536);
    std::uint64_t x = 88172645463325252ull;
    for (std::size_t size = 512; size <= page.size(); size *= 2)
        for (int fill = 0; fill < 4; ++fill) {
            for (auto& c : page) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c = fill == 0 ? 0xff : fill == 1 ? 0 : static_cast<unsigned char>(x);
            }
            BOOST_TEST(detail::page_checksum(page.data(), size) == running(page.data(), size),
                       "page of " << size << " bytes, fill " << fill);
        }
    // Words moved change the sum; so does one flipped bit.
    const auto before = detail::page_checksum(page.data(), 4096);
    std::swap(page[0], page[4]);
    if (page[0] != page[4]) BOOST_TEST(detail::page_checksum(page.data(), 4096) != before);
    page[100] ^= 0x10;
    BOOST_TEST(detail::page_checksum(page.data(), 4096) != before);
}

BOOST_AUTO_TEST_CASE(writers_taking_turns_on_one_wal_keep_every_frame_checksum) {
    temp_dir dir;
    const std::string path = dir.file("turns.db");

    // The child first, before this process opens anything (no SQLite file crosses a fork).
    int to_child[2], from_child[2];
    BOOST_REQUIRE(pipe(to_child) == 0 && pipe(from_child) == 0);
    const pid_t child = fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
        close(to_child[1]);
        close(from_child[0]);
        child_writer(path, to_child[0], from_child[1]);
    }
    close(to_child[0]);
    close(from_child[1]);
    auto ask_child = [&](int i) {
        char ok = 1;
        if (write(to_child[1], &i, sizeof i) != static_cast<ssize_t>(sizeof i) || read(from_child[0], &ok, 1) != 1) return false;
        return ok == 0;
    };

    sqlite3* a = open_writer(path);
    detail::reserve_checksum_bytes(a);
    BOOST_REQUIRE_EQUAL(text(a, "PRAGMA journal_mode = WAL"), "wal");
    BOOST_REQUIRE_EQUAL(exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB); INSERT INTO t VALUES (-1, '')"), "");
    sqlite3* b = open_writer(path);

    const int transactions = 120;
    std::int64_t rows = 1;
    for (int i = 0; i < transactions; ++i) {
        if (i == transactions / 2) // the next writer starts the WAL over (new salts)
            BOOST_REQUIRE_EQUAL(text(a, "PRAGMA wal_checkpoint(RESTART)"), "0");
        if (i % 10 == 4) BOOST_REQUIRE_EQUAL(rolled_back_transaction(i % 20 == 4 ? a : b), "");
        switch (i % 3) {
        case 0: BOOST_REQUIRE_EQUAL(write_transaction(a, i), ""); break;
        case 1: BOOST_REQUIRE_EQUAL(write_transaction(b, i), ""); break;
        default: BOOST_REQUIRE_MESSAGE(ask_child(i), "the child's transaction " << i << " failed");
        }
        rows += rows_of(i);
    }
    // Every writer idle: copy the file and its WAL (not the shared memory) as they are.
    const std::string copy = dir.file("copy.db");
    fs::copy_file(path, copy);
    fs::copy_file(path + "-wal", copy + "-wal");

    const auto walk = walk_wal(file_bytes(copy + "-wal"));
    BOOST_TEST(walk.bad_pages == 0u, walk.bad_pages << " frames with a damaged page");
    BOOST_TEST(text(a, "PRAGMA integrity_check") == "ok");
    BOOST_TEST(text(a, "SELECT count(*) FROM t") == std::to_string(rows));
    // What SQLite counts as the WAL's frames (a checkpoint's second column) is what the walk
    // found intact: the chain holds up to the last commit.
    int log_frames = -1, checkpointed = -1;
    BOOST_TEST(sqlite3_wal_checkpoint_v2(a, "main", SQLITE_CHECKPOINT_PASSIVE, &log_frames, &checkpointed) == SQLITE_OK);
    BOOST_TEST(walk.frames == static_cast<std::size_t>(log_frames), "walk stopped at " << walk.stopped);

    const int end = -1;
    BOOST_TEST(write(to_child[1], &end, sizeof end) == static_cast<ssize_t>(sizeof end));
    int status = 0;
    BOOST_TEST(waitpid(child, &status, 0) == child);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), "child status " << status);
    close(to_child[1]);
    close(from_child[0]);
    sqlite3_close(b);
    sqlite3_close(a);

    // Recovery from the copied WAL: every committed transaction is there.
    sqlite3* fresh = open_writer(copy);
    BOOST_TEST(text(fresh, "PRAGMA integrity_check") == "ok");
    BOOST_TEST(text(fresh, "SELECT count(*) FROM t") == std::to_string(rows));
    BOOST_TEST(text(fresh, "SELECT body FROM t WHERE id = -1") == std::to_string(transactions - 1));
    std::int64_t bytes = 0;
    for (int i = 0; i < transactions; ++i)
        for (int k = 0; k < rows_of(i); ++k) bytes += static_cast<std::int64_t>(body_size(i, k));
    BOOST_TEST(text(fresh, "SELECT sum(length(body)) FROM t WHERE id >= 0") == std::to_string(bytes));
    sqlite3_close(fresh);
}

// The case that makes the remembered chain wrong when trusted on position alone: a writer's
// transaction spills frames and rolls back, another connection commits exactly as many frames
// over them (same WAL header, same salts), and the first writer appends at the very offset
// after its own dead frames. It must continue the other connection's last frame.
BOOST_AUTO_TEST_CASE(a_writer_whose_rolled_back_frames_were_replaced_continues_the_new_ones) {
    temp_dir dir;
    const std::string path = dir.file("replaced.db");
    sqlite3* a = open_writer(path);
    detail::reserve_checksum_bytes(a);
    BOOST_REQUIRE_EQUAL(text(a, "PRAGMA journal_mode = WAL"), "wal");
    BOOST_REQUIRE_EQUAL(exec(a, "CREATE TABLE t(id INTEGER PRIMARY KEY, body BLOB); INSERT INTO t VALUES (-1, '')"), "");
    BOOST_REQUIRE_EQUAL(write_transaction(a, 3), ""); // 30 rows: a tree of a few levels
    sqlite3* b = open_writer(path);
    BOOST_REQUIRE_EQUAL(text(a, "PRAGMA wal_checkpoint(TRUNCATE)"), "0");
    BOOST_REQUIRE_EQUAL(fs::file_size(path + "-wal"), 0u);
    BOOST_REQUIRE_EQUAL(write_transaction(a, 1), ""); // the WAL's header and salts stay from here on
    const auto frame = 4096u + 24u;
    const auto committed = fs::file_size(path + "-wal");
    BOOST_REQUIRE_EQUAL((committed - 32) % frame, 0u);

    BOOST_REQUIRE_EQUAL(rolled_back_transaction(a), "");
    const auto wal_size = fs::file_size(path + "-wal");
    const auto dead = (wal_size - committed) / frame;
    BOOST_REQUIRE_GT(dead, 2u);
    // One frame each (the counter row's leaf page), over a's dead frames.
    for (std::uintmax_t i = 0; i < dead; ++i)
        BOOST_REQUIRE_EQUAL(exec(b, "UPDATE t SET body = 'b" + std::to_string(i) + "' WHERE id = -1"), "");
    BOOST_REQUIRE_EQUAL(fs::file_size(path + "-wal"), wal_size);
    BOOST_REQUIRE_EQUAL(walk_wal(file_bytes(path + "-wal")).frames, (committed - 32) / frame + dead);
    BOOST_REQUIRE_EQUAL(write_transaction(a, 4), "");

    const auto walk = walk_wal(file_bytes(path + "-wal"));
    BOOST_TEST(walk.bad_pages == 0u);
    int log_frames = -1, checkpointed = -1;
    BOOST_TEST(sqlite3_wal_checkpoint_v2(a, "main", SQLITE_CHECKPOINT_PASSIVE, &log_frames, &checkpointed) == SQLITE_OK);
    BOOST_TEST(walk.frames == static_cast<std::size_t>(log_frames), "walk stopped at " << walk.stopped);
    const std::string copy = dir.file("copy.db");
    fs::copy_file(path, copy);
    fs::copy_file(path + "-wal", copy + "-wal");
    sqlite3_close(b);
    sqlite3_close(a);
    sqlite3* fresh = open_writer(copy);
    BOOST_TEST(text(fresh, "PRAGMA integrity_check") == "ok");
    BOOST_TEST(text(fresh, "SELECT body FROM t WHERE id = -1") == "4");
    BOOST_TEST(text(fresh, "SELECT count(*) FROM t") == std::to_string(1 + rows_of(3) + rows_of(1) + rows_of(4)));
    sqlite3_close(fresh);
}

BOOST_AUTO_TEST_SUITE_END()
