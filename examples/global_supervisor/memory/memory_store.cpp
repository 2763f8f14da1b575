#include "memory/memory_store.hpp"

#include <stategraph/store/sqlite_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <tuple>
#include <cstdio>
#include <unordered_map>
#include <utility>

namespace global_supervisor {

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

}  // namespace

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
// dates

namespace {

/// Parses the leading "YYYY-MM-DD" of @p s; anything after must start with 'T' or ' '.
std::optional<std::chrono::year_month_day> parse_iso_date(std::string_view s)
{
    auto digits = [&](std::size_t pos, std::size_t n, int& out) {
        out = 0;
        for (std::size_t i = pos; i < pos + n; ++i) {
            if (s[i] < '0' || s[i] > '9') return false;
            out = out * 10 + (s[i] - '0');
        }
        return true;
    };
    if (s.size() < 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
    if (s.size() > 10 && s[10] != 'T' && s[10] != ' ') return std::nullopt;
    int y = 0, m = 0, d = 0;
    if (!digits(0, 4, y) || !digits(5, 2, m) || !digits(8, 2, d)) return std::nullopt;
    const std::chrono::year_month_day ymd{std::chrono::year{y},
                                          std::chrono::month{static_cast<unsigned>(m)},
                                          std::chrono::day{static_cast<unsigned>(d)}};
    if (!ymd.ok()) return std::nullopt;
    return ymd;
}

std::string format_iso_date(std::chrono::year_month_day ymd)
{
    std::array<char, 16> buf{};
    std::snprintf(buf.data(), buf.size(), "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
    return buf.data();
}

std::string_view trim(std::string_view s)
{
    constexpr std::string_view ws = " \t\r\n";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

std::chrono::year_month_day require_date(std::string_view s, std::string_view operation,
                                         const std::filesystem::path& path)
{
    auto ymd = parse_iso_date(trim(s));
    if (!ymd)
        throw memory_error(memory_errc::invalid_argument, operation,
                           "not an ISO date (YYYY-MM-DD): '" + std::string(s) + "'", path);
    return *ymd;
}

}  // namespace

std::string today_iso_date()
{
    const auto today = std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now());
    return format_iso_date(std::chrono::year_month_day{today});
}

std::string add_days(std::string_view iso_date, int days)
{
    const auto ymd = require_date(iso_date, "add_days", {});
    return format_iso_date(
        std::chrono::year_month_day{std::chrono::sys_days{ymd} + std::chrono::days{days}});
}

// ---------------------------------------------------------------------------------------------
// FTS query sanitizing

namespace {

bool is_word_byte(unsigned char c) noexcept
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool is_stopword(std::string_view w) noexcept
{
    // Sorted; binary-searched.
    static constexpr std::array<std::string_view, 88> words = {
        "about", "after", "all",   "also",  "am",    "an",    "and",   "any",   "are",  "as",
        "at",    "be",    "been",  "but",   "by",    "can",   "could", "did",   "do",   "does",
        "for",   "from",  "get",   "got",   "had",   "has",   "have",  "he",    "her",  "hers",
        "him",   "his",   "how",   "if",    "in",    "into",  "is",    "it",    "its",  "just",
        "know",  "me",    "my",    "no",    "not",   "now",   "of",    "on",    "or",   "our",
        "please", "she",  "should", "so",   "some",  "tell",  "than",  "that",  "the",  "their",
        "them",  "then",  "there", "these", "they",  "this",  "those", "to",    "up",   "us",
        "was",   "we",    "were",  "what",  "when",  "where", "which", "who",   "whom", "why",
        "will",  "with",  "would", "you",   "your",  "yours", "near",  "nor"};
    static const auto sorted = [] {
        auto copy = words;
        std::sort(copy.begin(), copy.end());
        return copy;
    }();
    return std::binary_search(sorted.begin(), sorted.end(), w);
}

}  // namespace

std::string fts_query(std::string_view text)
{
    constexpr std::size_t max_terms = 16;
    std::vector<std::string> terms;
    std::size_t i = 0;
    while (i < text.size() && terms.size() < max_terms) {
        while (i < text.size() && !is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
        const std::size_t start = i;
        while (i < text.size() && is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
        if (i == start) break;
        std::string w(text.substr(start, i - start));
        for (auto& c : w)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (w.size() < 2 || is_stopword(w)) continue;
        if (std::find(terms.begin(), terms.end(), w) != terms.end()) continue;
        terms.push_back(std::move(w));
    }
    std::string q;
    for (const auto& t : terms) {
        if (!q.empty()) q += " OR ";
        // Terms never contain '"' (only letters, digits and bytes >= 0x80), so quoting is safe.
        q += '"';
        q += t;
        q += '"';
    }
    return q;
}

// ---------------------------------------------------------------------------------------------
// implementation

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

}  // namespace

namespace detail {

/// The connection state behind memory_store::impl (a named type, usable by the helpers below).
struct connection {
    sqlite3* db = nullptr;
    std::filesystem::path path;
    std::unordered_map<std::string, sqlite3_stmt*> cache;

    connection() = default;
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;
    ~connection()
    {
        for (auto& [sql, stmt] : cache) sqlite3_finalize(stmt);
        if (db) sqlite3_close_v2(db);
    }

    [[noreturn]] void fail(std::string_view operation, int rc) const
    {
        std::string detail = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
        // "disk I/O error" says nothing of the cause: the system's error does (a full disk).
        const int sys = db ? sqlite3_system_errno(db) : 0;
        if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_FULL) && sys != 0)
            detail += " (" + std::generic_category().message(sys) + ")";
        throw memory_error(errc_from_sqlite(rc), operation, detail, path, rc);
    }

    /// Runs constant SQL (schema, pragmas, transaction control). Never used with user data.
    void exec(const char* sql, std::string_view operation)
    {
        const int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
        if (rc != SQLITE_OK) fail(operation, rc);
    }

    sqlite3_stmt* prepare(const std::string& sql, std::string_view operation)
    {
        if (auto it = cache.find(sql); it != cache.end()) return it->second;
        sqlite3_stmt* stmt = nullptr;
        const int rc = sqlite3_prepare_v3(db, sql.c_str(), static_cast<int>(sql.size() + 1),
                                          SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
        if (rc != SQLITE_OK) fail(operation, rc);
        cache.emplace(sql, stmt);
        return stmt;
    }
};

}  // namespace detail

struct memory_store::impl : detail::connection {
    /// The Store holding the facts (its own connection to the same file).
    std::unique_ptr<stategraph::store::sqlite_store> items;
    bool read_only = false;
};

namespace {

/// A cached prepared statement in use; resets it and clears its bindings when done.
class statement {
public:
    statement(detail::connection& s, const std::string& sql, std::string_view operation)
        : s_(s), h_(s.prepare(sql, operation)), op_(operation)
    {
    }
    ~statement()
    {
        sqlite3_reset(h_);
        sqlite3_clear_bindings(h_);
    }
    statement(const statement&) = delete;
    statement& operator=(const statement&) = delete;

    statement& bind(int i, std::string_view v)
    {
        // A null data pointer would bind SQL NULL; an empty view must bind ''.
        const char* p = v.data() ? v.data() : "";
        check(sqlite3_bind_text64(h_, i, p, v.size(), SQLITE_TRANSIENT, SQLITE_UTF8));
        return *this;
    }
    statement& bind(int i, std::int64_t v)
    {
        check(sqlite3_bind_int64(h_, i, v));
        return *this;
    }
    statement& bind(int i, std::optional<std::int64_t> v)
    {
        return v ? bind(i, *v) : bind_null(i);
    }
    statement& bind(int i, std::optional<std::string_view> v)
    {
        return v ? bind(i, *v) : bind_null(i);
    }
    statement& bind_null(int i)
    {
        check(sqlite3_bind_null(h_, i));
        return *this;
    }

    /// @return true when a row is available, false when done.
    bool step()
    {
        const int rc = sqlite3_step(h_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        s_.fail(op_, rc);
    }
    void run()
    {
        while (step()) {
        }
    }

    std::int64_t integer(int col) const { return sqlite3_column_int64(h_, col); }
    double real(int col) const { return sqlite3_column_double(h_, col); }
    bool is_null(int col) const { return sqlite3_column_type(h_, col) == SQLITE_NULL; }
    std::string text(int col) const
    {
        const auto* p = sqlite3_column_text(h_, col);
        const int n = sqlite3_column_bytes(h_, col);
        return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n))
                 : std::string();
    }
    std::optional<std::int64_t> opt_integer(int col) const
    {
        if (is_null(col)) return std::nullopt;
        return integer(col);
    }
    std::optional<std::string> opt_text(int col) const
    {
        if (is_null(col)) return std::nullopt;
        return text(col);
    }

private:
    void check(int rc)
    {
        if (rc != SQLITE_OK) s_.fail(op_, rc);
    }

    detail::connection& s_;
    sqlite3_stmt* h_;
    std::string_view op_;
};

/// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted.
class transaction {
public:
    transaction(detail::connection& s, std::string_view operation) : s_(s), op_(operation)
    {
        s_.exec("BEGIN IMMEDIATE", op_);
    }
    ~transaction()
    {
        if (!done_) sqlite3_exec(s_.db, "ROLLBACK", nullptr, nullptr, nullptr);
    }
    transaction(const transaction&) = delete;
    transaction& operator=(const transaction&) = delete;

    void commit()
    {
        s_.exec("COMMIT", op_);
        done_ = true;
    }

private:
    detail::connection& s_;
    std::string_view op_;
    bool done_ = false;
};

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

contact read_contact(const statement& st)
{
    contact c;
    c.id = st.integer(0);
    c.user_id = st.text(1);
    c.name = st.text(2);
    c.full_name = st.text(3);
    c.relation = st.text(4);
    c.notes = st.text(5);
    return c;
}

chat_message read_message(const statement& st)
{
    chat_message m;
    m.id = st.integer(0);
    m.chat_id = st.text(1);
    m.role = st.text(2);
    m.content = st.text(3);
    m.created_at = st.text(4);
    m.seq = st.integer(5);
    return m;
}

std::int64_t clamp_limit(std::size_t limit)
{
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::min(limit, max));
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


// --- facts on the Store ------------------------------------------------------------------------

namespace sgs = stategraph::store;
namespace json = boost::json;

/// Runs one Store call to completion (the SQLite store works in place: no thread hop) and
/// reports its failures as memory_error.
template <class T>
T run_store(boost::asio::awaitable<T> work, std::string_view op, const std::filesystem::path& path)
{
    try {
        boost::asio::io_context io;
        auto f = boost::asio::co_spawn(io, std::move(work), boost::asio::use_future);
        io.run();
        return f.get();
    } catch (const sgs::store_error& e) {
        const std::string what = e.what();
        memory_errc code = memory_errc::sqlite_failure;
        switch (e.kind()) {
        case sgs::store_errc::storage_failure:
            code = what.find("readonly") != std::string::npos ? memory_errc::read_only
                   : what.find("locked") != std::string::npos ? memory_errc::busy
                                                              : memory_errc::sqlite_failure;
            break;
        case sgs::store_errc::corrupt_item: code = memory_errc::io_failed; break;
        case sgs::store_errc::schema_too_new: code = memory_errc::schema_too_new; break;
        default: code = memory_errc::invalid_argument; break;
        }
        throw memory_error(code, op, what, path);
    }
}

/// A user id as one namespace label ('.' separates labels): '%' and '.' are escaped.
std::string label_of(std::string_view user_id)
{
    std::string out;
    for (char c : user_id) out += c == '%' ? std::string("%25") : c == '.' ? std::string("%2E") : std::string(1, c);
    return out;
}

sgs::namespace_path facts_namespace(std::string_view user_id)
{
    return {"users", label_of(user_id), "facts"};
}

json::object fact_to_json(const fact& f)
{
    json::object o;
    o["id"] = f.id;
    o["user_id"] = f.user_id;
    o["contact_id"] = f.contact_id ? json::value(*f.contact_id) : json::value(nullptr);
    o["text"] = f.text;
    o["created_at"] = f.created_at;
    o["event_date"] = f.event_date ? json::value(*f.event_date) : json::value(nullptr);
    return o;
}

fact fact_from_item(const sgs::item& it, const std::filesystem::path& path)
{
    try {
        const auto& v = it.value;
        fact f;
        f.id = v.at("id").to_number<std::int64_t>();
        f.user_id = json::value_to<std::string>(v.at("user_id"));
        if (!v.at("contact_id").is_null()) f.contact_id = v.at("contact_id").to_number<std::int64_t>();
        f.text = json::value_to<std::string>(v.at("text"));
        f.created_at = json::value_to<std::string>(v.at("created_at"));
        if (!v.at("event_date").is_null()) f.event_date = json::value_to<std::string>(v.at("event_date"));
        return f;
    } catch (const std::exception& e) {
        throw memory_error(memory_errc::io_failed, "read fact",
                           "the Store item " + sgs::to_string(it.ns) + "/" + it.key + " is not a fact: " + e.what(),
                           path);
    }
}

/// UTC now as "YYYY-MM-DDTHH:MM:SS.sssZ" (as the SQL default strftime('%Y-%m-%dT%H:%M:%fZ')).
std::string now_iso()
{
    const auto now = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
    const auto day = std::chrono::floor<std::chrono::days>(now);
    const std::chrono::hh_mm_ss<std::chrono::milliseconds> t{now - day};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%sT%02d:%02d:%02d.%03dZ",
                  format_iso_date(std::chrono::year_month_day{day}).c_str(), static_cast<int>(t.hours().count()),
                  static_cast<int>(t.minutes().count()), static_cast<int>(t.seconds().count()),
                  static_cast<int>(t.subseconds().count()));
    return buf;
}

/// Every fact in `prefix` matching `filter`.
std::vector<fact> facts_where(sgs::base_store& store, const sgs::namespace_path& prefix, const json::object& filter,
                              std::string_view op, const std::filesystem::path& path)
{
    auto items = run_store(store.search(prefix, {.filter = filter, .limit = std::size_t{1} << 30}), op, path);
    std::vector<fact> out;
    for (const auto& it : items) out.push_back(fact_from_item(it, path));
    return out;
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

// --- contacts ---------------------------------------------------------------------------------

namespace {

struct demo_contact {
    std::string_view name, full_name, relation, notes;
};
struct demo_fact {
    std::string_view contact_full_name;  // empty: about the user
    std::string_view text;
    std::optional<int> days_from_today;
};

constexpr std::array<demo_contact, 4> demo_contacts = {{
    {"Thomas", "Thomas Anderson", "colleague", "Works with the user at the Zurich office"},
    {"Thomas", "Thomas Berger", "brother-in-law", "Married to the user's sister Lena"},
    {"Anna", "Anna Keller", "friend", "Friend from university"},
    {"Marco", "Marco Rossi", "friend", "Neighbour, plays tennis with the user"},
}};

const std::array<demo_fact, 8> demo_facts = {{
    {"Anna Keller", "Anna likes Italian food", std::nullopt},
    {"Anna Keller", "Anna's birthday party", 10},
    {"Marco Rossi", "Marco is a vegetarian", std::nullopt},
    {"Marco Rossi", "Marco was in Rome for a conference", -5},
    {"Thomas Anderson", "Thomas Anderson works on the Zurich project", std::nullopt},
    {"Thomas Berger", "Thomas Berger loves sailing on Lake Constance", std::nullopt},
    {"", "Dentist appointment with Dr. Meier", 3},
    {"", "The user prefers window seats on flights", std::nullopt},
}};

}  // namespace

std::size_t memory_store::seed_demo(std::string_view user_id, std::string_view today_date)
{
    constexpr std::string_view op = "seed_demo";
    auto& s = *impl_;
    transaction tx(s, op);
    std::size_t inserted = 0;
    std::unordered_map<std::string_view, std::int64_t> ids;
    for (const auto& c : demo_contacts) {
        {
            statement st(s,
                         "INSERT INTO contacts (user_id, name, full_name, relation, notes) "
                         "SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS "
                         "(SELECT 1 FROM contacts WHERE user_id = ?1 AND full_name = ?3)",
                         op);
            st.bind(1, user_id).bind(2, c.name).bind(3, c.full_name).bind(4, c.relation)
                .bind(5, c.notes).run();
            inserted += static_cast<std::size_t>(sqlite3_changes(s.db));
        }
        statement q(s, "SELECT id FROM contacts WHERE user_id = ?1 AND full_name = ?2 "
                       "ORDER BY id LIMIT 1", op);
        q.bind(1, user_id).bind(2, c.full_name);
        if (q.step()) ids[c.full_name] = q.integer(0);
    }
    tx.commit();
    const std::string today = today_date.empty() ? today_iso_date() : std::string(today_date);
    for (const auto& f : demo_facts) {
        std::optional<std::int64_t> contact_id;
        if (!f.contact_full_name.empty()) contact_id = ids.at(f.contact_full_name);
        std::optional<std::string> date;
        if (f.days_from_today) date = add_days(today, *f.days_from_today);
        const json::object same{{"text", f.text}};
        if (!facts_where(*s.items, facts_namespace(user_id), same, op, s.path).empty()) continue;
        add_fact(user_id, contact_id, f.text, date ? std::optional<std::string_view>(*date) : std::nullopt);
        ++inserted;
    }
    return inserted;
}

std::int64_t memory_store::add_contact(std::string_view user_id, std::string_view name,
                                       std::string_view full_name, std::string_view relation,
                                       std::string_view notes)
{
    statement st(*impl_,
                 "INSERT INTO contacts (user_id, name, full_name, relation, notes) "
                 "VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                 "add_contact");
    st.bind(1, user_id).bind(2, trim(name)).bind(3, trim(full_name)).bind(4, relation)
        .bind(5, notes);
    const std::int64_t id = st.step() ? st.integer(0) : 0;
    st.run();
    return id;
}

std::optional<contact> memory_store::get_contact(std::int64_t contact_id) const
{
    statement st(*impl_,
                 "SELECT id, user_id, name, full_name, relation, notes FROM contacts "
                 "WHERE id = ?1",
                 "get_contact");
    st.bind(1, contact_id);
    if (!st.step()) return std::nullopt;
    return read_contact(st);
}

std::vector<contact> memory_store::find_contacts_by_name(std::string_view user_id,
                                                         std::string_view first_name) const
{
    first_name = trim(first_name);
    std::vector<contact> out;
    if (first_name.empty()) return out;
    statement st(*impl_,
                 "SELECT id, user_id, name, full_name, relation, notes FROM contacts "
                 "WHERE user_id = ?1 AND (name = ?2 COLLATE NOCASE OR "
                 "  (CASE WHEN instr(full_name, ' ') > 0 "
                 "        THEN substr(full_name, 1, instr(full_name, ' ') - 1) "
                 "        ELSE full_name END) = ?2 COLLATE NOCASE) "
                 "ORDER BY id",
                 "find_contacts_by_name");
    st.bind(1, user_id).bind(2, first_name);
    while (st.step()) out.push_back(read_contact(st));
    return out;
}

std::vector<std::string> memory_store::contact_first_names(std::string_view user_id) const
{
    statement st(*impl_,
                 "SELECT name FROM contacts WHERE user_id = ?1 "
                 "GROUP BY name COLLATE NOCASE ORDER BY min(id)",
                 "contact_first_names");
    st.bind(1, user_id);
    std::vector<std::string> out;
    while (st.step()) out.push_back(st.text(0));
    return out;
}

// --- facts ------------------------------------------------------------------------------------
// Each fact is a Store item ("users", user_id, "facts") / "<id>"; see schema_v3.

std::int64_t memory_store::add_fact(std::string_view user_id,
                                    std::optional<std::int64_t> contact_id, std::string_view text,
                                    std::optional<std::string_view> event_date)
{
    constexpr std::string_view op = "add_fact";
    if (event_date) {
        event_date = trim(*event_date);
        (void)require_date(*event_date, op, impl_->path);
    }
    text = trim(text);
    std::int64_t id = 0;
    {
        statement st(*impl_, "INSERT INTO fact_ids (user_id, contact_id) VALUES (?1, ?2) RETURNING id", op);
        st.bind(1, user_id).bind(2, contact_id);
        id = st.step() ? st.integer(0) : 0;
        st.run();
    }
    auto forget_id = [&] {
        statement del(*impl_, "DELETE FROM fact_ids WHERE id = ?1", op);
        del.bind(1, id).run();
    };
    if (text.empty()) {
        forget_id();
        throw memory_error(memory_errc::constraint_failed, op, "CHECK constraint failed: a fact's text is empty",
                           impl_->path);
    }
    const fact f{id, std::string(user_id), contact_id, std::string(text), now_iso(),
                 event_date ? std::optional<std::string>(*event_date) : std::nullopt};
    try {
        run_store(impl_->items->put(facts_namespace(user_id), std::to_string(id), fact_to_json(f)), op, impl_->path);
    } catch (...) {
        forget_id();
        throw;
    }
    return id;
}

std::vector<fact> memory_store::facts_for_contact(std::int64_t contact_id) const
{
    const sgs::namespace_path users{"users"};
    const json::object about{{"contact_id", contact_id}};
    auto out = facts_where(*impl_->items, users, about, "facts_for_contact", impl_->path);
    std::sort(out.begin(), out.end(), [](const fact& a, const fact& b) { return a.id < b.id; });
    return out;
}

std::vector<fact_hit> memory_store::search_facts(std::string_view user_id, std::string_view query,
                                                 std::size_t limit) const
{
    std::vector<fact_hit> out;
    const std::string match = fts_query(query);
    if (match.empty() || limit == 0) return out;
    // The keywords of fts_query, without its quotes and ORs (the Store matches any of them).
    std::string words;
    for (std::size_t i = 0; i < match.size(); ++i) {
        if (match.compare(i, 4, " OR ") == 0) {
            words += ' ';
            i += 3;
        } else {
            words += match[i] == '"' ? ' ' : match[i];
        }
    }
    auto items = run_store(impl_->items->search(facts_namespace(user_id), {.query = words, .limit = limit}),
                           "search_facts", impl_->path);
    for (const auto& it : items) out.push_back({fact_from_item(it, impl_->path), -it.score.value_or(0.0)});
    return out;
}

std::vector<fact> memory_store::facts_between(std::string_view user_id, std::string_view from_date,
                                              std::string_view to_date) const
{
    constexpr std::string_view op = "facts_between";
    const auto from = require_date(from_date, op, impl_->path);
    const auto to = require_date(to_date, op, impl_->path);
    if (std::chrono::sys_days{to} < std::chrono::sys_days{from}) return {};
    const std::string lo = format_iso_date(from);
    // Exclusive upper bound: also matches "YYYY-MM-DDTHH:MM" values on to_date.
    const std::string hi =
        format_iso_date(std::chrono::year_month_day{std::chrono::sys_days{to} + std::chrono::days{1}});
    const json::object within{{"event_date", json::object{{"$gte", lo}, {"$lt", hi}}}};
    auto out = facts_where(*impl_->items, facts_namespace(user_id), within, op, impl_->path);
    std::sort(out.begin(), out.end(), [](const fact& a, const fact& b) {
        return std::tie(*a.event_date, a.id) < std::tie(*b.event_date, b.id);
    });
    return out;
}

std::vector<fact> memory_store::upcoming_facts(std::string_view user_id, std::string_view today,
                                               int days) const
{
    const auto from = require_date(today, "upcoming_facts", impl_->path);
    if (days < 0) return {};
    return facts_between(user_id, format_iso_date(from),
                         add_days(format_iso_date(from), days));
}

// --- messages ---------------------------------------------------------------------------------

chat_message memory_store::append_message(std::string_view chat_id, std::string_view role,
                                          std::string_view content)
{
    // One statement: the write lock is taken before MAX(seq) is read, so seq is race-free.
    statement st(*impl_,
                 "INSERT INTO messages (chat_id, role, content, seq) VALUES (?1, ?2, ?3, "
                 "  COALESCE((SELECT MAX(seq) FROM messages WHERE chat_id = ?1), 0) + 1) "
                 "RETURNING id, chat_id, role, content, created_at, seq",
                 "append_message");
    st.bind(1, chat_id).bind(2, role).bind(3, content);
    chat_message m;
    if (st.step()) m = read_message(st);
    st.run();
    return m;
}

std::vector<chat_message> memory_store::append_turn_messages(std::string_view chat_id,
                                                            std::size_t base,
                                                            const std::vector<message_text>& messages)
{
    constexpr std::string_view op = "append_turn_messages";
    // BEGIN IMMEDIATE takes the write lock first: no other connection can append between the
    // count and the inserts, and a failure or a kill before COMMIT leaves none of them.
    transaction tx(*impl_, op);
    const std::size_t count = count_messages(chat_id);
    const std::size_t stored = count > base ? count - base : 0;
    std::vector<chat_message> appended;
    for (std::size_t i = stored; i < messages.size(); ++i)
        appended.push_back(append_message(chat_id, messages[i].role, messages[i].content));
    if (appended.empty()) return appended;  // rolled back: nothing was written
    tx.commit();
    return appended;
}

std::vector<chat_message> memory_store::load_messages(std::string_view chat_id,
                                                      std::size_t limit) const
{
    std::vector<chat_message> out;
    if (limit == 0) return out;
    statement st(*impl_,
                 "SELECT id, chat_id, role, content, created_at, seq FROM "
                 "(SELECT * FROM messages WHERE chat_id = ?1 ORDER BY seq DESC LIMIT ?2) "
                 "ORDER BY seq",
                 "load_messages");
    st.bind(1, chat_id).bind(2, clamp_limit(limit));
    while (st.step()) out.push_back(read_message(st));
    return out;
}

std::size_t memory_store::count_messages(std::string_view chat_id) const
{
    statement st(*impl_, "SELECT count(*) FROM messages WHERE chat_id = ?1", "count_messages");
    st.bind(1, chat_id);
    return st.step() ? static_cast<std::size_t>(st.integer(0)) : 0;
}

std::size_t memory_store::replace_messages_with_summary(std::string_view chat_id,
                                                        std::string_view summary,
                                                        std::size_t keep_last_n)
{
    constexpr std::string_view op = "replace_messages_with_summary";
    auto& s = *impl_;
    transaction tx(s, op);
    const std::size_t total = count_messages(chat_id);
    if (total <= keep_last_n) return 0;  // rolled back: nothing was written
    const std::size_t remove = total - keep_last_n;

    std::int64_t last_removed_seq = 0;
    {
        statement st(s,
                     "SELECT seq FROM messages WHERE chat_id = ?1 ORDER BY seq "
                     "LIMIT 1 OFFSET ?2",
                     op);
        st.bind(1, chat_id).bind(2, static_cast<std::int64_t>(remove - 1));
        if (st.step()) last_removed_seq = st.integer(0);
    }
    {
        statement st(s, "DELETE FROM messages WHERE chat_id = ?1 AND seq <= ?2", op);
        st.bind(1, chat_id).bind(2, last_removed_seq).run();
    }
    {
        // The summary takes the seq of the newest removed message: before every kept one.
        statement st(s,
                     "INSERT INTO messages (chat_id, role, content, seq) "
                     "VALUES (?1, 'summary', ?2, ?3)",
                     op);
        st.bind(1, chat_id).bind(2, summary).bind(3, last_removed_seq).run();
    }
    tx.commit();
    return remove;
}

}  // namespace global_supervisor
