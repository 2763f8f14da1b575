// The PostgreSQL saver's schema (its migrations), and its opening and closing: the constructor
// (which migrates), the destructor, the accessors. The class: postgres_saver_impl.hpp.
#include "postgres_saver_impl.hpp"


#include <iterator>
#include <stdexcept>

namespace stategraph::checkpoint {

namespace {

// ---------------------------------------------------------------------------------------------
// Schema. Migration i (0-based) brings the schema to version i+1, in one transaction under an
// advisory lock (several processes may open a fresh database at once). Never edit a released
// migration: append one and bump postgres_saver::schema_version. Text columns compare bytewise
// (COLLATE "C"): checkpoint ids are ordered as text, whatever the database's locale.
// Stored bytes are sealed as in the SQLite saver (codec::seal): records to (thread, ns, id,
// parent, step, source), values to (channel, version), pending writes to (thread, ns, checkpoint,
// task id, task name, channel), cache entries to ("__cache__", ns, key, expiry).
constexpr const char* migration_v1[] = {R"sql(
CREATE TABLE stategraph_checkpoints (
    thread_id text COLLATE "C" NOT NULL,
    ns        text COLLATE "C" NOT NULL,
    id        text COLLATE "C" NOT NULL,
    parent_id text COLLATE "C" NOT NULL DEFAULT '',
    step      bigint NOT NULL,
    source    text COLLATE "C" NOT NULL,
    record    bytea NOT NULL,
    PRIMARY KEY (thread_id, ns, id)
);
)sql", R"sql(
CREATE TABLE stategraph_blobs (
    thread_id text COLLATE "C" NOT NULL,
    ns        text COLLATE "C" NOT NULL,
    channel   text COLLATE "C" NOT NULL,
    version   text COLLATE "C" NOT NULL,
    value     bytea NOT NULL,
    PRIMARY KEY (thread_id, ns, channel, version)
);
)sql", R"sql(
CREATE TABLE stategraph_writes (
    thread_id     text COLLATE "C" NOT NULL,
    ns            text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    task_name     text COLLATE "C" NOT NULL,
    channel       text COLLATE "C" NOT NULL,
    value         bytea NOT NULL,
    seq           bigint NOT NULL,
    PRIMARY KEY (thread_id, ns, checkpoint_id, task_id, channel)
);
)sql", R"sql(
CREATE TABLE stategraph_graphs (
    version text COLLATE "C" PRIMARY KEY,
    value   bytea NOT NULL
);
)sql", R"sql(
CREATE TABLE stategraph_leases (
    thread_id  text COLLATE "C" PRIMARY KEY,
    owner      text COLLATE "C" NOT NULL,
    expires_at bigint NOT NULL
);
)sql", R"sql(
CREATE TABLE stategraph_cache (
    ns         text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    value      bytea NOT NULL,
    expires_at bigint,
    PRIMARY KEY (ns, key)
);
)sql", R"sql(
-- Lease times are the server's: one clock for every host.
CREATE FUNCTION stategraph_now_ms() RETURNS bigint LANGUAGE sql VOLATILE AS
$$ SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint $$;
)sql", R"sql(
-- The fence of every write, run first in its transaction: raises SG001 (lease lost: the holder's
-- name in the message, '' when the lease was broken) when this saver holds the thread (p_ours)
-- and the lease is no longer its own, SG002 ("<holder> <expires ms>") while another owner's
-- lease is live (unless that owner is p_gone: a dead process of the caller's host); renews our
-- own lease once half of its time is gone. The lease row stays locked until the write commits.
CREATE FUNCTION stategraph_fence(p_thread text, p_owner text, p_ours boolean, p_gone text, p_ttl bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    h text;
    e bigint;
    now_ms bigint := stategraph_now_ms();
BEGIN
    SELECT owner, expires_at INTO h, e FROM stategraph_leases WHERE thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        IF p_ours THEN RAISE EXCEPTION USING ERRCODE = 'SG001', MESSAGE = ''; END IF;
        RETURN;
    END IF;
    IF h <> p_owner THEN
        IF p_ours THEN RAISE EXCEPTION USING ERRCODE = 'SG001', MESSAGE = h; END IF;
        IF e > now_ms AND h IS DISTINCT FROM p_gone THEN
            RAISE EXCEPTION USING ERRCODE = 'SG002', MESSAGE = e::text || ' ' || h;
        END IF;
        RETURN;
    END IF;
    IF e - now_ms <= p_ttl / 2 THEN
        UPDATE stategraph_leases SET expires_at = now_ms + p_ttl WHERE thread_id = p_thread;
    END IF;
END $$;)sql"};

// Version 2: the answers of calls whose effect is not idempotent (break_lease's holder,
// cache_clear's count), kept a few minutes under the call's id: a call retried after a dropped
// connection, whose first attempt had committed, reads its answer instead of acting again.
constexpr const char* migration_v2[] = {R"sql(
CREATE TABLE stategraph_answers (
    call_id text COLLATE "C" PRIMARY KEY,
    answer  text,
    at      bigint NOT NULL
);
)sql"};

// Version 3: a checkpoint's small values inside its row (NULL: none there), encoded as
// codec::encode_inline, each value sealed as its row of stategraph_blobs would be.
constexpr const char* migration_v3[] = {R"sql(
ALTER TABLE stategraph_checkpoints ADD COLUMN vals bytea;
)sql"};

} // namespace

asio::awaitable<void> postgres_saver::impl::migrate() {
    static const std::string none;
    call c{none, "creating the schema", {}};
    // Created only when missing: a role that may use the schema need not create schemas.
    const std::string schema_sql = pg::create_schema_if_missing(opt.schema);
    auto body = [&](pg::connection& conn, call&) -> asio::awaitable<bool> {
        std::vector<pg::statement> batch;
        batch.emplace_back(sql_begin);
        // One process migrates at a time (the key: this schema's name).
        batch.emplace_back("SELECT pg_advisory_xact_lock(8128, hashtext($1))");
        batch.back().text(opt.schema);
        batch.emplace_back(schema_sql);
        batch.emplace_back("CREATE TABLE IF NOT EXISTS stategraph_schema (version integer NOT NULL)");
        batch.emplace_back("SELECT coalesce(max(version), 0) FROM stategraph_schema");
        auto res = co_await conn.run(batch, query_timeout());
        const auto version = res[4].integer(0, 0);
        if (version > postgres_saver::schema_version) {
            co_await finish(conn, sql_rollback, query_timeout());
            throw checkpoint_error(errc::schema_too_new,
                                   "postgres_saver: schema " + opt.schema + " has version " + std::to_string(version) +
                                       ", newer than this stategraph knows (" +
                                       std::to_string(postgres_saver::schema_version) +
                                       "); upgrade stategraph to open it");
        }
        // Each migration is a list of statements (the extended protocol takes one per query).
        static const std::vector<std::vector<const char*>> migrations{
            {std::begin(migration_v1), std::end(migration_v1)},
            {std::begin(migration_v2), std::end(migration_v2)},
            {std::begin(migration_v3), std::end(migration_v3)},
        };
        if (migrations.size() != static_cast<std::size_t>(postgres_saver::schema_version))
            throw std::logic_error("postgres_saver: one migration per schema version");
        std::vector<pg::statement> steps;
        for (auto v = version; v < postgres_saver::schema_version; ++v)
            for (const char* sql : migrations[static_cast<std::size_t>(v)]) steps.emplace_back(sql);
        steps.emplace_back("DELETE FROM stategraph_schema");
        steps.emplace_back("INSERT INTO stategraph_schema(version) VALUES($1::integer)");
        steps.back().integer(postgres_saver::schema_version);
        steps.emplace_back(sql_commit);
        (void)co_await conn.run(steps, query_timeout());
        co_return true;
    };
    (void)co_await with_retry<bool>(c, body);
}

// =============================================================================================

postgres_saver::postgres_saver(postgres_options options) : impl_(std::make_shared<impl>(std::move(options))) {
    if (impl_->opt.conninfo.empty())
        throw checkpoint_error(errc::storage_failure, "postgres_saver: postgres_options::conninfo is empty");
    if (impl_->opt.schema.empty())
        throw checkpoint_error(errc::storage_failure, "postgres_saver: postgres_options::schema is empty");
    pg::run_blocking(impl_->migrate());
}

postgres_saver::~postgres_saver() {
    impl_->stop_keeper();
    try { // best effort: leave no lease of ours behind
        pg::run_blocking(impl_->release_all());
    } catch (...) {
    }
}

const std::string& postgres_saver::owner() const noexcept { return impl_->owner; }
const postgres_options& postgres_saver::options() const noexcept { return impl_->opt; }
std::vector<int> postgres_saver::backend_pids() const { return impl_->pool.idle_pids(); }

std::uint64_t postgres_saver::round_trips() const noexcept { return impl_->pool.round_trips(); }

postgres_saver::paused_memory postgres_saver::remembered() const {
    std::lock_guard lock(impl_->mutex);
    return {impl_->paused.size(), impl_->paused_recalled};
}

} // namespace stategraph::checkpoint
