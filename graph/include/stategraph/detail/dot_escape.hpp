#pragma once
/// @file dot_escape.hpp
/// @brief Escaping for a Graphviz quoted string (shared by the DOT and diff writers).

#include <string>

namespace stategraph::detail {

/// @brief `s` with `"` and `\` escaped, for use between double quotes in DOT.
std::string dot_escape(const std::string& s);

} // namespace stategraph::detail
