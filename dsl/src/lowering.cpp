// The DSL's work that does not depend on the state type, compiled here once instead of in every
// program that declares a graph: chains of edges, joins, breakpoints, node names and the
// problems seen while lowering.
#include <stategraph/dsl/flow.hpp>
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/lowering.hpp>
#include <stategraph/dsl/node.hpp>
#include <stategraph/dsl/route.hpp>

#include <boost/core/demangle.hpp>

namespace stategraph::dsl {

inline namespace literals {
node_ref operator""_n(const char* s, std::size_t n) { return node_ref{std::string(s, n)}; }
} // namespace literals

void breakpoints::lower_shape(detail::lowered& out) const {
    auto& to = before ? out.before : out.after;
    to.insert(to.end(), nodes.begin(), nodes.end());
}

void flow::lower_shape(detail::lowered& out) const {
    out.edges.insert(out.edges.end(), edges.begin(), edges.end());
    out.joins.insert(out.joins.end(), joins.begin(), joins.end());
}

namespace detail {

lowered::lowered() = default;
lowered::lowered(const lowered&) = default;
lowered::lowered(lowered&&) noexcept = default;
lowered& lowered::operator=(const lowered&) = default;
lowered& lowered::operator=(lowered&&) noexcept = default;
lowered::~lowered() = default;

void lowered::append(const lowered& other) {
    edges.insert(edges.end(), other.edges.begin(), other.edges.end());
    joins.insert(joins.end(), other.joins.begin(), other.joins.end());
    before.insert(before.end(), other.before.begin(), other.before.end());
    after.insert(after.end(), other.after.begin(), other.after.end());
    problems.insert(problems.end(), other.problems.begin(), other.problems.end());
}

flow as_flow(const node_ref& n) { return flow{{}, {}, {n.name()}}; }
flow as_flow(const parallel_nodes& p) { return flow{{}, {}, p.names}; }
std::vector<std::string> names_of(const node_ref& n) { return {n.name()}; }

flow chain(const flow& from, const std::vector<std::string>& targets) {
    flow f = from;
    for (const auto& s : from.tail)
        for (const auto& t : targets) f.edges.push_back({s, t});
    f.tail = targets;
    return f;
}
flow chain(const node_ref& from, const std::vector<std::string>& targets) { return chain(as_flow(from), targets); }
flow chain(const parallel_nodes& from, const std::vector<std::string>& targets) { return chain(as_flow(from), targets); }
flow chain(const join_sources& from, const std::vector<std::string>& targets) {
    flow f;
    for (const auto& t : targets) f.joins.push_back({from.names, t});
    f.tail = targets;
    return f;
}

void add_shape_problems(std::vector<graph_problem>& problems, const topology& shape) {
    auto more = validate(shape);
    problems.insert(problems.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
}

void report_undescribed_route(std::vector<graph_problem>& problems, const std::string& from, const std::type_info& state,
                              const std::type_info& field) {
    const auto s = boost::core::demangle(state.name());
    problems.push_back({errc::undescribed_field,
                        "conditional edge from '" + from + "' routes on a member of " + s + " (of type " +
                            boost::core::demangle(field.name()) + ") that BOOST_DESCRIBE_STRUCT(" + s +
                            ", (), (...)) does not list; add it to the list (the engine keeps and saves only the listed "
                            "fields, so nothing could ever set it)",
                        {from}});
}

void throw_problems(std::vector<graph_problem> problems, const topology& shape) {
    add_shape_problems(problems, shape);
    throw compile_error(std::move(problems));
}

} // namespace detail
} // namespace stategraph::dsl
