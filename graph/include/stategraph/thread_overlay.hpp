#pragma once
/// @file thread_overlay.hpp
/// @brief What a thread did, drawn on its graph: `thread_overlay(graph, thread, checkpoint)` gives
/// the `dot_options` of `write_dot` for the path the run took up to a chosen checkpoint, the next
/// nodes, the nodes waiting on an interrupt and the nodes that failed.

#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/topology.hpp>

#include <boost/asio/awaitable.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

namespace stategraph {

/// @brief The overlay of a thread at checkpoint `checkpoint_id` (the latest when empty), from its
/// history `history` (newest first, as `get_state_history` gives it): a list of snapshots with
/// `checkpoint_id`, `next`, `tasks`, `step`, `source` and `metadata` (a `state_snapshot<S>`, or
/// the server's type-erased one).
/// @throws thread_error `thread_not_found` when the history is empty, `checkpoint_not_found` when
/// the checkpoint is not in it (both name the thread, then the checkpoint).
template <class History>
dot_options overlay_of_history(const History& history, const std::string& tid, const std::string& cid) {
    if (history.empty()) throw thread_error(errc::thread_not_found, "thread '" + tid + "' has no checkpoint", {tid});
    auto at = history.begin();
    if (!cid.empty()) {
        at = std::find_if(history.begin(), history.end(), [&](const auto& s) { return s.checkpoint_id == cid; });
        if (at == history.end())
            throw thread_error(errc::checkpoint_not_found, "checkpoint '" + cid + "' is not on thread '" + tid + "'", {tid, cid});
    }
    dot_options o;
    o.current = at->next;
    for (const auto& t : at->tasks) {
        if (!t.interrupts.empty()) o.interrupted.push_back(t.name);
        if (t.error) o.failed.push_back(t.name);
    }
    // The run that reached the checkpoint: its supersteps back to the run's input, oldest first;
    // the nodes of one superstep ran in parallel and are listed by name.
    std::vector<std::vector<std::string>> steps;
    for (auto s = at; s != history.end() && s->source != "input"; ++s) {
        const auto* w = s->metadata.if_contains(checkpoint::reserved::writers);
        if (!w || !w->is_array()) continue;
        std::vector<std::string> names;
        for (const auto& n : w->get_array())
            if (n.is_string() && n.get_string() != START) names.emplace_back(n.get_string());
        std::sort(names.begin(), names.end());
        steps.push_back(std::move(names));
    }
    for (auto s = steps.rbegin(); s != steps.rend(); ++s) o.visited.insert(o.visited.end(), s->begin(), s->end());
    o.caption = "thread " + tid + " at checkpoint " + at->checkpoint_id + " (step " + std::to_string(at->step) + ")";
    return o;
}

namespace detail {

template <class S>
struct overlay_request {
    compiled_graph<S> graph;
    std::string thread_id;
    std::string checkpoint_id;
};

template <class S>
boost::asio::awaitable<dot_options> make_overlay(std::unique_ptr<overlay_request<S>> req) {
    auto history = co_await req->graph.get_state_history(req->thread_id); // newest first
    co_return overlay_of_history(history, req->thread_id, req->checkpoint_id);
}

} // namespace detail

/// @brief The overlay of thread `thread_id` at checkpoint `checkpoint_id` (the latest when empty),
/// for `write_dot(os, graph.shape(), overlay)`.
/// @throws thread_error `thread_not_found` for a thread with no checkpoint, `checkpoint_not_found`
/// for a checkpoint that is not on the thread (both name the thread, then the checkpoint).
template <class S>
boost::asio::awaitable<dot_options> thread_overlay(const compiled_graph<S>& graph, std::string thread_id,
                                                   std::string checkpoint_id = {}) {
    // Not a coroutine itself: its by-value arguments are moved into the request first (g++ 12).
    auto req = std::make_unique<detail::overlay_request<S>>(detail::overlay_request<S>{graph, std::move(thread_id), std::move(checkpoint_id)});
    return detail::make_overlay<S>(std::move(req));
}

} // namespace stategraph
