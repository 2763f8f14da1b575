// Stage 1: Entry & Session
//
//   START ──> session_init ──> summarization_check ──(true)──> summarization ──┐
//                                       │                                        v
//                                       └──────(false)────────────────────> context_loader ──> hitl_handler (stage 2)
//
// session_init loads the chat's recent messages, counts messages and tokens, starts the turn
// (resets the per-turn sub-states) and reads what the thread waits for (hitl.pending) to set the
// turn's resume type. summarization_check flags a history of more than 20 messages or 4,000
// tokens; summarization replaces the older messages by one summary message. context_loader loads
// the presentation rules and the agenda of the next days (preloaded facts).

#include "stages/entry.hpp"

namespace global_supervisor {

namespace {
/// A new turn's response: empty, but for the presentation avatar a caller chose (input avatar_id).
response_state fresh_response(const response_state& now) {
    response_state r;
    r.presentation.avatar = now.presentation.avatar;
    return r;
}
} // namespace

update session_init(services& svc, const state& s, stategraph::context& ctx) {
    conversation_state c;
    c.chat_id = s.conversation.chat_id.empty() ? ctx.thread_id() : s.conversation.chat_id;
    c.user_id = s.conversation.user_id.empty() ? svc.user_id() : s.conversation.user_id;
    c.user_message = s.conversation.user_message;
    c.model = svc.model().name();
    c.turn = ctx.step();
    svc.with_store([&](memory_store& m) {
        auto all = m.load_messages(c.chat_id);
        c.message_count = all.size();
        for (const auto& msg : all) c.history_tokens += estimate_tokens(msg.content);
        std::size_t from = all.size() > history_window ? all.size() - history_window : 0;
        for (std::size_t i = from; i < all.size(); ++i) c.history.push_back({all[i].role, all[i].content});
    });

    // The turn's resume type: what the thread was waiting for when this message came.
    hitl_state h = s.hitl;
    h.resume_type = s.hitl.pending;
    h.user_response.clear();
    h.exchange.clear();

    auto u = update{}
                 .set<&state::conversation>(std::move(c))
                 .set<&state::hitl>(std::move(h))
                 .set<&state::extraction>({})
                 .set<&state::response>(fresh_response(s.response));
    // An agent waiting for permission continues its plan: keep what the plan was made from.
    if (s.hitl.pending != hitl_kind::agent) {
        u.set<&state::intent>({});
        u.set<&state::memory>({});
        u.set<&state::planning>({});
        // The last turn's agent results go too: overwritten, bypassing their reducer.
        u.overwrite<&state::agent_results>({});
    }
    // A pending disambiguation keeps its entity and facts: this message may answer it.
    if (s.hitl.pending != hitl_kind::disambiguation) u.set<&state::disambiguation>({});
    return u;
}

update summarization_check(const state& s) {
    auto c = s.conversation;
    c.needs_summarization = needs_summarization(c.message_count, c.history_tokens);
    return update{}.set<&state::conversation>(std::move(c));
}

bool needs_summary(const state& s) { return s.conversation.needs_summarization; }

boost::asio::awaitable<update> summarization(services& svc, const state& s) {
    auto c = s.conversation;
    std::vector<turn_message> older;
    svc.with_store([&](memory_store& m) {
        auto all = m.load_messages(c.chat_id);
        std::size_t n = all.size() > summary_keeps_last ? all.size() - summary_keeps_last : 0;
        for (std::size_t i = 0; i < n; ++i) older.push_back({all[i].role, all[i].content});
    });
    std::string summary = co_await svc.model().summarize(older);
    svc.with_store([&](memory_store& m) {
        m.replace_messages_with_summary(c.chat_id, summary, summary_keeps_last);
        auto all = m.load_messages(c.chat_id);
        c.message_count = all.size();
        c.history_tokens = 0;
        c.history.clear();
        for (const auto& msg : all) {
            c.history_tokens += estimate_tokens(msg.content);
            c.history.push_back({msg.role, msg.content});
        }
    });
    c.summary = std::move(summary);
    c.needs_summarization = false;
    co_return update{}.set<&state::conversation>(std::move(c));
}

update context_loader(services& svc, const state& s) {
    auto mem = s.memory;
    mem.preloaded_facts =
        svc.with_store([&](memory_store& m) { return m.upcoming_facts(s.conversation.user_id, svc.today(), 7); });
    auto resp = s.response;
    resp.presentation = presentation_rules{s.response.presentation.avatar, "text", 800};
    return update{}.set<&state::memory>(std::move(mem)).set<&state::response>(std::move(resp));
}

stage_decl entry_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("1. Entry & Session",
        "session_init"_n        = with_services(svc, session_init),
        "summarization_check"_n = summarization_check,
        "summarization"_n       = with_services(svc, summarization),
        "context_loader"_n      = with_services(svc, context_loader),

        start >> "session_init"_n >> "summarization_check"_n,
        "summarization_check"_n >> route(needs_summary, {{true,  "summarization"_n},
                                                         {false, "context_loader"_n}}),
        "summarization"_n >> "context_loader"_n >> "hitl_handler"_n);
    // clang-format on
}

} // namespace global_supervisor
