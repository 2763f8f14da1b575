#pragma once
/// @file detail/names.hpp
/// @brief Name suggestions for error messages ("did you mean 'retrieve'?"): internal to
/// stategraph, used by `compile()` and the engine when a node or field name is unknown.

#include <cstddef>
#include <string>
#include <vector>

namespace stategraph::detail {

/// @brief The edit distance (Levenshtein) between two names.
std::size_t edit_distance(const std::string& a, const std::string& b);

/// @brief The nearest of `candidates` to `name`, or "" when nothing is close: at most a third of
/// the name's length in edits (at least 2), or else a candidate containing the name or contained
/// in it.
std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates);

} // namespace stategraph::detail
