// task_frame and context: what a node sees of its task (interrupts and their resume values,
// side effects, the store, the runtime context, usage, custom events and message chunks).

#include "engine_internal.hpp"

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
