// Stage 3: Intent Classification
//
//   hitl_handler ──> intent_classification ──> retrieval_router   (stage 4)
//
// The brain (rules by default, a chat model with --model-url) classifies the message: its route
// (greeting / simple / complex), the contacts it names, and the optimization flags that let the
// memory stage skip work: has_extractable_facts (fact extraction runs), needs_semantic_retrieval
// (retrieval runs) and has_preferences. A greeting sets none of them, so it runs no retrieval and
// no fact extraction.
//
// While a disambiguation question is pending (resume type "disambiguation"), a message that names
// one of the candidates (full name, last name, relation or number) is the answer: it is recorded
// in intent.answers_disambiguation and the flags are cleared, so that extraction_merge only stores
// the waiting facts against the chosen contact.

#include "stages/classification.hpp"

namespace global_supervisor {

boost::asio::awaitable<update> intent_classification(services& svc, const state& s) {
    const std::string& message = s.conversation.user_message;
    auto names = svc.with_store([&](memory_store& m) { return m.contact_first_names(s.conversation.user_id); });
    intent found = co_await svc.model().classify(message, std::move(names));

    intent_state out;
    out.route = found.route;
    out.entities = std::move(found.entities);
    out.has_extractable_facts = found.has_extractable_facts;
    out.has_preferences = found.has_preferences;
    out.needs_semantic_retrieval = found.needs_semantic_retrieval;

    if (s.hitl.resume_type == hitl_kind::disambiguation && s.disambiguation.entity) {
        if (auto chosen = match_candidate(message, s.disambiguation.entity->candidates)) {
            out.answers_disambiguation = chosen;
            out.route = route_kind::simple;
            out.entities = {chosen->name};
            out.has_extractable_facts = false;
            out.has_preferences = false;
            out.needs_semantic_retrieval = false;
        }
    }
    co_return update{}.set<&state::intent>(std::move(out));
}

stage_decl classification_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("3. Intent Classification",
        "intent_classification"_n = with_services(svc, intent_classification),

        "intent_classification"_n >> "retrieval_router"_n);
    // clang-format on
}

} // namespace global_supervisor
