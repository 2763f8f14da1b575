// The engine's entry points (declared in detail/engine.hpp): run_graph, clear_cache,
// get_state, get_state_history, update_state, subgraph calls, and graph_core::lower. The rest of
// the engine is in engine_*.cpp (see engine_internal.hpp).

#include "engine_internal.hpp"

namespace stategraph {
namespace detail {

held_slot::held_slot() : p_(std::make_unique<held_states>()) {}
held_slot::held_slot(const held_slot&) : held_slot() {}
held_slot::held_slot(held_slot&&) noexcept = default;
held_slot& held_slot::operator=(const held_slot&) {
    p_ = std::make_unique<held_states>();
    return *this;
}
held_slot& held_slot::operator=(held_slot&&) noexcept = default;
held_slot::~held_slot() = default;

// ---------------------------------------------------------------------------------------------
// entry points

boost::asio::awaitable<run_outcome> run_graph(std::unique_ptr<run_request> req) {
    const graph_core& g = *req->graph;
    run_state r(g);
    r.run_id = checkpoint::new_checkpoint_id();
    r.session = checkpoint_session(g.saver.get(), req->cfg.thread_id.str(), "");
    r.session.observe(req->cfg.observer);
    // Per-call breakpoints: node names ("*": all) into flags by node index.
    auto flags = [&g](const std::optional<std::vector<std::string>>& names, const char* which) {
        std::vector<char> out;
        if (!names) return out;
        out.assign(g.nodes.size(), 0);
        for (const auto& n : *names) {
            if (n == "*") {
                out.assign(g.nodes.size(), 1);
                continue;
            }
            const int i = g.find(n);
            if (i < 0) {
                auto near = nearest_name(n, g.topo.node_names());
                throw graph_error(errc::unknown_node,
                                  std::string(which) + ": '" + n + "' is not a node of graph '" + g.topo.name + "'" +
                                      (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                                  {n});
            }
            out[static_cast<std::size_t>(i)] = 1;
        }
        return out;
    };
    const auto before = flags(req->interrupt_before, "interrupt_before");
    const auto after = flags(req->interrupt_after, "interrupt_after");
    call_env env{g, req->cfg, req->modes, req->on_event};
    if (req->interrupt_before) env.before = &before;
    if (req->interrupt_after) env.after = &after;
    co_return co_await run(env, r, req->input);
}

boost::asio::awaitable<std::size_t> clear_cache(std::shared_ptr<const graph_core> graph, std::vector<std::string> nodes) {
    std::vector<std::string> namespaces;
    if (nodes.empty())
        for (const auto& n : graph->nodes) namespaces.push_back(cache_ns(*graph, n.name));
    for (const auto& n : nodes) {
        if (graph->find(n) < 0) {
            std::vector<std::string> known;
            for (const auto& k : graph->nodes) known.push_back(k.name);
            auto near = nearest_name(n, known);
            throw graph_error(errc::unknown_node,
                              "clear_cache: graph '" + graph->topo.name + "' has no node '" + n + "'" +
                                  (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {n});
        }
        namespaces.push_back(cache_ns(*graph, n));
    }
    // An empty list would clear every graph's entries: a graph without nodes has none to clear.
    if (!graph->cache || namespaces.empty()) co_return 0;
    auto clear = graph->cache->cache_clear(std::move(namespaces));
    co_return co_await std::move(clear);
}

/// Fills `tasks[i].state` for the tasks of subgraph nodes of `g` that have a checkpoint in their
/// namespace (below `ns`), recursively (LangGraph's get_state(subgraphs=True)).
boost::asio::awaitable<void> fill_subgraph_states(const graph_core& g, checkpoint::saver& saver, const std::string& thread,
                                                  const std::string& ns, std::vector<task_snapshot>& tasks) {
    for (auto& task : tasks) {
        const int i = g.find(task.name);
        if (i < 0) continue;
        const auto& sub = g.nodes[static_cast<std::size_t>(i)].subgraph;
        if (!sub) continue;
        std::string child_ns = ns;
        if (!child_ns.empty()) child_ns += names::ns_separator;
        child_ns += task.name;
        child_ns += names::task_separator;
        child_ns += task.id;
        const std::optional<std::string> latest;
        auto t = co_await saver.get(thread, child_ns, latest);
        if (!t) continue;
        (void)migrate(*sub, *t, true);
        auto data = snapshot(*sub, *t, true);
        auto out = std::make_shared<subgraph_snapshot>();
        out->ns = child_ns;
        out->checkpoint_id = std::move(data.checkpoint_id);
        out->values = state_json(*sub->st, data.values.get());
        out->next = std::move(data.next);
        out->tasks = std::move(data.tasks);
        out->step = data.step;
        out->metadata = std::move(data.metadata);
        co_await fill_subgraph_states(*sub, saver, thread, child_ns, out->tasks);
        task.state = std::move(out);
    }
}

/// The graph whose checkpoints namespace `ns` holds: `g` for "", else the subgraph of each
/// segment's node in turn. @throws graph_error (unknown_node) naming the segment that is not a
/// subgraph node.
const graph_core& graph_of_namespace(const graph_core& g, const std::string& ns) {
    const graph_core* at = &g;
    std::size_t from = 0;
    while (from < ns.size()) {
        std::size_t bar = ns.find(names::ns_separator, from);
        if (bar == std::string::npos) bar = ns.size();
        const std::string segment = ns.substr(from, bar - from);
        const std::string node = segment.substr(0, segment.find(names::task_separator));
        const int i = at->find(node);
        if (i < 0 || !at->nodes[static_cast<std::size_t>(i)].subgraph || segment.find(names::task_separator) == std::string::npos)
            throw graph_error(errc::unknown_node,
                              "checkpoint namespace '" + ns + "': '" + segment + "' is not a subgraph node's task of graph '" +
                                  at->topo.name + "' (a namespace is node:task_id, nested with '|')",
                              {node});
        at = at->nodes[static_cast<std::size_t>(i)].subgraph.get();
        from = bar + 1;
    }
    return *at;
}

boost::asio::awaitable<snapshot_data> get_state(std::unique_ptr<state_request> req) {
    const graph_core& g = *req->graph;
    auto* saver = require_saver(g);
    if (req->subgraphs) {
        auto want = std::make_unique<state_request>(*req);
        want->subgraphs = false;
        auto s = co_await get_state(std::move(want));
        co_await fill_subgraph_states(g, *saver, req->thread_id, "", s.tasks);
        co_return s;
    }
    auto t = co_await saver->get(req->thread_id, "", req->checkpoint_id);
    if (!t) {
        if (req->checkpoint_id)
            throw thread_error(errc::checkpoint_not_found,
                               "thread '" + req->thread_id + "' has no checkpoint '" + *req->checkpoint_id + "'", {req->thread_id});
        throw thread_error(errc::thread_not_found, "thread '" + req->thread_id + "' has no checkpoint", {req->thread_id});
    }
    if (state_version_of(t->cp) != g.state_version) {
        auto stored = t->cp.metadata;
        (void)migrate(g, *t, true);
        auto s = snapshot(g, *t, !req->checkpoint_id.has_value());
        s.metadata = std::move(stored); // as stored, not as migrated
        co_return s;
    }
    co_return snapshot(g, *t, !req->checkpoint_id.has_value());
}

boost::asio::awaitable<std::vector<snapshot_data>> get_state_history(std::unique_ptr<state_request> req) {
    const graph_core& g = *req->graph;
    auto* saver = require_saver(g);
    auto list = co_await saver->list(req->thread_id, "", req->list);
    std::vector<snapshot_data> out;
    out.reserve(list.size());
    for (auto& t : list) {
        if (state_version_of(t.cp) == g.state_version) {
            out.push_back(snapshot(g, t, false));
            continue;
        }
        auto stored = t.cp.metadata;
        (void)migrate(g, t, true);
        out.push_back(snapshot(g, t, false));
        out.back().metadata = std::move(stored); // as stored, not as migrated
    }
    co_return out;
}

boost::asio::awaitable<std::string> update_state(std::unique_ptr<update_request> req) {
    auto* saver = require_saver(*req->graph); // a subgraph keeps its checkpoints in its parent's saver
    // A subgraph's namespace: its own graph, read from JSON (its state type is not the caller's).
    const graph_core& g = req->ns.empty() ? *req->graph : graph_of_namespace(*req->graph, req->ns);
    if (!req->ns.empty() && !req->json)
        throw graph_error(errc::invalid_input,
                          "update_state in namespace '" + req->ns + "' of thread '" + req->thread_id +
                              "': a subgraph's state is updated with JSON values (json_graph::update_state)",
                          {req->thread_id});
    const auto& st = *g.st;
    const std::string& thread_id = req->thread_id;
    run_state r(g);
    // In a subgraph's namespace the update is one of the subgraph's writes: its parent gets it
    // with the others when the subgraph finishes.
    r.track_delta = !req->ns.empty();
    r.session = checkpoint_session(saver, thread_id, req->ns);
    co_await r.session.acquire();
    std::exception_ptr failure;
    std::string id;
    try {
        auto t = co_await r.session.load(req->checkpoint_id);
        if (!t && !req->ns.empty())
            throw thread_error(errc::thread_not_found,
                               "thread '" + thread_id + "' has no checkpoint in namespace '" + req->ns + "'", {thread_id, req->ns});
        if (!t && req->checkpoint_id)
            throw thread_error(errc::checkpoint_not_found, "thread '" + thread_id + "' has no checkpoint '" + *req->checkpoint_id + "'",
                               {thread_id, *req->checkpoint_id});
        if (!t) {
            // A thread with no checkpoint yet starts from the defaults: the update makes its first
            // checkpoint (step 0), as LangGraph's (without as_node, as if from START).
            r.saved.fr.barriers.assign(g.joins.size(), {});
            for (std::size_t j = 0; j < g.joins.size(); ++j) r.saved.fr.barriers[j].assign(g.joins[j].sources.size(), 0);
            r.saved.step = -1;
        } else {
            const bool migrated = migrate(g, *t);
            restore(g, r, *t, signature_of(t->cp) != g.signature);
            if (migrated) r.writer.signature_differs = r.writer.write_all = true;
        }
        if (t && signature_of(t->cp) != g.signature) {
            if (!req->allow_drift) {
                co_await load_stored_shape(r);
                throw_drift(g, r);
            }
            r.writer.signature_differs = true;
        }
        if (!req->as_node && r.saved.last_writers.size() > 1) {
            std::string list;
            for (const auto& w : r.saved.last_writers) list += (list.empty() ? "'" : ", '") + w + "'";
            throw thread_error(errc::invalid_input,
                               "update_state on thread '" + thread_id + "': the last step was written by " + list +
                                   "; pass as_node to say which node the update comes from",
                               r.saved.last_writers);
        }
        std::string writer = req->as_node.value_or(r.saved.last_writers.size() == 1 ? r.saved.last_writers[0] : START);
        int from = writer == START ? -1 : g.find(writer);
        if (from == -2) {
            auto near = nearest_name(writer, g.topo.node_names());
            throw graph_error(errc::unknown_node,
                              "update_state: as_node '" + writer + "' is not a node of the graph" +
                                  (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {writer});
        }
        if (req->json)
            req->values = merge_update_from_json(st, *req->json, r.saved.state.get(), errc::invalid_input, "update_state values");
        std::string new_id = checkpoint::new_checkpoint_id();
        const field_mask changed = req->values.fields();
        forget_saved_sizes(r, req->values.overwrites());
        track(st, r, req->values); // before apply(), which takes the values
        if (req->values) st.apply(r.saved.state.get(), req->values.get());
        frontier next;
        next.barriers = r.saved.fr.barriers;
        successors(g, from, r.saved.state.get(), next);
        bool consumed = !r.saved.fr.seen.empty() && r.saved.fr.seen >= max_version(r.saved.versions);
        next.seen = consumed ? new_id : r.saved.fr.seen;
        r.saved.fr = std::move(next);
        r.saved.last_writers = {writer};
        co_await save(g, r, new_id, r.saved.step + 1, "update", changed);
        id = new_id;
    } catch (...) {
        failure = std::current_exception();
    }
    co_await release_quietly(r.session);
    if (failure) std::rethrow_exception(failure);
    co_return id;
}

namespace {
/// Subgraph fields shared with the parent, by name: copied through JSON. `only`: the fields to copy.
update_box map_fields(const state_table& from, const void* values, const field_mask* only, const state_table& to) {
    update_box out(to);
    for (std::size_t i = 0; i < from.n; ++i) {
        if (only && !only->test(i)) continue;
        int j = to.index_of(from.names[i]);
        if (j < 0) continue;
        to.from_json(out.values(), static_cast<std::size_t>(j), from.to_json(values, i, {}), errc::invalid_input,
                     "subgraph field mapping");
        to.mark(out.get(), static_cast<std::size_t>(j));
    }
    return out;
}

boost::asio::awaitable<void> run_subgraph(std::shared_ptr<const graph_core> child, const state_table* parent_table,
                                          const void* in, context& ctx, node_result& out) {
    const graph_core& g = *child;
    auto& f = context_access::frame(ctx);
    run_state r(g);
    std::string seg = names::task_segment(*f.node, f.task_id);
    r.session = checkpoint_session(f.saver(), f.thread_id(), names::child_namespace(f.ns(), seg));
    r.session.observe(f.observer());
    r.ns_path = f.ns_path();
    r.ns_path.push_back(seg);
    r.track_delta = true;
    r.run_id = f.run_id();
    r.parent_span = f.span; // its run's span goes under the node attempt's
    run_config cfg;
    cfg.thread_id = f.thread_id();
    cfg.recursion_limit = f.recursion_limit();
    cfg.durability = f.mode();  // a subgraph writes its checkpoints as its parent does
    cfg.runtime = f.runtime();  // the subgraph's nodes see the caller's dependencies
    cfg.store = f.store();      // and the parent's store (else the subgraph's own)
    cfg.observer = f.observer(); // and report to the caller's observer
    cfg.allow_drift = true;
    // The namespace belongs to this task: a checkpoint there that still has work (next nodes,
    // pending writes or a breakpoint) is an earlier attempt of this task (interrupted, stopped at
    // a breakpoint, failed or killed): continue it, so that subgraph nodes that finished do not
    // run again.
    bool unfinished = false;
    if (!f.child_resume && r.session) {
        static constexpr std::string_view work_keys[] = {names::pull, names::push, names::deferred};
        const std::optional<std::string> latest;
        auto head = co_await r.session.load(latest);
        if (head) {
            unfinished = !head->writes.empty();
            if (const auto* fo = head->cp.frontier.if_object())
                for (auto k : work_keys)
                    if (const auto* a = fo->if_contains(k); a && a->is_array() && !a->get_array().empty()) unfinished = true;
        }
    }
    run_input child_input;
    if (f.child_resume) {
        child_input.what = run_input::kind::resume;
        child_input.resume = resume_map(f.child_resume->by_id);
    } else if (!unfinished) {
        child_input.what = run_input::kind::values;
        child_input.values = map_fields(*parent_table, in, nullptr, *g.st);
    }
    const call_env env{g, cfg, f.modes(), f.sink()};
    std::shared_ptr<parent_handoff> handoff;
    std::string sender;
    run_outcome res;
    try {
        res = co_await run(env, r, child_input);
    } catch (parent_command_signal& s) {
        handoff = std::move(s.handoff);
        sender = std::move(s.node);
    }
    if (handoff) {
        // The subgraph's node spoke for this task: its command is the task's writes and targets.
        if (handoff->writes && handoff->table != parent_table)
            throw graph_error(errc::invalid_input,
                              "node '" + sender + "' of subgraph '" + g.topo.name + "' sent its parent an update of " +
                                  handoff->type_name + ", which is not the parent graph's state type",
                              {sender, handoff->type_name});
        out.writes = std::move(handoff->writes);
        out.targets = std::move(handoff->targets);
        out.sends = std::move(handoff->sends);
        co_return;
    }
    if (res.status == run_status::interrupted) throw interrupt_signal{std::move(res.interrupts)};
    if (r.saved.delta) {
        const field_mask written = r.saved.delta.fields();
        out.writes = map_fields(*g.st, r.saved.delta.values(), &written, *parent_table);
        const field_mask overwritten = r.saved.delta.overwrites();
        for (std::size_t i = 0; i < g.st->n; ++i) {
            if (!overwritten.test(i)) continue;
            int j = parent_table->index_of(g.st->names[i]);
            if (j >= 0) parent_table->mark_overwrite(out.writes.get(), static_cast<std::size_t>(j));
        }
    }
}
} // namespace

node_call subgraph_call(std::shared_ptr<const graph_core> child, const state_table& parent) {
    node_call call;
    const state_table* pt = &parent;
    call.async = [child = std::move(child), pt](const void* in, context& ctx, node_result& out) {
        return run_subgraph(child, pt, in, ctx, out);
    };
    return call;
}

// ---------------------------------------------------------------------------------------------
// graph_core::lower: the validated topology turned into index tables.

void graph_core::lower() {
    std::vector<std::pair<std::string, int>> by_name;
    for (std::size_t i = 0; i < nodes.size(); ++i) by_name.push_back({nodes[i].name, static_cast<int>(i)});
    std::sort(by_name.begin(), by_name.end());
    for (std::size_t r = 0; r < by_name.size(); ++r) nodes[static_cast<std::size_t>(by_name[r].second)].rank = static_cast<int>(r);
    auto id = [&](const std::string& n) { return n == END ? -1 : find(n); };
    for (const auto& e : topo.edges) {
        if (e.from == START) start_next.push_back(id(e.to));
        else nodes[static_cast<std::size_t>(find(e.from))].next.push_back(id(e.to));
    }
    for (std::size_t j = 0; j < topo.joins.size(); ++j) {
        join_rt jr;
        for (const auto& s : topo.joins[j].sources) {
            jr.sources.push_back(find(s));
            nodes[static_cast<std::size_t>(find(s))].joins.push_back(static_cast<int>(j));
        }
        jr.target = id(topo.joins[j].target);
        joins.push_back(std::move(jr));
    }
    for (std::size_t b = 0; b < branches.size(); ++b) {
        const auto& src = topo.branches[b].from;
        int from = src == START ? -1 : find(src);
        branches[b].from = from;
        if (from < 0) start_branches.push_back(static_cast<int>(b));
        else nodes[static_cast<std::size_t>(from)].branches.push_back(static_cast<int>(b));
    }
    for (auto& n : nodes) {
        n.before = topo.interrupt_before.count(n.name) > 0;
        n.after = topo.interrupt_after.count(n.name) > 0;
    }
    shape = shape_lines(topo);
    signature = shape_signature(shape);
}

} // namespace detail
} // namespace stategraph
