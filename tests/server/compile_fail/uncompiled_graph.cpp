// Mistake: serving the builder (a state_graph) instead of the compiled graph.
// expect: make_assistant(id, g): g must be a stategraph::compiled_graph<S>; call builder.compile({.checkpointer = saver}) on your state_graph first
#include <stategraph/server/assistant.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/state_graph.hpp>

struct note {
    std::string text;
};
BOOST_DESCRIBE_STRUCT(note, (), (text))

stategraph::update<note> echo(const note& n) { return stategraph::update<note>{}.set<&note::text>(n.text); }

int main() {
    stategraph::state_graph<note> builder("notes");
    builder.add_node("echo", echo);
    builder.add_edge(stategraph::START, "echo").add_edge("echo", stategraph::END);
#ifndef STATEGRAPH_FIXED
    auto spec = stategraph::server::make_assistant("notes", builder);
#else
    auto app = builder.compile({.checkpointer = std::make_shared<stategraph::checkpoint::memory_saver>()});
    auto spec = stategraph::server::make_assistant("notes", app);
#endif
    (void)spec;
}
