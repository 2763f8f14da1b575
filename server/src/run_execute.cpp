// Executing a run this instance claimed: the engine's request made from the run's spec, its
// events (recorded, then flushed to the run store in batches), rollback, and its end (the run's
// and thread's records, token usage, webhook, a stateless run's thread).

#include "impl.hpp"

namespace stategraph::server {

using run_spec::flag_of;

namespace {

std::string string_of(const json::object& spec, std::string_view k) {
    const auto* v = spec.if_contains(k);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

} // namespace

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
    // (A run that ends meanwhile takes them into its end's transaction: see execute.)
    {
        run->gathering = true;
        net::steady_timer gather(self->ex, std::chrono::milliseconds(2));
        auto [gec] = co_await gather.async_wait(net::as_tuple(use_awaitable));
        (void)gec;
        run->gathering = false;
    }
    while (!run->ending && !run->buffered.empty() && !run->lost) {
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
    if (!run.cancel_action.empty() || run.lost || run.quiet) return;
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
    run->meter.tracer = self->opts.tracer;
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
            if (auto tp = string_of(rec.spec, "traceparent"); !tp.empty()) req.config.traceparent = tp;
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
            // A quiet run (a /runs/wait's) has no per-step events: its final values are recorded below.
            req.modes = run->quiet ? stream_mode::none : stream_mode::values | stream_mode::updates;
            static const std::map<std::string, stream_mode> engine_modes = {
                {"custom", stream_mode::custom}, {"tasks", stream_mode::tasks}, {"checkpoints", stream_mode::checkpoints},
                {"debug", stream_mode::debug},   {"messages", stream_mode::messages}, {legacy_messages_mode, stream_mode::messages}};
            if (!run->quiet)
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
                    run->final_values.emplace(std::move(v));
                } else if (outcome.status == run_status::done && run->cancel_action.empty() &&
                           (run->quiet || (resumed && run->last_values.empty()))) {
                    // The final state as the run's last values event, when no step recorded it:
                    // - a quiet run (a /runs/wait's) records no per-step events: this is its answer;
                    // - a run taken over after the earlier worker had committed every step but
                    //   before it stored their events (events are written apart from checkpoints):
                    //   this attempt ran nothing, and its stream would otherwise end on the last
                    //   values the dead worker had stored.
                    json::object v = a->graph.core()->output ? std::move(outcome.output) : std::move(outcome.values);
                    self->record(*run, "values", v);
                    run->final_values.emplace(std::move(v));
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
    bool hand_over = false;
    try {
        // Events not yet written go with the run's end, in its transaction, unless a flush is
        // writing some now (then it writes the rest too, in order).
        if (run->flushing && !run->gathering) co_await self->flush_all(run);
        run->ending = true; // a flush still gathering leaves them to the end
        std::vector<run_event> last_events;
        if (!run->lost) last_events = std::move(run->buffered);
        run->buffered.clear();
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
            // (its events first: the attempt that takes it over continues after them)
            if (!last_events.empty()) (void)co_await self->store->append_events(rec.run_id, me, std::move(last_events));
            (void)co_await self->store->release(rec.run_id, me);
        } else {
            std::optional<thread_record> th = co_await self->store->get_thread(rec.thread_key);
            // A stateless run's thread (temporary: never shown, its checkpoints deleted below)
            // is not read back from the checkpointer when the run's values are known.
            const bool read_back = th && !(th->temporary && !run->last_values.empty());
            if (th) {
                if (read_back) {
                    try {
                        th = co_await self->refreshed(std::move(*th));
                    } catch (const std::exception&) {
                        if (run->cancel_action == "rollback") {
                            th->values = nullptr;
                            th->interrupts = {};
                            th->status = "idle";
                        }
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
            if (run->final_values) rec.result = std::move(*run->final_values);
            else rec.result = !run->last_values.empty() ? json::parse(run->last_values) : (th ? th->values : json::value(nullptr));
            const bool removed_by_rollback = run->cancel_action == "rollback" && rec.error.is_null();
            const std::span<const run_event> with(last_events);
            const bool ended_here = co_await self->store->finish(rec, me, th ? &*th : nullptr, with);
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
                auto sending = send_webhook(self, std::string(hook->get_string()), serialize_strict(payload), rec.run_id);
                net::co_spawn(self->ex, std::move(sending), [self, id = rec.run_id](std::exception_ptr e) {
                    --self->webhooks_in_flight;
                    if (e) self->log_line("run '" + id + "': its webhook stopped unexpectedly");
                    self->wake(self->drained_wake);
                });
            }
            if (removed_by_rollback) (void)co_await self->store->delete_run(rec.run_id);
            else hand_over = ended_here; // what finish stored: a waiter here answers with it (below)
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
    const std::string id = rec.run_id;
    if (hand_over && self->run_end_watch.count(id)) {
        if (self->ended_here.size() >= 4096) self->ended_here.clear(); // their waiters gone: a waiter reads the store
        self->ended_here.insert_or_assign(id, std::move(rec));
    }
    self->local.erase(id); // `rec` goes with it
    self->wake_run(id);
    self->wake(self->runs_changed);
    self->wake(self->dispatch_wake);
    self->wake(self->drained_wake);
}

} // namespace stategraph::server
