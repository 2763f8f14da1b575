// Streaming verbosity (issue 15, item 6): one filter over a run's stream, shared with the server.
#include <stategraph/verbosity.hpp>

#include <stategraph/state_graph.hpp>

#include <boost/test/unit_test.hpp>

#include "run_awaitable.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace sg = stategraph;
using sg::test::run;

namespace verbosity_test {
struct st {
    std::vector<std::string> log;
};
BOOST_DESCRIBE_STRUCT(st, (), (log))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
using upd = sg::update<st>;
}  // namespace verbosity_test

namespace {
using verbosity_test::st;
using verbosity_test::upd;

/// START -> a -> b -> END; a writes a custom event and a message chunk.
sg::compiled_graph<st> two_steps() {
    sg::state_graph<st> g("two");
    g.add_node("a", [](const st&, sg::context& ctx) {
        ctx.write(boost::json::object{{"progress", 50}});
        ctx.write_message(boost::json::object{{"type", "AIMessageChunk"}, {"content", "hi"}});
        return upd{}.set<&st::log>({"a"});
    });
    g.add_node("b", [](const st&) { return upd{}.set<&st::log>({"b"}); });
    g.add_edge(sg::START, "a").add_edge("a", "b").add_edge("b", sg::END);
    return g.compile();
}

/// The stream's events at level @p v, as "mode" or "values:<log size>".
std::vector<std::string> seen_at(sg::verbosity v) {
    auto app = two_steps();
    std::vector<std::string> seen;
    sg::stream_filter filter(v, [&seen](const sg::stream_event& e) {
        std::string name(sg::stream_event_name(e.mode));
        if (e.mode == sg::stream_mode::values) name += ":" + std::to_string(e.data.at("log").as_array().size());
        seen.push_back(name);
    });
    auto const modes = sg::stream_mode::values | sg::stream_mode::updates | sg::stream_mode::custom |
                       sg::stream_mode::messages | sg::stream_mode::tasks;
    auto in = upd{}.set<&st::log>({"in"});
    sg::run_config cfg;
    run(app.stream(std::move(in), cfg, modes, filter));
    filter.finish();
    return seen;
}

std::size_t count(std::vector<std::string> const& v, std::string const& x) {
    return static_cast<std::size_t>(std::count(v.begin(), v.end(), x));
}
}  // namespace

BOOST_AUTO_TEST_SUITE(verbosity)

BOOST_AUTO_TEST_CASE(full_passes_every_event_in_order) {
    auto seen = seen_at(sg::verbosity::full);
    BOOST_TEST(count(seen, "values:1") == 1u);  // the input
    BOOST_TEST(count(seen, "values:3") == 1u);  // the final state
    BOOST_TEST(count(seen, "updates") == 2u);
    BOOST_TEST(count(seen, "custom") == 1u);
    BOOST_TEST(count(seen, "messages") == 1u);
    BOOST_TEST(count(seen, "tasks") == 4u);  // a start and result per task
    BOOST_TEST(seen.back() == "values:3");
}

BOOST_AUTO_TEST_CASE(events_hides_the_intermediate_values_and_sends_the_final_ones_last) {
    auto seen = seen_at(sg::verbosity::events);
    BOOST_TEST(count(seen, "values:1") == 0u);
    BOOST_TEST(count(seen, "values:2") == 0u);
    BOOST_REQUIRE(!seen.empty());
    BOOST_TEST(seen.back() == "values:3");
    BOOST_TEST(count(seen, "updates") == 2u);
    BOOST_TEST(count(seen, "custom") == 1u);
    BOOST_TEST(count(seen, "tasks") == 4u);
}

BOOST_AUTO_TEST_CASE(result_keeps_messages_and_the_final_values) {
    auto seen = seen_at(sg::verbosity::result);
    std::vector<std::string> const expected{"messages", "values:3"};
    BOOST_TEST(seen == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(server_event_names_and_level_names) {
    BOOST_TEST(sg::shows(sg::verbosity::events, "updates|sub:1"));
    BOOST_TEST(!sg::shows(sg::verbosity::events, "values"));
    BOOST_TEST(!sg::shows(sg::verbosity::events, "debug|sub:1"));
    BOOST_TEST(sg::shows(sg::verbosity::result, "error"));
    BOOST_TEST(sg::shows(sg::verbosity::result, "metadata"));
    BOOST_TEST(!sg::shows(sg::verbosity::result, "custom"));
    BOOST_TEST(sg::shows(sg::verbosity::full, "checkpoints"));
    for (auto v : {sg::verbosity::full, sg::verbosity::events, sg::verbosity::result})
        BOOST_TEST((sg::parse_verbosity(sg::to_string(v)) == v));
    BOOST_TEST(!sg::parse_verbosity("verbose").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
