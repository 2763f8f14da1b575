#pragma once
/// @file pg_connection.hpp
/// @brief libpq on Asio (private to checkpoint/src): a non-blocking connection whose socket
/// waits on the awaiting coroutine's executor, statements sent in pipeline mode (a batch is one
/// round trip), and a small pool of such connections.
///
/// A connection holds no Asio object between calls: each call wraps the socket in a
/// `posix::stream_descriptor` on the caller's executor and releases it before returning, so a
/// pooled connection serves coroutines of any io_context.

#include <boost/asio/awaitable.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

struct pg_conn;
struct pg_result;

namespace stategraph::checkpoint::pg {

/// @brief The connection is gone or could not be made (retry on a new one).
class connection_lost : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// @brief The server refused a statement (its SQLSTATE and message).
class server_error : public std::runtime_error {
public:
    server_error(std::string sqlstate, const std::string& message, std::string primary = {})
        : std::runtime_error(message), sqlstate_(std::move(sqlstate)), primary_(std::move(primary)) {}
    const std::string& sqlstate() const noexcept { return sqlstate_; }
    /// The error's primary message alone (no "ERROR:" prefix).
    const std::string& primary() const noexcept { return primary_; }
    /// Whether running the same statements again may succeed: connection failures (class 08),
    /// a server shutting down or restarting (57P01-57P03), serialization failures and deadlocks.
    /// a prepared statement whose result columns changed under it (0A000 "cached plan must not
    /// change result type", after DDL) included.
    bool transient() const noexcept;
    /// Whether a prepared statement was refused because its table changed shape (0A000).
    bool stale_plan() const noexcept {
        return sqlstate_ == "0A000" && primary_.rfind("cached plan must not change result type", 0) == 0;
    }

private:
    std::string sqlstate_;
    std::string primary_;
};

/// @brief One statement of a batch: SQL with $1.. parameters (text form, or binary for bytea).
struct statement {
    struct param {
        std::optional<std::string> value; ///< nullopt: NULL
        bool binary = false;              ///< sent as bytes (bytea), not as text
    };
    std::string_view sql; ///< must outlive the batch (the saver's SQL strings)
    std::vector<param> params;
    /// Its rows in text form (every type as the server prints it; `result::type` tells which),
    /// not binary.
    bool text_results = false;

    statement(std::string_view s) : sql(s) {}
    statement& text(std::string v) {
        params.push_back({std::move(v), false});
        return *this;
    }
    statement& bytes(std::string v) {
        params.push_back({std::move(v), true});
        return *this;
    }
    statement& integer(std::int64_t v) { return text(std::to_string(v)); }
    statement& null() {
        params.push_back({std::nullopt, false});
        return *this;
    }
};

/// @brief The rows of one statement (binary result format). Owns its PGresult.
class result {
public:
    result() = default;
    explicit result(pg_result* r) noexcept;
    result(result&& o) noexcept;
    result& operator=(result&& o) noexcept;
    result(const result&) = delete;
    result& operator=(const result&) = delete;
    ~result();

    int rows() const noexcept;
    int columns() const noexcept;
    /// The type of column `col` (its pg_type OID: 16 bool, 20 int8, 21 int2, 23 int4, 25 text, ...).
    unsigned type(int col) const noexcept;
    bool is_null(int row, int col) const noexcept;
    std::string_view bytes(int row, int col) const noexcept;
    std::string text(int row, int col) const { return std::string(bytes(row, col)); }
    /// An int2/int4/int8 (or bool) column, as sent in binary form.
    std::int64_t integer(int row, int col) const;
    /// Rows an INSERT/UPDATE/DELETE touched.
    std::int64_t affected() const;

private:
    pg_result* r_ = nullptr;
};

/// @brief A notification (NOTIFY) received on a connection that LISTENs.
struct notification {
    std::string channel, payload;
    int sender_pid = 0; ///< the server process of the session that sent it
};

/// @brief One non-blocking libpq connection.
class connection {
public:
    ~connection();
    connection(const connection&) = delete;
    connection& operator=(const connection&) = delete;

    /// @brief Opens a connection within `timeout`, then runs `setup` (if any). Throws
    /// `connection_lost` when the server cannot be reached.
    static boost::asio::awaitable<std::unique_ptr<connection>> open(const std::string& conninfo,
                                                                    std::chrono::milliseconds timeout);

    /// @brief Sends `batch` in one pipeline (one round trip) and returns one result per
    /// statement. Each distinct SQL text is prepared once per connection (its Parse rides in the
    /// same pipeline, just before its first execution) and executed by name afterwards, so the
    /// server parses and plans it once, not on every call. Throws `connection_lost` (the connection is then unusable) or `server_error`
    /// (the first statement that failed; the rest of the batch was skipped by the server, and an
    /// open transaction is rolled back). `timeout` bounds the whole exchange.
    boost::asio::awaitable<std::vector<result>> run(const std::vector<statement>& batch,
                                                    std::chrono::milliseconds timeout);

    /// @brief The notifications received (on channels this connection LISTENs on), waiting up to
    /// `timeout` for the first when none is there yet; none when the time passed. Throws
    /// `connection_lost`.
    boost::asio::awaitable<std::vector<notification>> notifications(std::chrono::milliseconds timeout);

    /// @brief Whether the connection is usable and outside any transaction (fit for the pool).
    bool idle() const noexcept;
    /// @brief The server process serving this connection.
    int backend_pid() const noexcept;
    /// @brief Batches sent on this connection (each one round trip), and statements prepared.
    std::uint64_t round_trips() const noexcept { return round_trips_; }
    std::size_t prepared() const noexcept { return prepared_.size(); }
    /// @brief Also counts this connection's round trips into `*total` from now on (a pool's sum).
    void count_into(std::atomic<std::uint64_t>* total) noexcept { total_ = total; }

    /// At most this many statements are kept prepared per connection; SQL beyond them (text
    /// built per call) is sent unprepared.
    static constexpr std::size_t max_prepared = 256;

private:
    explicit connection(pg_conn* c) noexcept : c_(c) {}
    pg_conn* c_;
    std::unordered_map<std::string, std::string> prepared_; ///< SQL text -> statement name
    std::uint64_t round_trips_ = 0;
    std::atomic<std::uint64_t>* total_ = nullptr;
    std::uint64_t names_ = 0; ///< statement names handed out ("sg<n>"), never reused
};

/// @brief At most `size` connections to one server, handed out one coroutine at a time.
class pool {
public:
    /// `search_path`: set on every new connection (the saver's schema), "" for the default.
    pool(std::string conninfo, std::string search_path, std::size_t size, std::chrono::milliseconds connect_timeout)
        : conninfo_(std::move(conninfo)), search_path_(std::move(search_path)), size_(size ? size : 1),
          connect_timeout_(connect_timeout) {}

    /// @brief A connection borrowed from the pool; back to it at scope exit when still idle,
    /// closed otherwise (lost, or left inside a transaction by an exception).
    class lease {
    public:
        lease(pool& p, std::unique_ptr<connection> c) noexcept : p_(&p), c_(std::move(c)) {}
        lease(lease&& o) noexcept : p_(o.p_), c_(std::move(o.c_)) {}
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        ~lease();
        connection& operator*() const noexcept { return *c_; }
        connection* operator->() const noexcept { return c_.get(); }
        /// The connection is broken: close it instead of giving it back.
        void discard() noexcept;

    private:
        pool* p_;
        std::unique_ptr<connection> c_;
    };

    /// @brief An idle connection, a new one while fewer than `size` are open, or the first one
    /// given back. Throws `connection_lost` when a new one cannot be opened. While every
    /// connection is out the caller sleeps in a queue and is woken (first come, first woken) by
    /// the next connection given back or closed, never by a timer.
    boost::asio::awaitable<lease> get();
    /// @brief Coroutines asleep in `get` right now.
    std::size_t waiting() const;

    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;
    ~pool();
    /// @brief Closes every idle connection (the next `get` opens new ones).
    void clear();
    /// @brief Server process ids of the idle connections.
    std::vector<int> idle_pids() const;
    /// @brief Round trips (batches) sent on this pool's connections so far, the set-up of new
    /// connections not counted.
    std::uint64_t round_trips() const noexcept { return round_trips_.load(std::memory_order_relaxed); }

private:
    struct waiter;
    void give_back(std::unique_ptr<connection> c) noexcept;
    /// Takes the first waiter out of the queue (under `mutex_`); it is resumed by `wake`.
    std::shared_ptr<waiter> next_waiter() noexcept;
    static void wake(std::shared_ptr<waiter> w) noexcept;
    boost::asio::awaitable<void> sleep(std::shared_ptr<waiter> w);

    std::string conninfo_;
    std::string search_path_;
    std::size_t size_;
    std::chrono::milliseconds connect_timeout_;
    mutable std::mutex mutex_;
    std::vector<std::unique_ptr<connection>> idle_;
    std::size_t open_ = 0;
    std::deque<std::shared_ptr<waiter>> waiters_;
    std::atomic<std::uint64_t> round_trips_{0};
};

/// @brief `name` as a quoted SQL identifier ("a""b").
std::string identifier(std::string_view name);

/// @brief SQL that creates `schema` only when it is missing. (`CREATE SCHEMA IF NOT EXISTS`
/// checks the database's CREATE privilege first, so a role that may use an existing schema but
/// not create one would be refused.) One statement, no parameters.
std::string create_schema_if_missing(std::string_view schema);

/// @brief Runs `work` to completion on a private io_context: what the PostgreSQL saver's and
/// store's constructors (migrations) and the saver's destructor (leases given back) wait for.
/// Rethrows what `work` threw.
void run_blocking(boost::asio::awaitable<void> work);

} // namespace stategraph::checkpoint::pg
