#ifndef STATEGRAPH_NODES_FAILURE_POLICY_HPP
#define STATEGRAPH_NODES_FAILURE_POLICY_HPP

/// @file
/// @brief `failure_policy`: what happens when an agent node's retries run out (seed 004):
/// escalate to another node or intent (a human interrupt, a fallback agent), or re-plan with
/// the failure in the state; with neither, agent_error(errc::retries_exhausted).

#include <stategraph/command.hpp>
#include <stategraph/error_handler.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/state.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/describe/class.hpp>

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief One failure that outlived its retries, as kept in the state.
struct failure_record {
    std::string node;     ///< @brief The node (or intent) that failed.
    std::string message;  ///< @brief Its last exception's what().
    int attempts = 0;     ///< @brief Attempts made, retries included.
    std::string action;   ///< @brief "escalate" or "replan".
    std::string to;       ///< @brief The node or intent escalated to ("" for a re-plan inside a supervisor).

    friend bool operator==(failure_record const&, failure_record const&) = default;
};
BOOST_DESCRIBE_STRUCT(failure_record, (), (node, message, attempts, action, to))

/// @brief Retry, then escalate or re-plan. Give at most one of escalate_to and replan.
/// Thread safety: a plain value, copied into the node options it makes.
struct failure_policy {
    retry_policy retry;        ///< @brief The node's retries (the engine's retry policy).
    std::string escalate_to;   ///< @brief After the last retry, go here (an intent, or a node of a plain graph).
    bool replan = false;       ///< @brief After the last retry, let the router/route (or `planner`) decide again.
    std::string planner;       ///< @brief Plain graphs only: the node that re-plans (a supervisor re-plans itself).

    /// @brief What is wrong with the policy of node @p node ("" when nothing).
    /// @param node the node's name, for the message.
    std::string check(std::string const& node) const {
        if (!escalate_to.empty() && replan)
            return "node '" + node + "': a failure_policy escalates or re-plans, not both";
        if (retry.max_attempts < 1) return "node '" + node + "': failure_policy.retry.max_attempts must be at least 1";
        return {};
    }
};

/// @brief The typed error of a policy that neither escalates nor re-plans.
/// @param where a prefix naming where the node runs (e.g. "supervisor 'desk': "), or "".
/// @param f the failure the error handler was given.
inline agent_error retries_exhausted_error(std::string const& where, node_failure const& f) {
    return agent_error(errc::retries_exhausted, where + "'" + f.node + "' failed after " + std::to_string(f.attempts) +
                                                    " attempt(s) and its failure_policy neither escalates nor re-plans: " +
                                                    f.message);
}

/// @brief Node options for a node @p node of a plain graph under @p policy: the policy's retries,
/// then an error handler that appends a failure_record to the field `Failures` (a
/// `std::vector<failure_record>`, best with the append reducer) and goes to `escalate_to` or to
/// `planner` (command targets add to the node's static edges: route the node's normal
/// successor with a conditional edge or a command, not a static edge). With neither, the
/// handler throws agent_error(errc::retries_exhausted) naming the node.
/// @throws agent_error(errc::bad_failure_policy) for a policy that escalates and re-plans, or
/// re-plans without a planner.
/// @tparam Failures `&S::failures`, a `std::vector<failure_record>` field (checked by a `static_assert`).
/// @param node the node's name (for messages).
/// @param policy the retries and the escalation or re-plan target; the target must be a node of the
/// graph (`compile()` checks it through `node_options::ends`).
/// @return options to pass to `add_node` (retry policy, `ends`, an error handler).
/// Thread safety: a pure function; any thread. The handler it installs keeps no state.
template <auto Failures>
node_options with_failure_policy(std::string const& node, failure_policy policy) {
    using S = typename member_traits<Failures>::state_type;
    static_assert(std::is_same_v<typename member_traits<Failures>::value_type, std::vector<failure_record>>,
                  "with_failure_policy<&S::field>: the field must be a std::vector<stategraph::nodes::failure_record>");
    auto problem = policy.check(node);
    if (problem.empty() && policy.replan && policy.planner.empty())
        problem = "node '" + node + "': a failure_policy that re-plans in a plain graph needs a planner node";
    if (!problem.empty()) throw agent_error(errc::bad_failure_policy, problem);
    node_options options;
    options.retry = policy.retry;
    std::string const target = policy.replan ? policy.planner : policy.escalate_to;
    if (!target.empty()) options.ends.push_back(target);
    auto handle = [policy, target](S const&, node_failure const& f) -> command<S> {
        if (target.empty()) throw retries_exhausted_error("", f);
        std::vector<failure_record> one(1, failure_record{f.node, f.message, f.attempts,
                                                          policy.replan ? "replan" : "escalate", target});
        command<S> out;
        out.writes.template set<Failures>(std::move(one));
        out.targets.push_back(target);
        return out;
    };
    options.on_error = error_handler("failure_policy", std::move(handle));
    return options;
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_FAILURE_POLICY_HPP
