// The LangGraph Agent Server HTTP API on Boost.Beast: HTTP/1.1 sessions, the routes, threads and
// runs (queued per thread, streamed as Server-Sent Events with replay). One io_context thread:
// nothing here locks.

#include <stategraph/server/server.hpp>

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/detail/engine.hpp>
#include <stategraph/drain.hpp>
#include <stategraph/error.hpp>
#include <stategraph/topology.hpp>
#include <stategraph/store/store.hpp>
#include <stategraph/thread_overlay.hpp>
#include <stategraph/utf8.hpp>

#include "studio.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
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

// ---------------------------------------------------------------------------------------------
// Small helpers: ids, clocks, JSON fields

std::string iso_of(std::chrono::system_clock::time_point tp) {
    auto t = std::chrono::system_clock::to_time_t(tp);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lld+00:00", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us));
    return buf;
}

std::string now_iso() { return iso_of(std::chrono::system_clock::now()); }

std::string new_uuid() {
    static thread_local boost::uuids::random_generator gen;
    return boost::uuids::to_string(gen());
}

/// Who owns a thread, as stored with it: a name-based UUID (SHA-1) of the API key, so that the
/// records kept across restarts hold no key material.
std::string owner_of(const std::string& api_key) {
    static const boost::uuids::uuid ns = boost::uuids::string_generator()("5b0e3f7c-2a51-4c8e-9d3b-7f64a1c2e9d0");
    return "key:" + boost::uuids::to_string(boost::uuids::name_generator_sha1(ns)(api_key));
}

/// Where a thread of `owner` called `thread_id` by its client is kept (the threads' map, the
/// checkpointers, its record): with API keys, a name-based UUID (SHA-1) of the owner and the id,
/// so that each key has ids of its own (two keys may each have thread T, and one learns nothing
/// of the other's); without keys (owner "") the id itself.
std::string storage_id(const std::string& owner, const std::string& thread_id) {
    if (owner.empty()) return thread_id;
    static const boost::uuids::uuid ns = boost::uuids::string_generator()("c7d4e2a9-3f18-4b6e-8a05-91e3d7b2f4c6");
    return boost::uuids::to_string(boost::uuids::name_generator_sha1(ns)(owner + "/" + thread_id));
}

/// LangGraph's default assistant id of a graph: uuid5(graph_id) in the namespace it uses.
std::string assistant_uuid(const std::string& graph_id) {
    boost::uuids::uuid ns = boost::uuids::string_generator()("6ba7b821-9dad-11d1-80b4-00c04fd430c8");
    boost::uuids::name_generator_sha1 gen(ns);
    return boost::uuids::to_string(gen(graph_id));
}

bool is_uuid(std::string_view s) {
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

const char* kind_name(const json::value& v) {
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

[[noreturn]] void wrong_type(const std::string& field, const char* wanted, const json::value& got) {
    throw http_error(422, "field '" + field + "' must be " + wanted + " (got " + kind_name(got) + ")");
}

/// The field `k` when present and not null.
const json::value* field(const json::object& o, std::string_view k) {
    auto* v = o.if_contains(k);
    return v && !v->is_null() ? v : nullptr;
}
std::optional<std::string> opt_string(const json::object& o, std::string_view k) {
    auto* v = field(o, k);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(std::string(k), "a string", *v);
    return std::string(v->get_string());
}
std::optional<json::object> opt_object(const json::object& o, std::string_view k) {
    auto* v = field(o, k);
    if (!v) return std::nullopt;
    if (!v->is_object()) wrong_type(std::string(k), "an object", *v);
    return v->get_object();
}
std::int64_t opt_int(const json::object& o, std::string_view k, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
    auto* v = field(o, k);
    if (!v) return dflt;
    if (!v->is_int64() && !v->is_uint64()) wrong_type(std::string(k), "an integer", *v);
    std::int64_t n = v->is_int64() ? v->get_int64() : static_cast<std::int64_t>(std::min<std::uint64_t>(v->get_uint64(), INT64_MAX));
    if (n < lo || n > hi)
        throw http_error(422, "field '" + std::string(k) + "' must be between " + std::to_string(lo) + " and " +
                                  std::to_string(hi) + " (got " + std::to_string(n) + ")");
    return n;
}
double opt_number(const json::object& o, std::string_view k, double dflt) {
    auto* v = field(o, k);
    if (!v) return dflt;
    if (!v->is_number()) wrong_type(std::string(k), "a number", *v);
    return v->to_number<double>();
}
std::string one_of(const json::object& o, std::string_view k, std::initializer_list<const char*> allowed) {
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
bool contains(const json::value& v, const json::value& pattern) {
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

std::string percent_decode(std::string_view s) {
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
// State JSON through the engine's per-state table

json::object state_to_json(const detail::state_table& st, const void* s) {
    json::object o;
    if (!s) return o;
    for (std::size_t i = 0; i < st.n; ++i) o[st.names[i]] = st.to_json(s, i, {});
    return o;
}

/// An update from client JSON; a mistake is a 422 naming the field.
detail::update_box update_of(const detail::state_table& st, const json::object& values, const std::string& what) {
    detail::update_box u(st);
    for (const auto& [k, v] : values) {
        int i = st.index_of(k);
        if (i < 0) {
            std::string names;
            for (const auto& n : st.names) names += (names.empty() ? "" : ", ") + n;
            throw http_error(422, what + ": unknown state field '" + std::string(k) + "' (the fields are: " + names + ")");
        }
        try {
            st.from_json(u.values(), static_cast<std::size_t>(i), v, errc::invalid_input, what + "." + std::string(k));
        } catch (const std::exception& e) {
            throw http_error(422, what + ": field '" + std::string(k) + "' does not fit the state: " + e.what());
        }
        st.mark(u.get(), static_cast<std::size_t>(i));
    }
    return u;
}

json::array interrupts_json(const std::vector<interrupt_info>& list) {
    json::array a;
    for (const auto& i : list) a.push_back(json::object{{"id", i.id}, {"value", i.value}});
    return a;
}

json::value checkpoint_ref(const std::string& thread_id, const std::string& id) {
    if (id.empty()) return nullptr;
    return json::object{{"thread_id", thread_id}, {"checkpoint_ns", ""}, {"checkpoint_id", id}, {"checkpoint_map", nullptr}};
}

/// A snapshot as LangGraph's ThreadState.
json::object thread_state(const detail::state_table& st, const std::string& thread_id, const detail::snapshot_data& d) {
    json::object o;
    o["values"] = state_to_json(st, d.values.get());
    json::array next;
    for (const auto& n : d.next) next.push_back(json::string(n));
    o["next"] = std::move(next);
    json::array tasks, all;
    for (const auto& t : d.tasks) {
        json::object task{{"id", t.id},
                          {"name", t.name},
                          {"path", json::array{"__pregel_pull", json::string(t.name)}},
                          {"error", t.error ? json::value(*t.error) : json::value(nullptr)},
                          {"interrupts", interrupts_json(t.interrupts)},
                          {"checkpoint", nullptr},
                          {"state", nullptr},
                          {"result", t.result ? json::value(*t.result) : json::value(nullptr)}};
        tasks.push_back(std::move(task));
        for (const auto& i : t.interrupts) all.push_back(json::object{{"id", i.id}, {"value", i.value}});
    }
    o["tasks"] = std::move(tasks);
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

json::object empty_thread_state() {
    return json::object{{"values", json::object{}}, {"next", json::array{}},   {"tasks", json::array{}},
                        {"checkpoint", nullptr},    {"parent_checkpoint", nullptr}, {"metadata", nullptr},
                        {"created_at", nullptr},    {"interrupts", json::array{}}};
}

/// An engine error as the HTTP answer to a client's request (not a run's failure).
[[noreturn]] void rethrow_as_http(const std::exception& e) {
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
            case errc::unknown_interrupt_id:
            case errc::ambiguous_resume: throw http_error(422, g->what());
            default: break;
            }
        }
    }
    throw http_error(500, std::string("internal error: ") + e.what());
}

// ---------------------------------------------------------------------------------------------
// Records

struct assistant_rec {
    assistant_spec spec;
    std::string assistant_id;
    std::string created_at;
    const detail::state_table& table() const { return *spec.core->st; }
};

struct sse_event {
    std::string name; ///< "metadata", "values", "updates|sub:1", "error", ...
    std::string data; ///< JSON on one line
};

struct run_rec {
    std::string run_id, thread_id, assistant_id, graph_id, owner;
    std::string thread_key; ///< its thread's storage id (thread_rec::key)
    std::string created_at, updated_at;
    std::string status = "pending";
    json::object metadata, kwargs;
    std::string multitask = "reject";
    std::set<std::string> modes; ///< stream modes asked for (event names)
    bool subgraphs = false;
    bool stateless = false, keep_thread = false;
    bool cancel_on_disconnect = false;
    double after_seconds = 0;
    std::deque<sse_event> events; ///< the last `max_events_per_run` events; events.front() has id `events_base`
    std::size_t events_base = 0;  ///< how many of the oldest events were dropped
    std::size_t event_end() const noexcept { return events_base + events.size(); } ///< the next event's id
    const sse_event& event(std::size_t id) const { return events[id - events_base]; }
    sse_event last_values_copy;   ///< the last values event (kept when it is dropped from `events`)
    bool finished = false;
    std::list<net::steady_timer*> waiters;
    json::value last_values; ///< the last values event (null: none)
    std::size_t last_values_event = SIZE_MAX; ///< its index in `events`
    json::value error;       ///< {"error", "message"} when the run failed
    bool cancel_requested = false;
    bool rollback = false;  ///< cancelled with action rollback: its checkpoints and record go
    bool rollback_decided = false; ///< the run has settled whether it rolls back: a later request is refused
    std::string started_cp; ///< the thread's newest checkpoint as it started ("" none): a rollback returns there
    bool anchored = false;  ///< started_cp was looked up (the run started on a thread with a saver)
    bool anchor_failed = false; ///< the lookup failed: a rollback is refused (error on the run)
    std::shared_ptr<net::cancellation_signal> cancel = std::make_shared<net::cancellation_signal>();
    std::unique_ptr<detail::run_request> request;

    void notify() {
        for (auto* t : waiters) t->cancel();
    }
    json::object to_json() const {
        return json::object{{"run_id", run_id},         {"thread_id", thread_id}, {"assistant_id", assistant_id},
                            {"created_at", created_at}, {"updated_at", updated_at}, {"status", status},
                            {"metadata", metadata},     {"kwargs", kwargs},     {"multitask_strategy", multitask}};
    }
};

struct thread_rec {
    std::string thread_id, owner;
    /// Where it is kept (storage_id): the key of `threads`, its id in the checkpointers and of
    /// its record. Its client's id is `thread_id`, what every answer shows.
    std::string key;
    std::string created_at, updated_at, state_updated_at;
    json::object metadata;
    std::string status = "idle";
    json::value values;        ///< null before the first run
    json::object interrupts;   ///< task id -> [Interrupt]
    json::value error;
    std::string graph_id;      ///< empty until a graph is chosen (metadata.graph_id or a run)
    std::deque<std::shared_ptr<run_rec>> queue; ///< pending and running runs, oldest first
    /// A finished run's rollback and state refresh are still awaited: the thread stays busy (no
    /// run starts, reject refuses, no delete or state update) until they are done.
    bool settling = false;
    bool busy() const noexcept { return !queue.empty() || settling; }
    bool temporary = false;
    std::list<net::steady_timer*> waiters; ///< thread-level streams, woken when a run is queued
    std::uint64_t run_seq = 0;              ///< runs queued so far
    std::deque<std::pair<std::uint64_t, std::shared_ptr<run_rec>>> recent; ///< the last runs queued, for thread streams

    json::object to_json() const {
        json::object o{{"thread_id", thread_id},   {"created_at", created_at}, {"updated_at", updated_at},
                       {"state_updated_at", state_updated_at}, {"metadata", metadata}, {"status", status},
                       {"values", values},         {"interrupts", interrupts}};
        if (!error.is_null()) o["error"] = error;
        return o;
    }
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
void check_finite(const json::value& body) {
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

json::object body_object(const call& c) {
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
std::string serialize_strict(const json::value& v) {
    std::string text = json::serialize(v);
    const bool finite = text.find("Infinity") == std::string::npos && text.find("NaN") == std::string::npos;
    if (finite && is_valid_utf8(text)) return text;
    json::value fixed = v;
    if (!finite) {
        std::vector<json::value*> pending{&fixed};
        while (!pending.empty()) {
            json::value* x = pending.back();
            pending.pop_back();
            if (x->is_double() && !std::isfinite(x->get_double())) *x = nullptr;
            else if (auto* a = x->if_array())
                for (auto& e : *a) pending.push_back(&e);
            else if (auto* o = x->if_object())
                for (auto& m : *o) pending.push_back(&m.value());
        }
    }
    make_valid_utf8(fixed);
    return json::serialize(fixed);
}

using header_list = std::vector<std::pair<std::string, std::string>>;

/// Sets the answer of a call (written by the session once the handler returns).
void reply(call& c, unsigned status, json::value body, header_list headers = {}) {
    c.answer.emplace();
    c.answer->status = status;
    c.answer->body = status == 204 || status == 202 ? std::string() : serialize_strict(body);
    c.answer->headers = std::move(headers);
}
void reply_text(call& c, unsigned status, std::string body, const char* type) {
    c.answer.emplace();
    c.answer->status = status;
    c.answer->body = std::move(body);
    c.answer->type = type;
}

/// CORS headers for a browser page at an allowed origin (the SDK reads the run and paging headers).
template <class Message>
void add_cors(const call& c, Message& m) {
    if (c.cors_origin.empty()) return;
    m.set(http::field::access_control_allow_origin, c.cors_origin);
    m.set(http::field::access_control_expose_headers,
          "Content-Location, Location, X-Pagination-Next, X-Pagination-Total");
    if (c.cors_origin != "*") m.set(http::field::vary, "Origin");
}

awaitable<void> write_answer(call& c) {
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
awaitable<bool> begin_chunked(call& c, const char* type, std::vector<std::pair<std::string, std::string>> headers) {
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

awaitable<bool> write_chunk(call& c, const std::string& s) {
    auto [ec, n] = co_await net::async_write(*c.stream, http::make_chunk(net::buffer(s)), net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
    co_return !ec;
}

awaitable<void> end_chunked(call& c) {
    auto [ec, n] = co_await net::async_write(*c.stream, http::make_chunk_last(), net::as_tuple(use_awaitable));
    if (ec) c.keep_alive = false;
}

using waiter_list = std::list<net::steady_timer*>;

/// Waits until something notifies `a` (or `b`, when given) or `timeout` passes.
awaitable<void> wait_on(waiter_list* a, waiter_list* b, std::chrono::milliseconds timeout) {
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

/// Waits until `run` changes or `timeout` passes.
awaitable<void> wait_change(std::shared_ptr<run_rec> run, std::chrono::milliseconds timeout) {
    co_await wait_on(&run->waiters, nullptr, timeout);
}

/// Whether verbosity `v` shows an event named `name` (values: only the final ones, sent apart).
bool shown(verbosity v, const std::string& name) { return stategraph::shows(v, name); }

std::string sse_text(const sse_event& e, std::size_t id) {
    return "event: " + e.name + "\ndata: " + e.data + "\nid: " + std::to_string(id) + "\n\n";
}

bool wanted(const std::set<std::string>& modes, const std::string& name) {
    if (name == "metadata" || name == "error" || name == "end") return true;
    auto base = name.substr(0, name.find('|'));
    return modes.count(base) != 0;
}

} // namespace sgsrv

using namespace sgsrv;

// ---------------------------------------------------------------------------------------------
// The server

struct server::impl : std::enable_shared_from_this<impl> {
    net::any_io_executor ex;
    server_options opts;
    tcp::acceptor acceptor;
    unsigned short bound = 0;
    bool stopping = false;
    std::vector<std::shared_ptr<assistant_rec>> assistants;
    std::map<std::string, std::shared_ptr<thread_rec>> threads;
    std::map<std::string, std::shared_ptr<run_rec>> runs;
    std::list<beast::tcp_stream*> sessions;
    std::deque<std::string> finished_runs; ///< oldest first, for max_finished_runs
    // The durable list of thread ids (save_index): writes coalesce, one at a time.
    std::uint64_t index_version = 0, index_written = 0;
    bool index_writing = false;
    std::list<net::steady_timer*> index_waiters;

    impl(net::any_io_executor e, server_options o) : ex(e), opts(std::move(o)), acceptor(e) {}

    // -- lookups ---------------------------------------------------------------------------
    std::shared_ptr<assistant_rec> find_assistant(const std::string& id) const {
        for (const auto& a : assistants)
            if (a->assistant_id == id || a->spec.graph_id == id) return a;
        return nullptr;
    }
    std::shared_ptr<assistant_rec> assistant_or_404(const std::string& id) const {
        auto a = find_assistant(id);
        if (!a) {
            std::string names;
            for (const auto& x : assistants) names += (names.empty() ? "" : ", ") + x->spec.graph_id;
            throw http_error(404, "assistant '" + id + "' not found (graphs served: " + names + ")");
        }
        return a;
    }
    /// The thread `owner` calls `id` (temporary ones included), or null. Another owner's thread
    /// of that id is never found: it is kept elsewhere (storage_id).
    std::shared_ptr<thread_rec> find_thread(const std::string& owner, const std::string& id) const {
        auto it = threads.find(storage_id(owner, id));
        if (it == threads.end() && !owner.empty()) it = threads.find(id); // recorded before ids were per key
        if (it == threads.end() || it->second->owner != owner || it->second->thread_id != id) return nullptr;
        return it->second;
    }
    std::shared_ptr<thread_rec> thread_or_404(const call& c, const std::string& id) const {
        if (!is_uuid(id)) throw http_error(422, "thread_id '" + id + "' is not a UUID");
        auto th = find_thread(c.owner, id);
        if (!th || th->temporary) throw http_error(404, "thread '" + id + "' not found");
        return th;
    }
    std::shared_ptr<run_rec> run_or_404(const call& c, const std::string& tid, const std::string& rid) const {
        auto th = thread_or_404(c, tid);
        if (!is_uuid(rid)) throw http_error(422, "run_id '" + rid + "' is not a UUID");
        auto it = runs.find(rid);
        if (it == runs.end() || it->second->thread_key != th->key)
            throw http_error(404, "run '" + rid + "' not found on thread '" + tid + "'");
        return it->second;
    }
    std::shared_ptr<assistant_rec> graph_of(const thread_rec& th) const {
        return th.graph_id.empty() ? nullptr : find_assistant(th.graph_id);
    }

    json::object assistant_json(const assistant_rec& a) const {
        return json::object{{"assistant_id", a.assistant_id},
                            {"graph_id", a.spec.graph_id},
                            {"config", json::object{{"configurable", json::object{}}}},
                            {"context", json::object{}},
                            {"metadata", json::object{{"created_by", "system"}}},
                            {"name", a.spec.graph_id},
                            {"description", a.spec.options.description.empty() ? json::value(nullptr)
                                                                                : json::value(a.spec.options.description)},
                            {"version", 1},
                            {"created_at", a.created_at},
                            {"updated_at", a.created_at}};
    }

    std::shared_ptr<thread_rec> make_thread(std::string id, std::string owner, json::object metadata) {
        auto th = std::make_shared<thread_rec>();
        th->thread_id = std::move(id);
        th->owner = std::move(owner);
        th->key = storage_id(th->owner, th->thread_id);
        th->created_at = th->updated_at = th->state_updated_at = now_iso();
        if (auto g = opt_string(metadata, "graph_id")) {
            auto a = assistant_or_404(*g);
            th->graph_id = a->spec.graph_id;
        }
        th->metadata = std::move(metadata);
        threads[th->key] = th;
        return th;
    }

    /// Refreshes a thread's values, interrupts and status from its latest checkpoint.
    awaitable<void> refresh(std::shared_ptr<thread_rec> th) {
        auto a = graph_of(*th);
        if (!a) co_return;
        auto req = std::make_unique<detail::state_request>();
        req->graph = a->spec.core;
        req->thread_id = th->key;
        auto snap = co_await detail::get_state(std::move(req));
        if (snap.checkpoint_id.empty()) { // nothing stored (yet, or again after a rollback)
            th->values = nullptr;
            th->interrupts = {};
            if (th->queue.empty() && th->status != "error") th->status = "idle";
            co_return;
        }
        th->values = state_to_json(a->table(), snap.values.get());
        th->interrupts = {};
        for (const auto& t : snap.tasks)
            if (!t.interrupts.empty()) th->interrupts[t.id] = interrupts_json(t.interrupts);
        if (th->queue.empty() && th->status != "error") th->status = snap.next.empty() ? "idle" : "interrupted";
        th->state_updated_at = th->updated_at = now_iso();
    }

    // -- durable thread records ----------------------------------------------------------------
    // A thread's record (owner, metadata, creation time, graph) outlives the process in the node
    // cache of the first assistant's checkpointer, which every saver keeps (memory, SQLite,
    // PostgreSQL, Redis, tiered) apart from any thread: one entry per thread in the namespace
    // `thread_record_ns` + id, and the list of ids in `thread_index_ns`. A restarted server reads
    // them back (adopt_records) before it adopts unrecorded threads from the checkpoints.
    static constexpr std::string_view thread_record_ns = "__stategraph_server__/thread/";
    static constexpr std::string_view thread_index_ns = "__stategraph_server__/threads";

    std::shared_ptr<checkpoint::saver> record_saver() const {
        return assistants.empty() ? nullptr : assistants.front()->spec.core->saver;
    }

    /// Stores the record of the thread kept as `id` (thread_rec::key), or removes it when the thread is gone (or temporary),
    /// then the list of thread ids; done when both are stored.
    static awaitable<void> save_record(std::shared_ptr<impl> self, std::string id) {
        auto saver = self->record_saver();
        if (!saver) co_return;
        const std::string ns = std::string(thread_record_ns) + id;
        auto it = self->threads.find(id);
        if (it == self->threads.end() || it->second->temporary) {
            std::vector<std::string> gone{ns};
            auto clear = saver->cache_clear(std::move(gone));
            (void)co_await std::move(clear);
        } else {
            const auto& th = *it->second;
            json::value rec = json::object{{"thread_id", th.thread_id}, {"key", th.key}, {"owner", th.owner}, {"created_at", th.created_at},
                                           {"graph_id", th.graph_id},   {"metadata", th.metadata}};
            auto put = saver->cache_put(ns, std::string("record"), std::move(rec), std::chrono::milliseconds(0));
            co_await std::move(put);
        }
        auto index = save_index(self);
        co_await std::move(index);
    }

    /// `save_record` in the background (for threads made by a run, whose creation must not wait);
    /// a failure is logged.
    void save_record_later(const std::string& id) {
        if (!record_saver()) return;
        auto self = shared_from_this();
        net::co_spawn(ex, save_record(self, id), [self, id](std::exception_ptr e) {
            if (!e || !self->opts.log) return;
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& x) {
                self->opts.log("thread '" + id + "': its record could not be stored: " + x.what());
            }
        });
    }

    /// Stores the list of thread ids as it is now; returns once a write made after this call began
    /// is stored. Concurrent callers share writes (one at a time, the newest list each).
    static awaitable<void> save_index(std::shared_ptr<impl> self) {
        auto saver = self->record_saver();
        if (!saver) co_return;
        const auto mine = ++self->index_version;
        while (self->index_written < mine) {
            if (self->index_writing) {
                net::steady_timer t(self->ex, net::steady_timer::time_point::max());
                self->index_waiters.push_back(&t);
                auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
                (void)ec;
                self->index_waiters.remove(&t);
                continue;
            }
            self->index_writing = true;
            const auto version = self->index_version;
            json::array ids;
            for (const auto& [id, th] : self->threads)
                if (!th->temporary) ids.push_back(json::string(id));
            std::exception_ptr failed;
            try {
                json::value v = std::move(ids);
                auto put = saver->cache_put(std::string(thread_index_ns), std::string("ids"), std::move(v),
                                            std::chrono::milliseconds(0));
                co_await std::move(put);
                self->index_written = version;
            } catch (...) {
                failed = std::current_exception();
            }
            self->index_writing = false;
            for (auto* w : self->index_waiters) w->cancel();
            if (failed) std::rethrow_exception(failed);
        }
    }

    void log_line(const std::string& line) const {
        if (opts.log) opts.log(line);
    }

    /// The threads recorded by an earlier server (save_record): owner, metadata and graph as they
    /// were, values and status from their checkpoints.
    static awaitable<void> adopt_records(std::shared_ptr<impl> self) {
        auto saver = self->record_saver();
        if (!saver) co_return;
        const std::string index_ns(thread_index_ns), index_key("ids");
        auto read_index = saver->cache_get(index_ns, index_key);
        auto index = co_await std::move(read_index);
        if (!index || !index->is_array()) co_return;
        std::size_t adopted = 0;
        for (const auto& v : index->as_array()) {
            if (!v.is_string() || !is_uuid(std::string(v.get_string()))) continue;
            const std::string id(v.get_string());
            if (self->threads.count(id)) continue;
            const std::string ns = std::string(thread_record_ns) + id, key("record");
            std::optional<json::value> rec;
            try {
                auto read = saver->cache_get(ns, key);
                rec = co_await std::move(read);
            } catch (const std::exception& e) {
                self->log_line("thread '" + id + "': its stored record cannot be read: " + e.what());
                continue;
            }
            if (!rec || !rec->is_object()) continue;
            const auto& o = rec->get_object();
            auto text = [&](const char* name) {
                const auto* f = o.if_contains(name);
                return f && f->is_string() ? std::string(f->get_string()) : std::string();
            };
            auto th = std::make_shared<thread_rec>();
            th->key = id; // a record from before ids were per key has no "key" and is kept as its id
            th->thread_id = text("thread_id");
            if (!is_uuid(th->thread_id)) th->thread_id = id;
            th->owner = text("owner");
            th->created_at = text("created_at");
            if (th->created_at.empty()) th->created_at = now_iso();
            th->updated_at = th->state_updated_at = th->created_at;
            if (auto g = text("graph_id"); !g.empty() && self->find_assistant(g)) th->graph_id = g;
            if (const auto* m = o.if_contains("metadata"); m && m->is_object()) th->metadata = m->get_object();
            self->threads[id] = th;
            ++adopted;
            try {
                co_await self->refresh(th);
            } catch (const std::exception& e) {
                self->log_line("thread '" + id + "': its state could not be read after the restart: " + e.what());
            }
        }
        if (adopted) self->log_line(std::to_string(adopted) + " recorded threads adopted");
    }

    /// Adopts the stored threads, then accepts connections: no request sees (or rewrites the list
    /// of) a half-restored set of threads. Connections made meanwhile wait in the listen backlog.
    static awaitable<void> adopt_then_accept(std::shared_ptr<impl> self) {
        try {
            auto adopting = adopt_threads(self);
            co_await std::move(adopting);
        } catch (const std::exception& e) {
            self->log_line(std::string("could not adopt the stored threads: ") + e.what());
        }
        if (self->stopping) co_return;
        auto accepting = self->accept_loop();
        co_await std::move(accepting);
    }

    /// Threads kept by an earlier server (a restart): first those it recorded (adopt_records),
    /// then, without API keys only (their owner is not known), threads found in the graphs'
    /// checkpointers with no record (metadata from their newest checkpoint, status from their state).
    static awaitable<void> adopt_threads(std::shared_ptr<impl> self) {
        try {
            auto records = adopt_records(self);
            co_await std::move(records);
        } catch (const std::exception& e) {
            self->log_line(std::string("could not read the stored thread records: ") + e.what());
        }
        if (!self->opts.api_keys.empty()) co_return;
        for (auto a : self->assistants) {
            auto saver = a->spec.core->saver;
            checkpoint::thread_query q;
            std::vector<checkpoint::thread_info> list;
            try {
                list = co_await saver->list_threads(q);
            } catch (const std::exception& e) {
                if (self->opts.log) self->opts.log("could not list the stored threads of graph '" + a->spec.graph_id + "': " + e.what());
                continue;
            }
            for (auto& info : list) {
                if (!is_uuid(info.thread_id) || self->threads.count(info.thread_id) || info.checkpoint_id.empty()) continue;
                auto th = std::make_shared<thread_rec>();
                th->thread_id = th->key = info.thread_id; // no keys: kept as its id
                th->created_at = th->updated_at = th->state_updated_at = info.created_at ? iso_of(*info.created_at) : now_iso();
                th->graph_id = a->spec.graph_id;
                th->metadata = json::object{{"graph_id", a->spec.graph_id}, {"assistant_id", a->assistant_id}};
                self->threads[th->key] = th;
                try {
                    co_await self->refresh(th);
                } catch (const std::exception& e) {
                    self->log_line("thread '" + th->thread_id + "' of graph '" + a->spec.graph_id +
                                   "': its state could not be read after the restart: " + e.what());
                }
            }
            if (self->opts.log && !list.empty())
                self->opts.log("graph '" + a->spec.graph_id + "': " + std::to_string(list.size()) + " stored threads");
        }
    }

    /// Waits until no run is in flight, then calls `done`.
    static awaitable<void> wait_idle(std::shared_ptr<impl> self, std::function<void()> done) {
        net::steady_timer t(self->ex);
        for (;;) {
            bool busy = false;
            for (const auto& [id, th] : self->threads)
                if (!th->queue.empty()) busy = true;
            if (!busy) break;
            t.expires_after(std::chrono::milliseconds(20));
            auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
            (void)ec;
        }
        done();
    }

    // -- runs ----------------------------------------------------------------------------------
    void record(run_rec& run, std::string name, const json::value& data) {
        if (name == "values") run.last_values_event = run.event_end();
        run.events.push_back({std::move(name), serialize_strict(data)});
        if (run.last_values_event == run.event_end() - 1) run.last_values_copy = run.events.back();
        while (run.events.size() > std::max<std::size_t>(opts.max_events_per_run, 1)) {
            run.events.pop_front();
            ++run.events_base;
        }
        run.notify();
    }

    void on_engine_event(run_rec& run, const stream_event& e) {
        if (run.cancel_requested) return;
        if (!e.ns.empty() && !run.subgraphs) return;
        std::string name;
        json::value data;
        switch (e.mode) {
        case stream_mode::values:
            name = "values";
            data = e.data;
            if (e.ns.empty()) run.last_values = e.data;
            break;
        case stream_mode::updates: name = "updates"; data = json::object{{e.node, e.data}}; break;
        case stream_mode::custom: name = "custom"; data = e.data; break;
        case stream_mode::tasks: name = "tasks"; data = e.data; break;
        case stream_mode::checkpoints: name = "checkpoints"; data = e.data; break;
        case stream_mode::debug: name = "debug"; data = e.data; break;
        case stream_mode::messages: name = "messages"; data = e.data; break;
        default: return;
        }
        for (const auto& n : e.ns) name += "|" + n;
        record(run, std::move(name), data);
    }

    /// Queues `run` on its thread; starts it when the thread has nothing ahead of it.
    void enqueue(std::shared_ptr<thread_rec> th, std::shared_ptr<run_rec> run) {
        runs[run->run_id] = run;
        record(*run, "metadata", json::object{{"run_id", run->run_id}, {"thread_id", run->thread_id}, {"attempt", 1}});
        th->queue.push_back(run);
        th->recent.emplace_back(++th->run_seq, run);
        if (th->recent.size() > 32) th->recent.pop_front();
        for (auto* t : th->waiters) t->cancel();
        th->status = "busy";
        th->updated_at = now_iso();
        if (th->queue.size() == 1 && !th->settling) start(th, run);
    }

    std::size_t in_flight = 0; ///< runs executing
    std::deque<std::pair<std::shared_ptr<thread_rec>, std::shared_ptr<run_rec>>> waiting; ///< over the bound

    void start(std::shared_ptr<thread_rec> th, std::shared_ptr<run_rec> run) {
        if (in_flight >= std::max<std::size_t>(opts.max_runs_in_flight, 1)) {
            waiting.emplace_back(std::move(th), std::move(run));
            return;
        }
        ++in_flight;
        auto self = shared_from_this();
        auto sig = run->cancel;
        net::co_spawn(ex, execute(self, th, run), net::bind_cancellation_slot(sig->slot(), net::detached));
    }

    static awaitable<void> execute(std::shared_ptr<impl> self, std::shared_ptr<thread_rec> th, std::shared_ptr<run_rec> run) {
        if (run->after_seconds > 0) {
            net::steady_timer t(self->ex);
            t.expires_after(std::chrono::milliseconds(static_cast<long long>(run->after_seconds * 1000)));
            auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
            (void)ec; // a cancelled run checks cancel_requested below
        }
        auto a = self->find_assistant(run->graph_id);
        if (!run->cancel_requested && a) {
            run->status = "running";
            run->updated_at = now_iso();
            if (auto saver = a->spec.core->saver) {
                try {
                    run->started_cp = co_await rollback_anchor(saver, run->thread_key);
                } catch (const std::exception&) {
                    run->anchor_failed = true; // no rollback without a known place to return to
                }
                run->anchored = true;
            }
            auto req = std::move(run->request);
            run_rec* raw = run.get();
            impl* me = self.get();
            req->on_event = [me, raw](const stream_event& e) { me->on_engine_event(*raw, e); };
            try {
                auto outcome = co_await detail::run_graph(std::move(req));
                if (outcome.status == run_status::interrupted && !run->cancel_requested) {
                    json::object v = state_to_json(a->table(), outcome.values.get());
                    v["__interrupt__"] = interrupts_json(outcome.interrupts);
                    run->last_values = v;
                    self->record(*run, "values", v);
                }
                // A drained run (SIGTERM) stopped at a step boundary with everything saved: the
                // thread's next nodes run when it is run again (input null).
                run->status = run->cancel_requested || outcome.status == run_status::drained ? "interrupted" : "success";
            } catch (const std::exception& e) {
                run->status = run->cancel_requested ? "interrupted" : "error";
                if (!run->cancel_requested) {
                    std::string cls = "Error";
                    if (auto* g = dynamic_cast<const graph_error*>(&e)) cls = "GraphError(" + g->code().message() + ")";
                    run->error = json::object{{"error", cls}, {"message", e.what()}};
                    self->record(*run, "error", run->error);
                    th->status = "error";
                    th->error = run->error;
                }
            }
        } else {
            run->status = run->cancel_requested ? "interrupted" : "error";
        }
        run->updated_at = now_iso();
        if (!th->queue.empty() && th->queue.front() == run) th->queue.pop_front();
        th->settling = true; // until the rollback and the refresh below are done
        // A run cancelled through this coroutine's slot: the rollback's and the refresh's own
        // waits must not see that cancellation.
        co_await net::this_coro::reset_cancellation_state();
        run->rollback_decided = true;
        if (run->rollback && run->anchored && a) {
            try {
                if (run->anchor_failed)
                    throw std::runtime_error("thread '" + th->thread_id +
                                             "': its newest checkpoint could not be read as the run started, so "
                                             "there is no known place to roll back to; nothing was removed");
                auto saver = a->spec.core->saver;
                co_await roll_back(saver, th->key, run->started_cp);
            } catch (const std::exception& e) {
                // Kept on the run (not deleted below) and on the thread, which shows status error.
                run->error = json::object{{"error", "RollbackError"}, {"message", e.what()}};
                run->status = "error";
                th->error = run->error;
            }
        }
        if (run->status != "error") {
            if (th->status == "error") th->status = "idle";
            th->error = nullptr;
        }
        try {
            co_await self->refresh(th);
        } catch (const std::exception&) {
            if (run->rollback && th->queue.empty() && th->status == "busy") { // rolled back to no checkpoint
                th->status = "idle";
                th->values = nullptr;
                th->interrupts = {};
            }
        }
        th->settling = false;
        if (run->status == "error") th->status = th->queue.empty() ? "error" : "busy";
        else if (!th->queue.empty()) th->status = "busy";
        run->finished = true;
        run->notify();
        // Finished runs are kept (get, join, replay) up to a bound; the oldest go first. A run
        // rolled back is deleted at once.
        if (run->rollback && run->error.is_null()) self->runs.erase(run->run_id);
        else self->finished_runs.push_back(run->run_id);
        while (self->finished_runs.size() > std::max<std::size_t>(self->opts.max_finished_runs, 1)) {
            self->runs.erase(self->finished_runs.front());
            self->finished_runs.pop_front();
        }
        --self->in_flight;
        if (!self->waiting.empty()) {
            auto [wth, wrun] = std::move(self->waiting.front());
            self->waiting.pop_front();
            self->start(std::move(wth), std::move(wrun));
        }
        if (!th->queue.empty()) self->start(th, th->queue.front());
        else if (th->temporary && !run->keep_thread) co_await self->drop_thread(th);
    }

    /// Where a rollback returns to: the thread's newest checkpoint as a run starts ("" when it has
    /// none), that is the root namespace's head or, when the thread is interrupted inside a
    /// subgraph (a `__interrupt__` write of task T of node N on a head), the newer head of that
    /// subgraph's namespace "N:T", and so on down nested subgraphs ("N:T|M:U"), whose progress a
    /// rollback must keep too.
    static awaitable<std::string> rollback_anchor(std::shared_ptr<checkpoint::saver> saver, std::string thread_id) {
        const std::optional<std::string> newest;
        std::vector<std::string> namespaces{std::string()}; // the root first (g++ 12: no temporaries in co_await)
        std::string anchor;
        for (std::size_t i = 0; i < namespaces.size() && i < 256; ++i) {
            const std::string ns = namespaces[i];
            auto head = co_await saver->get(thread_id, ns, newest);
            if (!head) continue;
            if (head->cp.id > anchor) anchor = head->cp.id;
            for (const auto& w : head->writes)
                if (w.channel == "__interrupt__")
                    namespaces.push_back((ns.empty() ? std::string() : ns + "|") + w.task_name + ":" + w.task_id);
        }
        co_return anchor;
    }

    /// Rollback: what the run rolled back wrote goes, in one transaction of the saver
    /// (`rewind_thread`: every namespace, subgraphs' included, newer than `anchor`); a thread that
    /// had no checkpoint before the run is deleted.
    static awaitable<void> roll_back(std::shared_ptr<checkpoint::saver> saver, std::string thread_id, std::string anchor) {
        if (anchor.empty()) {
            co_await saver->delete_thread(thread_id);
            co_return;
        }
        (void)co_await saver->rewind_thread(thread_id, anchor);
    }

    awaitable<void> drop_thread(std::shared_ptr<thread_rec> th) {
        threads.erase(th->key);
        if (auto a = graph_of(*th)) {
            auto saver = a->spec.core->saver;
            co_await saver->delete_thread(th->key);
        }
    }

    /// The final values of a finished run, as runs/wait and join answer them.
    json::value result_of(const run_rec& run) const {
        if (!run.error.is_null()) return json::object{{"__error__", run.error}};
        if (!run.last_values.is_null()) return run.last_values;
        auto it = threads.find(run.thread_key);
        return it != threads.end() ? it->second->values : json::value(nullptr);
    }

    std::set<std::string> parse_modes(const json::value* v) const {
        std::set<std::string> out;
        auto add = [&](const json::value& m) {
            if (!m.is_string()) wrong_type("stream_mode", "a string or a list of strings", m);
            std::string s(m.get_string());
            if (s == "messages-tuple") s = "messages";
            static const std::set<std::string> known = {"values", "updates", "custom", "messages",
                                                        "tasks",  "checkpoints", "debug"};
            if (!known.count(s))
                throw http_error(422, "stream_mode '" + s +
                                          "' is not supported (use values, updates, custom, messages, messages-tuple, "
                                          "tasks, checkpoints, debug)");
            out.insert(s);
        };
        if (!v || v->is_null()) out.insert("values");
        else if (v->is_array())
            for (const auto& m : v->get_array()) add(m);
        else add(*v);
        return out;
    }

    /// `?stream_mode=` of a joined stream: a JSON list (as the SDK sends several) or one name.
    std::optional<std::set<std::string>> query_modes(const call& c) const {
        auto m = c.query.get("stream_mode");
        if (!m) return std::nullopt;
        boost::system::error_code ec;
        json::value v = json::parse(*m, ec);
        if (ec) v = json::string(*m);
        return parse_modes(&v);
    }

    /// Builds a run from a run-create body (validated: every mistake is a 4xx before anything runs).
    awaitable<std::shared_ptr<run_rec>> prepare_run(call& c, std::shared_ptr<thread_rec>& th, bool stateless) {
        json::object body = body_object(c);
        auto aid = opt_string(body, "assistant_id");
        if (!aid) throw http_error(422, "field 'assistant_id' is required (an assistant id or a graph id)");
        auto a = assistant_or_404(*aid);
        auto run = std::make_shared<run_rec>();
        run->run_id = new_uuid();
        run->assistant_id = a->assistant_id;
        run->graph_id = a->spec.graph_id;
        run->owner = c.owner;
        run->created_at = run->updated_at = now_iso();
        run->stateless = stateless;
        run->modes = parse_modes(field(body, "stream_mode"));
        if (auto* s = field(body, "stream_subgraphs")) {
            if (!s->is_bool()) wrong_type("stream_subgraphs", "a boolean", *s);
            run->subgraphs = s->get_bool();
        }
        run->multitask = one_of(body, "multitask_strategy", {"reject", "enqueue", "interrupt", "rollback"});
        auto if_not_exists = one_of(body, "if_not_exists", {"reject", "create"});
        run->keep_thread = one_of(body, "on_completion", {"delete", "keep"}) == "keep";
        run->cancel_on_disconnect = one_of(body, "on_disconnect", {"continue", "cancel"}) == "cancel";
        run->after_seconds = opt_number(body, "after_seconds", 0);
        if (run->after_seconds < 0 || run->after_seconds > 86400)
            throw http_error(422, "field 'after_seconds' must be between 0 and 86400");
        if (auto m = opt_object(body, "metadata")) run->metadata = *m;
        auto config = opt_object(body, "config").value_or(json::object{});
        auto input = field(body, "input");
        if (input && !input->is_object()) wrong_type("input", "an object (the state's fields)", *input);
        auto command = opt_object(body, "command");
        for (const char* unsupported : {"interrupt_before", "interrupt_after"})
            if (field(body, unsupported))
                throw http_error(422, std::string("field '") + unsupported +
                                          "' is not supported by this server yet (declare breakpoints at compile time)");

        // The thread. One made here is forgotten again if the request turns out to be wrong.
        struct forget_on_error {
            impl* self;
            std::string id;
            ~forget_on_error() {
                if (!id.empty()) self->threads.erase(id);
            }
        } undo{this, {}};
        bool recorded = true; // false: the thread's durable record must be stored (new, or its graph set)
        if (stateless) {
            th = make_thread(new_uuid(), c.owner, json::object{});
            th->temporary = !run->keep_thread; // on_completion "keep": a thread like any other
            recorded = th->temporary;
            undo.id = th->key;
        } else {
            const std::string& tid = c.path[1];
            if (!is_uuid(tid)) throw http_error(422, "thread_id '" + tid + "' is not a UUID");
            auto found = find_thread(c.owner, tid);
            if (!found || found->temporary) {
                if (if_not_exists != "create" || found)
                    throw http_error(404, "thread '" + tid + "' not found (send if_not_exists: \"create\" to create it)");
                json::object meta = run->metadata;
                meta["graph_id"] = a->spec.graph_id;
                meta["assistant_id"] = a->assistant_id;
                th = make_thread(tid, c.owner, std::move(meta));
                undo.id = th->key;
                recorded = false;
            } else {
                th = found;
            }
        }
        if (!th->graph_id.empty() && th->graph_id != a->spec.graph_id)
            throw http_error(409, "thread '" + th->thread_id + "' belongs to graph '" + th->graph_id +
                                      "', not to '" + a->spec.graph_id + "'");
        if (th->busy() && run->multitask == "reject") throw_busy(*th);
        run->thread_id = th->thread_id;
        run->thread_key = th->key;

        // The engine request.
        auto req = std::make_unique<detail::run_request>();
        req->graph = a->spec.core;
        req->cfg.thread_id = th->key;
        req->cfg.recursion_limit = static_cast<int>(opt_int(config, "recursion_limit", a->spec.options.recursion_limit, 1, 10000));
        std::optional<std::string> from = opt_string(body, "checkpoint_id");
        if (auto cp = opt_object(body, "checkpoint"))
            if (auto id = opt_string(*cp, "checkpoint_id")) from = id;
        if (auto conf = opt_object(config, "configurable"))
            if (auto id = opt_string(*conf, "checkpoint_id")) from = id;
        if (from) req->cfg.checkpoint_id = *from;
        req->modes = stream_mode::values | stream_mode::updates;
        static const std::map<std::string, stream_mode> engine_modes = {
            {"custom", stream_mode::custom}, {"tasks", stream_mode::tasks}, {"checkpoints", stream_mode::checkpoints},
            {"debug", stream_mode::debug},   {"messages", stream_mode::messages}};
        for (const auto& m : run->modes)
            if (auto it = engine_modes.find(m); it != engine_modes.end()) req->modes = req->modes | it->second;

        if (command && field(*command, "resume")) {
            if (input) throw http_error(422, "send either 'input' or 'command.resume', not both");
            if (field(*command, "goto") || field(*command, "update"))
                throw http_error(422, "command.goto and command.update are not supported by this server yet (command.resume is)");
            // Something must be waiting for the answer.
            std::vector<std::string> pending;
            if (th->graph_id.empty()) throw http_error(400, "thread '" + th->thread_id + "' has no pending interrupt to resume (it has never run)");
            auto sreq = std::make_unique<detail::state_request>();
            sreq->graph = a->spec.core;
            sreq->thread_id = th->key;
            auto snap = co_await detail::get_state(std::move(sreq));
            for (const auto& t : snap.tasks)
                for (const auto& i : t.interrupts) pending.push_back(i.id);
            if (pending.empty())
                throw http_error(400, "thread '" + th->thread_id + "' has no pending interrupt to resume");
            const json::value& value = *command->if_contains("resume");
            bool by_id = value.is_object() && !value.get_object().empty();
            if (by_id)
                for (const auto& [k, v] : value.get_object())
                    if (std::find(pending.begin(), pending.end(), std::string(k)) == pending.end()) by_id = false;
            if (!by_id && pending.size() > 1)
                throw http_error(422, "thread '" + th->thread_id + "' has " + std::to_string(pending.size()) +
                                          " pending interrupts: resume with a map {interrupt id: value}");
            req->input.what = detail::run_input::kind::resume;
            if (by_id) {
                req->input.resume.is_map = true;
                for (const auto& [k, v] : value.get_object()) req->input.resume.by_id[std::string(k)] = v;
            } else {
                req->input.resume.value = value;
            }
            run->kwargs["command"] = *command;
        } else if (command && (field(*command, "goto") || field(*command, "update"))) {
            throw http_error(422, "command.goto and command.update are not supported by this server yet (command.resume is)");
        } else if (input) {
            json::object in = input->get_object();
            if (a->spec.options.input_adapter) in = a->spec.options.input_adapter(std::move(in), th->key);
            req->input.what = detail::run_input::kind::values;
            req->input.values = update_of(a->table(), in, "input");
            run->kwargs["input"] = *input;
        }
        // (no input and no command: continue from the latest checkpoint)
        json::array modes;
        for (const auto& m : run->modes) modes.push_back(json::string(m));
        run->kwargs["stream_mode"] = std::move(modes);
        run->kwargs["config"] = config;
        run->request = std::move(req);
        if (th->graph_id.empty()) {
            th->graph_id = a->spec.graph_id;
            th->metadata["graph_id"] = a->spec.graph_id;
            th->metadata["assistant_id"] = a->assistant_id;
            recorded = th->temporary;
        }
        // Checked again: the waits above (get_state) let another request queue a run meanwhile.
        if (th->busy() && run->multitask == "reject") throw_busy(*th);
        const auto queued = static_cast<std::size_t>(
            std::count_if(th->queue.begin(), th->queue.end(), [](const auto& r) { return !r->cancel_requested; }));
        if (run->multitask == "enqueue" && queued >= std::max<std::size_t>(opts.max_queued_runs_per_thread, 1))
            throw http_error(429, "thread '" + th->thread_id + "' has " + std::to_string(queued) +
                                      " runs pending or running, the most one thread may queue (max_queued_runs_per_thread); "
                                      "wait for one to finish");
        if (run->multitask == "interrupt" || run->multitask == "rollback")
            for (auto& r : th->queue) {
                r->rollback = r->rollback || run->multitask == "rollback";
                cancel_run(*r);
            }
        undo.id.clear();
        if (!recorded) save_record_later(th->key);
        co_return run;
    }

    [[noreturn]] static void throw_busy(const thread_rec& th) {
        throw http_error(409, "Thread is already running a task. Wait for it to finish or choose a different "
                              "multitask strategy (thread '" + th.thread_id + "' is busy" +
                              (th.queue.empty() ? std::string(" finishing a run") : " with run '" + th.queue.front()->run_id + "'") + ")");
    }

    void cancel_run(run_rec& r) {
        if (r.finished || r.cancel_requested) return;
        r.cancel_requested = true;
        r.cancel->emit(net::cancellation_type::terminal);
        r.notify();
    }

    std::vector<std::pair<std::string, std::string>> location_headers(const run_rec& run, bool sse) const {
        std::vector<std::pair<std::string, std::string>> h;
        std::string loc = run.stateless ? "/runs/" + run.run_id : "/threads/" + run.thread_id + "/runs/" + run.run_id;
        h.emplace_back("Content-Location", loc);
        if (sse && !run.stateless) h.emplace_back("Location", loc + "/stream");
        return h;
    }

    /// Relays a run's events from `after` on, until it finishes (or the client leaves). The client
    /// leaving is noticed at once (a read on its socket ends), not only at the next write: a run
    /// with on_disconnect cancel is cancelled then.
    awaitable<void> relay(call& c, std::shared_ptr<run_rec> run, std::set<std::string> modes, std::size_t after) {
        auto headers = location_headers(*run, true);
        if (!co_await begin_chunked(c, "text/event-stream", std::move(headers))) co_return;
        c.keep_alive = false; // the socket is watched for the client leaving: no second request on it
        auto loop = relay_events(c, run, std::move(modes), after);
        auto watch = watch_close(c);
        auto ended = co_await (std::move(loop) || std::move(watch));
        const bool left = ended.index() == 1 ? std::get<1>(ended) : !std::get<0>(ended);
        if (left && run->cancel_on_disconnect) cancel_run(*run);
    }

    /// `relay`'s events; true when the stream ended with the run, false when a write failed.
    awaitable<bool> relay_events(call& c, std::shared_ptr<run_rec> run, std::set<std::string> modes, std::size_t after) {
        std::size_t next = after;
        for (;;) {
            std::string out;
            if (next < run->events_base) { // fell behind by more than the events kept
                json::value lost = json::object{
                    {"error", "EventsDropped"},
                    {"message", "run '" + run->run_id + "' keeps its last " + std::to_string(opts.max_events_per_run) +
                                    " events; the events from id " + std::to_string(next) + " to " +
                                    std::to_string(run->events_base - 1) + " are gone"}};
                out = "event: error\ndata: " + serialize_strict(lost) + "\n\n";
                if (co_await write_chunk(c, out)) co_await end_chunked(c);
                co_return true;
            }
            for (; next < run->event_end(); ++next)
                if (wanted(modes, run->event(next).name) && shown(opts.verbosity, run->event(next).name))
                    out += sse_text(run->event(next), next);
            // Below full verbosity, the final values close the stream.
            std::size_t last = run->last_values_event;
            if (run->finished && opts.verbosity != verbosity::full && last != SIZE_MAX && last >= after &&
                modes.count("values"))
                out += sse_text(run->last_values_copy, last);
            if (!out.empty() && !co_await write_chunk(c, out)) co_return false;
            if (run->finished) {
                co_await end_chunked(c);
                co_return true;
            }
            std::size_t before = run->event_end();
            co_await wait_change(run, std::chrono::seconds(10));
            if (run->event_end() == before && !run->finished) {
                std::string beat = ": heartbeat\n\n";
                if (!co_await write_chunk(c, beat)) co_return false;
            }
        }
    }

    /// Ends when the client closes its side of the connection (or sends anything: a client of an
    /// event stream sends nothing more); cancelled when the stream ends first.
    /// True when the client left; false when the read was cancelled (the server stopping).
    static awaitable<bool> watch_close(call& c) {
        char byte = 0;
        auto [ec, n] = co_await c.stream->socket().async_read_some(net::buffer(&byte, 1), net::as_tuple(use_awaitable));
        (void)n;
        co_return ec != net::error::operation_aborted;
    }

    /// The thread-level stream: the events of every run on the thread, from the one in flight
    /// on, each event's id "<run_id>:<index>"; open until the client leaves or the server stops.
    awaitable<void> relay_thread(call& c, std::shared_ptr<thread_rec> th, std::optional<std::set<std::string>> modes) {
        header_list none;
        if (!co_await begin_chunked(c, "text/event-stream", std::move(none))) co_return;
        std::shared_ptr<run_rec> cur;
        std::size_t next = 0;
        // The runs queued after `last` are relayed in order, starting with the one in flight.
        std::uint64_t last = th->run_seq;
        for (const auto& [seq, r] : th->recent)
            if (!th->queue.empty() && r == th->queue.front()) last = seq - 1;
        auto next_run = [&]() -> std::shared_ptr<run_rec> {
            for (const auto& [seq, r] : th->recent)
                if (seq > last) {
                    last = seq;
                    return r;
                }
            return nullptr;
        };
        while (!stopping) {
            if (!cur) {
                cur = next_run();
                next = 0;
            }
            if (cur) {
                std::string out;
                const auto& m = modes ? *modes : cur->modes;
                if (next < cur->events_base) next = cur->events_base; // older events were dropped
                for (; next < cur->event_end(); ++next) {
                    const auto& e = cur->event(next);
                    if (wanted(m, e.name) && shown(opts.verbosity, e.name))
                        out += "event: " + e.name + "\ndata: " + e.data + "\nid: " + cur->run_id + ":" + std::to_string(next) + "\n\n";
                }
                if (!out.empty() && !co_await write_chunk(c, out)) break;
                if (cur->finished) {
                    cur.reset();
                    continue;
                }
            }
            std::size_t before = cur ? cur->event_end() : 0;
            std::uint64_t queued = th->run_seq;
            bool had = cur != nullptr;
            co_await wait_on(&th->waiters, cur ? &cur->waiters : nullptr, std::chrono::seconds(10));
            bool changed = (had && (cur->event_end() != before || cur->finished)) || th->run_seq != queued;
            if (!changed) {
                std::string beat = ": heartbeat\n\n";
                if (!co_await write_chunk(c, beat)) break;
            }
        }
        if (stopping) co_await end_chunked(c);
        c.keep_alive = false;
    }

    /// Waits for a run's end, sending "\n" every second (JSON allows leading whitespace).
    awaitable<void> wait_and_answer(call& c, std::shared_ptr<run_rec> run, bool created) {
        auto headers = created ? location_headers(*run, false) : std::vector<std::pair<std::string, std::string>>{};
        if (run->finished) {
            reply(c, 200, result_of(*run), std::move(headers));
            co_return;
        }
        if (!co_await begin_chunked(c, "application/json", std::move(headers))) co_return;
        while (!run->finished) {
            std::size_t before = run->event_end();
            co_await wait_change(run, std::chrono::seconds(1));
            if (run->event_end() == before && !run->finished) {
                std::string nl = "\n";
                if (!co_await write_chunk(c, nl)) {
                    c.keep_alive = false;
                    if (run->cancel_on_disconnect) cancel_run(*run);
                    co_return;
                }
            }
        }
        std::string body = serialize_strict(result_of(*run));
        if (co_await write_chunk(c, body)) co_await end_chunked(c);
    }

    // -- routes --------------------------------------------------------------------------------
    awaitable<void> dispatch(call& c);
    awaitable<void> route_assistants(call& c);
    awaitable<void> route_threads(call& c);
    awaitable<void> route_runs(call& c, std::shared_ptr<thread_rec> th);
    awaitable<void> create_run(call& c, bool stateless, const std::string& how);
    awaitable<void> route_store(call& c);

    awaitable<void> session(tcp::socket sock);
    awaitable<void> accept_loop();
    static awaitable<void> refuse(std::shared_ptr<impl> self, tcp::socket sock);
    std::size_t open_connections = 0; ///< sessions running (max_connections)
};

awaitable<void> server::impl::route_assistants(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    if (p.size() == 2 && (p[1] == "search" || p[1] == "count") && verb == http::verb::post) {
        json::object body = body_object(c);
        auto graph = opt_string(body, "graph_id");
        auto name = opt_string(body, "name");
        auto meta = opt_object(body, "metadata");
        auto limit = opt_int(body, "limit", 10, 1, 1000), offset = opt_int(body, "offset", 0, 0, INT64_MAX);
        json::array out;
        for (const auto& a : assistants) {
            if (graph && a->spec.graph_id != *graph) continue;
            if (name && a->spec.graph_id.find(*name) == std::string::npos) continue;
            auto j = assistant_json(*a);
            if (meta && !contains(j["metadata"], *meta)) continue;
            out.push_back(std::move(j));
        }
        if (p[1] == "count") {
            reply(c, 200, static_cast<std::int64_t>(out.size()));
            co_return;
        }
        json::array page;
        for (std::size_t i = static_cast<std::size_t>(offset); i < out.size() && page.size() < static_cast<std::size_t>(limit); ++i)
            page.push_back(out[i]);
        std::vector<std::pair<std::string, std::string>> h{{"X-Pagination-Total", std::to_string(out.size())}};
        if (page.size() == static_cast<std::size_t>(limit)) h.emplace_back("X-Pagination-Next", std::to_string(offset + limit));
        reply(c, 200, page, std::move(h));
        co_return;
    }
    if (p.size() < 2) throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
    if (verb != http::verb::get) throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on " + std::string(c.req.target()));
    auto a = assistant_or_404(p[1]);
    if (p.size() == 2) {
        reply(c, 200, assistant_json(*a));
        co_return;
    }
    if (p.size() == 3 && p[2] == "graph") {
        const topology& t = a->spec.core->topo;
        if (auto f = c.query.get("format"); f && *f != "json") {
            if (*f != "dot" && *f != "svg") throw http_error(422, "query parameter 'format' must be json, dot or svg (got '" + *f + "')");
            // ?thread_id=T[&checkpoint_id=C]: the thread's path, next nodes, interrupts and failures drawn on it.
            dot_options overlay;
            if (auto tid = c.query.get("thread_id")) {
                auto th = thread_or_404(c, *tid);
                if (th->graph_id != a->spec.graph_id)
                    throw http_error(422, "thread '" + *tid + "' is not a thread of graph '" + a->spec.graph_id + "'");
                auto req = std::make_unique<detail::state_request>();
                req->graph = a->spec.core;
                req->thread_id = th->key;
                auto history = co_await detail::get_state_history(std::move(req));
                overlay = overlay_of_history(history, *tid, c.query.get("checkpoint_id").value_or(""));
            }
            std::ostringstream os;
            write_dot(os, t, overlay);
            if (*f == "dot") {
                reply_text(c, 200, os.str(), "text/vnd.graphviz");
                co_return;
            }
            auto job = std::make_unique<studio::svg_job>(studio::svg_job{opts.dot_program, os.str(), opts.dot_timeout});
            auto svg = co_await studio::render_svg(std::move(job));
            if (svg.status != 200) throw http_error(svg.status, svg.body);
            reply_text(c, 200, std::move(svg.body), "image/svg+xml");
            co_return;
        }
        json::array nodes{json::object{{"id", START}, {"type", "schema"}, {"data", START}}};
        for (const auto& n : t.nodes)
            nodes.push_back(json::object{{"id", n.name},
                                         {"type", "runnable"},
                                         {"data", json::object{{"id", json::array{"stategraph", "node", json::string(n.name)}},
                                                               {"name", n.name}}},
                                         {"metadata", n.stage.empty() ? json::value(nullptr) : json::value(json::object{{"stage", n.stage}})}});
        nodes.push_back(json::object{{"id", END}, {"type", "schema"}, {"data", END}});
        json::array edges;
        for (const auto& e : t.edges) edges.push_back(json::object{{"source", e.from}, {"target", e.to}});
        for (const auto& j : t.joins)
            for (const auto& s : j.sources) edges.push_back(json::object{{"source", s}, {"target", j.target}});
        for (const auto& b : t.branches)
            for (const auto& [label, target] : b.routes)
                edges.push_back(json::object{{"source", b.from}, {"target", target}, {"data", label}, {"conditional", true}});
        for (const auto& n : t.nodes)
            for (const auto& e : n.ends) edges.push_back(json::object{{"source", n.name}, {"target", e}, {"conditional", true}});
        reply(c, 200, json::object{{"nodes", std::move(nodes)}, {"edges", std::move(edges)}});
        co_return;
    }
    if (p.size() == 3 && p[2] == "schemas") {
        json::object props;
        for (const auto& [name, kind] : a->spec.core->topo.fields) props[name] = json::object{{"description", kind}};
        json::object schema{{"title", a->spec.graph_id}, {"type", "object"}, {"properties", props}};
        reply(c, 200,
                            json::object{{"graph_id", a->spec.graph_id}, {"input_schema", schema}, {"output_schema", schema},
                                         {"state_schema", schema}, {"config_schema", nullptr}, {"context_schema", nullptr}});
        co_return;
    }
    throw http_error(404, "no route GET " + std::string(c.req.target()));
}

awaitable<void> server::impl::route_threads(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    if (p.size() == 1 && verb == http::verb::post) {
        json::object body = body_object(c);
        auto id = opt_string(body, "thread_id");
        auto meta = opt_object(body, "metadata").value_or(json::object{});
        auto if_exists = one_of(body, "if_exists", {"raise", "do_nothing"});
        if (field(body, "supersteps")) throw http_error(422, "field 'supersteps' is not supported by this server yet");
        if (id) {
            if (!is_uuid(*id)) throw http_error(422, "thread_id '" + *id + "' is not a UUID");
            // Only the caller's own threads are found: another key's thread of this id is kept
            // elsewhere (storage_id), so this creates the caller's own, as for a free id.
            if (auto mine = find_thread(c.owner, *id)) {
                if (if_exists == "raise") throw http_error(409, "thread '" + *id + "' already exists");
                reply(c, 200, mine->to_json());
                co_return;
            }
        }
        auto th = make_thread(id.value_or(new_uuid()), c.owner, std::move(meta));
        auto saving = save_record(shared_from_this(), th->key);
        co_await std::move(saving);
        reply(c, 200, th->to_json());
        co_return;
    }
    if (p.size() == 2 && (p[1] == "search" || p[1] == "count") && verb == http::verb::post) {
        json::object body = body_object(c);
        auto meta = opt_object(body, "metadata");
        auto values = opt_object(body, "values");
        auto status = opt_string(body, "status");
        if (status && *status != "idle" && *status != "busy" && *status != "interrupted" && *status != "error")
            throw http_error(422, "field 'status' must be one of idle, busy, interrupted, error (got '" + *status + "')");
        std::optional<std::set<std::string>> ids;
        if (auto* v = field(body, "ids")) {
            if (!v->is_array()) wrong_type("ids", "a list of thread ids", *v);
            ids.emplace();
            for (const auto& x : v->get_array()) {
                if (!x.is_string()) wrong_type("ids[]", "a string", x);
                ids->insert(std::string(x.get_string()));
            }
        }
        auto limit = opt_int(body, "limit", 10, 1, 10000), offset = opt_int(body, "offset", 0, 0, INT64_MAX);
        std::string sort_by = one_of(body, "sort_by", {"created_at", "updated_at", "state_updated_at", "thread_id", "status"});
        std::string order = one_of(body, "sort_order", {"desc", "asc"});
        std::vector<std::shared_ptr<thread_rec>> hits;
        for (const auto& [tid, th] : threads) {
            if (th->owner != c.owner || th->temporary) continue;
            if (ids && !ids->count(tid)) continue;
            if (status && th->status != *status) continue;
            if (meta && !contains(th->metadata, *meta)) continue;
            if (values && !contains(th->values, *values)) continue;
            hits.push_back(th);
        }
        if (p[1] == "count") {
            reply(c, 200, static_cast<std::int64_t>(hits.size()));
            co_return;
        }
        auto key = [&](const thread_rec& t) -> const std::string& {
            if (sort_by == "updated_at") return t.updated_at;
            if (sort_by == "state_updated_at") return t.state_updated_at;
            if (sort_by == "thread_id") return t.thread_id;
            if (sort_by == "status") return t.status;
            return t.created_at;
        };
        std::stable_sort(hits.begin(), hits.end(), [&](const auto& x, const auto& y) {
            return order == "asc" ? key(*x) < key(*y) : key(*y) < key(*x);
        });
        json::array out;
        for (std::size_t i = static_cast<std::size_t>(offset); i < hits.size() && out.size() < static_cast<std::size_t>(limit); ++i)
            out.push_back(hits[i]->to_json());
        std::vector<std::pair<std::string, std::string>> h{{"X-Pagination-Total", std::to_string(hits.size())}};
        if (out.size() == static_cast<std::size_t>(limit)) h.emplace_back("X-Pagination-Next", std::to_string(offset + limit));
        reply(c, 200, out, std::move(h));
        co_return;
    }
    if (p.size() < 2) throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads");
    // Run creation finds (or, with if_not_exists: "create", makes) the thread itself.
    if (verb == http::verb::post && p[2 < p.size() ? 2 : 0] == "runs" &&
        (p.size() == 3 || (p.size() == 4 && (p[3] == "stream" || p[3] == "wait")))) {
        const std::string how = p.size() == 3 ? std::string("create") : p[3];
        co_await create_run(c, false, how);
        co_return;
    }
    auto th = thread_or_404(c, p[1]);
    if (p.size() == 2) {
        if (verb == http::verb::get) {
            reply(c, 200, th->to_json());
        } else if (verb == http::verb::patch) {
            json::object body = body_object(c);
            if (auto m = opt_object(body, "metadata"))
                for (auto& [k, v] : *m) th->metadata[k] = v;
            th->updated_at = now_iso();
            auto saving = save_record(shared_from_this(), th->key);
            co_await std::move(saving);
            reply(c, 200, th->to_json());
        } else if (verb == http::verb::delete_) {
            if (th->busy())
                throw http_error(409, "thread '" + th->thread_id + "' has a run in flight" +
                                          (th->queue.empty() ? std::string() : " (" + th->queue.front()->run_id + ")") + "; cancel it first");
            co_await drop_thread(th);
            for (auto it = runs.begin(); it != runs.end();)
                it = it->second->thread_key == th->key ? runs.erase(it) : std::next(it);
            auto forgetting = save_record(shared_from_this(), th->key);
            co_await std::move(forgetting);
            c.status = 204;
            reply(c, 204, nullptr);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads/{thread_id}");
        }
        co_return;
    }
    const std::string& what = p[2];
    if (what == "stream" && p.size() == 3 && verb == http::verb::get) {
        auto modes = query_modes(c);
        co_await relay_thread(c, th, std::move(modes));
        co_return;
    }
    if (what == "runs") {
        co_await route_runs(c, th);
        co_return;
    }
    if (what == "copy" && p.size() == 3 && verb == http::verb::post) {
        // The copy takes no fields (LangGraph's SDKs send none); a body is refused unless it is
        // empty or an empty object, before anything is copied.
        json::object body = body_object(c);
        if (!body.empty())
            throw http_error(422, "field '" + std::string(body.begin()->key()) +
                                      "' is not taken by POST /threads/{thread_id}/copy (send no body or {})");
        auto copy = make_thread(new_uuid(), c.owner, th->metadata);
        copy->graph_id = th->graph_id;
        copy->values = th->values;
        copy->interrupts = th->interrupts;
        copy->status = th->status == "busy" ? "idle" : th->status;
        if (auto a = graph_of(*th)) {
            auto saver = a->spec.core->saver;
            co_await saver->copy_thread(th->key, copy->key);
        }
        auto saving = save_record(shared_from_this(), copy->key);
        co_await std::move(saving);
        reply(c, 200, copy->to_json());
        co_return;
    }
    auto a = graph_of(*th);
    if (what == "state" && p.size() == 3 && verb == http::verb::get) {
        if (!a) {
            reply(c, 200, empty_thread_state());
            co_return;
        }
        auto req = std::make_unique<detail::state_request>();
        req->graph = a->spec.core;
        req->thread_id = th->key;
        auto snap = co_await detail::get_state(std::move(req));
        reply(c, 200, snap.checkpoint_id.empty() ? empty_thread_state() : thread_state(a->table(), th->thread_id, snap));
        co_return;
    }
    // At a checkpoint: GET .../state/{checkpoint_id}, or POST .../state/checkpoint {checkpoint: {checkpoint_id}}.
    if (what == "state" && p.size() == 4 &&
        (verb == http::verb::get || (verb == http::verb::post && p[3] == "checkpoint"))) {
        std::string cp_id = p[3];
        if (verb == http::verb::post) {
            json::object body = body_object(c);
            auto cp = opt_object(body, "checkpoint");
            auto id = cp ? opt_string(*cp, "checkpoint_id") : std::nullopt;
            if (!id) throw http_error(422, "field 'checkpoint.checkpoint_id' is required");
            cp_id = *id;
        }
        if (!a) throw http_error(404, "checkpoint '" + cp_id + "' not found on thread '" + th->thread_id + "'");
        auto req = std::make_unique<detail::state_request>();
        req->graph = a->spec.core;
        req->thread_id = th->key;
        req->checkpoint_id = cp_id;
        auto snap = co_await detail::get_state(std::move(req));
        if (snap.checkpoint_id.empty()) throw http_error(404, "checkpoint '" + cp_id + "' not found on thread '" + th->thread_id + "'");
        reply(c, 200, thread_state(a->table(), th->thread_id, snap));
        co_return;
    }
    if (what == "state" && p.size() == 3 && verb == http::verb::post) {
        json::object body = body_object(c);
        if (!a) throw http_error(422, "thread '" + th->thread_id + "' has no graph yet: create it with metadata.graph_id, or run it first");
        if (th->busy()) throw http_error(409, "thread '" + th->thread_id + "' has a run in flight; update its state when it ends");
        auto req = std::make_unique<detail::update_request>();
        req->graph = a->spec.core;
        req->thread_id = th->key;
        if (auto* v = field(body, "values")) {
            if (!v->is_object()) wrong_type("values", "an object (state fields)", *v);
            req->values = update_of(a->table(), v->get_object(), "values");
        } else {
            req->values = detail::update_box(a->table());
        }
        if (auto n = opt_string(body, "as_node")) {
            if (!a->spec.core->topo.find(*n)) throw http_error(422, "as_node '" + *n + "' is not a node of graph '" + a->spec.graph_id + "'");
            req->as_node = *n;
        }
        if (auto id = opt_string(body, "checkpoint_id")) req->checkpoint_id = *id;
        if (auto cp = opt_object(body, "checkpoint"))
            if (auto id = opt_string(*cp, "checkpoint_id")) req->checkpoint_id = *id;
        auto id = co_await detail::update_state(std::move(req));
        co_await refresh(th);
        reply(c, 200, json::object{{"checkpoint", checkpoint_ref(th->thread_id, id)}});
        co_return;
    }
    if (what == "history" && p.size() == 3 && (verb == http::verb::post || verb == http::verb::get)) {
        json::object body = verb == http::verb::post ? body_object(c) : json::object{};
        auto limit = verb == http::verb::post ? opt_int(body, "limit", 10, 1, 10000) : c.query.integer("limit", 10, 1, 10000);
        std::optional<std::string> before = c.query.get("before");
        if (auto* b = field(body, "before")) {
            if (b->is_string()) before = std::string(b->get_string());
            else if (b->is_object()) {
                auto inner = b->get_object().if_contains("configurable");
                const json::object& o = inner && inner->is_object() ? inner->get_object() : b->get_object();
                before = opt_string(o, "checkpoint_id");
            } else wrong_type("before", "a checkpoint id or a checkpoint config", *b);
        }
        auto meta = opt_object(body, "metadata");
        json::array out;
        if (a) {
            auto req = std::make_unique<detail::state_request>();
            req->graph = a->spec.core;
            req->thread_id = th->key;
            req->list.before = before;
            if (!meta) req->list.limit = static_cast<std::size_t>(limit);
            auto list = co_await detail::get_state_history(std::move(req));
            for (const auto& d : list) {
                if (out.size() >= static_cast<std::size_t>(limit)) break;
                auto s = thread_state(a->table(), th->thread_id, d);
                if (meta && !contains(s["metadata"], *meta)) continue;
                out.push_back(std::move(s));
            }
        }
        reply(c, 200, out);
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

awaitable<void> server::impl::create_run(call& c, bool stateless, const std::string& how) {
    std::shared_ptr<thread_rec> th;
    auto run = co_await prepare_run(c, th, stateless);
    enqueue(th, run);
    if (how == "stream") {
        auto modes = run->modes;
        co_await relay(c, run, std::move(modes), 0);
    } else if (how == "wait") {
        co_await wait_and_answer(c, run, true);
    } else {
        reply(c, 200, run->to_json(), location_headers(*run, false));
    }
}

awaitable<void> server::impl::route_runs(call& c, std::shared_ptr<thread_rec> th) {
    auto& p = c.path; // threads, tid, runs, ...
    auto verb = c.req.method();
    if (p.size() == 3) {
        if (verb == http::verb::post) {
            const std::string how = "create";
            co_await create_run(c, false, how);
        } else if (verb == http::verb::get) {
            auto limit = c.query.integer("limit", 10, 1, 10000), offset = c.query.integer("offset", 0, 0, INT64_MAX);
            auto status = c.query.get("status");
            std::vector<std::shared_ptr<run_rec>> list;
            for (const auto& [rid, r] : runs)
                if (r->thread_key == th->key && (!status || r->status == *status)) list.push_back(r);
            std::stable_sort(list.begin(), list.end(), [](const auto& x, const auto& y) { return y->created_at < x->created_at; });
            json::array out;
            for (std::size_t i = static_cast<std::size_t>(offset); i < list.size() && out.size() < static_cast<std::size_t>(limit); ++i)
                out.push_back(list[i]->to_json());
            reply(c, 200, out);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on /threads/{thread_id}/runs");
        }
        co_return;
    }
    if (p.size() == 4 && (p[3] == "stream" || p[3] == "wait") && verb == http::verb::post) {
        co_await create_run(c, false, p[3]);
        co_return;
    }
    auto run = run_or_404(c, th->thread_id, p[3]);
    if (p.size() == 4) {
        if (verb == http::verb::get) {
            reply(c, 200, run->to_json());
        } else if (verb == http::verb::delete_) {
            if (!run->finished) throw http_error(409, "run '" + run->run_id + "' is " + run->status + "; cancel it before deleting it");
            runs.erase(run->run_id);
            reply(c, 204, nullptr);
        } else {
            throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on a run");
        }
        co_return;
    }
    if (p.size() == 5 && p[4] == "join" && verb == http::verb::get) {
        co_await wait_and_answer(c, run, false);
        co_return;
    }
    if (p.size() == 5 && p[4] == "stream" && verb == http::verb::get) {
        std::set<std::string> modes = query_modes(c).value_or(run->modes);
        if (c.query.flag("cancel_on_disconnect")) run->cancel_on_disconnect = true;
        std::size_t after = run->events_base; // without Last-Event-ID: from the oldest event kept
        if (auto last = c.req.find("Last-Event-ID"); last != c.req.end()) {
            try {
                after = static_cast<std::size_t>(std::stoull(std::string(last->value()))) + 1;
            } catch (const std::exception&) {
                throw http_error(422, "header Last-Event-ID must be an event id (a number), got '" + std::string(last->value()) + "'");
            }
            if (after < run->events_base)
                throw http_error(410, "run '" + run->run_id + "' keeps its last " + std::to_string(opts.max_events_per_run) +
                                          " events: the oldest kept has id " + std::to_string(run->events_base) +
                                          ", so the events after id " + std::string(last->value()) +
                                          " cannot be replayed; join without Last-Event-ID or read the run's result (join)");
        }
        co_await relay(c, run, std::move(modes), after);
        co_return;
    }
    if (p.size() == 5 && p[4] == "cancel" && verb == http::verb::post) {
        auto action = c.query.get("action").value_or("interrupt");
        if (action != "interrupt" && action != "rollback") throw http_error(422, "query parameter 'action' must be interrupt or rollback (got '" + action + "')");
        if (run->finished) throw http_error(409, "run '" + run->run_id + "' has already finished (" + run->status + ")");
        if (action == "rollback" && run->rollback_decided && !run->rollback)
            throw http_error(409, "run '" + run->run_id + "' has already ended (" + run->status +
                                      ") and is settling; it can no longer be rolled back");
        if (action == "rollback") run->rollback = true;
        cancel_run(*run);
        if (c.query.flag("wait")) {
            while (!run->finished) co_await wait_change(run, std::chrono::seconds(1));
            reply(c, 204, nullptr);
        } else {
            reply(c, 202, nullptr);
        }
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

// -- the Store (/store/...) ----------------------------------------------------------------

namespace {

/// A namespace given as a JSON array of strings (`what` names the field); checked by the store.
store::namespace_path namespace_of(const json::value* v, const std::string& what, bool allow_empty) {
    store::namespace_path ns;
    if (!v) {
        if (allow_empty) return ns;
        throw http_error(422, "field '" + what + "' is required (an array of strings)");
    }
    if (!v->is_array()) wrong_type(what, "an array of strings", *v);
    for (const auto& l : v->get_array()) {
        if (!l.is_string()) wrong_type(what + "[" + std::to_string(ns.size()) + "]", "a string", l);
        ns.emplace_back(l.get_string());
    }
    try {
        store::base_store::check_namespace(ns, allow_empty);
    } catch (const store::store_error& e) {
        throw http_error(422, "field '" + what + "': " + e.what());
    }
    return ns;
}

std::string required_key(const json::object& body) {
    auto k = opt_string(body, "key");
    if (!k) throw http_error(422, "field 'key' is required (a string)");
    if (k->empty()) throw http_error(422, "field 'key' must not be empty");
    return *k;
}

std::optional<bool> opt_bool(const json::object& o, std::string_view k) {
    auto* v = field(o, k);
    if (!v) return std::nullopt;
    if (!v->is_bool()) wrong_type(std::string(k), "a boolean", *v);
    return v->get_bool();
}

json::array namespace_json(const store::namespace_path& ns) {
    json::array a;
    for (const auto& l : ns) a.emplace_back(l);
    return a;
}

/// An item as the client sees it: `scope` labels (its key's, see route_store) left out.
json::object item_json(const store::item& it, std::size_t scope) {
    const store::namespace_path ns(it.ns.begin() + static_cast<std::ptrdiff_t>(std::min(scope, it.ns.size())), it.ns.end());
    return json::object{{"namespace", namespace_json(ns)},
                        {"key", it.key},
                        {"value", it.value},
                        {"created_at", iso_of(it.created_at)},
                        {"updated_at", iso_of(it.updated_at)}};
}

/// A store error as the answer: the client's mistakes are 422 (naming the namespace or key),
/// the storage's faults 500.
[[noreturn]] void rethrow_store(const store::store_error& e) {
    switch (e.kind()) {
    case store::store_errc::invalid_namespace:
    case store::store_errc::invalid_key:
    case store::store_errc::invalid_filter: throw http_error(422, e.what());
    default: throw http_error(500, std::string("store failure: ") + e.what());
    }
}

} // namespace

awaitable<void> server::impl::route_store(call& c) {
    const auto& p = c.path;
    auto verb = c.req.method();
    const std::string route = std::string(c.req.method_string()) + " " + std::string(c.req.target());
    if (!opts.store) throw http_error(404, "no Store is configured on this server (" + route + ")");
    auto& st = *opts.store;
    // With API keys, the items of a key live under a first label of its own (its digest, as a
    // thread's owner): each namespace a client names is taken below it, and it is left out of
    // every namespace answered, so a key neither reads nor finds another's items. Without keys
    // (owner "") namespaces are used as given.
    const std::size_t scope = c.owner.empty() ? 0 : 1;
    auto scoped = [&](store::namespace_path ns) {
        if (scope) ns.insert(ns.begin(), c.owner);
        return ns;
    };
    try {
        if (p.size() == 2 && p[1] == "items" && verb == http::verb::put) {
            json::object body = body_object(c);
            auto ns = namespace_of(field(body, "namespace"), "namespace", false);
            auto key = required_key(body);
            auto* v = field(body, "value");
            if (!v) throw http_error(422, "field 'value' is required (an object)");
            if (!v->is_object()) wrong_type("value", "an object", *v);
            const json::object value = v->get_object();
            store::put_options po;
            std::vector<std::string> index_fields;
            if (auto* ix = field(body, "index")) {
                if (ix->is_bool() && !ix->get_bool()) po.index = store::index_spec::off();
                else if (ix->is_array()) {
                    for (const auto& f : ix->get_array()) {
                        if (!f.is_string()) wrong_type("index[" + std::to_string(index_fields.size()) + "]", "a string", f);
                        index_fields.emplace_back(f.get_string());
                    }
                    po.index = store::index_spec(index_fields);
                } else
                    wrong_type("index", "false, null or an array of field paths", *ix);
            }
            double ttl = opt_number(body, "ttl", 0);
            if (ttl < 0) throw http_error(422, "field 'ttl' must be a number of minutes, not negative (got " + std::to_string(ttl) + ")");
            if (ttl > 0) po.ttl = std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(ttl * 60'000)));
            const auto where = scoped(std::move(ns));
            co_await st.put(where, key, value, po);
            reply(c, 204, nullptr);
            co_return;
        }
        if (p.size() == 2 && p[1] == "items" && verb == http::verb::get) {
            auto joined = c.query.get("namespace");
            if (!joined || joined->empty())
                throw http_error(422, "query parameter 'namespace' is required (labels joined by '.')");
            auto key = c.query.get("key");
            if (!key || key->empty()) throw http_error(422, "query parameter 'key' is required");
            auto ns = store::base_store::parse_namespace(*joined);
            try {
                store::base_store::check_namespace(ns);
            } catch (const store::store_error& e) {
                throw http_error(422, "query parameter 'namespace': " + std::string(e.what()));
            }
            std::optional<bool> refresh;
            if (auto r = c.query.get("refresh_ttl")) refresh = c.query.flag("refresh_ttl");
            const auto where = scoped(std::move(ns));
            auto it = co_await st.get(where, *key, refresh);
            if (!it) reply(c, 200, nullptr); // LangGraph answers null for a missing item
            else reply(c, 200, item_json(*it, scope));
            co_return;
        }
        if (p.size() == 2 && p[1] == "items" && verb == http::verb::delete_) {
            json::object body = body_object(c);
            auto ns = namespace_of(field(body, "namespace"), "namespace", false);
            auto key = required_key(body);
            const auto where = scoped(std::move(ns));
            co_await st.remove(where, key);
            reply(c, 204, nullptr);
            co_return;
        }
        if (p.size() == 3 && p[1] == "items" && p[2] == "search" && verb == http::verb::post) {
            json::object body = body_object(c);
            auto prefix = namespace_of(field(body, "namespace_prefix"), "namespace_prefix", true);
            store::search_options so;
            auto filter = opt_object(body, "filter").value_or(json::object{});
            if (!filter.empty()) so.filter = store::value_filter(filter);
            auto query = opt_string(body, "query").value_or("");
            so.query = query;
            so.limit = static_cast<std::size_t>(opt_int(body, "limit", 10, 0, 10'000));
            so.offset = static_cast<std::size_t>(opt_int(body, "offset", 0, 0, 1'000'000'000));
            if (auto r = opt_bool(body, "refresh_ttl"))
                so.refresh_ttl = *r ? store::search_options::refresh::yes : store::search_options::refresh::no;
            const auto under = scoped(std::move(prefix));
            auto found = co_await st.search(under, so);
            json::array items;
            for (const auto& it : found) {
                auto o = item_json(it, scope);
                if (it.score) o["score"] = *it.score;
                items.emplace_back(std::move(o));
            }
            reply(c, 200, json::object{{"items", std::move(items)}});
            co_return;
        }
        if (p.size() == 2 && p[1] == "namespaces" && verb == http::verb::post) {
            json::object body = body_object(c);
            const auto prefix = scoped(namespace_of(field(body, "prefix"), "prefix", true));
            auto suffix = namespace_of(field(body, "suffix"), "suffix", true);
            store::namespace_query q;
            if (!prefix.empty()) q.prefix = &prefix;
            if (!suffix.empty()) q.suffix = &suffix;
            const auto depth = static_cast<std::size_t>(opt_int(body, "max_depth", 0, 0, 1'000));
            q.max_depth = depth ? depth + scope : 0;
            const auto limit = static_cast<std::size_t>(opt_int(body, "limit", 100, 0, 10'000));
            const auto offset = static_cast<std::size_t>(opt_int(body, "offset", 0, 0, 1'000'000'000));
            // A suffix as long as a whole scoped namespace would reach into the key's label: those
            // are dropped here, so the store does not page them (limit and offset applied below).
            const bool filter_here = scope && !suffix.empty();
            q.limit = filter_here ? SIZE_MAX : limit;
            q.offset = filter_here ? 0 : offset;
            auto list = co_await st.list_namespaces(q);
            json::array out;
            std::size_t skipped = 0;
            for (const auto& ns : list) {
                const store::namespace_path mine(ns.begin() + static_cast<std::ptrdiff_t>(std::min(scope, ns.size())), ns.end());
                if (filter_here && (mine.size() < suffix.size() || skipped++ < offset)) continue;
                if (filter_here && out.size() >= limit) break;
                out.emplace_back(namespace_json(mine));
            }
            reply(c, 200, json::object{{"namespaces", std::move(out)}});
            co_return;
        }
    } catch (const store::store_error& e) {
        rethrow_store(e);
    }
    throw http_error(404, "no route " + route);
}

awaitable<void> server::impl::dispatch(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    // A browser's CORS preflight: no key needed (browsers send none with it).
    if (verb == http::verb::options) {
        if (c.cors_origin.empty()) throw http_error(405, "method OPTIONS is not allowed (CORS is off for this origin)");
        c.answer.emplace();
        c.answer->status = 204;
        c.answer->headers = {{"Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"},
                             {"Access-Control-Allow-Headers", "Content-Type, X-Api-Key, Last-Event-ID, Authorization"},
                             {"Access-Control-Max-Age", "600"}};
        co_return;
    }
    if (p.size() == 1 && p[0] == "ok" && verb == http::verb::get) {
        reply(c, 200, json::object{{"ok", true}});
        co_return;
    }
    // The studio page's files: no key needed (the page asks for one and sends it with its calls).
    if (!p.empty() && p[0] == "studio" && verb == http::verb::get) {
        const auto* f = p.size() <= 2 ? studio::find_asset(p.size() == 2 ? p[1] : std::string()) : nullptr;
        if (!f) throw http_error(404, "no studio file " + std::string(c.req.target()) + " (the page is at /studio)");
        reply_text(c, 200, std::string(f->body), f->type);
        co_return;
    }
    if (!opts.api_keys.empty()) {
        auto k = c.req.find("x-api-key");
        if (k == c.req.end()) throw http_error(401, "missing x-api-key header");
        std::string key(k->value());
        if (!opts.api_keys.count(key)) throw http_error(401, "unknown x-api-key");
        c.owner = owner_of(key);
    }
    if (p.size() == 1 && p[0] == "info" && verb == http::verb::get) {
        reply(c, 200,
                            json::object{{"version", opts.version},
                                         {"server", "stategraph"},
                                         {"flags", json::object{{"assistants", true}, {"crons", false}, {"langsmith", false}, {"store", opts.store != nullptr}}}});
        co_return;
    }
    if (!p.empty() && p[0] == "assistants") {
        co_await route_assistants(c);
        co_return;
    }
    if (!p.empty() && p[0] == "threads") {
        co_await route_threads(c);
        co_return;
    }
    if (!p.empty() && p[0] == "store") {
        co_await route_store(c);
        co_return;
    }
    if (p.size() == 2 && p[0] == "runs" && (p[1] == "stream" || p[1] == "wait") && verb == http::verb::post) {
        co_await create_run(c, true, p[1]);
        co_return;
    }
    if (p.size() == 1 && p[0] == "runs" && verb == http::verb::post) {
        const std::string how = "create";
        co_await create_run(c, true, how);
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

awaitable<void> server::impl::session(tcp::socket sock) {
    auto self = shared_from_this();
    beast::tcp_stream stream(std::move(sock));
    auto reg = sessions.insert(sessions.end(), &stream);
    beast::flat_buffer buf;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(opts.body_limit);
        parser.header_limit(static_cast<std::uint32_t>(opts.header_limit));
        // The read deadline: a timer that cancels the read (tcp_stream's own timeout would close
        // the socket, and a slow client would get no 408).
        bool timed_out = false;
        net::steady_timer deadline(ex);
        deadline.expires_after(opts.read_timeout);
        deadline.async_wait([&timed_out, &stream](boost::system::error_code wec) {
            if (wec) return;
            timed_out = true;
            boost::system::error_code ignored;
            stream.socket().cancel(ignored);
        });
        auto [ec, n] = co_await http::async_read(stream, buf, parser, net::as_tuple(use_awaitable));
        deadline.cancel();
        if (ec) {
            unsigned status = 0;
            std::string detail;
            if (ec == http::error::body_limit) {
                status = 413;
                detail = "request body larger than " + std::to_string(opts.body_limit) + " bytes";
            } else if (ec == http::error::header_limit) {
                status = 431;
                detail = "request headers larger than " + std::to_string(opts.header_limit) + " bytes";
            } else if (timed_out) {
                if (parser.got_some()) {
                    status = 408;
                    detail = "the request did not arrive within " + std::to_string(opts.read_timeout.count()) + " ms";
                }
            } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream &&
                       ec != http::error::partial_message) {
                status = 400;
                detail = "malformed HTTP request: " + ec.message();
            }
            if (status) {
                call c;
                c.stream = &stream;
                c.keep_alive = false;
                c.req.version(11);
                stream.expires_after(std::chrono::seconds(5));
                reply(c, status, json::object{{"detail", detail}});
                co_await write_answer(c);
                if (opts.log) opts.log(std::to_string(status) + " (unread request): " + detail);
            }
            break;
        }
        stream.expires_never();
        call c;
        c.req = parser.release();
        c.stream = &stream;
        c.keep_alive = c.req.keep_alive() && !stopping;
        if (auto origin = c.req.find(http::field::origin); origin != c.req.end() && !opts.cors_origins.empty()) {
            std::string o(origin->value());
            if (opts.cors_origins.count("*")) c.cors_origin = "*";
            else if (opts.cors_origins.count(o)) c.cors_origin = o;
        }
        std::string_view target = c.req.target();
        auto q = target.find('?');
        std::string_view path = target.substr(0, q);
        for (std::size_t i = 0; i < path.size();) {
            auto j = path.find('/', i);
            if (j == std::string_view::npos) j = path.size();
            if (j > i) c.path.push_back(percent_decode(path.substr(i, j - i)));
            i = j + 1;
        }
        if (q != std::string_view::npos) {
            std::string_view qs = target.substr(q + 1);
            for (std::size_t i = 0; i <= qs.size();) {
                auto j = qs.find('&', i);
                if (j == std::string_view::npos) j = qs.size();
                auto item = qs.substr(i, j - i);
                if (!item.empty()) {
                    auto eq = item.find('=');
                    c.query.items[percent_decode(item.substr(0, eq))] =
                        eq == std::string_view::npos ? "" : percent_decode(item.substr(eq + 1));
                }
                i = j + 1;
            }
        }
        auto started = std::chrono::steady_clock::now();
        std::optional<http_error> failure;
        try {
            co_await dispatch(c);
        } catch (const http_error& e) {
            failure = e;
        } catch (const std::exception& e) {
            try {
                rethrow_as_http(e);
            } catch (const http_error& h) {
                failure = h;
            }
        }
        if (failure) {
            if (c.streamed) c.keep_alive = false; // too late for a status: the body has begun
            else reply(c, failure->status(), json::object{{"detail", failure->what()}});
        }
        if (c.answer && !c.streamed) co_await write_answer(c);
        if (opts.log) {
            auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
            opts.log(std::string(c.req.method_string()) + " " + std::string(path) + " " + std::to_string(c.status) + " " +
                     std::to_string(static_cast<long>(ms)) + "ms");
        }
        if (!c.keep_alive) break;
    }
    sessions.erase(reg);
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.socket().close(ignored);
}

awaitable<void> server::impl::accept_loop() {
    auto self = shared_from_this();
    while (!stopping) {
        auto [ec, sock] = co_await acceptor.async_accept(net::as_tuple(use_awaitable));
        if (ec) {
            if (stopping || ec == net::error::operation_aborted) co_return;
            continue;
        }
        // Events go out as they happen: no Nagle delay between a header and its first chunk.
        boost::system::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        if (open_connections >= std::max<std::size_t>(opts.max_connections, 1)) {
            net::co_spawn(ex, refuse(self, std::move(sock)), net::detached);
            continue;
        }
        ++open_connections;
        net::co_spawn(ex, session(std::move(sock)), [self](std::exception_ptr) { --self->open_connections; });
    }
}

awaitable<void> server::impl::refuse(std::shared_ptr<impl> self, tcp::socket sock) {
    beast::tcp_stream stream(std::move(sock));
    stream.expires_after(std::chrono::seconds(2));
    http::response<http::string_body> res{http::status::service_unavailable, 11};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::retry_after, "1");
    res.keep_alive(false);
    res.body() = json::serialize(json::object{
        {"detail", "the server has " + std::to_string(self->open_connections) +
                       " connections open, the most it takes (max_connections); retry shortly"}});
    res.prepare_payload();
    auto [ec, n] = co_await http::async_write(stream, res, net::as_tuple(use_awaitable));
    (void)ec;
    (void)n;
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
}

server::server(net::any_io_executor ex, server_options options) : impl_(std::make_shared<impl>(ex, std::move(options))) {}

server::~server() {
    if (impl_) impl_->stopping = true;
    boost::system::error_code ignored;
    if (impl_) impl_->acceptor.close(ignored);
}

void server::add(assistant_spec spec) {
    if (!spec.core || !spec.core->saver)
        throw std::invalid_argument("server::add: graph '" + spec.graph_id + "' has no checkpointer (use make_assistant)");
    if (impl_->find_assistant(spec.graph_id))
        throw std::invalid_argument("server::add: graph id '" + spec.graph_id + "' is already served");
    auto a = std::make_shared<assistant_rec>(assistant_rec{std::move(spec), "", now_iso()});
    a->assistant_id = assistant_uuid(a->spec.graph_id);
    impl_->assistants.push_back(std::move(a));
}

unsigned short server::listen() {
    auto& acc = impl_->acceptor;
    tcp::endpoint ep(net::ip::make_address(impl_->opts.host), impl_->opts.port);
    acc.open(ep.protocol());
    acc.set_option(net::socket_base::reuse_address(true));
    acc.bind(ep);
    acc.listen();
    impl_->bound = acc.local_endpoint().port();
    net::co_spawn(impl_->ex, impl::adopt_then_accept(impl_), net::detached);
    return impl_->bound;
}

void server::stop() {
    impl_->stopping = true;
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    for (auto* s : impl_->sessions) s->socket().cancel(ignored);
    // Thread-level streams end (they wait on their thread, not on the socket).
    for (auto& [id, th] : impl_->threads)
        for (auto* t : th->waiters) t->cancel();
}

void server::drain(std::function<void()> done) {
    stop();
    request_drain();
    net::co_spawn(impl_->ex, impl::wait_idle(impl_, std::move(done)), net::detached);
}

unsigned short server::port() const noexcept { return impl_->bound; }

} // namespace stategraph::server
