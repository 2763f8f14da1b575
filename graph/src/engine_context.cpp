// task_frame and context: what a node sees of its task (interrupts and their resume values,
// side effects, the store, the runtime context, usage, custom events and message chunks).

#include "engine_internal.hpp"

#include <stategraph/traceparent.hpp>

namespace stategraph {
namespace detail {

std::string interrupt_id(const std::string& task_id, std::size_t index) {
    // FNV-1a of the task id and the call's position: stable across re-runs of the task,
    // distinct for each interrupt call of a node and for each task.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : task_id) h = (h ^ c) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (int i = 0; i < 8; ++i) h = (h ^ ((index >> (8 * i)) & 0xff)) * 1099511628211ull;
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

void task_frame::begin(const engine::call_env& e, const engine::run_state& r, const std::string& node_name, std::string id,
                       boost::asio::any_io_executor ex, const resume_pass* child) {
    env = &e;
    run = &r;
    node = &node_name;
    step = r.saved.step + 1;
    executor = std::move(ex);
    task_id = std::move(id);
    child_resume = child;
}

const std::string& task_frame::thread_id() const noexcept { return run->thread_id(); }
const std::string& task_frame::ns() const noexcept { return run->session.ns(); }
const std::vector<std::string>& task_frame::ns_path() const noexcept { return run->ns_path; }
const std::string& task_frame::run_id() const noexcept { return run->run_id; }
const std::string& task_frame::checkpoint_id() const noexcept { return run->saved.cp_id; }
checkpoint::saver* task_frame::saver() const noexcept { return run->session.saver(); }
const stream_handler& task_frame::sink() const noexcept { return env->on_event; }
stream_mode task_frame::modes() const noexcept { return env->modes; }
const runtime_context& task_frame::runtime() const noexcept { return env->cfg.runtime; }
store::base_store* task_frame::store() const noexcept { return env->cfg.store ? env->cfg.store : env->g.store.get(); }
run_observer* task_frame::observer() const noexcept { return env->cfg.observer; }
int task_frame::recursion_limit() const noexcept { return env->cfg.recursion_limit; }
durability task_frame::mode() const noexcept { return run->writer.mode; }

const boost::json::value* next_resume(task_frame& f) {
    std::size_t index = f.counter++;
    return index < f.resume.size() ? &f.resume[index] : nullptr;
}

void raise_interrupt(task_frame& f, boost::json::value payload) {
    throw interrupt_signal{{interrupt_info{interrupt_id(f.task_id, f.counter - 1), *f.node, std::move(payload)}}};
}

void throw_resume_mismatch(task_frame& f, const std::string& type, const boost::json::value& answer) {
    throw thread_error(errc::resume_type_mismatch,
                       "node '" + *f.node + "' expected a resume value of type " + type + " but got " +
                           boost::json::serialize(answer),
                       {*f.node});
}

std::pair<std::string, const boost::json::value*> begin_effect(task_frame& f, std::string_view name) {
    const int n = ++f.effect_calls[std::string(name)];
    std::string key(name);
    if (n > 1) key += "#" + std::to_string(n);
    return {key, f.effects.if_contains(key)};
}

boost::asio::awaitable<void> save_effect(task_frame& f, std::string key, boost::json::value result) {
    f.effects[key] = std::move(result);
    checkpoint::saver* saver = f.saver();
    if (!saver) co_return; // no checkpointer: kept for retries of this call only
    std::vector<checkpoint::pending_write> w{{f.task_id, *f.node, std::string(checkpoint::reserved::effects), f.effects}};
    co_await saver->put_writes(f.thread_id(), f.ns(), f.checkpoint_id(), std::move(w));
}

store::base_store* store_of_call(const task_frame& f) noexcept { return f.store(); }
void report_usage(const task_frame& f, std::string_view model, const token_usage& usage) {
    if (auto* o = f.observer()) o->on_usage(model, usage);
}

void throw_no_store(const task_frame& f) {
    throw graph_error(errc::no_store,
                      "node '" + *f.node + "' asked for the store (ctx.store()), but the run has none: give the graph "
                          "one with compile_options::store, or the call with run_config::store",
                      {*f.node});
}

const runtime_context& runtime_of_call(const task_frame& f) noexcept { return f.runtime(); }

void throw_runtime_mismatch(const task_frame& f, const std::string& wanted) {
    const auto& r = runtime_of_call(f);
    throw graph_error(errc::invalid_input,
                      "node '" + *f.node + "' reads the runtime context as " + wanted + ", but the call " +
                          (r ? "passed a " + boost::core::demangle(r.type->name())
                             : std::string("passed none (run_config::runtime = stategraph::runtime_of(deps))")),
                      {*f.node});
}

void throw_effect_mismatch(task_frame& f, const std::string& key, const std::string& type) {
    throw thread_error(errc::resume_type_mismatch,
                       "node '" + *f.node + "': the saved result of ctx.task('" + key + "') does not convert to " + type +
                           " (the node's code changed since it ran?)",
                       {*f.node, key});
}

bool wants_custom(const task_frame& f) noexcept { return f.sink() && has_mode(f.modes(), stream_mode::custom); }
bool wants_messages(const task_frame& f) noexcept { return f.sink() && has_mode(f.modes(), stream_mode::messages); }

/// An event of the node's task: custom events and message chunks.
void emit_from_node(task_frame& f, stream_mode mode, boost::json::value data) {
    stream_event e;
    e.mode = mode;
    e.ns = f.ns_path();
    e.step = f.step;
    e.node = *f.node;
    e.data = std::move(data);
    f.sink()(e);
}

void emit_message(task_frame& f, boost::json::value chunk) {
    boost::json::object meta{{"langgraph_node", *f.node},
                             {"langgraph_step", f.step},
                             {"langgraph_checkpoint_ns", f.ns()},
                             {"langgraph_task_id", f.task_id},
                             {"thread_id", f.thread_id()}};
    meta["run_id"] = f.run_id();
    emit_from_node(f, stream_mode::messages, boost::json::array{std::move(chunk), std::move(meta)});
}

void emit_custom(task_frame& f, boost::json::value event) { emit_from_node(f, stream_mode::custom, std::move(event)); }

} // namespace detail

const std::string& context::node() const noexcept { return *f_->node; }
std::int64_t context::step() const noexcept { return f_->step; }
const std::string& context::thread_id() const noexcept { return f_->thread_id(); }
const std::string& context::ns() const noexcept { return f_->ns(); }
int context::attempt() const noexcept { return f_->attempt; }
const boost::asio::any_io_executor& context::executor() const noexcept { return f_->executor; }
const std::string& context::run_id() const noexcept { return f_->run_id(); }
const std::string& context::checkpoint_id() const noexcept { return f_->checkpoint_id(); }

} // namespace stategraph

// ---------------------------------------------------------------------------------------------
// tracing: the spans of a run, its steps and node attempts (run_observer::traces), and the
// spans nodes open for their model and tool calls (context::start_span).

namespace stategraph {

bool is_traceparent(std::string_view s) noexcept {
    if (s.size() != 55 || s.substr(0, 3) != "00-" || s[35] != '-' || s[52] != '-') return false;
    // -1: not lower-case hex; 0: all zeros; 1: hex, not all zeros
    auto hex_run = [s](std::size_t from, std::size_t n) {
        bool nonzero = false;
        for (std::size_t i = from; i < from + n; ++i) {
            const char c = s[i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return -1;
            nonzero |= c != '0';
        }
        return nonzero ? 1 : 0;
    };
    return hex_run(3, 32) == 1 && hex_run(36, 16) == 1 && hex_run(53, 2) >= 0;
}

namespace detail {

trace_span start_span(const task_frame& f, span_kind kind, std::string_view name, std::span<const span_attribute> attributes) {
    run_observer* t = f.run ? f.run->tracer : nullptr;
    if (!t) return {};
    const span_start s{kind, name, f.span, {}, attributes};
    return trace_span(*t, t->on_span_begin(s));
}

namespace engine {

std::pair<std::string, std::string> describe_failure(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const graph_error& g) {
        return {g.code().category() == stategraph_category() ? std::string(to_string(static_cast<errc>(g.code().value())))
                                                             : g.code().category().name(),
                g.what()};
    } catch (const std::system_error& s) {
        return {std::string(s.code().category().name()) + ":" + std::to_string(s.code().value()), s.what()};
    } catch (const interrupt_signal&) {
        return {"interrupt", "interrupted"};
    } catch (const std::exception& x) {
        return {boost::core::demangle(typeid(x).name()), x.what()};
    } catch (...) {
        return {"unknown", "a non-standard exception"};
    }
}

namespace {
/// Ends span `id` with `attributes`, failed with `failure`'s type and message when there is one.
void end_span(run_observer& tracer, std::uint64_t id, std::span<const span_attribute> attributes, std::exception_ptr failure) {
    span_end e{.attributes = attributes};
    std::pair<std::string, std::string> why;
    if (failure) {
        why = describe_failure(failure);
        e.failed = true;
        e.error_type = why.first;
        e.message = why.second;
    }
    tracer.on_span_end(id, e);
}
} // namespace

void begin_run_span(const call_env& env, run_state& r, const checkpoint::checkpoint* head, bool starts_trace) {
    if (!r.tracer) return;
    std::string_view remote;
    if (!r.parent_span) {
        if (env.cfg.traceparent) {
            remote = env.cfg.traceparent.view();
        } else if (head && !starts_trace) {
            if (const auto* v = head->metadata.if_contains(names::traceparent); v && v->is_string()) remote = v->get_string();
        }
    }
    const std::string& graph = env.g.topo.name;
    const span_attribute attributes[] = {
        {"gen_ai.operation.name", std::string_view("invoke_agent")},
        {"gen_ai.agent.name", std::string_view(graph)},
        {"gen_ai.conversation.id", std::string_view(r.thread_id())},
        {"stategraph.run_id", std::string_view(r.run_id)},
        {"stategraph.checkpoint_ns", std::string_view(r.session.ns())},
    };
    const std::string name = "invoke_agent " + graph;
    r.span = r.tracer->on_span_begin(span_start{span_kind::run, name, r.parent_span, remote, attributes});
    if (r.span && r.ns_path.empty() && r.session) r.traceparent = r.tracer->trace_parent(r.span);
}

void end_run_span(run_state& r, std::exception_ptr failure, const run_outcome* result) {
    if (!r.span) return;
    const auto id = std::exchange(r.span, 0);
    std::string_view status = "error";
    if (!failure && result)
        status = result->status == run_status::done ? "done" : result->status == run_status::interrupted ? "interrupted" : "drained";
    const span_attribute attributes[] = {{"stategraph.status", status},
                                         {"stategraph.nodes_run", static_cast<std::int64_t>(r.path.size())}};
    end_span(*r.tracer, id, attributes, failure);
}

std::uint64_t begin_step_span(run_state& r, std::size_t tasks) {
    if (!r.tracer) return 0;
    const std::int64_t step = r.saved.step + 1;
    const span_attribute attributes[] = {{"stategraph.step", step}, {"stategraph.tasks", static_cast<std::int64_t>(tasks)}};
    const std::string name = "step " + std::to_string(step);
    r.step_span = r.tracer->on_span_begin(span_start{span_kind::step, name, r.span, {}, attributes});
    return r.step_span;
}

void end_step_span(run_state& r, const char* status) {
    if (!r.step_span) return;
    const auto id = std::exchange(r.step_span, 0);
    const span_attribute attributes[] = {{"stategraph.status", std::string_view(status ? status : "error")}};
    span_end e{.attributes = attributes};
    if (!status) {
        e.failed = true;
        e.error_type = "step_failed";
        e.message = "a task of the step failed";
    }
    r.tracer->on_span_end(id, e);
}

void begin_node_span(run_state& r, task& t, const std::string& node, int attempt, bool cached) {
    if (!r.tracer) return;
    const span_attribute attributes[] = {{"stategraph.node", std::string_view(node)},
                                         {"stategraph.task_id", std::string_view(t.id)},
                                         {"stategraph.step", r.saved.step + 1},
                                         {"stategraph.attempt", static_cast<std::int64_t>(attempt)},
                                         {"stategraph.cached", cached}};
    const std::string name = "node " + node;
    t.frame.span = r.tracer->on_span_begin(span_start{span_kind::node, name, r.step_span, {}, attributes});
}

void end_node_span(run_state& r, task& t, std::exception_ptr error) {
    if (!t.frame.span) return;
    const auto id = std::exchange(t.frame.span, 0);
    const std::string_view status = error                                        ? "error"
                                    : t.status == task_status::interrupted       ? "interrupted"
                                                                                 : "done";
    const span_attribute attributes[] = {{"stategraph.status", status}};
    end_span(*r.tracer, id, attributes, error);
}

} // namespace engine
} // namespace detail

void trace_span::put(std::string_view key, owned_value value) {
    if (!o_) return;
    for (auto& a : attributes_)
        if (a.first == key) {
            a.second = std::move(value);
            return;
        }
    attributes_.emplace_back(std::string(key), std::move(value));
}

void trace_span::end() noexcept {
    if (!o_) return;
    run_observer* o = std::exchange(o_, nullptr);
    try {
        std::vector<std::vector<std::string_view>> lists; // the views of list values
        std::size_t n_lists = 0;
        for (const auto& a : attributes_) n_lists += std::holds_alternative<std::vector<std::string>>(a.second);
        lists.reserve(n_lists);
        std::vector<span_attribute> views;
        views.reserve(attributes_.size());
        for (const auto& [key, value] : attributes_) {
            span_attribute v{key, std::int64_t(0)};
            if (const auto* s = std::get_if<std::string>(&value)) v.value = std::string_view(*s);
            else if (const auto* i = std::get_if<std::int64_t>(&value)) v.value = *i;
            else if (const auto* d = std::get_if<double>(&value)) v.value = *d;
            else if (const auto* b = std::get_if<bool>(&value)) v.value = *b;
            else {
                const auto& items = std::get<std::vector<std::string>>(value);
                auto& list = lists.emplace_back(items.begin(), items.end());
                v.value = std::span<const std::string_view>(list);
            }
            views.push_back(v);
        }
        o->on_span_end(id_, span_end{failed_, error_type_, message_, views});
    } catch (...) {
        // a tracer that cannot take the span loses it; the node goes on
    }
    id_ = 0;
}

} // namespace stategraph
