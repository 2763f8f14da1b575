// json_graph: the engine's entry points with the state as JSON. Each public call is a plain
// function that moves its arguments into an owned request and returns a coroutine of this file
// taking that request (g++ 12 destroys a coroutine's by-value user-type arguments twice).

#include <stategraph/json_graph.hpp>

#include <stategraph/checkpoint/reserved.hpp>

#include <stdexcept>
#include <utility>

namespace stategraph {
namespace {

namespace names = checkpoint::reserved;

json_snapshot to_json_snapshot(const detail::state_table& st, detail::snapshot_data d) {
    json_snapshot s;
    s.values = detail::state_json(st, d.values.get());
    s.next = std::move(d.next);
    s.tasks = std::move(d.tasks);
    s.step = d.step;
    s.source = std::move(d.source);
    s.checkpoint_id = std::move(d.checkpoint_id);
    s.parent_checkpoint_id = std::move(d.parent_checkpoint_id);
    s.metadata = std::move(d.metadata);
    return s;
}

boost::asio::awaitable<json_result> run_json(std::unique_ptr<detail::run_request> req) {
    const detail::state_table& st = *req->graph->st;
    auto outcome = co_await detail::run_graph(std::move(req));
    json_result r;
    r.status = outcome.status;
    r.values = detail::state_json(st, outcome.values.get());
    r.interrupts = std::move(outcome.interrupts);
    r.checkpoint_id = std::move(outcome.checkpoint_id);
    r.step = outcome.step;
    r.next = std::move(outcome.next);
    r.output = std::move(outcome.output);
    co_return r;
}

boost::asio::awaitable<json_snapshot> state_json_of(std::unique_ptr<detail::state_request> req) {
    const detail::state_table& st = *req->graph->st;
    auto data = co_await detail::get_state(std::move(req));
    co_return to_json_snapshot(st, std::move(data));
}

boost::asio::awaitable<std::vector<json_snapshot>> history_json(std::unique_ptr<detail::state_request> req) {
    const detail::state_table& st = *req->graph->st;
    auto list = co_await detail::get_state_history(std::move(req));
    std::vector<json_snapshot> out;
    out.reserve(list.size());
    for (auto& d : list) out.push_back(to_json_snapshot(st, std::move(d)));
    co_return out;
}

boost::asio::awaitable<std::vector<interrupt_info>> pending_of(std::unique_ptr<detail::state_request> req) {
    auto data = co_await detail::get_state(std::move(req));
    std::vector<interrupt_info> out;
    for (auto& t : data.tasks)
        for (auto& i : t.interrupts) out.push_back(std::move(i));
    co_return out;
}

std::unique_ptr<detail::state_request> state_request_of(const std::shared_ptr<const detail::graph_core>& core,
                                                      std::string thread_id) {
    auto req = std::make_unique<detail::state_request>();
    req->graph = core;
    req->thread_id = std::move(thread_id);
    return req;
}

/// At most this many namespaces are walked (a guard against a corrupt store that loops).
constexpr std::size_t max_namespaces = 256;

boost::asio::awaitable<std::vector<namespace_head>> namespaces_of(std::shared_ptr<checkpoint::saver> saver,
                                                                  std::unique_ptr<std::string> thread_id) {
    const std::optional<std::string> newest;
    std::vector<std::string> pending{std::string()}; // the root first
    std::vector<namespace_head> out;
    for (std::size_t i = 0; i < pending.size() && i < max_namespaces; ++i) {
        const std::string ns = pending[i];
        auto head = co_await saver->get(*thread_id, ns, newest);
        if (!head) continue;
        out.push_back(namespace_head{ns, head->cp.id});
        for (const auto& w : head->writes)
            if (w.channel == names::interrupt)
                pending.push_back(names::child_namespace(ns, names::task_segment(w.task_name, w.task_id)));
    }
    co_return out;
}

} // namespace

json_graph::json_graph(std::shared_ptr<const detail::graph_core> core) : core_(std::move(core)) {
    if (!core_) throw std::invalid_argument("json_graph: the compiled graph is empty (no engine tables)");
}

const detail::graph_core& json_graph::g() const {
    if (!core_) throw std::logic_error("json_graph: used without a graph (default-constructed)");
    return *core_;
}

boost::asio::awaitable<json_result> json_graph::invoke(json_run run) const {
    (void)g();
    auto req = std::make_unique<detail::run_request>();
    req->graph = core_;
    req->cfg = run.config;
    req->modes = run.modes;
    req->on_event = std::move(run.on_event);
    req->interrupt_before = std::move(run.interrupt_before);
    req->interrupt_after = std::move(run.interrupt_after);
    if (auto* values = std::get_if<boost::json::object>(&run.input)) {
        check_input(*values, "input"); // before anything runs
        req->input.what = detail::run_input::kind::values;
        // Read against the thread's state once it is loaded (input schema, nested members kept).
        req->input.json = std::move(*values);
    } else if (auto* resume = std::get_if<resume_input>(&run.input)) {
        req->input.what = detail::run_input::kind::resume;
        req->input.resume = std::move(*resume);
    } else if (auto* c = std::get_if<json_command>(&run.input)) {
        req->input.what = detail::run_input::kind::command;
        // The update is read against the thread's state once it is loaded (nested members kept).
        req->input.json = std::move(c->update);
        req->input.go_to = std::move(c->go_to);
        req->input.json_sends = std::move(c->sends);
        if (c->resume) {
            req->input.has_resume = true;
            req->input.resume = std::move(*c->resume);
        }
    }
    return run_json(std::move(req));
}

boost::asio::awaitable<json_snapshot> json_graph::get_state(std::string thread_id) const {
    return get_state(std::move(thread_id), std::nullopt);
}

boost::asio::awaitable<json_snapshot> json_graph::get_state(std::string thread_id, std::optional<std::string> checkpoint_id) const {
    (void)g();
    auto req = state_request_of(core_, std::move(thread_id));
    req->checkpoint_id = std::move(checkpoint_id);
    return state_json_of(std::move(req));
}

boost::asio::awaitable<json_snapshot> json_graph::get_state(std::string thread_id, state_options o) const {
    (void)g();
    auto req = state_request_of(core_, std::move(thread_id));
    if (o.checkpoint_id) req->checkpoint_id = o.checkpoint_id.str();
    req->subgraphs = o.subgraphs;
    return state_json_of(std::move(req));
}

boost::asio::awaitable<std::vector<json_snapshot>> json_graph::get_state_history(std::string thread_id) const {
    return get_state_history(std::move(thread_id), checkpoint::list_options{});
}

boost::asio::awaitable<std::vector<json_snapshot>> json_graph::get_state_history(std::string thread_id,
                                                                                 checkpoint::list_options options) const {
    (void)g();
    auto req = state_request_of(core_, std::move(thread_id));
    req->list = std::move(options);
    return history_json(std::move(req));
}

boost::asio::awaitable<std::string> json_graph::update_state(json_update u) const {
    if (u.ns.empty()) check_values(u.values, "values"); // before anything is read (a subgraph's: when its state is)
    auto req = std::make_unique<detail::update_request>();
    req->graph = core_;
    req->ns = std::move(u.ns);
    req->thread_id = std::move(u.thread_id);
    req->json = std::move(u.values); // read against the checkpoint's state: nested members kept
    req->as_node = std::move(u.as_node);
    req->checkpoint_id = std::move(u.checkpoint_id);
    req->allow_drift = u.allow_drift;
    return detail::update_state(std::move(req));
}

boost::asio::awaitable<std::vector<interrupt_info>> json_graph::pending_interrupts(std::string thread_id) const {
    (void)g();
    return pending_of(state_request_of(core_, std::move(thread_id)));
}

boost::asio::awaitable<std::vector<namespace_head>> json_graph::subgraph_namespaces(std::string thread_id) const {
    if (!g().saver)
        throw thread_error(errc::no_checkpointer,
                           "this graph was compiled without a checkpointer: it keeps no namespaces of thread '" + thread_id + "'",
                           {thread_id});
    return namespaces_of(core_->saver, std::make_unique<std::string>(std::move(thread_id)));
}

void json_graph::check_values(const boost::json::object& values, std::string_view where) const {
    const detail::state_box blank(*g().st);
    (void)detail::merge_update_from_json(*g().st, values, blank.get(), errc::invalid_input, std::string(where));
}

void json_graph::check_input(const boost::json::object& input, std::string_view where) const {
    const detail::state_box blank(*g().st);
    (void)detail::read_input(g(), input, nullptr, blank.get(), errc::invalid_input, std::string(where));
}

const topology& json_graph::shape() const { return g().topo; }
const std::vector<std::string>& json_graph::fields() const { return g().st->names; }
bool json_graph::has_node(const std::string& name) const { return g().find(name) >= 0; }
const std::shared_ptr<checkpoint::saver>& json_graph::checkpointer() const { return g().saver; }
const std::string& json_graph::signature() const { return g().signature; }

} // namespace stategraph
