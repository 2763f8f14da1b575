// Running a step's tasks: the node cache, timeouts, retries and failure handlers, concurrent
// tasks, conflicting writes, breakpoints, and applying a finished task and routing after it.

#include "engine_internal.hpp"

#include <boost/asio/experimental/concurrent_channel.hpp>
#include <boost/asio/post.hpp>

#include <memory>
#include <mutex>
#include <optional>

namespace stategraph::detail::engine {

/// The cache namespace of a node: the graph's name and the node's.
std::string cache_ns(const graph_core& g, const std::string& node) { return g.topo.name + ":" + node; }

namespace {

/// 64-bit FNV-1a of `text` from `seed`.
std::uint64_t fnv1a(std::string_view text, std::uint64_t seed) {
    std::uint64_t h = seed;
    for (unsigned char c : text) {
        h ^= c;
        h *= 0x100000001b3ull;
    }
    return h;
}

/// The cache key of a task's input: the policy's key of the input's JSON (default: its text); a
/// key over 128 bytes is stored as two 64-bit hashes and its length.
std::string cache_key(const graph_core& g, const node_rt& rt, const task& t) {
    const boost::json::value input =
        t.push_index >= 0 ? rt.arg_to_json(t.input) : boost::json::value(state_json(*g.st, t.input));
    std::string key = rt.cache->key ? rt.cache->key(input) : boost::json::serialize(input);
    if (key.size() <= 128) return key;
    char buf[64];
    std::snprintf(buf, sizeof buf, "#%016llx%016llx:%zu", static_cast<unsigned long long>(fnv1a(key, 0xcbf29ce484222325ull)),
                  static_cast<unsigned long long>(fnv1a(key, 0x84222325cbf29ce4ull)), key.size());
    return buf;
}

/// What the cache keeps of a finished task: its writes, Command targets and Sends.
boost::json::object cache_entry(const graph_core& g, task& t) {
    boost::json::array go;
    for (const auto& target : t.out.targets) go.push_back(boost::json::string(target));
    boost::json::array sends;
    for (const auto& s : t.out.sends) sends.push_back(send_json(s));
    return boost::json::object{{"writes", encoded_writes(g, t)}, {"goto", std::move(go)}, {"sends", std::move(sends)}};
}

/// Rebuilds a task's outcome from a cache entry; false (a miss) when the entry does not fit the
/// graph any more (a field or node renamed since it was written): the node then runs again.
bool replay_cached(const graph_core& g, task& t, const boost::json::value& entry) {
    try {
        const auto& o = entry.as_object();
        node_result out;
        const auto& writes = o.at("writes").as_object();
        if (!writes.empty()) out.writes = update_from_json(*g.st, writes, errc::corrupt_checkpoint, "a node cache entry");
        for (const auto& target : o.at("goto").as_array()) out.targets.push_back(std::string(target.as_string()));
        for (const auto& p : o.at("sends").as_array()) {
            int id = g.find(std::string(p.at("node").as_string()));
            if (id < 0) return false;
            out.sends.push_back(restored_send(g, id, p.at("arg")));
        }
        t.out = std::move(out);
        t.encoded = writes;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

/// What an error handler is told of a task's failure.
node_failure failure_of(const node_rt& rt, const task& t, int attempts) {
    node_failure f;
    f.node = rt.name;
    f.attempts = attempts;
    f.error = t.error;
    try {
        std::rethrow_exception(t.error);
    } catch (const graph_error& e) {
        f.code = e.kind();
        f.message = e.what();
    } catch (const std::exception& e) {
        f.message = e.what();
    } catch (...) {
        f.message = "a non-standard exception";
    }
    return f;
}

/// Runs the node's error handler on a task that failed for good: its outcome becomes the task's
/// (done), or, when the handler fails too, the task fails with an error naming both.
boost::asio::awaitable<void> handle_failure(const run_state& r, const node_rt& rt, task& t, int attempts) {
    const node_failure failure = failure_of(rt, t, attempts);
    const auto& call = rt.on_error.call();
    context ctx = context_access::make(t.frame);
    std::string problem;
    std::exception_ptr handler_error;
    try {
        t.out = node_result{};
        t.encoded.reset();
        if (call.sync) {
            call.sync(r.saved.state.get(), failure, ctx, t.out);
        } else {
            auto handled = call.async(r.saved.state.get(), failure, ctx, t.out);
            co_await std::move(handled);
        }
        t.status = task_status::done;
        t.error = nullptr;
        co_return;
    } catch (const interrupt_signal&) {
        handler_error = std::current_exception();
        problem = "interrupted, which an error handler may not do";
    } catch (const std::exception& e) {
        handler_error = std::current_exception();
        problem = std::string("failed: ") + e.what();
    } catch (...) {
        handler_error = std::current_exception();
        problem = "failed with a non-standard exception";
    }
    const std::string& handler = rt.on_error.name();
    t.out = node_result{};
    t.error = std::make_exception_ptr(error_handler_error(
        rt.name, handler, handler_error, failure.error,
        "error handler '" + handler + "' of node '" + rt.name + "' " + problem + " (the node failed: " + failure.message + ")"));
}

boost::asio::awaitable<void> run_task(const call_env& env, run_state& r, task& t, bool durable) {
    const auto& g = env.g;
    const node_rt& rt = g.nodes[static_cast<std::size_t>(t.node)];
    const int attempts = rt.retry ? std::max(1, rt.retry->max_attempts) : 1;
    // Tells the call's observer how long the task took, however it ends (a cancelled task too).
    struct node_timer {
        run_observer* o;
        const std::string& name;
        const task& t;
        std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
        ~node_timer() {
            if (o) o->on_node_end(name, std::chrono::steady_clock::now() - start, t.status == task_status::failed);
        }
    };
    const node_timer timing{env.cfg.observer, rt.name, t};
    auto ex = co_await boost::asio::this_coro::executor;
    auto& f = t.frame;
    f.begin(env, r, rt.name, t.id, ex, t.has_child_resume ? &t.child_resume : nullptr);
    const bool streams_tasks = env.wants(stream_mode::tasks) || env.wants(stream_mode::debug);
    if (streams_tasks) emit_task_start(env, r, t);
    // A cached node: a hit replays the saved outcome instead of running the node.
    const bool cached = rt.cache && g.cache;
    std::string key;
    if (cached) {
        std::exception_ptr key_error;
        try {
            key = cache_key(g, rt, t);
        } catch (...) {
            key_error = std::current_exception();
        }
        if (key_error) {
            t.status = task_status::failed;
            t.error = key_error;
        } else {
            auto lookup = g.cache->cache_get(cache_ns(g, rt.name), key);
            auto entry = co_await std::move(lookup);
            if (entry && replay_cached(g, t, *entry)) {
                t.status = task_status::done;
                t.cached = true;
                if (r.tracer) {
                    begin_node_span(r, t, rt.name, 1, true);
                    end_node_span(r, t, nullptr);
                }
                t.out_fields = t.out.writes.fields();
                if (env.wants(stream_mode::updates)) emit(env, r, stream_mode::updates, rt.name, *t.encoded, true);
                if (streams_tasks) emit_task_result(env, r, t);
                if (durable && r.session) co_await r.session.put_writes(r.saved.cp_id, task_writes(g, t));
                co_return;
            }
        }
    }
    int attempts_made = 0;
    for (int attempt = 1; t.status == task_status::pending; ++attempt) {
        attempts_made = attempt;
        f.counter = 0;
        f.effect_calls.clear();
        f.attempt = attempt;
        context ctx = context_access::make(f);
        std::exception_ptr error;
        if (r.tracer) begin_node_span(r, t, rt.name, attempt, false);
        try {
            t.out = node_result{};
            if (rt.call.sync) rt.call.sync(t.input, ctx, t.out);
            else if (rt.timeout.count() > 0) co_await call_with_timeout(rt, t, ctx, ex);
            else co_await rt.call.async(t.input, ctx, t.out);
            t.status = task_status::done;
        } catch (interrupt_signal& sig) {
            t.status = task_status::interrupted;
            t.interrupts = std::move(sig.interrupts);
        } catch (...) {
            error = std::current_exception();
        }
        if (f.span) end_node_span(r, t, error);
        if (error) {
            bool retry = attempt < attempts && rt.retry && retryable(*rt.retry, error);
            if (retry) {
                boost::asio::steady_timer timer(ex, rt.retry->delay_before(attempt + 1));
                co_await timer.async_wait(boost::asio::use_awaitable);
                continue;
            }
            t.status = task_status::failed;
            t.error = error;
        }
        break;
    }
    if (t.status == task_status::done && cached) {
        auto store = g.cache->cache_put(cache_ns(g, rt.name), key, boost::json::value(cache_entry(g, t)), rt.cache->ttl);
        co_await std::move(store);
    }
    if (t.status == task_status::failed && rt.on_error && !is_resume_mismatch(t)) {
        co_await handle_failure(r, rt, t, attempts_made);
    }
    if (t.status == task_status::done) {
        t.out_fields = t.out.writes.fields();
        if (env.wants(stream_mode::updates)) emit(env, r, stream_mode::updates, rt.name, encoded_writes(g, t));
    }
    if (streams_tasks) emit_task_result(env, r, t);
    if (durable && r.session && !is_resume_mismatch(t)) co_await r.session.put_writes(r.saved.cp_id, task_writes(g, t));
}

} // namespace

namespace {

/// What a step's lone task shares with the put of the queued checkpoints started while it waits.
struct lone_put {
    std::mutex m;
    bool task_done = false; ///< the task returned: a put not started by then is not started
    bool started = false;   ///< the put started: the step waits for `done`
    std::exception_ptr error;
    std::optional<boost::asio::experimental::concurrent_channel<void(boost::system::error_code)>> done;
};

/// True when running `t` cannot wait for anything: a plain function (not a coroutine) without a
/// cache (a lookup is the saver's I/O), retries (their backoff is a timer) or a coroutine error
/// handler, and no pending writes stored after it. Such a task needs no handler beside it: the
/// queued checkpoints wait for the next step that can wait, or for the call's end.
bool never_waits(const graph_core& g, const task& t, bool durable) {
    const node_rt& rt = g.nodes[static_cast<std::size_t>(t.node)];
    return !durable && rt.call.sync && !(rt.cache && g.cache) && !rt.retry && !(rt.on_error && !rt.on_error.call().sync);
}

/// The lone task of a step, with checkpoints queued: a handler posted before it starts the put
/// if it runs while the task waits (the event loop reaches it only then, or after the task
/// returned, when it does nothing). No coroutine, strand or group when the task never waits.
boost::asio::awaitable<void> run_lone_task(const call_env& env, run_state& r, task& t, bool durable) {
    auto ex = co_await boost::asio::this_coro::executor;
    auto s = std::make_shared<lone_put>();
    boost::asio::post(ex, [s, &r, ex] {
        {
            std::lock_guard l(s->m);
            if (s->task_done) return; // r may be gone: touch nothing of it
            s->started = true;
            s->done.emplace(ex, 1);
        }
        auto put = put_queued(r); // r outlives it: the step waits for `done` once `started`
        boost::asio::co_spawn(ex, std::move(put), [s](std::exception_ptr e) {
            {
                std::lock_guard l(s->m);
                s->error = e;
            }
            s->done->try_send(boost::system::error_code{});
        });
    });
    std::exception_ptr failed;
    try {
        co_await run_task(env, r, t, durable);
    } catch (...) {
        failed = std::current_exception();
    }
    bool wait = false;
    {
        std::lock_guard l(s->m);
        s->task_done = true;
        wait = s->started;
    }
    if (wait) {
        co_await s->done->async_receive(boost::asio::use_awaitable);
        if (!failed) failed = s->error; // a storage failure: the checkpoints' put
    }
    if (failed) std::rethrow_exception(failed);
}

} // namespace

/// Runs the step's tasks, in parallel when there are several. With async durability the queued
/// checkpoints are put beside them: before several tasks (the first of the group, so that a
/// task's pending writes for the checkpoint follow it); beside a lone task only once it waits
/// for something (a model, a timer, I/O). A lone task that returns without waiting leaves the
/// queue to grow: the checkpoints of a run of such steps are put together, in one commit where
/// the saver can, by the step whose node waits, by settle() when the call stops, or when the
/// queue is full (`record_writer::max_queued`). A put's failure is the call's error once the
/// tasks are done.
boost::asio::awaitable<void> run_tasks(const call_env& env, run_state& r, std::vector<task*> todo, bool durable) {
    if (todo.size() == 1) {
        if (r.writer.queue.empty() || never_waits(env.g, *todo[0], durable)) co_await run_task(env, r, *todo[0], durable);
        else co_await run_lone_task(env, r, *todo[0], durable);
        co_return;
    }
    if (!r.tasks_strand) {
        auto ex = co_await boost::asio::this_coro::executor;
        r.tasks_strand.emplace(boost::asio::make_strand(ex));
    }
    const auto& strand = *r.tasks_strand;
    using op_t = decltype(boost::asio::co_spawn(strand, std::declval<boost::asio::awaitable<void>>(), boost::asio::deferred));
    std::vector<op_t> ops_list;
    ops_list.reserve(todo.size() + 1);
    if (!r.writer.queue.empty()) {
        auto put = put_queued(r);
        ops_list.push_back(boost::asio::co_spawn(strand, std::move(put), boost::asio::deferred));
    }
    for (task* t : todo) {
        auto aw = run_task(env, r, *t, durable);
        ops_list.push_back(boost::asio::co_spawn(strand, std::move(aw), boost::asio::deferred));
    }
    auto group = boost::asio::experimental::make_parallel_group(std::move(ops_list));
    auto [order, errors] = co_await group.async_wait(boost::asio::experimental::wait_for_all(), boost::asio::use_awaitable);
    (void)order;
    for (auto& e : errors)
        if (e) std::rethrow_exception(e); // a storage failure: the checkpoints' put, or put_writes
}

[[noreturn]] void throw_failure(const graph_core& g, const task& t) {
    const std::string& name = g.nodes[static_cast<std::size_t>(t.node)].name;
    try {
        std::rethrow_exception(t.error);
    } catch (const graph_error&) {
        throw;
    } catch (const std::exception& e) {
        throw node_error(name, t.error, "node '" + name + "' failed: " + e.what());
    } catch (...) {
        throw node_error(name, t.error, "node '" + name + "' failed with a non-standard exception");
    }
}

/// Two writes of a last-value field, or two overwrites of a reducer field, in one step.
void check_conflicts(const graph_core& g, const std::vector<task>& tasks) {
    if (tasks.size() < 2) return;
    const auto& st = *g.st;
    std::vector<field_mask> overwrites;
    overwrites.reserve(tasks.size());
    for (const auto& t : tasks) overwrites.push_back(t.out.writes.overwrites());
    for (std::size_t i = 0; i < st.n; ++i) {
        const bool last = st.last_value[i];
        std::vector<std::string> writers;
        for (std::size_t k = 0; k < tasks.size(); ++k)
            if (last ? tasks[k].out_fields.test(i) : overwrites[k].test(i))
                writers.push_back(g.nodes[static_cast<std::size_t>(tasks[k].node)].name);
        if (writers.size() > 1) {
            const std::string& field = st.names[i];
            std::string list;
            for (const auto& w : writers) list += (list.empty() ? "'" : ", '") + w + "'";
            writers.insert(writers.begin(), field);
            throw invalid_update_error(errc::invalid_concurrent_update,
                                       last ? "field '" + field + "' keeps the last value but was written by " + list +
                                                  " in the same step; give it a reducer or let one node write it"
                                            : "field '" + field + "' was overwritten by " + list +
                                                  " in the same step; a field takes one overwrite per step",
                                       writers);
        }
    }
}

/// A step's overwrite of a reducer field wins over the other writes of that field in the step,
/// whatever their order (as LangGraph): those are dropped. Returns the overwritten fields.
field_mask settle_overwrites(const graph_core& g, std::vector<task>& tasks) {
    const auto& st = *g.st;
    field_mask all;
    for (const auto& t : tasks) all |= t.out.writes.overwrites();
    if (all.none() || tasks.size() < 2) return all;
    for (auto& t : tasks) {
        if (!t.out.writes) continue;
        const field_mask others = all & t.out_fields & ~t.out.writes.overwrites();
        for (std::size_t i = 0; i < st.n; ++i)
            if (others.test(i)) st.unmark(t.out.writes.get(), i);
    }
    return all;
}

run_outcome make_result(const graph_core& g, const run_state& r, run_status status, std::vector<interrupt_info> interrupts,
                        bool copy_values) {
    run_outcome res;
    res.status = status;
    if (copy_values) res.values = r.saved.state;
    res.interrupts = std::move(interrupts);
    res.checkpoint_id = r.saved.cp_id;
    res.step = r.saved.step;
    res.next = next_names(g, r.saved.fr);
    if (g.output && r.ns_path.empty()) res.output = g.output->write(r.saved.state.get(), r.path);
    return res;
}

void route_after(const graph_core& g, task& t, const void* view, frontier& next) {
    successors(g, t.node, view, next);
    const std::string& name = g.nodes[static_cast<std::size_t>(t.node)].name;
    for (const auto& target : t.out.targets) add_target(g, target, next, name);
    for (auto& s : t.out.sends) {
        check_send(g, s, name);
        next.push.push_back(std::move(s));
    }
}

/// Matches a resume to the pending interrupts; validates ids.
void apply_resume(run_state& r, const resume_input& res) {
    std::map<std::string, std::string> owner; // interrupt id -> task id
    for (const auto& [tid, ws] : r.saved.pending) {
        // A task that finished after an earlier resume has nothing pending any more.
        bool finished = std::any_of(ws.begin(), ws.end(), [](const checkpoint::pending_write& w) {
            return w.channel == names::goto_ || w.channel == names::send;
        });
        if (finished) continue;
        for (const auto& w : ws)
            if (w.channel == names::interrupt)
                for (const auto& i : w.value.as_array()) owner[std::string(i.at("id").as_string())] = tid;
    }
    if (owner.empty())
        throw thread_error(errc::nothing_to_resume, "thread '" + r.thread_id() + "' has no pending interrupt to resume",
                           {r.thread_id()});
    if (res.is_map) {
        for (const auto& [id, v] : res.by_id)
            if (!owner.count(id)) {
                std::string known;
                for (const auto& [k, t] : owner) known += (known.empty() ? "" : ", ") + k;
                throw thread_error(errc::unknown_interrupt_id,
                                   "thread '" + r.thread_id() + "' has no pending interrupt '" + id + "' (pending: " + known + ")",
                                   {r.thread_id(), id});
            }
    }
    r.resume_answers.clear();
    for (const auto& [id, tid] : owner) {
        if (res.is_map) {
            auto it = res.by_id.find(id);
            if (it != res.by_id.end()) r.resume_answers[id] = it->second;
        } else {
            r.resume_answers[id] = res.value;
        }
    }
}

/// A static breakpoint: marks the checkpoint as seen (so continuing passes it) and stops. Its
/// `__interrupt__` event belongs to the step about to run (before) or to the step that ran
/// (after), as LangGraph labels them.
boost::asio::awaitable<void> stop_at_breakpoint(const call_env& env, run_state& r, bool after) {
    co_await settle_staged(env.g, r); // exit: the checkpoint the breakpoint is written against, before `seen` moves
    r.saved.fr.seen = r.saved.cp_id;
    hold_writes(r, {{std::string(names::breakpoint), std::string(names::breakpoint), std::string(names::breakpoint),
                     boost::json::string(r.saved.cp_id)}}); // stored by the call's settle()
    emit(env, r, stream_mode::updates, std::string(names::interrupt), boost::json::array{}, false, true,
         after ? r.saved.step : r.saved.step + 1);
}

[[noreturn]] void throw_recursion_limit(const graph_core& g, const run_state& r, int limit) {
    std::string next;
    for (const auto& n : next_names(g, r.saved.fr)) next += (next.empty() ? "" : ", ") + n;
    throw recursion_limit_error(errc::recursion_limit,
                                "recursion limit of " + std::to_string(limit) + " supersteps reached without hitting END (next: " +
                                    next + "); raise run_config::recursion_limit if the graph is meant to loop longer",
                                {});
}

/// The writes of this step's tasks that were not saved as they finished (a single task, or
/// exit durability), held when the call stops inside the step (an interrupt or a failure):
/// settle() stores them after the checkpoint they belong to, with the call's last checkpoints
/// and the lease's release in one `end_call`, so that continuing the thread does not run again
/// the tasks that finished.
void save_held_writes(const graph_core& g, run_state& r, std::vector<task>& tasks) {
    std::vector<checkpoint::pending_write> ws;
    for (auto& t : tasks) {
        if (t.status == task_status::pending || t.cached || is_resume_mismatch(t)) continue;
        auto w = task_writes(g, t);
        ws.insert(ws.end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
    }
    if (!ws.empty()) hold_writes(r, std::move(ws));
}

void hold_writes(run_state& r, std::vector<checkpoint::pending_write> ws) {
    auto& w = r.writer;
    if (!w.held.empty() && w.held_to != r.saved.cp_id) throw std::logic_error("writes held against two checkpoints");
    w.held_to = r.saved.cp_id;
    w.held.insert(w.held.end(), std::make_move_iterator(ws.begin()), std::make_move_iterator(ws.end()));
}

/// Applies a single task's writes and routes from its node. Routing that reads no state (no
/// conditional edge) runs first, and with exit durability a router reads a copy: a routing error
/// (a router that throws, an unknown target) then leaves the state as the staged checkpoint has
/// it, and that is what the failed call writes.
void apply_and_route(const call_env& env, run_state& r, task& t, frontier& next) {
    const auto& g = env.g;
    const auto& st = *g.st;
    if (!t.out.writes || g.nodes[static_cast<std::size_t>(t.node)].branches.empty()) {
        route_after(g, t, r.saved.state.get(), next);
        track(st, r, t.out.writes); // before apply(), which takes the values
        if (t.out.writes) st.apply(r.saved.state.get(), t.out.writes.get());
    } else if (r.writer.mode == durability::exit && r.session) {
        state_box local = r.saved.state;
        st.apply_copy(local.get(), t.out.writes.get());
        route_after(g, t, local.get(), next);
        track(st, r, t.out.writes);
        r.saved.state = std::move(local);
    } else {
        track(st, r, t.out.writes);
        st.apply(r.saved.state.get(), t.out.writes.get());
        route_after(g, t, r.saved.state.get(), next);
    }
}

} // namespace stategraph::detail::engine
