#pragma once
/// @file drain.hpp
/// @brief Graceful drain: stop every run of this process at its next superstep boundary, with
/// everything saved, so that the process can exit and the threads go on later.
/// @code
/// std::signal(SIGTERM, [](int) { stategraph::request_drain(); });
/// auto r = co_await app.invoke(input, cfg);
/// if (r.drained()) { /* r.next runs when the thread is invoked again (continue_run) */ }
/// @endcode
/// A step that is running finishes (its nodes are not cancelled) and its checkpoint is written;
/// then the call returns `run_status::drained`. Subgraphs finish their own run as part of the
/// parent's step. A call made while a drain is requested runs its first step, then stops (so a
/// resume's answer is used and saved, never dropped).

namespace stategraph {

/// @brief Asks every run of this process to stop at its next superstep boundary.
/// Async-signal-safe: may be called from a signal handler.
/// Thread safety: any thread, and signal handlers (it sets an atomic flag).
void request_drain() noexcept;
/// @brief Whether a drain was requested (and not cancelled).
bool drain_requested() noexcept;
/// @brief Lets runs started from now on go to their end again.
/// Thread safety: any thread.
void cancel_drain() noexcept;

} // namespace stategraph
