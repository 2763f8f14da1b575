// The superstep engine, compiled once for every state type: it reaches the state through
// detail::state_table. Layout of this file:
//   task_frame / context      what a node sees of its task
//   frontier                  what runs next, and its stored form
//   checkpoint_session        the one place that talks to the saver during a run
//   run_state                 a call's state, restored from and saved to checkpoints
//   routing, tasks, the loop  LangGraph's supersteps
//   entry points              run_graph, get_state, get_state_history, update_state, subgraphs

#include <stategraph/compiled_graph.hpp>
#include <stategraph/detail/engine.hpp>
#include <stategraph/detail/graph_core.hpp>
#include <stategraph/drain.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/core/demangle.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <set>

namespace stategraph {
namespace detail {

namespace names = checkpoint::reserved;

// ---------------------------------------------------------------------------------------------
// task_frame: one task attempt, as its node sees it through `context`.

struct resume_pass {
    std::map<std::string, boost::json::value> by_id;
};

struct task_frame {
    const std::string* node = nullptr;
    std::int64_t step = 0;
    const std::string* thread_id = nullptr;
    const std::string* ns = nullptr;
    const std::vector<std::string>* ns_path = nullptr;
    int attempt = 1;
    boost::asio::any_io_executor executor;
    std::string task_id;
    std::vector<boost::json::value> resume; // answers, by interrupt call index
    std::size_t counter = 0;                // interrupt calls made so far in this attempt
    const resume_pass* child_resume = nullptr; // resume meant for a subgraph run by this task
    const stream_handler* sink = nullptr;
    stream_mode modes = stream_mode::none;
    checkpoint::saver* saver = nullptr;
    int recursion_limit = 25;
    durability mode = durability::sync; // the call's durability, which its subgraphs follow
    const runtime_context* runtime = nullptr;
    store::base_store* store = nullptr; // the call's store, else the graph's (a subgraph: its parent's)
    run_observer* observer = nullptr;   // the call's observer (a subgraph: its parent's)
    const std::string* run_id = nullptr;
    // side effects (ctx.task): results by key, saved as the task's pending write on `checkpoint_id`
    const std::string* checkpoint_id = nullptr;
    boost::json::object effects;
    std::map<std::string, int, std::less<>> effect_calls; // calls per name in this attempt
};

struct context_access {
    static context make(task_frame& f) { return context(f); }
    static task_frame& frame(context& c) { return *c.f_; }
};

std::string interrupt_id(const std::string& task_id, std::size_t index) {
    // FNV-1a of the task id and the call's position: stable across re-runs of the task,
    // distinct for each interrupt call of a node and for each task.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : task_id) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (int i = 0; i < 8; ++i) h = (h ^ ((index >> (8 * i)) & 0xff)) * 1099511628211ull;
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

const boost::json::value* next_resume(task_frame& f) {
    std::size_t index = f.counter++;
    return index < f.resume.size() ? &f.resume[index] : nullptr;
}

void raise_interrupt(task_frame& f, boost::json::value payload) {
    throw interrupt_signal{{interrupt_info{interrupt_id(f.task_id, f.counter - 1), *f.node, std::move(payload)}}};
}

void throw_resume_mismatch(task_frame& f, const std::string& type, const boost::json::value& answer) {
    throw thread_error(errc::resume_type_mismatch,
                       "node '" + *f.node + "' expected a resume value of type " + type + " but got " +
                           boost::json::serialize(answer),
                       {*f.node});
}

std::pair<std::string, const boost::json::value*> begin_effect(task_frame& f, std::string_view name) {
    const int n = ++f.effect_calls[std::string(name)];
    std::string key(name);
    if (n > 1) key += "#" + std::to_string(n);
    return {key, f.effects.if_contains(key)};
}

boost::asio::awaitable<void> save_effect(task_frame& f, std::string key, boost::json::value result) {
    f.effects[key] = std::move(result);
    if (!f.saver || !f.checkpoint_id) co_return; // no checkpointer: kept for retries of this call only
    std::vector<checkpoint::pending_write> w{{f.task_id, *f.node, std::string(checkpoint::reserved::effects), f.effects}};
    co_await f.saver->put_writes(*f.thread_id, *f.ns, *f.checkpoint_id, std::move(w));
}

store::base_store* store_of_call(const task_frame& f) noexcept { return f.store; }
void report_usage(const task_frame& f, std::string_view model, const token_usage& usage) {
    if (f.observer) f.observer->on_usage(model, usage);
}

void throw_no_store(const task_frame& f) {
    throw graph_error(errc::no_store,
                      "node '" + *f.node + "' asked for the store (ctx.store()), but the run has none: give the graph "
                          "one with compile_options::store, or the call with run_config::store",
                      {*f.node});
}

const runtime_context& runtime_of_call(const task_frame& f) noexcept {
    static const runtime_context none;
    return f.runtime ? *f.runtime : none;
}

void throw_runtime_mismatch(const task_frame& f, const std::string& wanted) {
    const auto& r = runtime_of_call(f);
    throw graph_error(errc::invalid_input,
                      "node '" + *f.node + "' reads the runtime context as " + wanted + ", but the call " +
                          (r ? "passed a " + boost::core::demangle(r.type->name())
                             : std::string("passed none (run_config::runtime = stategraph::runtime_of(deps))")),
                      {*f.node});
}

void throw_effect_mismatch(task_frame& f, const std::string& key, const std::string& type) {
    throw thread_error(errc::resume_type_mismatch,
                       "node '" + *f.node + "': the saved result of ctx.task('" + key + "') does not convert to " + type +
                           " (the node's code changed since it ran?)",
                       {*f.node, key});
}

bool wants_custom(const task_frame& f) noexcept { return f.sink && *f.sink && has_mode(f.modes, stream_mode::custom); }
bool wants_messages(const task_frame& f) noexcept { return f.sink && *f.sink && has_mode(f.modes, stream_mode::messages); }

/// An event of the node's task: custom events and message chunks.
void emit_from_node(task_frame& f, stream_mode mode, boost::json::value data) {
    stream_event e;
    e.mode = mode;
    e.ns = *f.ns_path;
    e.step = f.step;
    e.node = *f.node;
    e.data = std::move(data);
    (*f.sink)(e);
}

void emit_message(task_frame& f, boost::json::value chunk) {
    boost::json::object meta{{"langgraph_node", *f.node},
                             {"langgraph_step", f.step},
                             {"langgraph_checkpoint_ns", *f.ns},
                             {"langgraph_task_id", f.task_id},
                             {"thread_id", *f.thread_id}};
    if (f.run_id) meta["run_id"] = *f.run_id;
    emit_from_node(f, stream_mode::messages, boost::json::array{std::move(chunk), std::move(meta)});
}

void emit_custom(task_frame& f, boost::json::value event) { emit_from_node(f, stream_mode::custom, std::move(event)); }

} // namespace detail

const std::string& context::node() const noexcept { return *f_->node; }
std::int64_t context::step() const noexcept { return f_->step; }
const std::string& context::thread_id() const noexcept { return *f_->thread_id; }
const std::string& context::ns() const noexcept { return *f_->ns; }
int context::attempt() const noexcept { return f_->attempt; }
const boost::asio::any_io_executor& context::executor() const noexcept { return f_->executor; }
const std::string& context::run_id() const noexcept {
    static const std::string none;
    return f_->run_id ? *f_->run_id : none;
}
const std::string& context::checkpoint_id() const noexcept {
    static const std::string none;
    return f_->checkpoint_id ? *f_->checkpoint_id : none;
}

namespace detail {
namespace {

/// Thrown out of a subgraph's run when one of its nodes returned a command for the parent graph
/// (`command<S>::to_parent`); run_subgraph turns it into the parent task's writes and targets.
struct parent_command_signal {
    std::shared_ptr<parent_handoff> handoff;
    std::string node; ///< the subgraph node that sent it
};

// ---------------------------------------------------------------------------------------------
// frontier: triggered nodes, Sends, deferred nodes and the state of join barriers.

struct frontier {
    std::vector<int> pull;
    std::vector<send> push;
    std::vector<int> deferred;
    std::vector<std::vector<char>> barriers;
    std::string seen; // breakpoint marker: versions newer than this re-arm static breakpoints
};

std::string max_version(const std::vector<std::string>& versions) {
    std::string m;
    for (const auto& v : versions)
        if (v > m) m = v;
    return m;
}

send restored_send(const graph_core& g, int id, const boost::json::value& arg) {
    const auto& rt = g.nodes[static_cast<std::size_t>(id)];
    return send::restored(rt.name, rt.arg_from_json(arg), rt.input_type, rt.arg_to_json);
}

boost::json::object send_json(const send& s) { return boost::json::object{{"node", s.node()}, {"arg", s.arg_json()}}; }

// Empty lists are left out: frontier_from (and every other reader) treats a missing key as empty.
boost::json::value frontier_json(const graph_core& g, const frontier& f, boost::json::storage_ptr sp) {
    boost::json::object o(sp);
    o.reserve(2); // one table allocation, enough for the usual pull list (and `seen`)
    auto names_of = [&](const std::vector<int>& ids) {
        boost::json::array a(sp);
        a.reserve(ids.size());
        for (int n : ids) a.push_back(boost::json::string(g.nodes[static_cast<std::size_t>(n)].name, sp));
        return a;
    };
    if (!f.pull.empty()) o[names::pull] = names_of(f.pull);
    if (!f.push.empty()) {
        boost::json::array push(sp);
        push.reserve(f.push.size());
        for (const auto& s : f.push) push.push_back(send_json(s));
        o[names::push] = std::move(push);
    }
    if (!f.deferred.empty()) o[names::deferred] = names_of(f.deferred);
    if (!f.barriers.empty()) {
        boost::json::array barriers(sp);
        barriers.reserve(f.barriers.size());
        for (const auto& b : f.barriers) {
            boost::json::array a(sp);
            a.reserve(b.size());
            for (char c : b) a.push_back(c != 0);
            barriers.push_back(std::move(a));
        }
        o[names::barriers] = std::move(barriers);
    }
    if (!f.seen.empty()) o[names::seen] = f.seen;
    return o;
}

/// The corrupt_checkpoint error of stored data that is well-formed but wrong, naming the thread,
/// the checkpoint and the field it was read from.
[[noreturn]] void throw_stored(const std::string& thread, const std::string& checkpoint_id, const std::string& field,
                               const std::string& problem) {
    throw checkpoint_error(errc::corrupt_checkpoint,
                           "thread '" + thread + "', checkpoint " + checkpoint_id + ", field '" + field + "': " + problem,
                           {thread, checkpoint_id, field});
}

/// Reads a stored frontier. A node name this graph does not have is corruption when this graph
/// wrote the checkpoint; with `drifted` (another graph shape wrote it and the caller accepted
/// that) it is a node that was removed since, and is dropped.
frontier frontier_from(const graph_core& g, const boost::json::value& v, const std::string& thread,
                       const std::string& checkpoint_id, bool drifted) {
    frontier f;
    f.barriers.resize(g.joins.size());
    for (std::size_t j = 0; j < g.joins.size(); ++j) f.barriers[j].assign(g.joins[j].sources.size(), 0);
    if (v.is_null()) return f;
    const auto* o = v.if_object();
    if (!o) throw_stored(thread, checkpoint_id, "frontier", "not an object");
    auto node_of = [&](const boost::json::value& n) {
        if (!n.is_string()) throw_stored(thread, checkpoint_id, "frontier", "a node name that is not a string");
        int id = g.find(std::string(n.get_string()));
        if (id < 0 && !drifted)
            throw_stored(thread, checkpoint_id, "frontier",
                         "names node '" + std::string(n.get_string()) +
                             "', which this graph does not have, though this graph wrote the checkpoint");
        return id;
    };
    if (auto* a = o->if_contains(names::pull))
        for (const auto& n : a->as_array())
            if (int id = node_of(n); id >= 0) f.pull.push_back(id);
    if (auto* a = o->if_contains(names::deferred))
        for (const auto& n : a->as_array())
            if (int id = node_of(n); id >= 0) f.deferred.push_back(id);
    if (auto* a = o->if_contains(names::push))
        for (const auto& p : a->as_array())
            if (int id = node_of(p.at("node")); id >= 0) f.push.push_back(restored_send(g, id, p.at("arg")));
    if (auto* a = o->if_contains(names::barriers); a && a->as_array().size() == f.barriers.size())
        for (std::size_t j = 0; j < f.barriers.size(); ++j) {
            const auto& arr = a->as_array()[j].as_array();
            for (std::size_t k = 0; k < arr.size() && k < f.barriers[j].size(); ++k) f.barriers[j][k] = arr[k].as_bool();
        }
    if (auto* s = o->if_contains(names::seen)) f.seen = std::string(s->as_string());
    return f;
}

// ---------------------------------------------------------------------------------------------
// checkpoint_session: the saver, the thread and namespace it writes, and the lease. Every saver
// call of a run goes through here.

class checkpoint_session {
public:
    checkpoint_session() = default;
    checkpoint_session(checkpoint::saver* saver, std::string thread_id, std::string ns)
        : saver_(saver), thread_id_(std::move(thread_id)), ns_(std::move(ns)) {}

    checkpoint::saver* saver() const noexcept { return saver_; }
    explicit operator bool() const noexcept { return saver_ != nullptr; }
    const std::string& thread_id() const noexcept { return thread_id_; }
    const std::string& ns() const noexcept { return ns_; }

    boost::asio::awaitable<void> acquire() {
        co_await saver_->acquire(thread_id_);
        leased_ = true;
    }
    /// Releases the lease if this session holds it.
    boost::asio::awaitable<void> release() {
        if (!leased_) co_return;
        leased_ = false;
        co_await saver_->release(thread_id_);
    }
    // Plain functions handing out the saver's own awaitables: no coroutine frame of their own.
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> load(const std::optional<std::string>& id) {
        return saver_->get(thread_id_, ns_, id);
    }
    boost::asio::awaitable<void> put(const checkpoint::checkpoint& cp) {
        if (!observer_) return saver_->put(thread_id_, ns_, cp);
        return timed(saver_->put(thread_id_, ns_, cp), observer_);
    }
    /// Checkpoint writes are timed for `o` (null: not timed).
    void observe(run_observer* o) noexcept { observer_ = o; }
    boost::asio::awaitable<void> put_writes(const std::string& checkpoint_id, std::vector<checkpoint::pending_write> ws) {
        return saver_->put_writes(thread_id_, ns_, checkpoint_id, std::move(ws));
    }
    boost::asio::awaitable<void> put_graph(const std::string& signature, const std::vector<std::string>& shape) {
        return saver_->put_graph(signature, shape);
    }
    boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(const std::string& signature) {
        return saver_->get_graph(signature);
    }

private:
    static boost::asio::awaitable<void> timed(boost::asio::awaitable<void> put, run_observer* o) {
        const auto start = std::chrono::steady_clock::now();
        co_await std::move(put);
        o->on_checkpoint_write(std::chrono::steady_clock::now() - start);
    }

    checkpoint::saver* saver_ = nullptr;
    run_observer* observer_ = nullptr;
    std::string thread_id_, ns_;
    bool leased_ = false;
};

// ---------------------------------------------------------------------------------------------
// run_state: a call's state.

struct call_env;

struct run_state {
    explicit run_state(const graph_core& g)
        : state(*g.st), versions(g.st->n), saved_size(g.st->n, std::size_t(-1)), delta_chain(g.st->n, 0) {}

    state_box state;
    std::vector<std::string> versions;
    // Per field: its size when last saved (npos: unknown) and how many saved versions in a row
    // were appended items only; an append channel is saved as a delta while this stays short.
    std::vector<std::size_t> saved_size;
    std::vector<unsigned char> delta_chain;
    std::string graph_version;
    // Where `out`'s JSON lives: a monotonic arena emptied at each save (no malloc/free per JSON
    // node; a record of a few hundred bytes fits its first block). Declared before `out`.
    struct record_arena {
        unsigned char first[2048];
        boost::json::monotonic_resource resource{first, sizeof first};
    };
    std::unique_ptr<record_arena> arena = std::make_unique<record_arena>();
    // The record handed to the saver, kept between saves: its versions map is updated in place.
    checkpoint::checkpoint out = record_in(*arena);
    std::string cp_id, parent_id;
    std::int64_t step = -2;
    frontier fr;
    std::vector<std::string> last_writers;
    std::vector<std::string> path; // the nodes this call ran, in order (superstep, then name)
    checkpoint_session session;
    std::vector<std::string> ns_path;
    bool have_checkpoint = false;
    bool signature_differs = false;
    /// The checkpoint loaded was migrated from an older state version: the next one written
    /// holds every field whole (the stored values have the old shape).
    bool write_all = false;
    std::map<std::string, std::vector<checkpoint::pending_write>> pending; // of the current checkpoint, by task id
    std::string stored_signature;
    std::vector<std::string> stored_shape;
    // subgraph support: what this run wrote, returned to the parent
    bool track_delta = false;
    update_box delta;
    std::map<std::string, boost::json::value> resume_answers; // pending interrupt id -> answer
    /// Fields a Command given with a resume changed before the resumed step ran: saved with
    /// that step's checkpoint.
    field_mask command_changed;
    /// The input of an input checkpoint: written into its metadata, and read back when that
    /// checkpoint is the newest (the process died before the first step's checkpoint), so that
    /// continuing the thread applies it. Empty (no fields) when there is none.
    boost::json::object start_input;
    bool has_start_input = false;
    /// Fields of `start_input` that the input (or fork) checkpoint `carried_id` stored as their
    /// channel values, at its own id (fields never written before; see write_record): when the
    /// first step leaves such a field equal to that value, its checkpoint names that version
    /// instead of storing the value again, so an input is stored once.
    field_mask carried;
    std::string carried_id;
    std::string run_id; // this call's id (ctx.run_id()), shared with its subgraphs
    // Durability (run_config::durability). async: `out` holds the newest checkpoint, built and
    // not yet put; its put runs beside the next step's nodes (`put_queued`). exit: the newest
    // checkpoint `cp_id` is kept here only (`staged`) until the call ends; `unsaved` are the
    // fields changed since the last stored checkpoint, `staged_parent` that checkpoint's id.
    durability mode = durability::sync;
    bool put_queued = false;
    bool staged = false;
    const char* staged_source = "loop";
    std::string staged_parent;
    field_mask unsaved;
    const call_env* env = nullptr; // the call streaming this run's checkpoints (set by run())
    std::string cp_source;         // the source of the checkpoint `cp_id` ("input", "loop", ...)

    const std::string& thread_id() const noexcept { return session.thread_id(); }

    static checkpoint::checkpoint record_in(record_arena& a) {
        const boost::json::storage_ptr sp(&a.resource);
        return checkpoint::checkpoint{.values = boost::json::object(sp),
                                      .frontier = boost::json::value(sp),
                                      .metadata = boost::json::object(sp)};
    }
};

/// Everything a call needs besides its state: the graph and the caller's options.
struct call_env {
    const graph_core& g;
    const run_config& cfg;
    stream_mode modes;
    const stream_handler& on_event;
    /// Per-call breakpoints by node index, replacing the graph's (null: the graph's own).
    const std::vector<char>* before = nullptr;
    const std::vector<char>* after = nullptr;
    bool wants(stream_mode m) const { return on_event && has_mode(modes, m); }
    bool breaks_before(int node) const {
        return before ? (*before)[static_cast<std::size_t>(node)] != 0 : g.nodes[static_cast<std::size_t>(node)].before;
    }
    bool breaks_after(int node) const {
        return after ? (*after)[static_cast<std::size_t>(node)] != 0 : g.nodes[static_cast<std::size_t>(node)].after;
    }
};

/// Streams an event of the step being run (`r.step + 1`), or of the step `step` when given.
void emit(const call_env& env, const run_state& r, stream_mode mode, std::string node, boost::json::value data,
          bool cached = false, bool interrupt = false, std::optional<std::int64_t> step = std::nullopt) {
    if (!env.wants(mode)) return;
    stream_event e;
    e.mode = mode;
    e.ns = r.ns_path;
    e.step = step ? *step : r.step + 1;
    e.node = std::move(node);
    e.data = std::move(data);
    e.cached = cached;
    e.interrupt = interrupt;
    env.on_event(e);
}

/// The JSON of an update: its fields by name; a reducer field it overwrites as
/// `{"__overwrite__": value}` (LangGraph's wire form).
/// Now, as LangGraph's debug events print it: "2026-11-24T02:00:58.012Z".
std::string utc_timestamp() {
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[80];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    return buf;
}

/// A `tasks` or `checkpoints` record, streamed as itself and, for `debug`, in LangGraph's debug
/// envelope (`type` is "task", "task_result" or "checkpoint").
void emit_record(const call_env& env, const run_state& r, stream_mode mode, const char* type, std::int64_t step,
                 const std::string& node, boost::json::object payload) {
    const bool plain = env.wants(mode), debug = env.wants(stream_mode::debug);
    if (!plain && !debug) return;
    stream_event e;
    e.ns = r.ns_path;
    e.step = step;
    e.node = node;
    if (plain) {
        e.mode = mode;
        e.data = debug ? boost::json::value(payload) : boost::json::value(std::move(payload));
        env.on_event(e);
    }
    if (debug) {
        e.mode = stream_mode::debug;
        e.data = boost::json::object{{"step", step}, {"type", type}, {"timestamp", utc_timestamp()}, {"payload", std::move(payload)}};
        env.on_event(e);
    }
}

boost::json::object update_json(const state_table& st, const update_box& u) {
    boost::json::object o;
    if (!u) return o;
    const auto fields = u.fields();
    const auto overwrites = u.overwrites();
    for (std::size_t i = 0; i < st.n; ++i) {
        if (!fields.test(i)) continue;
        auto v = st.to_json(u.values(), i, {});
        if (overwrites.test(i) && !st.last_value[i]) o[st.names[i]] = wrap_overwrite(std::move(v));
        else o[st.names[i]] = std::move(v);
    }
    return o;
}

/// Reads field `i` of update `u` from its JSON (an overwrite's wire form marks it overwritten).
void read_update_field(const state_table& st, update_box& u, std::size_t i, const boost::json::value& v, errc code,
                       const std::string& where) {
    if (const boost::json::value* inner = st.last_value[i] ? nullptr : overwritten_value(v)) {
        st.from_json(u.values(), i, *inner, code, where);
        st.mark_overwrite(u.get(), i);
    } else {
        st.from_json(u.values(), i, v, code, where);
        st.mark(u.get(), i);
    }
}

} // namespace

// The one state <-> JSON conversion (declared in detail/engine.hpp; json_graph exposes it).
boost::json::object state_json(const state_table& st, const void* s) {
    boost::json::object o;
    if (!s) return o;
    for (std::size_t i = 0; i < st.n; ++i) o[st.names[i]] = st.to_json(s, i, {});
    return o;
}

update_box update_from_json(const state_table& st, const boost::json::object& o, errc code, const std::string& where) {
    update_box u(st);
    for (const auto& [k, v] : o) {
        int i = st.index_of(k);
        if (i < 0) {
            auto near = nearest_name(std::string(k), st.names);
            throw graph_error(code, where + ": unknown field '" + std::string(k) + "'" +
                                        (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {std::string(k)});
        }
        read_update_field(st, u, static_cast<std::size_t>(i), v, code, where);
    }
    return u;
}

namespace {

/// What a `values` event shows: the graph's output schema at the top level when it declares one
/// (as LangGraph streams its output keys), else the whole state.
boost::json::object values_json(const graph_core& g, const run_state& r) {
    if (g.output && r.ns_path.empty()) return g.output->write(r.state.get(), r.path);
    return state_json(*g.st, r.state.get());
}

/// Adds `u`'s fields to the run's delta (a subgraph's output).
void track(const state_table& st, run_state& r, const update_box& u) {
    if (!r.track_delta || !u) return;
    if (!r.delta) r.delta = update_box(st);
    st.apply_copy(r.delta.values(), u.get());
    const auto fields = u.fields();
    const auto overwrites = u.overwrites();
    for (std::size_t i = 0; i < st.n; ++i) {
        // A field the subgraph overwrote is overwritten in the parent too (with what the
        // subgraph holds after its later writes).
        if (overwrites.test(i)) st.mark_overwrite(r.delta.get(), i);
        else if (fields.test(i)) st.mark(r.delta.get(), i);
    }
}

/// An append list overwritten since its last save is saved whole next time, not as a delta.
void forget_saved_sizes(run_state& r, const field_mask& overwritten) {
    if (overwritten.none()) return;
    for (std::size_t i = 0; i < r.saved_size.size(); ++i)
        if (overwritten.test(i)) r.saved_size[i] = std::size_t(-1);
}

// ---------------------------------------------------------------------------------------------
// routing

void add_target(const graph_core& g, const std::string& name, frontier& f, const std::string& from) {
    if (name == END) return;
    int id = g.find(name);
    if (id < 0) {
        auto near = nearest_name(name, g.topo.node_names());
        throw graph_error(errc::invalid_route,
                          "'" + from + "' routed to '" + name + "', which is not a node of the graph" +
                              (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                          {from, name});
    }
    auto& list = g.nodes[static_cast<std::size_t>(id)].deferred ? f.deferred : f.pull;
    if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
}

void trigger(const graph_core& g, int id, frontier& f) {
    if (id < 0) return;
    add_target(g, g.nodes[static_cast<std::size_t>(id)].name, f, "");
}

void check_send(const graph_core& g, const send& s, const std::string& from) {
    int id = g.find(s.node());
    if (id < 0) {
        frontier scratch;
        add_target(g, s.node(), scratch, from); // throws invalid_route
    }
    const auto& rt = g.nodes[static_cast<std::size_t>(id)];
    if (rt.input_type != s.type())
        throw graph_error(errc::invalid_input,
                          "'" + from + "' sent a payload of type " + boost::core::demangle(s.type().name()) + " to node '" +
                              s.node() + "', which reads " + boost::core::demangle(rt.input_type.name()),
                          {from, s.node()});
}

/// The static successors of node `from` (-1 = START) and its conditional edges on `state`.
void successors(const graph_core& g, int from, const void* state, frontier& f) {
    const auto& next = from < 0 ? g.start_next : g.nodes[static_cast<std::size_t>(from)].next;
    for (int n : next) trigger(g, n, f);
    if (from >= 0) {
        for (int j : g.nodes[static_cast<std::size_t>(from)].joins) {
            auto& seen = f.barriers[static_cast<std::size_t>(j)];
            const auto& join = g.joins[static_cast<std::size_t>(j)];
            for (std::size_t k = 0; k < join.sources.size(); ++k)
                if (join.sources[k] == from) seen[k] = 1;
            if (std::all_of(seen.begin(), seen.end(), [](char c) { return c != 0; })) {
                std::fill(seen.begin(), seen.end(), 0);
                trigger(g, join.target, f);
            }
        }
    }
    const auto& brs = from < 0 ? g.start_branches : g.nodes[static_cast<std::size_t>(from)].branches;
    for (int b : brs) {
        std::vector<std::string> targets;
        std::vector<send> sends;
        g.branches[static_cast<std::size_t>(b)].route(state, targets, sends);
        const std::string& src = from < 0 ? START : g.nodes[static_cast<std::size_t>(from)].name;
        for (const auto& t : targets) add_target(g, t, f, src);
        for (auto& s : sends) {
            check_send(g, s, src);
            f.push.push_back(std::move(s));
        }
    }
}

std::vector<std::string> next_names(const graph_core& g, const frontier& f) {
    std::vector<std::string> out;
    for (int n : f.pull) out.push_back(g.nodes[static_cast<std::size_t>(n)].name);
    for (const auto& s : f.push) out.push_back(s.node());
    if (f.pull.empty() && f.push.empty())
        for (int n : f.deferred) out.push_back(g.nodes[static_cast<std::size_t>(n)].name);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

// ---------------------------------------------------------------------------------------------
// restoring and saving checkpoints

/// The signature of the graph that wrote `cp`: its own field, or the version of its graph shape.
const std::string& signature_of(const checkpoint::checkpoint& cp) {
    if (!cp.signature.empty()) return cp.signature;
    auto it = cp.versions.find(std::string(names::graph));
    return it == cp.versions.end() ? cp.signature : it->second;
}

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
bool migrate(const graph_core& g, checkpoint::checkpoint_tuple& t, bool reading = false) {
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
/// field), never silently dropped.
void restore(const graph_core& g, run_state& r, const checkpoint::checkpoint_tuple& t, bool drifted) {
    const auto& st = *g.st;
    const auto& cp = t.cp;
    const char* field = "versions"; // what is being read, for the message of a malformed record
    r.cp_source = cp.source;
    try {
        st.reset_state(r.state.get());
        std::fill(r.versions.begin(), r.versions.end(), std::string());
        std::fill(r.saved_size.begin(), r.saved_size.end(), std::size_t(-1)); // next save: whole values
        std::fill(r.delta_chain.begin(), r.delta_chain.end(), 0);
        // An input (or fork) checkpoint's fields at its own id are its input, not applied yet
        // (write_record): they go back into `start_input`, the state keeps its value before.
        const bool takes_input = (cp.source == "input" || cp.source == "fork") && !cp.metadata.contains(names::command);
        boost::json::object carried_input;
        r.carried.reset();
        r.carried_id.clear();
        for (const auto& [channel, version] : cp.versions) {
            if (channel == names::graph) {
                r.graph_version = version;
                continue;
            }
            if (takes_input && version == cp.id) {
                const auto* v = cp.values.if_contains(channel);
                if (!v) throw_stored(r.thread_id(), cp.id, "values", "the input field '" + channel + "' has no stored value");
                carried_input[channel] = *v;
                if (int i = st.index_of(channel); i >= 0) r.carried.set(static_cast<std::size_t>(i));
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
            r.versions[static_cast<std::size_t>(i)] = version;
            if (const auto* v = cp.values.if_contains(channel))
                st.from_json(r.state.get(), static_cast<std::size_t>(i), *v, errc::corrupt_checkpoint,
                             "thread '" + r.thread_id() + "', checkpoint " + cp.id);
        }
        field = "__graph__";
        if (const auto* sh = cp.values.if_contains(names::graph); sh && sh->is_array()) {
            r.stored_shape.clear();
            for (const auto& l : sh->as_array()) r.stored_shape.push_back(std::string(l.as_string()));
        }
        field = "frontier";
        r.fr = frontier_from(g, cp.frontier, r.thread_id(), cp.id, drifted);
        field = "metadata";
        if (const auto* d = cp.metadata.if_contains(names::delta); d && d->is_object() && r.track_delta)
            r.delta = update_from_json(st, d->as_object(), errc::corrupt_checkpoint,
                                       "thread '" + r.thread_id() + "', checkpoint " + cp.id + ", metadata");
        if (const auto* w = cp.metadata.if_contains(names::writers); w && w->is_array()) {
            r.last_writers.clear();
            for (const auto& n : w->as_array()) r.last_writers.push_back(std::string(n.as_string()));
        }
        r.has_start_input = false;
        r.start_input.clear();
        if (takes_input) {
            const auto* w = cp.metadata.if_contains(names::writes);
            if (w || !carried_input.empty()) {
                const auto* in = w && w->is_object() ? w->get_object().if_contains(names::start_task) : nullptr;
                if (w && (!in || !in->is_object()))
                    throw_stored(r.thread_id(), cp.id, "metadata", "an input that is not an object");
                if (in) r.start_input = in->get_object();
                for (auto& [key, value] : carried_input) r.start_input[key] = std::move(value);
                // validated now: a malformed input is reported when the checkpoint is read
                (void)update_from_json(st, r.start_input, errc::corrupt_checkpoint,
                                       "thread '" + r.thread_id() + "', checkpoint " + cp.id + ", input");
                r.has_start_input = true;
                if (r.carried.any()) r.carried_id = cp.id;
            }
        }
        field = "pending writes";
        check_pending(g, t, drifted);
    } catch (const graph_error&) {
        throw;
    } catch (const std::exception& e) {
        throw_stored(r.thread_id(), cp.id, field, std::string("cannot be read: ") + e.what());
    }
    r.cp_id = cp.id;
    r.parent_id = cp.parent_id;
    r.step = cp.step;
    r.stored_signature = signature_of(cp);
    r.out.versions.clear();
    for (std::size_t i = 0; i < st.n; ++i)
        if (!r.versions[i].empty()) r.out.versions.emplace(st.names[i], r.versions[i]);
    if (!r.graph_version.empty()) r.out.versions.emplace(std::string(names::graph), r.graph_version);
    r.have_checkpoint = true;
    r.pending.clear();
    for (const auto& w : t.writes) {
        if (w.channel == names::breakpoint) {
            r.fr.seen = std::string(w.value.as_string());
            continue;
        }
        r.pending[w.task_id].push_back(w);
    }
}

/// Streams the checkpoint `r` stands on (stream modes `checkpoints` and `debug`).
void emit_checkpoint(const graph_core& g, const run_state& r);

/// Longest run of delta-only versions of an append channel before a whole value is saved again.
constexpr unsigned char max_delta_chain = 32;

/// Builds checkpoint `id` in `r.out` (the values of the `changed` fields, versions, frontier,
/// metadata) and puts it, or with async durability leaves its put queued (`r.put_queued`).
boost::asio::awaitable<void> write_record(const graph_core& g, run_state& r, const std::string& id, std::int64_t step,
                                          const char* source, const field_mask& changed) {
    const auto& st = *g.st;
    auto& cp = r.out;
    cp.id = id;
    cp.parent_id = r.parent_id;
    cp.step = step;
    cp.source = source;
    // The last record's JSON is dropped (swapped out, then freed for nothing: the arena's
    // deallocation is trivial), the arena emptied, and this record built in it.
    const boost::json::storage_ptr sp(&r.arena->resource);
    {
        boost::json::object values(sp), metadata(sp);
        boost::json::value fr(sp);
        cp.values.swap(values);
        cp.metadata.swap(metadata);
        cp.frontier.swap(fr);
    }
    r.arena->resource.release();
    cp.extends.clear();
    cp.signature.clear();
    cp.values.reserve(changed.count() + 1); // sized once: no rehash per inserted key
    cp.metadata.reserve(4);
    const void* state = r.state.get();
    for (std::size_t i = 0; i < st.n; ++i) {
        if (!changed.test(i)) continue;
        // An append channel that only grew since its last saved version is saved as the items
        // appended since then, extending that version.
        const std::size_t size = st.sequence_size(state, i);
        if (size != std::size_t(-1) && r.saved_size[i] != std::size_t(-1) && size >= r.saved_size[i] &&
            !r.versions[i].empty() && r.delta_chain[i] < max_delta_chain) {
            cp.values[st.names[i]] = st.tail_json(state, i, r.saved_size[i], sp);
            cp.extends.emplace(st.names[i], r.versions[i]);
            ++r.delta_chain[i];
        } else {
            cp.values[st.names[i]] = st.to_json(state, i, sp);
            r.delta_chain[i] = 0;
        }
        r.saved_size[i] = size;
        r.versions[i] = id;
        if (auto v = cp.versions.find(st.names[i]); v != cp.versions.end()) v->second = id;
        else cp.versions.emplace(st.names[i], id);
    }
    if (r.graph_version.empty() || r.signature_differs) {
        // The shape is stored once per graph signature (for explaining drift later); a
        // checkpoint names the signature as its version of `__graph__`.
        co_await r.session.put_graph(g.signature, g.shape);
        r.graph_version = g.signature;
        r.signature_differs = false;
    }
    cp.versions.insert_or_assign(std::string(names::graph), r.graph_version);
    if (r.graph_version != g.signature) cp.signature = g.signature; // a thread from before: say it
    cp.frontier = frontier_json(g, r.fr, sp);
    boost::json::array writers(sp);
    writers.reserve(r.last_writers.size());
    for (const auto& w : r.last_writers) writers.push_back(boost::json::string(w, sp));
    cp.metadata[names::writers] = std::move(writers);
    cp.metadata[names::step] = step;
    if (r.track_delta) cp.metadata[names::delta] = update_json(st, r.delta);
    cp.metadata[names::source] = source;
    if (g.state_version > 1) cp.metadata[names::state_version] = g.state_version;
    // An input checkpoint with no input to run was written by a Command (its update applied).
    if (!r.has_start_input && std::string_view(source) == "input") cp.metadata[names::command] = true;
    if (r.has_start_input && (std::string_view(source) == "input" || std::string_view(source) == "fork")) {
        // The input, not applied yet. A field never written before goes in as its channel value
        // at this checkpoint's id (which no field of an input checkpoint has otherwise: it writes
        // none), so that the first step can name that version instead of storing the value
        // again; the rest goes in the record (restore() puts both back together). Not with exit
        // durability, where this checkpoint may never be written.
        boost::json::object inline_input(sp);
        r.carried.reset();
        r.carried_id = id;
        for (const auto& [key, value] : r.start_input) {
            const int i = st.index_of(key);
            if (r.mode != durability::exit && i >= 0 && r.versions[static_cast<std::size_t>(i)].empty()) {
                cp.values[key] = boost::json::value(value, sp);
                cp.versions.insert_or_assign(std::string(key), id);
                r.carried.set(static_cast<std::size_t>(i));
                continue;
            }
            inline_input[key] = boost::json::value(value, sp);
        }
        boost::json::object w(sp);
        w[names::start_task] = std::move(inline_input);
        cp.metadata[names::writes] = std::move(w);
    }
    r.have_checkpoint = true;
    if (r.mode == durability::async) {
        r.put_queued = true; // put beside the next step's nodes, or by settle()
        co_return;
    }
    co_await r.session.put(cp);
}

/// Makes everything this call has so far durable: the queued put of async durability is
/// awaited (its failure is thrown), and the staged checkpoint of exit durability is written. Runs
/// before anything is written against the current checkpoint (interrupts, breakpoints, errors)
/// and before a call returns.
boost::asio::awaitable<void> settle(const graph_core& g, run_state& r) {
    if (r.put_queued) {
        r.put_queued = false;
        co_await r.session.put(r.out);
    }
    if (r.staged) {
        r.staged = false;
        const field_mask changed = std::exchange(r.unsaved, field_mask{});
        r.parent_id = r.staged_parent;
        co_await write_record(g, r, r.cp_id, r.step, r.staged_source, changed);
    }
}

/// Exit durability: checkpoint `id` becomes the current one without being written. Fields it
/// changes get version `id` for now (settle() stores them, whole, with the checkpoint written).
void stage(const graph_core& g, run_state& r, const std::string& id, const char* source, const field_mask& changed) {
    if (!r.staged) r.staged_parent = r.parent_id; // the newest stored checkpoint
    r.staged = true;
    r.staged_source = source;
    for (std::size_t i = 0; i < g.st->n; ++i)
        if (changed.test(i)) {
            r.versions[i] = id;
            r.saved_size[i] = std::size_t(-1);
            r.delta_chain[i] = 0;
        }
    r.unsaved |= changed;
}

boost::asio::awaitable<void> save(const graph_core& g, run_state& r, std::string id, std::int64_t step, const char* source,
                                  const field_mask& changed_now) {
    const auto& st = *g.st;
    field_mask changed = changed_now;
    if (r.write_all) { // after a migration: every field, whole, at the new version
        for (std::size_t i = 0; i < st.n; ++i) changed.set(i);
        r.write_all = false;
    }
    // async: the previous checkpoint's put ends before its record (`r.out`) is rebuilt
    if (r.put_queued) co_await settle(g, r);
    r.parent_id = r.have_checkpoint ? r.cp_id : std::string();
    r.cp_id = id;
    r.cp_source = source;
    r.step = step;
    r.pending.clear();
    if (!r.session) {
        for (std::size_t i = 0; i < st.n; ++i)
            if (changed.test(i)) r.versions[i] = id;
        r.have_checkpoint = true;
        co_return;
    }
    if (r.mode == durability::exit) {
        stage(g, r, id, source, changed);
        r.have_checkpoint = true;
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
    if (!r.stored_shape.empty() || !r.session || r.stored_signature.empty()) co_return;
    if (auto shape = co_await r.session.get_graph(r.stored_signature)) r.stored_shape = std::move(*shape);
}

[[noreturn]] void throw_drift(const graph_core& g, const run_state& r) {
    std::vector<std::string> removed, added;
    std::set_difference(r.stored_shape.begin(), r.stored_shape.end(), g.shape.begin(), g.shape.end(),
                        std::back_inserter(removed));
    std::set_difference(g.shape.begin(), g.shape.end(), r.stored_shape.begin(), r.stored_shape.end(),
                        std::back_inserter(added));
    std::string msg = "thread '" + r.thread_id() + "' was written by a different graph (signature " + r.stored_signature +
                      ", this graph " + g.signature + ")";
    for (const auto& l : removed) msg += "\n  - " + l;
    for (const auto& l : added) msg += "\n  + " + l;
    msg += "\npass run_config::allow_drift = true to resume it anyway";
    std::vector<std::string> list{r.thread_id()};
    for (const auto& l : removed) list.push_back("-" + l);
    for (const auto& l : added) list.push_back("+" + l);
    throw drift_error(errc::graph_drift, msg, list);
}

// ---------------------------------------------------------------------------------------------
// tasks

enum class task_status { pending, done, interrupted, failed };

struct task {
    int node = 0;
    std::string id;
    int push_index = -1;
    const void* input = nullptr;
    task_status status = task_status::pending;
    bool cached = false;
    node_result out;
    field_mask out_fields;
    std::vector<interrupt_info> interrupts;
    std::exception_ptr error;
    task_frame frame;
    resume_pass child_resume;
    bool has_child_resume = false;
    // The task's writes as stored pending writes and streamed updates: encoded once.
    std::optional<boost::json::object> encoded;
};

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
        boost::json::array sends;
        for (const auto& s : t.out.sends) sends.push_back(send_json(s));
        add(names::send, std::move(sends));
    } else if (t.status == task_status::interrupted) {
        boost::json::array list;
        for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"node", i.node}, {"value", i.value}});
        add(names::interrupt, std::move(list));
        boost::json::array resumes(t.frame.resume.begin(), t.frame.resume.end());
        add(names::resume, std::move(resumes));
    } else if (t.status == task_status::failed) {
        add(names::error, boost::json::string(error_message(t.error)));
    }
    return ws;
}

/// Rebuilds a task's outcome from its saved writes; returns false when it must run.
bool reload_task(const graph_core& g, run_state& r, task& t) {
    auto it = r.pending.find(t.id);
    if (it == r.pending.end()) return false;
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
                              "thread '" + r.thread_id() + "', checkpoint " + r.cp_id + ", pending write of task '" +
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
    auto& f = r.fr;
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
        t.id = task_id(r.cp_id, g.nodes[static_cast<std::size_t>(n)].name, -1);
        t.input = r.state.get();
    }
    if (!use_deferred) {
        int p = 0;
        for (const auto& s : f.push) {
            task& t = tasks[k++];
            t.node = g.find(s.node());
            t.push_index = p;
            t.id = task_id(r.cp_id, s.node(), p++);
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
    p["config"] = config(r.cp_id);
    if (!r.parent_id.empty()) p["parent_config"] = config(r.parent_id);
    p["values"] = state_json(st, r.state.get());
    p["metadata"] = boost::json::object{{"source", r.cp_source}, {"step", r.step}, {"parents", boost::json::object{}}};
    boost::json::array next, tasks;
    if (r.has_start_input) {
        // An input checkpoint: its input is still to apply, by the `__start__` task.
        next.push_back(boost::json::string(names::start_task));
        tasks.push_back(boost::json::object{{"id", task_id(r.cp_id, std::string(names::start_task), -1)},
                                            {"name", names::start_task},
                                            {"interrupts", boost::json::array{}}});
    }
    for (const auto& n : next_names(g, r.fr)) next.push_back(boost::json::string(n));
    auto listed = make_tasks(g, r);
    std::stable_sort(listed.begin(), listed.end(),
                     [](const task& a, const task& b) { return listing_order(a) < listing_order(b); });
    for (const auto& t : listed) {
        boost::json::array interrupts;
        if (auto it = r.pending.find(t.id); it != r.pending.end())
            for (const auto& w : it->second)
                if (w.channel == names::interrupt)
                    for (const auto& i : w.value.as_array())
                        interrupts.push_back(boost::json::object{{"id", i.at("id")}, {"value", i.at("value")}});
        tasks.push_back(boost::json::object{
            {"id", t.id}, {"name", g.nodes[static_cast<std::size_t>(t.node)].name}, {"interrupts", std::move(interrupts)}});
    }
    p["next"] = std::move(next);
    p["tasks"] = std::move(tasks);
    emit_record(*r.env, r, stream_mode::checkpoints, "checkpoint", r.step, std::string(), std::move(p));
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
        p["input"] = r.fr.push[static_cast<std::size_t>(t.push_index)].arg_json();
        p["triggers"] = boost::json::array{"__pregel_push"};
    } else {
        p["input"] = state_json(*env.g.st, r.state.get());
        p["triggers"] = boost::json::array{boost::json::string("branch:to:" + name)};
    }
    p["interrupts"] = boost::json::array{};
    emit_record(env, r, stream_mode::tasks, "task", r.step + 1, name, std::move(p));
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
    emit_record(env, r, stream_mode::tasks, "task_result", r.step + 1, name, std::move(p));
}

// ---------------------------------------------------------------------------------------------
// node cache and error handlers (run_task)

/// The cache namespace of a node: the graph's name and the node's.
std::string cache_ns(const graph_core& g, const std::string& node) { return g.topo.name + ":" + node; }

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
            call.sync(r.state.get(), failure, ctx, t.out);
        } else {
            auto handled = call.async(r.state.get(), failure, ctx, t.out);
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
    f.node = &rt.name;
    f.step = r.step + 1;
    f.thread_id = &r.thread_id();
    f.ns = &r.session.ns();
    f.ns_path = &r.ns_path;
    f.executor = ex;
    f.task_id = t.id;
    f.child_resume = t.has_child_resume ? &t.child_resume : nullptr;
    f.sink = &env.on_event;
    f.modes = env.modes;
    f.saver = r.session.saver();
    f.checkpoint_id = &r.cp_id;
    f.runtime = &env.cfg.runtime;
    f.store = env.cfg.store ? env.cfg.store : g.store.get();
    f.observer = env.cfg.observer;
    f.run_id = &r.run_id;
    f.recursion_limit = env.cfg.recursion_limit;
    f.mode = r.mode;
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
                t.out_fields = t.out.writes.fields();
                if (env.wants(stream_mode::updates)) emit(env, r, stream_mode::updates, rt.name, *t.encoded, true);
                if (streams_tasks) emit_task_result(env, r, t);
                if (durable && r.session) co_await r.session.put_writes(r.cp_id, task_writes(g, t));
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
    if (durable && r.session && !is_resume_mismatch(t)) co_await r.session.put_writes(r.cp_id, task_writes(g, t));
}

/// Runs the step's tasks, in parallel when there are several. With async durability the previous
/// step's checkpoint is put beside them (the first of the group, so that a task's pending writes
/// for that checkpoint follow it), and its failure is the call's error once the tasks are done.
boost::asio::awaitable<void> run_tasks(const call_env& env, run_state& r, std::vector<task*> todo, bool durable) {
    if (todo.size() == 1 && !r.put_queued) {
        co_await run_task(env, r, *todo[0], durable);
        co_return;
    }
    auto ex = co_await boost::asio::this_coro::executor;
    auto strand = boost::asio::make_strand(ex);
    using op_t = decltype(boost::asio::co_spawn(strand, std::declval<boost::asio::awaitable<void>>(), boost::asio::deferred));
    std::vector<op_t> ops_list;
    ops_list.reserve(todo.size() + 1);
    if (r.put_queued) {
        r.put_queued = false;
        auto put = r.session.put(r.out);
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
        if (e) std::rethrow_exception(e); // a storage failure: the checkpoint's put, or put_writes
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

run_outcome make_result(const graph_core& g, const run_state& r, run_status status, std::vector<interrupt_info> interrupts) {
    run_outcome res;
    res.status = status;
    res.values = r.state;
    res.interrupts = std::move(interrupts);
    res.checkpoint_id = r.cp_id;
    res.step = r.step;
    res.next = next_names(g, r.fr);
    if (g.output && r.ns_path.empty()) res.output = g.output->write(res.values.get(), r.path);
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
    for (const auto& [tid, ws] : r.pending) {
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
    co_await settle(env.g, r); // the checkpoint the breakpoint is written against
    r.fr.seen = r.cp_id;
    std::vector<checkpoint::pending_write> w{{std::string(names::breakpoint), std::string(names::breakpoint),
                                              std::string(names::breakpoint), boost::json::string(r.cp_id)}};
    co_await r.session.put_writes(r.cp_id, std::move(w));
    emit(env, r, stream_mode::updates, std::string(names::interrupt), boost::json::array{}, false, true,
         after ? r.step : r.step + 1);
}

[[noreturn]] void throw_recursion_limit(const graph_core& g, const run_state& r, int limit) {
    std::string next;
    for (const auto& n : next_names(g, r.fr)) next += (next.empty() ? "" : ", ") + n;
    throw recursion_limit_error(errc::recursion_limit,
                                "recursion limit of " + std::to_string(limit) + " supersteps reached without hitting END (next: " +
                                    next + "); raise run_config::recursion_limit if the graph is meant to loop longer",
                                {});
}

/// The writes of this step's tasks that were not saved as they finished (a single task, or
/// exit durability): saved, after the checkpoint they belong to, when the call stops inside the
/// step (an interrupt or a failure), so that continuing the thread does not run again the tasks
/// that finished.
boost::asio::awaitable<void> save_held_writes(const graph_core& g, run_state& r, std::vector<task>& tasks) {
    co_await settle(g, r);
    std::vector<checkpoint::pending_write> ws;
    for (auto& t : tasks) {
        if (t.status == task_status::pending || t.cached || is_resume_mismatch(t)) continue;
        auto w = task_writes(g, t);
        ws.insert(ws.end(), std::make_move_iterator(w.begin()), std::make_move_iterator(w.end()));
    }
    if (!ws.empty()) co_await r.session.put_writes(r.cp_id, std::move(ws));
}

/// Applies a single task's writes and routes from its node. Routing that reads no state (no
/// conditional edge) runs first, and with exit durability a router reads a copy: a routing error
/// (a router that throws, an unknown target) then leaves the state as the staged checkpoint has
/// it, and that is what the failed call writes.
void apply_and_route(const call_env& env, run_state& r, task& t, frontier& next) {
    const auto& g = env.g;
    const auto& st = *g.st;
    if (!t.out.writes || g.nodes[static_cast<std::size_t>(t.node)].branches.empty()) {
        route_after(g, t, r.state.get(), next);
        track(st, r, t.out.writes); // before apply(), which takes the values
        if (t.out.writes) st.apply(r.state.get(), t.out.writes.get());
    } else if (r.mode == durability::exit && r.session) {
        state_box local = r.state;
        st.apply_copy(local.get(), t.out.writes.get());
        route_after(g, t, local.get(), next);
        track(st, r, t.out.writes);
        r.state = std::move(local);
    } else {
        track(st, r, t.out.writes);
        st.apply(r.state.get(), t.out.writes.get());
        route_after(g, t, r.state.get(), next);
    }
}

// ---------------------------------------------------------------------------------------------
// the loop

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
        // Saved outcomes of this step (a resume, or a restart after a crash).
        const bool any_pending = !r.pending.empty();
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
            if (hit && max_version(r.versions) > r.fr.seen) {
                co_await stop_at_breakpoint(env, r, false);
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
        const bool durable = tasks.size() > 1 && r.mode != durability::exit;
        if (!todo.empty()) co_await run_tasks(env, r, std::move(todo), durable);

        for (auto& t : tasks)
            if (t.status == task_status::failed) {
                if (!durable && r.session) co_await save_held_writes(g, r, tasks);
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
            if (!durable && r.session) co_await save_held_writes(g, r, tasks);
            // One __interrupt__ event per interrupted task, as LangGraph.
            if (env.wants(stream_mode::updates))
                for (const auto& t : tasks) {
                    if (t.status != task_status::interrupted) continue;
                    boost::json::array list;
                    for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"value", i.value}});
                    emit(env, r, stream_mode::updates, std::string(names::interrupt), std::move(list), false, true);
                }
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
        next.barriers = r.fr.barriers;
        next.seen = r.fr.seen;
        const bool deferred_ran = r.fr.pull.empty() && r.fr.push.empty();
        if (!deferred_ran) next.deferred = r.fr.deferred; // deferred nodes that ran leave the set
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
                    state_box local = r.state;
                    st.apply_copy(local.get(), t.out.writes.get());
                    route_after(g, t, local.get(), next);
                } else {
                    route_after(g, t, r.state.get(), next);
                }
                writers.push_back(rt.name);
            }
            for (auto& t : tasks) {
                track(st, r, t.out.writes); // before apply(), which takes the values
                if (t.out.writes) st.apply(r.state.get(), t.out.writes.get());
            }
        }
        r.fr = std::move(next);
        r.path.insert(r.path.end(), writers.begin(), writers.end());
        r.last_writers = std::move(writers);
        if (r.session) co_await save(g, r, checkpoint::new_checkpoint_id(), r.step + 1, "loop", changed);
        else ++r.step;
        if (env.wants(stream_mode::values)) {
            stream_event e{stream_mode::values, r.ns_path, r.step, "", values_json(g, r)};
            env.on_event(e);
        }
        ++supersteps;
        // Static breakpoint after these nodes.
        if (r.session) {
            bool hit = std::any_of(tasks.begin(), tasks.end(),
                                   [&](const task& t) { return env.breaks_after(t.node); });
            if (hit && max_version(r.versions) > r.fr.seen) {
                co_await stop_at_breakpoint(env, r, true);
                co_return make_result(g, r, run_status::interrupted, {});
            }
        }
    }
    co_return make_result(g, r, run_status::done, {});
}

/// The `__start__` task: applies an input to the state, finds what it triggers, and saves the
/// first step's checkpoint (step `step`).
boost::asio::awaitable<void> apply_input(const call_env& env, run_state& r, update_box& input, std::int64_t step) {
    const auto& g = env.g;
    const auto& st = *g.st;
    field_mask changed = input.fields();
    forget_saved_sizes(r, input.overwrites());
    frontier next;
    next.barriers = r.fr.barriers;
    next.seen = r.fr.seen;
    if (g.start_branches.empty() || !input) {
        successors(g, -1, r.state.get(), next);
        if (input) st.apply(r.state.get(), input.get());
    } else if (r.mode == durability::exit && r.session) {
        // a router that fails leaves the state (and the staged input checkpoint) as they were
        state_box local = r.state;
        st.apply(local.get(), input.get());
        successors(g, -1, local.get(), next);
        r.state = std::move(local);
    } else {
        st.apply(r.state.get(), input.get());
        successors(g, -1, r.state.get(), next);
    }
    if (r.session && r.carried.any() && r.carried_id == r.cp_id && r.mode != durability::exit) {
        // A field the input checkpoint stored as its value, and that the input left equal to
        // it (no reducer changed it): this checkpoint names that version, nothing stored again.
        for (std::size_t i = 0; i < st.n; ++i) {
            if (!r.carried.test(i) || !changed.test(i)) continue;
            const auto* in = r.start_input.if_contains(st.names[i]);
            if (!in || st.to_json(r.state.get(), i, {}) != *in) continue;
            changed.reset(i);
            r.versions[i] = r.carried_id;
            r.out.versions.insert_or_assign(std::string(st.names[i]), r.carried_id);
            r.saved_size[i] = st.sequence_size(r.state.get(), i);
            r.delta_chain[i] = 0;
        }
    }
    r.carried.reset();
    r.has_start_input = false;
    r.start_input.clear();
    r.fr = std::move(next);
    r.last_writers = {START};
    if (r.session) co_await save(g, r, checkpoint::new_checkpoint_id(), step, "loop", changed);
    else r.step = step;
    if (env.wants(stream_mode::values)) {
        stream_event e{stream_mode::values, r.ns_path, r.step, "", values_json(g, r)};
        env.on_event(e);
    }
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
        if (in.json) in.values = merge_update_from_json(st, *in.json, r.state.get(), errc::invalid_input, "command.update");
        if (!in.values) return {};
        const field_mask fields = in.values.fields();
        forget_saved_sizes(r, in.values.overwrites());
        track(st, r, in.values);
        st.apply(r.state.get(), in.values.get());
        return fields;
    };
    if (in.has_resume) {
        if (!r.have_checkpoint)
            throw thread_error(errc::thread_not_found, "cannot resume thread '" + r.thread_id() + "': it has no checkpoint",
                               {r.thread_id()});
        apply_resume(r, in.resume);
        r.command_changed |= apply_update();
        add_targets(r.fr);
        co_return true;
    }
    if (r.has_start_input) {
        // The newest checkpoint is an input whose first step was never saved: it goes first.
        auto input = update_from_json(st, r.start_input, errc::corrupt_checkpoint,
                                      "thread '" + r.thread_id() + "', checkpoint " + r.cp_id + ", input");
        co_await apply_input(env, r, input, r.step + 1);
    }
    const std::int64_t base = r.have_checkpoint ? r.step : -2;
    const field_mask changed = apply_update();
    add_targets(r.fr);
    r.last_writers.clear();
    if (r.session) {
        co_await save(g, r, checkpoint::new_checkpoint_id(), base + 1, "input", changed);
    } else {
        r.pending.clear(); // the tasks waiting run again, as new tasks
        r.step = base + 1, r.have_checkpoint = true;
    }
    co_return false;
}

boost::asio::awaitable<run_outcome> run_locked(const call_env& env, run_state& r, run_input& in) {
    const auto& g = env.g;
    const auto& st = *g.st;
    std::optional<checkpoint::checkpoint_tuple> head;
    std::optional<std::string> from_id;
    if (env.cfg.checkpoint_id) from_id = env.cfg.checkpoint_id.str();
    if (r.session) {
        head = co_await r.session.load(from_id);
        if (!head && from_id)
            throw thread_error(errc::checkpoint_not_found, "thread '" + r.thread_id() + "' has no checkpoint '" + *from_id + "'",
                               {r.thread_id(), *from_id});
    }
    r.fr.barriers.assign(g.joins.size(), {});
    for (std::size_t j = 0; j < g.joins.size(); ++j) r.fr.barriers[j].assign(g.joins[j].sources.size(), 0);
    if (head) {
        const bool migrated = migrate(g, *head);
        restore(g, r, *head, signature_of(head->cp) != g.signature);
        if (migrated) r.signature_differs = r.write_all = true;
        if (signature_of(head->cp) != g.signature) {
            if (!env.cfg.allow_drift) {
                co_await load_stored_shape(r);
                throw_drift(g, r);
            }
            r.signature_differs = true;
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
                co_await save(g, r, checkpoint::new_checkpoint_id(), r.step + 1, "fork", none);
                forked = true;
            }
        }
        // A call that goes on from a saved checkpoint streams it first (as LangGraph on resume).
        if (!forked && in.what != run_input::kind::values && !r.has_start_input) emit_checkpoint(g, r);
    }

    bool skip_breakpoint = false;
    if (in.what == run_input::kind::command) {
        skip_breakpoint = co_await apply_command(env, r, in);
    } else if (in.what == run_input::kind::values) {
        // A caller's JSON is read against the state it starts from (members left out keep it).
        if (in.json) in.values = read_input(g, *in.json, in.json_type, r.state.get(), errc::invalid_input, "input");
        // New input: abandons pending tasks and interrupts; runs from START.
        std::int64_t base = r.have_checkpoint ? r.step : -2;
        r.pending.clear();
        r.delta = update_box{}; // a subgraph's output is what this run writes
        frontier input_fr;
        input_fr.barriers = r.fr.barriers;
        input_fr.seen = r.fr.seen;
        r.fr = input_fr;
        r.last_writers.clear();
        const field_mask none;
        if (r.session) {
            // The input goes into the input checkpoint's record: should the process die before
            // the first step's checkpoint, continuing the thread applies it (`__start__` is next).
            r.start_input = update_json(st, in.values);
            r.has_start_input = true;
            co_await save(g, r, checkpoint::new_checkpoint_id(), base + 1, "input", none);
        } else {
            r.step = base + 1, r.have_checkpoint = true;
        }
        co_await apply_input(env, r, in.values, base + 2);
    } else if (r.has_start_input && in.what != run_input::kind::resume) {
        // The newest checkpoint is an input whose first step was never saved: apply it now.
        auto input = update_from_json(st, r.start_input, errc::corrupt_checkpoint,
                                      "thread '" + r.thread_id() + "', checkpoint " + r.cp_id + ", input");
        co_await apply_input(env, r, input, r.step + 1);
    } else if (in.what == run_input::kind::resume) {
        if (!r.have_checkpoint)
            throw thread_error(errc::thread_not_found, "cannot resume thread '" + r.thread_id() + "': it has no checkpoint",
                               {r.thread_id()});
        apply_resume(r, in.resume);
        skip_breakpoint = true;
    } else if (!r.have_checkpoint) {
        throw thread_error(errc::thread_not_found, "cannot continue thread '" + r.thread_id() + "': it has no checkpoint",
                           {r.thread_id()});
    }
    auto result = co_await loop(env, r, skip_breakpoint);
    co_await settle(g, r); // the call returns once its writes are stored
    co_return result;
}

/// Releases the session's lease. A failure to release (a full disk, a lost connection) never
/// replaces the call's own outcome: the lease then simply expires after its time to live.
boost::asio::awaitable<void> release_quietly(checkpoint_session& s) {
    try {
        co_await s.release();
    } catch (...) {
    }
}

/// Runs one call on `r`; takes and releases the thread's lease at the top level.
boost::asio::awaitable<run_outcome> run(const call_env& env, run_state& r, run_input& in) {
    if (r.session && r.thread_id().empty())
        throw thread_error(errc::invalid_input, "this graph has a checkpointer: pass run_config::thread_id to name the thread", {});
    const bool top = r.session && r.session.ns().empty();
    r.mode = env.cfg.durability;
    r.env = &env;
    if (top) co_await r.session.acquire();
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
            co_await settle(env.g, r);
        } catch (...) {
            failure = std::current_exception();
        }
    }
    co_await release_quietly(r.session);
    if (failure) std::rethrow_exception(failure);
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
    s.step = r.step;
    s.source = t.cp.source;
    s.checkpoint_id = t.cp.id;
    s.parent_checkpoint_id = t.cp.parent_id;
    s.metadata = t.cp.metadata;
    if (r.has_start_input) {
        // The whole input, as the checkpoint was written before its fields became values.
        auto& w = s.metadata[names::writes];
        if (!w.is_object()) w = boost::json::object{};
        w.as_object()[names::start_task] = r.start_input;
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
        if (auto it = r.pending.find(tk.id); it != r.pending.end())
            for (const auto& w : it->second)
                if (w.channel == names::error) ts.error = std::string(w.value.as_string());
        const auto order = listing_order(tk);
        if (tk.status == task_status::done) finished.push_back(std::move(tk));
        else waiting.insert(tk.node);
        listed.emplace_back(order, std::move(ts));
    }
    std::stable_sort(listed.begin(), listed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& l : listed) s.tasks.push_back(std::move(l.second));
    auto next = next_names(g, r.fr);
    if (r.has_start_input) next.insert(next.begin(), std::string(names::start_task)); // its input is still to apply
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
            if (f.out.writes) st.apply(r.state.get(), f.out.writes.get());
            if (!step_complete && !waiting.count(f.node)) std::erase(next, g.nodes[static_cast<std::size_t>(f.node)].name);
        }
    }
    s.values = std::move(r.state);
    s.next = std::move(next);
    return s;
}

} // namespace

update_box merge_update_from_json(const state_table& st, const boost::json::object& o, const void* current, errc code,
                                  const std::string& where) {
    update_box u(st);
    for (const auto& [k, v] : o) {
        int i = st.index_of(k);
        if (i < 0) {
            auto near = nearest_name(std::string(k), st.names);
            throw unknown_member_error(code,
                                       where + ": unknown field '" + std::string(k) + "'" +
                                           (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                                       std::string(k), st.type_name);
        }
        const auto f = static_cast<std::size_t>(i);
        if (const boost::json::value* inner = st.last_value[f] ? nullptr : overwritten_value(v)) {
            st.from_json(u.values(), f, *inner, code, where);
            st.mark_overwrite(u.get(), f);
        } else {
            st.merge_json(u.values(), current, f, v, code, where);
            st.mark(u.get(), f);
        }
    }
    return u;
}

update_box read_input(const graph_core& g, const boost::json::object& in, const std::type_info* type, const void* current,
                      errc code, const std::string& where) {
    if (g.input) {
        if (type && std::type_index(*type) != g.input->type)
            throw graph_error(errc::invalid_input,
                              where + ": the graph's input schema is " + g.input->type_name + ", not " +
                                  boost::core::demangle(type->name()),
                              {g.input->type_name});
        return g.input->read(in, current, code, where);
    }
    if (type)
        throw graph_error(errc::invalid_input,
                          where + ": the graph declares no input schema (state_graph::input_schema<I>); send an "
                                  "update<S> or the state's fields",
                          {boost::core::demangle(type->name())});
    return merge_update_from_json(*g.st, in, current, code, where);
}

boost::json::object output_of(const graph_core& g, const void* state, const std::vector<std::string>& path) {
    if (g.output) return g.output->write(state, path);
    return state_json(*g.st, state);
}


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
            r.fr.barriers.assign(g.joins.size(), {});
            for (std::size_t j = 0; j < g.joins.size(); ++j) r.fr.barriers[j].assign(g.joins[j].sources.size(), 0);
            r.step = -1;
        } else {
            const bool migrated = migrate(g, *t);
            restore(g, r, *t, signature_of(t->cp) != g.signature);
            if (migrated) r.signature_differs = r.write_all = true;
        }
        if (t && signature_of(t->cp) != g.signature) {
            if (!req->allow_drift) {
                co_await load_stored_shape(r);
                throw_drift(g, r);
            }
            r.signature_differs = true;
        }
        if (!req->as_node && r.last_writers.size() > 1) {
            std::string list;
            for (const auto& w : r.last_writers) list += (list.empty() ? "'" : ", '") + w + "'";
            throw thread_error(errc::invalid_input,
                               "update_state on thread '" + thread_id + "': the last step was written by " + list +
                                   "; pass as_node to say which node the update comes from",
                               r.last_writers);
        }
        std::string writer = req->as_node.value_or(r.last_writers.size() == 1 ? r.last_writers[0] : START);
        int from = writer == START ? -1 : g.find(writer);
        if (from == -2) {
            auto near = nearest_name(writer, g.topo.node_names());
            throw graph_error(errc::unknown_node,
                              "update_state: as_node '" + writer + "' is not a node of the graph" +
                                  (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {writer});
        }
        if (req->json)
            req->values = merge_update_from_json(st, *req->json, r.state.get(), errc::invalid_input, "update_state values");
        std::string new_id = checkpoint::new_checkpoint_id();
        const field_mask changed = req->values.fields();
        forget_saved_sizes(r, req->values.overwrites());
        track(st, r, req->values); // before apply(), which takes the values
        if (req->values) st.apply(r.state.get(), req->values.get());
        frontier next;
        next.barriers = r.fr.barriers;
        successors(g, from, r.state.get(), next);
        bool consumed = !r.fr.seen.empty() && r.fr.seen >= max_version(r.versions);
        next.seen = consumed ? new_id : r.fr.seen;
        r.fr = std::move(next);
        r.last_writers = {writer};
        co_await save(g, r, new_id, r.step + 1, "update", changed);
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
    r.session = checkpoint_session(f.saver, *f.thread_id, names::child_namespace(*f.ns, seg));
    r.session.observe(f.observer);
    r.ns_path = *f.ns_path;
    r.ns_path.push_back(seg);
    r.track_delta = true;
    if (f.run_id) r.run_id = *f.run_id;
    run_config cfg;
    cfg.thread_id = *f.thread_id;
    cfg.recursion_limit = f.recursion_limit;
    cfg.durability = f.mode; // a subgraph writes its checkpoints as its parent does
    if (f.runtime) cfg.runtime = *f.runtime; // the subgraph's nodes see the caller's dependencies
    cfg.store = f.store;                     // and the parent's store (else the subgraph's own)
    cfg.observer = f.observer;               // and report to the caller's observer
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
    static const stream_handler none;
    const call_env env{g, cfg, f.modes, f.sink ? *f.sink : none};
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
    if (r.delta) {
        const field_mask written = r.delta.fields();
        out.writes = map_fields(*g.st, r.delta.values(), &written, *parent_table);
        const field_mask overwritten = r.delta.overwrites();
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
