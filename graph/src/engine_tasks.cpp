// Tasks: a step's tasks made from the frontier, their ids, their stored pending writes and
// their restoring from them, and the task and checkpoint events.

#include "engine_internal.hpp"

namespace stategraph::detail::engine {

namespace {

std::string error_message(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
    }
    return "a non-standard exception";
}

std::string task_id(const std::string& cp_id, const std::string& node, int push_index) {
    std::string id = cp_id + ":" + node;
    if (push_index >= 0) id += ":" + std::to_string(push_index);
    return id;
}

} // namespace

const boost::json::object& encoded_writes(const graph_core& g, task& t) {
    if (!t.encoded) t.encoded = update_json(*g.st, t.out.writes);
    return *t.encoded;
}

std::vector<checkpoint::pending_write> task_writes(const graph_core& g, task& t) {
    std::vector<checkpoint::pending_write> ws;
    const std::string& name = g.nodes[static_cast<std::size_t>(t.node)].name;
    auto add = [&](std::string_view channel, boost::json::value v) {
        ws.push_back({t.id, name, std::string(channel), std::move(v)});
    };
    if (t.status == task_status::done) {
        for (const auto& [k, v] : encoded_writes(g, t)) add(k, v);
        boost::json::array go;
        for (const auto& target : t.out.targets) go.push_back(boost::json::string(target));
        add(names::goto_, std::move(go));
        // `__goto__` always: with no field written it is what marks the task finished. Sends only
        // when there are any (reload_task reads none from a missing list): a row less per task.
        if (!t.out.sends.empty()) {
            boost::json::array sends;
            for (const auto& s : t.out.sends) sends.push_back(send_json(s));
            add(names::send, std::move(sends));
        }
    } else if (t.status == task_status::interrupted) {
        boost::json::array list;
        for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"node", i.node}, {"value", i.value}});
        add(names::interrupt, std::move(list));
        // The answers the task already received (an interrupt after an earlier one was answered);
        // none is no write: reload_task reads a missing list as empty. (A first interrupt is the
        // common case: one pending-write row less to store and to read back at the resume.)
        if (!t.frame.resume.empty()) {
            boost::json::array resumes(t.frame.resume.begin(), t.frame.resume.end());
            add(names::resume, std::move(resumes));
        }
    } else if (t.status == task_status::failed) {
        add(names::error, boost::json::string(error_message(t.error)));
    }
    return ws;
}

/// Rebuilds a task's outcome from its saved writes; returns false when it must run.
bool reload_task(const graph_core& g, run_state& r, task& t) {
    auto it = r.saved.pending.find(t.id);
    if (it == r.saved.pending.end()) return false;
    const auto& st = *g.st;
    bool done = false;
    for (const auto& w : it->second) {
        if (w.channel == names::interrupt) {
            t.status = task_status::interrupted;
            for (const auto& i : w.value.as_array())
                t.interrupts.push_back({std::string(i.at("id").as_string()), std::string(i.at("node").as_string()), i.at("value")});
        } else if (w.channel == names::resume) {
            t.frame.resume.assign(w.value.as_array().begin(), w.value.as_array().end());
        } else if (w.channel == names::effects) {
            t.frame.effects = w.value.as_object(); // its side effects ran: their results
        } else if (w.channel == names::error) {
            // a failed task runs again
        } else if (w.channel == names::goto_) {
            done = true;
            for (const auto& target : w.value.as_array()) t.out.targets.push_back(std::string(target.as_string()));
        } else if (w.channel == names::send) {
            done = true;
            for (const auto& p : w.value.as_array()) {
                int id = g.find(std::string(p.at("node").as_string()));
                if (id >= 0) t.out.sends.push_back(restored_send(g, id, p.at("arg")));
            }
        } else {
            int i = st.index_of(w.channel);
            if (i < 0) continue;
            if (!t.out.writes) t.out.writes = update_box(st);
            read_update_field(st, t.out.writes, static_cast<std::size_t>(i), w.value, errc::corrupt_checkpoint,
                              "thread '" + r.thread_id() + "', checkpoint " + r.saved.cp_id + ", pending write of task '" +
                                  w.task_id + "' (node '" + w.task_name + "')");
            done = true;
        }
    }
    if (done) {
        // A task that finished after a resume keeps its (answered) interrupts for get_state.
        t.status = task_status::done;
        t.cached = true;
        t.out_fields = t.out.writes.fields();
        return true;
    }
    return false;
}

/// The tasks of the next step: triggered nodes in name order, then Sends in order; the deferred
/// nodes only when nothing else is pending.
std::vector<task> make_tasks(const graph_core& g, const run_state& r) {
    std::vector<task> tasks;
    auto& f = r.saved.fr;
    std::vector<int> pull = f.pull;
    bool use_deferred = pull.empty() && f.push.empty();
    if (use_deferred) pull = f.deferred;
    std::sort(pull.begin(), pull.end(), [&](int a, int b) {
        return g.nodes[static_cast<std::size_t>(a)].rank < g.nodes[static_cast<std::size_t>(b)].rank;
    });
    tasks.resize(pull.size() + (use_deferred ? 0 : f.push.size()));
    std::size_t k = 0;
    for (int n : pull) {
        task& t = tasks[k++];
        t.node = n;
        t.id = task_id(r.saved.cp_id, g.nodes[static_cast<std::size_t>(n)].name, -1);
        t.input = r.saved.state.get();
    }
    if (!use_deferred) {
        int p = 0;
        for (const auto& s : f.push) {
            task& t = tasks[k++];
            t.node = g.find(s.node());
            t.push_index = p;
            t.id = task_id(r.saved.cp_id, s.node(), p++);
            t.input = s.arg();
        }
    }
    return tasks;
}

/// Where a task is listed (get_state, checkpoint events): the Sends in order, then the triggered
/// nodes in declaration order, as LangGraph. (Writes are applied in name order.)
std::pair<int, int> listing_order(const task& t) {
    return t.push_index >= 0 ? std::pair(0, t.push_index) : std::pair(1, t.node);
}

void emit_checkpoint(const graph_core& g, const run_state& r) {
    if (!r.env || !(r.env->wants(stream_mode::checkpoints) || r.env->wants(stream_mode::debug))) return;
    const auto& st = *g.st;
    auto config = [&](const std::string& id) {
        return boost::json::object{
            {"configurable", boost::json::object{{"thread_id", r.thread_id()}, {"checkpoint_ns", r.session.ns()}, {"checkpoint_id", id}}}};
    };
    boost::json::object p;
    p["config"] = config(r.saved.cp_id);
    if (!r.saved.parent_id.empty()) p["parent_config"] = config(r.saved.parent_id);
    p["values"] = state_json(st, r.saved.state.get());
    p["metadata"] = boost::json::object{{"source", r.saved.cp_source}, {"step", r.saved.step}, {"parents", boost::json::object{}}};
    boost::json::array next, tasks;
    if (r.saved.has_start_input) {
        // An input checkpoint: its input is still to apply, by the `__start__` task.
        next.push_back(boost::json::string(names::start_task));
        tasks.push_back(boost::json::object{{"id", task_id(r.saved.cp_id, std::string(names::start_task), -1)},
                                            {"name", names::start_task},
                                            {"interrupts", boost::json::array{}}});
    }
    for (const auto& n : next_names(g, r.saved.fr)) next.push_back(boost::json::string(n));
    auto listed = make_tasks(g, r);
    std::stable_sort(listed.begin(), listed.end(),
                     [](const task& a, const task& b) { return listing_order(a) < listing_order(b); });
    for (const auto& t : listed) {
        boost::json::array interrupts;
        if (auto it = r.saved.pending.find(t.id); it != r.saved.pending.end())
            for (const auto& w : it->second)
                if (w.channel == names::interrupt)
                    for (const auto& i : w.value.as_array())
                        interrupts.push_back(boost::json::object{{"id", i.at("id")}, {"value", i.at("value")}});
        tasks.push_back(boost::json::object{
            {"id", t.id}, {"name", g.nodes[static_cast<std::size_t>(t.node)].name}, {"interrupts", std::move(interrupts)}});
    }
    p["next"] = std::move(next);
    p["tasks"] = std::move(tasks);
    emit_record(*r.env, r, stream_mode::checkpoints, "checkpoint", r.saved.step, std::string(), std::move(p));
}

bool is_resume_mismatch(const task& t) {
    if (t.status != task_status::failed) return false;
    try {
        std::rethrow_exception(t.error);
    } catch (const thread_error& e) {
        return e.kind() == errc::resume_type_mismatch;
    } catch (...) {
    }
    return false;
}

bool retryable(const retry_policy& p, std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const thread_error&) {
        return false; // resume problems are not transient
    } catch (...) {
    }
    return !p.retry_on || p.retry_on(e);
}

/// Runs a coroutine node against its retry policy's per-attempt time limit; the node is
/// cancelled (Asio cancellation) when the limit passes first.
boost::asio::awaitable<void> call_with_timeout(const node_rt& rt, task& t, context& ctx, boost::asio::any_io_executor ex) {
    // Not `work || timer`: awaitable_operators' || waits for one *success*, so a node that throws
    // (an error, or the interrupt_signal of interrupt()) would only be seen when the timer fires.
    // wait_for_one() ends with whichever finishes first.
    boost::asio::steady_timer timer(ex, rt.timeout);
    auto work = rt.call.async(t.input, ctx, t.out);
    auto wait = timer.async_wait(boost::asio::use_awaitable);
    auto [order, work_error, wait_error] =
        co_await boost::asio::experimental::make_parallel_group(boost::asio::co_spawn(ex, std::move(work), boost::asio::deferred),
                                                                boost::asio::co_spawn(ex, std::move(wait), boost::asio::deferred))
            .async_wait(boost::asio::experimental::wait_for_one(), boost::asio::use_awaitable);
    (void)wait_error;
    if (order[0] == 0) {
        if (work_error) std::rethrow_exception(work_error);
        co_return;
    }
    throw graph_error(errc::node_timeout,
                      "node '" + rt.name + "' attempt " + std::to_string(ctx.attempt()) + " ran past its time limit of " +
                          std::to_string(rt.timeout.count()) + " ms",
                      {rt.name});
}

/// A task starting, for the `tasks` and `debug` streams: once per task, whatever its attempts.
void emit_task_start(const call_env& env, const run_state& r, const task& t) {
    const std::string& name = env.g.nodes[static_cast<std::size_t>(t.node)].name;
    boost::json::object p;
    p["id"] = t.id;
    p["name"] = name;
    if (t.push_index >= 0) {
        p["input"] = r.saved.fr.push[static_cast<std::size_t>(t.push_index)].arg_json();
        p["triggers"] = boost::json::array{"__pregel_push"};
    } else {
        p["input"] = state_json(*env.g.st, r.saved.state.get());
        p["triggers"] = boost::json::array{boost::json::string("branch:to:" + name)};
    }
    p["interrupts"] = boost::json::array{};
    emit_record(env, r, stream_mode::tasks, "task", r.saved.step + 1, name, std::move(p));
}

/// A task's outcome, for the `tasks` and `debug` streams: its writes, its interrupts, its error.
void emit_task_result(const call_env& env, const run_state& r, task& t) {
    const std::string& name = env.g.nodes[static_cast<std::size_t>(t.node)].name;
    boost::json::object p;
    p["id"] = t.id;
    p["name"] = name;
    p["result"] = t.status == task_status::done ? encoded_writes(env.g, t) : boost::json::object{};
    boost::json::array interrupts;
    for (const auto& i : t.interrupts) interrupts.push_back(boost::json::object{{"id", i.id}, {"value", i.value}});
    p["interrupts"] = std::move(interrupts);
    p["error"] = nullptr;
    if (t.status == task_status::failed) p["error"] = error_message(t.error);
    emit_record(env, r, stream_mode::tasks, "task_result", r.saved.step + 1, name, std::move(p));
}

} // namespace stategraph::detail::engine
