// The memory store's facts, items of the long-term memory Store: a fact as a Store item and
// back, the FTS query sanitizing (fts_query), and add_fact, facts_for_contact, search_facts,
// facts_between, upcoming_facts.

#include "memory_store_internal.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <tuple>

namespace global_supervisor {

using namespace memory_detail;

// ---------------------------------------------------------------------------------------------
// FTS query sanitizing

namespace {

bool is_word_byte(unsigned char c) noexcept
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
}

bool is_stopword(std::string_view w) noexcept
{
    // Sorted; binary-searched.
    static constexpr std::array<std::string_view, 88> words = {
        "about", "after", "all",   "also",  "am",    "an",    "and",   "any",   "are",  "as",
        "at",    "be",    "been",  "but",   "by",    "can",   "could", "did",   "do",   "does",
        "for",   "from",  "get",   "got",   "had",   "has",   "have",  "he",    "her",  "hers",
        "him",   "his",   "how",   "if",    "in",    "into",  "is",    "it",    "its",  "just",
        "know",  "me",    "my",    "no",    "not",   "now",   "of",    "on",    "or",   "our",
        "please", "she",  "should", "so",   "some",  "tell",  "than",  "that",  "the",  "their",
        "them",  "then",  "there", "these", "they",  "this",  "those", "to",    "up",   "us",
        "was",   "we",    "were",  "what",  "when",  "where", "which", "who",   "whom", "why",
        "will",  "with",  "would", "you",   "your",  "yours", "near",  "nor"};
    static const auto sorted = [] {
        auto copy = words;
        std::sort(copy.begin(), copy.end());
        return copy;
    }();
    return std::binary_search(sorted.begin(), sorted.end(), w);
}

}  // namespace

std::string fts_query(std::string_view text)
{
    constexpr std::size_t max_terms = 16;
    std::vector<std::string> terms;
    std::size_t i = 0;
    while (i < text.size() && terms.size() < max_terms) {
        while (i < text.size() && !is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
        const std::size_t start = i;
        while (i < text.size() && is_word_byte(static_cast<unsigned char>(text[i]))) ++i;
        if (i == start) break;
        std::string w(text.substr(start, i - start));
        for (auto& c : w)
            if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
        if (w.size() < 2 || is_stopword(w)) continue;
        if (std::find(terms.begin(), terms.end(), w) != terms.end()) continue;
        terms.push_back(std::move(w));
    }
    std::string q;
    for (const auto& t : terms) {
        if (!q.empty()) q += " OR ";
        // Terms never contain '"' (only letters, digits and bytes >= 0x80), so quoting is safe.
        q += '"';
        q += t;
        q += '"';
    }
    return q;
}

// --- facts on the Store ------------------------------------------------------------------------

namespace {

/// A user id as one namespace label ('.' separates labels): '%' and '.' are escaped.
std::string label_of(std::string_view user_id)
{
    std::string out;
    for (char c : user_id) out += c == '%' ? std::string("%25") : c == '.' ? std::string("%2E") : std::string(1, c);
    return out;
}

fact fact_from_item(const sgs::item& it, const std::filesystem::path& path)
{
    try {
        const auto& v = it.value;
        fact f;
        f.id = v.at("id").to_number<std::int64_t>();
        f.user_id = json::value_to<std::string>(v.at("user_id"));
        if (!v.at("contact_id").is_null()) f.contact_id = v.at("contact_id").to_number<std::int64_t>();
        f.text = json::value_to<std::string>(v.at("text"));
        f.created_at = json::value_to<std::string>(v.at("created_at"));
        if (!v.at("event_date").is_null()) f.event_date = json::value_to<std::string>(v.at("event_date"));
        return f;
    } catch (const std::exception& e) {
        throw memory_error(memory_errc::io_failed, "read fact",
                           "the Store item " + sgs::to_string(it.ns) + "/" + it.key + " is not a fact: " + e.what(),
                           path);
    }
}

/// UTC now as "YYYY-MM-DDTHH:MM:SS.sssZ" (as the SQL default strftime('%Y-%m-%dT%H:%M:%fZ')).
std::string now_iso()
{
    const auto now = std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now());
    const auto day = std::chrono::floor<std::chrono::days>(now);
    const std::chrono::hh_mm_ss<std::chrono::milliseconds> t{now - day};
    char buf[32];
    std::snprintf(buf, sizeof buf, "%sT%02d:%02d:%02d.%03dZ",
                  format_iso_date(std::chrono::year_month_day{day}).c_str(), static_cast<int>(t.hours().count()),
                  static_cast<int>(t.minutes().count()), static_cast<int>(t.seconds().count()),
                  static_cast<int>(t.subseconds().count()));
    return buf;
}

}  // namespace

namespace memory_detail {

sgs::namespace_path facts_namespace(std::string_view user_id)
{
    return {"users", label_of(user_id), "facts"};
}

json::object fact_to_json(const fact& f)
{
    json::object o;
    o["id"] = f.id;
    o["user_id"] = f.user_id;
    o["contact_id"] = f.contact_id ? json::value(*f.contact_id) : json::value(nullptr);
    o["text"] = f.text;
    o["created_at"] = f.created_at;
    o["event_date"] = f.event_date ? json::value(*f.event_date) : json::value(nullptr);
    return o;
}

/// Every fact in `prefix` matching `filter`.
std::vector<fact> facts_where(sgs::base_store& store, const sgs::namespace_path& prefix, const json::object& filter,
                              std::string_view op, const std::filesystem::path& path)
{
    auto items = run_store(store.search(prefix, {.filter = filter, .limit = std::size_t{1} << 30}), op, path);
    std::vector<fact> out;
    for (const auto& it : items) out.push_back(fact_from_item(it, path));
    return out;
}

}  // namespace memory_detail

// --- facts ------------------------------------------------------------------------------------
// Each fact is a Store item ("users", user_id, "facts") / "<id>"; see schema_v3 (memory_store.cpp).

std::int64_t memory_store::add_fact(std::string_view user_id,
                                    std::optional<std::int64_t> contact_id, std::string_view text,
                                    std::optional<std::string_view> event_date)
{
    constexpr std::string_view op = "add_fact";
    if (event_date) {
        event_date = trim(*event_date);
        (void)require_date(*event_date, op, impl_->path);
    }
    text = trim(text);
    std::int64_t id = 0;
    {
        statement st(*impl_, "INSERT INTO fact_ids (user_id, contact_id) VALUES (?1, ?2) RETURNING id", op);
        st.bind(1, user_id).bind(2, contact_id);
        id = st.step() ? st.integer(0) : 0;
        st.run();
    }
    auto forget_id = [&] {
        statement del(*impl_, "DELETE FROM fact_ids WHERE id = ?1", op);
        del.bind(1, id).run();
    };
    if (text.empty()) {
        forget_id();
        throw memory_error(memory_errc::constraint_failed, op, "CHECK constraint failed: a fact's text is empty",
                           impl_->path);
    }
    const fact f{id, std::string(user_id), contact_id, std::string(text), now_iso(),
                 event_date ? std::optional<std::string>(*event_date) : std::nullopt};
    try {
        run_store(impl_->items->put(facts_namespace(user_id), std::to_string(id), fact_to_json(f)), op, impl_->path);
    } catch (...) {
        forget_id();
        throw;
    }
    return id;
}

std::vector<fact> memory_store::facts_for_contact(std::int64_t contact_id) const
{
    const sgs::namespace_path users{"users"};
    const json::object about{{"contact_id", contact_id}};
    auto out = facts_where(*impl_->items, users, about, "facts_for_contact", impl_->path);
    std::sort(out.begin(), out.end(), [](const fact& a, const fact& b) { return a.id < b.id; });
    return out;
}

std::vector<fact_hit> memory_store::search_facts(std::string_view user_id, std::string_view query,
                                                 std::size_t limit) const
{
    std::vector<fact_hit> out;
    const std::string match = fts_query(query);
    if (match.empty() || limit == 0) return out;
    // The keywords of fts_query, without its quotes and ORs (the Store matches any of them).
    std::string words;
    for (std::size_t i = 0; i < match.size(); ++i) {
        if (match.compare(i, 4, " OR ") == 0) {
            words += ' ';
            i += 3;
        } else {
            words += match[i] == '"' ? ' ' : match[i];
        }
    }
    auto items = run_store(impl_->items->search(facts_namespace(user_id), {.query = words, .limit = limit}),
                           "search_facts", impl_->path);
    for (const auto& it : items) out.push_back({fact_from_item(it, impl_->path), -it.score.value_or(0.0)});
    return out;
}

std::vector<fact> memory_store::facts_between(std::string_view user_id, std::string_view from_date,
                                              std::string_view to_date) const
{
    constexpr std::string_view op = "facts_between";
    const auto from = require_date(from_date, op, impl_->path);
    const auto to = require_date(to_date, op, impl_->path);
    if (std::chrono::sys_days{to} < std::chrono::sys_days{from}) return {};
    const std::string lo = format_iso_date(from);
    // Exclusive upper bound: also matches "YYYY-MM-DDTHH:MM" values on to_date.
    const std::string hi =
        format_iso_date(std::chrono::year_month_day{std::chrono::sys_days{to} + std::chrono::days{1}});
    const json::object within{{"event_date", json::object{{"$gte", lo}, {"$lt", hi}}}};
    auto out = facts_where(*impl_->items, facts_namespace(user_id), within, op, impl_->path);
    std::sort(out.begin(), out.end(), [](const fact& a, const fact& b) {
        return std::tie(*a.event_date, a.id) < std::tie(*b.event_date, b.id);
    });
    return out;
}

std::vector<fact> memory_store::upcoming_facts(std::string_view user_id, std::string_view today,
                                               int days) const
{
    const auto from = require_date(today, "upcoming_facts", impl_->path);
    if (days < 0) return {};
    return facts_between(user_id, format_iso_date(from),
                         add_days(format_iso_date(from), days));
}

}  // namespace global_supervisor
