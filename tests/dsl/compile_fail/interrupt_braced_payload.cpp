// Mistake (under g++ 12 only): a braced aggregate as an interrupt payload inside `co_await`.
// g++ 12 destroys that temporary twice at run time; the library turns it into a compile error.
// expect: g++ 12 destroys a braced temporary that stands in a co_await expression twice
#include <stategraph/stategraph.hpp>

struct turn {
    std::string answer;
};
BOOST_DESCRIBE_STRUCT(turn, (), (answer))
struct approval {
    std::string action;
};
BOOST_DESCRIBE_STRUCT(approval, (), (action))

boost::asio::awaitable<stategraph::update<turn>> ask(const turn&, stategraph::context& ctx) {
#ifndef STATEGRAPH_FIXED
    auto a = co_await ctx.interrupt<std::string>(approval{"send"});
#else
    auto question = approval{"send"};
    auto a = co_await ctx.interrupt<std::string>(question);
#endif
    co_return stategraph::update<turn>{}.set<&turn::answer>(a);
}

int main() {
    stategraph::state_graph<turn> g;
    g.add_node("ask", ask).add_edge(stategraph::START, "ask").add_edge("ask", stategraph::END);
    (void)g.compile();
}
