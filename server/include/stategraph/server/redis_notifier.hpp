#pragma once
/// @file redis_notifier.hpp
/// @brief `open_redis_notifier`: wake-ups between the instances on one run store through Redis
/// pub/sub (a `notifier`, <stategraph/server/notifier.hpp>), for an SQLite run store whose
/// instances would otherwise poll, or in place of PostgreSQL's `LISTEN/NOTIFY`.
///
/// @code
/// namespace srv = stategraph::server;
/// srv::run_store_options ro;
/// ro.notifier = srv::open_redis_notifier({.url = "redis://127.0.0.1:6379/0"});
/// srv::server_options so;
/// so.runs = srv::open_sqlite_run_store("runs.db", ro);
/// so.poll_interval = std::chrono::seconds(5); // a safety net now, not the way news travels
/// @endcode
///
/// - Publishing: `PUBLISH` on a connection of the notifier's own, after the store's change
///   committed, from a queue on the notifier's thread (a request never waits on Redis). When
///   Redis cannot be reached the queued wake-ups are dropped, one line goes to `log`, and the
///   instances find the changes at their next poll; another line says when Redis is back.
/// - Subscribing: `PSUBSCRIBE <prefix>:<db>:*` on a dedicated connection, which is made again
///   with bounded backoff (50 ms doubling to `longest_pause`) when it drops; after such a gap
///   every channel is reported once with an empty payload. A `PING` after `ping_after` of
///   silence tells a dead connection from a quiet one.
/// - Channels: `<channel_prefix>:<db>:<channel>` (`stategraph:0:sg_runs`). Redis pub/sub ignores
///   the database number, so the notifier puts it in the channel's name: deployments sharing one
///   Redis server wake each other only when both their database and their prefix agree.
///
/// Thread safety: as `notifier`. The notifier keeps one thread; its destructor stops it.

#include <stategraph/server/notifier.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace stategraph::server {

/// @brief Where the Redis server is and how the notifier talks to it.
/// Thread safety: a plain value, copied by `open_redis_notifier`; `log` is called on the
/// notifier's thread.
struct redis_notifier_options {
    std::string url = "redis://127.0.0.1:6379/0"; ///< redis://HOST:PORT[/DB]
    /// The first part of every channel's name; instances wake each other only when it agrees.
    std::string channel_prefix = "stategraph";
    /// Connecting, and one round trip, at most.
    std::chrono::milliseconds timeout{5000};
    /// The longest pause between attempts to connect again.
    std::chrono::milliseconds longest_pause{2000};
    /// A subscription silent this long is asked for a PING; one silent twice as long is made again.
    std::chrono::milliseconds ping_after{10'000};
    /// One line when Redis is lost and one when it is back; null: silent.
    std::function<void(std::string_view)> log;
};

/// @brief Connects to Redis once to check it answers, then returns a notifier for
/// `run_store_options::notifier`. Throws `notifier_error`: `bad_url` for a URL that is not
/// redis://HOST:PORT[/DB], `unreachable` when the server cannot be reached or refuses (the
/// message names it), `not_built` when stategraph was built without Redis
/// (STATEGRAPH_WITH_REDIS off: no hiredis).
/// @param options URL, channel prefix, timeouts (ms) and log.
/// @return the notifier, to share between the run stores of this process.
/// Thread safety: call from any thread; it blocks until Redis answered once (at most `timeout`).
std::shared_ptr<notifier> open_redis_notifier(redis_notifier_options options);

} // namespace stategraph::server
