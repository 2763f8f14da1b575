// The frontier (what runs next) in its stored form, and routing: a node's static edges, join
// barriers and conditional edges turned into the next superstep's triggers and Sends.

#include "engine_internal.hpp"

namespace stategraph::detail::engine {

std::string max_version(const std::vector<std::string>& versions) {
    std::string m;
    for (const auto& v : versions)
        if (v > m) m = v;
    return m;
}

send restored_send(const graph_core& g, int id, const boost::json::value& arg) {
    const auto& rt = g.nodes[static_cast<std::size_t>(id)];
    return send::restored(rt.name, rt.arg_from_json(arg), rt.input_type, rt.arg_to_json);
}

boost::json::object send_json(const send& s) { return boost::json::object{{"node", s.node()}, {"arg", s.arg_json()}}; }

// Empty lists are left out: frontier_from (and every other reader) treats a missing key as empty.
boost::json::value frontier_json(const graph_core& g, const frontier& f, boost::json::storage_ptr sp) {
    boost::json::object o(sp);
    o.reserve(2); // one table allocation, enough for the usual pull list (and `seen`)
    auto names_of = [&](const std::vector<int>& ids) {
        boost::json::array a(sp);
        a.reserve(ids.size());
        for (int n : ids) a.push_back(boost::json::string(g.nodes[static_cast<std::size_t>(n)].name, sp));
        return a;
    };
    if (!f.pull.empty()) o[names::pull] = names_of(f.pull);
    if (!f.push.empty()) {
        boost::json::array push(sp);
        push.reserve(f.push.size());
        for (const auto& s : f.push) push.push_back(send_json(s));
        o[names::push] = std::move(push);
    }
    if (!f.deferred.empty()) o[names::deferred] = names_of(f.deferred);
    if (!f.barriers.empty()) {
        boost::json::array barriers(sp);
        barriers.reserve(f.barriers.size());
        for (const auto& b : f.barriers) {
            boost::json::array a(sp);
            a.reserve(b.size());
            for (char c : b) a.push_back(c != 0);
            barriers.push_back(std::move(a));
        }
        o[names::barriers] = std::move(barriers);
    }
    if (!f.seen.empty()) o[names::seen] = f.seen;
    return o;
}

/// The corrupt_checkpoint error of stored data that is well-formed but wrong, naming the thread,
/// the checkpoint and the field it was read from.
[[noreturn]] void throw_stored(const std::string& thread, const std::string& checkpoint_id, const std::string& field,
                               const std::string& problem) {
    throw checkpoint_error(errc::corrupt_checkpoint,
                           "thread '" + thread + "', checkpoint " + checkpoint_id + ", field '" + field + "': " + problem,
                           {thread, checkpoint_id, field});
}

/// Reads a stored frontier. A node name this graph does not have is corruption when this graph
/// wrote the checkpoint; with `drifted` (another graph shape wrote it and the caller accepted
/// that) it is a node that was removed since, and is dropped.
frontier frontier_from(const graph_core& g, const boost::json::value& v, const std::string& thread,
                       const std::string& checkpoint_id, bool drifted) {
    frontier f;
    f.barriers.resize(g.joins.size());
    for (std::size_t j = 0; j < g.joins.size(); ++j) f.barriers[j].assign(g.joins[j].sources.size(), 0);
    if (v.is_null()) return f;
    const auto* o = v.if_object();
    if (!o) throw_stored(thread, checkpoint_id, "frontier", "not an object");
    auto node_of = [&](const boost::json::value& n) {
        if (!n.is_string()) throw_stored(thread, checkpoint_id, "frontier", "a node name that is not a string");
        int id = g.find(std::string(n.get_string()));
        if (id < 0 && !drifted)
            throw_stored(thread, checkpoint_id, "frontier",
                         "names node '" + std::string(n.get_string()) +
                             "', which this graph does not have, though this graph wrote the checkpoint");
        return id;
    };
    if (auto* a = o->if_contains(names::pull))
        for (const auto& n : a->as_array())
            if (int id = node_of(n); id >= 0) f.pull.push_back(id);
    if (auto* a = o->if_contains(names::deferred))
        for (const auto& n : a->as_array())
            if (int id = node_of(n); id >= 0) f.deferred.push_back(id);
    if (auto* a = o->if_contains(names::push))
        for (const auto& p : a->as_array())
            if (int id = node_of(p.at("node")); id >= 0) f.push.push_back(restored_send(g, id, p.at("arg")));
    if (auto* a = o->if_contains(names::barriers); a && a->as_array().size() == f.barriers.size())
        for (std::size_t j = 0; j < f.barriers.size(); ++j) {
            const auto& arr = a->as_array()[j].as_array();
            for (std::size_t k = 0; k < arr.size() && k < f.barriers[j].size(); ++k) f.barriers[j][k] = arr[k].as_bool();
        }
    if (auto* s = o->if_contains(names::seen)) f.seen = std::string(s->as_string());
    return f;
}

void add_target(const graph_core& g, const std::string& name, frontier& f, const std::string& from) {
    if (name == END) return;
    int id = g.find(name);
    if (id < 0) {
        auto near = nearest_name(name, g.topo.node_names());
        throw graph_error(errc::invalid_route,
                          "'" + from + "' routed to '" + name + "', which is not a node of the graph" +
                              (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                          {from, name});
    }
    auto& list = g.nodes[static_cast<std::size_t>(id)].deferred ? f.deferred : f.pull;
    if (std::find(list.begin(), list.end(), id) == list.end()) list.push_back(id);
}

namespace {

void trigger(const graph_core& g, int id, frontier& f) {
    if (id < 0) return;
    add_target(g, g.nodes[static_cast<std::size_t>(id)].name, f, "");
}

} // namespace

void check_send(const graph_core& g, const send& s, const std::string& from) {
    int id = g.find(s.node());
    if (id < 0) {
        frontier scratch;
        add_target(g, s.node(), scratch, from); // throws invalid_route
    }
    const auto& rt = g.nodes[static_cast<std::size_t>(id)];
    if (rt.input_type != s.type())
        throw graph_error(errc::invalid_input,
                          "'" + from + "' sent a payload of type " + boost::core::demangle(s.type().name()) + " to node '" +
                              s.node() + "', which reads " + boost::core::demangle(rt.input_type.name()),
                          {from, s.node()});
}

/// The static successors of node `from` (-1 = START) and its conditional edges on `state`.
void successors(const graph_core& g, int from, const void* state, frontier& f) {
    const auto& next = from < 0 ? g.start_next : g.nodes[static_cast<std::size_t>(from)].next;
    for (int n : next) trigger(g, n, f);
    if (from >= 0) {
        for (int j : g.nodes[static_cast<std::size_t>(from)].joins) {
            auto& seen = f.barriers[static_cast<std::size_t>(j)];
            const auto& join = g.joins[static_cast<std::size_t>(j)];
            for (std::size_t k = 0; k < join.sources.size(); ++k)
                if (join.sources[k] == from) seen[k] = 1;
            if (std::all_of(seen.begin(), seen.end(), [](char c) { return c != 0; })) {
                std::fill(seen.begin(), seen.end(), 0);
                trigger(g, join.target, f);
            }
        }
    }
    const auto& brs = from < 0 ? g.start_branches : g.nodes[static_cast<std::size_t>(from)].branches;
    for (int b : brs) {
        std::vector<std::string> targets;
        std::vector<send> sends;
        g.branches[static_cast<std::size_t>(b)].route(state, targets, sends);
        const std::string& src = from < 0 ? START : g.nodes[static_cast<std::size_t>(from)].name;
        for (const auto& t : targets) add_target(g, t, f, src);
        for (auto& s : sends) {
            check_send(g, s, src);
            f.push.push_back(std::move(s));
        }
    }
}

std::vector<std::string> next_names(const graph_core& g, const frontier& f) {
    std::vector<std::string> out;
    for (int n : f.pull) out.push_back(g.nodes[static_cast<std::size_t>(n)].name);
    for (const auto& s : f.push) out.push_back(s.node());
    if (f.pull.empty() && f.push.empty())
        for (int n : f.deferred) out.push_back(g.nodes[static_cast<std::size_t>(n)].name);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

} // namespace stategraph::detail::engine
