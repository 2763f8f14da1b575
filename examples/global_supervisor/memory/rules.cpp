#include "memory/rules.hpp"

#include <boost/describe/enum_to_string.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <iterator>

namespace global_supervisor {

namespace {

// ---------------------------------------------------------------------------------------------
// words and sentences

/// A word of the message: `raw` views the text, `lower` is its ASCII-lowercased copy.
struct word {
    std::string_view raw;
    std::string lower;
};

/// A sentence without its terminator; `question` when it ended with '?'.
struct sentence {
    std::string_view text;
    bool question = false;
};

bool is_alnum_byte(char ch) noexcept
{
    const auto c = static_cast<unsigned char>(ch);
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool is_space(char c) noexcept { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

char to_lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lower(std::string_view s)
{
    std::string out(s);
    for (auto& c : out) c = to_lower(c);
    return out;
}

bool iequals(std::string_view a, std::string_view b) noexcept
{
    return a.size() == b.size() &&
           std::equal(a.begin(), a.end(), b.begin(),
                      [](char x, char y) { return to_lower(x) == to_lower(y); });
}

std::string_view trim(std::string_view s) noexcept
{
    std::size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

/// Replaces the typographic apostrophe U+2019 by "'" so that "Anna’s" == "Anna's".
std::string normalize(std::string_view s)
{
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s.compare(i, 3, "\xE2\x80\x99") == 0) {
            out += '\'';
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

/// Words: runs of letters/digits/UTF-8 bytes; "'" and "-" are kept between two such bytes.
std::vector<word> split_words(std::string_view s)
{
    std::vector<word> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && !is_alnum_byte(s[i])) ++i;
        const std::size_t start = i;
        while (i < s.size()) {
            if (is_alnum_byte(s[i])) {
                ++i;
            } else if ((s[i] == '\'' || s[i] == '-') && i > start && i + 1 < s.size() &&
                       is_alnum_byte(s[i + 1])) {
                ++i;
            } else {
                break;
            }
        }
        if (i > start) {
            const auto raw = s.substr(start, i - start);
            out.push_back({raw, lower(raw)});
        }
    }
    return out;
}

/// Sentences end at '?', '!', ';', a newline, or '.' followed by a space or the end.
std::vector<sentence> split_sentences(std::string_view s)
{
    std::vector<sentence> out;
    std::size_t start = 0;
    auto emit = [&](std::size_t end, bool question) {
        const auto t = trim(s.substr(start, end - start));
        if (!t.empty()) out.push_back({t, question});
    };
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        const bool stop = c == '?' || c == '!' || c == ';' || c == '\n' ||
                          (c == '.' && (i + 1 == s.size() || is_space(s[i + 1])));
        if (stop) {
            emit(i, c == '?');
            start = i + 1;
        }
    }
    emit(s.size(), false);
    return out;
}

/// The word without a possessive "'s" or trailing "'" ("Thomas's" -> "Thomas").
std::string_view strip_possessive(std::string_view w) noexcept
{
    if (w.size() > 2 && (w.ends_with("'s") || w.ends_with("'S"))) return w.substr(0, w.size() - 2);
    return w;
}

bool in(std::string_view w, std::initializer_list<std::string_view> set) noexcept
{
    return std::find(set.begin(), set.end(), w) != set.end();
}

template <std::size_t N>
bool in(std::string_view w, const std::string_view (&set)[N]) noexcept
{
    return std::find(std::begin(set), std::end(set), w) != std::end(set);
}

// ---------------------------------------------------------------------------------------------
// vocabularies (lowercase)

constexpr std::string_view greeting_words[] = {
    "hi", "hello", "hey", "hiya", "howdy", "greetings", "yo"};

constexpr std::string_view complex_words[] = {
    "plan",     "plans",     "planning",  "planned",    "book",       "booking",   "booked",
    "schedule", "schedules", "scheduled", "scheduling", "reschedule", "research",  "researching",
    "review",   "reviews",   "reviewing", "send",       "sending",    "email",     "emails",
    "e-mail",   "e-mails",   "portfolio", "portfolios", "compare",    "comparing", "comparison"};

constexpr std::string_view action_verbs[] = {
    "remind", "find",    "check",   "create",  "add",       "cancel",    "buy",
    "call",   "set",     "order",   "move",    "update",    "write",     "draft",
    "organize", "organise", "arrange", "prepare", "summarize", "summarise", "invite",
    "reply",  "forward"};

constexpr std::string_view question_openers[] = {
    "what",  "who",    "whom",  "whose",  "where",  "when",    "why",     "how",    "which",
    "do",    "does",   "did",   "is",     "are",    "am",      "was",     "were",   "can",
    "could", "would",  "should", "will",  "shall",  "may",     "might",   "have",   "has",
    "had",   "isn't",  "aren't", "don't", "doesn't", "didn't", "can't",   "won't"};

constexpr std::string_view fact_verbs[] = {
    "is",        "are",       "am",       "was",       "were",      "will",      "has",
    "have",      "had",       "i'm",      "he's",      "she's",     "it's",      "we're",
    "they're",   "i've",      "like",     "likes",     "liked",     "love",      "loves",
    "loved",     "hate",      "hates",    "hated",     "prefer",    "prefers",   "preferred",
    "enjoy",     "enjoys",    "work",     "works",     "worked",    "working",   "live",
    "lives",     "lived",     "living",   "travel",    "travels",   "traveling", "travelling",
    "traveled",  "travelled", "move",     "moves",     "moved",     "moving",    "visit",
    "visits",    "visiting",  "visited",  "fly",       "flies",     "flying",    "born",
    "married",   "owns",      "allergic", "studies",   "studied",   "plays",     "speaks"};

constexpr std::string_view preference_words[] = {
    "like",   "likes",     "liked",      "love",      "loves",    "loved",    "prefer",
    "prefers", "preferred", "preference", "preferences", "hate", "hates",    "hated",
    "dislike", "dislikes",  "enjoy",      "enjoys",    "favorite", "favourite"};

constexpr std::string_view pronouns[] = {"he",  "she", "they", "him",
                                                              "his", "her", "their"};

constexpr std::string_view productivity_words[] = {
    "calendar", "calendars", "email",    "emails",       "e-mail",  "e-mails",  "mail",
    "inbox",    "book",      "booking",  "schedule",     "schedules", "scheduling",
    "reschedule", "flight",  "flights",  "meeting",      "meetings", "appointment",
    "appointments", "remind", "reminder", "reminders",   "send",    "invite",   "hotel",
    "hotels",   "trip",      "week",     "agenda",       "todo",    "task",     "tasks"};

constexpr std::string_view wealth_words[] = {
    "portfolio", "portfolios", "invest",   "investing", "investment", "investments",
    "invested",  "stock",      "stocks",   "shares",    "money",      "budget",
    "budgets",   "savings",    "fund",     "funds",     "etf",        "etfs",
    "bond",      "bonds",      "crypto",   "finance",   "finances",   "financial",
    "dividend",  "dividends",  "rebalance", "pension",  "retirement"};

constexpr std::string_view research_words[] = {
    "research", "researching", "compare",  "comparing", "comparison",
    "investigate", "analyze",  "analyse",  "analysis",  "study"};

/// Second words of the research phrases "find out", "look up", "look into".
bool research_phrase(std::string_view first, std::string_view second) noexcept
{
    return (first == "find" && second == "out") ||
           (first == "look" && (second == "up" || second == "into"));
}

constexpr std::string_view permission_words[] = {
    "send", "sending", "email", "emails", "e-mail", "e-mails", "mail",
    "forward", "reply", "buy", "sell", "transfer", "pay"};

bool has_fact_verb(std::string_view text)
{
    for (const auto& w : split_words(text))
        if (in(w.lower, fact_verbs)) return true;
    return false;
}

/// Drops lead-ins ("Hi,", "Remember that", "FYI", "By the way", ...) from a sentence.
std::string_view strip_lead_ins(std::string_view text)
{
    static const std::array<std::vector<std::string_view>, 17> lead_ins = {{
        {"please", "remember", "that"},
        {"remember", "that"},
        {"please", "note", "that"},
        {"note", "that"},
        {"just", "so", "you", "know"},
        {"by", "the", "way"},
        {"fyi"},
        {"btw"},
        {"hi", "there"},
        {"hello", "there"},
        {"hi"},
        {"hello"},
        {"hey"},
        {"oh"},
        {"ok"},
        {"okay"},
        {"also"},
    }};
    for (bool changed = true; changed;) {
        changed = false;
        const auto words = split_words(text);
        for (const auto& li : lead_ins) {
            if (words.size() <= li.size()) continue;  // keep at least one word
            if (!std::equal(li.begin(), li.end(), words.begin(),
                            [](std::string_view a, const word& w) { return a == w.lower; }))
                continue;
            const auto& last = words[li.size() - 1].raw;
            std::size_t cut = static_cast<std::size_t>(last.data() - text.data()) + last.size();
            while (cut < text.size() && (is_space(text[cut]) || text[cut] == ',' ||
                                         text[cut] == ':' || text[cut] == '-'))
                ++cut;
            text = trim(text.substr(cut));
            changed = true;
            break;
        }
    }
    return text;
}

/// The sentence without lead-ins when it is a statement (no '?' and no question opener such as
/// "what"/"does"/"can" after the lead-ins); empty otherwise.
std::string_view statement_body(const sentence& s)
{
    if (s.question) return {};
    const auto body = strip_lead_ins(s.text);
    const auto words = split_words(body);
    if (words.empty() || in(words.front().lower, question_openers)) return {};
    return body;
}

/// Clauses for planning: sentences, split further at ':' ',' and at "and"/"then" when the
/// next word is an action word.
std::vector<std::string_view> split_clauses(std::string_view message)
{
    auto starts_action = [](std::string_view w) {
        return in(w, complex_words) || in(w, action_verbs) || in(w, productivity_words) ||
               in(w, wealth_words) || in(w, research_words) ||
               in(w, {"look", "invest", "sell", "transfer", "pay", "rebalance", "analyze",
                      "analyse", "investigate"});
    };
    std::vector<std::string_view> out;
    for (const auto& s : split_sentences(message)) {
        std::size_t start = 0;
        std::vector<std::string_view> parts;
        for (std::size_t i = 0; i <= s.text.size(); ++i) {
            if (i == s.text.size() || s.text[i] == ':' || s.text[i] == ',') {
                parts.push_back(s.text.substr(start, i - start));
                start = i + 1;
            }
        }
        for (auto part : parts) {
            const auto words = split_words(part);
            std::size_t from = 0;  // offset in part
            for (std::size_t k = 0; k + 1 < words.size(); ++k) {
                if ((words[k].lower == "and" || words[k].lower == "then") &&
                    starts_action(words[k + 1].lower)) {
                    const auto cut = static_cast<std::size_t>(words[k].raw.data() - part.data());
                    const auto t = trim(part.substr(from, cut - from));
                    if (!t.empty()) out.push_back(t);
                    from = static_cast<std::size_t>(words[k + 1].raw.data() - part.data());
                }
            }
            const auto t = trim(part.substr(from));
            if (!t.empty()) out.push_back(t);
        }
    }
    return out;
}

bool clause_matches(agent_kind agent, std::string_view clause)
{
    const auto words = split_words(clause);
    for (std::size_t i = 0; i < words.size(); ++i) {
        const auto& w = words[i].lower;
        switch (agent) {
        case agent_kind::productivity:
            if (in(w, productivity_words)) return true;
            break;
        case agent_kind::wealth:
            if (in(w, wealth_words)) return true;
            break;
        case agent_kind::research:
            if (in(w, research_words)) return true;
            if (i + 1 < words.size() && research_phrase(w, words[i + 1].lower)) return true;
            break;
        }
    }
    return false;
}

bool needs_permission_for(std::string_view task)
{
    for (const auto& w : split_words(task))
        if (in(w.lower, permission_words)) return true;
    return false;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

intent classify(std::string_view message, std::span<const std::string> known_contact_first_names)
{
    const std::string text = normalize(message);
    const auto words = split_words(text);
    intent out;

    // Route.
    const bool complex_keyword =
        std::any_of(words.begin(), words.end(), [](const word& w) { return in(w.lower, complex_words); });
    const auto actions = std::count_if(words.begin(), words.end(),
                                       [](const word& w) { return in(w.lower, action_verbs); });
    const auto questions = std::count(text.begin(), text.end(), '?');
    const bool greeting_opener =
        !words.empty() &&
        (in(words[0].lower, greeting_words) ||
         (words.size() > 1 && words[0].lower == "good" &&
          in(words[1].lower, {"morning", "afternoon", "evening", "day"})));
    if (complex_keyword || actions >= 2 || questions >= 2)
        out.route = route_kind::complex;
    else if (greeting_opener && words.size() <= 6)
        out.route = route_kind::greeting;
    else
        out.route = route_kind::simple;

    // Entities: capitalised words that are known contact names.
    for (const auto& w : words) {
        const auto name = strip_possessive(w.raw);
        const auto first = static_cast<unsigned char>(name.front());
        if (!(first >= 'A' && first <= 'Z') && first < 0x80) continue;
        for (const auto& known : known_contact_first_names) {
            if (known.empty() || !iequals(name, known)) continue;
            if (first >= 0x80 && name != known) continue;  // no case folding beyond ASCII
            if (std::find(out.entities.begin(), out.entities.end(), known) == out.entities.end())
                out.entities.push_back(known);
            break;
        }
    }

    // Flags.
    if (out.route != route_kind::greeting) {
        for (const auto& s : split_sentences(text)) {
            if (has_fact_verb(statement_body(s))) {
                out.has_extractable_facts = true;
                break;
            }
        }
    }
    out.has_preferences = std::any_of(words.begin(), words.end(),
                                      [](const word& w) { return in(w.lower, preference_words); });
    out.needs_semantic_retrieval = out.route != route_kind::greeting;
    return out;
}

std::vector<extracted_fact> extract_facts(std::string_view message,
                                          std::span<const std::string> entities)
{
    const std::string text = normalize(message);
    std::vector<extracted_fact> out;
    for (const auto& s : split_sentences(text)) {
        const auto body = statement_body(s);
        if (body.empty() || !has_fact_verb(body)) continue;

        extracted_fact f;
        f.text = std::string(trim(body));
        while (!f.text.empty() && (f.text.back() == '.' || f.text.back() == '!' ||
                                   f.text.back() == ',' || is_space(f.text.back())))
            f.text.pop_back();
        if (f.text.empty()) continue;
        if (f.text[0] >= 'a' && f.text[0] <= 'z') f.text[0] = static_cast<char>(f.text[0] - 'a' + 'A');

        const auto words = split_words(body);
        for (const auto& w : words) {
            const auto name = strip_possessive(w.raw);
            const auto it = std::find_if(entities.begin(), entities.end(),
                                         [&](const std::string& e) { return iequals(name, e); });
            if (it != entities.end()) {
                f.entity = *it;
                break;
            }
        }
        if (!f.entity && !words.empty() && in(words.front().lower, pronouns) && !out.empty())
            f.entity = out.back().entity;

        const bool duplicate = std::any_of(out.begin(), out.end(),
                                           [&](const extracted_fact& e) { return e.text == f.text; });
        if (!duplicate) out.push_back(std::move(f));
    }
    return out;
}

std::vector<planned_step> plan(std::string_view message,
                               std::span<const agent_kind> already_done_agents)
{
    const std::string text = normalize(message);
    const auto clauses = split_clauses(text);
    constexpr std::array<agent_kind, 3> order = {agent_kind::productivity, agent_kind::wealth,
                                                 agent_kind::research};
    auto done = [&](agent_kind a) {
        return std::find(already_done_agents.begin(), already_done_agents.end(), a) !=
               already_done_agents.end();
    };

    std::vector<planned_step> out;
    bool any_match = false;
    for (const auto agent : order) {
        std::string task;
        for (const auto clause : clauses) {
            if (!clause_matches(agent, clause)) continue;
            if (!task.empty()) task += "; ";
            task.append(clause);
        }
        if (task.empty()) continue;
        any_match = true;
        if (done(agent)) continue;
        const bool permission = needs_permission_for(task);
        out.push_back({agent, std::move(task), permission});
    }
    if (!any_match && !done(agent_kind::research)) {
        const auto whole = trim(text);
        if (!whole.empty())
            out.push_back({agent_kind::research, std::string(whole), needs_permission_for(whole)});
    }
    return out;
}

std::size_t estimate_tokens(std::string_view text) noexcept { return (text.size() + 3) / 4; }

bool needs_summarization(std::size_t message_count, std::size_t total_tokens) noexcept
{
    return message_count > summarization_message_threshold ||
           total_tokens > summarization_token_threshold;
}

std::string_view to_string(route_kind r) noexcept
{
    return boost::describe::enum_to_string(r, "unknown");
}

std::string_view to_string(agent_kind a) noexcept
{
    return boost::describe::enum_to_string(a, "unknown");
}

}  // namespace global_supervisor
