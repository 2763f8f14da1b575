#pragma once
/// @file detail/graph_core.hpp
/// @brief The engine's tables of a compiled graph, for any state type: nodes with their
/// type-erased calls, edges, joins and conditional edges, the shape and the checkpointer.

#include <stategraph/cache.hpp>
#include <stategraph/command.hpp>
#include <stategraph/detail/state_table.hpp>
#include <stategraph/error_handler.hpp>
#include <stategraph/migration.hpp>
#include <stategraph/node.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/topology.hpp>

#include <boost/json/object.hpp>

#include <atomic>
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
class node_cache;
}

namespace stategraph::detail {

struct graph_core;
struct held_states;

/// Where a compiled graph keeps the states its calls left paused (engine_internal.hpp: `held_states`):
/// made with the graph, empty in a copy of it (the copy may be given another saver).
class held_slot {
public:
    held_slot();
    held_slot(const held_slot&);
    held_slot(held_slot&&) noexcept;
    held_slot& operator=(const held_slot&);
    held_slot& operator=(held_slot&&) noexcept;
    ~held_slot();
    held_states* get() const noexcept { return p_.get(); }

private:
    std::unique_ptr<held_states> p_;
};

struct node_rt {
    std::string name;
    std::shared_ptr<const graph_core> subgraph; ///< a compiled graph added as this node, or null
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

/// A graph's declared input or output schema (`state_graph::input_schema` / `output_schema`):
/// the shape callers send or get back, apart from the state.
struct io_schema {
    std::type_index type = typeid(void);
    std::string type_name;
    boost::json::object json_schema; ///< JSON Schema of the type (members left out allowed for an input)
    /// Input: reads a caller's JSON object as the input type (members left out keep its defaults;
    /// an unknown member is an unknown_member_error) and maps it onto the thread's state
    /// `current` (its defaults on a new thread): the state update to apply.
    std::function<update_box(const boost::json::object& in, const void* current, errc code, const std::string& where)> read;
    /// Output: the output of state `s`, given the nodes this call ran (`path`), as JSON.
    std::function<boost::json::object(const void* s, const std::vector<std::string>& path)> write;
    /// The state fields a by-name schema reads or writes (checked by compile()); empty for a mapped one.
    std::vector<std::string> by_name;
};

struct graph_core {
    // Out of line (builder.cpp): a program that builds a graph does not compile these itself.
    graph_core();
    graph_core(const graph_core&);
    graph_core(graph_core&&) noexcept;
    graph_core& operator=(const graph_core&);
    graph_core& operator=(graph_core&&) noexcept;
    ~graph_core();

    const state_table* st = nullptr;
    std::shared_ptr<const io_schema> input;  ///< null: callers send the state's fields
    std::shared_ptr<const io_schema> output; ///< null: callers get the state's fields
    boost::json::object state_schema;        ///< JSON Schema of the state
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
    /// A flag a copy of the graph does not inherit (the copy may be given another saver).
    struct unset_when_copied {
        mutable std::atomic<bool> set{false};
        unset_when_copied() = default;
        unset_when_copied(const unset_when_copied&) noexcept {}
        unset_when_copied& operator=(const unset_when_copied&) noexcept {
            set.store(false);
            return *this;
        }
    };
    /// Set once `saver` stored this graph's shape (`put_graph`, asked by a new thread's first
    /// checkpoint): the calls after it do not ask again (each asking copies the whole shape).
    unset_when_copied shape_stored;
    /// The states of threads this graph's calls left paused at an interrupt, for their resumes
    /// (`saver::acquire_and_get_held`): with a saver that omits held values, a resume by this
    /// graph reads and converts none of the thread's values.
    held_slot held;
    /// Where cached nodes keep their outcomes: `compile_options::cache`, else the checkpointer,
    /// else a memory saver of this graph's own (null when no node is cached and there is neither).
    std::shared_ptr<checkpoint::node_cache> cache;
    /// The long-term memory store (`compile_options::store`), or null.
    std::shared_ptr<store::base_store> store;
    /// The state's version (`state_graph::set_state_version`), written in every checkpoint's
    /// metadata when above 1, and the migrations from older versions, by `from` (see migration.hpp).
    int state_version = 1;
    std::vector<state_migration> migrations;

    /// The node's index, or -2 when there is no such node.
    int find(const std::string& name) const {
        auto it = index.find(name);
        return it == index.end() ? -2 : it->second;
    }
    /// Resolves names into the tables above once the topology is validated (compile()).
    void lower();
};

} // namespace stategraph::detail
