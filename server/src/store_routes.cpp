// /store/...: the long-term memory Store (put, get, delete, search, namespaces), scoped per API key.

#include "impl.hpp"

namespace stategraph::server {

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

} // namespace stategraph::server
