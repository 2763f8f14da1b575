#include <stategraph/topology.hpp>

#include <stategraph/detail/dot_escape.hpp>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/filtered_graph.hpp>
#include <boost/graph/graphviz.hpp>
#include <boost/graph/reverse_graph.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>

namespace stategraph {

std::string detail::dot_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

const node_spec* topology::find(const std::string& n) const {
    for (const auto& node : nodes)
        if (node.name == n) return &node;
    return nullptr;
}

std::vector<std::string> topology::node_names() const {
    std::vector<std::string> out;
    for (const auto& n : nodes) out.push_back(n.name);
    return out;
}

namespace {

using detail::dot_escape;

enum class edge_kind { plain, join, route, command };

struct vertex_props {
    std::string name;
};
struct edge_props {
    edge_kind kind = edge_kind::plain;
    std::string label;
    int join = -1;
};
using bgraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, vertex_props, edge_props>;
using vertex = boost::graph_traits<bgraph>::vertex_descriptor;

/// The topology as a Boost graph: vertex 0 = START, 1 = END, then the nodes in order.
struct built {
    bgraph g;
    std::map<std::string, vertex> index;
};

built build(const topology& t, bool junctions = false) {
    built b;
    auto add_vertex = [&](const std::string& n) { b.index[n] = boost::add_vertex(vertex_props{n}, b.g); };
    add_vertex(START);
    add_vertex(END);
    for (const auto& n : t.nodes) add_vertex(n.name);
    auto connect = [&](const std::string& from, const std::string& to, edge_kind k, std::string label, int join) {
        auto f = b.index.find(from), g = b.index.find(to);
        if (f == b.index.end() || g == b.index.end()) return;
        boost::add_edge(f->second, g->second, edge_props{k, std::move(label), join}, b.g);
    };
    for (const auto& e : t.edges) connect(e.from, e.to, edge_kind::plain, "", -1);
    for (std::size_t j = 0; j < t.joins.size(); ++j) {
        if (junctions) {
            // Drawing: each join is a junction point; sources meet there, one edge leads on.
            std::string point = "join#" + std::to_string(j);
            add_vertex(point);
            for (const auto& s : t.joins[j].sources) connect(s, point, edge_kind::join, "", static_cast<int>(j));
            connect(point, t.joins[j].target, edge_kind::plain, "", static_cast<int>(j));
        } else {
            for (const auto& s : t.joins[j].sources) connect(s, t.joins[j].target, edge_kind::join, "", static_cast<int>(j));
        }
    }
    for (const auto& br : t.branches)
        for (const auto& [label, to] : br.routes) connect(br.from, to, edge_kind::route, label, -1);
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends) connect(n.name, to, edge_kind::command, "", -1);
    return b;
}

template <class G>
std::vector<bool> reachable_from(const G& g, vertex from, std::size_t n) {
    std::vector<boost::default_color_type> color(n, boost::white_color);
    auto cmap = boost::make_iterator_property_map(color.begin(), get(boost::vertex_index, g));
    boost::breadth_first_search(g, from, boost::color_map(cmap));
    std::vector<bool> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = color[i] != boost::white_color;
    return out;
}

struct unconditional_only {
    const bgraph* g = nullptr;
    template <class E>
    bool operator()(const E& e) const {
        auto k = (*g)[e].kind;
        return k == edge_kind::plain || k == edge_kind::join;
    }
};

std::string quoted_list(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "'" : ", '") + s + "'";
    return out;
}

/// The declared name (or END) nearest to an unknown `name`, or "".
std::string nearest_declared(const std::string& name, const topology& t) {
    auto names = t.node_names();
    names.push_back(END);
    return nearest_name(name, names);
}

std::string suggest(const std::string& name, const topology& t) {
    auto near = nearest_declared(name, t);
    return near.empty() ? "" : " (did you mean '" + near + "'?)";
}

/// An unknown name (a typo) stands for a node the author meant, so that it is reported once and
/// not again through its consequences (nodes that seem unreachable or stuck): each edge naming
/// one is wired, for the reachability checks, through a vertex that counts as reached from START
/// and as reaching END, and through the declared name nearest to it. Returns that vertex.
vertex wire_unknown_names(built& b, const topology& t) {
    vertex unknown = boost::add_vertex(vertex_props{"?"}, b.g);
    auto stand_ins = [&](const std::string& n) {
        std::vector<vertex> out;
        if (auto it = b.index.find(n); it != b.index.end()) {
            out.push_back(it->second);
            return out;
        }
        out.push_back(unknown);
        if (auto near = nearest_declared(n, t); !near.empty()) out.push_back(b.index.at(near));
        return out;
    };
    auto link = [&](const std::string& from, const std::string& to, edge_kind k) {
        if (b.index.count(from) && b.index.count(to)) return; // a real edge, already there
        for (vertex f : stand_ins(from))
            for (vertex v : stand_ins(to)) boost::add_edge(f, v, edge_props{k, "", -1}, b.g);
    };
    for (const auto& e : t.edges) link(e.from, e.to, edge_kind::plain);
    for (const auto& j : t.joins)
        for (const auto& s : j.sources) link(s, j.target, edge_kind::join);
    for (const auto& br : t.branches)
        for (const auto& r : br.routes) link(br.from, r.second, edge_kind::route);
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends) link(n.name, to, edge_kind::command);
    return unknown;
}

/// Why node `v` cannot reach END: it has no outgoing edge, its paths stop at nodes without one,
/// or it is caught in a cycle.
std::string why_stuck(const bgraph& g, vertex v, std::size_t nv) {
    if (boost::out_degree(v, g) == 0) return ": it has no outgoing edge (add one, e.g. to END)";
    auto ahead = reachable_from(g, v, nv);
    std::vector<std::string> stops;
    for (std::size_t i = 0; i < nv; ++i)
        if (ahead[i] && i != v && boost::out_degree(i, g) == 0) stops.push_back(g[i].name);
    if (stops.empty()) return " (a cycle with no exit)";
    return ": every path from it stops at " + quoted_list(stops) + ", which " + (stops.size() > 1 ? "have" : "has") +
           " no outgoing edge";
}

} // namespace

std::vector<graph_problem> validate(const topology& t) {
    std::vector<graph_problem> out = t.builder_problems;
    auto known = [&](const std::string& n) { return n == START || n == END || t.find(n) != nullptr; };
    auto check = [&](const std::string& n, const std::string& where) {
        if (!known(n))
            out.push_back({errc::unknown_node, where + " names unknown node '" + n + "'" + suggest(n, t), {n}});
    };
    for (const auto& e : t.edges) {
        check(e.from, "edge '" + e.from + "' -> '" + e.to + "'");
        check(e.to, "edge '" + e.from + "' -> '" + e.to + "'");
        if (e.to == START) out.push_back({errc::unknown_node, "an edge cannot lead into START (from '" + e.from + "')", {e.from}});
        if (e.from == END) out.push_back({errc::unknown_node, "an edge cannot leave END (to '" + e.to + "')", {e.to}});
    }
    for (const auto& j : t.joins) {
        for (const auto& s : j.sources) check(s, "join into '" + j.target + "'");
        check(j.target, "join from " + quoted_list(j.sources));
    }
    for (const auto& b : t.branches) {
        check(b.from, "conditional edge");
        if (b.routes.empty() && !b.sends)
            out.push_back({errc::missing_path_map,
                           "conditional edge from '" + b.from +
                               "' declares no path map: pass the map from route value to node, or the list of possible targets",
                           {b.from}});
        for (const auto& [label, to] : b.routes) check(to, "route '" + label + "' of the conditional edge from '" + b.from + "'");
        if (!b.unmapped.empty())
            out.push_back({errc::unmapped_route,
                           "conditional edge from '" + b.from + "': router value" + (b.unmapped.size() > 1 ? "s " : " ") +
                               quoted_list(b.unmapped) + (b.unmapped.size() > 1 ? " have" : " has") + " no target in the path map",
                           {b.from}});
    }
    for (const auto& n : t.nodes)
        for (const auto& e : n.ends) check(e, "Command target of node '" + n.name + "'");
    for (const auto& n : t.interrupt_before) check(n, "interrupt_before");
    for (const auto& n : t.interrupt_after) check(n, "interrupt_after");

    auto b = build(t);
    const vertex unknown = wire_unknown_names(b, t);
    const std::size_t nv = boost::num_vertices(b.g);
    bool has_entry = boost::out_degree(b.index[START], b.g) > 0;
    if (!has_entry) out.push_back({errc::no_entry_point, "nothing leaves START: add an edge from START to the first node", {}});

    auto either = [](std::vector<bool> a, const std::vector<bool>& b2) {
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = a[i] || b2[i];
        return a;
    };
    auto fwd = either(reachable_from(b.g, b.index[START], nv), reachable_from(b.g, unknown, nv));
    auto rev_g = boost::make_reverse_graph(b.g);
    auto back = either(reachable_from(rev_g, b.index[END], nv), reachable_from(rev_g, unknown, nv));
    for (const auto& n : t.nodes) {
        vertex v = b.index[n.name];
        if (has_entry && !fwd[v] && !n.send_only)
            out.push_back({errc::unreachable_node,
                           "node '" + n.name +
                               "' cannot be reached from START (a node reached only by a Command's goto, or by a "
                               "subgraph's to_parent, is named in the `ends` of the node that returns it: "
                               "add_node(\"from\", fn, {.ends = {\"" + n.name + "\"}}))",
                           {n.name}});
        // A Send-only node is reachable when some conditional edge may send to it.
        if (n.send_only && has_entry) {
            bool sent = false;
            for (const auto& br : t.branches)
                for (const auto& r : br.routes)
                    if (r.second == n.name && fwd[b.index[br.from]]) sent = true;
            if (!sent) out.push_back({errc::unreachable_node, "node '" + n.name + "' takes a Send payload but no reachable conditional edge sends to it", {n.name}});
        }
        if (!back[v])
            out.push_back({errc::no_path_to_end, "node '" + n.name + "' has no way to reach END" + why_stuck(b.g, v, nv), {n.name}});
    }

    // Joins: the sources must share an entry point (START or one route target) from which each
    // of them is reached through unconditional edges only; otherwise a conditional edge can skip one.
    unconditional_only pred{&b.g};
    boost::filtered_graph<bgraph, unconditional_only> plain_g(b.g, pred);
    // An entry is START, one route value (all its targets: a value may lead to several nodes at
    // once), one Send target, or one Command target.
    std::vector<std::vector<vertex>> entries{{b.index[START]}};
    for (const auto& br : t.branches) {
        std::map<std::string, std::vector<vertex>> by_value;
        for (const auto& [label, to] : br.routes)
            if (b.index.count(to)) {
                if (br.sends) entries.push_back({b.index[to]});
                else by_value[label].push_back(b.index[to]);
            }
        for (auto& [label, targets] : by_value) entries.push_back(std::move(targets));
    }
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends)
            if (b.index.count(to)) entries.push_back({b.index[to]});
    std::vector<std::vector<bool>> entry_reach;
    for (const auto& e : entries) {
        std::vector<bool> reach(nv, false);
        for (vertex v : e) reach = either(std::move(reach), reachable_from(plain_g, v, nv));
        entry_reach.push_back(std::move(reach));
    }
    for (const auto& j : t.joins) {
        bool all_known = std::all_of(j.sources.begin(), j.sources.end(), [&](const auto& s) { return b.index.count(s) > 0; });
        if (!all_known || j.sources.empty()) continue;
        bool common = false;
        for (const auto& reach : entry_reach) {
            bool all = true;
            for (const auto& s : j.sources) all = all && reach[b.index[s]];
            if (all) { common = true; break; }
        }
        if (!common) {
            std::vector<std::string> skippable;
            for (const auto& s : j.sources)
                if (!entry_reach[0][b.index[s]]) skippable.push_back(s);
            out.push_back({errc::join_never_fires,
                           "join into '" + j.target + "' waits for " + quoted_list(j.sources) + ", but " +
                               quoted_list(skippable.empty() ? j.sources : skippable) +
                               " can be skipped by a conditional edge, so the join may never fire; "
                               "use separate edges with a deferred node, or route every branch to the sources",
                           [&] { auto v = skippable; v.insert(v.begin(), j.target); return v; }()});
        }
    }
    return out;
}

namespace {


/// Adds vertices and edges for one topology, with ids prefixed by `prefix` (for subgraphs).
void draw_graph(std::ostream& os, const topology& t, const dot_options& opt, const std::string& prefix, int depth);

/// The overlay of a subgraph node: the entries "sub/x" of each list, as "x".
dot_options inside(const dot_options& opt, const std::string& sub) {
    auto strip = [&](const std::vector<std::string>& v) {
        std::vector<std::string> out;
        for (const auto& n : v)
            if (n.size() > sub.size() && n.compare(0, sub.size(), sub) == 0) out.push_back(n.substr(sub.size()));
        return out;
    };
    dot_options o;
    o.visited = strip(opt.visited);
    o.current = strip(opt.current);
    o.interrupted = strip(opt.interrupted);
    o.failed = strip(opt.failed);
    return o;
}

std::string vid(const std::string& prefix, const std::string& name) { return "\"" + dot_escape(prefix + name) + "\""; }

void draw_graph(std::ostream& os, const topology& t, const dot_options& opt, const std::string& prefix, int depth) {
    auto b = build(t, true);
    auto is_in = [](const std::vector<std::string>& v, const std::string& n) { return std::find(v.begin(), v.end(), n) != v.end(); };
    std::string indent(static_cast<std::size_t>(depth) * 2, ' ');

    // Stages become clusters: written before the vertices so that the vertices are placed in them.
    std::map<std::string, std::vector<std::string>> stages;
    for (const auto& n : t.nodes)
        if (!n.stage.empty() && !n.subgraph) stages[n.stage].push_back(n.name);
    int cluster = 0;
    auto graph_writer = [&](std::ostream& out) {
        if (depth == 0) {
            out << "rankdir=TB;\nlabel=\"" << dot_escape(t.name) << (opt.caption.empty() ? "" : "\\n" + dot_escape(opt.caption)) << "\";\nlabelloc=t;\n"
                << "node [shape=box, style=\"rounded,filled\", fillcolor=\"#f7f7f7\", fontname=\"Helvetica\"];\n"
                << "edge [fontname=\"Helvetica\", fontsize=10];\n";
        }
        for (const auto& [stage, members] : stages) {
            out << "subgraph \"cluster_" << dot_escape(prefix + stage) << "_" << cluster++ << "\" {\n  label=\"" << dot_escape(stage)
                << "\"; style=\"rounded,dashed\"; color=\"#888888\";\n";
            for (const auto& m : members) out << "  " << vid(prefix, m) << ";\n";
            out << "}\n";
        }
    };
    auto vertex_writer = [&](std::ostream& out, vertex v) {
        const std::string& name = b.g[v].name;
        if (name == START) {
            out << "[label=\"START\", shape=oval, style=filled, fillcolor=\"#d5f5d5\"]";
            return;
        }
        if (name == END) {
            out << "[label=\"END\", shape=oval, style=filled, fillcolor=\"#f5d5d5\", peripheries=2]";
            return;
        }
        if (name.rfind("join#", 0) == 0) {
            out << "[label=\"\", shape=point, width=0.15, xlabel=\"join\"]";
            return;
        }
        const node_spec* n = t.find(name);
        std::string label = dot_escape(name), style = "rounded,filled", fill = "#f7f7f7", extra;
        if (n && n->deferred) label += "\\n(deferred)", style = "rounded,filled,dashed";
        if (n && n->send_only) label += "\\n(Send target)";
        if (n && n->has_retry) label += "\\n(retry)";
        if (n && n->has_cache) label += "\\n(cached)";
        if (n && !n->error_handler.empty()) label += "\\n(on error: " + dot_escape(n->error_handler) + ")";
        if (t.interrupt_before.count(name)) extra += ", color=red, penwidth=2, xlabel=\"interrupt before\"";
        if (t.interrupt_after.count(name)) extra += ", color=red, penwidth=2, xlabel=\"interrupt after\"";
        if (is_in(opt.visited, name)) fill = "#cfe2ff";
        if (is_in(opt.current, name)) fill = "#ffd966", extra += ", penwidth=3";
        if (is_in(opt.interrupted, name)) fill = "#ffd966", extra += ", shape=octagon, penwidth=3", label += "\\n(waiting: interrupt)";
        if (is_in(opt.failed, name)) fill = "#ff9999", extra += ", color=\"#cf222e\", penwidth=3", label += "\\n(failed)";
        out << "[label=\"" << label << "\", style=\"" << style << "\", fillcolor=\"" << fill << "\"" << extra << "]";
    };
    auto edge_writer = [&](std::ostream& out, boost::graph_traits<bgraph>::edge_descriptor e) {
        const auto& p = b.g[e];
        switch (p.kind) {
        case edge_kind::plain: out << "[]"; break;
        case edge_kind::join: out << "[style=bold, arrowhead=none, color=\"#555555\"]"; break;
        case edge_kind::route: out << "[style=dashed, label=\"" << dot_escape(p.label) << "\"]"; break;
        case edge_kind::command: out << "[style=dotted, label=\"goto\"]"; break;
        }
    };
    std::ostringstream body;
    // Boost quotes an id and escapes its '"' but not its '\\': escaped here, so that an id is
    // written as vid() writes it (the clusters') and a name ending in '\\' stays valid DOT.
    auto names = boost::make_transform_value_property_map(
        [&](const std::string& n) {
            std::string id;
            for (char c : prefix + n) {
                if (c == '\\') id += '\\';
                id += c;
            }
            return id;
        },
        get(&vertex_props::name, b.g));
    boost::write_graphviz(body, b.g, vertex_writer, edge_writer, graph_writer, names);
    std::string text = body.str();
    // Keep only the body between the outer braces; we nest it ourselves (subgraph clusters).
    auto open = text.find('{'), close = text.rfind('}');
    std::string inner = text.substr(open + 1, close - open - 1);
    os << inner;
    // Subgraph nodes: drawn as clusters holding the subgraph, wired to its START and END.
    for (const auto& n : t.nodes) {
        if (!n.subgraph) continue;
        std::string sub_prefix = prefix + n.name + "/";
        os << "subgraph \"cluster_" << dot_escape(sub_prefix) << "\" {\nlabel=\"" << dot_escape(n.name) << " (subgraph)\"; style=rounded; color=\"#3366cc\";\n";
        draw_graph(os, *n.subgraph, inside(opt, n.name + "/"), sub_prefix, depth + 1);
        os << "}\n";
        os << vid(prefix, n.name) << "->" << vid(sub_prefix, START) << " [style=dotted, arrowhead=none];\n";
    }
}

} // namespace

void write_dot(std::ostream& os, const topology& t, const dot_options& options) {
    os << "digraph \"" << dot_escape(t.name) << "\" {\n";
    draw_graph(os, t, options, "", 0);
    os << "}\n";
}

void write_mermaid(std::ostream& os, const topology& t) {
    auto id = [](const std::string& n) {
        if (n == START) return std::string("__start__");
        if (n == END) return std::string("__end__");
        std::string out;
        for (char c : n) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
        return out;
    };
    os << "flowchart TD\n";
    os << "  __start__([START])\n  __end__([END])\n";
    std::map<std::string, std::vector<const node_spec*>> stages;
    for (const auto& n : t.nodes) stages[n.stage].push_back(&n);
    for (const auto& [stage, members] : stages) {
        if (!stage.empty()) os << "  subgraph " << id(stage) << "[\"" << stage << "\"]\n";
        for (const auto* n : members) {
            std::string label = n->name + (n->deferred ? " (deferred)" : "") + (n->subgraph ? " (subgraph)" : "");
            os << (stage.empty() ? "  " : "    ") << id(n->name) << "[\"" << label << "\"]\n";
        }
        if (!stage.empty()) os << "  end\n";
    }
    for (const auto& e : t.edges) os << "  " << id(e.from) << " --> " << id(e.to) << "\n";
    for (std::size_t j = 0; j < t.joins.size(); ++j) {
        os << "  join" << j << "(( ))\n";
        for (const auto& s : t.joins[j].sources) os << "  " << id(s) << " === join" << j << "\n";
        os << "  join" << j << " --> " << id(t.joins[j].target) << "\n";
    }
    for (const auto& b : t.branches)
        for (const auto& [label, to] : b.routes) os << "  " << id(b.from) << " -. " << label << " .-> " << id(to) << "\n";
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends) os << "  " << id(n.name) << " -. goto .-> " << id(to) << "\n";
    for (const auto& n : t.interrupt_before) os << "  style " << id(n) << " stroke:#f00,stroke-width:3px\n";
    for (const auto& n : t.interrupt_after) os << "  style " << id(n) << " stroke:#f00,stroke-width:3px\n";
}

std::vector<std::string> shape_lines(const topology& t) {
    std::vector<std::string> out;
    for (const auto& n : t.nodes) out.push_back("node " + n.name + (n.deferred ? " deferred" : "") + (n.send_only ? " send" : ""));
    for (const auto& e : t.edges) out.push_back("edge " + e.from + " -> " + e.to);
    for (const auto& j : t.joins) {
        std::string s = "join";
        for (const auto& src : j.sources) s += " " + src;
        out.push_back(s + " -> " + j.target);
    }
    for (const auto& b : t.branches)
        for (const auto& [label, to] : b.routes) out.push_back("route " + b.from + " [" + label + "] -> " + to);
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends) out.push_back("goto " + n.name + " -> " + to);
    for (const auto& [name, type] : t.fields) out.push_back("field " + name + ": " + type);
    std::sort(out.begin(), out.end());
    return out;
}

std::string shape_signature(const std::vector<std::string>& lines) {
    std::uint64_t h = 1469598103934665603ull;
    for (const auto& l : lines) {
        for (unsigned char c : l) h = (h ^ c) * 1099511628211ull;
        h = (h ^ '\n') * 1099511628211ull;
    }
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

} // namespace stategraph
