#pragma once
/// @file checkpoint/reserved.hpp
/// @brief Names the engine and every saver agree on, defined once: the reserved channels of
/// pending writes and checkpoint values, the keys of a checkpoint's frontier and metadata, and
/// the form of a subgraph's checkpoint namespace (`node:task|node:task`).
/// A state field may not use a reserved channel name (they all start with "__").

#include <string>
#include <string_view>

namespace stategraph::checkpoint::reserved {

// -- pending-write channels (besides state fields) --------------------------------------------
inline constexpr std::string_view goto_ = "__goto__";           ///< targets a Command chose
inline constexpr std::string_view send = "__send__";            ///< Sends a task returned
inline constexpr std::string_view interrupt = "__interrupt__";  ///< a task's pending interrupts
inline constexpr std::string_view resume = "__resume__";        ///< answers a task already received
inline constexpr std::string_view error = "__error__";          ///< why a task failed
inline constexpr std::string_view breakpoint = "__breakpoint__"; ///< a static breakpoint was hit here
inline constexpr std::string_view effects = "__task__";          ///< results of a task's ctx.task calls: {key: result}

// -- checkpoint channels ------------------------------------------------------------------------
/// The graph's shape lines, versioned by the graph's signature (a saver may keep one copy per graph).
inline constexpr std::string_view graph = "__graph__";

// -- keys of the frontier (what runs next) -----------------------------------------------------
inline constexpr std::string_view pull = "pull";         ///< triggered nodes
inline constexpr std::string_view push = "push";         ///< Sends: [{node, arg}]
inline constexpr std::string_view deferred = "deferred"; ///< deferred nodes waiting
inline constexpr std::string_view barriers = "barriers"; ///< join barriers
inline constexpr std::string_view seen = "seen";         ///< breakpoint marker

// -- keys of the metadata ------------------------------------------------------------------------
inline constexpr std::string_view writers = "writers"; ///< nodes whose writes made the checkpoint
/// the W3C trace context of the run that wrote the checkpoint (with a tracing observer only):
/// resuming the thread continues that trace
inline constexpr std::string_view traceparent = "traceparent";
inline constexpr std::string_view step = "step";
inline constexpr std::string_view source = "source";
inline constexpr std::string_view delta = "delta";     ///< a subgraph's writes so far
/// On an input checkpoint: {"__start__": the input}, so that a crash before the first step's
/// checkpoint loses no input (the input then stays to run, as LangGraph's `__start__` task).
inline constexpr std::string_view writes = "writes";
inline constexpr std::string_view start_task = "__start__"; ///< the task that applies an input
/// On an input checkpoint a Command wrote (`command.update` / `command.goto` as a call's input):
/// `true`. Its fields are values already applied, not an input still to run.
inline constexpr std::string_view command = "command";
/// The version of the state that wrote the checkpoint (`state_graph::set_state_version`), when
/// above 1; a checkpoint without it was written at version 1.
inline constexpr std::string_view state_version = "state_version";

// -- keys inside the values above ----------------------------------------------------------------
inline constexpr std::string_view node = "node";
inline constexpr std::string_view arg = "arg";
inline constexpr std::string_view id = "id";
inline constexpr std::string_view value = "value";

// -- subgraph namespaces ----------------------------------------------------------------------------
/// A subgraph run by task `task_id` of node `node` keeps its checkpoints in the namespace
/// `node:task_id`, below its parent's: `parent|node:task_id` (the root graph's namespace is "").
/// Streamed events name the same segments (`stream_event::ns`), and the server's event names
/// join them the same way (`updates|node:task_id`).
inline constexpr char ns_separator = '|';   ///< between the segments of a nested namespace
inline constexpr char task_separator = ':'; ///< between a segment's node and its task id

/// @brief The namespace segment of the subgraph run by task `task_id` of node `node`.
inline std::string task_segment(std::string_view node, std::string_view task_id) {
    std::string s;
    s.reserve(node.size() + 1 + task_id.size());
    s.append(node).push_back(task_separator);
    s.append(task_id);
    return s;
}

/// @brief The namespace `segment` below `parent` ("" is the root's, whose children are the bare segment).
inline std::string child_namespace(std::string_view parent, std::string_view segment) {
    std::string s(parent);
    if (!s.empty()) s.push_back(ns_separator);
    s.append(segment);
    return s;
}

} // namespace stategraph::checkpoint::reserved
