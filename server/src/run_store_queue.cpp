// The run store's runs and their queue: submitting a run (the thread made or found, the
// multitask rules, the run queued), reading and listing runs, deleting one, and cancelling one
// (a pending run no worker holds ends at once). Claims, workers and events: run_store_workers.cpp.

#include "run_store_sql.hpp"

#include <algorithm>

namespace stategraph::server {

namespace json = boost::json;
namespace net = boost::asio;
using net::awaitable;

using namespace run_store_sql;

// -- runs -----------------------------------------------------------------------------------------

namespace run_store_sql {

awaitable<void> settle_thread_status(run_store_backend::session& s, const std::string& thread_key, std::int64_t when) {
    params p{thread_key, when};
    co_await s.exec("UPDATE sg_threads SET status = CASE WHEN EXISTS (SELECT 1 FROM sg_runs WHERE thread_key = ?1 AND "
                    "status IN ('pending', 'running')) THEN 'busy' ELSE rest_status END, updated_at = ?2 WHERE key = ?1",
                    std::move(p));
}

awaitable<void> drop_temporary_thread(run_store_backend::session& s, const std::string& thread_key) {
    params p{thread_key};
    co_await s.exec("DELETE FROM sg_threads WHERE key = ?1 AND is_temporary = 1 AND NOT EXISTS (SELECT 1 FROM sg_runs WHERE "
                    "thread_key = ?1)",
                    std::move(p));
}

awaitable<void> end_unheld(run_store_backend::session& s, const run_record& r, const std::string& status, const json::value& error,
                           std::int64_t when) {
    params p{r.run_id, status, error.is_null() ? sql_value{} : sql_value{text_of(error)}, when};
    co_await s.exec("UPDATE sg_runs SET status = ?2, error = ?3, worker = '', updated_at = ?4, finished_at = ?4 WHERE run_id = ?1",
                    std::move(p));
    if (!error.is_null()) {
        params t{r.thread_key, text_of(error)};
        co_await s.exec("UPDATE sg_threads SET rest_status = 'error', error = ?2 WHERE key = ?1", std::move(t));
    }
    co_await settle_thread_status(s, r.thread_key, when);
}

} // namespace run_store_sql

awaitable<submit_result> run_store::submit(run_record& run, submit_rules rules) {
    const std::string read_thread =
        "SELECT " + std::string(thread_cols) + " FROM sg_threads WHERE key = ?1" + std::string(be_->lock_rows());
    const std::string insert_thread = "INSERT INTO sg_threads (" + std::string(thread_cols) +
                                      ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) ON CONFLICT (key) "
                                      "DO NOTHING";
    const std::string queued_sql = "SELECT run_id, cancel FROM sg_runs WHERE thread_key = ?1 AND " + std::string(busy_where) +
                                   " ORDER BY seq" + std::string(be_->lock_rows());
    const std::string insert_run = "INSERT INTO sg_runs (" + std::string(run_cols) +
                                   ", finished_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, "
                                   "?16, ?17, ?18, ?19, ?20, ?21, ?22, NULL)";
    submit_result out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out = submit_result{};
        const auto when = now();
        params tp{run.thread_key};
        auto rows = co_await s.query(read_thread, std::move(tp));
        std::optional<thread_record> th;
        if (!rows.empty()) th = thread_of(rows.front());
        if (!th || (th->temporary && !(rules.create && rules.create->temporary))) {
            if (!rules.create || th) {
                out.refused = submit_refusal::thread_missing;
                co_return;
            }
            auto p = thread_params(*rules.create);
            if (co_await s.exec(insert_thread, std::move(p)) > 0) {
                th = *rules.create;
                out.created_thread = true;
            } else {
                // Another instance inserted it after the read (on PostgreSQL its row was not yet
                // committed, so the read did not see it): the run goes on that thread.
                params again{run.thread_key};
                auto made = co_await s.query(read_thread, std::move(again));
                if (made.empty() || (thread_of(made.front()).temporary && !rules.create->temporary)) {
                    out.refused = submit_refusal::thread_missing;
                    co_return;
                }
                th = thread_of(made.front());
            }
        }
        const std::string graph = th->graph_id.empty() ? rules.graph_id.str() : th->graph_id;
        if (!rules.graph_id.empty() && !th->graph_id.empty() && th->graph_id != rules.graph_id) {
            out.refused = submit_refusal::other_graph;
            out.graph_id = th->graph_id;
            co_return;
        }
        params qp{run.thread_key};
        auto queue = co_await s.query(queued_sql, std::move(qp));
        std::size_t live = 0;
        for (const auto& q : queue)
            if (q.text(1).empty()) ++live;
        out.queued = live;
        if (rules.reject_if_busy && !queue.empty()) {
            out.refused = submit_refusal::busy;
            out.busy_run = queue.front().text(0);
            co_return;
        }
        if (live >= std::max<std::size_t>(rules.max_queued, 1) && rules.cancel_others.empty()) {
            out.refused = submit_refusal::queue_full;
            co_return;
        }
        if (!rules.cancel_others.empty())
            for (const auto& q : queue) {
                if (!q.text(1).empty()) continue;
                params cp{q.text(0), rules.cancel_others.str(), when};
                co_await s.exec("UPDATE sg_runs SET cancel = ?2, updated_at = ?3 WHERE run_id = ?1", std::move(cp));
                out.cancelled.push_back(q.text(0));
            }
        // Pending runs nobody holds end at once.
        for (const auto& id : out.cancelled) {
            params rp{id};
            auto r = co_await s.query(select_runs("WHERE run_id = ?1"), std::move(rp));
            if (!r.empty()) {
                auto x = run_of(r.front());
                if (x.status == "pending" && x.worker.empty()) {
                    params e{x.run_id, std::string("interrupted"), sql_value{}, when};
                    co_await s.exec("UPDATE sg_runs SET status = ?2, error = ?3, updated_at = ?4, finished_at = ?4 WHERE run_id = ?1",
                                    std::move(e));
                }
            }
        }
        params none;
        auto seq = co_await s.query("UPDATE sg_counters SET value = value + 1 WHERE name = 'run_seq' RETURNING value", std::move(none));
        as_queued(run, seq.empty() ? 1 : seq.front().integer(0), when);
        params rp{run.run_id,
                  run.seq,
                  run.thread_key,
                  run.thread_id,
                  run.assistant_id,
                  run.graph_id,
                  run.owner,
                  run.created_at,
                  run.updated_at,
                  run.status,
                  text_of(run.metadata),
                  text_of(run.kwargs),
                  run.multitask,
                  text_of(run.spec),
                  run.not_before,
                  run.worker,
                  run.lease_until,
                  std::int64_t{0},
                  std::string(),
                  run.anchor.is_null() ? sql_value{} : sql_value{text_of(run.anchor)},
                  sql_value{},
                  sql_value{}};
        co_await s.exec(insert_run, std::move(rp));
        // The thread: busy, its graph chosen.
        json::object meta = th->metadata;
        if (th->graph_id.empty() && !graph.empty()) {
            meta["graph_id"] = graph;
            if (rules.graph_metadata)
                for (const auto& [k, v] : *rules.graph_metadata) meta[k] = v;
        }
        params up{run.thread_key, graph, text_of(meta), when};
        co_await s.exec("UPDATE sg_threads SET status = 'busy', graph_id = ?2, metadata = ?3, updated_at = ?4 WHERE key = ?1",
                        std::move(up));
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (out.refused != submit_refusal::none) return std::nullopt;
        return notice{"sg_runs", run.run_id};
    };
    co_await commit(work, news);
    co_return out;
}

awaitable<std::optional<run_record>> run_store::get_run(std::string run_id) {
    params p{std::move(run_id)};
    auto rows = co_await be_->query(select_runs("WHERE run_id = ?1"), std::move(p));
    if (rows.empty()) co_return std::nullopt;
    co_return run_of(rows.front());
}

awaitable<std::vector<run_record>> run_store::list_runs(std::string thread_key, std::optional<std::string> status, std::size_t limit,
                                                        std::size_t offset) {
    std::string where = "WHERE thread_key = ?1";
    params p{std::move(thread_key)};
    if (status) {
        where += " AND status = ?4";
    }
    where += " ORDER BY seq DESC LIMIT ?2 OFFSET ?3";
    p.emplace_back(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
    p.emplace_back(static_cast<std::int64_t>(std::min<std::size_t>(offset, INT64_MAX)));
    if (status) p.emplace_back(*status);
    auto rows = co_await be_->query(select_runs(where), std::move(p));
    std::vector<run_record> out;
    for (const auto& r : rows) out.push_back(run_of(r));
    co_return out;
}

awaitable<std::vector<run_record>> run_store::runs_after(std::string thread_key, std::int64_t after) {
    params p{std::move(thread_key), after};
    auto rows = co_await be_->query(select_runs("WHERE thread_key = ?1 AND seq > ?2 ORDER BY seq"), std::move(p));
    std::vector<run_record> out;
    for (const auto& r : rows) out.push_back(run_of(r));
    co_return out;
}

awaitable<std::int64_t> run_store::current_seq(std::string thread_key) {
    params p{thread_key};
    auto rows = co_await be_->query("SELECT MIN(seq) FROM sg_runs WHERE thread_key = ?1 AND " + std::string(busy_where), std::move(p));
    if (!rows.empty() && !rows.front().is_null(0)) co_return rows.front().integer(0);
    params q{thread_key};
    auto last = co_await be_->query("SELECT MAX(seq) FROM sg_runs WHERE thread_key = ?1", std::move(q));
    co_return last.empty() || last.front().is_null(0) ? 0 : last.front().integer(0);
}

awaitable<bool> run_store::delete_run(std::string run_id) {
    bool removed = false;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        params p{run_id};
        auto rows = co_await s.query("SELECT status, thread_key FROM sg_runs WHERE run_id = ?1" + std::string(be_->lock_rows()),
                                     std::move(p));
        removed = false;
        if (rows.empty()) co_return;
        const auto st = rows.front().text(0);
        if (st == "pending" || st == "running") co_return;
        params e{run_id};
        co_await s.exec("DELETE FROM sg_run_events WHERE run_id = ?1", std::move(e));
        params d{run_id};
        removed = co_await s.exec("DELETE FROM sg_runs WHERE run_id = ?1", std::move(d)) > 0;
        const std::string key = rows.front().text(1);
        co_await drop_temporary_thread(s, key); // a stateless run's thread goes with its last run
    };
    co_await be_->transaction(work);
    co_return removed;
}

awaitable<std::optional<run_record>> run_store::cancel(std::string run_id, std::string action) {
    if (action != "interrupt" && action != "rollback")
        throw std::invalid_argument("run_store::cancel: action must be interrupt or rollback (got '" + action + "')");
    std::optional<run_record> out;
    const run_store_backend::body work = [&](run_store_backend::session& s) -> awaitable<void> {
        out.reset();
        const auto when = now();
        params p{run_id};
        auto rows = co_await s.query(select_runs("WHERE run_id = ?1") + std::string(be_->lock_rows()), std::move(p));
        if (rows.empty()) co_return;
        auto r = run_of(rows.front());
        if (!r.finished()) {
            // rollback wins over interrupt; a run already asked keeps the stronger action
            std::string act = r.cancel == "rollback" ? r.cancel : action;
            params c{r.run_id, act, when};
            co_await s.exec("UPDATE sg_runs SET cancel = ?2, updated_at = ?3 WHERE run_id = ?1", std::move(c));
            r.cancel = act;
            if (r.status == "pending" && r.worker.empty()) {
                co_await end_unheld(s, r, "interrupted", nullptr, when);
                r.status = "interrupted";
            }
        }
        out = std::move(r);
    };
    const news_of news = [&]() -> std::optional<notice> {
        if (!out) return std::nullopt;
        return notice{"sg_runs", "cancel:" + run_id};
    };
    co_await commit(work, news);
    co_return out;
}

} // namespace stategraph::server
