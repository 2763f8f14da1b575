// What clients see of a run wherever it executes: its stream (events read from the run store,
// relayed as server-sent events), a thread's stream (its runs one after another), and a run's
// result once it ends (/runs/wait, join).

#include "impl.hpp"

namespace stategraph::server {

using run_spec::modes_of;

// -- what clients see of a run --------------------------------------------------------------------

awaitable<void> server::impl::relay(call& c, run_record run, std::set<std::string> modes, std::int64_t after, bool cancel_on_disconnect) {
    auto headers = location_headers(run, true);
    // The socket is watched for the client leaving: no second request on it, and the answer says
    // so (Connection: close), or a client would send its next request on a socket being closed.
    c.keep_alive = false;
    if (!co_await begin_chunked(c, "text/event-stream", std::move(headers))) co_return;
    auto loop = relay_events(c, run.run_id, std::move(modes), after);
    // Ends when the client leaves (true). A read cancelled by the server stopping is not the
    // client leaving: the events loop then ends the stream itself, with an error event saying so.
    auto watch = [](call& cc, const impl* self) -> awaitable<bool> {
        char byte = 0;
        auto [ec, n] = co_await cc.stream->socket().async_read_some(net::buffer(&byte, 1), net::as_tuple(use_awaitable));
        (void)n;
        if (ec != net::error::operation_aborted) co_return true;
        if (!self->stopping) co_return false; // the stream ended first
        net::steady_timer t(co_await net::this_coro::executor, std::chrono::seconds(30));
        auto [tec] = co_await t.async_wait(net::as_tuple(use_awaitable));
        (void)tec;
        co_return false;
    };
    auto watching = watch(c, this);
    auto ended = co_await (std::move(loop) || std::move(watching));
    const bool left = ended.index() == 1 ? std::get<1>(ended) : !std::get<0>(ended);
    if (left && cancel_on_disconnect) {
        (void)co_await store->cancel(run.run_id, "interrupt");
        cancel_local(run.run_id, "interrupt");
    }
}

awaitable<bool> server::impl::relay_events(call& c, std::string run_id, std::set<std::string> modes, std::int64_t after) {
    std::int64_t next = after;
    std::optional<run_event> last_values; // the last values event seen (below full verbosity, sent at the end)
    auto quiet_since = std::chrono::steady_clock::now();
    const auto batch = std::size_t{512};
    for (;;) {
        if (stopping) {
            json::value gone = json::object{
                {"error", "ServerDraining"},
                {"message", "this server instance is shutting down; run '" + run_id +
                                "' goes on: rejoin its stream (with Last-Event-ID) through another instance"}};
            std::string out = "event: error\ndata: " + serialize_strict(gone) + "\n\n";
            if (co_await write_chunk(c, out)) co_await end_chunked(c);
            co_return true;
        }
        auto bounds = co_await store->event_bounds(run_id);
        if (bounds.second > 0 && next < bounds.first) { // fell behind by more than the events kept
            json::value lost = json::object{
                {"error", "EventsDropped"},
                {"message", "run '" + run_id + "' keeps its last " + std::to_string(store->options().max_events_per_run) +
                                " events; the events from id " + std::to_string(next) + " to " + std::to_string(bounds.first - 1) +
                                " are gone"}};
            std::string out = "event: error\ndata: " + serialize_strict(lost) + "\n\n";
            if (co_await write_chunk(c, out)) co_await end_chunked(c);
            co_return true;
        }
        auto events = co_await store->read_events(run_id, next, batch);
        // Whether the run had ended before this read: then the read holds its last events.
        std::string out;
        for (const auto& e : events) {
            if (e.name == "values") last_values = e;
            if (wanted(modes, e.name) && shown(opts.verbosity, e.name))
                out += sse_text(sse_event{e.name, e.data}, static_cast<std::size_t>(e.id));
            next = e.id + 1;
        }
        if (!out.empty()) {
            if (!co_await write_chunk(c, out)) co_return false;
            quiet_since = std::chrono::steady_clock::now();
        }
        if (events.size() == batch) continue;
        bool finished = false;
        if (!local.count(run_id)) {
            auto r = co_await store->get_run(run_id);
            finished = !r || r->finished();
        }
        if (finished) {
            auto rest = co_await store->read_events(run_id, next, SIZE_MAX / 2);
            std::string tail;
            for (const auto& e : rest) {
                if (e.name == "values") last_values = e;
                if (wanted(modes, e.name) && shown(opts.verbosity, e.name))
                    tail += sse_text(sse_event{e.name, e.data}, static_cast<std::size_t>(e.id));
            }
            // Below full verbosity, the final values close the stream.
            if (opts.verbosity != verbosity::full && last_values && last_values->id >= after && modes.count("values"))
                tail += sse_text(sse_event{last_values->name, last_values->data}, static_cast<std::size_t>(last_values->id));
            if (!tail.empty() && !co_await write_chunk(c, tail)) co_return false;
            co_await end_chunked(c);
            co_return true;
        }
        co_await wait_run(run_id, local.count(run_id) ? std::chrono::milliseconds(10'000) : news_interval());
        if (std::chrono::steady_clock::now() - quiet_since >= std::chrono::seconds(10)) {
            std::string beat = ": heartbeat\n\n";
            if (!co_await write_chunk(c, beat)) co_return false;
            quiet_since = std::chrono::steady_clock::now();
        }
    }
}

namespace {

/// A thread stream open on this instance, counted in `impl::thread_watchers` while it lives.
class thread_watch {
public:
    thread_watch(std::map<std::string, int>& watchers, std::string key) : watchers_(watchers), key_(std::move(key)) {
        ++watchers_[key_];
    }
    thread_watch(const thread_watch&) = delete;
    thread_watch& operator=(const thread_watch&) = delete;
    ~thread_watch() {
        if (auto it = watchers_.find(key_); it != watchers_.end() && --it->second <= 0) watchers_.erase(it);
    }

private:
    std::map<std::string, int>& watchers_;
    std::string key_;
};

} // namespace

awaitable<void> server::impl::relay_thread(call& c, thread_record th, std::optional<std::set<std::string>> modes) {
    header_list none;
    c.keep_alive = false; // open until the client leaves or the server stops: no second request
    // Counted before the first await: a quiet run of this thread claimed from now on records its steps.
    const thread_watch watching(thread_watchers, th.key);
    if (!co_await begin_chunked(c, "text/event-stream", std::move(none))) co_return;
    // The runs queued after `last` are relayed in order, starting with the one in flight.
    std::int64_t last = 0;
    {
        auto all = co_await store->runs_after(th.key, 0);
        for (const auto& r : all) last = r.seq;
        for (const auto& r : all)
            if (!r.finished()) {
                last = r.seq - 1;
                break;
            }
    }
    std::optional<run_record> cur;
    std::int64_t next = 0;
    auto quiet_since = std::chrono::steady_clock::now();
    while (!stopping) {
        if (!cur) {
            auto rs = co_await store->runs_after(th.key, last);
            if (!rs.empty()) {
                cur = std::move(rs.front());
                last = cur->seq;
                next = 0;
            }
        }
        if (cur) {
            const auto& m = modes ? *modes : modes_of(cur->spec);
            auto bounds = co_await store->event_bounds(cur->run_id);
            if (next < bounds.first) next = bounds.first; // older events were dropped
            auto events = co_await store->read_events(cur->run_id, next, 512);
            std::string out;
            for (const auto& e : events) {
                if (wanted(m, e.name) && shown(opts.verbosity, e.name))
                    out += "event: " + e.name + "\ndata: " + e.data + "\nid: " + cur->run_id + ":" + std::to_string(e.id) + "\n\n";
                next = e.id + 1;
            }
            if (!out.empty()) {
                if (!co_await write_chunk(c, out)) break;
                quiet_since = std::chrono::steady_clock::now();
            }
            if (events.size() == 512) continue;
            if (events.empty()) {
                auto r = co_await store->get_run(cur->run_id);
                if (!r || r->finished()) {
                    auto rest = co_await store->read_events(cur->run_id, next, 1);
                    if (rest.empty()) cur.reset();
                    continue;
                }
            }
        }
        if (cur) co_await wait_run(cur->run_id, news_interval());
        else co_await wait_on(&runs_changed, nullptr, opts.poll_interval);
        if (std::chrono::steady_clock::now() - quiet_since >= std::chrono::seconds(10)) {
            std::string beat = ": heartbeat\n\n";
            if (!co_await write_chunk(c, beat)) break;
            quiet_since = std::chrono::steady_clock::now();
        }
    }
    if (stopping) co_await end_chunked(c);
    c.keep_alive = false;
}

awaitable<void> server::impl::wait_and_answer(call& c, const run_record& run, bool created, bool cancel_on_disconnect) {
    auto headers = created ? location_headers(run, false) : std::vector<std::pair<std::string, std::string>>{};
    // A run that ends within the first second is answered in one piece (one write: status,
    // headers and body with its length). Only a longer one starts a chunked answer, whose
    // newlines every second keep the connection alive (as LangGraph's server sends) and tell a
    // client gone away. The body is the same JSON either way.
    bool began = false;
    // (its argument by reference: g++ 12 may destroy a coroutine's by-value argument twice)
    auto answer = [&](const json::value& body) -> awaitable<void> {
        if (!began) {
            reply(c, 200, body, std::move(headers));
            co_return;
        }
        std::string text = serialize_strict(body);
        if (co_await write_chunk(c, text)) co_await end_chunked(c);
    };
    if (run.finished()) {
        const json::value result = result_of(run);
        co_await answer(result);
        co_return;
    }
    auto quiet_since = std::chrono::steady_clock::now();
    for (;;) {
        // A run executing here tells of its end (its record handed over in ended_here): it is
        // not read back from the store while it runs, nor once it ended.
        if (!local.count(run.run_id)) {
            std::optional<run_record> r;
            if (auto it = ended_here.find(run.run_id); it != ended_here.end()) {
                r = std::move(it->second);
                ended_here.erase(it);
            } else {
                r = co_await store->get_run(run.run_id);
            }
            if (!r) {
                json::value gone = json::object{{reserved::error, json::object{{"error", "RunNotFound"},
                                                                             {"message", "run '" + run.run_id + "' was deleted"}}}};
                co_await answer(gone);
                co_return;
            }
            if (r->finished()) {
                if (r->error.is_null()) {
                    co_await answer(r->result); // not copied
                } else {
                    const json::value result = result_of(*r);
                    co_await answer(result);
                }
                co_return;
            }
        }
        if (stopping) {
            json::value gone = json::object{
                {reserved::error, json::object{{"error", "ServerDraining"},
                                           {"message", "this server instance is shutting down before run '" + run.run_id +
                                                           "' ended; the run goes on: join it through another instance"}}}};
            co_await answer(gone);
            co_return;
        }
        co_await wait_run(run.run_id, local.count(run.run_id) ? std::chrono::milliseconds(1000) : news_interval(), true);
        if (std::chrono::steady_clock::now() - quiet_since >= std::chrono::seconds(1)) {
            quiet_since = std::chrono::steady_clock::now();
            bool sent = true;
            if (!began) {
                began = true;
                sent = co_await begin_chunked(c, "application/json", std::move(headers));
            }
            std::string nl = "\n";
            if (sent) sent = co_await write_chunk(c, nl);
            if (!sent) {
                c.keep_alive = false;
                if (cancel_on_disconnect) {
                    (void)co_await store->cancel(run.run_id, "interrupt");
                    cancel_local(run.run_id, "interrupt");
                }
                co_return;
            }
        }
    }
}

} // namespace stategraph::server
