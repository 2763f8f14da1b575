#ifndef STATEGRAPH_NODES_SUPERVISOR_HPP
#define STATEGRAPH_NODES_SUPERVISOR_HPP

/// @file
/// @brief `supervisor<&S::supervision>(name)`: picks which intent(s) handle the state, runs them
/// (in parallel for a fan-out), evaluates, and loops until END, as a compiled graph.

#include <stategraph/detail/state_ops.hpp>
#include <stategraph/nodes/artifacts.hpp>
#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/error.hpp>
#include <stategraph/nodes/failure_policy.hpp>
#include <stategraph/nodes/model_span.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/describe/class.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::nodes {

/// @brief The supervisor's bookkeeping, a field of the user's state (checkpointed with it).
struct supervision {
    int iteration = 0;                 ///< @brief Dispatch rounds done in this run.
    std::vector<std::string> last;     ///< @brief The intents of the last round.
    std::vector<std::string> chain;    ///< @brief Intents chained by `next` since the last classifier/router/route decision.
    std::vector<std::string> rounds;   ///< @brief Each round's intents, joined by "+" (a fan-out shows "a+b").
    std::string ended_by;              ///< @brief What chose END: "evaluate", "next", "router", "route", "classifier".
    std::vector<failure_record> failures; ///< @brief Intents that failed their last retry in this run (see failure_policy).
    int failures_handled = 0;          ///< @brief How many of `failures` the supervisor has acted on.

    friend bool operator==(supervision const&, supervision const&) = default;
};
BOOST_DESCRIBE_STRUCT(supervision, (), (iteration, last, chain, rounds, ended_by, failures, failures_handled))

/// @brief A routing decision: one intent, several (run in parallel), or END.
/// Thread safety: a plain value.
struct decision {
    std::vector<std::string> intents;  ///< @brief Empty with end = true.
    bool end = false;

    /// @brief Go to one intent.
    /// @param intent the intent's name (one that does not exist fails the run: `unknown_intent`).
    static decision to(std::string intent) { return {{std::move(intent)}, false}; }
    /// @brief Fan out to several intents, run in parallel in one round: `decision::to({"a", "b"})`.
    /// @param intents the intents run in parallel in one round.
    static decision to(std::initializer_list<std::string> intents) { return {std::vector<std::string>(intents), false}; }
    /// @brief Fan out to a list of intents built at run time.
    /// @param intents the intents run in parallel in one round.
    static decision to(std::vector<std::string> intents) { return {std::move(intents), false}; }
    /// @brief Stop: the supervisor's graph ends.
    static decision finish() { return {{}, true}; }
};

/// @brief One thing a supervisor can dispatch: a callback node, or a compiled graph over the
/// same state (an agent such as react_agent(), or any subgraph).
/// @tparam S the state type of the supervisor's graph.
/// Thread safety: a plain value while configured; once compiled into a supervisor it is shared
/// const, and its `run` and `next` functions are called from every run at once.
template <class S>
class intent {
public:
    /// @brief @p run is a node of a graph over S (a callable returning update<S>, ...) or a
    /// compiled_graph<S>.
    /// @tparam F a node callable over `S`, or `compiled_graph<S>` (checked by a `static_assert`).
    /// @param name the intent's (and its node's) name: unique, not empty, not "supervisor", "ack" or
    /// "__..." (a `duplicate_intent` problem otherwise).
    /// @param run the node or graph, moved in.
    template <class F>
    intent(std::string name, F run) : name_(std::move(name)) {
        if constexpr (std::is_same_v<std::remove_cvref_t<F>, compiled_graph<S>>) {
            kind_ = "agent";
            add_ = [run = std::move(run)](state_graph<S>& g, std::string const& n, node_options o) {
                g.add_node(n, run, std::move(o));
            };
        } else {
            static_assert(node_of<F, S>,
                          "intent<S>(name, run): run must be a node of a graph over S (callable as run(const S&) or "
                          "run(const S&, stategraph::context&), returning stategraph::update<S> or an awaitable of "
                          "it) or a stategraph::compiled_graph<S> (an agent or subgraph)");
            kind_ = "callback";
            if constexpr (node_of<F, S>)
                add_ = [run = std::move(run)](state_graph<S>& g, std::string const& n, node_options o) {
                    g.add_node(n, run, std::move(o));
                };
        }
    }

    /// @brief What the intent does; required under an LLM router (the router reads it).
    /// @param text the description the LLM router reads.
    /// @return `*this` (moved, from the `&&` overload).
    intent& describe(std::string text) & {
        description_ = std::move(text);
        return *this;
    }
    intent&& describe(std::string text) && { return std::move(describe(std::move(text))); }

    /// @brief What runs after this intent: a decision, or nullopt to let the router/route decide.
    /// @param fn called with the state after the intent ran, in the supervisor node (on the run's
    /// executor); its decision comes before the router's.
    /// @return `*this` (moved, from the `&&` overload).
    intent& next(std::function<std::optional<decision>(S const&)> fn) & {
        next_ = std::move(fn);
        return *this;
    }
    intent&& next(std::function<std::optional<decision>(S const&)> fn) && { return std::move(next(std::move(fn))); }

    /// @brief Retry the intent, then (after the last retry) escalate to another intent or let the
    /// router/route re-plan with the failure in `supervision::failures`; a policy with neither
    /// fails the run with agent_error(errc::retries_exhausted) naming the intent.
    /// @param policy retries and escalation or re-plan (checked by `supervisor::problems()`).
    /// @return `*this` (moved, from the `&&` overload).
    intent& on_failure(failure_policy policy) & {
        failure_ = std::move(policy);
        return *this;
    }
    intent&& on_failure(failure_policy policy) && { return std::move(on_failure(std::move(policy))); }

    std::string const& name() const noexcept { return name_; }
    std::string const& description() const noexcept { return description_; }
    std::string const& kind() const noexcept { return kind_; }
    std::function<std::optional<decision>(S const&)> const& next_fn() const noexcept { return next_; }
    std::optional<failure_policy> const& failure() const noexcept { return failure_; }
    void add_to(state_graph<S>& g, node_options options = {}) const { add_(g, name_, std::move(options)); }

private:
    std::string name_, description_, kind_;
    std::function<void(state_graph<S>&, std::string const&, node_options)> add_;
    std::function<std::optional<decision>(S const&)> next_;
    std::optional<failure_policy> failure_;
};

/// @brief An LLM router: the model gets the intents' names and descriptions and answers with
/// JSON `{"next": "<intent>" | ["<a>", "<b>"] | "END", "reasoning": "..."}`.
/// @tparam S the supervisor's state type.
/// Thread safety: a plain value; the model is shared by every run (it must be safe to call
/// concurrently) and is awaited from the supervisor node's coroutine.
template <class S>
struct llm_router {
    std::shared_ptr<chat_model> model;
    /// @brief The task as the router should read it (e.g. the user's message and what is known so far).
    std::function<std::string(S const&)> describe_state;
    /// @brief Extra instructions put before the list of intents.
    std::string instructions;
};

/// @brief Builds a supervisor over the state holding `Field` (a `supervision` member):
///
///     START --> supervisor --(decision)--> intent_a --+
///                   ^   |                 intent_b --+  (a fan-out runs in one superstep;
///                   |   +--(END)--> END               the reducers merge the updates)
///                   +-------------------------------+
///
/// Each round the `supervisor` node decides, by this authority: on round 0 the `classifier`
/// (if any) picks the first intent; afterwards `evaluate` (true: satisfied, END), then the
/// `next` of the intent(s) just run, then the LLM `router` or the deterministic `route`. A
/// classifier alone ends after its intent (unless `next` continues). Decisions past
/// `max_iterations` rounds throw agent_error(errc::max_iterations); an intent chosen again by
/// `next` within one chain throws agent_error(errc::intent_cycle); a decision naming no intent
/// throws agent_error(errc::unknown_intent). compile() reports every configuration problem at
/// once (agent_error with problems()). An `ack` node, when given, runs from START in parallel
/// with the first decision (the seed's ack preamble).
/// @tparam Field `&S::field`, a `supervision` member of the state.
/// Thread safety: not thread-safe while configured (one thread); `compile()` copies it into the graph,
/// which is then a `compiled_graph` (shareable; its functions are called from every run at once).
template <auto Field>
class supervisor {
    static_assert(std::is_same_v<typename member_traits<Field>::value_type, supervision>,
                  "supervisor<&S::field>: the field must be a stategraph::nodes::supervision member of the state");

public:
    using state_type = typename member_traits<Field>::state_type;
    using S = state_type;

    /// @param name the supervisor's graph name (messages, drawings).
    explicit supervisor(std::string name) : name_(std::move(name)) {}

    /// @brief Adds an intent; the other setters below set how decisions are made, each returning
    /// `*this` (moved, from the `&&` overloads).
    /// @param i the intent.
    supervisor& add(intent<S> i) & {
        intents_.push_back(std::move(i));
        return *this;
    }
    supervisor&& add(intent<S> i) && { return std::move(add(std::move(i))); }
    /// @param fn picks the first intent's name on round 0.
    supervisor& classifier(std::function<std::string(S const&)> fn) & {
        classifier_ = std::move(fn);
        return *this;
    }
    supervisor&& classifier(std::function<std::string(S const&)> fn) && { return std::move(classifier(std::move(fn))); }
    /// @param fn the deterministic route after each round (not with `router`).
    supervisor& route(std::function<decision(S const&)> fn) & {
        route_ = std::move(fn);
        return *this;
    }
    supervisor&& route(std::function<decision(S const&)> fn) && { return std::move(route(std::move(fn))); }
    /// @param r the LLM router (not with `route`); its model must not be null.
    supervisor& router(llm_router<S> r) & {
        router_ = std::move(r);
        return *this;
    }
    supervisor&& router(llm_router<S> r) && { return std::move(router(std::move(r))); }
    /// @param fn true when the work is done: the supervisor ends (checked before `next` and routing).
    supervisor& evaluate(std::function<bool(S const&)> fn) & {
        evaluate_ = std::move(fn);
        return *this;
    }
    supervisor&& evaluate(std::function<bool(S const&)> fn) && { return std::move(evaluate(std::move(fn))); }
    /// @brief An acknowledgement node (a node over S, e.g. one writing "Got it, one moment...")
    /// that runs in parallel with the first routing decision, in the same superstep.
    /// @tparam F a node callable over `S`.
    /// @param node added as node "ack", from START to END.
    template <class F>
    supervisor& ack(F node) & {
        static_assert(node_of<F, S>, "supervisor::ack(node): node must be a node of a graph over S");
        if constexpr (node_of<F, S>) ack_ = [node = std::move(node)](state_graph<S>& g) { g.add_node("ack", node); };
        return *this;
    }
    template <class F>
    supervisor&& ack(F node) && { return std::move(ack(std::move(node))); }
    /// @param n dispatch rounds allowed per run (default 10, at least 1).
    supervisor& max_iterations(int n) & {
        max_iterations_ = n;
        return *this;
    }
    supervisor&& max_iterations(int n) && { return std::move(max_iterations(n)); }

    /// @brief The artifacts side channel: intents write JSON into the bag `Bag` (a
    /// `boost::json::object` field with the merge_artifacts reducer) during an iteration; at the
    /// end of each iteration the supervisor merges the bag into the state with @p finalize (an
    /// update built from the state and the bag; default: spread_artifacts, each key replacing
    /// the field of that name), empties the bag, and only then evaluates and routes. In a
    /// fan-out the bag holds every branch's artifacts (merged by the reducer).
    /// @tparam Bag `&S::bag`, a `boost::json::object` field with the `merge_artifacts` reducer.
    /// @param finalize the update made from the state and the bag; empty: `spread_artifacts`.
    template <auto Bag>
    supervisor& artifacts(std::function<update<S>(S const&, boost::json::object const&)> finalize = {}) & {
        static_assert(std::is_same_v<typename member_traits<Bag>::state_type, S> &&
                          std::is_same_v<typename member_traits<Bag>::value_type, boost::json::object>,
                      "supervisor::artifacts<&S::bag>(): the bag must be a boost::json::object member of the state");
        auto const& names = field_names<S>();
        std::string const bag_name(names[field_index<Bag>()]);
        std::string const sup_name(names[field_index<Field>()]);
        bag_name_ = bag_name;
        bag_has_reducer_ = !stategraph::detail::state_ops<S>::last_value(field_index<Bag>());
        if (!finalize)
            finalize = [bag_name, sup_name, where = where()](S const&, boost::json::object const& bag) {
                return spread_artifacts<S>(bag, where, bag_name, sup_name);
            };
        finalize_ = std::move(finalize);
        bag_of_ = [](S const& s) -> boost::json::object const& { return s.*Bag; };
        reset_bag_ = [](update<S>& u) { u.template overwrite<Bag>(boost::json::object{}); };
        return *this;
    }
    template <auto Bag>
    supervisor&& artifacts(std::function<update<S>(S const&, boost::json::object const&)> finalize = {}) && {
        return std::move(this->template artifacts<Bag>(std::move(finalize)));
    }

    /// @brief Every configuration problem (empty when the supervisor can be built).
    std::vector<problem> problems() const {
        std::vector<problem> out;
        auto const where = "supervisor '" + name_ + "': ";
        if (router_ && route_)
            out.push_back({errc::router_and_route, where + "give an LLM router or a deterministic route, not both"});
        if (!router_ && !route_ && !classifier_)
            out.push_back({errc::no_router, where + "give a router, a route or a classifier"});
        if (router_ && !router_->model)
            out.push_back({errc::no_router, where + "the LLM router has no chat model"});
        if (intents_.empty())
            out.push_back({errc::unknown_intent, where + "no intents"});
        if (max_iterations_ < 1)
            out.push_back({errc::max_iterations, where + "max_iterations must be at least 1"});
        if (bag_of_ && !bag_has_reducer_)
            out.push_back({errc::unknown_artifact,
                           where + "the artifacts bag '" + bag_name_ +
                               "' has no reducer; declare reduce<&S::" + bag_name_ +
                               ">(stategraph::nodes::merge_artifacts) so that intents of a fan-out can all write it"});
        std::set<std::string> seen;
        for (auto const& i : intents_) {
            if (auto const& p = i.failure()) {
                auto text = p->check(i.name());
                if (text.empty() && !p->escalate_to.empty() && !known(p->escalate_to))
                    text = "intent '" + i.name() + "': failure_policy escalates to unknown intent '" + p->escalate_to + "'";
                if (text.empty() && p->replan && !router_ && !route_)
                    text = "intent '" + i.name() + "': failure_policy re-plans, but there is no router or route to ask";
                if (!text.empty()) out.push_back({errc::bad_failure_policy, where + text});
            }
            if (i.name().empty() || i.name() == "supervisor" || (ack_ && i.name() == "ack") || i.name().rfind("__", 0) == 0)
                out.push_back({errc::duplicate_intent, where + "intent name '" + i.name() + "' is reserved or empty"});
            else if (!seen.insert(i.name()).second)
                out.push_back({errc::duplicate_intent, where + "intent '" + i.name() + "' is declared twice"});
            if (router_ && i.description().empty())
                out.push_back({errc::missing_description,
                               where + "intent '" + i.name() + "' (" + i.kind() +
                                   ") has no description; the LLM router chooses by description: add .describe(\"...\")"});
        }
        return out;
    }

    /// @brief The supervisor as a compiled graph (use it as a subgraph node).
    /// @throws agent_error listing every problem() when the configuration is wrong.
    /// @return a compiled graph without a checkpointer of its own (as a subgraph node it uses its
    /// parent's); this supervisor is copied into it and may be changed afterwards.
    compiled_graph<S> compile() const {
        auto found = problems();
        if (!found.empty()) throw agent_error(std::move(found));
        auto self = std::make_shared<supervisor const>(*this);
        state_graph<S> g(name_);
        node_options options;
        for (auto const& i : intents_) options.ends.push_back(i.name());
        options.ends.push_back(END);
        auto decide = [self](S const& s, stategraph::context& ctx) -> boost::asio::awaitable<command<S>> {
            auto pending = self->decide(s, ctx);
            co_return co_await std::move(pending);
        };
        g.add_node("supervisor", std::move(decide), options);
        g.add_edge(START, "supervisor");
        if (ack_) {
            ack_(g);
            g.add_edge(START, "ack").add_edge("ack", END);
        }
        for (auto const& i : intents_) {
            i.add_to(g, failure_options(i));
            g.add_edge(i.name(), "supervisor");
        }
        return g.compile();
    }

private:
    std::string where() const { return "supervisor '" + name_ + "': "; }

    /// @brief The node options of intent @p i: its failure_policy's retries and an error handler
    /// that records the failure in the supervision field (the supervisor acts on it next).
    node_options failure_options(intent<S> const& i) const {
        node_options options;
        auto const& p = i.failure();
        if (!p) return options;
        options.retry = p->retry;
        auto handle = [policy = *p, where = where(), name = i.name()](S const& s, node_failure const& f) -> update<S> {
            if (policy.escalate_to.empty() && !policy.replan) throw retries_exhausted_error(where + "intent ", f);
            supervision sup = s.*Field;
            sup.failures.push_back(failure_record{name, f.message, f.attempts, policy.replan ? "replan" : "escalate",
                                                  policy.escalate_to});
            return update<S>{}.template set<Field>(std::move(sup));
        };
        options.on_error = error_handler("failure_policy", std::move(handle));
        return options;
    }

    bool known(std::string const& name) const {
        return std::any_of(intents_.begin(), intents_.end(), [&](auto const& i) { return i.name() == name; });
    }

    void check_known(decision const& d, std::string const& source) const {
        for (auto const& n : d.intents)
            if (!known(n)) {
                std::string names;
                for (auto const& i : intents_) names += (names.empty() ? "" : ", ") + i.name();
                throw agent_error(errc::unknown_intent, where() + source + " chose unknown intent '" + n +
                                                            "'; the intents are: " + names);
            }
        if (!d.end && d.intents.empty())
            throw agent_error(errc::unknown_intent, where() + source + " chose no intent (use decision::finish() to end)");
    }

    /// @brief The LLM router's decision; the call's token usage goes to the run's observer
    /// through @p ctx (`context::report_usage`).
    boost::asio::awaitable<decision> ask_router(S const& s, stategraph::context& ctx) const {
        chat_request request;
        request.json_mode = true;
        std::string prompt = router_->instructions.empty() ? std::string("You route a task to the right specialist.")
                                                           : router_->instructions;
        prompt += "\nSpecialists:\n";
        for (auto const& i : intents_) prompt += "- " + i.name() + ": " + i.description() + "\n";
        prompt += "Answer with JSON {\"next\": <a specialist's name, a list of names to run in parallel, or \"END\" "
                  "when the task is done>, \"reasoning\": <why>}.";
        request.messages.push_back(chat_message{"system", prompt});
        std::string task = router_->describe_state ? router_->describe_state(s) : std::string();
        for (auto const& f : (s.*Field).failures)
            task += "\nFailed (retries exhausted): " + f.node + ": " + f.message;
        request.messages.push_back(chat_message{"user", std::move(task)});
        auto model = router_->model;
        std::string const model_name = request.model.empty() ? model->model_name() : request.model;
        auto span = start_model_span(ctx, model_name);
        chat_response response;
        try {
            response = co_await model->complete(std::move(request));
        } catch (std::exception const& e) {
            record_failure(span, e);
            throw;
        }
        record_answer(span, response);
        span.set("stategraph.router", true);
        span.end();
        if (response.usage().total_tokens() != 0) ctx.report_usage(model_name, response.usage());
        boost::system::error_code ec;
        auto doc = boost::json::parse(response.content, ec);
        auto const* next = !ec && doc.is_object() ? doc.as_object().if_contains("next") : nullptr;
        decision d;
        if (next && next->is_string()) {
            std::string const v(next->get_string());
            if (v == "END" || v == END) d.end = true;
            else d.intents.push_back(v);
        } else if (next && next->is_array()) {
            for (auto const& v : next->get_array())
                if (v.is_string()) d.intents.emplace_back(v.get_string());
        } else {
            throw agent_error(errc::unknown_intent,
                              where() + "the LLM router's answer has no \"next\": " + response.content.substr(0, 200));
        }
        co_return d;
    }

    boost::asio::awaitable<command<S>> decide(S const& state, stategraph::context& ctx) const {
        // End of an iteration: merge the artifacts bag first, so that evaluate, next and the
        // router see the merged state.
        update<S> writes;
        std::optional<S> merged;
        if (bag_of_ && !bag_of_(state).empty()) {
            writes = finalize_(state, bag_of_(state));
            reset_bag_(writes);
            merged.emplace(state);
            auto reds = stategraph::detail::state_reducers<S>();
            stategraph::detail::state_ops<S>::apply_copy(*merged, writes, reds);
        }
        S const& s = merged ? *merged : state;
        supervision sup = s.*Field;
        if (!sup.ended_by.empty()) sup = supervision{};  // a new run of the supervisor
        std::optional<decision> chosen;
        std::string source;
        bool from_next = false;
        // Intents that failed their last retry in the last round: escalate, or re-plan below.
        bool replan = false;
        for (auto k = static_cast<std::size_t>(sup.failures_handled); k < sup.failures.size(); ++k) {
            auto const& f = sup.failures[k];
            if (f.action == "escalate") {
                if (!chosen) chosen = decision{};
                if (std::find(chosen->intents.begin(), chosen->intents.end(), f.to) == chosen->intents.end())
                    chosen->intents.push_back(f.to);
                source = "escalation";
            } else {
                replan = true;
            }
        }
        sup.failures_handled = static_cast<int>(sup.failures.size());
        if (chosen || replan) {
            if (!chosen) source = "replan";
        } else if (sup.iteration == 0 && classifier_) {
            chosen = decision::to(classifier_(s));
            source = "classifier";
        } else if (sup.iteration > 0) {
            if (evaluate_ && evaluate_(s)) {
                chosen = decision::finish();
                source = "evaluate";
            }
            if (!chosen) {
                decision merged;
                bool any = false;
                for (auto const& i : intents_) {
                    if (!i.next_fn() || std::find(sup.last.begin(), sup.last.end(), i.name()) == sup.last.end()) continue;
                    if (auto d = i.next_fn()(s)) {
                        any = true;
                        if (d->end) merged.end = true;
                        for (auto& n : d->intents)
                            if (std::find(merged.intents.begin(), merged.intents.end(), n) == merged.intents.end())
                                merged.intents.push_back(n);
                    }
                }
                if (any) {
                    if (!merged.intents.empty()) merged.end = false;
                    chosen = std::move(merged);
                    source = "next";
                    from_next = true;
                }
            }
            if (!chosen && !route_ && !router_) {
                chosen = decision::finish();  // a classifier alone ends after its intent
                source = "classifier";
            }
        }
        if (!chosen) {
            if (route_) {
                chosen = route_(s);
                if (source.empty()) source = "route";
            } else {
                auto pending = ask_router(s, ctx);
                chosen = co_await std::move(pending);
                if (source.empty()) source = "router";
            }
        }
        check_known(*chosen, source);
        command<S> out;
        out.writes = std::move(writes);
        if (chosen->end) {
            sup.ended_by = source;
            sup.last.clear();
            out.targets.push_back(END);
        } else {
            if (sup.iteration >= max_iterations_)
                throw agent_error(errc::max_iterations, where() + "reached max_iterations (" + std::to_string(max_iterations_) +
                                                            ") without END; the " + source + " still chose '" +
                                                            chosen->intents.front() + "'");
            if (from_next) {
                for (auto const& n : chosen->intents)
                    if (std::find(sup.chain.begin(), sup.chain.end(), n) != sup.chain.end()) {
                        std::string path;
                        for (auto const& c : sup.chain) path += c + " -> ";
                        throw agent_error(errc::intent_cycle,
                                          where() + "intent '" + n + "' was chosen again within one branch: " + path + n);
                    }
                sup.chain.insert(sup.chain.end(), chosen->intents.begin(), chosen->intents.end());
            } else {
                sup.chain = chosen->intents;
            }
            std::string round;
            for (auto const& n : chosen->intents) round += (round.empty() ? "" : "+") + n;
            sup.rounds.push_back(round);
            sup.last = chosen->intents;
            ++sup.iteration;
            out.targets = chosen->intents;
        }
        out.writes.template set<Field>(std::move(sup));
        co_return out;
    }

    std::string name_;
    std::vector<intent<S>> intents_;
    std::function<std::string(S const&)> classifier_;
    std::function<decision(S const&)> route_;
    std::optional<llm_router<S>> router_;
    std::function<bool(S const&)> evaluate_;
    std::function<void(state_graph<S>&)> ack_;
    int max_iterations_ = 10;
    std::function<update<S>(S const&, boost::json::object const&)> finalize_;
    std::function<boost::json::object const&(S const&)> bag_of_;
    std::function<void(update<S>&)> reset_bag_;
    std::string bag_name_;
    bool bag_has_reducer_ = false;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_SUPERVISOR_HPP
