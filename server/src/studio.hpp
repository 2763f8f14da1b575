#pragma once
// The studio page's parts the server's routes use (private to stategraph::server): the page's
// files (server/src/studio.cpp embeds them, no build step) and Graphviz `dot -Tsvg` run as a
// child process with a timeout.

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace stategraph::server::studio {

/// @brief One file of the page.
struct asset {
    std::string_view body;
    const char* type; ///< its Content-Type
};

/// @brief The studio file `name` ("" or "index.html": the page; "app.js", "app.css"), or null.
const asset* find_asset(std::string_view name);

/// @brief What `render_svg` is asked: the program (on PATH unless it has a '/'), the DOT text and
/// how long the program may take.
struct svg_job {
    std::string program;
    std::string dot;
    std::chrono::milliseconds timeout{10'000};
};

/// @brief The answer of `render_svg`: 200 and the SVG, or an HTTP status and a detail: 501 when
/// the program cannot be run (not installed), 504 when it took longer than the timeout (it is
/// killed), 500 when it failed (its exit status and the start of its stderr).
struct svg_answer {
    unsigned status = 200;
    std::string body;
};

/// @brief Runs `job.program -Tsvg` on `job.dot` as a child process (stdin from an unlinked temporary
/// file, stdout read through a pipe on the caller's executor, so the server's thread never
/// blocks on it). Takes the job by unique_ptr: no by-value coroutine argument (g++ 12).
boost::asio::awaitable<svg_answer> render_svg(std::unique_ptr<svg_job> job);

} // namespace stategraph::server::studio
