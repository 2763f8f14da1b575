#pragma once
/// @file checkpoint/reserved.hpp
/// @brief Names the engine and every saver agree on, defined once: the reserved channels of
/// pending writes and checkpoint values, and the keys of a checkpoint's frontier and metadata.
/// A state field may not use a reserved channel name (they all start with "__").

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
inline constexpr std::string_view step = "step";
inline constexpr std::string_view source = "source";
inline constexpr std::string_view delta = "delta";     ///< a subgraph's writes so far
/// On an input checkpoint: {"__start__": the input}, so that a crash before the first step's
/// checkpoint loses no input (the input then stays to run, as LangGraph's `__start__` task).
inline constexpr std::string_view writes = "writes";
inline constexpr std::string_view start_task = "__start__"; ///< the task that applies an input

// -- keys inside the values above ----------------------------------------------------------------
inline constexpr std::string_view node = "node";
inline constexpr std::string_view arg = "arg";
inline constexpr std::string_view id = "id";
inline constexpr std::string_view value = "value";

} // namespace stategraph::checkpoint::reserved
