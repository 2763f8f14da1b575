// Restoring and saving checkpoints: checks of stored records (pending writes, versions,
// frontier), state migrations, the record written after each step (append channels as
// deltas, the input stored once), and async and exit durability.

#include "engine_internal.hpp"

namespace stategraph::detail::engine {

/// The signature of the graph that wrote `cp`: its own field, or the version of its graph shape.
const std::string& signature_of(const checkpoint::checkpoint& cp) {
    if (!cp.signature.empty()) return cp.signature;
    auto it = cp.versions.find(std::string(names::graph));
    return it == cp.versions.end() ? cp.signature : it->second;
}

namespace {

/// Checks the pending writes of a checkpoint before anything uses them: each names a node of
/// this graph (unless `drifted`) and a state field or a reserved channel, and holds the shape
/// that channel stores. Throws corrupt_checkpoint naming the thread, checkpoint, task and channel.
void check_pending(const graph_core& g, const checkpoint::checkpoint_tuple& t, bool drifted) {
    const auto& thread = t.thread_id;
    const auto& id = t.cp.id;
    for (const auto& w : t.writes) {
        const std::string field =
            "pending write of task '" + w.task_id + "' (node '" + w.task_name + "') to '" + w.channel + "'";
        auto bad = [&](const std::string& problem) { throw_stored(thread, id, field, problem); };
        auto known_node = [&](const boost::json::value& n) {
            if (!n.is_string()) bad("a node name that is not a string");
            if (!drifted && n.get_string() != END && g.find(std::string(n.get_string())) < 0)
                bad("names node '" + std::string(n.get_string()) + "', which this graph does not have");
        };
        auto array = [&]() -> const boost::json::array& {
            if (!w.value.is_array()) bad("not a list");
            return w.value.get_array();
        };
        if (w.channel == names::breakpoint) {
            if (!w.value.is_string()) bad("not a checkpoint id");
            continue;
        }
        if (!drifted && g.find(w.task_name) < 0)
            bad("written by node '" + w.task_name + "', which this graph does not have");
        if (w.channel == names::interrupt) {
            for (const auto& i : array()) {
                const auto* o = i.if_object();
                // (its node may be a subgraph's: only its form is checked)
                if (!o || !o->contains("value") || !o->contains("id") || !o->at("id").is_string() ||
                    !o->contains("node") || !o->at("node").is_string())
                    bad("an interrupt without an id, a node and a value");
            }
        } else if (w.channel == names::resume) {
            (void)array();
        } else if (w.channel == names::error) {
            if (!w.value.is_string()) bad("an error that is not a message");
        } else if (w.channel == names::effects) {
            if (!w.value.is_object()) bad("side-effect results that are not an object");
        } else if (w.channel == names::goto_) {
            for (const auto& n : array()) known_node(n);
        } else if (w.channel == names::send) {
            for (const auto& p : array()) {
                const auto* o = p.if_object();
                if (!o || !o->contains("arg") || !o->contains("node")) bad("a Send without a node and an argument");
                known_node(o->at("node"));
            }
        } else if (g.st->index_of(w.channel) < 0 && !drifted) {
            bad("not a field of this graph's state");
        }
    }
}

} // namespace

/// The version of the state that wrote `cp` (1 when it names none).
int state_version_of(const checkpoint::checkpoint& cp) {
    if (const auto* v = cp.metadata.if_contains(names::state_version); v && v->is_int64()) return static_cast<int>(v->get_int64());
    return 1;
}

/// Carries checkpoint `t`, written by an older version of the state, to this graph's state with
/// its migrations (migration.hpp), in place: its values become the migrated state's fields, its
/// pending writes keep the fields the state still has. Returns whether it migrated anything.
/// An input checkpoint's input not run yet (old-shaped) is refused when the checkpoint is to run
/// or be updated, and left out when it is only read (`reading`: get_state, history; they show
/// the state before the input, and the stored metadata as it is).
/// @throws drift_error naming the thread when no chain of migrations reaches its version, or when
/// it holds an input not run yet and is not only read (the old graph should run it first).
bool migrate(const graph_core& g, checkpoint::checkpoint_tuple& t, bool reading) {
    const int have = state_version_of(t.cp);
    if (have == g.state_version) return false;
    const std::string& thread = t.thread_id;
    const std::string state_name = g.topo.name.empty() ? std::string("the state") : "the state of graph '" + g.topo.name + "'";
    auto refuse = [&](const std::string& why) {
        throw drift_error(errc::graph_drift,
                          "thread '" + thread + "' (checkpoint " + t.cp.id + ") was written by state version " + std::to_string(have) +
                              "; " + state_name + " is version " + std::to_string(g.state_version) + ": " + why,
                          {thread, std::to_string(have), std::to_string(g.state_version)});
    };
    if (have > g.state_version) refuse("no migration goes back to an older version");
    std::vector<const state_migration*> chain;
    for (int v = have; v < g.state_version; ++v) {
        auto it = std::find_if(g.migrations.begin(), g.migrations.end(), [v](const state_migration& m) { return m.from == v; });
        if (it == g.migrations.end())
            refuse("there is no migration from version " + std::to_string(v) + " (state_graph::add_migration(" + std::to_string(v) +
                   ", fn))");
        chain.push_back(&*it);
    }
    auto& cp = t.cp;
    const bool takes_input = (cp.source == "input" || cp.source == "fork") && !cp.metadata.contains(names::command);
    if (takes_input) {
        bool pending_input = cp.metadata.contains(names::writes);
        for (const auto& [channel, version] : cp.versions) pending_input = pending_input || (channel != names::graph && version == cp.id);
        if (pending_input && !reading) refuse("it holds an input not run yet; run it with the graph that wrote it first");
        cp.metadata.erase(names::writes);
    }
    boost::json::object state;
    for (const auto& [channel, version] : cp.versions)
        if (channel != names::graph && !(takes_input && version == cp.id))
            if (const auto* v = cp.values.if_contains(channel)) state[channel] = *v;
    const std::string where = "thread '" + thread + "', checkpoint " + cp.id;
    for (const auto* m : chain)
        state = m->run(state, where + ", migrating state version " + std::to_string(m->from) + " (" + m->from_name + ") to " +
                                  std::to_string(m->from + 1) + " (" + m->to_name + ")");
    // The migrated fields under a version no stored value has: restore() reads them from `values`,
    // and the next checkpoint written (save(): write_all) stores every field whole.
    const std::string version = "migrated-from-" + std::to_string(have);
    std::map<std::string, std::string> versions;
    if (auto gv = cp.versions.find(std::string(names::graph)); gv != cp.versions.end()) versions.insert(*gv);
    boost::json::object values;
    for (auto& [field, value] : state) {
        if (g.st->index_of(std::string(field)) < 0) continue; // checked by compile(): the last migration returns the state
        versions.emplace(std::string(field), version);
        values[field] = std::move(value);
    }
    cp.versions = std::move(versions);
    cp.values = std::move(values);
    cp.extends.clear();
    cp.metadata.erase(names::delta); // a subgraph's writes so far, in the old shape
    cp.signature = g.signature;      // read as this graph's (node names are still checked)
    std::erase_if(t.writes, [&](const checkpoint::pending_write& w) {
        return !w.channel.starts_with("__") && g.st->index_of(w.channel) < 0;
    });
    return true;
}

/// Loads checkpoint `t` into `r`. `drifted`: another graph shape wrote it and the caller accepted
/// that (names this graph does not have are dropped); otherwise every stored name must exist
/// here, and one that does not is corruption (corrupt_checkpoint naming thread, checkpoint and
/// field), never silently dropped. `held`: the state of checkpoint `t` (`held_states`), taken
/// instead of its stored values, which `t` then leaves out (`values_omitted`).
void restore(const graph_core& g, run_state& r, const checkpoint::checkpoint_tuple& t, bool drifted, state_box* held) {
    const auto& st = *g.st;
    const auto& cp = t.cp;
    const char* field = "versions"; // what is being read, for the message of a malformed record
    r.saved.cp_source = cp.source;
    try {
        if (held) r.saved.state = std::move(*held);
        else st.reset_state(r.saved.state.get());
        std::fill(r.saved.versions.begin(), r.saved.versions.end(), std::string());
        std::fill(r.writer.saved_size.begin(), r.writer.saved_size.end(), std::size_t(-1)); // next save: whole values
        std::fill(r.writer.delta_chain.begin(), r.writer.delta_chain.end(), 0);
        // An input (or fork) checkpoint's fields at its own id are its input, not applied yet
        // (write_record): they go back into `start_input`, the state keeps its value before.
        const bool takes_input = (cp.source == "input" || cp.source == "fork") && !cp.metadata.contains(names::command);
        boost::json::object carried_input;
        r.writer.carried.reset();
        r.writer.carried_id.clear();
        for (const auto& [channel, version] : cp.versions) {
            if (channel == names::graph) {
                r.saved.graph_version = version;
                continue;
            }
            if (takes_input && version == cp.id) {
                const auto* v = cp.values.if_contains(channel);
                if (!v) throw_stored(r.thread_id(), cp.id, "values", "the input field '" + channel + "' has no stored value");
                carried_input[channel] = *v;
                if (int i = st.index_of(channel); i >= 0) r.writer.carried.set(static_cast<std::size_t>(i));
                continue;
            }
            int i = st.index_of(channel);
            if (i < 0) {
                if (!drifted)
                    throw_stored(r.thread_id(), cp.id, "versions",
                                 "names state field '" + channel +
                                     "', which this graph's state does not have, though this graph wrote the checkpoint");
                continue;
            }
            r.saved.versions[static_cast<std::size_t>(i)] = version;
            if (held) continue;
            if (const auto* v = cp.values.if_contains(channel))
                st.from_json(r.saved.state.get(), static_cast<std::size_t>(i), *v, errc::corrupt_checkpoint,
                             "thread '" + r.thread_id() + "', checkpoint " + cp.id);
        }
        field = "__graph__";
        if (const auto* sh = cp.values.if_contains(names::graph); sh && sh->is_array()) {
            r.saved.stored_shape.clear();
            for (const auto& l : sh->as_array()) r.saved.stored_shape.push_back(std::string(l.as_string()));
        }
        field = "frontier";
        r.saved.fr = frontier_from(g, cp.frontier, r.thread_id(), cp.id, drifted);
        field = "metadata";
        if (const auto* d = cp.metadata.if_contains(names::delta); d && d->is_object() && r.track_delta)
            r.saved.delta = update_from_json(st, d->as_object(), errc::corrupt_checkpoint,
                                       "thread '" + r.thread_id() + "', checkpoint " + cp.id + ", metadata");
        if (const auto* w = cp.metadata.if_contains(names::writers); w && w->is_array()) {
            r.saved.last_writers.clear();
            for (const auto& n : w->as_array()) r.saved.last_writers.push_back(std::string(n.as_string()));
        }
        r.saved.has_start_input = false;
        r.saved.start_input.clear();
        if (takes_input) {
            const auto* w = cp.metadata.if_contains(names::writes);
            if (w || !carried_input.empty()) {
                const auto* in = w && w->is_object() ? w->get_object().if_contains(names::start_task) : nullptr;
                if (w && (!in || !in->is_object()))
                    throw_stored(r.thread_id(), cp.id, "metadata", "an input that is not an object");
                if (in) r.saved.start_input = in->get_object();
                for (auto& [key, value] : carried_input) r.saved.start_input[key] = std::move(value);
                // validated now: a malformed input is reported when the checkpoint is read
                (void)update_from_json(st, r.saved.start_input, errc::corrupt_checkpoint,
                                       "thread '" + r.thread_id() + "', checkpoint " + cp.id + ", input");
                r.saved.has_start_input = true;
                if (r.writer.carried.any()) r.writer.carried_id = cp.id;
            }
        }
        field = "pending writes";
        check_pending(g, t, drifted);
    } catch (const graph_error&) {
        throw;
    } catch (const std::exception& e) {
        throw_stored(r.thread_id(), cp.id, field, std::string("cannot be read: ") + e.what());
    }
    r.saved.cp_id = cp.id;
    r.saved.parent_id = cp.parent_id;
    r.saved.step = cp.step;
    r.saved.stored_signature = signature_of(cp);
    r.writer.out.versions.clear();
    for (std::size_t i = 0; i < st.n; ++i)
        if (!r.saved.versions[i].empty()) r.writer.out.versions.emplace(st.names[i], r.saved.versions[i]);
    if (!r.saved.graph_version.empty()) r.writer.out.versions.emplace(std::string(names::graph), r.saved.graph_version);
    r.saved.have_checkpoint = true;
    r.saved.pending.clear();
    for (const auto& w : t.writes) {
        if (w.channel == names::breakpoint) {
            r.saved.fr.seen = std::string(w.value.as_string());
            continue;
        }
        r.saved.pending[w.task_id].push_back(w);
    }
}

namespace {

/// Longest run of delta-only versions of an append channel before a whole value is saved again.
constexpr unsigned char max_delta_chain = 32;

} // namespace

/// Builds checkpoint `id` in `r.writer.out` (the values of the `changed` fields, versions, frontier,
/// metadata) and puts it, or with async durability queues it (`r.writer.queue`).
boost::asio::awaitable<void> write_record(const graph_core& g, run_state& r, const std::string& id, std::int64_t step,
                                          const char* source, const field_mask& changed) {
    const auto& st = *g.st;
    auto& cp = r.writer.out;
    cp.id = id;
    cp.parent_id = r.saved.parent_id;
    cp.step = step;
    cp.source = source;
    // The last record's JSON is dropped (swapped out, then freed for nothing: the arena's
    // deallocation is trivial), the arena emptied, and this record built in it.
    const boost::json::storage_ptr sp(&r.writer.arena->resource);
    {
        boost::json::object values(sp), metadata(sp);
        boost::json::value fr(sp);
        cp.values.swap(values);
        cp.metadata.swap(metadata);
        cp.frontier.swap(fr);
    }
    record_writer::empty(*r.writer.arena);
    cp.extends.clear();
    cp.signature.clear();
    cp.values.reserve(changed.count() + 1); // sized once: no rehash per inserted key
    cp.metadata.reserve(4);
    const void* state = r.saved.state.get();
    for (std::size_t i = 0; i < st.n; ++i) {
        if (!changed.test(i)) continue;
        // An append channel that only grew since its last saved version is saved as the items
        // appended since then, extending that version.
        const std::size_t size = st.sequence_size(state, i);
        if (size != std::size_t(-1) && r.writer.saved_size[i] != std::size_t(-1) && size >= r.writer.saved_size[i] &&
            !r.saved.versions[i].empty() && r.writer.delta_chain[i] < max_delta_chain) {
            cp.values[st.names[i]] = st.tail_json(state, i, r.writer.saved_size[i], sp);
            cp.extends.emplace(st.names[i], r.saved.versions[i]);
            ++r.writer.delta_chain[i];
        } else {
            cp.values[st.names[i]] = st.to_json(state, i, sp);
            r.writer.delta_chain[i] = 0;
        }
        r.writer.saved_size[i] = size;
        r.saved.versions[i] = id;
        if (auto v = cp.versions.find(st.names[i]); v != cp.versions.end()) v->second = id;
        else cp.versions.emplace(st.names[i], id);
    }
    if (r.saved.graph_version.empty() || r.writer.signature_differs) {
        // The shape is stored once per graph signature (for explaining drift later); a
        // checkpoint names the signature as its version of `__graph__`. Asked of the graph's own
        // saver once (it holds that saver, so no other can take its address); of another (a
        // subgraph's parent's), every time.
        const bool own = r.session.saver() == g.saver.get();
        if (!own || !g.shape_stored.set.load(std::memory_order_acquire)) {
            co_await r.session.put_graph(g.signature, g.shape);
            if (own) g.shape_stored.set.store(true, std::memory_order_release);
        }
        r.saved.graph_version = g.signature;
        r.writer.signature_differs = false;
    }
    cp.versions.insert_or_assign(std::string(names::graph), r.saved.graph_version);
    if (r.saved.graph_version != g.signature) cp.signature = g.signature; // a thread from before: say it
    cp.frontier = frontier_json(g, r.saved.fr, sp);
    boost::json::array writers(sp);
    writers.reserve(r.saved.last_writers.size());
    for (const auto& w : r.saved.last_writers) writers.push_back(boost::json::string(w, sp));
    cp.metadata[names::writers] = std::move(writers);
    cp.metadata[names::step] = step;
    if (r.track_delta) cp.metadata[names::delta] = update_json(st, r.saved.delta);
    cp.metadata[names::source] = source;
    if (!r.traceparent.empty()) cp.metadata[names::traceparent] = r.traceparent;
    if (g.state_version > 1) cp.metadata[names::state_version] = g.state_version;
    // An input checkpoint with no input to run was written by a Command (its update applied).
    if (!r.saved.has_start_input && std::string_view(source) == "input") cp.metadata[names::command] = true;
    if (r.saved.has_start_input && (std::string_view(source) == "input" || std::string_view(source) == "fork")) {
        // The input, not applied yet. A field never written before goes in as its channel value
        // at this checkpoint's id (which no field of an input checkpoint has otherwise: it writes
        // none), so that the first step can name that version instead of storing the value
        // again; the rest goes in the record (restore() puts both back together). Not with exit
        // durability, where this checkpoint may never be written.
        boost::json::object inline_input(sp);
        r.writer.carried.reset();
        r.writer.carried_id = id;
        for (const auto& [key, value] : r.saved.start_input) {
            const int i = st.index_of(key);
            if (r.writer.mode != durability::exit && i >= 0 && r.saved.versions[static_cast<std::size_t>(i)].empty()) {
                cp.values[key] = boost::json::value(value, sp);
                cp.versions.insert_or_assign(std::string(key), id);
                r.writer.carried.set(static_cast<std::size_t>(i));
                continue;
            }
            inline_input[key] = boost::json::value(value, sp);
        }
        boost::json::object w(sp);
        w[names::start_task] = std::move(inline_input);
        cp.metadata[names::writes] = std::move(w);
    }
    r.saved.have_checkpoint = true;
    if (r.writer.mode == durability::async) {
        r.writer.enqueue(); // put beside the next step's nodes, or by settle()
        co_return;
    }
    co_await r.session.put(cp);
}

/// Async durability: puts the queued checkpoints, in one `put_many`; new ones queue behind them.
boost::asio::awaitable<void> put_queued(run_state& r) {
    auto& w = r.writer;
    if (w.queue.empty()) co_return;
    // Declared first, so destroyed last: the records' JSON is freed before its arenas go.
    std::vector<std::unique_ptr<record_writer::record_arena>> arenas;
    arenas.swap(w.queue_arenas);
    std::vector<checkpoint::checkpoint> cps;
    cps.swap(w.queue);
    const std::span<const checkpoint::checkpoint> all(cps);
    co_await r.session.put_many(all);
    w.take_back(cps, arenas);
}

/// Makes everything this call has so far durable: the queued put of async durability is
/// awaited (its failure is thrown), the staged checkpoint of exit durability is written, then
/// the writes held against the current checkpoint (interrupts, breakpoints, errors). Runs before
/// a call returns; `last` (the call's end) with `writer.release_at_end` hands all of it and the
/// lease's release to the saver as one `end_call` (one commit on SQLite).
boost::asio::awaitable<void> settle(const graph_core& g, run_state& r, bool last) {
    auto& w = r.writer;
    if (last && w.release_at_end) {
        // The call's end: what is queued, the held writes and the lease, in one end_call.
        w.release_at_end = false;
        co_await settle_staged(g, r);
        std::vector<std::unique_ptr<record_writer::record_arena>> arenas; // destroyed after `cps`
        arenas.swap(w.queue_arenas);
        std::vector<checkpoint::checkpoint> cps;
        cps.swap(w.queue);
        checkpoint::saver::call_end end;
        end.checkpoints = cps;
        end.writes_to = std::move(w.held_to);
        end.writes = std::exchange(w.held, {});
        end.release = true;
        co_await r.session.end_call(end);
        w.take_back(cps, arenas);
        co_return;
    }
    if (!w.queue.empty()) co_await put_queued(r);
    co_await settle_staged(g, r);
    if (!w.held.empty()) {
        auto ws = std::exchange(w.held, {});
        co_await r.session.put_writes(w.held_to, std::move(ws));
    }
}

/// Exit durability: writes the staged checkpoint, if any.
boost::asio::awaitable<void> settle_staged(const graph_core& g, run_state& r) {
    if (!r.writer.staged) co_return;
    r.writer.staged = false;
    const field_mask changed = std::exchange(r.writer.unsaved, field_mask{});
    r.saved.parent_id = r.writer.staged_parent;
    co_await write_record(g, r, r.saved.cp_id, r.saved.step, r.writer.staged_source, changed);
}

namespace {

/// Exit durability: checkpoint `id` becomes the current one without being written. Fields it
/// changes get version `id` for now (settle() stores them, whole, with the checkpoint written).
void stage(const graph_core& g, run_state& r, const std::string& id, const char* source, const field_mask& changed) {
    if (!r.writer.staged) r.writer.staged_parent = r.saved.parent_id; // the newest stored checkpoint
    r.writer.staged = true;
    r.writer.staged_source = source;
    for (std::size_t i = 0; i < g.st->n; ++i)
        if (changed.test(i)) {
            r.saved.versions[i] = id;
            r.writer.saved_size[i] = std::size_t(-1);
            r.writer.delta_chain[i] = 0;
        }
    r.writer.unsaved |= changed;
}

} // namespace

boost::asio::awaitable<void> save(const graph_core& g, run_state& r, std::string id, std::int64_t step, const char* source,
                                  const field_mask& changed_now) {
    const auto& st = *g.st;
    field_mask changed = changed_now;
    if (r.writer.write_all) { // after a migration: every field, whole, at the new version
        for (std::size_t i = 0; i < st.n; ++i) changed.set(i);
        r.writer.write_all = false;
    }
    // async: a full queue is put before another checkpoint joins it
    if (r.writer.queue.size() >= record_writer::max_queued) co_await put_queued(r);
    r.saved.parent_id = r.saved.have_checkpoint ? r.saved.cp_id : std::string();
    r.saved.cp_id = id;
    r.saved.cp_source = source;
    r.saved.step = step;
    r.saved.pending.clear();
    if (!r.session) {
        for (std::size_t i = 0; i < st.n; ++i)
            if (changed.test(i)) r.saved.versions[i] = id;
        r.saved.have_checkpoint = true;
        co_return;
    }
    if (r.writer.mode == durability::exit) {
        stage(g, r, id, source, changed);
        r.saved.have_checkpoint = true;
    } else {
        co_await write_record(g, r, id, step, source, changed);
    }
    // Streamed as the run moves on (as LangGraph): with async durability while its put is still
    // queued, with exit durability for a checkpoint written when the call ends.
    emit_checkpoint(g, r);
}

/// The shape of the graph that wrote the thread, for a drift message (older savers return it
/// among the values; others keep it by signature).
boost::asio::awaitable<void> load_stored_shape(run_state& r) {
    if (!r.saved.stored_shape.empty() || !r.session || r.saved.stored_signature.empty()) co_return;
    if (auto shape = co_await r.session.get_graph(r.saved.stored_signature)) r.saved.stored_shape = std::move(*shape);
}

[[noreturn]] void throw_drift(const graph_core& g, const run_state& r) {
    std::vector<std::string> removed, added;
    std::set_difference(r.saved.stored_shape.begin(), r.saved.stored_shape.end(), g.shape.begin(), g.shape.end(),
                        std::back_inserter(removed));
    std::set_difference(g.shape.begin(), g.shape.end(), r.saved.stored_shape.begin(), r.saved.stored_shape.end(),
                        std::back_inserter(added));
    std::string msg = "thread '" + r.thread_id() + "' was written by a different graph (signature " + r.saved.stored_signature +
                      ", this graph " + g.signature + ")";
    for (const auto& l : removed) msg += "\n  - " + l;
    for (const auto& l : added) msg += "\n  + " + l;
    msg += "\npass run_config::allow_drift = true to resume it anyway";
    std::vector<std::string> list{r.thread_id()};
    for (const auto& l : removed) list.push_back("-" + l);
    for (const auto& l : added) list.push_back("+" + l);
    throw drift_error(errc::graph_drift, msg, list);
}

} // namespace stategraph::detail::engine
