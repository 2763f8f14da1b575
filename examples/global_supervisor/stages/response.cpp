// Stage 7: Response Generation
//
//                 ┌──(simple)──> simple_text ──┐
//   ui_router ────┼──(complex)─> complex_text ─┼──> message_persist ──> END
//                 └──(hitl)────> hitl_text ────┘        ^
//   disambiguation_blocking / disambiguation_simple ─────┘
//
// ui_router picks the response type: "hitl" when an agent asked the user for permission or needs
// more input this turn, "complex" for a complex request or any agent results, else "simple".
// simple_text greets (with the agenda), confirms the facts stored, or answers from memory;
// complex_text synthesizes the agents' results (and says which agent could not be reached);
// hitl_text reports what happened to the action the user approved or denied.
// message_persist streams the reply (stream mode "messages") and stores the turn in the chat: the user's message (or the exchange already
// stored while the thread waited) and the reply, in one transaction and idempotently: a kill
// between two inserts leaves neither, and the re-run after a kill (the engine runs the node
// again when its checkpoint was not saved) stores nothing twice.

#include "stages/response.hpp"
#include "stages/disambiguation.hpp"

namespace global_supervisor {

namespace {

std::string capitalized(std::string_view s) {
    std::string out(s);
    if (!out.empty() && out[0] >= 'a' && out[0] <= 'z') out[0] = static_cast<char>(out[0] - 'a' + 'A');
    return out;
}

std::string stored_text(const state& s) {
    std::string out;
    for (const auto& f : s.extraction.stored) {
        out += (out.empty() ? "" : "; ") + f.text;
        if (f.contact) out += " (" + *f.contact + ")";
    }
    return out;
}

std::string result_line(const agent_result& r) {
    return "- " + capitalized(to_string(r.agent)) + ": " + r.summary;
}

bool is_question(std::string_view message) {
    if (message.find('?') != std::string_view::npos) return true;
    for (const char* w : {"what", "who", "when", "where", "which", "how", "tell me", "remind me", "do you know"})
        if (icontains(message.substr(0, std::min<std::size_t>(message.size(), 16)), w)) return true;
    return false;
}

update respond(const state& s, std::string reply) {
    auto resp = s.response;
    if (resp.presentation.max_len > 0 && reply.size() > resp.presentation.max_len)
        reply = reply.substr(0, resp.presentation.max_len - 3) + "...";
    resp.reply = std::move(reply);
    return update{}.set<&state::response>(std::move(resp));
}

} // namespace

response_kind response_type(const state& s) { return s.response.kind; }

update ui_router(const state& s) {
    auto results = current_results(s);
    auto resp = s.response;
    bool hitl = std::any_of(results.begin(), results.end(), [](const agent_result& r) {
        return r.asked_permission || r.status == agent_status::needs_input;
    });
    if (hitl) resp.kind = response_kind::hitl;
    else if (s.intent.route == route_kind::complex || !results.empty()) resp.kind = response_kind::complex;
    else resp.kind = response_kind::simple;
    return update{}.set<&state::response>(std::move(resp));
}

update simple_text(const state& s) {
    const auto& msg = s.conversation.user_message;
    std::string reply;
    if (s.intent.answers_disambiguation) {
        const auto& c = *s.intent.answers_disambiguation;
        reply = s.extraction.stored.empty() ? "Thanks, noted that you meant " + c.full_name + "."
                                            : "Thanks! I've saved that for " + c.full_name + ": " + stored_text(s) + ".";
    } else if (s.intent.route == route_kind::greeting) {
        reply = "Hello! How can I help you today?";
        if (!s.memory.preloaded_facts.empty()) {
            reply += " Coming up:";
            for (std::size_t i = 0; i < s.memory.preloaded_facts.size() && i < 2; ++i) {
                const auto& f = s.memory.preloaded_facts[i];
                reply += (i ? ";" : "") + std::string(" ") + f.text + (f.event_date ? " (" + *f.event_date + ")" : "");
            }
            reply += ".";
        }
    } else {
        if (!s.extraction.stored.empty()) reply = "Noted: " + stored_text(s) + ".";
        if (s.extraction.stored.empty() || is_question(msg)) reply += (reply.empty() ? "" : "\n") + answer_from_memory(s);
    }
    return respond(s, std::move(reply));
}

update complex_text(const state& s) {
    auto results = current_results(s);
    std::string reply;
    if (results.empty()) {
        reply = "I couldn't find an agent for that. " + answer_from_memory(s);
    } else {
        std::size_t failed = 0;
        for (const auto& r : results) failed += r.status == agent_status::failed;
        reply = failed == results.size() ? "I couldn't get this done:" : failed ? "Here's what I did (not everything worked):"
                                                                                : "Here's what I did:";
        for (const auto& r : results) reply += "\n" + result_line(r);
    }
    if (!s.extraction.stored.empty()) reply += "\nNoted: " + stored_text(s) + ".";
    return respond(s, std::move(reply));
}

update hitl_text(const state& s) {
    auto results = current_results(s);
    std::string reply;
    for (const auto& r : results) {
        if (!r.asked_permission && r.status != agent_status::needs_input) continue;
        if (!reply.empty()) reply += "\n";
        switch (r.status) {
        case agent_status::ok: reply += "Done, with your approval. " + r.summary; break;
        case agent_status::denied: reply += "OK. " + r.summary; break;
        case agent_status::needs_input: reply += r.summary; break;
        case agent_status::failed: reply += "You approved it, but it failed: " + r.summary; break;
        }
    }
    bool others = false;
    for (const auto& r : results) {
        if (r.asked_permission || r.status == agent_status::needs_input) continue;
        if (!others) reply += "\nAlso:";
        others = true;
        reply += "\n" + result_line(r);
    }
    return respond(s, std::move(reply));
}

update message_persist(services& svc, const state& s) {
    const auto& conv = s.conversation;
    std::vector<turn_message> desired = s.hitl.exchange;
    if (desired.empty()) desired.push_back({"user", conv.user_message});
    desired.push_back({"assistant", s.response.reply});
    svc.with_store([&](memory_store& m) { m.append_turn_messages(conv.chat_id, conv.message_count, desired); });
    auto resp = s.response;
    resp.persisted = true;
    return update{}.set<&state::response>(std::move(resp));
}

update message_persist_node(services& svc, const state& s, stategraph::context& ctx) {
    const auto& conv = s.conversation;
    // The reply as a chat UI shows it (stream mode "messages"): LangChain message chunks, a word
    // at a time, under one message id per turn.
    if (ctx.streams_messages()) {
        const std::string id = "reply-" + conv.chat_id + "-" + std::to_string(conv.message_count);
        const std::string& reply = s.response.reply;
        for (std::size_t at = 0; at < reply.size();) {
            std::size_t next = reply.find(' ', at);
            next = next == std::string::npos ? reply.size() : next + 1;
            boost::json::object chunk{{"type", "AIMessageChunk"}, {"content", reply.substr(at, next - at)}, {"id", id}};
            ctx.write_message(chunk);
            at = next;
        }
    }
    return message_persist(svc, s);
}

stage_decl response_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("7. Response Generation",
        "ui_router"_n       = ui_router,
        "simple_text"_n     = simple_text,
        "complex_text"_n    = complex_text,
        "hitl_text"_n       = hitl_text,
        "message_persist"_n = with_services(svc, message_persist_node),

        "ui_router"_n >> route(response_type, {{response_kind::simple,  "simple_text"_n},
                                               {response_kind::complex, "complex_text"_n},
                                               {response_kind::hitl,    "hitl_text"_n}}),
        "simple_text"_n     >> "message_persist"_n,
        "complex_text"_n    >> "message_persist"_n,
        "hitl_text"_n       >> "message_persist"_n,
        "message_persist"_n >> end);
    // clang-format on
}

} // namespace global_supervisor
