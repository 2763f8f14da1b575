// The memory store's errors (memory_category, memory_error), its schema and migrations, and
// opening a file: the connection, migrate, moving the facts of schema versions 1 and 2 onto the
// Store, the constructor and accessors. Dates: memory_store_dates.cpp; contacts and the demo
// seed: memory_store_contacts.cpp; facts: memory_store_facts.cpp; messages:
// memory_store_messages.cpp.

#include "memory_store_internal.hpp"

#include <algorithm>
#include <array>

namespace global_supervisor {

using namespace memory_detail;

// ---------------------------------------------------------------------------------------------
// errors

namespace {

class memory_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "global_supervisor.memory"; }
    std::string message(int ev) const override
    {
        switch (static_cast<memory_errc>(ev)) {
        case memory_errc::open_failed: return "database could not be opened";
        case memory_errc::schema_too_new: return "database schema is newer than supported";
        case memory_errc::constraint_failed: return "constraint failed";
        case memory_errc::io_failed: return "I/O failure";
        case memory_errc::read_only: return "database is read-only";
        case memory_errc::busy: return "database is locked";
        case memory_errc::invalid_argument: return "invalid argument";
        case memory_errc::sqlite_failure: return "SQLite error";
        }
        return "unknown memory error";
    }
};

std::string format_what(std::string_view operation, std::string_view detail,
                        const std::filesystem::path& path, int sqlite_code)
{
    std::string s = "memory_store: ";
    s.append(operation);
    s += ": ";
    s.append(detail);
    if (sqlite_code != 0) {
        s += " [sqlite code ";
        s += std::to_string(sqlite_code);
        s += ']';
    }
    s += " (file: ";
    s += path.string();
    s += ')';
    return s;
}

}  // namespace

namespace memory_detail {

/// Maps an (extended) SQLite result code to the error condition.
memory_errc errc_from_sqlite(int rc) noexcept
{
    switch (rc & 0xff) {
    case SQLITE_CONSTRAINT: return memory_errc::constraint_failed;
    case SQLITE_READONLY: return memory_errc::read_only;
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return memory_errc::busy;
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL: return memory_errc::io_failed;
    default: return memory_errc::sqlite_failure;
    }
}

}  // namespace memory_detail

const std::error_category& memory_category() noexcept
{
    static const memory_category_impl instance;
    return instance;
}

std::error_code make_error_code(memory_errc e) noexcept
{
    return {static_cast<int>(e), memory_category()};
}

memory_error::memory_error(memory_errc code, std::string_view operation, std::string_view detail,
                           std::filesystem::path path, int sqlite_code)
    : std::runtime_error(format_what(operation, detail, path, sqlite_code)),
      code_(code),
      sqlite_code_(sqlite_code),
      path_(std::move(path))
{
}

// ---------------------------------------------------------------------------------------------
// schema and migrations

namespace {

constexpr const char* schema_v1 = R"sql(
CREATE TABLE contacts (
    id         INTEGER PRIMARY KEY,
    user_id    TEXT NOT NULL CHECK (length(user_id) > 0),
    name       TEXT NOT NULL CHECK (length(name) > 0),
    full_name  TEXT NOT NULL,
    relation   TEXT NOT NULL DEFAULT '',
    notes      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX contacts_user_name ON contacts (user_id, name COLLATE NOCASE);
CREATE TABLE facts (
    id         INTEGER PRIMARY KEY,
    user_id    TEXT NOT NULL CHECK (length(user_id) > 0),
    contact_id INTEGER NULL REFERENCES contacts (id) ON DELETE CASCADE,
    text       TEXT NOT NULL CHECK (length(text) > 0),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    event_date TEXT NULL CHECK (event_date IS NULL OR
                                event_date GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*')
);
CREATE INDEX facts_user_event ON facts (user_id, event_date) WHERE event_date IS NOT NULL;
CREATE INDEX facts_contact ON facts (contact_id);
CREATE TABLE messages (
    id         INTEGER PRIMARY KEY,
    chat_id    TEXT NOT NULL CHECK (length(chat_id) > 0),
    role       TEXT NOT NULL CHECK (length(role) > 0),
    content    TEXT NOT NULL,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    seq        INTEGER NOT NULL,
    UNIQUE (chat_id, seq)
);
)sql";

// External-content FTS5 index over facts.text, kept in sync by triggers.
constexpr const char* schema_v2 = R"sql(
CREATE VIRTUAL TABLE facts_fts USING fts5(
    text, content = 'facts', content_rowid = 'id',
    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TRIGGER facts_fts_ai AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER facts_fts_ad AFTER DELETE ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER facts_fts_au AFTER UPDATE OF text ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO facts_fts (rowid, text) VALUES (new.id, new.text);
END;
INSERT INTO facts_fts (facts_fts) VALUES ('rebuild');
)sql";

// Facts move onto the long-term memory Store (stategraph::store::sqlite_store, same file): the
// text, dates and contact of each fact are a Store item in ("users", user_id, "facts"); this
// table keeps only the ids, so that ids stay unique and a fact's contact must exist. The rows of
// `facts` (versions 1 and 2) are moved to the Store when the file is opened (move_facts_to_store).
constexpr const char* schema_v3 = R"sql(
CREATE TABLE fact_ids (
    id         INTEGER PRIMARY KEY,
    user_id    TEXT NOT NULL CHECK (length(user_id) > 0),
    contact_id INTEGER NULL REFERENCES contacts (id) ON DELETE CASCADE
);
)sql";

/// migrations[i] brings the schema from version i to i + 1.
constexpr std::array<const char*, memory_store::schema_version> migrations = {schema_v1,
                                                                              schema_v2,
                                                                              schema_v3};

constexpr const char* fact_columns = "id, user_id, contact_id, text, created_at, event_date";

fact read_fact(const statement& st)
{
    fact f;
    f.id = st.integer(0);
    f.user_id = st.text(1);
    f.contact_id = st.opt_integer(2);
    f.text = st.text(3);
    f.created_at = st.text(4);
    f.event_date = st.opt_text(5);
    return f;
}

int read_user_version(detail::connection& s, std::string_view operation)
{
    statement st(s, "PRAGMA user_version", operation);
    return st.step() ? static_cast<int>(st.integer(0)) : 0;
}

/// Brings the schema to memory_store::schema_version, one migration per transaction.
void migrate(detail::connection& s, bool read_only)
{
    constexpr std::string_view op = "migrate schema";
    int version = read_user_version(s, op);
    if (version > memory_store::schema_version)
        throw memory_error(memory_errc::schema_too_new, op,
                           "file has schema version " + std::to_string(version) +
                               ", this build supports up to " +
                               std::to_string(memory_store::schema_version),
                           s.path);
    if (version == memory_store::schema_version) return;
    if (read_only)
        throw memory_error(memory_errc::open_failed, op,
                           "file has schema version " + std::to_string(version) +
                               " and needs a migration, but it is opened read-only",
                           s.path);
    while (version < memory_store::schema_version) {
        transaction tx(s, op);
        // Re-read under the write lock: another connection may have migrated meanwhile.
        version = read_user_version(s, op);
        if (version >= memory_store::schema_version) break;
        s.exec(migrations[static_cast<std::size_t>(version)], op);
        ++version;
        // PRAGMA arguments cannot be bound; the value is our own integer.
        s.exec(("PRAGMA user_version = " + std::to_string(version)).c_str(), op);
        tx.commit();
    }
}

/// Moves the rows of the version-1/2 `facts` table (if the file still has it) to the Store,
/// keeping their ids, then drops it. Idempotent: a crash before the drop copies them again.
void move_facts_to_store(detail::connection& s, sgs::base_store& store)
{
    constexpr std::string_view op = "move facts to the store";
    {
        statement has(s, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'facts'", op);
        if (!has.step() || has.integer(0) == 0) return;
    }
    std::vector<fact> old;
    {
        statement st(s, std::string("SELECT ") + fact_columns + " FROM facts ORDER BY id", op);
        while (st.step()) old.push_back(read_fact(st));
    }
    for (const auto& f : old)
        run_store(store.put(facts_namespace(f.user_id), std::to_string(f.id), fact_to_json(f)), op, s.path);
    transaction tx(s, op);
    for (const auto& f : old) {
        statement ins(s, "INSERT OR IGNORE INTO fact_ids (id, user_id, contact_id) VALUES (?1, ?2, ?3)", op);
        ins.bind(1, f.id).bind(2, std::string_view(f.user_id)).bind(3, f.contact_id).run();
    }
    s.exec("DROP TRIGGER IF EXISTS facts_fts_ai; DROP TRIGGER IF EXISTS facts_fts_ad; "
           "DROP TRIGGER IF EXISTS facts_fts_au; DROP TABLE IF EXISTS facts_fts; DROP TABLE facts;",
           op);
    tx.commit();
    for (auto it = s.cache.begin(); it != s.cache.end();) { // statements on the dropped tables
        if (it->first.find("facts") != std::string::npos && it->first.find("fact_ids") == std::string::npos) {
            sqlite3_finalize(it->second);
            it = s.cache.erase(it);
        } else {
            ++it;
        }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// memory_store

memory_store::memory_store(const std::filesystem::path& path, memory_options options)
    : impl_(std::make_unique<impl>())
{
    impl_->path = path;
    const bool read_only = options.mode == open_mode::read_only;
    int flags = SQLITE_OPEN_NOMUTEX;
    switch (options.mode) {
    case open_mode::read_write_create: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE; break;
    case open_mode::read_write: flags |= SQLITE_OPEN_READWRITE; break;
    case open_mode::read_only: flags |= SQLITE_OPEN_READONLY; break;
    }
    const std::string file = path.string();
    int rc = sqlite3_open_v2(file.c_str(), &impl_->db, flags, nullptr);
    if (rc != SQLITE_OK) {
        const std::string msg = impl_->db ? sqlite3_errmsg(impl_->db) : sqlite3_errstr(rc);
        throw memory_error(memory_errc::open_failed, "open", msg, path, rc);
    }
    sqlite3_extended_result_codes(impl_->db, 1);
    sqlite3_busy_timeout(impl_->db, static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(
                                         options.busy_timeout.count(), 0, 1 << 30)));

    // SQLite opens lazily: the first statements are where a corrupt or foreign file shows up.
    // Every failure up to here is reported as open_failed (with the SQLite code).
    try {
        if (!read_only) {
            statement wal(*impl_, "PRAGMA journal_mode = WAL", "open");
            wal.run();
            impl_->exec("PRAGMA synchronous = NORMAL", "open");
        }
        impl_->exec("PRAGMA foreign_keys = ON", "open");
        (void)read_user_version(*impl_, "open");
    } catch (const memory_error& e) {
        throw memory_error(memory_errc::open_failed, "open",
                           impl_->db ? sqlite3_errmsg(impl_->db) : e.what(), path, e.sqlite_code());
    }
    migrate(*impl_, read_only);
    impl_->read_only = read_only;
    try {
        sgs::sqlite_store_options o;
        o.path = path.string();
        o.read_only = read_only;
        o.busy_timeout = options.busy_timeout;
        o.tokenizer = "porter unicode61 remove_diacritics 2"; // English stemming, accents folded
        o.store.refresh_on_read = false;
        o.store.index_fields = {"text"};
        impl_->items = std::make_unique<sgs::sqlite_store>(std::move(o));
    } catch (const sgs::store_error& e) {
        throw memory_error(e.kind() == sgs::store_errc::schema_too_new ? memory_errc::schema_too_new
                                                                       : memory_errc::open_failed,
                           "open", e.what(), path);
    }
    if (!read_only) move_facts_to_store(*impl_, *impl_->items);
}

memory_store::~memory_store() = default;
memory_store::memory_store(memory_store&&) noexcept = default;
memory_store& memory_store::operator=(memory_store&&) noexcept = default;

const std::filesystem::path& memory_store::path() const noexcept { return impl_->path; }

int memory_store::user_version() const { return read_user_version(*impl_, "user_version"); }

}  // namespace global_supervisor
