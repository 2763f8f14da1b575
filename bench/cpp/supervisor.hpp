#pragma once
/// @file supervisor.hpp
/// @brief The Global Supervisor benchmark graph, node for node as specified in
/// shared/bench/supervisor_topology.md: 22 nodes, 25 state channels, trivial deterministic node
/// bodies, the same routing functions and turn messages as bench/langgraphjs/lib/supervisor.mjs.
///
///   START -> session_init -> summarization_check -?-> summarization -> context_loader
///                                                 \-> context_loader -> hitl_handler
///   hitl_handler -?-> agent_execution | intent_classification -> retrieval_router
///   retrieval_router -?-> memory_assembly | entity_resolution
///   entity_resolution -> semantic_retrieval -> temporal_retrieval -> memory_assembly
///   memory_assembly -> fact_extraction -> extraction_merge
///   extraction_merge -?-> disambiguation_blocking | disambiguation_simple | global_planner | ui_router
///   disambiguation_blocking -> message_persist;  disambiguation_simple -> message_persist
///   global_planner -> agent_execution -?-> global_planner | ui_router
///   ui_router -?-> simple_text | complex_text | hitl_text -> message_persist -> END

#include <stategraph/state_graph.hpp>

#include <optional>
#include <string>
#include <vector>

namespace stategraph::bench::supervisor {

struct presentation_rules_t {
    std::string avatar;
    std::string modality;
    int max_len = 0;
};
BOOST_DESCRIBE_STRUCT(presentation_rules_t, (), (avatar, modality, max_len))

struct intent_t {
    std::string route; ///< "greeting" | "complex" | "simple" ("" before intent_classification)
    std::vector<std::string> entities;
    bool has_extractable_facts = false;
    bool has_preferences = false;
    bool needs_semantic_retrieval = false;
};
BOOST_DESCRIBE_STRUCT(intent_t, (), (route, entities, has_extractable_facts, has_preferences, needs_semantic_retrieval))

struct memory_context_t {
    std::vector<std::string> facts;
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(memory_context_t, (), (facts, n))

struct fact_t {
    std::string text;
    std::optional<std::string> entity;
};
BOOST_DESCRIBE_STRUCT(fact_t, (), (text, entity))

struct planner_decision_t {
    std::string agent;
    int step = 0;
};
BOOST_DESCRIBE_STRUCT(planner_decision_t, (), (agent, step))

struct agent_result_t {
    std::string agent;
    bool ok = false;
    bool needs_input = false;
};
BOOST_DESCRIBE_STRUCT(agent_result_t, (), (agent, ok, needs_input))

/// @brief GlobalSupervisorState subset: 25 channels; all keep the last value except
/// `agent_results` and `trace`, which append.
struct state {
    std::string user_message;
    std::string chat_id;
    std::string user_id;
    std::string hitl_resume_type; ///< "none" | "disambiguation" | "agent" ("" = not given)
    std::vector<std::string> messages_history;
    bool needs_summarization = false;
    presentation_rules_t presentation_rules;
    intent_t intent;
    std::string retrieval_path; ///< "skip" | "semantic" | "parallel"
    std::vector<std::string> resolved_entities;
    std::vector<std::string> ambiguous_entities;
    std::vector<std::string> semantic_facts;
    std::vector<std::string> temporal_facts;
    memory_context_t memory_context;
    std::vector<fact_t> extracted_facts;
    std::string entity_ambiguity; ///< "none" | "blocking" | "non_blocking"
    int persisted_facts = 0;
    std::string hitl_user_response;
    std::optional<planner_decision_t> planner_decision;
    int planner_iterations = 0;
    std::vector<agent_result_t> agent_results; // append
    std::string response_type;                 ///< "simple" | "complex" | "hitl"
    std::string ui_response;
    bool persisted = false;
    std::vector<std::string> trace; // append
};
// clang-format off
BOOST_DESCRIBE_STRUCT(state, (), (user_message, chat_id, user_id, hitl_resume_type, messages_history,
    needs_summarization, presentation_rules, intent, retrieval_path, resolved_entities, ambiguous_entities,
    semantic_facts, temporal_facts, memory_context, extracted_facts, entity_ambiguity, persisted_facts,
    hitl_user_response, planner_decision, planner_iterations, agent_results, response_type, ui_response,
    persisted, trace))
// clang-format on

inline auto reducers(for_state<state>) {
    return stategraph::reducers{reduce<&state::agent_results>(append), reduce<&state::trace>(append)};
}

inline const std::string complex_message = "Plan my week: book flights to Zurich and review my portfolio";
inline const std::string blocking_message = "Thomas is traveling to Mallorca next week";
inline const std::string blocking_question = "which Thomas?";
inline const std::string blocking_answer = "Thomas A";
inline constexpr int recursion_limit = 100;
inline constexpr int planner_iterations = 3;

/// @brief The graph, compiled with `saver` (may be null).
compiled_graph<state> build(std::shared_ptr<checkpoint::saver> saver);

/// @brief A turn's input: {user_message, chat_id: thread, user_id: "u1", hitl_resume_type}.
update<state> turn_input(const std::string& message, const std::string& thread, const std::string& resume_type = "none");

/// @brief Checks done on every timed turn (throw `bench_error`).
void check_complex_result(const run_result<state>& r);
void check_blocking_interrupt(const run_result<state>& r);
void check_blocking_end(const run_result<state>& r);

/// @brief Untimed full check against the topology document: the node sequences of both
/// measured turns and of the checked-only paths, and (with a checkpointer) the checkpoint
/// counts 23 / 14 / 16.
boost::asio::awaitable<void> validate(compiled_graph<state> g, bool has_checkpointer, std::string thread_prefix);

} // namespace stategraph::bench::supervisor
