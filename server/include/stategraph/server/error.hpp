#pragma once
/// @file error.hpp
/// @brief `http_error`: a client mistake (or a server fault) answered with an HTTP status and
/// `{"detail": "..."}` naming what is wrong.

#include <stdexcept>
#include <string>

namespace stategraph::server {

/// @brief Thrown by a request handler; the server answers `status` with `{"detail": what()}`.
/// Every client mistake is a 4xx (the LangGraph SDK retries 5xx and would duplicate runs):
/// 400 malformed JSON or a request that cannot be served, 401 a missing or unknown API key,
/// 404 an unknown assistant, thread or run, 408 a client too slow to send its request, 409 a
/// conflict (busy thread, existing id), 413 a body over the limit, 422 a field of the wrong type
/// or value, 431 headers over the limit.
/// Thread safety: an immutable exception object.
class http_error : public std::runtime_error {
public:
    /// @param status the HTTP status answered (a 4xx for a client mistake).
    /// @param detail the `detail` text, naming what is wrong.
    http_error(unsigned status, const std::string& detail) : std::runtime_error(detail), status_(status) {}
    /// @brief The HTTP status code.
    unsigned status() const noexcept { return status_; }

private:
    unsigned status_;
};

} // namespace stategraph::server
