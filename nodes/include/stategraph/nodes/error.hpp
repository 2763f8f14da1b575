#ifndef STATEGRAPH_NODES_ERROR_HPP
#define STATEGRAPH_NODES_ERROR_HPP

/// @file
/// @brief Typed errors of the node kinds in stategraph::nodes (tool node, ReAct agent,
/// supervisor): an `errc` enum in the "stategraph.nodes" category and the exception `agent_error`.

#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief What went wrong in a node kind of stategraph::nodes.
enum class errc {
    // -- tool calls: recorded in the tool message (chat_message::error), the run goes on -------
    unknown_tool = 1,    ///< @brief The model called a tool that the tool node does not have.
    bad_tool_arguments,  ///< @brief The call's arguments are not a JSON object.
    tool_failed,         ///< @brief The tool threw.
    tool_denied,         ///< @brief A human (or a permission rule) refused the call.
    bad_permission_rule, ///< @brief A permission rule is not `Tool` or `Tool(pattern)`.
    // -- agents: thrown as agent_error ------------------------------------------------------
    step_limit = 20,     ///< @brief A ReAct agent called the model max_steps times and still got tool calls.
    no_tool_calls,       ///< @brief A tool node ran, but the last message asks for no tool call.
    circuit_open,        ///< @brief The agent's circuit breaker is open: the call failed fast without running.
    retries_exhausted,   ///< @brief A node with a failure_policy failed its last retry, and the policy neither escalates nor re-plans.
    // -- supervisor: compile() problems (all reported at once) and run-time errors -----------
    missing_description = 40, ///< @brief An intent has no description, and an LLM router must read it.
    router_and_route,         ///< @brief Both an LLM `router` and a deterministic `route` are given.
    no_router,                ///< @brief Neither a `router` nor a `route` is given.
    unknown_intent,           ///< @brief A classifier, router, route or `next` named an intent that does not exist.
    duplicate_intent,         ///< @brief Two intents have one name (or no name).
    max_iterations,           ///< @brief The supervisor looped max_iterations times without reaching END.
    intent_cycle,             ///< @brief An intent was chosen again within one branch of the run.
    unknown_artifact,         ///< @brief The default finalize met an artifact key that names no field of the state.
    bad_artifact,             ///< @brief An artifact's value does not convert to the type of the field it spreads onto.
    bad_failure_policy,       ///< @brief A failure_policy both escalates and re-plans, escalates to an unknown intent, or re-plans without a router/route.
    // -- workers and delegation (seed 002) ---------------------------------------------------
    bad_worker = 60,   ///< @brief A worker has no name, a name that is not an identifier, a duplicate name or no function.
    unknown_worker,    ///< @brief delegate / forward_message named a worker that does not exist (a tool message).
    worker_failed,     ///< @brief A delegated worker threw: the tools node fails; finished workers are journaled.
    no_worker_output,  ///< @brief forward_message named a worker that has not answered in this conversation.
    // -- execution limits (seed 004) ----------------------------------------------------------
    bad_limits = 70,     ///< @brief Execution limits JSON with an unknown field, a wrong type or a value out of range.
    not_allowed,         ///< @brief A job did something its execution limits do not allow (an allow_* flag is false).
    attempts_exhausted,  ///< @brief An attempt past the job's max_attempts.
    // -- telemetry ----------------------------------------------------------------------------
    bad_otlp_endpoint = 80, ///< @brief An `otlp_tracer`'s endpoint is not an http:// URL, or one of its limits is 0.
};

/// @brief The "stategraph.nodes" error category.
/// Thread safety: a function-local static; any thread.
inline std::error_category const& nodes_category() noexcept {
    struct category final : std::error_category {
        char const* name() const noexcept override { return "stategraph.nodes"; }
        std::string message(int value) const override {
            switch (static_cast<errc>(value)) {
            case errc::unknown_tool: return "the model called an unknown tool";
            case errc::bad_tool_arguments: return "tool call arguments are not a JSON object";
            case errc::tool_failed: return "the tool failed";
            case errc::tool_denied: return "the tool call was denied";
            case errc::bad_permission_rule: return "malformed permission rule";
            case errc::step_limit: return "the agent reached its step limit";
            case errc::no_tool_calls: return "the last message asks for no tool call";
            case errc::circuit_open: return "the circuit breaker is open";
            case errc::retries_exhausted: return "the node failed its last retry and nothing takes over";
            case errc::missing_description: return "an intent needs a description for the LLM router";
            case errc::router_and_route: return "give a router or a route, not both";
            case errc::no_router: return "a supervisor needs a router or a route";
            case errc::unknown_intent: return "unknown intent";
            case errc::duplicate_intent: return "duplicate intent name";
            case errc::max_iterations: return "the supervisor reached max_iterations";
            case errc::intent_cycle: return "an intent was chosen twice in one branch";
            case errc::unknown_artifact: return "an artifact names no field of the state";
            case errc::bad_artifact: return "an artifact does not convert to its field's type";
            case errc::bad_failure_policy: return "invalid failure policy";
            case errc::bad_worker: return "invalid worker";
            case errc::unknown_worker: return "unknown worker";
            case errc::worker_failed: return "a delegated worker failed";
            case errc::no_worker_output: return "the worker has no output to forward";
            case errc::bad_limits: return "invalid execution limits";
            case errc::not_allowed: return "not allowed by the job's execution limits";
            case errc::attempts_exhausted: return "the job has no attempt left";
            case errc::bad_otlp_endpoint: return "invalid OTLP endpoint or limits";
            }
            return "unknown stategraph.nodes error";
        }
    };
    static category const instance;
    return instance;
}

/// @brief Make an error code in nodes_category() (found by ADL).
/// @param e the code.
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), nodes_category()}; }

/// @brief The enumerator's name, e.g. "unknown_tool" (as stored in chat_message::error).
/// @param e the code; an unknown value gives "". Thread safety: pure; any thread.
inline char const* to_string(errc e) noexcept {
    switch (e) {
    case errc::unknown_tool: return "unknown_tool";
    case errc::bad_tool_arguments: return "bad_tool_arguments";
    case errc::tool_failed: return "tool_failed";
    case errc::tool_denied: return "tool_denied";
    case errc::bad_permission_rule: return "bad_permission_rule";
    case errc::step_limit: return "step_limit";
    case errc::no_tool_calls: return "no_tool_calls";
    case errc::circuit_open: return "circuit_open";
    case errc::retries_exhausted: return "retries_exhausted";
    case errc::missing_description: return "missing_description";
    case errc::router_and_route: return "router_and_route";
    case errc::no_router: return "no_router";
    case errc::unknown_intent: return "unknown_intent";
    case errc::duplicate_intent: return "duplicate_intent";
    case errc::max_iterations: return "max_iterations";
    case errc::intent_cycle: return "intent_cycle";
    case errc::unknown_artifact: return "unknown_artifact";
    case errc::bad_artifact: return "bad_artifact";
    case errc::bad_failure_policy: return "bad_failure_policy";
    case errc::bad_worker: return "bad_worker";
    case errc::unknown_worker: return "unknown_worker";
    case errc::worker_failed: return "worker_failed";
    case errc::no_worker_output: return "no_worker_output";
    case errc::bad_limits: return "bad_limits";
    case errc::not_allowed: return "not_allowed";
    case errc::attempts_exhausted: return "attempts_exhausted";
    case errc::bad_otlp_endpoint: return "bad_otlp_endpoint";
    }
    return "";
}

/// @brief One problem found in a node kind's configuration.
struct problem {
    errc code;
    std::string message;  ///< @brief Names the intent or field.
};

/// @brief The exception the node kinds throw. `code()` compares equal to an `errc`;
/// `problems()` lists every configuration problem when several were found at once.
/// Thread safety: an immutable exception object; copies may be read from any thread.
class agent_error : public std::system_error {
public:
    /// @brief One error.
    /// @param code the kind.
    /// @param what the message (returned as is by `what()`).
    agent_error(errc code, std::string const& what) : std::system_error(make_error_code(code), what), what_(what) {}
    /// @brief Several configuration problems at once; `code()` is the first one's.
    /// @param problems at least one (an empty list throws `std::out_of_range`).
    explicit agent_error(std::vector<problem> problems)
        : std::system_error(make_error_code(problems.at(0).code), join(problems)), what_(join(problems)),
          problems_(std::move(problems)) {}

    /// @brief The message as given (names the node kind, intent, tool or rule), without the
    /// category's text appended.
    char const* what() const noexcept override { return what_.c_str(); }

    /// @brief The kind of error.
    errc kind() const noexcept { return static_cast<errc>(code().value()); }
    /// @brief Every problem, for configuration errors (empty otherwise).
    std::vector<problem> const& problems() const noexcept { return problems_; }

private:
    static std::string join(std::vector<problem> const& problems) {
        std::string out = std::to_string(problems.size()) + " problem(s):";
        for (auto const& p : problems)
            out += "\n  [" + std::string(to_string(p.code)) + "] " + p.message;
        return out;
    }
    std::string what_;
    std::vector<problem> problems_;
};

}  // namespace stategraph::nodes

template <>
struct std::is_error_code_enum<stategraph::nodes::errc> : std::true_type {};

#endif  // STATEGRAPH_NODES_ERROR_HPP
