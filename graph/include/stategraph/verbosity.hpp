#pragma once
/// @file verbosity.hpp
/// @brief How much of a run's stream to show, at the supervisor platform's three levels (seed
/// 004): `full`, `events`, `result`. One filter for in-process streams (`stream_filter`) and
/// for the server's SSE events (`shows(verbosity, name)`), so that both agree.

#include <stategraph/stream.hpp>

#include <memory>
#include <optional>
#include <string_view>
#include <utility>

namespace stategraph {

/// @brief How much of a run a stream shows, on top of the stream modes asked for.
enum class verbosity {
    full,   ///< every event of the modes asked for
    events, ///< what happens, not the state: updates (interrupts included), tasks, messages,
            ///< custom events, errors; of the values, only the final ones
    result, ///< messages, errors and the final values only
};

/// @brief "full", "events" or "result".
constexpr const char* to_string(verbosity v) noexcept {
    switch (v) {
    case verbosity::full: return "full";
    case verbosity::events: return "events";
    case verbosity::result: return "result";
    }
    return "full";
}

/// @brief The level named @p text ("full", "events", "result"), or nullopt.
constexpr std::optional<verbosity> parse_verbosity(std::string_view text) noexcept {
    if (text == "full") return verbosity::full;
    if (text == "events") return verbosity::events;
    if (text == "result") return verbosity::result;
    return std::nullopt;
}

/// @brief Whether level @p v shows an SSE event named @p name as the server names them
/// ("values", "updates", "updates|<ns>", "metadata", "messages", "error", ...). Values below
/// `full` are not shown one by one: the caller sends the final values apart (stream_filter does).
constexpr bool shows(verbosity v, std::string_view name) noexcept {
    auto base = name.substr(0, name.find('|'));
    base = base.substr(0, base.find('/')); // "messages/partial" (LangGraph's legacy messages events) is "messages"
    switch (v) {
    case verbosity::full: return true;
    case verbosity::events: return base != "values" && base != "checkpoints" && base != "debug";
    case verbosity::result: return base == "metadata" || base == "messages" || base == "error";
    }
    return true;
}

/// @brief The SSE name of stream mode @p m ("values", "updates", ...; "" for none or a set).
constexpr std::string_view stream_event_name(stream_mode m) noexcept {
    switch (m) {
    case stream_mode::values: return "values";
    case stream_mode::updates: return "updates";
    case stream_mode::custom: return "custom";
    case stream_mode::debug: return "debug";
    case stream_mode::tasks: return "tasks";
    case stream_mode::checkpoints: return "checkpoints";
    case stream_mode::messages: return "messages";
    default: return "";
    }
}

/// @brief Whether level @p v shows the in-process event @p e one by one (values below `full`
/// are held back: see stream_filter).
inline bool shows(verbosity v, const stream_event& e) noexcept { return shows(v, stream_event_name(e.mode)); }

/// @brief A stream handler that passes on what a verbosity level shows:
/// @code
/// stategraph::stream_filter only_events(stategraph::verbosity::events, print);
/// co_await app.stream(input, cfg, stream_mode::values | stream_mode::updates, only_events);
/// only_events.finish();  // below full: the final values, once
/// @endcode
/// Below `full`, values events are held back and `finish()` passes on the last one (the run's
/// final state), as the server does when a run ends. Copies share one filter (the run stores a
/// copy of its handler). Not thread safe (a run's events arrive one at a time).
class stream_filter {
public:
    /// @param level what passes: `full` everything, lower levels fewer events (see `verbosity`).
    /// @param next the handler events are passed to, called synchronously from `operator()`.
    stream_filter(verbosity level, stream_handler next)
        : shared_(std::make_shared<shared>(shared{level, std::move(next), std::nullopt})) {}

    void operator()(const stream_event& e) const {
        auto& s = *shared_;
        if (s.level != verbosity::full && e.mode == stream_mode::values && e.ns.empty()) {
            s.last_values = e;
            return;
        }
        if (shows(s.level, e) && s.next) s.next(e);
    }

    /// @brief At the end of the run: below full verbosity, the final values (once).
    void finish() const {
        auto& s = *shared_;
        if (s.last_values && s.next) s.next(*s.last_values);
        s.last_values.reset();
    }

    verbosity level() const noexcept { return shared_->level; }

private:
    struct shared {
        verbosity level;
        stream_handler next;
        std::optional<stream_event> last_values;
    };
    std::shared_ptr<shared> shared_;
};

} // namespace stategraph
