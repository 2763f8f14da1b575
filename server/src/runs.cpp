// Runs: what a run's spec holds and how it is read (stream modes, flags), creation (validated,
// then queued in the run store: admission by the thread's multitask strategy) and the routes of
// /threads/{id}/runs. The rest of a run is in files of its own: run_streams.cpp (its stream,
// wait and join), run_cancel.cpp (cancellation), run_workers.cpp (this instance's workers: claim,
// heartbeat, drain) and run_execute.cpp (executing a claimed run, its events and its end).

#include "impl.hpp"

#include <stategraph/traceparent.hpp>

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

namespace run_spec {

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

} // namespace run_spec

using run_spec::flag_of;
using run_spec::modes_of;

namespace {

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
    const bool modes_asked = field(body, "stream_mode") != nullptr && !field(body, "stream_mode")->is_null();
    auto modes = parse_modes(field(body, "stream_mode"));
    bool resumable = false;
    if (auto* r = field(body, "stream_resumable"); r && !r->is_null()) {
        if (!r->is_bool()) wrong_type("stream_resumable", "a boolean", *r);
        resumable = r->get_bool();
    }
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
    // A run made by /runs/wait, asking for no stream mode and not resumable, keeps no event of
    // its steps: its caller waits for its end only. It records its metadata and its final values
    // (the answer); the engine builds no per-step event for it (see live_run::quiet).
    if (how == "wait" && !modes_asked && !resumable) spec["quiet"] = true;
    spec["stateless"] = stateless;
    spec["keep_thread"] = keep_thread;
    spec["cancel_on_disconnect"] = cancel_on_disconnect;
    spec["recursion_limit"] = recursion_limit;
    spec["durability"] = durability_mode;
    // The caller's trace context (W3C Trace Context): the run's span continues it, on whichever
    // instance executes the run. A malformed header is ignored, as the standard asks.
    if (auto tp = c.req.find("traceparent"); tp != c.req.end() && is_traceparent(std::string_view(tp->value().data(), tp->value().size())))
        spec["traceparent"] = std::string(tp->value());
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
    const json::object graph_metadata{{"assistant_id", a->assistant_id}};
    rules.graph_metadata = &graph_metadata;
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
    for (const auto& id : res.cancelled) cancel_local(id, run.multitask);
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

// -- /threads/{id}/runs ---------------------------------------------------------------------------

awaitable<run_record> server::impl::run_or_404(const call& c, const thread_record& th, const std::string& rid) {
    (void)c;
    if (!is_uuid(rid)) throw http_error(422, "run_id '" + rid + "' is not a UUID");
    auto r = co_await store->get_run(rid);
    if (!r || r->thread_key != th.key) throw http_error(404, "run '" + rid + "' not found on thread '" + th.thread_id + "'");
    co_return std::move(*r);
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

} // namespace stategraph::server
