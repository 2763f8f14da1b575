#pragma once
/// @file command.hpp
/// @brief `send` (map-reduce fan-out), `command<S>` (go to nodes plus an update) and the
/// inputs of a run that are not state: `resume(...)` and `resume_map(...)`.

#include <stategraph/detail/state_table.hpp>
#include <stategraph/update.hpp>

#include <boost/core/demangle.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

namespace stategraph {

/// @brief Runs `node` in the next superstep with `arg` as its only input (LangGraph's Send).
/// `arg` is either the state type or the input type the node declares.
/// Thread safety: an immutable value after construction (the payload is shared, const); copies
/// may be used from any thread.
class send {
public:
    /// @brief A Send of `arg` to `node`.
    /// @tparam T the payload type: the graph's state, or the first parameter type of `node`'s
    /// function; it needs a JSON conversion (it is checkpointed). A type the node does not take fails
    /// the call with `graph_error(invalid_input)`.
    /// @param node the node to run; an unknown name fails the call with `graph_error(invalid_route)`.
    /// @param arg the payload, moved into shared storage.
    template <class T>
    send(std::string node, T arg)
        : node_(std::move(node)), arg_(std::make_shared<const T>(std::move(arg))), type_(typeid(T)),
          to_json_([](const void* p) { return boost::json::value_from(*static_cast<const T*>(p)); }) {}

    const std::string& node() const noexcept { return node_; }
    std::type_index type() const noexcept { return type_; }
    const void* arg() const noexcept { return arg_.get(); }
    boost::json::value arg_json() const { return to_json_(arg_.get()); }

    /// @brief A send restored from a checkpoint (the engine converts the JSON payload).
    static send restored(std::string node, std::shared_ptr<const void> arg, std::type_index type,
                         boost::json::value (*to_json)(const void*)) {
        send s;
        s.node_ = std::move(node);
        s.arg_ = std::move(arg);
        s.type_ = type;
        s.to_json_ = to_json;
        return s;
    }

private:
    send() : type_(typeid(void)) {}
    std::string node_;
    std::shared_ptr<const void> arg_;
    std::type_index type_;
    boost::json::value (*to_json_)(const void*) = nullptr;
};

namespace detail {
/// A subgraph node's command for its parent graph (`command<S>::to_parent`): the parent's update
/// (of the parent's state type, checked when the parent applies it) and where the parent goes.
struct parent_handoff {
    update_box writes;
    const state_table* table = nullptr; ///< the table of the state type the update was made for
    std::string type_name;              ///< that type's name, for the error when it is not the parent's
    std::vector<std::string> targets;
    std::vector<send> sends;
};
} // namespace detail

/// @brief The input that answers pending interrupts: one value for all of them, or a map
/// from interrupt id to value.
/// Thread safety: a plain value; distinct objects are independent.
struct resume_input {
    boost::json::value value;
    std::map<std::string, boost::json::value> by_id;
    bool is_map = false;
};

/// @brief What a node returns to both update the state and choose where to go next, and what
/// a caller may give `invoke` as LangGraph's `Command(update=..., goto=..., resume=...)`.
///
/// Returned by a node: targets add to the node's static edges (as in LangGraph); END is ignored.
/// As a call's input: with a resume, the update is applied before the resumed step runs and the
/// targets run in that step; without one, the update and the targets make an input checkpoint
/// and the run goes on from it (the nodes the thread waited on run again, beside the targets).
/// `co_await app.invoke(command<S>{}.with(resume("yes")).with(update<S>{}.set<&S::note>("n")), cfg)`.
/// @tparam S the state type of the graph the command is returned in (or given to).
/// Thread safety: a plain value; distinct objects are independent.
template <class S>
struct command {
    update<S> writes;              ///< the state update
    std::vector<std::string> targets; ///< nodes to run in the next superstep
    std::vector<send> sends;       ///< Sends to run in the next superstep
    /// As a call's input only: the answer to the thread's pending interrupts. A node's command
    /// with one fails the node (a resume is a caller's answer).
    std::optional<resume_input> resume;

    /// @brief Adds a target node (run in the next superstep).
    /// @param node a node name, or END (ignored); an unknown name fails the call with
    /// `graph_error(invalid_route)`.
    /// @return `*this`.
    command& go_to(std::string node) & { targets.push_back(std::move(node)); return *this; }
    command&& go_to(std::string node) && { targets.push_back(std::move(node)); return std::move(*this); }
    /// @param nodes target nodes, all run in the next superstep.
    command&& go_to(std::vector<std::string> nodes) && {
        targets.insert(targets.end(), nodes.begin(), nodes.end());
        return std::move(*this);
    }
    /// @param s a Send to run in the next superstep.
    command&& go_to(send s) && { sends.push_back(std::move(s)); return std::move(*this); }
    /// @param u the state update (replaces one set before).
    command&& with(update<S> u) && { writes = std::move(u); return std::move(*this); }
    /// @param r the resume (`resume(v)` or `resume_map(...)`); as a call's input only.
    command&& with(resume_input r) && { resume = std::move(r); return std::move(*this); }

    /// Returned by a subgraph's node: the command `c` for the parent graph instead
    /// (LangGraph's `Command(graph=Command.PARENT, update=..., goto=...)`). The subgraph stops
    /// there; the parent takes `c`'s update as the subgraph node's writes (the subgraph's own
    /// writes are dropped, as LangGraph) and runs `c`'s targets beside its static edges: a
    /// handoff to a sibling of the subgraph node. `P` must be the parent's state type.
    std::shared_ptr<detail::parent_handoff> parent;
    /// @brief Makes this a command for the parent graph:
    /// `return command<Sub>{}.to_parent(command<Parent>{}.with(update<Parent>{...}).go_to("billing"));`
    /// @tparam P the parent graph's state type
    /// @param c the parent's command: its update and targets (its resume is ignored).
    /// @return `*this`, moved.
    template <class P>
    command&& to_parent(command<P> c) && {
        auto h = std::make_shared<detail::parent_handoff>();
        h->table = &detail::table_of<P>();
        h->type_name = boost::core::demangle(typeid(P).name());
        if (!c.writes.empty()) h->writes = detail::update_box::of<P>(std::move(c.writes));
        h->targets = std::move(c.targets);
        h->sends = std::move(c.sends);
        parent = std::move(h);
        return std::move(*this);
    }
};

/// @brief Answers every pending interrupt of the thread with `v`.
/// @tparam T any type with a JSON conversion; the node's `interrupt<R>(...)` reads it back as its
/// `R` (a mismatch is a `thread_error(resume_type_mismatch)`).
/// @param v the answer, converted to JSON now.
template <class T>
resume_input resume(const T& v) { return {boost::json::value_from(v), {}, false}; }
/// @brief Answers pending interrupts by id.
/// @param m interrupt id (`interrupt_info::id`) -> answer; an id that is not pending fails the call
/// with `thread_error(unknown_interrupt_id)`.
inline resume_input resume_map(std::map<std::string, boost::json::value> m) { return {nullptr, std::move(m), true}; }

/// @brief Input as a caller sends it: a JSON object of the graph's input schema
/// (`state_graph::input_schema`), or of the state's fields when it declares none. It is read
/// against the thread's state when the call starts: a nested struct's members left out keep
/// their values (stategraph/json_shape.hpp). Made by `as_input(...)`.
struct schema_input {
    boost::json::object values;
    const std::type_info* type = nullptr; ///< the input type it was made from, if any
};
/// @brief The call's input as a value of the graph's input schema `I`:
/// `co_await app.invoke(as_input(supervisor_input{.user_message = "Hi"}), cfg)`.
/// @tparam I the graph's input schema type (`state_graph::input_schema<I>`), or the state type.
/// @param v the input value, converted to JSON now.
template <class I>
schema_input as_input(const I& v) {
    return {boost::json::value_from(v).as_object(), &typeid(I)};
}
/// @brief The call's input as a caller's JSON object (input schema fields, or state fields).
/// @param values the caller's JSON; an unknown member fails the call with an
/// `unknown_member_error` (`errc::invalid_input`).
inline schema_input as_input(boost::json::object values) { return {std::move(values), nullptr}; }

/// @brief The input that continues a thread from its latest checkpoint without new values.
struct continue_input {};
inline constexpr continue_input continue_run{};

} // namespace stategraph
