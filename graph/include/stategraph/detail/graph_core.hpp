#pragma once
/// @file detail/graph_core.hpp
/// @brief The engine's tables of a compiled graph, for any state type: nodes with their
/// type-erased calls, edges, joins and conditional edges, the shape and the checkpointer.

#include <stategraph/cache.hpp>
#include <stategraph/command.hpp>
#include <stategraph/detail/state_table.hpp>
#include <stategraph/error_handler.hpp>
#include <stategraph/node.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/topology.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <typeindex>
#include <unordered_map>
#include <vector>

namespace stategraph::store {
class base_store;
}

namespace stategraph::checkpoint {
class saver;
}

namespace stategraph::detail {

struct node_rt {
    std::string name;
    node_call call;
    bool deferred = false;
    bool send_only = false;
    std::type_index input_type = typeid(void);
    std::shared_ptr<const void> (*arg_from_json)(const boost::json::value&) = nullptr;
    boost::json::value (*arg_to_json)(const void*) = nullptr;
    std::optional<retry_policy> retry;
    std::chrono::milliseconds timeout{0}; ///< per attempt (resolved at compile: own, retry's, default's)
    std::optional<cache_policy> cache;
    error_handler on_error;
    bool use_defaults = true;
    std::vector<int> next;     ///< plain edges (-1 = END)
    std::vector<int> joins;    ///< joins this node is a source of
    std::vector<int> branches; ///< conditional edges leaving this node
    bool before = false, after = false;
    int rank = 0;              ///< position in name order (write order)
};

struct branch_rt {
    int from = -1; ///< -1 = START
    /// Reads the state (`const S*`) and appends the chosen targets or Sends.
    std::function<void(const void* state, std::vector<std::string>& targets, std::vector<send>& sends)> route;
};

struct join_rt {
    std::vector<int> sources;
    int target = -1;
};

struct graph_core {
    const state_table* st = nullptr;
    topology topo;
    std::vector<std::string> shape;
    std::string signature;
    std::vector<node_rt> nodes;
    std::unordered_map<std::string, int> index;
    std::vector<int> start_next;
    std::vector<int> start_branches;
    std::vector<branch_rt> branches;
    std::vector<join_rt> joins;
    std::shared_ptr<checkpoint::saver> saver;
    /// Where cached nodes keep their outcomes: `compile_options::cache`, else the checkpointer,
    /// else a memory saver of this graph's own (null when no node is cached and there is neither).
    std::shared_ptr<checkpoint::saver> cache;
    /// The long-term memory store (`compile_options::store`), or null.
    std::shared_ptr<store::base_store> store;

    /// The node's index, or -2 when there is no such node.
    int find(const std::string& name) const {
        auto it = index.find(name);
        return it == index.end() ? -2 : it->second;
    }
    /// Resolves names into the tables above once the topology is validated (compile()).
    void lower();
};

} // namespace stategraph::detail
