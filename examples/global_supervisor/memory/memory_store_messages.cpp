// The memory store's chat messages: append_message, append_turn_messages, load_messages,
// count_messages, replace_messages_with_summary.

#include "memory_store_internal.hpp"

#include <algorithm>
#include <limits>

namespace global_supervisor {

using namespace memory_detail;

// --- messages ---------------------------------------------------------------------------------

namespace {

chat_message read_message(const statement& st)
{
    chat_message m;
    m.id = st.integer(0);
    m.chat_id = st.text(1);
    m.role = st.text(2);
    m.content = st.text(3);
    m.created_at = st.text(4);
    m.seq = st.integer(5);
    return m;
}

std::int64_t clamp_limit(std::size_t limit)
{
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    return static_cast<std::int64_t>(std::min(limit, max));
}

}  // namespace

chat_message memory_store::append_message(std::string_view chat_id, std::string_view role,
                                          std::string_view content)
{
    // One statement: the write lock is taken before MAX(seq) is read, so seq is race-free.
    statement st(*impl_,
                 "INSERT INTO messages (chat_id, role, content, seq) VALUES (?1, ?2, ?3, "
                 "  COALESCE((SELECT MAX(seq) FROM messages WHERE chat_id = ?1), 0) + 1) "
                 "RETURNING id, chat_id, role, content, created_at, seq",
                 "append_message");
    st.bind(1, chat_id).bind(2, role).bind(3, content);
    chat_message m;
    if (st.step()) m = read_message(st);
    st.run();
    return m;
}

std::vector<chat_message> memory_store::append_turn_messages(std::string_view chat_id,
                                                            std::size_t base,
                                                            const std::vector<message_text>& messages)
{
    constexpr std::string_view op = "append_turn_messages";
    // BEGIN IMMEDIATE takes the write lock first: no other connection can append between the
    // count and the inserts, and a failure or a kill before COMMIT leaves none of them.
    transaction tx(*impl_, op);
    const std::size_t count = count_messages(chat_id);
    const std::size_t stored = count > base ? count - base : 0;
    std::vector<chat_message> appended;
    for (std::size_t i = stored; i < messages.size(); ++i)
        appended.push_back(append_message(chat_id, messages[i].role, messages[i].content));
    if (appended.empty()) return appended;  // rolled back: nothing was written
    tx.commit();
    return appended;
}

std::vector<chat_message> memory_store::load_messages(std::string_view chat_id,
                                                      std::size_t limit) const
{
    std::vector<chat_message> out;
    if (limit == 0) return out;
    statement st(*impl_,
                 "SELECT id, chat_id, role, content, created_at, seq FROM "
                 "(SELECT * FROM messages WHERE chat_id = ?1 ORDER BY seq DESC LIMIT ?2) "
                 "ORDER BY seq",
                 "load_messages");
    st.bind(1, chat_id).bind(2, clamp_limit(limit));
    while (st.step()) out.push_back(read_message(st));
    return out;
}

std::size_t memory_store::count_messages(std::string_view chat_id) const
{
    statement st(*impl_, "SELECT count(*) FROM messages WHERE chat_id = ?1", "count_messages");
    st.bind(1, chat_id);
    return st.step() ? static_cast<std::size_t>(st.integer(0)) : 0;
}

std::size_t memory_store::replace_messages_with_summary(std::string_view chat_id,
                                                        std::string_view summary,
                                                        std::size_t keep_last_n)
{
    constexpr std::string_view op = "replace_messages_with_summary";
    auto& s = *impl_;
    transaction tx(s, op);
    const std::size_t total = count_messages(chat_id);
    if (total <= keep_last_n) return 0;  // rolled back: nothing was written
    const std::size_t remove = total - keep_last_n;

    std::int64_t last_removed_seq = 0;
    {
        statement st(s,
                     "SELECT seq FROM messages WHERE chat_id = ?1 ORDER BY seq "
                     "LIMIT 1 OFFSET ?2",
                     op);
        st.bind(1, chat_id).bind(2, static_cast<std::int64_t>(remove - 1));
        if (st.step()) last_removed_seq = st.integer(0);
    }
    {
        statement st(s, "DELETE FROM messages WHERE chat_id = ?1 AND seq <= ?2", op);
        st.bind(1, chat_id).bind(2, last_removed_seq).run();
    }
    {
        // The summary takes the seq of the newest removed message: before every kept one.
        statement st(s,
                     "INSERT INTO messages (chat_id, role, content, seq) "
                     "VALUES (?1, 'summary', ?2, ?3)",
                     op);
        st.bind(1, chat_id).bind(2, summary).bind(3, last_removed_seq).run();
    }
    tx.commit();
    return remove;
}

}  // namespace global_supervisor
