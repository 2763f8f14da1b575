#define BOOST_TEST_MODULE core
#include <stategraph/core/detail/spawned.hpp>

#include <boost/test/unit_test.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace sg = stategraph;
namespace asio = boost::asio;

namespace {
asio::awaitable<void> fails() {
    co_await asio::post(asio::use_awaitable);
    throw std::runtime_error("connection reset");
}
asio::awaitable<int> succeeds() {
    co_await asio::post(asio::use_awaitable);
    co_return 7;
}
asio::awaitable<void> throws_a_number() {
    co_await asio::post(asio::use_awaitable);
    throw 42;
}

/// Standard error while it lives, as a string.
struct capture_cerr {
    std::ostringstream out;
    std::streambuf* old = std::cerr.rdbuf(out.rdbuf());
    ~capture_cerr() { std::cerr.rdbuf(old); }
};
} // namespace

BOOST_AUTO_TEST_CASE(an_escaped_exception_is_reported_to_the_log_naming_the_coroutine) {
    asio::io_context io;
    std::vector<std::string> lines;
    asio::co_spawn(io, fails(), sg::detail::report_to("the lease keeper", [&](const std::string& l) { lines.push_back(l); }));
    asio::co_spawn(io, succeeds(), sg::detail::report_to("a quiet one", [&](const std::string& l) { lines.push_back(l); }));
    io.run();
    BOOST_TEST_REQUIRE(lines.size() == 1u);
    BOOST_TEST(lines[0] == "the lease keeper stopped on an error: connection reset");
}

BOOST_AUTO_TEST_CASE(without_a_log_the_report_goes_to_standard_error) {
    capture_cerr err;
    asio::io_context io;
    asio::co_spawn(io, throws_a_number(), sg::detail::report_to("the LISTEN connection"));
    io.run();
    BOOST_TEST(err.out.str() == "stategraph: the LISTEN connection stopped on an error of unknown type\n");
}

BOOST_AUTO_TEST_CASE(a_logger_that_throws_does_not_lose_the_line) {
    capture_cerr err;
    asio::io_context io;
    asio::co_spawn(io, fails(), sg::detail::report_to("publishing", [](const std::string&) { throw std::logic_error("full"); }));
    BOOST_CHECK_NO_THROW(io.run());
    BOOST_TEST(err.out.str() == "stategraph: publishing stopped on an error: connection reset\n");
}
