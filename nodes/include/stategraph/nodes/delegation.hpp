#ifndef STATEGRAPH_NODES_DELEGATION_HPP
#define STATEGRAPH_NODES_DELEGATION_HPP

/// @file
/// @brief `worker_supervisor<&S::messages>(model, workers)` (seed 002): a supervisor agent whose
/// model delegates with the tools `delegate(worker, instructions)` and `forward_message(worker)`.

#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/model_node.hpp>
#include <stategraph/nodes/react_agent.hpp>
#include <stategraph/nodes/tool.hpp>
#include <stategraph/nodes/tool_node.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/parse.hpp>

#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief A named worker the supervisor delegates to: it gets the supervisor's instructions and
/// answers with text. It may be anything that runs here: a react_agent's compiled graph called
/// inside, a plain function, a remote call.
/// Thread safety: a plain value; once given to `worker_supervisor` it is shared const and `run` is
/// called from every run (and several delegations of one answer) at once, on the tools node's
/// executor.
struct worker {
    std::string name;         ///< @brief An identifier: the model writes it as the `worker` argument.
    std::string description;  ///< @brief What the worker is good at (in the supervisor's prompt).
    /// @brief Runs the worker with the supervisor's instructions and returns its answer; an
    /// exception it throws becomes a `worker_error`.
    std::function<boost::asio::awaitable<std::string>(std::string instructions)> run;
};

/// @brief A delegated worker threw. The tools node fails with it (the engine wraps it in
/// `node_error`) after the turn's other delegations finish, so their results are journaled.
class worker_error : public std::system_error {
public:
    /// @param worker the worker's name.
    /// @param what the worker's exception's message.
    worker_error(std::string worker, std::string const& what)
        : std::system_error(make_error_code(errc::worker_failed), "worker '" + worker + "' failed: " + what),
          worker_(std::move(worker)) {}
    /// @brief The worker's name.
    std::string const& worker() const noexcept { return worker_; }

private:
    std::string worker_;
};

/// @brief Settings of a worker_supervisor.
/// Thread safety: a plain value, copied by `worker_supervisor`.
struct worker_supervisor_options {
    std::string name = "worker_supervisor";  ///< @brief Graph name (drawings, error messages).
    std::string instructions;                ///< @brief The supervisor's own instructions (prepended).
    int max_steps = 10;                      ///< @brief Model calls per user turn, as react_agent's.
    /// @brief Retry policy of the tools node: a retry re-runs only the delegations that did not finish.
    std::optional<retry_policy> worker_retry;
    std::string delegate_tool = "delegate";
    std::string forward_tool = "forward_message";
    /// @brief How the graph is compiled (a checkpointer to run it as the top graph).
    compile_options compile;
};

namespace detail {

inline bool is_identifier(std::string const& s) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    for (char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
}

/// @brief Every problem of @p workers at once. @throws agent_error(errc::bad_worker).
inline void check_workers(std::string const& supervisor, std::vector<worker> const& workers) {
    std::vector<problem> bad;
    if (workers.empty()) bad.push_back({errc::bad_worker, "worker_supervisor '" + supervisor + "': no worker"});
    for (std::size_t i = 0; i < workers.size(); ++i) {
        auto const& w = workers[i];
        std::string const who = "worker_supervisor '" + supervisor + "': worker #" + std::to_string(i + 1) + " '" + w.name + "'";
        if (!is_identifier(w.name)) bad.push_back({errc::bad_worker, who + ": the name must be an identifier ([A-Za-z_][A-Za-z0-9_]*)"});
        if (!w.run) bad.push_back({errc::bad_worker, who + ": no run function"});
        for (std::size_t j = 0; j < i; ++j)
            if (workers[j].name == w.name) bad.push_back({errc::bad_worker, who + ": duplicate name"});
    }
    if (!bad.empty()) throw agent_error(std::move(bad));
}

using worker_table = std::shared_ptr<std::vector<worker> const>;

/// @brief The worker named by the call's `worker` argument. @throws agent_error (a tool message).
inline worker const& find_worker(worker_table const& table, boost::json::object const& args) {
    auto const* v = args.if_contains("worker");
    if (!v || !v->is_string()) throw agent_error(errc::bad_tool_arguments, "the argument 'worker' (a string) is missing");
    std::string names;
    for (auto const& w : *table) {
        if (w.name == v->get_string()) return w;
        names += (names.empty() ? "" : ", ") + w.name;
    }
    throw agent_error(errc::unknown_worker,
                      "unknown worker '" + std::string(v->get_string()) + "'; the workers are: " + names);
}

inline std::string arg_worker(std::string const& arguments) {
    boost::system::error_code ec;
    auto v = boost::json::parse(arguments, ec);
    if (ec || !v.is_object()) return {};
    auto const* w = v.as_object().if_contains("worker");
    return w && w->is_string() ? std::string(w->get_string()) : std::string();
}

/// @brief The tool message answering the call @p id, if any.
inline chat_message const* answer_of(std::vector<chat_message> const& list, std::string const& id) {
    for (auto const& m : list)
        if (m.role == "tool" && m.tool_call_id == id) return &m;
    return nullptr;
}

/// @brief The worker a successful forward call of the last tool round names ("" if none).
inline std::string forwarded_worker(std::vector<chat_message> const& list, std::string const& forward_tool) {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
        if (it->role != "assistant" || it->tool_calls.empty()) continue;
        for (auto const& c : it->tool_calls)
            if (c.name == forward_tool)
                if (auto const* a = answer_of(list, c.id); a && a->error.empty()) return arg_worker(c.arguments);
        return {};
    }
    return {};
}

/// @brief The last successful answer of @p worker to a delegate call, if any.
inline chat_message const* last_output(std::vector<chat_message> const& list, std::string const& worker,
                                       std::string const& delegate_tool) {
    chat_message const* found = nullptr;
    for (auto const& m : list)
        if (m.role == "assistant")
            for (auto const& c : m.tool_calls)
                if (c.name == delegate_tool && arg_worker(c.arguments) == worker)
                    if (auto const* a = answer_of(list, c.id); a && a->error.empty()) found = a;
    return found;
}

}  // namespace detail

/// @brief The two tools of a worker_supervisor: `delegate(worker, instructions)` runs the
/// worker (journaled with `ctx.task` by the tool node, so it runs at most once per call, and
/// a failure fails the node: see tool::failure_stops_node) and `forward_message(worker)`, which
/// hands the worker's last answer to the user verbatim. An unknown worker answers the model with
/// an `unknown_worker` tool message.
/// @param workers the workers: identifiers as names, distinct, each with a `run`
/// (`agent_error(errc::bad_worker)` listing every problem otherwise).
/// @param options the supervisor's name (for messages) and the two tools' names.
/// Thread safety: a pure function; any thread. The tools share the workers' table, const.
inline std::vector<tool> delegation_tools(std::vector<worker> workers, worker_supervisor_options const& options = {}) {
    detail::check_workers(options.name, workers);
    auto table = std::make_shared<std::vector<worker> const>(std::move(workers));
    std::string list;
    for (auto const& w : *table) list += "\n- " + w.name + ": " + w.description;
    auto delegate = [table](boost::json::object const& args) -> boost::asio::awaitable<std::string> {
        worker const& w = detail::find_worker(table, args);
        auto const* text = args.if_contains("instructions");
        if (!text || !text->is_string())
            throw agent_error(errc::bad_tool_arguments, "delegate: the argument 'instructions' (a string) is missing");
        std::string instructions(text->get_string());
        std::string what;
        try {
            auto pending = w.run(std::move(instructions));
            auto answer = co_await std::move(pending);
            co_return answer;
        } catch (std::exception const& e) {
            what = e.what();
        } catch (...) {
            what = "unknown exception";
        }
        throw worker_error(w.name, what);
    };
    auto forward = [table](boost::json::object const& args) -> std::string {
        worker const& w = detail::find_worker(table, args);
        return "The last answer of worker '" + w.name + "' goes to the user verbatim.";
    };
    auto schema_delegate = boost::json::parse(
        R"({"type":"object","properties":{"worker":{"type":"string"},"instructions":{"type":"string"}},"required":["worker","instructions"]})");
    auto schema_forward =
        boost::json::parse(R"({"type":"object","properties":{"worker":{"type":"string"}},"required":["worker"]})");
    std::vector<tool> tools;
    tools.push_back(tool(options.delegate_tool, "Give a worker a task; answers with the worker's result. Workers:" + list,
                         std::move(schema_delegate), delegate)
                        .subject("worker")
                        .failure_stops_node());
    tools.push_back(tool(options.forward_tool, "Return a worker's last answer to the user verbatim and end the turn.",
                         std::move(schema_forward), forward)
                        .subject("worker"));
    return tools;
}

/// @brief A supervisor agent over the state holding `Messages` (seed 002), as a compiled graph:
///
///     START --> supervisor --(tool calls)--> workers --(forward_message)--> forward --> END
///                   ^  |                        |
///                   |  +----(no tool call)------+--> END
///                   +---------------------------+ (otherwise)
///
/// The model gets `options.instructions` and the workers' descriptions, and the tools
/// delegation_tools() builds. Several delegate calls in one model answer run in parallel. Each
/// finished worker's answer is saved as a side effect of the task (`ctx.task`): when a worker
/// throws, the `workers` node fails with worker_error (`errc::worker_failed`, naming it) after the
/// others finish; a retry (`options.worker_retry`), or running the thread again (a
/// `continue_input` with a checkpointer, in this process or another), re-runs only the workers
/// that did not finish. `forward_message(worker)` ends the turn with that worker's last answer as
/// the assistant's message (`errc::no_worker_output` if it has none). The step limit is
/// react_agent's (`errc::step_limit`).
/// @throws agent_error(errc::bad_worker) listing every bad worker.
/// @tparam Messages `&S::messages`, a `std::vector<chat_message>` field with a reducer.
/// @param model the supervisor's chat model, shared by every run.
/// @param workers the workers (checked as by `delegation_tools`).
/// @param options name, instructions, step limit, the workers node's retry policy, tool names and
/// `compile_options` (give a checkpointer to run it as the top graph).
/// @return the compiled graph.
/// Thread safety: call from any thread; the graph it returns is a `compiled_graph` (shareable).
template <auto Messages>
compiled_graph<typename member_traits<Messages>::state_type> worker_supervisor(std::shared_ptr<chat_model> model,
                                                                               std::vector<worker> workers,
                                                                               worker_supervisor_options options = {}) {
    static_assert(messages_field<Messages>,
                  "worker_supervisor<&S::field>(model, workers): the field must be a "
                  "std::vector<stategraph::nodes::chat_message> member of the state");
    using S = typename member_traits<Messages>::state_type;
    std::string prompt = options.instructions;
    prompt += std::string(prompt.empty() ? "" : "\n\n") + "You supervise workers. Call " + options.delegate_tool +
              "(worker, instructions) to give one a task (several calls in one answer run in parallel), then " +
              "answer the user, or call " + options.forward_tool + "(worker) to give the user that worker's answer as is.";
    auto tools = tool_node<Messages>(delegation_tools(std::move(workers), options));
    model_options mo;
    mo.system_prompt = std::move(prompt);
    mo.tools = tools.definitions();
    react_options limits;
    limits.name = options.name;
    limits.max_steps = options.max_steps;
    auto call = model_node<Messages>(std::move(model), std::move(mo));
    auto agent = detail::step_limited<Messages>(std::move(call), limits);
    auto forward = [name = options.name, fwd = options.forward_tool, del = options.delegate_tool](S const& s) {
        auto const& list = s.*Messages;
        std::string const who = detail::forwarded_worker(list, fwd);
        auto const* out = detail::last_output(list, who, del);
        if (!out)
            throw agent_error(errc::no_worker_output, "worker_supervisor '" + name + "': " + fwd + "('" + who +
                                                          "'): the worker has not answered in this conversation");
        std::vector<chat_message> last(1, chat_message{"assistant", out->content});
        return update<S>{}.template set<Messages>(std::move(last));
    };
    auto after_tools = [forward_tool = options.forward_tool](S const& s) {
        return detail::forwarded_worker(s.*Messages, forward_tool).empty() ? std::string("supervisor")
                                                                            : std::string("forward");
    };
    state_graph<S> g(options.name);
    g.add_node("supervisor", std::move(agent));
    node_options tool_options;
    tool_options.retry = options.worker_retry;
    g.add_node("workers", std::move(tools), tool_options);
    g.add_node("forward", std::move(forward));
    g.add_edge(START, "supervisor");
    std::map<std::string, std::string> routes{{"tools", "workers"}, {END, END}};
    g.add_conditional_edges("supervisor", tools_condition<Messages>, routes);
    std::map<std::string, std::string> after{{"supervisor", "supervisor"}, {"forward", "forward"}};
    g.add_conditional_edges("workers", after_tools, after);
    g.add_edge("forward", END);
    return g.compile(options.compile);
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_DELEGATION_HPP
