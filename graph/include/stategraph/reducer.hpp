#pragma once
/// @file reducer.hpp
/// @brief Per-field reducers, declared beside the state:
/// @code
/// inline auto reducers(stategraph::for_state<my_state>) {
///     return stategraph::reducers{stategraph::reduce<&my_state::log>(stategraph::append)};
/// }
/// @endcode
/// Fields without a reducer keep the last value written (two writes in one step are an error).

#include <stategraph/state.hpp>

#include <algorithm>
#include <concepts>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace stategraph {

/// @brief Tag used to find a state's `reducers(for_state<S>)` declaration by ADL.
template <class S>
struct for_state {};

/// @brief Reducer: concatenate the update onto the current value (vectors, strings, deques).
/// Thread safety: stateless; call from any thread.
struct append_t {
    template <class T>
        requires requires(T& c, T& u) { c.insert(c.end(), std::make_move_iterator(u.begin()), std::make_move_iterator(u.end())); }
    T operator()(T current, T update) const {
        current.insert(current.end(), std::make_move_iterator(update.begin()), std::make_move_iterator(update.end()));
        return current;
    }
};
inline constexpr append_t append{};

/// @brief Reducer for message lists, as LangGraph's `add_messages`: a message whose id is
/// already present replaces it, a message with role "remove" deletes the message with its
/// id, anything else is appended. Messages without an id get one.
/// Thread safety: call from any thread (ids come from a process-wide atomic counter).
struct messages_t {
    template <class T>
        requires requires(T& c) { c.begin()->id; c.begin()->role; }
    T operator()(T current, T update) const {
        for (auto& m : update) {
            if (m.id.empty()) m.id = "m" + std::to_string(current.size() + 1) + "-" + std::to_string(next_id());
            auto it = std::find_if(current.begin(), current.end(), [&](const auto& c) { return c.id == m.id; });
            if (m.role == "remove") {
                if (it != current.end()) current.erase(it);
            } else if (it != current.end()) {
                *it = std::move(m);
            } else {
                current.push_back(std::move(m));
            }
        }
        return current;
    }

private:
    static unsigned long next_id();
};
inline constexpr messages_t messages{};

/// @brief A reducer bound to one field: `reduce<&S::field>(op)`. `op` is `T(T, T)`.
template <auto M, class Op>
struct field_reducer {
    using value_type = typename member_traits<M>::value_type;
    static constexpr auto member = M;
    Op op;
    static_assert(std::is_invocable_r_v<value_type, Op, value_type, value_type>,
                  "reduce<&S::field>(op): the reducer does not fit the field's type T; a reducer must be callable as "
                  "T(T current, T update); stategraph::append needs a container field (std::vector, std::string, std::deque) "
                  "and stategraph::messages a list of messages; for other types write a lambda taking and returning T, "
                  "e.g. [](int current, int update) { return current + update; }");
};

/// @brief Declares the reducer of field `M`.
/// @tparam M `&S::field`, the field reduced.
/// @tparam Op callable as `T(T current, T update)` with `T` the field's type (a `static_assert`
/// says so otherwise).
/// @param op the reducer, copied into the state's reducer list; called by the engine on the run's
/// executor, possibly from several runs at once, so it must not keep shared mutable state.
/// @return the reducer to list in `reducers{...}`.
template <auto M, class Op>
constexpr field_reducer<M, std::decay_t<Op>> reduce(Op&& op) {
    return {std::forward<Op>(op)};
}

/// @brief The list of a state's reducers, returned by `reducers(for_state<S>)`.
template <class... R>
struct reducers {
    std::tuple<R...> list;
    constexpr reducers(R... r) : list(std::move(r)...) {}
};
template <class... R>
reducers(R...) -> reducers<R...>;

namespace detail {
namespace adl {
// Ordinary lookup must find a function here (not the class template `reducers`), so that the
// unqualified call below looks up the user's `reducers(for_state<S>)` by ADL.
void reducers() = delete;
template <class S>
concept has_reducers = requires { reducers(for_state<S>{}); };
template <class S>
auto call_reducers() { return reducers(for_state<S>{}); }
} // namespace adl
using adl::has_reducers;

struct no_reducers {
    std::tuple<> list;
};

template <class S>
auto state_reducers() {
    if constexpr (has_reducers<S>) return adl::call_reducers<S>();
    else return no_reducers{};
}
template <class S>
using reducers_of = decltype(state_reducers<S>());

/// Index of the reducer for field I in the tuple, or -1.
template <class S, std::size_t I, class Tuple>
constexpr int reducer_slot() {
    int found = -1, j = 0;
    boost::mp11::mp_for_each<boost::mp11::mp_transform<std::type_identity, Tuple>>([&](auto t) {
        using R = typename decltype(t)::type;
        if constexpr (requires { R::member; }) {
            if (field_index<R::member>() == I) found = j;
        }
        ++j;
    });
    return found;
}
} // namespace detail

/// @brief Whether field `M` (`&S::field`) has a reducer in `reducers(for_state<S>)`; without one
/// a write replaces the field (the last value wins).
template <auto M>
inline constexpr bool has_reducer_v = detail::reducer_slot<typename member_traits<M>::state_type, field_index<M>(),
                                                           std::remove_cvref_t<decltype(detail::state_reducers<
                                                               typename member_traits<M>::state_type>().list)>>() >= 0;

} // namespace stategraph
