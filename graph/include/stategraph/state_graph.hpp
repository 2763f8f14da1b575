#pragma once
/// @file state_graph.hpp
/// @brief `state_graph<S>`: the builder, with LangGraph's vocabulary in snake_case
/// (add_node, add_edge, add_conditional_edges, compile). The DSL lowers to it.

#include <stategraph/cache.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/detail/graph_core.hpp>
#include <stategraph/detail/keyed_routes.hpp>
#include <stategraph/error_handler.hpp>
#include <stategraph/json_shape.hpp>
#include <stategraph/migration.hpp>
#include <stategraph/node.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/topology.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/json/value_from.hpp>

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <vector>

namespace stategraph {

/// @brief Options of `add_node`. Retry, timeout, cache and error handler left unset take the
/// graph's `node_defaults` (unless `use_defaults` is false); those set here win.
/// Thread safety: a plain value; distinct objects are independent.
struct node_options {
    std::string stage;                 ///< cluster in drawings
    bool defer = false;                ///< run only when no other node is pending
    std::optional<retry_policy> retry; ///< retry inside the step
    std::vector<std::string> ends;     ///< nodes a Command from this node may go to
    /// Per-attempt time limit (zero: the retry policy's `timeout`, else the default's, else none);
    /// an attempt past it fails with `errc::node_timeout` (and is retried as any failure). Coroutine
    /// nodes only: a synchronous node cannot be interrupted.
    std::chrono::milliseconds timeout{0};
    std::optional<cache_policy> cache; ///< skip the node when its input's key is cached
    error_handler on_error;            ///< runs when the node fails for good
    bool use_defaults = true;          ///< false: take none of the graph's `node_defaults`
};

/// @brief What an output mapping (`state_graph::output_schema`) reads besides the state.
struct output_context {
    /// The nodes the call ran, in order (superstep, then name).
    const std::vector<std::string>& path;
};

/// @brief Graph-wide node options (`state_graph::set_node_defaults`, LangGraph's
/// `setNodeDefaults`): every node that does not set its own retry policy, timeout, cache policy
/// or error handler uses these. Subgraph nodes and the nodes inside a subgraph are no exception
/// (a subgraph has defaults of its own).
/// Thread safety: a plain value; distinct objects are independent.
struct node_defaults {
    std::optional<retry_policy> retry;
    std::chrono::milliseconds timeout{0};
    std::optional<cache_policy> cache;
    error_handler on_error;
};

namespace detail {
/// The builder's work that does not depend on the state type, compiled once in the library
/// (not in every program that builds a graph): adding a node, and `compile()`'s checks and
/// lowering.
/// Adds node `name` to `g` (a duplicate or reserved name becomes a builder problem).
void add_node(graph_core& g, std::string name, node_call call, node_options options,
              std::shared_ptr<const topology> sub, std::type_index input, bool send_only,
              std::shared_ptr<const void> (*arg_from_json)(const boost::json::value&),
              boost::json::value (*arg_to_json)(const void*));
/// A state (of `st`'s type) read from JSON: each member named as a field sets it, the others are
/// ignored; a value that does not fit its field throws (errc::invalid_input).
std::shared_ptr<const void> state_arg_from_json(const state_table& st, const boost::json::value& v);
/// Appends `edges` and `joins` to `g`'s shape.
void add_edges(graph_core& g, const std::vector<edge_spec>& edges, const std::vector<join_spec>& joins);
/// Copies `built`, applies `defaults` and `options`, and checks it all (`state` and `state_name`
/// are the graph's state type); on problems fills `problems` and returns null.
std::shared_ptr<const graph_core> compile_core(const graph_core& built, const node_defaults& defaults,
                                               compile_options options, std::type_index state,
                                               const std::string& state_name, std::vector<graph_problem>& problems);
} // namespace detail

namespace detail {
/// The target(s) of a path map entry.
inline std::vector<std::string> as_targets(const std::string& to) { return {to}; }
inline const std::vector<std::string>& as_targets(const std::vector<std::string>& to) { return to; }

template <class T> struct is_vector : std::false_type {};
template <class T, class A> struct is_vector<std::vector<T, A>> : std::true_type { using value_type = T; };

} // namespace detail

/// @brief Builds a graph over state `S`. Not thread safe; `compile()` makes an immutable,
/// shareable `compiled_graph<S>`.
/// @tparam S the state: a default-constructible struct listed in `BOOST_DESCRIBE_STRUCT` with every
/// field a node reads or writes (a field left out is invisible to the engine).
/// Thread safety: not thread-safe: build it on one thread. Distinct builders are independent, and
/// `compile()` copies what it needs, so a builder may be changed and compiled again after.
template <class S>
class state_graph {
    static_assert(described_state<S>,
                  "state_graph<S>: S must be a default-constructible struct described with "
                  "BOOST_DESCRIBE_STRUCT(S, (), (field1, field2, ...)); add that line after the struct");
public:
    /// @brief An empty graph.
    /// @param name the graph's name: shown in drawings and the server, and part of the key of cached
    /// node outcomes (`compile_options::name` overrides it).
    explicit state_graph(std::string name = "graph") : impl_(std::make_shared<detail::graph_core>()) {
        impl_->st = &detail::table_of<S>();
        impl_->state_schema = json_schema_of<S>(true);
        impl_->topo.name = std::move(name);
    }

    /// @brief Adds a node. `fn` takes `const S&` (or a Send payload type) and optionally
    /// `context&`, and returns `update<S>`, `command<S>`, `void`, or an awaitable of those.
    /// @tparam F the node's callable type; its signature is checked at compile time (a `static_assert`
    /// names the expected forms).
    /// @param name the node's name, unique in the graph; START, END, "" and names starting with "__"
    /// are reserved. A duplicate or reserved name is not thrown here: `compile()` reports it
    /// (`errc::duplicate_node`).
    /// @param fn the node, moved into the graph and called once per task, possibly from several runs
    /// at once (make it safe to call concurrently, or keep state in `S`). An exception it throws is
    /// retried per `options.retry`, then handled by `options.on_error` or fails the call with a
    /// `node_error` (`errc::node_failed`).
    /// @param options stage, retry, timeout, cache, error handler and Command destinations
    /// (`node_options`); unset ones take the graph's `node_defaults` at `compile()`.
    /// @return `*this`, for chaining.
    template <class F>
    state_graph& add_node(std::string name, F fn, node_options options = {}) {
        using In = node_input_t<F, S>;
        static_assert(!std::is_void_v<In>,
                      "add_node: a node must be callable as f(const S&) or f(const S&, stategraph::context&) "
                      "(or take a Send payload type as its first parameter)");
        if constexpr (!std::is_void_v<In>) {
            static_assert(node_of<F, S, In>,
                          "add_node: a node must return stategraph::update<S>, stategraph::command<S>, void, or "
                          "boost::asio::awaitable<> of one of those, where S is the graph's state type; did you "
                          "return the whole state, or an update of another state type?");
            auto call = detail::make_node_call<S, In>(std::move(fn));
            add_node_impl<In>(std::move(name), std::move(call), std::move(options), nullptr);
        }
        return *this;
    }

    /// @brief Adds a compiled graph as a node. Fields with the same name are shared: the
    /// subgraph reads them from this graph's state and its writes to them come back as the
    /// node's update (only what it wrote, not its whole state).
    /// @tparam C the subgraph's state type; fields are matched with this graph's by name.
    /// @param name the node's name (rules as for the other overload).
    /// @param sub the compiled subgraph; it is shared, not copied (a `compiled_graph` is a handle).
    /// Its checkpoints go to this graph's checkpointer, under the node's namespace.
    /// @param options as for a function node; its own `node_defaults` still apply inside the subgraph.
    /// @return `*this`, for chaining.
    template <class C>
    state_graph& add_node(std::string name, const compiled_graph<C>& sub, node_options options = {}) {
        auto call = detail::subgraph_call(sub.core(), detail::table_of<S>());
        const auto before = impl_->nodes.size();
        add_node_impl<S>(std::move(name), std::move(call), std::move(options),
                         std::make_shared<const topology>(sub.shape()));
        if (impl_->nodes.size() > before) impl_->nodes.back().subgraph = sub.core(); // for its state (get_state subgraphs)
        return *this;
    }

    /// @brief `from` -> `to`. Use START and END for the entry and exit.
    /// @param from the source node, or START.
    /// @param to the node that runs in the step after `from` ran, or END. Names are checked by
    /// `compile()` (`errc::unknown_node`, with the nearest name suggested), so edges may come first.
    /// @return `*this`, for chaining.
    state_graph& add_edge(std::string from, std::string to) {
        impl_->topo.edges.push_back({std::move(from), std::move(to)});
        return *this;
    }
    /// @brief A join: `to` runs once all of `sources` have run.
    /// @param sources the nodes that must all have run (in any steps) before `to` runs once; a
    /// source that can be skipped makes `compile()` report `errc::join_never_fires`.
    /// @param to the joining node, or END.
    /// @return `*this`, for chaining.
    state_graph& add_edge(std::vector<std::string> sources, std::string to) {
        impl_->topo.joins.push_back({std::move(sources), std::move(to)});
        return *this;
    }
    /// @brief The same join written as LangGraph writes it: `add_edge({"a", "b"}, "c")` (without
    /// this overload the braces could also make a `std::string` from two pointers, and the call
    /// would be ambiguous).
    /// @param sources the nodes that must all have run; @param to the joining node, or END.
    /// @return `*this`, for chaining.
    state_graph& add_edge(std::initializer_list<std::string> sources, std::string to) {
        return add_edge(std::vector<std::string>(sources), std::move(to));
    }
    /// @brief `add_edge` for each of `edges` and `joins`, in order (what the DSL lowers its
    /// chains to).
    /// @return `*this`, for chaining.
    state_graph& add_edges(const std::vector<edge_spec>& edges, const std::vector<join_spec>& joins) {
        detail::add_edges(*impl_, edges, joins);
        return *this;
    }
    /// @brief Same as `add_edge(START, node)`.
    state_graph& set_entry_point(std::string node) { return add_edge(START, std::move(node)); }
    /// @brief Same as `add_edge(node, END)`.
    state_graph& set_finish_point(std::string node) { return add_edge(std::move(node), END); }

    /// @brief A conditional edge: `router(state)` picks the route; `path_map` maps each
    /// route value to a node, or to several (`std::vector<std::string>`: that value leads to all
    /// of them, run in the next step, as a LangGraph router returning a list). A router may also
    /// return a vector of values. With a described enum, `compile()` checks every value is mapped.
    /// @tparam F the router: callable as `router(const S&)`, returning a `K` value or a
    /// `std::vector` of them (for a `std::string` key, any type convertible to string).
    /// @tparam K the route value type: the router's result, or `std::string`.
    /// @tparam V `std::string` (one target) or `std::vector<std::string>` (all run next step).
    /// @param from the node (or START) whose completion runs the router; may be added after this call.
    /// @param router called once each time `from` finishes, on the run's executor, with the state
    /// after the step's updates. It may be called from several runs at once.
    /// @param path_map route value -> target node(s) or END. For a described enum, `compile()`
    /// reports a value left unmapped; at run time an unmapped value fails the call with
    /// `graph_error(errc::unmapped_route)`.
    /// @return `*this`, for chaining.
    template <class F, class K, class V>
    state_graph& add_conditional_edges(std::string from, F router, std::map<K, V> path_map) {
        using R = router_result_t<F>;
        static_assert(std::is_same_v<K, R> || (std::is_same_v<K, std::string> && std::is_convertible_v<R, std::string>) ||
                          (std::is_same_v<K, std::string> && detail::is_vector<R>::value),
                      "add_conditional_edges: the path map's keys must have the router's result type "
                      "(a router returning an enum needs std::map<that_enum, std::string>)");
        static_assert(std::is_same_v<V, std::string> || std::is_same_v<V, std::vector<std::string>>,
                      "add_conditional_edges: a path map maps each route value to a node name (std::string), or to "
                      "several (std::vector<std::string>, all run in the next step)");
        detail::keyed_routes<K> routes;
        for (const auto& [k, v] : path_map) { // already in key order, each key once
            routes.keys.push_back(k);
            routes.table.labels.push_back(detail::route_label(k));
            routes.table.targets.push_back(detail::as_targets(v));
        }
        return add_conditional_edges(std::move(from), std::move(router), std::move(routes));
    }

    /// @brief The same conditional edge with its path map already in key order, as the DSL's route
    /// maps lower to it (`detail::keyed_routes::insert` builds one).
    template <class F, class K>
    state_graph& add_conditional_edges(std::string from, F router, detail::keyed_routes<K> routes) {
        using R = router_result_t<F>;
        std::vector<std::string> unmapped;
        if constexpr (std::is_enum_v<R> && boost::describe::has_describe_enumerators<R>::value) {
            boost::mp11::mp_for_each<boost::describe::describe_enumerators<R>>([&](auto e) {
                if (!routes.contains(e.value)) unmapped.push_back(e.name);
            });
        }
        auto table = detail::add_keyed_branch(*impl_, std::move(from), std::move(routes.table), std::move(unmapped));
        auto route = [router = std::move(router), keys = std::move(routes.keys), table](
                         const void* s, std::vector<std::string>& targets, std::vector<send>&) {
            auto r = router(*static_cast<const S*>(s));
            if constexpr (detail::is_vector<decltype(r)>::value) {
                for (const auto& x : r) table->append(detail::route_index(keys, K(x)), targets);
            } else {
                table->append(detail::route_index(keys, K(r)), targets);
            }
        };
        impl_->branches.push_back({-2, std::move(route)});
        return *this;
    }

    /// @brief A conditional edge whose router returns node names, or Sends, directly;
    /// `targets` lists every node it may return (for validation and drawing).
    /// @tparam F the router: `router(const S&)` returning a node name (or anything convertible to
    /// one, a bool, an integer, a described enum: its label), `send`, or a `std::vector` of those.
    /// @param from the node (or START) after which the router runs.
    /// @param router called once each time `from` finishes, on the run's executor; a name that is not
    /// a node fails the call with `graph_error(errc::invalid_route)`.
    /// @param targets every node the router may return (for `compile()`'s checks and drawings; with
    /// Sends, the nodes they address).
    /// @return `*this`, for chaining.
    template <class F>
    state_graph& add_conditional_edges(std::string from, F router, std::vector<std::string> targets) {
        using R = router_result_t<F>;
        branch_spec spec{from, {}, {}, false};
        constexpr bool sends = std::is_same_v<R, send> || std::is_same_v<R, std::vector<send>>;
        spec.sends = sends;
        for (const auto& t : targets) spec.routes.push_back({sends ? "Send" : t, t});
        auto route = [router = std::move(router)](const void* s, std::vector<std::string>& out, std::vector<send>& out_sends) {
            auto r = router(*static_cast<const S*>(s));
            if constexpr (std::is_same_v<R, send>) out_sends.push_back(std::move(r));
            else if constexpr (std::is_same_v<R, std::vector<send>>) for (auto& x : r) out_sends.push_back(std::move(x));
            else if constexpr (detail::is_vector<R>::value) for (auto& x : r) out.push_back(detail::route_label(x));
            else out.push_back(detail::route_label(r));
        };
        return add_branch(std::move(spec), std::move(route));
    }

    /// @brief Marks nodes to stop before (static breakpoints, persisted with the graph).
    /// @param nodes node names; a call stops with `run_status::interrupted` before any of them runs,
    /// and continues when invoked again on the thread. Needs a checkpointer. Unknown names are reported
    /// by `compile()`. Added to those set before (and to `compile_options::interrupt_before`).
    /// @return `*this`, for chaining.
    state_graph& interrupt_before(std::vector<std::string> nodes) {
        for (auto& n : nodes) impl_->topo.interrupt_before.insert(std::move(n));
        return *this;
    }
    /// @brief Marks nodes to stop after.
    /// @param nodes node names; a call stops after the step in which one of them ran.
    /// @return `*this`, for chaining.
    state_graph& interrupt_after(std::vector<std::string> nodes) {
        for (auto& n : nodes) impl_->topo.interrupt_after.insert(std::move(n));
        return *this;
    }

    /// @brief Declares the input callers send, apart from the state (LangGraph's `input_schema`):
    /// a described struct `I`. A caller's JSON is read as an `I` (members left out keep `I`'s
    /// defaults; an unknown member is an `unknown_member_error`), then `map` turns it into the
    /// state update the call applies: `map(const I&, const S& current)` or `map(const I&)`, where
    /// `current` is the thread's state (its defaults on a new thread). In process, send one with
    /// `app.invoke(as_input(I{...}), cfg)`; the server reads a run's `input` this way and reports
    /// `I`'s JSON Schema as the assistant's `input_schema`.
    /// @tparam I the input type: a struct described with `BOOST_DESCRIBE_STRUCT`.
    /// @tparam F `map`'s type (checked by a `static_assert`).
    /// @param map turns a read `I` (and the thread's current state) into the update the call applies;
    /// called once per call with such an input, on the calling coroutine. A JSON input that does not fit
    /// `I` fails the call with `errc::invalid_input`.
    /// @return `*this`, for chaining.
    template <class I, class F>
    state_graph& input_schema(F map) {
        static_assert(detail::is_described_struct_v<I>,
                      "input_schema<I>(map): I must be a struct described with BOOST_DESCRIBE_STRUCT(I, (), (...))");
        static_assert(std::is_invocable_r_v<update<S>, const F&, const I&, const S&> ||
                          std::is_invocable_r_v<update<S>, const F&, const I&>,
                      "input_schema<I>(map): map must be callable as map(const I&, const S& current) or map(const I&) "
                      "and return stategraph::update<S>");
        auto s = schema_of<I>(false);
        s->read = [map = std::move(map)](const boost::json::object& in, const void* current, errc code, const std::string& where) {
            const I value = read_json<I>(in, code, where);
            update<S> u;
            if constexpr (std::is_invocable_r_v<update<S>, const F&, const I&, const S&>) u = map(value, *static_cast<const S*>(current));
            else u = map(value);
            return detail::update_box::of<S>(std::move(u));
        };
        impl_->input = std::move(s);
        return *this;
    }
    /// @brief Declares the input `I` whose members are fields of the state, by name (checked by
    /// `compile()`): the members a caller sends set those fields, the others are left alone.
    /// @tparam I a described struct whose members are named and typed as state fields; a member that
    /// is not a field is reported by `compile()` (`errc::invalid_input`).
    /// @return `*this`, for chaining.
    template <class I>
    state_graph& input_schema() {
        static_assert(detail::is_described_struct_v<I>,
                      "input_schema<I>(): I must be a struct described with BOOST_DESCRIBE_STRUCT(I, (), (...))");
        auto s = schema_of<I>(false);
        s->by_name = detail::member_names<I>();
        s->read = [](const boost::json::object& in, const void* current, errc code, const std::string& where) {
            (void)read_json<I>(in, code, where); // I's members and their types
            return detail::merge_update_from_json(detail::table_of<S>(), in, current, code, where);
        };
        impl_->input = std::move(s);
        return *this;
    }

    /// @brief Declares the output callers get back, apart from the state (LangGraph's
    /// `output_schema`): a described struct `O` made from the state by `map`, called as
    /// `map(const S&)` or `map(const S&, const output_context&)` (the nodes the call ran). A
    /// call's result carries it (`run_result::output<O>()`), the `values` stream shows it, and the
    /// server answers runs with it; `get_state` still shows the whole state.
    /// @tparam O the output type: a described struct with JSON conversions (Boost.Describe's suffice).
    /// @tparam F `map`'s type (checked by a `static_assert`).
    /// @param map called at the end of each call (and for each `values` stream event) with the final
    /// state, on the run's executor.
    /// @return `*this`, for chaining.
    template <class O, class F>
    state_graph& output_schema(F map) {
        static_assert(detail::is_described_struct_v<O>,
                      "output_schema<O>(map): O must be a struct described with BOOST_DESCRIBE_STRUCT(O, (), (...))");
        static_assert(std::is_invocable_r_v<O, const F&, const S&, const output_context&> ||
                          std::is_invocable_r_v<O, const F&, const S&>,
                      "output_schema<O>(map): map must be callable as map(const S&) or map(const S&, const "
                      "stategraph::output_context&) and return O");
        auto s = schema_of<O>(true);
        s->write = [map = std::move(map)](const void* state, const std::vector<std::string>& path) {
            const S& st = *static_cast<const S*>(state);
            if constexpr (std::is_invocable_r_v<O, const F&, const S&, const output_context&>) {
                const output_context ctx{path};
                return boost::json::value_from(map(st, ctx)).as_object();
            } else {
                return boost::json::value_from(map(st)).as_object();
            }
        };
        impl_->output = std::move(s);
        return *this;
    }
    /// @brief Declares the output `O` whose members are fields of the state, by name (checked by
    /// `compile()`).
    /// @tparam O a described struct whose members are named and typed as state fields; a member that
    /// is not a field is reported by `compile()` (`errc::invalid_input`).
    /// @return `*this`, for chaining.
    template <class O>
    state_graph& output_schema() {
        static_assert(detail::is_described_struct_v<O>,
                      "output_schema<O>(): O must be a struct described with BOOST_DESCRIBE_STRUCT(O, (), (...))");
        auto s = schema_of<O>(true);
        s->by_name = detail::member_names<O>();
        s->write = [](const void* state, const std::vector<std::string>&) {
            const auto& st = detail::table_of<S>();
            boost::json::object o;
            for (const auto& name : detail::member_names<O>())
                if (int i = st.index_of(name); i >= 0) o[name] = st.to_json(state, static_cast<std::size_t>(i), {});
            return boost::json::value_from(read_json<O>(o, errc::invalid_input, "output")).as_object();
        };
        impl_->output = std::move(s);
        return *this;
    }

    /// @brief The version of the state (1 unless set): written in every checkpoint, so that a
    /// thread written by an older version is migrated (`add_migration`) when it is read.
    /// @param version the state's version now, at least 1; raise it when the state changes shape
    /// in a way threads already stored must be carried over (see migration.hpp).
    /// @return `*this`, for chaining. A version below 1 is reported by `compile()`.
    state_graph& set_state_version(int version) {
        impl_->state_version = version;
        return *this;
    }

    /// @brief A migration from state version `from` to `from + 1`: `fn(const From&)` returns
    /// the next version's state (`To`); From and To are read from fn's signature.
    /// @param from the version `fn` reads (at least 1, below `set_state_version`'s)
    /// @param fn a function or lambda taking the old state (a described struct, the state as it was
    /// at version `from`) and returning the next version's (the graph's state for the last step)
    /// @return `*this`, for chaining. Gaps, duplicates and type mismatches in the chain are reported
    /// by `compile()` (`errc::invalid_input`).
    template <class F>
    state_graph& add_migration(int from, F fn) {
        using sig = detail::migration_signature<std::decay_t<F>>;
        return add_migration<typename sig::from, typename sig::to>(from, std::move(fn));
    }
    /// @brief `add_migration` with the old and new state types named (for a generic lambda).
    /// @tparam From the state at version `from`; @tparam To the state at version `from + 1`
    template <class From, class To, class F>
    state_graph& add_migration(int from, F fn) {
        impl_->migrations.push_back(detail::make_migration<From, To>(from, std::move(fn)));
        return *this;
    }

    /// @brief Sets the graph-wide node defaults (replacing earlier ones); they apply at `compile()`
    /// to every node, whenever it was added, that leaves the option unset.
    /// @param defaults retry policy, per-attempt timeout, cache policy and error handler for every
    /// node that sets none itself and keeps `node_options::use_defaults`.
    /// @return `*this`, for chaining.
    state_graph& set_node_defaults(node_defaults defaults) {
        defaults_ = std::move(defaults);
        return *this;
    }
    /// @brief The graph-wide node defaults.
    const node_defaults& defaults() const noexcept { return defaults_; }

    /// @brief The shape built so far.
    const topology& shape() const { return impl_->topo; }

    /// @brief Validates and freezes the graph. Throws `compile_error` listing every problem.
    /// @param options checkpointer, extra breakpoints, name, cache saver and store
    /// (`compile_options`); all optional.
    /// @return an immutable, cheaply copyable graph; this builder is left unchanged.
    /// @throws compile_error (a `graph_error`) whose `problems()` lists every problem found:
    /// unknown or duplicate nodes, no entry point, unreachable nodes, nodes with no path to END,
    /// unmapped enum routes, joins that never fire, bad schemas or migrations.
    compiled_graph<S> compile(compile_options options = {}) const {
        std::vector<graph_problem> problems;
        auto g = compile(std::move(options), problems);
        if (!g) throw compile_error(std::move(problems));
        return std::move(*g);
    }

    /// @brief Validates and freezes the graph; on problems returns nullopt and fills `problems`.
    /// @param options as for `compile(options)`.
    /// @param problems cleared, then filled with every problem found (empty on success).
    /// @return the compiled graph, or `std::nullopt` when `problems` is not empty. Does not throw
    /// for graph problems.
    std::optional<compiled_graph<S>> compile(compile_options options, std::vector<graph_problem>& problems) const {
        auto core = detail::compile_core(*impl_, defaults_, std::move(options), typeid(S), detail::short_type_name<S>(), problems);
        if (!core) return std::nullopt;
        return compiled_graph<S>(std::move(core));
    }

private:
    template <class T>
    static std::shared_ptr<detail::io_schema> schema_of(bool required) {
        auto s = std::make_shared<detail::io_schema>();
        s->type = typeid(T);
        s->type_name = detail::short_type_name<T>();
        s->json_schema = json_schema_of<T>(required);
        return s;
    }

    template <class F>
    using router_result_t = std::remove_cvref_t<std::invoke_result_t<F&, const S&>>;

    template <class Route>
    state_graph& add_branch(branch_spec spec, Route route) {
        // The source is resolved in compile(): it may be added after its conditional edge.
        impl_->topo.branches.push_back(spec);
        impl_->branches.push_back({-2, std::move(route)});
        return *this;
    }

    // A Send's payload to and from JSON (pending Sends in checkpoints). A payload of the state
    // type goes through the state's table, compiled once in the library.
    template <class In>
    static std::shared_ptr<const void> arg_from_json(const boost::json::value& v) {
        if constexpr (std::is_same_v<In, S>) return detail::state_arg_from_json(detail::table_of<S>(), v);
        else return std::make_shared<const In>(boost::json::value_to<In>(v));
    }
    template <class In>
    static boost::json::value arg_to_json(const void* p) {
        if constexpr (std::is_same_v<In, S>) return detail::state_json(detail::table_of<S>(), p);
        else return boost::json::value_from(*static_cast<const In*>(p));
    }

    template <class In>
    void add_node_impl(std::string name, detail::node_call call, node_options options,
                       std::shared_ptr<const topology> sub) {
        detail::add_node(*impl_, std::move(name), std::move(call), std::move(options), std::move(sub), typeid(In),
                         !std::is_same_v<In, S>, &arg_from_json<In>, &arg_to_json<In>);
    }

    std::shared_ptr<detail::graph_core> impl_;
    node_defaults defaults_;
};

} // namespace stategraph
