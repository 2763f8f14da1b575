#pragma once
/// @file sqlite_store.hpp
/// @brief The embedded default store: SQLite with FTS5 full-text search.
///
/// Tables (schema version 1, kept in `store_schema`; they may share a file with a
/// `sqlite_saver`, whose tables have other names):
/// - `store_items(prefix, key, value, created_at, updated_at, ttl_ms, expires_at)`: one row per
///   item; `prefix` is the namespace joined with '.', `value` JSON text, times in milliseconds
///   since the Unix epoch (`expires_at` NULL: never expires);
/// - `store_fts(text)`: an FTS5 table (tokenizer `unicode61`) holding the indexed text of each
///   item under the item's rowid (tokenizer `sqlite_store_options::tokenizer`); searches rank by
///   FTS5's `bm25` (score = -bm25).
///
/// The SQLite work runs inside the awaiting coroutine (a store call is short: one or two
/// statements), guarded by a mutex.

#include <stategraph/checkpoint/store/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace stategraph::store {

/// @brief How to open a SQLite store. Thread safety: a plain value, read once by the constructor.
struct sqlite_store_options {
    /// The database file (created when missing); ":memory:" keeps it private to the store.
    std::string path;
    store_options store;
    /// How long to wait for another connection's write lock before `storage_failure`.
    std::chrono::milliseconds busy_timeout{5000};
    /// Open with SQLITE_OPEN_READONLY: reads work, writes fail with `storage_failure`; the file
    /// must already hold the store's tables.
    bool read_only = false;
    /// The FTS5 tokenizer of a store this opens first (e.g. "porter unicode61 remove_diacritics 2"
    /// for English stemming and folded accents); a store's file keeps the one it was made with.
    std::string tokenizer = "unicode61";
};

/// @brief A store in one SQLite file. Errors: `store_error` with `storage_failure` (the file
/// cannot be opened or written; names the path), `corrupt_item` (a stored value is not a JSON
/// object; names the namespace and key) or `schema_too_new`.
/// Thread safety: one connection guarded by a mutex; all members may be called concurrently.
class sqlite_store final : public base_store {
public:
    static constexpr int schema_version = 1;
    /// @brief Opens (creating if needed) the file. Throws `store_error`.
    /// @param options the file, the shared store settings, busy timeout (ms), read-only and FTS5
    /// tokenizer (`sqlite_store_options`).
    explicit sqlite_store(sqlite_store_options options);
    ~sqlite_store() override;
    const std::string& path() const noexcept;

protected:
    boost::asio::awaitable<void> do_put(write w) override;
    boost::asio::awaitable<std::optional<item>> do_get(namespace_path ns, std::string key, bool refresh) override;
    boost::asio::awaitable<void> do_remove(namespace_path ns, std::string key) override;
    boost::asio::awaitable<std::vector<search_item>> do_search(namespace_path prefix, std::vector<std::string> words,
                                                                std::size_t want) override;
    boost::asio::awaitable<void> do_refresh(std::vector<std::pair<namespace_path, std::string>> items) override;
    boost::asio::awaitable<std::vector<namespace_path>> do_namespaces() override;
    boost::asio::awaitable<std::size_t> do_sweep() override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace stategraph::store
