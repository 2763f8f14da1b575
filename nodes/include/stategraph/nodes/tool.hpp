#ifndef STATEGRAPH_NODES_TOOL_HPP
#define STATEGRAPH_NODES_TOOL_HPP

/// @file
/// @brief `tool`: a function the model may call, with its name, description and JSON Schema.

#include <stategraph/context.hpp>
#include <stategraph/nodes/chat_model.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace stategraph::nodes {

namespace detail {
template <class T> struct tool_awaited { using type = T; static constexpr bool awaits = false; };
template <class T, class E> struct tool_awaited<boost::asio::awaitable<T, E>> { using type = T; static constexpr bool awaits = true; };

template <class F>
concept tool_with_context = std::is_invocable_v<F&, boost::json::object const&, stategraph::context&>;
template <class F>
concept tool_without_context = std::is_invocable_v<F&, boost::json::object const&>;

template <class F>
auto tool_result_impl() {
    if constexpr (tool_with_context<F>) return std::type_identity<std::invoke_result_t<F&, boost::json::object const&, stategraph::context&>>{};
    else if constexpr (tool_without_context<F>) return std::type_identity<std::invoke_result_t<F&, boost::json::object const&>>{};
    else return std::type_identity<void>{};
}
template <class F>
using tool_value_t = typename tool_awaited<typename decltype(tool_result_impl<F>())::type>::type;
/// Whether Boost.JSON can convert what the tool gives (checked once the signature fits).
template <class F>
inline constexpr bool tool_result_converts = boost::json::has_value_from<std::decay_t<tool_value_t<F>>>::value;
}  // namespace detail

/// @brief A callable that can be a tool: `R f(boost::json::object const& args)` or
/// `R f(boost::json::object const& args, stategraph::context& ctx)`, where R (or what an
/// `awaitable<R>` gives) converts to JSON (a string, a number, a described struct, a json::value).
/// A struct of your own converts once it is listed with `BOOST_DESCRIBE_STRUCT(T, (), (fields...))`
/// or has a `tag_invoke(boost::json::value_from_tag, boost::json::value&, T const&)` beside it;
/// without either, `tool(...)` stops the build with a message saying so.
template <class F>
concept tool_function = (detail::tool_with_context<F> || detail::tool_without_context<F>) &&
                        !std::is_void_v<detail::tool_value_t<F>>;

/// @brief A tool offered to a model and run by a tool_node.
///
/// The function gets the call's arguments (a JSON object) and, if it takes it, the node's
/// `stategraph::context` (to `interrupt_now()` for a human, stream events, read the runtime).
/// What it returns becomes the tool message's content (a JSON string as is, anything else
/// serialized). An exception becomes a tool message with error `tool_failed`; throw
/// `agent_error(errc::tool_denied, ...)` to refuse. With `ask_first`, each call first
/// interrupts the run with `{"type":"tool_approval","tool","arguments","tool_call_id"}`; a
/// resume of `true` runs it, anything else answers the model with a `tool_denied` message.
/// A function without the context parameter runs at most once per call: its result is saved
/// with the task (see journaled()); one that takes the context runs again whenever the node does.
/// Thread safety: immutable once configured (the function is shared between copies); a tool may be
/// offered to many runs at once, so its function is called concurrently: make it safe for that. It
/// runs on the run's executor, inside the tool node's task.
class tool {
public:
    using function_type =
        std::function<boost::asio::awaitable<boost::json::value>(boost::json::object const&, stategraph::context&)>;

    /// @brief A tool named @p name, described for the model, with a JSON Schema of its arguments
    /// (null: any object).
    /// @tparam F the function's type (see `tool_function`; a `static_assert` says what is wrong).
    /// @param name the tool's name as the model sees and calls it (also matched by permission rules).
    /// @param description what the tool does, sent to the model.
    /// @param parameters the JSON Schema of the arguments object, sent to the model as is; the
    /// arguments are not validated against it before `fn` runs.
    /// @param fn the function, moved into shared storage.
    template <class F>
    tool(std::string name, std::string description, boost::json::value parameters, F fn) {
        static_assert(tool_function<F>,
                      "tool(name, description, schema, fn): fn must be callable as fn(const boost::json::object& args) "
                      "or fn(const boost::json::object& args, stategraph::context& ctx) and return a value that "
                      "converts to JSON (std::string, a number, boost::json::value, a described struct) or an "
                      "awaitable of one");
        if constexpr (tool_function<F>)
            static_assert(detail::tool_result_converts<F>,
                          "stategraph::nodes::tool: the function's result type has no conversion to JSON; give it "
                          "one: BOOST_DESCRIBE_STRUCT(T, (), (fields...)) for a plain struct, or "
                          "`void tag_invoke(boost::json::value_from_tag, boost::json::value& out, T const& v)` beside T "
                          "(found by ADL), or return std::string or boost::json::value");
        definition_.name = std::move(name);
        definition_.description = std::move(description);
        definition_.parameters = std::move(parameters);
        if constexpr (tool_function<F> && detail::tool_result_converts<F>) fn_ = wrap(std::move(fn));
        journaled_ = !detail::tool_with_context<F>;
    }

    /// @brief Ask a human before each call (an interrupt; resume with true to run it).
    /// @param on true: interrupt for approval before each call (the thread needs a checkpointer).
    /// @return `*this` (moved, from the `&&` overload).
    tool& ask_first(bool on = true) & {
        ask_first_ = on;
        return *this;
    }
    tool&& ask_first(bool on = true) && { return std::move(ask_first(on)); }

    /// @brief The argument that permission rules match (`Bash(git push *)` matches the
    /// "command" argument of tool Bash with `.subject("command")`); default: the first string argument.
    /// @param field the name of a string argument of the tool.
    /// @return `*this` (moved, from the `&&` overload).
    tool& subject(std::string field) & {
        subject_ = std::move(field);
        return *this;
    }
    tool&& subject(std::string field) && { return std::move(subject(std::move(field))); }
    std::string const& subject_field() const noexcept { return subject_; }

    /// @brief An exception of this tool that is not an agent_error fails the tool node (after the
    /// node's other calls end, so their journaled results are kept) instead of answering the
    /// model with `tool_failed`: the node's retry policy, or running the thread again, re-runs
    /// only the calls that did not finish. agent_error refusals still answer the model.
    /// @param on true: a failure of the tool fails the node instead of answering the model.
    /// @return `*this` (moved, from the `&&` overload).
    tool& failure_stops_node(bool on = true) & {
        stops_node_ = on;
        return *this;
    }
    tool&& failure_stops_node(bool on = true) && { return std::move(failure_stops_node(on)); }
    bool stops_node_on_failure() const noexcept { return stops_node_; }

    tool_definition const& definition() const noexcept { return definition_; }
    std::string const& name() const noexcept { return definition_.name; }
    bool asks_first() const noexcept { return ask_first_; }
    /// @brief Whether the tool node saves its result as a side effect of the task
    /// (`ctx.task`), so that it does not run again when the node runs again after an interrupt:
    /// true for functions that do not take the context (they cannot interrupt).
    bool journaled() const noexcept { return journaled_; }

    /// @brief Run the tool (no approval step; the tool node asks first).
    /// @param args the call's arguments (must outlive the returned awaitable).
    /// @param ctx the calling node's context.
    /// @return the function's result as JSON; its exception propagates.
    boost::asio::awaitable<boost::json::value> run(boost::json::object const& args, stategraph::context& ctx) const {
        return fn_(args, ctx);
    }

private:
    template <class F>
    static function_type wrap(F fn) {
        auto shared = std::make_shared<F>(std::move(fn));
        return [shared](boost::json::object const& args, stategraph::context& ctx) -> boost::asio::awaitable<boost::json::value> {
            auto keep = shared;  // the function lives as long as this call
            using R = typename decltype(detail::tool_result_impl<F>())::type;
            auto call = [&]() -> R {
                if constexpr (detail::tool_with_context<F>) return (*keep)(args, ctx);
                else return (*keep)(args);
            };
            if constexpr (detail::tool_awaited<R>::awaits) {
                auto pending = call();
                auto value = co_await std::move(pending);
                co_return boost::json::value_from(std::move(value));
            } else {
                auto value = call();
                co_return boost::json::value_from(std::move(value));
            }
        };
    }

    tool_definition definition_;
    function_type fn_;
    bool ask_first_ = false;
    bool journaled_ = false;
    bool stops_node_ = false;
    std::string subject_;
};

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_TOOL_HPP
