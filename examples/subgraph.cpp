// subgraph: a compiled graph used as one node of a parent graph with another state type.
//
//   order:    START --> parse --> price --> confirm --> END
//                                   |
//   pricing:                        +--> START --> look_up --> sum --> END
//
// Fields with the same name (items, total_cents, trail) are shared: the subgraph starts from the
// parent's values of them, and what it writes to them comes back as the update of node `price`
// (only what it wrote: trail gains look_up and sum, not a second copy of parse). `prices` belongs
// to the subgraph alone. The subgraph is built with the builder, the parent with the DSL.
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <iomanip>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;

struct pricing {
    std::vector<std::string> items;
    std::vector<int> prices;
    int total_cents = 0;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(pricing, (), (items, prices, total_cents, trail))
auto reducers(sg::for_state<pricing>) { return sg::reducers{sg::reduce<&pricing::trail>(sg::append)}; }

struct order {
    std::string text;
    std::vector<std::string> items;
    int total_cents = 0;
    std::vector<std::string> trail;
};
BOOST_DESCRIBE_STRUCT(order, (), (text, items, total_cents, trail))
auto reducers(sg::for_state<order>) { return sg::reducers{sg::reduce<&order::trail>(sg::append)}; }

sg::compiled_graph<pricing> pricing_graph() {
    static const std::map<std::string, int> menu{{"coffee", 350}, {"bagel", 275}, {"juice", 400}};
    sg::state_graph<pricing> g("pricing");
    g.add_node("look_up", [](const pricing& p) {
        std::vector<int> prices;
        for (const auto& item : p.items) prices.push_back(menu.at(item));
        return sg::update<pricing>{}.set<&pricing::prices>(std::move(prices)).set<&pricing::trail>({"look_up"});
    });
    g.add_node("sum", [](const pricing& p) {
        int sum = std::accumulate(p.prices.begin(), p.prices.end(), 0);
        return sg::update<pricing>{}.set<&pricing::total_cents>(sum).set<&pricing::trail>({"sum"});
    });
    g.add_edge(sg::START, "look_up").add_edge("look_up", "sum").add_edge("sum", sg::END);
    return g.compile();
}

sg::update<order> parse(const order& o) {
    std::vector<std::string> items;
    std::istringstream in(o.text);
    for (std::string item; in >> item;) items.push_back(item);
    return sg::update<order>{}.set<&order::items>(std::move(items)).set<&order::trail>({"parse"});
}
sg::update<order> confirm(const order&) { return sg::update<order>{}.set<&order::trail>({"confirm"}); }

int main() {
    // clang-format off
    auto app = graph<order>("order",
        "parse"_n = parse,  "price"_n = pricing_graph(),  "confirm"_n = confirm,
        start >> "parse"_n >> "price"_n >> "confirm"_n >> end).compile();
    // clang-format on

    auto input = sg::update<order>{}.set<&order::text>("coffee bagel coffee");
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
    io.run();
    const order result = done.get().values;

    std::cout << result.items.size() << " items, total " << result.total_cents / 100 << '.' << std::setw(2)
              << std::setfill('0') << result.total_cents % 100 << "\ntrail:";
    for (const auto& node : result.trail) std::cout << ' ' << node;
    std::cout << '\n';
    const std::vector<std::string> expected{"parse", "look_up", "sum", "confirm"};
    return result.total_cents == 975 && result.trail == expected ? 0 : 1;
}
