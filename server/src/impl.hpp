// Internal to stategraph::server: the server's state and the parts that share it. Each part is
// a file of its own:
//   server.cpp      the public API, sessions (HTTP/1.1 reading and answering), dispatch
//   threads.cpp     thread records (/threads...): create, read, search, copy, state, history
//   runs.cpp        runs: creation (admission to the queue in the run store), /threads/{id}/runs
//   run_streams.cpp  what clients see of a run: its stream, a thread's stream, wait and join
//   run_cancel.cpp  cancellation: one run, the bulk cancel, a run executing here
//   run_workers.cpp  this instance's workers: dispatcher (claims), heartbeat, reclaim, drain
//   run_execute.cpp  executing a claimed run: its events, rollback, its end
//   assistants.cpp  /assistants...: the graphs served, their drawings and schemas
//   store_routes.cpp  /store/...: the long-term memory Store
// Records live in the run store (run_store.hpp); this process keeps only what it executes (its
// live runs) and who waits for what. One io_context thread: nothing here locks.
#pragma once

#include "common.hpp"
#include "run_meter.hpp"
#include "server_metrics.hpp"

namespace stategraph::server {

struct assistant_rec {
    assistant_spec spec;
    std::string assistant_id;
    std::string created_at;
    json_graph graph; ///< the spec's graph with JSON in and out (made from `spec.core`)
    /// An assistant made over the API: its record (the graph is the served one of its graph_id).
    std::optional<assistant_record> stored;
};

/// Where a run's webhook goes (webhook.cpp).
struct webhook_target {
    bool tls = false;
    std::string host, port, target;
};
/// The webhook `url` taken apart; a 422 naming the field when it is not an absolute http(s) URL
/// (or https in a build without OpenSSL).
webhook_target parse_webhook(std::string_view url);

/// Readers of a run's spec (the object create_run stores and the worker reads), shared by the
/// run files (defined in runs.cpp).
namespace run_spec {
/// The stream modes the run asked for (event names); "values" when none.
std::set<std::string> modes_of(const json::object& spec);
/// Whether `spec[k]` is the boolean true.
bool flag_of(const json::object& spec, std::string_view k);
} // namespace run_spec

/// A run this instance executes (claimed from the run store).
struct live_run {
    run_record rec;
    std::set<std::string> modes; ///< stream modes asked for (event names)
    bool subgraphs = false;
    /// A /runs/wait run that asked for no stream mode and is not `stream_resumable`: the engine
    /// builds no per-step event for it, and it records only its metadata, its final values (the
    /// answer, with `__interrupt__` when it stopped at one) and an error. A stream joining it sees
    /// those (LangGraph keeps no events of a run that is not resumable). Not quiet when a thread
    /// stream watches its thread on the instance that claims it (`thread_watchers`).
    bool quiet = false;
    std::shared_ptr<net::cancellation_signal> cancel = std::make_shared<net::cancellation_signal>();
    std::string cancel_action; ///< "", "interrupt", "rollback": asked to stop
    bool lost = false;         ///< another instance took the run over: write nothing more
    std::int64_t next_event = 0;
    std::vector<run_event> buffered; ///< events not yet in the store
    bool flushing = false;
    bool gathering = false; ///< a flush waits for more events before writing (none being written)
    bool ending = false;    ///< the run's end writes the events still buffered (a flush leaves them)
    bool flush_failed = false;
    waiter_list flushed; ///< woken when a flush ends
    std::string last_values; ///< the last root values event's data, JSON text ("": none)
    /// the values recorded as the run's last event at its end (a quiet run's answer), kept so
    /// that its result is not parsed back from `last_values`
    std::optional<json::value> final_values;
    bool langchain_events = false; ///< stream mode "events" asked for (LangChain's astream_events v2)
    std::map<std::string, json::value> task_inputs; ///< for "events": a running task's input, by task id
    /// for the legacy "messages" mode: each message streamed so far, accumulated from its chunks
    /// (keyed by namespace and message id)
    std::map<std::string, json::object> legacy_messages;
    run_meter meter; ///< the engine's observer for the run: node and checkpoint times, token usage
};

struct server::impl : std::enable_shared_from_this<impl> {
    net::any_io_executor ex;
    server_options opts;
    tcp::acceptor acceptor;
    unsigned short bound = 0;
    bool stopping = false; ///< no new connections, streams end
    bool draining = false; ///< no new runs start here; running ones stop at a step boundary and go back to the queue
    bool stopping_workers = false; ///< no new claims (stop, or a drain's end)
    std::shared_ptr<run_store> store;
    std::string instance;
    std::vector<std::shared_ptr<assistant_rec>> assistants;
    std::map<std::string, std::shared_ptr<live_run>> local; ///< run id -> the runs executing here
    std::map<std::string, waiter_list> run_watch;           ///< run id -> who waits for news of it (events, its end)
    /// run id -> who waits only for its end (/runs/wait, join, cancel?wait): not woken by each
    /// flush of its events, which would have them read the whole run again each time.
    std::map<std::string, waiter_list> run_end_watch;
    /// run id -> the record of a run that ended here while someone here waited for its end:
    /// the waiter takes it instead of reading the run back from the store (taken once; a second
    /// waiter reads the store).
    std::map<std::string, run_record> ended_here;
    waiter_list runs_changed;  ///< thread streams: a run was queued or ended (here or, notified, elsewhere)
    /// thread key -> how many thread streams (`GET /threads/{id}/stream`) are open on this
    /// instance: a quiet run of such a thread that starts here records its steps' events.
    std::map<std::string, int> thread_watchers;
    /// Waiters of single runs, besides their own `run_watch` list: news that names no run
    /// (claims expired, runs ended by a sweep). A waiter is not woken by other runs' news (with
    /// many clients waiting, each notification would otherwise re-read every waiting run).
    waiter_list any_run_wake;
    waiter_list dispatch_wake; ///< the dispatcher: a run was queued, a worker is free
    waiter_list drained_wake;  ///< drain: a live run ended, or a webhook was delivered or given up
    std::size_t webhooks_in_flight = 0; ///< webhooks being sent (a drain waits for them too)
    std::list<beast::tcp_stream*> sessions;
    std::size_t open_connections = 0;
    server_metrics metrics; ///< GET /metrics (metrics.cpp)
    bool dispatching = false, beating = false, listening = false;
    /// How long a waiter on a run executing elsewhere (or queued) waits before it looks again
    /// when nothing woke it: with wake-ups between instances (`listening`) the news comes as a
    /// notification and this is only a safety net; without them it is the poll interval.
    std::chrono::milliseconds news_interval() const {
        return listening ? std::max(opts.poll_interval, std::chrono::milliseconds(1000)) : opts.poll_interval;
    }

    impl(net::any_io_executor e, server_options o);

    // -- lookups (threads.cpp) ------------------------------------------------------------------
    std::shared_ptr<assistant_rec> find_assistant(const std::string& id) const;
    std::shared_ptr<assistant_rec> assistant_or_404(const std::string& id) const;
    /// A served graph (by graph id or assistant id) or an assistant the caller made over the API
    /// (its latest version, or `version`); a 404 naming the id otherwise.
    awaitable<std::shared_ptr<assistant_rec>> resolve_assistant(const call& c, const std::string& id, std::int64_t version = 0);
    std::shared_ptr<assistant_rec> graph_of(const thread_record& th) const {
        return th.graph_id.empty() ? nullptr : find_assistant(th.graph_id);
    }
    /// The thread `owner` calls `id` (temporary ones included), or nullopt. Another owner's
    /// thread of that id is never found: it is kept elsewhere (storage_id).
    awaitable<std::optional<thread_record>> find_thread(std::string owner, std::string id);
    awaitable<thread_record> thread_or_404(const call& c, std::string id);
    /// A new thread record (not stored); metadata.graph_id, when given, must name a graph served.
    thread_record new_thread(std::string id, std::string owner, json::object metadata) const;
    /// The updates of `POST /threads`'s `supersteps` for the new thread `th`, every one checked
    /// (a 422 naming `supersteps[i].updates[j]...`); empty without supersteps.
    std::vector<json_update> superstep_updates(const json::object& body, const thread_record& th) const;
    /// Stops run `run_id` if it executes here: its cancellation fires once with `action`; a
    /// later rollback turns an interrupt into a rollback (the run's checkpoints then go too).
    void cancel_local(const std::string& run_id, const std::string& action);
    /// `POST /runs/cancel`: LangGraph's bulk cancel.
    awaitable<void> cancel_runs(call& c);
    static json::object thread_json(const thread_record& t);
    /// `th` with its values, interrupts and resting status read from its latest checkpoint.
    awaitable<thread_record> refreshed(thread_record th);
    awaitable<void> drop_thread(thread_record th);
    void log_line(const std::string& line) const {
        if (opts.log) opts.log(line);
    }
    /// The completion handler of a coroutine spawned on its own (in place of `detached`, which
    /// would drop its exception): an exception is logged, naming `what`.
    auto logged(std::string what) {
        return [self = shared_from_this(), what = std::move(what)](std::exception_ptr e) {
            if (!e) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                self->log_line(what + " stopped on an error: " + x.what());
            } catch (...) {
                self->log_line(what + " stopped on an error");
            }
        };
    }
    /// Threads kept by an earlier server whose records the run store lacks: those recorded in
    /// the first checkpointer's node cache (servers before the run store), then, without API
    /// keys, threads found in the checkpointers.
    static awaitable<void> adopt_threads(std::shared_ptr<impl> self);
    json::object assistant_json(const assistant_rec& a) const;

    // -- runs (runs.cpp, run_streams.cpp, run_cancel.cpp) ---------------------------------------
    awaitable<void> create_run(call& c, bool stateless, const std::string& how);
    awaitable<void> route_runs(call& c, const thread_record& th);
    awaitable<run_record> run_or_404(const call& c, const thread_record& th, const std::string& rid);
    std::set<std::string> parse_modes(const json::value* v) const;
    std::optional<std::set<std::string>> query_modes(const call& c) const;
    std::vector<std::pair<std::string, std::string>> location_headers(const run_record& run, bool sse) const;
    awaitable<void> relay(call& c, run_record run, std::set<std::string> modes, std::int64_t after, bool cancel_on_disconnect);
    awaitable<bool> relay_events(call& c, std::string run_id, std::set<std::string> modes, std::int64_t after);
    awaitable<void> relay_thread(call& c, thread_record th, std::optional<std::set<std::string>> modes);
    awaitable<void> wait_and_answer(call& c, const run_record& run, bool created, bool cancel_on_disconnect);
    awaitable<void> cancel_and_maybe_wait(call& c, run_record run, std::string action, bool wait);
    static json::object run_json(const run_record& r);
    /// POSTs a finished run to its webhook, retrying; logs a failure (webhook.cpp).
    static awaitable<void> send_webhook(std::shared_ptr<impl> self, std::string url, std::string body, std::string run_id);
    static json::value result_of(const run_record& r);

    void wake(waiter_list& w) {
        for (auto* t : w) t->cancel();
    }
    /// News of a run that may be its end (it ended, was cancelled, a notification named it).
    void wake_run(const std::string& run_id) {
        wake_run_events(run_id);
        if (auto it = run_end_watch.find(run_id); it != run_end_watch.end()) wake(it->second);
    }
    /// New events of a run: its streams look.
    void wake_run_events(const std::string& run_id) {
        if (auto it = run_watch.find(run_id); it != run_watch.end()) wake(it->second);
    }
    /// Waits for news of `run_id` (local events, a notification) or `timeout`; with `end_only`,
    /// for news that may be its end.
    awaitable<void> wait_run(const std::string& run_id, std::chrono::milliseconds timeout, bool end_only = false);
    void on_notification(const std::string& channel, const std::string& payload);

    // workers (run_workers.cpp; executing a run, its events and rollback: run_execute.cpp)
    void start_workers();
    static awaitable<void> dispatch_loop(std::shared_ptr<impl> self);
    static awaitable<void> heartbeat_loop(std::shared_ptr<impl> self);
    static awaitable<void> execute(std::shared_ptr<impl> self, std::shared_ptr<live_run> run);
    void record(live_run& run, std::string name, const json::value& data);
    void on_engine_event(live_run& run, const stream_event& e);
    /// Stream mode "events": LangChain's astream_events v2 records made from engine event `e`.
    void record_langchain_events(live_run& run, const stream_event& e);
    /// Stream mode "messages" (legacy): messages/metadata, messages/partial, messages/complete.
    void record_legacy_messages(live_run& run, const stream_event& e);
    /// Stream mode "events": the graph's own on_chain_start (`start`) or on_chain_end.
    void record_graph_event(live_run& run, bool start, json::value data);
    static awaitable<void> flush(std::shared_ptr<impl> self, std::shared_ptr<live_run> run);
    awaitable<void> flush_all(std::shared_ptr<live_run> run);
    /// The newest checkpoint id of the thread's namespaces that a resume continues ("": none).
    static awaitable<std::string> rollback_anchor(std::shared_ptr<assistant_rec> a, std::string thread_id);
    static awaitable<void> roll_back(std::shared_ptr<checkpoint::saver> saver, std::string thread_id, std::string anchor);
    /// Runs whose worker was this host's process that is gone (a restart after SIGKILL): their
    /// claims expire now, not after the lease.
    static awaitable<void> reclaim_dead_local(std::shared_ptr<impl> self);
    static awaitable<void> wait_idle(std::shared_ptr<impl> self, std::function<void()> done);

    // -- routes -------------------------------------------------------------------------------
    awaitable<void> dispatch(call& c);
    awaitable<void> route_assistants(call& c);
    awaitable<void> create_assistant(call& c);  ///< POST /assistants
    awaitable<void> change_assistant(call& c);  ///< PATCH, DELETE, versions, latest of /assistants/{id}
    awaitable<void> route_threads(call& c);
    awaitable<void> route_store(call& c);
    awaitable<void> serve_metrics(call& c); ///< GET /metrics (metrics.cpp)

    awaitable<void> session(tcp::socket sock);
    awaitable<void> accept_loop();
    static awaitable<void> adopt_then_accept(std::shared_ptr<impl> self);
    static awaitable<void> refuse(std::shared_ptr<impl> self, tcp::socket sock);
};

} // namespace stategraph::server
