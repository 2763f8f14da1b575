// Runs: creation (validated, then queued in the run store), the workers of this instance (claim,
// execute, heartbeat, hand back on drain), and what clients see of a run wherever it executes:
// its stream (events read from the store), its result (wait, join) and its cancellation.

#include "impl.hpp"

#include <csignal>
#include <unistd.h>

namespace stategraph::server {

// -- small parts ----------------------------------------------------------------------------------

std::set<std::string> server::impl::parse_modes(const json::value* v) const {
    std::set<std::string> out;
    auto add = [&](const json::value& m) {
        if (!m.is_string()) wrong_type("stream_mode", "a string or a list of strings", m);
        std::string s(m.get_string());
        // "messages-tuple" streams [chunk, metadata] pairs as events named "messages"; "messages"
        // is LangGraph's legacy form (messages/metadata, /partial, /complete), kept as "messages-legacy".
        if (s == "messages") s = legacy_messages_mode;
        else if (s == "messages-tuple") s = "messages";
        static const std::set<std::string> known = {"values", "updates", "custom", "messages", legacy_messages_mode,
                                                    "tasks", "checkpoints", "debug", "events"};
        if (!known.count(s))
            throw http_error(422, "stream_mode '" + s +
                                      "' is not a stream mode (use values, updates, custom, messages, messages-tuple, "
                                      "tasks, checkpoints, debug, events)");
        out.insert(s);
    };
    if (!v || v->is_null()) out.insert("values");
    else if (v->is_array())
        for (const auto& m : v->get_array()) add(m);
    else add(*v);
    return out;
}

std::optional<std::set<std::string>> server::impl::query_modes(const call& c) const {
    auto m = c.query.get("stream_mode");
    if (!m) return std::nullopt;
    boost::system::error_code ec;
    json::value v = json::parse(*m, ec);
    if (ec) v = json::string(*m);
    return parse_modes(&v);
}

namespace {

std::set<std::string> modes_of(const json::object& spec) {
    std::set<std::string> out;
    if (const auto* m = spec.if_contains("modes"); m && m->is_array())
        for (const auto& x : m->get_array())
            if (x.is_string()) out.insert(std::string(x.get_string()));
    if (out.empty()) out.insert("values");
    return out;
}

bool flag_of(const json::object& spec, std::string_view k) {
    const auto* v = spec.if_contains(k);
    return v && v->is_bool() && v->get_bool();
}

std::string string_of(const json::object& spec, std::string_view k) {
    const auto* v = spec.if_contains(k);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

[[noreturn]] void throw_busy(const std::string& thread_id, const std::string& run_id) {
    throw http_error(409, "Thread is already running a task. Wait for it to finish or choose a different "
                          "multitask strategy (thread '" + thread_id + "' is busy" +
                          (run_id.empty() ? std::string(" finishing a run") : " with run '" + run_id + "'") + ")");
}

} // namespace

std::vector<std::pair<std::string, std::string>> server::impl::location_headers(const run_record& run, bool sse) const {
    std::vector<std::pair<std::string, std::string>> h;
    const bool stateless = flag_of(run.spec, "stateless");
    std::string loc = stateless ? "/runs/" + run.run_id : "/threads/" + run.thread_id + "/runs/" + run.run_id;
    h.emplace_back("Content-Location", loc);
    if (sse && !stateless) h.emplace_back("Location", loc + "/stream");
    return h;
}

json::value server::impl::result_of(const run_record& r) {
    if (!r.error.is_null()) return json::object{{reserved::error, r.error}};
    return r.result;
}

awaitable<void> server::impl::wait_run(const std::string& run_id, std::chrono::milliseconds timeout, bool end_only) {
    auto& watch = end_only ? run_end_watch : run_watch;
    auto& list = watch[run_id];
    co_await wait_on(&list, &any_run_wake, timeout);
    if (auto it = watch.find(run_id); it != watch.end() && it->second.empty()) watch.erase(it);
}

void server::impl::on_notification(const std::string& channel, const std::string& payload) {
    if (channel == "sg_events") {
        wake_run_events(payload);
        return;
    }
    // sg_runs: a run was queued (its id), cancelled ("cancel:<id>"), ended ("done:<id>") or
    // claims expired: the dispatcher looks for work, streams and waiters look again.
    wake(dispatch_wake);
    wake(runs_changed);
    // News of no one run; "" after the listener reconnected: anything may have happened.
    if (payload == "ended" || payload == "expired" || payload.empty()) wake(any_run_wake);
    auto colon = payload.find(':');
    const std::string id = colon == std::string::npos ? payload : payload.substr(colon + 1);
    wake_run(id);
    if (payload.rfind("cancel:", 0) == 0)
        if (auto it = local.find(id); it != local.end() && it->second->cancel_action.empty()) {
            auto self = shared_from_this();
            auto check = [](std::shared_ptr<impl> s, std::string run_id) -> awaitable<void> {
                auto r = co_await s->store->get_run(run_id);
                if (!r || r->cancel.empty()) co_return;
                s->cancel_local(run_id, r->cancel);
            };
            net::co_spawn(ex, check(self, id), logged("run '" + id + "': reading its cancellation"));
        }
}

// -- creating a run -------------------------------------------------------------------------------

awaitable<void> server::impl::create_run(call& c, bool stateless, const std::string& how) {
    json::object body = body_object(c);
    auto aid = opt_string(body, "assistant_id");
    if (!aid) throw http_error(422, "field 'assistant_id' is required (an assistant id or a graph id)");
    auto a = co_await resolve_assistant(c, *aid);
    run_record run;
    run.run_id = new_uuid();
    run.assistant_id = a->assistant_id;
    run.graph_id = a->spec.graph_id;
    run.owner = c.owner;
    auto modes = parse_modes(field(body, "stream_mode"));
    bool subgraphs = false;
    if (auto* s = field(body, "stream_subgraphs")) {
        if (!s->is_bool()) wrong_type("stream_subgraphs", "a boolean", *s);
        subgraphs = s->get_bool();
    }
    run.multitask = one_of(body, "multitask_strategy", {"reject", "enqueue", "interrupt", "rollback"});
    auto if_not_exists = one_of(body, "if_not_exists", {"reject", "create"});
    const bool keep_thread = one_of(body, "on_completion", {"delete", "keep"}) == "keep";
    const bool cancel_on_disconnect = one_of(body, "on_disconnect", {"continue", "cancel"}) == "cancel";
    const double after_seconds = opt_number(body, "after_seconds", 0);
    if (after_seconds < 0 || after_seconds > 86400) throw http_error(422, "field 'after_seconds' must be between 0 and 86400");
    if (auto m = opt_object(body, "metadata")) run.metadata = *m;
    // Called with the run when it ends (webhook.cpp); a URL that cannot be called is a 422 now.
    const auto webhook = opt_string(body, "webhook");
    if (webhook) (void)parse_webhook(*webhook);
    auto config = opt_object(body, "config").value_or(json::object{});
    auto input = field(body, "input");
    if (input && !input->is_object()) wrong_type("input", "an object (the state's fields)", *input);
    auto command = opt_object(body, "command");
    // Per-run breakpoints (replacing the graph's compiled ones for the run): "*" or node names.
    json::object breakpoints;
    for (const char* k : {"interrupt_before", "interrupt_after"})
        if (const auto* v = field(body, k)) breakpoints[k] = breakpoint_list(a->graph, a->spec.graph_id, k, *v);
    const auto recursion_limit = opt_int(config, "recursion_limit", a->spec.options.recursion_limit, 1, 10000);
    // LangGraph's per-run durability: sync (the default), async or exit.
    // `checkpoint_during` is its deprecated boolean form (false: exit), read when durability is absent.
    std::string durability_mode = one_of(body, "durability", {"sync", "async", "exit"});
    if (const auto* during = field(body, "checkpoint_during"); during && !field(body, "durability")) {
        if (!during->is_bool()) wrong_type("checkpoint_during", "a boolean (or send durability: sync, async or exit)", *during);
        durability_mode = during->get_bool() ? "sync" : "exit";
    }
    std::optional<std::string> from = opt_string(body, "checkpoint_id");
    if (auto cp = opt_object(body, "checkpoint"))
        if (auto id = opt_string(*cp, "checkpoint_id")) from = id;
    if (auto conf = opt_object(config, "configurable"))
        if (auto id = opt_string(*conf, "checkpoint_id")) from = id;
    // What the nodes read (LangGraph's runtime context and configurable): the run's merged over
    // the assistant's; a typed context is read now, so a context that does not fit is a 422.
    json::object run_ctx = a->stored ? a->stored->context : json::object{};
    if (auto ctx = opt_object(body, "context"))
        for (const auto& [k, v] : *ctx) run_ctx[k] = v;
    json::object configurable;
    if (a->stored)
        if (auto conf = opt_object(a->stored->config, "configurable")) configurable = *conf;
    if (auto conf = opt_object(config, "configurable"))
        for (const auto& [k, v] : *conf) configurable[k] = v;
    for (const char* k : {"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"}) configurable.erase(k);
    if (const auto& reader = a->spec.options.context) (void)reader->read(run_ctx);

    // The thread: found, or (stateless, if_not_exists create) made with the run.
    std::optional<thread_record> th, to_create;
    if (stateless) {
        to_create = new_thread(new_uuid(), c.owner, json::object{});
        to_create->temporary = !keep_thread; // on_completion "keep": a thread like any other
    } else {
        const std::string& tid = c.path[1];
        if (!is_uuid(tid)) throw http_error(422, "thread_id '" + tid + "' is not a UUID");
        auto found = co_await find_thread(c.owner, tid);
        if (!found || found->temporary) {
            if (if_not_exists != "create" || found)
                throw http_error(404, "thread '" + tid + "' not found (send if_not_exists: \"create\" to create it)");
            json::object meta = run.metadata;
            meta["graph_id"] = a->spec.graph_id;
            meta["assistant_id"] = a->assistant_id;
            to_create = new_thread(tid, c.owner, std::move(meta));
        } else {
            th = std::move(found);
        }
    }
    const thread_record& target = th ? *th : *to_create;
    if (!target.graph_id.empty() && target.graph_id != a->spec.graph_id)
        throw http_error(409, "thread '" + target.thread_id + "' belongs to graph '" + target.graph_id + "', not to '" +
                                  a->spec.graph_id + "'");
    if (th && th->status == "busy" && run.multitask == "reject") throw_busy(th->thread_id, {});
    run.thread_id = target.thread_id;
    run.thread_key = target.key;

    // What the worker runs (validated here: every mistake is a 4xx before anything is queued).
    json::object spec;
    // LangGraph's Command: resume, update and goto, alone or together (see command<S>).
    const json::value* cmd_update = command ? field(*command, "update") : nullptr;
    const json::value* cmd_goto = command ? field(*command, "goto") : nullptr;
    if (cmd_update && cmd_update->is_null()) cmd_update = nullptr;
    if (cmd_goto && cmd_goto->is_null()) cmd_goto = nullptr;
    if (command && input) throw http_error(422, "send either 'input' or 'command', not both");
    if (command) {
        for (const auto& [k, v] : *command)
            if (k != "resume" && k != "update" && k != "goto" && k != "graph")
                throw http_error(422, "field 'command." + std::string(k) + "' is not a field of a command (resume, update, goto)");
        if (const auto* gr = field(*command, "graph"); gr && !gr->is_null())
            throw http_error(422, "field 'command.graph': a run's command applies to its own graph (Command.PARENT is for a "
                                  "subgraph's node)");
        if (!field(*command, "resume") && !cmd_update && !cmd_goto)
            throw http_error(422, "field 'command' needs 'resume', 'update' or 'goto'");
    }
    if (command && field(*command, "resume")) {
        if (!th || th->graph_id.empty())
            throw http_error(400, "thread '" + target.thread_id + "' has no pending interrupt to resume (it has never run)");
        std::vector<std::string> pending;
        auto waiting = co_await a->graph.pending_interrupts(th->key);
        for (const auto& i : waiting) pending.push_back(i.id);
        if (pending.empty()) throw http_error(400, "thread '" + th->thread_id + "' has no pending interrupt to resume");
        const json::value& value = *command->if_contains("resume");
        bool by_id = value.is_object() && !value.get_object().empty();
        if (by_id)
            for (const auto& [k, v] : value.get_object())
                if (std::find(pending.begin(), pending.end(), std::string(k)) == pending.end()) by_id = false;
        if (!by_id && pending.size() > 1)
            throw http_error(422, "thread '" + th->thread_id + "' has " + std::to_string(pending.size()) +
                                      " pending interrupts: resume with a map {interrupt id: value}");
        if (by_id) spec["resume_map"] = value;
        else spec["resume"] = value;
    }
    if (cmd_update || cmd_goto) {
        json::object c;
        if (cmd_update) {
            // An object of state fields, or LangGraph's list of [field, value] pairs.
            json::object u;
            if (cmd_update->is_object()) {
                u = cmd_update->get_object();
            } else if (cmd_update->is_array()) {
                for (const auto& pair : cmd_update->get_array()) {
                    const auto* kv = pair.if_array();
                    if (!kv || kv->size() != 2 || !(*kv)[0].is_string())
                        throw http_error(422, "field 'command.update' must be an object of state fields or a list of "
                                              "[field, value] pairs");
                    u[(*kv)[0].get_string()] = (*kv)[1];
                }
            } else {
                wrong_type("command.update", "an object of state fields", *cmd_update);
            }
            a->graph.check_values(u, "command.update"); // a field that does not fit is a 422 now
            c["update"] = std::move(u);
        }
        if (cmd_goto) {
            // A node name, a Send ({"node", "input"}), or a list of those.
            json::array go, sends;
            auto one = [&](const json::value& v) {
                std::string node;
                if (v.is_string()) node = v.get_string();
                else if (const auto* o = v.if_object(); o && o->contains("node") && o->at("node").is_string())
                    node = o->at("node").get_string();
                else
                    throw http_error(422, "field 'command.goto' must be a node name, a Send {\"node\", \"input\"} or a list "
                                          "of those");
                if (node != "__end__" && !a->graph.shape().find(node))
                    throw http_error(422, "command.goto: '" + node + "' is not a node of graph '" + a->spec.graph_id + "'");
                if (v.is_string()) {
                    go.push_back(json::string(node));
                } else {
                    const auto* arg = v.get_object().if_contains("input");
                    if (!arg) arg = v.get_object().if_contains("arg");
                    sends.push_back(json::object{{"node", node}, {"input", arg ? *arg : json::value(nullptr)}});
                }
            };
            if (const auto* list = cmd_goto->if_array()) {
                for (const auto& v : *list) one(v);
            } else {
                one(*cmd_goto);
            }
            c["goto"] = std::move(go);
            c["sends"] = std::move(sends);
        }
        spec["command"] = std::move(c);
    }
    if (command) {
        run.kwargs["command"] = *command;
    } else if (input) {
        json::object in = input->get_object();
        if (a->spec.options.input_adapter) in = a->spec.options.input_adapter(std::move(in), target.key);
        a->graph.check_input(in, "input"); // an input that does not fit is a 422 now
        spec["input"] = std::move(in);
        run.kwargs["input"] = *input;
    }
    // (no input and no command: continue from the latest checkpoint)
    json::array mode_list;
    for (const auto& m : modes) mode_list.push_back(json::string(m));
    spec["modes"] = mode_list;
    spec["subgraphs"] = subgraphs;
    spec["stateless"] = stateless;
    spec["keep_thread"] = keep_thread;
    spec["cancel_on_disconnect"] = cancel_on_disconnect;
    spec["recursion_limit"] = recursion_limit;
    spec["durability"] = durability_mode;
    if (!run_ctx.empty()) spec["context"] = std::move(run_ctx);
    if (!configurable.empty()) spec["configurable"] = std::move(configurable);
    if (webhook) spec["webhook"] = *webhook;
    if (from) spec["checkpoint_id"] = *from;
    for (auto& [k, v] : breakpoints) spec[k] = std::move(v);
    run.spec = std::move(spec);
    run.kwargs["stream_mode"] = std::move(mode_list);
    run.kwargs["config"] = config;
    run.not_before = after_seconds > 0 ? run_store::now() + static_cast<std::int64_t>(after_seconds * 1e6) : 0;

    submit_rules rules;
    rules.reject_if_busy = run.multitask == "reject";
    rules.max_queued = run.multitask == "enqueue" ? std::max<std::size_t>(opts.max_queued_runs_per_thread, 1) : SIZE_MAX;
    if (run.multitask == "interrupt" || run.multitask == "rollback") rules.cancel_others = run.multitask;
    if (to_create) rules.create = &*to_create;
    rules.graph_id = a->spec.graph_id;
    rules.graph_metadata = json::object{{"assistant_id", a->assistant_id}};
    auto res = co_await store->submit(run, rules);
    switch (res.refused) {
    case submit_refusal::none: break;
    case submit_refusal::thread_missing:
        throw http_error(404, "thread '" + target.thread_id + "' not found (send if_not_exists: \"create\" to create it)");
    case submit_refusal::other_graph:
        throw http_error(409, "thread '" + target.thread_id + "' belongs to graph '" + res.graph_id + "', not to '" +
                                  a->spec.graph_id + "'");
    case submit_refusal::busy: throw_busy(target.thread_id, res.busy_run);
    case submit_refusal::queue_full:
        throw http_error(429, "thread '" + target.thread_id + "' has " + std::to_string(res.queued) +
                                  " runs pending or running, the most one thread may queue (max_queued_runs_per_thread); "
                                  "wait for one to finish");
    }
    for (const auto& id : res.cancelled) cancel_local(id, rules.cancel_others);
    wake(dispatch_wake);
    wake(runs_changed);
    if (how == "stream") {
        co_await relay(c, run, std::move(modes), 0, cancel_on_disconnect);
    } else if (how == "wait") {
        co_await wait_and_answer(c, run, true, cancel_on_disconnect);
    } else {
        reply(c, 200, run_json(run), location_headers(run, false));
    }
}

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

awaitable<void> server::impl::relay_thread(call& c, thread_record th, std::optional<std::set<std::string>> modes) {
    header_list none;
    c.keep_alive = false; // open until the client leaves or the server stops: no second request
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

awaitable<void> server::impl::wait_and_answer(call& c, run_record run, bool created, bool cancel_on_disconnect) {
    auto headers = created ? location_headers(run, false) : std::vector<std::pair<std::string, std::string>>{};
    if (run.finished()) {
        reply(c, 200, result_of(run), std::move(headers));
        co_return;
    }
    if (!co_await begin_chunked(c, "application/json", std::move(headers))) co_return;
    auto quiet_since = std::chrono::steady_clock::now();
    for (;;) {
        auto r = co_await store->get_run(run.run_id);
        if (!r) {
            json::value gone = json::object{{reserved::error, json::object{{"error", "RunNotFound"},
                                                                         {"message", "run '" + run.run_id + "' was deleted"}}}};
            std::string body = serialize_strict(gone);
            if (co_await write_chunk(c, body)) co_await end_chunked(c);
            co_return;
        }
        if (r->finished()) {
            std::string body = serialize_strict(result_of(*r));
            if (co_await write_chunk(c, body)) co_await end_chunked(c);
            co_return;
        }
        if (stopping) {
            json::value gone = json::object{
                {reserved::error, json::object{{"error", "ServerDraining"},
                                           {"message", "this server instance is shutting down before run '" + run.run_id +
                                                           "' ended; the run goes on: join it through another instance"}}}};
            std::string body = serialize_strict(gone);
            if (co_await write_chunk(c, body)) co_await end_chunked(c);
            co_return;
        }
        co_await wait_run(run.run_id, local.count(run.run_id) ? std::chrono::milliseconds(1000) : news_interval(), true);
        if (std::chrono::steady_clock::now() - quiet_since >= std::chrono::seconds(1)) {
            quiet_since = std::chrono::steady_clock::now();
            std::string nl = "\n";
            if (!co_await write_chunk(c, nl)) {
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

// -- /threads/{id}/runs ---------------------------------------------------------------------------

awaitable<run_record> server::impl::run_or_404(const call& c, const thread_record& th, const std::string& rid) {
    (void)c;
    if (!is_uuid(rid)) throw http_error(422, "run_id '" + rid + "' is not a UUID");
    auto r = co_await store->get_run(rid);
    if (!r || r->thread_key != th.key) throw http_error(404, "run '" + rid + "' not found on thread '" + th.thread_id + "'");
    co_return std::move(*r);
}

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
        reply(c, 204, nullptr);
    } else {
        reply(c, 202, nullptr);
    }
}

awaitable<void> server::impl::route_runs(call& c, const thread_record& th) {
    auto& p = c.path; // threads, tid, runs, ...
    auto verb = c.req.method();
    if (p.size() == 3) {
        if (verb == http::verb::post) {
            const std::string how = "create";
            co_await create_run(c, false, how);
        } else if (verb == http::verb::get) {
            auto limit = c.query.integer("limit", 10, 1, 10000), offset = c.query.integer("offset", 0, 0, INT64_MAX);
            auto status = c.query.get("status");
            auto list = co_await store->list_runs(th.key, status, static_cast<std::size_t>(limit), static_cast<std::size_t>(offset));
            json::array out;
            for (const auto& r : list) out.push_back(run_json(r));
            reply(c, 200, out);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads/{thread_id}/runs");
        }
        co_return;
    }
    if (p.size() == 4 && (p[3] == "stream" || p[3] == "wait") && verb == http::verb::post) {
        co_await create_run(c, false, p[3]);
        co_return;
    }
    auto run = co_await run_or_404(c, th, p[3]);
    if (p.size() == 4) {
        if (verb == http::verb::get) {
            reply(c, 200, run_json(run));
        } else if (verb == http::verb::delete_) {
            if (!co_await store->delete_run(run.run_id))
                throw http_error(409, "run '" + run.run_id + "' is " + run.status + "; cancel it before deleting it");
            reply(c, 204, nullptr);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on a run");
        }
        co_return;
    }
    if (p.size() == 5 && p[4] == "join" && verb == http::verb::get) {
        co_await wait_and_answer(c, run, false, false);
        co_return;
    }
    if (p.size() == 5 && p[4] == "stream" && verb == http::verb::get) {
        std::set<std::string> modes = query_modes(c).value_or(modes_of(run.spec));
        const bool cancel_on_disconnect = c.query.flag("cancel_on_disconnect") || flag_of(run.spec, "cancel_on_disconnect");
        auto bounds = co_await store->event_bounds(run.run_id);
        std::int64_t after = bounds.first; // without Last-Event-ID: from the oldest event kept
        if (auto last = c.req.find("Last-Event-ID"); last != c.req.end()) {
            try {
                after = static_cast<std::int64_t>(std::stoull(std::string(last->value()))) + 1;
            } catch (const std::exception&) {
                throw http_error(422, "header Last-Event-ID must be an event id (a number), got '" + std::string(last->value()) + "'");
            }
            if (bounds.second > 0 && after < bounds.first)
                throw http_error(410, "run '" + run.run_id + "' keeps its last " + std::to_string(store->options().max_events_per_run) +
                                          " events: the oldest kept has id " + std::to_string(bounds.first) +
                                          ", so the events after id " + std::string(last->value()) +
                                          " cannot be replayed; join without Last-Event-ID or read the run's result (join)");
        }
        co_await relay(c, run, std::move(modes), after, cancel_on_disconnect);
        co_return;
    }
    if (p.size() == 5 && p[4] == "cancel" && verb == http::verb::post) {
        auto action = c.query.get("action").value_or("interrupt");
        if (action != "interrupt" && action != "rollback")
            throw http_error(422, "query parameter 'action' must be interrupt or rollback (got '" + action + "')");
        co_await cancel_and_maybe_wait(c, run, action, c.query.flag("wait"));
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

// -- workers --------------------------------------------------------------------------------------

void server::impl::start_workers() {
    auto self = shared_from_this();
    std::weak_ptr<impl> weak = self;
    auto ex2 = ex;
    if (!listening) listening = store->listen([weak, ex2](std::string channel, std::string payload) {
        net::post(ex2, [weak, channel = std::move(channel), payload = std::move(payload)] {
            if (auto s = weak.lock()) s->on_notification(channel, payload);
        });
    });
    if (opts.max_runs_in_flight == 0) return; // API only
    if (!dispatching) {
        dispatching = true;
        net::co_spawn(ex, dispatch_loop(self), [self](std::exception_ptr e) {
            self->dispatching = false;
            if (e) self->log_line("the run dispatcher stopped on an error");
        });
    }
    if (!beating) {
        beating = true;
        net::co_spawn(ex, heartbeat_loop(self), [self](std::exception_ptr e) {
            self->beating = false;
            if (e) self->log_line("the run heartbeat stopped on an error");
        });
    }
}

awaitable<void> server::impl::dispatch_loop(std::shared_ptr<impl> self) {
    while (!self->draining && !self->stopping_workers) {
        while (!self->draining && self->local.size() < self->opts.max_runs_in_flight) {
            std::optional<run_record> r;
            try {
                const std::string me = self->instance;
                r = co_await self->store->claim(me);
            } catch (const std::exception& e) {
                self->log_line(std::string("could not claim a run: ") + e.what());
                break;
            }
            if (!r) break;
            if (self->draining) { // drain began while claiming: hand it straight back
                const std::string id = r->run_id, me = self->instance;
                try {
                    (void)co_await self->store->release(id, me);
                } catch (const std::exception&) {
                }
                break;
            }
            auto live = std::make_shared<live_run>();
            live->rec = std::move(*r);
            live->modes = modes_of(live->rec.spec);
            live->subgraphs = flag_of(live->rec.spec, "subgraphs");
            live->langchain_events = live->modes.count("events") != 0;
            self->local[live->rec.run_id] = live;
            auto sig = live->cancel;
            // The signal outlives the coroutine: its completion handler holds it.
            net::co_spawn(self->ex, execute(self, live), net::bind_cancellation_slot(sig->slot(), [sig](std::exception_ptr) {}));
        }
        co_await wait_on(&self->dispatch_wake, nullptr, self->opts.poll_interval);
    }
}

awaitable<void> server::impl::heartbeat_loop(std::shared_ptr<impl> self) {
    auto renewed = std::chrono::steady_clock::now();
    const auto renew_every = std::max<std::chrono::milliseconds>(self->store->options().lease / 3, std::chrono::milliseconds(10));
    net::steady_timer t(self->ex);
    while (!self->stopping_workers || !self->local.empty()) {
        // Claims are renewed in time even when polling is rare (wake-ups carry the news).
        t.expires_after(std::min(self->opts.poll_interval, renew_every));
        auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
        (void)ec;
        if (self->local.empty()) {
            if (self->stopping_workers) break;
            continue;
        }
        const std::string me = self->instance;
        try {
            auto asks = co_await self->store->cancel_requests(me);
            for (const auto& [id, action] : asks)
                if (auto it = self->local.find(id); it != self->local.end() && it->second->cancel_action.empty()) {
                    it->second->cancel_action = action;
                    it->second->cancel->emit(net::cancellation_type::terminal);
                }
            if (std::chrono::steady_clock::now() - renewed >= renew_every) {
                std::vector<std::string> ids;
                for (const auto& [id, r] : self->local) ids.push_back(id);
                auto hb = co_await self->store->heartbeat(me, std::move(ids));
                renewed = std::chrono::steady_clock::now();
                for (const auto& id : hb.lost)
                    if (auto it = self->local.find(id); it != self->local.end() && !it->second->lost) {
                        self->log_line("run '" + id + "': another instance took it over; stopping it here");
                        it->second->lost = true;
                        it->second->cancel->emit(net::cancellation_type::terminal);
                    }
            }
        } catch (const std::exception& e) {
            self->log_line(std::string("run heartbeat failed: ") + e.what());
        }
    }
}

void server::impl::record(live_run& run, std::string name, const json::value& data) {
    std::string text = serialize_strict(data);
    if (name == "values") run.last_values = text; // the root's (a subgraph's is "values|<ns>")
    run.buffered.push_back(run_event{run.next_event++, std::move(name), std::move(text)});
    if (!run.flushing) {
        auto it = local.find(run.rec.run_id);
        if (it != local.end()) {
            auto self = shared_from_this();
            run.flushing = true;
            net::co_spawn(ex, flush(self, it->second), logged("run '" + run.rec.run_id + "': writing its events"));
        }
    }
}

awaitable<void> server::impl::flush(std::shared_ptr<impl> self, std::shared_ptr<live_run> run) {
    run->flushing = true;
    // Events of a step come close together: a moment's wait writes them in one transaction.
    {
        net::steady_timer gather(self->ex, std::chrono::milliseconds(2));
        auto [gec] = co_await gather.async_wait(net::as_tuple(use_awaitable));
        (void)gec;
    }
    while (!run->buffered.empty() && !run->lost) {
        auto batch = std::move(run->buffered);
        run->buffered.clear();
        const std::string id = run->rec.run_id, me = self->instance;
        try {
            if (!co_await self->store->append_events(id, me, std::move(batch))) {
                run->lost = true;
                run->cancel->emit(net::cancellation_type::terminal);
            }
        } catch (const std::exception& e) {
            run->flush_failed = true;
            self->log_line("run '" + id + "': its events could not be stored: " + e.what());
        }
        self->wake_run_events(id);
    }
    run->flushing = false;
    self->wake(run->flushed);
}

awaitable<void> server::impl::flush_all(std::shared_ptr<live_run> run) {
    for (int i = 0; i < 100'000; ++i) {
        if (run->flushing) {
            co_await wait_on(&run->flushed, nullptr, std::chrono::milliseconds(1000));
            continue;
        }
        if (run->buffered.empty() || run->lost) co_return;
        co_await flush(shared_from_this(), run);
    }
}

void server::impl::on_engine_event(live_run& run, const stream_event& e) {
    if (!run.cancel_action.empty() || run.lost) return;
    if (!e.ns.empty() && !run.subgraphs) return;
    if (e.mode == stream_mode::messages && run.modes.count(legacy_messages_mode)) record_legacy_messages(run, e);
    if (e.mode == stream_mode::messages && !run.modes.count("messages")) {
        if (run.langchain_events) record_langchain_events(run, e);
        return;
    }
    if (run.langchain_events) {
        record_langchain_events(run, e);
        // Asked of the engine for "events" only: not recorded as modes of their own.
        if (e.mode == stream_mode::tasks && !run.modes.count("tasks")) return;
        if (e.mode == stream_mode::messages && !run.modes.count("messages")) return;
    }
    std::string name;
    json::value update; // "updates" wrap the data; the other modes record it as it is (not copied)
    switch (e.mode) {
    case stream_mode::values: name = "values"; break;
    case stream_mode::updates: name = "updates"; update = json::object{{e.node, e.data}}; break;
    case stream_mode::custom: name = "custom"; break;
    case stream_mode::tasks: name = "tasks"; break;
    case stream_mode::checkpoints: name = "checkpoints"; break;
    case stream_mode::debug: name = "debug"; break;
    case stream_mode::messages: name = "messages"; break;
    default: return;
    }
    for (const auto& n : e.ns) name.append(1, reserved::ns_separator).append(n);
    record(run, std::move(name), e.mode == stream_mode::updates ? update : e.data);
}

awaitable<std::string> server::impl::rollback_anchor(std::shared_ptr<assistant_rec> a, std::string thread_id) {
    // The newest checkpoint of the thread and of the subgraphs a resume would continue.
    auto heads = co_await a->graph.subgraph_namespaces(thread_id);
    std::string anchor;
    for (const auto& h : heads) anchor = std::max(anchor, h.checkpoint_id);
    co_return anchor;
}

awaitable<void> server::impl::roll_back(std::shared_ptr<checkpoint::saver> saver, std::string thread_id, std::string anchor) {
    if (anchor.empty()) {
        co_await saver->delete_thread(thread_id);
        co_return;
    }
    (void)co_await saver->rewind_thread(thread_id, anchor);
}

awaitable<void> server::impl::execute(std::shared_ptr<impl> self, std::shared_ptr<live_run> run) {
    auto& rec = run->rec;
    const std::string me = self->instance;
    auto a = self->find_assistant(rec.graph_id);
    std::exception_ptr crashed;
    bool released = false;
    const auto began = std::chrono::steady_clock::now();
    ++self->metrics.runs_started;
    run->meter.metrics = &self->metrics;
    run->meter.graph_id = rec.graph_id;
    try {
        // Events go on after those an earlier attempt stored.
        if (rec.attempts > 1 || !rec.anchor.is_null()) {
            auto bounds = co_await self->store->event_bounds(rec.run_id);
            run->next_event = bounds.second;
        }
        self->record(*run, "metadata", json::object{{"run_id", rec.run_id}, {"thread_id", rec.thread_id}, {"attempt", rec.attempts}});
        std::string anchor;
        bool anchor_failed = false;
        if (a && !rec.cancel.size()) {
            auto saver = a->graph.checkpointer();
            const bool first_start = rec.anchor.is_null();
            if (first_start) {
                try {
                    anchor = co_await rollback_anchor(a, rec.thread_key);
                } catch (const std::exception&) {
                    anchor_failed = true; // no rollback without a known place to return to
                }
                json::value stored = anchor_failed ? json::value(json::object{{"failed", true}}) : json::value(anchor);
                co_await self->store->set_anchor(rec.run_id, me, stored);
                rec.anchor = stored;
            } else if (rec.anchor.is_string()) {
                anchor = std::string(rec.anchor.get_string());
            } else {
                anchor_failed = true;
            }
            // A takeover: the run's earlier worker is gone. Its lease on the thread goes (its
            // writes, were it only frozen, are refused from now on), and a run that had made
            // progress continues from its last checkpoint instead of taking its input again.
            bool progressed = false;
            const bool resumed = !first_start; // taken over, or handed back by a drain
            if (rec.attempts > 1) {
                try {
                    (void)co_await saver->break_lease(rec.thread_key);
                } catch (const std::exception&) {
                }
            }
            if (resumed) {
                if (!anchor_failed) {
                    auto now_at = co_await rollback_anchor(a, rec.thread_key);
                    progressed = now_at != anchor;
                }
            }
            json_run req;
            req.config.thread_id = rec.thread_key;
            if (const auto* n = rec.spec.if_contains("recursion_limit"); n && n->is_int64())
                req.config.recursion_limit = static_cast<int>(n->get_int64());
            else req.config.recursion_limit = a->spec.options.recursion_limit;
            if (auto d = string_of(rec.spec, "durability"); d == "async") req.config.durability = durability::async;
            else if (d == "exit") req.config.durability = durability::exit;
            if (!progressed) {
                if (auto cp = string_of(rec.spec, "checkpoint_id"); !cp.empty()) req.config.checkpoint_id = cp;
                std::optional<resume_input> resume;
                if (const auto* m = rec.spec.if_contains("resume_map"); m && m->is_object()) {
                    resume.emplace();
                    resume->is_map = true;
                    for (const auto& [k, v] : m->get_object()) resume->by_id[std::string(k)] = v;
                } else if (const auto* r = rec.spec.if_contains("resume")) {
                    resume.emplace();
                    resume->value = *r;
                }
                if (const auto* in = rec.spec.if_contains("input"); in && in->is_object()) {
                    req.input = in->get_object(); // read against the thread's state by the engine
                } else if (const auto* c = rec.spec.if_contains("command"); c && c->is_object()) {
                    json_command cmd;
                    if (const auto* u = c->get_object().if_contains("update"); u && u->is_object()) cmd.update = u->get_object();
                    if (const auto* go = c->get_object().if_contains("goto"); go && go->is_array())
                        for (const auto& n : go->get_array())
                            if (n.is_string()) cmd.go_to.emplace_back(n.get_string());
                    if (const auto* ss = c->get_object().if_contains("sends"); ss && ss->is_array())
                        for (const auto& sd : ss->get_array())
                            if (const auto* o = sd.if_object(); o && o->contains("node"))
                                cmd.sends.emplace_back(std::string(o->at("node").as_string()),
                                                       o->contains("input") ? o->at("input") : json::value(nullptr));
                    cmd.resume = std::move(resume);
                    req.input = std::move(cmd);
                } else if (resume) {
                    req.input = std::move(*resume);
                }
            }
            for (const char* k : {"interrupt_before", "interrupt_after"})
                if (const auto* b = rec.spec.if_contains(k); b && b->is_array()) {
                    std::vector<std::string> names;
                    for (const auto& n : b->get_array())
                        if (n.is_string()) names.emplace_back(n.get_string());
                    (std::string_view(k) == "interrupt_before" ? req.interrupt_before : req.interrupt_after) = std::move(names);
                }
            req.modes = stream_mode::values | stream_mode::updates;
            static const std::map<std::string, stream_mode> engine_modes = {
                {"custom", stream_mode::custom}, {"tasks", stream_mode::tasks}, {"checkpoints", stream_mode::checkpoints},
                {"debug", stream_mode::debug},   {"messages", stream_mode::messages}, {legacy_messages_mode, stream_mode::messages}};
            for (const auto& m : run->modes)
                if (auto it = engine_modes.find(m); it != engine_modes.end()) req.modes = req.modes | it->second;
            if (run->langchain_events) {
                req.modes = req.modes | stream_mode::tasks | stream_mode::messages;
                const auto* in = rec.spec.if_contains("input");
                self->record_graph_event(*run, true, in ? *in : json::value(nullptr));
            }
            live_run* raw = run.get();
            impl* me_impl = self.get();
            req.on_event = [me_impl, raw](const stream_event& e) { me_impl->on_engine_event(*raw, e); };
            req.config.observer = &run->meter;
            std::optional<run_context> context; // what the nodes read as ctx.runtime<...>(), for the call
            try {
                const auto* ctx = rec.spec.if_contains("context");
                const auto* conf = rec.spec.if_contains("configurable");
                context.emplace(a->spec.options.context.get(), ctx && ctx->is_object() ? ctx->get_object() : json::object{},
                                conf && conf->is_object() ? conf->get_object() : json::object{});
                req.config.runtime = context->runtime();
                auto outcome = co_await a->graph.invoke(std::move(req));
                if (run->langchain_events && run->cancel_action.empty())
                    self->record_graph_event(*run, false, a->graph.core()->output ? outcome.output : outcome.values);
                if (outcome.status == run_status::interrupted && run->cancel_action.empty()) {
                    // The output schema when the graph declares one (as the values events show it).
                    json::object v = a->graph.core()->output ? std::move(outcome.output) : std::move(outcome.values);
                    v[reserved::interrupt] = interrupts_json(outcome.interrupts);
                    self->record(*run, "values", v);
                } else if (outcome.status == run_status::done && resumed && run->last_values.empty() &&
                           run->cancel_action.empty()) {
                    // Taken over after the earlier worker had committed every step but before it
                    // stored their events (events are written apart from checkpoints): this attempt
                    // ran nothing, so its stream would end on the last values the dead worker had
                    // stored. The final state closes it instead.
                    json::object v = a->graph.core()->output ? std::move(outcome.output) : std::move(outcome.values);
                    self->record(*run, "values", v);
                }
                if (outcome.status == run_status::drained && self->draining && run->cancel_action.empty()) {
                    released = true; // stopped at a step boundary with everything saved: back to the queue
                } else {
                    rec.status = !run->cancel_action.empty() || outcome.status == run_status::drained ? "interrupted" : "success";
                }
            } catch (const std::exception& e) {
                rec.status = !run->cancel_action.empty() || run->lost ? "interrupted" : "error";
                if (rec.status == "error") {
                    std::string cls = "Error";
                    if (auto* g = dynamic_cast<const graph_error*>(&e)) cls = "GraphError(" + g->code().message() + ")";
                    rec.error = json::object{{"error", cls}, {"message", e.what()}};
                    self->record(*run, "error", rec.error);
                }
            }
            // A run cancelled through this coroutine's slot: the waits below must not see it.
            co_await net::this_coro::reset_cancellation_state();
            if (!released && run->cancel_action == "rollback" && !run->lost) {
                try {
                    if (anchor_failed)
                        throw std::runtime_error("thread '" + rec.thread_id +
                                                 "': its newest checkpoint could not be read as the run started, so "
                                                 "there is no known place to roll back to; nothing was removed");
                    co_await roll_back(saver, rec.thread_key, anchor);
                } catch (const std::exception& e) {
                    rec.error = json::object{{"error", "RollbackError"}, {"message", e.what()}};
                    rec.status = "error";
                }
            }
        } else if (!a) {
            rec.status = "error";
            rec.error = json::object{{"error", "GraphNotServed"},
                                     {"message", "graph '" + rec.graph_id + "' of run '" + rec.run_id + "' is not served by instance '" +
                                                     me + "'"}};
            self->record(*run, "error", rec.error);
        } else {
            rec.status = "interrupted";
        }
    } catch (...) {
        crashed = std::current_exception();
    }
    // The run's token usage: in its record (spec.usage, shown as `usage`), its thread's metadata
    // and a last `metadata` event of its stream.
    std::optional<json::object> usage;
    if (!run->meter.empty() && !run->lost) {
        usage = usage_json(run->meter);
        rec.spec["usage"] = *usage;
        self->record(*run, "metadata", json::object{{"run_id", rec.run_id}, {"thread_id", rec.thread_id}, {"usage", *usage}});
    }
    co_await net::this_coro::reset_cancellation_state();
    try {
        co_await self->flush_all(run);
        if (crashed) {
            rec.status = "error";
            try {
                std::rethrow_exception(crashed);
            } catch (const std::exception& e) {
                rec.error = json::object{{"error", "ServerError"}, {"message", std::string("run '") + rec.run_id + "': " + e.what()}};
            }
        }
        if (run->lost) {
            // another instance holds it now: nothing more is written from here
        } else if (released) {
            (void)co_await self->store->release(rec.run_id, me);
        } else {
            std::optional<thread_record> th = co_await self->store->get_thread(rec.thread_key);
            if (th) {
                try {
                    th = co_await self->refreshed(std::move(*th));
                } catch (const std::exception&) {
                    if (run->cancel_action == "rollback") {
                        th->values = nullptr;
                        th->interrupts = {};
                        th->status = "idle";
                    }
                }
                if (usage) th->metadata["usage"] = add_usage(th->metadata.if_contains("usage"), *usage);
                if (rec.status == "error") {
                    th->status = "error";
                    th->error = rec.error;
                } else {
                    if (th->status == "error" || th->status == "busy") th->status = th->interrupts.empty() ? "idle" : "interrupted";
                    th->error = nullptr;
                }
            }
            rec.result = !run->last_values.empty() ? json::parse(run->last_values) : (th ? th->values : json::value(nullptr));
            const bool removed_by_rollback = run->cancel_action == "rollback" && rec.error.is_null();
            const bool ended_here = co_await self->store->finish(rec, me, th ? &*th : nullptr);
            if (ended_here) {
                ++self->metrics.runs_ended[rec.status];
                self->metrics.run_seconds.observe(seconds_of(std::chrono::steady_clock::now() - began));
            }
            if (const auto* hook = rec.spec.if_contains("webhook"); ended_here && hook && hook->is_string()) {
                json::object payload = run_json(rec);
                payload["values"] = rec.result;
                if (!rec.error.is_null()) {
                    const auto* message = rec.error.is_object() ? rec.error.get_object().if_contains("message") : nullptr;
                    payload["error"] = message && message->is_string() ? message->get_string() : json::string(json::serialize(rec.error));
                }
                payload["run_ended_at"] = now_iso();
                payload["webhook_sent_at"] = now_iso();
                // A drain (wait_idle) waits for it, within drain_timeout, as it waits for runs.
                ++self->webhooks_in_flight;
                auto sending = send_webhook(self, std::string(hook->get_string()), json::serialize(payload), rec.run_id);
                net::co_spawn(self->ex, std::move(sending), [self, id = rec.run_id](std::exception_ptr e) {
                    --self->webhooks_in_flight;
                    if (e) self->log_line("run '" + id + "': its webhook stopped unexpectedly");
                    self->wake(self->drained_wake);
                });
            }
            if (removed_by_rollback) (void)co_await self->store->delete_run(rec.run_id);
            // A stateless run's thread: its checkpoints go now; its record stays (unlisted) with
            // the run's, which a waiter still reads, and goes with them (run_store's trimming).
            if (th && th->temporary && !flag_of(rec.spec, "keep_thread"))
                if (auto a2 = self->find_assistant(rec.graph_id)) {
                    auto saver = a2->graph.checkpointer();
                    co_await saver->delete_thread(rec.thread_key);
                }
        }
    } catch (const std::exception& e) {
        self->log_line("run '" + rec.run_id + "': its end could not be stored: " + e.what());
    }
    self->local.erase(rec.run_id);
    self->wake_run(rec.run_id);
    self->wake(self->runs_changed);
    self->wake(self->dispatch_wake);
    self->wake(self->drained_wake);
}

awaitable<void> server::impl::reclaim_dead_local(std::shared_ptr<impl> self) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string prefix = std::string(host) + ":";
    auto workers = co_await self->store->running_workers();
    for (const auto& w : workers) {
        if (w.rfind(prefix, 0) != 0 || w == self->instance) continue;
        auto rest = w.substr(prefix.size());
        auto colon = rest.find(':');
        long pid = 0;
        try {
            pid = std::stol(rest.substr(0, colon));
        } catch (const std::exception&) {
            continue;
        }
        if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
        const std::string name = w;
        auto n = co_await self->store->expire_worker(name);
        if (n) self->log_line(std::to_string(n) + " runs of instance '" + w + "' (its process is gone) are taken over");
    }
}

awaitable<void> server::impl::wait_idle(std::shared_ptr<impl> self, std::function<void()> done) {
    const auto until = std::chrono::steady_clock::now() + self->opts.drain_timeout;
    while ((!self->local.empty() || self->webhooks_in_flight > 0) && std::chrono::steady_clock::now() < until)
        co_await wait_on(&self->drained_wake, nullptr, std::chrono::milliseconds(50));
    // Runs still going past the bound keep their claims, which expire; another instance takes them.
    self->stopping_workers = true;
    self->wake(self->dispatch_wake);
    done();
}

} // namespace stategraph::server
