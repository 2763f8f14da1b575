#pragma once
/// @file dsl.hpp
/// @brief The declarative DSL (umbrella header): a whole graph read as one declaration,
/// checked by the compiler, lowered to the builder (`state_graph<S>`).
///
/// `using namespace stategraph::dsl;` brings the vocabulary:
/// @code
/// "name"_n = fn                         // a node (fn(const S&[, context&]) -> update/command/void/awaitable)
/// "name"_n = compiled_app               // a subgraph; also subgraph("name"_n, compiled_app)
/// "name"_n = fn | defer | retry(policy) | interrupt_before | interrupt_after | ends("a"_n, ...) | in_stage("x")
/// "name"_n = fn | timeout(ms) | cache({.key = k, .ttl = t}) | on_error("name", handler) | no_defaults
/// ("name"_n = fn).defer().retry(p)      // the same modifiers as members; or .with(defer, retry(p))
/// interrupt_before("a"_n, ...)          // breakpoints on their own (also interrupt_after)
/// start >> "a"_n >> "b"_n >> end        // edges
/// "a"_n >> parallel("b"_n, "c"_n)       // a -> b and a -> c (and parallel(...) >> d: both -> d)
/// join("b"_n, "c"_n) >> "d"_n           // d runs once b and c have both run
/// "a"_n >> on(&S::field, {{value, "x"_n}, ...})   // route on an enum, bool, integer or string field
/// "a"_n >> route(router, {{value, "x"_n}, ...})   // route on router(const S&)'s result
/// "a"_n >> route(router, {"x"_n, "y"_n})          // router returns node name(s)
/// "a"_n >> fan_out(router, {"worker"_n})          // router returns send / vector<send>
/// stage<S>("memory", items...)          // a named group (a Graphviz cluster); returns stage_decl<S>
/// input_schema<I>(map), output_schema<O>(map) // what callers send and get back, apart from S
/// graph<S>("name", stages and items...) // a state_graph<S>; then .set_node_defaults({...}) and .compile(options)
/// @endcode
/// Mistakes in types (a node's signature, a field of another state, a reducer that does not
/// fit, a state without Boost.Describe metadata, route keys of the wrong type) stop the build
/// with a message saying what to write instead; mistakes in names and shape are reported
/// together by `compile()`.
///
/// It also brings `stategraph::run_sync` (`<stategraph/run_sync.hpp>`), to run a call from
/// `main()`: `auto r = stategraph::run_sync(app.invoke(input, {.thread_id = "t"}));`.

#include <stategraph/dsl/checks.hpp>
#include <stategraph/dsl/flow.hpp>
#include <stategraph/dsl/graph.hpp>
#include <stategraph/dsl/lowering.hpp>
#include <stategraph/dsl/node.hpp>
#include <stategraph/dsl/route.hpp>
#include <stategraph/dsl/schema.hpp>
#include <stategraph/dsl/stage.hpp>
#include <stategraph/run_sync.hpp>
