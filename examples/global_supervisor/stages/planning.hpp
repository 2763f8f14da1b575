#ifndef GLOBAL_SUPERVISOR_STAGES_PLANNING_HPP
#define GLOBAL_SUPERVISOR_STAGES_PLANNING_HPP

/// @file stages/planning.hpp
/// @brief Stage 6, "Planning & Execution": global_planner and agent_execution (one Send per
/// agent, with a retry policy), looping while the plan has more agents.

#include "stages/common.hpp"

#include <stategraph/command.hpp>

#include <boost/describe/enum.hpp>

#include <string>
#include <vector>

namespace global_supervisor {

boost::asio::awaitable<update> global_planner(services& svc, const state& s);
boost::asio::awaitable<update> agent_execution(services& svc, const agent_task& task, stategraph::context& ctx);

/// @brief What the agent desk reports: the agent's summary, and the desk's rounds and who ended it.
struct desk_report {
    std::string summary;
    std::vector<std::string> rounds;
    std::string ended_by;
};

/// @brief Runs the task's agent through the agent desk, a stategraph::nodes::supervisor whose
/// intents are the domain agents (productivity, wealth, research) and whose classifier picks the
/// task's agent. The agent's own exception comes out as it was thrown.
boost::asio::awaitable<desk_report> run_at_desk(services& svc, agent_task task, std::string context);

/// @brief The planner's batch, one Send per agent task (they run in parallel).
std::vector<stategraph::send> dispatch_agents(const state& s);

/// @brief What the planner found: agents to run (dispatch_agents sends them), or nothing to run.
enum class planner_outcome { agents, nothing_to_run };
BOOST_DESCRIBE_ENUM(planner_outcome, agents, nothing_to_run)
planner_outcome planned(const state& s);

/// @brief "More agents?".
bool more_agents(const state& s);

/// @brief The action an agent task needs permission for ("send_email", "move_money", ...).
std::string permission_action(const std::string& task);

/// @brief The stage; agent_execution runs under `svc.agents().retry`.
stage_decl planning_stage(services& svc);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STAGES_PLANNING_HPP
