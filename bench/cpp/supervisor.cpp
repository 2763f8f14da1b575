// The Global Supervisor benchmark graph (see supervisor.hpp and
// shared/bench/supervisor_topology.md). Node bodies are trivial and deterministic; the regular
// expressions of the JS half are written out as word matching with the same results
// (JS `\b` separates [A-Za-z0-9_] from everything else).
#include "supervisor.hpp"

#include "harness.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <string_view>

namespace stategraph::bench {

// Here, in the one file every bench program links (stategraph_bench and stategraph_bench_server).
durability& bench_durability() {
    static durability mode = durability::sync;
    return mode;
}

} // namespace stategraph::bench

namespace stategraph::bench::supervisor {

namespace {

using u = update<state>;
using body_fn = u (*)(const state&, context&);

const std::vector<std::string> history{
    "user: hi",
    "assistant: hello, how can I help?",
    "user: what is on my calendar?",
    "assistant: two meetings tomorrow",
    "user: thanks",
    "assistant: you are welcome",
};
const std::array<std::string, 3> agents{"productivity", "wealth", "research"};

/// CONTACTS = {Thomas: ["Thomas A","Thomas B"], Anna: ["Anna K"], Marco: ["Marco R"]}
const std::vector<std::string>* contact(std::string_view name) {
    static const std::vector<std::string> thomas{"Thomas A", "Thomas B"}, anna{"Anna K"}, marco{"Marco R"};
    if (name == "Thomas") return &thomas;
    if (name == "Anna") return &anna;
    if (name == "Marco") return &marco;
    return nullptr;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_letter(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

/// Maximal runs of characters satisfying `pred`, in order.
template <class Pred>
std::vector<std::string_view> runs_of(std::string_view s, Pred pred) {
    std::vector<std::string_view> out;
    std::size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && !pred(s[i])) ++i;
        std::size_t j = i;
        while (j < s.size() && pred(s[j])) ++j;
        if (j > i) out.push_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

bool iequals(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
           });
}

/// `/\b(w1|w2|...)\b/` (case-insensitive when `icase`): some word of `msg` is one of `words`.
bool has_word(std::string_view msg, std::initializer_list<std::string_view> words, bool icase) {
    for (auto w : runs_of(msg, is_word_char))
        for (auto x : words)
            if (icase ? iequals(w, x) : w == x) return true;
    return false;
}

bool contains(const std::vector<std::string>& v, const std::optional<std::string>& x) {
    return x && std::find(v.begin(), v.end(), *x) != v.end();
}

// ---- node bodies (the wrapper appends the node's name to trace) ----------------------------

u session_init(const state& s, context&) {
    return u{}
        .set<&state::messages_history>(history)
        .set<&state::hitl_resume_type>(s.hitl_resume_type.empty() ? std::string("none") : s.hitl_resume_type)
        .set<&state::planner_iterations>(0);
}
u summarization_check(const state& s, context&) {
    return u{}.set<&state::needs_summarization>(s.messages_history.size() > 20);
}
u summarization(const state& s, context&) {
    return u{}.set<&state::messages_history>({"summary of " + std::to_string(s.messages_history.size()) + " messages"});
}
u context_loader(const state&, context&) {
    return u{}.set<&state::presentation_rules>(presentation_rules_t{"default", "text", 800});
}
u hitl_handler(const state&, context&) { return u{}; }
u intent_classification(const state& s, context&) {
    const std::string& msg = s.user_message;
    intent_t in;
    in.route = "simple";
    auto words = runs_of(msg, is_word_char);
    // /^(hi|hello|hey)\b/i: the message starts with one of those words.
    if (!msg.empty() && is_word_char(msg[0]) &&
        (iequals(words[0], "hi") || iequals(words[0], "hello") || iequals(words[0], "hey")))
        in.route = "greeting";
    else if (has_word(msg, {"plan", "book", "schedule", "research", "review"}, true))
        in.route = "complex";
    for (auto w : runs_of(msg, is_letter))
        if (contact(w)) in.entities.emplace_back(w);
    in.has_extractable_facts = !(msg.size() && msg.back() == '?') && has_word(msg, {"is", "are", "will"}, false);
    in.has_preferences = has_word(msg, {"like", "likes"}, true);
    in.needs_semantic_retrieval = in.route != "greeting";
    return u{}.set<&state::intent>(std::move(in));
}
u retrieval_router(const state& s, context&) {
    std::string path = "semantic";
    if (!s.intent.needs_semantic_retrieval) path = "skip";
    else if (s.intent.route == "complex" || !s.intent.entities.empty()) path = "parallel";
    return u{}.set<&state::retrieval_path>(std::move(path));
}
u entity_resolution(const state& s, context&) {
    std::vector<std::string> resolved, ambiguous;
    for (const auto& e : s.intent.entities) {
        const auto* c = contact(e);
        if (c->size() == 1) resolved.push_back((*c)[0]);
        if (c->size() > 1) ambiguous.push_back(e);
    }
    return u{}.set<&state::resolved_entities>(std::move(resolved)).set<&state::ambiguous_entities>(std::move(ambiguous));
}
u semantic_retrieval(const state& s, context&) {
    std::vector<std::string> facts;
    if (s.intent.entities.empty()) facts.push_back("semantic fact about user");
    for (const auto& e : s.intent.entities) facts.push_back("semantic fact about " + e);
    return u{}.set<&state::semantic_facts>(std::move(facts));
}
u temporal_retrieval(const state& s, context&) {
    std::vector<std::string> facts;
    if (s.retrieval_path == "parallel") facts.push_back("upcoming: dentist on Friday");
    return u{}.set<&state::temporal_facts>(std::move(facts));
}
u memory_assembly(const state& s, context&) {
    memory_context_t m;
    m.facts = s.semantic_facts;
    m.facts.insert(m.facts.end(), s.temporal_facts.begin(), s.temporal_facts.end());
    m.n = static_cast<int>(m.facts.size());
    return u{}.set<&state::memory_context>(std::move(m));
}
u fact_extraction(const state& s, context&) {
    std::vector<fact_t> facts;
    if (s.intent.has_extractable_facts) {
        fact_t f;
        f.text = s.user_message;
        if (!s.intent.entities.empty()) f.entity = s.intent.entities[0];
        facts.push_back(std::move(f));
    }
    return u{}.set<&state::extracted_facts>(std::move(facts));
}
u extraction_merge(const state& s, context&) {
    const auto& ambiguous = s.ambiguous_entities;
    const auto& extracted = s.extracted_facts;
    std::string ambiguity = "non_blocking";
    if (ambiguous.empty()) ambiguity = "none";
    else if (std::any_of(extracted.begin(), extracted.end(), [&](const fact_t& f) { return contains(ambiguous, f.entity); }))
        ambiguity = "blocking";
    int persisted = static_cast<int>(
        std::count_if(extracted.begin(), extracted.end(), [&](const fact_t& f) { return !contains(ambiguous, f.entity); }));
    return u{}.set<&state::entity_ambiguity>(std::move(ambiguity)).set<&state::persisted_facts>(persisted);
}
u disambiguation_blocking(const state& s, context& ctx) {
    auto answer = ctx.interrupt_now<std::string>("which " + s.ambiguous_entities[0] + "?");
    auto resolved = s.resolved_entities;
    resolved.push_back(answer);
    return u{}
        .set<&state::hitl_user_response>(answer)
        .set<&state::resolved_entities>(std::move(resolved))
        .set<&state::persisted_facts>(s.persisted_facts + static_cast<int>(s.extracted_facts.size()))
        .set<&state::ui_response>("Got it: " + answer + ". Saved.");
}
u disambiguation_simple(const state& s, context&) {
    return u{}.set<&state::ui_response>("Here is what I found. By the way, which " + s.ambiguous_entities[0] +
                                        " did you mean?");
}
u global_planner(const state& s, context&) {
    const int iter = s.planner_iterations;
    return u{}.set<&state::planner_decision>(planner_decision_t{agents[static_cast<std::size_t>(iter) % agents.size()], iter});
}
u agent_execution(const state& s, context&) {
    agent_result_t r;
    r.agent = s.planner_decision ? s.planner_decision->agent : std::string("resume");
    r.ok = true;
    r.needs_input = has_word(s.user_message, {"confirm"}, true);
    std::vector<agent_result_t> results;
    results.push_back(std::move(r));
    return u{}.set<&state::agent_results>(std::move(results)).set<&state::planner_iterations>(s.planner_iterations + 1);
}
u ui_router(const state& s, context&) {
    std::string type = "simple";
    if (std::any_of(s.agent_results.begin(), s.agent_results.end(), [](const agent_result_t& r) { return r.needs_input; }))
        type = "hitl";
    else if (s.intent.route == "complex")
        type = "complex";
    return u{}.set<&state::response_type>(std::move(type));
}
u simple_text(const state& s, context&) { return u{}.set<&state::ui_response>("reply to: " + s.user_message); }
u complex_text(const state& s, context&) {
    return u{}.set<&state::ui_response>("synthesized " + std::to_string(s.agent_results.size()) + " agent results");
}
u hitl_text(const state&, context&) { return u{}.set<&state::ui_response>("Please confirm before I go on."); }
u message_persist(const state&, context&) { return u{}.set<&state::persisted>(true); }

struct node_entry {
    const char* name;
    body_fn body;
};
// clang-format off
const node_entry nodes[] = {
    {"session_init", session_init},
    {"summarization_check", summarization_check},
    {"summarization", summarization},
    {"context_loader", context_loader},
    {"hitl_handler", hitl_handler},
    {"intent_classification", intent_classification},
    {"retrieval_router", retrieval_router},
    {"entity_resolution", entity_resolution},
    {"semantic_retrieval", semantic_retrieval},
    {"temporal_retrieval", temporal_retrieval},
    {"memory_assembly", memory_assembly},
    {"fact_extraction", fact_extraction},
    {"extraction_merge", extraction_merge},
    {"disambiguation_blocking", disambiguation_blocking},
    {"disambiguation_simple", disambiguation_simple},
    {"global_planner", global_planner},
    {"agent_execution", agent_execution},
    {"ui_router", ui_router},
    {"simple_text", simple_text},
    {"complex_text", complex_text},
    {"hitl_text", hitl_text},
    {"message_persist", message_persist},
};
const std::pair<std::string, std::string> edges[] = {
    {START, "session_init"},
    {"session_init", "summarization_check"},
    {"summarization", "context_loader"},
    {"context_loader", "hitl_handler"},
    {"intent_classification", "retrieval_router"},
    {"entity_resolution", "semantic_retrieval"},
    {"semantic_retrieval", "temporal_retrieval"},
    {"temporal_retrieval", "memory_assembly"},
    {"memory_assembly", "fact_extraction"},
    {"fact_extraction", "extraction_merge"},
    {"disambiguation_blocking", "message_persist"},
    {"disambiguation_simple", "message_persist"},
    {"global_planner", "agent_execution"},
    {"simple_text", "message_persist"},
    {"complex_text", "message_persist"},
    {"hitl_text", "message_persist"},
    {"message_persist", END},
};
// clang-format on
static_assert(std::size(nodes) == 22, "the supervisor graph has 22 nodes");
static_assert(field_count_v<state> == 25, "the supervisor state has 25 channels");

// ---- routing functions ------------------------------------------------------------------
std::string route_summarization(const state& s) { return s.needs_summarization ? "summarization" : "context_loader"; }
std::string route_resume_type(const state& s) {
    return s.hitl_resume_type == "agent" ? "agent_execution" : "intent_classification";
}
std::string route_retrieval(const state& s) { return s.retrieval_path == "skip" ? "memory_assembly" : "entity_resolution"; }
std::string route_ambiguity(const state& s) {
    if (s.entity_ambiguity == "blocking") return "disambiguation_blocking";
    if (s.entity_ambiguity == "non_blocking") return "disambiguation_simple";
    return s.intent.route == "complex" ? "global_planner" : "ui_router";
}
std::string route_more_agents(const state& s) {
    return s.planner_iterations < planner_iterations ? "global_planner" : "ui_router";
}
std::string route_response_type(const state& s) { return s.response_type + "_text"; }

const std::vector<std::string> front{
    "session_init",       "summarization_check", "context_loader",  "hitl_handler",
    "intent_classification", "retrieval_router", "entity_resolution", "semantic_retrieval",
    "temporal_retrieval", "memory_assembly",     "fact_extraction", "extraction_merge",
};

std::vector<std::string> concat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::string join(const std::vector<std::string>& v) {
    std::string s = "[";
    for (const auto& x : v) {
        if (s.size() > 1) s += ',';
        s.append(1, '"').append(x).append(1, '"');
    }
    return s + "]";
}

void same_list(const std::vector<std::string>& actual, const std::vector<std::string>& expected, const std::string& what) {
    check(actual == expected, what + ": expected " + join(expected) + ", got " + join(actual));
}

run_config turn_config(const std::string& thread) {
    run_config c;
    c.thread_id = thread;
    c.recursion_limit = recursion_limit;
    c.durability = bench_durability();
    return c;
}

boost::asio::awaitable<std::size_t> history_len(const compiled_graph<state>& g, const std::string& thread) {
    auto h = co_await g.get_state_history(thread);
    co_return h.size();
}

} // namespace

compiled_graph<state> build(std::shared_ptr<checkpoint::saver> saver) {
    state_graph<state> g("global_supervisor_bench");
    for (const auto& n : nodes) {
        std::string name = n.name;
        body_fn body = n.body;
        g.add_node(name, [name, body](const state& s, context& ctx) {
            u out = body(s, ctx);
            out.set<&state::trace>({name});
            return out;
        });
    }
    for (const auto& [a, b] : edges) g.add_edge(a, b);
    g.add_conditional_edges("summarization_check", route_summarization,
                            std::vector<std::string>{"summarization", "context_loader"});
    g.add_conditional_edges("hitl_handler", route_resume_type,
                            std::vector<std::string>{"agent_execution", "intent_classification"});
    g.add_conditional_edges("retrieval_router", route_retrieval,
                            std::vector<std::string>{"memory_assembly", "entity_resolution"});
    g.add_conditional_edges(
        "extraction_merge", route_ambiguity,
        std::vector<std::string>{"disambiguation_blocking", "disambiguation_simple", "global_planner", "ui_router"});
    g.add_conditional_edges("agent_execution", route_more_agents, std::vector<std::string>{"global_planner", "ui_router"});
    g.add_conditional_edges("ui_router", route_response_type,
                            std::vector<std::string>{"simple_text", "complex_text", "hitl_text"});
    compile_options o;
    o.checkpointer = std::move(saver);
    return g.compile(std::move(o));
}

update<state> turn_input(const std::string& message, const std::string& thread, const std::string& resume_type) {
    return u{}
        .set<&state::user_message>(message)
        .set<&state::chat_id>(thread)
        .set<&state::user_id>("u1")
        .set<&state::hitl_resume_type>(resume_type);
}

void check_complex_result(const run_result<state>& r) {
    check(!r.interrupted(), "complex turn: no interrupt");
    check(r.values.trace.size() == 21, "complex turn ran 21 nodes (got " + std::to_string(r.values.trace.size()) + ")");
    check(r.values.ui_response == "synthesized 3 agent results", "complex turn ui_response (got " + r.values.ui_response + ")");
}

void check_blocking_interrupt(const run_result<state>& r) {
    check(r.interrupted() && r.interrupts.size() == 1, "blocking turn: invoke returned one interrupt");
    const auto& v = r.interrupts[0].value;
    check(v.is_string() && v.as_string() == blocking_question,
          "blocking turn interrupted with \"" + blocking_question + "\" (got " + boost::json::serialize(v) + ")");
}

void check_blocking_end(const run_result<state>& r) {
    check(!r.interrupted(), "blocking turn: resume ran to the end");
    check(r.values.trace.size() == 14,
          "blocking turn: trace has 14 entries after resume (got " + std::to_string(r.values.trace.size()) + ")");
    check(r.values.hitl_user_response == blocking_answer && r.values.persisted,
          "blocking turn: resume value stored and persisted");
}

boost::asio::awaitable<void> validate(compiled_graph<state> g, bool has_checkpointer, std::string thread_prefix) {
    int n = 0;
    auto tid = [&] { return thread_prefix + "-validate-" + std::to_string(++n); };
    const auto complex_trace = concat(front, {"global_planner", "agent_execution", "global_planner", "agent_execution",
                                              "global_planner", "agent_execution", "ui_router", "complex_text",
                                              "message_persist"});
    const auto blocking_trace = concat(front, {"disambiguation_blocking", "message_persist"});

    std::string t = tid();
    auto in = turn_input(complex_message, t);
    auto r = co_await g.invoke(std::move(in), turn_config(t));
    check_complex_result(r);
    same_list(r.values.trace, complex_trace, "complex turn trace");
    check(r.values.retrieval_path == "parallel" && r.values.intent.route == "complex",
          "complex turn: parallel retrieval, complex route");
    std::vector<std::string> agent_names;
    for (const auto& a : r.values.agent_results) agent_names.push_back(a.agent);
    same_list(agent_names, std::vector<std::string>(agents.begin(), agents.end()), "complex turn agents");
    if (has_checkpointer) {
        auto len = co_await history_len(g, t);
        check(len == 23, "complex turn writes 23 checkpoints (got " + std::to_string(len) + ")");
    }

    if (has_checkpointer) {
        t = tid();
        in = turn_input(blocking_message, t);
        r = co_await g.invoke(std::move(in), turn_config(t));
        check_blocking_interrupt(r);
        same_list(r.values.trace, std::vector<std::string>(front.begin(), front.end()), "blocking turn trace at the interrupt");
        auto len = co_await history_len(g, t);
        check(len == 14, "blocking turn: 14 checkpoints at the interrupt (got " + std::to_string(len) + ")");
        auto answer = resume(blocking_answer);
        r = co_await g.invoke(std::move(answer), turn_config(t));
        check_blocking_end(r);
        same_list(r.values.trace, blocking_trace, "blocking turn trace after resume");
        same_list(r.values.resolved_entities, std::vector<std::string>{blocking_answer}, "blocking turn resolved entities");
        check(r.values.persisted_facts == 1, "blocking turn persisted_facts = 1");
        len = co_await history_len(g, t);
        check(len == 16, "blocking turn: 16 checkpoints after resume (got " + std::to_string(len) + ")");
    }

    // Checked, not timed.
    struct path {
        std::string message, resume_type;
        std::vector<std::string> trace;
        bool (*ok)(const state&);
    };
    std::vector<path> paths;
    paths.push_back({"What does Thomas like for dinner?", "none", concat(front, {"disambiguation_simple", "message_persist"}),
                     [](const state& s) {
                         return s.entity_ambiguity == "non_blocking" &&
                                s.ui_response.find("which Thomas did you mean?") != std::string::npos;
                     }});
    paths.push_back({"Hi there", "none",
                     {"session_init", "summarization_check", "context_loader", "hitl_handler", "intent_classification",
                      "retrieval_router", "memory_assembly", "fact_extraction", "extraction_merge", "ui_router",
                      "simple_text", "message_persist"},
                     [](const state& s) {
                         return s.intent.route == "greeting" && s.retrieval_path == "skip" && s.response_type == "simple";
                     }});
    paths.push_back({"Tell me a fun fact about Anna", "none", concat(front, {"ui_router", "simple_text", "message_persist"}),
                     [](const state& s) {
                         return s.retrieval_path == "parallel" && s.entity_ambiguity == "none" &&
                                !s.resolved_entities.empty() && s.resolved_entities[0] == "Anna K";
                     }});
    paths.push_back({"Yes, please confirm the booking", "agent",
                     {"session_init", "summarization_check", "context_loader", "hitl_handler", "agent_execution",
                      "global_planner", "agent_execution", "global_planner", "agent_execution", "ui_router", "hitl_text",
                      "message_persist"},
                     [](const state& s) {
                         std::vector<std::string> names;
                         for (const auto& a : s.agent_results) names.push_back(a.agent);
                         return s.response_type == "hitl" && names == std::vector<std::string>{"resume", "wealth", "research"};
                     }});
    for (const auto& p : paths) {
        t = tid();
        in = turn_input(p.message, t, p.resume_type);
        r = co_await g.invoke(std::move(in), turn_config(t));
        check(!r.interrupted(), "\"" + p.message + "\": no interrupt");
        same_list(r.values.trace, p.trace, "\"" + p.message + "\" trace");
        check(p.ok(r.values), "\"" + p.message + "\": final state as specified");
        check(r.values.persisted && !r.values.needs_summarization, "\"" + p.message + "\": persisted, no summarization");
    }
}

} // namespace stategraph::bench::supervisor
