// The SQLite store: items in `store_items`, their indexed text in the FTS5 table `store_fts`.

#include <stategraph/checkpoint/store/sqlite_store.hpp>

#include "sqlite_checksum_vfs.hpp"

#include <boost/json/serialize.hpp>

#include <sqlite3.h>

#include <mutex>

namespace stategraph::store {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

const char* const schema_v1[] = {
    "CREATE TABLE IF NOT EXISTS store_items(prefix TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, "
    "created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, ttl_ms INTEGER, expires_at INTEGER, "
    "PRIMARY KEY(prefix, key))",
    "CREATE INDEX IF NOT EXISTS store_items_expires ON store_items(expires_at) WHERE expires_at IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS store_items_updated ON store_items(updated_at)",
};

// The rows under a namespace prefix (?1: the prefix joined with '.', "" for all).
constexpr const char* under_prefix = "(?1 = '' OR prefix = ?1 OR substr(prefix, 1, length(?1) + 1) = ?1 || '.')";

} // namespace

struct sqlite_store::impl {
    sqlite_store_options opt;
    sqlite3* db = nullptr;
    std::mutex mutex;

    impl() = default;
    impl(const impl&) = delete;
    impl& operator=(const impl&) = delete;
    ~impl() { sqlite3_close(db); } // also when the constructor of the store threw after opening

    [[noreturn]] void fail(const std::string& doing, const namespace_path& ns = {}, const std::string& key = {}) const {
        std::string where = ns.empty() ? std::string() : " (namespace \"" + to_string(ns) + "\"" +
                                                             (key.empty() ? "" : ", key \"" + key + "\"") + ")";
        throw store_error(store_errc::storage_failure,
                          "sqlite_store " + opt.path + ": " + doing + where + ": " + sqlite3_errmsg(db), ns, key);
    }

    /// One prepared statement, finalized at scope exit.
    struct stmt {
        impl& im;
        sqlite3_stmt* s = nullptr;
        stmt(impl& i, const char* sql) : im(i) {
            if (sqlite3_prepare_v2(im.db, sql, -1, &s, nullptr) != SQLITE_OK) im.fail(std::string("preparing ") + sql);
        }
        stmt(const stmt&) = delete;
        stmt& operator=(const stmt&) = delete;
        ~stmt() { sqlite3_finalize(s); }
        stmt& text(int i, std::string_view v) {
            sqlite3_bind_text64(s, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
            return *this;
        }
        stmt& integer(int i, std::int64_t v) {
            sqlite3_bind_int64(s, i, v);
            return *this;
        }
        stmt& null(int i) {
            sqlite3_bind_null(s, i);
            return *this;
        }
        /// Steps once: true for a row, false when done. Throws on errors.
        bool step(const std::string& doing, const namespace_path& ns = {}, const std::string& key = {}) {
            const int rc = sqlite3_step(s);
            if (rc == SQLITE_ROW) return true;
            if (rc == SQLITE_DONE) return false;
            im.fail(doing, ns, key);
        }
        std::string_view col_text(int c) const {
            const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, c));
            return p ? std::string_view(p, static_cast<std::size_t>(sqlite3_column_bytes(s, c))) : std::string_view();
        }
        std::int64_t col_int(int c) const { return sqlite3_column_int64(s, c); }
        bool col_null(int c) const { return sqlite3_column_type(s, c) == SQLITE_NULL; }
    };

    void exec(const char* sql, const std::string& doing, const namespace_path& ns = {}, const std::string& key = {}) {
        if (sqlite3_exec(db, sql, nullptr, nullptr, nullptr) != SQLITE_OK) fail(doing, ns, key);
    }

    /// BEGIN IMMEDIATE ... COMMIT, rolled back when `body` throws; a lock or commit failure names
    /// the item (`ns`, `key`) the transaction was for.
    template <class F>
    auto transaction(F&& body, const namespace_path& ns = {}, const std::string& key = {}) {
        exec("BEGIN IMMEDIATE", "starting a transaction", ns, key);
        try {
            if constexpr (std::is_void_v<decltype(body())>) {
                body();
                exec("COMMIT", "committing", ns, key);
            } else {
                auto r = body();
                exec("COMMIT", "committing", ns, key);
                return r;
            }
        } catch (...) {
            sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
            throw;
        }
    }

    void open() {
        const int flags = opt.read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE;
        // Through the saver's page-checksum VFS: a file a saver made (and shares) has page
        // checksums, which every write must keep right (sqlite_checksum_vfs.hpp). A file the
        // store makes has none: other programs write into store files (the Global Supervisor's
        // memory database).
        const int rc = sqlite3_open_v2(opt.path.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX,
                                       checkpoint::detail::checksum_vfs());
        if (rc != SQLITE_OK) {
            std::string m = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
            sqlite3_close(db);
            db = nullptr;
            throw store_error(store_errc::storage_failure, "sqlite_store: cannot open " + opt.path + ": " + m);
        }
        sqlite3_busy_timeout(db, static_cast<int>(opt.busy_timeout.count()));
        if (opt.read_only) {
            std::int64_t version = 0;
            {
                stmt s(*this, "SELECT count(*) FROM sqlite_master WHERE name = 'store_schema'");
                if (s.step("reading the schema")) version = s.col_int(0);
            }
            if (version) {
                stmt s(*this, "SELECT coalesce(max(version), 0) FROM store_schema");
                version = s.step("reading the schema version") ? s.col_int(0) : 0;
            }
            if (version < 1)
                throw store_error(store_errc::storage_failure,
                                  "sqlite_store " + opt.path + ": the file holds no store (opened read-only)");
            if (version > schema_version)
                throw store_error(store_errc::schema_too_new,
                                  "sqlite_store " + opt.path + ": the store's schema has version " +
                                      std::to_string(version) + ", newer than this stategraph knows (" +
                                      std::to_string(schema_version) + "); upgrade stategraph to open it");
            return;
        }
        if (opt.path != ":memory:") exec("PRAGMA journal_mode=WAL", "setting WAL mode");
        exec("PRAGMA synchronous=NORMAL", "setting synchronous");
        transaction([&] {
            exec("CREATE TABLE IF NOT EXISTS store_schema(version INTEGER NOT NULL)", "creating store_schema");
            std::int64_t version = 0;
            {
                stmt s(*this, "SELECT coalesce(max(version), 0) FROM store_schema");
                if (s.step("reading the schema version")) version = s.col_int(0);
            }
            if (version > schema_version)
                throw store_error(store_errc::schema_too_new,
                                  "sqlite_store " + opt.path + ": the store's schema has version " +
                                      std::to_string(version) + ", newer than this stategraph knows (" +
                                      std::to_string(schema_version) + "); upgrade stategraph to open it");
            if (version < 1) {
                for (const char* sql : schema_v1) exec(sql, "creating the store's tables");
                std::string tokenizer;
                for (char c : opt.tokenizer) tokenizer += c == '\'' ? std::string("''") : std::string(1, c);
                const auto fts = "CREATE VIRTUAL TABLE IF NOT EXISTS store_fts USING fts5(text, tokenize = '" +
                                 tokenizer + "')";
                exec(fts.c_str(), "creating the store's full-text index");
                exec("DELETE FROM store_schema", "writing the schema version");
                exec("INSERT INTO store_schema(version) VALUES(1)", "writing the schema version");
            }
        });
    }

    std::int64_t rowid_of(const std::string& prefix, const std::string& key, const namespace_path& ns) {
        stmt s(*this, "SELECT rowid FROM store_items WHERE prefix = ?1 AND key = ?2");
        s.text(1, prefix).text(2, key);
        return s.step("reading an item", ns, key) ? s.col_int(0) : -1;
    }

    item read_item(stmt& s) {
        item it;
        it.ns = parse_namespace(s.col_text(0));
        it.key = std::string(s.col_text(1));
        it.value = parse_value(s.col_text(2), it.ns, it.key);
        it.created_at = from_ms(s.col_int(3));
        it.updated_at = from_ms(s.col_int(4));
        return it;
    }
};

sqlite_store::sqlite_store(sqlite_store_options options)
    : base_store(options.store), impl_(std::make_unique<impl>()) {
    impl_->opt = std::move(options);
    if (impl_->opt.path.empty())
        throw store_error(store_errc::storage_failure, "sqlite_store: sqlite_store_options::path is empty");
    impl_->open();
}

sqlite_store::~sqlite_store() = default;

const std::string& sqlite_store::path() const noexcept { return impl_->opt.path; }

asio::awaitable<void> sqlite_store::do_put(write w) {
    const auto now = now_ms();
    const auto prefix = to_string(w.ns);
    const auto value = json::serialize(w.value);
    std::lock_guard lock(impl_->mutex);
    impl_->transaction([&] {
        impl::stmt s(*impl_,
                     "INSERT INTO store_items(prefix, key, value, created_at, updated_at, ttl_ms, expires_at) "
                     "VALUES(?1, ?2, ?3, ?4, ?4, ?5, ?6) ON CONFLICT(prefix, key) DO UPDATE SET "
                     "value = excluded.value, updated_at = excluded.updated_at, ttl_ms = excluded.ttl_ms, "
                     "created_at = CASE WHEN expires_at IS NOT NULL AND expires_at <= ?4 THEN excluded.created_at "
                     "ELSE created_at END, expires_at = excluded.expires_at RETURNING rowid");
        s.text(1, prefix).text(2, w.key).text(3, value).integer(4, now);
        if (w.ttl) s.integer(5, w.ttl->count()).integer(6, now + w.ttl->count());
        else s.null(5).null(6);
        if (!s.step("storing an item", w.ns, w.key)) impl_->fail("storing an item (no row)", w.ns, w.key);
        const auto rowid = s.col_int(0);
        while (s.step("storing an item", w.ns, w.key)) {}
        impl::stmt d(*impl_, "DELETE FROM store_fts WHERE rowid = ?1");
        d.integer(1, rowid);
        d.step("indexing an item", w.ns, w.key);
        if (w.text) {
            impl::stmt f(*impl_, "INSERT INTO store_fts(rowid, text) VALUES(?1, ?2)");
            f.integer(1, rowid).text(2, *w.text);
            f.step("indexing an item", w.ns, w.key);
        }
    }, w.ns, w.key);
    co_return;
}

asio::awaitable<std::optional<item>> sqlite_store::do_get(namespace_path ns, std::string key, bool refresh) {
    const auto now = now_ms();
    const auto prefix = to_string(ns);
    std::lock_guard lock(impl_->mutex);
    std::optional<item> out;
    {
        impl::stmt s(*impl_, "SELECT prefix, key, value, created_at, updated_at FROM store_items "
                             "WHERE prefix = ?1 AND key = ?2 AND (expires_at IS NULL OR expires_at > ?3)");
        s.text(1, prefix).text(2, key).integer(3, now);
        if (s.step("reading an item", ns, key)) out = impl_->read_item(s);
    }
    if (out && refresh && !impl_->opt.read_only) { // a read-only store cannot restart ttls
        impl::stmt u(*impl_, "UPDATE store_items SET expires_at = ?3 + ttl_ms WHERE prefix = ?1 AND key = ?2 "
                             "AND ttl_ms IS NOT NULL");
        u.text(1, prefix).text(2, key).integer(3, now);
        u.step("refreshing an item's ttl", ns, key);
    }
    co_return out;
}

asio::awaitable<void> sqlite_store::do_remove(namespace_path ns, std::string key) {
    const auto prefix = to_string(ns);
    std::lock_guard lock(impl_->mutex);
    impl_->transaction([&] {
        const auto rowid = impl_->rowid_of(prefix, key, ns);
        if (rowid < 0) return;
        impl::stmt d(*impl_, "DELETE FROM store_fts WHERE rowid = ?1");
        d.integer(1, rowid);
        d.step("deleting an item", ns, key);
        impl::stmt i(*impl_, "DELETE FROM store_items WHERE rowid = ?1");
        i.integer(1, rowid);
        i.step("deleting an item", ns, key);
    }, ns, key);
    co_return;
}

asio::awaitable<std::vector<search_item>> sqlite_store::do_search(namespace_path prefix, std::vector<std::string> words,
                                                                  std::size_t want) {
    const auto now = now_ms();
    const auto joined = to_string(prefix);
    const auto limit = want ? static_cast<std::int64_t>(want) : -1;
    std::vector<search_item> out;
    std::lock_guard lock(impl_->mutex);
    if (words.empty()) {
        const std::string sql = std::string("SELECT prefix, key, value, created_at, updated_at FROM store_items WHERE ") +
                                under_prefix +
                                " AND (expires_at IS NULL OR expires_at > ?2) ORDER BY updated_at DESC, prefix, key "
                                "LIMIT ?3";
        impl::stmt s(*impl_, sql.c_str());
        s.text(1, joined).integer(2, now).integer(3, limit);
        while (s.step("searching", prefix)) out.push_back(search_item{impl_->read_item(s), std::nullopt});
        co_return out;
    }
    std::string match;
    for (const auto& w : words) {
        if (!match.empty()) match += " OR ";
        match += '"';
        for (char c : w) match += c == '"' ? std::string("\"\"") : std::string(1, c);
        match += '"';
    }
    const std::string sql =
        std::string("SELECT i.prefix, i.key, i.value, i.created_at, i.updated_at, bm25(store_fts) AS rank "
                    "FROM store_fts JOIN store_items i ON i.rowid = store_fts.rowid WHERE store_fts MATCH ?4 AND ") +
        under_prefix + " AND (i.expires_at IS NULL OR i.expires_at > ?2) ORDER BY rank, i.updated_at DESC LIMIT ?3";
    impl::stmt s(*impl_, sql.c_str());
    s.text(1, joined).integer(2, now).integer(3, limit).text(4, match);
    while (s.step("searching", prefix)) {
        search_item it{impl_->read_item(s), -sqlite3_column_double(s.s, 5)};
        out.push_back(std::move(it));
    }
    co_return out;
}

asio::awaitable<void> sqlite_store::do_refresh(std::vector<std::pair<namespace_path, std::string>> items) {
    if (impl_->opt.read_only) co_return; // reads work; ttls are not restarted
    const auto now = now_ms();
    std::lock_guard lock(impl_->mutex);
    impl_->transaction([&] {
        impl::stmt u(*impl_, "UPDATE store_items SET expires_at = ?3 + ttl_ms WHERE prefix = ?1 AND key = ?2 "
                             "AND ttl_ms IS NOT NULL AND expires_at > ?3");
        for (const auto& [ns, key] : items) {
            u.text(1, to_string(ns)).text(2, key).integer(3, now);
            u.step("refreshing an item's ttl", ns, key);
            sqlite3_reset(u.s);
        }
    });
    co_return;
}

asio::awaitable<std::vector<namespace_path>> sqlite_store::do_namespaces() {
    const auto now = now_ms();
    std::vector<namespace_path> out;
    std::lock_guard lock(impl_->mutex);
    impl::stmt s(*impl_, "SELECT DISTINCT prefix FROM store_items WHERE expires_at IS NULL OR expires_at > ?1");
    s.integer(1, now);
    while (s.step("listing namespaces")) out.push_back(parse_namespace(s.col_text(0)));
    co_return out;
}

asio::awaitable<std::size_t> sqlite_store::do_sweep() {
    const auto now = now_ms();
    std::lock_guard lock(impl_->mutex);
    const auto n = impl_->transaction([&] {
        impl::stmt f(*impl_, "DELETE FROM store_fts WHERE rowid IN "
                             "(SELECT rowid FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ?1)");
        f.integer(1, now);
        f.step("sweeping expired items");
        impl::stmt d(*impl_, "DELETE FROM store_items WHERE expires_at IS NOT NULL AND expires_at <= ?1");
        d.integer(1, now);
        d.step("sweeping expired items");
        return static_cast<std::size_t>(sqlite3_changes(impl_->db));
    });
    co_return n;
}

} // namespace stategraph::store
