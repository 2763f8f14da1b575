#pragma once
/// @file state.hpp
/// @brief Compile-time facts about a state type described with Boost.Describe: its fields,
/// their names and the index of a field given its member pointer.

#include <boost/describe.hpp>
#include <boost/mp11.hpp>

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

namespace stategraph {

/// @brief A type that Boost.Describe can list the public members of.
template <class S>
concept described_state = std::is_class_v<S> && std::is_default_constructible_v<S> &&
                          boost::describe::has_describe_members<S>::value;

template <class S>
using state_fields = boost::describe::describe_members<S, boost::describe::mod_public>;

/// @brief The number of fields (channels) of a state.
template <class S>
inline constexpr std::size_t field_count_v = boost::mp11::mp_size<state_fields<S>>::value;

/// @brief The type of member pointer `M`'s field.
template <auto M>
struct member_traits;
template <class S, class T, T S::*M>
struct member_traits<M> {
    using state_type = S;
    using value_type = T;
};

namespace detail {
/// The position of member `M` among the described fields of its struct, or -1.
template <auto M>
constexpr std::size_t find_field() {
    using S = typename member_traits<M>::state_type;
    std::size_t found = static_cast<std::size_t>(-1), i = 0;
    boost::mp11::mp_for_each<state_fields<S>>([&](auto d) {
        if constexpr (std::is_same_v<std::remove_cv_t<decltype(d.pointer)>, std::remove_cv_t<decltype(M)>>) {
            if (d.pointer == M) found = i;
        }
        ++i;
    });
    return found;
}
} // namespace detail

/// @brief Whether member `M` (`&S::field`) is listed in its struct's `BOOST_DESCRIBE_STRUCT`.
template <auto M>
inline constexpr bool described_field_v = detail::find_field<M>() != static_cast<std::size_t>(-1);

/// @brief Whether `m`, a member pointer known at run time (`on(&S::x, ...)`), is a described field.
template <class S, class T>
bool is_described_member(T S::*m) {
    bool found = false;
    boost::mp11::mp_for_each<state_fields<S>>([&](auto d) {
        if constexpr (std::is_same_v<std::remove_cv_t<decltype(d.pointer)>, T S::*>) found = found || d.pointer == m;
    });
    return found;
}

/// @brief The position of member `M` among the described fields of its struct. A member left
/// out of `BOOST_DESCRIBE_STRUCT` is a compile error (the instantiation names it as `M = &S::x`).
template <auto M>
constexpr std::size_t field_index() {
    static_assert(described_field_v<M>,
                  "stategraph: this field of the state (M = &S::field, named in the lines above) is not listed in "
                  "BOOST_DESCRIBE_STRUCT(S, (), (...)); the engine keeps, merges and saves only the listed fields, "
                  "so add it to the list: BOOST_DESCRIBE_STRUCT(S, (), (..., field))");
    return detail::find_field<M>();
}

/// @brief The names of a state's fields, in declaration order.
template <class S>
const std::array<std::string_view, field_count_v<S>>& field_names() {
    static const auto names = [] {
        std::array<std::string_view, field_count_v<S>> out{};
        std::size_t i = 0;
        boost::mp11::mp_for_each<state_fields<S>>([&](auto d) { out[i++] = d.name; });
        return out;
    }();
    return names;
}

/// @brief Calls `f(index, descriptor)` for each field, with the index as a compile-time constant.
template <class S, class F>
constexpr void for_each_field(F&& f) {
    boost::mp11::mp_for_each<boost::mp11::mp_iota_c<field_count_v<S>>>([&](auto I) {
        f(I, boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>{});
    });
}

} // namespace stategraph
