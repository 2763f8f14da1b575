#ifndef STATEGRAPH_MCP_CALL_HPP
#define STATEGRAPH_MCP_CALL_HPP

/// @file
/// @brief A tool call's options (`call_options`: time limit, progress callback) and its result
/// (`call_result`: content, structured content, isError).

#include <boost/json/array.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace stategraph::mcp {

/// @brief One `notifications/progress` of a call.
struct progress {
    double value = 0;             ///< @brief Increases with each notification.
    std::optional<double> total;  ///< @brief When the server knows it.
    std::string message;          ///< @brief May be empty.
};

/// @brief Options of one tool call. An aggregate: build it before the `co_await` (g++ 12).
struct call_options {
    /// @brief Time limit of this call; zero: the server's `timeout`. When it passes, the server
    /// is sent `notifications/cancelled` and the call throws mcp_error(errc::timeout).
    std::chrono::milliseconds timeout{0};
    /// @brief Called for each progress notification (the request then carries a progressToken).
    /// It runs on the client's I/O thread: keep it short, and synchronize what it touches.
    std::function<void(progress const&)> on_progress;
    /// @brief Each progress notification restarts the time limit, so that a long call that keeps
    /// reporting is not cut; `max_timeout` still ends it.
    bool reset_timeout_on_progress = false;
    /// @brief With reset_timeout_on_progress: the most a call may take; zero: ten times its time limit.
    std::chrono::milliseconds max_timeout{0};
};

/// @brief What `tools/call` returned.
struct call_result {
    boost::json::array content;            ///< @brief Content items (`{"type":"text","text":...}`, images, resources...).
    boost::json::value structured_content; ///< @brief `structuredContent`; null when absent.
    bool is_error = false;                 ///< @brief The tool reported a failure (content says why).

    /// @brief The text items of `content`, joined by newlines.
    std::string text() const {
        std::string out;
        for (auto const& item : content) {
            auto const* obj = item.if_object();
            if (!obj) continue;
            auto const* type = obj->if_contains("type");
            auto const* text = obj->if_contains("text");
            if (type && type->is_string() && type->get_string() == "text" && text && text->is_string()) {
                if (!out.empty()) out += '\n';
                out.append(text->get_string().data(), text->get_string().size());
            }
        }
        return out;
    }
};

}  // namespace stategraph::mcp

#endif  // STATEGRAPH_MCP_CALL_HPP
