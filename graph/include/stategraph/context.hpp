#pragma once
/// @file context.hpp
/// @brief `context`: what a node can do besides reading the state: interrupt for a human,
/// stream custom events, and see where it runs (node, step, thread, attempt).

#include <stategraph/detail/gcc12.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/run_config.hpp>
#include <stategraph/stream.hpp>
#include <stategraph/checkpoint/store/store.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/core/demangle.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <initializer_list>
#include <map>
#include <optional>
#include <string_view>
#include <utility>
#include <type_traits>
#include <string>
#include <vector>

namespace stategraph {

namespace checkpoint { class saver; }

/// @brief One pending interrupt: its id (stable across re-runs of the task), the node that
/// raised it, and its payload.
struct interrupt_info {
    std::string id;
    std::string node;
    boost::json::value value;
};

/// @brief Thrown inside a node by `interrupt()` when no answer is available yet. The engine
/// catches it; nodes should not (if they must catch everything, rethrow this type).
struct interrupt_signal {
    std::vector<interrupt_info> interrupts;
};

namespace detail {
/// The engine's record of one task attempt (defined in graph/src; nodes see it through `context`).
struct task_frame;
/// The answer to the next interrupt call of the task, or null when there is none yet.
const boost::json::value* next_resume(task_frame& f);
/// Stops the task for a human: throws `interrupt_signal` for the interrupt call just made.
[[noreturn]] void raise_interrupt(task_frame& f, boost::json::value payload);
[[noreturn]] void throw_resume_mismatch(task_frame& f, const std::string& type, const boost::json::value& answer);
bool wants_custom(const task_frame& f) noexcept;
void emit_custom(task_frame& f, boost::json::value event);
bool wants_messages(const task_frame& f) noexcept;
void emit_message(task_frame& f, boost::json::value chunk);
struct context_access;

/// The key of the task's next `ctx.task(name, ...)` call ("name", then "name#2", ... for calls
/// of one name in one attempt) and its saved result (null when it has not run yet).
std::pair<std::string, const boost::json::value*> begin_effect(task_frame& f, std::string_view name);
/// Records the result of a side effect and saves it at once as the task's pending write.
boost::asio::awaitable<void> save_effect(task_frame& f, std::string key, boost::json::value result);
[[noreturn]] void throw_effect_mismatch(task_frame& f, const std::string& key, const std::string& type);
const runtime_context& runtime_of_call(const task_frame& f) noexcept;
store::base_store* store_of_call(const task_frame& f) noexcept;
[[noreturn]] void throw_no_store(const task_frame& f);
[[noreturn]] void throw_runtime_mismatch(const task_frame& f, const std::string& wanted);
void report_usage(const task_frame& f, std::string_view model, const token_usage& usage);
trace_span start_span(const task_frame& f, span_kind kind, std::string_view name, std::span<const span_attribute> attributes);

/// What `fn()` of `ctx.task` gives: a value, or an awaitable of one.
template <class T>
struct awaited {
    using type = T;
    static constexpr bool awaits = false;
};
template <class T, class E>
struct awaited<boost::asio::awaitable<T, E>> {
    using type = T;
    static constexpr bool awaits = true;
};
template <class F>
struct effect_call : awaited<std::invoke_result_t<F&>> {};

/// Runs `fn` unless `saved` holds its result from an earlier run of the task; saves what it returns.
template <class R, class F>
boost::asio::awaitable<R> run_effect(task_frame& f, std::string key, std::optional<boost::json::value> saved, F fn) {
    if (saved) {
        if constexpr (std::is_void_v<R>) {
            co_return;
        } else {
            auto r = boost::json::try_value_to<R>(*saved);
            if (!r) throw_effect_mismatch(f, key, boost::core::demangle(typeid(R).name()));
            co_return std::move(*r);
        }
    }
    if constexpr (std::is_void_v<R>) {
        if constexpr (effect_call<F>::awaits) co_await fn();
        else fn();
        boost::json::value none;
        co_await save_effect(f, std::move(key), std::move(none));
    } else {
        std::optional<R> result;
        if constexpr (effect_call<F>::awaits) result.emplace(co_await fn());
        else result.emplace(fn());
        auto json = boost::json::value_from(*result);
        co_await save_effect(f, std::move(key), std::move(json));
        co_return std::move(*result);
    }
}

template <class T>
boost::asio::awaitable<T> ready(T v) {
    co_return std::move(v);
}

} // namespace detail

/// @brief Passed to nodes that take it as their second parameter.
/// Not thread safe: it belongs to one task attempt.
/// Use it only inside the node call it was given to, on the run's executor (the node's coroutine);
/// do not keep it past the node's return.
class context {
public:
    /// @brief The node's name.
    const std::string& node() const noexcept;
    /// @brief The superstep the node runs in (LangGraph's checkpoint step numbering).
    std::int64_t step() const noexcept;
    /// @brief The thread id of the run ("" without a checkpointer).
    const std::string& thread_id() const noexcept;
    /// @brief The checkpoint namespace ("" at the top level; "node:task" in a subgraph).
    const std::string& ns() const noexcept;
    /// @brief 1 for the first attempt, 2 for the first retry, ...
    int attempt() const noexcept;
    /// @brief The executor the run uses.
    const boost::asio::any_io_executor& executor() const noexcept;
    /// @brief The id of this call (one per invoke or stream, shared by its subgraphs), for logs
    /// and traces.
    const std::string& run_id() const noexcept;
    /// @brief The checkpoint this step started from ("" without a checkpointer).
    const std::string& checkpoint_id() const noexcept;

    /// @brief The caller's dependencies passed with the call (`run_config::runtime`), as type `T`.
    /// @throws graph_error(invalid_input) naming the node when the call passed none, or another type.
    /// @tparam T the exact type passed with `runtime_of(deps)` (no base-class conversion).
    /// @return the caller's object, which the caller keeps alive for the call.
    template <class T>
    const T& runtime() const {
        const auto& r = detail::runtime_of_call(*f_);
        if (!r || *r.type != typeid(T)) detail::throw_runtime_mismatch(*f_, boost::core::demangle(typeid(T).name()));
        return *static_cast<const T*>(r.object);
    }
    /// @brief Whether the call passed a runtime context.
    bool has_runtime() const noexcept { return bool(detail::runtime_of_call(*f_)); }

    /// @brief The long-term memory store of the run (`run_config::store`, else
    /// `compile_options::store`; in a subgraph, its parent's): items shared by every thread,
    /// `co_await ctx.store().search(ns, {.query = text, .limit = 5})`.
    /// @throws graph_error(no_store) naming the node when the run has no store.
    store::base_store& store() const {
        auto* s = detail::store_of_call(*f_);
        if (!s) detail::throw_no_store(*f_);
        return *s;
    }
    /// @brief Whether the run has a store.
    bool has_store() const noexcept { return detail::store_of_call(*f_) != nullptr; }

    /// @brief Reports the tokens a model call of this node used (`model`: the model's name) to
    /// the run's observer (`run_config::observer`), if it has one. `model_node` does it for its
    /// calls; a node that calls a model itself may.
    void report_usage(std::string_view model, const token_usage& usage) const { detail::report_usage(*f_, model, usage); }

    /// @brief Opens a span for a part of this node (a model or tool call) under the node
    /// attempt's span, for the run's tracing observer; without one (the default) it returns an
    /// empty span at the cost of a pointer test. `model_node`, `tool_node`, the ReAct agent and
    /// the supervisor's LLM router open theirs; a node that calls a model itself may:
    /// `auto span = ctx.start_span(span_kind::model, "chat gpt-4o", attrs);`, then
    /// `span.set("gen_ai.usage.input_tokens", n)`, and `span.fail(...)` when the call fails.
    /// @param kind what the span stands for (`model`, `tool` or `other`).
    /// @param name the span's name (OpenTelemetry's GenAI conventions: "chat {model}",
    /// "execute_tool {tool}").
    /// @param attributes its first attributes (copied by the observer).
    /// @return the open span; it ends when destroyed (or at `end()`).
    trace_span start_span(span_kind kind, std::string_view name, std::span<const span_attribute> attributes = {}) const {
        return detail::start_span(*f_, kind, name, attributes);
    }
    /// @brief The same, with the attributes written in place: `ctx.start_span(span_kind::tool,
    /// "execute_tool search", {{"gen_ai.tool.name", "search"}})`.
    trace_span start_span(span_kind kind, std::string_view name, std::initializer_list<span_attribute> attributes) const {
        return detail::start_span(*f_, kind, name, std::span<const span_attribute>(attributes.begin(), attributes.size()));
    }

    /// @brief Pauses the run for a human: `co_await ctx.interrupt<T>(payload)`. Returns the
    /// answer given on resume, converted to `T`; without an answer the node stops here, and it
    /// runs again from its start when the thread is resumed (earlier interrupt calls then return
    /// their stored answers, by position). The payload is converted to JSON before anything is
    /// awaited, so it may be a temporary.
    /// @throws thread_error(resume_type_mismatch) when the answer does not convert to `T`.
    /// @tparam T the answer's type (default: raw JSON); needs a JSON conversion.
    /// @tparam P the payload's type; needs a JSON conversion (shown to the human, streamed, saved).
    /// @param payload what the human is asked, converted to JSON at once.
    /// @return the answer to this interrupt on resume. Without one the node ends here (the
    /// `interrupt_signal` the engine catches) and the call returns `run_status::interrupted`; the thread
    /// needs a checkpointer to be resumed.
    template <class T = boost::json::value, class P>
    boost::asio::awaitable<T> interrupt(P&& payload) {
        static_assert(!detail::gcc12_unsafe_temporary<P>,
                      "ctx.interrupt(payload{...}): g++ 12 destroys a braced temporary that stands in a co_await "
                      "expression twice (a compiler bug in the calling coroutine; it crashes). Name the payload "
                      "first: `auto question = payload{...}; co_await ctx.interrupt<T>(question);`, or call "
                      "`ctx.interrupt_now<T>(payload{...})`, which needs no co_await");
        return detail::ready<T>(interrupt_now<T>(payload));
    }

    /// @brief The same as `interrupt`, without `co_await` (for plain nodes, and safe with any
    /// temporary as payload).
    /// @tparam T the answer's type (default: raw JSON).
    /// @tparam P the payload's type; needs a JSON conversion.
    /// @param payload what the human is asked.
    /// @return the answer on resume; throws `interrupt_signal` (let it pass) when there is none yet.
    template <class T = boost::json::value, class P>
    T interrupt_now(const P& payload) {
        const boost::json::value* answer = detail::next_resume(*f_);
        if (!answer) detail::raise_interrupt(*f_, boost::json::value_from(payload));
        if constexpr (std::is_same_v<T, boost::json::value>) {
            return *answer;
        } else {
            auto r = boost::json::try_value_to<T>(*answer);
            if (!r) detail::throw_resume_mismatch(*f_, boost::core::demangle(typeid(T).name()), *answer);
            return std::move(*r);
        }
    }

    /// @brief Runs a side effect at most once per task: `co_await ctx.task("send-email", fn)`.
    /// `fn()` returns a value (or an `awaitable` of one) convertible to JSON, or nothing. Its result
    /// is saved as the task's pending write the moment it returns; when the node runs again for
    /// the same task (resumed after an interrupt, retried, or continued after the process died),
    /// the call returns the saved result instead of running `fn` again. Calls are told apart by
    /// `name` and, for one name called several times in a node, by their order.
    /// `fn` is moved (or copied) into the call. Under g++ 12, pass a named function object or a
    /// lambda that captures only references (`[&]`): a temporary with captures by value stands in
    /// the `co_await` expression and g++ 12 destroys it twice.
    /// @throws thread_error(resume_type_mismatch) when a saved result does not convert to the
    /// type `fn` returns now.
    /// @tparam F a callable with no arguments returning a value with a JSON conversion, an awaitable of
    /// one, or void.
    /// @param name the side effect's name, unique within the node (repeated names are numbered by order).
    /// @param fn the effect; it runs on the node's executor. An exception it throws is not saved: it
    /// fails the attempt (and is retried per the node's policy, running `fn` again).
    /// @return an awaitable of `fn`'s result (the saved one on a re-run).
    template <class F>
    auto task(std::string_view name, F&& fn) {
        static_assert(!detail::gcc12_unsafe_callable<F>,
                      "co_await ctx.task(name, [captures by value]{...}): g++ 12 destroys the captures of a lambda "
                      "built in a co_await expression twice (a compiler bug; it crashes). Name the function first: "
                      "`auto send = [..]{...}; co_await ctx.task(\"send\", send);`, or capture by reference ([&])");
        using fn_type = std::remove_cvref_t<F>;
        using result = typename detail::effect_call<fn_type>::type;
        auto [key, saved] = detail::begin_effect(*f_, name);
        std::optional<boost::json::value> stored;
        if (saved) stored.emplace(*saved);
        return detail::run_effect<result>(*f_, std::move(key), std::move(stored), fn_type(std::forward<F>(fn)));
    }

    /// @brief Streams a custom event (stream mode `custom`).
    /// @tparam T any type with a JSON conversion.
    /// @param event the payload; converted and passed to the stream handler at once, and only when the
    /// call streams `custom` (otherwise nothing is converted).
    template <class T>
    void write(const T& event) {
        if (detail::wants_custom(*f_)) detail::emit_custom(*f_, boost::json::value_from(event));
    }

    /// @brief Streams an LLM token or message chunk (stream mode `messages`), as LangGraph's
    /// `[chunk, metadata]` pair; the metadata names the node, step, namespace, thread and run.
    /// A chat model node calls it for each token it receives:
    /// `ctx.write_message(boost::json::object{{"type", "AIMessageChunk"}, {"content", token}, {"id", id}})`.
    /// @tparam T any type with a JSON conversion.
    /// @param chunk the token or message chunk; dropped unless the call streams `messages`.
    template <class T>
    void write_message(const T& chunk) {
        if (detail::wants_messages(*f_)) detail::emit_message(*f_, boost::json::value_from(chunk));
    }
    /// @brief Whether the call streams `messages` (a model node may skip token streaming when not).
    bool streams_messages() const noexcept { return detail::wants_messages(*f_); }

private:
    friend struct detail::context_access;
    explicit context(detail::task_frame& f) noexcept : f_(&f) {}
    detail::task_frame* f_;
};

} // namespace stategraph
