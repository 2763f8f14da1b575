// Thread records (/threads...): create, read, patch, delete, search and count, copy, state and
// history, and the threads an earlier server left (adopt_threads). Records are in the run
// store; a thread's checkpoints are in its graph's checkpointer.

#include "impl.hpp"

namespace stategraph::server {

std::shared_ptr<assistant_rec> server::impl::find_assistant(const std::string& id) const {
    for (const auto& a : assistants)
        if (a->assistant_id == id || a->spec.graph_id == id) return a;
    return nullptr;
}

std::shared_ptr<assistant_rec> server::impl::assistant_or_404(const std::string& id) const {
    auto a = find_assistant(id);
    if (!a) {
        std::string names;
        for (const auto& x : assistants) names += (names.empty() ? "" : ", ") + x->spec.graph_id;
        throw http_error(404, "assistant '" + id + "' not found (graphs served: " + names + ")");
    }
    return a;
}

awaitable<std::shared_ptr<assistant_rec>> server::impl::resolve_assistant(const call& c, const std::string& id, std::int64_t version) {
    if (auto a = find_assistant(id)) co_return a;
    std::optional<assistant_record> rec;
    if (is_uuid(id)) rec = co_await store->get_assistant(id, version);
    // Another key's assistant is not found (nothing is learnt about it).
    if (!rec || rec->owner != c.owner) (void)assistant_or_404(id); // throws the 404 naming the graphs served
    auto served = find_assistant(rec->graph_id);
    if (!served) throw http_error(404, "assistant '" + id + "' is of graph '" + rec->graph_id + "', which this server does not serve");
    auto a = std::make_shared<assistant_rec>(*served);
    a->assistant_id = rec->assistant_id;
    if (const auto* conf = rec->config.if_contains("recursion_limit"); conf && conf->is_int64())
        a->spec.options.recursion_limit = static_cast<int>(conf->get_int64());
    a->stored = std::move(rec);
    co_return a;
}

json::object server::impl::assistant_json(const assistant_rec& a) const {
    if (const auto& r = a.stored)
        return json::object{{"assistant_id", r->assistant_id}, {"graph_id", r->graph_id},   {"config", r->config},
                            {"context", r->context},           {"metadata", r->metadata},   {"name", r->name},
                            {"description", r->description.empty() ? json::value(nullptr) : json::value(r->description)},
                            {"version", r->version},           {"created_at", iso_us(r->created_at)},
                            {"updated_at", iso_us(r->updated_at)}};
    return json::object{{"assistant_id", a.assistant_id},
                        {"graph_id", a.spec.graph_id},
                        {"config", json::object{{"configurable", json::object{}}}},
                        {"context", json::object{}},
                        {"metadata", json::object{{"created_by", "system"}}},
                        {"name", a.spec.graph_id},
                        {"description", a.spec.options.description.empty() ? json::value(nullptr)
                                                                            : json::value(a.spec.options.description)},
                        {"version", 1},
                        {"created_at", a.created_at},
                        {"updated_at", a.created_at}};
}

awaitable<std::optional<thread_record>> server::impl::find_thread(std::string owner, std::string id) {
    auto found = co_await store->get_thread(storage_id(owner, id));
    if (!found && !owner.empty()) found = co_await store->get_thread(id); // recorded before ids were per key
    if (!found || found->owner != owner || found->thread_id != id) co_return std::nullopt;
    co_return found;
}

awaitable<thread_record> server::impl::thread_or_404(const call& c, std::string id) {
    if (!is_uuid(id)) throw http_error(422, "thread_id '" + id + "' is not a UUID");
    auto th = co_await find_thread(c.owner, id);
    if (!th || th->temporary) throw http_error(404, "thread '" + id + "' not found");
    co_return std::move(*th);
}

thread_record server::impl::new_thread(std::string id, std::string owner, json::object metadata) const {
    thread_record th;
    th.thread_id = std::move(id);
    th.owner = std::move(owner);
    th.key = storage_id(th.owner, th.thread_id);
    th.created_at = th.updated_at = th.state_updated_at = run_store::now();
    if (auto g = opt_string(metadata, "graph_id")) {
        auto a = assistant_or_404(*g);
        th.graph_id = a->spec.graph_id;
    }
    th.metadata = std::move(metadata);
    return th;
}

std::vector<json_update> server::impl::superstep_updates(const json::object& body, const thread_record& th) const {
    std::vector<json_update> out;
    const auto* steps = field(body, "supersteps");
    if (!steps || steps->is_null()) return out;
    if (!steps->is_array()) wrong_type("supersteps", "a list of {\"updates\": [...]}", *steps);
    auto a = graph_of(th);
    if (!a) throw http_error(422, "field 'supersteps' needs metadata.graph_id (the graph whose state they write)");
    std::size_t i = 0;
    for (const auto& step : steps->get_array()) {
        const std::string at = "supersteps[" + std::to_string(i++) + "]";
        const auto* updates = step.is_object() ? step.get_object().if_contains("updates") : nullptr;
        if (!updates || !updates->is_array()) throw http_error(422, "field '" + at + ".updates' is required (a list)");
        std::size_t j = 0;
        for (const auto& u : updates->get_array()) {
            const std::string where = at + ".updates[" + std::to_string(j++) + "]";
            if (!u.is_object()) wrong_type(where, "an object {values, as_node}", u);
            const auto& o = u.get_object();
            for (const auto& [k, v] : o)
                if (k != "values" && k != "as_node" && !(k == "command" && v.is_null()))
                    throw http_error(422, "field '" + where + "." + std::string(k) + "' is not taken (values, as_node)");
            json_update req;
            req.thread_id = th.key;
            if (const auto* v = o.if_contains("values"); v && !v->is_null()) {
                if (!v->is_object()) wrong_type(where + ".values", "an object (state fields)", *v);
                a->graph.check_values(v->get_object(), where + ".values");
                req.values = v->get_object();
            }
            if (auto n = opt_string(o, "as_node")) {
                if (!a->graph.shape().find(*n))
                    throw http_error(422, where + ".as_node: '" + *n + "' is not a node of graph '" + a->spec.graph_id + "'");
                req.as_node = *n;
            }
            out.push_back(std::move(req));
        }
    }
    return out;
}

json::object server::impl::thread_json(const thread_record& t) {
    json::object o{{"thread_id", t.thread_id},
                   {"created_at", iso_us(t.created_at)},
                   {"updated_at", iso_us(t.updated_at)},
                   {"state_updated_at", iso_us(t.state_updated_at)},
                   {"metadata", t.metadata},
                   {"status", t.status},
                   {"values", t.values},
                   {"interrupts", t.interrupts}};
    if (!t.error.is_null()) o["error"] = t.error;
    return o;
}

json::object server::impl::run_json(const run_record& r) {
    json::object o{{"run_id", r.run_id},
                   {"thread_id", r.thread_id},
                   {"assistant_id", r.assistant_id},
                   {"created_at", iso_us(r.created_at)},
                   {"updated_at", iso_us(r.updated_at)},
                   {"status", r.status},
                   {"metadata", r.metadata},
                   {"kwargs", r.kwargs},
                   {"multitask_strategy", r.multitask}};
    if (const auto* u = r.spec.if_contains("usage")) o["usage"] = *u; // the models' tokens, once it ended
    return o;
}

awaitable<thread_record> server::impl::refreshed(thread_record th) {
    auto a = graph_of(th);
    if (!a) co_return th;
    auto snap = co_await a->graph.get_state(th.key);
    th.state_updated_at = run_store::now();
    th.interrupts = {};
    if (snap.checkpoint_id.empty()) { // nothing stored (yet, or again after a rollback)
        th.values = nullptr;
        if (th.status != "error") th.status = "idle";
        co_return th;
    }
    th.values = std::move(snap.values);
    for (const auto& t : snap.tasks)
        if (!t.interrupts.empty()) th.interrupts[t.id] = interrupts_json(t.interrupts);
    if (th.status != "error") th.status = snap.next.empty() ? "idle" : "interrupted";
    co_return th;
}

awaitable<void> server::impl::drop_thread(thread_record th) {
    (void)co_await store->delete_thread(th.key);
    if (auto a = graph_of(th)) {
        auto saver = a->graph.checkpointer();
        co_await saver->delete_thread(th.key);
    }
}

// -- threads of an earlier server -------------------------------------------------------------------

namespace {
// Where servers before the run store kept thread records: the node cache of the first
// assistant's checkpointer, one entry per thread and a list of ids.
constexpr std::string_view old_record_ns = "__stategraph_server__/thread/";
constexpr std::string_view old_index_ns = "__stategraph_server__/threads";
} // namespace

awaitable<void> server::impl::adopt_threads(std::shared_ptr<impl> self) {
    if (self->assistants.empty()) co_return;
    std::size_t adopted = 0;
    // 1. Records of servers before the run store.
    try {
        auto saver = self->assistants.front()->graph.checkpointer();
        const std::string index_ns(old_index_ns), index_key("ids");
        auto index = co_await saver->cache_get(index_ns, index_key);
        if (index && index->is_array())
            for (const auto& v : index->as_array()) {
                if (!v.is_string() || !is_uuid(std::string(v.get_string()))) continue;
                const std::string id(v.get_string());
                if (co_await self->store->get_thread(id)) continue;
                const std::string ns = std::string(old_record_ns) + id, key("record");
                auto rec = co_await saver->cache_get(ns, key);
                if (!rec || !rec->is_object()) continue;
                const auto& o = rec->get_object();
                auto text = [&](const char* name) {
                    const auto* f = o.if_contains(name);
                    return f && f->is_string() ? std::string(f->get_string()) : std::string();
                };
                thread_record th;
                th.key = id;
                th.thread_id = text("thread_id");
                if (!is_uuid(th.thread_id)) th.thread_id = id;
                th.owner = text("owner");
                th.created_at = th.updated_at = th.state_updated_at = run_store::now();
                if (auto g = text("graph_id"); !g.empty() && self->find_assistant(g)) th.graph_id = g;
                if (const auto* m = o.if_contains("metadata"); m && m->is_object()) th.metadata = m->get_object();
                try {
                    th = co_await self->refreshed(std::move(th));
                } catch (const std::exception& e) {
                    self->log_line("thread '" + id + "': its state could not be read: " + e.what());
                }
                if (co_await self->store->create_thread(th)) ++adopted;
            }
    } catch (const std::exception& e) {
        self->log_line(std::string("could not read the thread records of an earlier server: ") + e.what());
    }
    // 2. Without API keys (their owner is not known): threads in the checkpointers with no record.
    if (self->opts.api_keys.empty())
        for (auto a : self->assistants) {
            auto saver = a->graph.checkpointer();
            checkpoint::thread_query q;
            std::vector<checkpoint::thread_info> list;
            try {
                list = co_await saver->list_threads(q);
            } catch (const std::exception& e) {
                self->log_line("could not list the stored threads of graph '" + a->spec.graph_id + "': " + e.what());
                continue;
            }
            for (auto& info : list) {
                if (!is_uuid(info.thread_id) || info.checkpoint_id.empty()) continue;
                if (co_await self->store->get_thread(info.thread_id)) continue;
                thread_record th;
                th.thread_id = th.key = info.thread_id;
                th.created_at = th.updated_at = th.state_updated_at =
                    info.created_at ? std::chrono::duration_cast<std::chrono::microseconds>(info.created_at->time_since_epoch()).count()
                                    : run_store::now();
                th.graph_id = a->spec.graph_id;
                th.metadata = json::object{{"graph_id", a->spec.graph_id}, {"assistant_id", a->assistant_id}};
                try {
                    th = co_await self->refreshed(std::move(th));
                } catch (const std::exception& e) {
                    self->log_line("thread '" + th.thread_id + "' of graph '" + a->spec.graph_id +
                                   "': its state could not be read: " + e.what());
                }
                if (co_await self->store->create_thread(th)) ++adopted;
            }
        }
    if (adopted) self->log_line(std::to_string(adopted) + " stored threads adopted");
}

// -- state calls: the checkpoint a body names, metadata patches (PATCH .../state) -------------------

namespace {

/// A checkpoint address key (`checkpoint_id` or `checkpoint_ns`) as a state call names it:
/// `<key>`, `checkpoint.<key>` or `config.configurable.<key>` (LangGraph's three spellings).
std::optional<std::string> addressed(const json::object& body, const std::string& key) {
    std::optional<std::string> out = opt_string(body, key);
    if (auto* cp = field(body, "checkpoint")) {
        if (!cp->is_object()) wrong_type("checkpoint", "an object {checkpoint_id, checkpoint_ns}", *cp);
        if (auto* v = field(cp->get_object(), key)) {
            if (!v->is_string()) wrong_type("checkpoint." + key, "a string", *v);
            out = std::string(v->get_string());
        }
    }
    if (auto* conf = field(body, "config")) {
        if (!conf->is_object()) wrong_type("config", "an object {configurable: {...}}", *conf);
        if (auto* inner = field(conf->get_object(), "configurable")) {
            if (!inner->is_object()) wrong_type("config.configurable", "an object", *inner);
            if (auto* v = field(inner->get_object(), key)) {
                if (!v->is_string()) wrong_type("config.configurable." + key, "a string", *v);
                out = std::string(v->get_string());
            }
        }
    }
    return out;
}

/// The checkpoint a state call names; nullopt: the newest.
std::optional<std::string> addressed_checkpoint(const json::object& body) { return addressed(body, "checkpoint_id"); }

[[noreturn]] void checkpoint_not_found(const std::string& thread_id, const std::string& checkpoint_id) {
    throw http_error(404, "checkpoint '" + checkpoint_id + "' not found on thread '" + thread_id + "'");
}

[[noreturn]] void no_checkpoint_yet(const std::string& thread_id) {
    throw http_error(409, "thread '" + thread_id + "' has no checkpoint yet: run it or update its state before patching its metadata");
}

/// Merges `metadata` into the metadata of checkpoint `at` (nullopt: the newest) of the root
/// namespace of the thread stored as `key` (`thread_id` to its client) and returns that
/// checkpoint's id. The checkpoint is put again under its own id with no values: every saver
/// replaces the record and keeps the values stored with it (the saver conformance check
/// `metadata_patch`). Under the thread's lease, as update_state: a lease held elsewhere is a
/// `thread_busy` (409).
awaitable<std::string> patch_checkpoint_metadata(checkpoint::saver& saver, const std::string& key,
                                                 const std::string& thread_id, const json::object& metadata,
                                                 const std::optional<std::string>& at) {
    co_await saver.acquire(key);
    std::exception_ptr failure;
    std::string id;
    try {
        auto found = co_await saver.get(key, "", at);
        if (!found && at) checkpoint_not_found(thread_id, *at);
        if (!found) no_checkpoint_yet(thread_id);
        auto& cp = found->cp;
        for (const auto& [k, v] : metadata) cp.metadata[k] = v;
        cp.values.clear(); // no channel written: the stored values stay
        cp.extends.clear();
        co_await saver.put(key, "", cp);
        id = cp.id;
    } catch (...) {
        failure = std::current_exception();
    }
    co_await saver.release(key);
    if (failure) std::rethrow_exception(failure);
    co_return id;
}

} // namespace

// -- /threads ---------------------------------------------------------------------------------------

awaitable<void> server::impl::route_threads(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    if (p.size() == 1 && verb == http::verb::post) {
        json::object body = body_object(c);
        auto id = opt_string(body, "thread_id");
        auto meta = opt_object(body, "metadata").value_or(json::object{});
        auto if_exists = one_of(body, "if_exists", {"raise", "do_nothing"});
        if (id && !is_uuid(*id)) throw http_error(422, "thread_id '" + *id + "' is not a UUID");
        // Only the caller's own threads are found: another key's thread of this id is kept
        // elsewhere (storage_id), so this creates the caller's own, as for a free id.
        auto th = new_thread(id.value_or(new_uuid()), c.owner, std::move(meta));
        // supersteps: the history written before the thread is handed out, one update_state per
        // update in order; all of them checked first (a mistake is a 422 and no thread).
        auto history = superstep_updates(body, th);
        if (!co_await store->create_thread(th)) {
            auto mine = co_await find_thread(c.owner, th.thread_id);
            if (!mine || mine->temporary || if_exists == "raise") throw http_error(409, "thread '" + th.thread_id + "' already exists");
            reply(c, 200, thread_json(*mine));
            co_return;
        }
        if (!history.empty()) {
            auto a = graph_of(th);
            for (auto& u : history) (void)co_await a->graph.update_state(std::move(u));
            th = co_await refreshed(th);
            (void)co_await store->put_thread(th);
        }
        reply(c, 200, thread_json(th));
        co_return;
    }
    if (p.size() == 2 && (p[1] == "search" || p[1] == "count") && verb == http::verb::post) {
        json::object body = body_object(c);
        auto meta = opt_object(body, "metadata");
        auto values = opt_object(body, "values");
        auto status = opt_string(body, "status");
        if (status && *status != "idle" && *status != "busy" && *status != "interrupted" && *status != "error")
            throw http_error(422, "field 'status' must be one of idle, busy, interrupted, error (got '" + *status + "')");
        thread_query q;
        q.owner = c.owner;
        if (status) q.status = *status;
        std::vector<std::string> keys;
        if (auto* v = field(body, "ids")) {
            if (!v->is_array()) wrong_type("ids", "a list of thread ids", *v);
            for (const auto& x : v->get_array()) {
                if (!x.is_string()) wrong_type("ids[]", "a string", x);
                keys.push_back(storage_id(c.owner, std::string(x.get_string())));
            }
            q.keys = &keys;
        }
        auto limit = opt_int(body, "limit", 10, 1, 10000), offset = opt_int(body, "offset", 0, 0, INT64_MAX);
        q.sort_by = one_of(body, "sort_by", {"created_at", "updated_at", "state_updated_at", "thread_id", "status"});
        q.ascending = one_of(body, "sort_order", {"desc", "asc"}) == "asc";
        auto all = co_await store->list_threads(q);
        std::vector<const thread_record*> hits;
        for (const auto& t : all) {
            if (meta && !contains(t.metadata, *meta)) continue;
            if (values && !contains(t.values, *values)) continue;
            hits.push_back(&t);
        }
        if (p[1] == "count") {
            reply(c, 200, static_cast<std::int64_t>(hits.size()));
            co_return;
        }
        json::array out;
        for (std::size_t i = static_cast<std::size_t>(offset); i < hits.size() && out.size() < static_cast<std::size_t>(limit); ++i)
            out.push_back(thread_json(*hits[i]));
        std::vector<std::pair<std::string, std::string>> h{{"X-Pagination-Total", std::to_string(hits.size())}};
        if (out.size() == static_cast<std::size_t>(limit)) h.emplace_back("X-Pagination-Next", std::to_string(offset + limit));
        reply(c, 200, out, std::move(h));
        co_return;
    }
    if (p.size() < 2) throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads");
    // Run creation finds (or, with if_not_exists: "create", makes) the thread itself.
    if (verb == http::verb::post && p[2 < p.size() ? 2 : 0] == "runs" &&
        (p.size() == 3 || (p.size() == 4 && (p[3] == "stream" || p[3] == "wait")))) {
        const std::string how = p.size() == 3 ? std::string("create") : p[3];
        co_await create_run(c, false, how);
        co_return;
    }
    auto th = co_await thread_or_404(c, p[1]);
    if (p.size() == 2) {
        if (verb == http::verb::get) {
            reply(c, 200, thread_json(th));
        } else if (verb == http::verb::patch) {
            json::object body = body_object(c);
            auto m = opt_object(body, "metadata").value_or(json::object{});
            auto patched = co_await store->patch_thread(th.key, std::move(m));
            if (!patched) throw http_error(404, "thread '" + th.thread_id + "' not found");
            reply(c, 200, thread_json(*patched));
        } else if (verb == http::verb::delete_) {
            if (!co_await store->delete_thread(th.key)) {
                auto runs = co_await store->list_runs(th.key, std::nullopt, 1, 0);
                throw http_error(409, "thread '" + th.thread_id + "' has a run in flight" +
                                          (runs.empty() ? std::string() : " (" + runs.front().run_id + ")") + "; cancel it first");
            }
            if (auto a = graph_of(th)) {
                auto saver = a->graph.checkpointer();
                co_await saver->delete_thread(th.key);
            }
            c.status = 204;
            reply(c, 204, nullptr);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads/{thread_id}");
        }
        co_return;
    }
    const std::string& what = p[2];
    if (what == "stream" && p.size() == 3 && verb == http::verb::get) {
        auto modes = query_modes(c);
        co_await relay_thread(c, th, std::move(modes));
        co_return;
    }
    if (what == "runs") {
        co_await route_runs(c, th);
        co_return;
    }
    if (what == "copy" && p.size() == 3 && verb == http::verb::post) {
        // The copy takes no fields (LangGraph's SDKs send none); a body is refused unless it is
        // empty or an empty object, before anything is copied.
        json::object body = body_object(c);
        if (!body.empty())
            throw http_error(422, "field '" + std::string(body.begin()->key()) +
                                      "' is not taken by POST /threads/{thread_id}/copy (send no body or {})");
        auto copy = new_thread(new_uuid(), c.owner, th.metadata);
        copy.graph_id = th.graph_id;
        copy.values = th.values;
        copy.interrupts = th.interrupts;
        copy.status = th.status == "busy" ? "idle" : th.status;
        if (auto a = graph_of(th)) {
            auto saver = a->graph.checkpointer();
            co_await saver->copy_thread(th.key, copy.key);
            copy = co_await refreshed(std::move(copy));
        }
        (void)co_await store->create_thread(copy);
        reply(c, 200, thread_json(copy));
        co_return;
    }
    auto a = graph_of(th);
    if (what == "state" && p.size() == 3 && verb == http::verb::get) {
        if (!a) {
            reply(c, 200, empty_thread_state());
            co_return;
        }
        state_options o;
        o.subgraphs = c.query.get("subgraphs").value_or("") == "true";
        auto snap = co_await a->graph.get_state(th.key, o);
        reply(c, 200, snap.checkpoint_id.empty() ? empty_thread_state() : thread_state(th.thread_id, snap));
        co_return;
    }
    // At a checkpoint: GET .../state/{checkpoint_id}, or POST .../state/checkpoint {checkpoint: {checkpoint_id}}.
    if (what == "state" && p.size() == 4 && (verb == http::verb::get || (verb == http::verb::post && p[3] == "checkpoint"))) {
        std::string cp_id = p[3];
        state_options o;
        o.subgraphs = c.query.get("subgraphs").value_or("") == "true";
        if (verb == http::verb::post) {
            json::object body = body_object(c);
            auto cp = opt_object(body, "checkpoint");
            auto id = cp ? opt_string(*cp, "checkpoint_id") : std::nullopt;
            if (!id) throw http_error(422, "field 'checkpoint.checkpoint_id' is required");
            cp_id = *id;
            if (const auto* sub = field(body, "subgraphs")) {
                if (!sub->is_bool()) wrong_type("subgraphs", "a boolean", *sub);
                o.subgraphs = sub->get_bool();
            }
        }
        if (!a) checkpoint_not_found(th.thread_id, cp_id);
        o.checkpoint_id = cp_id;
        auto snap = co_await a->graph.get_state(th.key, o);
        if (snap.checkpoint_id.empty()) checkpoint_not_found(th.thread_id, cp_id);
        reply(c, 200, thread_state(th.thread_id, snap));
        co_return;
    }
    if (what == "state" && p.size() == 3 && verb == http::verb::post) {
        json::object body = body_object(c);
        if (!a) throw http_error(422, "thread '" + th.thread_id + "' has no graph yet: create it with metadata.graph_id, or run it first");
        if (th.status == "busy") throw http_error(409, "thread '" + th.thread_id + "' has a run in flight; update its state when it ends");
        json_update req;
        req.thread_id = th.key;
        if (auto* v = field(body, "values")) {
            if (!v->is_object()) wrong_type("values", "an object (state fields)", *v);
            // Read against the checkpoint's state: a nested struct's members left out keep theirs;
            // a field or member that does not fit: graph_error(invalid_input), a 422.
            req.values = v->get_object();
        }
        req.checkpoint_id = addressed_checkpoint(body);
        // A subgraph's namespace (tasks[i].state.checkpoint.checkpoint_ns of GET .../state?subgraphs=true).
        req.ns = addressed(body, "checkpoint_ns").value_or("");
        if (auto n = opt_string(body, "as_node")) {
            // (a subgraph's nodes are checked by the engine, against the subgraph)
            if (req.ns.empty() && !a->graph.shape().find(*n))
                throw http_error(422, "as_node '" + *n + "' is not a node of graph '" + a->spec.graph_id + "'");
            req.as_node = *n;
        }
        const std::string ns = req.ns;
        auto id = co_await a->graph.update_state(std::move(req));
        auto fresh = co_await refreshed(th);
        (void)co_await store->put_thread(fresh);
        json::value ref = checkpoint_ref(th.thread_id, id);
        if (ref.is_object()) ref.get_object()["checkpoint_ns"] = ns;
        reply(c, 200, json::object{{"checkpoint", std::move(ref)}});
        co_return;
    }
    // PATCH .../state (the SDKs' patchState): merges `metadata` into the metadata of the thread's
    // newest checkpoint, or of the one the body names; the values and the thread's own record
    // (its metadata included) stay as they are.
    if (what == "state" && p.size() == 3 && verb == http::verb::patch) {
        json::object body = body_object(c);
        const auto* m = field(body, "metadata");
        if (!m) throw http_error(422, "field 'metadata' is required (the keys to merge into the checkpoint's metadata)");
        if (!m->is_object()) wrong_type("metadata", "an object", *m);
        // `step` and `source` are the checkpoint's own (GET .../state reports them from it).
        for (const char* own : {"step", "source"})
            if (m->get_object().contains(own))
                throw http_error(422, "field 'metadata." + std::string(own) + "' is the checkpoint's own and cannot be patched");
        auto at = addressed_checkpoint(body);
        if (!a && at) checkpoint_not_found(th.thread_id, *at);
        if (!a) no_checkpoint_yet(th.thread_id);
        if (th.status == "busy") throw http_error(409, "thread '" + th.thread_id + "' has a run in flight; patch its state when it ends");
        auto saver = a->graph.checkpointer();
        auto id = co_await patch_checkpoint_metadata(*saver, th.key, th.thread_id, m->get_object(), at);
        reply(c, 200, json::object{{"checkpoint", checkpoint_ref(th.thread_id, id)}});
        co_return;
    }
    if (what == "history" && p.size() == 3 && (verb == http::verb::post || verb == http::verb::get)) {
        json::object body = verb == http::verb::post ? body_object(c) : json::object{};
        auto limit = verb == http::verb::post ? opt_int(body, "limit", 10, 1, 10000) : c.query.integer("limit", 10, 1, 10000);
        std::optional<std::string> before = c.query.get("before");
        if (auto* b = field(body, "before")) {
            if (b->is_string()) before = std::string(b->get_string());
            else if (b->is_object()) {
                auto inner = b->get_object().if_contains("configurable");
                const json::object& o = inner && inner->is_object() ? inner->get_object() : b->get_object();
                before = opt_string(o, "checkpoint_id");
            } else wrong_type("before", "a checkpoint id or a checkpoint config", *b);
        }
        auto meta = opt_object(body, "metadata");
        json::array out;
        if (a) {
            checkpoint::list_options list_opts;
            if (before) list_opts.before = *before;
            if (!meta) list_opts.limit = static_cast<std::size_t>(limit);
            auto list = co_await a->graph.get_state_history(th.key, std::move(list_opts));
            for (const auto& d : list) {
                if (out.size() >= static_cast<std::size_t>(limit)) break;
                auto s = thread_state(th.thread_id, d);
                if (meta && !contains(s["metadata"], *meta)) continue;
                out.push_back(std::move(s));
            }
        }
        reply(c, 200, out);
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

} // namespace stategraph::server
