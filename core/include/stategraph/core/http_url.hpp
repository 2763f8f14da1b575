#pragma once
/// @file http_url.hpp
/// @brief An `http://` or `https://` URL split into what an HTTP client needs: where to connect
/// and what to send. One parser for every client in the project (the OpenAI-compatible model,
/// the MCP Streamable HTTP transport, the OTLP exporter); each adds its own rules on top (the
/// model refuses a query string, the exporter refuses https) and its own typed error.
///
/// Thread safety: the functions are pure; an `http_url` is a value.

#include <optional>
#include <string>
#include <string_view>

namespace stategraph {

/// @brief The parts of an absolute http(s) URL.
struct http_url {
    bool tls = false;    ///< `https`.
    std::string host;    ///< A host name (as written) or an IP literal, without IPv6 brackets.
    std::string port;    ///< Decimal, without leading zeros; the scheme's (80, 443) when absent.
    std::string path;    ///< From the first `/` after the host, up to `?`; empty when absent.
    std::string query;   ///< After `?`, without it; empty when absent.
    bool ipv6 = false;   ///< `host` is an IPv6 literal (written in brackets).

    /// @brief `http` or `https`.
    std::string_view scheme() const noexcept { return tls ? "https" : "http"; }
    /// @brief Whether `port` is the scheme's default.
    bool default_port() const noexcept { return port == (tls ? "443" : "80"); }
    /// @brief The Host header's value: the host (bracketed when IPv6), `:port` when not the default.
    std::string host_header() const;
    /// @brief The request target: the path (`/` when empty), then `?query` when there is one.
    std::string target() const;
    /// @brief `scheme://host_header()`, for messages and for building endpoints.
    std::string origin() const;
};

/// @brief What `parse_http_url` returns: the parts, or why the text was refused.
struct http_url_result {
    std::optional<http_url> url;  ///< Set when the text is a URL this parser accepts.
    std::string error;            ///< Otherwise the reason, e.g. "port out of range" (the text is not repeated).

    explicit operator bool() const noexcept { return url.has_value(); }
};

/// @brief Splits @p text, an absolute `http://` or `https://` URL (scheme in any case).
///
/// Refused, with a reason: another scheme or none, whitespace or control characters, user
/// information (`user@`), a fragment (`#`, never sent to a server), a missing host, a host
/// name with characters other than letters, digits, `-`, `.` and `_`, an IPv6 literal that
/// does not parse or is not closed, an empty, non-numeric or out-of-range (1 to 65535) port.
/// @param text the URL.
/// @return the parts, or the reason in `error`.
http_url_result parse_http_url(std::string_view text);

} // namespace stategraph
