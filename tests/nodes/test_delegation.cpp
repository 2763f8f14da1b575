// Tests of worker_supervisor, delegate and forward_message (nodes/include/stategraph/nodes/delegation.hpp),
// against the loopback OpenAI-compatible server of fake_openai_server.hpp.
#include <stategraph/nodes/delegation.hpp>

#include "fake_openai_server.hpp"
#include "run_with_server.hpp"

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/core/error.hpp>
#include <stategraph/reducer.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace delegation_test {

struct chat {
    std::vector<stategraph::nodes::chat_message> messages;
};
BOOST_DESCRIBE_STRUCT(chat, (), (messages))
inline auto reducers(stategraph::for_state<chat>) {
    return stategraph::reducers{stategraph::reduce<&chat::messages>(stategraph::messages)};
}

}  // namespace delegation_test

namespace {

namespace asio = boost::asio;
namespace sg = stategraph;
namespace nodes = stategraph::nodes;
using delegation_test::chat;
using stategraph::test::fake_openai_server;
using stategraph::test::fake_tool_call;
using stategraph::test::scripted_reply;

constexpr char const* key = "sk-delegation";

sg::update<chat> ask(std::string text) {
    std::vector<nodes::chat_message> m(1, nodes::chat_message{"user", std::move(text)});
    return sg::update<chat>{}.set<&chat::messages>(std::move(m));
}

/// Workers that count their runs and overlap: each waits 50 ms, and records how many were
/// running at the same time.
struct crew {
    int running = 0, most = 0, research_runs = 0, writer_runs = 0;
    bool writer_fails_once = false;

    std::vector<nodes::worker> workers(asio::any_io_executor ex) {
        auto research = [this, ex](std::string instructions) -> asio::awaitable<std::string> {
            ++research_runs;
            co_await pause(ex);
            co_return "facts about " + instructions;
        };
        auto writer = [this, ex](std::string instructions) -> asio::awaitable<std::string> {
            ++writer_runs;
            co_await pause(ex);
            if (writer_fails_once && writer_runs == 1) throw std::runtime_error("the writer's model is down");
            co_return "DRAFT: " + instructions;
        };
        return {nodes::worker{"research", "finds facts", research}, nodes::worker{"writer", "writes drafts", writer}};
    }

    asio::awaitable<void> pause(asio::any_io_executor ex) {
        ++running;
        most = std::max(most, running);
        asio::steady_timer t(ex, std::chrono::milliseconds(50));
        co_await t.async_wait(asio::use_awaitable);
        --running;
    }
};

std::vector<fake_tool_call> two_delegations() {
    return {fake_tool_call{"d1", "delegate", R"({"worker":"research","instructions":"tides"})"},
            fake_tool_call{"d2", "delegate", R"({"worker":"writer","instructions":"a poem on tides"})"}};
}

/// The worker_error nested in @p e (node_error wraps what a node throws), if any.
std::optional<std::string> failed_worker(std::exception_ptr e) {
    for (int depth = 0; e && depth < 8; ++depth) {
        try {
            std::rethrow_exception(e);
        } catch (nodes::worker_error const& w) {
            BOOST_TEST(w.code() == nodes::errc::worker_failed);
            return w.worker();
        } catch (sg::node_error const& n) {
            e = n.nested();
        } catch (...) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(delegation)

BOOST_AUTO_TEST_CASE(delegations_run_in_parallel_and_forward_message_answers_verbatim) {
    asio::io_context ioc;
    fake_openai_server server(ioc, key);
    server.script.push_back(scripted_reply{"", two_delegations()});
    server.script.push_back(scripted_reply{"", {fake_tool_call{"f1", "forward_message", R"({"worker":"writer"})"}}});
    auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), sg::test::options_for(server, key));
    crew c;
    auto app = nodes::worker_supervisor<&chat::messages>(model, c.workers(ioc.get_executor()));
    auto r = sg::test::run_with_server(ioc, &server, app.invoke(ask("Write a poem on tides")));

    BOOST_TEST(c.most == 2);  // both workers were running at once
    BOOST_TEST(c.research_runs == 1);
    BOOST_TEST(c.writer_runs == 1);
    BOOST_REQUIRE_EQUAL(server.requests.size(), 2u);  // no synthesis round after forward_message
    auto const& m = r.values.messages;
    BOOST_REQUIRE(!m.empty());
    BOOST_TEST(m.back().role == "assistant");
    BOOST_TEST(m.back().content == "DRAFT: a poem on tides");
    // The model was offered both tools, and its prompt lists the workers.
    auto const& first = server.requests[0].body.as_object();
    BOOST_TEST(first.at("tools").as_array().size() == 2u);
    auto const system = std::string(first.at("messages").as_array().at(0).at("content").as_string());
    BOOST_TEST(system.find("forward_message") != std::string::npos);
    auto const tools = boost::json::serialize(first.at("tools"));
    BOOST_TEST(tools.find("research: finds facts") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_failed_worker_fails_the_turn_and_a_resume_reruns_only_it) {
    // Two "processes" on one checkpointer: the first fails in the writer, the second continues.
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    sg::run_config cfg;
    cfg.thread_id = "crash";
    crew c;
    c.writer_fails_once = true;
    auto build = [&](asio::io_context& ioc, fake_openai_server& server) {
        auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), sg::test::options_for(server, key));
        nodes::worker_supervisor_options o;
        o.compile.checkpointer = saver;
        return nodes::worker_supervisor<&chat::messages>(model, c.workers(ioc.get_executor()), o);
    };
    std::exception_ptr failure;
    {
        asio::io_context ioc;
        fake_openai_server server(ioc, key);
        server.script.push_back(scripted_reply{"", two_delegations()});
        auto app = build(ioc, server);
        try {
            sg::test::run_with_server(ioc, &server, app.invoke(ask("Write a poem on tides"), cfg));
        } catch (...) {
            failure = std::current_exception();
        }
    }
    BOOST_REQUIRE(failure);
    BOOST_TEST((failed_worker(failure) == std::optional<std::string>("writer")));
    BOOST_TEST(c.research_runs == 1);  // it finished: its answer is journaled
    BOOST_TEST(c.writer_runs == 1);

    asio::io_context ioc;
    fake_openai_server server(ioc, key);
    server.script.push_back(scripted_reply{"Here is your poem.", {}});
    auto app = build(ioc, server);
    auto r = sg::test::run_with_server(ioc, &server, app.invoke(sg::continue_input{}, cfg));
    BOOST_TEST(c.research_runs == 1);  // not run again
    BOOST_TEST(c.writer_runs == 2);
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);  // the model is not asked again for the delegations
    auto const& m = r.values.messages;
    BOOST_REQUIRE_EQUAL(m.size(), 5u);  // user, delegations, 2 tool answers, the reply
    BOOST_TEST(m[2].content == "facts about tides");
    BOOST_TEST(m[3].content == "DRAFT: a poem on tides");
    BOOST_TEST(m[4].content == "Here is your poem.");
}

BOOST_AUTO_TEST_CASE(a_retry_policy_reruns_only_the_failed_worker) {
    asio::io_context ioc;
    fake_openai_server server(ioc, key);
    server.script.push_back(scripted_reply{"", two_delegations()});
    server.script.push_back(scripted_reply{"Done.", {}});
    auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), sg::test::options_for(server, key));
    crew c;
    c.writer_fails_once = true;
    nodes::worker_supervisor_options o;
    sg::retry_policy retry;
    retry.initial_interval = std::chrono::milliseconds(1);
    o.worker_retry = retry;
    auto app = nodes::worker_supervisor<&chat::messages>(model, c.workers(ioc.get_executor()), o);
    auto r = sg::test::run_with_server(ioc, &server, app.invoke(ask("Write a poem on tides")));
    BOOST_TEST(c.research_runs == 1);
    BOOST_TEST(c.writer_runs == 2);
    BOOST_TEST(r.values.messages.back().content == "Done.");
}

BOOST_AUTO_TEST_CASE(bad_workers_are_all_reported) {
    auto run = [](std::string) -> asio::awaitable<std::string> { co_return "x"; };
    std::vector<nodes::worker> bad{{"ok", "fine", run}, {"not valid", "space", run}, {"ok", "again", run}, {"empty", "", {}}};
    try {
        nodes::delegation_tools(bad);
        BOOST_FAIL("expected agent_error");
    } catch (nodes::agent_error const& e) {
        BOOST_TEST(e.kind() == nodes::errc::bad_worker);
        BOOST_REQUIRE_EQUAL(e.problems().size(), 3u);
        BOOST_TEST(std::string(e.what()).find("'not valid'") != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("duplicate name") != std::string::npos);
        BOOST_TEST(std::string(e.what()).find("no run function") != std::string::npos);
    }
    BOOST_CHECK_THROW(nodes::delegation_tools({}), nodes::agent_error);
}

BOOST_AUTO_TEST_CASE(unknown_worker_answers_the_model_and_forward_without_output_is_an_error) {
    asio::io_context ioc;
    fake_openai_server server(ioc, key);
    server.script.push_back(scripted_reply{"", {fake_tool_call{"d1", "delegate", R"({"worker":"poet","instructions":"x"})"}}});
    server.script.push_back(scripted_reply{"", {fake_tool_call{"f1", "forward_message", R"({"worker":"writer"})"}}});
    auto model = std::make_shared<nodes::openai_chat_model>(ioc.get_executor(), sg::test::options_for(server, key));
    crew c;
    auto app = nodes::worker_supervisor<&chat::messages>(model, c.workers(ioc.get_executor()));
    std::exception_ptr failure;
    try {
        sg::test::run_with_server(ioc, &server, app.invoke(ask("hi")));
    } catch (...) {
        failure = std::current_exception();
    }
    BOOST_REQUIRE(failure);
    // The unknown worker went back to the model as a tool message (it then forwarded).
    BOOST_REQUIRE_EQUAL(server.requests.size(), 2u);
    auto const sent = boost::json::serialize(server.requests[1].body.at("messages"));
    BOOST_TEST(sent.find("unknown worker 'poet'; the workers are: research, writer") != std::string::npos);
    bool found = false;
    for (auto e = failure; e && !found;) {
        try {
            std::rethrow_exception(e);
        } catch (nodes::agent_error const& a) {
            found = a.kind() == nodes::errc::no_worker_output && std::string(a.what()).find("'writer'") != std::string::npos;
            e = nullptr;
        } catch (sg::node_error const& n) {
            e = n.nested();
        } catch (...) {
            e = nullptr;
        }
    }
    BOOST_TEST(found);
    BOOST_TEST(c.writer_runs == 0);
}

BOOST_AUTO_TEST_SUITE_END()
