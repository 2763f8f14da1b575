#pragma once
/// @file stream.hpp
/// @brief What a run can stream: values, updates, custom events, tasks, checkpoints, messages
/// and debug events.

#include <boost/json/value.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace stategraph {

/// @brief The stream modes, as LangGraph's (combine with `|`).
enum class stream_mode : unsigned {
    none = 0,
    values = 1,       ///< the whole state after the input and after each superstep
    updates = 2,      ///< each node's update, as `{node: update}`
    custom = 4,       ///< events a node writes with `context::write`
    debug = 8,        ///< `tasks` and `checkpoints` events in LangGraph's debug envelope:
                      ///< `{"step", "type": "task" | "task_result" | "checkpoint", "timestamp", "payload"}`
    tasks = 16,       ///< a task starting `{id, name, input, triggers, interrupts}` and its result
                      ///< `{id, name, result, interrupts, error}` (once per task, retries included)
    checkpoints = 32, ///< each checkpoint as it is written (with a checkpointer), as `get_state` shows it:
                      ///< `{config, parent_config, values, metadata, next, tasks}`; a resume first
                      ///< shows the checkpoint it starts from
    messages = 64,    ///< LLM tokens or messages a node writes with `context::write_message`, as
                      ///< `[chunk, {langgraph_node, langgraph_step, ...}]`
};
constexpr stream_mode operator|(stream_mode a, stream_mode b) {
    return static_cast<stream_mode>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/// @brief Whether `set` includes `m`.
/// @param set modes combined with `|`.
/// @param m one mode.
constexpr bool has_mode(stream_mode set, stream_mode m) { return (static_cast<unsigned>(set) & static_cast<unsigned>(m)) != 0; }

/// @brief One streamed event. `ns` is empty for the graph itself and names the subgraph
/// task (`"<node>:<task id>"`) for events from inside a subgraph.
/// Thread safety: a plain value, passed to the handler by const reference and valid only during
/// that call (copy it to keep it).
struct stream_event {
    stream_mode mode = stream_mode::none;
    std::vector<std::string> ns;
    std::int64_t step = 0;
    std::string node;          ///< the node (updates, custom, tasks, messages), or "" (values, checkpoints)
    boost::json::value data;   ///< the state, the update, the custom payload, the task, checkpoint or debug record
    bool cached = false;       ///< an update replayed from saved writes on resume
    bool interrupt = false;    ///< an `__interrupt__` updates event
};

/// @brief The handler `compiled_graph::stream` calls. Thread safety: called one event at a time,
/// on the run's executor; never concurrently for one call.
using stream_handler = std::function<void(const stream_event&)>;

} // namespace stategraph
