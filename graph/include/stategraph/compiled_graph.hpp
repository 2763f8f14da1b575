#pragma once
/// @file compiled_graph.hpp
/// @brief `compiled_graph<S>`: runs a graph in LangGraph's supersteps on Asio coroutines, with
/// a checkpoint after every node (pending writes) and at every step's end.

#include <stategraph/command.hpp>
#include <stategraph/context.hpp>
#include <stategraph/detail/state_ops.hpp>
#include <stategraph/error.hpp>
#include <stategraph/node.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/stream.hpp>
#include <stategraph/topology.hpp>

#include <stategraph/checkpoint/saver.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace stategraph {

template <class S>
class state_graph;
template <class S>
class compiled_graph;

/// @brief How one call runs.
struct run_config {
    std::string thread_id;                   ///< required with a checkpointer
    std::optional<std::string> checkpoint_id; ///< start from this checkpoint (replay / fork)
    int recursion_limit = 25;                ///< at most this many supersteps per call
    stream_mode modes = stream_mode::none;   ///< what to stream to `on_event`
    stream_handler on_event;                 ///< receives streamed events
    bool allow_drift = false;                ///< resume a thread written by a different graph shape
    std::size_t keep_last = 0;               ///< retention: after the call, keep only the newest N checkpoints (0 = all)
};

/// @brief How a call ended.
enum class run_status { done, interrupted };

/// @brief What `invoke` returns.
template <class S>
struct run_result {
    run_status status = run_status::done;
    S values{};
    std::vector<interrupt_info> interrupts; ///< empty for a static breakpoint
    std::string checkpoint_id;
    std::int64_t step = 0;
    std::vector<std::string> next;          ///< nodes that run when the thread continues
    bool interrupted() const { return status == run_status::interrupted; }
};

/// @brief A task of the step a checkpoint is waiting on (see `state_snapshot`).
struct task_snapshot {
    std::string id;
    std::string name;
    std::vector<interrupt_info> interrupts;
    std::optional<std::string> error;
    std::optional<boost::json::object> result; ///< writes of a task that already finished
};

/// @brief What `get_state` and `get_state_history` return.
template <class S>
struct state_snapshot {
    S values{};
    std::vector<std::string> next;
    std::vector<task_snapshot> tasks;
    std::int64_t step = -1;
    std::string source;
    std::string checkpoint_id;
    std::string parent_checkpoint_id;
    boost::json::object metadata;
};

/// @brief Options of `compile()`.
struct compile_options {
    std::shared_ptr<checkpoint::saver> checkpointer;
    std::vector<std::string> interrupt_before;
    std::vector<std::string> interrupt_after;
    std::string name;
};

namespace detail {

inline const std::string k_goto = "__goto__", k_send = "__send__", k_interrupt = "__interrupt__",
                         k_resume = "__resume__", k_error = "__error__", k_breakpoint = "__breakpoint__",
                         k_graph = "__graph__";

template <class S>
struct graph_impl {
    using ops = state_ops<S>;

    struct node_rt {
        std::string name;
        node_call<S> call;
        bool deferred = false;
        bool send_only = false;
        std::type_index input_type = typeid(S);
        std::shared_ptr<const void> (*arg_from_json)(const boost::json::value&) = nullptr;
        boost::json::value (*arg_to_json)(const void*) = nullptr;
        std::optional<retry_policy> retry;
        std::vector<int> next;       // plain edges (-1 = END)
        std::vector<int> joins;      // joins this node is a source of
        std::vector<int> branches;   // conditional edges leaving this node
        bool before = false, after = false;
        int rank = 0;                // position in name order (write order)
    };
    struct branch_rt {
        int from = -1; // -1 = START
        std::function<void(const S&, std::vector<std::string>&, std::vector<send>&)> route;
    };
    struct join_rt {
        std::vector<int> sources;
        int target = -1;
    };

    topology topo;
    std::vector<std::string> shape;
    std::string signature;
    std::vector<node_rt> nodes;
    std::unordered_map<std::string, int> index;
    std::vector<int> start_next;
    std::vector<int> start_branches;
    std::vector<branch_rt> branches;
    std::vector<join_rt> joins;
    std::shared_ptr<checkpoint::saver> saver;
    typename ops::red_t reds = state_reducers<S>();

    int find(const std::string& name) const {
        auto it = index.find(name);
        return it == index.end() ? -2 : it->second;
    }
};

/// What runs next: triggered nodes, Sends, deferred nodes and the state of join barriers.
struct frontier {
    std::vector<int> pull;
    std::vector<send> push;
    std::vector<int> deferred;
    std::vector<std::vector<char>> barriers;
    std::string seen; // breakpoint marker: versions newer than this re-arm static breakpoints
};

inline std::string max_version(const std::vector<std::string>& versions) {
    std::string m;
    for (const auto& v : versions)
        if (v > m) m = v;
    return m;
}

/// Subgraph fields shared with the parent, by name: copied through JSON.
template <class From, class To>
update<To> map_fields(const From& from, const update<From>* only) {
    update<To> out;
    const auto& names = field_names<From>();
    for (std::size_t i = 0; i < field_count_v<From>; ++i) {
        if (only && !only->has_index(i)) continue;
        int j = state_ops<To>::index_of(names[i]);
        if (j < 0) continue;
        state_ops<To>::from_json(out.values(), static_cast<std::size_t>(j), state_ops<From>::to_json(from, i),
                                 errc::invalid_input, "subgraph field mapping");
        out.mark(static_cast<std::size_t>(j));
    }
    return out;
}
} // namespace detail

/// @brief A compiled graph over state `S`: cheap to copy (a shared handle), safe to run from
/// many coroutines and threads at once (each call has its own state).
template <class S>
class compiled_graph {
    using impl_t = detail::graph_impl<S>;
    using ops = detail::state_ops<S>;
    using node_rt = typename impl_t::node_rt;

public:
    using state_type = S;
    /// @brief Input of a call: new values (reduced into the thread's state), a resume, or nothing.
    using input = std::variant<continue_input, update<S>, resume_input>;

    compiled_graph() = default;
    explicit compiled_graph(std::shared_ptr<const impl_t> impl) : impl_(std::move(impl)) {}

    /// @brief Runs the graph until it ends or interrupts.
    boost::asio::awaitable<run_result<S>> invoke(input in, run_config cfg = {}) const {
        auto impl = impl_;
        run_state r;
        r.thread_id = cfg.thread_id;
        co_return co_await run(*impl, r, std::move(in), cfg);
    }

    /// @brief Runs the graph, calling `on_event` for the chosen stream modes.
    boost::asio::awaitable<run_result<S>> stream(input in, run_config cfg, stream_mode modes, stream_handler on_event) const {
        cfg.modes = modes;
        cfg.on_event = std::move(on_event);
        co_return co_await invoke(std::move(in), std::move(cfg));
    }

    /// @brief The thread's state at its latest checkpoint (or `checkpoint_id`). On the latest
    /// checkpoint, the writes of tasks that already finished in the unfinished step are applied.
    boost::asio::awaitable<state_snapshot<S>> get_state(std::string thread_id,
                                                        std::optional<std::string> checkpoint_id = std::nullopt) const {
        auto impl = impl_;
        auto* saver = require_saver(*impl);
        auto t = co_await saver->get(thread_id, "", checkpoint_id);
        if (!t) {
            if (checkpoint_id)
                throw thread_error(errc::checkpoint_not_found,
                                   "thread '" + thread_id + "' has no checkpoint '" + *checkpoint_id + "'", {thread_id});
            throw thread_error(errc::thread_not_found, "thread '" + thread_id + "' has no checkpoint", {thread_id});
        }
        co_return snapshot(*impl, *t, !checkpoint_id.has_value());
    }

    /// @brief The thread's checkpoints, newest first.
    boost::asio::awaitable<std::vector<state_snapshot<S>>> get_state_history(std::string thread_id,
                                                                             checkpoint::list_options options = {}) const {
        auto impl = impl_;
        auto* saver = require_saver(*impl);
        auto list = co_await saver->list(thread_id, "", options);
        std::vector<state_snapshot<S>> out;
        for (auto& t : list) out.push_back(snapshot(*impl, t, false));
        co_return out;
    }

    /// @brief Writes `values` into the thread's state as if node `as_node` had returned them
    /// (default: the node that wrote last), in a new checkpoint with source "update".
    /// The next nodes are the successors of `as_node`. Returns the new checkpoint id.
    /// @throws thread_error(invalid_input) without `as_node` when several nodes wrote last;
    /// drift_error when the thread was written by another graph shape, unless `allow_drift`.
    boost::asio::awaitable<std::string> update_state(std::string thread_id, update<S> values,
                                                     std::optional<std::string> as_node = std::nullopt,
                                                     std::optional<std::string> checkpoint_id = std::nullopt,
                                                     bool allow_drift = false) const {
        auto impl = impl_;
        auto* saver = require_saver(*impl);
        run_state r;
        r.thread_id = thread_id;
        r.saver = saver;
        co_await saver->acquire(thread_id);
        std::exception_ptr failure;
        std::string id;
        try {
            auto t = co_await saver->get(thread_id, "", checkpoint_id);
            if (!t && checkpoint_id)
                throw thread_error(errc::checkpoint_not_found,
                                   "thread '" + thread_id + "' has no checkpoint '" + *checkpoint_id + "'",
                                   {thread_id, *checkpoint_id});
            if (!t) throw thread_error(errc::thread_not_found, "thread '" + thread_id + "' has no checkpoint", {thread_id});
            restore(*impl, r, *t);
            if (signature_of(t->cp) != impl->signature) {
                if (!allow_drift) throw_drift(*impl, r);
                r.signature_differs = true;
            }
            if (!as_node && r.last_writers.size() > 1) {
                std::string list;
                for (const auto& w : r.last_writers) list += (list.empty() ? "'" : ", '") + w + "'";
                throw thread_error(errc::invalid_input,
                                   "update_state on thread '" + thread_id + "': the last step was written by " + list +
                                       "; pass as_node to say which node the update comes from",
                                   r.last_writers);
            }
            std::string writer = as_node.value_or(r.last_writers.size() == 1 ? r.last_writers[0] : START);
            int from = writer == START ? -1 : impl->find(writer);
            if (from == -2) {
                auto near = nearest_name(writer, impl->topo.node_names());
                throw graph_error(errc::unknown_node,
                                  "update_state: as_node '" + writer + "' is not a node of the graph" +
                                      (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                                  {writer});
            }
            std::string new_id = checkpoint::new_checkpoint_id();
            std::bitset<update<S>::size> changed = values.fields();
            ops::apply(r.state, values, impl->reds);
            detail::frontier next;
            next.barriers.resize(impl->joins.size());
            next.barriers = r.fr.barriers;
            successors(*impl, from, r.state, next);
            bool consumed = !r.fr.seen.empty() && r.fr.seen >= detail::max_version(r.versions);
            next.seen = consumed ? new_id : r.fr.seen;
            r.fr = std::move(next);
            r.last_writers = {writer};
            co_await save(*impl, r, new_id, r.step + 1, "update", changed);
            id = new_id;
        } catch (...) {
            failure = std::current_exception();
        }
        co_await saver->release(thread_id);
        if (failure) std::rethrow_exception(failure);
        co_return id;
    }

    /// @brief The graph's shape (for drawing and validation).
    const topology& shape() const { return impl_->topo; }
    /// @brief Graphviz DOT of the graph.
    void write_dot(std::ostream& os, const dot_options& o = {}) const { stategraph::write_dot(os, impl_->topo, o); }
    /// @brief Mermaid flowchart of the graph.
    void write_mermaid(std::ostream& os) const { stategraph::write_mermaid(os, impl_->topo); }
    /// @brief The checkpointer the graph was compiled with (may be null).
    const std::shared_ptr<checkpoint::saver>& checkpointer() const { return impl_->saver; }
    /// @brief The graph signature stamped on every checkpoint.
    const std::string& signature() const { return impl_->signature; }

    /// @brief This graph as a node of a graph over state `P` (see `state_graph::add_node`).
    /// The subgraph keeps its own checkpoints in the parent's checkpointer, in the namespace
    /// "<node>:<task id>", so an interrupt inside it resumes from the parent's thread.
    template <class P>
    detail::node_call<P> as_node() const {
        detail::node_call<P> call;
        auto impl = impl_;
        call.async = [impl](const void* in, context& ctx) -> boost::asio::awaitable<node_output<P>> {
            const P& parent = *static_cast<const P*>(in);
            run_state r;
            r.thread_id = ctx.thread_id();
            std::string seg = ctx.node() + ":" + ctx.scratch().task_id;
            r.ns = ctx.ns().empty() ? seg : ctx.ns() + "|" + seg;
            r.ns_path = ctx.ns_path();
            r.ns_path.push_back(seg);
            r.track_delta = true;
            r.saver = ctx.saver();
            run_config cfg;
            cfg.thread_id = r.thread_id;
            cfg.modes = ctx.modes();
            if (ctx.sink()) cfg.on_event = *ctx.sink();
            cfg.recursion_limit = ctx.recursion_limit();
            cfg.allow_drift = true;
            // The namespace belongs to this task: a checkpoint there that still has work
            // (next nodes, pending writes or a breakpoint) is an earlier attempt of this task
            // (interrupted, stopped at a breakpoint, failed or killed): continue it, so that
            // subgraph nodes that finished do not run again.
            bool unfinished = false;
            if (!ctx.scratch().child_resume && r.saver) {
                auto head = co_await r.saver->get(r.thread_id, r.ns, std::nullopt);
                if (head) {
                    unfinished = !head->writes.empty();
                    if (const auto* f = head->cp.frontier.if_object())
                        for (const char* k : {"pull", "push", "deferred"})
                            if (const auto* a = f->if_contains(k); a && a->is_array() && !a->get_array().empty())
                                unfinished = true;
                }
            }
            input child_input;
            if (ctx.scratch().child_resume) child_input = resume_map(ctx.scratch().child_resume->by_id);
            else if (unfinished) child_input = continue_run;
            else child_input = detail::map_fields<P, S>(parent, nullptr);
            auto res = co_await run(*impl, r, std::move(child_input), cfg);
            if (res.interrupted()) throw interrupt_signal{std::move(res.interrupts)};
            node_output<P> out;
            out.writes = detail::map_fields<S, P>(r.delta.values(), &r.delta);
            co_return out;
        };
        return call;
    }

    // ------------------------------------------------------------------------------------
    // Engine internals (public for subgraph nodes of other state types).
    struct run_state {
        S state{};
        std::vector<std::string> versions = std::vector<std::string>(ops::n);
        // Per field: its size when last saved (npos: unknown) and how many saved versions in a row
        // were appended items only; an append channel is saved as a delta while this stays short.
        std::vector<std::size_t> saved_size = std::vector<std::size_t>(ops::n, std::size_t(-1));
        std::vector<unsigned char> delta_chain = std::vector<unsigned char>(ops::n, 0);
        std::string graph_version;
        // Where `out`'s JSON lives: a monotonic arena emptied at each save (no malloc/free per
        // JSON node; a record of a few hundred bytes fits its first block). Declared before
        // `out`, so that it outlives it.
        struct record_arena {
            unsigned char first[2048];
            boost::json::monotonic_resource resource{first, sizeof first};
        };
        std::unique_ptr<record_arena> arena = std::make_unique<record_arena>();
        // The record handed to the saver, kept between saves: its versions map is updated in place
        // (only a channel's first version allocates), values/extends/metadata are refilled. Its
        // JSON members live in the arena from the start (a JSON container never changes storage).
        checkpoint::checkpoint out = record_in(*arena);
        std::string cp_id, parent_id;
        std::int64_t step = -2;
        detail::frontier fr;
        std::vector<std::string> last_writers;
        std::string thread_id, ns;
        std::vector<std::string> ns_path;
        bool have_checkpoint = false;
        bool signature_differs = false;
        // pending writes of the current checkpoint, by task id
        std::map<std::string, std::vector<checkpoint::pending_write>> pending;
        std::string stored_signature;
        std::vector<std::string> stored_shape;
        // subgraph support
        bool track_delta = false;
        update<S> delta;
        std::map<std::string, boost::json::value> resume_answers; // pending interrupt id -> answer
        checkpoint::saver* saver = nullptr;
    };

    /// Runs one call on `r` (which carries thread id and namespace).
    static boost::asio::awaitable<run_result<S>> run(const impl_t& impl, run_state& r, input in, const run_config& cfg) {
        if (!r.saver) r.saver = impl.saver.get();
        auto* saver = r.saver;
        if (saver && r.thread_id.empty())
            throw thread_error(errc::invalid_input,
                               "this graph has a checkpointer: pass run_config::thread_id to name the thread", {});
        bool leased = false;
        if (saver && r.ns.empty()) {
            co_await saver->acquire(r.thread_id);
            leased = true;
        }
        std::exception_ptr failure;
        run_result<S> result;
        try {
            result = co_await run_locked(impl, r, std::move(in), cfg);
            if (leased && cfg.keep_last > 0) co_await saver->prune(r.thread_id, cfg.keep_last);
        } catch (...) {
            failure = std::current_exception();
        }
        if (leased) co_await saver->release(r.thread_id);
        if (failure) std::rethrow_exception(failure);
        co_return result;
    }

private:
    std::shared_ptr<const impl_t> impl_;

    static checkpoint::saver* require_saver(const impl_t& impl) {
        if (!impl.saver)
            throw thread_error(errc::no_checkpointer, "this graph was compiled without a checkpointer: "
                                                      "pass compile_options::checkpointer to keep threads", {});
        return impl.saver.get();
    }

    // -- tasks -------------------------------------------------------------------------------
    enum class task_status { pending, done, interrupted, failed };
    struct task {
        int node = 0;
        std::string id;
        int push_index = -1;
        const void* input = nullptr;
        std::shared_ptr<const void> holder;
        task_status status = task_status::pending;
        bool cached = false;
        node_output<S> out;
        std::vector<interrupt_info> interrupts;
        std::exception_ptr error;
        detail::task_scratch scratch;
        detail::resume_pass child_resume;
        bool has_child_resume = false;
    };

    static std::string task_id(const std::string& cp_id, const std::string& node, int push_index) {
        std::string id = cp_id + ":" + node;
        if (push_index >= 0) id += ":" + std::to_string(push_index);
        return id;
    }

    static void emit(const run_config& cfg, const run_state& r, stream_mode mode, std::string node, boost::json::value data,
                     bool cached = false, bool interrupt = false) {
        if (!cfg.on_event || !has_mode(cfg.modes, mode)) return;
        stream_event e;
        e.mode = mode;
        e.ns = r.ns_path;
        e.step = r.step + 1;
        e.node = std::move(node);
        e.data = std::move(data);
        e.cached = cached;
        e.interrupt = interrupt;
        cfg.on_event(e);
    }

    static bool wants(const run_config& cfg, stream_mode m) { return cfg.on_event && has_mode(cfg.modes, m); }

    // -- routing -----------------------------------------------------------------------------
    static void add_target(const impl_t& impl, const std::string& name, detail::frontier& f, const std::string& from) {
        if (name == END) return;
        int id = impl.find(name);
        if (id < 0) {
            auto near = nearest_name(name, impl.topo.node_names());
            throw graph_error(errc::invalid_route,
                              "'" + from + "' routed to '" + name + "', which is not a node of the graph" +
                                  (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {from, name});
        }
        if (impl.nodes[id].deferred) {
            if (std::find(f.deferred.begin(), f.deferred.end(), id) == f.deferred.end()) f.deferred.push_back(id);
        } else if (std::find(f.pull.begin(), f.pull.end(), id) == f.pull.end()) {
            f.pull.push_back(id);
        }
    }

    static void trigger(const impl_t& impl, int id, detail::frontier& f) {
        if (id < 0) return;
        add_target(impl, impl.nodes[id].name, f, "");
    }

    /// The static successors of node `from` (-1 = START) and its conditional edges on `state`.
    static void successors(const impl_t& impl, int from, const S& state, detail::frontier& f) {
        const auto& next = from < 0 ? impl.start_next : impl.nodes[from].next;
        for (int n : next) trigger(impl, n, f);
        if (from >= 0) {
            for (int j : impl.nodes[from].joins) {
                auto& seen = f.barriers[j];
                const auto& join = impl.joins[j];
                for (std::size_t k = 0; k < join.sources.size(); ++k)
                    if (join.sources[k] == from) seen[k] = 1;
                if (std::all_of(seen.begin(), seen.end(), [](char c) { return c != 0; })) {
                    std::fill(seen.begin(), seen.end(), 0);
                    trigger(impl, join.target, f);
                }
            }
        }
        const auto& brs = from < 0 ? impl.start_branches : impl.nodes[from].branches;
        for (int b : brs) {
            std::vector<std::string> targets;
            std::vector<send> sends;
            impl.branches[b].route(state, targets, sends);
            const std::string& src = from < 0 ? START : impl.nodes[from].name;
            for (const auto& t : targets) add_target(impl, t, f, src);
            for (auto& s : sends) {
                check_send(impl, s, src);
                f.push.push_back(std::move(s));
            }
        }
    }

    static void check_send(const impl_t& impl, const send& s, const std::string& from) {
        int id = impl.find(s.node());
        if (id < 0) add_target(impl, s.node(), *std::make_unique<detail::frontier>(), from); // throws invalid_route
        if (impl.nodes[id].input_type != s.type())
            throw graph_error(errc::invalid_input,
                              "'" + from + "' sent a payload of type " + boost::core::demangle(s.type().name()) +
                                  " to node '" + s.node() + "', which reads " +
                                  boost::core::demangle(impl.nodes[id].input_type.name()),
                              {from, s.node()});
    }

    // -- checkpoints -------------------------------------------------------------------------
    // Empty lists are left out: frontier_from (and every other reader) treats a missing key as empty.
    static boost::json::value frontier_json(const impl_t& impl, const detail::frontier& f,
                                            boost::json::storage_ptr sp = {}) {
        boost::json::object o(sp);
        o.reserve(2); // one table allocation, enough for the usual pull list (and `seen`)
        if (!f.pull.empty()) {
            boost::json::array pull(sp);
            pull.reserve(f.pull.size());
            for (int n : f.pull) pull.push_back(boost::json::string(impl.nodes[n].name, sp));
            o["pull"] = std::move(pull);
        }
        if (!f.push.empty()) {
            boost::json::array push(sp);
            push.reserve(f.push.size());
            for (const auto& s : f.push) push.push_back(boost::json::object{{"node", s.node()}, {"arg", s.arg_json()}});
            o["push"] = std::move(push);
        }
        if (!f.deferred.empty()) {
            boost::json::array deferred(sp);
            deferred.reserve(f.deferred.size());
            for (int n : f.deferred) deferred.push_back(boost::json::string(impl.nodes[n].name, sp));
            o["deferred"] = std::move(deferred);
        }
        if (!f.barriers.empty()) {
            boost::json::array barriers(sp);
            barriers.reserve(f.barriers.size());
            for (const auto& b : f.barriers) {
                boost::json::array a(sp);
                a.reserve(b.size());
                for (char c : b) a.push_back(c != 0);
                barriers.push_back(std::move(a));
            }
            o["barriers"] = std::move(barriers);
        }
        if (!f.seen.empty()) o["seen"] = f.seen;
        return o;
    }

    static detail::frontier frontier_from(const impl_t& impl, const boost::json::value& v, const std::string& thread,
                                          bool allow_drift) {
        detail::frontier f;
        f.barriers.resize(impl.joins.size());
        for (std::size_t j = 0; j < impl.joins.size(); ++j) f.barriers[j].assign(impl.joins[j].sources.size(), 0);
        const auto* o = v.if_object();
        if (!o) return f;
        auto node_of = [&](const boost::json::value& n) {
            int id = n.is_string() ? impl.find(std::string(n.as_string())) : -2;
            if (id < 0 && !allow_drift)
                throw drift_error(errc::graph_drift,
                                  "thread '" + thread + "' waits on node '" +
                                      (n.is_string() ? std::string(n.as_string()) : std::string("?")) +
                                      "', which this graph does not have",
                                  {thread});
            return id;
        };
        if (auto* a = o->if_contains("pull"))
            for (const auto& n : a->as_array())
                if (int id = node_of(n); id >= 0) f.pull.push_back(id);
        if (auto* a = o->if_contains("deferred"))
            for (const auto& n : a->as_array())
                if (int id = node_of(n); id >= 0) f.deferred.push_back(id);
        if (auto* a = o->if_contains("push"))
            for (const auto& p : a->as_array()) {
                int id = node_of(p.at("node"));
                if (id < 0) continue;
                const auto& rt = impl.nodes[id];
                f.push.push_back(send::restored(rt.name, rt.arg_from_json(p.at("arg")), rt.input_type, rt.arg_to_json));
            }
        if (auto* a = o->if_contains("barriers"); a && a->as_array().size() == f.barriers.size())
            for (std::size_t j = 0; j < f.barriers.size(); ++j) {
                const auto& arr = a->as_array()[j].as_array();
                for (std::size_t k = 0; k < arr.size() && k < f.barriers[j].size(); ++k) f.barriers[j][k] = arr[k].as_bool();
            }
        if (auto* s = o->if_contains("seen")) f.seen = std::string(s->as_string());
        return f;
    }

    /// Restores `r` from a stored checkpoint.
    static void restore(const impl_t& impl, run_state& r, const checkpoint::checkpoint_tuple& t, bool allow_drift = true) {
        const auto& cp = t.cp;
        try {
            r.state = S{};
            std::fill(r.versions.begin(), r.versions.end(), std::string());
            std::fill(r.saved_size.begin(), r.saved_size.end(), std::size_t(-1)); // next save: whole values
            std::fill(r.delta_chain.begin(), r.delta_chain.end(), 0);
            for (const auto& [channel, version] : cp.versions) {
                if (channel == detail::k_graph) {
                    r.graph_version = version;
                    continue;
                }
                int i = ops::index_of(channel);
                if (i < 0) {
                    if (!allow_drift)
                        throw drift_error(errc::graph_drift,
                                          "thread '" + r.thread_id + "' has state field '" + channel +
                                              "', which this graph's state does not have",
                                          {r.thread_id, channel});
                    continue;
                }
                r.versions[i] = version;
                if (const auto* v = cp.values.if_contains(channel))
                    ops::from_json(r.state, static_cast<std::size_t>(i), *v, errc::corrupt_checkpoint,
                                   "thread '" + r.thread_id + "', checkpoint " + cp.id);
            }
            if (const auto* g = cp.values.if_contains(detail::k_graph); g && g->is_array()) {
                r.stored_shape.clear();
                for (const auto& l : g->as_array()) r.stored_shape.push_back(std::string(l.as_string()));
            }
            r.fr = frontier_from(impl, cp.frontier, r.thread_id, allow_drift);
            if (const auto* d = cp.metadata.if_contains("delta"); d && d->is_object() && r.track_delta)
                r.delta = ops::update_from_json(d->as_object(), errc::corrupt_checkpoint, "thread '" + r.thread_id + "'");
            if (const auto* w = cp.metadata.if_contains("writers"); w && w->is_array()) {
                r.last_writers.clear();
                for (const auto& n : w->as_array()) r.last_writers.push_back(std::string(n.as_string()));
            }
        } catch (const graph_error&) {
            throw;
        } catch (const std::exception& e) {
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "thread '" + r.thread_id + "': checkpoint " + cp.id + " cannot be read: " + e.what(),
                                   {r.thread_id});
        }
        r.cp_id = cp.id;
        r.parent_id = cp.parent_id;
        r.step = cp.step;
        r.stored_signature = signature_of(cp);
        r.out.versions.clear();
        for (std::size_t i = 0; i < ops::n; ++i)
            if (!r.versions[i].empty()) r.out.versions.emplace(version_keys()[i], r.versions[i]);
        if (!r.graph_version.empty()) r.out.versions.emplace(detail::k_graph, r.graph_version);
        r.have_checkpoint = true;
        r.pending.clear();
        for (const auto& w : t.writes) {
            if (w.channel == detail::k_breakpoint) {
                r.fr.seen = std::string(w.value.as_string());
                continue;
            }
            r.pending[w.task_id].push_back(w);
        }
    }

    /// The signature of the graph that wrote `cp`: its own field, or the version of its graph shape
    /// (the shape is versioned by signature, so records need not repeat it).
    static const std::string& signature_of(const checkpoint::checkpoint& cp) {
        if (!cp.signature.empty()) return cp.signature;
        auto it = cp.versions.find(detail::k_graph);
        return it == cp.versions.end() ? cp.signature : it->second;
    }

    /// Longest run of delta-only versions of an append channel before a whole value is saved again
    /// (bounds the links a read follows).
    static constexpr unsigned char max_delta_chain = 32;

    static boost::asio::awaitable<void> save(const impl_t& impl, run_state& r, std::string id, std::int64_t step,
                                             const char* source, const std::bitset<update<S>::size>& changed) {
        r.parent_id = r.have_checkpoint ? r.cp_id : std::string();
        r.cp_id = id;
        r.step = step;
        r.pending.clear();
        if (!r.saver) {
            for (std::size_t i = 0; i < ops::n; ++i)
                if (changed.test(i)) r.versions[i] = id;
            r.have_checkpoint = true;
            co_return;
        }
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
            boost::json::value frontier(sp);
            cp.values.swap(values);
            cp.metadata.swap(metadata);
            cp.frontier.swap(frontier);
        }
        r.arena->resource.release();
        cp.extends.clear();
        cp.signature.clear();
        const auto& names = field_names<S>();
        const auto& keys = version_keys();
        cp.values.reserve(changed.count() + 1); // sized once: no rehash per inserted key
        cp.metadata.reserve(4);
        for (std::size_t i = 0; i < ops::n; ++i) {
            if (!changed.test(i)) continue;
            // An append channel that only grew since its last saved version is saved as the
            // items appended since then, extending that version.
            const std::size_t size = ops::sequence_size(r.state, i);
            if (size != std::size_t(-1) && r.saved_size[i] != std::size_t(-1) && size >= r.saved_size[i] &&
                !r.versions[i].empty() && r.delta_chain[i] < max_delta_chain) {
                cp.values[names[i]] = ops::tail_json(r.state, i, r.saved_size[i], sp);
                cp.extends.emplace(keys[i], r.versions[i]);
                ++r.delta_chain[i];
            } else {
                cp.values[names[i]] = ops::to_json(r.state, i, sp);
                r.delta_chain[i] = 0;
            }
            r.saved_size[i] = size;
            r.versions[i] = id;
            if (auto v = cp.versions.find(keys[i]); v != cp.versions.end()) v->second = id;
            else cp.versions.emplace(keys[i], id);
        }
        if (r.graph_version.empty() || r.signature_differs) {
            // The shape is versioned by the graph's signature: savers keep one copy per graph.
            boost::json::array lines(sp);
            lines.reserve(impl.shape.size());
            for (const auto& l : impl.shape) lines.push_back(boost::json::string(l, sp));
            cp.values[detail::k_graph] = std::move(lines);
            r.graph_version = impl.signature;
            r.signature_differs = false;
        }
        cp.versions.insert_or_assign(detail::k_graph, r.graph_version);
        if (r.graph_version != impl.signature) cp.signature = impl.signature; // a thread from before: say it
        cp.frontier = frontier_json(impl, r.fr, sp);
        boost::json::array writers(sp);
        writers.reserve(r.last_writers.size());
        for (const auto& w : r.last_writers) writers.push_back(boost::json::string(w, sp));
        cp.metadata["writers"] = std::move(writers);
        cp.metadata["step"] = step;
        if (r.track_delta) cp.metadata["delta"] = ops::update_json(r.delta);
        cp.metadata["source"] = source;
        r.have_checkpoint = true;
        co_await r.saver->put(r.thread_id, r.ns, cp);
    }

    /// An empty record whose JSON members allocate from `a`.
    template <class Arena>
    static checkpoint::checkpoint record_in(Arena& a) {
        const boost::json::storage_ptr sp(&a.resource);
        return checkpoint::checkpoint{.values = boost::json::object(sp),
                                      .frontier = boost::json::value(sp),
                                      .metadata = boost::json::object(sp)};
    }

    /// The field names as strings, to look versions up without building a key each time.
    static const std::vector<std::string>& version_keys() {
        static const std::vector<std::string> keys = [] {
            const auto& names = field_names<S>();
            return std::vector<std::string>(names.begin(), names.end());
        }();
        return keys;
    }

    static std::vector<checkpoint::pending_write> task_writes(const impl_t& impl, const task& t) {
        std::vector<checkpoint::pending_write> ws;
        const std::string& name = impl.nodes[t.node].name;
        auto add = [&](const std::string& channel, boost::json::value v) {
            ws.push_back({t.id, name, channel, std::move(v)});
        };
        if (t.status == task_status::done) {
            const auto& names = field_names<S>();
            for (std::size_t i = 0; i < ops::n; ++i)
                if (t.out.writes.has_index(i)) add(std::string(names[i]), ops::to_json(t.out.writes.values(), i));
            boost::json::array go;
            for (const auto& g : t.out.targets) go.push_back(boost::json::string(g));
            add(detail::k_goto, std::move(go));
            boost::json::array sends;
            for (const auto& s : t.out.sends) sends.push_back(boost::json::object{{"node", s.node()}, {"arg", s.arg_json()}});
            add(detail::k_send, std::move(sends));
        } else if (t.status == task_status::interrupted) {
            boost::json::array list;
            for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"node", i.node}, {"value", i.value}});
            add(detail::k_interrupt, std::move(list));
            boost::json::array resumes(t.scratch.resume.begin(), t.scratch.resume.end());
            add(detail::k_resume, std::move(resumes));
        } else if (t.status == task_status::failed) {
            std::string msg = "unknown error";
            try {
                std::rethrow_exception(t.error);
            } catch (const std::exception& e) {
                msg = e.what();
            } catch (...) {
            }
            add(detail::k_error, boost::json::string(msg));
        }
        return ws;
    }

    /// Rebuilds a task's outcome from its saved writes; returns false when it must run.
    static bool reload_task(const impl_t& impl, run_state& r, task& t) {
        auto it = r.pending.find(t.id);
        if (it == r.pending.end()) return false;
        bool done = false;
        for (const auto& w : it->second) {
            if (w.channel == detail::k_interrupt) {
                t.status = task_status::interrupted;
                for (const auto& i : w.value.as_array())
                    t.interrupts.push_back({std::string(i.at("id").as_string()), std::string(i.at("node").as_string()), i.at("value")});
            } else if (w.channel == detail::k_resume) {
                t.scratch.resume.assign(w.value.as_array().begin(), w.value.as_array().end());
            } else if (w.channel == detail::k_error) {
                // a failed task runs again
            } else if (w.channel == detail::k_goto) {
                done = true;
                for (const auto& g : w.value.as_array()) t.out.targets.push_back(std::string(g.as_string()));
            } else if (w.channel == detail::k_send) {
                done = true;
                for (const auto& p : w.value.as_array()) {
                    int id = impl.find(std::string(p.at("node").as_string()));
                    if (id < 0) continue;
                    const auto& rt = impl.nodes[id];
                    t.out.sends.push_back(send::restored(rt.name, rt.arg_from_json(p.at("arg")), rt.input_type, rt.arg_to_json));
                }
            } else {
                int i = ops::index_of(w.channel);
                if (i < 0) continue;
                ops::from_json(t.out.writes.values(), static_cast<std::size_t>(i), w.value, errc::corrupt_checkpoint,
                               "thread '" + r.thread_id + "', pending write of task '" + w.task_name + "'");
                t.out.writes.mark(static_cast<std::size_t>(i));
                done = true;
            }
        }
        if (done) {
            // A task that finished after a resume keeps its (answered) interrupts for get_state.
            t.status = task_status::done;
            t.cached = true;
            return true;
        }
        return false;
    }

    std::vector<std::string> static next_names(const impl_t& impl, const detail::frontier& f) {
        std::vector<std::string> out;
        for (int n : f.pull) out.push_back(impl.nodes[n].name);
        for (const auto& s : f.push) out.push_back(s.node());
        if (f.pull.empty() && f.push.empty())
            for (int n : f.deferred) out.push_back(impl.nodes[n].name);
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
        return out;
    }

    /// The tasks of the next step: triggered nodes in name order, then Sends in order; the
    /// deferred nodes only when nothing else is pending.
    static std::vector<task> make_tasks(const impl_t& impl, run_state& r) {
        std::vector<task> tasks;
        auto& f = r.fr;
        std::vector<int> pull = f.pull;
        bool use_deferred = pull.empty() && f.push.empty();
        if (use_deferred) pull = f.deferred;
        std::sort(pull.begin(), pull.end(), [&](int a, int b) { return impl.nodes[a].rank < impl.nodes[b].rank; });
        tasks.reserve(pull.size() + f.push.size());
        for (int n : pull) {
            task t;
            t.node = n;
            t.id = task_id(r.cp_id, impl.nodes[n].name, -1);
            t.input = &r.state;
            tasks.push_back(std::move(t));
        }
        if (!use_deferred) {
            int k = 0;
            for (const auto& s : f.push) {
                task t;
                t.node = impl.find(s.node());
                t.id = task_id(r.cp_id, s.node(), k++);
                t.push_index = k - 1;
                t.input = s.arg();
                tasks.push_back(std::move(t));
            }
        }
        return tasks;
    }

    // -- running tasks -----------------------------------------------------------------------
    static boost::asio::awaitable<void> run_task(const impl_t& impl, run_state& r, task& t, const run_config& cfg,
                                                 bool durable) {
        const node_rt& rt = impl.nodes[t.node];
        const int attempts = rt.retry ? std::max(1, rt.retry->max_attempts) : 1;
        auto ex = co_await boost::asio::this_coro::executor;
        t.scratch.task_id = t.id;
        t.scratch.child_resume = t.has_child_resume ? &t.child_resume : nullptr;
        for (int attempt = 1;; ++attempt) {
            t.scratch.counter = 0;
            if (wants(cfg, stream_mode::debug))
                emit(cfg, r, stream_mode::debug, rt.name,
                     boost::json::object{{"type", "task"}, {"id", t.id}, {"attempt", attempt}});
            context ctx({rt.name, r.step + 1, &r.thread_id, &r.ns, &r.ns_path, attempt, ex, &t.scratch, &cfg.on_event,
                         cfg.modes, r.saver, cfg.recursion_limit});
            std::exception_ptr error;
            try {
                if (rt.call.sync) t.out = rt.call.sync(t.input, ctx);
                else if (rt.retry && rt.retry->timeout.count() > 0) t.out = co_await call_with_timeout(rt, t, ctx, ex);
                else t.out = co_await rt.call.async(t.input, ctx);
                t.status = task_status::done;
            } catch (interrupt_signal& sig) {
                t.status = task_status::interrupted;
                t.interrupts = std::move(sig.interrupts);
            } catch (...) {
                error = std::current_exception();
            }
            if (error) {
                bool retry = attempt < attempts && retryable(*rt.retry, error);
                if (wants(cfg, stream_mode::debug))
                    emit(cfg, r, stream_mode::debug, rt.name,
                         boost::json::object{{"type", "task_result"}, {"id", t.id}, {"attempt", attempt}, {"ok", false},
                                             {"retry", retry}});
                if (retry) {
                    boost::asio::steady_timer timer(ex, rt.retry->delay_before(attempt + 1));
                    co_await timer.async_wait(boost::asio::use_awaitable);
                    continue;
                }
                t.status = task_status::failed;
                t.error = error;
            } else if (wants(cfg, stream_mode::debug)) {
                emit(cfg, r, stream_mode::debug, rt.name,
                     boost::json::object{{"type", "task_result"}, {"id", t.id}, {"attempt", attempt}, {"ok", true}});
            }
            break;
        }
        if (t.status == task_status::done && wants(cfg, stream_mode::updates))
            emit(cfg, r, stream_mode::updates, rt.name, ops::update_json(t.out.writes));
        if (durable && r.saver && !is_resume_mismatch(t)) {
            auto ws = task_writes(impl, t);
            co_await r.saver->put_writes(r.thread_id, r.ns, r.cp_id, std::move(ws));
        }
    }

    /// Runs a coroutine node against its retry policy's per-attempt time limit; the node is
    /// cancelled (Asio cancellation) when the limit passes first.
    static boost::asio::awaitable<node_output<S>> call_with_timeout(const node_rt& rt, task& t, context& ctx,
                                                                   boost::asio::any_io_executor ex) {
        // Not `work || timer`: awaitable_operators' || waits for one *success*, so a node that
        // throws (an error, or the interrupt_signal of interrupt()) would only be seen when the
        // timer fires, as a timeout. wait_for_one() ends with whichever finishes first.
        boost::asio::steady_timer timer(ex, rt.retry->timeout);
        auto work = rt.call.async(t.input, ctx);
        auto wait = timer.async_wait(boost::asio::use_awaitable);
        auto [order, work_error, out, wait_error] =
            co_await boost::asio::experimental::make_parallel_group(
                boost::asio::co_spawn(ex, std::move(work), boost::asio::deferred),
                boost::asio::co_spawn(ex, std::move(wait), boost::asio::deferred))
                .async_wait(boost::asio::experimental::wait_for_one(), boost::asio::use_awaitable);
        (void)wait_error;
        if (order[0] == 0) {
            if (work_error) std::rethrow_exception(work_error);
            co_return std::move(out);
        }
        throw graph_error(errc::node_timeout,
                          "node '" + rt.name + "' attempt " + std::to_string(ctx.attempt()) + " ran past its time limit of " +
                              std::to_string(rt.retry->timeout.count()) + " ms",
                          {rt.name});
    }

    static bool is_resume_mismatch(const task& t) {
        if (t.status != task_status::failed) return false;
        try {
            std::rethrow_exception(t.error);
        } catch (const thread_error& e) {
            return e.kind() == errc::resume_type_mismatch;
        } catch (...) {
        }
        return false;
    }

    static bool retryable(const retry_policy& p, std::exception_ptr e) {
        try {
            std::rethrow_exception(e);
        } catch (const thread_error&) {
            return false; // resume problems are not transient
        } catch (...) {
        }
        return !p.retry_on || p.retry_on(e);
    }

    static boost::asio::awaitable<void> run_tasks(const impl_t& impl, run_state& r, std::vector<task*> todo,
                                                  const run_config& cfg, bool durable) {
        if (todo.size() == 1) {
            co_await run_task(impl, r, *todo[0], cfg, durable);
            co_return;
        }
        auto ex = co_await boost::asio::this_coro::executor;
        auto strand = boost::asio::make_strand(ex);
        using op_t = decltype(boost::asio::co_spawn(strand, std::declval<boost::asio::awaitable<void>>(), boost::asio::deferred));
        std::vector<op_t> ops_list;
        ops_list.reserve(todo.size());
        for (task* t : todo) {
            auto aw = run_task(impl, r, *t, cfg, durable);
            ops_list.push_back(boost::asio::co_spawn(strand, std::move(aw), boost::asio::deferred));
        }
        auto group = boost::asio::experimental::make_parallel_group(std::move(ops_list));
        auto [order, errors] = co_await group.async_wait(boost::asio::experimental::wait_for_all(), boost::asio::use_awaitable);
        (void)order;
        for (auto& e : errors)
            if (e) std::rethrow_exception(e); // a storage failure inside put_writes
    }

    [[noreturn]] static void throw_failure(const impl_t& impl, const task& t) {
        const std::string& name = impl.nodes[t.node].name;
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

    // -- the loop ----------------------------------------------------------------------------
    static boost::asio::awaitable<run_result<S>> run_locked(const impl_t& impl, run_state& r, input in,
                                                            const run_config& cfg) {
        auto* saver = r.saver;
        std::optional<checkpoint::checkpoint_tuple> head;
        if (saver) {
            head = co_await saver->get(r.thread_id, r.ns, cfg.checkpoint_id);
            if (!head && cfg.checkpoint_id)
                throw thread_error(errc::checkpoint_not_found,
                                   "thread '" + r.thread_id + "' has no checkpoint '" + *cfg.checkpoint_id + "'",
                                   {r.thread_id, *cfg.checkpoint_id});
        }
        r.fr.barriers.assign(impl.joins.size(), {});
        for (std::size_t j = 0; j < impl.joins.size(); ++j) r.fr.barriers[j].assign(impl.joins[j].sources.size(), 0);
        if (head) {
            if (signature_of(head->cp) != impl.signature) {
                restore(impl, r, *head, true);
                if (!cfg.allow_drift) throw_drift(impl, r);
                r.signature_differs = true;
            } else {
                restore(impl, r, *head, true);
            }
        }
        if (cfg.checkpoint_id && std::holds_alternative<continue_input>(in)) {
            // Replaying from an older checkpoint: its pending writes belong to the old branch.
        }

        bool skip_breakpoint = false;
        if (auto* u = std::get_if<update<S>>(&in)) {
            // New input: abandons pending tasks and interrupts; runs from START.
            std::int64_t base = r.have_checkpoint ? r.step : -2;
            r.pending.clear();
            r.delta = update<S>{}; // a subgraph's output is what this run writes
            detail::frontier input_fr;
            input_fr.barriers = r.fr.barriers;
            input_fr.seen = r.fr.seen;
            r.fr = input_fr;
            r.last_writers.clear();
            std::bitset<update<S>::size> none;
            if (saver) co_await save(impl, r, checkpoint::new_checkpoint_id(), base + 1, "input", none);
            else r.step = base + 1, r.have_checkpoint = true;
            std::bitset<update<S>::size> changed = u->fields();
            ops::apply(r.state, *u, impl.reds);
            detail::frontier next;
            next.barriers = r.fr.barriers;
            next.seen = r.fr.seen;
            successors(impl, -1, r.state, next);
            r.fr = std::move(next);
            r.last_writers = {START};
            if (saver) co_await save(impl, r, checkpoint::new_checkpoint_id(), base + 2, "loop", changed);
            else r.step = base + 2;
            if (wants(cfg, stream_mode::values)) {
                auto v = ops::state_json(r.state);
                stream_event e{stream_mode::values, r.ns_path, r.step, "", std::move(v)};
                cfg.on_event(e);
            }
        } else if (auto* res = std::get_if<resume_input>(&in)) {
            if (!r.have_checkpoint)
                throw thread_error(errc::thread_not_found,
                                   "cannot resume thread '" + r.thread_id + "': it has no checkpoint", {r.thread_id});
            apply_resume(impl, r, *res);
            skip_breakpoint = true;
        } else {
            if (!r.have_checkpoint)
                throw thread_error(errc::thread_not_found,
                                   "cannot continue thread '" + r.thread_id + "': it has no checkpoint", {r.thread_id});
        }
        co_return co_await loop(impl, r, cfg, skip_breakpoint);
    }

    [[noreturn]] static void throw_drift(const impl_t& impl, const run_state& r) {
        std::vector<std::string> removed, added;
        std::set_difference(r.stored_shape.begin(), r.stored_shape.end(), impl.shape.begin(), impl.shape.end(),
                            std::back_inserter(removed));
        std::set_difference(impl.shape.begin(), impl.shape.end(), r.stored_shape.begin(), r.stored_shape.end(),
                            std::back_inserter(added));
        std::string msg = "thread '" + r.thread_id + "' was written by a different graph (signature " +
                          r.stored_signature + ", this graph " + impl.signature + ")";
        for (const auto& l : removed) msg += "\n  - " + l;
        for (const auto& l : added) msg += "\n  + " + l;
        msg += "\npass run_config::allow_drift = true to resume it anyway";
        std::vector<std::string> names{r.thread_id};
        for (const auto& l : removed) names.push_back("-" + l);
        for (const auto& l : added) names.push_back("+" + l);
        throw drift_error(errc::graph_drift, msg, names);
    }

    /// Matches a resume to the pending interrupts; validates ids.
    static void apply_resume(const impl_t& impl, run_state& r, const resume_input& res) {
        (void)impl;
        std::map<std::string, std::string> owner; // interrupt id -> task id
        for (const auto& [tid, ws] : r.pending) {
            // A task that finished after an earlier resume has nothing pending any more.
            bool finished = std::any_of(ws.begin(), ws.end(), [](const checkpoint::pending_write& w) {
                return w.channel == detail::k_goto || w.channel == detail::k_send;
            });
            if (finished) continue;
            for (const auto& w : ws)
                if (w.channel == detail::k_interrupt)
                    for (const auto& i : w.value.as_array()) owner[std::string(i.at("id").as_string())] = tid;
        }
        if (owner.empty())
            throw thread_error(errc::nothing_to_resume,
                               "thread '" + r.thread_id + "' has no pending interrupt to resume", {r.thread_id});
        if (res.is_map) {
            for (const auto& [id, v] : res.by_id)
                if (!owner.count(id)) {
                    std::string known;
                    for (const auto& [k, t] : owner) known += (known.empty() ? "" : ", ") + k;
                    throw thread_error(errc::unknown_interrupt_id,
                                       "thread '" + r.thread_id + "' has no pending interrupt '" + id +
                                           "' (pending: " + known + ")",
                                       {r.thread_id, id});
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

    static boost::asio::awaitable<run_result<S>> loop(const impl_t& impl, run_state& r, const run_config& cfg,
                                                      bool skip_breakpoint) {
        int supersteps = 0;
        for (;;) {
            auto tasks = make_tasks(impl, r);
            if (tasks.empty()) break;
            // Saved outcomes of this step (a resume or a restart after a crash).
            bool any_pending = !r.pending.empty();
            for (auto& t : tasks) {
                if (any_pending) reload_task(impl, r, t);
                if (t.status == task_status::interrupted) {
                    // Answers for this task's interrupts: by position for the node itself, by
                    // id for a subgraph run by the task (it resumes from its own checkpoint).
                    for (const auto& i : t.interrupts) {
                        auto it = r.resume_answers.find(i.id);
                        if (it == r.resume_answers.end()) continue;
                        t.scratch.resume.push_back(it->second);
                        t.child_resume.by_id[i.id] = it->second;
                        t.has_child_resume = true;
                    }
                    t.status = task_status::pending;
                    t.interrupts.clear();
                }
            }
            r.resume_answers.clear();
            if (supersteps >= cfg.recursion_limit) {
                throw recursion_limit_error(errc::recursion_limit,
                                            "recursion limit of " + std::to_string(cfg.recursion_limit) +
                                                " supersteps reached without hitting END (next: " +
                                                [&] {
                                                    std::string s;
                                                    for (const auto& n : next_names(impl, r.fr)) s += (s.empty() ? "" : ", ") + n;
                                                    return s;
                                                }() +
                                                "); raise run_config::recursion_limit if the graph is meant to loop longer",
                                            {});
            }
            // Static breakpoint before these nodes.
            if (!skip_breakpoint && r.saver) {
                bool hit = false;
                for (const auto& t : tasks) hit = hit || impl.nodes[t.node].before;
                std::string newest = detail::max_version(r.versions);
                if (hit && newest > r.fr.seen) {
                    r.fr.seen = r.cp_id;
                    std::vector<checkpoint::pending_write> w{{"__breakpoint__", "__breakpoint__", detail::k_breakpoint,
                                                              boost::json::string(r.cp_id)}};
                    co_await r.saver->put_writes(r.thread_id, r.ns, r.cp_id, std::move(w));
                    emit(cfg, r, stream_mode::updates, detail::k_interrupt, boost::json::array{}, false, true);
                    co_return make_result(impl, r, run_status::interrupted, {});
                }
            }
            skip_breakpoint = false;

            // Run what has no saved outcome; cached outcomes are replayed as update events.
            std::vector<task*> todo;
            for (auto& t : tasks) {
                if (t.status == task_status::pending) todo.push_back(&t);
                else if (t.cached && wants(cfg, stream_mode::updates))
                    emit(cfg, r, stream_mode::updates, impl.nodes[t.node].name, ops::update_json(t.out.writes), true);
            }
            const bool durable = tasks.size() > 1;
            if (!todo.empty()) co_await run_tasks(impl, r, std::move(todo), cfg, durable);

            for (const auto& t : tasks)
                if (t.status == task_status::failed) {
                    if (!durable && r.saver && !is_resume_mismatch(t)) {
                        auto ws = task_writes(impl, t);
                        co_await r.saver->put_writes(r.thread_id, r.ns, r.cp_id, std::move(ws));
                    }
                    throw_failure(impl, t);
                }
            std::vector<interrupt_info> interrupts;
            bool any_interrupted = false; // a subgraph stopped at a breakpoint interrupts without payload
            for (const auto& t : tasks)
                if (t.status == task_status::interrupted) {
                    any_interrupted = true;
                    interrupts.insert(interrupts.end(), t.interrupts.begin(), t.interrupts.end());
                }
            if (any_interrupted) {
                if (!durable && r.saver)
                    for (const auto& t : tasks)
                        if (t.status == task_status::interrupted) {
                            auto ws = task_writes(impl, t);
                            co_await r.saver->put_writes(r.thread_id, r.ns, r.cp_id, std::move(ws));
                        }
                // One __interrupt__ event per interrupted task, as LangGraph.
                if (wants(cfg, stream_mode::updates))
                    for (const auto& t : tasks) {
                        if (t.status != task_status::interrupted) continue;
                        boost::json::array list;
                        for (const auto& i : t.interrupts) list.push_back(boost::json::object{{"id", i.id}, {"value", i.value}});
                        emit(cfg, r, stream_mode::updates, detail::k_interrupt, std::move(list), false, true);
                    }
                auto res = make_result(impl, r, run_status::interrupted, std::move(interrupts));
                // The result includes the writes of the step's finished tasks (as get_state).
                for (const auto& t : tasks)
                    if (t.status == task_status::done) {
                        ops::apply_copy(res.values, t.out.writes, impl.reds);
                        std::erase(res.next, impl.nodes[t.node].name);
                    }
                co_return res;
            }

            // Apply the step's writes together: triggered nodes by name, then Sends in order.
            std::bitset<update<S>::size> changed;
            check_conflicts(impl, tasks);
            if (tasks.size() == 1) {
                auto& t = tasks[0];
                changed = t.out.writes.fields();
                if (r.track_delta) ops::apply_copy(r.delta.values(), t.out.writes, impl.reds);
                for (std::size_t i = 0; i < ops::n && r.track_delta; ++i)
                    if (changed.test(i)) r.delta.mark(i);
                ops::apply(r.state, t.out.writes, impl.reds);
            } else {
                for (auto& t : tasks) {
                    changed |= t.out.writes.fields();
                    if (r.track_delta) {
                        ops::apply_copy(r.delta.values(), t.out.writes, impl.reds);
                        for (std::size_t i = 0; i < ops::n; ++i)
                            if (t.out.writes.has_index(i)) r.delta.mark(i);
                    }
                }
            }
            // Next frontier: static edges and routers of each finished task. A router reads the
            // state as of the step's start plus its own node's writes (as LangGraph).
            detail::frontier next;
            next.barriers = r.fr.barriers;
            next.seen = r.fr.seen;
            bool deferred_ran = r.fr.pull.empty() && r.fr.push.empty();
            if (!deferred_ran) next.deferred = r.fr.deferred;
            std::vector<std::string> writers;
            if (tasks.size() == 1) {
                auto& t = tasks[0];
                route_after(impl, t, r.state, next);
                writers.push_back(impl.nodes[t.node].name);
            } else {
                for (auto& t : tasks) {
                    const node_rt& rt = impl.nodes[t.node];
                    if (!rt.branches.empty()) {
                        S local = r.state;
                        ops::apply_copy(local, t.out.writes, impl.reds);
                        route_after(impl, t, local, next);
                    } else {
                        route_after(impl, t, r.state, next);
                    }
                    writers.push_back(rt.name);
                }
                for (auto& t : tasks) ops::apply(r.state, t.out.writes, impl.reds);
            }
            if (deferred_ran) {
                // Deferred nodes that ran leave the deferred set unless triggered again.
            }
            r.fr = std::move(next);
            r.last_writers = std::move(writers);
            if (r.saver) {
                co_await save(impl, r, checkpoint::new_checkpoint_id(), r.step + 1, "loop", changed);
            } else {
                ++r.step;
            }
            if (wants(cfg, stream_mode::values)) {
                stream_event e{stream_mode::values, r.ns_path, r.step, "", ops::state_json(r.state)};
                cfg.on_event(e);
            }
            ++supersteps;
            // Static breakpoint after these nodes.
            if (r.saver) {
                bool hit = false;
                for (const auto& t : tasks) hit = hit || impl.nodes[t.node].after;
                if (hit && detail::max_version(r.versions) > r.fr.seen) {
                    r.fr.seen = r.cp_id;
                    std::vector<checkpoint::pending_write> w{{"__breakpoint__", "__breakpoint__", detail::k_breakpoint,
                                                              boost::json::string(r.cp_id)}};
                    co_await r.saver->put_writes(r.thread_id, r.ns, r.cp_id, std::move(w));
                    emit(cfg, r, stream_mode::updates, detail::k_interrupt, boost::json::array{}, false, true);
                    co_return make_result(impl, r, run_status::interrupted, {});
                }
            }
        }
        co_return make_result(impl, r, run_status::done, {});
    }

    static void route_after(const impl_t& impl, task& t, const S& view, detail::frontier& next) {
        successors(impl, t.node, view, next);
        const std::string& name = impl.nodes[t.node].name;
        for (const auto& g : t.out.targets) add_target(impl, g, next, name);
        for (auto& s : t.out.sends) {
            check_send(impl, s, name);
            next.push.push_back(std::move(s));
        }
    }

    static void check_conflicts(const impl_t& impl, const std::vector<task>& tasks) {
        if (tasks.size() < 2) return;
        for (std::size_t i = 0; i < ops::n; ++i) {
            if (!ops::last_value(i)) continue;
            std::vector<std::string> writers;
            for (const auto& t : tasks)
                if (t.out.writes.has_index(i)) writers.push_back(impl.nodes[t.node].name);
            if (writers.size() > 1) {
                std::string field(field_names<S>()[i]);
                std::string list;
                for (const auto& w : writers) list += (list.empty() ? "'" : ", '") + w + "'";
                writers.insert(writers.begin(), field);
                throw invalid_update_error(errc::invalid_concurrent_update,
                                           "field '" + field + "' keeps the last value but was written by " + list +
                                               " in the same step; give it a reducer or let one node write it",
                                           writers);
            }
        }
    }

    static run_result<S> make_result(const impl_t& impl, const run_state& r, run_status status,
                                     std::vector<interrupt_info> interrupts) {
        run_result<S> res;
        res.status = status;
        res.values = r.state;
        res.interrupts = std::move(interrupts);
        res.checkpoint_id = r.cp_id;
        res.step = r.step;
        res.next = next_names(impl, r.fr);
        return res;
    }

    static state_snapshot<S> snapshot(const impl_t& impl, const checkpoint::checkpoint_tuple& t, bool apply_pending) {
        run_state r;
        r.thread_id = t.thread_id;
        restore(impl, r, t, true);
        state_snapshot<S> s;
        s.step = r.step;
        s.source = t.cp.source;
        s.checkpoint_id = t.cp.id;
        s.parent_checkpoint_id = t.cp.parent_id;
        s.metadata = t.cp.metadata;
        auto tasks = make_tasks(impl, r);
        std::vector<task> finished;
        for (auto& task_ : tasks) {
            reload_task(impl, r, task_);
            task_snapshot ts;
            ts.id = task_.id;
            ts.name = impl.nodes[task_.node].name;
            ts.interrupts = task_.interrupts;
            if (task_.status == task_status::done) ts.result = ops::update_json(task_.out.writes);
            if (auto it = r.pending.find(task_.id); it != r.pending.end())
                for (const auto& w : it->second)
                    if (w.channel == detail::k_error) ts.error = std::string(w.value.as_string());
            if (task_.status == task_status::done) finished.push_back(std::move(task_));
            s.tasks.push_back(std::move(ts));
        }
        auto next = next_names(impl, r.fr);
        if (apply_pending && !finished.empty()) {
            check_conflicts(impl, finished);
            for (auto& f : finished) {
                ops::apply(r.state, f.out.writes, impl.reds);
                next.erase(std::remove(next.begin(), next.end(), impl.nodes[f.node].name), next.end());
            }
        }
        s.values = std::move(r.state);
        s.next = std::move(next);
        return s;
    }
};

} // namespace stategraph
