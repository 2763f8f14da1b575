#define BOOST_TEST_MODULE supervisor_memory
#include <boost/test/unit_test.hpp>

#include "memory/memory_store.hpp"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace gs = global_supervisor;
namespace fs = std::filesystem;

namespace {

/// A unique temporary database path; removes the file and its WAL/SHM side files.
struct temp_db {
    fs::path path;

    temp_db()
    {
        static std::atomic<int> counter{0};
        std::random_device rd;
        path = fs::temp_directory_path() /
               ("sg_memory_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" +
                std::to_string(rd()) + ".db");
        cleanup();
    }
    ~temp_db() { cleanup(); }
    temp_db(const temp_db&) = delete;
    temp_db& operator=(const temp_db&) = delete;

    void cleanup() const
    {
        std::error_code ec;
        for (const char* suffix : {"", "-wal", "-shm", "-journal"})
            fs::remove(fs::path(path.string() + suffix), ec);
    }
};

/// Runs SQL on the file directly (to inspect or tamper with it).
std::string raw_query(const fs::path& path, const char* sql)
{
    sqlite3* db = nullptr;
    BOOST_REQUIRE_EQUAL(sqlite3_open(path.string().c_str(), &db), SQLITE_OK);
    std::string result;
    auto cb = [](void* out, int n, char** values, char**) {
        auto& s = *static_cast<std::string*>(out);
        for (int i = 0; i < n; ++i) {
            if (!s.empty()) s += '|';
            s += values[i] ? values[i] : "NULL";
        }
        return 0;
    };
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql, cb, &result, &err);
    const std::string msg = err ? err : "";
    sqlite3_free(err);
    sqlite3_close(db);
    BOOST_REQUIRE_MESSAGE(rc == SQLITE_OK, msg);
    return result;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

template <class Range>
bool any_text(const Range& facts, std::string_view part)
{
    return std::any_of(facts.begin(), facts.end(), [&](const auto& f) {
        if constexpr (requires { f.value; }) return contains(f.value.text, part);
        else return contains(f.text, part);
    });
}

/// Asserts that @p fn throws memory_error with code @p code; returns its what().
template <class F>
std::string expect_error(F&& fn, gs::memory_errc code)
{
    try {
        fn();
    } catch (const gs::memory_error& e) {
        BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(code), "got: " << e.what());
        return e.what();
    }
    BOOST_FAIL("no memory_error thrown");
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(memory_store_suite)

BOOST_AUTO_TEST_CASE(schema_created_and_reopen_is_idempotent)
{
    temp_db tmp;
    std::int64_t anna = 0;
    {
        gs::memory_store store(tmp.path);
        BOOST_TEST(fs::exists(tmp.path));
        BOOST_TEST(store.user_version() == gs::memory_store::schema_version);
        BOOST_TEST(store.path() == tmp.path);
        anna = store.add_contact("u1", "Anna", "Anna Keller", "friend");
        BOOST_TEST(anna > 0);
        store.add_fact("u1", anna, "Anna likes Italian food");
    }
    BOOST_TEST(raw_query(tmp.path, "PRAGMA journal_mode") == "wal");
    const std::string tables = raw_query(
        tmp.path, "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master "
                  "WHERE type IN ('table', 'trigger') AND name NOT LIKE 'store_fts_%' ORDER BY name)");
    // Facts are Store items (store_items, FTS5 in store_fts); fact_ids keeps their ids and contacts.
    BOOST_TEST(tables == "contacts,fact_ids,messages,store_fts,store_items,store_schema");
    BOOST_TEST(raw_query(tmp.path, "SELECT prefix || '/' || key FROM store_items") == "users.u1.facts/1");
    for (int i = 0; i < 2; ++i) {
        gs::memory_store store(tmp.path);  // reopen: no migration runs again, data kept
        BOOST_TEST(store.user_version() == gs::memory_store::schema_version);
        const auto found = store.find_contacts_by_name("u1", "Anna");
        BOOST_TEST_REQUIRE(found.size() == 1u);
        BOOST_TEST(found[0].id == anna);
        BOOST_TEST(store.search_facts("u1", "italian").size() == 1u);
    }
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM contacts") == "1");
}

BOOST_AUTO_TEST_CASE(migrates_from_version_1)
{
    temp_db tmp;
    // A version-1 file: facts in a table of their own (before the FTS index and the Store).
    raw_query(tmp.path,
              "CREATE TABLE contacts (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, name TEXT NOT NULL, "
              "  full_name TEXT NOT NULL, relation TEXT NOT NULL DEFAULT '', notes TEXT NOT NULL DEFAULT ''); "
              "CREATE TABLE facts (id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, "
              "  contact_id INTEGER NULL REFERENCES contacts (id), text TEXT NOT NULL, "
              "  created_at TEXT NOT NULL, event_date TEXT NULL); "
              "CREATE TABLE messages (id INTEGER PRIMARY KEY, chat_id TEXT NOT NULL, role TEXT NOT NULL, "
              "  content TEXT NOT NULL, created_at TEXT NOT NULL, seq INTEGER NOT NULL, UNIQUE (chat_id, seq)); "
              "INSERT INTO contacts VALUES (7, 'u1', 'Marco', 'Marco Rossi', 'friend', ''); "
              "INSERT INTO facts VALUES (41, 'u1', 7, 'Marco is a vegetarian', '2024-01-02T03:04:05.000Z', NULL); "
              "INSERT INTO facts VALUES (42, 'u1', NULL, 'Trip to Oslo', '2024-01-02T03:04:05.000Z', '2030-05-01'); "
              "PRAGMA user_version = 1");
    for (int open = 0; open < 2; ++open) { // the second open finds nothing left to move
        gs::memory_store store(tmp.path);
        BOOST_TEST(store.user_version() == gs::memory_store::schema_version);
        const auto hits = store.search_facts("u1", "vegetarians?");  // porter stemming
        BOOST_TEST_REQUIRE(hits.size() == 1u);
        BOOST_TEST(hits[0].value.text == "Marco is a vegetarian");
        BOOST_TEST(hits[0].value.id == 41);
        BOOST_TEST(hits[0].value.created_at == "2024-01-02T03:04:05.000Z");
        BOOST_TEST(store.facts_for_contact(7).size() == 1u + static_cast<std::size_t>(open));
        BOOST_TEST(store.facts_between("u1", "2030-05-01", "2030-05-01").size() == 1u);
        if (open == 0) BOOST_TEST(store.add_fact("u1", 7, "Marco cooks risotto") == 43);  // ids go on after the old ones
    }
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM sqlite_master WHERE name LIKE 'facts%'") == "0");
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM store_items") == "3");
}

BOOST_AUTO_TEST_CASE(seed_demo_is_idempotent)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    const auto first = store.seed_demo("u1");
    BOOST_TEST(first == 12u);  // 4 contacts + 8 facts
    BOOST_TEST(store.seed_demo("u1") == 0u);
    {
        gs::memory_store again(tmp.path);
        BOOST_TEST(again.seed_demo("u1") == 0u);
    }
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM contacts") == "4");
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM store_items WHERE prefix = 'users.u1.facts'") == "8");
    BOOST_TEST(store.seed_demo("u2") == 12u);  // per user
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM contacts") == "8");
}

BOOST_AUTO_TEST_CASE(two_thomases)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    store.seed_demo("u1");
    for (const char* q : {"Thomas", "thomas", " THOMAS "}) {
        const auto found = store.find_contacts_by_name("u1", q);
        BOOST_TEST_REQUIRE(found.size() == 2u);
        BOOST_TEST(found[0].full_name == "Thomas Anderson");
        BOOST_TEST(found[0].relation == "colleague");
        BOOST_TEST(found[1].full_name == "Thomas Berger");
        BOOST_TEST(found[1].relation == "brother-in-law");
    }
    BOOST_TEST(store.find_contacts_by_name("u1", "anna").size() == 1u);
    BOOST_TEST(store.find_contacts_by_name("u1", "Keller").empty());
    BOOST_TEST(store.find_contacts_by_name("u1", "").empty());
    BOOST_TEST(store.find_contacts_by_name("u2", "Thomas").empty());

    // Match on the first word of full_name even when the short name differs.
    const auto bob = store.add_contact("u1", "Bobby", "Robert Smith", "friend");
    const auto robert = store.find_contacts_by_name("u1", "robert");
    BOOST_TEST_REQUIRE(robert.size() == 1u);
    BOOST_TEST(robert[0].id == bob);

    const auto names = store.contact_first_names("u1");
    const std::vector<std::string> expected = {"Thomas", "Anna", "Marco", "Bobby"};
    BOOST_TEST(names == expected, boost::test_tools::per_element());

    const auto c = store.get_contact(bob);
    BOOST_TEST_REQUIRE(c.has_value());
    BOOST_TEST(c->full_name == "Robert Smith");
    BOOST_TEST(!store.get_contact(123456).has_value());
}

BOOST_AUTO_TEST_CASE(facts_for_contact_and_constraints)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    store.seed_demo("u1");
    const auto anna = store.find_contacts_by_name("u1", "Anna").at(0);
    const auto before = store.facts_for_contact(anna.id);
    BOOST_TEST(before.size() == 2u);
    BOOST_TEST(any_text(before, "Italian"));
    const auto id = store.add_fact("u1", anna.id, "Anna is learning Japanese");
    const auto after = store.facts_for_contact(anna.id);
    BOOST_TEST_REQUIRE(after.size() == 3u);
    BOOST_TEST(after.back().id == id);
    BOOST_TEST((after.back().contact_id == std::optional<std::int64_t>(anna.id)));
    BOOST_TEST(!after.back().event_date.has_value());
    BOOST_TEST(after.back().created_at.size() == 24u);  // YYYY-MM-DDTHH:MM:SS.sssZ

    const auto what = expect_error([&] { store.add_fact("u1", 999999, "orphan"); },
                                   gs::memory_errc::constraint_failed);
    BOOST_TEST(contains(what, "FOREIGN KEY"));
    BOOST_TEST(contains(what, tmp.path.string()));
    expect_error([&] { store.add_fact("", std::nullopt, "no user"); },
                 gs::memory_errc::constraint_failed);
    expect_error([&] { store.add_fact("u1", std::nullopt, "  "); },
                 gs::memory_errc::constraint_failed);
    expect_error([&] { store.add_fact("u1", std::nullopt, "x", "next friday"); },
                 gs::memory_errc::invalid_argument);
    expect_error([&] { store.add_fact("u1", std::nullopt, "x", "2024-02-30"); },
                 gs::memory_errc::invalid_argument);
    // The store stays usable after errors.
    BOOST_TEST(store.facts_for_contact(anna.id).size() == 3u);
}

BOOST_AUTO_TEST_CASE(fts_search)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    store.seed_demo("u1");
    store.seed_demo("u2");

    const auto hits = store.search_facts("u1", "Which Italian restaurant would Anna like?");
    BOOST_TEST_REQUIRE(!hits.empty());
    BOOST_TEST(hits[0].value.text == "Anna likes Italian food");
    BOOST_TEST(hits[0].value.user_id == "u1");
    for (std::size_t i = 1; i < hits.size(); ++i) BOOST_TEST(hits[i - 1].score <= hits[i].score);
    for (const auto& h : hits) BOOST_TEST(h.value.user_id == "u1");

    const auto zurich = store.search_facts("u1", "Who works in Zurich?", 1);
    BOOST_TEST_REQUIRE(zurich.size() == 1u);
    BOOST_TEST(zurich[0].value.text == "Thomas Anderson works on the Zurich project");

    BOOST_TEST(store.search_facts("u1", "italian", 0).empty());
    BOOST_TEST(store.search_facts("nobody", "italian").empty());

    // Hostile or empty input never reaches FTS5 as syntax.
    for (const char* q : {"\"what's up? (AND) OR*\"", "", "   ", "?!", "NEAR(a b)", "\"unbalanced",
                          "text:italian", "*", "-italian", "^italian", "italian AND NOT food",
                          "a OR b", "'; DROP TABLE facts; --", "\xC3\xA9t\xC3\xA9 \xFF\xFE"}) {
        BOOST_CHECK_NO_THROW(store.search_facts("u1", q));
    }
    BOOST_TEST(store.search_facts("u1", "\"what's up? (AND) OR*\"").empty());
    BOOST_TEST(store.search_facts("u1", "").empty());
    BOOST_TEST(store.search_facts("u1", "text:italian").size() == 1u);
    BOOST_TEST(store.search_facts("u1", "'; DROP TABLE facts; --").empty());  // searches "drop" OR "table" OR "facts"
    BOOST_TEST(raw_query(tmp.path, "SELECT count(*) FROM store_items") == "16");

    BOOST_TEST(gs::fts_query("\"what's up? (AND) OR*\"").empty());
    BOOST_TEST(gs::fts_query("Italian FOOD, italian!") == "\"italian\" OR \"food\"");

    // Index follows inserts (trigger) and diacritics are folded.
    store.add_fact("u1", std::nullopt, "The user visited Zürich's Kunsthaus");
    BOOST_TEST(store.search_facts("u1", "kunsthaus").size() == 1u);
    BOOST_TEST(store.search_facts("u1", "Zurich kunsthaus").at(0).value.text ==
               "The user visited Zürich's Kunsthaus");
}

BOOST_AUTO_TEST_CASE(temporal_retrieval)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    store.seed_demo("u1");
    const std::string today = gs::today_iso_date();
    BOOST_TEST(today.size() == 10u);

    const auto week = store.upcoming_facts("u1", today, 7);
    BOOST_TEST_REQUIRE(week.size() == 1u);
    BOOST_TEST(week[0].text == "Dentist appointment with Dr. Meier");
    BOOST_TEST((week[0].event_date == std::optional<std::string>(gs::add_days(today, 3))));
    BOOST_TEST(!week[0].contact_id.has_value());

    const auto fortnight = store.upcoming_facts("u1", today, 14);
    BOOST_TEST_REQUIRE(fortnight.size() == 2u);
    BOOST_TEST(fortnight[1].text == "Anna's birthday party");  // ordered by date

    const auto past = store.facts_between("u1", gs::add_days(today, -7), today);
    BOOST_TEST_REQUIRE(past.size() == 1u);
    BOOST_TEST(past[0].text == "Marco was in Rome for a conference");
    BOOST_TEST(store.facts_between("u1", today, gs::add_days(today, -1)).empty());
    BOOST_TEST(store.facts_between("u2", "2000-01-01", "2100-01-01").empty());

    // Date-times are matched by their date; bounds are inclusive.
    store.add_fact("u1", std::nullopt, "Flight to Zurich", "2030-01-15T10:30");
    store.add_fact("u1", std::nullopt, "Return flight", "2030-01-20");
    BOOST_TEST(store.facts_between("u1", "2030-01-15", "2030-01-15").size() == 1u);
    BOOST_TEST(store.facts_between("u1", "2030-01-15", "2030-01-20").size() == 2u);
    BOOST_TEST(store.upcoming_facts("u1", "2030-01-16", 4).size() == 1u);

    BOOST_TEST(gs::add_days("2024-02-28", 1) == "2024-02-29");
    BOOST_TEST(gs::add_days("2024-12-31", 1) == "2025-01-01");
    expect_error([&] { store.facts_between("u1", "yesterday", today); },
                 gs::memory_errc::invalid_argument);
    expect_error([&] { (void)gs::add_days("2024-13-01", 1); }, gs::memory_errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(messages_and_summary)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    for (int i = 1; i <= 6; ++i) {
        const auto m = store.append_message("chat-a", i % 2 ? "user" : "assistant",
                                            "a" + std::to_string(i));
        BOOST_TEST(m.seq == i);
        BOOST_TEST(m.chat_id == "chat-a");
        store.append_message("chat-b", "user", "b" + std::to_string(i));
    }
    BOOST_TEST(store.count_messages("chat-a") == 6u);
    BOOST_TEST(store.count_messages("nope") == 0u);

    const auto all = store.load_messages("chat-a");
    BOOST_TEST_REQUIRE(all.size() == 6u);
    for (std::size_t i = 0; i < all.size(); ++i) {
        BOOST_TEST(all[i].content == "a" + std::to_string(i + 1));
        BOOST_TEST(all[i].seq == static_cast<std::int64_t>(i + 1));
    }
    BOOST_TEST(all[1].role == "assistant");
    const auto last2 = store.load_messages("chat-a", 2);
    BOOST_TEST_REQUIRE(last2.size() == 2u);
    BOOST_TEST(last2[0].content == "a5");
    BOOST_TEST(last2[1].content == "a6");
    BOOST_TEST(store.load_messages("chat-a", 0).empty());

    BOOST_TEST(store.replace_messages_with_summary("chat-a", "summary of a1..a4", 2) == 4u);
    const auto after = store.load_messages("chat-a");
    BOOST_TEST_REQUIRE(after.size() == 3u);
    BOOST_TEST(after[0].role == "summary");
    BOOST_TEST(after[0].content == "summary of a1..a4");
    BOOST_TEST(after[1].content == "a5");
    BOOST_TEST(after[2].content == "a6");
    BOOST_TEST(store.count_messages("chat-b") == 6u);  // other chats untouched

    // Nothing to replace: no change.
    BOOST_TEST(store.replace_messages_with_summary("chat-a", "ignored", 3) == 0u);
    BOOST_TEST(store.count_messages("chat-a") == 3u);

    // seq keeps increasing after a summary; keep_last_n = 0 folds everything.
    BOOST_TEST(store.append_message("chat-a", "user", "a7").seq == 7);
    BOOST_TEST(store.replace_messages_with_summary("chat-a", "all", 0) == 4u);
    const auto folded = store.load_messages("chat-a");
    BOOST_TEST_REQUIRE(folded.size() == 1u);
    BOOST_TEST(folded[0].content == "all");
    BOOST_TEST(store.append_message("chat-a", "user", "a8").seq > folded[0].seq);

    expect_error([&] { store.append_message("", "user", "x"); },
                 gs::memory_errc::constraint_failed);
}

BOOST_AUTO_TEST_CASE(a_turn_is_stored_all_or_nothing_and_once)
{
    temp_db tmp;
    gs::memory_store store(tmp.path);
    auto lines = [&](std::string_view chat) {
        std::vector<std::string> out;
        for (const auto& m : store.load_messages(chat)) out.push_back(m.role + ": " + m.content);
        return out;
    };
    using lines_t = std::vector<std::string>;
    store.append_message("other", "user", "another chat's message does not count");

    const std::vector<gs::message_text> first = {{"user", "hi"}, {"assistant", "hello"}};
    const auto appended = store.append_turn_messages("c", 0, first);
    BOOST_TEST_REQUIRE(appended.size() == 2u);
    BOOST_TEST(appended[0].seq == 1);
    BOOST_TEST(appended[1].content == "hello");
    BOOST_TEST(store.append_turn_messages("c", 0, first).empty());  // the re-run stores nothing
    BOOST_TEST(lines("c") == (lines_t{"user: hi", "assistant: hello"}), boost::test_tools::per_element());

    // A turn stored in parts (the question while the thread waits, then the rest): the stored
    // part is skipped, the rest appended.
    BOOST_TEST(store.append_turn_messages("c", 2, {{"user", "Thomas?"}, {"assistant", "Which?"}}).size() == 2u);
    const std::vector<gs::message_text> second = {
        {"user", "Thomas?"}, {"assistant", "Which?"}, {"user", "Berger"}, {"assistant", "Saved."}};
    BOOST_TEST(store.append_turn_messages("c", 2, second).size() == 2u);
    BOOST_TEST(store.append_turn_messages("c", 2, second).empty());
    BOOST_TEST(lines("c") == (lines_t{"user: hi", "assistant: hello", "user: Thomas?", "assistant: Which?",
                                      "user: Berger", "assistant: Saved."}),
               boost::test_tools::per_element());

    // The reply's insert fails: the user's message of the turn is not kept either.
    raw_query(tmp.path, "CREATE TRIGGER fail_reply BEFORE INSERT ON messages "
                        "WHEN NEW.role = 'assistant' BEGIN SELECT RAISE(ABORT, 'injected'); END");
    const std::vector<gs::message_text> third = {{"user", "bye"}, {"assistant", "see you"}};
    const auto what = expect_error([&] { store.append_turn_messages("c", 6, third); },
                                   gs::memory_errc::constraint_failed);
    BOOST_TEST(contains(what, "injected"), what);
    BOOST_TEST(store.count_messages("c") == 6u);
    raw_query(tmp.path, "DROP TRIGGER fail_reply");
    BOOST_TEST(store.append_turn_messages("c", 6, third).size() == 2u);
    BOOST_TEST(store.count_messages("c") == 8u);
    BOOST_TEST(store.count_messages("other") == 1u);
}

BOOST_AUTO_TEST_CASE(corrupted_file_is_a_typed_error)
{
    for (const std::size_t size : {std::size_t{100}, std::size_t{8192}}) {
        temp_db tmp;
        {
            std::ofstream out(tmp.path, std::ios::binary);
            std::mt19937 rng(42);
            for (std::size_t i = 0; i < size; ++i) out.put(static_cast<char>(rng() & 0xff));
        }
        try {
            gs::memory_store store(tmp.path);
            BOOST_FAIL("opening garbage must fail");
        } catch (const gs::memory_error& e) {
            BOOST_TEST(static_cast<int>(e.code()) == static_cast<int>(gs::memory_errc::open_failed));
            BOOST_TEST((e.sqlite_code() & 0xff) == SQLITE_NOTADB);
            BOOST_TEST(contains(e.what(), "file is not a database"), e.what());
            BOOST_TEST(contains(e.what(), tmp.path.string()), e.what());
            BOOST_TEST(e.path() == tmp.path);
            BOOST_TEST((e.error_code() == gs::memory_errc::open_failed));
            BOOST_TEST(e.error_code().category().name() == std::string("global_supervisor.memory"));
        }
    }
}

BOOST_AUTO_TEST_CASE(schema_too_new)
{
    temp_db tmp;
    { gs::memory_store store(tmp.path); }
    raw_query(tmp.path, "PRAGMA user_version = 99");
    const auto what = expect_error([&] { gs::memory_store store(tmp.path); },
                                   gs::memory_errc::schema_too_new);
    BOOST_TEST(contains(what, "99"));
    BOOST_TEST(contains(what, tmp.path.string()));
}

BOOST_AUTO_TEST_CASE(read_only_failures)
{
    temp_db tmp;
    {
        gs::memory_store store(tmp.path);
        store.seed_demo("u1");
        store.append_message("c", "user", "hello");
    }
    {
        gs::memory_store ro(tmp.path, {.mode = gs::open_mode::read_only});
        BOOST_TEST(ro.find_contacts_by_name("u1", "Thomas").size() == 2u);
        BOOST_TEST(ro.search_facts("u1", "italian").size() == 1u);
        BOOST_TEST(ro.load_messages("c").size() == 1u);
        const auto what = expect_error([&] { ro.add_fact("u1", std::nullopt, "nope"); },
                                       gs::memory_errc::read_only);
        BOOST_TEST(contains(what, "readonly"), what);
        expect_error([&] { ro.append_message("c", "user", "nope"); }, gs::memory_errc::read_only);
        expect_error([&] { ro.seed_demo("u9"); }, gs::memory_errc::read_only);
        BOOST_TEST(ro.count_messages("c") == 1u);
    }

    temp_db missing;
    expect_error([&] { gs::memory_store s(missing.path, {.mode = gs::open_mode::read_only}); },
                 gs::memory_errc::open_failed);
    expect_error([&] { gs::memory_store s(missing.path, {.mode = gs::open_mode::read_write}); },
                 gs::memory_errc::open_failed);
    BOOST_TEST(!fs::exists(missing.path));
    const auto what = expect_error(
        [&] { gs::memory_store s(missing.path / "no" / "such" / "dir.db"); },
        gs::memory_errc::open_failed);
    BOOST_TEST(contains(what, "unable to open"), what);

    // File permissions only bind non-root users.
    if (::geteuid() != 0) {
        temp_db locked;
        { gs::memory_store s(locked.path); }
        fs::permissions(locked.path, fs::perms::owner_read | fs::perms::group_read |
                                         fs::perms::others_read);
        try {
            gs::memory_store s(locked.path);
            s.add_fact("u1", std::nullopt, "must not be written");
            BOOST_FAIL("writing a read-only file must fail");
        } catch (const gs::memory_error& e) {
            BOOST_TEST((e.code() == gs::memory_errc::read_only ||
                        e.code() == gs::memory_errc::open_failed), e.what());
        }
        fs::permissions(locked.path, fs::perms::owner_write, fs::perm_options::add);
    }
}

BOOST_AUTO_TEST_CASE(move_and_two_connections)
{
    temp_db tmp;
    gs::memory_store a(tmp.path);
    gs::memory_store b(tmp.path);  // second connection on the same WAL file
    a.append_message("c", "user", "one");
    b.append_message("c", "assistant", "two");
    gs::memory_store moved = std::move(a);
    BOOST_TEST(moved.count_messages("c") == 2u);
    BOOST_TEST(b.load_messages("c").at(1).content == "two");
    b = std::move(moved);
    BOOST_TEST(b.load_messages("c").at(0).content == "one");
}

BOOST_AUTO_TEST_SUITE_END()
