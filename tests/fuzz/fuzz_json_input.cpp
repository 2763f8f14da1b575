// libFuzzer target: any bytes as a JSON payload from outside (an update's values, a resume
// answer). Parsed as JSON; an object is read as an update of a small described state, applied
// through its reducers, and written back out; any value is converted to the types a node may ask
// a resume answer as. Only typed errors may come out: graph_error for what does not fit,
// boost::system errors from the conversions.
#include "fuzz_support.hpp"

#include <stategraph/detail/state_ops.hpp>
#include <stategraph/core/error.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_to.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace json = boost::json;
namespace fz = stategraph::fuzz;
using ops = stategraph::detail::state_ops<fz::state>;

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz_json_input: %s\n", what);
    std::abort();
}

// What a node might ask a resume answer as (context::interrupt<T>).
template <class T>
void as_answer(const json::value& v) {
    auto r = json::try_value_to<T>(v);
    (void)r;
}

void update(const json::object& o) {
    stategraph::update<fz::state> u;
    try {
        u = ops::update_from_json(o, stategraph::errc::invalid_input, "fuzz input");
    } catch (const stategraph::graph_error&) {
        return;
    }
    // Applied onto a state that already holds values (the reducers see both sides).
    fz::state s;
    s.count = 1;
    s.log = {"a"};
    s.messages = {{"m1", "user", "hi"}};
    static const auto reducers = stategraph::detail::state_reducers<fz::state>();
    ops::apply_copy(s, u, reducers);
    (void)json::serialize(ops::state_json(s));
    // What came in goes out and reads back as the same update.
    const auto out = ops::update_json(u);
    try {
        const auto again = ops::update_from_json(out, stategraph::errc::invalid_input, "fuzz input again");
        if (ops::update_json(again) != out) broken("an update written out reads back otherwise");
    } catch (const stategraph::graph_error& e) {
        std::fprintf(stderr, "%s\n", e.what());
        broken("an update written out does not read back");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    boost::system::error_code ec;
    const auto v = json::parse(text, ec);
    if (ec) return 0;
    if (v.is_object()) update(v.get_object());
    as_answer<int>(v);
    as_answer<double>(v);
    as_answer<bool>(v);
    as_answer<std::string>(v);
    as_answer<std::vector<std::string>>(v);
    as_answer<std::map<std::string, int>>(v);
    as_answer<fz::message>(v);
    as_answer<std::vector<fz::message>>(v);
    as_answer<fz::state>(v);
    return 0;
}
