// The messages reducer's ids for messages that come without one (reducer.hpp).
#include <stategraph/reducer.hpp>

#include <atomic>

namespace stategraph {

unsigned long messages_t::next_id() {
    static std::atomic<unsigned long> n{0};
    return ++n;
}

} // namespace stategraph
