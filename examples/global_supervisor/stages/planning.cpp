// Stage 6: Planning & Execution
//
//   extraction_merge ──(complex)──> global_planner ══(agents: Send per agent)══> agent_execution ──(more agents: true)──> global_planner
//                                         │                                          ^           └──────────(false)─────> ui_router
//                                         └─(nothing_to_run)─────────────────────────┼──────────────────────────────────> ui_router
//   hitl_handler ══(agent: Send)═════════════════════════════════════════════════════┘
//
// global_planner asks the brain for the agents the request needs (productivity, wealth,
// research), skipping those that already reported this turn. The agents that can run together
// (those needing no permission) form one batch; a step that needs the user's permission (sending
// an email, moving money) runs alone in a later batch. Each task of the batch is a Send to
// agent_execution, so the batch runs in parallel, each task under its own retry policy:
// exponential backoff with jitter, a per-attempt time limit and a maximum number of attempts.
//
// agent_execution never crashes the turn: on its last attempt it reports a failed result instead
// of throwing, and the response says which agent could not be reached. Deterministic failures
// for demonstrations and tests: "flaky" in the message makes the research agent fail its first
// attempt, "slow" makes its first attempt overrun the time limit, "unreachable" makes it fail
// every attempt. The last attempt also bounds the agent call by 90% of the time limit itself:
// an agent that never answers is reported like one that fails.
//
// The agent itself runs through a stategraph::nodes::supervisor, the "agent desk": each domain
// agent (productivity, wealth, research) is an intent, and the desk's classifier picks the
// task's agent (a classifier alone ends after its intent). The desk is a compiled graph run
// inside agent_execution's journaled task, so the stage's flow (Send per task, retries, the
// last attempt's own time limit, permission interrupts) is unchanged.
//
// The research agent: what the user's notes say (the brain), then, with `--mcp FILE`, what each
// configured MCP server's search tool answers (research_mcp.hpp).
//
// Permission: a task that needs it asks through an interrupt ({kind: "agent", action, question,
// options: [approve, deny]}); the thread is resumed by id with approve / deny, or answered by a
// new chat message (stage 2 sends the task back here with the decision). Whether a step asks
// is the brain's needs_permission unless the permission rules (agent_settings::permissions,
// nodes::permission_rules over "agent(task)") decide: deny reports it denied without asking,
// ask asks, allow runs it without asking.

#include "stages/planning.hpp"

#include "research_mcp.hpp"

#include <stategraph/nodes/supervisor.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/object.hpp>

#include <algorithm>

namespace global_supervisor {

namespace {

/// The permission rules' verdict on a step, and the rule that gave it (null: no rule matched).
std::pair<stategraph::nodes::permission, const stategraph::nodes::permission_rule*>
rule_for(services& svc, agent_kind agent, const std::string& task) {
    return svc.agents().permissions.check(to_string(agent), task);
}

} // namespace

std::string permission_action(const std::string& task) {
    for (const char* w : {"email", "mail", "send", "forward", "reply"})
        if (icontains(task, w)) return "send_email";
    return "move_money";
}

boost::asio::awaitable<update> global_planner(services& svc, const state& s) {
    const auto& conv = s.conversation;
    planning_state p = s.planning;
    bool first = p.turn == 0;
    if (first) p = planning_state{.turn = conv.turn};

    std::vector<agent_kind> done;
    for (const auto& r : current_results(s))
        if (std::find(done.begin(), done.end(), r.agent) == done.end()) done.push_back(r.agent);
    std::vector<planned_step> steps = co_await svc.model().plan(conv.user_message, done);
    for (auto& st : steps) {
        auto [verdict, rule] = rule_for(svc, st.agent, st.task);
        if (rule || verdict != stategraph::nodes::permission::allow)
            st.needs_permission = verdict == stategraph::nodes::permission::ask;
    }
    if (first) p.plan = steps;
    ++p.iteration;

    // Steps that need no permission run together; a permission step runs alone, later.
    std::vector<planned_step> batch;
    for (const auto& st : steps)
        if (!st.needs_permission) batch.push_back(st);
    if (batch.empty() && !steps.empty()) batch.push_back(steps.front());
    p.remaining = steps.size() - batch.size();
    if (p.iteration >= svc.agents().max_planner_iterations) p.remaining = 0;

    p.batch.clear();
    std::optional<agent_task> asking;
    for (const auto& st : batch) {
        agent_task t;
        t.turn = p.turn;
        t.agent = st.agent;
        t.task = st.task;
        t.needs_permission = st.needs_permission;
        if (t.needs_permission) t.action = permission_action(st.task);
        if (!s.memory.resolved_entities.empty()) t.recipient = s.memory.resolved_entities.front();
        t.chat_id = conv.chat_id;
        t.user_id = conv.user_id;
        t.user_message = conv.user_message;
        t.base_message_count = conv.message_count;
        if (t.needs_permission) asking = t;
        p.batch.push_back(std::move(t));
    }
    update u;
    if (asking) {
        // Recorded before the question is asked, so that a new message finds what waits.
        auto h = s.hitl;
        h.pending = hitl_kind::agent;
        h.question = permission_question(*asking);
        h.options = {"approve", "deny"};
        h.waiting_task = asking;
        u.set<&state::hitl>(std::move(h));
    }
    co_return std::move(u).set<&state::planning>(std::move(p));
}

std::vector<stategraph::send> dispatch_agents(const state& s) {
    std::vector<stategraph::send> out;
    for (const auto& t : s.planning.batch) out.emplace_back("agent_execution", t);
    return out;
}

planner_outcome planned(const state& s) {
    return s.planning.batch.empty() ? planner_outcome::nothing_to_run : planner_outcome::agents;
}

bool more_agents(const state& s) { return s.planning.remaining > 0; }

namespace {

/// What memory tells an agent: facts about its task (and the calendar, for productivity).
std::string agent_context(services& svc, const agent_task& t) {
    return svc.with_store([&](memory_store& m) {
        std::vector<fact> facts;
        auto add = [&](const fact& f) {
            if (std::none_of(facts.begin(), facts.end(), [&](const fact& g) { return g.id == f.id; })) facts.push_back(f);
        };
        for (auto& h : m.search_facts(t.user_id, t.task, 3)) add(h.value);
        if (t.agent == agent_kind::productivity) {
            for (auto& h : m.search_facts(t.user_id, "prefers", 2)) add(h.value);
            for (const auto& f : m.upcoming_facts(t.user_id, svc.today(), 14)) add(f);
        }
        return facts_text(facts, 6);
    });
}

/// The agent desk's state: the task, what memory knows, and the agent's report.
struct agent_desk {
    agent_task task;
    std::string context;
    std::string summary;
    stategraph::nodes::supervision sup;
};
BOOST_DESCRIBE_STRUCT(agent_desk, (), (task, context, summary, sup))

/// The agent desk: one intent per domain agent, chosen by the task's agent.
stategraph::compiled_graph<agent_desk> agent_desk_graph(services& svc) {
    namespace nodes = stategraph::nodes;
    nodes::supervisor<&agent_desk::sup> desk("agent_desk");
    for (auto kind : {agent_kind::productivity, agent_kind::wealth, agent_kind::research}) {
        auto run = [&svc](const agent_desk& d) -> boost::asio::awaitable<stategraph::update<agent_desk>> {
            auto pending = svc.model().run_agent(d.task, d.context);
            std::string summary = co_await std::move(pending);
            // The research agent also asks its MCP servers (--mcp), when there are any.
            if (d.task.agent == agent_kind::research && svc.research()) {
                auto asking = svc.research()->ask(d.task.task);
                std::string found = co_await std::move(asking);
                if (!found.empty()) summary += " " + found;
            }
            co_return stategraph::update<agent_desk>{}.set<&agent_desk::summary>(std::move(summary));
        };
        desk.add(nodes::intent<agent_desk>(std::string(to_string(kind)), run)
                     .describe("the " + std::string(to_string(kind)) + " agent"));
    }
    desk.classifier([](const agent_desk& d) { return std::string(to_string(d.task.agent)); });
    return desk.compile();
}

} // namespace

boost::asio::awaitable<desk_report> run_at_desk(services& svc, agent_task t, std::string context) {
    auto desk = agent_desk_graph(svc);
    auto input = stategraph::update<agent_desk>{}.set<&agent_desk::task>(std::move(t)).set<&agent_desk::context>(
        std::move(context));
    std::exception_ptr failure;
    desk_report report;
    try {
        auto pending = desk.invoke(std::move(input));
        auto done = co_await std::move(pending);
        report.summary = std::move(done.values.summary);
        report.rounds = std::move(done.values.sup.rounds);
        report.ended_by = std::move(done.values.sup.ended_by);
    } catch (const stategraph::node_error& e) {
        failure = e.nested() ? e.nested() : std::current_exception();
    }
    if (failure) std::rethrow_exception(failure);
    co_return report;
}

namespace {

/// The agent's summary, from the desk.
boost::asio::awaitable<std::string> desk_summary(services& svc, agent_task t, std::string context) {
    auto pending = run_at_desk(svc, std::move(t), std::move(context));
    auto report = co_await std::move(pending);
    co_return std::move(report.summary);
}

/// Runs the task's agent; on the last attempt within the retry policy's time limit by itself, so
/// that an agent that does not answer is reported as failed instead of failing the turn.
boost::asio::awaitable<std::string> run_agent_in_time(services& svc, stategraph::context& ctx, const agent_task& t,
                                                      bool last) {
    std::string context = agent_context(svc, t);
    auto limit = svc.agents().retry.timeout;
    if (!last || limit.count() <= 0) co_return co_await desk_summary(svc, t, std::move(context));
    // (A parallel group waiting for the first to finish, not `work || timer`, which waits for the
    // first to succeed and would hide the agent's own error.)
    auto ex = ctx.executor();
    boost::asio::steady_timer deadline(ex, limit * 9 / 10);
    auto work = desk_summary(svc, t, std::move(context));
    auto expire = deadline.async_wait(boost::asio::use_awaitable);
    auto [order, work_error, summary, expire_error] =
        co_await boost::asio::experimental::make_parallel_group(
            boost::asio::co_spawn(ex, std::move(work), boost::asio::deferred),
            boost::asio::co_spawn(ex, std::move(expire), boost::asio::deferred))
            .async_wait(boost::asio::experimental::wait_for_one(), boost::asio::use_awaitable);
    (void)expire_error;
    if (order[0] == 1) throw agent_unavailable("no answer within the time limit of " + std::to_string(limit.count()) + " ms");
    if (work_error) std::rethrow_exception(work_error);
    co_return std::move(summary);
}

} // namespace

boost::asio::awaitable<update> agent_execution(services& svc, const agent_task& t, stategraph::context& ctx) {
    const int max_attempts = std::max(1, svc.agents().retry.max_attempts);
    update u;
    agent_result r;
    r.turn = t.turn;
    r.agent = t.agent;
    r.task = t.task;
    r.attempts = ctx.attempt();

    // A deny rule wins over everything: nothing is asked and nothing runs.
    if (auto [verdict, rule] = rule_for(svc, t.agent, t.task); verdict == stategraph::nodes::permission::deny) {
        r.status = agent_status::denied;
        r.summary = "The permission rule " + (rule ? "\"" + rule->text + "\"" : std::string("default")) +
                    " does not allow the " + std::string(to_string(t.agent)) + " agent to do that.";
        std::vector<agent_result> results{r};
        co_return std::move(u).set<&state::agent_results>(std::move(results));
    }
    // An email needs a recipient before it is worth asking for permission.
    if (t.needs_permission && t.action == "send_email" && !t.recipient) {
        r.status = agent_status::needs_input;
        r.summary = "Who should I send the email to? Tell me the contact's name.";
        std::vector<agent_result> results{r};
        co_return std::move(u).set<&state::agent_results>(std::move(results));
    }
    // Permission first: the question is asked once; retries reuse the answer.
    if (t.needs_permission) {
        r.asked_permission = true;
        hitl_state h;
        h.resume_type = t.decision ? hitl_kind::agent : hitl_kind::none;
        std::string decision;
        if (t.decision) {
            decision = *t.decision;
            h.user_response = t.user_message;
        } else {
            std::string question = permission_question(t);
            std::vector<turn_message> exchange{{"user", t.user_message}, {"assistant", question}};
            svc.with_store([&](memory_store& m) { m.append_turn_messages(t.chat_id, t.base_message_count, exchange); });
            boost::json::object payload;
            payload["kind"] = "agent";
            payload["action"] = t.action;
            payload["agent"] = std::string(to_string(t.agent));
            payload["task"] = t.task;
            if (t.recipient) payload["to"] = t.recipient->full_name;
            payload["question"] = question;
            boost::json::array options{"approve", "deny"};
            payload["options"] = std::move(options);
            std::string answer = co_await ctx.interrupt<std::string>(std::move(payload));
            exchange.push_back({"user", answer});
            decision = is_approval(answer) ? "approve" : "deny";
            h.user_response = answer;
            h.exchange = std::move(exchange);
        }
        u.set<&state::hitl>(std::move(h));
        if (decision != "approve") {
            r.status = agent_status::denied;
            r.summary = t.action == "send_email" ? "I did not send the email, as you asked." : "I did not do it, as you asked.";
            std::vector<agent_result> results{r};
            co_return std::move(u).set<&state::agent_results>(std::move(results));
        }
    }

    const std::string& msg = t.user_message;
    const bool research = t.agent == agent_kind::research;
    const bool last = ctx.attempt() >= max_attempts;
    // Progress for a UI watching the turn (stream mode "custom"): the agent at work.
    boost::json::object progress{{"agent", to_string(t.agent)}, {"task", t.task}, {"attempt", ctx.attempt()}, {"status", "working"}};
    ctx.write(progress);
    std::string failure;
    try {
        if (research && icontains(msg, "unreachable"))
            throw agent_unavailable("the research agent is unreachable");
        if (research && icontains(msg, "flaky") && ctx.attempt() == 1)
            throw agent_unavailable("the research agent had a transient error (attempt 1)");
        if (research && icontains(msg, "slow") && ctx.attempt() == 1) {
            // Overruns the per-attempt time limit: the engine cancels this attempt and retries.
            auto limit = svc.agents().retry.timeout;
            boost::asio::steady_timer timer(ctx.executor(), limit.count() > 0 ? 2 * limit : std::chrono::milliseconds(100));
            co_await timer.async_wait(boost::asio::use_awaitable);
        }
        // The agent's work (an email sent, a booking made) is a side effect: ctx.task runs it at
        // most once for this task, so a retry after a later failure, or the node run again after
        // a crash, reuses its saved summary instead of acting twice.
        auto act = [&]() -> boost::asio::awaitable<std::string> {
            co_return co_await run_agent_in_time(svc, ctx, t, last);
        };
        r.summary = co_await ctx.task("agent", act);
        if (t.needs_permission && t.action == "send_email" && t.recipient) {
            auto record_email = [&] {
                svc.with_store([&](memory_store& m) {
                    m.add_fact(t.user_id, t.recipient->contact_id,
                               "Email sent to " + t.recipient->full_name + ": " + t.task, svc.today());
                });
            };
            co_await ctx.task("record-email", record_email); // stored once even when the node re-runs
        }
    } catch (const std::exception& e) {
        if (!last) throw; // the retry policy waits (exponential backoff) and runs the next attempt
        failure = e.what();
    }
    if (!failure.empty()) {
        r.status = agent_status::failed;
        r.summary = "I couldn't reach the " + std::string(to_string(t.agent)) + " agent after " +
                    std::to_string(ctx.attempt()) + " attempts (" + failure + ").";
    } else {
        r.status = agent_status::ok;
    }
    progress["status"] = r.status == agent_status::ok ? "done" : "failed";
    ctx.write(progress);
    std::vector<agent_result> results{r};
    co_return std::move(u).set<&state::agent_results>(std::move(results));
}

stage_decl planning_stage(services& svc) {
    using namespace stategraph::dsl;
    // clang-format off
    return stage<state>("6. Planning & Execution",
        "global_planner"_n  = with_services(svc, global_planner),
        "agent_execution"_n = with_services(svc, agent_execution) | retry(svc.agents().retry),

        "global_planner"_n  >> route(planned, {{planner_outcome::agents,         end}, // the Sends go on
                                               {planner_outcome::nothing_to_run, "ui_router"_n}}),
        "global_planner"_n  >> fan_out(dispatch_agents, {"agent_execution"_n}),
        "agent_execution"_n >> route(more_agents, {{true,  "global_planner"_n},
                                                   {false, "ui_router"_n}}));
    // clang-format on
}

} // namespace global_supervisor
