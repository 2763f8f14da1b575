// The superstep loop, a call's input (values, a Command or a resume), the thread's lease
// around a call, and the snapshot get_state shows of a checkpoint.

#include "engine_internal.hpp"

namespace stategraph::detail::engine {

boost::asio::awaitable<run_outcome> loop(const call_env& env, run_state& r, bool skip_breakpoint) {
    const auto& g = env.g;
    const auto& st = *g.st;
    int supersteps = 0;
    const bool top = !r.track_delta; // subgraphs finish as part of their parent's step
    for (;;) {
        auto tasks = make_tasks(g, r);
        if (tasks.empty()) break;
        // Every call runs its first step (a resume's answer is used, never dropped unsaved).
        if (top && supersteps > 0 && drain_requested()) co_return make_result(g, r, run_status::drained, {});
        // The step's span (a tracing observer): ended with the step's outcome, or as failed when
        // the step throws.
        struct step_trace {
            run_state& r;
            const char* status = nullptr;
            ~step_trace() { end_step_span(r, status); }
        } step_span{r};
        if (r.tracer) begin_step_span(r, tasks.size());
        // Saved outcomes of this step (a resume, or a restart after a crash).
        const bool any_pending = !r.saved.pending.empty();
        for (auto& t : tasks) {
            if (any_pending) reload_task(g, r, t);
            if (t.status != task_status::interrupted) continue;
            // Answers for this task's interrupts: by position for the node itself, by id for a
            // subgraph run by the task (it resumes from its own checkpoint).
            for (const auto& i : t.interrupts) {
                auto it = r.resume_answers.find(i.id);
                if (it == r.resume_answers.end()) continue;
                t.frame.resume.push_back(it->second);
                t.child_resume.by_id[i.id] = it->second;
                t.has_child_resume = true;
            }
            t.status = task_status::pending;
            t.interrupts.clear();
        }
        r.resume_answers.clear();
        if (supersteps >= env.cfg.recursion_limit) throw_recursion_limit(g, r, env.cfg.recursion_limit);
        // Static breakpoint before these nodes.
        if (!skip_breakpoint && r.session) {
            bool hit = std::any_of(tasks.begin(), tasks.end(),
                                   [&](const task& t) { return env.breaks_before(t.node); });
            if (hit && max_version(r.saved.versions) > r.saved.fr.seen) {
                co_await stop_at_breakpoint(env, r, false);
                step_span.status = "breakpoint";
                co_return make_result(g, r, run_status::interrupted, {});
            }
        }
        skip_breakpoint = false;

        // Run what has no saved outcome; cached outcomes are replayed as update events.
        std::vector<task*> todo;
        for (auto& t : tasks) {
            if (t.status == task_status::pending) todo.push_back(&t);
            else if (t.cached && env.wants(stream_mode::updates))
                emit(env, r, stream_mode::updates, g.nodes[static_cast<std::size_t>(t.node)].name, encoded_writes(g, t), true);
        }
        // With several tasks, each task's writes are saved the moment it finishes; a single task's
        // writes go with the step's checkpoint, which follows at once. With exit durability they
        // are held until the call ends (then written only if it stops inside this step).
        const bool durable = tasks.size() > 1 && r.writer.mode != durability::exit;
        if (!todo.empty()) co_await run_tasks(env, r, std::move(todo), durable);

        for (auto& t : tasks)
            if (t.status == task_status::failed) {
                if (!durable && r.session) save_held_writes(g, r, tasks);
                throw_failure(g, t);
            }
        // A command for the parent graph (LangGraph's Command.PARENT): this (sub)graph stops here
        // and its parent's task takes the command; the other tasks' writes of the step are dropped.
        for (auto& t : tasks)
            if (t.status == task_status::done && t.out.parent) {
                const std::string& name = g.nodes[static_cast<std::size_t>(t.node)].name;
                if (r.ns_path.empty())
                    throw graph_error(errc::invalid_route,
                                      "node '" + name + "' returned a command for its parent graph (to_parent), but graph '" +
                                          g.topo.name + "' runs as no subgraph's node: it has no parent",
                                      {name});
                step_span.status = "to_parent";
                throw parent_command_signal{std::move(t.out.parent), name};
            }
        std::vector<interrupt_info> interrupts;
        bool any_interrupted = false; // a subgraph stopped at a breakpoint interrupts without payload
        for (const auto& t : tasks)
            if (t.status == task_status::interrupted) {
                any_interrupted = true;
                interrupts.insert(interrupts.end(), t.interrupts.begin(), t.interrupts.end());
            }
        if (any_interrupted) {
            if (!durable && r.session) save_held_writes(g, r, tasks);
            // One __interrupt__ event per interrupted task, as LangGraph.
            if (env.wants(stream_mode::updates))
                for (const auto& t : tasks) {
                    if (t.status != task_status::interrupted) continue;
                    boost::json::array list;
                    for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"value", i.value}});
                    emit(env, r, stream_mode::updates, std::string(names::interrupt), std::move(list), false, true);
                }
            step_span.status = "interrupted";
            auto res = make_result(g, r, run_status::interrupted, std::move(interrupts));
            // The result includes the writes of the step's finished tasks (as get_state).
            settle_overwrites(g, tasks);
            std::set<int> waiting; // as get_state: a node leaves `next` once all its tasks finished
            for (const auto& t : tasks)
                if (t.status != task_status::done) waiting.insert(t.node);
            for (const auto& t : tasks)
                if (t.status == task_status::done) {
                    if (t.out.writes) st.apply_copy(res.values.get(), t.out.writes.get());
                    if (!waiting.count(t.node)) std::erase(res.next, g.nodes[static_cast<std::size_t>(t.node)].name);
                }
            co_return res;
        }

        // Apply the step's writes together (triggered nodes by name, then Sends in order) and
        // route: a router reads the state as of the step's start plus its own node's writes.
        check_conflicts(g, tasks);
        forget_saved_sizes(r, settle_overwrites(g, tasks));
        field_mask changed = std::exchange(r.command_changed, field_mask{});
        for (const auto& t : tasks) changed |= t.out_fields;
        frontier next;
        next.barriers = r.saved.fr.barriers;
        next.seen = r.saved.fr.seen;
        const bool deferred_ran = r.saved.fr.pull.empty() && r.saved.fr.push.empty();
        if (!deferred_ran) next.deferred = r.saved.fr.deferred; // deferred nodes that ran leave the set
        std::vector<std::string> writers;
        writers.reserve(tasks.size());
        if (tasks.size() == 1) {
            auto& t = tasks[0];
            apply_and_route(env, r, t, next);
            writers.push_back(g.nodes[static_cast<std::size_t>(t.node)].name);
        } else {
            for (auto& t : tasks) {
                const node_rt& rt = g.nodes[static_cast<std::size_t>(t.node)];
                if (!rt.branches.empty() && t.out.writes) {
                    state_box local = r.saved.state;
                    st.apply_copy(local.get(), t.out.writes.get());
                    route_after(g, t, local.get(), next);
                } else {
                    route_after(g, t, r.saved.state.get(), next);
                }
                writers.push_back(rt.name);
            }
            for (auto& t : tasks) {
                track(st, r, t.out.writes); // before apply(), which takes the values
                if (t.out.writes) st.apply(r.saved.state.get(), t.out.writes.get());
            }
        }
        r.saved.fr = std::move(next);
        r.path.insert(r.path.end(), writers.begin(), writers.end());
        r.saved.last_writers = std::move(writers);
        if (r.session) co_await save(g, r, checkpoint::new_checkpoint_id(), r.saved.step + 1, "loop", changed);
        else ++r.saved.step;
        if (env.wants(stream_mode::values)) emit_values(env, r, &changed);
        ++supersteps;
        step_span.status = "done";
        // Static breakpoint after these nodes.
        if (r.session) {
            bool hit = std::any_of(tasks.begin(), tasks.end(),
                                   [&](const task& t) { return env.breaks_after(t.node); });
            if (hit && max_version(r.saved.versions) > r.saved.fr.seen) {
                co_await stop_at_breakpoint(env, r, true);
                co_return make_result(g, r, run_status::interrupted, {});
            }
        }
    }
    co_return make_result(g, r, run_status::done, {}, false); // the state moves in after settle()
}

namespace {

/// The `__start__` task: applies an input to the state, finds what it triggers, and saves the
/// first step's checkpoint (step `step`).
boost::asio::awaitable<void> apply_input(const call_env& env, run_state& r, update_box& input, std::int64_t step) {
    const auto& g = env.g;
    const auto& st = *g.st;
    field_mask changed = input.fields();
    forget_saved_sizes(r, input.overwrites());
    frontier next;
    next.barriers = r.saved.fr.barriers;
    next.seen = r.saved.fr.seen;
    if (g.start_branches.empty() || !input) {
        successors(g, -1, r.saved.state.get(), next);
        if (input) st.apply(r.saved.state.get(), input.get());
    } else if (r.writer.mode == durability::exit && r.session) {
        // a router that fails leaves the state (and the staged input checkpoint) as they were
        state_box local = r.saved.state;
        st.apply(local.get(), input.get());
        successors(g, -1, local.get(), next);
        r.saved.state = std::move(local);
    } else {
        st.apply(r.saved.state.get(), input.get());
        successors(g, -1, r.saved.state.get(), next);
    }
    if (r.session && r.writer.carried.any() && r.writer.carried_id == r.saved.cp_id && r.writer.mode != durability::exit) {
        // A field the input checkpoint stored as its value, and that the input left equal to
        // it (no reducer changed it): this checkpoint names that version, nothing stored again.
        for (std::size_t i = 0; i < st.n; ++i) {
            if (!r.writer.carried.test(i) || !changed.test(i)) continue;
            const auto* in = r.saved.start_input.if_contains(st.names[i]);
            if (!in || st.to_json(r.saved.state.get(), i, {}) != *in) continue;
            changed.reset(i);
            r.saved.versions[i] = r.writer.carried_id;
            r.writer.out.versions.insert_or_assign(std::string(st.names[i]), r.writer.carried_id);
            r.writer.saved_size[i] = st.sequence_size(r.saved.state.get(), i);
            r.writer.delta_chain[i] = 0;
        }
    }
    r.writer.carried.reset();
    r.saved.has_start_input = false;
    r.saved.start_input.clear();
    r.saved.fr = std::move(next);
    r.saved.last_writers = {START};
    if (r.session) co_await save(g, r, checkpoint::new_checkpoint_id(), step, "loop", changed);
    else r.saved.step = step;
    if (env.wants(stream_mode::values)) emit_values(env, r, nullptr);
}

/// A Command as the call's input (LangGraph's `Command(update, goto, resume)`), as LangGraph
/// runs one (project case 58): with a resume, the update is applied before the resumed step's
/// tasks run and the goto targets join that step (no checkpoint of their own); without one, an
/// input checkpoint one step on holds the update applied and what runs next (the nodes the
/// thread was waiting on, their tasks new, plus the goto targets), and the run goes on from it.
/// Returns whether the first step passes its static breakpoints (a resume's does).
boost::asio::awaitable<bool> apply_command(const call_env& env, run_state& r, run_input& in) {
    const auto& g = env.g;
    const auto& st = *g.st;
    const bool has_update = in.json || static_cast<bool>(in.values);
    if (!in.has_resume && !has_update && in.go_to.empty() && in.sends.empty() && in.json_sends.empty())
        throw thread_error(errc::invalid_input,
                           "thread '" + r.thread_id() + "': a command input needs a resume, an update or a goto", {r.thread_id()});
    // Every target is checked before anything changes.
    frontier targets;
    for (const auto& n : in.go_to) add_target(g, n, targets, "command.goto");
    for (auto& [node, arg] : in.json_sends) {
        const int id = g.find(node);
        if (id < 0) add_target(g, node, targets, "command.goto"); // throws invalid_route
        try {
            in.sends.push_back(restored_send(g, id, arg));
        } catch (const graph_error&) {
            throw;
        } catch (const std::exception& e) {
            throw graph_error(errc::invalid_input,
                              "command.goto: the input of a Send to node '" + node + "' does not fit it: " + e.what(), {node});
        }
    }
    for (const auto& s : in.sends) check_send(g, s, "command.goto");
    auto add_targets = [&](frontier& f) {
        for (const auto& n : in.go_to) add_target(g, n, f, "command.goto");
        for (auto& s : in.sends) f.push.push_back(std::move(s));
    };
    auto apply_update = [&]() -> field_mask {
        if (in.json) in.values = merge_update_from_json(st, *in.json, r.saved.state.get(), errc::invalid_input, "command.update");
        if (!in.values) return {};
        const field_mask fields = in.values.fields();
        forget_saved_sizes(r, in.values.overwrites());
        track(st, r, in.values);
        st.apply(r.saved.state.get(), in.values.get());
        return fields;
    };
    if (in.has_resume) {
        if (!r.saved.have_checkpoint)
            throw thread_error(errc::thread_not_found, "cannot resume thread '" + r.thread_id() + "': it has no checkpoint",
                               {r.thread_id()});
        apply_resume(r, in.resume);
        r.command_changed |= apply_update();
        add_targets(r.saved.fr);
        co_return true;
    }
    if (r.saved.has_start_input) {
        // The newest checkpoint is an input whose first step was never saved: it goes first.
        auto input = update_from_json(st, r.saved.start_input, errc::corrupt_checkpoint,
                                      "thread '" + r.thread_id() + "', checkpoint " + r.saved.cp_id + ", input");
        co_await apply_input(env, r, input, r.saved.step + 1);
    }
    const std::int64_t base = r.saved.have_checkpoint ? r.saved.step : -2;
    const field_mask changed = apply_update();
    add_targets(r.saved.fr);
    r.saved.last_writers.clear();
    if (r.session) {
        co_await save(g, r, checkpoint::new_checkpoint_id(), base + 1, "input", changed);
    } else {
        r.saved.pending.clear(); // the tasks waiting run again, as new tasks
        r.saved.step = base + 1, r.saved.have_checkpoint = true;
    }
    co_return false;
}

boost::asio::awaitable<run_outcome> run_locked(const call_env& env, run_state& r, run_input& in) {
    const auto& g = env.g;
    const auto& st = *g.st;
    std::optional<checkpoint::checkpoint_tuple> head;
    std::optional<std::string> from_id;
    if (env.cfg.checkpoint_id) from_id = env.cfg.checkpoint_id.str();
    // The state this graph's last call on the thread paused with, when it kept it (run()).
    std::optional<held_states::entry> kept;
    if (r.session && !from_id && r.session.ns().empty() && g.held.get() && r.session.saver()->omits_held_values())
        kept = g.held.get()->take(r.thread_id());
    if (r.session) {
        if (kept) head = co_await r.session.load_held(kept->checkpoint_id);
        else head = co_await r.session.load(from_id);
        if (head && head->values_omitted && !(kept && head->cp.id == kept->checkpoint_id)) {
            // Not the checkpoint whose state is held (a saver that does not keep to its
            // contract): read its values after all.
            kept.reset();
            head = co_await r.session.reload();
            if (head && head->values_omitted)
                throw checkpoint_error(errc::storage_failure,
                                       "thread '" + r.thread_id() + "': the checkpointer returned checkpoint " + head->cp.id +
                                           " without its values",
                                       {r.thread_id(), head->cp.id});
        }
        if (!head && from_id)
            throw thread_error(errc::checkpoint_not_found, "thread '" + r.thread_id() + "' has no checkpoint '" + *from_id + "'",
                               {r.thread_id(), *from_id});
    }
    // New input starts a trace; a resume or a continuation goes on with the one its thread saved.
    if (r.tracer) begin_run_span(env, r, head ? &head->cp : nullptr, in.what == run_input::kind::values);
    r.saved.fr.barriers.assign(g.joins.size(), {});
    for (std::size_t j = 0; j < g.joins.size(); ++j) r.saved.fr.barriers[j].assign(g.joins[j].sources.size(), 0);
    if (head) {
        if (head->values_omitted) {
            // The checkpoint this graph wrote and paused at (same shape, same state version):
            // its state, as held, instead of its stored values.
            restore(g, r, *head, false, &kept->state);
        } else {
            const bool migrated = migrate(g, *head);
            restore(g, r, *head, signature_of(head->cp) != g.signature);
            if (migrated) r.writer.signature_differs = r.writer.write_all = true;
        }
        if (signature_of(head->cp) != g.signature) {
            if (!env.cfg.allow_drift) {
                co_await load_stored_shape(r);
                throw_drift(g, r);
            }
            r.writer.signature_differs = true;
        }
        // Replaying (continuing) from a checkpoint that is not the thread's newest forks the
        // thread, as LangGraph: a copy of it (source "fork", one step later, its parent that
        // checkpoint) is written first, and the steps run from the copy; the writes its tasks
        // saved on the old branch are dropped (save() clears them), so they run again. A resume
        // from an earlier checkpoint answers the interrupts saved there, in place.
        bool forked = false;
        if (from_id && in.what == run_input::kind::proceed) {
            auto latest = co_await r.session.load(std::nullopt);
            if (latest && latest->cp.id != head->cp.id) {
                const field_mask none;
                co_await save(g, r, checkpoint::new_checkpoint_id(), r.saved.step + 1, "fork", none);
                forked = true;
            }
        }
        // A call that goes on from a saved checkpoint streams it first (as LangGraph on resume).
        if (!forked && in.what != run_input::kind::values && !r.saved.has_start_input) emit_checkpoint(g, r);
    }

    bool skip_breakpoint = false;
    if (in.what == run_input::kind::command) {
        skip_breakpoint = co_await apply_command(env, r, in);
    } else if (in.what == run_input::kind::values) {
        // A caller's JSON is read against the state it starts from (members left out keep it).
        if (in.json) in.values = read_input(g, *in.json, in.json_type, r.saved.state.get(), errc::invalid_input, "input");
        // New input: abandons pending tasks and interrupts; runs from START.
        std::int64_t base = r.saved.have_checkpoint ? r.saved.step : -2;
        r.saved.pending.clear();
        r.saved.delta = update_box{}; // a subgraph's output is what this run writes
        frontier input_fr;
        input_fr.barriers = r.saved.fr.barriers;
        input_fr.seen = r.saved.fr.seen;
        r.saved.fr = input_fr;
        r.saved.last_writers.clear();
        const field_mask none;
        if (r.session) {
            // The input goes into the input checkpoint's record: should the process die before
            // the first step's checkpoint, continuing the thread applies it (`__start__` is next).
            r.saved.start_input = update_json(st, in.values);
            r.saved.has_start_input = true;
            co_await save(g, r, checkpoint::new_checkpoint_id(), base + 1, "input", none);
        } else {
            r.saved.step = base + 1, r.saved.have_checkpoint = true;
        }
        co_await apply_input(env, r, in.values, base + 2);
    } else if (r.saved.has_start_input && in.what != run_input::kind::resume) {
        // The newest checkpoint is an input whose first step was never saved: apply it now.
        auto input = update_from_json(st, r.saved.start_input, errc::corrupt_checkpoint,
                                      "thread '" + r.thread_id() + "', checkpoint " + r.saved.cp_id + ", input");
        co_await apply_input(env, r, input, r.saved.step + 1);
    } else if (in.what == run_input::kind::resume) {
        if (!r.saved.have_checkpoint)
            throw thread_error(errc::thread_not_found, "cannot resume thread '" + r.thread_id() + "': it has no checkpoint",
                               {r.thread_id()});
        apply_resume(r, in.resume);
        skip_breakpoint = true;
    } else if (!r.saved.have_checkpoint) {
        throw thread_error(errc::thread_not_found, "cannot continue thread '" + r.thread_id() + "': it has no checkpoint",
                           {r.thread_id()});
    }
    auto result = co_await loop(env, r, skip_breakpoint);
    co_await settle(g, r, true); // the call returns once its writes are stored (exit durability reads the state)
    if (!result.values) result.values = std::move(r.saved.state); // a finished call: nothing reads it now
    co_return result;
}

} // namespace

/// Releases the session's lease. A failure to release (a full disk, a lost connection) never
/// replaces the call's own outcome: the lease then simply expires after its time to live.
boost::asio::awaitable<void> release_quietly(checkpoint_session& s) {
    try {
        co_await s.release();
    } catch (...) {
    }
}

/// Runs one call on `r`; takes and releases the thread's lease at the top level (run_locked's
/// first load takes it).
boost::asio::awaitable<run_outcome> run(const call_env& env, run_state& r, run_input& in) {
    if (r.session && r.thread_id().empty())
        throw thread_error(errc::invalid_input, "this graph has a checkpointer: pass run_config::thread_id to name the thread", {});
    const bool top = r.session && r.session.ns().empty();
    r.writer.mode = env.cfg.durability;
    r.env = &env;
    if (env.cfg.observer && env.cfg.observer->traces()) r.tracer = env.cfg.observer;
    // The lease is taken with the call's first read of its thread (one commit), and given back
    // with its last writes (one commit), unless it prunes after them.
    if (top) r.session.acquire_on_load();
    r.writer.release_at_end = top && env.cfg.keep_last == 0;
    std::exception_ptr failure;
    run_outcome result;
    try {
        result = co_await run_locked(env, r, in);
        if (top && env.cfg.keep_last > 0) co_await r.session.saver()->prune(r.thread_id(), env.cfg.keep_last);
    } catch (...) {
        failure = std::current_exception();
    }
    if (failure && r.session) {
        // A failed call still leaves its last good checkpoint stored (async: the queued put;
        // exit: the staged checkpoint); a write that fails here is the call's error.
        try {
            co_await settle(env.g, r, true);
        } catch (...) {
            failure = std::current_exception();
        }
    }
    co_await release_quietly(r.session);
    if (r.span) end_run_span(r, failure, failure ? nullptr : &result);
    if (failure) std::rethrow_exception(failure);
    // A call that paused at an interrupt, its writes stored: the thread's state is its newest
    // checkpoint's (the result holds a copy), kept for the resume (held_states). Not with exit
    // durability (its checkpoint is staged), nor after an input not yet applied.
    if (top && result.status == run_status::interrupted && r.saved.have_checkpoint && r.saved.state &&
        !r.saved.has_start_input && r.writer.mode != durability::exit && env.g.held.get() &&
        r.session.saver()->omits_held_values())
        env.g.held.get()->keep(r.thread_id(), r.saved.cp_id, std::move(r.saved.state));
    co_return result;
}

checkpoint::saver* require_saver(const graph_core& g) {
    if (!g.saver)
        throw thread_error(errc::no_checkpointer,
                           "this graph was compiled without a checkpointer: pass compile_options::checkpointer to keep threads", {});
    return g.saver.get();
}

snapshot_data snapshot(const graph_core& g, const checkpoint::checkpoint_tuple& t, bool apply_pending) {
    const auto& st = *g.st;
    run_state r(g);
    r.session = checkpoint_session(nullptr, t.thread_id, t.ns);
    restore(g, r, t, signature_of(t.cp) != g.signature);
    snapshot_data s;
    s.step = r.saved.step;
    s.source = t.cp.source;
    s.checkpoint_id = t.cp.id;
    s.parent_checkpoint_id = t.cp.parent_id;
    s.metadata = t.cp.metadata;
    if (r.saved.has_start_input) {
        // The whole input, as the checkpoint was written before its fields became values.
        auto& w = s.metadata[names::writes];
        if (!w.is_object()) w = boost::json::object{};
        w.as_object()[names::start_task] = r.saved.start_input;
    }
    auto tasks = make_tasks(g, r);
    std::vector<task> finished;
    std::set<int> waiting; // nodes with a task of this step not finished (not run, interrupted, failed)
    // `tasks` lists the triggered nodes in name order (the order their writes are applied in);
    // the snapshot lists the Sends in order, then the triggered nodes in declaration order, as
    // LangGraph does.
    std::vector<std::pair<std::pair<int, int>, task_snapshot>> listed;
    for (auto& tk : tasks) {
        reload_task(g, r, tk);
        task_snapshot ts;
        ts.id = tk.id;
        ts.name = g.nodes[static_cast<std::size_t>(tk.node)].name;
        ts.interrupts = tk.interrupts;
        if (tk.status == task_status::done) ts.result = update_json(st, tk.out.writes);
        if (auto it = r.saved.pending.find(tk.id); it != r.saved.pending.end())
            for (const auto& w : it->second)
                if (w.channel == names::error) ts.error = std::string(w.value.as_string());
        const auto order = listing_order(tk);
        if (tk.status == task_status::done) finished.push_back(std::move(tk));
        else waiting.insert(tk.node);
        listed.emplace_back(order, std::move(ts));
    }
    std::stable_sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& l : listed) s.tasks.push_back(std::move(l.second));
    auto next = next_names(g, r.saved.fr);
    if (r.saved.has_start_input) next.insert(next.begin(), std::string(names::start_task)); // its input is still to apply
    if (apply_pending && !finished.empty()) {
        check_conflicts(g, finished);
        settle_overwrites(g, finished);
        // A finished task leaves `next` only while others of its step still wait (an interrupt,
        // a failure, not run yet), and only when no other task of its node waits: of three
        // Sends to one node, two finished and one killed, the node stays in `next`. When every
        // task finished but the step's checkpoint is missing (the process died in between), the
        // step is still to be completed: its nodes stay in `next`, and continuing the thread
        // completes it without running them again.
        const bool step_complete = waiting.empty();
        for (auto& f : finished) {
            if (f.out.writes) st.apply(r.saved.state.get(), f.out.writes.get());
            if (!step_complete && !waiting.count(f.node)) std::erase(next, g.nodes[static_cast<std::size_t>(f.node)].name);
        }
    }
    s.values = std::move(r.saved.state);
    s.next = std::move(next);
    return s;
}

} // namespace stategraph::detail::engine
