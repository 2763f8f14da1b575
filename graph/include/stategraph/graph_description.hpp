#pragma once
/// @file graph_description.hpp
/// @brief A graph's shape as a JSON file that can be committed next to the code (`write_json`,
/// `read_json`), and the difference of two shapes (`diff_graphs`) drawn as Graphviz DOT
/// (`write_diff_dot`) with a text summary a review comment can quote (`diff_summary`).

#include <stategraph/topology.hpp>

#include <concepts>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace stategraph {

/// @brief What is wrong with a graph description file.
enum class description_errc {
    not_json = 1,        ///< the text is not JSON
    missing_field,       ///< a required field is absent
    wrong_type,          ///< a field has the wrong JSON type
    unsupported_version, ///< "format"/"version" is not a stategraph graph description this build reads
    duplicate_node,      ///< two nodes of one graph have the same name
};

/// @brief The category of `description_errc`, named "stategraph.description".
const std::error_category& description_category() noexcept;
inline std::error_code make_error_code(description_errc e) noexcept { return {static_cast<int>(e), description_category()}; }

/// @brief Thrown by `read_json` for a bad file; `field()` is the JSON path, e.g. "nodes[3].retry".
class description_error : public std::system_error {
public:
    description_error(description_errc code, std::string field, const std::string& what)
        : std::system_error(make_error_code(code), what), field_(std::move(field)) {}
    description_errc kind() const noexcept { return static_cast<description_errc>(code().value()); }
    const std::string& field() const noexcept { return field_; }

private:
    std::string field_;
};

/// @brief Writes the description: nodes (stage, kind, modifiers), edges, joins, routes with their
/// keys, Sends, subgraphs and state fields, sorted, with no addresses or times: the same graph
/// always gives the same bytes.
void write_json(std::ostream& os, const topology& t);

/// @brief Same, for a compiled graph (anything with `shape()`).
template <class G>
    requires requires(const G& g) { { g.shape() } -> std::convertible_to<const topology&>; }
void write_json(std::ostream& os, const G& g) {
    write_json(os, static_cast<const topology&>(g.shape()));
}

/// @brief Reads a description written by `write_json`.
/// @throws description_error naming the field that is missing or of the wrong type.
topology read_json(std::string_view text);

/// @brief One difference between two graphs.
struct graph_change {
    enum class kind_t { added, removed, changed };
    kind_t kind = kind_t::changed;
    std::string what;    ///< "node", "edge", "route", "join", "goto", "field"
    std::string subject; ///< e.g. "'a' -> 'b'" or "'planner'"
    std::string detail;  ///< for a change: "retry: attempts=3 ... -> attempts=5 ..."
};

/// @brief Everything that differs, in a stable order.
struct graph_diff {
    std::string old_name, new_name;
    std::vector<graph_change> changes;
    bool empty() const noexcept { return changes.empty(); }
};

/// @brief Compares two shapes (a description read back, or `compiled.shape()`).
graph_diff diff_graphs(const topology& old_graph, const topology& new_graph);

/// @brief The text summary: a counts line, then one line per change ("+", "-", "~").
std::string diff_summary(const graph_diff& d);

/// @brief Draws the new graph with what was added (green), removed (red, dashed) and changed
/// (amber, with the change in the label), stages as clusters and a legend. Renders with `dot`.
void write_diff_dot(std::ostream& os, const topology& old_graph, const topology& new_graph);

} // namespace stategraph

template <>
struct std::is_error_code_enum<stategraph::description_errc> : std::true_type {};
