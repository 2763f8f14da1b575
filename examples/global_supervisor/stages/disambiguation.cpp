// Stage 5: Disambiguation
//
//   extraction_merge ──┬──(blocking)─────> disambiguation_blocking ──(interrupt: "Which Thomas?")──┐
//   (stage 4)          └──(non_blocking)─> disambiguation_simple ──────────────────────────────────┤
//                                                                                                  v
//                                                                                      message_persist (stage 7)
//
// Blocking: a fact about an ambiguous name waits. disambiguation_blocking stores the user's
// message and the question in the chat (the question is the assistant's message while the thread
// waits), then pauses the run with an interrupt whose payload is {kind, question, options,
// entity}. The run's checkpoint keeps everything; `resume` (from any process, by thread id)
// re-runs the node from its start: the messages are already stored (append_turn_messages skips them),
// the interrupt returns the answer, and the waiting facts are stored against the chosen contact.
// An answer that names no candidate gets the question again (up to 3 times).
//
// Non-blocking: the name is ambiguous but nothing waits to be stored (a question about Thomas):
// answer from memory, and append the "by the way, which Thomas?" follow-up.

#include "stages/disambiguation.hpp"
#include "stages/memory.hpp"

#include <boost/json/object.hpp>

namespace global_supervisor {

std::string answer_from_memory(const state& s) {
    if (s.memory.context.empty()) return "I don't have anything about that in memory yet.";
    std::string out = "Here's what I remember:\n" + facts_text(s.memory.context, 3);
    if (!out.empty() && out.back() == '\n') out.pop_back();
    return out;
}

boost::asio::awaitable<update> disambiguation_blocking(services& svc, const state& s, stategraph::context& ctx) {
    const auto& conv = s.conversation;
    if (!s.disambiguation.entity) co_return update{};
    const ambiguous_entity& entity = *s.disambiguation.entity;

    std::vector<turn_message> exchange{{"user", conv.user_message}};
    std::optional<candidate> chosen;
    std::string answer;
    for (int asked = 0; asked < max_disambiguation_questions && !chosen; ++asked) {
        std::string question = asked == 0 ? s.hitl.question : "Sorry, I didn't get that. " + s.hitl.question;
        exchange.push_back({"assistant", question});
        svc.with_store([&](memory_store& m) { m.append_turn_messages(conv.chat_id, conv.message_count, exchange); });
        boost::json::object payload;
        payload["kind"] = "disambiguation";
        payload["question"] = question;
        payload["entity"] = entity.name;
        boost::json::array options;
        for (const auto& o : s.hitl.options) options.emplace_back(o);
        payload["options"] = std::move(options);
        answer = co_await ctx.interrupt<std::string>(std::move(payload));
        exchange.push_back({"user", answer});
        chosen = match_candidate(answer, entity.candidates);
    }

    auto ex = s.extraction;
    auto d = s.disambiguation;
    response_state resp = s.response;
    resp.kind = response_kind::simple;
    if (chosen) {
        std::string texts;
        svc.with_store([&](memory_store& m) {
            for (const auto& f : d.pending_facts) {
                ex.stored.push_back(store_fact_once(m, conv.user_id, chosen, f.text, mentioned_date(f.text, svc.today())));
                texts += (texts.empty() ? "" : "; ") + f.text;
            }
        });
        resp.reply = "Thanks! I've saved that for " + chosen->full_name +
                     (chosen->relation.empty() ? "" : " (" + chosen->relation + ")") + ": " + texts + ".";
        d.chosen = chosen;
        d.blocking_resolved = true;
    } else {
        resp.reply = "I still couldn't tell which " + entity.name + " you meant, so I didn't save it.";
    }
    d.pending_facts.clear();
    auto h = s.hitl;
    h.pending = hitl_kind::none;
    h.question.clear();
    h.options.clear();
    h.user_response = answer;
    h.exchange = std::move(exchange);
    co_return update{}
        .set<&state::extraction>(std::move(ex))
        .set<&state::disambiguation>(std::move(d))
        .set<&state::hitl>(std::move(h))
        .set<&state::response>(std::move(resp));
}

update disambiguation_simple(const state& s) {
    auto resp = s.response;
    resp.kind = response_kind::simple;
    resp.followup = s.disambiguation.btw_question;
    resp.reply = answer_from_memory(s) + "\n\n" + resp.followup;
    auto d = s.disambiguation;
    d.btw_resolved = false;
    return update{}.set<&state::response>(std::move(resp)).set<&state::disambiguation>(std::move(d));
}

stage_decl disambiguation_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("5. Disambiguation",
        "disambiguation_blocking"_n = with_services(svc, disambiguation_blocking),
        "disambiguation_simple"_n   = disambiguation_simple,

        "disambiguation_blocking"_n >> "message_persist"_n,
        "disambiguation_simple"_n   >> "message_persist"_n);
    // clang-format on
}

} // namespace global_supervisor
