#pragma once
/// @file utf8.hpp
/// @brief Valid UTF-8 for JSON written out.
///
/// What a thread keeps is kept byte for byte: a message, a thread id or a stored value may hold
/// bytes that are not UTF-8, and Boost.JSON's serializer writes a string's bytes as they are.
/// JSON text must be UTF-8 (RFC 8259, section 8.1), so a strict reader rejects such output.
/// What is written for others to read (the Global Supervisor's `--json` lines, the server's
/// answers and events) goes through these, which replace each invalid sequence by U+FFFD and
/// leave valid text unchanged.

#include <boost/json/value.hpp>

#include <string>
#include <string_view>

namespace stategraph {

/// @brief Whether @p text is well-formed UTF-8 (Unicode, table 3-7: no overlong forms, no
/// surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view text) noexcept;

/// @brief @p text with each maximal subpart of an ill-formed sequence replaced by one U+FFFD,
/// the practice Unicode recommends (section 3.9) and WHATWG's decoder follows: a truncated
/// sequence is one U+FFFD, a byte that cannot start or continue one is one U+FFFD each. Valid
/// text is returned unchanged.
std::string valid_utf8(std::string_view text);

/// @brief Makes every string and object key in @p v valid UTF-8 (as `valid_utf8`), in place.
/// Two keys of one object that become equal keep the first one's value.
void make_valid_utf8(boost::json::value& v);

/// @brief @p v serialized as JSON text that is valid UTF-8 (`make_valid_utf8`, then serialize).
std::string serialize_valid_utf8(boost::json::value v);

/// @brief @p v as JSON text any strict reader takes (RFC 8259), and PostgreSQL's TEXT: a
/// non-finite number (which Boost.JSON writes as `Infinity` or `NaN`) becomes null, as
/// JavaScript's JSON.stringify writes it, and an ill-formed UTF-8 sequence U+FFFD. Text that
/// needs neither is written once.
std::string serialize_strict_json(const boost::json::value& v);

} // namespace stategraph
