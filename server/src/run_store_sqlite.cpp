// The run store's SQLite backend: one connection (WAL, a busy timeout), its statements prepared
// once, a write transaction as BEGIN IMMEDIATE. Calls finish without suspending (SQLite is
// in-process), so a transaction is never interleaved with another call of the same store; a
// mutex keeps calls from several threads apart. Other processes on the same file wait for the
// write lock (busy timeout), and a busy file past it is retried as a transient failure.

#include <stategraph/server/run_store.hpp>

#include <sqlite3.h>

#if STATEGRAPH_SERVER_CHECKSUM_VFS
#include "sqlite_checksum_vfs.hpp"
#endif

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <map>
#include <mutex>
#include <thread>

namespace stategraph::server {

namespace net = boost::asio;
using net::awaitable;

namespace {

class sqlite_backend final : public run_store_backend {
public:
    explicit sqlite_backend(std::string path) : path_(std::move(path)) {
        const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
        // ":memory:" is a file in memory (SQLite's memdb VFS, private to this connection: its
        // name has no leading '/'), not SQLite's own in-memory database: that one keeps every
        // page of the database in its page cache, dirty, and each commit walks them all (one
        // commit took 40 us at 80 MB and 1 ms at 500 MB, about what a busy server's store holds);
        // behind memdb the cache is an ordinary bounded one and a commit costs the same at any
        // size.
        const bool in_memory = path_ == ":memory:";
        const char* name = in_memory ? "stategraph-run-store" : path_.c_str();
        // Through the SQLite saver's page checksums when built with it: the file may be the
        // saver's own (its tables beside the checkpoints), whose pages every writer must keep
        // checksummed, and a run store file of its own gets them too.
#if STATEGRAPH_SERVER_CHECKSUM_VFS
        const char* vfs = in_memory ? "memdb" : checkpoint::detail::checksum_vfs();
#else
        const char* vfs = in_memory ? "memdb" : nullptr;
#endif
        if (sqlite3_open_v2(name, &db_, flags, vfs) != SQLITE_OK) {
            std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
            sqlite3_close(db_);
            db_ = nullptr;
            throw run_store_error("run store: cannot open SQLite file '" + path_ + "': " + msg, false);
        }
        sqlite3_busy_timeout(db_, 5000);
        if (in_memory) {
            // memdb's default bound is 1 GiB (then SQLITE_FULL); as SQLite's own in-memory
            // database, this one is bounded by the process's memory alone.
            sqlite3_int64 bound = sqlite3_int64{1} << 40;
            sqlite3_file_control(db_, "main", SQLITE_FCNTL_SIZE_LIMIT, &bound);
        }
#if STATEGRAPH_SERVER_CHECKSUM_VFS
        if (!in_memory) checkpoint::detail::reserve_checksum_bytes(db_); // a new file only; one with pages keeps its layout
#endif
        plain(in_memory ? "PRAGMA journal_mode=MEMORY" : "PRAGMA journal_mode=WAL");
        plain("PRAGMA synchronous=NORMAL");
        plain("PRAGMA foreign_keys=OFF");
    }
    ~sqlite_backend() override {
        for (auto& [sql, st] : cache_) sqlite3_finalize(st);
        sqlite3_close(db_);
    }

    class sqlite_session final : public session {
    public:
        explicit sqlite_session(sqlite_backend& b) : b_(b) {}
        awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) override {
            co_return b_.run(sql, params, nullptr);
        }
        awaitable<std::int64_t> exec(std::string_view sql, std::vector<sql_value> params) override {
            std::int64_t changed = 0;
            b_.run(sql, params, &changed);
            co_return changed;
        }

    private:
        sqlite_backend& b_;
    };

    awaitable<void> transaction(const body& work) override {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        std::chrono::milliseconds pause{5};
        for (;;) {
            std::exception_ptr failed;
            bool transient = false;
            {
                std::unique_lock lock(mutex_);
                try {
                    step_alone("BEGIN IMMEDIATE");
                    try {
                        sqlite_session s(*this);
                        co_await work(s);
                        step_alone("COMMIT");
                    } catch (...) {
                        rollback_quietly();
                        throw;
                    }
                } catch (const run_store_error& e) {
                    transient = e.transient();
                    failed = std::current_exception();
                } catch (...) {
                    failed = std::current_exception();
                }
            }
            if (!failed) co_return;
            if (!transient || std::chrono::steady_clock::now() >= deadline) std::rethrow_exception(failed);
            net::steady_timer t(co_await net::this_coro::executor, pause);
            co_await t.async_wait(net::use_awaitable);
            pause = std::min(pause * 2, std::chrono::milliseconds(200));
        }
    }

    awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) override {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        std::chrono::milliseconds pause{5};
        for (;;) {
            {
                std::unique_lock lock(mutex_);
                try {
                    co_return run(sql, params, nullptr);
                } catch (const run_store_error& e) {
                    if (!e.transient() || std::chrono::steady_clock::now() >= deadline) throw;
                }
            }
            // busy (another process recovering the WAL, a checkpoint): again shortly
            net::steady_timer t(co_await net::this_coro::executor, pause);
            co_await t.async_wait(net::use_awaitable);
            pause = std::min(pause * 2, std::chrono::milliseconds(200));
        }
    }

    std::string_view lock_rows() const override { return ""; }
    std::string_view lock_rows_skip_locked() const override { return ""; }
    std::string_view bigint_type() const override { return "INTEGER"; }
    std::string describe() const override { return "SQLite file '" + path_ + "'"; }

private:
    [[noreturn]] void fail(const std::string& what, int rc) const {
        const bool transient = rc == SQLITE_BUSY || rc == SQLITE_LOCKED;
        throw run_store_error("run store (" + describe() + "): " + what + ": " + sqlite3_errmsg(db_), transient);
    }

    void plain(const char* sql) {
        char* err = nullptr;
        int rc = sqlite3_exec(db_, sql, nullptr, nullptr, &err);
        if (rc != SQLITE_OK) {
            std::string msg = err ? err : sqlite3_errstr(rc);
            sqlite3_free(err);
            throw run_store_error("run store (" + describe() + "): " + sql + ": " + msg, rc == SQLITE_BUSY || rc == SQLITE_LOCKED);
        }
    }

    /// A statement without parameters or rows (BEGIN, COMMIT), prepared once.
    void step_alone(std::string_view sql) {
        sqlite3_stmt* st = prepared(sql);
        const int rc = sqlite3_step(st);
        sqlite3_reset(st);
        if (rc != SQLITE_DONE) fail(std::string(sql), rc);
    }

    void rollback_quietly() noexcept {
        if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    }

    sqlite3_stmt* prepared(std::string_view sql) {
        auto it = cache_.find(sql); // transparent: no string made for a lookup
        if (it != cache_.end()) return it->second;
        sqlite3_stmt* st = nullptr;
        int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &st, nullptr);
        if (rc != SQLITE_OK) fail("cannot prepare \"" + std::string(sql) + "\"", rc);
        cache_.emplace(std::string(sql), st);
        return st;
    }

    std::vector<sql_row> run(std::string_view sql, const std::vector<sql_value>& params, std::int64_t* changed) {
        sqlite3_stmt* st = prepared(sql);
        struct resetter {
            sqlite3_stmt* s;
            ~resetter() {
                sqlite3_reset(s);
                sqlite3_clear_bindings(s);
            }
        } reset{st};
        for (std::size_t i = 0; i < params.size(); ++i) {
            const int at = static_cast<int>(i + 1);
            int rc = SQLITE_OK;
            if (const auto* n = std::get_if<std::int64_t>(&params[i])) rc = sqlite3_bind_int64(st, at, *n);
            else if (const auto* s = std::get_if<std::string>(&params[i]))
                // not copied: `params` outlives its use (`reset` unbinds them before this returns)
                rc = sqlite3_bind_text(st, at, s->data(), static_cast<int>(s->size()), SQLITE_STATIC);
            else rc = sqlite3_bind_null(st, at);
            if (rc != SQLITE_OK) fail("cannot bind parameter " + std::to_string(at), rc);
        }
        std::vector<sql_row> rows;
        for (;;) {
            int rc = sqlite3_step(st);
            if (rc == SQLITE_DONE) break;
            if (rc != SQLITE_ROW) fail("\"" + std::string(sql.substr(0, 80)) + "\"", rc);
            sql_row row;
            const int n = sqlite3_column_count(st);
            row.cols.reserve(static_cast<std::size_t>(n));
            for (int c = 0; c < n; ++c) {
                switch (sqlite3_column_type(st, c)) {
                case SQLITE_NULL: row.cols.emplace_back(std::monostate{}); break;
                case SQLITE_INTEGER: row.cols.emplace_back(static_cast<std::int64_t>(sqlite3_column_int64(st, c))); break;
                default: {
                    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st, c));
                    row.cols.emplace_back(std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(st, c))));
                }
                }
            }
            rows.push_back(std::move(row));
        }
        if (changed) *changed = sqlite3_changes64(db_);
        return rows;
    }

    std::string path_;
    sqlite3* db_ = nullptr;
    std::map<std::string, sqlite3_stmt*, std::less<>> cache_;
    std::recursive_mutex mutex_;
};

} // namespace

std::shared_ptr<run_store> open_sqlite_run_store(const std::string& path, run_store_options options) {
    return std::make_shared<run_store>(std::make_shared<sqlite_backend>(path), options);
}

} // namespace stategraph::server
