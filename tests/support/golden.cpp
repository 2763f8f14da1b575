#include "golden.hpp"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>
#include <stdexcept>

#ifndef STATEGRAPH_CONFORMANCE_DIR
#error "STATEGRAPH_CONFORMANCE_DIR must name the shared conformance folder (set by tests/CMakeLists.txt)"
#endif

namespace stategraph::conformance {

json::object counters_json(const counter_map& c) {
    json::object o;
    for (const auto& [k, v] : c) o[k] = v;
    return o;
}

// -- the golden folder -------------------------------------------------------------------------

namespace {
std::mutex dir_mutex;
std::string chosen_dir; // set_golden_dir()
} // namespace

void set_golden_dir(std::string dir) {
    std::lock_guard l(dir_mutex);
    chosen_dir = std::move(dir);
}

std::string golden_dir() {
    {
        std::lock_guard l(dir_mutex);
        if (!chosen_dir.empty()) return chosen_dir;
    }
    const std::string_view flag = "--golden-dir=";
    const auto& master = boost::unit_test::framework::master_test_suite();
    for (int i = 1; i < master.argc; ++i) {
        const std::string_view arg = master.argv[i];
        if (arg.substr(0, flag.size()) == flag) return std::string(arg.substr(flag.size()));
    }
    if (const char* env = std::getenv("STATEGRAPH_GOLDEN_DIR"); env && *env) return env;
    return std::string(STATEGRAPH_CONFORMANCE_DIR) + "/golden";
}

std::string golden_path(std::string_view name) { return golden_dir() + "/" + std::string(name) + ".json"; }

json::value parse(std::string_view text) { return json::parse(text); }

golden_case::golden_case(std::string name, std::string dir) : name_(std::move(name)) {
    const std::string path = dir.empty() ? golden_path(name_) : dir + "/" + name_ + ".json";
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("conformance: cannot open golden file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto v = json::parse(ss.str());
    if (!v.is_object() || !v.as_object().contains("runs"))
        throw std::runtime_error("conformance: " + path + " has no \"runs\" array");
    doc_ = std::move(v.as_object());
    if (auto* c = doc_.if_contains("case"); c && c->is_string() && c->as_string() != name_)
        throw std::runtime_error("conformance: " + path + " is case '" + std::string(c->as_string()) + "'");
}

json::object golden_case::run(std::size_t i) const {
    const auto& runs = doc_.at("runs").as_array();
    if (i >= runs.size())
        throw std::runtime_error("conformance: " + name_ + " has " + std::to_string(runs.size()) + " runs, not " +
                                 std::to_string(i + 1));
    return runs[i].as_object();
}

std::string golden_case::label(std::size_t i) const {
    std::string s = name_ + " run " + std::to_string(i);
    const auto& r = doc_.at("runs").as_array().at(i).as_object();
    std::string extra;
    if (auto* g = r.if_contains("graph"); g && g->is_string()) extra += "graph '" + std::string(g->as_string()) + "'";
    if (auto* l = r.if_contains("label"); l && l->is_string())
        extra += (extra.empty() ? "" : ": ") + std::string(l->as_string());
    if (!extra.empty()) s += " (" + extra + ")";
    return s;
}

// -- paths ------------------------------------------------------------------------------------

static std::vector<std::string> split_path(std::string_view dotted) {
    std::vector<std::string> parts;
    std::string cur;
    for (char c : dotted) {
        if (c == '.') {
            parts.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    parts.push_back(cur);
    return parts;
}

static bool is_index(const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

void set_path(json::object& o, std::string_view dotted, json::value v) {
    auto parts = split_path(dotted);
    json::value* cur = nullptr;
    json::object* obj = &o;
    for (std::size_t k = 0; k < parts.size(); ++k) {
        const bool last = k + 1 == parts.size();
        if (cur && cur->is_array()) {
            if (!is_index(parts[k])) throw std::runtime_error("set_path: '" + parts[k] + "' indexes an array");
            auto& a = cur->as_array();
            std::size_t i = std::stoul(parts[k]);
            if (i >= a.size()) throw std::runtime_error("set_path: index " + parts[k] + " out of range");
            if (last) {
                a[i] = std::move(v);
                return;
            }
            cur = &a[i];
        } else {
            if (cur) {
                if (!cur->is_object()) *cur = json::object{};
                obj = &cur->as_object();
            }
            if (last) {
                (*obj)[parts[k]] = std::move(v);
                return;
            }
            cur = &(*obj)[parts[k]];
        }
    }
}

const json::value* find_path(const json::object& o, std::string_view dotted) {
    auto parts = split_path(dotted);
    const json::value* cur = nullptr;
    for (const auto& p : parts) {
        if (!cur) {
            cur = o.if_contains(p);
        } else if (cur->is_object()) {
            cur = cur->as_object().if_contains(p);
        } else if (cur->is_array() && is_index(p)) {
            std::size_t i = std::stoul(p);
            cur = i < cur->as_array().size() ? &cur->as_array()[i] : nullptr;
        } else {
            cur = nullptr;
        }
        if (!cur) return nullptr;
    }
    return cur;
}

// -- errors -----------------------------------------------------------------------------------

json::object error_json(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const node_error& ne) {
        std::string msg = ne.what();
        try {
            ne.rethrow_nested();
        } catch (const std::exception& inner) {
            msg = inner.what();
        } catch (...) {
        }
        return json::object{{"error", "node_failed"}, {"message", msg}};
    } catch (const graph_error& ge) {
        BOOST_TEST_MESSAGE("conformance: our error [" << to_string(ge.kind()) << "] " << ge.what());
        return json::object{{"error", to_string(ge.kind())}};
    } catch (const std::exception& ex) {
        return json::object{{"error", "exception"}, {"message", ex.what()}};
    } catch (...) {
        return json::object{{"error", "exception"}, {"message", "non-standard exception"}};
    }
}

std::string langgraph_error_kind(std::string_view cls) {
    if (cls == "InvalidUpdateError") return "invalid_concurrent_update";
    if (cls == "GraphRecursionError") return "recursion_limit";
    return "";
}

// -- recorder ---------------------------------------------------------------------------------

recorder::recorder(std::int64_t start_step, bool subgraphs) : root_step_(start_step), subgraphs_(subgraphs) {}

void recorder::on_event(const stream_event& e) {
    const bool root = e.ns.empty();
    if (e.mode == stream_mode::values) {
        if (!root) return;
        root_step_ = e.step;
        values_.push_back(json::object{{"step", e.step}, {"value", e.data}});
        return;
    }
    if (e.mode != stream_mode::updates) return;
    if (!root && !subgraphs_) return;
    std::int64_t step = root ? e.step : root_step_ + 1;
    if (root) root_step_ = e.step - 1;
    json::object ev;
    ev[e.interrupt ? std::string("__interrupt__") : e.node] = e.data;
    if (e.cached) ev["__metadata__"] = json::object{{"cached", true}};
    json::value item;
    if (subgraphs_) {
        json::array ns;
        for (const auto& s : e.ns) ns.push_back(json::string(s));
        json::object w;
        w["ns"] = std::move(ns);
        w["update"] = std::move(ev);
        item = std::move(w);
    } else {
        item = std::move(ev);
    }
    if (updates_.empty() || updates_.back().as_object().at("step").to_number<std::int64_t>() != step)
        updates_.push_back(json::object{{"step", step}, {"events", json::array{}}});
    updates_.back().as_object()["events"].as_array().push_back(std::move(item));
}

// -- ids --------------------------------------------------------------------------------------

std::string id_mapper::placeholder(const std::string& kind, const std::string& id) {
    auto& m = maps_[kind];
    auto it = m.find(id);
    if (it != m.end()) return it->second;
    std::string p = "<" + kind + ":" + std::to_string(m.size() + 1) + ">";
    m.emplace(id, p);
    return p;
}

void id_mapper::normalize(json::value& v) { walk(v, ""); }
void id_mapper::normalize(json::object& o) {
    for (auto& [k, v] : o) walk(v, k);
}

void id_mapper::walk(json::value& v, std::string_view key) {
    if (key == "ns" && v.is_array()) {
        for (auto& s : v.as_array()) {
            if (!s.is_string()) continue;
            std::string seg(s.as_string());
            if (auto p = seg.find(':'); p != std::string::npos && p + 1 < seg.size() && seg[p + 1] != '<')
                s = json::string(seg.substr(0, p + 1) + placeholder("task", seg.substr(p + 1)));
        }
        return;
    }
    if (key == "checkpoint_id" && v.is_string()) {
        v = json::string(placeholder("checkpoint", std::string(v.as_string())));
        return;
    }
    if (key == "__interrupt__" && v.is_array()) {
        for (auto& i : v.as_array())
            if (auto* o = i.if_object())
                if (auto* id = o->if_contains("id"); id && id->is_string())
                    *id = json::string(placeholder("interrupt", std::string(id->as_string())));
    }
    if (v.is_object()) {
        for (auto& [k, c] : v.as_object()) walk(c, k);
    } else if (v.is_array()) {
        for (auto& c : v.as_array()) walk(c, key == "__interrupt__" ? std::string_view("") : key);
    }
}

/// Binds `placeholder` <-> `ours` in the two maps unless either is bound to another.
static bool bind_pair(const std::string& placeholder, const std::string& ours, std::map<std::string, std::string>& to_ours,
                      std::map<std::string, std::string>& to_golden) {
    auto a = to_ours.find(placeholder);
    auto b = to_golden.find(ours);
    if (a == to_ours.end() && b == to_golden.end()) {
        to_ours.emplace(placeholder, ours);
        to_golden.emplace(ours, placeholder);
        return true;
    }
    return a != to_ours.end() && a->second == ours && b != to_golden.end() && b->second == placeholder;
}

bool id_mapper::bind(const std::string& placeholder, const std::string& ours) {
    return bind_pair(placeholder, ours, to_ours_, to_golden_);
}

std::optional<std::string> id_mapper::ours_of(const std::string& placeholder) const {
    auto it = to_ours_.find(placeholder);
    if (it == to_ours_.end()) return std::nullopt;
    return it->second;
}

bool id_mapper::match(const json::value& golden, const json::value& ours) {
    auto to_ours = to_ours_;
    auto to_golden = to_golden_;
    if (!match_in(golden, ours, to_ours, to_golden)) return false;
    to_ours_ = std::move(to_ours);
    to_golden_ = std::move(to_golden);
    return true;
}

bool id_mapper::match_in(const json::value& g, const json::value& o, std::map<std::string, std::string>& to_ours,
                         std::map<std::string, std::string>& to_golden) const {
    static const std::regex placeholder_re("<(checkpoint|interrupt|task):[0-9]+>");
    if (g.is_string()) {
        if (!o.is_string()) return false;
        const std::string gs(g.get_string()), os(o.get_string());
        std::smatch m;
        if (!std::regex_search(gs, m, placeholder_re)) return gs == os;
        const std::string prefix = m.prefix(), suffix = m.suffix(), key = m.str(0);
        if (os.size() <= prefix.size() + suffix.size() || os.compare(0, prefix.size(), prefix) != 0 ||
            os.compare(os.size() - suffix.size(), suffix.size(), suffix) != 0)
            return false;
        return bind_pair(key, os.substr(prefix.size(), os.size() - prefix.size() - suffix.size()), to_ours, to_golden);
    }
    if (g.is_object()) {
        if (!o.is_object() || g.get_object().size() != o.get_object().size()) return false;
        for (const auto& [k, v] : g.get_object()) {
            const auto* ov = o.get_object().if_contains(k);
            if (!ov || !match_in(v, *ov, to_ours, to_golden)) return false;
        }
        return true;
    }
    if (g.is_array()) {
        if (!o.is_array() || g.get_array().size() != o.get_array().size()) return false;
        for (std::size_t i = 0; i < g.get_array().size(); ++i)
            if (!match_in(g.get_array()[i], o.get_array()[i], to_ours, to_golden)) return false;
        return true;
    }
    if (g.is_number() && o.is_number()) return g.to_number<double>() == o.to_number<double>();
    return g == o;
}

// -- canonical text ---------------------------------------------------------------------------

static void canonical_to(const json::value& v, std::string& out) {
    if (v.is_object()) {
        std::vector<std::pair<std::string, const json::value*>> members;
        for (const auto& [k, c] : v.as_object()) members.emplace_back(std::string(k), &c);
        std::sort(members.begin(), members.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        out += '{';
        bool first = true;
        for (const auto& [k, c] : members) {
            if (!first) out += ',';
            first = false;
            out += json::serialize(json::string(k));
            out += ':';
            canonical_to(*c, out);
        }
        out += '}';
    } else if (v.is_array()) {
        out += '[';
        bool first = true;
        for (const auto& c : v.as_array()) {
            if (!first) out += ',';
            first = false;
            canonical_to(c, out);
        }
        out += ']';
    } else if (v.is_double() && v.as_double() == static_cast<double>(static_cast<std::int64_t>(v.as_double()))) {
        out += std::to_string(static_cast<std::int64_t>(v.as_double())); // 3.0 and 3 compare equal
    } else {
        out += json::serialize(v);
    }
}

std::string canonical(const json::value& v) {
    std::string s;
    canonical_to(v, s);
    return s;
}

// -- normalisation ----------------------------------------------------------------------------

static void strip_nulls(json::value& v) {
    if (v.is_object()) {
        auto& o = v.as_object();
        for (auto it = o.begin(); it != o.end();) {
            if (it->value().is_null()) {
                it = o.erase(it);
            } else {
                strip_nulls(it->value());
                ++it;
            }
        }
    } else if (v.is_array()) {
        for (auto& c : v.as_array()) strip_nulls(c);
    }
}

static bool is_error_object(const json::object& o) {
    if (!o.contains("error") || !o.at("error").is_string() || !o.contains("message")) return false;
    for (const auto& [k, c] : o)
        if (k != "error" && k != "message" && k != "lc_error_code") return false;
    return true;
}

static void map_errors(json::value& v, const compare_options& opt) {
    if (v.is_object()) {
        auto& o = v.as_object();
        if (is_error_object(o)) {
            std::string cls(o.at("error").as_string());
            std::string kind;
            if (auto it = opt.error_kinds.find(cls); it != opt.error_kinds.end()) kind = it->second;
            else kind = langgraph_error_kind(cls);
            if (kind.empty()) {
                json::object n{{"error", "node_failed"}, {"message", o.at("message")}};
                o = std::move(n);
            } else {
                json::object n{{"error", kind}};
                o = std::move(n);
            }
            return;
        }
        for (auto& [k, c] : o) map_errors(c, opt);
    } else if (v.is_array()) {
        for (auto& c : v.as_array()) map_errors(c, opt);
    }
}

static bool keep_pending_channel(std::string_view ch) {
    if (ch == "__interrupt__") return true;
    if (ch.rfind("branch:", 0) == 0) return false;
    if (ch.rfind("__", 0) == 0) return false;
    return true;
}

static void filter_pending(json::value& v) {
    if (!v.is_array()) return;
    json::array kept;
    for (auto& w : v.as_array()) {
        if (w.is_array() && w.as_array().size() >= 2 && w.as_array()[1].is_string() &&
            !keep_pending_channel(w.as_array()[1].as_string()))
            continue;
        kept.push_back(w);
    }
    v = std::move(kept);
}

json::object normalize_golden(json::object run, const compare_options& o) {
    run.erase("label");
    run.erase("graph");
    run.erase("call");
    json::value v = std::move(run);
    map_errors(v, o);
    if (o.null_is_missing) strip_nulls(v);
    auto& r = v.as_object();
    if (auto* p = r.if_contains("pending_writes")) filter_pending(*p);
    return std::move(r);
}

// -- diff -------------------------------------------------------------------------------------

namespace {

/// Adds to `golden` (an object of state values) the fields of `ours` it leaves out, with their
/// default values, so that they compare against the defaults.
void fill_defaults(json::value* golden, const json::value* ours, const json::object& defaults) {
    if (!golden || !ours || !golden->is_object() || !ours->is_object()) return;
    auto& g = golden->as_object();
    for (const auto& [k, v] : ours->as_object())
        if (!g.contains(k))
            if (const auto* d = defaults.if_contains(k)) g[k] = *d;
}

struct differ {
    const compare_options& opt;
    id_mapper& ids;
    std::vector<std::string> out;

    bool skipped(const std::string& path) const {
        for (const auto& s : opt.skip) {
            if (path == s) return true;
            if (path.size() > s.size() && path.compare(0, s.size(), s) == 0 && (path[s.size()] == '.' || path[s.size()] == '['))
                return true;
        }
        return false;
    }

    static std::string brief(const json::value& v) {
        auto s = canonical(v);
        if (s.size() > 400) s = s.substr(0, 400) + "...";
        return s;
    }

    void value(const json::value& a, const json::value& b, const std::string& path) {
        if (skipped(path)) return;
        if (a.is_object() && b.is_object()) {
            const auto& ao = a.as_object();
            const auto& bo = b.as_object();
            for (const auto& [k, bv] : bo) {
                std::string p = path.empty() ? std::string(k) : path + "." + std::string(k);
                if (skipped(p)) continue;
                if (auto* av = ao.if_contains(k)) value(*av, bv, p);
                else out.push_back(p + ": missing in ours (golden " + brief(bv) + ")");
            }
            for (const auto& [k, av] : ao) {
                std::string p = path.empty() ? std::string(k) : path + "." + std::string(k);
                if (skipped(p)) continue;
                if (!bo.contains(k)) out.push_back(p + ": only in ours (" + brief(av) + ")");
            }
            return;
        }
        if (a.is_array() && b.is_array() && a.as_array().size() == b.as_array().size()) {
            for (std::size_t i = 0; i < a.as_array().size(); ++i)
                value(a.as_array()[i], b.as_array()[i], path + "[" + std::to_string(i) + "]");
            return;
        }
        if (!ids.match(b, a)) out.push_back(path + ": ours " + brief(a) + ", golden " + brief(b));
    }

    /// Each golden item takes the first unused item of ours that matches it.
    void multiset(const json::array& a, const json::array& b, const std::string& path) {
        std::vector<bool> used(a.size(), false);
        std::vector<std::string> only_a, only_b;
        for (const auto& g : b) {
            bool found = false;
            for (std::size_t j = 0; j < a.size() && !found; ++j)
                if (!used[j] && ids.match(g, a[j])) used[j] = found = true;
            if (!found) only_b.push_back(canonical(g));
        }
        for (std::size_t j = 0; j < a.size(); ++j)
            if (!used[j]) only_a.push_back(canonical(a[j]));
        if (only_a.empty() && only_b.empty()) return;
        std::string msg = path + " (compared as a multiset):";
        for (const auto& s : only_a) msg += "\n      only in ours:   " + s;
        for (const auto& s : only_b) msg += "\n      only in golden: " + s;
        out.push_back(msg);
    }

    static std::string steps_of(const json::array& groups) {
        std::string s = "[";
        for (const auto& g : groups) {
            if (s.size() > 1) s += ",";
            const auto* st = g.is_object() ? g.as_object().if_contains("step") : nullptr;
            s += st ? canonical(*st) : "?";
        }
        return s + "]";
    }

    void updates(const json::value& a, const json::value& b) {
        const std::string path = "updates";
        if (skipped(path)) return;
        if (!a.is_array() || !b.is_array()) return value(a, b, path);
        const auto& ag = a.as_array();
        const auto& bg = b.as_array();
        if (steps_of(ag) != steps_of(bg)) {
            out.push_back("updates: steps ours " + steps_of(ag) + ", golden " + steps_of(bg) + "\n      ours:   " +
                          brief(a) + "\n      golden: " + brief(b));
            return;
        }
        for (std::size_t i = 0; i < ag.size(); ++i) {
            std::string p = "updates[step " + canonical(bg[i].as_object().at("step")) + "]";
            const auto* ae = ag[i].as_object().if_contains("events");
            const auto* be = bg[i].as_object().if_contains("events");
            if (!ae || !be || !ae->is_array() || !be->is_array()) {
                value(ag[i], bg[i], p);
                continue;
            }
            if (opt.ordered_events) value(*ae, *be, p + ".events");
            else multiset(ae->as_array(), be->as_array(), p + ".events");
        }
    }
};
} // namespace

std::vector<std::string> diff_run(const json::object& ours_in, const json::object& golden_in, id_mapper& ids,
                                  const compare_options& o) {
    json::object golden = normalize_golden(golden_in, o);
    json::value ours_v = ours_in;
    if (o.null_is_missing) strip_nulls(ours_v);
    const auto& ours = ours_v.as_object();
    if (!o.defaults.empty()) {
        fill_defaults(golden.if_contains("result"), ours.if_contains("result"), o.defaults);
        for (const char* snapshot : {"state", "state_without_pending_writes"})
            if (auto* g = golden.if_contains(snapshot); g && g->is_object())
                if (const auto* w = ours.if_contains(snapshot); w && w->is_object())
                    fill_defaults(g->as_object().if_contains("values"), w->as_object().if_contains("values"), o.defaults);
        auto* gv = golden.if_contains("values");
        const auto* ov = ours.if_contains("values");
        if (gv && ov && gv->is_array() && ov->is_array())
            for (std::size_t i = 0; i < gv->as_array().size() && i < ov->as_array().size(); ++i)
                if (gv->as_array()[i].is_object() && ov->as_array()[i].is_object())
                    fill_defaults(gv->as_array()[i].as_object().if_contains("value"),
                                  ov->as_array()[i].as_object().if_contains("value"), o.defaults);
    }
    differ d{o, ids, {}};
    for (const auto& [k, gv] : golden) {
        const std::string key(k);
        if (d.skipped(key)) continue;
        const auto* ov = ours.if_contains(k);
        if (!ov) {
            d.out.push_back(key + ": not recorded by the test (golden " + differ::brief(gv) + ")");
            continue;
        }
        if (key == "updates") d.updates(*ov, gv);
        else if (key == "pending_writes" && ov->is_array() && gv.is_array()) d.multiset(ov->as_array(), gv.as_array(), key);
        else d.value(*ov, gv, key);
    }
    return d.out;
}

std::vector<std::string> diff_run(const json::object& ours, const json::object& golden, const compare_options& o) {
    id_mapper ids;
    return diff_run(ours, golden, ids, o);
}

void check_run(const json::object& ours, const json::object& golden, std::string_view what, id_mapper& ids,
               const compare_options& o) {
    auto diffs = diff_run(ours, golden, ids, o);
    std::string msg;
    if (!diffs.empty()) {
        msg = std::string(what) + ": " + std::to_string(diffs.size()) + " difference(s) from LangGraph's golden run:";
        for (const auto& d : diffs) msg += "\n  - " + d;
        msg += "\n  ours:   " + canonical(ours);
        msg += "\n  golden: " + canonical(normalize_golden(golden, o));
    }
    BOOST_CHECK_MESSAGE(diffs.empty(), msg);
    // --log_level=message shows both sides of every comparison.
    BOOST_TEST_MESSAGE(what << (diffs.empty() ? ": matches" : ": DIFFERS") << "\n  ours:   " << canonical(ours)
                            << "\n  golden: " << canonical(normalize_golden(golden, o)));
}

void check_run(const json::object& ours, const json::object& golden, std::string_view what, const compare_options& o) {
    id_mapper ids;
    check_run(ours, golden, what, ids, o);
}

void check_run(const golden_case& gc, std::size_t i, const json::object& ours, id_mapper& ids, const json::object& golden,
               const compare_options& o) {
    check_run(ours, golden, gc.label(i), ids, o);
}

void check_run(const golden_case& gc, std::size_t i, const json::object& ours, id_mapper& ids, const compare_options& o) {
    check_run(gc, i, ours, ids, gc.run(i), o);
}

} // namespace stategraph::conformance
