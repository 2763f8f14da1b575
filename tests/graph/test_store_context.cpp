// Nodes reach the long-term memory store through their context: `compile_options::store`,
// `run_config::store` for one call, the parent's store in a subgraph, and `no_store` without one.
#include <stategraph/context.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include <stategraph/run_sync.hpp>
#include <stategraph/checkpoint/store/memory_store.hpp>

#include <memory>

namespace sg = stategraph;
namespace json = boost::json;

namespace store_context_test {
struct chat {
    std::string user;
    std::string message;
    std::vector<std::string> recalled;
};
BOOST_DESCRIBE_STRUCT(chat, (), (user, message, recalled))
inline auto reducers(sg::for_state<chat>) { return sg::reducers{sg::reduce<&chat::recalled>(sg::append)}; }

/// Stores the message as a fact of the user, as a newcomer writes it: the namespace, the value and
/// the options braced inside the co_await (g++ 12 rejects an initializer_list there; the store's
/// namespace_arg and value_arg make none).
boost::asio::awaitable<sg::update<chat>> remember(const chat& s, sg::context& ctx) {
    co_await ctx.store().put({"users", s.user, "facts"}, s.message, {{"text", s.message}, {"step", ctx.step()}},
                             {.ttl = std::chrono::minutes(60)});
    const sg::store::namespace_path seen{"seen", s.user};
    const json::object fact{{"text", s.message}, {"step", ctx.step()}};
    co_await ctx.store().put(seen, "last", fact, {}); // named values, a literal key and empty options
    co_return sg::update<chat>{};
}

/// Finds the user's facts that share a word with the message.
boost::asio::awaitable<sg::update<chat>> recall(const chat& s, sg::context& ctx) {
    auto found = co_await ctx.store().search({"users", s.user}, {.query = s.message, .limit = 3});
    std::vector<std::string> texts;
    for (const auto& item : found) texts.push_back(std::string(item.value.at("text").as_string()));
    co_return sg::update<chat>{}.set<&chat::recalled>(std::move(texts));
}

sg::state_graph<chat> remember_then_recall() {
    sg::state_graph<chat> g("memory");
    g.add_node("remember", remember).add_node("recall", recall);
    g.add_edge(sg::START, "remember").add_edge("remember", "recall").add_edge("recall", sg::END);
    return g;
}

sg::update<chat> says(std::string user, std::string message) {
    return sg::update<chat>{}.set<&chat::user>(std::move(user)).set<&chat::message>(std::move(message));
}
} // namespace store_context_test
using namespace store_context_test;

BOOST_AUTO_TEST_SUITE(store_context)

BOOST_AUTO_TEST_CASE(nodes_reach_the_graphs_store) {
    auto memory = std::make_shared<sg::store::memory_store>();
    auto app = remember_then_recall().compile({.store = memory});
    auto first = sg::run_sync(app.invoke(says("ann", "I love green tea")));
    BOOST_TEST((first.values.recalled == std::vector<std::string>{"I love green tea"}));
    // a later run (no checkpointer, no thread) sees what the first one stored
    auto second = sg::run_sync(app.invoke(says("ann", "any tea for me?")));
    BOOST_TEST(second.values.recalled.size() == 2u);
    // another user's namespace stays apart
    auto other = sg::run_sync(app.invoke(says("bob", "tea")));
    BOOST_TEST((other.values.recalled == std::vector<std::string>{"tea"}));
    const sg::store::namespace_path ann{"users", "ann", "facts"};
    BOOST_TEST(sg::run_sync(memory->search(ann)).size() == 2u);
    const sg::store::namespace_path seen{"seen", "ann"};
    auto last = sg::run_sync(memory->get(seen, "last"));
    BOOST_TEST_REQUIRE(last.has_value());
    BOOST_TEST(last->value.at("text") == "any tea for me?");
}

BOOST_AUTO_TEST_CASE(a_call_can_bring_its_own_store) {
    auto graphs = std::make_shared<sg::store::memory_store>();
    sg::store::memory_store calls;
    auto app = remember_then_recall().compile({.store = graphs});
    auto r = sg::run_sync(app.invoke(says("ann", "hello"), {.store = &calls}));
    BOOST_TEST(r.values.recalled.size() == 1u);
    const sg::store::namespace_path all;
    BOOST_TEST(sg::run_sync(calls.search(all)).size() == 2u);
    BOOST_TEST(sg::run_sync(graphs->search(all)).empty());
}

BOOST_AUTO_TEST_CASE(a_subgraph_uses_its_parents_store) {
    auto parent_store = std::make_shared<sg::store::memory_store>();
    auto own_store = std::make_shared<sg::store::memory_store>();
    sg::state_graph<chat> outer("outer");
    outer.add_node("inner", remember_then_recall().compile({.store = own_store}));
    outer.add_edge(sg::START, "inner").add_edge("inner", sg::END);
    auto app = outer.compile({.store = parent_store});
    auto r = sg::run_sync(app.invoke(says("cid", "subgraphs share memory")));
    BOOST_TEST(r.values.recalled.size() == 1u);
    const sg::store::namespace_path all;
    BOOST_TEST(sg::run_sync(parent_store->search(all)).size() == 2u);
    BOOST_TEST(sg::run_sync(own_store->search(all)).empty());
    // a parent without a store leaves the subgraph its own
    sg::state_graph<chat> bare("bare");
    bare.add_node("inner", remember_then_recall().compile({.store = own_store}));
    bare.add_edge(sg::START, "inner").add_edge("inner", sg::END);
    (void)sg::run_sync(bare.compile().invoke(says("cid", "own store")));
    BOOST_TEST(sg::run_sync(own_store->search(all)).size() == 2u);
}

BOOST_AUTO_TEST_CASE(a_node_without_a_store_gets_no_store_naming_it) {
    auto app = remember_then_recall().compile();
    try {
        (void)sg::run_sync(app.invoke(says("ann", "hi")));
        BOOST_FAIL("expected graph_error(no_store)");
    } catch (const sg::graph_error& e) {
        BOOST_TEST(e.kind() == sg::errc::no_store);
        BOOST_TEST(std::string(e.what()).find("node 'remember'") != std::string::npos, e.what());
        BOOST_TEST(std::string(e.what()).find("compile_options::store") != std::string::npos, e.what());
        BOOST_TEST(std::string(sg::to_string(sg::errc::no_store)) == "no_store");
    }
}

BOOST_AUTO_TEST_SUITE_END()
