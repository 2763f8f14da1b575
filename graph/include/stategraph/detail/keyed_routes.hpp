#pragma once
/// @file
/// @brief A conditional edge's path map, keyed by route value (an enum, bool, integer or string),
/// in the form the builder stores: the keys apart, and the labels and targets in a table that
/// does not depend on the key's type. Only the key comparisons are instantiated per key type;
/// the table's work (the branch's spec, a route's targets, a duplicate's message) is compiled
/// once in the library. `state_graph::add_conditional_edges` with a `std::map` and the DSL's
/// route maps both lower to it.

#include <stategraph/core/error.hpp>

#include <boost/describe/enum_to_string.hpp>
#include <boost/describe/enumerators.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::detail {

struct graph_core;

/// @brief The label a route value is drawn and reported with: `true`/`false`, an enumerator's
/// name, the string itself, or the number.
/// @tparam T the router's result type (or an element of it, for a router returning a vector).
template <class T>
std::string route_label(const T& v) {
    if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
    else if constexpr (std::is_enum_v<T> && boost::describe::has_describe_enumerators<T>::value) {
        const char* s = boost::describe::enum_to_string(v, nullptr);
        return s ? s : std::to_string(static_cast<long long>(v));
    } else if constexpr (std::is_convertible_v<T, std::string>) return std::string(v);
    else if constexpr (std::is_integral_v<T>) return std::to_string(v);
    else static_assert(sizeof(T) == 0, "a router must return a string, bool, integer, described enum, send or a vector of those");
}

/// @brief Route `i` of a path map: drawn as `labels[i]`, leading to every node of `targets[i]`.
/// Thread safety: a plain value; shared read-only by a compiled graph's runs.
struct route_table {
    std::vector<std::string> labels;
    std::vector<std::vector<std::string>> targets;
    /// Keys given again (the DSL's route maps): (route kept, the targets given the second time).
    std::vector<std::pair<std::size_t, std::vector<std::string>>> duplicates;

    route_table();
    route_table(const route_table&);
    route_table(route_table&&) noexcept;
    route_table& operator=(const route_table&);
    route_table& operator=(route_table&&) noexcept;
    ~route_table();

    /// @brief Inserts route `pos` (0 = first).
    void insert(std::size_t pos, std::string label, std::vector<std::string> to);
    /// @brief Records that route `pos`'s key was given again, with targets `to` (ignored).
    void duplicate(std::size_t pos, std::vector<std::string> to);
    /// @brief Appends route `i`'s targets to `out` (the engine's list of next nodes).
    void append(std::size_t i, std::vector<std::string>& out) const;
};

/// @brief Throws `graph_error(errc::unmapped_route)`: the router returned `label`, which no route maps.
[[noreturn]] void throw_unmapped_route(const std::string& label);

/// @brief Adds to `problems` a `duplicate_route` problem for each key `table` was given twice.
/// @param from the node the conditional edge leaves (named in the message).
void report_duplicates(const route_table& table, const std::string& from, std::vector<graph_problem>& problems);

/// @brief Records a keyed conditional edge's shape in `g` (its routes, and `unmapped`: the router's
/// values no route maps) and returns the table its router reads at run time.
std::shared_ptr<const route_table> add_keyed_branch(graph_core& g, std::string from, route_table table,
                                                    std::vector<std::string> unmapped);

/// @brief A path map keyed by `K`, in key order, each key once.
/// @tparam K the key: `bool`, an integer, an enum or `std::string` (anything with `<` and `==`).
/// Thread safety: a plain value.
template <class K>
struct keyed_routes {
    std::vector<K> keys; ///< keys[i] selects table route i
    route_table table;

    /// @brief Adds `k` → `to` in key order. A key already present keeps its targets (as a
    /// `std::map`'s emplace would) and the second ones are recorded in `table.duplicates`.
    void insert(const K& k, std::vector<std::string> to) {
        std::size_t pos = 0;
        while (pos < keys.size() && keys[pos] < k) ++pos;
        if (pos < keys.size() && !(k < keys[pos])) return table.duplicate(pos, std::move(to));
        keys.insert(keys.begin() + static_cast<std::ptrdiff_t>(pos), k);
        table.insert(pos, route_label(k), std::move(to));
    }

    /// @brief Whether `k` has a route.
    bool contains(const K& k) const {
        for (const auto& key : keys)
            if (key == k) return true;
        return false;
    }
};

/// @brief The route of `k`; throws `graph_error(errc::unmapped_route)` naming it when there is none.
template <class K>
std::size_t route_index(const std::vector<K>& keys, const K& k) {
    for (std::size_t i = 0; i < keys.size(); ++i)
        if (keys[i] == k) return i;
    throw_unmapped_route(route_label(k));
}

} // namespace stategraph::detail
