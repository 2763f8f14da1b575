/// @file sqlite_cache.cpp
/// @brief A SQLite saver's graph shapes (one `graphs` row per graph signature, shared by every
/// thread) and its node cache (entries of no thread, sealed to their namespace, key and expiry).

#include "sqlite_saver_impl.hpp"

#include <stategraph/core/error.hpp>

#include <boost/json/serialize.hpp>

namespace stategraph::checkpoint {

namespace {

// Node cache.
constexpr std::string_view sql_cache_get = "SELECT value, expires_at FROM cache WHERE ns = ?1 AND key = ?2";
constexpr std::string_view sql_cache_put =
    "INSERT OR REPLACE INTO cache(ns, key, value, expires_at) VALUES(?1, ?2, ?3, ?4)";
constexpr std::string_view sql_cache_purge =
    "DELETE FROM cache WHERE ns = ?1 AND expires_at IS NOT NULL AND expires_at <= ?2";
constexpr std::string_view sql_cache_clear_ns = "DELETE FROM cache WHERE ns = ?1";
constexpr std::string_view sql_cache_clear_all = "DELETE FROM cache";
/// The channel name a cache entry is sealed to, beside its namespace, key and expiry.
constexpr std::string_view cache_channel = "__cache__";

} // namespace

using namespace sqlite_detail;

void sqlite_saver::impl::put_graph(const std::string& signature, const std::vector<std::string>& shape) {
    if (graph_known(signature)) return;
    static const std::string none;
    const auto bytes = protect(codec::encode_shape(shape, signature), {graph_channel, signature});
    transaction t(*this, true, none, "saving the graph's shape");
    {
        stmt s(*this, sql_put_graph, none, "saving the graph's shape");
        s.bind_static(1, signature).bind_blob_static(2, bytes);
        s.run();
    }
    t.commit();
    graph_stored(t, signature);
}

std::optional<std::vector<std::string>> sqlite_saver::impl::get_graph(const std::string& signature) {
    static const std::string none;
    stmt g(*this, sql_get_graph, none, "reading the graph's shape");
    g.bind_static(1, signature);
    if (!g.step()) return std::nullopt;
    try {
        std::string plain;
        return codec::shape_from(reveal(g.bytes(0), {graph_channel, signature}, plain), signature);
    } catch (const codec::corrupt& e) {
        throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what() + where(), {signature});
    }
}

std::optional<boost::json::value> sqlite_saver::impl::cache_get(const std::string& ns, const std::string& key) {
    static const std::string none;
    stmt s(*this, sql_cache_get, none, "reading the node cache");
    s.bind_static(1, ns).bind_static(2, key);
    if (!s.step()) return std::nullopt;
    const std::string expires = s.is_null(1) ? std::string() : std::to_string(s.integer(1));
    if (!s.is_null(1) && s.integer(1) <= now_ms()) return std::nullopt;
    std::string plain;
    std::string_view text;
    try {
        text = reveal(s.bytes(0), {cache_channel, ns, key, expires}, plain);
    } catch (const codec::corrupt& e) {
        throw common::cache_corrupt(ns, key, e.what(), where());
    }
    return common::cache_value(text, ns, key, where());
}

void sqlite_saver::impl::cache_put(const std::string& ns, const std::string& key, const boost::json::value& value,
                                   std::chrono::milliseconds ttl) {
    static const std::string none;
    const auto now = now_ms();
    const std::optional<std::int64_t> expires =
        ttl.count() > 0 ? std::optional<std::int64_t>(now + ttl.count()) : std::nullopt;
    const auto bytes = protect(boost::json::serialize(value),
                               {cache_channel, ns, key, expires ? std::to_string(*expires) : std::string()});
    transaction t(*this, true, none, "writing the node cache");
    {
        stmt s(*this, sql_cache_purge, none, "writing the node cache");
        s.bind_static(1, ns).bind(2, now);
        s.run();
    }
    {
        stmt s(*this, sql_cache_put, none, "writing the node cache");
        s.bind_static(1, ns).bind_static(2, key).bind_blob_static(3, bytes);
        if (expires) s.bind(4, *expires);
        else s.bind_null(4);
        s.run();
    }
    t.commit();
}

std::size_t sqlite_saver::impl::cache_clear(const std::vector<std::string>& namespaces) {
    static const std::string none;
    std::size_t n = 0;
    transaction t(*this, true, none, "clearing the node cache");
    if (namespaces.empty()) {
        stmt s(*this, sql_cache_clear_all, none, "clearing the node cache");
        s.run();
        n = static_cast<std::size_t>(sqlite3_changes64(db.get()));
    }
    for (const auto& ns : namespaces) {
        stmt s(*this, sql_cache_clear_ns, none, "clearing the node cache");
        s.bind_static(1, ns);
        s.run();
        n += static_cast<std::size_t>(sqlite3_changes64(db.get()));
    }
    t.commit();
    return n;
}

} // namespace stategraph::checkpoint
