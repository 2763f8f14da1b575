#ifndef GLOBAL_SUPERVISOR_STATE_HPP
#define GLOBAL_SUPERVISOR_STATE_HPP

/// @file state.hpp
/// @brief The Global Supervisor's state: one described sub-state per domain of the seed
/// (conversation, intent, memory, disambiguation, planning, HITL, response) instead of one flat
/// struct of 77 fields. Reducers are declared below. The path a turn took is not state: the
/// engine records it (see graph.hpp, `turn_outcome::path`).
///
/// Each top-level field is one channel of the graph. A channel without a reducer keeps the last
/// value, and two nodes of one superstep may not both write it; that is why the memory domain
/// is split in two channels: `memory` (retrieval, written by entity_resolution and what follows)
/// and `extraction` (written by fact_extraction, which runs in the same superstep as
/// entity_resolution), and why `agent_results` (parallel agents) has its own appending channel.

#include "memory/memory_store.hpp"
#include "memory/rules.hpp"

#include <stategraph/reducer.hpp>

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace global_supervisor {

// -- small shared types ---------------------------------------------------------------------

/// @brief A message of the current turn or of the loaded history: the store's own shape, so a
/// turn's messages are stored as they are (memory_store::append_turn_messages).
using turn_message = message_text;

/// @brief A contact an entity name may refer to.
struct candidate {
    std::int64_t contact_id = 0;
    std::string name;       ///< short name, as said in conversation ("Thomas")
    std::string full_name;  ///< "Thomas Berger"
    std::string relation;   ///< "brother-in-law"
};
BOOST_DESCRIBE_STRUCT(candidate, (), (contact_id, name, full_name, relation))

/// @brief An entity name with more than one matching contact.
struct ambiguous_entity {
    std::string name;
    std::vector<candidate> candidates;
};
BOOST_DESCRIBE_STRUCT(ambiguous_entity, (), (name, candidates))

/// @brief A fact that extraction_merge (or a disambiguation answer) stored.
struct stored_fact {
    std::int64_t fact_id = 0;
    std::string text;
    std::optional<std::string> contact;  ///< full name of the contact it is about
    std::optional<std::string> event_date;
};
BOOST_DESCRIBE_STRUCT(stored_fact, (), (fact_id, text, contact, event_date))

// -- routing values ---------------------------------------------------------------------------

/// @brief What a thread waits for, and how a turn's message is taken (the "Resume Type").
enum class hitl_kind { none, disambiguation, agent };
BOOST_DESCRIBE_ENUM(hitl_kind, none, disambiguation, agent)

/// @brief The retrieval path chosen by retrieval_router.
enum class retrieval_path { skip, semantic, parallel };
BOOST_DESCRIBE_ENUM(retrieval_path, skip, semantic, parallel)

/// @brief "Entity Ambiguity?" after extraction_merge.
enum class ambiguity_kind { none, blocking, non_blocking };
BOOST_DESCRIBE_ENUM(ambiguity_kind, none, blocking, non_blocking)

/// @brief "Response Type" chosen by ui_router.
enum class response_kind { simple, complex, hitl };
BOOST_DESCRIBE_ENUM(response_kind, simple, complex, hitl)

/// @brief Outcome of one domain agent.
enum class agent_status { ok, failed, denied, needs_input };
BOOST_DESCRIBE_ENUM(agent_status, ok, failed, denied, needs_input)

// -- the domains --------------------------------------------------------------------------------

/// @brief Conversation: identity, the message, the loaded history and token tracking.
struct conversation_state {
    std::string chat_id;  ///< = the thread id
    std::string user_id;
    std::string user_message;
    std::string model;            ///< "rules" or the chat model's name
    std::int64_t turn = 0;        ///< the superstep session_init ran in: unique per turn of a thread
    std::vector<turn_message> history;  ///< the most recent stored messages (oldest first)
    std::size_t message_count = 0;      ///< messages stored for the chat when the turn began
    std::size_t history_tokens = 0;
    bool needs_summarization = false;
    std::string summary;  ///< the summary written by summarization this turn, if any
};
BOOST_DESCRIBE_STRUCT(conversation_state, (),
                      (chat_id, user_id, user_message, model, turn, history, message_count, history_tokens,
                       needs_summarization, summary))

/// @brief Intent: the route, the entities and the optimization flags.
struct intent_state {
    route_kind route = route_kind::simple;
    std::vector<std::string> entities;
    bool has_extractable_facts = false;
    bool has_preferences = false;
    bool needs_semantic_retrieval = false;
    /// @brief Set when the message answers a pending disambiguation question (the chosen contact).
    std::optional<candidate> answers_disambiguation;
};
BOOST_DESCRIBE_STRUCT(intent_state, (),
                      (route, entities, has_extractable_facts, has_preferences, needs_semantic_retrieval,
                       answers_disambiguation))

/// @brief Memory (retrieval side): resolved entities and retrieved facts.
struct memory_state {
    retrieval_path path = retrieval_path::skip;
    std::vector<candidate> resolved_entities;
    std::vector<ambiguous_entity> ambiguous_entities;
    std::vector<fact> preloaded_facts;  ///< context_loader: the agenda of the next days
    std::vector<fact> semantic_facts;
    std::vector<fact> temporal_facts;
    std::vector<fact> context;  ///< memory_assembly: everything above, deduplicated
};
BOOST_DESCRIBE_STRUCT(memory_state, (),
                      (path, resolved_entities, ambiguous_entities, preloaded_facts, semantic_facts, temporal_facts,
                       context))

/// @brief Memory (extraction side): facts extracted from the message, and those stored.
struct extraction_state {
    std::vector<extracted_fact> extracted;
    std::vector<stored_fact> stored;
};
BOOST_DESCRIBE_STRUCT(extraction_state, (), (extracted, stored))

/// @brief Disambiguation: the ambiguity found and how it was resolved.
struct disambiguation_state {
    ambiguity_kind kind = ambiguity_kind::none;
    std::optional<ambiguous_entity> entity;    ///< the entity asked about
    std::vector<extracted_fact> pending_facts; ///< facts waiting for the user's choice
    std::string btw_question;                  ///< non-blocking: the follow-up question
    std::optional<candidate> chosen;
    bool blocking_resolved = false;
    bool btw_resolved = false;
};
BOOST_DESCRIBE_STRUCT(disambiguation_state, (),
                      (kind, entity, pending_facts, btw_question, chosen, blocking_resolved, btw_resolved))

/// @brief One unit of work for agent_execution (the payload of a Send).
struct agent_task {
    std::int64_t turn = 0;  ///< the turn of the plan
    agent_kind agent = agent_kind::research;
    std::string task;
    bool needs_permission = false;
    std::string action;  ///< "send_email", "transfer_money", ... when needs_permission
    std::optional<candidate> recipient;
    std::optional<std::string> decision;  ///< "approve" / "deny" when already answered
    std::string chat_id, user_id, user_message;
    std::size_t base_message_count = 0;  ///< messages stored before the turn (idempotent persisting)
};
BOOST_DESCRIBE_STRUCT(agent_task, (),
                      (turn, agent, task, needs_permission, action, recipient, decision, chat_id, user_id,
                       user_message, base_message_count))

/// @brief What one agent reported.
struct agent_result {
    std::int64_t turn = 0;
    agent_kind agent = agent_kind::research;
    std::string task;
    agent_status status = agent_status::ok;
    std::string summary;
    int attempts = 1;
    bool asked_permission = false;
};
BOOST_DESCRIBE_STRUCT(agent_result, (), (turn, agent, task, status, summary, attempts, asked_permission))

/// @brief Planning: the plan of the turn and the batch being executed.
struct planning_state {
    std::int64_t turn = 0;  ///< the turn the plan belongs to (0: no plan)
    std::vector<planned_step> plan;  ///< the first plan of the turn
    std::vector<agent_task> batch;   ///< dispatched to agent_execution in this iteration
    int iteration = 0;
    std::size_t remaining = 0;  ///< steps left after the batch ("More agents?")
};
BOOST_DESCRIBE_STRUCT(planning_state, (), (turn, plan, batch, iteration, remaining))

/// @brief Human in the loop: what the thread waits for and this turn's exchange with the user.
struct hitl_state {
    hitl_kind pending = hitl_kind::none;      ///< what the thread waits for
    hitl_kind resume_type = hitl_kind::none;  ///< how this turn's message is taken (session_init)
    std::string question;
    std::vector<std::string> options;
    std::optional<agent_task> waiting_task;  ///< the agent action waiting for permission
    std::string user_response;
    /// @brief Messages already persisted this turn before the reply (the user's message, the
    /// questions and the answers); message_persist completes it with the reply.
    std::vector<turn_message> exchange;
};
BOOST_DESCRIBE_STRUCT(hitl_state, (), (pending, resume_type, question, options, waiting_task, user_response, exchange))

/// @brief Presentation rules loaded by context_loader.
struct presentation_rules {
    std::string avatar = "default";
    std::string modality = "text";
    std::size_t max_len = 800;
};
BOOST_DESCRIBE_STRUCT(presentation_rules, (), (avatar, modality, max_len))

/// @brief Response: what the user is told.
struct response_state {
    response_kind kind = response_kind::simple;
    std::string reply;
    std::string followup;  ///< "By the way, which Thomas ...?"
    presentation_rules presentation;
    bool persisted = false;
};
BOOST_DESCRIBE_STRUCT(response_state, (), (kind, reply, followup, presentation, persisted))

/// @brief The whole state of a Global Supervisor thread (one chat).
struct supervisor_state {
    conversation_state conversation;
    intent_state intent;
    memory_state memory;
    extraction_state extraction;
    disambiguation_state disambiguation;
    planning_state planning;
    std::vector<agent_result> agent_results;  ///< appended by parallel agents (see reducers)
    hitl_state hitl;
    response_state response;
};
BOOST_DESCRIBE_STRUCT(supervisor_state, (),
                      (conversation, intent, memory, extraction, disambiguation, planning, agent_results, hitl, response))

// -- what callers send and get back (the graph's input and output schemas) -----------------------

/// @brief One turn as a caller sends it (the graph's input schema): flat, as a chat UI holds it.
/// Members left out keep their defaults.
struct supervisor_input {
    std::string user_message;
    std::string chat_id;  ///< empty: the chat the thread holds (on a new thread, the thread id)
    std::string user_id;  ///< empty: the thread's user (on a new thread, the served user)
    std::optional<std::string> model;      ///< the model the caller expects; must be the one served
    std::optional<std::string> avatar_id;  ///< the presentation avatar of the reply (kept for later turns)
};
BOOST_DESCRIBE_STRUCT(supervisor_input, (), (user_message, chat_id, user_id, model, avatar_id))

/// @brief What a caller gets back from a turn (the graph's output schema): the identity fields
/// beside the turn's result.
struct supervisor_output {
    std::string chat_id;
    std::string user_id;
    std::string user_message;
    std::string model;
    std::string avatar_id;
    std::string reply;                    ///< the answer (empty while a question waits)
    std::optional<std::string> question;  ///< the question the thread waits on, if any
    std::vector<std::string> options;     ///< that question's options
    std::string followup;                 ///< a non-blocking "by the way" question
    std::vector<std::string> path;        ///< the nodes this call ran (superstep, then name)
};
BOOST_DESCRIBE_STRUCT(supervisor_output, (),
                      (chat_id, user_id, user_message, model, avatar_id, reply, question, options, followup, path))

// -- reducers -------------------------------------------------------------------------------------

/// @brief Reducer of `agent_results`: append; results of a turn older than the newest one
/// written are dropped, so the list holds the results of the current plan.
struct latest_turn_results_t {
    std::vector<agent_result> operator()(std::vector<agent_result> current, std::vector<agent_result> update) const {
        std::int64_t newest = 0;
        for (const auto& r : update) newest = std::max(newest, r.turn);
        std::erase_if(current, [&](const agent_result& r) { return r.turn < newest; });
        current.insert(current.end(), update.begin(), update.end());
        return current;
    }
};
inline constexpr latest_turn_results_t latest_turn_results{};

inline auto reducers(stategraph::for_state<supervisor_state>) {
    return stategraph::reducers{stategraph::reduce<&supervisor_state::agent_results>(latest_turn_results)};
}

/// @brief The results of the current plan (empty when the turn has no plan).
inline std::vector<agent_result> current_results(const supervisor_state& s) {
    std::vector<agent_result> out;
    if (s.planning.turn == 0) return out;
    for (const auto& r : s.agent_results)
        if (r.turn == s.planning.turn) out.push_back(r);
    return out;
}

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_STATE_HPP
