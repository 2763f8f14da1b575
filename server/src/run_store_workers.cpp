// The run store's workers and events: claiming a run (ending those cancelled or out of
// attempts), leases (heartbeat, expiry), a run's end (finish, with the oldest finished runs
// trimmed) or its hand-back (release), and the events a run's worker appends and its streams read.

#include "run_store_sql.hpp"

#include <algorithm>
#include <set>

namespace stategraph::server {

namespace json = boost::json;
namespace net = boost::asio;
using net::awaitable;

using namespace run_store_sql;

namespace {

/// Removes the oldest finished runs beyond `keep` (their events too, and a stateless run's
/// thread with its last run).
awaitable<void> trim_finished(run_store_backend::session& s, std::size_t keep) {
    params none;
    auto count = co_await s.query("SELECT COUNT(*) FROM sg_runs WHERE finished_at IS NOT NULL", std::move(none));
    const auto n = count.empty() ? 0 : count.front().integer(0);
    const auto bound = static_cast<std::int64_t>(std::max<std::size_t>(keep, 1));
    if (n <= bound) co_return;
    params p{n - bound};
    const std::string oldest =
        "SELECT run_id, thread_key FROM sg_runs WHERE finished_at IS NOT NULL ORDER BY finished_at, seq LIMIT ?1";
    auto rows = co_await s.query(oldest, std::move(p));
    std::set<std::string> threads;
    for (const auto& r : rows) {
        params e{r.text(0)};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1", std::move(e));
        params d{r.text(0)};
        co_await s.exec("DELETE FROM sg_runs WHERE run_id = ?1", std::move(d));
        threads.insert(r.text(1));
    }
    // Only the threads of the runs removed: a sweep of every temporary thread read them all
    // (7 ms at 10,000 kept runs, a tenth of a busy server's time).
    for (const auto& key : threads) co_await drop_temporary_thread(s, key);
}

/// Appends a run's events (their ids follow those stored) and drops the oldest beyond `keep`.
awaitable<void> store_events(run_store_backend::session& s, const std::string& run_id, std::span<const run_event> events,
                             std::int64_t keep) {
    if (events.empty()) co_return;
    std::vector<params> each;
    each.reserve(events.size());
    for (const auto& e : events) each.push_back(params{run_id, e.id, e.name, e.data});
    co_await s.exec_many("INSERT INTO sg_run_events (run_id, id, name, data) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (run_id, id) "
                         "DO UPDATE SET name = excluded.name, data = excluded.data",
                         each);
    if (events.back().id + 1 > keep) { // beyond the bound: the oldest go
        params tp{run_id, events.back().id + 1 - keep};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1 AND id < ?2", std::move(tp));
    }
}

} // namespace

// -- workers --------------------------------------------------------------------------------------

awaitable<std::optional<run_record>> run_store::claim(std::string worker) {
    const std::string who = std::move(worker);
    auto some = co_await claim_some(who, 1);
    if (some.empty()) co_return std::nullopt;
    co_return std::move(some.front());
}

awaitable<std::vector<run_record>> run_store::claim_some(std::string worker, std::size_t most) {
    std::vector<run_record> out;
    if (most == 0) co_return out;
    most = std::min<std::size_t>(most, 64);
    // A few more candidates than wanted: those cancelled or out of attempts end instead.
    const std::string find =
        select_runs("WHERE ((status = 'pending' AND not_before <= ?1) OR (status = 'running' AND lease_until < ?1)) AND seq = "
                    "(SELECT MIN(q.seq) FROM sg_runs q WHERE q.thread_key = sg_runs.thread_key AND q.status IN ('pending', "
                    "'running')) ORDER BY seq LIMIT ?2") +
        std::string(be_->lock_rows_skip_locked());
    bool ended_some = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out.clear();
        ended_some = false;
        const auto when = now();
        params p{when, static_cast<std::int64_t>(most + 7)};
        auto rows = co_await s.query(find, std::move(p));
        for (const auto& row : rows) {
            auto r = run_of(row);
            if (!r.cancel.empty()) { // asked to stop before (or while) its worker held it
                co_await end_unheld(s, r, "interrupted", nullptr, when);
                ended_some = true;
                continue;
            }
            if (r.attempts >= std::max(opts_.max_attempts, 1)) {
                const json::value err = attempts_exhausted(r, opts_.max_attempts);
                co_await end_unheld(s, r, "error", err, when);
                r.status = "error";
                ended_some = true;
                continue;
            }
            const auto lease = std::chrono::duration_cast<std::chrono::microseconds>(opts_.lease).count();
            r.status = "running";
            r.worker = worker;
            r.lease_until = when + lease;
            ++r.attempts;
            r.updated_at = when;
            params c{r.run_id, worker, r.lease_until, static_cast<std::int64_t>(r.attempts), when};
            co_await s.exec("UPDATE sg_runs SET status = 'running', worker = ?2, lease_until = ?3, attempts = ?4, updated_at = ?5 "
                            "WHERE run_id = ?1",
                            std::move(c));
            out.push_back(std::move(r));
            if (out.size() == most) co_return;
        }
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!ended_some) return std::nullopt;
        return notice{"sg_runs", "ended"};
    };
    co_await commit(work, news);
    co_return out;
}

awaitable<std::optional<std::int64_t>> run_store::next_due() {
    params none;
    auto rows = co_await be_->query("SELECT MIN(not_before) FROM sg_runs WHERE status = 'pending'", std::move(none));
    if (rows.empty() || rows.front().is_null(0)) co_return std::nullopt;
    co_return rows.front().integer(0);
}

awaitable<run_store::heartbeat_result> run_store::heartbeat(std::string worker, std::vector<std::string> runs) {
    heartbeat_result out;
    if (runs.empty()) co_return out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out = heartbeat_result{};
        const auto when = now();
        const auto lease = std::chrono::duration_cast<std::chrono::microseconds>(opts_.lease).count();
        for (const auto& id : runs) {
            params p{id, worker, when + lease};
            auto rows = co_await s.query("UPDATE sg_runs SET lease_until = ?3 WHERE run_id = ?1 AND worker = ?2 AND status = "
                                         "'running' RETURNING cancel",
                                         std::move(p));
            if (rows.empty()) out.lost.push_back(id);
            else if (auto c = rows.front().text(0); !c.empty()) out.cancelled.emplace_back(id, c);
        }
    };
    co_await be_->transaction(work);
    co_return out;
}

awaitable<void> run_store::set_anchor(std::string run_id, std::string worker, json::value anchor) {
    params p{run_id, worker, text_of(anchor)};
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params q = p;
        co_await s.exec("UPDATE sg_runs SET anchor = ?3 WHERE run_id = ?1 AND worker = ?2 AND anchor IS NULL", std::move(q));
    };
    co_await be_->transaction(work);
}

awaitable<bool> run_store::finish(const run_record& run, std::string worker, const thread_record* thread,
                                  std::span<const run_event> events) {
    bool held = false;
    const auto keep = static_cast<std::int64_t>(std::max<std::size_t>(opts_.max_events_per_run, 1));
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        held = false;
        const auto when = now();
        // One statement both checks the run is still this worker's and ends it. The spec is
        // written again only when it gained the run's token usage (spec.usage, known only now).
        const bool with_usage = run.spec.contains("usage");
        params u{run.run_id,
                 run.status,
                 run.result.is_null() ? sql_value{} : sql_value{text_of(run.result)},
                 run.error.is_null() ? sql_value{} : sql_value{text_of(run.error)},
                 when,
                 worker};
        if (with_usage) u.push_back(text_of(run.spec));
        held = co_await s.exec(with_usage ? "UPDATE sg_runs SET status = ?2, result = ?3, error = ?4, updated_at = ?5, "
                                            "finished_at = ?5, worker = '', spec = ?7 "
                                            "WHERE run_id = ?1 AND worker = ?6 AND status = 'running'"
                                          : "UPDATE sg_runs SET status = ?2, result = ?3, error = ?4, updated_at = ?5, "
                                            "finished_at = ?5, worker = '' "
                                            "WHERE run_id = ?1 AND worker = ?6 AND status = 'running'",
                               std::move(u)) > 0;
        if (!held) co_return;
        co_await store_events(s, run.run_id, events, keep);
        if (thread) {
            thread_record t = *thread;
            t.updated_at = when;
            auto tp = thread_params(t);
            co_await s.exec("UPDATE sg_threads SET thread_id = ?2, owner = ?3, graph_id = ?4, created_at = ?5, updated_at = ?6, "
                            "state_updated_at = ?7, metadata = ?8, rest_status = ?9, values_json = ?10, interrupts = ?11, "
                            "error = ?12, is_temporary = ?13 WHERE key = ?1",
                            std::move(tp));
        }
        co_await settle_thread_status(s, run.thread_key, when);
        // The oldest finished runs go in batches (every 32nd run, and whenever few are kept),
        // not on every finish: counting them reads the whole index.
        if (run.seq % 32 == 0 || opts_.max_finished_runs < 1000) co_await trim_finished(s, opts_.max_finished_runs);
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_runs", "done:" + run.run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<bool> run_store::release(std::string run_id, std::string worker) {
    bool held = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{run_id, worker, now()};
        held = co_await s.exec("UPDATE sg_runs SET status = 'pending', worker = '', lease_until = 0, attempts = CASE WHEN "
                               "attempts > 0 THEN attempts - 1 ELSE 0 END, not_before = 0, updated_at = ?3 WHERE run_id = ?1 AND "
                               "worker = ?2 AND status = 'running'",
                               std::move(p)) > 0;
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_runs", run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<std::vector<std::pair<std::string, std::string>>> run_store::cancel_requests(std::string worker) {
    params p{std::move(worker)};
    auto rows = co_await be_->query("SELECT run_id, cancel FROM sg_runs WHERE worker = ?1 AND status = 'running' AND cancel <> ''",
                                    std::move(p));
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& r : rows) out.emplace_back(r.text(0), r.text(1));
    co_return out;
}

awaitable<std::vector<std::string>> run_store::running_workers() {
    params none;
    auto rows = co_await be_->query("SELECT DISTINCT worker FROM sg_runs WHERE status = 'running' AND worker <> ''", std::move(none));
    std::vector<std::string> out;
    for (const auto& r : rows) out.push_back(r.text(0));
    co_return out;
}

awaitable<std::map<std::string, std::int64_t>> run_store::count_runs() {
    params none;
    auto rows = co_await be_->query("SELECT status, COUNT(*) FROM sg_runs GROUP BY status", std::move(none));
    std::map<std::string, std::int64_t> out;
    for (const auto& r : rows) out[r.text(0)] = r.integer(1);
    co_return out;
}

awaitable<std::size_t> run_store::expire_worker(std::string worker) {
    std::size_t n = 0;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{worker};
        n = static_cast<std::size_t>(
            co_await s.exec("UPDATE sg_runs SET lease_until = 0 WHERE worker = ?1 AND status = 'running'", std::move(p)));
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!n) return std::nullopt;
        return notice{"sg_runs", "expired"};
    };
    co_await commit(work, news);
    co_return n;
}

// -- events ---------------------------------------------------------------------------------------

awaitable<bool> run_store::append_events(std::string run_id, std::string worker, std::vector<run_event> events) {
    if (events.empty()) co_return true;
    bool held = false;
    const auto keep = static_cast<std::int64_t>(std::max<std::size_t>(opts_.max_events_per_run, 1));
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        held = false;
        params p{run_id, worker};
        auto rows = co_await s.query("SELECT status FROM sg_runs WHERE run_id = ?1 AND worker = ?2 AND status = 'running'" +
                                         std::string(be_->lock_rows()),
                                     std::move(p));
        if (rows.empty()) co_return;
        held = true;
        const std::span<const run_event> all(events);
        co_await store_events(s, run_id, all, keep);
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!held) return std::nullopt;
        return notice{"sg_events", run_id};
    };
    co_await commit(work, news);
    co_return held;
}

awaitable<std::vector<run_event>> run_store::read_events(std::string run_id, std::int64_t from, std::size_t limit) {
    params p{std::move(run_id), from, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX))};
    auto rows = co_await be_->query("SELECT id, name, data FROM sg_run_events WHERE run_id = ?1 AND id >= ?2 ORDER BY id LIMIT ?3",
                                    std::move(p));
    std::vector<run_event> out;
    out.reserve(rows.size());
    for (const auto& r : rows) out.push_back(run_event{r.integer(0), r.text(1), r.text(2)});
    co_return out;
}

awaitable<std::pair<std::int64_t, std::int64_t>> run_store::event_bounds(std::string run_id) {
    params p{std::move(run_id)};
    auto rows = co_await be_->query("SELECT MIN(id), MAX(id) FROM sg_run_events WHERE run_id = ?1", std::move(p));
    if (rows.empty() || rows.front().is_null(0)) co_return std::pair<std::int64_t, std::int64_t>{0, 0};
    co_return std::pair<std::int64_t, std::int64_t>{rows.front().integer(0), rows.front().integer(1) + 1};
}

} // namespace stategraph::server
