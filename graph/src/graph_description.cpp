#include <stategraph/graph_description.hpp>

#include <stategraph/detail/dot_escape.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

namespace stategraph {

namespace json = boost::json;
using detail::dot_escape;

const std::error_category& description_category() noexcept {
    struct category : std::error_category {
        const char* name() const noexcept override { return "stategraph.description"; }
        std::string message(int c) const override {
            switch (static_cast<description_errc>(c)) {
            case description_errc::not_json: return "the graph description is not JSON";
            case description_errc::missing_field: return "a required field of the graph description is missing";
            case description_errc::wrong_type: return "a field of the graph description has the wrong type";
            case description_errc::unsupported_version: return "not a graph description this build can read";
            case description_errc::duplicate_node: return "two nodes have the same name";
            }
            return "unknown graph description error";
        }
    };
    static const category c;
    return c;
}

namespace {

constexpr int format_version = 1;

std::string node_kind(const node_spec& n) {
    if (n.subgraph) return "subgraph";
    if (n.send_only) return "send_target";
    return "node";
}

json::array sorted_strings(std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    json::array a;
    for (auto& s : v) a.emplace_back(json::string(s));
    return a;
}

json::object to_json(const topology& t) {
    json::object o;
    o["format"] = "stategraph-graph";
    o["version"] = format_version;
    o["name"] = t.name;
    std::vector<const node_spec*> nodes;
    for (const auto& n : t.nodes) nodes.push_back(&n);
    std::sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return a->name < b->name; });
    json::array na;
    for (const auto* n : nodes) {
        json::object j;
        j["name"] = n->name;
        j["stage"] = n->stage;
        j["kind"] = node_kind(*n);
        j["defer"] = n->deferred;
        j["retry"] = n->retry.empty() ? json::value(nullptr) : json::value(json::string(n->retry));
        if (n->retry.empty() && n->has_retry) j["retry"] = "set";
        j["timeout_ms"] = n->timeout_ms;
        j["cache"] = n->has_cache;
        j["on_error"] = n->error_handler;
        j["interrupt_before"] = t.interrupt_before.count(n->name) > 0;
        j["interrupt_after"] = t.interrupt_after.count(n->name) > 0;
        j["ends"] = sorted_strings(n->ends);
        if (n->subgraph) j["subgraph"] = to_json(*n->subgraph);
        na.push_back(std::move(j));
    }
    o["nodes"] = std::move(na);
    std::vector<std::pair<std::string, std::string>> edges;
    for (const auto& e : t.edges) edges.emplace_back(e.from, e.to);
    std::sort(edges.begin(), edges.end());
    json::array ea;
    for (const auto& [f, to] : edges) ea.push_back(json::object{{"from", f}, {"to", to}});
    o["edges"] = std::move(ea);
    std::vector<std::pair<std::string, std::vector<std::string>>> joins;
    for (const auto& j : t.joins) {
        auto s = j.sources;
        std::sort(s.begin(), s.end());
        joins.emplace_back(j.target, std::move(s));
    }
    std::sort(joins.begin(), joins.end());
    json::array ja;
    for (const auto& [target, sources] : joins) ja.push_back(json::object{{"sources", sorted_strings(sources)}, {"target", target}});
    o["joins"] = std::move(ja);
    std::vector<const branch_spec*> branches;
    for (const auto& b : t.branches) branches.push_back(&b);
    std::stable_sort(branches.begin(), branches.end(), [](auto* a, auto* b) { return a->from < b->from; });
    json::array ba;
    for (const auto* b : branches) {
        auto routes = b->routes;
        std::sort(routes.begin(), routes.end());
        json::array ra;
        for (const auto& [key, target] : routes) ra.push_back(json::object{{"key", key}, {"target", target}});
        ba.push_back(json::object{{"from", b->from}, {"routes", std::move(ra)}, {"unmapped", sorted_strings(b->unmapped)}, {"sends", b->sends}});
    }
    o["routes"] = std::move(ba);
    json::array fa;
    for (const auto& [name, type] : t.fields) fa.push_back(json::object{{"name", name}, {"type", type}});
    o["fields"] = std::move(fa);
    return o;
}

/// Pretty, stable printing: keys in the order written above, arrays of scalars on one line.
void pretty(std::ostream& os, const json::value& v, int depth) {
    std::string pad(static_cast<std::size_t>(depth) * 2, ' '), inner(static_cast<std::size_t>(depth + 1) * 2, ' ');
    if (v.is_object()) {
        const auto& o = v.get_object();
        if (o.empty()) { os << "{}"; return; }
        bool flat = depth >= 2 && std::none_of(o.begin(), o.end(), [](const auto& kv) { return kv.value().is_structured(); });
        os << (flat ? "{" : "{\n");
        bool first = true;
        for (const auto& kv : o) {
            if (!first) os << (flat ? ", " : ",\n");
            first = false;
            if (!flat) os << inner;
            os << json::serialize(json::string(kv.key())) << ": ";
            pretty(os, kv.value(), depth + 1);
        }
        if (flat) os << "}";
        else os << "\n" << pad << "}";
    } else if (v.is_array()) {
        const auto& a = v.get_array();
        if (a.empty()) { os << "[]"; return; }
        if (std::none_of(a.begin(), a.end(), [](const auto& x) { return x.is_structured(); })) {
            os << json::serialize(v);
            return;
        }
        os << "[\n";
        for (std::size_t i = 0; i < a.size(); ++i) {
            os << inner;
            pretty(os, a[i], depth + 1);
            os << (i + 1 < a.size() ? ",\n" : "\n");
        }
        os << pad << "]";
    } else {
        os << json::serialize(v);
    }
}

// -- reading ---------------------------------------------------------------------------------

[[noreturn]] void fail(description_errc c, const std::string& field, const std::string& what) {
    throw description_error(c, field, "graph description: field '" + field + "' " + what);
}

const json::value& member(const json::object& o, const std::string& path, const char* key) {
    auto* v = o.if_contains(key);
    if (!v) fail(description_errc::missing_field, path.empty() ? key : path + "." + key, "is missing");
    return *v;
}
std::string get_string(const json::object& o, const std::string& path, const char* key) {
    const auto& v = member(o, path, key);
    if (!v.is_string()) fail(description_errc::wrong_type, path.empty() ? key : path + "." + key, "must be a string");
    return std::string(v.get_string());
}
bool get_bool(const json::object& o, const std::string& path, const char* key) {
    const auto& v = member(o, path, key);
    if (!v.is_bool()) fail(description_errc::wrong_type, path.empty() ? key : path + "." + key, "must be true or false");
    return v.get_bool();
}
const json::object& as_object(const json::value& v, const std::string& path) {
    if (!v.is_object()) fail(description_errc::wrong_type, path, "must be an object");
    return v.get_object();
}
const json::array& get_array(const json::object& o, const std::string& path, const char* key) {
    const auto& v = member(o, path, key);
    if (!v.is_array()) fail(description_errc::wrong_type, path.empty() ? key : path + "." + key, "must be an array");
    return v.get_array();
}
std::vector<std::string> get_strings(const json::object& o, const std::string& path, const char* key) {
    std::vector<std::string> out;
    const auto& a = get_array(o, path, key);
    std::string base = (path.empty() ? key : path + "." + key);
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (!a[i].is_string()) fail(description_errc::wrong_type, base + "[" + std::to_string(i) + "]", "must be a string");
        out.emplace_back(a[i].get_string());
    }
    return out;
}
std::string at(const std::string& path, const char* key, std::size_t i) {
    return (path.empty() ? std::string(key) : path + "." + key) + "[" + std::to_string(i) + "]";
}

/// Calls `f(object, its path)` for each element of the array `key` (each must be an object).
template <class F>
void each(const json::object& o, const std::string& path, const char* key, F f) {
    const auto& a = get_array(o, path, key);
    for (std::size_t i = 0; i < a.size(); ++i) {
        std::string p = at(path, key, i);
        f(as_object(a[i], p), p);
    }
}

topology from_json(const json::object& o, const std::string& path) {
    auto format = get_string(o, path, "format");
    const auto& version = member(o, path, "version");
    if (format != "stategraph-graph" || !version.is_int64() || version.get_int64() != format_version)
        fail(description_errc::unsupported_version, path.empty() ? "version" : path + ".version",
             "is not 'stategraph-graph' version " + std::to_string(format_version));
    topology t;
    t.name = get_string(o, path, "name");
    each(o, path, "nodes", [&](const json::object& j, const std::string& p) {
        node_spec n;
        n.name = get_string(j, p, "name");
        if (t.find(n.name)) fail(description_errc::duplicate_node, p + ".name", "names node '" + n.name + "' a second time");
        n.stage = get_string(j, p, "stage");
        auto kind = get_string(j, p, "kind");
        if (kind != "node" && kind != "send_target" && kind != "subgraph")
            fail(description_errc::wrong_type, p + ".kind", "must be 'node', 'send_target' or 'subgraph' (node '" + n.name + "')");
        n.send_only = kind == "send_target";
        n.deferred = get_bool(j, p, "defer");
        const auto& retry = member(j, p, "retry");
        if (!retry.is_null() && !retry.is_string()) fail(description_errc::wrong_type, p + ".retry", "must be a string or null (node '" + n.name + "')");
        if (retry.is_string()) n.retry = std::string(retry.get_string()), n.has_retry = true;
        const auto& timeout = member(j, p, "timeout_ms");
        if (!timeout.is_int64()) fail(description_errc::wrong_type, p + ".timeout_ms", "must be an integer (node '" + n.name + "')");
        n.timeout_ms = timeout.get_int64();
        n.has_cache = get_bool(j, p, "cache");
        n.error_handler = get_string(j, p, "on_error");
        if (get_bool(j, p, "interrupt_before")) t.interrupt_before.insert(n.name);
        if (get_bool(j, p, "interrupt_after")) t.interrupt_after.insert(n.name);
        n.ends = get_strings(j, p, "ends");
        if (kind == "subgraph")
            n.subgraph = std::make_shared<const topology>(from_json(as_object(member(j, p, "subgraph"), p + ".subgraph"), p + ".subgraph"));
        t.nodes.push_back(std::move(n));
    });
    each(o, path, "edges", [&](const json::object& j, const std::string& p) {
        t.edges.push_back({get_string(j, p, "from"), get_string(j, p, "to")});
    });
    each(o, path, "joins", [&](const json::object& j, const std::string& p) {
        t.joins.push_back({get_strings(j, p, "sources"), get_string(j, p, "target")});
    });
    each(o, path, "routes", [&](const json::object& j, const std::string& p) {
        branch_spec b;
        b.from = get_string(j, p, "from");
        each(j, p, "routes", [&](const json::object& r, const std::string& rp) {
            b.routes.emplace_back(get_string(r, rp, "key"), get_string(r, rp, "target"));
        });
        b.unmapped = get_strings(j, p, "unmapped");
        b.sends = get_bool(j, p, "sends");
        t.branches.push_back(std::move(b));
    });
    each(o, path, "fields", [&](const json::object& j, const std::string& p) {
        t.fields.emplace_back(get_string(j, p, "name"), get_string(j, p, "type"));
    });
    return t;
}

// -- diff ------------------------------------------------------------------------------------

/// An edge as drawn: kind ("edge", "route", "join", "goto"), ends, and its label.
struct drawn_edge {
    std::string kind, from, to, label;
    auto operator<=>(const drawn_edge&) const = default;
};

std::set<drawn_edge> drawn_edges(const topology& t) {
    std::set<drawn_edge> out;
    for (const auto& e : t.edges) out.insert({"edge", e.from, e.to, ""});
    for (const auto& j : t.joins) {
        auto s = j.sources;
        std::sort(s.begin(), s.end());
        std::string label;
        for (const auto& x : s) label += (label.empty() ? "" : "+") + x;
        for (const auto& x : s) out.insert({"join", x, j.target, "join " + label});
    }
    for (const auto& b : t.branches)
        for (const auto& [key, to] : b.routes) out.insert({"route", b.from, to, key});
    for (const auto& n : t.nodes)
        for (const auto& to : n.ends) out.insert({"goto", n.name, to, "goto"});
    return out;
}

std::string q(const std::string& s) { return "'" + s + "'"; }

std::string edge_subject(const drawn_edge& e) {
    if (e.kind == "route") return q(e.from) + " [" + e.label + "] -> " + q(e.to);
    if (e.kind == "join") return q(e.from) + " -> " + q(e.to) + " (" + e.label + ")";
    return q(e.from) + " -> " + q(e.to);
}

/// The modifiers of a node that a diff compares, by name, as text.
std::vector<std::pair<std::string, std::string>> modifiers(const topology& t, const node_spec& n) {
    std::string sub;
    if (n.subgraph) {
        std::ostringstream os;
        write_json(os, *n.subgraph);
        sub = os.str();
    }
    return {{"stage", n.stage.empty() ? "(none)" : n.stage},
            {"kind", node_kind(n)},
            {"defer", n.deferred ? "yes" : "no"},
            {"retry", n.retry.empty() ? (n.has_retry ? "set" : "none") : n.retry},
            {"timeout", std::to_string(n.timeout_ms) + "ms"},
            {"cache", n.has_cache ? "yes" : "no"},
            {"on_error", n.error_handler.empty() ? "none" : n.error_handler},
            {"interrupt_before", t.interrupt_before.count(n.name) ? "yes" : "no"},
            {"interrupt_after", t.interrupt_after.count(n.name) ? "yes" : "no"},
            {"subgraph", sub}};
}

std::map<std::string, std::string> node_changes(const topology& a, const node_spec& na, const topology& b, const node_spec& nb) {
    std::map<std::string, std::string> out;
    auto ma = modifiers(a, na), mb = modifiers(b, nb);
    for (std::size_t i = 0; i < ma.size(); ++i)
        if (ma[i].second != mb[i].second)
            out[ma[i].first] = ma[i].first == "subgraph" ? "subgraph changed" : ma[i].first + ": " + ma[i].second + " -> " + mb[i].second;
    return out;
}


} // namespace

void write_json(std::ostream& os, const topology& t) {
    pretty(os, to_json(t), 0);
    os << "\n";
}

topology read_json(std::string_view text) {
    boost::system::error_code ec;
    auto v = json::parse(json::string_view(text.data(), text.size()), ec);
    if (ec) throw description_error(description_errc::not_json, "", "graph description: not JSON (" + ec.message() + ")");
    return from_json(as_object(v, "(top level)"), "");
}

graph_diff diff_graphs(const topology& a, const topology& b) {
    graph_diff d;
    d.old_name = a.name;
    d.new_name = b.name;
    using k = graph_change::kind_t;
    std::map<std::string, const node_spec*> na, nb;
    for (const auto& n : a.nodes) na[n.name] = &n;
    for (const auto& n : b.nodes) nb[n.name] = &n;
    for (const auto& [name, n] : nb)
        if (!na.count(name)) d.changes.push_back({k::added, "node", q(name), n->stage.empty() ? "" : "stage " + n->stage});
    for (const auto& [name, n] : na)
        if (!nb.count(name)) d.changes.push_back({k::removed, "node", q(name), n->stage.empty() ? "" : "stage " + n->stage});
    for (const auto& [name, n] : nb) {
        auto it = na.find(name);
        if (it == na.end()) continue;
        for (const auto& [what, text] : node_changes(a, *it->second, b, *n)) d.changes.push_back({k::changed, "node", q(name), text});
    }
    // Routes whose key now leads elsewhere: one "changed" line (the edges still show as -/+).
    // A key may lead to several targets (every target of a Send branch has the key "Send"; two
    // branches of a node may share a key): only a key with one target on each side is a
    // retarget; other differences are the added and removed edges below.
    std::map<std::pair<std::string, std::string>, std::set<std::string>> ra, rb;
    for (const auto& br : a.branches)
        for (const auto& [key, to] : br.routes) ra[{br.from, key}].insert(to);
    for (const auto& br : b.branches)
        for (const auto& [key, to] : br.routes) rb[{br.from, key}].insert(to);
    std::set<drawn_edge> retargeted;
    for (const auto& [fk, targets] : rb) {
        auto it = ra.find(fk);
        if (it == ra.end() || it->second.size() != 1 || targets.size() != 1 || it->second == targets) continue;
        const auto& was = *it->second.begin();
        const auto& now = *targets.begin();
        d.changes.push_back({k::changed, "route", q(fk.first) + " [" + fk.second + "]", "target: " + was + " -> " + now});
        retargeted.insert({"route", fk.first, was, fk.second});
        retargeted.insert({"route", fk.first, now, fk.second});
    }
    auto ea = drawn_edges(a), eb = drawn_edges(b);
    for (const auto& e : eb)
        if (!ea.count(e) && !retargeted.count(e)) d.changes.push_back({k::added, e.kind, edge_subject(e), ""});
    for (const auto& e : ea)
        if (!eb.count(e) && !retargeted.count(e)) d.changes.push_back({k::removed, e.kind, edge_subject(e), ""});
    std::map<std::string, std::string> fa(a.fields.begin(), a.fields.end()), fb(b.fields.begin(), b.fields.end());
    for (const auto& [name, type] : fb) {
        auto it = fa.find(name);
        if (it == fa.end()) d.changes.push_back({k::added, "field", q(name), type});
        else if (it->second != type) d.changes.push_back({k::changed, "field", q(name), it->second + " -> " + type});
    }
    for (const auto& [name, type] : fa)
        if (!fb.count(name)) d.changes.push_back({k::removed, "field", q(name), type});
    return d;
}

std::string diff_summary(const graph_diff& d) {
    std::size_t added = 0, removed = 0, changed = 0;
    for (const auto& c : d.changes)
        (c.kind == graph_change::kind_t::added ? added : c.kind == graph_change::kind_t::removed ? removed : changed)++;
    std::string out = "graph '" + d.new_name + "'" + (d.old_name != d.new_name ? " (was '" + d.old_name + "')" : "") + ": ";
    if (d.empty()) return out + "no changes\n";
    out += std::to_string(added) + " added, " + std::to_string(removed) + " removed, " + std::to_string(changed) + " changed\n";
    for (const auto& c : d.changes) {
        char sign = c.kind == graph_change::kind_t::added ? '+' : c.kind == graph_change::kind_t::removed ? '-' : '~';
        out += std::string(1, sign) + " " + c.what + " " + c.subject + (c.detail.empty() ? "" : ": " + c.detail) + "\n";
    }
    return out;
}

void write_diff_dot(std::ostream& os, const topology& a, const topology& b) {
    const char* green = "#1a7f37";
    const char* red = "#cf222e";
    const char* amber = "#bf8700";
    auto d = diff_graphs(a, b);
    std::map<std::string, const node_spec*> na, nb;
    for (const auto& n : a.nodes) na[n.name] = &n;
    for (const auto& n : b.nodes) nb[n.name] = &n;
    auto id = [](const std::string& n) { return "\"" + dot_escape(n) + "\""; };
    std::size_t added = 0, removed = 0, changed = 0;
    for (const auto& c : d.changes)
        (c.kind == graph_change::kind_t::added ? added : c.kind == graph_change::kind_t::removed ? removed : changed)++;
    os << "digraph \"" << dot_escape(b.name) << " (diff)\" {\n"
       << "rankdir=TB;\nlabelloc=t;\nlabel=\"" << dot_escape(b.name) << ": " << added << " added, " << removed << " removed, " << changed
       << " changed\";\n"
       << "node [shape=box, style=\"rounded,filled\", fillcolor=\"#f7f7f7\", fontname=\"Helvetica\"];\n"
       << "edge [fontname=\"Helvetica\", fontsize=10, color=\"#555555\"];\n"
       << "\"" << dot_escape(START) << "\" [label=\"START\", shape=oval, fillcolor=\"#d5f5d5\"];\n"
       << "\"" << dot_escape(END) << "\" [label=\"END\", shape=oval, fillcolor=\"#f5d5d5\", peripheries=2];\n";
    // Every node of the new graph, then the removed ones, grouped by stage.
    std::map<std::string, std::vector<std::string>> stages;
    for (const auto& [name, n] : nb) stages[n->stage].push_back(name);
    for (const auto& [name, n] : na)
        if (!nb.count(name)) stages[n->stage].push_back(name);
    int cluster = 0;
    for (const auto& [stage, members] : stages) {
        if (!stage.empty())
            os << "subgraph \"cluster_" << cluster++ << "\" {\nlabel=\"" << dot_escape(stage) << "\"; style=\"rounded,dashed\"; color=\"#888888\";\n";
        for (const auto& name : members) {
            auto ib = nb.find(name);
            bool is_new = ib != nb.end(), was = na.count(name) > 0;
            const node_spec& n = is_new ? *ib->second : *na[name];
            const topology& t = is_new ? b : a;
            std::string label = dot_escape(name), attrs;
            if (n.deferred) label += "\\n(deferred)";
            if (n.subgraph) label += "\\n(subgraph)";
            if (!n.retry.empty() || n.has_retry) label += "\\n(retry)";
            if (n.has_cache) label += "\\n(cached)";
            if (t.interrupt_before.count(name)) label += "\\n[interrupt before]";
            if (t.interrupt_after.count(name)) label += "\\n[interrupt after]";
            if (!was) {
                label = "+ " + label;
                attrs = std::string(", color=\"") + green + "\", fontcolor=\"" + green + "\", fillcolor=\"#dafbe1\", penwidth=2";
            } else if (!is_new) {
                label = "- " + label;
                attrs = std::string(", color=\"") + red + "\", fontcolor=\"" + red + "\", fillcolor=\"#ffebe9\", style=\"rounded,filled,dashed\", penwidth=2";
            } else {
                auto changes = node_changes(a, *na[name], b, n);
                if (!changes.empty()) {
                    for (const auto& [what, text] : changes) label += "\\n~ " + dot_escape(text);
                    attrs = std::string(", color=\"") + amber + "\", fillcolor=\"#fff8c5\", penwidth=3";
                }
            }
            os << id(name) << " [label=\"" << label << "\"" << attrs << "];\n";
        }
        if (!stage.empty()) os << "}\n";
    }
    auto ea = drawn_edges(a), eb = drawn_edges(b);
    auto draw = [&](const drawn_edge& e, const std::string& state) {
        std::string style = e.kind == "route" ? "dashed" : e.kind == "goto" ? "dotted" : e.kind == "join" ? "bold" : "solid";
        std::string label = e.kind == "edge" ? "" : e.label, color = "#555555";
        if (state == "added") color = green, label = "+ " + label;
        if (state == "removed") color = red, style = "dashed", label = "- " + label;
        os << id(e.from) << " -> " << id(e.to) << " [style=" << style << ", color=\"" << color << "\"";
        if (state != "same") os << ", fontcolor=\"" << color << "\", penwidth=2";
        if (!label.empty() && label != "+ " && label != "- ") os << ", label=\"" << dot_escape(label) << "\"";
        os << "];\n";
    };
    for (const auto& e : eb) draw(e, ea.count(e) ? "same" : "added");
    for (const auto& e : ea)
        if (!eb.count(e)) draw(e, "removed");
    os << "subgraph \"cluster_legend\" {\nlabel=\"legend\"; style=rounded; color=\"#cccccc\"; fontsize=10;\n"
       << "\"legend: added\" [label=\"+ added\", color=\"" << green << "\", fontcolor=\"" << green << "\", fillcolor=\"#dafbe1\"];\n"
       << "\"legend: removed\" [label=\"- removed\", color=\"" << red << "\", fontcolor=\"" << red
       << "\", fillcolor=\"#ffebe9\", style=\"rounded,filled,dashed\"];\n"
       << "\"legend: changed\" [label=\"~ changed\", color=\"" << amber << "\", fillcolor=\"#fff8c5\", penwidth=3];\n"
       << "}\n}\n";
}

} // namespace stategraph
