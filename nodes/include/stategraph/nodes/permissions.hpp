#ifndef STATEGRAPH_NODES_PERMISSIONS_HPP
#define STATEGRAPH_NODES_PERMISSIONS_HPP

/// @file
/// @brief `permission_rules`: allow / deny / ask patterns on tool calls, such as
/// `Bash(git push *)` or `Edit(.env)`; deny wins over ask, ask over allow.

#include <stategraph/nodes/error.hpp>

#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief What the rules say about one tool call.
enum class permission {
    allow,  ///< @brief Run it.
    deny,   ///< @brief Do not run it; the model gets a `tool_denied` tool message.
    ask,    ///< @brief Interrupt the run for a human; a resume of `true` runs it.
};

/// @brief Whether @p text matches the glob @p pattern: `*` (and `**`) match any run of
/// characters, `?` one character; everything else matches itself.
/// @param pattern the glob.
/// @param text the text tested (the whole of it must match). Thread safety: pure; any thread.
inline bool glob_match(std::string_view pattern, std::string_view text) {
    std::size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
    while (t < text.size()) {
        if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && pattern[p] == text[t]))) {
            ++p;
            ++t;
        } else if (p < pattern.size() && pattern[p] == '*') {
            star = p++;
            mark = t;
        } else if (star != std::string_view::npos) {
            p = star + 1;
            t = ++mark;
        } else {
            return false;
        }
    }
    while (p < pattern.size() && pattern[p] == '*') ++p;
    return p == pattern.size();
}

/// @brief One parsed rule: a tool name (a glob) and, optionally, a glob over the call's subject.
struct permission_rule {
    std::string text;                    ///< @brief The rule as written, e.g. "Bash(git push *)".
    std::string tool;                    ///< @brief "Bash".
    std::optional<std::string> subject;  ///< @brief "git push *"; none: every call of the tool.

    /// @brief Parse `Tool` or `Tool(glob)`. @throws agent_error(errc::bad_permission_rule).
    /// @param text the rule, e.g. "Edit(.env)" or "Bash".
    static permission_rule parse(std::string text) {
        permission_rule r;
        r.text = text;
        auto const open = text.find('(');
        if (open == std::string::npos) {
            r.tool = text;
        } else {
            if (text.back() != ')' || open == 0)
                throw agent_error(errc::bad_permission_rule, "permission rule \"" + text +
                                                                 "\": expected Tool or Tool(pattern), e.g. Bash(git push *)");
            r.tool = text.substr(0, open);
            r.subject = text.substr(open + 1, text.size() - open - 2);
        }
        if (r.tool.empty() || r.tool.find_first_of("() ") != std::string::npos)
            throw agent_error(errc::bad_permission_rule, "permission rule \"" + text + "\": invalid tool name");
        return r;
    }

    /// @brief Whether the rule covers a call.
    /// @param tool_name the called tool's name.
    /// @param call_subject the call's subject (`call_subject(args, tool.subject_field())`).
    bool matches(std::string_view tool_name, std::string_view call_subject) const {
        return glob_match(tool, tool_name) && (!subject || glob_match(*subject, call_subject));
    }
};

/// @brief The subject of a call that rules match against: the argument named @p field when
/// given and a string, else the first string argument, else the arguments as JSON.
/// @param args the call's arguments.
/// @param field the tool's subject argument (`tool::subject`); empty: the first string argument.
inline std::string call_subject(boost::json::object const& args, std::string const& field = {}) {
    if (!field.empty())
        if (auto const* v = args.if_contains(field); v && v->is_string()) return std::string(v->get_string());
    for (auto const& [key, value] : args)
        if (value.is_string()) return std::string(value.get_string());
    return boost::json::serialize(args);
}

/// @brief Allow / deny / ask rules over tool calls (seed 004's permission rules).
///
/// A call is checked against every rule: any deny rule that matches denies it; else any ask
/// rule asks; else any allow rule allows; else `otherwise` decides (allow by default).
/// Thread safety: immutable once built; share one object (tool nodes keep it by `shared_ptr` to
/// const) and check from any thread.
class permission_rules {
public:
    permission_rules() = default;
    /// @brief @throws agent_error(errc::bad_permission_rule) naming every malformed rule.
    /// @param allow rules whose calls run without asking.
    /// @param deny rules whose calls are refused (deny wins over ask and allow).
    /// @param ask rules whose calls interrupt for a human's approval (ask wins over allow).
    /// @param otherwise the decision for a call no rule matches (default: allow).
    permission_rules(std::vector<std::string> allow, std::vector<std::string> deny, std::vector<std::string> ask,
                     permission otherwise = permission::allow)
        : otherwise_(otherwise) {
        std::vector<problem> bad;
        auto parse_all = [&bad](std::vector<std::string>& texts, std::vector<permission_rule>& out) {
            for (auto& t : texts) {
                try {
                    out.push_back(permission_rule::parse(std::move(t)));
                } catch (agent_error const& e) {
                    bad.push_back({e.kind(), e.what()});
                }
            }
        };
        parse_all(allow, allow_);
        parse_all(deny, deny_);
        parse_all(ask, ask_);
        if (!bad.empty()) throw agent_error(std::move(bad));
    }

    /// @brief The decision for a call of @p tool whose subject is @p subject, and the rule that
    /// decided (null when `otherwise` did).
    /// @param tool the called tool's name.
    /// @param subject the call's subject (see `call_subject`).
    /// @return the decision and the rule (a pointer into this object, valid while it lives).
    std::pair<permission, permission_rule const*> check(std::string_view tool, std::string_view subject) const {
        for (auto const& r : deny_)
            if (r.matches(tool, subject)) return {permission::deny, &r};
        for (auto const& r : ask_)
            if (r.matches(tool, subject)) return {permission::ask, &r};
        for (auto const& r : allow_)
            if (r.matches(tool, subject)) return {permission::allow, &r};
        return {otherwise_, nullptr};
    }

    bool empty() const noexcept { return allow_.empty() && deny_.empty() && ask_.empty() && otherwise_ == permission::allow; }

private:
    std::vector<permission_rule> allow_, deny_, ask_;
    permission otherwise_ = permission::allow;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_PERMISSIONS_HPP
