#pragma once
/// @file stategraph.hpp
/// @brief Everything of the core runtime: state, reducers, updates, commands, the builder,
/// the engine and the drawing functions.

#include <stategraph/command.hpp>
#include <stategraph/compiled_graph.hpp>
#include <stategraph/context.hpp>
#include <stategraph/drain.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/json_graph.hpp>
#include <stategraph/json_shape.hpp>
#include <stategraph/node.hpp>
#include <stategraph/reducer.hpp>
#include <stategraph/retry.hpp>
#include <stategraph/run_config.hpp>
#include <stategraph/run_observer.hpp>
#include <stategraph/run_sync.hpp>
#include <stategraph/state.hpp>
#include <stategraph/state_graph.hpp>
#include <stategraph/stream.hpp>
#include <stategraph/topology.hpp>
#include <stategraph/trace_span.hpp>
#include <stategraph/update.hpp>
#include <stategraph/usage_tally.hpp>
