#pragma once
// Internal to the run store (run_store.cpp, run_store_queue.cpp, run_store_workers.cpp): its
// tables' rows as records and back (defined in run_store.cpp), and the steps of a transaction
// that more than one of those files takes (defined in run_store_queue.cpp).

#include <stategraph/server/run_store.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stategraph::server::run_store_sql {

using params = std::vector<sql_value>;

/// JSON text any reader (and PostgreSQL's TEXT) takes.
std::string text_of(const boost::json::value& v);
std::string text_of(const boost::json::object& o);

// -- threads ------------------------------------------------------------------------------------

inline constexpr std::string_view thread_cols =
    "key, thread_id, owner, graph_id, created_at, updated_at, state_updated_at, metadata, status, values_json, "
    "interrupts, error, is_temporary";

thread_record thread_of(const sql_row& r);
params thread_params(const thread_record& t);

// -- runs ---------------------------------------------------------------------------------------

inline constexpr std::string_view run_cols =
    "run_id, seq, thread_key, thread_id, assistant_id, graph_id, owner, created_at, updated_at, status, metadata, "
    "kwargs, multitask, spec, not_before, worker, lease_until, attempts, cancel, anchor, result, error";

run_record run_of(const sql_row& r);
std::string select_runs(std::string_view where);

inline constexpr std::string_view busy_where = "status IN ('pending', 'running')";

/// A run as `submit` queues it (both stores): its seq, pending, no worker, claim or cancel yet.
inline void as_queued(run_record& run, std::int64_t seq, std::int64_t when) {
    run.seq = seq;
    run.status = "pending";
    run.created_at = run.updated_at = when;
    run.worker.clear();
    run.attempts = 0;
    run.cancel.clear();
    run.lease_until = 0;
}

/// The error of a run claimed `max_attempts` times whose worker stopped each time (both stores).
inline boost::json::value attempts_exhausted(const run_record& r, int max_attempts) {
    return boost::json::object{
        {"error", "RunAttemptsExhausted"},
        {"message", "run '" + r.run_id + "' on thread '" + r.thread_id + "' was started " + std::to_string(r.attempts) +
                        " times and its worker stopped each time (the most is " + std::to_string(max_attempts) +
                        " attempts); it is not started again"}};
}

/// The thread's status once `run` left its queue: busy while others wait, else what it rests at.
boost::asio::awaitable<void> settle_thread_status(run_store_backend::session& s, const std::string& thread_key, std::int64_t when);

/// Removes `thread_key`'s thread when it is a stateless run's (temporary) and has no run left.
boost::asio::awaitable<void> drop_temporary_thread(run_store_backend::session& s, const std::string& thread_key);

/// Ends a run no worker holds (cancelled while pending, or out of attempts).
boost::asio::awaitable<void> end_unheld(run_store_backend::session& s, const run_record& r, const std::string& status,
                                        const boost::json::value& error, std::int64_t when);

} // namespace stategraph::server::run_store_sql
