#pragma once
/// @file run_store.hpp
/// @brief `run_store`: where the server keeps its thread records, runs, their queue and their
/// events, so that any instance serves any request and a restart loses nothing.
///
/// One class holds every rule (which run of a thread may start, who claims it, when a worker
/// counts as gone, how many events a run keeps); it speaks SQL through a small
/// `run_store_backend` (a connection's statements and transactions). Two backends come with the
/// server, and one store without SQL:
/// - SQLite (`open_sqlite_run_store`): one host, any number of processes on one file (or one
///   process in memory, the default of a server given none);
/// - PostgreSQL (`open_postgres_run_store`): many hosts; claims take `FOR UPDATE SKIP LOCKED`,
///   and new runs, cancellations and events wake the other instances through `LISTEN/NOTIFY`;
/// - this process's memory (`open_memory_run_store`, the default of a server given none): the
///   same rules kept over plain containers, for one process, lost at exit.
///
/// @code
/// auto runs = stategraph::server::open_postgres_run_store({.conninfo = "postgresql://127.0.0.1/app"});
/// stategraph::server::server srv(io.get_executor(), {.port = 8123, .runs = runs});
/// @endcode
///
/// Times are microseconds since the Unix epoch (`run_store::now()`); JSON is stored as text.
/// Thread safety: calls may come from any thread; each is a coroutine on the awaiting
/// executor.

#include <stategraph/detail/gcc12.hpp>
#include <stategraph/run_config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace stategraph::server {

class notifier; // <stategraph/server/notifier.hpp>

// ---------------------------------------------------------------------------------------------
// The backend seam: SQL and transactions, nothing else.

/// @brief A statement parameter or a column value: NULL, an integer or text.
using sql_value = std::variant<std::monostate, std::int64_t, std::string>;

/// @brief One row of a result, its columns in SELECT order.
struct sql_row {
    std::vector<sql_value> cols;
    bool is_null(std::size_t i) const { return std::holds_alternative<std::monostate>(cols.at(i)); }
    /// The column as an integer (a text column is parsed; NULL is 0).
    std::int64_t integer(std::size_t i) const;
    /// The column as text (an integer is printed; NULL is "").
    std::string text(std::size_t i) const;
};

/// @brief A failure of the run store's storage, naming what was being done (the thread or run)
/// and the database's words. `transient()`: the same call may succeed when retried (a busy
/// SQLite file, a PostgreSQL serialization failure or a dropped connection); the store retries
/// those itself for a while before it throws.
class run_store_error : public std::runtime_error {
public:
    run_store_error(const std::string& what, bool transient) : std::runtime_error(what), transient_(transient) {}
    bool transient() const noexcept { return transient_; }

private:
    bool transient_;
};

/// @brief What a run store needs of a database: statements (SQL with `?1`, `?2`, ... parameters,
/// which a backend rewrites to its own form) run alone or inside one transaction.
class run_store_backend {
public:
    virtual ~run_store_backend() = default;

    /// @brief A connection inside a transaction.
    class session {
    public:
        virtual ~session() = default;
        /// Runs `sql` and returns its rows (none for INSERT/UPDATE/DELETE without RETURNING).
        virtual boost::asio::awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) = 0;
        /// Runs `sql` and returns the rows it changed.
        virtual boost::asio::awaitable<std::int64_t> exec(std::string_view sql, std::vector<sql_value> params) = 0;
        /// Runs `sql` once per entry of `rows` (its parameters), in order, and returns the rows
        /// changed in all. The default calls `exec` for each; a backend that can send them in one
        /// round trip (PostgreSQL's pipeline) overrides it. `rows` must outlive the call.
        virtual boost::asio::awaitable<std::int64_t> exec_many(std::string_view sql, const std::vector<std::vector<sql_value>>& rows);

        /// Notifications (channel, payload) the backend sends as the transaction commits, when it
        /// `notifies_at_commit` (the store fills it; the backend clears it when it starts a body).
        std::vector<std::pair<std::string, std::string>> at_commit;
    };
    /// @brief The transaction body: runs its statements on the session; what it throws rolls the
    /// transaction back and reaches the caller.
    using body = std::function<boost::asio::awaitable<void>(session&)>;

    /// @brief Runs `work` in one write transaction (SQLite `BEGIN IMMEDIATE`, PostgreSQL
    /// `BEGIN`) and commits it. A transient failure (`run_store_error::transient()`) runs the
    /// whole body again, for a while, then throws. `work` must outlive the call.
    virtual boost::asio::awaitable<void> transaction(const body& work) = 0;
    /// @brief One statement on its own (autocommit).
    virtual boost::asio::awaitable<std::vector<sql_row>> query(std::string_view sql, std::vector<sql_value> params) = 0;

    /// @brief The clause a row lock takes after a SELECT (" FOR UPDATE" on PostgreSQL; "" on
    /// SQLite, whose write transaction already excludes every other writer).
    virtual std::string_view lock_rows() const = 0;
    /// @brief The same, skipping rows other transactions hold (" FOR UPDATE SKIP LOCKED"; "").
    virtual std::string_view lock_rows_skip_locked() const = 0;
    /// @brief The type of a 64-bit integer column ("INTEGER"; "BIGINT").
    virtual std::string_view bigint_type() const = 0;

    /// @brief Tells the other instances on this database that something happened on `channel`
    /// (PostgreSQL `NOTIFY`; a no-op where instances poll). Called after the change committed.
    virtual boost::asio::awaitable<void> notify(std::string_view channel, std::string_view payload);
    /// @brief True when `transaction` sends its session's `at_commit` notifications with the
    /// commit (PostgreSQL: `pg_notify` in the COMMIT's round trip, delivered only if it commits);
    /// false (the default): the store calls `notify` after the commit.
    virtual bool notifies_at_commit() const noexcept { return false; }
    /// @brief Calls `on` (on some thread of the backend's) with each notification of the other
    /// instances, from now on; false when this backend has none (instances then poll).
    virtual bool listen(std::function<void(std::string channel, std::string payload)> on);
    /// @brief A name for messages: "SQLite file /x/y.db", "PostgreSQL 127.0.0.1:5432/app".
    virtual std::string describe() const = 0;
};

// ---------------------------------------------------------------------------------------------
// Records
//
// The records are classes with a constructor (build one and set its members), and the rules and
// queries own nothing, so that any of them may be written in place inside a `co_await`
// expression: g++ 12 destroys an aggregate that owns memory twice there
// (`detail::safe_in_co_await`).

/// @brief A thread as the server keeps it (its checkpoints are in the graph's checkpointer).
struct thread_record {
    thread_record() = default;
    std::string key;       ///< where it is kept (the storage id: per API key), the primary key
    std::string thread_id; ///< the client's id
    std::string owner;     ///< the API key's digest, "" without keys
    std::string graph_id;  ///< "" until a graph is chosen
    std::int64_t created_at = 0, updated_at = 0, state_updated_at = 0;
    boost::json::object metadata;
    std::string status = "idle"; ///< idle, busy, interrupted, error
    boost::json::value values;   ///< null before the first run
    boost::json::object interrupts;
    boost::json::value error;    ///< null, or {"error", "message"}
    bool temporary = false;      ///< a stateless run's thread (not listed)
};

/// @brief An assistant made over the API (`POST /assistants`): a served graph with a config,
/// context and metadata of its own, versioned (every update is a new version; one is the latest).
struct assistant_record {
    assistant_record() = default;
    std::string assistant_id;
    std::int64_t version = 1;
    std::string owner; ///< the API key's digest, "" without keys
    std::string graph_id, name, description;
    boost::json::object config, context, metadata;
    std::int64_t created_at = 0, updated_at = 0;
};

/// @brief A run: what was asked, where it is, who runs it.
struct run_record {
    run_record() = default;
    std::string run_id;
    std::string thread_key, thread_id, assistant_id, graph_id, owner;
    std::int64_t seq = 0; ///< set by the store: runs are started in this order per thread
    std::int64_t created_at = 0, updated_at = 0;
    /// pending, running, success, error, interrupted, timeout
    std::string status = "pending";
    boost::json::object metadata, kwargs;
    std::string multitask = "reject";
    /// What a worker needs to run it (input, resume, modes, config): the server's own format.
    boost::json::object spec;
    std::int64_t not_before = 0;  ///< a delayed run starts no earlier than this
    std::string worker;           ///< the instance running it ("" when none)
    std::int64_t lease_until = 0; ///< its worker's claim lives until this (renewed by heartbeats)
    int attempts = 0;             ///< claims so far (a takeover is a new attempt)
    std::string cancel;           ///< "", "interrupt" or "rollback": asked to stop
    /// The thread's newest checkpoint as the run first started ("" none), for a rollback and
    /// for a takeover to tell whether the run made progress; null before the first start.
    boost::json::value anchor;
    boost::json::value result; ///< the final values (null until it ends)
    boost::json::value error;  ///< null, or {"error", "message"}

    bool finished() const noexcept { return status != "pending" && status != "running"; }
};

/// @brief One event of a run's stream, as kept for replay.
struct run_event {
    std::int64_t id = 0; ///< 0, 1, 2, ... per run
    std::string name;    ///< "metadata", "values", "updates|sub:1", "error", ...
    std::string data;    ///< JSON text
};

// ---------------------------------------------------------------------------------------------
// The store

/// @brief What `submit` must check and do, in the transaction that queues the run:
/// `co_await store.submit(run, {.graph_id = "g"})`. Trivially destructible (its texts are held
/// inline, its pointers name the caller's values, which must outlive the call), so the braced
/// spelling is safe inside `co_await` under g++ 12.
struct submit_rules {
    bool reject_if_busy = false;  ///< multitask "reject": a thread with a run pending or running refuses
    std::size_t max_queued = 100; ///< runs pending or running (not cancelled) on one thread, at most
    stategraph::id_text cancel_others; ///< "", "interrupt" or "rollback": the thread's other runs are asked to stop
    /// The thread's record to create when it does not exist yet (if_not_exists "create", a
    /// stateless run's thread); null: the thread must exist.
    const thread_record* create = nullptr;
    /// Set on the thread (graph chosen by this run) when not empty and its graph_id is empty.
    stategraph::id_text graph_id;
    /// Merged into its metadata along with graph_id (null: nothing).
    const boost::json::object* graph_metadata = nullptr;
};

/// @brief Why `submit` refused a run.
enum class submit_refusal {
    none,
    thread_missing, ///< no such thread and `create` is null
    other_graph,    ///< the thread belongs to another graph (`submit_result::graph_id`)
    busy,           ///< reject_if_busy and a run is pending or running (`submit_result::busy_run`)
    queue_full,     ///< max_queued reached (`submit_result::queued`)
};

struct submit_result {
    submit_refusal refused = submit_refusal::none;
    std::string busy_run;             ///< the run ahead (busy)
    std::size_t queued = 0;           ///< runs pending or running on the thread before this one
    std::string graph_id;             ///< the thread's graph (other_graph)
    std::vector<std::string> cancelled; ///< runs asked to stop (cancel_others)
    bool created_thread = false;
};

/// @brief A page of thread records (search), sorted and filtered as asked:
/// `co_await store.list_threads({.owner = key, .status = "idle"})`. Trivially destructible (its
/// texts are held inline; `keys` names the caller's list, which must outlive the call), so the
/// braced spelling is safe inside `co_await` under g++ 12.
struct thread_query {
    stategraph::id_text owner;
    stategraph::id_text status; ///< only threads of this status; empty: any
    const std::vector<std::string>* keys = nullptr; ///< only these (storage ids); null: any
    stategraph::id_text sort_by = "created_at"; ///< created_at, updated_at, state_updated_at, thread_id, status
    bool ascending = false;
};

static_assert(detail::safe_in_co_await<thread_record> && detail::safe_in_co_await<assistant_record> &&
                  detail::safe_in_co_await<run_record> &&
                  detail::safe_in_co_await<submit_rules> && detail::safe_in_co_await<thread_query>,
              "a run_store argument type must be a class with a constructor or own nothing: g++ 12 destroys "
              "an aggregate that owns memory twice when it is built inside a co_await expression");

/// @brief How long claims live and how often a run may be taken over.
/// Thread safety: a plain value, copied by the store.
struct run_store_options {
    /// A worker renews its claims every third of this; a claim not renewed for this long is
    /// taken over by another instance.
    std::chrono::milliseconds lease{std::chrono::seconds(10)};
    /// Claims of one run at most (the first run and takeovers); one more fails it with an error
    /// naming the run and the count.
    int max_attempts = 3;
    /// Finished runs kept (their record, events and result), the oldest removed first.
    std::size_t max_finished_runs = 10'000;
    /// Events kept per run for replay; beyond it the oldest go.
    std::size_t max_events_per_run = 10'000;
    /// How the instances wake each other (<stategraph/server/notifier.hpp>), in place of the
    /// backend's `notify` / `listen`: e.g. Redis pub/sub (`open_redis_notifier`) for instances on
    /// one SQLite file, which would otherwise only poll. Null: the backend's (PostgreSQL
    /// `LISTEN/NOTIFY`; none on SQLite).
    std::shared_ptr<stategraph::server::notifier> notifier;
};

class run_store {
public:
    /// Creates the tables when missing (blocking on a private io_context).
    /// @param backend the database (SQLite or PostgreSQL, or one of your own), shared.
    /// @param options claim lease (ms), attempts per run, retention and notifier.
    run_store(std::shared_ptr<run_store_backend> backend, run_store_options options = {});
    virtual ~run_store();
    run_store(const run_store&) = delete;
    run_store& operator=(const run_store&) = delete;

    static std::int64_t now(); ///< microseconds since the epoch
    const run_store_options& options() const noexcept { return opts_; }
    /// @brief The database under the rules. Throws std::logic_error for a store kept in memory
    /// (`open_memory_run_store`), which has none.
    run_store_backend& backend() const;
    /// @brief Calls `on` with the wake-ups of every instance on this store, from now on: through
    /// `options().notifier` when there is one, else the backend's `listen`. False when there are
    /// none (instances then poll).
    /// @param on called with each wake-up, on the notifier's (or backend's) own thread.
    virtual bool listen(std::function<void(std::string channel, std::string payload)> on);

    // -- threads ----------------------------------------------------------------------------
    /// @brief Inserts `t` unless a thread of its key exists; true when it was inserted.
    virtual boost::asio::awaitable<bool> create_thread(const thread_record& t);
    virtual boost::asio::awaitable<std::optional<thread_record>> get_thread(std::string key);
    /// @brief Writes every field of `t` (its key must exist); false when it does not. Its status
    /// is what the thread rests at: while a run of it is pending or running it reads busy.
    virtual boost::asio::awaitable<bool> put_thread(const thread_record& t);
    /// @brief Merges `metadata` into the thread's (key by key) and stamps updated_at; the
    /// record after it, or nullopt when there is no such thread.
    virtual boost::asio::awaitable<std::optional<thread_record>> patch_thread(std::string key, boost::json::object metadata);
    /// @brief Removes the thread's record, its runs and their events; false when a run of it is
    /// pending or running (nothing removed) .
    virtual boost::asio::awaitable<bool> delete_thread(std::string key);
    /// @brief The owner's threads (not temporary), filtered by status and keys, sorted.
    virtual boost::asio::awaitable<std::vector<thread_record>> list_threads(thread_query q);
    /// @brief Every thread key stored (for adopting a checkpointer's threads).
    virtual boost::asio::awaitable<std::vector<std::string>> thread_keys();

    // -- assistants -------------------------------------------------------------------------
    /// @brief Inserts `a` as version 1, the latest, unless an assistant of its id exists; true
    /// when it was inserted.
    virtual boost::asio::awaitable<bool> create_assistant(const assistant_record& a);
    /// @brief The latest version of the assistant (or version `version`); nullopt when none.
    virtual boost::asio::awaitable<std::optional<assistant_record>> get_assistant(std::string id, std::int64_t version = 0);
    /// @brief Writes `a` as a new version (one past the newest), which becomes the latest; the
    /// record written (its version set), or nullopt when there is no such assistant.
    virtual boost::asio::awaitable<std::optional<assistant_record>> add_assistant_version(assistant_record a);
    /// @brief Makes version `version` the latest; false when there is no such version.
    virtual boost::asio::awaitable<bool> set_latest_assistant(std::string id, std::int64_t version);
    /// @brief The owner's assistants (latest versions), oldest first.
    virtual boost::asio::awaitable<std::vector<assistant_record>> list_assistants(std::string owner);
    /// @brief Every version of the assistant, newest first.
    virtual boost::asio::awaitable<std::vector<assistant_record>> assistant_versions(std::string id);
    /// @brief Removes every version; false when there was none.
    virtual boost::asio::awaitable<bool> delete_assistant(std::string id);

    // -- runs -------------------------------------------------------------------------------
    /// @brief Queues `run` (status pending, seq assigned) under `rules`, atomically with the
    /// thread's status becoming busy. Wakes the workers of every instance.
    virtual boost::asio::awaitable<submit_result> submit(run_record& run, submit_rules rules);
    virtual boost::asio::awaitable<std::optional<run_record>> get_run(std::string run_id);
    /// @brief A thread's runs, newest first.
    virtual boost::asio::awaitable<std::vector<run_record>> list_runs(std::string thread_key, std::optional<std::string> status,
                                                             std::size_t limit, std::size_t offset);
    /// @brief A thread's runs with seq > `after`, oldest first (a thread stream's next runs).
    virtual boost::asio::awaitable<std::vector<run_record>> runs_after(std::string thread_key, std::int64_t after);
    /// @brief The seq of the thread's oldest pending or running run, or of its newest run when none.
    virtual boost::asio::awaitable<std::int64_t> current_seq(std::string thread_key);
    /// @brief Removes a finished run and its events; false when it is not finished (or absent).
    virtual boost::asio::awaitable<bool> delete_run(std::string run_id);
    /// @brief Asks a run to stop ("interrupt" or "rollback"); a pending run that no worker holds
    /// ends at once (status interrupted). The run after it, or nullopt when absent.
    virtual boost::asio::awaitable<std::optional<run_record>> cancel(std::string run_id, std::string action);

    // -- workers ----------------------------------------------------------------------------
    /// @brief Takes the next run this instance may start: the oldest pending run whose time has
    /// come and that is first in its thread's queue, or a running run whose worker's claim
    /// expired (a takeover: attempts + 1). Exactly one instance gets each. A run past
    /// `max_attempts` is failed instead (its error names the run and the count) and the next is
    /// looked for. nullopt: nothing to start.
    virtual boost::asio::awaitable<std::optional<run_record>> claim(std::string worker);
    /// @brief `claim` for up to `most` runs at once (at most one per thread), oldest first, in
    /// one transaction: a busy instance reads the queue once for many runs. Empty: nothing to
    /// start.
    virtual boost::asio::awaitable<std::vector<run_record>> claim_some(std::string worker, std::size_t most);
    /// @brief When the next delayed run becomes startable (microseconds), or nullopt.
    virtual boost::asio::awaitable<std::optional<std::int64_t>> next_due();
    /// @brief Renews `worker`'s claims on `runs`; returns the runs of those it no longer holds
    /// (taken over, or gone) and those asked to stop, with the action.
    struct heartbeat_result {
        std::vector<std::string> lost;
        std::vector<std::pair<std::string, std::string>> cancelled; ///< run id, action
    };
    virtual boost::asio::awaitable<heartbeat_result> heartbeat(std::string worker, std::vector<std::string> runs);
    /// @brief Records where the run started (its rollback anchor), once.
    virtual boost::asio::awaitable<void> set_anchor(std::string run_id, std::string worker, boost::json::value anchor);
    /// @brief Ends a run `worker` holds: its status, result, error, its thread's record (written
    /// whole, its status computed from the thread's remaining runs), and `events` not yet stored
    /// (appended as `append_events` does, in the same transaction). False when `worker` no
    /// longer holds it (taken over: nothing written).
    /// @param events the run's last events (ids following those stored), viewed, not copied.
    virtual boost::asio::awaitable<bool> finish(const run_record& run, std::string worker, const thread_record* thread,
                                        std::span<const run_event> events = {});
    /// @brief The runs `worker` holds that were asked to stop, with the action.
    virtual boost::asio::awaitable<std::vector<std::pair<std::string, std::string>>> cancel_requests(std::string worker);
    /// @brief The workers holding running runs (to find those of a process that is gone).
    virtual boost::asio::awaitable<std::vector<std::string>> running_workers();
    /// Runs by status, every thread's (`GET /metrics`).
    virtual boost::asio::awaitable<std::map<std::string, std::int64_t>> count_runs();
    /// @brief Ends `worker`'s claims now (its process is known to be gone): its runs are taken
    /// over at the next claim, not after the lease. Returns how many.
    virtual boost::asio::awaitable<std::size_t> expire_worker(std::string worker);
    /// @brief Hands a run `worker` holds back to the queue (a drain): pending, no worker, as
    /// first of its thread; the attempt is not counted.
    virtual boost::asio::awaitable<bool> release(std::string run_id, std::string worker);

    // -- events -----------------------------------------------------------------------------
    /// @brief Appends events (ids must follow the run's last) and drops the oldest beyond
    /// `max_events_per_run`. False when `worker` no longer holds the run (nothing written).
    virtual boost::asio::awaitable<bool> append_events(std::string run_id, std::string worker, std::vector<run_event> events);
    /// @brief The run's events with id >= `from`, oldest first, at most `limit`.
    virtual boost::asio::awaitable<std::vector<run_event>> read_events(std::string run_id, std::int64_t from, std::size_t limit);
    /// @brief The run's oldest kept event id and the next id (end), {0, 0} with none.
    virtual boost::asio::awaitable<std::pair<std::int64_t, std::int64_t>> event_bounds(std::string run_id);

protected:
    /// @brief For a store that keeps the rules itself, over no SQL (`open_memory_run_store`):
    /// it overrides every operation above.
    explicit run_store(run_store_options options);

private:
    /// Tells the other instances (the notifier's `publish`, else the backend's `notify`).
    boost::asio::awaitable<void> notify(std::string_view channel, std::string_view payload);
    /// What a transaction tells the other instances when it commits (nullopt: nothing).
    struct notice {
        std::string channel, payload;
    };
    using news_of = std::function<std::optional<notice>()>;
    /// Runs `work` in a transaction; `news`, asked after the body, says what to notify: sent
    /// with the commit where the backend can, else after it.
    boost::asio::awaitable<void> commit(const run_store_backend::body& work, const news_of& news);

    std::shared_ptr<run_store_backend> be_;
    run_store_options opts_;
};

/// @brief SQLite: `path` (made when missing; ":memory:" for a store of this process alone).
/// Tables `sg_threads`, `sg_runs`, `sg_run_events` live beside a checkpointer's in the same file
/// when given its path. Throws `run_store_error` when the file cannot be opened.
/// @param path the database file (a checkpointer's file may be shared), or ":memory:".
/// @param options claim lease, attempts, retention and notifier (`run_store_options`).
/// @return the store, to set as `server_options::runs` of every instance on this host.
/// Thread safety: call from any thread; it opens the file and creates the tables before it returns.
std::shared_ptr<run_store> open_sqlite_run_store(const std::string& path, run_store_options options = {});

/// @brief This process's memory: the rules of the SQL stores kept over plain containers (no
/// statement, no text to parse back), for one process (its server instances may share it);
/// lost at exit. The default of a server given no store (`server_options::runs` null). Its
/// `listen` has no other instance to hear (false); `options.notifier` is not used.
/// @param options claim lease, attempts and retention (`run_store_options`).
/// Thread safety: calls may come from any thread (one mutex; no call suspends while holding it).
std::shared_ptr<run_store> open_memory_run_store(run_store_options options = {});

/// @brief How to reach PostgreSQL for runs.
/// Thread safety: a plain value, copied by `open_postgres_run_store`.
struct postgres_run_store_options {
    std::string conninfo;          ///< libpq connection string
    std::string schema = "public"; ///< made when missing
    std::size_t pool_size = 4;
    run_store_options store;
};
/// @brief PostgreSQL (when built with it). Throws `run_store_error` when the server cannot be
/// reached, or std::invalid_argument when stategraph was built without PostgreSQL.
/// @param options connection string, schema, pool size and the store's own options.
/// @return the store, to set as `server_options::runs` of every instance, on any host.
/// Thread safety: call from any thread; it connects and creates the tables before it returns.
std::shared_ptr<run_store> open_postgres_run_store(postgres_run_store_options options);

} // namespace stategraph::server
