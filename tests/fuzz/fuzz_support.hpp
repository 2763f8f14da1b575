#pragma once
// What the fuzz targets (and the corpus generator) share: the checkpoint ids they decode against
// and the small described state whose JSON updates fuzz_json_input reads.

#include <stategraph/reducer.hpp>
#include <stategraph/state.hpp>

#include "codec.hpp"

#include <boost/describe.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stategraph::fuzz {

/// The id every fuzzed record is decoded for (relative versions are read against it), and the
/// first version of the value chains fuzz_value builds (value i is stored at base + i).
inline constexpr std::uint64_t record_id = std::uint64_t{0x0123456789abcdef} >> 4;
inline constexpr std::uint64_t value_base = record_id - 100;

struct message {
    std::string id, role, content;
};
BOOST_DESCRIBE_STRUCT(message, (), (id, role, content))

/// A state with a field of each kind an update carries: a number, a text, an appended list, a
/// message list, a map and an optional.
struct state {
    int count = 0;
    std::string route;
    std::vector<std::string> log;
    std::vector<message> messages;
    std::map<std::string, int> tally;
    std::optional<double> score;
};
BOOST_DESCRIBE_STRUCT(state, (), (count, route, log, messages, tally, score))

inline auto reducers(stategraph::for_state<state>) {
    return stategraph::reducers{stategraph::reduce<&state::log>(stategraph::append),
                                stategraph::reduce<&state::messages>(stategraph::messages)};
}

} // namespace stategraph::fuzz
