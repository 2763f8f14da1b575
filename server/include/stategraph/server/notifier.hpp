#pragma once
/// @file notifier.hpp
/// @brief `notifier`: how the instances on one run store wake each other (a run queued,
/// cancelled or finished; a run's new events) when something other than the store's own
/// database carries the news, and `notifier_error`, what opening one throws.
///
/// A run store tells the others through its backend (`run_store_backend::notify` / `listen`:
/// PostgreSQL `LISTEN/NOTIFY`; SQLite has none, so instances poll every
/// `server_options::poll_interval`). A notifier given in `run_store_options::notifier` replaces
/// both: the store publishes on it after each change committed and the server subscribes to it.
/// One comes with the server, Redis pub/sub (<stategraph/server/redis_notifier.hpp>).
///
/// @code
/// stategraph::server::run_store_options ro;
/// ro.notifier = stategraph::server::open_redis_notifier({.url = "redis://127.0.0.1:6379/0"});
/// auto runs = stategraph::server::open_sqlite_run_store("runs.db", ro);
/// @endcode
///
/// A wake-up is a hint, never the news itself: whoever hears one reads the run store again.
/// So a lost one only delays the others until their next poll, and one heard twice is harmless.

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace stategraph::server {

/// @brief Carries wake-ups between the instances on one run store.
///
/// Thread safety: every member may be called from any thread.
class notifier {
public:
    /// @brief What a subscriber is called with: the channel ("sg_runs", "sg_events") and the
    /// payload (a run id, "cancel:<id>", ...; empty: anything may have happened on the channel).
    using handler = std::function<void(std::string channel, std::string payload)>;

    virtual ~notifier() = default;

    /// @brief Tells every subscriber, this instance's included, of `payload` on `channel`.
    /// Never throws and never waits on the network: a wake-up that cannot be sent is dropped
    /// (the others find the change at their next poll).
    /// @param channel "sg_runs" or "sg_events".
    /// @param payload a run id, "cancel:<id>", ...; both are views: keep the strings alive until
    /// the `co_await` completes.
    virtual boost::asio::awaitable<void> publish(std::string_view channel, std::string_view payload) = 0;
    /// @brief Calls `on` (on a thread of the notifier's) with every wake-up published on
    /// `channels` from now on, by any instance (and with those of channels other subscribers
    /// asked for). After a gap (the connection lost and made again) each channel is reported
    /// once with an empty payload. Returns once listening (or after a bounded wait when the
    /// carrier cannot be reached now; it keeps trying). True: wake-ups will come. `on` is called
    /// until the notifier is destroyed: what it refers to must outlive the notifier.
    /// @param channels the channels listened to.
    /// @param on the handler, called on the notifier's own thread (post to your executor from it).
    virtual bool subscribe(std::vector<std::string> channels, handler on) = 0;
    /// @brief A name for messages: "Redis 127.0.0.1:6379 (channels stategraph:0:*)".
    virtual std::string describe() const = 0;
};

/// @brief Every kind of error opening a notifier reports.
enum class notifier_errc {
    not_built = 1, ///< this stategraph was built without what the notifier needs (Redis: hiredis)
    bad_url,       ///< the URL is not one the notifier takes (redis://HOST:PORT[/DB])
    unreachable,   ///< the server could not be reached or refused the connection
};

/// @brief The category of `notifier_errc`, named "stategraph.server.notifier".
const std::error_category& notifier_category() noexcept;
/// @param e the code.
inline std::error_code make_error_code(notifier_errc e) noexcept { return {static_cast<int>(e), notifier_category()}; }

/// @brief What opening a notifier throws: a `std::system_error` with a `notifier_errc`; its
/// message names the URL and the reason.
/// Thread safety: an immutable exception object.
class notifier_error : public std::system_error {
public:
    /// @param code the kind.
    /// @param what the message, naming the URL and the reason.
    notifier_error(notifier_errc code, const std::string& what) : std::system_error(make_error_code(code), what) {}
    notifier_errc kind() const noexcept { return static_cast<notifier_errc>(code().value()); }
};

} // namespace stategraph::server

template <> struct std::is_error_code_enum<stategraph::server::notifier_errc> : std::true_type {};
