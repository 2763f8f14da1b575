// Tests of tool calls, token streaming, tool_node and react_agent (nodes/include/stategraph/nodes/),
// against the loopback OpenAI-compatible server of fake_openai_server.hpp.
#include <stategraph/nodes/react_agent.hpp>

#include "fake_openai_server.hpp"
#include "run_with_server.hpp"

#include <stategraph/nodes/delegation.hpp>
#include <stategraph/nodes/model_node.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/nodes/tool_node.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/dsl/dsl.hpp>
#include <stategraph/run_sync.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "chat_state.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using nodes_test::chat;
using nodes::chat_message;
using nodes::chat_request;
using nodes::chat_response;
using stategraph::test::fake_openai_server;
using stategraph::test::fake_reply;
using stategraph::test::fake_tool_call;
using stategraph::test::scripted_reply;

constexpr char const* api_key = "sk-agents";

template <class T>
T drive(asio::io_context& ioc, fake_openai_server* server, asio::awaitable<T> task) {
    return stategraph::test::run_with_server(ioc, server, std::move(task));
}

nodes::openai_options options_for(fake_openai_server const& server) {
    return stategraph::test::options_for(server, api_key);
}

chat_message user(std::string text) { return chat_message{"user", std::move(text)}; }

chat_message assistant_calls(std::vector<nodes::tool_call> calls) {
    chat_message m;
    m.role = "assistant";
    m.tool_calls = std::move(calls);
    return m;
}

sg::update<chat> start_with(std::vector<chat_message> messages) {
    return sg::update<chat>{}.set<&chat::messages>(std::move(messages));
}

/// @brief The first agent_error nested in @p e (node_error wraps what a node throws).
std::optional<nodes::agent_error> find_agent_error(std::exception_ptr e) {
    for (int depth = 0; e && depth < 8; ++depth) {
        try {
            std::rethrow_exception(e);
        } catch (nodes::agent_error const& a) {
            return a;
        } catch (sg::node_error const& n) {
            e = n.nested();
        } catch (...) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

template <class F>
nodes::agent_error require_agent_error(F&& f) {
    try {
        f();
    } catch (...) {
        auto found = find_agent_error(std::current_exception());
        BOOST_REQUIRE_MESSAGE(found, "the exception holds no agent_error");
        BOOST_TEST_MESSAGE("caught: " << found->what());
        return *found;
    }
    BOOST_FAIL("nothing was thrown");
    throw std::logic_error("unreachable");
}

json::value weather_schema() {
    return json::parse(R"({"type":"object","properties":{"city":{"type":"string"}},"required":["city"]})");
}

nodes::tool weather_tool(int* calls = nullptr) {
    auto fn = [calls](json::object const& args) -> std::string {
        if (calls) ++*calls;
        return "sunny, 21C in " + std::string(args.at("city").as_string());
    };
    return nodes::tool("get_weather", "Current weather of a city", weather_schema(), fn);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(openai_tool_calls)

BOOST_AUTO_TEST_CASE(tools_are_offered_and_tool_calls_parsed) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.script.push_back(scripted_reply{"", {fake_tool_call{"call_1", "get_weather", R"({"city":"Paris"})"}}});
    nodes::openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request;
    request.messages.push_back(user("Weather in Paris?"));
    request.tools.push_back(nodes::tool_definition{"get_weather", "Current weather of a city", weather_schema()});
    request.tools.push_back(nodes::tool_definition{"ping", "", nullptr});

    chat_response const response = drive(ioc, &server, model.complete(request));

    BOOST_TEST(response.finish_reason == "tool_calls");
    BOOST_TEST(response.content.empty());
    BOOST_REQUIRE_EQUAL(response.tool_calls.size(), 1u);
    BOOST_TEST(response.tool_calls[0].id == "call_1");
    BOOST_TEST(response.tool_calls[0].name == "get_weather");
    BOOST_TEST(response.tool_calls[0].arguments == R"({"city":"Paris"})");
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    auto const& body = server.requests[0].body.as_object();
    json::value const expected_tools = json::parse(R"([
        {"type":"function","function":{"name":"get_weather","description":"Current weather of a city",
         "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
        {"type":"function","function":{"name":"ping","parameters":{"type":"object","properties":{}}}}])");
    BOOST_TEST(body.at("tools") == expected_tools);
    BOOST_TEST(!body.contains("stream"));
}

BOOST_AUTO_TEST_CASE(tool_messages_are_sent_with_their_call_ids) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply_content = "It is sunny.";
    nodes::openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request;
    request.messages.push_back(user("Weather in Paris?"));
    request.messages.push_back(assistant_calls({nodes::tool_call{"call_1", "get_weather", R"({"city":"Paris"})"}}));
    chat_message answer{"tool", "sunny"};
    answer.tool_call_id = "call_1";
    request.messages.push_back(answer);

    chat_response const response = drive(ioc, &server, model.complete(request));

    BOOST_TEST(response.content == "It is sunny.");
    BOOST_TEST(response.tool_calls.empty());
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    BOOST_TEST(server.requests[0].status == 200u);  // the server validated the tool message
    json::value const expected = json::parse(R"([
        {"role":"user","content":"Weather in Paris?"},
        {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
          "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
        {"role":"tool","content":"sunny","tool_call_id":"call_1"}])");
    BOOST_TEST(server.requests[0].body.at("messages") == expected);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(openai_streaming)

BOOST_AUTO_TEST_CASE(chunks_arrive_in_order_and_assemble) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.script.push_back(
        scripted_reply{"Let me look that up", {fake_tool_call{"call_9", "lookup", R"({"query":"graphs"})"}}});
    nodes::openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request;
    request.messages.push_back(user("Find graphs"));
    std::vector<nodes::chat_chunk> chunks;
    nodes::chunk_handler on_chunk = [&chunks](nodes::chat_chunk const& c) { chunks.push_back(c); };

    chat_response const response = drive(ioc, &server, model.stream(request, on_chunk));

    BOOST_TEST(response.content == "Let me look that up");
    BOOST_TEST(response.finish_reason == "tool_calls");
    BOOST_REQUIRE_EQUAL(response.tool_calls.size(), 1u);
    BOOST_TEST(response.tool_calls[0].id == "call_9");
    BOOST_TEST(response.tool_calls[0].name == "lookup");
    BOOST_TEST(response.tool_calls[0].arguments == R"({"query":"graphs"})");
    BOOST_TEST(response.prompt_tokens == 2);
    BOOST_TEST(response.completion_tokens == 5);
    // One chunk per word, then the tool call's head and its arguments in two pieces.
    BOOST_REQUIRE_EQUAL(chunks.size(), 5u + 3u);
    std::vector<std::string> words;
    for (std::size_t i = 0; i < 5; ++i) words.push_back(chunks[i].content);
    std::vector<std::string> const expected_words{"Let", " me", " look", " that", " up"};
    BOOST_TEST(words == expected_words, boost::test_tools::per_element());
    BOOST_TEST(chunks[5].tool_calls.at(0).id == "call_9");
    BOOST_TEST(chunks[5].tool_calls.at(0).name == "lookup");
    BOOST_TEST(chunks[6].tool_calls.at(0).arguments + chunks[7].tool_calls.at(0).arguments == R"({"query":"graphs"})");
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    auto const& body = server.requests[0].body.as_object();
    BOOST_TEST(body.at("stream") == json::value(true));
    BOOST_TEST(body.at("stream_options") == json::parse(R"({"include_usage":true})"));
}

BOOST_AUTO_TEST_CASE(stream_cut_before_done_is_bad_response) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply = fake_reply::cut_stream;
    server.reply_content = "partial answer";
    nodes::openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request;
    request.messages.push_back(user("hi"));
    int chunks = 0;
    nodes::chunk_handler on_chunk = [&chunks](nodes::chat_chunk const&) { ++chunks; };
    try {
        drive(ioc, &server, model.stream(request, on_chunk));
        BOOST_FAIL("no error");
    } catch (boost::system::system_error const& e) {
        BOOST_TEST((e.code() == nodes::chat_error::bad_response));
        BOOST_TEST(std::string(e.what()).find("before [DONE]") != std::string::npos);
    }
    BOOST_TEST(chunks == 2);  // the pieces that did arrive were handed over
}

BOOST_AUTO_TEST_CASE(streamed_request_refused_is_http_status) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    auto options = options_for(server);
    options.api_key = "sk-wrong";
    nodes::openai_chat_model model(ioc.get_executor(), options);
    chat_request request;
    request.messages.push_back(user("hi"));
    nodes::chunk_handler on_chunk = [](nodes::chat_chunk const&) { BOOST_FAIL("no chunk expected"); };
    try {
        drive(ioc, &server, model.stream(request, on_chunk));
        BOOST_FAIL("no error");
    } catch (boost::system::system_error const& e) {
        BOOST_TEST((e.code() == nodes::chat_error::http_status));
        BOOST_TEST(std::string(e.what()).find("HTTP 401") != std::string::npos);
    }
}

BOOST_AUTO_TEST_CASE(default_stream_hands_over_the_whole_answer_as_one_chunk) {
    auto rule = [](chat_request const&) {
        chat_response out;
        out.content = "whole answer";
        out.tool_calls.push_back(nodes::tool_call{"t1", "get_weather", R"({"city":"Oslo"})"});
        return out;
    };
    nodes::rule_chat_model model(rule);
    std::vector<nodes::chat_chunk> chunks;
    // The natural spelling: a lambda written inside the co_await expression.
    auto task = [&model, &chunks]() -> asio::awaitable<chat_response> {
        chat_request request;
        request.messages.push_back(user("x"));
        co_return co_await model.stream(request, [&chunks](nodes::chat_chunk const& c) { chunks.push_back(c); });
    };
    asio::io_context ioc;
    auto const response = drive(ioc, nullptr, task());
    BOOST_TEST(response.content == "whole answer");
    BOOST_REQUIRE_EQUAL(chunks.size(), 1u);
    BOOST_TEST(chunks[0].content == "whole answer");
    BOOST_REQUIRE_EQUAL(chunks[0].tool_calls.size(), 1u);
    BOOST_TEST(chunks[0].tool_calls[0].arguments == R"({"city":"Oslo"})");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(tool_node_runs_calls)

BOOST_AUTO_TEST_CASE(calls_run_in_parallel_and_errors_become_tool_messages) {
    int running = 0, most = 0;
    auto slow = [&running, &most](json::object const& args, sg::context& ctx) -> asio::awaitable<std::string> {
        ++running;
        most = std::max(most, running);
        asio::steady_timer timer(ctx.executor(), std::chrono::milliseconds(50));
        co_await timer.async_wait(asio::use_awaitable);
        --running;
        co_return "slept " + std::string(args.at("name").as_string());
    };
    auto boom = [](json::object const&) -> int { throw std::runtime_error("disk on fire"); };
    auto refuse = [](json::object const&) -> int {
        throw nodes::agent_error(nodes::errc::tool_denied, "policy forbids it");
    };
    auto structured = [](json::object const&) { return json::value{{"ok", true}}; };
    std::vector<nodes::tool> tools{nodes::tool("slow", "sleeps", nullptr, slow),
                                   nodes::tool("boom", "throws", nullptr, boom),
                                   nodes::tool("refuse", "refuses", nullptr, refuse),
                                   nodes::tool("structured", "json", nullptr, structured)};
    sg::state_graph<chat> g("tools_only");
    g.add_node("tools", nodes::tool_node<&chat::messages>(tools));
    g.add_edge(sg::START, "tools").add_edge("tools", sg::END);
    auto app = g.compile();

    auto input = start_with({user("go"), assistant_calls({{"c1", "slow", R"({"name":"a"})"},
                                                          {"c2", "boom", "{}"},
                                                          {"c3", "slow", R"({"name":"b"})"},
                                                          {"c4", "nope", "{}"},
                                                          {"c5", "slow", "not json"},
                                                          {"c6", "refuse", ""},
                                                          {"c7", "slow", R"({"name":"c"})"},
                                                          {"c8", "structured", "{}"}})});
    asio::io_context ioc;
    auto r = drive(ioc, nullptr, app.invoke(std::move(input)));

    BOOST_TEST(most == 3);  // the three slow calls overlapped
    auto const& m = r.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 2u + 8u);
    std::vector<std::string> ids, errors;
    for (std::size_t i = 2; i < m.size(); ++i) {
        BOOST_TEST(m[i].role == "tool");
        ids.push_back(m[i].tool_call_id);
        errors.push_back(m[i].error);
    }
    std::vector<std::string> const expected_ids{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"};
    std::vector<std::string> const expected_errors{"", "tool_failed", "", "unknown_tool", "bad_tool_arguments",
                                                   "tool_denied", "", ""};
    BOOST_TEST(ids == expected_ids, boost::test_tools::per_element());
    BOOST_TEST(errors == expected_errors, boost::test_tools::per_element());
    BOOST_TEST(m[2].content == "slept a");
    BOOST_TEST(m[3].content.find("disk on fire") != std::string::npos);
    BOOST_TEST(m[5].content.find("unknown tool 'nope'; the tools are: slow, boom, refuse, structured") !=
               std::string::npos);
    BOOST_TEST(m[6].content.find("not a JSON object") != std::string::npos);
    BOOST_TEST(m[7].content.find("policy forbids it") != std::string::npos);
    BOOST_TEST(m[9].content == R"({"ok":true})");
}

BOOST_AUTO_TEST_CASE(no_tool_calls_is_a_typed_error) {
    sg::state_graph<chat> g("tools_only");
    g.add_node("tools", nodes::tool_node<&chat::messages>({weather_tool()}));
    g.add_edge(sg::START, "tools").add_edge("tools", sg::END);
    auto app = g.compile();
    asio::io_context ioc;
    auto const e = require_agent_error([&] { drive(ioc, nullptr, app.invoke(start_with({user("hi")}))); });
    BOOST_TEST((e.code() == nodes::errc::no_tool_calls));
    BOOST_TEST(e.code().category().name() == std::string("stategraph.nodes"));
    BOOST_TEST(std::string(e.what()).find("tool node 'tools'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_tool_asks_a_human_and_the_run_resumes) {
    int deploys = 0, weather = 0;
    auto deploy = [&deploys](json::object const& args) {
        ++deploys;
        return "deployed " + std::string(args.at("service").as_string());
    };
    auto pick = [](json::object const&, sg::context& ctx) {
        auto env = ctx.interrupt_now<std::string>(json::value("which environment?"));
        return "picked " + env;
    };
    std::vector<nodes::tool> tools{nodes::tool("deploy", "deploys", nullptr, deploy).ask_first(),
                                   nodes::tool("pick", "asks", nullptr, pick), weather_tool(&weather)};
    sg::state_graph<chat> g("approval");
    g.add_node("tools", nodes::tool_node<&chat::messages>(tools));
    g.add_edge(sg::START, "tools").add_edge("tools", sg::END);
    sg::compile_options co;
    co.checkpointer = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile(co);
    sg::run_config cfg;
    cfg.thread_id = "approve";

    auto input = start_with({user("ship it"), assistant_calls({{"d1", "deploy", R"({"service":"api"})"},
                                                               {"w1", "get_weather", R"({"city":"Oslo"})"},
                                                               {"p1", "pick", "{}"}})});
    asio::io_context ioc;
    auto first = drive(ioc, nullptr, app.invoke(std::move(input), cfg));
    BOOST_REQUIRE(first.interrupted());
    BOOST_REQUIRE_EQUAL(first.interrupts.size(), 1u);
    BOOST_TEST(first.interrupts[0].value.at("type") == json::value("tool_approval"));
    BOOST_TEST(first.interrupts[0].value.at("tool") == json::value("deploy"));
    BOOST_TEST(first.interrupts[0].value.at("arguments") == json::parse(R"({"service":"api"})"));
    BOOST_TEST(deploys == 0);

    ioc.restart();
    auto second = drive(ioc, nullptr, app.invoke(sg::resume(true), cfg));  // approve: next, pick asks
    BOOST_REQUIRE(second.interrupted());
    BOOST_TEST(second.interrupts.at(0).value == json::value("which environment?"));

    ioc.restart();
    auto done = drive(ioc, nullptr, app.invoke(sg::resume(std::string("staging")), cfg));
    BOOST_REQUIRE(!done.interrupted());
    auto const& m = done.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 5u);
    BOOST_TEST(m[2].content == "deployed api");
    BOOST_TEST(m[3].content == "sunny, 21C in Oslo");
    BOOST_TEST(m[4].content == "picked staging");
    BOOST_TEST(deploys == 1);
    BOOST_TEST(weather == 1);  // its saved result is reused when the node runs again

    // Denied: the model gets a tool_denied message and the deploy never runs.
    sg::run_config other;
    other.thread_id = "deny";
    auto again = start_with({user("ship it"), assistant_calls({{"d2", "deploy", R"({"service":"db"})"}})});
    ioc.restart();
    BOOST_REQUIRE(drive(ioc, nullptr, app.invoke(std::move(again), other)).interrupted());
    ioc.restart();
    auto denied = drive(ioc, nullptr, app.invoke(sg::resume(false), other));
    BOOST_TEST(denied.values.messages.back().error == "tool_denied");
    BOOST_TEST(deploys == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(react_agent_loop)

BOOST_AUTO_TEST_CASE(model_and_tools_alternate_until_an_answer_with_streamed_tokens) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.script.push_back(scripted_reply{"", {fake_tool_call{"call_1", "get_weather", R"({"city":"Paris"})"},
                                               fake_tool_call{"call_2", "get_weather", R"({"city":"Rome"})"}}});
    server.script.push_back(scripted_reply{"Sunny in both cities", {}});
    auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), options_for(server));
    int weather = 0;
    nodes::react_options options;
    options.system_prompt = "You answer weather questions.";

    using namespace sg::dsl;
    // clang-format off
    auto app = graph<chat>("assistant",
        "agent"_n = nodes::react_agent<&chat::messages>(model, {weather_tool(&weather)}, options),
        start >> "agent"_n >> end).compile();
    // clang-format on

    std::vector<sg::stream_event> events;
    auto on_event = [&events](sg::stream_event const& e) { events.push_back(e); };
    sg::run_config cfg;
    auto r = drive(ioc, &server, app.stream(start_with({user("Weather in Paris and Rome?")}), cfg,
                                            sg::stream_mode::messages, on_event));

    auto const& m = r.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 5u);
    BOOST_TEST(m[1].role == "assistant");
    BOOST_TEST(m[1].tool_calls.size() == 2u);
    BOOST_TEST(m[2].content == "sunny, 21C in Paris");
    BOOST_TEST(m[3].content == "sunny, 21C in Rome");
    BOOST_TEST(m[4].content == "Sunny in both cities");
    BOOST_TEST(weather == 2);
    BOOST_REQUIRE_EQUAL(server.requests.size(), 2u);
    auto const& second = server.requests[1].body.as_object();
    auto const& sent = second.at("messages").as_array();
    BOOST_REQUIRE_EQUAL(sent.size(), 5u);  // system, user, assistant, 2 tool messages
    BOOST_TEST(sent[0].at("role") == json::value("system"));
    BOOST_TEST(sent[3].at("tool_call_id") == json::value("call_1"));
    BOOST_TEST(sent[4].at("tool_call_id") == json::value("call_2"));
    BOOST_TEST(second.at("tools").as_array().size() == 1u);

    // messages mode: the tokens of the final answer, and the tool-call pieces of the first.
    std::string text;
    int tool_pieces = 0;
    for (auto const& e : events) {
        BOOST_REQUIRE((e.mode == sg::stream_mode::messages));
        auto const& chunk = e.data.as_array().at(0).as_object();
        BOOST_TEST(chunk.at("type") == json::value("AIMessageChunk"));
        text += std::string(chunk.at("content").as_string());
        tool_pieces += static_cast<int>(chunk.at("tool_call_chunks").as_array().size());
        BOOST_TEST(e.data.as_array().at(1).at("langgraph_node") == json::value("agent"));
    }
    BOOST_TEST(text == "Sunny in both cities");
    BOOST_TEST(tool_pieces == 6);
}

// Issue 26: the newcomer's spelling, as the README showed it. The model is built on an io_context
// that nobody runs and the turn goes through run_sync (a private io_context): it used to hang
// with no request sent. The server answers from a thread of its own; a watchdog ends the test
// program if the turn does not finish (a hang), instead of letting it wait forever.
BOOST_AUTO_TEST_CASE(run_sync_drives_a_model_built_on_an_io_context_nobody_runs) {
    asio::io_context server_io;
    fake_openai_server server(server_io, api_key);
    server.script.push_back(scripted_reply{"", {fake_tool_call{"call_1", "get_weather", R"({"city":"Oslo"})"}}});
    server.script.push_back(scripted_reply{"Sunny in Oslo", {}});
    auto server_work = asio::make_work_guard(server_io);
    std::thread server_thread([&server_io] { server_io.run(); });

    asio::io_context io;  // never run
    auto model = std::make_shared<nodes::openai_chat_model>(io.get_executor(), options_for(server));
    using namespace sg::dsl;
    auto app = graph<chat>("desk", "agent"_n = nodes::react_agent<&chat::messages>(model, {weather_tool()}),
                           start >> "agent"_n >> end)
                   .compile();

    auto turn = std::async(std::launch::async,
                           [&app] { return sg::run_sync(app.invoke(start_with({user("Weather in Oslo?")}))); });
    if (turn.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
        std::fprintf(stderr, "run_sync over a model on an idle io_context hung (issue 26)\n");
        std::_Exit(1);
    }
    std::exception_ptr failure;
    std::optional<decltype(turn.get())> r;
    try {
        r.emplace(turn.get());
    } catch (...) {
        failure = std::current_exception();
    }
    asio::post(server_io, [&server] { server.stop(); });
    server_work.reset();
    server_thread.join();
    if (failure) std::rethrow_exception(failure);

    auto const& m = r->values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 4u);  // user, assistant (tool call), tool, assistant
    BOOST_TEST(m[2].content == "sunny, 21C in Oslo");
    BOOST_TEST(m[3].content == "Sunny in Oslo");
    BOOST_REQUIRE_EQUAL(server.requests.size(), 2u);
    auto const& sent = server.requests[1].body.at("messages").as_array();
    BOOST_REQUIRE_EQUAL(sent.size(), 3u);  // the user message and the tool calls come back too
    BOOST_TEST(sent[0].at("role") == json::value("user"));
    BOOST_TEST(sent[1].at("tool_calls").as_array().size() == 1u);
    BOOST_TEST(sent[2].at("tool_call_id") == json::value("call_1"));
}

BOOST_AUTO_TEST_CASE(step_limit_is_a_typed_error_or_a_final_message) {
    for (auto const at_limit : {nodes::on_step_limit::error, nodes::on_step_limit::final_message}) {
        asio::io_context ioc;
        fake_openai_server server(ioc, api_key);
        for (int i = 0; i < 5; ++i)
            server.script.push_back(scripted_reply{"", {fake_tool_call{"loop_" + std::to_string(i), "get_weather",
                                                                       R"({"city":"Oslo"})"}}});
        auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), options_for(server));
        nodes::react_options options;
        options.name = "looper";
        options.max_steps = 2;
        options.at_limit = at_limit;
        auto app = nodes::react_agent<&chat::messages>(model, {weather_tool()}, options);
        if (at_limit == nodes::on_step_limit::error) {
            auto const e = require_agent_error([&] { drive(ioc, &server, app.invoke(start_with({user("loop")}))); });
            BOOST_TEST((e.code() == nodes::errc::step_limit));
            BOOST_TEST(std::string(e.what()).find("react agent 'looper'") != std::string::npos);
            BOOST_TEST(std::string(e.what()).find("max_steps 2") != std::string::npos);
        } else {
            auto r = drive(ioc, &server, app.invoke(start_with({user("loop")})));
            BOOST_TEST(r.values.messages.back().content == "Sorry, need more steps to process this request.");
            BOOST_TEST(r.values.messages.back().tool_calls.empty());
        }
        BOOST_TEST(server.requests.size() == 2u);
    }
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused) {
    auto model = std::make_shared<nodes::rule_chat_model>([](chat_request const&) { return chat_response{}; });
    nodes::react_options options;
    options.max_steps = 0;
    BOOST_CHECK_THROW(nodes::react_agent<&chat::messages>(model, {}, options), std::invalid_argument);
    BOOST_CHECK_THROW(nodes::model_node<&chat::messages>(nullptr), std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(permission_rules_on_tool_calls)

BOOST_AUTO_TEST_CASE(globs_and_precedence) {
    using nodes::glob_match;
    BOOST_TEST(glob_match("git push *", "git push origin main"));
    BOOST_TEST(!glob_match("git push *", "git pull origin"));
    BOOST_TEST(glob_match("/src/**", "/src/a/b.cpp"));
    BOOST_TEST(glob_match(".env", ".env"));
    BOOST_TEST(!glob_match(".env", ".env.local"));
    BOOST_TEST(glob_match("a?c*", "abcdef"));
    BOOST_TEST(glob_match("*", ""));

    nodes::permission_rules const rules({"Bash(git *)", "Read(/src/**)"}, {"Bash(git push --force *)", "Edit(.env)"},
                                        {"Bash(git push *)"});
    BOOST_TEST((rules.check("Bash", "git diff HEAD").first == nodes::permission::allow));
    BOOST_TEST((rules.check("Bash", "git push origin").first == nodes::permission::ask));  // ask beats allow
    auto const [verdict, rule] = rules.check("Bash", "git push --force origin");
    BOOST_TEST((verdict == nodes::permission::deny));  // deny beats ask and allow
    BOOST_REQUIRE(rule);
    BOOST_TEST(rule->text == "Bash(git push --force *)");
    BOOST_TEST((rules.check("Edit", ".env").first == nodes::permission::deny));
    BOOST_TEST((rules.check("Edit", "main.cpp").first == nodes::permission::allow));  // no rule: otherwise
    BOOST_TEST((rules.check("Read", "/etc/passwd").first == nodes::permission::allow));

    auto const e = require_agent_error([] { nodes::permission_rules({"Bash(git *"}, {"(x)"}, {"Ok"}); });
    BOOST_TEST((e.kind() == nodes::errc::bad_permission_rule));
    BOOST_TEST(e.problems().size() == 2u);
    BOOST_TEST(std::string(e.what()).find("\"Bash(git *\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tool_node_denies_asks_and_allows) {
    std::vector<std::string> ran;
    auto bash = [&ran](json::object const& args) {
        ran.emplace_back(args.at("command").as_string());
        return std::string("ok");
    };
    std::vector<nodes::tool> tools{nodes::tool("Bash", "runs a shell command", nullptr, bash).subject("command")};
    nodes::permission_rules rules({"Bash(git *)"}, {"Bash(git push --force *)"}, {"Bash(git push *)"},
                                  nodes::permission::deny);
    sg::state_graph<chat> g("guarded");
    g.add_node("tools", nodes::tool_node<&chat::messages>(tools, rules));
    g.add_edge(sg::START, "tools").add_edge("tools", sg::END);
    sg::compile_options co;
    co.checkpointer = std::make_shared<sg::checkpoint::memory_saver>();
    auto app = g.compile(co);
    sg::run_config cfg;
    cfg.thread_id = "perm";
    auto input = start_with({user("work"), assistant_calls({{"b1", "Bash", R"({"cwd":"/","command":"git diff"})"},
                                                            {"b2", "Bash", R"({"command":"git push --force o"})"},
                                                            {"b3", "Bash", R"({"command":"git push o"})"},
                                                            {"b4", "Bash", R"({"command":"ls"})"}})});
    asio::io_context ioc;
    auto first = drive(ioc, nullptr, app.invoke(std::move(input), cfg));
    BOOST_REQUIRE(first.interrupted());
    BOOST_TEST(first.interrupts.at(0).value.at("rule") == json::value("Bash(git push *)"));
    ioc.restart();
    auto done = drive(ioc, nullptr, app.invoke(sg::resume(true), cfg));
    auto const& m = done.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 6u);
    BOOST_TEST(m[2].error == "");
    BOOST_TEST(m[3].error == "tool_denied");
    BOOST_TEST(m[3].content.find("denied by rule \"Bash(git push --force *)\"") != std::string::npos);
    BOOST_TEST(m[4].error == "");
    BOOST_TEST(m[5].error == "tool_denied");
    BOOST_TEST(m[5].content.find("denied by default") != std::string::npos);
    std::vector<std::string> const expected{"git diff", "git push o"};  // git diff ran once (journaled)
    BOOST_TEST(ran == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()

// -- natural spellings (g++ 12, /work/shared/toolchain.md): written as a newcomer writes them,
// temporaries and capturing coroutine lambdas included; this file runs under ASan + UBSan in CI,
// where a double destruction fails it. --------------------------------------------------------

namespace {

/// @brief A rule model: asks for `temperature` in Oslo once, then answers with the tool's result.
std::shared_ptr<nodes::chat_model> thermometer_model() {
    return std::make_shared<nodes::rule_chat_model>([](chat_request const& r) {
        chat_response a;
        if (r.messages.empty()) return a;  // nothing asked: no text
        if (r.messages.back().role == "user")
            a.tool_calls.push_back(nodes::tool_call{"call_1", "temperature", R"({"city":"Oslo"})"});
        else
            a.content = "It is " + r.messages.back().content;
        return a;
    });
}

}  // namespace

BOOST_AUTO_TEST_SUITE(natural_spellings)

BOOST_AUTO_TEST_CASE(tools_models_and_agents_with_temporaries_inside_co_await) {
    // A tool from a coroutine lambda that captures by value and takes its arguments by value.
    std::string const unit = "C";
    auto temperature = [unit](json::object args) -> asio::awaitable<std::string> {
        co_return std::string(args.at("city").as_string()) + ": 21" + unit;
    };
    nodes::tool thermo("temperature", "Temperature of a city", weather_schema(), temperature);
    auto model = thermometer_model();

    // A node that calls the tool, the model and the agent with temporaries in the co_await
    // expressions (a braced request, the agent's input moved in).
    auto agent = nodes::react_agent<&chat::messages>(model, {thermo}, {.name = "thermo"});
    auto direct = [thermo, model, agent](chat const&, sg::context& ctx) -> asio::awaitable<sg::update<chat>> {
        // (A braced list inside co_await, `thermo.run(json::object{{"city", "Rome"}}, ctx)`, does not
        // compile with g++ 12: "array used as initializer". Name it first.)
        json::object const args{{"city", "Rome"}};
        json::value rome = co_await thermo.run(args, ctx);
        // chat_request is not an aggregate (g++ 12 destroys an aggregate temporary in a co_await
        // expression twice): a braced or constructed temporary is safe here.
        chat_response hello = co_await model->complete(chat_request{});
        std::vector<chat_message> hi(1, user("hi"));
        chat_response again = co_await model->complete(chat_request(std::move(hi), "rules"));
        auto question = start_with({user("How warm is Oslo?")});  // no braced list inside co_await (g++ 12)
        auto inner = co_await agent.invoke(std::move(question));
        std::vector<std::string> trail{std::string(rome.as_string()), hello.content.empty() ? "no text" : hello.content,
                                       again.tool_calls.at(0).name, inner.values.messages.back().content};
        co_return sg::update<chat>{}.set<&chat::trail>(std::move(trail));
    };
    sg::state_graph<chat> g("natural");
    g.add_node("direct", direct);
    g.add_edge(sg::START, "direct").add_edge("direct", sg::END);
    auto app = g.compile();
    asio::io_context ioc;
    auto r = drive(ioc, nullptr, app.invoke(start_with({user("go")})));
    std::vector<std::string> const expected{"Rome: 21C", "no text", "temperature", "It is Oslo: 21C"};
    BOOST_TEST(r.values.trail == expected, boost::test_tools::per_element());

    // The agent inside the graph, its tool a capturing coroutine lambda, run twice on one app.
    using namespace sg::dsl;
    // clang-format off
    auto outer = graph<chat>("outer",
        "agent"_n = nodes::react_agent<&chat::messages>(model, {thermo}),
        start >> "agent"_n >> end).compile();
    // clang-format on
    for (int i = 0; i < 2; ++i) {
        asio::io_context fresh;  // run_with_server leaves its io_context stopped
        auto done = drive(fresh, nullptr, outer.invoke(start_with({user("Oslo?")})));
        BOOST_TEST(done.values.messages.back().content == "It is Oslo: 21C");
    }
}

BOOST_AUTO_TEST_CASE(a_chat_request_is_not_an_aggregate) {
    // The designated-initializer spelling would compile to a double destruction under g++ 12
    // inside co_await; chat_request has constructors instead.
    static_assert(!std::is_aggregate_v<chat_request>);
    chat_request r(std::vector<chat_message>(1, user("x")), "m");
    BOOST_TEST(r.model == "m");
    BOOST_TEST(r.messages.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_worker_coroutine_with_a_by_value_argument) {
    std::string const signature = " -- research";
    auto research = [signature](std::string instructions) -> asio::awaitable<std::string> {
        co_return "found: " + instructions + signature;
    };
    nodes::worker w{"research", "finds facts", research};
    auto run_it = [&w]() -> asio::awaitable<std::string> { co_return co_await w.run(std::string("prices")); };
    asio::io_context ioc;
    BOOST_TEST(drive(ioc, nullptr, run_it()) == "found: prices -- research");
}

BOOST_AUTO_TEST_SUITE_END()
