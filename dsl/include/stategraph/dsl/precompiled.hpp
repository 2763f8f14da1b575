#pragma once
/// @file precompiled.hpp
/// @brief What a graph program includes, gathered for a precompiled header: the builder, the
/// DSL, the checkpointers' headers, and the Asio, Boost.JSON and standard headers a node author
/// uses. Nothing here is new API; it exists so that a consumer's build parses these once.
///
/// Link `stategraph::stategraph` (or `stategraph::precompiled` beside the parts you pick) and
/// CMake precompiles this header for your target and includes it in each of its C++ files:
/// @code
/// find_package(stategraph CONFIG REQUIRED COMPONENTS sqlite)
/// add_executable(app main.cpp)
/// target_link_libraries(app PRIVATE stategraph::stategraph stategraph::sqlite)
/// @endcode
/// The first build of a target pays for the header once (about 10 s at -O2 on a 2-core VM);
/// every later build of each of its files then starts from it: a type error in a graph program
/// is reported in about a third of the time (bench/compile/README.md has the figures).
/// Without it (`stategraph::dsl` alone) nothing changes but the time.

#include <stategraph/checkpoint/memory_saver.hpp>
#if __has_include(<stategraph/checkpoint/sqlite_saver.hpp>) // installed with the sqlite component
#include <stategraph/checkpoint/sqlite_saver.hpp>
#endif
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/stategraph.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
