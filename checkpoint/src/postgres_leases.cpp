// The PostgreSQL saver's leases: acquire, release and break_lease, the keeper renewing the leases
// held, and the release of them all when the saver closes.
#include "postgres_saver_impl.hpp"

#include <stategraph/core/detail/spawned.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

namespace stategraph::checkpoint {

namespace {

// Leases.
constexpr std::string_view sql_get_lease =
    "SELECT owner, expires_at, (expires_at > stategraph_now_ms())::int FROM stategraph_leases WHERE thread_id = $1";
constexpr std::string_view sql_renew_lease =
    "UPDATE stategraph_leases SET expires_at = stategraph_now_ms() + $3::bigint WHERE thread_id = $1 AND owner = $2";
constexpr std::string_view sql_release_all_leases = "DELETE FROM stategraph_leases WHERE owner = $1";
// $1: the thread, $2: the call's id. Acts only when the call has no answer yet (a retry whose
// first attempt committed); the answer is read back by sql_answer in the same transaction.
constexpr std::string_view sql_break_lease =
    "WITH gone AS (DELETE FROM stategraph_leases WHERE thread_id = $1 AND NOT EXISTS "
    "(SELECT 1 FROM stategraph_answers WHERE call_id = $2) RETURNING owner) "
    "INSERT INTO stategraph_answers(call_id, answer, at) SELECT $2, (SELECT owner FROM gone), stategraph_now_ms() "
    "ON CONFLICT (call_id) DO NOTHING";

} // namespace

asio::awaitable<void> postgres_saver::impl::acquire(const std::string& thread) {
    call c{thread, "taking the thread's lease", {}};
    auto body = [&](pg::connection& conn, call& cc) -> asio::awaitable<bool> {
        for (;;) {
            std::vector<pg::statement> batch;
            batch.emplace_back(sql_take_lease);
            batch.back().text(thread).text(owner).integer(lease_ms());
            if (cc.gone.empty()) batch.back().null();
            else batch.back().text(cc.gone);
            batch.emplace_back(sql_get_lease);
            batch.back().text(thread);
            auto res = co_await conn.run(batch, query_timeout());
            if (res[0].rows() > 0) co_return true;
            if (res[1].rows() == 0) continue; // released meanwhile: try again
            const auto holder = res[1].text(0, 0);
            if (holder != cc.gone && lease_owner::is_gone(holder)) {
                cc.gone = holder;
                continue;
            }
            throw_busy(thread, holder, res[1].integer(0, 1));
        }
    };
    (void)co_await with_retry<bool>(c, body);
    {
        std::lock_guard lock(mutex);
        held.insert(thread);
        lost.erase(thread);
    }
    start_keeper();
}

asio::awaitable<void> postgres_saver::impl::release(const std::string& thread) {
    // Forgotten first: a release that fails leaves a row that simply expires.
    {
        std::lock_guard lock(mutex);
        held.erase(thread);
        lost.erase(thread);
        running.erase(thread); // a call given up: its values no longer followed
    }
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_release_lease);
    batch.back().text(thread).text(owner);
    call c{thread, "releasing the thread's lease", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
        (void)co_await conn.run(batch, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

asio::awaitable<std::optional<std::string>> postgres_saver::impl::break_lease(const std::string& thread) {
    const std::string id = call_id();
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    batch.emplace_back(sql_break_lease);
    batch.back().text(thread).text(id);
    batch.emplace_back(sql_answer);
    batch.back().text(id);
    batch.emplace_back(sql_forget_answers);
    batch.emplace_back(sql_commit);
    call c{thread, "breaking the thread's lease", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<std::string>> {
        auto res = co_await conn.run(batch, query_timeout());
        if (res[2].rows() == 0 || res[2].is_null(0, 0)) co_return std::nullopt;
        co_return res[2].text(0, 0);
    };
    auto holder = co_await with_retry<std::optional<std::string>>(c, body);
    if (holder == owner) {
        std::lock_guard lock(mutex);
        lost.insert(thread);
    }
    co_return holder;
}

/// Extends every lease in `held` (not lost) by a full time to live, in one round trip; a
/// lease found gone joins `lost`. A failed renewal is tried again at the next tick.
asio::awaitable<void> postgres_saver::impl::renew_held() {
    std::vector<std::string> threads;
    {
        std::lock_guard lock(mutex);
        for (const auto& t : held)
            if (!lost.count(t)) threads.push_back(t);
    }
    if (threads.empty()) co_return;
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    for (const auto& t : threads) {
        batch.emplace_back(sql_renew_lease);
        batch.back().text(t).text(owner).integer(lease_ms());
    }
    batch.emplace_back(sql_commit);
    try {
        auto conn = co_await pool.get();
        try {
            auto res = co_await conn->run(batch, opt.lease_ttl);
            std::lock_guard lock(mutex);
            for (std::size_t i = 0; i < threads.size(); ++i)
                if (res[i + 1].affected() == 0 && held.count(threads[i])) lost.insert(threads[i]);
        } catch (const pg::connection_lost&) {
            conn.discard();
        }
    } catch (const std::exception&) {
    }
}

asio::awaitable<void> postgres_saver::impl::keep_leases(impl* self) {
    const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(self->lease_ms() / 3),
                                                            std::chrono::milliseconds(10));
    auto& k = self->keeper;
    while (!k.stopping) {
        k.timer->expires_after(period);
        auto [ec] = co_await k.timer->async_wait(asio::as_tuple(asio::use_awaitable));
        if (k.stopping) break;
        (void)ec;
        co_await self->renew_held();
    }
}

void postgres_saver::impl::start_keeper() {
    std::call_once(keeper.started, [this] {
        keeper.timer.emplace(keeper.io);
        asio::co_spawn(keeper.io, keep_leases(this), stategraph::detail::report_to("postgres_saver: the lease keeper"));
        keeper.thread = std::thread([this] { keeper.io.run(); });
    });
}

void postgres_saver::impl::stop_keeper() {
    keeper.stopping = true;
    if (!keeper.thread.joinable()) return;
    asio::post(keeper.io, [this] { keeper.timer->cancel(); });
    keeper.thread.join();
}

asio::awaitable<void> postgres_saver::impl::release_all() {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_release_all_leases);
    batch.back().text(owner);
    auto conn = co_await pool.get();
    try {
        (void)co_await conn->run(batch, opt.connect_timeout);
    } catch (const pg::connection_lost&) {
        conn.discard();
    }
}

// =============================================================================================

asio::awaitable<void> postgres_saver::acquire(std::string thread_id) { co_await impl_->acquire(thread_id); }

asio::awaitable<void> postgres_saver::release(std::string thread_id) { co_await impl_->release(thread_id); }

asio::awaitable<std::optional<std::string>> postgres_saver::break_lease(std::string thread_id) {
    co_return co_await impl_->break_lease(thread_id);
}

} // namespace stategraph::checkpoint
