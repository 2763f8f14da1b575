// A keyed conditional edge's work that does not depend on the key's or the state's type (see
// detail/keyed_routes.hpp): compiled here once, not in every program with a route map.
#include <stategraph/detail/keyed_routes.hpp>

#include <stategraph/detail/graph_core.hpp>

namespace stategraph::detail {

route_table::route_table() = default;
route_table::route_table(const route_table&) = default;
route_table::route_table(route_table&&) noexcept = default;
route_table& route_table::operator=(const route_table&) = default;
route_table& route_table::operator=(route_table&&) noexcept = default;
route_table::~route_table() = default;

void route_table::insert(std::size_t pos, std::string label, std::vector<std::string> to) {
    labels.insert(labels.begin() + static_cast<std::ptrdiff_t>(pos), std::move(label));
    targets.insert(targets.begin() + static_cast<std::ptrdiff_t>(pos), std::move(to));
    for (auto& d : duplicates) // they name routes by position
        if (d.first >= pos) ++d.first;
}

void route_table::duplicate(std::size_t pos, std::vector<std::string> to) {
    duplicates.emplace_back(pos, std::move(to));
}

void route_table::append(std::size_t i, std::vector<std::string>& out) const {
    const auto& to = targets[i];
    out.insert(out.end(), to.begin(), to.end());
}

void throw_unmapped_route(const std::string& label) {
    throw graph_error(errc::unmapped_route, "router returned '" + label + "', which the path map does not map", {label});
}

namespace {
std::string quoted(const std::vector<std::string>& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "'" : ", '") + n + "'";
    return out;
}
} // namespace

void report_duplicates(const route_table& table, const std::string& from, std::vector<graph_problem>& problems) {
    for (const auto& [pos, second] : table.duplicates)
        problems.push_back({errc::duplicate_route,
                            "conditional edge from '" + from + "': route '" + table.labels[pos] + "' is mapped twice (to " +
                                quoted(table.targets[pos]) + " and to " + quoted(second) +
                                "); give each route value one target, or several with parallel(\"a\"_n, \"b\"_n)",
                            {from}});
}

std::shared_ptr<const route_table> add_keyed_branch(graph_core& g, std::string from, route_table table,
                                                    std::vector<std::string> unmapped) {
    branch_spec spec{std::move(from), {}, std::move(unmapped), false};
    for (std::size_t i = 0; i < table.labels.size(); ++i)
        for (const auto& to : table.targets[i]) spec.routes.emplace_back(table.labels[i], to);
    // The source is resolved in compile(): it may be added after its conditional edge.
    g.topo.branches.push_back(std::move(spec));
    return std::make_shared<const route_table>(std::move(table));
}

} // namespace stategraph::detail
