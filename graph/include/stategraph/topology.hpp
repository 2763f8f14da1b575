#pragma once
/// @file topology.hpp
/// @brief The shape of a graph without its code: nodes, edges, joins, routes, stages and
/// breakpoints. `validate()` checks it (Boost.Graph), `write_dot()` / `write_mermaid()` draw it,
/// and `shape_lines()` describes it for drift detection.

#include <stategraph/core/error.hpp>

#include <iosfwd>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace stategraph {

/// @brief Name of the virtual entry node.
inline const std::string START = "__start__";
/// @brief Name of the virtual exit node.
inline const std::string END = "__end__";

struct topology;

/// @brief A node as the topology sees it.
struct node_spec {
    std::string name;
    std::string stage;                 ///< stage (cluster) the node was declared in, or ""
    bool deferred = false;             ///< runs only when nothing else is pending
    bool send_only = false;            ///< takes a Send payload, not the state
    bool has_retry = false;
    bool has_cache = false;            ///< has a cache policy (own or the graph's default)
    std::string retry;                 ///< the retry policy in words (for descriptions and diffs), or ""
    long long timeout_ms = 0;          ///< per-attempt time limit in milliseconds (0: none)
    std::string error_handler;         ///< the name of its error handler, or ""
    std::vector<std::string> ends;     ///< nodes a Command from this node may go to
    std::shared_ptr<const topology> subgraph; ///< for a compiled graph used as a node
};
/// @brief A plain edge.
struct edge_spec {
    std::string from, to;
};
/// @brief A join (multi-source) edge: `target` runs once every source has run.
struct join_spec {
    std::vector<std::string> sources;
    std::string target;
};
/// @brief A conditional edge: the route labels and their targets.
struct branch_spec {
    std::string from;
    std::vector<std::pair<std::string, std::string>> routes; ///< (route label, target)
    std::vector<std::string> unmapped;                        ///< router values with no target
    bool sends = false;                                       ///< the router may return Sends
};

/// @brief Everything about a graph's shape.
struct topology {
    std::string name = "graph";
    std::vector<node_spec> nodes;
    std::vector<edge_spec> edges;
    std::vector<join_spec> joins;
    std::vector<branch_spec> branches;
    std::set<std::string> interrupt_before, interrupt_after;
    std::vector<std::pair<std::string, std::string>> fields; ///< state fields: (name, reducer kind + type)
    std::vector<graph_problem> builder_problems;              ///< found while building (duplicates, ...)

    const node_spec* find(const std::string& name) const;
    std::vector<std::string> node_names() const;
};

/// @brief Every structural problem of the graph (empty when it is sound).
/// @param t the shape (`state_graph::shape()`, `compiled_graph::shape()`).
/// Thread safety: reads `t` only; any thread.
std::vector<graph_problem> validate(const topology& t);

/// @brief Options for drawing.
struct dot_options {
    std::vector<std::string> visited; ///< nodes to highlight as the path taken
    std::vector<std::string> current; ///< nodes to highlight as the current position
    std::vector<std::string> interrupted; ///< nodes with a pending interrupt (drawn as waiting)
    std::vector<std::string> failed;      ///< nodes whose failure stopped the run
    std::string caption;                  ///< a line under the graph's name, e.g. "thread t1 at checkpoint c9"
    // Inside a subgraph node `sub`, the lists above name its nodes as "sub/node" (as the drawing's ids).
};

/// @brief Writes Graphviz DOT (through Boost.Graph's write_graphviz): START/END distinct,
/// conditional edges dashed with their route label, joins as junction points, deferred nodes
/// dashed, breakpoints red, Command targets dotted, stages and subgraphs as clusters.
/// @param os where the DOT text goes (the caller keeps it usable; stream errors are the stream's).
/// @param t the shape.
/// @param options highlights (path, current nodes, interrupts, failures) and a caption.
/// Thread safety: reads `t` only; concurrent calls need distinct streams.
void write_dot(std::ostream& os, const topology& t, const dot_options& options = {});
/// @brief Writes a Mermaid flowchart of the same graph.
/// @param os where the Mermaid text goes.
/// @param t the shape.
void write_mermaid(std::ostream& os, const topology& t);
/// @brief A canonical, sorted description of the shape (nodes, edges, routes, state fields).
std::vector<std::string> shape_lines(const topology& t);
/// @brief A short hash of `shape_lines`.
std::string shape_signature(const std::vector<std::string>& lines);

} // namespace stategraph
