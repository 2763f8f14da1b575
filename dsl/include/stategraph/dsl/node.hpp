#pragma once
/// @file node.hpp
/// @brief Nodes in the DSL. A node's name is `"planner"_n` (a `node_ref`); assigning to it
/// declares the node, and modifiers after a `|` say how it runs:
/// @code
/// "planner"_n = plan,
/// "tools"_n   = call_tools | retry({.max_attempts = 3}) | timeout(std::chrono::seconds(30)),
/// "search"_n  = search | cache({.ttl = std::chrono::minutes(5)}),   // a hit skips the node
/// "charge"_n  = charge | on_error("refund", refund),                // runs when charge fails for good
/// "summary"_n = summarize | defer,
/// "approve"_n = ask_human | interrupt_before,
/// "decide"_n  = decide | ends("a"_n, "b"_n),      // nodes its command<S> may go to
/// "memory"_n  = memory_app,                       // a compiled graph: a subgraph
/// interrupt_after("planner"_n),                   // a breakpoint declared on its own
/// @endcode
/// The same modifiers exist as members of a declaration: `("summary"_n = summarize).defer()`.
/// `start` and `end` are the graph's entry and exit.

#include <stategraph/dsl/checks.hpp>
#include <stategraph/dsl/lowering.hpp>

#include <stategraph/cache.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/error_handler.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/state_graph.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::dsl {

template <class F>
class node_decl;

/// @brief How a node runs: the builder's `node_options` plus its breakpoints.
struct node_how {
    node_options options;
    bool before = false; ///< interrupt_before
    bool after = false;  ///< interrupt_after
};

/// @brief A callable with modifiers, waiting for its name: `fn | defer | retry(p)`.
template <class F>
struct bound_node {
    F fn;
    node_how how;
};

namespace detail {
template <class T> struct is_bound_node : std::false_type {};
template <class F> struct is_bound_node<bound_node<F>> : std::true_type {};
} // namespace detail

/// @brief The name of a node, written `"name"_n` (or `node_ref{name}` for a name built at run
/// time). Assigning a callable to it declares the node: `"name"_n = fn`.
/// Thread safety: a plain value (a string); distinct objects are independent.
class node_ref {
public:
    /// @param name the node's name; reserved names (START, END, "", "__...") are reported by `compile()`.
    explicit node_ref(std::string name) : name_(std::move(name)) {}
    node_ref(const node_ref&) = default;
    node_ref(node_ref&&) = default;
    node_ref& operator=(const node_ref&) = default;
    node_ref& operator=(node_ref&&) = default;

    /// @brief The node's name.
    const std::string& name() const noexcept { return name_; }

    /// @brief Declares the node: `fn` is a node callable, or a `compiled_graph` (a subgraph),
    /// optionally with modifiers (`fn | defer`). Checked when the declaration is placed in a
    /// `stage<S>` or `graph<S>`, where the state type is known.
    template <class F>
        requires(!std::same_as<std::remove_cvref_t<F>, node_ref>)
    /// @tparam F a node callable, a `compiled_graph<C>`, or a `bound_node` (`fn | modifiers`).
    /// @param fn copied or moved into the declaration (and later into the graph); it is called from
    /// every run of the graph, possibly at once.
    /// @return a `node_decl` to place in `graph<S>(...)` or `stage<S>(...)`.
    auto operator=(F&& fn) const {
        using T = std::remove_cvref_t<F>;
        if constexpr (detail::is_bound_node<T>::value) {
            return node_decl<std::decay_t<decltype(fn.fn)>>(name_, std::forward<F>(fn).fn, std::forward<F>(fn).how);
        } else {
            return node_decl<std::decay_t<F>>(name_, std::forward<F>(fn), node_how{});
        }
    }

    friend bool operator==(const node_ref&, const node_ref&) = default;

private:
    std::string name_;
};

/// @brief The virtual entry node (the builder's `START`).
inline const node_ref start{"__start__"};
/// @brief The virtual exit node (the builder's `END`).
inline const node_ref end{"__end__"};

inline namespace literals {
/// @brief `"planner"_n`: a node name.
/// @param s the name's characters.
/// @param n their count.
node_ref operator""_n(const char* s, std::size_t n);
} // namespace literals

// -- modifiers -----------------------------------------------------------------------------

/// @brief A modifier: something that changes how a node runs.
template <class M>
concept node_modifier = requires(const M& m, node_how& h) {
    typename M::is_node_modifier;
    m.apply(h);
};

/// @brief Breakpoints declared on their own: `interrupt_before("a"_n, "b"_n)`.
struct breakpoints {
    bool before = true;
    std::vector<std::string> nodes;

    template <class S>
    [[gnu::cold]] void lower_into(detail::lowering<S>& out) const {
        lower_shape(out);
    }
    /// @brief Adds the breakpoints to `out` (compiled in the DSL's library).
    void lower_shape(detail::lowered& out) const;
};

/// @brief `fn | defer`: runs only when nothing else is pending (LangGraph's `defer=True`).
struct defer_t {
    using is_node_modifier = void;
    void apply(node_how& h) const { h.options.defer = true; }
};
inline constexpr defer_t defer{};

/// @brief `fn | retry({.max_attempts = 3})`: retries a failing attempt inside its superstep.
struct retry_modifier {
    using is_node_modifier = void;
    retry_policy policy;
    void apply(node_how& h) const { h.options.retry = policy; }
};
/// @param policy attempts, intervals, backoff, jitter, per-attempt timeout and `retry_on`
/// (`retry_policy`; default: 3 attempts, 500 ms then doubling, jitter).
inline retry_modifier retry(retry_policy policy = {}) { return {std::move(policy)}; }

/// @brief `fn | timeout(std::chrono::seconds(30))`: the per-attempt time limit (`errc::node_timeout`).
struct timeout_modifier {
    using is_node_modifier = void;
    std::chrono::milliseconds limit;
    void apply(node_how& h) const { h.options.timeout = limit; }
};
/// @param limit per-attempt time limit (a `std::chrono` duration converts); coroutine nodes only.
inline timeout_modifier timeout(std::chrono::milliseconds limit) { return {limit}; }

/// @brief `fn | cache({.key = k, .ttl = t})`: a hit on the input's key skips the node and replays
/// its writes (see `cache_policy`).
struct cache_modifier {
    using is_node_modifier = void;
    cache_policy policy;
    void apply(node_how& h) const { h.options.cache = policy; }
};
/// @param policy the key function (empty: the whole input's JSON) and time to live (zero: for good).
inline cache_modifier cache(cache_policy policy = {}) { return {std::move(policy)}; }

/// @brief `fn | on_error(handler)` or `fn | on_error("name", handler)`: runs when the node fails
/// for good; its update or Command stands in for the node's (see `error_handler`).
struct on_error_modifier {
    using is_node_modifier = void;
    error_handler handler;
    void apply(node_how& h) const { h.options.on_error = handler; }
};
/// @tparam F `f(const S&, const node_failure&[, context&])` returning what a node may return.
/// @param handler the error handler (named "error_handler").
template <class F>
on_error_modifier on_error(F handler) {
    return {error_handler(std::move(handler))};
}
/// @tparam F as above.
/// @param name the handler's name, shown in errors and drawings.
/// @param handler the error handler.
template <class F>
on_error_modifier on_error(std::string name, F handler) {
    return {error_handler(std::move(name), std::move(handler))};
}

/// @brief `fn | no_defaults`: the node takes none of the graph's `node_defaults`.
struct no_defaults_t {
    using is_node_modifier = void;
    void apply(node_how& h) const { h.options.use_defaults = false; }
};
inline constexpr no_defaults_t no_defaults{};

/// @brief `fn | interrupt_before` stops the run before the node; on its own,
/// `interrupt_before("a"_n, ...)` declares the breakpoints of named nodes.
struct interrupt_before_t {
    using is_node_modifier = void;
    void apply(node_how& h) const { h.before = true; }
    template <class... N>
        requires(std::same_as<N, node_ref> && ...)
    breakpoints operator()(const N&... nodes) const { return {true, {nodes.name()...}}; }
};
inline constexpr interrupt_before_t interrupt_before{};

/// @brief `fn | interrupt_after` stops the run after the node; on its own,
/// `interrupt_after("a"_n, ...)` declares the breakpoints of named nodes.
struct interrupt_after_t {
    using is_node_modifier = void;
    void apply(node_how& h) const { h.after = true; }
    template <class... N>
        requires(std::same_as<N, node_ref> && ...)
    breakpoints operator()(const N&... nodes) const { return {false, {nodes.name()...}}; }
};
inline constexpr interrupt_after_t interrupt_after{};

/// @brief `fn | ends("a"_n, "b"_n)`: the nodes a `command<S>` from this node may go to
/// (checked by compile() and drawn dotted).
struct ends_modifier {
    using is_node_modifier = void;
    std::vector<std::string> targets;
    void apply(node_how& h) const { h.options.ends = targets; }
};
template <class... N>
    requires(std::same_as<N, node_ref> && ...)
/// @tparam N `node_ref` each.
/// @param targets the nodes a `command<S>` returned by the node may go to.
ends_modifier ends(const N&... targets) {
    return {{targets.name()...}};
}
/// @param targets the nodes a `command<S>` returned by the node may go to.
inline ends_modifier ends(std::initializer_list<node_ref> targets) {
    ends_modifier m;
    for (const auto& t : targets) m.targets.push_back(t.name());
    return m;
}

/// @brief `fn | in_stage("x")`: puts the node in stage `x` instead of the one it is declared in.
struct stage_modifier {
    using is_node_modifier = void;
    std::string stage;
    void apply(node_how& h) const { h.options.stage = stage; }
};
/// @param stage the stage (Graphviz cluster) name.
inline stage_modifier in_stage(std::string stage) { return {std::move(stage)}; }

/// @brief `fn | options(node_options{...})`: sets every builder option at once.
struct options_modifier {
    using is_node_modifier = void;
    node_options value;
    void apply(node_how& h) const { h.options = value; }
};
/// @param value every builder option; replaces modifiers applied before it.
inline options_modifier options(node_options value) { return {std::move(value)}; }

/// @brief Attaches a modifier to a node callable: `fn | defer | retry(p)`.
/// @tparam F a node callable or an earlier `fn | modifier`.
/// @tparam M a modifier type (`node_modifier`).
/// @param fn the callable, copied or moved into the result.
/// @param modifier applied on top of earlier ones (a later one of the same kind wins).
/// @return a `bound_node`, to assign to a name: `"n"_n = fn | defer`.
template <class F, node_modifier M>
auto operator|(F&& fn, const M& modifier) {
    if constexpr (detail::is_bound_node<std::remove_cvref_t<F>>::value) {
        auto b = std::forward<F>(fn);
        modifier.apply(b.how);
        return b;
    } else {
        bound_node<std::decay_t<F>> b{std::forward<F>(fn), {}};
        modifier.apply(b.how);
        return b;
    }
}

// -- declarations --------------------------------------------------------------------------

/// @brief A node declaration: its name, its callable (or compiled subgraph) and how it runs.
/// The members return the changed declaration: `("a"_n = fn).defer().retry(p)`, or
/// `("a"_n = fn).with(defer, retry(p))`.
/// @tparam F the node's callable, or `compiled_graph<C>` for a subgraph.
/// Thread safety: a plain value; distinct objects are independent.
template <class F>
class node_decl {
public:
    node_decl(std::string name, F fn, node_how how) : name_(std::move(name)), fn_(std::move(fn)), how_(std::move(how)) {}

    /// @brief Applies modifiers: `.with(defer, retry(p), interrupt_before)`.
    /// @tparam M modifier types.
    /// @param m modifiers applied in order.
    /// @return a changed copy (the `&&` overload changes and moves this one).
    template <node_modifier... M>
    node_decl with(const M&... m) const& {
        node_decl d = *this;
        (m.apply(d.how_), ...);
        return d;
    }
    template <node_modifier... M>
    node_decl with(const M&... m) && {
        (m.apply(how_), ...);
        return std::move(*this);
    }

    node_decl defer() const& { return with(dsl::defer); }
    node_decl defer() && { return std::move(*this).with(dsl::defer); }
    node_decl retry(retry_policy p = {}) const& { return with(dsl::retry(std::move(p))); }
    node_decl retry(retry_policy p = {}) && { return std::move(*this).with(dsl::retry(std::move(p))); }
    node_decl timeout(std::chrono::milliseconds limit) const& { return with(dsl::timeout(limit)); }
    node_decl timeout(std::chrono::milliseconds limit) && { return std::move(*this).with(dsl::timeout(limit)); }
    node_decl cache(cache_policy p = {}) const& { return with(dsl::cache(std::move(p))); }
    node_decl cache(cache_policy p = {}) && { return std::move(*this).with(dsl::cache(std::move(p))); }
    template <class H>
    node_decl on_error(H handler) const& { return with(dsl::on_error(std::move(handler))); }
    template <class H>
    node_decl on_error(H handler) && { return std::move(*this).with(dsl::on_error(std::move(handler))); }
    node_decl interrupt_before() const& { return with(dsl::interrupt_before); }
    node_decl interrupt_before() && { return std::move(*this).with(dsl::interrupt_before); }
    node_decl interrupt_after() const& { return with(dsl::interrupt_after); }
    node_decl interrupt_after() && { return std::move(*this).with(dsl::interrupt_after); }
    node_decl ends(std::initializer_list<node_ref> targets) const& { return with(dsl::ends(targets)); }
    node_decl ends(std::initializer_list<node_ref> targets) && { return std::move(*this).with(dsl::ends(targets)); }
    node_decl in_stage(std::string stage) const& { return with(dsl::in_stage(std::move(stage))); }
    node_decl in_stage(std::string stage) && { return std::move(*this).with(dsl::in_stage(std::move(stage))); }

    const std::string& name() const noexcept { return name_; }
    const node_how& how() const noexcept { return how_; }

    /// @brief Lowers to `add_node` (plus `interrupt_before` / `interrupt_after`), after checking
    /// that `F` is a node of a graph over `S`.
    template <class S>
    [[gnu::cold]] void lower_into(detail::lowering<S>& out) const {
        if constexpr (check::node<S, F>()) {
            node_options o = how_.options;
            if (o.stage.empty()) o.stage = out.stage;
            if (how_.before) out.before.push_back(name_);
            if (how_.after) out.after.push_back(name_);
            out.nodes.push_back([name = name_, fn = fn_, o = std::move(o)](state_graph<S>& g) { g.add_node(name, fn, o); });
        }
    }

private:
    std::string name_;
    F fn_;
    node_how how_;
};

/// @brief A compiled graph used as a node (the same as `name = graph`); fields with the same
/// name are shared with it.
/// @tparam C the subgraph's state type.
/// @param name the node's name.
/// @param graph the compiled subgraph (a shared handle); its checkpoints go to the parent's saver.
/// Thread safety: a pure function; any thread.
template <class C>
node_decl<compiled_graph<C>> subgraph(const node_ref& name, compiled_graph<C> graph) {
    return node_decl<compiled_graph<C>>(name.name(), std::move(graph), node_how{});
}

} // namespace stategraph::dsl
