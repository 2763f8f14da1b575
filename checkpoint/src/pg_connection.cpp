#include "pg_connection.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <libpq-fe.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace stategraph::checkpoint::pg {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;

namespace {

using clock = std::chrono::steady_clock;

/// libpq's socket wrapped on the awaiting coroutine's executor for one wait; released (never
/// closed: libpq owns it) at scope exit.
class socket_view {
public:
    socket_view(const asio::any_io_executor& ex, int fd) : sd_(ex, fd) {}
    socket_view(const socket_view&) = delete;
    socket_view& operator=(const socket_view&) = delete;
    ~socket_view() { (void)sd_.release(); }
    asio::posix::stream_descriptor& get() noexcept { return sd_; }

private:
    asio::posix::stream_descriptor sd_;
};

enum class wait_for { read, write, either };

/// Waits until libpq's socket is ready (as `what` says) or `deadline` passes; false on timeout.
asio::awaitable<bool> wait_socket(PGconn* c, wait_for what, clock::time_point deadline) {
    const int fd = PQsocket(c);
    if (fd < 0) throw connection_lost("the connection has no socket");
    auto ex = co_await asio::this_coro::executor;
    socket_view sock(ex, fd);
    asio::steady_timer timer(ex, deadline);
    auto timed_out = timer.async_wait(asio::as_tuple(asio::use_awaitable));
    using sd = asio::posix::stream_descriptor;
    if (what == wait_for::either) {
        auto readable = sock.get().async_wait(sd::wait_read, asio::as_tuple(asio::use_awaitable));
        auto writable = sock.get().async_wait(sd::wait_write, asio::as_tuple(asio::use_awaitable));
        auto which = co_await (std::move(readable) || std::move(writable) || std::move(timed_out));
        co_return which.index() != 2;
    }
    auto ready = sock.get().async_wait(what == wait_for::read ? sd::wait_read : sd::wait_write,
                                       asio::as_tuple(asio::use_awaitable));
    auto which = co_await (std::move(ready) || std::move(timed_out));
    co_return which.index() == 0;
}

std::string conn_error(PGconn* c) {
    std::string m = c ? PQerrorMessage(c) : "out of memory";
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
}

/// Reads what arrived; throws connection_lost when the connection broke.
void consume(PGconn* c) {
    if (!PQconsumeInput(c)) throw connection_lost(conn_error(c));
}

/// The next result of the pipeline (nullptr: the end of one statement's results), waiting for it.
asio::awaitable<PGresult*> next_result(PGconn* c, clock::time_point deadline) {
    while (PQisBusy(c)) {
        const bool ready = co_await wait_socket(c, wait_for::read, deadline);
        if (!ready) throw connection_lost("the server did not answer in time");
        consume(c);
    }
    co_return PQgetResult(c);
}

/// Sends everything queued (PQflush), reading meanwhile so the server never blocks on us.
asio::awaitable<void> flush(PGconn* c, clock::time_point deadline) {
    for (;;) {
        const int r = PQflush(c);
        if (r == 0) co_return;
        if (r < 0) throw connection_lost(conn_error(c));
        const bool ready = co_await wait_socket(c, wait_for::either, deadline);
        if (!ready) throw connection_lost("the server did not take the request in time");
        consume(c);
    }
}

} // namespace

// -- server_error ---------------------------------------------------------------------------------

bool server_error::transient() const noexcept {
    if (stale_plan()) return true;
    return sqlstate_.rfind("08", 0) == 0 || sqlstate_ == "57P01" || sqlstate_ == "57P02" || sqlstate_ == "57P03" ||
           sqlstate_ == "40001" || sqlstate_ == "40P01";
}

// -- result ---------------------------------------------------------------------------------------

result::result(pg_result* r) noexcept : r_(r) {}
result::result(result&& o) noexcept : r_(std::exchange(o.r_, nullptr)) {}
result& result::operator=(result&& o) noexcept {
    if (this != &o) {
        if (r_) PQclear(r_);
        r_ = std::exchange(o.r_, nullptr);
    }
    return *this;
}
result::~result() {
    if (r_) PQclear(r_);
}
int result::rows() const noexcept { return r_ ? PQntuples(r_) : 0; }
int result::columns() const noexcept { return r_ ? PQnfields(r_) : 0; }
unsigned result::type(int col) const noexcept { return r_ ? PQftype(r_, col) : 0; }
bool result::is_null(int row, int col) const noexcept { return !r_ || PQgetisnull(r_, row, col); }
std::string_view result::bytes(int row, int col) const noexcept {
    if (is_null(row, col)) return {};
    return {PQgetvalue(r_, row, col), static_cast<std::size_t>(PQgetlength(r_, row, col))};
}
std::int64_t result::integer(int row, int col) const {
    const auto b = bytes(row, col);
    std::uint64_t v = 0;
    for (unsigned char ch : b) v = v << 8 | ch;
    switch (b.size()) { // big endian, sign-extended
    case 1: return static_cast<std::int8_t>(v);
    case 2: return static_cast<std::int16_t>(v);
    case 4: return static_cast<std::int32_t>(v);
    case 8: return static_cast<std::int64_t>(v);
    case 0: return 0;
    default: throw std::runtime_error("an integer column of " + std::to_string(b.size()) + " bytes");
    }
}
std::int64_t result::affected() const {
    const char* n = r_ ? PQcmdTuples(r_) : "";
    return *n ? std::stoll(n) : 0;
}

// -- connection -----------------------------------------------------------------------------------

connection::~connection() {
    if (c_) PQfinish(c_);
}

asio::awaitable<std::unique_ptr<connection>> connection::open(const std::string& conninfo,
                                                              std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    std::unique_ptr<connection> conn(new connection(PQconnectStart(conninfo.c_str())));
    PGconn* c = conn->c_;
    if (!c) throw connection_lost("out of memory");
    if (PQstatus(c) == CONNECTION_BAD) throw connection_lost(conn_error(c));
    // Notices ("schema already exists, skipping") are not errors: not printed to stderr.
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    for (;;) {
        const auto st = PQconnectPoll(c);
        if (st == PGRES_POLLING_OK) break;
        if (st == PGRES_POLLING_FAILED) throw connection_lost(conn_error(c));
        const bool ready =
            co_await wait_socket(c, st == PGRES_POLLING_READING ? wait_for::read : wait_for::write, deadline);
        if (!ready) throw connection_lost("connecting timed out after " + std::to_string(timeout.count()) + " ms");
    }
    if (PQsetnonblocking(c, 1) != 0) throw connection_lost(conn_error(c));
    co_return conn;
}

asio::awaitable<std::vector<result>> connection::run(const std::vector<statement>& batch,
                                                     std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    PGconn* c = c_;
    if (PQstatus(c) != CONNECTION_OK) throw connection_lost(conn_error(c));
    if (!PQenterPipelineMode(c)) throw connection_lost(conn_error(c));
    // What was sent, in order: a statement's execution (its index in `batch`), or the Parse of
    // a statement prepared in this batch (-1 - its index in `preparing`); each has its results.
    std::vector<long> sent;
    sent.reserve(batch.size() * 2);
    struct to_prepare {
        std::string sql, name;
        bool ok = false;
    };
    std::vector<to_prepare> preparing;
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const auto& s = batch[i];
        values.clear();
        lengths.clear();
        formats.clear();
        for (const auto& p : s.params) {
            values.push_back(p.value ? p.value->data() : nullptr);
            lengths.push_back(p.value ? static_cast<int>(p.value->size()) : 0);
            formats.push_back(p.binary ? 1 : 0);
        }
        std::string sql(s.sql);
        const int n = static_cast<int>(s.params.size());
        const std::string* name = nullptr;
        if (auto known = prepared_.find(sql); known != prepared_.end()) {
            name = &known->second;
        } else {
            auto same = std::find_if(preparing.begin(), preparing.end(), [&](const auto& p) { return p.sql == sql; });
            if (same != preparing.end()) {
                name = &same->name;
            } else if (prepared_.size() + preparing.size() < max_prepared) {
                std::string fresh = "sg" + std::to_string(++names_);
                if (!PQsendPrepare(c, fresh.c_str(), sql.c_str(), n, nullptr)) throw connection_lost(conn_error(c));
                sent.push_back(-1 - static_cast<long>(preparing.size()));
                preparing.push_back({std::move(sql), std::move(fresh)});
                name = &preparing.back().name;
            }
        }
        const int result_format = s.text_results ? 0 : 1;
        const bool ok = name ? PQsendQueryPrepared(c, name->c_str(), n, values.data(), lengths.data(), formats.data(),
                                                   result_format)
                             : PQsendQueryParams(c, sql.c_str(), n, nullptr, values.data(), lengths.data(),
                                                 formats.data(), result_format);
        if (!ok) throw connection_lost(conn_error(c));
        sent.push_back(static_cast<long>(i));
    }
    if (!PQpipelineSync(c)) throw connection_lost(conn_error(c));
    ++round_trips_;
    if (total_) total_->fetch_add(1, std::memory_order_relaxed);
    co_await flush(c, deadline);

    std::vector<result> out;
    out.reserve(batch.size());
    std::optional<server_error> failed;
    for (const long what : sent) {
        result first;
        for (;;) { // each statement's (or Parse's) results end with a null
            PGresult* r = co_await next_result(c, deadline);
            if (!r) break;
            result held(r);
            const auto st = PQresultStatus(r);
            if (st == PGRES_FATAL_ERROR && !failed) {
                const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
                const char* primary = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
                std::string msg = PQresultErrorMessage(r);
                while (!msg.empty() && msg.back() == '\n') msg.pop_back();
                failed.emplace(state ? state : "", msg, primary ? primary : "");
            }
            if (what < 0 && st == PGRES_COMMAND_OK) preparing[static_cast<std::size_t>(-1 - what)].ok = true;
            first = std::move(held); // PGRES_PIPELINE_ABORTED: skipped after an earlier error
        }
        if (what >= 0) out.push_back(std::move(first));
    }
    // A Parse that ran stays on the connection (it is not undone by a rollback).
    for (auto& p : preparing)
        if (p.ok) prepared_.emplace(std::move(p.sql), std::move(p.name));
    // The sync's own result.
    for (;;) {
        PGresult* r = co_await next_result(c, deadline);
        if (!r) {
            if (PQstatus(c) != CONNECTION_OK) throw connection_lost(conn_error(c));
            continue;
        }
        result held(r);
        if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) break;
    }
    if (!PQexitPipelineMode(c)) throw connection_lost(conn_error(c));
    if (failed) {
        // A backend terminated (pg_terminate_backend, a shutdown) says so, then closes.
        if (PQstatus(c) != CONNECTION_OK || failed->sqlstate().rfind("08", 0) == 0 ||
            failed->sqlstate().rfind("57P0", 0) == 0)
            throw connection_lost(failed->what());
        if (PQtransactionStatus(c) != PQTRANS_IDLE) {
            std::vector<statement> rollback{statement("ROLLBACK")};
            try {
                (void)co_await run(rollback, timeout);
            } catch (const server_error&) {
            }
        }
        // A prepared statement whose result columns changed (a table altered under it): every
        // prepared statement is forgotten, on the server (this DEALLOCATE too) and here; the
        // caller may run the batch again.
        if (failed->stale_plan()) {
            std::vector<statement> forget{statement("DEALLOCATE ALL")};
            (void)co_await run(forget, timeout);
            prepared_.clear();
        }
        throw *failed;
    }
    co_return out;
}

asio::awaitable<std::vector<notification>> connection::notifications(std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    PGconn* c = c_;
    if (PQstatus(c) != CONNECTION_OK) throw connection_lost(conn_error(c));
    std::vector<notification> out;
    auto take = [&] {
        while (PGnotify* n = PQnotifies(c)) {
            out.push_back({n->relname, n->extra ? n->extra : "", n->be_pid});
            PQfreemem(n);
        }
    };
    consume(c); // what already arrived
    take();
    if (out.empty() && co_await wait_socket(c, wait_for::read, deadline)) {
        consume(c);
        take();
    }
    co_return out;
}

bool connection::idle() const noexcept {
    return c_ && PQstatus(c_) == CONNECTION_OK && PQtransactionStatus(c_) == PQTRANS_IDLE &&
           PQpipelineStatus(c_) == PQ_PIPELINE_OFF;
}

int connection::backend_pid() const noexcept { return c_ ? PQbackendPID(c_) : 0; }

// -- pool -----------------------------------------------------------------------------------------

/// One coroutine asleep in `get`: its completion handler, or (when woken before it slept) a flag.
struct pool::waiter {
    boost::asio::any_io_executor ex; ///< the sleeper's executor: it is resumed there
    /// Emplaced, never assigned: Boost 1.81's move assignment of any_completion_handler wraps
    /// the handler in itself, endlessly.
    std::optional<boost::asio::any_completion_handler<void()>> resume;
    bool woken = false;
};

pool::~pool() {
    std::lock_guard lock(mutex_);
    waiters_.clear(); // nobody may wait on a pool being destroyed; their frames go with the handlers
}

pool::lease::~lease() {
    if (c_ && p_) p_->give_back(std::move(c_));
}

void pool::lease::discard() noexcept {
    if (!c_) return;
    c_.reset();
    std::shared_ptr<waiter> w;
    {
        std::lock_guard lock(p_->mutex_);
        --p_->open_;
        w = p_->next_waiter(); // it may open a new one in its place
    }
    wake(std::move(w));
}

std::shared_ptr<pool::waiter> pool::next_waiter() noexcept {
    if (waiters_.empty()) return nullptr;
    auto w = std::move(waiters_.front());
    waiters_.pop_front();
    w->woken = true;
    return w;
}

void pool::wake(std::shared_ptr<waiter> w) noexcept {
    if (!w || !w->resume) return; // not asleep yet: it sees `woken` before sleeping
    auto resume = [h = std::move(*w->resume)]() mutable { std::move(h)(); };
    w->resume.reset();
    asio::post(w->ex, std::move(resume));
}

asio::awaitable<void> pool::sleep(std::shared_ptr<waiter> w) {
    auto init = [this, w](auto handler) {
        std::unique_lock lock(mutex_);
        if (w->woken) { // woken between queueing and sleeping
            lock.unlock();
            auto ex = asio::get_associated_executor(handler);
            asio::post(ex, std::move(handler));
            return;
        }
        w->resume.emplace(std::move(handler));
    };
    co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(init, asio::use_awaitable);
}

void pool::give_back(std::unique_ptr<connection> c) noexcept {
    std::shared_ptr<waiter> w;
    {
        std::lock_guard lock(mutex_);
        if (c->idle()) {
            idle_.push_back(std::move(c));
        } else {
            --open_;
            c.reset();
        }
        w = next_waiter();
    }
    wake(std::move(w));
}

std::size_t pool::waiting() const {
    std::lock_guard lock(mutex_);
    return waiters_.size();
}

asio::awaitable<pool::lease> pool::get() {
    const asio::any_io_executor ex = co_await asio::this_coro::executor;
    bool woken = false;
    for (;;) {
        std::shared_ptr<waiter> w;
        {
            std::unique_lock lock(mutex_);
            if (!idle_.empty()) {
                auto c = std::move(idle_.back());
                idle_.pop_back();
                co_return lease(*this, std::move(c));
            }
            if (open_ < size_) {
                ++open_;
                lock.unlock();
                std::unique_ptr<connection> c;
                std::exception_ptr error;
                try {
                    c = co_await connection::open(conninfo_, connect_timeout_);
                    if (!search_path_.empty()) {
                        std::vector<statement> setup;
                        setup.emplace_back("SELECT pg_catalog.set_config('search_path', $1, false)");
                        setup.back().text(search_path_);
                        (void)co_await c->run(setup, connect_timeout_);
                    }
                    c->count_into(&round_trips_);
                } catch (...) {
                    error = std::current_exception();
                }
                if (error) {
                    std::shared_ptr<waiter> next;
                    {
                        std::lock_guard relock(mutex_);
                        --open_;
                        next = next_waiter(); // its turn to try
                    }
                    wake(std::move(next));
                    std::rethrow_exception(error);
                }
                co_return lease(*this, std::move(c));
            }
            // Every connection is out: sleep until one comes back (or closes). A waiter woken
            // before and beaten to the connection keeps its place at the front.
            w = std::make_shared<waiter>();
            w->ex = ex;
            if (woken) waiters_.push_front(w);
            else waiters_.push_back(w);
        }
        co_await sleep(w);
        woken = true;
    }
}

void pool::clear() {
    std::vector<std::unique_ptr<connection>> gone;
    std::lock_guard lock(mutex_);
    open_ -= idle_.size();
    gone.swap(idle_);
}

std::vector<int> pool::idle_pids() const {
    std::lock_guard lock(mutex_);
    std::vector<int> out;
    for (const auto& c : idle_) out.push_back(c->backend_pid());
    return out;
}

std::string identifier(std::string_view name) {
    std::string out = "\"";
    for (char ch : name) {
        if (ch == '"') out += '"';
        out += ch;
    }
    return out + '"';
}

std::string create_schema_if_missing(std::string_view schema) {
    std::string literal = "'";
    for (char ch : schema) {
        if (ch == '\'') literal += '\'';
        literal += ch;
    }
    literal += "'";
    // The EXECUTE text is itself a literal: its quotes doubled once more.
    std::string create;
    for (char ch : "CREATE SCHEMA " + identifier(schema)) {
        if (ch == '\'') create += '\'';
        create += ch;
    }
    return "DO $stategraph$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = " + literal +
           ") THEN EXECUTE '" + create + "'; END IF; END $stategraph$";
}

void run_blocking(asio::awaitable<void> work) {
    asio::io_context io;
    auto f = asio::co_spawn(io, std::move(work), asio::use_future);
    io.run();
    f.get();
}

} // namespace stategraph::checkpoint::pg
