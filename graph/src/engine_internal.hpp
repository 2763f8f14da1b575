#pragma once
// The engine's private header (graph/src only): the types every part of the engine shares and
// the functions one part calls in another. The engine is compiled once for every state type and
// reaches the state through detail::state_table. Its parts:
//   engine_context.cpp      task_frame / context: what a node sees of its task
//   engine_frontier.cpp     the frontier (what runs next), its stored form, and routing
//   engine_values.cpp       state and updates as JSON, streamed records, a subgraph's delta
//   engine_checkpoints.cpp  restoring and saving checkpoints, migrations, durability modes
//   engine_tasks.cpp        a step's tasks, their pending writes, task and checkpoint events
//   engine_run_task.cpp     running tasks: cache, timeouts, retries, failure handlers, routing after
//   engine_loop.cpp         the superstep loop, a call's input, the lease, snapshots
//   engine.cpp              entry points: run_graph, get_state, history, update_state, subgraphs
// Types and functions of one call live in detail::engine; detail sees them as it saw the single
// file's unnamed namespace.

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
#include <iterator>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <span>
#include <unordered_map>

namespace stategraph {
namespace detail {

namespace names = checkpoint::reserved;

// ---------------------------------------------------------------------------------------------
// task_frame: one task attempt, as its node sees it through `context`.

struct resume_pass {
    std::map<std::string, boost::json::value> by_id;
};

namespace engine {
struct call_env;
struct run_state;
} // namespace engine

/// One attempt of a task, as its node sees it. What belongs to the call (its stream, store,
/// observer, runtime context, limits) and to the run (thread, namespace, checkpointer, current
/// checkpoint, run id) is read through `env` and `run`, which outlive the task; the frame holds
/// only what is the task's own. run_task sets it (`begin`); the accessors are defined in
/// engine_context.cpp.
struct task_frame {
    const engine::call_env* env = nullptr;
    const engine::run_state* run = nullptr;
    const std::string* node = nullptr;
    std::int64_t step = 0;
    int attempt = 1;
    boost::asio::any_io_executor executor;
    std::string task_id;
    std::vector<boost::json::value> resume; // answers, by interrupt call index
    std::size_t counter = 0;                // interrupt calls made so far in this attempt
    const resume_pass* child_resume = nullptr; // resume meant for a subgraph run by this task
    std::uint64_t span = 0;                    // this attempt's span (with a tracing observer)
    // side effects (ctx.task): results by key, saved as the task's pending write on the run's
    // current checkpoint
    boost::json::object effects;
    std::map<std::string, int, std::less<>> effect_calls; // calls per name in this attempt

    /// Binds the frame to its call, run and node for the step about to run.
    void begin(const engine::call_env& e, const engine::run_state& r, const std::string& node_name, std::string id,
               boost::asio::any_io_executor ex, const resume_pass* child);

    const std::string& thread_id() const noexcept;
    const std::string& ns() const noexcept;
    const std::vector<std::string>& ns_path() const noexcept;
    const std::string& run_id() const noexcept;
    const std::string& checkpoint_id() const noexcept;
    checkpoint::saver* saver() const noexcept;
    const stream_handler& sink() const noexcept;
    stream_mode modes() const noexcept;
    const runtime_context& runtime() const noexcept;
    store::base_store* store() const noexcept; // the call's store, else the graph's (a subgraph: its parent's)
    run_observer* observer() const noexcept;   // the call's observer (a subgraph: its parent's)
    int recursion_limit() const noexcept;
    durability mode() const noexcept; // the call's durability, which its subgraphs follow
};

struct context_access {
    static context make(task_frame& f) { return context(f); }
    static task_frame& frame(context& c) { return *c.f_; }
};

} // namespace detail

namespace detail::engine {

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
    /// The lease is taken by the next load(), in the same saver call (`acquire_and_get`: one
    /// transaction on SQLite), instead of by a call of its own.
    void acquire_on_load() noexcept { acquire_on_load_ = true; }
    // Plain functions handing out the saver's own awaitables: no coroutine frame of their own.
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> load(const std::optional<std::string>& id) {
        if (acquire_on_load_) {
            acquire_on_load_ = false;
            load_id_ = id;
            return acquire_and_load();
        }
        return saver_->get(thread_id_, ns_, id);
    }
    /// As load(std::nullopt) at a call's start, by a caller holding the values of checkpoint
    /// `held_id` (`saver::acquire_and_get_held`: the saver may leave them out).
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> load_held(std::string held_id) {
        held_id_ = std::move(held_id);
        if (!acquire_on_load_) return saver_->get(thread_id_, ns_, std::nullopt);
        acquire_on_load_ = false;
        return acquire_and_load_held();
    }
    /// The thread's newest checkpoint with its values, the lease already held (after a
    /// load_held() whose values the caller cannot use).
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> reload() {
        return saver_->get(thread_id_, ns_, std::nullopt);
    }
    boost::asio::awaitable<void> put(const checkpoint::checkpoint& cp) {
        if (!observer_) return saver_->put(thread_id_, ns_, cp);
        return timed(saver_->put(thread_id_, ns_, cp), observer_);
    }
    /// The checkpoints async durability queued, oldest first (timed as one write).
    boost::asio::awaitable<void> put_many(std::span<const checkpoint::checkpoint> cps) {
        if (cps.size() == 1) return put(cps.front());
        if (!observer_) return saver_->put_many(thread_id_, ns_, cps);
        return timed(saver_->put_many(thread_id_, ns_, cps), observer_);
    }
    /// The call's last writes (`end`), and the lease given back if `end.release` and this
    /// session holds it; on failure the lease stays held (release() gives it back).
    boost::asio::awaitable<void> end_call(checkpoint::saver::call_end& end) {
        end.release = end.release && leased_;
        if (end.checkpoints.empty() && end.writes.empty() && !end.release) co_return; // nothing to do
        if (!observer_ || end.checkpoints.empty()) co_await saver_->end_call(thread_id_, ns_, end);
        else co_await timed(saver_->end_call(thread_id_, ns_, end), observer_);
        if (end.release) leased_ = false;
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
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> acquire_and_load() {
        auto got = co_await saver_->acquire_and_get(thread_id_, ns_, load_id_);
        leased_ = true;
        co_return got;
    }
    boost::asio::awaitable<std::optional<checkpoint::checkpoint_tuple>> acquire_and_load_held() {
        auto got = co_await saver_->acquire_and_get_held(thread_id_, ns_, held_id_);
        leased_ = true;
        co_return got;
    }
    static boost::asio::awaitable<void> timed(boost::asio::awaitable<void> put, run_observer* o) {
        const auto start = std::chrono::steady_clock::now();
        co_await std::move(put);
        o->on_checkpoint_write(std::chrono::steady_clock::now() - start);
    }

    checkpoint::saver* saver_ = nullptr;
    run_observer* observer_ = nullptr;
    std::string thread_id_, ns_;
    bool leased_ = false;
    bool acquire_on_load_ = false;
    std::optional<std::string> load_id_; // acquire_and_load()'s checkpoint id
    std::string held_id_;                // acquire_and_load_held()'s
};



// ---------------------------------------------------------------------------------------------
// run_state: a call's state.

struct call_env;

/// What the thread's current checkpoint holds: read from it by restore(), written into the next
/// one by save() (engine_checkpoints.cpp). Everything else of a call is progress (`run_state`).
struct persisted_state {
    explicit persisted_state(const graph_core& g) : state(*g.st), versions(g.st->n) {}

    state_box state;
    std::vector<std::string> versions; // per field: the id of the checkpoint that wrote it
    std::string graph_version;         // the signature of the graph that wrote the thread
    std::string cp_id, parent_id;
    std::string cp_source; // the source of checkpoint `cp_id` ("input", "loop", ...)
    std::int64_t step = -2;
    bool have_checkpoint = false;
    frontier fr;
    std::vector<std::string> last_writers;
    std::map<std::string, std::vector<checkpoint::pending_write>> pending; // of the current checkpoint, by task id
    std::string stored_signature;
    std::vector<std::string> stored_shape;
    update_box delta; // a subgraph's writes so far, returned to its parent (with run_state::track_delta)
    /// The input of an input checkpoint: written into its metadata, and read back when that
    /// checkpoint is the newest (the process died before the first step's checkpoint), so that
    /// continuing the thread applies it. Empty (no fields) when there is none.
    boost::json::object start_input;
    bool has_start_input = false;
};

/// What this thread keeps for its next calls (record arenas, versions maps: see record_writer).
template <class T>
struct thread_cache {
    std::vector<T> items;
    ~thread_cache() { gone() = true; }
    /// This thread's cache; null once it was destroyed (at the thread's exit).
    static thread_cache* mine() {
        if (gone()) return nullptr;
        thread_local thread_cache cache;
        return &cache;
    }
    static bool& gone() {
        thread_local bool done = false; // trivially destructible: readable until the thread ends
        return done;
    }
};

/// How the next checkpoint is written: the record and its arena, append channels saved as deltas,
/// the input stored once, and async and exit durability.
struct record_writer {
    explicit record_writer(const graph_core& g) : saved_size(g.st->n, std::size_t(-1)), delta_chain(g.st->n, 0) {}

    // Per field: its size when last saved (npos: unknown) and how many saved versions in a row
    // were appended items only; an append channel is saved as a delta while this stays short.
    std::vector<std::size_t> saved_size;
    std::vector<unsigned char> delta_chain;
    // Where `out`'s JSON lives: a monotonic arena emptied at each save (no malloc/free per JSON
    // node; a record of a few hundred bytes fits its first block). Declared before `out`.
    struct record_arena {
        unsigned char first[2048];
        boost::json::monotonic_resource resource{first, sizeof first};
    };
    /// The arenas of this thread's ended calls, kept for its next calls: a call queues one
    /// record per checkpoint, each in an arena of its own, and a fresh arena is a malloc of
    /// 2 KiB (large enough to make the allocator consolidate its small free chunks). At most
    /// `max_pooled_arenas` are kept per thread (1 MiB): enough for the records that a thread's
    /// calls waiting on one group commit hold at once (64 calls of a dozen checkpoints in flight
    /// on two threads hold about 350 each; a smaller pool made them malloc again).
    static constexpr std::size_t max_pooled_arenas = 512;
    static std::unique_ptr<record_arena> take_arena() {
        if (auto* pool = thread_cache<std::unique_ptr<record_arena>>::mine(); pool && !pool->items.empty()) {
            auto a = std::move(pool->items.back());
            pool->items.pop_back();
            return a;
        }
        return std::make_unique<record_arena>();
    }
    /// Frees what `a` took beyond its first block, for the next record. The resource is made
    /// again, not released: a released `monotonic_resource` keeps the size of the block it asks
    /// for next, which doubles at each block, so an arena reused for record after record larger
    /// than its first block asked for ever larger blocks (a bad_alloc a few dozen steps into a call).
    static void empty(record_arena& a) noexcept {
        a.resource.~monotonic_resource();
        new (&a.resource) boost::json::monotonic_resource(a.first, sizeof a.first);
    }
    /// Empties `a` and gives it to this thread's pool (freed when the pool is full or gone).
    static void give_back(std::unique_ptr<record_arena> a) noexcept {
        if (!a) return;
        empty(*a);
        auto* pool = thread_cache<std::unique_ptr<record_arena>>::mine();
        if (!pool || pool->items.size() >= max_pooled_arenas) return;
        try {
            pool->items.push_back(std::move(a));
        } catch (...) {
            // not kept: freed here
        }
    }
    std::unique_ptr<record_arena> arena = take_arena();
    // The record handed to the saver, kept between saves: its versions map is updated in place.
    checkpoint::checkpoint out = record_in(*arena);
    bool signature_differs = false;
    /// The checkpoint loaded was migrated from an older state version: the next one written
    /// holds every field whole (the stored values have the old shape).
    bool write_all = false;
    /// Fields of `start_input` that the input (or fork) checkpoint `carried_id` stored as their
    /// channel values, at its own id (fields never written before; see write_record): when the
    /// first step leaves such a field equal to that value, its checkpoint names that version
    /// instead of storing the value again, so an input is stored once.
    field_mask carried;
    std::string carried_id;
    // Durability (run_config::durability). async: `queue` holds the checkpoints built and not
    // yet put, oldest first, each in its own arena (`queue_arenas`); they are put together
    // (`checkpoint_session::put_many`) beside the next step's nodes once one of them waits for
    // something, or by settle() (see run_tasks). exit: the newest checkpoint `cp_id` is kept
    // here only (`staged`) until the call ends; `unsaved` are the fields changed since the last
    // stored checkpoint, `staged_parent` that checkpoint's id.
    durability mode = durability::sync;
    std::vector<checkpoint::checkpoint> queue;
    std::vector<std::unique_ptr<record_arena>> queue_arenas;
    std::vector<std::unique_ptr<record_arena>> spare_arenas; // emptied, for the next records
    /// At most this many checkpoints wait in `queue`: one more puts them (memory stays bounded
    /// when no node ever waits).
    static constexpr std::size_t max_queued = 64;
    bool staged = false;
    const char* staged_source = "loop";
    std::string staged_parent;
    field_mask unsaved;
    /// Pending writes against the checkpoint `held_to` (a step's writes when the call stops
    /// inside it: an interrupt, a failure, a breakpoint's marker), stored by settle() after the
    /// checkpoints, with them in one `end_call` when the call ends.
    std::string held_to;
    std::vector<checkpoint::pending_write> held;
    /// The call's last settle() gives the lease back in the same `end_call` (a top-level call
    /// that prunes nothing after it).
    bool release_at_end = false;

    /// Versions maps of records the saver is done with, kept for the next records this thread
    /// queues: a record's versions map is a copy of the one before it (one node and one version
    /// string per channel: about fifty allocations on a state of 25 fields), and a map kept
    /// from an earlier record of the same graph takes the copy in place (assign_versions).
    /// At most `max_pooled_versions` are kept per thread.
    using versions_map = std::map<std::string, std::string>;
    static constexpr std::size_t max_pooled_versions = 512;
    /// A copy of `from`, in a map taken from this thread's pool when it has one: one of the same
    /// size if there is (an earlier call's record at the same point of the same graph).
    static versions_map copy_versions(const versions_map& from) {
        auto* pool = thread_cache<versions_map>::mine();
        if (!pool || pool->items.empty()) return from;
        auto& maps = pool->items;
        auto pick = maps.end() - 1;
        const auto look = maps.rbegin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(maps.size(), 16));
        for (auto i = maps.rbegin(); i != look; ++i) // the latest few: a full pool is not scanned
            if (i->size() == from.size()) {
                pick = std::prev(i.base());
                break;
            }
        versions_map to = std::move(*pick);
        if (pick != maps.end() - 1) *pick = std::move(maps.back());
        maps.pop_back();
        assign_versions(to, from);
        return to;
    }
    /// `to = from`, in place: a channel in both keeps its node and its version's buffer (the
    /// version assigned), others are erased or inserted.
    static void assign_versions(versions_map& to, const versions_map& from) {
        auto t = to.begin();
        for (const auto& [channel, version] : from) {
            while (t != to.end() && t->first < channel) t = to.erase(t);
            if (t != to.end() && t->first == channel) {
                t->second = version;
                ++t;
            } else {
                to.emplace_hint(t, channel, version);
            }
        }
        to.erase(t, to.end());
    }
    /// Gives `m` to this thread's pool (dropped when the pool is full or gone).
    static void recycle_versions(versions_map&& m) noexcept {
        if (m.empty()) return;
        auto* pool = thread_cache<versions_map>::mine();
        if (!pool || pool->items.size() >= max_pooled_versions) return;
        try {
            pool->items.push_back(std::move(m));
        } catch (...) {
            // not kept
        }
    }
    /// The saver is done with the records `cps`, built in `arenas` (both taken from the queue):
    /// their versions maps go to the pool, the arenas are emptied for the next records, and the
    /// two vectors' room goes back to the queue when nothing queued meanwhile.
    void take_back(std::vector<checkpoint::checkpoint>& cps, std::vector<std::unique_ptr<record_arena>>& arenas) {
        for (auto& c : cps) recycle_versions(std::move(c.versions));
        cps.clear(); // before the arenas are emptied
        for (auto& a : arenas) {
            empty(*a);
            spare_arenas.push_back(std::move(a));
        }
        arenas.clear();
        if (queue.empty()) queue.swap(cps);
        if (queue_arenas.empty()) queue_arenas.swap(arenas);
    }

    /// Async durability: `out` joins the queue, and a new record (in a spare arena) takes its
    /// place, holding the same versions.
    void enqueue() {
        std::unique_ptr<record_arena> next;
        if (spare_arenas.empty()) {
            next = take_arena();
        } else {
            next = std::move(spare_arenas.back());
            spare_arenas.pop_back();
        }
        checkpoint::checkpoint fresh = record_in(*next);
        fresh.versions = copy_versions(out.versions);
        if (queue.capacity() == 0) { // a call queues a dozen or two: room made once, or an earlier call's
            queue = take_queue();
            queue_arenas.reserve(queue.capacity());
        }
        queue.push_back(std::move(out));
        queue_arenas.push_back(std::move(arena));
        out = std::move(fresh);
        arena = std::move(next);
    }

    /// Room for a call's queue: an earlier call's on this thread (its records gone), else made.
    /// A queue of records is a large allocation (some 10 KiB for 32), which makes the allocator
    /// consolidate its small free chunks when made anew at each call.
    static constexpr std::size_t max_pooled_queues = 8;
    static std::vector<checkpoint::checkpoint> take_queue() {
        if (auto* pool = thread_cache<std::vector<checkpoint::checkpoint>>::mine(); pool && !pool->items.empty()) {
            auto q = std::move(pool->items.back());
            pool->items.pop_back();
            return q;
        }
        std::vector<checkpoint::checkpoint> q;
        q.reserve(16);
        return q;
    }
    static void give_back_queue(std::vector<checkpoint::checkpoint>&& q) noexcept {
        q.clear();
        if (q.capacity() == 0) return;
        auto* pool = thread_cache<std::vector<checkpoint::checkpoint>>::mine();
        if (!pool || pool->items.size() >= max_pooled_queues) return;
        try {
            pool->items.push_back(std::move(q));
        } catch (...) {
            // not kept
        }
    }

    record_writer(const record_writer&) = delete;
    record_writer& operator=(const record_writer&) = delete;
    /// The arenas go back to this thread's pool, after the records built in them are gone.
    ~record_writer() {
        recycle_versions(std::move(out.versions));
        out = checkpoint::checkpoint{};
        for (auto& c : queue) recycle_versions(std::move(c.versions));
        give_back_queue(std::move(queue)); // cleared first: before the arenas its records live in
        give_back(std::move(arena));
        for (auto& a : queue_arenas) give_back(std::move(a));
        for (auto& a : spare_arenas) give_back(std::move(a));
    }

    static checkpoint::checkpoint record_in(record_arena& a) {
        const boost::json::storage_ptr sp(&a.resource);
        return checkpoint::checkpoint{.values = boost::json::object(sp),
                                      .frontier = boost::json::value(sp),
                                      .metadata = boost::json::object(sp)};
    }
};

/// A call's state: what its checkpoint holds (`saved`), how it writes the next one (`writer`),
/// and its progress.
struct run_state {
    explicit run_state(const graph_core& g) : saved(g), writer(g) {}

    persisted_state saved;
    record_writer writer;
    /// The strand a step's tasks run on when several run at once (or beside a put), made once.
    std::optional<boost::asio::strand<boost::asio::any_io_executor>> tasks_strand;
    std::vector<std::string> path; // the nodes this call ran, in order (superstep, then name)
    checkpoint_session session;
    std::vector<std::string> ns_path;
    bool track_delta = false; // a subgraph's run: its writes are kept in `saved.delta`
    std::map<std::string, boost::json::value> resume_answers; // pending interrupt id -> answer
    /// Fields a Command given with a resume changed before the resumed step ran: saved with
    /// that step's checkpoint.
    field_mask command_changed;
    std::string run_id; // this call's id (ctx.run_id()), shared with its subgraphs
    const call_env* env = nullptr; // the call streaming this run's checkpoints (set by run())
    // Tracing (run_observer::traces): the call's observer when it traces, else null; this run's
    // span, its parent (a subgraph's run: the node attempt running it), the step being run, and
    // the run span's W3C context, saved in the metadata of the top-level checkpoints it writes.
    run_observer* tracer = nullptr;
    std::uint64_t span = 0, parent_span = 0, step_span = 0;
    std::string traceparent;
    /// The `values` stream's last event (the state as JSON), kept between steps so that a step
    /// encodes again only the fields it changed; valid only while `values_cached` (emit_values).
    boost::json::object values_cache;
    bool values_cached = false;

    const std::string& thread_id() const noexcept { return session.thread_id(); }
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

/// Streams an event of the step being run (`r.saved.step + 1`), or of the step `step` when given.
inline void emit(const call_env& env, const run_state& r, stream_mode mode, std::string node, boost::json::value data,
          bool cached = false, bool interrupt = false, std::optional<std::int64_t> step = std::nullopt) {
    if (!env.wants(mode)) return;
    stream_event e;
    e.mode = mode;
    e.ns = r.ns_path;
    e.step = step ? *step : r.saved.step + 1;
    e.node = std::move(node);
    e.data = std::move(data);
    e.cached = cached;
    e.interrupt = interrupt;
    env.on_event(e);
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


// engine_frontier.cpp
std::string max_version(const std::vector<std::string>& versions);
send restored_send(const graph_core& g, int id, const boost::json::value& arg);
boost::json::object send_json(const send& s);
boost::json::value frontier_json(const graph_core& g, const frontier& f, boost::json::storage_ptr sp);
[[noreturn]] void throw_stored(const std::string& thread, const std::string& checkpoint_id, const std::string& field,
                               const std::string& problem);
frontier frontier_from(const graph_core& g, const boost::json::value& v, const std::string& thread,
                       const std::string& checkpoint_id, bool drifted);
void add_target(const graph_core& g, const std::string& name, frontier& f, const std::string& from);
void check_send(const graph_core& g, const send& s, const std::string& from);
void successors(const graph_core& g, int from, const void* state, frontier& f);
std::vector<std::string> next_names(const graph_core& g, const frontier& f);

// engine_values.cpp
void emit_record(const call_env& env, const run_state& r, stream_mode mode, const char* type, std::int64_t step,
                 const std::string& node, boost::json::object payload);
boost::json::object update_json(const state_table& st, const update_box& u);
void read_update_field(const state_table& st, update_box& u, std::size_t i, const boost::json::value& v, errc code,
                       const std::string& where);
boost::json::object values_json(const graph_core& g, const run_state& r);
/// Streams a `values` event. `changed`: the fields changed since the last one (a loop step);
/// null: encode the whole state again.
void emit_values(const call_env& env, run_state& r, const field_mask* changed);
void track(const state_table& st, run_state& r, const update_box& u);
void forget_saved_sizes(run_state& r, const field_mask& overwritten);

// engine_checkpoints.cpp
const std::string& signature_of(const checkpoint::checkpoint& cp);
int state_version_of(const checkpoint::checkpoint& cp);
bool migrate(const graph_core& g, checkpoint::checkpoint_tuple& t, bool reading = false);
void restore(const graph_core& g, run_state& r, const checkpoint::checkpoint_tuple& t, bool drifted,
             state_box* held = nullptr);
boost::asio::awaitable<void> write_record(const graph_core& g, run_state& r, const std::string& id, std::int64_t step,
                                          const char* source, const field_mask& changed);
boost::asio::awaitable<void> put_queued(run_state& r);
/// Makes everything this call wrote so far durable (see engine_checkpoints.cpp); `last`: the
/// call's end, which gives the lease back in the same `end_call` when `writer.release_at_end`.
boost::asio::awaitable<void> settle(const graph_core& g, run_state& r, bool last = false);
/// Exit durability: writes the staged checkpoint, if any.
boost::asio::awaitable<void> settle_staged(const graph_core& g, run_state& r);
boost::asio::awaitable<void> save(const graph_core& g, run_state& r, std::string id, std::int64_t step, const char* source,
                                  const field_mask& changed_now);
boost::asio::awaitable<void> load_stored_shape(run_state& r);
[[noreturn]] void throw_drift(const graph_core& g, const run_state& r);

// engine_tasks.cpp
const boost::json::object& encoded_writes(const graph_core& g, task& t);
std::vector<checkpoint::pending_write> task_writes(const graph_core& g, task& t);
bool reload_task(const graph_core& g, run_state& r, task& t);
std::vector<task> make_tasks(const graph_core& g, const run_state& r);
std::pair<int, int> listing_order(const task& t);
void emit_checkpoint(const graph_core& g, const run_state& r);
bool is_resume_mismatch(const task& t);
bool retryable(const retry_policy& p, std::exception_ptr e);
boost::asio::awaitable<void> call_with_timeout(const node_rt& rt, task& t, context& ctx, boost::asio::any_io_executor ex);
void emit_task_start(const call_env& env, const run_state& r, const task& t);
void emit_task_result(const call_env& env, const run_state& r, task& t);

// engine_run_task.cpp
std::string cache_ns(const graph_core& g, const std::string& node);
boost::asio::awaitable<void> run_tasks(const call_env& env, run_state& r, std::vector<task*> todo, bool durable);
[[noreturn]] void throw_failure(const graph_core& g, const task& t);
void check_conflicts(const graph_core& g, const std::vector<task>& tasks);
field_mask settle_overwrites(const graph_core& g, std::vector<task>& tasks);
/// The call's outcome at `status`. `copy_values` false: `values` left empty, for the caller to
/// move the state in once nothing reads it any more (a finished call, after settle()).
run_outcome make_result(const graph_core& g, const run_state& r, run_status status, std::vector<interrupt_info> interrupts,
                        bool copy_values = true);
void route_after(const graph_core& g, task& t, const void* view, frontier& next);
void apply_resume(run_state& r, const resume_input& res);
boost::asio::awaitable<void> stop_at_breakpoint(const call_env& env, run_state& r, bool after);
[[noreturn]] void throw_recursion_limit(const graph_core& g, const run_state& r, int limit);
/// The writes of a step's tasks not saved as they finished, held (hold_writes) for settle(),
/// when the call stops inside the step (an interrupt or a failure), so that continuing the
/// thread does not run again the tasks that finished.
void save_held_writes(const graph_core& g, run_state& r, std::vector<task>& tasks);
/// Holds `ws`, against the current checkpoint, for settle() to store after the checkpoints.
void hold_writes(run_state& r, std::vector<checkpoint::pending_write> ws);
void apply_and_route(const call_env& env, run_state& r, task& t, frontier& next);

// engine_context.cpp (tracing)
/// The run's span opens: continuing `head`'s trace unless the input is new (`starts_trace`).
void begin_run_span(const call_env& env, run_state& r, const checkpoint::checkpoint* head, bool starts_trace);
void end_run_span(run_state& r, std::exception_ptr failure, const run_outcome* result);
std::uint64_t begin_step_span(run_state& r, std::size_t tasks);
void end_step_span(run_state& r, const char* status);
void begin_node_span(run_state& r, task& t, const std::string& node, int attempt, bool cached);
void end_node_span(run_state& r, task& t, std::exception_ptr error);
/// An exception as a span's `error.type` (an error code's name, else the exception's type) and message.
std::pair<std::string, std::string> describe_failure(std::exception_ptr e);

// engine_loop.cpp
boost::asio::awaitable<run_outcome> loop(const call_env& env, run_state& r, bool skip_breakpoint);
boost::asio::awaitable<void> release_quietly(checkpoint_session& s);
boost::asio::awaitable<run_outcome> run(const call_env& env, run_state& r, run_input& in);
checkpoint::saver* require_saver(const graph_core& g);
snapshot_data snapshot(const graph_core& g, const checkpoint::checkpoint_tuple& t, bool apply_pending);

} // namespace detail::engine

namespace detail {
/// The states of threads a graph's calls left paused at an interrupt (`graph_core::held`), each
/// with the checkpoint it is the state of: the next call on the thread passes that id to
/// `saver::acquire_and_get_held`, and when the saver leaves the values out (nothing was written
/// to the thread since), restore() takes this state instead of converting stored values. An
/// entry is taken out by the call that uses it (a call that pauses again puts its own back).
/// Bounded: the least recently kept goes first.
struct held_states {
    struct entry {
        std::string checkpoint_id;
        state_box state;
        std::uint64_t kept = 0;
    };
    static constexpr std::size_t max_threads = 32;

    std::optional<entry> take(const std::string& thread) {
        std::lock_guard lock(m);
        auto it = by_thread.find(thread);
        if (it == by_thread.end()) return std::nullopt;
        std::optional<entry> e(std::move(it->second));
        by_thread.erase(it);
        return e;
    }
    void keep(const std::string& thread, std::string checkpoint_id, state_box&& state) {
        std::lock_guard lock(m);
        if (by_thread.size() >= max_threads && !by_thread.count(thread)) {
            auto oldest = by_thread.begin();
            for (auto i = by_thread.begin(); i != by_thread.end(); ++i)
                if (i->second.kept < oldest->second.kept) oldest = i;
            by_thread.erase(oldest);
        }
        by_thread.insert_or_assign(thread, entry{std::move(checkpoint_id), std::move(state), ++clock});
    }
    std::mutex m;
    std::unordered_map<std::string, entry> by_thread;
    std::uint64_t clock = 0;
};
} // namespace detail

namespace detail {
// Every part of the engine reads detail::engine's names unqualified, as the single file's unnamed
// namespace was read.
using namespace engine;
} // namespace detail

} // namespace stategraph
