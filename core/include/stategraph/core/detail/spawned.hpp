#pragma once
/// @file detail/spawned.hpp
/// @brief The completion handler of a coroutine spawned on its own (`co_spawn(ex, loop(),
/// report_to("what"))`), in place of `detached`, which drops an escaped exception silently.

#include <exception>
#include <functional>
#include <string>

namespace stategraph::detail {

/// @brief Reports an exception that ended a spawned coroutine, as one line naming it:
/// "<what> stopped on an error: <what()>", to `log`, or to standard error when `log` is empty.
/// A coroutine that ends normally reports nothing.
/// Thread safety: called once, on the executor the coroutine ran on; `log` must be safe there.
struct report_to {
    std::string what;
    std::function<void(const std::string&)> log;

    explicit report_to(std::string what, std::function<void(const std::string&)> log = {})
        : what(std::move(what)), log(std::move(log)) {}

    void operator()(std::exception_ptr e) const {
        if (e) report(what, e, log);
    }
    template <class T>
    void operator()(std::exception_ptr e, const T&) const {
        if (e) report(what, e, log);
    }

    /// The line written for `e` (also what `report` writes).
    static std::string line(const std::string& what, std::exception_ptr e);
    /// Writes `line(what, e)` to `log`, or to standard error (also when `log` throws).
    static void report(const std::string& what, std::exception_ptr e, const std::function<void(const std::string&)>& log);
};

} // namespace stategraph::detail
