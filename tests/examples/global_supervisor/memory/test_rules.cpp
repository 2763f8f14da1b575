#include <boost/test/unit_test.hpp>

#include "memory/rules.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <string>
#include <vector>

namespace gs = global_supervisor;

namespace {

const std::vector<std::string> known = {"Thomas", "Anna", "Marco"};

std::string route_of(std::string_view message)
{
    return std::string(gs::to_string(gs::classify(message, known).route));
}

std::string agents_of(const std::vector<gs::planned_step>& steps)
{
    std::string s;
    for (const auto& st : steps) {
        if (!s.empty()) s += ',';
        s += gs::to_string(st.agent);
    }
    return s;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rules_suite)

BOOST_AUTO_TEST_CASE(routes)
{
    BOOST_TEST(route_of("Hi there") == "greeting");
    BOOST_TEST(route_of("hello!") == "greeting");
    BOOST_TEST(route_of("Hey, how are you doing today?") == "greeting");
    BOOST_TEST(route_of("Good morning") == "greeting");
    BOOST_TEST(route_of("Hi") == "greeting");
    // Not short, or not a greeting opener.
    BOOST_TEST(route_of("Hi there, I wanted to tell you a long story about my holidays") == "simple");
    BOOST_TEST(route_of("Highlights of the day") == "simple");
    BOOST_TEST(route_of("Tell me a fun fact about Anna") == "simple");
    BOOST_TEST(route_of("Thomas is traveling to Mallorca next week") == "simple");
    BOOST_TEST(route_of("") == "simple");
    // Complex: keywords, several requests, several questions.
    BOOST_TEST(route_of("Plan my week: book flights to Zurich and review my portfolio") == "complex");
    BOOST_TEST(route_of("Hi, can you book a table?") == "complex");
    BOOST_TEST(route_of("Please send an E-mail to Anna") == "complex");
    BOOST_TEST(route_of("Compare these two phones") == "complex");
    BOOST_TEST(route_of("Remind me to call Marco") == "complex");
    BOOST_TEST(route_of("What time is it? And where is Marco?") == "complex");
    BOOST_TEST(route_of("Bookshelf ideas") == "simple");  // whole words only

    const auto g = gs::classify("Hi there", known);
    BOOST_TEST(!g.needs_semantic_retrieval);
    BOOST_TEST(!g.has_extractable_facts);
    BOOST_TEST(gs::classify("Tell me a fun fact about Anna", known).needs_semantic_retrieval);
}

BOOST_AUTO_TEST_CASE(statement_with_entity)
{
    const auto i = gs::classify("Thomas is traveling to Mallorca", known);
    BOOST_TEST((i.route == gs::route_kind::simple));
    BOOST_TEST(i.entities == std::vector<std::string>{"Thomas"}, boost::test_tools::per_element());
    BOOST_TEST(i.has_extractable_facts);
    BOOST_TEST(!i.has_preferences);
    BOOST_TEST(i.needs_semantic_retrieval);
}

BOOST_AUTO_TEST_CASE(question_with_preference)
{
    const auto i = gs::classify("What does Thomas like for dinner?", known);
    BOOST_TEST((i.route == gs::route_kind::simple));
    BOOST_TEST(i.entities == std::vector<std::string>{"Thomas"}, boost::test_tools::per_element());
    BOOST_TEST(!i.has_extractable_facts);
    BOOST_TEST(i.has_preferences);

    BOOST_TEST(!gs::classify("Does Anna love sushi", known).has_extractable_facts);  // no '?'
    BOOST_TEST(!gs::classify("Hi, is Thomas coming tonight", known).has_extractable_facts);
    BOOST_TEST(gs::extract_facts("Hey, is Marco vegan", known).empty());
    BOOST_TEST(gs::classify("I prefer aisle seats", known).has_preferences);
    BOOST_TEST(gs::classify("I hate mornings", known).has_extractable_facts);
    BOOST_TEST(!gs::classify("Tell me a fun fact about Anna", known).has_extractable_facts);
    BOOST_TEST(!gs::classify("Plan my week: book flights to Zurich and review my portfolio", known)
                    .has_extractable_facts);
    // A statement followed by a request still carries a fact.
    BOOST_TEST(gs::classify("Marco is vegan. Can you find a restaurant?", known).has_extractable_facts);
}

BOOST_AUTO_TEST_CASE(entities)
{
    const auto i = gs::classify("Anna and Thomas visited Anna's parents; anna said Marco’s dog barked",
                                known);
    const std::vector<std::string> expected = {"Anna", "Thomas", "Marco"};
    BOOST_TEST(i.entities == expected, boost::test_tools::per_element());
    BOOST_TEST(gs::classify("tell anna hello", known).entities.empty());  // not capitalised
    BOOST_TEST(gs::classify("THOMAS is late", known).entities ==
                   std::vector<std::string>{"Thomas"}, boost::test_tools::per_element());
    BOOST_TEST(gs::classify("Thomas is late", {}).entities.empty());
    BOOST_TEST(gs::classify("Thomasina is late", known).entities.empty());
}

BOOST_AUTO_TEST_CASE(fact_extraction)
{
    const std::vector<std::string> thomas = {"Thomas"};
    auto facts = gs::extract_facts(
        "Hi! Thomas is traveling to Mallorca next week. Can you book a hotel for him?", thomas);
    BOOST_TEST_REQUIRE(facts.size() == 1u);
    BOOST_TEST(facts[0].text == "Thomas is traveling to Mallorca next week");
    BOOST_TEST((facts[0].entity == std::optional<std::string>("Thomas")));

    const std::vector<std::string> anna = {"Anna"};
    facts = gs::extract_facts("Remember that Anna loves sushi. she is allergic to nuts!", anna);
    BOOST_TEST_REQUIRE(facts.size() == 2u);
    BOOST_TEST(facts[0].text == "Anna loves sushi");
    BOOST_TEST((facts[0].entity == std::optional<std::string>("Anna")));
    BOOST_TEST(facts[1].text == "She is allergic to nuts");
    BOOST_TEST((facts[1].entity == std::optional<std::string>("Anna")));  // pronoun carries

    facts = gs::extract_facts("By the way, I am vegetarian.", anna);
    BOOST_TEST_REQUIRE(facts.size() == 1u);
    BOOST_TEST(facts[0].text == "I am vegetarian");
    BOOST_TEST(!facts[0].entity.has_value());

    const std::vector<std::string> two = {"Anna", "Marco"};
    facts = gs::extract_facts("Marco works with Anna", two);
    BOOST_TEST_REQUIRE(facts.size() == 1u);
    BOOST_TEST((facts[0].entity == std::optional<std::string>("Marco")));  // first in sentence

    BOOST_TEST(gs::extract_facts("What does Thomas like for dinner?", thomas).empty());
    BOOST_TEST(gs::extract_facts("Hi there", {}).empty());
    BOOST_TEST(gs::extract_facts("", {}).empty());
    BOOST_TEST(gs::extract_facts("Thomas is here. Thomas is here.", thomas).size() == 1u);
}

BOOST_AUTO_TEST_CASE(planning)
{
    const std::string msg = "Plan my week: book flights to Zurich and review my portfolio";
    auto steps = gs::plan(msg, {});
    BOOST_TEST(agents_of(steps) == "productivity,wealth");
    BOOST_TEST_REQUIRE(steps.size() == 2u);
    BOOST_TEST(steps[0].task == "Plan my week; book flights to Zurich");
    BOOST_TEST(steps[1].task == "review my portfolio");
    BOOST_TEST(!steps[0].needs_permission);
    BOOST_TEST(!steps[1].needs_permission);

    const std::vector<gs::agent_kind> done = {gs::agent_kind::productivity};
    steps = gs::plan(msg, done);
    BOOST_TEST(agents_of(steps) == "wealth");
    const std::vector<gs::agent_kind> all = {gs::agent_kind::wealth, gs::agent_kind::productivity};
    BOOST_TEST(gs::plan(msg, all).empty());

    // Stable canonical order regardless of mention order; send/email need permission.
    steps = gs::plan("Find out the best electric car, then email the summary to Anna", {});
    BOOST_TEST(agents_of(steps) == "productivity,research");
    BOOST_TEST_REQUIRE(steps.size() == 2u);
    BOOST_TEST(steps[0].task == "email the summary to Anna");
    BOOST_TEST(steps[0].needs_permission);
    BOOST_TEST(steps[1].task == "Find out the best electric car");
    BOOST_TEST(!steps[1].needs_permission);

    steps = gs::plan("Compare Tesla and BYD stocks", {});
    BOOST_TEST(agents_of(steps) == "wealth,research");
    BOOST_TEST(steps.at(0).task == "Compare Tesla and BYD stocks");  // "and" + non-action kept

    steps = gs::plan("Research index funds and invest 500 CHF", {});
    BOOST_TEST(agents_of(steps) == "wealth,research");
    BOOST_TEST(steps.at(0).task == "Research index funds; invest 500 CHF");

    // No keyword: one research step with the whole message, unless research is done.
    steps = gs::plan("  Review the contract  ", {});
    BOOST_TEST_REQUIRE(steps.size() == 1u);
    BOOST_TEST((steps[0].agent == gs::agent_kind::research));
    BOOST_TEST(steps[0].task == "Review the contract");
    const std::vector<gs::agent_kind> research = {gs::agent_kind::research};
    BOOST_TEST(gs::plan("Review the contract", research).empty());

    // Deterministic.
    BOOST_TEST(agents_of(gs::plan(msg, {})) == agents_of(gs::plan(msg, {})));
}

BOOST_AUTO_TEST_CASE(tokens_and_summarization)
{
    BOOST_TEST(gs::estimate_tokens("") == 0u);
    BOOST_TEST(gs::estimate_tokens("abcd") == 1u);
    BOOST_TEST(gs::estimate_tokens("abcde") == 2u);
    BOOST_TEST(gs::estimate_tokens(std::string(16000, 'x')) == 4000u);
    BOOST_TEST(!gs::needs_summarization(20, 4000));
    BOOST_TEST(gs::needs_summarization(21, 0));
    BOOST_TEST(gs::needs_summarization(6, 4001));
    BOOST_TEST(!gs::needs_summarization(6, gs::estimate_tokens(std::string(16000, 'x'))));
}

BOOST_AUTO_TEST_CASE(described_types_serialize_to_json)
{
    const auto i = gs::classify("Thomas is traveling to Mallorca", known);
    const auto v = boost::json::value_from(i);
    BOOST_TEST(boost::json::serialize(v) ==
               R"({"route":"simple","entities":["Thomas"],"has_extractable_facts":true,)"
               R"("has_preferences":false,"needs_semantic_retrieval":true})");
    const auto back = boost::json::value_to<gs::intent>(v);
    BOOST_TEST((back.route == i.route));
    BOOST_TEST(back.entities == i.entities, boost::test_tools::per_element());

    const std::vector<gs::extracted_fact> facts = {{"I am vegetarian", std::nullopt},
                                                   {"Anna likes sushi", "Anna"}};
    BOOST_TEST(boost::json::serialize(boost::json::value_from(facts)) ==
               R"([{"text":"I am vegetarian","entity":null},{"text":"Anna likes sushi","entity":"Anna"}])");

    const auto steps = gs::plan("Send the report by email", {});
    BOOST_TEST(boost::json::serialize(boost::json::value_from(steps)) ==
               R"([{"agent":"productivity","task":"Send the report by email","needs_permission":true}])");
    const auto parsed = boost::json::value_to<std::vector<gs::planned_step>>(boost::json::parse(
        R"([{"agent":"wealth","task":"t","needs_permission":false}])"));
    BOOST_TEST_REQUIRE(parsed.size() == 1u);
    BOOST_TEST((parsed[0].agent == gs::agent_kind::wealth));
}

BOOST_AUTO_TEST_SUITE_END()
