#ifndef STATEGRAPH_NODES_EXECUTION_LIMITS_HPP
#define STATEGRAPH_NODES_EXECUTION_LIMITS_HPP

/// @file
/// @brief `execution_limits` (seed 004): what one job may do (allow_* flags), how long and how
/// many times it may run, and the resources of each attempt (a memory multiplier per retry).

#include <stategraph/nodes/error.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/json/object.hpp>

#include <chrono>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

namespace stategraph::nodes {

/// @brief Something a job may be allowed to do (seed 004's flags).
enum class capability {
    network_access,      ///< @brief "network_access"
    dependency_install,  ///< @brief "allow_dependency_install"
    git_push,            ///< @brief "allow_git_push"
    merge,               ///< @brief "allow_merge"
    delete_files,        ///< @brief "allow_delete_files"
    migrations,          ///< @brief "allow_migrations"
    apply_or_deploy,     ///< @brief "allow_apply_or_deploy"
    production_change,   ///< @brief "allow_production_change"
};

/// @brief The JSON field of a capability, e.g. "allow_git_push".
/// @param c the capability.
inline char const* field_name(capability c) noexcept {
    switch (c) {
    case capability::network_access: return "network_access";
    case capability::dependency_install: return "allow_dependency_install";
    case capability::git_push: return "allow_git_push";
    case capability::merge: return "allow_merge";
    case capability::delete_files: return "allow_delete_files";
    case capability::migrations: return "allow_migrations";
    case capability::apply_or_deploy: return "allow_apply_or_deploy";
    case capability::production_change: return "allow_production_change";
    }
    return "";
}

/// @brief What one attempt of a job gets.
struct attempt_resources {
    int attempt = 1;
    double memory_mb = 0;
    double cpus = 0;
};

/// @brief The limits of one job (seed 004): everything forbidden by default, 15 minutes,
/// 3 attempts, 4096 MB and 2 CPUs, the memory doubled on each retry (its OOM recovery).
/// Thread safety: a plain value; distinct objects are independent, a shared one is safe for
/// concurrent const calls only.
struct execution_limits {
    static constexpr int capability_count = 8;
    bool allowed[capability_count] = {};        ///< @brief Indexed by capability.
    std::chrono::milliseconds max_runtime{std::chrono::minutes(15)};  ///< @brief Per attempt.
    int max_attempts = 3;
    double max_memory_mb = 4096;
    double max_cpus = 2.0;
    double memory_multiplier = 2.0;             ///< @brief Each retry gets this much more memory.

    /// @param c the capability.
    /// @param on allowed or not.
    /// @return `*this`, for chaining.
    execution_limits& allow(capability c, bool on = true) {
        allowed[static_cast<int>(c)] = on;
        return *this;
    }
    bool allows(capability c) const noexcept { return allowed[static_cast<int>(c)]; }

    /// @brief @throws agent_error(errc::not_allowed) naming the job and the flag, when @p c is not allowed.
    /// @param c the capability the job is about to use.
    /// @param job the job's name, for the message.
    void require(capability c, std::string_view job) const {
        if (!allows(c))
            throw agent_error(errc::not_allowed, "job '" + std::string(job) + "': " + field_name(c) +
                                                     " is false in its execution limits");
    }

    /// @brief The resources of attempt @p attempt (1 for the first): memory times
    /// `memory_multiplier` per retry. @throws agent_error(errc::attempts_exhausted) past max_attempts.
    /// @param attempt the attempt number, 1 to `max_attempts`.
    /// @param job the job's name, for the message.
    /// @return the attempt's memory (MB: `max_memory_mb * memory_multiplier^(attempt-1)`) and CPUs.
    attempt_resources for_attempt(int attempt, std::string_view job) const {
        if (attempt < 1 || attempt > max_attempts)
            throw agent_error(errc::attempts_exhausted, "job '" + std::string(job) + "': attempt " + std::to_string(attempt) +
                                                            " is past max_attempts " + std::to_string(max_attempts));
        return {attempt, max_memory_mb * std::pow(memory_multiplier, attempt - 1), max_cpus};
    }

    /// @brief The engine's settings for the job's node: `max_attempts` attempts (no wait between
    /// them unless @p base says so), each bounded by `max_runtime` (the engine's `node_timeout`).
    /// @param base the retry policy whose waits, jitter and `retry_on` are kept; its attempts and
    /// timeout are replaced.
    node_options as_node_options(retry_policy base = {}) const {
        base.max_attempts = max_attempts;
        base.timeout = max_runtime;
        node_options o;
        o.retry = base;
        o.timeout = max_runtime;
        return o;
    }

    /// @brief Seed 004's JSON (`{"network_access": false, "allow_git_push": false, ...,
    /// "max_runtime_minutes": 15, "max_attempts": 3, "max_memory_mb": 4096, "max_cpus": 2.0}`);
    /// fields left out keep their defaults. @throws agent_error(errc::bad_limits) listing every
    /// unknown field, wrong type or out-of-range value, by name.
    /// @param o the limits object; `max_runtime_minutes` may be fractional (converted to milliseconds).
    static execution_limits from_json(boost::json::object const& o) {
        execution_limits l;
        std::vector<problem> bad;
        auto number = [&bad](std::string const& key, boost::json::value const& v, double min) -> double {
            if (!v.is_number()) {
                bad.push_back({errc::bad_limits, "execution limits: \"" + key + "\" must be a number"});
                return min;
            }
            double const d = v.to_number<double>();
            if (!(d >= min)) {
                bad.push_back({errc::bad_limits, "execution limits: \"" + key + "\" must be at least " + std::to_string(min)});
                return min;
            }
            return d;
        };
        for (auto const& [k, v] : o) {
            std::string const key(k);
            bool known = false;
            for (int c = 0; c < capability_count; ++c) {
                if (key != field_name(static_cast<capability>(c))) continue;
                known = true;
                if (!v.is_bool()) bad.push_back({errc::bad_limits, "execution limits: \"" + key + "\" must be true or false"});
                else l.allowed[c] = v.get_bool();
            }
            if (known) continue;
            if (key == "max_runtime_minutes")
                l.max_runtime = std::chrono::milliseconds(static_cast<long long>(number(key, v, 0) * 60000));
            else if (key == "max_attempts")
                l.max_attempts = static_cast<int>(number(key, v, 1));
            else if (key == "max_memory_mb")
                l.max_memory_mb = number(key, v, 1);
            else if (key == "max_cpus")
                l.max_cpus = number(key, v, 0.01);
            else if (key == "memory_multiplier")
                l.memory_multiplier = number(key, v, 1);
            else
                bad.push_back({errc::bad_limits, "execution limits: unknown field \"" + key + "\""});
        }
        if (!bad.empty()) throw agent_error(std::move(bad));
        return l;
    }
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_EXECUTION_LIMITS_HPP
