#pragma once
/// @file traceparent.hpp
/// @brief W3C Trace Context's `traceparent`: the one check every part that reads one shares
/// (the server's request header, `run_config::traceparent`, `otlp_tracer`).

#include <string_view>

namespace stategraph {

/// @brief Whether @p text is a version-00 W3C `traceparent`, `00-<32 hex>-<16 hex>-<2 hex>`, lower
/// case, with a trace id and a parent id that are not all zeros (a malformed one is to be
/// ignored, as the standard asks).
/// Thread safety: pure; any thread.
bool is_traceparent(std::string_view text) noexcept;

} // namespace stategraph
