#pragma once
/// @file cache.hpp
/// @brief A node's cache policy, as LangGraph's CachePolicy: a key for the node's input and a
/// time to live. A node with a policy whose key is found in the cache does not run: its saved
/// writes (update, Command goto and Sends) are replayed and streamed as cached.

#include <boost/json/value.hpp>

#include <chrono>
#include <functional>
#include <string>

namespace stategraph {

/// @brief How a node's outcome is cached (`node_options::cache`, `node_defaults::cache`, the DSL's
/// `fn | cache(policy)`).
///
/// The cache lives in the graph's checkpointer (`saver::cache_get`/`cache_put`), so a SQLite
/// checkpointer keeps it across processes; `compile_options::cache` puts it in another saver,
/// and a graph compiled with neither keeps it in process memory. Entries are keyed by graph name,
/// node name and the key below; `compiled_graph::clear_cache()` removes them.
/// Thread safety: a plain value; `key` is called from every run of the node, possibly at once, on
/// the run's executor.
struct cache_policy {
    /// The cache key of a node's input, given as JSON (the state's fields, or a Send payload).
    /// Empty: the whole input's JSON text. Keys longer than 128 bytes are stored as a 128-bit hash.
    std::function<std::string(const boost::json::value& input)> key;
    /// How long an entry stays valid after it is written; zero: for good.
    std::chrono::milliseconds ttl{0};
};

} // namespace stategraph
