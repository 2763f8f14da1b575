// chain: three nodes in a row over a typed state, with two reducers.
//
//   START --> trim --> capitalize --> exclaim --> END
//
//   draft.text   last value wins (no reducer)
//   draft.edits  summed: each node returns 1, the reducer adds it to the total
//   draft.trail  appended: each node returns its own name, the reducer appends it
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <cctype>
#include <iostream>
#include <string>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;

struct draft {
    std::string text;
    int edits = 0;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(draft, (), (text, edits, trail))

auto reducers(sg::for_state<draft>) {
    return sg::reducers{sg::reduce<&draft::edits>([](int total, int more) { return total + more; }),
                        sg::reduce<&draft::trail>(sg::append)};
}

// A node reads the state and returns only the fields it changes.
sg::update<draft> edit(std::string name, std::string text) {
    return sg::update<draft>{}
        .set<&draft::text>(std::move(text))
        .set<&draft::edits>(1)
        .set<&draft::trail>({std::move(name)});
}
sg::update<draft> trim(const draft& d) {
    auto first = d.text.find_first_not_of(' ');
    auto last = d.text.find_last_not_of(' ');
    return edit("trim", first == std::string::npos ? "" : d.text.substr(first, last - first + 1));
}
sg::update<draft> capitalize(const draft& d) {
    std::string t = d.text;
    if (!t.empty()) t[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(t[0])));
    return edit("capitalize", t);
}
sg::update<draft> exclaim(const draft& d) { return edit("exclaim", d.text + "!"); }

int main() {
    // clang-format off
    auto app = graph<draft>("chain",
        "trim"_n = trim,  "capitalize"_n = capitalize,  "exclaim"_n = exclaim,
        start >> "trim"_n >> "capitalize"_n >> "exclaim"_n >> end).compile();
    // clang-format on

    auto input = sg::update<draft>{}.set<&draft::text>("  hello, world  ");
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
    io.run();
    const draft result = done.get().values;

    std::cout << "text:  " << result.text << "\nedits: " << result.edits << "\ntrail:";
    for (const auto& step : result.trail) std::cout << ' ' << step;
    std::cout << '\n';
    const std::vector<std::string> expected{"trim", "capitalize", "exclaim"};
    return result.text == "Hello, world!" && result.edits == 3 && result.trail == expected ? 0 : 1;
}
