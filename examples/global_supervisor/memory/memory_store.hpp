#ifndef GLOBAL_SUPERVISOR_MEMORY_MEMORY_STORE_HPP
#define GLOBAL_SUPERVISOR_MEMORY_MEMORY_STORE_HPP

/// @file memory_store.hpp
/// @brief Embedded SQLite memory database of the Global Supervisor example
///        (contacts, facts on the stategraph Store with FTS5 retrieval, chat messages).

#include <boost/describe/class.hpp>
#include <boost/describe/enum.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace global_supervisor {

/// @brief Error conditions reported by memory_store (carried by memory_error).
enum class memory_errc {
    open_failed = 1,       ///< the file could not be opened/created, or is not a SQLite database
    schema_too_new,        ///< the file's user_version is newer than this code understands
    constraint_failed,     ///< a CHECK / FOREIGN KEY / NOT NULL / UNIQUE constraint failed
    io_failed,             ///< disk I/O error, disk full, corruption detected after open
    read_only,             ///< a write was attempted on a read-only database
    busy,                  ///< the database stayed locked longer than busy_timeout
    invalid_argument,      ///< an argument was rejected before reaching SQLite (e.g. a bad ISO date)
    sqlite_failure,        ///< any other SQLite error (SQL error, misuse, ...)
};
BOOST_DESCRIBE_ENUM(memory_errc, open_failed, schema_too_new, constraint_failed, io_failed,
                    read_only, busy, invalid_argument, sqlite_failure)

/// @brief The std::error_category of memory_errc (name "global_supervisor.memory").
const std::error_category& memory_category() noexcept;

/// @brief Makes a std::error_code from a memory_errc (found by ADL).
std::error_code make_error_code(memory_errc e) noexcept;

/// @brief Exception thrown by every memory_store operation that fails.
///
/// what() reads "memory_store: <operation>: <SQLite message> [sqlite code N] (file: <path>)".
class memory_error : public std::runtime_error {
public:
    /// @brief Builds the error; @p sqlite_code is the extended SQLite result code (0 if none).
    memory_error(memory_errc code, std::string_view operation, std::string_view detail,
                 std::filesystem::path path, int sqlite_code = 0);

    /// @brief The error condition.
    memory_errc code() const noexcept { return code_; }
    /// @brief The same condition as a std::error_code.
    std::error_code error_code() const noexcept { return make_error_code(code_); }
    /// @brief The extended SQLite result code, or 0 when the error did not come from SQLite.
    int sqlite_code() const noexcept { return sqlite_code_; }
    /// @brief The database file the store was working on.
    const std::filesystem::path& path() const noexcept { return path_; }

private:
    memory_errc code_;
    int sqlite_code_;
    std::filesystem::path path_;
};

/// @brief A contact of a user. `name` is the short (first) name used in conversation.
struct contact {
    std::int64_t id = 0;
    std::string user_id;
    std::string name;
    std::string full_name;
    std::string relation;
    std::string notes;
};
BOOST_DESCRIBE_STRUCT(contact, (), (id, user_id, name, full_name, relation, notes))

/// @brief A remembered fact, optionally about a contact and optionally dated.
struct fact {
    std::int64_t id = 0;
    std::string user_id;
    std::optional<std::int64_t> contact_id;
    std::string text;
    std::string created_at;                 ///< UTC, "YYYY-MM-DDTHH:MM:SS.sssZ"
    std::optional<std::string> event_date;  ///< ISO date "YYYY-MM-DD" (or date-time)
};
BOOST_DESCRIBE_STRUCT(fact, (), (id, user_id, contact_id, text, created_at, event_date))

/// @brief A fact returned by full-text search, with its BM25 score (lower is better).
struct fact_hit {
    fact value;
    double score = 0.0;
};
BOOST_DESCRIBE_STRUCT(fact_hit, (), (value, score))

/// @brief One message of a chat; `seq` orders the messages of one chat (ascending).
struct chat_message {
    std::int64_t id = 0;
    std::string chat_id;
    std::string role;  ///< "user", "assistant", "system", "summary", ...
    std::string content;
    std::string created_at;
    std::int64_t seq = 0;
};
BOOST_DESCRIBE_STRUCT(chat_message, (), (id, chat_id, role, content, created_at, seq))

/// @brief A message to store: its role and content (the store gives it id, seq and created_at).
struct message_text {
    std::string role;  ///< "user", "assistant", "summary", ...
    std::string content;
    friend bool operator==(const message_text&, const message_text&) = default;
};
BOOST_DESCRIBE_STRUCT(message_text, (), (role, content))

/// @brief How memory_store opens its file.
enum class open_mode {
    read_write_create,  ///< create the file and the schema if needed (default)
    read_write,         ///< the file must exist; the schema is migrated if needed
    read_only,          ///< the file must exist with the current schema; writes fail with read_only
};
BOOST_DESCRIBE_ENUM(open_mode, read_write_create, read_write, read_only)

/// @brief Options of memory_store.
struct memory_options {
    open_mode mode = open_mode::read_write_create;
    /// @brief How long a statement waits for a lock held by another connection.
    std::chrono::milliseconds busy_timeout{5000};
};

/// @brief Today's date in UTC as "YYYY-MM-DD".
std::string today_iso_date();

/// @brief @p iso_date ("YYYY-MM-DD") shifted by @p days; throws memory_error(invalid_argument)
///        when @p iso_date is not a valid date.
std::string add_days(std::string_view iso_date, int days);

/// @brief Embedded SQLite memory database: one file, WAL journal, versioned schema.
///
/// Schema (user_version 3): contacts, messages, and `fact_ids` (each fact's id and contact);
/// the facts themselves are items of the long-term memory Store (stategraph::store::sqlite_store,
/// tables store_items / store_fts in the same file) at ("users", user_id, "facts"), key "<id>".
/// Opening migrates older files forward (the facts of versions 1 and 2 move onto the Store); a
/// file with a newer user_version is refused with memory_errc::schema_too_new.
///
/// Thread safety: a memory_store owns one SQLite connection opened in multi-thread mode
/// (SQLITE_OPEN_NOMUTEX). Use it from one thread at a time (it may move between threads);
/// open one store per thread for concurrency: WAL + busy_timeout handle the file locking.
/// All statements are prepared once and cached; user data is always bound, never
/// concatenated into SQL. Every failure throws memory_error; the store stays usable after
/// an error (a failed write is rolled back). A moved-from store may only be destroyed or
/// assigned to.
class memory_store {
public:
    /// @brief The schema version written by this code.
    static constexpr int schema_version = 3;

    /// @brief Opens (and by default creates) the database at @p path and migrates its schema.
    explicit memory_store(const std::filesystem::path& path, memory_options options = {});
    ~memory_store();
    memory_store(memory_store&&) noexcept;
    memory_store& operator=(memory_store&&) noexcept;
    memory_store(const memory_store&) = delete;
    memory_store& operator=(const memory_store&) = delete;

    /// @brief The database file.
    const std::filesystem::path& path() const noexcept;
    /// @brief The schema version stored in the file (PRAGMA user_version).
    int user_version() const;

    // --- contacts -------------------------------------------------------------------------

    /// @brief Inserts the demo contacts and facts for @p user_id; idempotent.
    /// @param today the ISO date the demo's dated facts count from (the agenda of the next days):
    /// the services' own today (`services::options::today`), empty for the clock's.
    /// @return the number of rows inserted (0 when already seeded).
    std::size_t seed_demo(std::string_view user_id, std::string_view today = {});

    /// @brief Adds a contact and returns its id.
    std::int64_t add_contact(std::string_view user_id, std::string_view name,
                             std::string_view full_name, std::string_view relation,
                             std::string_view notes = {});

    /// @brief The contact with this id, if any.
    std::optional<contact> get_contact(std::int64_t contact_id) const;

    /// @brief Contacts of @p user_id whose name, or first word of full_name, equals
    ///        @p first_name (ASCII case-insensitive), ordered by id.
    std::vector<contact> find_contacts_by_name(std::string_view user_id,
                                               std::string_view first_name) const;

    /// @brief Distinct short names of all contacts of @p user_id (for classification).
    std::vector<std::string> contact_first_names(std::string_view user_id) const;

    // --- facts ----------------------------------------------------------------------------

    /// @brief Stores a fact and returns its id. @p event_date must be an ISO date
    ///        ("YYYY-MM-DD", optionally with a time). An unknown @p contact_id fails with
    ///        constraint_failed.
    std::int64_t add_fact(std::string_view user_id, std::optional<std::int64_t> contact_id,
                          std::string_view text,
                          std::optional<std::string_view> event_date = std::nullopt);

    /// @brief The facts about one contact, ordered by id.
    std::vector<fact> facts_for_contact(std::int64_t contact_id) const;

    /// @brief Full-text search over the facts of @p user_id, best (lowest BM25) first.
    ///
    /// Arbitrary user text is accepted: it is reduced by fts_query() to quoted keywords
    /// joined by OR. A query without keywords returns nothing.
    std::vector<fact_hit> search_facts(std::string_view user_id, std::string_view query,
                                       std::size_t limit = 10) const;

    /// @brief Dated facts of @p user_id with from_date <= date(event_date) <= to_date
    ///        (ISO dates, inclusive), ordered by event date.
    std::vector<fact> facts_between(std::string_view user_id, std::string_view from_date,
                                    std::string_view to_date) const;

    /// @brief Dated facts in [today, today + days], ordered by event date (empty if days < 0).
    std::vector<fact> upcoming_facts(std::string_view user_id, std::string_view today,
                                     int days) const;

    // --- messages -------------------------------------------------------------------------

    /// @brief Appends a message to a chat and returns it (with its id and seq).
    chat_message append_message(std::string_view chat_id, std::string_view role,
                                std::string_view content);

    /// @brief Stores the messages of one turn of a chat: all of them or none, and never twice.
    ///
    /// @p base is the number of messages the chat had when the turn began; @p messages holds
    /// every message of the turn so far, in order. Message i of the turn is the chat's message
    /// number base + i + 1: those positions the chat already fills are skipped (stored by an
    /// earlier call), the others appended, in one transaction whose count is read under the
    /// write lock. So a node that stores its turn, fails or is killed at any point, and runs
    /// again from its start leaves each message stored exactly once, and never a user message
    /// without the reply stored with it. (One run writes a thread's chat at a time, and
    /// summarization folds only messages older than the turn, so the count since @p base
    /// counts this turn's messages.)
    /// @return the messages appended (empty when the turn was stored already).
    std::vector<chat_message> append_turn_messages(std::string_view chat_id, std::size_t base,
                                                   const std::vector<message_text>& messages);

    /// @brief The last @p limit messages of a chat, in chronological (seq) order.
    std::vector<chat_message> load_messages(
        std::string_view chat_id,
        std::size_t limit = std::numeric_limits<std::size_t>::max()) const;

    /// @brief Number of messages stored for a chat.
    std::size_t count_messages(std::string_view chat_id) const;

    /// @brief Replaces all but the last @p keep_last_n messages of a chat by one message
    ///        with role "summary" and content @p summary, placed before the kept ones.
    ///        Atomic. Does nothing when the chat has at most @p keep_last_n messages.
    /// @return the number of messages removed.
    std::size_t replace_messages_with_summary(std::string_view chat_id, std::string_view summary,
                                              std::size_t keep_last_n);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

/// @brief Reduces arbitrary text to a safe FTS5 query: ASCII-lowercased keywords (letters,
///        digits, UTF-8 sequences), stopwords and 1-letter words removed, deduplicated,
///        at most 16, each double-quoted, joined by " OR ". Empty when nothing remains.
std::string fts_query(std::string_view text);

}  // namespace global_supervisor

template <>
struct std::is_error_code_enum<global_supervisor::memory_errc> : std::true_type {};

#endif  // GLOBAL_SUPERVISOR_MEMORY_MEMORY_STORE_HPP
