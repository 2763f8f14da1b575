#pragma once
/// @file postgres_store.hpp
/// @brief The store in PostgreSQL: items with a `tsvector` under a GIN index for full text.
///
/// Tables (in `postgres_store_options::schema`, made and migrated on first use; version 1 in
/// `stategraph_store_schema`; they may share a schema with a `postgres_saver`):
/// - `stategraph_store_items(prefix, key, value jsonb, created_at, updated_at, ttl_ms,
///   expires_at, tsv tsvector)`: one row per item; `prefix` is the namespace joined with '.',
///   times in milliseconds since the Unix epoch (`expires_at` NULL: never expires); `tsv` the
///   indexed text under the `simple` configuration (lower-cased words, no stemming), GIN-indexed;
///   searches rank by `ts_rank`.
///
/// Each call runs on the awaiting coroutine's executor over a small pool of non-blocking libpq
/// connections (the saver's); a connection that drops is opened again and the call retried
/// (every statement is idempotent) until `retry_for` is spent.

#include <stategraph/checkpoint/store/store.hpp>

#include <chrono>
#include <memory>
#include <string>

namespace stategraph::store {

/// @brief How to reach the server. Thread safety: a plain value, copied by the constructor.
struct postgres_store_options {
    /// libpq connection string: "postgresql://user@host:port/db" or "host=... dbname=...".
    std::string conninfo;
    /// The PostgreSQL schema holding the tables; made when missing.
    std::string schema = "public";
    std::size_t pool_size = 4;
    std::chrono::milliseconds connect_timeout = std::chrono::seconds(5);
    /// How long one call may run (its statements, on one connection).
    std::chrono::milliseconds query_timeout = std::chrono::seconds(30);
    /// How long a call keeps retrying a server it cannot reach before `storage_failure`.
    std::chrono::milliseconds retry_for = std::chrono::seconds(10);
    store_options store;
};

/// @brief A store in PostgreSQL 12 or newer. Errors: `store_error` with `storage_failure` (the
/// server cannot be reached or refused a statement; names the namespace and key),
/// `corrupt_item` or `schema_too_new`. Thread safety: all members may be called concurrently.
class postgres_store final : public base_store {
public:
    static constexpr int schema_version = 1;
    /// @brief Connects once (blocking), creates the tables and migrates them. Throws `store_error`.
    /// @param options connection string, schema, pool size, connect and query timeouts, retry window
    /// (durations in milliseconds) and the shared store settings (`postgres_store_options`).
    explicit postgres_store(postgres_store_options options);
    ~postgres_store() override;
    const postgres_store_options& settings() const noexcept;

protected:
    boost::asio::awaitable<void> do_put(write w) override;
    boost::asio::awaitable<std::optional<item>> do_get(namespace_path ns, std::string key, bool refresh) override;
    boost::asio::awaitable<void> do_remove(namespace_path ns, std::string key) override;
    boost::asio::awaitable<std::vector<search_item>> do_search(namespace_path prefix, std::vector<std::string> words,
                                                                std::size_t want) override;
    boost::asio::awaitable<void> do_refresh(std::vector<std::pair<namespace_path, std::string>> items) override;
    boost::asio::awaitable<std::vector<namespace_path>> do_namespaces() override;
    boost::asio::awaitable<std::size_t> do_sweep() override;

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

} // namespace stategraph::store
