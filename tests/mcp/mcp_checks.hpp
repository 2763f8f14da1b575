#pragma once
/// @file mcp_checks.hpp
/// @brief Test helpers of tests/mcp: a substring check that logs the text it searched, and the
/// mcp_error a call throws.

#include <stategraph/mcp/error.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

namespace stategraph::test::mcp_checks {

/// @brief Whether @p part is in @p text; logs both when it is not.
inline bool contains(std::string const& text, std::string const& part) {
    bool const found = text.find(part) != std::string::npos;
    if (!found) BOOST_TEST_MESSAGE("\"" << part << "\" not in: " << text);
    return found;
}

/// @brief The mcp_error @p f throws (the test fails when there is none).
template <class F>
stategraph::mcp::mcp_error error_of(F&& f) {
    try {
        f();
    } catch (stategraph::mcp::mcp_error const& e) {
        return e;
    }
    BOOST_FAIL("expected an mcp_error");
    throw;
}

}  // namespace stategraph::test::mcp_checks
