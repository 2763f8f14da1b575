#ifndef GLOBAL_SUPERVISOR_UTF8_HPP
#define GLOBAL_SUPERVISOR_UTF8_HPP

/// @file utf8.hpp
/// @brief Valid UTF-8 for the JSON the command line writes: every `--json` value goes through
/// `serialize_valid_utf8` (stategraph/core/utf8.hpp, shared with the server).

#include <stategraph/core/utf8.hpp>

namespace global_supervisor {

using stategraph::is_valid_utf8;
using stategraph::make_valid_utf8;
using stategraph::serialize_valid_utf8;
using stategraph::valid_utf8;

} // namespace global_supervisor

#endif // GLOBAL_SUPERVISOR_UTF8_HPP
