#pragma once
/// @file run_config.hpp
/// @brief `run_config`: how one call of a compiled graph runs (thread, checkpoint, limits).
///
/// A `run_config` is trivially destructible on purpose: g++ 12 destroys an aggregate temporary
/// that stands in a `co_await` expression twice, so `co_await app.invoke(in, {.thread_id = "t"})`
/// must not own heap memory. Ids are held inline (`id_text`, up to 255 bytes).

#include <stategraph/core/error.hpp>
#include <stategraph/core/id_text.hpp>
#include <stategraph/run_observer.hpp>

#include <cstddef>
#include <cstring>
#include <ostream>
#include <optional>
#include <span>
#include <string>
#include <vector>
#include <string_view>
#include <type_traits>
#include <typeinfo>

namespace stategraph::store {
class base_store;
}

namespace stategraph {

/// @brief The caller's own per-run dependencies (user id, model, database handles), as
/// LangGraph's runtime context: passed with a call, read by nodes with `ctx.runtime<T>()`, never
/// checkpointed. It refers to an object of the caller's, which must outlive the call:
/// `my_deps deps{...}; co_await app.invoke(x, {.thread_id = "t", .runtime = stategraph::runtime_of(deps)});`
struct runtime_context {
    const void* object = nullptr;
    const std::type_info* type = nullptr;
    explicit operator bool() const noexcept { return object != nullptr; }
};
/// @brief The runtime context referring to `deps` (an lvalue: a temporary would be gone before
/// the nodes read it).
/// @tparam T the type nodes ask for with `ctx.runtime<T>()` (exactly this type).
/// @param deps the caller's object; only its address is kept, so it must outlive the call. Nodes
/// read it concurrently, so share it read-only or make it thread-safe.
template <class T>
runtime_context runtime_of(const T& deps) noexcept {
    return {&deps, &typeid(T)};
}
template <class T>
runtime_context runtime_of(const T&& deps) = delete;

/// @brief When a call writes its checkpoints (LangGraph's `durability`). Every mode leaves the
/// same checkpoint at the end of a call (done, interrupted, drained or failed); they differ in
/// what survives a process that dies during the call.
enum class durability : unsigned char {
    /// Each step's checkpoint is written before the next step starts: a crash loses at most the
    /// step that was running (the default).
    sync,
    /// A step's checkpoint is written while the next step's nodes run (one write in flight at
    /// most, in order); the call returns, interrupts or fails only after its writes are stored, and
    /// a failed write is the call's error. A crash loses at most one more step than `sync`.
    async,
    /// Checkpoints are written once, when the call ends: done, interrupted (with what a resume
    /// needs), drained, or failed (the last good state and the failing task's error). A crash
    /// loses the whole call: the thread stays at the checkpoint it had before.
    exit,
};

/// @brief How one call runs. Every member is optional; write it where you call:
/// `co_await app.invoke(input, {.thread_id = "chat-42"})`.
/// Thread safety: a plain, trivially copyable value, copied into each call.
struct run_config {
    id_text thread_id;                    ///< required with a checkpointer
    id_text checkpoint_id;                ///< start from this checkpoint (replay / fork); empty: the latest
    int recursion_limit = 25;             ///< at most this many supersteps per call
    bool allow_drift = false;             ///< resume a thread written by a different graph shape
    std::size_t keep_last = 0;            ///< retention: after the call, keep only the newest N checkpoints (0 = all)
    runtime_context runtime;              ///< the caller's dependencies for the nodes (`ctx.runtime<T>()`)
    /// the long-term memory store for this call's nodes (`ctx.store()`), instead of the graph's
    /// `compile_options::store`; it must outlive the call
    store::base_store* store = nullptr;
    /// when checkpoints are written (subgraphs follow their parent's mode)
    stategraph::durability durability = stategraph::durability::sync;
    /// told of node and checkpoint-write durations and of model usage (its subgraphs too);
    /// it must outlive the call. Null: nothing is measured.
    run_observer* observer = nullptr;
    /// the W3C `traceparent` (`00-<trace id>-<span id>-<flags>`) this call's run span continues,
    /// for a tracing observer (a server passes its request's header); empty: a resume or a
    /// continuation goes on with the trace its thread's interrupted run saved, new input starts
    /// a new trace
    id_text traceparent;
};
/// @brief Breakpoints of one call (`co_await app.invoke(in, cfg, {.before = names})`): each one
/// set replaces the graph's compiled breakpoints of its kind for the call; "*" is every node. It
/// owns nothing (views of the caller's lists, copied by the call before anything runs), so the
/// braced spelling is safe inside `co_await` under g++ 12.
struct run_breakpoints {
    std::optional<std::span<const std::string>> before;
    std::optional<std::span<const std::string>> after;
};
static_assert(std::is_trivially_destructible_v<run_breakpoints>,
              "run_breakpoints must own nothing (g++ 12 destroys braced temporaries in co_await twice)");

static_assert(std::is_trivially_destructible_v<run_config>,
              "run_config must stay trivially destructible (g++ 12 destroys braced temporaries in co_await twice)");

} // namespace stategraph
