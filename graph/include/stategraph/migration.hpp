#pragma once
/// @file migration.hpp
/// @brief State migrations: a thread written by an older version of a graph's state is carried
/// to the state the graph has now, one typed step at a time, when it is read (resume, continue,
/// `get_state`, history, `update_state`).
///
/// A graph's state has a version (1 unless `state_graph::set_state_version` says otherwise);
/// every checkpoint records the version that wrote it. A migration takes a state of version N,
/// as the struct it was then, to version N+1:
///
/// ```
/// struct ticket_v1 { std::string question; std::string answer; };          // the old state, kept
/// BOOST_DESCRIBE_STRUCT(ticket_v1, (), (question, answer))
/// struct ticket { std::string question; std::vector<std::string> answers; int priority = 0; };
///
/// state_graph<ticket> g;
/// g.set_state_version(2).add_migration(1, [](const ticket_v1& old) {
///     return ticket{old.question, {old.answer}, 0};
/// });
/// ```
///
/// `compile()` checks the chain: one migration from each version to the next up to the state's
/// version, each one's result the next one's argument, the last one's result the state. A thread
/// of a version that no chain of migrations reaches (older than the first migration, or newer than
/// the graph) keeps the typed drift error (`errc::graph_drift`) naming the thread and versions.
///
/// What is carried: the checkpoint's state values, read as the old struct (fields the checkpoint
/// never wrote keep the struct's defaults). Node names in what runs next and in pending
/// interrupts must still be nodes of the graph. Writes that tasks of an interrupted step had
/// already saved are kept for the fields the new state still has and dropped for the others.
/// The stored checkpoints are not rewritten: the first checkpoint written after a migration holds
/// every field whole, at the new version.
///
/// Thread safety: migrations are immutable once compiled and run concurrently for many threads;
/// a migration function must not touch shared mutable data.

#include <stategraph/core/error.hpp>
#include <stategraph/json_shape.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value_from.hpp>

#include <functional>
#include <string>
#include <type_traits>
#include <typeindex>

namespace stategraph {

/// @brief One migration, type-erased (made by `state_graph::add_migration`).
struct state_migration {
    int from = 0;                            ///< the version it reads; it writes `from + 1`
    std::type_index from_type = typeid(void), to_type = typeid(void);
    std::string from_name, to_name;          ///< the types' names, for compile() problems
    /// Reads the state as the `from` struct (JSON of its fields), returns the next version's.
    /// Throws `graph_error` naming the thread's checkpoint (`where`) when a value does not fit.
    std::function<boost::json::object(const boost::json::object& state, const std::string& where)> run;
};

namespace detail {

template <class F>
struct migration_signature : migration_signature<decltype(&F::operator())> {};
template <class R, class A>
struct migration_signature<R (*)(A)> {
    using from = std::remove_cvref_t<A>;
    using to = R;
};
template <class C, class R, class A>
struct migration_signature<R (C::*)(A) const> : migration_signature<R (*)(A)> {};
template <class C, class R, class A>
struct migration_signature<R (C::*)(A)> : migration_signature<R (*)(A)> {};

template <class From, class To, class F>
state_migration make_migration(int from, F fn) {
    static_assert(is_described_struct_v<From> && is_described_struct_v<To>,
                  "add_migration: both the old and the new state must be structs described with BOOST_DESCRIBE_STRUCT "
                  "(keep the old state's struct, described, for its migration)");
    static_assert(std::is_invocable_r_v<To, F&, const From&>,
                  "add_migration<From, To>(from, fn): fn must take the old state (const From&) and return the new (To)");
    state_migration m;
    m.from = from;
    m.from_type = typeid(From);
    m.to_type = typeid(To);
    m.from_name = short_type_name<From>();
    m.to_name = short_type_name<To>();
    m.run = [fn = std::move(fn)](const boost::json::object& state, const std::string& where) -> boost::json::object {
        const From old = read_json<From>(boost::json::value(state), errc::corrupt_checkpoint, where);
        To next = fn(old);
        return boost::json::value_from(next).as_object();
    };
    return m;
}

} // namespace detail
} // namespace stategraph
