#ifndef GLOBAL_SUPERVISOR_GRAPH_HPP
#define GLOBAL_SUPERVISOR_GRAPH_HPP

/// @file graph.hpp
/// @brief The Global Supervisor graph, composed from its seven stages, and the calls the
/// command line (and the tests) make on it: a chat turn, a resume, the state, the history, DOT.

#include "services.hpp"
#include "state.hpp"

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

namespace global_supervisor {

using supervisor_graph = stategraph::compiled_graph<supervisor_state>;

/// @brief The graph's input mapping: a caller's flat turn onto the namespaced state. The
/// conversation starts fresh with the message (session_init loads the rest); a chat or user id
/// left out keeps the thread's; `avatar_id` sets the reply's presentation avatar (kept for later
/// turns). Throws graph_error(invalid_input) when `model` names a model this supervisor does not serve.
stategraph::update<supervisor_state> state_update_of(services& svc, const supervisor_input& in,
                                                     const supervisor_state& now);
/// @brief The graph's output mapping: the identity fields, the reply, the pending question and
/// the nodes the call ran.
supervisor_output output_of(const supervisor_state& s, const stategraph::output_context& ctx);

/// @brief The graph, declared stage by stage with the DSL (not compiled). Its nodes use `svc`
/// (agent_execution runs under `svc.agents().retry`), which must outlive the graph.
stategraph::state_graph<supervisor_state> declare_graph(services& svc);

/// @brief The compiled graph with its checkpointer (a checkpoint after every node), its nodes
/// using `svc`, which must outlive it.
supervisor_graph build_graph(std::shared_ptr<stategraph::checkpoint::saver> checkpointer, services& svc);

/// @brief The checkpoint file kept beside a memory database: "<db>.checkpoints".
std::string checkpoint_path(const std::string& db_path);

/// @brief What one chat or resume call did.
struct turn_outcome {
    std::string thread_id;
    bool interrupted = false;
    bool drained = false; ///< stopped by SIGTERM (stategraph::request_drain) between two steps, all saved
    std::string reply;  ///< the answer, or the question the run waits on
    std::vector<stategraph::interrupt_info> interrupts;
    std::vector<std::string> nodes;  ///< nodes run by this call, in order (superstep, then name)
    std::vector<std::string> trace;  ///< the nodes the turn has run so far, across calls (see turn_trace)
    /// Nodes run first to finish a turn a killed call left (a crash or a full disk between two
    /// steps, a SIGTERM drain): chat finishes it before its message starts a new turn; resume,
    /// when no question waits any more, finishes it instead of answering (then `nodes` too).
    std::vector<std::string> recovered;
    supervisor_state values;
    supervisor_output output;  ///< what a caller gets back (the graph's output schema)
};

/// @brief The path of the thread's latest turn: the nodes that finished since its message came
/// in, in order (superstep, then name), across a pause and its resume. Read from the
/// checkpoints, each of which names the nodes of its superstep.
boost::asio::awaitable<std::vector<std::string>> turn_trace(const supervisor_graph& g, std::string thread_id);

/// @brief Stream modes a caller watches during a turn (`tasks`, `checkpoints`, `debug`, ...), and
/// where their events go. It must outlive the call.
struct turn_watch {
    stategraph::stream_mode modes = stategraph::stream_mode::none;
    stategraph::stream_handler on_event;
    /// told of the turn's spans, node times and usage (`--otlp`: an otlp_tracer); null: none
    stategraph::run_observer* observer = nullptr;
};

/// @brief Runs one turn: `message` on thread `thread_id` (created when new). A turn a killed
/// call left unfinished on the thread (steps to run, no question waiting) is finished first, so
/// that its answer and reply reach the memory before the new message (`turn_outcome::recovered`).
boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, std::string message,
                                          std::string user_id);
boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, std::string message,
                                          std::string user_id, const turn_watch& watch);
/// @brief Runs one turn given as the graph's input schema (a flat `supervisor_input`, as the
/// server takes it); the same recovery as above.
boost::asio::awaitable<turn_outcome> chat(const supervisor_graph& g, std::string thread_id, supervisor_input in,
                                          const turn_watch& watch);
/// @brief Answers the question the thread waits on. When no question waits but a killed call
/// left steps to run (the answer saved, the turn not finished), finishes them instead
/// (`turn_outcome::recovered`). Throws stategraph::thread_error (thread_not_found,
/// nothing_to_resume) when there is nothing to answer or finish.
boost::asio::awaitable<turn_outcome> resume(const supervisor_graph& g, std::string thread_id, std::string answer);
boost::asio::awaitable<turn_outcome> resume(const supervisor_graph& g, std::string thread_id, std::string answer,
                                            const turn_watch& watch);

/// @brief {"thread_id", "status", "reply", "interrupts": [{"id","value"}], "nodes": [...]}.
boost::json::object to_json(const turn_outcome& t);

/// @brief The thread's state as JSON: {"thread_id", "status", "next", "interrupts", "step",
/// "checkpoint_id", "trace" (see turn_trace), "values"}.
boost::asio::awaitable<boost::json::object> state_json(const supervisor_graph& g, std::string thread_id);
/// @brief The thread's checkpoints, newest first: [{"checkpoint_id", "step", "source", "writers", "next"}].
boost::asio::awaitable<boost::json::array> history_json(const supervisor_graph& g, std::string thread_id);

/// @brief DOT of the graph; with a thread, its latest turn's path (turn_trace) and its current
/// position highlighted.
boost::asio::awaitable<void> write_dot(const supervisor_graph& g, std::ostream& os, std::string thread_id = {});

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_GRAPH_HPP
