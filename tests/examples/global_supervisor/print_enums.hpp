#pragma once
// Lets Boost.Test print the supervisor's described enums in failure messages.
#include <boost/describe/enum_to_string.hpp>
#include <boost/describe/enumerators.hpp>

#include <ostream>
#include <type_traits>

namespace global_supervisor {
template <class E>
    requires(std::is_enum_v<E> && boost::describe::has_describe_enumerators<E>::value)
std::ostream& operator<<(std::ostream& os, E e) {
    return os << boost::describe::enum_to_string(e, "(unnamed)");
}
} // namespace global_supervisor
