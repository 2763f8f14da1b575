// The memory store's contacts: the demo seed (its contacts and facts), add_contact,
// get_contact, find_contacts_by_name, contact_first_names.

#include "memory_store_internal.hpp"

#include <array>

namespace global_supervisor {

using namespace memory_detail;

// --- contacts ---------------------------------------------------------------------------------

namespace {

contact read_contact(const statement& st)
{
    contact c;
    c.id = st.integer(0);
    c.user_id = st.text(1);
    c.name = st.text(2);
    c.full_name = st.text(3);
    c.relation = st.text(4);
    c.notes = st.text(5);
    return c;
}

struct demo_contact {
    std::string_view name, full_name, relation, notes;
};
struct demo_fact {
    std::string_view contact_full_name;  // empty: about the user
    std::string_view text;
    std::optional<int> days_from_today;
};

constexpr std::array<demo_contact, 4> demo_contacts = {{
    {"Thomas", "Thomas Anderson", "colleague", "Works with the user at the Zurich office"},
    {"Thomas", "Thomas Berger", "brother-in-law", "Married to the user's sister Lena"},
    {"Anna", "Anna Keller", "friend", "Friend from university"},
    {"Marco", "Marco Rossi", "friend", "Neighbour, plays tennis with the user"},
}};

const std::array<demo_fact, 8> demo_facts = {{
    {"Anna Keller", "Anna likes Italian food", std::nullopt},
    {"Anna Keller", "Anna's birthday party", 10},
    {"Marco Rossi", "Marco is a vegetarian", std::nullopt},
    {"Marco Rossi", "Marco was in Rome for a conference", -5},
    {"Thomas Anderson", "Thomas Anderson works on the Zurich project", std::nullopt},
    {"Thomas Berger", "Thomas Berger loves sailing on Lake Constance", std::nullopt},
    {"", "Dentist appointment with Dr. Meier", 3},
    {"", "The user prefers window seats on flights", std::nullopt},
}};

}  // namespace

std::size_t memory_store::seed_demo(std::string_view user_id, std::string_view today_date)
{
    constexpr std::string_view op = "seed_demo";
    auto& s = *impl_;
    transaction tx(s, op);
    std::size_t inserted = 0;
    std::unordered_map<std::string_view, std::int64_t> ids;
    for (const auto& c : demo_contacts) {
        {
            statement st(s,
                         "INSERT INTO contacts (user_id, name, full_name, relation, notes) "
                         "SELECT ?1, ?2, ?3, ?4, ?5 WHERE NOT EXISTS "
                         "(SELECT 1 FROM contacts WHERE user_id = ?1 AND full_name = ?3)",
                         op);
            st.bind(1, user_id).bind(2, c.name).bind(3, c.full_name).bind(4, c.relation)
                .bind(5, c.notes).run();
            inserted += static_cast<std::size_t>(sqlite3_changes(s.db));
        }
        statement q(s, "SELECT id FROM contacts WHERE user_id = ?1 AND full_name = ?2 "
                       "ORDER BY id LIMIT 1", op);
        q.bind(1, user_id).bind(2, c.full_name);
        if (q.step()) ids[c.full_name] = q.integer(0);
    }
    tx.commit();
    const std::string today = today_date.empty() ? today_iso_date() : std::string(today_date);
    for (const auto& f : demo_facts) {
        std::optional<std::int64_t> contact_id;
        if (!f.contact_full_name.empty()) contact_id = ids.at(f.contact_full_name);
        std::optional<std::string> date;
        if (f.days_from_today) date = add_days(today, *f.days_from_today);
        const json::object same{{"text", f.text}};
        if (!facts_where(*s.items, facts_namespace(user_id), same, op, s.path).empty()) continue;
        add_fact(user_id, contact_id, f.text, date ? std::optional<std::string_view>(*date) : std::nullopt);
        ++inserted;
    }
    return inserted;
}

std::int64_t memory_store::add_contact(std::string_view user_id, std::string_view name,
                                       std::string_view full_name, std::string_view relation,
                                       std::string_view notes)
{
    statement st(*impl_,
                 "INSERT INTO contacts (user_id, name, full_name, relation, notes) "
                 "VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
                 "add_contact");
    st.bind(1, user_id).bind(2, trim(name)).bind(3, trim(full_name)).bind(4, relation)
        .bind(5, notes);
    const std::int64_t id = st.step() ? st.integer(0) : 0;
    st.run();
    return id;
}

std::optional<contact> memory_store::get_contact(std::int64_t contact_id) const
{
    statement st(*impl_,
                 "SELECT id, user_id, name, full_name, relation, notes FROM contacts "
                 "WHERE id = ?1",
                 "get_contact");
    st.bind(1, contact_id);
    if (!st.step()) return std::nullopt;
    return read_contact(st);
}

std::vector<contact> memory_store::find_contacts_by_name(std::string_view user_id,
                                                         std::string_view first_name) const
{
    first_name = trim(first_name);
    std::vector<contact> out;
    if (first_name.empty()) return out;
    statement st(*impl_,
                 "SELECT id, user_id, name, full_name, relation, notes FROM contacts "
                 "WHERE user_id = ?1 AND (name = ?2 COLLATE NOCASE OR "
                 "  (CASE WHEN instr(full_name, ' ') > 0 "
                 "        THEN substr(full_name, 1, instr(full_name, ' ') - 1) "
                 "        ELSE full_name END) = ?2 COLLATE NOCASE) "
                 "ORDER BY id",
                 "find_contacts_by_name");
    st.bind(1, user_id).bind(2, first_name);
    while (st.step()) out.push_back(read_contact(st));
    return out;
}

std::vector<std::string> memory_store::contact_first_names(std::string_view user_id) const
{
    statement st(*impl_,
                 "SELECT name FROM contacts WHERE user_id = ?1 "
                 "GROUP BY name COLLATE NOCASE ORDER BY min(id)",
                 "contact_first_names");
    st.bind(1, user_id);
    std::vector<std::string> out;
    while (st.step()) out.push_back(st.text(0));
    return out;
}

}  // namespace global_supervisor
