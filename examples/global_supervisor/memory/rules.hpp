#ifndef GLOBAL_SUPERVISOR_MEMORY_RULES_HPP
#define GLOBAL_SUPERVISOR_MEMORY_RULES_HPP

/// @file rules.hpp
/// @brief Deterministic, offline stand-ins for the LLM calls of the Global Supervisor
///        (intent classification, fact extraction, planning, token budgeting).
///
/// All functions are pure: same input, same output; no I/O, no global state.
/// Text is treated as UTF-8; keyword matching is ASCII case-insensitive on whole words.

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace global_supervisor {

/// @brief Route chosen by intent classification.
enum class route_kind { greeting, simple, complex };
BOOST_DESCRIBE_ENUM(route_kind, greeting, simple, complex)

/// @brief Domain agents the planner can delegate to (canonical order = declaration order).
enum class agent_kind { productivity, wealth, research };
BOOST_DESCRIBE_ENUM(agent_kind, productivity, wealth, research)

/// @brief Result of classify(): the route plus the optimization flags of the seed.
struct intent {
    route_kind route = route_kind::simple;
    std::vector<std::string> entities;  ///< known contact names mentioned, in order, no duplicates
    bool has_extractable_facts = false;
    bool has_preferences = false;
    bool needs_semantic_retrieval = false;
};
BOOST_DESCRIBE_STRUCT(intent, (),
                      (route, entities, has_extractable_facts, has_preferences,
                       needs_semantic_retrieval))

/// @brief A fact extracted from a user message; `entity` is the contact name it is about.
struct extracted_fact {
    std::string text;
    std::optional<std::string> entity;
};
BOOST_DESCRIBE_STRUCT(extracted_fact, (), (text, entity))

/// @brief One step of a plan: which agent, what to do, and whether the user must approve.
struct planned_step {
    agent_kind agent = agent_kind::research;
    std::string task;
    bool needs_permission = false;
};
BOOST_DESCRIBE_STRUCT(planned_step, (), (agent, task, needs_permission))

/// @brief Summarization thresholds of the seed: more than 20 messages or 4,000 tokens.
inline constexpr std::size_t summarization_message_threshold = 20;
inline constexpr std::size_t summarization_token_threshold = 4000;

/// @brief Classifies a user message.
///
/// - greeting: starts with hi/hello/hey/hiya/howdy/greetings/"good morning|afternoon|evening",
///   has at most 6 words and no complex keyword;
/// - complex: mentions plan/book/schedule/research/review/send/email/portfolio/compare (any
///   inflection), or asks for several things (2+ question marks or 2+ action verbs);
/// - simple: anything else.
///
/// entities: capitalised words equal (case-insensitively, possessive "'s" removed) to one of
/// @p known_contact_first_names, spelled as in that list. has_extractable_facts: not a greeting
/// and some sentence is a statement (no '?', no question opener) with a fact verb
/// (is/are/will/has/likes/works/lives/travels/...). has_preferences: like/love/prefer/hate/enjoy
/// forms. needs_semantic_retrieval: route != greeting.
intent classify(std::string_view message, std::span<const std::string> known_contact_first_names);

/// @brief Extracts one fact per statement sentence that contains a fact verb.
///
/// Lead-ins such as "Hi,", "Remember that", "FYI", "By the way" are dropped, the trailing
/// punctuation removed and the first letter capitalised. `entity` is the first name of
/// @p entities that occurs in the sentence; a sentence starting with he/she/they/his/her/their
/// inherits the entity of the previous fact. Questions yield nothing.
std::vector<extracted_fact> extract_facts(std::string_view message,
                                          std::span<const std::string> entities);

/// @brief Chooses domain agents by keywords, in canonical order (productivity, wealth, research),
///        skipping @p already_done_agents.
///
/// The message is split into clauses (at . ! ? ; : , newlines and at "and"/"then" before an
/// action word); each agent's task is the clauses that mention its keywords, joined by "; ".
/// productivity: calendar/email/book/schedule/flight/meeting/remind/...;
/// wealth: portfolio/invest/stock/money/budget/...; research: research/compare/"find out"/...
/// A message matching no agent gets one research step with the whole message.
/// needs_permission is set when the task sends something or moves money
/// (send/email/mail/forward/reply/buy/sell/transfer/pay).
std::vector<planned_step> plan(std::string_view message,
                               std::span<const agent_kind> already_done_agents);

/// @brief Rough token count: ceil(bytes / 4).
std::size_t estimate_tokens(std::string_view text) noexcept;

/// @brief True when the history must be summarized: more than 20 messages or 4,000 tokens.
bool needs_summarization(std::size_t message_count, std::size_t total_tokens) noexcept;

/// @brief Enumerator name ("greeting", "simple", "complex").
std::string_view to_string(route_kind r) noexcept;

/// @brief Enumerator name ("productivity", "wealth", "research").
std::string_view to_string(agent_kind a) noexcept;

}  // namespace global_supervisor

#endif  // GLOBAL_SUPERVISOR_MEMORY_RULES_HPP
