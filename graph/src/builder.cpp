// The builder's work that does not depend on the state type (see state_graph.hpp): compiled here
// once, not in every program that builds a graph.
#include <stategraph/state_graph.hpp>

#include <algorithm>

namespace stategraph::detail {

graph_core::graph_core() = default;
graph_core::graph_core(const graph_core&) = default;
graph_core::graph_core(graph_core&&) noexcept = default;
graph_core& graph_core::operator=(const graph_core&) = default;
graph_core& graph_core::operator=(graph_core&&) noexcept = default;
graph_core::~graph_core() = default;

std::shared_ptr<const void> state_arg_from_json(const state_table& st, const boost::json::value& v) {
    const auto* o = v.if_object();
    if (!o) throw graph_error(errc::invalid_input, "a Send payload of the state type must be a JSON object", {});
    // The engine's one reader of state fields (an unknown field is an error naming the nearest
    // one); the fields it leaves out keep the state's defaults, as in the update's own values.
    update_box read = update_from_json(st, *o, errc::invalid_input, "send payload");
    if (!read) return std::shared_ptr<void>(st.new_state(), st.delete_state);
    return std::shared_ptr<void>(st.copy_state(st.update_values(read.get())), st.delete_state);
}

void add_edges(graph_core& g, const std::vector<edge_spec>& edges, const std::vector<join_spec>& joins) {
    g.topo.edges.insert(g.topo.edges.end(), edges.begin(), edges.end());
    g.topo.joins.insert(g.topo.joins.end(), joins.begin(), joins.end());
}

void add_node(graph_core& g, std::string name, node_call call, node_options options,
              std::shared_ptr<const topology> sub, std::type_index input, bool send_only,
              std::shared_ptr<const void> (*arg_from_json)(const boost::json::value&),
              boost::json::value (*arg_to_json)(const void*)) {
    auto& t = g.topo;
    if (name == START || name == END || name.empty() || name.rfind("__", 0) == 0) {
        t.builder_problems.push_back({errc::duplicate_node, "node name '" + name + "' is reserved", {name}});
        return;
    }
    if (g.index.count(name)) {
        t.builder_problems.push_back({errc::duplicate_node, "node '" + name + "' is added twice", {name}});
        return;
    }
    node_rt rt;
    rt.name = name;
    rt.call = std::move(call);
    rt.deferred = options.defer;
    rt.retry = options.retry;
    rt.timeout = options.timeout;
    rt.cache = std::move(options.cache);
    rt.on_error = std::move(options.on_error);
    rt.use_defaults = options.use_defaults;
    rt.input_type = input;
    rt.send_only = send_only;
    rt.arg_from_json = arg_from_json;
    rt.arg_to_json = arg_to_json;
    g.index[name] = static_cast<int>(g.nodes.size());
    g.nodes.push_back(std::move(rt));
    node_spec spec;
    spec.name = std::move(name);
    spec.stage = std::move(options.stage);
    spec.deferred = options.defer;
    spec.send_only = send_only;
    spec.has_retry = options.retry.has_value();
    spec.ends = std::move(options.ends);
    spec.subgraph = std::move(sub);
    t.nodes.push_back(std::move(spec));
}

namespace {

/// Fills what each node left unset from the graph's defaults, and resolves its time limit.
void apply_defaults(graph_core& core, const node_defaults& defaults) {
    for (auto& n : core.nodes) {
        if (n.use_defaults) {
            if (!n.retry) n.retry = defaults.retry;
            if (!n.cache) n.cache = defaults.cache;
            if (!n.on_error) n.on_error = defaults.on_error;
        }
        if (n.timeout.count() <= 0 && n.retry) n.timeout = n.retry->timeout;
        if (n.timeout.count() <= 0 && n.use_defaults) n.timeout = defaults.timeout;
        for (auto& spec : core.topo.nodes)
            if (spec.name == n.name) {
                spec.has_retry = n.retry.has_value();
                spec.has_cache = n.cache.has_value();
                spec.retry = n.retry ? describe_retry(*n.retry) : std::string();
                spec.timeout_ms = static_cast<long long>(n.timeout.count());
                spec.error_handler = n.on_error ? n.on_error.name() : std::string();
            }
    }
}

/// The migrations form one chain ending at the state: from each version to the next, up to
/// the state's version, each one's result the next one's argument, the last one's the state.
void check_migrations(graph_core& g, std::type_index state, const std::string& state_name,
                      std::vector<graph_problem>& problems) {
    if (g.state_version < 1)
        problems.push_back({errc::invalid_input,
                            "state version " + std::to_string(g.state_version) + " of " + state_name + ": versions start at 1",
                            {state_name}});
    std::sort(g.migrations.begin(), g.migrations.end(), [](const auto& a, const auto& b) { return a.from < b.from; });
    for (std::size_t i = 0; i < g.migrations.size(); ++i) {
        const auto& m = g.migrations[i];
        const std::string what = "the migration from state version " + std::to_string(m.from) + " (" + m.from_name + ")";
        if (m.from < 1 || m.from >= g.state_version)
            problems.push_back({errc::invalid_input,
                                what + " is outside the versions before the state's own (" + std::to_string(g.state_version) +
                                    "): call set_state_version(" + std::to_string(std::max(m.from + 1, 2)) + ") or more",
                                {m.from_name}});
        if (i > 0 && g.migrations[i - 1].from == m.from)
            problems.push_back({errc::invalid_input, what + " is declared twice", {m.from_name}});
        else if (i > 0 && g.migrations[i - 1].from != m.from - 1)
            problems.push_back({errc::invalid_input,
                                "no migration from state version " + std::to_string(m.from - 1) + " to " +
                                    std::to_string(m.from) + ": the chain of migrations has a gap",
                                {m.from_name}});
        if (i > 0 && g.migrations[i - 1].from == m.from - 1 && g.migrations[i - 1].to_type != m.from_type)
            problems.push_back({errc::invalid_input,
                                what + " reads " + m.from_name + ", but the migration before it returns " +
                                    g.migrations[i - 1].to_name,
                                {m.from_name, g.migrations[i - 1].to_name}});
        if (m.from == g.state_version - 1 && m.to_type != state)
            problems.push_back({errc::invalid_input,
                                what + " is the last one and must return the state " + state_name + ", not " + m.to_name,
                                {m.to_name, state_name}});
    }
    if (!g.migrations.empty() && g.migrations.back().from < g.state_version - 1)
        problems.push_back({errc::invalid_input,
                            "no migration from state version " + std::to_string(g.migrations.back().from + 1) + " to " +
                                std::to_string(g.state_version) + " (" + state_name + ")",
                            {state_name}});
}

} // namespace

std::shared_ptr<const graph_core> compile_core(const graph_core& built, const node_defaults& defaults,
                                               compile_options options, std::type_index state,
                                               const std::string& state_name, std::vector<graph_problem>& problems) {
    auto impl = std::make_shared<graph_core>(built);
    auto& t = impl->topo;
    if (!options.name.empty()) t.name = options.name;
    for (auto& n : options.interrupt_before) t.interrupt_before.insert(n);
    for (auto& n : options.interrupt_after) t.interrupt_after.insert(n);
    t.fields = impl->st->describe;
    apply_defaults(*impl, defaults);
    problems = validate(t);
    for (const auto& n : impl->nodes)
        if (n.on_error && n.on_error.state_type() != state)
            problems.push_back({errc::invalid_input,
                                "the error handler '" + n.on_error.name() + "' of node '" + n.name +
                                    "' reads another state type than the graph's",
                                {n.name, n.on_error.name()}});
    for (const auto* io : {impl->input.get(), impl->output.get()})
        if (io)
            for (const auto& name : io->by_name)
                if (impl->st->index_of(name) < 0)
                    problems.push_back({errc::invalid_input,
                                        std::string(io == impl->input.get() ? "input" : "output") + " schema " +
                                            io->type_name + ": member '" + name +
                                            "' is not a field of the state; map it (input_schema<I>(map), "
                                            "output_schema<O>(map))",
                                        {name, io->type_name}});
    check_migrations(*impl, state, state_name, problems);
    if (!problems.empty()) return nullptr;
    impl->lower();
    if (options.cache) impl->cache = options.cache;
    else impl->cache = options.checkpointer;
    if (!impl->cache &&
        std::any_of(impl->nodes.begin(), impl->nodes.end(), [](const auto& n) { return n.cache.has_value(); }))
        impl->cache = std::make_shared<checkpoint::memory_saver>(); // in process memory: one per compiled graph
    impl->saver = std::move(options.checkpointer);
    impl->store = std::move(options.store);
    return impl;
}

} // namespace stategraph::detail
