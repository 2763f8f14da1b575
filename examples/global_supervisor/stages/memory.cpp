// Stage 4: Memory Pipeline (entity-first)
//
//   retrieval_router ──(semantic | parallel)──> entity_resolution ──> semantic_retrieval ──┐
//     │  │                                                                                  v
//     │  └──(skip)───────────────────> memory_assembly <────────────────────── temporal_retrieval
//     │                                       │
//     └──(extract)──> fact_extraction         │
//                           │                 v
//                           └────────> extraction_merge (deferred: after both branches)
//                                             ├──(blocking)─────> disambiguation_blocking   (stage 5)
//                                             ├──(non_blocking)─> disambiguation_simple     (stage 5)
//                                             ├──(complex)──────> global_planner            (stage 6)
//                                             └──(simple)───────> ui_router                 (stage 7)
//
// retrieval_router reads the optimization flags: no semantic retrieval needed -> "skip" (a
// greeting goes straight to memory_assembly); otherwise "semantic", or "parallel" (semantic and
// temporal) when the message refers to time or is a complex request. Its second route starts
// fact_extraction when the message has facts to extract ("none" starts nothing: that edge ends),
// in the same superstep as entity_resolution: the slow LLM call overlaps the retrieval chain.
//
// Entity-first: no fact is stored before its entity is resolved. fact_extraction only extracts;
// extraction_merge links each fact to the contact entity_resolution found and stores it. A fact
// about an ambiguous name ("Thomas", two contacts) is not stored: it waits in the disambiguation
// sub-state for the user's answer (stage 5).
//
// Why extraction_merge is a DEFERRED node and not a barrier join (join(memory_assembly,
// fact_extraction) >> extraction_merge): a barrier fires only when every source has run, and
// fact_extraction is skipped whenever classification finds nothing to extract (a greeting, a
// question). The barrier would then never fire, and compile() rejects it (join_never_fires).
// A deferred node runs once, in the first superstep where nothing else is pending: after every
// branch that was started has finished, whichever branches those were.
//
// "Entity Ambiguity?" and "Route" of the seed are one decision on extraction_merge (after_merge):
// a waiting fact (blocking), an ambiguous name only asked about (non_blocking), else the intent's
// route (complex or simple).

#include "stages/memory.hpp"

#include <algorithm>

namespace global_supervisor {

namespace {

candidate to_candidate(const contact& c) { return {c.id, c.name, c.full_name, c.relation}; }

void add_unique(std::vector<fact>& out, const std::vector<fact>& more) {
    for (const auto& f : more)
        if (std::none_of(out.begin(), out.end(), [&](const fact& g) { return g.id == f.id; })) out.push_back(f);
}

} // namespace

stored_fact store_fact_once(memory_store& m, const std::string& user_id, const std::optional<candidate>& contact,
                            const std::string& text, const std::optional<std::string>& event_date) {
    std::optional<std::int64_t> contact_id;
    if (contact) contact_id = contact->contact_id;
    std::vector<fact> existing;
    if (contact_id) {
        existing = m.facts_for_contact(*contact_id);
    } else {
        for (auto& h : m.search_facts(user_id, text, 20)) existing.push_back(std::move(h.value));
    }
    stored_fact out;
    out.text = text;
    out.event_date = event_date;
    if (contact) out.contact = contact->full_name;
    for (const auto& f : existing)
        if (f.text == text && f.contact_id == contact_id) {
            out.fact_id = f.id;
            return out;
        }
    std::optional<std::string_view> date;
    if (event_date) date = *event_date;
    out.fact_id = m.add_fact(user_id, contact_id, text, date);
    return out;
}

update retrieval_router(const state& s) {
    auto mem = s.memory;
    const auto& i = s.intent;
    if (!i.needs_semantic_retrieval) mem.path = retrieval_path::skip;
    else if (i.route == route_kind::complex || has_time_reference(s.conversation.user_message))
        mem.path = retrieval_path::parallel;
    else mem.path = retrieval_path::semantic;
    return update{}.set<&state::memory>(std::move(mem));
}

retrieval_path retrieval_route(const state& s) { return s.memory.path; }

extraction_branch extraction_route(const state& s) {
    return s.intent.has_extractable_facts ? extraction_branch::extract : extraction_branch::none;
}

update entity_resolution(services& svc, const state& s) {
    auto mem = s.memory;
    mem.resolved_entities.clear();
    mem.ambiguous_entities.clear();
    const std::string& message = s.conversation.user_message;
    svc.with_store([&](memory_store& m) {
        for (const auto& name : s.intent.entities) {
            auto found = m.find_contacts_by_name(s.conversation.user_id, name);
            std::vector<candidate> cands;
            for (const auto& c : found) cands.push_back(to_candidate(c));
            // "Thomas Berger is ..." names one of the Thomases: no ambiguity.
            if (cands.size() > 1) {
                std::vector<candidate> named;
                for (const auto& c : cands)
                    if (icontains(message, c.full_name)) named.push_back(c);
                if (named.size() == 1) cands = named;
            }
            if (cands.size() == 1) mem.resolved_entities.push_back(cands.front());
            else if (cands.size() > 1) mem.ambiguous_entities.push_back({name, std::move(cands)});
        }
    });
    return update{}.set<&state::memory>(std::move(mem));
}

update semantic_retrieval(services& svc, const state& s) {
    auto mem = s.memory;
    mem.semantic_facts.clear();
    svc.with_store([&](memory_store& m) {
        std::vector<fact> found;
        for (const auto& c : mem.resolved_entities) add_unique(found, m.facts_for_contact(c.contact_id));
        for (const auto& a : mem.ambiguous_entities)
            for (const auto& c : a.candidates) add_unique(found, m.facts_for_contact(c.contact_id));
        std::vector<fact> hits;
        for (auto& h : m.search_facts(s.conversation.user_id, s.conversation.user_message, 5)) hits.push_back(h.value);
        add_unique(found, hits);
        mem.semantic_facts = std::move(found);
    });
    return update{}.set<&state::memory>(std::move(mem));
}

update temporal_retrieval(services& svc, const state& s) {
    auto mem = s.memory;
    mem.temporal_facts.clear();
    if (mem.path == retrieval_path::parallel) {
        std::string today = svc.today();
        svc.with_store([&](memory_store& m) {
            mem.temporal_facts = m.upcoming_facts(s.conversation.user_id, today, 14);
            if (auto day = mentioned_date(s.conversation.user_message, today))
                add_unique(mem.temporal_facts, m.facts_between(s.conversation.user_id, *day, *day));
        });
    }
    return update{}.set<&state::memory>(std::move(mem));
}

update memory_assembly(const state& s) {
    auto mem = s.memory;
    mem.context.clear();
    add_unique(mem.context, mem.semantic_facts);
    add_unique(mem.context, mem.temporal_facts);
    return update{}.set<&state::memory>(std::move(mem));
}

boost::asio::awaitable<update> fact_extraction(services& svc, const state& s) {
    extraction_state ex;
    ex.extracted = co_await svc.model().extract_facts(s.conversation.user_message, s.intent.entities);
    co_return update{}.set<&state::extraction>(std::move(ex));
}

update extraction_merge(services& svc, const state& s) {
    const std::string& user = s.conversation.user_id;
    const std::string today = svc.today();
    auto ex = s.extraction;
    disambiguation_state d;
    auto h = s.hitl;

    svc.with_store([&](memory_store& m) {
        // 1. A message that answers the pending question: its facts go to the chosen contact.
        if (s.intent.answers_disambiguation && s.disambiguation.entity) {
            const auto& chosen = *s.intent.answers_disambiguation;
            for (const auto& f : s.disambiguation.pending_facts)
                ex.stored.push_back(store_fact_once(m, user, chosen, f.text, mentioned_date(f.text, today)));
            d.entity = s.disambiguation.entity;
            d.chosen = chosen;
            d.blocking_resolved = true;
        }
        // A pending question the message did not answer is dropped: the user moved on.
        if (h.pending == hitl_kind::disambiguation) {
            h.pending = hitl_kind::none;
            h.question.clear();
            h.options.clear();
        }

        // 2. This message's facts, each linked to its resolved entity.
        std::vector<extracted_fact> waiting;
        const ambiguous_entity* waiting_for = nullptr;
        for (const auto& f : ex.extracted) {
            std::optional<candidate> contact;
            const ambiguous_entity* ambiguous = nullptr;
            if (f.entity) {
                for (const auto& c : s.memory.resolved_entities)
                    if (c.name == *f.entity || c.full_name == *f.entity) contact = c;
                for (const auto& a : s.memory.ambiguous_entities)
                    if (a.name == *f.entity) ambiguous = &a;
            }
            if (!contact && ambiguous) {
                if (!waiting_for) waiting_for = ambiguous;
                if (waiting_for == ambiguous) waiting.push_back(f);
                continue;
            }
            ex.stored.push_back(store_fact_once(m, user, contact, f.text, mentioned_date(f.text, today)));
        }

        // 3. Entity ambiguity: blocking when a fact waits for it, non-blocking otherwise.
        if (waiting_for) {
            d.kind = ambiguity_kind::blocking;
            d.entity = *waiting_for;
            d.pending_facts = std::move(waiting);
            d.chosen.reset();
            d.blocking_resolved = false;
            h.pending = hitl_kind::disambiguation;
            h.question = which_question(*waiting_for);
            h.options.clear();
            for (const auto& c : waiting_for->candidates) h.options.push_back(c.full_name);
            h.waiting_task.reset();
        } else if (!s.memory.ambiguous_entities.empty()) {
            const auto& a = s.memory.ambiguous_entities.front();
            d.kind = ambiguity_kind::non_blocking;
            d.entity = a;
            d.btw_question = "By the way, which " + a.name + " did you mean: ";
            for (std::size_t i = 0; i < a.candidates.size(); ++i)
                d.btw_question += (i == 0 ? "" : i + 1 == a.candidates.size() ? " or " : ", ") + a.candidates[i].full_name;
            d.btw_question += "?";
        }
    });
    return update{}
        .set<&state::extraction>(std::move(ex))
        .set<&state::disambiguation>(std::move(d))
        .set<&state::hitl>(std::move(h));
}

after_merge merge_outcome(const state& s) {
    switch (s.disambiguation.kind) {
    case ambiguity_kind::blocking: return after_merge::blocking;
    case ambiguity_kind::non_blocking: return after_merge::non_blocking;
    case ambiguity_kind::none: break;
    }
    return s.intent.route == route_kind::complex ? after_merge::complex : after_merge::simple;
}

stage_decl memory_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("4. Memory Pipeline",
        "retrieval_router"_n   = retrieval_router,
        "entity_resolution"_n  = with_services(svc, entity_resolution),
        "semantic_retrieval"_n = with_services(svc, semantic_retrieval),
        "temporal_retrieval"_n = with_services(svc, temporal_retrieval),
        "memory_assembly"_n    = memory_assembly,
        "fact_extraction"_n    = with_services(svc, fact_extraction),
        "extraction_merge"_n   = with_services(svc, extraction_merge) | defer,

        "retrieval_router"_n >> route(retrieval_route, {{retrieval_path::skip,     "memory_assembly"_n},
                                                        {retrieval_path::semantic, "entity_resolution"_n},
                                                        {retrieval_path::parallel, "entity_resolution"_n}}),
        "retrieval_router"_n >> route(extraction_route, {{extraction_branch::extract, "fact_extraction"_n},
                                                         {extraction_branch::none,    end}}),
        "entity_resolution"_n >> "semantic_retrieval"_n >> "temporal_retrieval"_n >> "memory_assembly"_n,
        // Retrieval, and extraction when it runs, lead to the deferred join.
        "memory_assembly"_n >> "extraction_merge"_n,
        "fact_extraction"_n >> "extraction_merge"_n,
        "extraction_merge"_n >> route(merge_outcome, {{after_merge::blocking,     "disambiguation_blocking"_n},
                                                      {after_merge::non_blocking, "disambiguation_simple"_n},
                                                      {after_merge::complex,      "global_planner"_n},
                                                      {after_merge::simple,       "ui_router"_n}}));
    // clang-format on
}

} // namespace global_supervisor
