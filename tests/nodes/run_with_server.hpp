#ifndef STATEGRAPH_TESTS_NODES_RUN_WITH_SERVER_HPP
#define STATEGRAPH_TESTS_NODES_RUN_WITH_SERVER_HPP

/// @file
/// @brief Run one awaitable on an io_context that also serves a fake_openai_server.

#include "fake_openai_server.hpp"

#include <stategraph/nodes/openai_chat_model.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <utility>

namespace stategraph::test {

/// @brief Run @p task on @p ioc to completion; stop @p server (may be null) afterwards so that
/// run() returns. Rethrows what the task threw.
template <class T>
T run_with_server(boost::asio::io_context& ioc, fake_openai_server* server, boost::asio::awaitable<T> task) {
    std::optional<T> result;
    std::exception_ptr error;
    bool done = false;
    auto on_done = [&](std::exception_ptr e, T value) {
        done = true;
        error = e;
        if (!e)
            result = std::move(value);
        if (server)
            server->stop();
    };
    boost::asio::co_spawn(ioc, std::move(task), on_done);
    ioc.run_for(std::chrono::seconds(20));
    BOOST_REQUIRE_MESSAGE(done, "the task did not finish");
    BOOST_REQUIRE_MESSAGE(ioc.stopped(), "work was left on the io_context");
    if (error)
        std::rethrow_exception(error);
    return std::move(*result);
}

/// @brief Client options for @p server: its URL, @p api_key, model "gpt-test", a 10 s timeout.
inline nodes::openai_options options_for(fake_openai_server const& server, std::string api_key) {
    nodes::openai_options options;
    options.base_url = server.base_url();
    options.api_key = std::move(api_key);
    options.model = "gpt-test";
    options.timeout = std::chrono::seconds(10);
    return options;
}

}  // namespace stategraph::test

#endif  // STATEGRAPH_TESTS_NODES_RUN_WITH_SERVER_HPP
