#pragma once
// Internal to the memory store (memory_store.cpp, memory_store_dates.cpp,
// memory_store_contacts.cpp, memory_store_facts.cpp, memory_store_messages.cpp): the SQLite
// connection behind memory_store::impl, the cached statement and the transaction, and the helpers
// more than one of those files uses (namespace memory_detail): errc_from_sqlite (defined in
// memory_store.cpp), ISO dates and trim (memory_store_dates.cpp), the facts as Store items
// (run_store here; facts_namespace, fact_to_json, facts_where in memory_store_facts.cpp).

#include "memory/memory_store.hpp"

#include <stategraph/checkpoint/store/sqlite_store.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace global_supervisor {

namespace memory_detail {

namespace sgs = stategraph::store;
namespace json = boost::json;

/// Maps an (extended) SQLite result code to the error condition.
memory_errc errc_from_sqlite(int rc) noexcept;

// --- dates (memory_store_dates.cpp) ---------------------------------------------------------

std::string format_iso_date(std::chrono::year_month_day ymd);
std::string_view trim(std::string_view s);
/// The ISO date @p s (trimmed); throws memory_error(invalid_argument) naming @p operation.
std::chrono::year_month_day require_date(std::string_view s, std::string_view operation,
                                         const std::filesystem::path& path);

}  // namespace memory_detail

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
        throw memory_error(memory_detail::errc_from_sqlite(rc), operation, detail, path, rc);
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

namespace memory_detail {

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

// --- facts on the Store (memory_store_facts.cpp) --------------------------------------------

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

sgs::namespace_path facts_namespace(std::string_view user_id);
json::object fact_to_json(const fact& f);
/// Every fact in `prefix` matching `filter`.
std::vector<fact> facts_where(sgs::base_store& store, const sgs::namespace_path& prefix, const json::object& filter,
                              std::string_view op, const std::filesystem::path& path);

}  // namespace memory_detail

}  // namespace global_supervisor
