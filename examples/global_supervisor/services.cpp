#include "services.hpp"

#include "research_mcp.hpp"

#include <boost/json.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

namespace global_supervisor {

namespace json = boost::json;

namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::vector<std::string> words_of(std::string_view text) {
    std::vector<std::string> out;
    std::string w;
    for (char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || static_cast<unsigned char>(c) >= 0x80) {
            w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!w.empty()) {
            out.push_back(std::move(w));
            w.clear();
        }
    }
    if (!w.empty()) out.push_back(std::move(w));
    return out;
}

bool has_word(const std::vector<std::string>& words, std::string_view w) {
    return std::find(words.begin(), words.end(), w) != words.end();
}

std::vector<std::string> lines_of(std::string_view text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        auto end = text.find('\n', start);
        if (end == std::string_view::npos) end = text.size();
        auto line = text.substr(start, end - start);
        if (!line.empty()) out.emplace_back(line);
        start = end + 1;
    }
    return out;
}

// ---- JSON reading (lenient: the model may add or omit keys) ----------------------------------

const json::object* as_object(const json::value& v) { return v.if_object(); }

std::string str_at(const json::object& o, std::string_view key, std::string fallback = {}) {
    if (auto* v = o.if_contains(key); v && v->is_string()) return std::string(v->as_string());
    return fallback;
}
bool bool_at(const json::object& o, std::string_view key, bool fallback = false) {
    if (auto* v = o.if_contains(key); v && v->is_bool()) return v->as_bool();
    return fallback;
}

std::optional<json::object> parse_object(std::string_view text) {
    // Models sometimes wrap JSON in a code fence: take the outermost braces.
    auto b = text.find('{'), e = text.rfind('}');
    if (b == std::string_view::npos || e == std::string_view::npos || e < b) return std::nullopt;
    boost::system::error_code ec;
    auto v = json::parse(text.substr(b, e - b + 1), ec);
    if (ec || !v.is_object()) return std::nullopt;
    return v.as_object();
}

std::optional<agent_kind> agent_from(std::string_view s) {
    auto l = lower(s);
    if (l == "productivity") return agent_kind::productivity;
    if (l == "wealth") return agent_kind::wealth;
    if (l == "research") return agent_kind::research;
    return std::nullopt;
}

} // namespace

// ---- helpers -------------------------------------------------------------------------------------

bool icontains(std::string_view text, std::string_view word) {
    if (word.empty()) return true;
    auto t = lower(text), w = lower(word);
    return t.find(w) != std::string::npos;
}

std::optional<candidate> match_candidate(std::string_view answer, const std::vector<candidate>& candidates) {
    auto words = words_of(answer);
    static const std::vector<std::vector<std::string>> ordinals = {
        {"1", "first", "1st", "former"}, {"2", "second", "2nd", "latter"}, {"3", "third", "3rd"}};
    // A full name wins; then a last name or relation that only one candidate has; then a number.
    for (const auto& c : candidates)
        if (icontains(answer, c.full_name)) return c;
    std::vector<const candidate*> hits;
    for (const auto& c : candidates) {
        auto name_words = words_of(c.full_name);
        bool hit = false;
        for (std::size_t i = 1; i < name_words.size(); ++i) hit = hit || has_word(words, name_words[i]);
        if (!c.relation.empty() && icontains(answer, c.relation)) hit = true;
        if (hit) hits.push_back(&c);
    }
    if (hits.size() == 1) return *hits.front();
    for (std::size_t i = 0; i < candidates.size() && i < ordinals.size(); ++i)
        for (const auto& o : ordinals[i])
            if (has_word(words, o)) return candidates[i];
    return std::nullopt;
}

bool is_approval(std::string_view answer) {
    auto words = words_of(answer);
    for (std::string_view no : {"deny", "denied", "no", "don't", "dont", "not", "cancel", "stop", "reject", "nope"})
        if (has_word(words, no)) return false;
    for (std::string_view yes : {"approve", "approved", "yes", "ok", "okay", "sure", "send", "go", "yep", "confirm", "do"})
        if (has_word(words, yes)) return true;
    return false;
}

std::optional<std::string> mentioned_date(std::string_view text, std::string_view today) {
    auto words = words_of(text);
    // An ISO date as written.
    for (const auto& w : words)
        if (w.size() == 10 && w[4] == '-' && w[7] == '-') {
            try {
                return add_days(w, 0);
            } catch (const memory_error&) {
            }
        }
    if (has_word(words, "today") || has_word(words, "tonight")) return std::string(today);
    if (has_word(words, "tomorrow")) return add_days(today, 1);
    for (std::size_t i = 0; i + 1 < words.size(); ++i) {
        if (words[i] == "next" && words[i + 1] == "week") return add_days(today, 7);
        if (words[i] == "next" && words[i + 1] == "month") return add_days(today, 30);
        if (words[i] == "in" && i + 2 < words.size() && (words[i + 2] == "days" || words[i + 2] == "day")) {
            int n = 0;
            auto [p, ec] = std::from_chars(words[i + 1].data(), words[i + 1].data() + words[i + 1].size(), n);
            if (ec == std::errc() && n >= 0 && n < 3660) return add_days(today, n);
        }
    }
    static const std::vector<std::string> days = {"sunday", "monday", "tuesday", "wednesday",
                                                   "thursday", "friday", "saturday"};
    for (std::size_t d = 0; d < days.size(); ++d) {
        if (!has_word(words, days[d])) continue;
        // Weekday of today (Zeller-free: via std::tm).
        std::tm tm{};
        tm.tm_year = std::stoi(std::string(today.substr(0, 4))) - 1900;
        tm.tm_mon = std::stoi(std::string(today.substr(5, 2))) - 1;
        tm.tm_mday = std::stoi(std::string(today.substr(8, 2)));
        tm.tm_hour = 12;
        std::time_t t = timegm(&tm);
        std::tm out{};
        gmtime_r(&t, &out);
        int ahead = (static_cast<int>(d) - out.tm_wday + 7) % 7;
        return add_days(today, ahead == 0 ? 7 : ahead);
    }
    return std::nullopt;
}

bool has_time_reference(std::string_view text) {
    auto words = words_of(text);
    for (std::string_view w : {"today", "tomorrow", "tonight", "week", "weekend", "month", "upcoming", "calendar",
                               "agenda", "when", "schedule", "soon", "next", "monday", "tuesday", "wednesday",
                               "thursday", "friday", "saturday", "sunday"})
        if (has_word(words, w)) return true;
    return false;
}

std::string which_question(const ambiguous_entity& e) {
    std::string q = "Which " + e.name + " do you mean: ";
    for (std::size_t i = 0; i < e.candidates.size(); ++i) {
        if (i > 0) q += i + 1 == e.candidates.size() ? " or " : ", ";
        q += std::to_string(i + 1) + ") " + e.candidates[i].full_name;
        if (!e.candidates[i].relation.empty()) q += " (" + e.candidates[i].relation + ")";
    }
    return q + "?";
}

std::string permission_question(const agent_task& task) {
    std::string what = task.action == "send_email" ? "send an email" : "do this (" + task.action + ")";
    if (task.action == "send_email" && task.recipient) what += " to " + task.recipient->full_name;
    return "May I " + what + " for you: \"" + task.task + "\"? (approve / deny)";
}

std::string facts_text(const std::vector<fact>& facts, std::size_t limit) {
    std::string out;
    for (std::size_t i = 0; i < facts.size() && i < limit; ++i) {
        out += "- " + facts[i].text;
        if (facts[i].event_date) out += " (" + *facts[i].event_date + ")";
        out += "\n";
    }
    return out;
}

// ---- rule_brain ----------------------------------------------------------------------------------

boost::asio::awaitable<intent> rule_brain::classify(std::string message, std::vector<std::string> known_names) {
    co_return global_supervisor::classify(message, known_names);
}

boost::asio::awaitable<std::vector<extracted_fact>> rule_brain::extract_facts(std::string message,
                                                                              std::vector<std::string> entities) {
    co_return global_supervisor::extract_facts(message, entities);
}

boost::asio::awaitable<std::vector<planned_step>> rule_brain::plan(std::string message, std::vector<agent_kind> done) {
    co_return global_supervisor::plan(message, done);
}

boost::asio::awaitable<std::string> rule_brain::run_agent(agent_task task, std::string context) {
    auto notes = lines_of(context);
    std::string out;
    switch (task.agent) {
    case agent_kind::productivity: {
        if (task.action == "send_email") {
            out = "Sent the email" + (task.recipient ? " to " + task.recipient->full_name : std::string()) + ": \"" +
                  task.task + "\".";
            break;
        }
        out = "Planned: " + task.task + ".";
        for (const auto& n : notes)
            if (icontains(n, "window seat") && (icontains(task.task, "flight") || icontains(task.task, "fly")))
                out += " Window seat requested, as you prefer.";
        for (const auto& n : notes)
            if (n.find('(') != std::string::npos && !icontains(n, "window seat")) {
                out += " On your calendar: " + n.substr(n.rfind("- ", 0) == 0 ? 2 : 0) + ".";
                break;
            }
        break;
    }
    case agent_kind::wealth:
        out = "Portfolio review (" + task.task +
              "): 60% equities, 30% bonds, 10% cash; within your targets, no trades needed.";
        break;
    case agent_kind::research:
        out = "Research on \"" + task.task + "\": ";
        if (notes.empty()) {
            out += "nothing in your notes yet; I'd start from recent public sources.";
        } else {
            out += "from your notes: ";
            for (std::size_t i = 0; i < notes.size() && i < 2; ++i)
                out += (i ? "; " : "") + notes[i].substr(notes[i].rfind("- ", 0) == 0 ? 2 : 0);
            out += ".";
        }
        break;
    }
    co_return out;
}

boost::asio::awaitable<std::string> rule_brain::summarize(std::vector<turn_message> messages) {
    // The first words of each user message, as the topics of the conversation so far.
    std::string topics;
    std::size_t n_user = 0;
    for (const auto& m : messages) {
        if (m.role == "summary") {
            topics += (topics.empty() ? "" : "; ") + m.content.substr(0, 120);
            continue;
        }
        if (m.role != "user") continue;
        ++n_user;
        std::string t = m.content.substr(0, 40);
        if (m.content.size() > 40) t += "...";
        if (topics.size() < 600) topics += (topics.empty() ? "" : "; ") + t;
    }
    co_return "Summary of " + std::to_string(messages.size()) + " earlier messages (" + std::to_string(n_user) +
        " from the user): " + topics;
}

// ---- llm_brain -----------------------------------------------------------------------------------

llm_brain::llm_brain(std::shared_ptr<stategraph::nodes::chat_model> model, std::string model_name)
    : model_(std::move(model)), model_name_(std::move(model_name)) {
    if (!model_) throw std::invalid_argument("llm_brain: no chat model");
}

boost::asio::awaitable<std::optional<std::string>> llm_brain::ask(std::string system, std::string user) {
    stategraph::nodes::chat_request req;
    req.model = model_name_;
    req.json_mode = true;
    req.temperature = 0.0;
    req.messages.push_back({"system", std::move(system)});
    req.messages.push_back({"user", std::move(user)});
    auto resp = co_await model_->complete(std::move(req));
    if (!parse_object(resp.content)) {
        ++fallbacks_;
        co_return std::nullopt;
    }
    co_return resp.content;
}

boost::asio::awaitable<intent> llm_brain::classify(std::string message, std::vector<std::string> known_names) {
    std::string names;
    for (const auto& n : known_names) names += (names.empty() ? "" : ", ") + n;
    auto text = co_await ask(
        "You classify one message sent to a personal assistant. Answer with one JSON object: "
        "{\"route\": \"greeting\" | \"simple\" | \"complex\", \"entities\": [names of KNOWN contacts mentioned], "
        "\"has_extractable_facts\": bool (the message states facts worth remembering), \"has_preferences\": bool, "
        "\"needs_semantic_retrieval\": bool (memory could help to answer)}. complex = the user asks the assistant "
        "to act (plan, book, schedule, research, review, send, compare).",
        "KNOWN: [" + names + "]\nMESSAGE: " + message);
    if (!text) co_return global_supervisor::classify(message, known_names);
    auto o = *parse_object(*text);
    intent out;
    auto route = lower(str_at(o, "route", "simple"));
    out.route = route == "greeting" ? route_kind::greeting : route == "complex" ? route_kind::complex : route_kind::simple;
    if (auto* e = o.if_contains("entities"); e && e->is_array())
        for (const auto& v : e->as_array())
            if (v.is_string())
                for (const auto& k : known_names)
                    if (lower(k) == lower(std::string(v.as_string())) &&
                        std::find(out.entities.begin(), out.entities.end(), k) == out.entities.end())
                        out.entities.push_back(k);
    out.has_extractable_facts = bool_at(o, "has_extractable_facts");
    out.has_preferences = bool_at(o, "has_preferences");
    out.needs_semantic_retrieval = bool_at(o, "needs_semantic_retrieval", out.route != route_kind::greeting);
    co_return out;
}

boost::asio::awaitable<std::vector<extracted_fact>> llm_brain::extract_facts(std::string message,
                                                                             std::vector<std::string> entities) {
    std::string names;
    for (const auto& n : entities) names += (names.empty() ? "" : ", ") + n;
    auto text = co_await ask(
        "Extract the facts worth remembering from the user's message. Answer with one JSON object: "
        "{\"facts\": [{\"text\": short sentence, \"entity\": one of ENTITIES or null}]}. Questions state no facts.",
        "ENTITIES: [" + names + "]\nMESSAGE: " + message);
    if (!text) co_return global_supervisor::extract_facts(message, entities);
    auto o = *parse_object(*text);
    std::vector<extracted_fact> out;
    if (auto* f = o.if_contains("facts"); f && f->is_array())
        for (const auto& v : f->as_array()) {
            auto* fo = as_object(v);
            if (!fo) continue;
            extracted_fact x;
            x.text = str_at(*fo, "text");
            if (x.text.empty()) continue;
            auto e = str_at(*fo, "entity");
            for (const auto& k : entities)
                if (lower(k) == lower(e)) x.entity = k;
            out.push_back(std::move(x));
        }
    co_return out;
}

namespace {

/// The planner's tools: one per domain agent not yet done, each call one planned step.
std::vector<stategraph::nodes::tool_definition> planner_tools(const std::vector<agent_kind>& done) {
    static const std::pair<agent_kind, const char*> agents[] = {
        {agent_kind::productivity, "Calendar, email, bookings and reminders."},
        {agent_kind::wealth, "Portfolio and money."},
        {agent_kind::research, "Finding things out."}};
    std::vector<stategraph::nodes::tool_definition> out;
    for (const auto& [agent, what] : agents) {
        if (std::find(done.begin(), done.end(), agent) != done.end()) continue;
        json::object task{{"type", "string"}, {"description", "what the agent must do"}};
        json::object permission{{"type", "boolean"}, {"description", "the step sends something or moves money"}};
        json::object properties{{"task", std::move(task)}, {"needs_permission", std::move(permission)}};
        json::object schema{{"type", "object"}, {"properties", std::move(properties)}, {"required", json::array{"task"}}};
        const std::string name(to_string(agent));
        out.push_back({name, "Ask the " + name + " agent. " + what, std::move(schema)});
    }
    return out;
}

} // namespace

boost::asio::awaitable<std::vector<planned_step>> llm_brain::plan(std::string message, std::vector<agent_kind> done) {
    // The brain plans through tool calls: one call per agent the request needs. A model that
    // answers with the JSON object instead is read as before; anything else falls back to the rules.
    std::string already;
    for (auto a : done) already += (already.empty() ? "" : ", ") + std::string(to_string(a));
    stategraph::nodes::chat_request req;
    req.model = model_name_;
    req.temperature = 0.0;
    req.tools = planner_tools(done);
    req.messages.push_back(
        {"system",
         "You plan which domain agents handle a request. Call the tool of each agent the request needs, once, "
         "with the task it must do and whether it needs the user's permission (it sends something or moves "
         "money). Call no tool when no agent is needed. Without tools, answer with one JSON object: "
         "{\"steps\": [{\"agent\": name, \"task\": text, \"needs_permission\": bool}]}. Leave out the agents "
         "already DONE."});
    req.messages.push_back({"user", "DONE: [" + already + "]\nREQUEST: " + message});
    auto resp = co_await model_->complete(std::move(req));
    std::vector<planned_step> out;
    auto add = [&](std::string_view agent, const json::object& args) {
        auto a = agent_from(agent);
        if (!a || std::find(done.begin(), done.end(), *a) != done.end()) return;
        if (std::any_of(out.begin(), out.end(), [&](const planned_step& p) { return p.agent == *a; })) return;
        planned_step p;
        p.agent = *a;
        p.task = str_at(args, "task", message);
        p.needs_permission = bool_at(args, "needs_permission");
        out.push_back(std::move(p));
    };
    if (!resp.tool_calls.empty()) {
        for (const auto& call : resp.tool_calls) add(call.name, parse_object(call.arguments).value_or(json::object{}));
        co_return out;
    }
    auto o = parse_object(resp.content);
    if (!o) {
        ++fallbacks_;
        co_return global_supervisor::plan(message, done);
    }
    if (auto* s = o->if_contains("steps"); s && s->is_array())
        for (const auto& v : s->as_array())
            if (auto* so = as_object(v)) add(str_at(*so, "agent"), *so);
    co_return out;
}

boost::asio::awaitable<std::string> llm_brain::run_agent(agent_task task, std::string context) {
    auto text = co_await ask("You are the " + std::string(to_string(task.agent)) +
                                 " agent of a personal assistant. Do the task with what the user's notes say and "
                                 "report in one or two sentences. Answer with one JSON object: {\"summary\": text}.",
                             "TASK: " + task.task + "\nNOTES:\n" + context);
    if (!text) {
        rule_brain rules;
        co_return co_await rules.run_agent(std::move(task), std::move(context));
    }
    auto o = *parse_object(*text);
    co_return str_at(o, "summary", "(the " + std::string(to_string(task.agent)) + " agent gave no summary)");
}

boost::asio::awaitable<std::string> llm_brain::summarize(std::vector<turn_message> messages) {
    std::string transcript;
    for (const auto& m : messages) transcript += m.role + ": " + m.content + "\n";
    auto text = co_await ask("Summarize this conversation for the assistant's memory in at most five sentences. "
                             "Answer with one JSON object: {\"summary\": text}.",
                             transcript);
    if (!text) co_return co_await rules_.summarize(std::move(messages));
    co_return str_at(*parse_object(*text), "summary");
}

// ---- services ------------------------------------------------------------------------------------

namespace {
memory_store open_store(const services::options& o) {
    memory_store store(o.db);
    // The demo's dates count from the services' today (a test's fixed date, else the clock's).
    if (o.seed_demo) store.seed_demo(o.user_id, o.today ? std::string_view(*o.today) : std::string_view());
    return store;
}
} // namespace

services::services(options o)
    : options_(std::move(o)), store_(open_store(options_)),
      brain_(options_.model ? options_.model : std::make_shared<rule_brain>()) {}

const research_tools* services::research() const noexcept {
    return options_.research && !options_.research->empty() ? options_.research.get() : nullptr;
}

std::string services::today() const { return options_.today ? *options_.today : today_iso_date(); }

} // namespace global_supervisor
