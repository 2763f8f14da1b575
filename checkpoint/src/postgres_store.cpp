// The PostgreSQL store: `stategraph_store_items`, full text in a GIN-indexed tsvector.

#include <stategraph/checkpoint/store/postgres_store.hpp>

#include "pg_connection.hpp"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <cstdlib>

namespace stategraph::store {

namespace asio = boost::asio;
namespace json = boost::json;
namespace pg = checkpoint::pg;

namespace {

const char* const migration_v1[] = {
    "CREATE TABLE IF NOT EXISTS stategraph_store_items(prefix text NOT NULL, key text NOT NULL, value jsonb NOT NULL, "
    "created_at bigint NOT NULL, updated_at bigint NOT NULL, ttl_ms bigint, expires_at bigint, tsv tsvector, "
    "PRIMARY KEY(prefix, key))",
    "CREATE INDEX IF NOT EXISTS stategraph_store_items_tsv ON stategraph_store_items USING gin(tsv)",
    "CREATE INDEX IF NOT EXISTS stategraph_store_items_expires ON stategraph_store_items(expires_at) "
    "WHERE expires_at IS NOT NULL",
};

constexpr std::string_view sql_put =
    "INSERT INTO stategraph_store_items(prefix, key, value, created_at, updated_at, ttl_ms, expires_at, tsv) "
    "VALUES($1, $2, $3::jsonb, $4::bigint, $4::bigint, $5::bigint, $6::bigint, to_tsvector('simple', $7::text)) "
    "ON CONFLICT(prefix, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, "
    "ttl_ms = excluded.ttl_ms, expires_at = excluded.expires_at, tsv = excluded.tsv, "
    "created_at = CASE WHEN stategraph_store_items.expires_at IS NOT NULL AND "
    "stategraph_store_items.expires_at <= excluded.updated_at THEN excluded.created_at "
    "ELSE stategraph_store_items.created_at END";
constexpr std::string_view sql_get =
    "SELECT prefix, key, value::text, created_at, updated_at FROM stategraph_store_items "
    "WHERE prefix = $1 AND key = $2 AND (expires_at IS NULL OR expires_at > $3::bigint)";
constexpr std::string_view sql_refresh =
    "UPDATE stategraph_store_items SET expires_at = $3::bigint + ttl_ms WHERE prefix = $1 AND key = $2 "
    "AND ttl_ms IS NOT NULL AND expires_at > $3::bigint";
constexpr std::string_view sql_remove = "DELETE FROM stategraph_store_items WHERE prefix = $1 AND key = $2";
constexpr std::string_view sql_list =
    "SELECT prefix, key, value::text, created_at, updated_at FROM stategraph_store_items "
    "WHERE ($1 = '' OR prefix = $1 OR starts_with(prefix, $1 || '.')) "
    "AND (expires_at IS NULL OR expires_at > $2::bigint) ORDER BY updated_at DESC, prefix, key LIMIT $3::bigint";
constexpr std::string_view sql_search =
    "SELECT prefix, key, value::text, created_at, updated_at, ts_rank(tsv, q)::float8::text FROM "
    "stategraph_store_items, to_tsquery('simple', $4) AS q "
    "WHERE tsv @@ q AND ($1 = '' OR prefix = $1 OR starts_with(prefix, $1 || '.')) "
    "AND (expires_at IS NULL OR expires_at > $2::bigint) "
    "ORDER BY ts_rank(tsv, q) DESC, updated_at DESC LIMIT $3::bigint";
constexpr std::string_view sql_namespaces =
    "SELECT DISTINCT prefix FROM stategraph_store_items WHERE expires_at IS NULL OR expires_at > $1::bigint";
constexpr std::string_view sql_sweep =
    "DELETE FROM stategraph_store_items WHERE expires_at IS NOT NULL AND expires_at <= $1::bigint";

using pg::identifier;

} // namespace

struct postgres_store::impl {
    postgres_store_options opt;
    pg::pool pool;
    std::string schema_sql;

    explicit impl(postgres_store_options o)
        // The search path quoted, as the saver's: a mixed-case name ("Tenant1") is that schema,
        // not its lower-cased namesake.
        : opt(std::move(o)), pool(opt.conninfo, identifier(opt.schema) + ", pg_catalog", opt.pool_size, opt.connect_timeout),
          schema_sql(pg::create_schema_if_missing(opt.schema)) {}

    [[noreturn]] void fail(const std::string& doing, const std::string& why, const namespace_path& ns,
                           const std::string& key) const {
        std::string where = ns.empty() ? std::string() : " (namespace \"" + to_string(ns) + "\"" +
                                                             (key.empty() ? "" : ", key \"" + key + "\"") + ")";
        throw store_error(store_errc::storage_failure,
                          "postgres_store (schema " + opt.schema + "): " + doing + where + ": " + why, ns, key);
    }

    /// Runs `batch` on a pooled connection, retrying a lost connection (or a transient server
    /// error) with backoff until `retry_for` is spent.
    asio::awaitable<std::vector<pg::result>> run(const std::vector<pg::statement>& batch, const std::string& doing,
                                                 const namespace_path& ns = {}, const std::string& key = {}) {
        const auto deadline = std::chrono::steady_clock::now() + opt.retry_for;
        auto pause = std::chrono::milliseconds(20);
        std::string why;
        for (;;) {
            try {
                auto conn = co_await pool.get();
                try {
                    co_return co_await conn->run(batch, opt.query_timeout);
                } catch (const pg::connection_lost&) {
                    conn.discard();
                    throw;
                }
            } catch (const pg::connection_lost& e) {
                why = e.what();
            } catch (const pg::server_error& e) {
                if (!e.transient()) fail(doing, std::string("the server refused: ") + e.what(), ns, key);
                why = e.what();
            }
            if (std::chrono::steady_clock::now() >= deadline) fail(doing, "cannot reach the server: " + why, ns, key);
            asio::steady_timer t(co_await asio::this_coro::executor, pause);
            co_await t.async_wait(asio::use_awaitable);
            pause = std::min(pause * 2, std::chrono::milliseconds(1000));
        }
    }

    asio::awaitable<void> migrate() {
        std::vector<pg::statement> first;
        first.emplace_back("BEGIN");
        first.emplace_back("SELECT pg_advisory_xact_lock(8129, hashtext($1))");
        first.back().text(opt.schema);
        first.emplace_back(schema_sql);
        first.emplace_back("CREATE TABLE IF NOT EXISTS stategraph_store_schema (version integer NOT NULL)");
        first.emplace_back("SELECT coalesce(max(version), 0) FROM stategraph_store_schema");
        // One connection for the whole transaction.
        auto conn = co_await pool.get();
        std::vector<pg::result> res;
        try {
            res = co_await conn->run(first, opt.query_timeout);
        } catch (const pg::connection_lost& e) {
            conn.discard();
            fail("creating the store's tables", std::string("cannot reach the server: ") + e.what(), {}, {});
        } catch (const pg::server_error& e) {
            fail("creating the store's tables", std::string("the server refused: ") + e.what(), {}, {});
        }
        const auto version = res[4].integer(0, 0);
        std::vector<pg::statement> rest;
        if (version > schema_version) {
            rest.emplace_back("ROLLBACK");
            (void)co_await conn->run(rest, opt.query_timeout);
            throw store_error(store_errc::schema_too_new,
                              "postgres_store: schema " + opt.schema + " holds a store of version " +
                                  std::to_string(version) + ", newer than this stategraph knows (" +
                                  std::to_string(schema_version) + "); upgrade stategraph to open it");
        }
        if (version < 1)
            for (const char* sql : migration_v1) rest.emplace_back(sql);
        rest.emplace_back("DELETE FROM stategraph_store_schema");
        rest.emplace_back("INSERT INTO stategraph_store_schema(version) VALUES($1::integer)");
        rest.back().integer(schema_version);
        rest.emplace_back("COMMIT");
        try {
            (void)co_await conn->run(rest, opt.query_timeout);
        } catch (const pg::server_error& e) {
            fail("creating the store's tables", std::string("the server refused: ") + e.what(), {}, {});
        }
    }

    static item read_item(const pg::result& r, int row) {
        item it;
        it.ns = parse_namespace(r.bytes(row, 0));
        it.key = r.text(row, 1);
        it.value = parse_value(r.bytes(row, 2), it.ns, it.key);
        it.created_at = from_ms(r.integer(row, 3));
        it.updated_at = from_ms(r.integer(row, 4));
        return it;
    }
};

namespace {
const postgres_store_options& checked(const postgres_store_options& o) {
    if (o.conninfo.empty())
        throw store_error(store_errc::storage_failure, "postgres_store: postgres_store_options::conninfo is empty");
    if (o.schema.empty())
        throw store_error(store_errc::storage_failure, "postgres_store: postgres_store_options::schema is empty");
    return o;
}
} // namespace

postgres_store::postgres_store(postgres_store_options options)
    : base_store(checked(options).store), impl_(std::make_unique<impl>(std::move(options))) {
    try {
        pg::run_blocking(impl_->migrate());
    } catch (const pg::connection_lost& e) {
        impl_->fail("connecting", e.what(), {}, {});
    }
}

postgres_store::~postgres_store() = default;

const postgres_store_options& postgres_store::settings() const noexcept { return impl_->opt; }

asio::awaitable<void> postgres_store::do_put(write w) {
    const auto now = now_ms();
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_put);
    batch.back().text(to_string(w.ns)).text(w.key).text(json::serialize(w.value)).integer(now);
    if (w.ttl) batch.back().integer(w.ttl->count()).integer(now + w.ttl->count());
    else batch.back().null().null();
    if (w.text) batch.back().text(*w.text);
    else batch.back().null();
    (void)co_await impl_->run(batch, "storing an item", w.ns, w.key);
}

asio::awaitable<std::optional<item>> postgres_store::do_get(namespace_path ns, std::string key, bool refresh) {
    const auto now = now_ms();
    const auto prefix = to_string(ns);
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_get);
    batch.back().text(prefix).text(key).integer(now);
    if (refresh) {
        batch.emplace_back(sql_refresh);
        batch.back().text(prefix).text(key).integer(now);
    }
    auto res = co_await impl_->run(batch, "reading an item", ns, key);
    if (res[0].rows() == 0) co_return std::nullopt;
    co_return impl::read_item(res[0], 0);
}

asio::awaitable<void> postgres_store::do_remove(namespace_path ns, std::string key) {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_remove);
    batch.back().text(to_string(ns)).text(key);
    (void)co_await impl_->run(batch, "deleting an item", ns, key);
}

asio::awaitable<std::vector<search_item>> postgres_store::do_search(namespace_path prefix,
                                                                    std::vector<std::string> words, std::size_t want) {
    const auto now = now_ms();
    std::vector<pg::statement> batch;
    batch.emplace_back(words.empty() ? sql_list : sql_search);
    auto& s = batch.back();
    s.text(to_string(prefix)).integer(now);
    if (want) s.integer(static_cast<std::int64_t>(want));
    else s.null();
    if (!words.empty()) {
        std::string q;
        for (const auto& w : words) {
            if (!q.empty()) q += " | ";
            q += '\'';
            for (char c : w) q += c == '\'' ? std::string("''") : (c == '\\' ? std::string("\\\\") : std::string(1, c));
            q += '\'';
        }
        s.text(q);
    }
    auto res = co_await impl_->run(batch, "searching", prefix);
    std::vector<search_item> out;
    for (int r = 0; r < res[0].rows(); ++r) {
        search_item it{impl::read_item(res[0], r), std::nullopt};
        if (!words.empty()) it.score = std::strtod(res[0].text(r, 5).c_str(), nullptr);
        out.push_back(std::move(it));
    }
    co_return out;
}

asio::awaitable<void> postgres_store::do_refresh(std::vector<std::pair<namespace_path, std::string>> items) {
    const auto now = now_ms();
    std::vector<pg::statement> batch;
    for (const auto& [ns, key] : items) {
        batch.emplace_back(sql_refresh);
        batch.back().text(to_string(ns)).text(key).integer(now);
    }
    (void)co_await impl_->run(batch, "refreshing ttls");
}

asio::awaitable<std::vector<namespace_path>> postgres_store::do_namespaces() {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_namespaces);
    batch.back().integer(now_ms());
    auto res = co_await impl_->run(batch, "listing namespaces");
    std::vector<namespace_path> out;
    for (int r = 0; r < res[0].rows(); ++r) out.push_back(parse_namespace(res[0].bytes(r, 0)));
    co_return out;
}

asio::awaitable<std::size_t> postgres_store::do_sweep() {
    std::vector<pg::statement> batch;
    batch.emplace_back(sql_sweep);
    batch.back().integer(now_ms());
    auto res = co_await impl_->run(batch, "sweeping expired items");
    co_return static_cast<std::size_t>(res[0].affected());
}

} // namespace stategraph::store
