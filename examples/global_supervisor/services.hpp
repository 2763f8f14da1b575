#ifndef GLOBAL_SUPERVISOR_SERVICES_HPP
#define GLOBAL_SUPERVISOR_SERVICES_HPP

/// @file services.hpp
/// @brief What the nodes use besides the state: the memory database and the "brain" (the
/// LLM calls of the seed: classification, fact extraction, planning, agents, summaries).
///
/// - `rule_brain` (default): the deterministic rules of memory/rules.hpp, offline.
/// - `llm_brain`: the same calls as JSON prompts to a `stategraph::nodes::chat_model` (an
///   OpenAI-compatible server with --model-url/--model); an answer that is not the JSON asked
///   for falls back to the rules, a transport error is thrown (and retried where a retry
///   policy applies).
///
/// The application (or a test) owns one `services` and hands it to the graph it builds
/// (`build_graph(saver, svc)`); each stage passes it to the nodes that use it.

#include "memory/memory_store.hpp"
#include "memory/rules.hpp"
#include "state.hpp"

#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/permissions.hpp>
#include <stategraph/retry.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace global_supervisor {

class research_tools; // research_mcp.hpp

/// @brief The LLM-shaped decisions of the supervisor. Arguments are taken by value (coroutines).
class brain {
public:
    virtual ~brain() = default;
    /// @brief "rules" or the model's name (recorded in the state).
    virtual std::string name() const = 0;
    virtual boost::asio::awaitable<intent> classify(std::string message, std::vector<std::string> known_names) = 0;
    virtual boost::asio::awaitable<std::vector<extracted_fact>> extract_facts(std::string message,
                                                                              std::vector<std::string> entities) = 0;
    virtual boost::asio::awaitable<std::vector<planned_step>> plan(std::string message, std::vector<agent_kind> done) = 0;
    /// @brief The agent's report on `task`, given what memory knows (`context`, one fact a line).
    virtual boost::asio::awaitable<std::string> run_agent(agent_task task, std::string context) = 0;
    /// @brief A short summary of older messages.
    virtual boost::asio::awaitable<std::string> summarize(std::vector<turn_message> messages) = 0;
};

/// @brief The offline default: deterministic rules.
class rule_brain final : public brain {
public:
    std::string name() const override { return "rules"; }
    boost::asio::awaitable<intent> classify(std::string message, std::vector<std::string> known_names) override;
    boost::asio::awaitable<std::vector<extracted_fact>> extract_facts(std::string message,
                                                                      std::vector<std::string> entities) override;
    boost::asio::awaitable<std::vector<planned_step>> plan(std::string message, std::vector<agent_kind> done) override;
    boost::asio::awaitable<std::string> run_agent(agent_task task, std::string context) override;
    boost::asio::awaitable<std::string> summarize(std::vector<turn_message> messages) override;
};

/// @brief The same decisions asked of a chat model, with JSON prompts.
class llm_brain final : public brain {
public:
    llm_brain(std::shared_ptr<stategraph::nodes::chat_model> model, std::string model_name);
    std::string name() const override { return model_name_; }
    boost::asio::awaitable<intent> classify(std::string message, std::vector<std::string> known_names) override;
    boost::asio::awaitable<std::vector<extracted_fact>> extract_facts(std::string message,
                                                                      std::vector<std::string> entities) override;
    boost::asio::awaitable<std::vector<planned_step>> plan(std::string message, std::vector<agent_kind> done) override;
    boost::asio::awaitable<std::string> run_agent(agent_task task, std::string context) override;
    boost::asio::awaitable<std::string> summarize(std::vector<turn_message> messages) override;

    /// @brief How many answers could not be read as the JSON asked for (the rules answered).
    int fallbacks() const noexcept { return fallbacks_; }

private:
    /// Sends a system + user prompt in JSON mode; returns the parsed object, or nullopt.
    boost::asio::awaitable<std::optional<std::string>> ask(std::string system, std::string user);
    std::shared_ptr<stategraph::nodes::chat_model> model_;
    std::string model_name_;
    rule_brain rules_;
    int fallbacks_ = 0;
};

/// @brief How domain agents run: their retry policy (attempts, exponential backoff with
/// jitter, per-attempt time limit), how many planner rounds a turn may take, and the
/// permission rules over agent tasks.
struct agent_settings {
    stategraph::retry_policy retry = default_retry();
    int max_planner_iterations = 4;
    /// @brief Rules `agent(task glob)` over planned steps, e.g. deny `wealth(*transfer*)` or
    /// ask `research(*)`: deny reports the step denied without asking; ask asks like a step the
    /// brain marks `needs_permission`; a matching allow rule runs it without asking. No rule
    /// matching: the brain's `needs_permission` decides (the default, with no rules).
    stategraph::nodes::permission_rules permissions;

    static stategraph::retry_policy default_retry() {
        stategraph::retry_policy p;
        p.max_attempts = 3;
        p.initial_interval = std::chrono::milliseconds(50);
        p.backoff_factor = 2.0;
        p.jitter = true;
        p.timeout = std::chrono::seconds(2);
        return p;
    }
};

/// @brief Thrown by an agent attempt that failed in a way worth retrying.
struct agent_unavailable : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// @brief The services of one application: the memory database, the brain, the user and the
/// agent settings.
class services {
public:
    struct options {
        std::filesystem::path db;                 ///< the memory database (created when missing)
        std::string user_id = "demo";
        std::shared_ptr<brain> model;             ///< default: rule_brain
        agent_settings agents;
        std::optional<std::string> today;         ///< "YYYY-MM-DD" to pin the date (tests)
        bool seed_demo = true;                    ///< seed the demo contacts and facts
        /// the research agent's MCP servers (`--mcp FILE`); null or empty: its notes only
        std::shared_ptr<const research_tools> research;
    };

    explicit services(options o);
    services(const services&) = delete;
    services& operator=(const services&) = delete;

    /// @brief Runs `f(memory_store&)` under the store's lock.
    template <class F>
    decltype(auto) with_store(F&& f) {
        std::lock_guard<std::mutex> lock(mutex_);
        return f(store_);
    }
    brain& model() noexcept { return *brain_; }
    const std::string& user_id() const noexcept { return options_.user_id; }
    const agent_settings& agents() const noexcept { return options_.agents; }
    const std::filesystem::path& db_path() const noexcept { return options_.db; }
    /// @brief The research agent's MCP servers; null when none is configured.
    const research_tools* research() const noexcept;
    /// @brief Today as "YYYY-MM-DD" (UTC, or the pinned date).
    std::string today() const;

private:
    options options_;
    std::mutex mutex_;
    memory_store store_;
    std::shared_ptr<brain> brain_;
};

// -- helpers shared by the stages --------------------------------------------------------------

/// @brief The candidate an answer names: its full name, its last name, its relation, or its
/// number ("1", "2", "first", "second").
std::optional<candidate> match_candidate(std::string_view answer, const std::vector<candidate>& candidates);

/// @brief Whether an answer approves an action ("approve", "yes", "ok", "go ahead", ...).
bool is_approval(std::string_view answer);

/// @brief An ISO date mentioned in `text` relative to `today` ("today", "tomorrow", "next week",
/// "in 3 days", a weekday, or "YYYY-MM-DD"), if any.
std::optional<std::string> mentioned_date(std::string_view text, std::string_view today);

/// @brief Whether the text asks about time ("upcoming", "this week", "calendar", ...).
bool has_time_reference(std::string_view text);

/// @brief ASCII case-insensitive substring test.
bool icontains(std::string_view text, std::string_view word);

/// @brief The question asked for an ambiguous entity (with numbered options).
std::string which_question(const ambiguous_entity& e);

/// @brief The question asked before an agent action that needs permission.
std::string permission_question(const agent_task& task);

/// @brief Text of a list of facts, one a line ("- text (date)").
std::string facts_text(const std::vector<fact>& facts, std::size_t limit = 5);

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_SERVICES_HPP
