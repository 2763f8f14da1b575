// Cancelling runs: one run (POST .../runs/{id}/cancel, optionally waiting for its end), LangGraph's
// bulk cancel (POST /runs/cancel), and stopping a run that executes on this instance.

#include "impl.hpp"

namespace stategraph::server {

void server::impl::cancel_local(const std::string& run_id, const std::string& action) {
    auto it = local.find(run_id);
    if (it == local.end()) return;
    auto& l = *it->second;
    if (l.cancel_action.empty()) {
        l.cancel_action = action;
        l.cancel->emit(net::cancellation_type::terminal);
    } else if (action == "rollback") {
        l.cancel_action = action; // the run's checkpoints go too
    }
}

awaitable<void> server::impl::cancel_runs(call& c) {
    // LangGraph's bulk cancel: {thread_id, run_ids?} or {status: pending | running | all}, action.
    json::object body = body_object(c);
    const std::string action = one_of(body, "action", {"interrupt", "rollback"});
    auto tid = opt_string(body, "thread_id");
    auto status = opt_string(body, "status");
    if (status && *status != "pending" && *status != "running" && *status != "all")
        throw http_error(422, "field 'status' must be pending, running or all (got '" + *status + "')");
    std::vector<std::string> ids;
    if (const auto* v = field(body, "run_ids"); v && !v->is_null()) {
        if (!v->is_array()) wrong_type("run_ids", "a list of run ids", *v);
        for (const auto& id : v->get_array()) {
            if (!id.is_string() || !is_uuid(std::string(id.get_string())))
                throw http_error(422, "field 'run_ids' must hold run ids (UUIDs)");
            ids.emplace_back(id.get_string());
        }
    }
    if (ids.empty() && !tid && !status)
        throw http_error(422, "send 'thread_id' (with 'run_ids' or not), 'run_ids', or 'status' (pending, running or all)");
    std::vector<run_record> targets;
    std::optional<thread_record> th;
    if (tid) {
        if (!is_uuid(*tid)) throw http_error(422, "thread_id '" + *tid + "' is not a UUID");
        th = co_await find_thread(c.owner, *tid);
        if (!th) throw http_error(404, "thread '" + *tid + "' not found");
    }
    if (!ids.empty()) {
        for (const auto& id : ids) {
            auto r = co_await store->get_run(id);
            // Another key's run, or another thread's, is not found (nothing is learnt about it).
            if (!r || r->owner != c.owner || (th && r->thread_key != th->key)) throw http_error(404, "run '" + id + "' not found");
            targets.push_back(std::move(*r));
        }
    } else if (th) {
        for (const char* st : {"pending", "running"})
            for (auto& r : co_await store->list_runs(th->key, std::string(st), 100000, 0)) targets.push_back(std::move(r));
    } else {
        thread_query q;
        q.owner = c.owner;
        for (const auto& t : co_await store->list_threads(q))
            for (const char* st : {"pending", "running"})
                if (*status == "all" || *status == st)
                    for (auto& r : co_await store->list_runs(t.key, std::string(st), 100000, 0)) targets.push_back(std::move(r));
    }
    for (const auto& r : targets) {
        if (r.finished()) continue;
        if (status && *status != "all" && r.status != *status) continue;
        (void)co_await store->cancel(r.run_id, action);
        cancel_local(r.run_id, action);
        wake_run(r.run_id);
    }
    wake(runs_changed);
    reply(c, 204, nullptr);
}

awaitable<void> server::impl::cancel_and_maybe_wait(call& c, run_record run, std::string action, bool wait) {
    if (run.finished()) throw http_error(409, "run '" + run.run_id + "' has already finished (" + run.status + ")");
    auto r = co_await store->cancel(run.run_id, action);
    if (r && r->finished() && r->status != "interrupted")
        throw http_error(409, "run '" + run.run_id + "' has already finished (" + r->status + ")");
    cancel_local(run.run_id, action);
    wake_run(run.run_id);
    wake(runs_changed);
    if (wait) {
        for (int i = 0; i < 1'000'000; ++i) {
            auto now = co_await store->get_run(run.run_id);
            if (!now || now->finished()) break;
            co_await wait_run(run.run_id, news_interval(), true);
        }
        // Its record, handed over for the waiters here at its end, is not kept for nobody.
        if (!run_end_watch.count(run.run_id)) ended_here.erase(run.run_id);
        reply(c, 204, nullptr);
    } else {
        reply(c, 202, nullptr);
    }
}

} // namespace stategraph::server
