#pragma once
/// @file graph_shapes.hpp
/// @brief A saver's fourth concern: the shapes of the graphs that wrote its checkpoints, stored once per
/// signature, for explaining drift.

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <vector>

namespace stategraph::checkpoint {

/// @brief Graph shapes by signature (a checkpoint's version of `__graph__` is its graph's signature).
/// Part of `saver`. Thread safety: an implementation may be shared by many threads.
class graph_shapes {
public:
    virtual ~graph_shapes() = default;

    /// @brief Stores the shape of the graph with `signature` (its lines, for explaining drift),
    /// once for all threads; storing a signature that is already there does nothing.
    virtual boost::asio::awaitable<void> put_graph(std::string signature, std::vector<std::string> shape) = 0;
    /// @brief The shape stored for `signature`, or nullopt when none is.
    virtual boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(std::string signature) = 0;
};

} // namespace stategraph::checkpoint
