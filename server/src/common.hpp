// Internal to stategraph::server: the helpers every part of the server uses (ids, clocks, JSON
// fields, state JSON through the engine's tables) and the HTTP/SSE plumbing of one request (`call`).
#pragma once

#include <stategraph/server/server.hpp>
#include <stategraph/server/run_store.hpp>

#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/json_graph.hpp>
#include <stategraph/drain.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/topology.hpp>
#include <stategraph/checkpoint/store/store.hpp>
#include <stategraph/thread_overlay.hpp>
#include <stategraph/core/utf8.hpp>

#include "studio.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <boost/uuid/name_generator_sha1.hpp>
#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/string_generator.hpp>
#include <boost/uuid/uuid_io.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <exception>
#include <list>
#include <map>
#include <sstream>
#include <vector>

namespace stategraph::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using net::awaitable;
using net::use_awaitable;
using namespace boost::asio::experimental::awaitable_operators;

namespace sgsrv {

/// Reserved names shared with the engine: `__interrupt__`, `__error__`, the namespace format.
namespace reserved = stategraph::checkpoint::reserved;

// ---------------------------------------------------------------------------------------------
// Small helpers: ids, clocks, JSON fields

inline std::string iso_of(std::chrono::system_clock::time_point tp) {
    auto t = std::chrono::system_clock::to_time_t(tp);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us));
    return buf;
}

inline std::string now_iso() { return iso_of(std::chrono::system_clock::now()); }
/// A run store time (microseconds since the epoch) in ISO 8601.
inline std::string iso_us(std::int64_t us) {
    return iso_of(std::chrono::system_clock::time_point(std::chrono::microseconds(us)));
}

inline std::string new_uuid() {
    static thread_local boost::uuids::random_generator gen;
    return boost::uuids::to_string(gen());
}

/// Who owns a thread, as stored with it: a name-based UUID (SHA-1) of the API key, so that the
/// records kept across restarts hold no key material.
inline std::string owner_of(const std::string& api_key) {
    static const boost::uuids::uuid ns = boost::uuids::string_generator()("5b0e3f7c-2a51-4c8e-9d3b-7f64a1c2e9d0");
    return "key:" + boost::uuids::to_string(boost::uuids::name_generator_sha1(ns)(api_key));
}

/// Where a thread of `owner` called `thread_id` by its client is kept (the threads' map, the
/// checkpointers, its record): with API keys, a name-based UUID (SHA-1) of the owner and the id,
/// so that each key has ids of its own (two keys may each have thread T, and one learns nothing
/// of the other's); without keys (owner "") the id itself.
inline std::string storage_id(const std::string& owner, const std::string& thread_id) {
    if (owner.empty()) return thread_id;
    static const boost::uuids::uuid ns = boost::uuids::string_generator()("c7d4e2a9-3f18-4b6e-8a05-91e3d7b2f4c6");
    return boost::uuids::to_string(boost::uuids::name_generator_sha1(ns)(owner + "/" + thread_id));
}

/// LangGraph's default assistant id of a graph: uuid5(graph_id) in the namespace it uses.
inline std::string assistant_uuid(const std::string& graph_id) {
    boost::uuids::uuid ns = boost::uuids::string_generator()("6ba7b821-9dad-11d1-80b4-00c04fd430c8");
    boost::uuids::name_generator_sha1 gen(ns);
    return boost::uuids::to_string(gen(graph_id));
}

inline bool is_uuid(std::string_view s) {
    if (s.size() != 36) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
            return false;
        }
    }
    return true;
}

inline const char* kind_name(const json::value& v) {
    switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "a boolean";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: return "a number";
    case json::kind::string: return "a string";
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
    }
    return "a value";
}

[[noreturn]] inline void wrong_type(const std::string& field, const char* wanted, const json::value& got) {
    throw http_error(422, "field '" + field + "' must be " + wanted + " (got " + kind_name(got) + ")");
}

/// The field `k` when present and not null.
inline const json::value* field(const json::object& o, std::string_view k) {
    auto* v = o.if_contains(k);
    return v && !v->is_null() ? v : nullptr;
}
inline std::optional<std::string> opt_string(const json::object& o, std::string_view k) {
    auto* v = field(o, k);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(std::string(k), "a string", *v);
    return std::string(v->get_string());
}
inline std::optional<json::object> opt_object(const json::object& o, std::string_view k) {
    auto* v = field(o, k);
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong_type(std::string(k), "an object", *v);
    return v->get_object();
}
inline std::int64_t opt_int(const json::object& o, std::string_view k, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
    auto* v = field(o, k);
    if (!v) return dflt;
    if (!v->is_int64() && !v->is_uint64()) wrong_type(std::string(k), "an integer", *v);
    std::int64_t n = v->is_int64() ? v->get_int64() : static_cast<std::int64_t>(std::min<std::uint64_t>(v->get_uint64(), INT64_MAX));
    if (n < lo || n > hi)
        throw http_error(422, "field '" + std::string(k) + "' must be between " + std::to_string(lo) + " and " +
                                  std::to_string(hi) + " (got " + std::to_string(n) + ")");
    return n;
}
inline double opt_number(const json::object& o, std::string_view k, double dflt) {
    auto* v = field(o, k);
    if (!v) return dflt;
    if (!v->is_number()) wrong_type(std::string(k), "a number", *v);
    return v->to_number<double>();
}
inline std::string one_of(const json::object& o, std::string_view k, std::initializer_list<const char*> allowed) {
    auto s = opt_string(o, k);
    if (!s) return *allowed.begin();
    std::string list;
    for (const char* a : allowed) {
        if (*s == a) return *s;
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    throw http_error(422, "field '" + std::string(k) + "' must be one of " + list + " (got '" + *s + "')");
}

/// Whether `v` contains `pattern` (JSON containment, as LangGraph's metadata filters).
inline bool contains(const json::value& v, const json::value& pattern) {
    if (pattern.is_object()) {
        if (!v.is_object()) return false;
        for (const auto& [k, p] : pattern.get_object()) {
            auto* x = v.get_object().if_contains(k);
            if (!x || !contains(*x, p)) return false;
        }
        return true;
    }
    return v == pattern;
}

inline std::string percent_decode(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
            std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out.push_back(static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16)));
            i += 2;
        } else if (s[i] == '+') {
            out.push_back(' ');
        } else {
            out.push_back(s[i]);
        }
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Thread state as LangGraph's JSON (the state itself comes as JSON from json_graph)

/// A run's `interrupt_before` / `interrupt_after`: "*" or a list of node names of the graph.
inline json::array breakpoint_list(const json_graph& g, const std::string& graph_id, const char* key, const json::value& v) {
    json::array out;
    auto add = [&](const json::value& n) {
        if (!n.is_string()) throw http_error(422, std::string("field '") + key + "' must be \"*\" or a list of node names");
        const std::string name(n.get_string());
        if (name != "*" && !g.has_node(name))
            throw http_error(422, std::string("field '") + key + "': '" + name + "' is not a node of graph '" + graph_id + "'");
        out.push_back(n);
    };
    if (v.is_array())
        for (const auto& n : v.get_array()) add(n);
    else add(v);
    return out;
}

inline json::array interrupts_json(const std::vector<interrupt_info>& list) {
    json::array a;
    for (const auto& i : list) a.push_back(json::object{{"id", i.id}, {"value", i.value}});
    return a;
}

inline json::value checkpoint_ref(const std::string& thread_id, const std::string& id) {
    if (id.empty()) return nullptr;
    return json::object{{"thread_id", thread_id}, {"checkpoint_ns", ""}, {"checkpoint_id", id}, {"checkpoint_map", nullptr}};
}

inline json::object subgraph_state_json(const std::string& thread_id, const subgraph_snapshot& s);

/// A snapshot's tasks as LangGraph's ThreadState lists them (a subgraph's state in `state` when
/// it was asked for: `subgraphs=true`), and every interrupt among them into `all`.
inline json::array tasks_json(const std::string& thread_id, const std::vector<task_snapshot>& list, json::array& all) {
    json::array tasks;
    for (const auto& t : list) {
        json::object task{{"id", t.id},
                          {"name", t.name},
                          {"path", json::array{"__pregel_pull", json::string(t.name)}},
                          {"error", t.error ? json::value(*t.error) : json::value(nullptr)},
                          {"interrupts", interrupts_json(t.interrupts)},
                          {"checkpoint", nullptr},
                          {"state", t.state ? json::value(subgraph_state_json(thread_id, *t.state)) : json::value(nullptr)},
                          {"result", t.result ? json::value(*t.result) : json::value(nullptr)}};
        tasks.push_back(std::move(task));
        for (const auto& i : t.interrupts) all.push_back(json::object{{"id", i.id}, {"value", i.value}});
    }
    return tasks;
}

/// A subgraph's state (get_state with subgraphs) as LangGraph's nested ThreadState.
inline json::object subgraph_state_json(const std::string& thread_id, const subgraph_snapshot& s) {
    json::object o;
    o["values"] = s.values;
    json::array next, all;
    for (const auto& n : s.next) next.push_back(json::string(n));
    o["next"] = std::move(next);
    o["tasks"] = tasks_json(thread_id, s.tasks, all);
    o["checkpoint"] = json::object{{"thread_id", thread_id}, {"checkpoint_ns", s.ns}, {"checkpoint_id", s.checkpoint_id}, {"checkpoint_map", nullptr}};
    json::object meta = s.metadata;
    meta["step"] = s.step;
    o["metadata"] = std::move(meta);
    o["interrupts"] = std::move(all);
    return o;
}

/// A snapshot as LangGraph's ThreadState.
inline json::object thread_state(const std::string& thread_id, const json_snapshot& d) {
    json::object o;
    o["values"] = d.values;
    json::array next;
    for (const auto& n : d.next) next.push_back(json::string(n));
    o["next"] = std::move(next);
    json::array all;
    o["tasks"] = tasks_json(thread_id, d.tasks, all);
    o["checkpoint"] = checkpoint_ref(thread_id, d.checkpoint_id);
    o["parent_checkpoint"] = checkpoint_ref(thread_id, d.parent_checkpoint_id);
    json::object meta = d.metadata;
    meta["step"] = d.step;
    if (!d.source.empty()) meta["source"] = d.source;
    o["metadata"] = std::move(meta);
    auto when = checkpoint::checkpoint_time(d.checkpoint_id);
    o["created_at"] = when ? json::value(iso_of(*when)) : json::value(nullptr);
    o["interrupts"] = std::move(all);
    return o;
}

inline json::object empty_thread_state() {
    return json::object{{"values", json::object{}}, {"next", json::array{}},   {"tasks", json::array{}},
                        {"checkpoint", nullptr},    {"parent_checkpoint", nullptr}, {"metadata", nullptr},
                        {"created_at", nullptr},    {"interrupts", json::array{}}};
}

/// An engine error as the HTTP answer to a client's request (not a run's failure).
[[noreturn]] inline void rethrow_as_http(const std::exception& e) {
    if (auto* h = dynamic_cast<const http_error*>(&e)) throw *h;
    if (auto* g = dynamic_cast<const graph_error*>(&e)) {
        auto c = static_cast<errc>(g->code().value());
        if (g->code().category() == stategraph_category()) {
            switch (c) {
            case errc::checkpoint_not_found:
            case errc::thread_not_found: throw http_error(404, g->what());
            case errc::thread_busy:
            case errc::lease_lost:
            case errc::thread_exists: throw http_error(409, g->what());
            case errc::invalid_input:
            case errc::invalid_route:
            case errc::graph_drift:
            case errc::nothing_to_resume:
            case errc::resume_type_mismatch:
            case errc::unknown_interrupt_id: throw http_error(422, g->what());
            default: break;
            }
        }
    }
    throw http_error(500, std::string("internal error: ") + e.what());
}


struct sse_event {
    std::string name; ///< "metadata", "values", "updates|sub:1", "error", ...
    std::string data; ///< JSON on one line
};

// ---------------------------------------------------------------------------------------------
// HTTP plumbing

using request = http::request<http::string_body>;

struct query_map {
    std::map<std::string, std::string> items;
    std::optional<std::string> get(const std::string& k) const {
        auto it = items.find(k);
        if (it == items.end()) return std::nullopt;
        return it->second;
    }
    bool flag(const std::string& k) const {
        auto v = get(k);
        return v && (*v == "1" || *v == "true" || *v == "True");
    }
    std::int64_t integer(const std::string& k, std::int64_t dflt, std::int64_t lo, std::int64_t hi) const {
        auto v = get(k);
        if (!v) return dflt;
        std::int64_t n = 0;
        try {
            std::size_t used = 0;
            n = std::stoll(*v, &used);
            if (used != v->size()) throw std::invalid_argument(*v);
        } catch (const std::exception&) {
            throw http_error(422, "query parameter '" + k + "' must be an integer (got '" + *v + "')");
        }
        if (n < lo || n > hi)
            throw http_error(422, "query parameter '" + k + "' must be between " + std::to_string(lo) + " and " +
                                      std::to_string(hi));
        return n;
    }
};

struct call {
    request req;
    std::vector<std::string> path; ///< decoded segments
    query_map query;
    std::string owner;             ///< the API key, or "" without authentication
    beast::tcp_stream* stream = nullptr;
    bool keep_alive = true;
    unsigned status = 200;          ///< what was answered (for the log)
    struct answer_t {
        unsigned status = 200;
        std::string body;
        const char* type = "application/json";
        std::vector<std::pair<std::string, std::string>> headers;
    };
    std::optional<answer_t> answer; ///< the answer to write, unless the handler streamed one
    bool streamed = false;          ///< the handler wrote a chunked answer itself
    std::string cors_origin;        ///< Access-Control-Allow-Origin of the answer, or "" 
};

/// Refuses a number that does not fit a finite double anywhere in a request body (Boost.JSON
/// reads 1e999999 as infinity, which no JSON text can hold): a 422 naming its path, as
/// `metadata.a` or `input.list[2]`.
inline void check_finite(const json::value& body) {
    struct at {
        const json::value* v;
        std::string path;
    };
    std::vector<at> pending{{&body, std::string()}}; // a stack: a body may nest deeper than the call stack should
    while (!pending.empty()) {
        auto [v, path] = std::move(pending.back());
        pending.pop_back();
        if (v->is_double() && !std::isfinite(v->get_double()))
            throw http_error(422, "field '" + path + "' is a number too large for a double (at most about 1.8e308 in magnitude)");
        if (const auto* a = v->if_array())
            for (std::size_t i = a->size(); i-- > 0;) pending.push_back({&(*a)[i], path + "[" + std::to_string(i) + "]"});
        else if (const auto* o = v->if_object())
            for (const auto& m : *o) pending.push_back({&m.value(), path.empty() ? std::string(m.key()) : path + "." + std::string(m.key())});
    }
}

inline json::object body_object(const call& c) {
    const auto& b = c.req.body();
    if (b.find_first_not_of(" \t\r\n") == std::string::npos) return {};
    boost::system::error_code ec;
    json::value v = json::parse(b, ec);
    if (ec) throw http_error(400, "malformed JSON body: " + ec.message());
    if (!v.is_object()) throw http_error(422, std::string("the request body must be a JSON object (got ") + kind_name(v) + ")");
    check_finite(v);
    return std::move(v.get_object());
}

/// `v` as JSON text a strict reader takes (RFC 8259): Boost.JSON writes a non-finite number as
/// `Infinity` or `NaN` and a string's bytes as they are; those become null (as JavaScript's
/// JSON.stringify writes them) and U+FFFD. Text that needs neither is written once.
inline std::string serialize_strict(const json::value& v) { return serialize_strict_json(v); }

using header_list = std::vector<std::pair<std::string, std::string>>;

/// Sets the answer of a call (written by the session once the handler returns).
inline void reply(call& c, unsigned status, const json::value& body, header_list headers = {}) {
    c.answer.emplace();
    c.answer->status = status;
    c.answer->body = status == 204 || status == 202 ? std::string() : serialize_strict(body);
    c.answer->headers = std::move(headers);
}
inline void reply_text(call& c, unsigned status, std::string body, const char* type) {
    c.answer.emplace();
    c.answer->status = status;
    c.answer->body = std::move(body);
    c.answer->type = type;
}

/// CORS headers for a browser page at an allowed origin (the SDK reads the run and paging headers).
template <class Message>
inline void add_cors(const call& c, Message& m) {
    if (c.cors_origin.empty()) return;
    m.set(http::field::access_control_allow_origin, c.cors_origin);
    m.set(http::field::access_control_expose_headers,
          "Content-Location, Location, X-Pagination-Next, X-Pagination-Total");
    if (c.cors_origin != "*") m.set(http::field::vary, "Origin");
}

inline awaitable<void> write_answer(call& c) {
    auto& a = *c.answer;
    http::response<http::string_body> res{static_cast<http::status>(a.status), c.req.version()};
    res.set(http::field::server, "stategraph");
    if (a.status != 204) res.set(http::field::content_type, a.type);
    for (auto& [k, v] : a.headers) res.set(k, v);
    add_cors(c, res);
    res.body() = std::move(a.body);
    res.keep_alive(c.keep_alive);
    res.prepare_payload();
    c.status = a.status;
    auto [ec, n] = co_await http::async_write(*c.stream, res, net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
}

/// Starts a chunked response (SSE, or a wait that sends heartbeats); false when the client left.
inline awaitable<bool> begin_chunked(call& c, const char* type, std::vector<std::pair<std::string, std::string>> headers) {
    http::response<http::empty_body> res{http::status::ok, c.req.version()};
    res.set(http::field::server, "stategraph");
    res.set(http::field::content_type, type);
    res.set(http::field::cache_control, "no-cache");
    for (auto& [k, v] : headers) res.set(k, v);
    add_cors(c, res);
    res.keep_alive(c.keep_alive);
    res.chunked(true);
    c.status = 200;
    c.streamed = true;
    http::response_serializer<http::empty_body> sr{res};
    auto [ec, n] = co_await http::async_write_header(*c.stream, sr, net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
    co_return !ec;
}

inline awaitable<bool> write_chunk(call& c, const std::string& s) {
    auto [ec, n] = co_await net::async_write(*c.stream, http::make_chunk(net::buffer(s)), net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
    co_return !ec;
}

inline awaitable<void> end_chunked(call& c) {
    auto [ec, n] = co_await net::async_write(*c.stream, http::make_chunk_last(), net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
}

using waiter_list = std::list<net::steady_timer*>;

/// Waits until something notifies `a` (or `b`, when given) or `timeout` passes.
inline awaitable<void> wait_on(waiter_list* a, waiter_list* b, std::chrono::milliseconds timeout) {
    net::steady_timer t(co_await net::this_coro::executor);
    t.expires_after(timeout);
    auto ia = a->insert(a->end(), &t);
    std::optional<waiter_list::iterator> ib;
    if (b) ib = b->insert(b->end(), &t);
    auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
    (void)ec; // woken by a change (cancelled) or by the timeout: the caller looks again
    a->erase(ia);
    if (ib) b->erase(*ib);
}

/// Whether verbosity `v` shows an event named `name` (values: only the final ones, sent apart).
inline bool shown(verbosity v, const std::string& name) { return stategraph::shows(v, name); }

inline std::string sse_text(const sse_event& e, std::size_t id) {
    return "event: " + e.name + "\ndata: " + e.data + "\nid: " + std::to_string(id) + "\n\n";
}

/// The stream mode a request names "messages": LangGraph's legacy messages events
/// (messages/metadata, messages/partial, messages/complete). "messages-tuple" is kept as "messages".
inline constexpr const char* legacy_messages_mode = "messages-legacy";

inline bool wanted(const std::set<std::string>& modes, const std::string& name) {
    if (name == "metadata" || name == "error" || name == "end") return true;
    auto base = name.substr(0, name.find(reserved::ns_separator));
    if (base.starts_with("messages/")) return modes.count(legacy_messages_mode) != 0;
    return modes.count(base) != 0;
}

} // namespace sgsrv

using namespace sgsrv;

} // namespace stategraph::server
