#pragma once
/// @file detail/gcc12.hpp
/// @brief What g++ 12 gets wrong in `co_await` expressions, as traits the public API checks in
/// `static_assert`s, so that a spelling that would crash under g++ 12 does not compile there and
/// says what to write instead (see docs/getting-started.md, "Running a graph from `main()`").

#include <type_traits>

namespace stategraph::detail {

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
/// g++ 12 destroys the captures of a lambda built in a `co_await` expression twice.
template <class F>
inline constexpr bool gcc12_unsafe_callable =
    !std::is_lvalue_reference_v<F> && !std::is_trivially_destructible_v<std::remove_cvref_t<F>>;
#else
template <class F>
inline constexpr bool gcc12_unsafe_callable = false;
#endif

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
/// g++ 12 destroys an aggregate-initialized temporary twice when it stands in an expression
/// that contains `co_await` (a bug of the calling coroutine, not of the callee).
template <class P>
inline constexpr bool gcc12_unsafe_temporary =
    !std::is_lvalue_reference_v<P> && std::is_aggregate_v<std::remove_cvref_t<P>> &&
    !std::is_trivially_destructible_v<std::remove_cvref_t<P>>;
#else
template <class P>
inline constexpr bool gcc12_unsafe_temporary = false;
#endif

/// @brief True for an argument type a caller may build in place (`f({...})`, `f(T{...})`) inside
/// a `co_await` expression under g++ 12: braces that call a constructor are safe, and so is an
/// aggregate that owns nothing; an aggregate that owns memory is destroyed twice there (measured:
/// `tests/graph/test_natural_spelling.cpp`). Every public argument type checks it in a
/// `static_assert` beside its definition, on every compiler, so the library stays safe to build
/// with g++ 12 whichever compiler its developers use.
template <class T>
inline constexpr bool safe_in_co_await = !std::is_aggregate_v<T> || std::is_trivially_destructible_v<T>;

} // namespace stategraph::detail
