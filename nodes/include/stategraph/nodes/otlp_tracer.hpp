#pragma once
/// @file otlp_tracer.hpp
/// @brief `otlp_tracer`: OpenTelemetry traces of runs, exported over OTLP/HTTP (JSON encoding)
/// to a collector the user names. Part of `stategraph::nodes`.
///
/// Pass it as a call's observer (`run_config::observer`), or as a server's tracer
/// (`server_options::tracer`): every run gives a span tree
///
///     invoke_agent <graph>                 the call (a resume continues its thread's trace)
///       step <n>                           each superstep
///         node <name>                      each node attempt (a retry is a second span)
///           chat <model>                   each model call (GenAI semantic conventions)
///           execute_tool <tool>            each tool call
///           invoke_agent <subgraph>        a subgraph's run, with its own steps
///
/// Spans are batched and sent by a thread of the tracer's own, never by the run: a collector
/// that is slow or down costs the run nothing and loses at most the spans that do not fit the
/// queue (counted in `stats()`). Without a tracer (the default) the engine builds no span.

#include <stategraph/run_observer.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace stategraph {

/// @brief Where and how an `otlp_tracer` exports.
struct otlp_options {
    /// the collector's traces URL, `http://host:port/v1/traces` (OTLP/HTTP; only `http://`)
    std::string endpoint = "http://127.0.0.1:4318/v1/traces";
    /// the resource's `service.name`
    std::string service_name = "stategraph";
    /// more resource attributes (`deployment.environment`, `service.instance.id`, ...)
    std::vector<std::pair<std::string, std::string>> resource_attributes;
    /// headers sent with every export (an `authorization` a collector asks for)
    std::vector<std::pair<std::string, std::string>> headers;
    /// finished spans wait at most this long before they are sent
    std::chrono::milliseconds flush_interval{1000};
    /// a batch of this many finished spans is sent at once
    std::size_t max_batch = 512;
    /// finished spans waiting beyond this many are dropped (and counted)
    std::size_t max_queue = 8192;
    /// one export (connect, send, answer) gives up after this long
    std::chrono::milliseconds timeout{5000};

    /// @brief The options OpenTelemetry's environment variables give:
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the URL as is), else `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// plus `/v1/traces`; `OTEL_SERVICE_NAME`; `OTEL_EXPORTER_OTLP_HEADERS` and
    /// `OTEL_RESOURCE_ATTRIBUTES` (`key=value,key=value`, values percent-decoded).
    /// @return the defaults where a variable is not set.
    /// Thread safety: reads the environment; do not call while another thread changes it.
    static otlp_options from_environment();
};

/// @brief What an `otlp_tracer` did so far.
struct otlp_stats {
    std::uint64_t spans_ended = 0;    ///< spans finished by runs
    std::uint64_t spans_exported = 0; ///< spans the collector accepted (HTTP 2xx)
    std::uint64_t spans_dropped = 0;  ///< spans lost: the queue was full, or an export failed
    std::uint64_t exports_failed = 0; ///< export requests that failed (connection, timeout, non-2xx)
    std::string last_error;           ///< the last failure, naming the endpoint ("" when none)
};

/// @brief A `run_observer` that turns runs into OpenTelemetry spans and exports them over
/// OTLP/HTTP with the JSON encoding (`Content-Type: application/json`, the body of an
/// `ExportTraceServiceRequest`). Span attributes follow OpenTelemetry's GenAI conventions for
/// model and tool calls (`gen_ai.operation.name`, `gen_ai.request.model`,
/// `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
/// `gen_ai.response.finish_reasons`, `gen_ai.tool.name`, `gen_ai.tool.call.id`, `error.type`)
/// and name the graph's parts with `stategraph.*` (node, step, task id, attempt, status).
/// Thread safety: every member function may be called from any thread (runs on several
/// threads report to one tracer).
class otlp_tracer final : public run_observer {
public:
    /// @param options where to export; the tracer's thread starts at once (nothing is sent
    /// before a span ends).
    /// @throws nodes::agent_error(bad_otlp_endpoint) naming the URL when `endpoint` is not an
    /// `http://host[:port]/path` URL, or a limit is 0.
    explicit otlp_tracer(otlp_options options = otlp_options::from_environment());
    /// @brief Sends what has ended (waiting at most `options.timeout`), then stops the thread.
    ~otlp_tracer() override;
    otlp_tracer(const otlp_tracer&) = delete;
    otlp_tracer& operator=(const otlp_tracer&) = delete;

    /// @brief Sends every span that has ended so far, and waits until the collector answered.
    /// @param within how long to wait at most.
    /// @return whether the spans were sent and accepted within that time.
    bool flush(std::chrono::milliseconds within = std::chrono::seconds(5));
    /// @brief Counts and the last error.
    otlp_stats stats() const;
    /// @brief The options it exports with.
    const otlp_options& options() const noexcept;

    bool traces() const noexcept override { return true; }
    std::uint64_t on_span_begin(const span_start& s) override;
    void on_span_end(std::uint64_t id, const span_end& e) override;
    std::string trace_parent(std::uint64_t id) const override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace stategraph
