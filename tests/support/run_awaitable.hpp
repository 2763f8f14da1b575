#pragma once
/// @file run_awaitable.hpp
/// @brief Test helper: runs one coroutine to completion on a private io_context and returns its
/// result (or rethrows its exception); the one the saver conformance suite uses.

#include <stategraph/checkpoint/testing/run.hpp>

namespace stategraph::test {

using stategraph::checkpoint::testing::run;

} // namespace stategraph::test
