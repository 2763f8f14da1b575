// The PostgreSQL saver's node cache (cache_get, cache_put, cache_clear) and the graph shapes
// shared by all threads (put_graph, get_graph).
#include "postgres_saver_impl.hpp"

#include <boost/json/serialize.hpp>

namespace stategraph::checkpoint {

namespace {

// Node cache.
constexpr std::string_view sql_cache_get = "SELECT value, expires_at FROM stategraph_cache WHERE ns = $1 AND key = $2";
constexpr std::string_view sql_cache_purge =
    "DELETE FROM stategraph_cache WHERE ns = $1 AND expires_at IS NOT NULL AND expires_at <= $2::bigint";
constexpr std::string_view sql_cache_put =
    "INSERT INTO stategraph_cache(ns, key, value, expires_at) VALUES($1, $2, $3, $4::bigint) "
    "ON CONFLICT (ns, key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at";
// $1: the namespaces (NULL: all), $2: the call's id (as sql_break_lease).
constexpr std::string_view sql_cache_clear =
    "WITH gone AS (DELETE FROM stategraph_cache WHERE ($1::text[] IS NULL OR ns = ANY($1::text[])) AND NOT EXISTS "
    "(SELECT 1 FROM stategraph_answers WHERE call_id = $2) RETURNING 1) "
    "INSERT INTO stategraph_answers(call_id, answer, at) SELECT $2, count(*)::text, stategraph_now_ms() FROM gone "
    "ON CONFLICT (call_id) DO NOTHING";
constexpr std::string_view sql_get_graph = "SELECT value FROM stategraph_graphs WHERE version = $1";

/// The channel a cache entry is sealed to, beside its namespace, key and expiry.
constexpr std::string_view cache_channel = "__cache__";

} // namespace

asio::awaitable<std::optional<json::value>> postgres_saver::impl::cache_get(const std::string& ns,
                                                                            const std::string& key) {
    static const std::string none;
    call c{none, "reading the node cache", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<json::value>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_cache_get);
        batch.back().text(ns).text(key);
        auto res = co_await conn.run(batch, query_timeout());
        const auto& r = res[0];
        if (r.rows() == 0) co_return std::nullopt;
        const std::string expires = r.is_null(0, 1) ? std::string() : std::to_string(r.integer(0, 1));
        if (!r.is_null(0, 1) && r.integer(0, 1) <= now_ms()) co_return std::nullopt;
        std::string_view text;
        try {
            text = codec::unseal(r.bytes(0, 0), {cache_channel, ns, key, expires});
        } catch (const codec::corrupt& e) {
            throw common::cache_corrupt(ns, key, e.what(), where());
        }
        co_return common::cache_value(text, ns, key, where());
    };
    co_return co_await with_retry<std::optional<json::value>>(c, body);
}

asio::awaitable<void> postgres_saver::impl::cache_put(const std::string& ns, const std::string& key, const json::value& value,
                                                      std::chrono::milliseconds ttl) {
    const auto now = now_ms();
    const std::optional<std::int64_t> expires =
        ttl.count() > 0 ? std::optional<std::int64_t>(now + ttl.count()) : std::nullopt;
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    batch.emplace_back(sql_cache_purge);
    batch.back().text(ns).integer(now);
    batch.emplace_back(sql_cache_put);
    batch.back().text(ns).text(key).bytes(codec::seal(
        json::serialize(value), {cache_channel, ns, key, expires ? std::to_string(*expires) : std::string()}));
    if (expires) batch.back().integer(*expires);
    else batch.back().null();
    batch.emplace_back(sql_commit);
    static const std::string none;
    call c{none, "writing the node cache", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
        (void)co_await conn.run(batch, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

asio::awaitable<std::size_t> postgres_saver::impl::cache_clear(const std::vector<std::string>& namespaces) {
    const std::string id = call_id();
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_begin);
    batch.emplace_back(sql_cache_clear);
    if (namespaces.empty()) batch.back().null();
    else batch.back().text(text_array(namespaces));
    batch.back().text(id);
    batch.emplace_back(sql_answer);
    batch.back().text(id);
    batch.emplace_back(sql_forget_answers);
    batch.emplace_back(sql_commit);
    static const std::string none;
    call c{none, "clearing the node cache", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::size_t> {
        auto res = co_await conn.run(batch, query_timeout());
        co_return static_cast<std::size_t>(std::stoull(res[2].text(0, 0)));
    };
    co_return co_await with_retry<std::size_t>(c, body);
}

asio::awaitable<void> postgres_saver::impl::put_graph(const std::string& signature,
                                                      const std::vector<std::string>& shape) {
    {
        std::lock_guard lock(mutex);
        if (stored_graphs.count(signature)) co_return;
    }
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_put_graph);
    batch.back().text(signature).bytes(
        codec::seal(codec::encode_shape(shape, signature), {graph_channel, signature}));
    static const std::string none;
    call c{none, "saving the graph's shape", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
        (void)co_await conn.run(batch, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
    std::lock_guard lock(mutex);
    stored_graphs.insert(signature);
}

asio::awaitable<std::optional<std::vector<std::string>>> postgres_saver::impl::get_graph(const std::string& signature) {
    static const std::string none;
    call c{none, "reading the graph's shape", {}};
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<std::optional<std::vector<std::string>>> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_get_graph);
        batch.back().text(signature);
        auto res = co_await conn.run(batch, query_timeout());
        if (res[0].rows() == 0) co_return std::nullopt;
        try {
            co_return codec::shape_from(codec::unseal(res[0].bytes(0, 0), {graph_channel, signature}), signature);
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what() + where(),
                                   {signature});
        }
    };
    co_return co_await with_retry<std::optional<std::vector<std::string>>>(c, body);
}

// =============================================================================================

asio::awaitable<std::optional<json::value>> postgres_saver::cache_get(std::string ns, std::string key) {
    co_return co_await impl_->cache_get(ns, key);
}

asio::awaitable<void> postgres_saver::cache_put(std::string ns, std::string key, json::value value,
                                                std::chrono::milliseconds ttl) {
    co_await impl_->cache_put(ns, key, value, ttl);
}

asio::awaitable<std::size_t> postgres_saver::cache_clear(std::vector<std::string> namespaces) {
    co_return co_await impl_->cache_clear(namespaces);
}

asio::awaitable<void> postgres_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    co_await impl_->put_graph(signature, shape);
}

asio::awaitable<std::optional<std::vector<std::string>>> postgres_saver::get_graph(std::string signature) {
    co_return co_await impl_->get_graph(signature);
}

} // namespace stategraph::checkpoint
