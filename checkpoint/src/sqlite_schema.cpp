/// @file sqlite_schema.cpp
/// @brief Setting a SQLite saver's file up: the checks of its header and schema version, page size,
/// WAL and page checksums of a new file, the schema and its migrations (one per schema version),
/// and encryption at rest (the key, and the marker of an encrypted file).

#include "sqlite_saver_impl.hpp"
#include "sqlite_checksum_vfs.hpp"
#include "sqlite_emptied_file.hpp"

#include <stategraph/core/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

namespace stategraph::checkpoint {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema: an ordered list of migrations; migration i (0-based) brings the file to version i+1.
// Never edit a released migration: append a new one and bump sqlite_saver::schema_version.
// A migration is SQL, optionally followed by a C++ step and more SQL, all in one transaction
// (see impl::migrate). Values are stored as BLOBs, so length(value) is their byte size (and
// SQLite computes it without reading the value).

// v1: JSON text columns, rowid tables.
constexpr const char* migration_v1 = R"sql(
CREATE TABLE checkpoints (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    id        TEXT NOT NULL,
    parent_id TEXT NOT NULL DEFAULT '',
    step      INTEGER NOT NULL,
    source    TEXT NOT NULL,
    versions  TEXT NOT NULL,
    frontier  TEXT NOT NULL,
    metadata  TEXT NOT NULL,
    signature TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (thread_id, ns, id)
);
CREATE TABLE blobs (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    channel   TEXT NOT NULL,
    version   TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
);
CREATE TABLE writes (
    thread_id     TEXT NOT NULL,
    ns            TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_name     TEXT NOT NULL,
    channel       TEXT NOT NULL,
    value         BLOB NOT NULL,
    seq           INTEGER NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
);
CREATE TABLE leases (
    thread_id  TEXT PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
)sql";

// v2: WITHOUT ROWID tables (one b-tree each instead of a table plus its primary-key index), a
// checkpoint's versions/frontier/metadata/signature in one binary `record` (codec::encode_record),
// values in codec::encode_value form (JSON text, or appended items and the version they extend),
// and `graphs`: one `__graph__` value per graph signature, shared by every thread. The small values
// a checkpoint writes live in its own row (`vals`, codec::encode_inline), so that a typical put
// changes one b-tree page: one WAL frame per commit; larger values go to `blobs`.
// Step 1 creates the new tables under temporary names and copies blobs and writes as they are
// (v1 values are JSON text: the codec's whole-value form); the C++ step converts checkpoint
// rows (impl::convert_v1_checkpoints); step 2 swaps the tables.
constexpr const char* migration_v2_create = R"sql(
CREATE TABLE checkpoints_v2 (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    id        TEXT NOT NULL,
    parent_id TEXT NOT NULL DEFAULT '',
    step      INTEGER NOT NULL,
    source    TEXT NOT NULL,
    record    BLOB NOT NULL,
    vals      BLOB,
    PRIMARY KEY (thread_id, ns, id)
) WITHOUT ROWID;
CREATE TABLE blobs_v2 (
    thread_id TEXT NOT NULL,
    ns        TEXT NOT NULL,
    channel   TEXT NOT NULL,
    version   TEXT NOT NULL,
    value     BLOB NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
) WITHOUT ROWID;
CREATE TABLE writes_v2 (
    thread_id     TEXT NOT NULL,
    ns            TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_name     TEXT NOT NULL,
    channel       TEXT NOT NULL,
    value         BLOB NOT NULL,
    seq           INTEGER NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
) WITHOUT ROWID;
CREATE TABLE graphs (
    version TEXT PRIMARY KEY NOT NULL,
    value   BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO blobs_v2(thread_id, ns, channel, version, value)
    SELECT thread_id, ns, channel, version, CAST(value AS BLOB) FROM blobs;
INSERT INTO writes_v2(thread_id, ns, checkpoint_id, task_id, task_name, channel, value, seq)
    SELECT thread_id, ns, checkpoint_id, task_id, task_name, channel, CAST(value AS BLOB), seq FROM writes;
)sql";
constexpr const char* migration_v2_swap = R"sql(
DROP TABLE checkpoints;
DROP TABLE blobs;
DROP TABLE writes;
ALTER TABLE checkpoints_v2 RENAME TO checkpoints;
ALTER TABLE blobs_v2 RENAME TO blobs;
ALTER TABLE writes_v2 RENAME TO writes;
)sql";
// Version 3 stores records, values and pending writes sealed (codec::seal: a checksum bound to
// where the bytes are stored). Rows of earlier versions stay as they are and are read unchecked;
// the version only keeps older stategraph builds, which cannot read sealed bytes, out.
constexpr const char* migration_v3 = "-- records, values and pending writes may be sealed from now on";
// Version 4 seals a record with the columns beside it too (parent, step, source): a changed
// column is caught like a changed record byte. Records sealed by version 3 still read (bound to
// thread, namespace and id only); the version keeps version-3 builds, which would find every new
// record's checksum wrong, out.
constexpr const char* migration_v4 = "-- records sealed with their parent, step and source from now on";
// Version 5: facts about the whole file. `encryption` marks an encrypted file (a known text
// encrypted with its key: impl::check_encryption); files without it are not encrypted.
constexpr const char* migration_v5 = R"sql(
CREATE TABLE settings (
    name  TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL
) WITHOUT ROWID;
)sql";
// Version 6: the node cache (saver::cache_put). Entries belong to no thread; `expires_at` is in
// milliseconds since the epoch (NULL: never). Values are sealed, or encrypted, to (ns, key,
// expires_at), so an entry moved to another key or given another expiry reads as corrupt.
constexpr const char* migration_v6 = R"sql(
CREATE TABLE cache (
    ns         TEXT NOT NULL,
    key        TEXT NOT NULL,
    value      BLOB NOT NULL,
    expires_at INTEGER,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID;
)sql";
// Version 7: `leases` WITHOUT ROWID, one b-tree instead of a table and its primary-key index.
// Taking a lease and giving it back each change one page, not two, so a run's two commits (the
// lease taken with the read; the checkpoints written with the lease given back) write one WAL
// frame less each: about 10% of an interrupt-and-resume on SQLite NORMAL. Leases held while the
// file migrates are kept.
constexpr const char* migration_v7 = R"sql(
CREATE TABLE leases_v7 (
    thread_id  TEXT PRIMARY KEY NOT NULL,
    owner      TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO leases_v7(thread_id, owner, expires_at) SELECT thread_id, owner, expires_at FROM leases;
DROP TABLE leases;
ALTER TABLE leases_v7 RENAME TO leases;
)sql";

// Version 8: a lease may be held by its thread's file lock alone (`<file>-leases`), with no row
// until the run has held it for a tick of the keeper. Earlier builds, which know only rows, would
// take such a thread: the version keeps them out.
constexpr const char* migration_v8 = "-- leases may be file locks without a row from now on";
// A call's last pending writes may be stored inside the row of the checkpoint they belong to
// (impl::add_pending_column).
constexpr const char* migration_v9 = "-- checkpoints.pending";

constexpr const char* sql_v1_checkpoints =
    "SELECT thread_id, ns, id, parent_id, step, source, versions, frontier, metadata, signature FROM checkpoints";
constexpr const char* sql_v2_put_checkpoint =
    "INSERT INTO checkpoints_v2(thread_id, ns, id, parent_id, step, source, record) "
    "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)";

// Encryption.
constexpr std::string_view sql_get_setting = "SELECT value FROM settings WHERE name = ?1";
constexpr std::string_view sql_put_setting = "INSERT INTO settings(name, value) VALUES(?1, ?2)";
constexpr std::string_view sql_holds_data =
    "SELECT EXISTS(SELECT 1 FROM checkpoints) OR EXISTS(SELECT 1 FROM blobs) OR EXISTS(SELECT 1 FROM writes) "
    "OR EXISTS(SELECT 1 FROM graphs) OR EXISTS(SELECT 1 FROM cache)";
/// The settings row of an encrypted file, and the text its value decrypts to with the right key.
constexpr std::string_view encryption_setting = "encryption";
constexpr std::string_view encryption_check = "stategraph encrypted file: xchacha20poly1305-ietf";

/// The first `n` bytes of the database file at `path` (zeros past its end), read through
/// SQLite's own default VFS, never a descriptor of ours: closing any descriptor of a file drops
/// every POSIX lock this process holds on it, SQLite's included (each connection in WAL mode
/// holds a shared lock on the database file for as long as it is open), after which another
/// process closing the file would take it for its last user and delete the WAL still in use
/// here. SQLite's VFS keeps such a descriptor open until the process's locks on the file go.
/// nullopt when the VFS cannot open the file (SQLite then says why when it opens it).
std::optional<std::string> read_file_head(const std::string& path, int n) {
    sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
    if (!vfs) return std::nullopt;
    std::string full(static_cast<std::size_t>(vfs->mxPathname) + 1, '\0');
    if (vfs->xFullPathname(vfs, path.c_str(), vfs->mxPathname + 1, full.data()) != SQLITE_OK) return std::nullopt;
    // A name in the form xOpen expects for a main database (its URI parameters after it).
    struct name_deleter {
        void operator()(const char* p) const { sqlite3_free_filename(p); }
    };
    std::unique_ptr<const char, name_deleter> name(sqlite3_create_filename(full.c_str(), "", "", 0, nullptr));
    if (!name) return std::nullopt;
    std::vector<std::max_align_t> space((static_cast<std::size_t>(vfs->szOsFile) + sizeof(std::max_align_t) - 1) /
                                        sizeof(std::max_align_t));
    auto* file = reinterpret_cast<sqlite3_file*>(space.data());
    file->pMethods = nullptr;
    int out = 0;
    const int rc = vfs->xOpen(vfs, name.get(), file, SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_READONLY, &out);
    if (rc != SQLITE_OK || !file->pMethods) {
        if (file->pMethods) file->pMethods->xClose(file);
        return std::nullopt;
    }
    std::string head(static_cast<std::size_t>(n), '\0');
    const int read = file->pMethods->xRead(file, head.data(), n, 0); // a short read fills zeros
    file->pMethods->xClose(file);
    if (read != SQLITE_OK && read != SQLITE_IOERR_SHORT_READ) return std::nullopt;
    return head;
}

} // namespace

using namespace sqlite_detail;

void sqlite_saver::impl::fail_finalizing(sqlite3_stmt* s, int rc, const char* what) {
    try {
        fail(rc, "", what);
    } catch (...) {
        sqlite3_finalize(s);
        throw;
    }
}

void sqlite_saver::impl::exec(const std::string& sql, const char* what) {
    char* err = nullptr;
    int rc = sqlite3_exec(db.get(), sql.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) fail(rc, "", what);
}

std::int64_t sqlite_saver::impl::query_int(const std::string& sql, const char* what) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(s);
        fail(rc, "", what);
    }
    rc = sqlite3_step(s);
    std::int64_t v = rc == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        fail_finalizing(s, rc, what);
    }
    sqlite3_finalize(s);
    return v;
}

std::string sqlite_saver::impl::query_text(const std::string& sql, const char* what) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr);
    if (rc != SQLITE_OK) {
        sqlite3_finalize(s);
        fail(rc, "", what);
    }
    rc = sqlite3_step(s);
    std::string v;
    if (rc == SQLITE_ROW && sqlite3_column_text(s, 0))
        v = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_finalizing(s, rc, what);
    sqlite3_finalize(s);
    return v;
}

void sqlite_saver::impl::set_up() {
    // Reading the header is the first access to the file: garbage fails here, untouched.
    auto version = query_int("PRAGMA user_version", "reading the schema version");
    check_version(version);

    // A new file gets the page size asked for and room for page checksums (both can only be
    // set before the first table).
    if (!opt.read_only && version == 0 &&
        query_int("SELECT count(*) FROM sqlite_schema", "reading the schema") == 0) {
        if (opt.page_size != 0) exec("PRAGMA page_size = " + std::to_string(opt.page_size), "setting the page size");
        if (opt.path != ":memory:") detail::reserve_checksum_bytes(db.get());
    }
    if (!opt.read_only && opt.path != ":memory:" &&
        query_text("PRAGMA journal_mode = WAL", "switching to WAL mode") != "wal")
        fail(SQLITE_BUSY, "", "switching to WAL mode"); // another connection kept it from switching
    static constexpr const char* sync_names[] = {"OFF", "NORMAL", "FULL"};
    exec(std::string("PRAGMA synchronous = ") + sync_names[static_cast<int>(opt.synchronous)],
         "setting synchronous");

    if (version < sqlite_saver::schema_version) {
        if (opt.read_only)
            throw checkpoint_error(errc::storage_failure,
                                   "sqlite_saver: " + opt.path + " has schema version " + std::to_string(version) +
                                       " and needs migrating to " +
                                       std::to_string(sqlite_saver::schema_version) +
                                       ", which a read-only saver cannot do");
        migrate();
    }
    check_encryption();
}

void sqlite_saver::impl::check_header() const {
    if (opt.path == ":memory:") return;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(opt.path, ec)) return;
    auto size = std::filesystem::file_size(opt.path, ec);
    if (ec) return;
    if (size == 0) {
        // An empty file is a new database, unless a WAL beside it holds commits and the file,
        // looked at again after the WAL, is still empty: then it was cut to nothing
        // (sqlite_emptied_file.hpp). SQLite would delete that WAL and open an empty database,
        // every thread silently gone.
        const detail::size_look look = [](const std::string& p) -> std::optional<std::uintmax_t> {
            std::error_code e;
            const auto n = std::filesystem::file_size(p, e);
            if (e) return std::nullopt;
            return n;
        };
        if (const auto wal = detail::emptied_beside_wal(opt.path, look))
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "sqlite_saver: " + opt.path + " is empty (0 bytes) while its WAL holds " +
                                       std::to_string(*wal) +
                                       " bytes of commits: the file was cut; every thread stored in it is affected; "
                                       "the file and its WAL were left untouched");
        // Another process may have created the database since the first look: its header page
        // is then read below; still empty, it is a new database.
        size = std::filesystem::file_size(opt.path, ec);
        if (ec || size == 0) return;
    }
    static constexpr char magic[16] = {'S', 'Q', 'L', 'i', 't', 'e', ' ', 'f',
                                       'o', 'r', 'm', 'a', 't', ' ', '3', '\0'};
    const auto read = read_file_head(opt.path, 21);
    if (!read) return; // SQLite says why it cannot open the file
    const char* head = read->data();
    const bool whole = size >= 21; // the header's bytes 16-20 are there
    if (size < 16 || std::memcmp(head, magic, sizeof magic) != 0)
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "sqlite_saver: " + opt.path +
                                   " is not a SQLite database (bad header); every thread stored in it is affected; the file was left untouched");
    // A database holds at least one page of at least 512 bytes: less is a truncated file.
    if (size < 512)
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "sqlite_saver: " + opt.path + " is truncated (" + std::to_string(size) +
                                   " bytes, shorter than one database page); every thread stored in it is affected; the file was left untouched");
    // SQLite writes whole pages only: a file that ends inside a page was cut short, and SQLite
    // would read the rest of that page as zeros, its rows silently gone. (Unless a WAL holds
    // frames: a process killed while a checkpoint extended the file leaves part of a page that
    // the WAL still has, and SQLite reads that page from the WAL.)
    // Byte 20: reserved bytes per page, 0 (no page checksums) or detail::page_reserve. Any
    // other count is a damaged header (no single flipped bit turns one into the other).
    const auto reserve = static_cast<unsigned char>(head[20]);
    if (whole && reserve != 0 && reserve != detail::page_reserve)
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "sqlite_saver: " + opt.path + " has a damaged header (" + std::to_string(reserve) +
                                   " reserved bytes per page, where stategraph writes " +
                                   std::to_string(detail::page_reserve) +
                                   " or none); every thread stored in it is affected; the file was left untouched");
    const auto raw_page = static_cast<std::uintmax_t>(static_cast<unsigned char>(head[16]) << 8 |
                                                      static_cast<unsigned char>(head[17]));
    const std::uintmax_t page = raw_page == 1 ? 65536 : raw_page;
    const auto wal = std::filesystem::file_size(opt.path + "-wal", ec);
    const bool wal_has_frames = !ec && wal > 32; // more than a WAL header
    if (whole && !wal_has_frames && page >= 512 && page <= 65536 && (page & (page - 1)) == 0 && size % page != 0)
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "sqlite_saver: " + opt.path + " is truncated (" + std::to_string(size) +
                                   " bytes, not a whole number of its " + std::to_string(page) +
                                   "-byte pages); every thread stored in it is affected; the file was left untouched");
}

void sqlite_saver::impl::check_version(std::int64_t version) const {
    if (version > sqlite_saver::schema_version)
        throw checkpoint_error(errc::schema_too_new,
                               "sqlite_saver: " + opt.path + " has schema version " + std::to_string(version) +
                                   ", newer than this stategraph knows (" +
                                   std::to_string(sqlite_saver::schema_version) +
                                   "); upgrade stategraph to open it");
    if (version < 0)
        throw checkpoint_error(errc::corrupt_checkpoint, "sqlite_saver: " + opt.path +
                                                             " has a negative schema version " +
                                                             std::to_string(version));
}

struct sqlite_saver::impl::migration {
    const char* sql;
    void (impl::*convert)() = nullptr;
    const char* finish = nullptr;
};

void sqlite_saver::impl::migrate() {
    static const migration migrations[] = {
        {migration_v1},                                                             // -> v1
        {migration_v2_create, &impl::convert_v1_checkpoints, migration_v2_swap},    // -> v2
        {migration_v3},                                                             // -> v3
        {migration_v4},                                                             // -> v4
        {migration_v5},                                                             // -> v5
        {migration_v6},                                                             // -> v6
        {migration_v7},                                                             // -> v7
        {migration_v8},                                                             // -> v8
        {migration_v9, &impl::add_pending_column},                                  // -> v9
    };
    static_assert(std::size(migrations) == sqlite_saver::schema_version,
                  "one migration per schema version: bump schema_version with the list");
    static const std::string none;
    transaction t(*this, true, none, "migrating the schema");
    // Another process may have migrated between our read and the lock: read again.
    auto version = query_int("PRAGMA user_version", "reading the schema version");
    check_version(version);
    for (auto v = version; v < sqlite_saver::schema_version; ++v) {
        const auto& m = migrations[v];
        exec(m.sql, "migrating the schema");
        if (m.convert) (this->*m.convert)();
        if (m.finish) exec(m.finish, "migrating the schema");
        exec("PRAGMA user_version = " + std::to_string(v + 1), "migrating the schema");
    }
    t.commit();
}

void sqlite_saver::impl::add_pending_column() {
    // Once: a file whose version was set back by hand (a test's way of making an older file) has it.
    if (query_int("SELECT count(*) FROM pragma_table_info('checkpoints') WHERE name = 'pending'", "migrating the schema") == 0)
        exec("ALTER TABLE checkpoints ADD COLUMN pending BLOB", "migrating the schema");
}

void sqlite_saver::impl::convert_v1_checkpoints() {
    static const std::string none;
    const char* what = "migrating the schema to version 2";
    stmt read(*this, uncached, sql_v1_checkpoints, none, what);
    stmt write(*this, uncached, sql_v2_put_checkpoint, none, what);
    std::string record;
    while (read.step()) {
        const std::string thread = read.text(0), ns = read.text(1);
        checkpoint cp = read_v1_row(read, thread, ns);
        try {
            record = codec::encode_record(cp);
        } catch (const std::exception& e) {
            corrupt(thread, ns, "checkpoint " + cp.id + " cannot be converted to schema version 2: " + e.what(),
                    {thread});
        }
        write.bind_static(1, thread).bind_static(2, ns).bind_static(3, cp.id).bind_static(4, cp.parent_id);
        write.bind(5, cp.step).bind_static(6, cp.source).bind_blob_static(7, record);
        write.run();
        write.reset();
    }
}

checkpoint sqlite_saver::impl::read_v1_row(const stmt& s, const std::string& thread, const std::string& ns) const {
    checkpoint cp;
    cp.id = s.text(2);
    cp.parent_id = s.text(3);
    cp.step = s.integer(4);
    cp.source = s.text(5);
    cp.signature = s.text(9);
    const std::string at = "cannot migrate the file to schema version 2 (it stays at version 1): checkpoint " + cp.id;
    for (int c : {6, 7, 8})
        if (s.is_null(c))
            corrupt(thread, ns, at + " has no " + (c == 6 ? "versions" : c == 7 ? "frontier" : "metadata"),
                    {thread});
    auto versions = parse(s.bytes(6), thread, ns, at + ": versions", {thread});
    if (!versions.is_object()) corrupt(thread, ns, at + ": versions is not a JSON object", {thread});
    for (const auto& [channel, version] : versions.get_object()) {
        if (!version.is_string())
            corrupt(thread, ns, at + ": versions: the version of channel " + quote(channel) + " is not a string",
                    {thread, std::string(channel)});
        cp.versions[std::string(channel)] = std::string(version.get_string());
    }
    cp.frontier = parse(s.bytes(7), thread, ns, at + ": frontier", {thread});
    auto metadata = parse(s.bytes(8), thread, ns, at + ": metadata", {thread});
    if (!metadata.is_object()) corrupt(thread, ns, at + ": metadata is not a JSON object", {thread});
    cp.metadata = std::move(metadata.get_object());
    return cp;
}

void sqlite_saver::impl::make_cipher() {
    if (opt.encryption_key.empty() && opt.encryption_key_file.empty()) return;
    const std::string at = "sqlite_saver: " + opt.path + ": ";
    if (!opt.encryption_key.empty() && !opt.encryption_key_file.empty())
        throw checkpoint_error(errc::storage_failure,
                               at + "set one of sqlite_options::encryption_key and encryption_key_file, not both");
    if (!codec::cipher::available())
        throw checkpoint_error(errc::storage_failure,
                               at + "a key was given, but this stategraph was built without libsodium "
                                    "(STATEGRAPH_WITH_SODIUM=OFF) and cannot encrypt");
    std::string text;
    std::string source = "sqlite_options::encryption_key";
    if (!opt.encryption_key_file.empty()) {
        source = "the key file " + opt.encryption_key_file;
        std::ifstream in(opt.encryption_key_file, std::ios::binary);
        if (!in)
            throw checkpoint_error(errc::storage_failure, at + "cannot read the key file " + opt.encryption_key_file);
        text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    } else {
        text.swap(opt.encryption_key);
    }
    auto wipe = [](std::string& s) {
        std::fill(s.begin(), s.end(), '\0');
        s.clear();
    };
    try {
        auto key = codec::parse_key(text, !opt.encryption_key_file.empty());
        wipe(text);
        box = std::make_unique<codec::cipher>(key);
        std::fill(key.begin(), key.end(), 0);
    } catch (const std::invalid_argument& e) {
        wipe(text);
        throw checkpoint_error(errc::storage_failure, at + source + " is not a key: " + e.what());
    } catch (const std::runtime_error& e) {
        wipe(text);
        throw checkpoint_error(errc::storage_failure, at + e.what());
    }
}

void sqlite_saver::impl::key_mismatch(const std::string& why) const {
    throw checkpoint_error(errc::key_mismatch, "sqlite_saver: " + opt.path + " " + why + "; no checkpoint was read or written");
}

std::optional<std::string> sqlite_saver::impl::read_setting(std::string_view name) {
    static const std::string none;
    stmt s(*this, sql_get_setting, none, "reading the file's settings");
    s.bind_static(1, name);
    if (!s.step()) return std::nullopt;
    return s.text(0);
}

void sqlite_saver::impl::check_encryption() {
    static const std::string none;
    auto verify = [&](const std::string& token) {
        if (!box)
            key_mismatch("is encrypted: open it with its key (sqlite_options::encryption_key or encryption_key_file)");
        bool ok = false;
        try {
            ok = box->open(token, {encryption_setting}) == encryption_check;
        } catch (const codec::corrupt&) {
        }
        if (!ok) key_mismatch("is encrypted with another key: the key given does not open it");
    };
    if (auto token = read_setting(encryption_setting)) return verify(*token);
    if (!box) return;
    auto holds_data = [&] {
        stmt s(*this, sql_holds_data, none, "reading the file's settings");
        return s.step() && s.integer(0) != 0;
    };
    const char* plain = "is not encrypted and holds checkpoints: open it without a key (a file is encrypted from its "
                        "first write on; copy its threads into a new encrypted file to encrypt them)";
    if (opt.read_only) {
        if (holds_data()) key_mismatch(plain);
        return;
    }
    transaction t(*this, true, none, "marking the file encrypted");
    if (auto token = read_setting(encryption_setting)) return verify(*token); // another process was first
    if (holds_data()) key_mismatch(plain);
    const std::string token = box->seal(encryption_check, {encryption_setting});
    {
        stmt s(*this, sql_put_setting, none, "marking the file encrypted");
        s.bind_static(1, encryption_setting).bind_blob_static(2, token);
        s.run();
    }
    t.commit();
}

} // namespace stategraph::checkpoint
