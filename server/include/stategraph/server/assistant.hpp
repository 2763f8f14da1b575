#pragma once
/// @file assistant.hpp
/// @brief `assistant_spec`: a compiled graph as the server sees it (type-erased, JSON in and
/// out), and `assistant_options`, how its runs are made.

#include <stategraph/compiled_graph.hpp>
#include <stategraph/server/run_context.hpp>

#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace stategraph::server {

/// @brief How the server runs one graph.
/// Thread safety: a plain value, copied into the assistant; `input_adapter` is called on the
/// server's executor, once per run created.
struct assistant_options {
    std::string description;
    int recursion_limit = 25; ///< per run, unless the run's `config.recursion_limit` says otherwise
    /// Turns a run's `input` into another before it is read, for a shape the graph's input schema
    /// cannot say (a graph that declares one, `state_graph::input_schema`, needs none: a run's
    /// input is read through it, else as the state's fields). Its result is read as the graph's
    /// input, against the thread's state. Gets the thread's id in the
    /// checkpointer (with API keys not the client's id but one of its key's own, so two keys'
    /// threads of one id are apart; without keys the client's id). May throw
    /// `http_error` (422) naming what is wrong. Null: the input is the state's fields as they are.
    std::function<boost::json::object(boost::json::object input, const std::string& thread_id)> input_adapter;
    /// A typed runtime context (`context_of<T>()`): a run's `context` (merged over its
    /// assistant's) is read as `T`, checked when the run is created, and its nodes read
    /// `ctx.runtime<T>()`. Null: the nodes read `ctx.runtime<served_context>()`, the context and
    /// `config.configurable` as JSON.
    std::shared_ptr<const context_reader> context;
};

/// @brief A graph served as an assistant: its id, its engine tables, its options.
/// Thread safety: a plain value; the graph it refers to is shared and immutable.
struct assistant_spec {
    std::string graph_id;
    std::shared_ptr<const detail::graph_core> core;
    assistant_options options;
};

template <class G>
inline constexpr bool is_compiled_graph_v = false;
template <class S>
inline constexpr bool is_compiled_graph_v<compiled_graph<S>> = true;

/// @brief The spec of compiled graph `g` served as `graph_id`. The graph needs a checkpointer:
/// the server keeps every thread in it.
/// @throws std::invalid_argument naming the graph when it has none, or when `graph_id` is empty.
/// @tparam G `compiled_graph<S>` (a `static_assert` says what to do with a builder).
/// @param graph_id the id clients use (`graph_id`; the assistant id is derived from it).
/// @param g the compiled graph, shared (not copied) with the server; it needs a checkpointer.
/// @param options description, default recursion limit (25), input adapter and typed context.
/// @return the spec to pass to `server::add`.
/// Thread safety: a pure function; any thread.
template <class G>
assistant_spec make_assistant(std::string graph_id, const G& g, assistant_options options = {}) {
    static_assert(is_compiled_graph_v<std::remove_cvref_t<G>>,
                  "make_assistant(id, g): g must be a stategraph::compiled_graph<S>; call "
                  "builder.compile({.checkpointer = saver}) on your state_graph first");
    if (graph_id.empty()) throw std::invalid_argument("make_assistant: the graph id is empty");
    if (!g.core() || !g.checkpointer())
        throw std::invalid_argument("make_assistant: graph '" + graph_id +
                                    "' has no checkpointer; compile it with one (the server keeps its threads there)");
    return {std::move(graph_id), g.core(), std::move(options)};
}

} // namespace stategraph::server
