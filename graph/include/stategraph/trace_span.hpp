#pragma once
/// @file trace_span.hpp
/// @brief Spans, as a tracing `run_observer` is told of them: what kind a span is, its
/// attributes, how it started and ended, and `trace_span`, the handle a node holds around a
/// model or tool call (`context::start_span`). Without a tracing observer a `trace_span` is
/// empty and every call on it does nothing.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace stategraph {

class run_observer;

/// @brief What a span stands for.
enum class span_kind : unsigned char {
    run,   ///< one call of a graph (invoke / stream), or a subgraph's run inside a node
    step,  ///< one superstep
    node,  ///< one attempt of a node's task (a retry is a second span)
    model, ///< one model call (`model_node`, the supervisor's LLM router, or a node's own)
    tool,  ///< one tool call (`tool_node`, the ReAct agent)
    other, ///< anything else a node marks
};

/// @brief A span attribute's value: text, an integer, a floating-point number, a flag or a list
/// of texts (OpenTelemetry's attribute types). It refers to its data; the observer copies what
/// it keeps.
using span_value = std::variant<std::string_view, std::int64_t, double, bool, std::span<const std::string_view>>;

/// @brief One attribute of a span (`key`: an OpenTelemetry attribute name such as
/// `gen_ai.request.model`).
struct span_attribute {
    std::string_view key;
    span_value value;
};

/// @brief A span as it starts. Views: valid during the observer's call only.
struct span_start {
    span_kind kind = span_kind::other;
    std::string_view name;
    /// the enclosing span (the value `on_span_begin` returned for it); 0: none
    std::uint64_t parent = 0;
    /// with no `parent`: a W3C `traceparent` to continue (a caller's, or the one an interrupted
    /// run of the thread saved); "" starts a new trace
    std::string_view remote_parent;
    std::span<const span_attribute> attributes;
};

/// @brief A span as it ends. Views: valid during the observer's call only.
struct span_end {
    bool failed = false;
    std::string_view error_type; ///< with `failed`: the error's kind (OpenTelemetry's `error.type`)
    std::string_view message;    ///< with `failed`: what went wrong
    std::span<const span_attribute> attributes; ///< set while the span was open
};

/// @brief An open span of a node: a model or tool call, or any part of a node worth seeing in a
/// trace. `context::start_span` gives one; it ends when `end()` is called or it is destroyed.
/// Attributes set on it go with its end. Empty (every call does nothing) when the run has no
/// tracing observer. Move-only. Thread safety: one object belongs to one node call.
class trace_span {
public:
    trace_span() noexcept = default;
    /// @param observer the tracing observer that opened the span.
    /// @param id what `observer.on_span_begin` returned (0: an empty span).
    trace_span(run_observer& observer, std::uint64_t id) noexcept : o_(id ? &observer : nullptr), id_(id) {}
    trace_span(trace_span&& other) noexcept { swap(other); }
    trace_span& operator=(trace_span&& other) noexcept {
        trace_span(std::move(other)).swap(*this);
        return *this;
    }
    trace_span(const trace_span&) = delete;
    trace_span& operator=(const trace_span&) = delete;
    ~trace_span() { end(); }

    /// @brief Whether a tracing observer holds this span.
    explicit operator bool() const noexcept { return o_ != nullptr; }
    /// @brief The observer's id of the span (0: empty), e.g. the parent of a span of one's own.
    std::uint64_t id() const noexcept { return id_; }

    /// @brief Sets an attribute sent with the span's end (a key set twice keeps the last value).
    /// @param key an OpenTelemetry attribute name, e.g. `gen_ai.response.finish_reasons`.
    /// @param value text, an integer, a floating-point number, a flag or a list of texts.
    void set(std::string_view key, std::string_view value) {
        if (o_) put(key, std::string(value));
    }
    void set(std::string_view key, const char* value) {
        if (o_) put(key, std::string(value ? value : ""));
    }
    void set(std::string_view key, const std::string& value) {
        if (o_) put(key, value);
    }
    void set(std::string_view key, bool value) {
        if (o_) put(key, value);
    }
    void set(std::string_view key, double value) {
        if (o_) put(key, value);
    }
    template <class I>
        requires(std::is_integral_v<I> && !std::is_same_v<I, bool>)
    void set(std::string_view key, I value) {
        if (o_) put(key, static_cast<std::int64_t>(value));
    }
    void set(std::string_view key, std::vector<std::string> values) {
        if (o_) put(key, std::move(values));
    }

    /// @brief Marks the span failed (its status: error).
    /// @param error_type the error's kind (`error.type`: an error code's name or an exception type).
    /// @param message what went wrong.
    void fail(std::string_view error_type, std::string_view message) {
        if (!o_) return;
        failed_ = true;
        error_type_ = error_type;
        message_ = message;
    }

    /// @brief Ends the span now (later calls do nothing).
    void end() noexcept;

    void swap(trace_span& other) noexcept {
        std::swap(o_, other.o_);
        std::swap(id_, other.id_);
        attributes_.swap(other.attributes_);
        std::swap(failed_, other.failed_);
        error_type_.swap(other.error_type_);
        message_.swap(other.message_);
    }

private:
    using owned_value = std::variant<std::string, std::int64_t, double, bool, std::vector<std::string>>;
    void put(std::string_view key, owned_value value);

    run_observer* o_ = nullptr;
    std::uint64_t id_ = 0;
    std::vector<std::pair<std::string, owned_value>> attributes_;
    bool failed_ = false;
    std::string error_type_, message_;
};

} // namespace stategraph
