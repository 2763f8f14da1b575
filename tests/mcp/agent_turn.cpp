// One turn of the ask_agent.hpp graph in a process of its own, for test_tools.cpp's resume from
// another process. It connects to server-everything itself (stdio) and keeps the thread in a
// SQLite file.
//   agent_turn DB THREAD start     the first turn: prints "interrupted: PAYLOAD" (exit 0)
//   agent_turn DB THREAD approve   resume(true): prints "answer: TEXT" (exit 0)
// Exit 1 when the turn did something else, 2 on bad arguments.
#include "ask_agent.hpp"
#include "mcp_servers.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/run_sync.hpp>

#include <boost/json/serialize.hpp>

#include <iostream>

int main(int argc, char** argv) {
    namespace sg = stategraph;
    if (argc != 4) {
        std::cerr << "usage: agent_turn DB THREAD start|approve\n";
        return 2;
    }
    std::string const mode = argv[3];
    auto server = sg::run_sync(sg::mcp::client::connect(stategraph::test::mcp_servers::everything_stdio()));
    sg::checkpoint::sqlite_options so;
    so.path = argv[1];
    auto app = mcp_ask_agent::build(server, std::make_shared<sg::checkpoint::sqlite_saver>(so));
    sg::run_config cfg;
    cfg.thread_id = argv[2];
    if (mode == "start") {
        auto input = sg::update<mcp_ask_agent::desk>{}.set<&mcp_ask_agent::desk::messages>(
            {sg::nodes::chat_message{"user", "say it"}});
        auto turn = sg::run_sync(app.invoke(std::move(input), cfg));
        if (!turn.interrupted()) return 1;
        std::cout << "interrupted: " << boost::json::serialize(turn.interrupts.at(0).value) << std::endl;
        return 0;
    }
    if (mode == "approve") {
        auto turn = sg::run_sync(app.invoke(sg::resume(true), cfg));
        if (turn.interrupted()) return 1;
        std::cout << "answer: " << turn.values.messages.back().content << std::endl;
        return 0;
    }
    return 2;
}
