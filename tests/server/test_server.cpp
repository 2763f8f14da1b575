#define BOOST_TEST_MODULE server
// stategraph::server over loopback: each endpoint, driven by a blocking Beast client on the test's
// thread while the server runs on its own io_context thread, and each kind of client mistake
// answered with a 4xx and a detail naming it.

#include "server_test_support.hpp"

#include <stategraph/drain.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include <condition_variable>
#include <future>
#include <mutex>


BOOST_AUTO_TEST_SUITE(server)

BOOST_AUTO_TEST_CASE(meta_and_assistants) {
    running_server s(test_options());
    auto ok = get(s.port, "/ok");
    BOOST_TEST(ok.status == 200u);
    BOOST_TEST(ok.json().at("ok").as_bool());
    BOOST_TEST(get(s.port, "/info").json().at("flags").at("assistants").as_bool());

    auto found = post(s.port, "/assistants/search", json::object{{"graph_id", "chat"}});
    BOOST_TEST(found.status == 200u);
    auto found_json = found.json();
    const auto& a = found_json.as_array().at(0).as_object();
    std::string aid(a.at("assistant_id").as_string());
    BOOST_TEST(aid.size() == 36u);
    BOOST_TEST(a.at("graph_id").as_string() == "chat");
    BOOST_TEST(post(s.port, "/assistants/search", json::object{{"graph_id", "nope"}}).json().as_array().empty());
    BOOST_TEST(post(s.port, "/assistants/count", json::object{}).json().as_int64() == 1);

    // By id and by graph id.
    BOOST_TEST(get(s.port, "/assistants/" + aid).json().at("graph_id").as_string() == "chat");
    BOOST_TEST(get(s.port, "/assistants/chat").json().at("assistant_id").as_string() == aid);
    auto graph = get(s.port, "/assistants/chat/graph").json();
    std::vector<std::string> ids;
    for (const auto& n : graph.at("nodes").as_array()) ids.push_back(std::string(n.at("id").as_string()));
    BOOST_TEST(ids == (std::vector<std::string>{"__start__", "work", "ask", "__end__"}), boost::test_tools::per_element());
    BOOST_TEST(graph.at("edges").as_array().size() == 3u);
    auto dot = get(s.port, "/assistants/chat/graph?format=dot");
    BOOST_TEST(dot.status == 200u);
    BOOST_TEST(dot.body.find("digraph") != std::string::npos);
    auto schemas = get(s.port, "/assistants/chat/schemas").json();
    BOOST_TEST(schemas.at("state_schema").at("properties").as_object().contains("question"));

    auto missing = get(s.port, "/assistants/nope");
    BOOST_TEST(missing.status == 404u);
    BOOST_TEST(missing.detail().find("'nope'") != std::string::npos);
    BOOST_TEST(get(s.port, "/assistants/chat/graph?format=svgz").status == 422u);
    BOOST_TEST(get(s.port, "/nowhere").status == 404u);
}

namespace io_schema_test {
// A graph with a nested struct in its state, served twice: "profiles" (callers send state
// fields) and "greeter" (an input and an output schema apart from the state).
struct profile {
    std::string name;
    std::string city = "Berlin";
    int age = 0;
};
BOOST_DESCRIBE_STRUCT(profile, (), (name, city, age))
struct prof_state {
    profile owner;
    std::string greeting;
};
BOOST_DESCRIBE_STRUCT(prof_state, (), (owner, greeting))
struct greet_in {
    std::string name;
    std::optional<std::string> city;
};
BOOST_DESCRIBE_STRUCT(greet_in, (), (name, city))
struct greet_out {
    std::string greeting;
    std::string city;
    std::vector<std::string> path;
};
BOOST_DESCRIBE_STRUCT(greet_out, (), (greeting, city, path))

inline sg::state_graph<prof_state> greeter() {
    sg::state_graph<prof_state> g("greeter");
    g.add_node("greet", [](const prof_state& s) {
        return sg::update<prof_state>{}.set<&prof_state::greeting>("hello " + s.owner.name + " from " + s.owner.city);
    });
    g.add_edge(sg::START, "greet").add_edge("greet", sg::END);
    return g;
}
inline std::vector<srv::assistant_spec> assistants() {
    auto plain = greeter().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    auto g = greeter();
    g.input_schema<greet_in>([](const greet_in& in, const prof_state& now) {
        auto o = now.owner;
        if (!in.name.empty()) o.name = in.name;
        if (in.city) o.city = *in.city;
        return sg::update<prof_state>{}.set<&prof_state::owner>(std::move(o));
    });
    g.output_schema<greet_out>([](const prof_state& s, const sg::output_context& ctx) {
        return greet_out{s.greeting, s.owner.city, ctx.path};
    });
    auto schemas = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    std::vector<srv::assistant_spec> out;
    out.push_back(srv::make_assistant("profiles", plain));
    out.push_back(srv::make_assistant("greeter", schemas));
    return out;
}
} // namespace io_schema_test

BOOST_AUTO_TEST_CASE(input_and_output_schemas) {
    running_server s(test_options(), io_schema_test::assistants());
    auto schemas = get(s.port, "/assistants/greeter/schemas").json();
    const auto& in = schemas.at("input_schema");
    BOOST_TEST(in.at("title").as_string() == "greet_in");
    BOOST_TEST(json::serialize(in.at("properties").at("name")) == R"({"type":"string"})");
    BOOST_TEST(!in.as_object().contains("required"));
    BOOST_TEST(schemas.at("output_schema").at("title").as_string() == "greet_out");
    BOOST_TEST(json::serialize(schemas.at("output_schema").at("required")) == R"(["greeting","city","path"])");
    BOOST_TEST(schemas.at("state_schema").at("properties").at("owner").at("title").as_string() == "profile");
    BOOST_TEST(get(s.port, "/assistants/profiles/schemas").json().at("input_schema").at("title").as_string() == "profiles");

    // A run takes the input schema and answers with the output schema (wait and stream).
    auto tid = new_thread(s.port);
    auto done = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "greeter"}, {"input", json::object{{"name", "Ann"}}}});
    BOOST_TEST(done.status == 200u);
    BOOST_TEST(json::serialize(done.json()) == R"({"greeting":"hello Ann from Berlin","city":"Berlin","path":["greet"]})");
    auto streamed = post(s.port, "/threads/" + tid + "/runs/stream",
                         json::object{{"assistant_id", "greeter"}, {"input", json::object{{"city", "Paris"}}}, {"stream_mode", "values"}});
    auto events = parse_sse(streamed.body);
    BOOST_TEST_REQUIRE(events.size() >= 2u);
    BOOST_TEST(json::serialize(events.back().data) == R"({"greeting":"hello Ann from Paris","city":"Paris","path":["greet"]})");
    // The thread's state is the whole state.
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state").json().at("values").at("owner").at("name").as_string() == "Ann");
    // A member the input schema lacks: 422 naming it and the struct, before anything is queued.
    auto bad = post(s.port, "/threads/" + tid + "/runs", json::object{{"assistant_id", "greeter"}, {"input", json::object{{"nmae", "x"}}}});
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("'nmae' is not a member of greet_in (did you mean 'name'?)") != std::string::npos, bad.detail());
}

BOOST_AUTO_TEST_CASE(partial_nested_input_and_update_state) {
    // A JSON object for a nested struct sets the members it names; the others keep the
    // thread's values (LangGraph would replace the dict channel whole: a deliberate difference).
    running_server s(test_options(), io_schema_test::assistants());
    auto tid = new_thread(s.port);
    auto path = "/threads/" + tid + "/runs/wait";
    auto first = post(s.port, path, json::object{{"assistant_id", "profiles"}, {"input", json::parse(R"({"owner": {"name": "Ann", "age": 30}})")}});
    BOOST_TEST(first.json().at("owner").at("city").as_string() == "Berlin"); // a new thread: the default
    auto second = post(s.port, path, json::object{{"assistant_id", "profiles"}, {"input", json::parse(R"({"owner": {"city": "Paris"}})")}});
    BOOST_TEST(json::serialize(second.json().at("owner")) == R"({"name":"Ann","city":"Paris","age":30})");
    BOOST_TEST(second.json().at("greeting").as_string() == "hello Ann from Paris");
    auto unknown = post(s.port, path, json::object{{"assistant_id", "profiles"}, {"input", json::parse(R"({"owner": {"town": "Rome"}})")}});
    BOOST_TEST(unknown.status == 422u);
    BOOST_TEST(unknown.detail().find("input.owner: 'town' is not a member of profile") != std::string::npos, unknown.detail());

    // update_state over HTTP: the same rule.
    auto upd = post(s.port, "/threads/" + tid + "/state", json::object{{"values", json::parse(R"({"owner": {"age": 31}})")}});
    BOOST_TEST(upd.status == 200u);
    auto st = get(s.port, "/threads/" + tid + "/state").json();
    BOOST_TEST(json::serialize(st.at("values").at("owner")) == R"({"name":"Ann","city":"Paris","age":31})");
    auto bad = post(s.port, "/threads/" + tid + "/state", json::object{{"values", json::parse(R"({"owner": {"agee": 1}})")}});
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("'agee' is not a member of profile (did you mean 'age'?)") != std::string::npos, bad.detail());
}

BOOST_AUTO_TEST_CASE(per_run_breakpoints) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    auto path = "/threads/" + tid + "/runs/wait";
    auto stopped = post(s.port, path, json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}},
                                                   {"interrupt_before", json::array{"ask"}}});
    BOOST_TEST(stopped.status == 200u);
    BOOST_TEST(json::serialize(stopped.json().at("log")) == R"(["work"])");
    auto st = get(s.port, "/threads/" + tid + "/state").json();
    BOOST_TEST(json::serialize(st.at("next")) == R"(["ask"])");
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "interrupted");
    // Continuing (no input) with "*" after every node: ask runs, and the run stops after it.
    auto after = post(s.port, path, json::object{{"assistant_id", "chat"}, {"interrupt_after", "*"}});
    BOOST_TEST(json::serialize(after.json().at("log")) == R"(["work","ask"])");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state").json().at("next").as_array().empty());
    auto bad = post(s.port, path, json::object{{"assistant_id", "chat"}, {"interrupt_before", json::array{"asx"}}});
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("'asx' is not a node of graph 'chat'") != std::string::npos, bad.detail());
}

// Issue 27: LangGraph's Command as a run's input over HTTP: resume with an update, goto with an
// update (an input checkpoint, then the target), goto as a list, the update as [field, value]
// pairs; mistakes are 422s naming the field or node, before anything is queued.
BOOST_AUTO_TEST_CASE(command_goto_update_resume) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    auto path = "/threads/" + tid + "/runs/wait";
    auto asked = post(s.port, path, json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "ask"}}}});
    BOOST_TEST(asked.status == 200u);
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "interrupted");
    // resume + update: the update is in the state before ask finishes; ask's answer is the resume.
    auto resumed = post(s.port, path,
                        json::object{{"assistant_id", "chat"},
                                     {"command", json::object{{"resume", "yes"}, {"update", json::object{{"log", json::array{"u"}}}}}}});
    BOOST_TEST(resumed.status == 200u);
    BOOST_TEST(json::serialize(resumed.json().at("log")) == R"(["work","u","ask"])");
    BOOST_TEST(resumed.json().at("answer").as_string() == "yes");
    const auto history_before = post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array().size();
    // goto + update on the finished thread: an input checkpoint with the update, then ask alone.
    json::array pairs{json::array{"question", "jump"}, json::array{"log", json::array{"g"}}};
    json::object jump_cmd{{"goto", "ask"}, {"update", pairs}};
    auto jumped = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", jump_cmd}});
    BOOST_TEST(jumped.status == 200u);
    BOOST_TEST(json::serialize(jumped.json().at("log")) == R"(["work","u","ask","g","ask"])");
    BOOST_TEST(jumped.json().at("question").as_string() == "jump");
    auto history = post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array();
    BOOST_TEST(history.size() == history_before + 2);
    BOOST_TEST(history.at(1).at("metadata").at("source").as_string() == "input");
    BOOST_TEST(json::serialize(history.at(1).at("next")) == R"(["ask"])");
    // goto a list: both nodes in one step.
    auto both = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", json::object{{"goto", json::array{"work", "ask"}}}}});
    BOOST_TEST(both.status == 200u);
    BOOST_TEST(both.json().at("log").as_array().size() == 8u); // + ask, work (step 1), then work's ask
    // Mistakes: 422 naming what is wrong; nothing queued, the thread unchanged.
    const auto n = post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array().size();
    auto bad_node = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", json::object{{"goto", "asx"}}}});
    BOOST_TEST(bad_node.status == 422u);
    BOOST_TEST(bad_node.detail().find("'asx' is not a node of graph 'chat'") != std::string::npos, bad_node.detail());
    auto bad_field = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", json::object{{"update", json::object{{"qestion", "x"}}}}}});
    BOOST_TEST(bad_field.status == 422u);
    BOOST_TEST(bad_field.detail().find("qestion") != std::string::npos, bad_field.detail());
    auto empty = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", json::object{}}});
    BOOST_TEST(empty.status == 422u);
    auto both_kinds = post(s.port, path, json::object{{"assistant_id", "chat"}, {"input", json::object{}}, {"command", json::object{{"goto", "ask"}}}});
    BOOST_TEST(both_kinds.status == 422u);
    auto unknown = post(s.port, path, json::object{{"assistant_id", "chat"}, {"command", json::object{{"gotoo", "ask"}}}});
    BOOST_TEST(unknown.status == 422u);
    BOOST_TEST(unknown.detail().find("command.gotoo") != std::string::npos, unknown.detail());
    BOOST_TEST(post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array().size() == n);
}

// Issue 27: bulk POST /runs/cancel (a thread's runs, by ids, by status) and POST /threads with
// supersteps (the history written before the thread is handed out).
BOOST_AUTO_TEST_CASE(bulk_cancel_and_supersteps) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    json::object slow{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}};
    json::object queued{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"multitask_strategy", "enqueue"}};
    std::string running(post(s.port, "/threads/" + tid + "/runs", slow).json().at("run_id").as_string());
    std::string pending(post(s.port, "/threads/" + tid + "/runs", queued).json().at("run_id").as_string());
    // Mistakes first: nothing is cancelled by them.
    BOOST_TEST(post(s.port, "/runs/cancel", json::object{}).status == 422u);
    BOOST_TEST(post(s.port, "/runs/cancel", json::object{{"status", "sleeping"}}).status == 422u);
    BOOST_TEST(post(s.port, "/runs/cancel", json::object{{"thread_id", tid}, {"action", "undo"}}).status == 422u);
    auto other = post(s.port, "/runs/cancel", json::object{{"run_ids", json::array{"0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f60"}}});
    BOOST_TEST(other.status == 404u);
    // The thread's runs, pending and running, are all cancelled.
    BOOST_TEST(post(s.port, "/runs/cancel", json::object{{"thread_id", tid}}).status == 204u);
    for (const auto& id : {running, pending}) {
        std::string st;
        for (int i = 0; i < 100 && st != "interrupted"; ++i) {
            st = std::string(get(s.port, "/threads/" + tid + "/runs/" + id).json().at("status").as_string());
            if (st != "interrupted") std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        BOOST_TEST(st == "interrupted", id);
    }
    // By id: only the run named.
    std::string a(post(s.port, "/threads/" + tid + "/runs", slow).json().at("run_id").as_string());
    std::string b(post(s.port, "/threads/" + tid + "/runs", queued).json().at("run_id").as_string());
    BOOST_TEST(post(s.port, "/runs/cancel", json::object{{"run_ids", json::array{json::string(b)}}}).status == 204u);
    auto joined = get(s.port, "/threads/" + tid + "/runs/" + a + "/join");
    BOOST_TEST(joined.status == 200u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + a).json().at("status").as_string() == "success");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + b).json().at("status").as_string() == "interrupted");

    // supersteps: two updates, as nodes, make the thread's history before it is returned.
    json::array steps{json::object{{"updates", json::array{json::object{{"values", json::object{{"question", "seeded"}, {"log", json::array{"w"}}}},
                                                                        {"as_node", "work"}}}}},
                      json::object{{"updates", json::array{json::object{{"values", json::object{{"log", json::array{"a"}}}}, {"as_node", "ask"}}}}}};
    auto made = post(s.port, "/threads", json::object{{"metadata", json::object{{"graph_id", "chat"}}}, {"supersteps", steps}});
    BOOST_TEST_REQUIRE(made.status == 200u, made.body);
    std::string seeded(made.json().at("thread_id").as_string());
    auto state = get(s.port, "/threads/" + seeded + "/state").json();
    BOOST_TEST(json::serialize(state.at("values").at("log")) == R"(["w","a"])");
    BOOST_TEST(state.at("values").at("question").as_string() == "seeded");
    BOOST_TEST(state.at("next").as_array().empty()); // after ask: END
    BOOST_TEST(post(s.port, "/threads/" + seeded + "/history", json::object{}).json().as_array().size() == 2u);
    // A bad update: 422 naming it, and no thread made.
    json::array bad{json::object{{"updates", json::array{json::object{{"values", json::object{{"qestion", "x"}}}, {"as_node", "work"}}}}}};
    const auto before = post(s.port, "/threads/count", json::object{}).json().as_int64();
    auto refused = post(s.port, "/threads", json::object{{"metadata", json::object{{"graph_id", "chat"}}}, {"supersteps", bad}});
    BOOST_TEST(refused.status == 422u);
    BOOST_TEST(refused.detail().find("supersteps[0].updates[0].values") != std::string::npos, refused.detail());
    auto no_graph = post(s.port, "/threads", json::object{{"supersteps", steps}});
    BOOST_TEST(no_graph.status == 422u);
    BOOST_TEST(no_graph.detail().find("graph_id") != std::string::npos, no_graph.detail());
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == before);
}

// Issue 27: a run's `context` and `config.configurable` reach its nodes (LangGraph's runtime
// context and configurable), each merged over its assistant's; with a typed context
// (`context_of<T>()`) the nodes read a `T`, a context that does not fit is a 422 naming the
// member (run and assistant alike), and the assistant's schemas report it.
namespace per_run_context {
struct note_state {
    std::string seen;
};
BOOST_DESCRIBE_STRUCT(note_state, (), (seen))
struct model_context {
    std::string model = "default-model";
    int max_tokens = 100;
};
BOOST_DESCRIBE_STRUCT(model_context, (), (model, max_tokens))

net::awaitable<sg::update<note_state>> read_served(const note_state&, sg::context& ctx) {
    const auto& rc = ctx.runtime<srv::served_context>();
    co_return sg::update<note_state>{}.set<&note_state::seen>(json::serialize(rc.context) + " " + json::serialize(rc.configurable));
}
net::awaitable<sg::update<note_state>> read_typed(const note_state&, sg::context& ctx) {
    const auto& m = ctx.runtime<model_context>();
    co_return sg::update<note_state>{}.set<&note_state::seen>(m.model + "/" + std::to_string(m.max_tokens));
}
template <class F>
sg::compiled_graph<note_state> one_node(F fn) {
    sg::state_graph<note_state> g;
    g.add_node("read", std::move(fn));
    g.add_edge(sg::START, "read").add_edge("read", sg::END);
    return g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
}
} // namespace per_run_context

BOOST_AUTO_TEST_CASE(per_run_context_and_configurable) {
    using namespace per_run_context;
    std::vector<srv::assistant_spec> more;
    more.push_back(srv::make_assistant("served", one_node(read_served)));
    srv::assistant_options typed;
    typed.context = srv::context_of<model_context>();
    more.push_back(srv::make_assistant("typed", one_node(read_typed), typed));
    running_server s(test_options(), std::move(more));
    auto seen = [&](const json::object& body) {
        auto tid = new_thread(s.port);
        auto r = post(s.port, "/threads/" + tid + "/runs/wait", body);
        BOOST_TEST_REQUIRE(r.status == 200u, r.body);
        return std::string(r.json().at("seen").as_string());
    };
    // The served graph: context and configurable as JSON; the checkpoint address is not shown.
    BOOST_TEST(seen({{"assistant_id", "served"}, {"input", json::object{}}}) == "{} {}");
    BOOST_TEST(seen({{"assistant_id", "served"},
                     {"input", json::object{}},
                     {"context", json::object{{"user_id", "u1"}}},
                     {"config", json::object{{"configurable", json::object{{"tone", "warm"}, {"thread_id", "x"}}}}}}) ==
               R"({"user_id":"u1"} {"tone":"warm"})");
    // Over an assistant's own: the run's keys win, the assistant's others stay.
    auto made = post(s.port, "/assistants",
                     json::object{{"graph_id", "served"},
                                  {"context", json::object{{"user_id", "a"}, {"lang", "fr"}}},
                                  {"config", json::object{{"configurable", json::object{{"tone", "dry"}, {"depth", 2}}}}}});
    BOOST_TEST_REQUIRE(made.status == 200u, made.body);
    const std::string aid(made.json().at("assistant_id").as_string());
    BOOST_TEST(seen({{"assistant_id", aid},
                     {"input", json::object{}},
                     {"context", json::object{{"user_id", "u2"}}},
                     {"config", json::object{{"configurable", json::object{{"tone", "warm"}}}}}}) ==
               R"({"user_id":"u2","lang":"fr"} {"tone":"warm","depth":2})");
    BOOST_TEST(post(s.port, "/threads/" + new_thread(s.port) + "/runs/wait",
                    json::object{{"assistant_id", "served"}, {"input", json::object{}}, {"context", "not an object"}})
                   .status == 422u);

    // The typed context: members left out keep their defaults.
    BOOST_TEST(seen({{"assistant_id", "typed"}, {"input", json::object{}}}) == "default-model/100");
    BOOST_TEST(seen({{"assistant_id", "typed"}, {"input", json::object{}}, {"context", json::object{{"model", "m2"}}}}) == "m2/100");
    auto bad = post(s.port, "/threads/" + new_thread(s.port) + "/runs/wait",
                    json::object{{"assistant_id", "typed"}, {"input", json::object{}}, {"context", json::object{{"modle", "m2"}}}});
    BOOST_TEST(bad.status == 422u, bad.body);
    BOOST_TEST(bad.body.find("modle") != std::string::npos, bad.body);
    bad = post(s.port, "/threads/" + new_thread(s.port) + "/runs/wait",
               json::object{{"assistant_id", "typed"}, {"input", json::object{}}, {"context", json::object{{"max_tokens", "many"}}}});
    BOOST_TEST(bad.status == 422u, bad.body);
    BOOST_TEST(bad.body.find("max_tokens") != std::string::npos, bad.body);
    bad = post(s.port, "/assistants", json::object{{"graph_id", "typed"}, {"context", json::object{{"temperature", 1}}}});
    BOOST_TEST(bad.status == 422u, bad.body);
    BOOST_TEST(bad.body.find("temperature") != std::string::npos, bad.body);
    made = post(s.port, "/assistants", json::object{{"graph_id", "typed"}, {"context", json::object{{"max_tokens", 7}}}});
    BOOST_TEST_REQUIRE(made.status == 200u, made.body);
    BOOST_TEST(seen({{"assistant_id", made.json().at("assistant_id")}, {"input", json::object{}}, {"context", json::object{{"model", "m3"}}}}) ==
               "m3/7");
    auto schemas = get(s.port, "/assistants/typed/schemas").json();
    BOOST_TEST(schemas.at("context_schema").at("properties").as_object().contains("max_tokens"));
    BOOST_TEST(get(s.port, "/assistants/served/schemas").json().at("context_schema").is_null());
}

// Issue 27: stream mode "events" (LangChain's astream_events v2, as LangGraph's server sends it):
// the graph's on_chain_start/end around each node's, the node's output and input, the graph's
// on_chain_stream per update (sent as the node's update is, just before its on_chain_end) and a
// model's tokens as on_chat_model_stream; the task and message
// events the engine makes for it are not streamed as modes of their own unless asked for.
namespace events_mode {
struct talk_state {
    std::string said;
};
BOOST_DESCRIBE_STRUCT(talk_state, (), (said))
net::awaitable<sg::update<talk_state>> speak(const talk_state&, sg::context& ctx) {
    for (const char* token : {"Hel", "lo"})
        ctx.write_message(json::object{{"type", "AIMessageChunk"}, {"content", token}, {"id", "m1"}});
    co_return sg::update<talk_state>{}.set<&talk_state::said>("Hello");
}
net::awaitable<sg::update<talk_state>> shout(const talk_state& s, sg::context&) {
    co_return sg::update<talk_state>{}.set<&talk_state::said>(s.said + "!");
}
} // namespace events_mode

BOOST_AUTO_TEST_CASE(stream_mode_events) {
    using namespace events_mode;
    sg::state_graph<talk_state> g;
    g.add_node("speak", speak).add_node("shout", shout);
    g.add_edge(sg::START, "speak").add_edge("speak", "shout").add_edge("shout", sg::END);
    std::vector<srv::assistant_spec> more;
    more.push_back(srv::make_assistant("talk", g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()})));
    running_server s(test_options(), std::move(more));
    auto tid = new_thread(s.port);
    auto r = post(s.port, "/threads/" + tid + "/runs/stream",
                  json::object{{"assistant_id", "talk"}, {"input", json::object{{"said", "..."}}}, {"stream_mode", "events"}});
    BOOST_TEST_REQUIRE(r.status == 200u, r.body);
    auto events = parse_sse(r.body);
    BOOST_TEST_REQUIRE(events.size() >= 2u);
    BOOST_TEST(events.front().event == "metadata");
    const std::string run_id(events.front().data.at("run_id").as_string());
    std::vector<std::string> seen; // "<event> <name>"
    for (std::size_t i = 1; i < events.size(); ++i) {
        BOOST_TEST_REQUIRE(events[i].event == "events"); // no tasks or messages events: not asked for
        const auto& d = events[i].data.as_object();
        seen.push_back(std::string(d.at("event").as_string()) + " " + std::string(d.at("name").as_string()));
        for (const char* k : {"run_id", "tags", "metadata", "data", "parent_ids"}) BOOST_TEST(d.contains(k), k);
    }
    const std::vector<std::string> want{"on_chain_start LangGraph",  "on_chain_start speak", "on_chat_model_stream chat_model",
                                        "on_chat_model_stream chat_model", "on_chain_stream LangGraph", "on_chain_end speak",
                                        "on_chain_start shout",      "on_chain_stream LangGraph", "on_chain_end shout",
                                        "on_chain_end LangGraph"};
    BOOST_TEST(seen == want, boost::test_tools::per_element());
    // The graph's records carry the run's id and the input, then the final values.
    const auto& first = events[1].data.as_object();
    BOOST_TEST(first.at("run_id").as_string() == run_id);
    BOOST_TEST(first.at("data").at("input").at("said") == "...");
    BOOST_TEST(events.back().data.at("data").at("output").at("said") == "Hello!");
    // A node's: its task id, step tag, langgraph metadata, the run as parent; its output and input.
    const auto& start = events[2].data.as_object();
    BOOST_TEST(start.at("tags").as_array().at(0) == "graph:step:1");
    BOOST_TEST(start.at("metadata").at("langgraph_node") == "speak");
    BOOST_TEST(start.at("metadata").at("langgraph_step").as_int64() == 1);
    BOOST_TEST(start.at("parent_ids").as_array().at(0).as_string() == run_id);
    BOOST_TEST(start.at("data").at("input").at("said") == "...");
    const auto& token = events[3].data.as_object();
    BOOST_TEST(token.at("data").at("chunk").at("content") == "Hel");
    BOOST_TEST(token.at("parent_ids").as_array().size() == 2u); // the run, then the task
    const auto& end = events[6].data.as_object();
    BOOST_TEST(end.at("run_id") == start.at("run_id"));
    BOOST_TEST(end.at("data").at("output").at("said") == "Hello");
    BOOST_TEST(end.at("data").at("input").at("said") == "...");
    BOOST_TEST(events[5].data.at("data").at("chunk").at("speak").at("said") == "Hello");
    // Asked for beside another mode, each keeps its own events.
    r = post(s.port, "/threads/" + tid + "/runs/stream",
             json::object{{"assistant_id", "talk"}, {"input", json::object{{"said", "?"}}}, {"stream_mode", json::array{"events", "tasks"}}});
    std::size_t tasks = 0, lc = 0;
    for (const auto& e : parse_sse(r.body)) {
        tasks += e.event == "tasks";
        lc += e.event == "events";
    }
    BOOST_TEST(tasks == 4u); // two starts, two results
    BOOST_TEST(lc == 10u);
}

// Issue 27: stream mode "messages" is LangGraph's legacy form: messages/metadata when a message
// starts, then messages/partial with the message accumulated so far (a message, not a chunk:
// type "ai", tool-call chunks merged by index and parsed), messages/complete for a whole message;
// "messages-tuple" keeps its [chunk, metadata] events named "messages". Both may be asked at once.
namespace legacy_messages {
net::awaitable<sg::update<events_mode::talk_state>> call_tool(const events_mode::talk_state&, sg::context& ctx) {
    // A tool call in two chunks of one index, then a whole message.
    json::array first{json::object{{"type", "tool_call_chunk"}, {"index", 0}, {"id", "c1"}, {"name", "lookup"}, {"args", "{\"city\""}}};
    json::array second{json::object{{"type", "tool_call_chunk"}, {"index", 0}, {"args", ": \"Palma\"}"}}};
    ctx.write_message(json::object{{"type", "AIMessageChunk"}, {"content", ""}, {"id", "m2"}, {"tool_call_chunks", first}});
    ctx.write_message(json::object{{"type", "AIMessageChunk"}, {"content", ""}, {"id", "m2"}, {"tool_call_chunks", second}});
    ctx.write_message(json::object{{"type", "tool"}, {"content", "sunny"}, {"id", "m3"}, {"tool_call_id", "c1"}});
    co_return sg::update<events_mode::talk_state>{};
}
} // namespace legacy_messages

BOOST_AUTO_TEST_CASE(stream_mode_messages_legacy) {
    using namespace events_mode;
    sg::state_graph<talk_state> g;
    g.add_node("speak", speak).add_node("call_tool", legacy_messages::call_tool);
    g.add_edge(sg::START, "speak").add_edge("speak", "call_tool").add_edge("call_tool", sg::END);
    std::vector<srv::assistant_spec> more;
    more.push_back(srv::make_assistant("talk", g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()})));
    running_server s(test_options(), std::move(more));
    auto tid = new_thread(s.port);
    auto r = post(s.port, "/threads/" + tid + "/runs/stream",
                  json::object{{"assistant_id", "talk"}, {"input", json::object{{"said", "..."}}}, {"stream_mode", "messages"}});
    BOOST_TEST_REQUIRE(r.status == 200u, r.body);
    std::vector<std::string> seen;
    std::vector<json::value> data;
    for (const auto& e : parse_sse(r.body)) {
        if (e.event == "metadata") continue;
        seen.push_back(e.event);
        data.push_back(e.data);
    }
    const std::vector<std::string> want{"messages/metadata", "messages/partial",  "messages/partial", "messages/metadata",
                                        "messages/partial",  "messages/partial",  "messages/metadata", "messages/complete"};
    BOOST_TEST(seen == want, boost::test_tools::per_element());
    BOOST_TEST_REQUIRE(data.size() == want.size());
    BOOST_TEST(data[0].at("m1").at("metadata").at("langgraph_node") == "speak");
    BOOST_TEST(data[1].at(0).at("content") == "Hel");
    BOOST_TEST(data[2].at(0).at("content") == "Hello");
    BOOST_TEST(data[2].at(0).at("type") == "ai");
    BOOST_TEST(data[2].at(0).at("id") == "m1");
    const auto& call = data[5].at(0).at("tool_calls");
    BOOST_TEST_REQUIRE(call.as_array().size() == 1u, json::serialize(data[5]));
    BOOST_TEST(call.at(0).at("name") == "lookup");
    BOOST_TEST(call.at(0).at("id") == "c1");
    BOOST_TEST(call.at(0).at("args").at("city") == "Palma");
    BOOST_TEST(data[4].at(0).at("tool_calls").as_array().empty()); // '{"city"' does not parse yet
    BOOST_TEST(data[4].at(0).at("invalid_tool_calls").at(0).at("args") == "{\"city\"");
    BOOST_TEST(data[7].at(0).at("type") == "tool");
    BOOST_TEST(data[7].at(0).at("content") == "sunny");
    // Beside messages-tuple: each keeps its own events.
    r = post(s.port, "/threads/" + tid + "/runs/stream",
             json::object{{"assistant_id", "talk"}, {"input", json::object{{"said", "?"}}}, {"stream_mode", json::array{"messages", "messages-tuple"}}});
    std::size_t tuples = 0, partials = 0;
    for (const auto& e : parse_sse(r.body)) {
        tuples += e.event == "messages";
        partials += e.event == "messages/partial";
    }
    BOOST_TEST(tuples == 5u);
    BOOST_TEST(partials == 4u);
}

// PATCH /threads/{id}/state (the SDKs' patchState): the metadata of the thread's newest
// checkpoint, or of the one the body names, takes the keys given; its values, the other
// checkpoints and the thread's own record (its metadata) stay as they were.
BOOST_AUTO_TEST_CASE(patch_state_metadata) {
    running_server s(test_options());
    auto tid = new_thread(s.port, json::object{{"metadata", json::object{{"user", "ann"}}}});
    const std::string state = "/threads/" + tid + "/state", history = "/threads/" + tid + "/history";
    auto patch = [&](const json::object& body) { return call(s.port, http::verb::patch, state, json::serialize(body)); };
    auto names = [](const reply& r, const std::string& what) {
        BOOST_TEST(r.detail().find(what) != std::string::npos, "detail '" << r.detail() << "' should name " << what);
    };

    // No checkpoint yet: nothing to patch.
    auto early = patch(json::object{{"metadata", json::object{{"tag", "x"}}}});
    BOOST_TEST(early.status == 409u);
    names(early, tid);
    names(early, "no checkpoint");

    BOOST_TEST_REQUIRE(post(s.port, "/threads/" + tid + "/runs/wait",
                            json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}}).status == 200u);
    const auto before = get(s.port, state).json();
    const auto history_before = post(s.port, history, json::object{{"limit", 100}}).json().as_array();
    BOOST_TEST_REQUIRE(history_before.size() >= 2u);
    const std::string newest(before.at("checkpoint").at("checkpoint_id").as_string());

    // The newest checkpoint's metadata takes the keys; a second patch merges into the first.
    auto patched = patch(json::object{{"metadata", json::object{{"tag", "reviewed"}, {"score", 3}}}});
    BOOST_TEST_REQUIRE(patched.status == 200u, patched.body);
    BOOST_TEST(patched.json().at("checkpoint").at("checkpoint_id").as_string() == newest);
    BOOST_TEST(patch(json::object{{"metadata", json::object{{"score", 4}}}}).status == 200u);
    auto want = before.at("metadata").as_object();
    want["tag"] = "reviewed";
    want["score"] = 4;
    const auto after = get(s.port, state).json();
    BOOST_TEST(after.at("checkpoint").at("checkpoint_id").as_string() == newest);
    BOOST_TEST(after.at("metadata") == json::value(want), json::serialize(after.at("metadata")));
    BOOST_TEST(after.at("values") == before.at("values"), json::serialize(after.at("values")));
    BOOST_TEST(json::serialize(after.at("values").at("log")) == R"(["work","ask"])");
    BOOST_TEST(after.at("next") == before.at("next"));
    BOOST_TEST(after.at("parent_checkpoint") == before.at("parent_checkpoint"));

    // History: as many checkpoints, the same values; only the newest has the keys.
    auto hist = post(s.port, history, json::object{{"limit", 100}}).json().as_array();
    BOOST_TEST_REQUIRE(hist.size() == history_before.size());
    for (std::size_t i = 0; i < hist.size(); ++i) {
        BOOST_TEST(hist[i].at("values") == history_before[i].at("values"), i);
        BOOST_TEST(hist[i].at("checkpoint") == history_before[i].at("checkpoint"), i);
        if (i > 0) BOOST_TEST(hist[i].at("metadata") == history_before[i].at("metadata"), i);
    }
    BOOST_TEST(hist[0].at("metadata") == json::value(want));
    auto tagged = post(s.port, history, json::object{{"metadata", json::object{{"tag", "reviewed"}}}}).json().as_array();
    BOOST_TEST_REQUIRE(tagged.size() == 1u);
    BOOST_TEST(tagged[0].at("checkpoint").at("checkpoint_id").as_string() == newest);

    // An older checkpoint, named in each of LangGraph's spellings; the newest is left alone.
    const std::string older(hist[1].at("checkpoint").at("checkpoint_id").as_string());
    for (const auto& body : {json::object{{"metadata", json::object{{"a", 1}}}, {"checkpoint_id", older}},
                             json::object{{"metadata", json::object{{"b", 2}}}, {"checkpoint", json::object{{"checkpoint_id", older}}}},
                             json::object{{"metadata", json::object{{"c", 3}}},
                                          {"config", json::object{{"configurable", json::object{{"checkpoint_id", older}}}}}}}) {
        auto r = patch(body);
        BOOST_TEST(r.status == 200u, r.body);
        if (r.status == 200u) BOOST_TEST(r.json().at("checkpoint").at("checkpoint_id").as_string() == older);
    }
    auto at_older = get(s.port, state + "/" + older).json();
    auto want_older = history_before[1].at("metadata").as_object();
    want_older["a"] = 1;
    want_older["b"] = 2;
    want_older["c"] = 3;
    BOOST_TEST(at_older.at("metadata") == json::value(want_older), json::serialize(at_older.at("metadata")));
    BOOST_TEST(at_older.at("values") == history_before[1].at("values"));
    BOOST_TEST(get(s.port, state).json().at("metadata") == json::value(want));

    // The thread's own record keeps its metadata.
    auto record = get(s.port, "/threads/" + tid).json().at("metadata").as_object();
    BOOST_TEST(record.at("user").as_string() == "ann");
    BOOST_TEST(!record.contains("tag"));

    // Mistakes: each named, nothing patched.
    auto unknown = call(s.port, http::verb::patch, "/threads/0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f61/state", R"({"metadata":{"x":1}})");
    BOOST_TEST(unknown.status == 404u);
    names(unknown, "0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f61");
    for (const char* bad : {R"({"metadata":"tag"})", R"({"metadata":[1]})", R"({})", R"({"metadata":null})"}) {
        auto r = call(s.port, http::verb::patch, state, bad);
        BOOST_TEST(r.status == 422u, bad);
        names(r, "'metadata'");
    }
    auto own = patch(json::object{{"metadata", json::object{{"step", 99}}}});
    BOOST_TEST(own.status == 422u);
    names(own, "'metadata.step'");
    auto bad_id = patch(json::object{{"metadata", json::object{{"x", 1}}}, {"checkpoint_id", 5}});
    BOOST_TEST(bad_id.status == 422u);
    names(bad_id, "'checkpoint_id'");
    auto missing = patch(json::object{{"metadata", json::object{{"x", 1}}}, {"checkpoint", json::object{{"checkpoint_id", "0000000nope"}}}});
    BOOST_TEST(missing.status == 404u);
    names(missing, "'0000000nope'");
    names(missing, tid);
    BOOST_TEST(get(s.port, state).json().at("metadata") == json::value(want));

    // A thread with a run in flight: 409, as POST .../state.
    std::string slow(post(s.port, "/threads/" + tid + "/runs",
                          json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}}).json().at("run_id").as_string());
    auto busy = patch(json::object{{"metadata", json::object{{"x", 1}}}});
    BOOST_TEST(busy.status == 409u);
    names(busy, tid);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + slow + "/join").status == 200u);
    BOOST_TEST(patch(json::object{{"metadata", json::object{{"x", 1}}}}).status == 200u);
}

// Issue 27: subgraph state from outside. GET .../state?subgraphs=true shows the state of a
// subgraph waiting at an interrupt (nested two deep: tasks[0].state.tasks[0].state), with its
// namespace; POST .../state with that checkpoint_ns updates the subgraph's state there, and the
// resume sees it. In process the same is `get_state(t, {.subgraphs = true})` and
// `json_update::ns` (tests/graph/test_json_graph.cpp reads the same graph shape in process).
BOOST_AUTO_TEST_CASE(subgraph_state_from_outside) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    std::vector<srv::assistant_spec> more{srv::make_assistant("deep", build_deep(saver))};
    running_server s(test_options(), std::move(more));
    auto tid = new_thread(s.port);
    auto r = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "deep"}, {"input", json::object{{"question", "ask"}}}});
    BOOST_TEST_REQUIRE(r.status == 200u, r.body);
    BOOST_TEST(r.json().as_object().contains("__interrupt__"));
    // Without subgraphs: no state in the task.
    auto plain = get(s.port, "/threads/" + tid + "/state").json();
    BOOST_TEST_REQUIRE(plain.at("tasks").as_array().size() == 1u);
    BOOST_TEST(plain.at("tasks").at(0).at("state").is_null());
    // With them: middle's state, and inside it inner's, waiting at ask.
    auto st = get(s.port, "/threads/" + tid + "/state?subgraphs=true").json();
    const auto& middle = st.at("tasks").at(0).at("state");
    BOOST_TEST_REQUIRE(middle.is_object(), json::serialize(st));
    const std::string middle_ns(middle.at("checkpoint").at("checkpoint_ns").as_string());
    BOOST_TEST(middle_ns.rfind("middle:", 0) == 0u, middle_ns);
    const auto& inner = middle.at("tasks").at(0).at("state");
    BOOST_TEST_REQUIRE(inner.is_object(), json::serialize(middle));
    const std::string inner_ns(inner.at("checkpoint").at("checkpoint_ns").as_string());
    BOOST_TEST(inner_ns.rfind(middle_ns + "|inner:", 0) == 0u, inner_ns);
    BOOST_TEST(inner.at("next").at(0) == "ask");
    BOOST_TEST(inner.at("values").at("question") == "ask");
    BOOST_TEST(inner.at("interrupts").as_array().size() == 1u);
    // POST .../state/checkpoint with subgraphs: the same, at that checkpoint.
    auto at = post(s.port, "/threads/" + tid + "/state/checkpoint",
                   json::object{{"checkpoint", json::object{{"checkpoint_id", st.at("checkpoint").at("checkpoint_id")}}}, {"subgraphs", true}});
    BOOST_TEST(at.json().at("tasks").at(0).at("state").at("checkpoint").at("checkpoint_ns").as_string() == middle_ns);

    // Update the inner subgraph's state by its namespace, as the node that ran last there (work).
    auto up = post(s.port, "/threads/" + tid + "/state",
                   json::object{{"values", json::object{{"log", json::array{"edited"}}}},
                                {"as_node", "work"},
                                {"checkpoint", json::object{{"checkpoint_ns", inner_ns}}}});
    BOOST_TEST_REQUIRE(up.status == 200u, up.body);
    BOOST_TEST(up.json().at("checkpoint").at("checkpoint_ns").as_string() == inner_ns);
    auto after = get(s.port, "/threads/" + tid + "/state?subgraphs=true").json();
    const auto& inner_after = after.at("tasks").at(0).at("state").at("tasks").at(0).at("state");
    BOOST_TEST(json::serialize(inner_after.at("values").at("log")) == R"(["work","edited"])");
    // As LangGraph: the update stands for work, so the thread continues into ask, which asks
    // again on the edited subgraph state; the resume then finishes it.
    auto again = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "deep"}});
    BOOST_TEST_REQUIRE(again.status == 200u, again.body);
    BOOST_TEST(again.json().as_object().contains("__interrupt__"), again.body);
    auto done = post(s.port, "/threads/" + tid + "/runs/wait",
                     json::object{{"assistant_id", "deep"}, {"command", json::object{{"resume", "yes"}}}});
    BOOST_TEST_REQUIRE(done.status == 200u, done.body);
    BOOST_TEST_REQUIRE(done.json().as_object().contains("log"), done.body);
    BOOST_TEST(done.json().at("answer") == "yes", done.body);
    const std::string log = json::serialize(done.json().at("log"));
    BOOST_TEST(log.find("\"edited\",\"ask\"") != std::string::npos, log);
    // A namespace that is not a subgraph's, and a field the subgraph does not have: 4xx naming them.
    auto bad_ns = post(s.port, "/threads/" + tid + "/state",
                       json::object{{"values", json::object{}}, {"checkpoint", json::object{{"checkpoint_ns", "nowhere:1"}}}});
    BOOST_TEST(bad_ns.status >= 400u);
    BOOST_TEST(bad_ns.body.find("nowhere") != std::string::npos, bad_ns.body);
    auto bad_field = post(s.port, "/threads/" + tid + "/state",
                          json::object{{"values", json::object{{"colour", 1}}}, {"as_node", "work"},
                                       {"checkpoint", json::object{{"checkpoint_ns", inner_ns}}}});
    BOOST_TEST(bad_field.status == 422u, bad_field.body);
    BOOST_TEST(bad_field.body.find("colour") != std::string::npos, bad_field.body);
}

// Issue 27: a run's durability (LangGraph's sync / async / exit): exit writes one checkpoint for
// the run, sync one per step; an unknown mode is a 422 naming the field.
BOOST_AUTO_TEST_CASE(per_run_durability) {
    running_server s(test_options());
    auto history_of = [&](const std::string& mode) {
        auto tid = new_thread(s.port);
        auto done = post(s.port, "/threads/" + tid + "/runs/wait",
                         json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"durability", mode}});
        BOOST_TEST(done.status == 200u, mode);
        BOOST_TEST(json::serialize(done.json().at("log")) == R"(["work","ask"])", mode);
        return post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array().size();
    };
    const auto sync = history_of("sync"), async = history_of("async"), exit = history_of("exit");
    BOOST_TEST(sync == 4u);  // input, start, work, ask
    BOOST_TEST(async == sync);
    BOOST_TEST(exit == 1u);  // the run's last checkpoint only
    // The deprecated boolean form, as the SDK's checkpointDuring sends it: false is exit.
    auto history_during = [&](bool during) {
        auto tid = new_thread(s.port);
        auto done = post(s.port, "/threads/" + tid + "/runs/wait",
                         json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"checkpoint_during", during}});
        BOOST_TEST(done.status == 200u);
        return post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array().size();
    };
    BOOST_TEST(history_during(false) == exit);
    BOOST_TEST(history_during(true) == sync);
    auto tid = new_thread(s.port);
    auto bad_during = post(s.port, "/threads/" + tid + "/runs/wait",
                           json::object{{"assistant_id", "chat"}, {"input", json::object{}}, {"checkpoint_during", "no"}});
    BOOST_TEST(bad_during.status == 422u);
    BOOST_TEST(bad_during.detail().find("checkpoint_during") != std::string::npos, bad_during.detail());
    auto bad = post(s.port, "/threads/" + tid + "/runs/wait",
                    json::object{{"assistant_id", "chat"}, {"input", json::object{}}, {"durability", "never"}});
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("durability") != std::string::npos, bad.detail());
}

// Issue 27: a run's webhook (LangGraph's `webhook`): when the run ends, the server POSTs it as
// JSON to the URL (its record, its final values, the error of a failed run), trying three times
// in all; a webhook that cannot be reached is logged and changes nothing of the run; a URL that
// cannot be called is a 422 naming the field.
namespace webhook_test {
/// An HTTP endpoint on loopback that keeps what is POSTed to it; the first `failures` answers are 500.
struct sink {
    net::io_context io;
    tcp::acceptor acceptor{io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0)};
    std::mutex m;
    std::condition_variable cv;
    std::vector<std::pair<std::string, json::value>> got; // target, body
    int failures = 0;
    std::thread thread;
    explicit sink(int fail_first = 0) : failures(fail_first) {
        net::co_spawn(io, serve(), net::detached);
        thread = std::thread([this] { io.run(); });
    }
    ~sink() {
        io.stop();
        thread.join();
    }
    unsigned short port() const { return acceptor.local_endpoint().port(); }
    net::awaitable<void> serve() {
        for (int i = 0; i < 20; ++i) {
            auto socket = co_await acceptor.async_accept(net::use_awaitable);
            boost::beast::flat_buffer buffer;
            http::request<http::string_body> req;
            co_await http::async_read(socket, buffer, req, net::use_awaitable);
            http::response<http::string_body> res;
            {
                std::lock_guard lock(m);
                res.result(failures-- > 0 ? http::status::internal_server_error : http::status::ok);
                got.emplace_back(std::string(req.target()), json::parse(req.body()));
            }
            res.prepare_payload();
            co_await http::async_write(socket, res, net::use_awaitable);
            cv.notify_all();
        }
    }
    /// Waits (10 s at most) until `n` requests came; what came.
    std::vector<std::pair<std::string, json::value>> wait_for(std::size_t n) {
        std::unique_lock lock(m);
        cv.wait_for(lock, std::chrono::seconds(10), [&] { return got.size() >= n; });
        return got;
    }
};
} // namespace webhook_test

BOOST_AUTO_TEST_CASE(run_webhook) {
    auto lines = std::make_shared<std::vector<std::string>>();
    auto lines_mutex = std::make_shared<std::mutex>();
    auto o = test_options();
    o.log = [lines, lines_mutex](std::string_view l) {
        std::lock_guard lock(*lines_mutex);
        lines->emplace_back(l);
    };
    running_server s(o);
    webhook_test::sink hook(1); // the first answer is a 500: the second attempt delivers it
    const std::string url = "http://127.0.0.1:" + std::to_string(hook.port()) + "/hooks/run?source=test";
    auto tid = new_thread(s.port);
    auto done = post(s.port, "/threads/" + tid + "/runs/wait",
                     json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"webhook", url}});
    BOOST_TEST_REQUIRE(done.status == 200u, done.body);
    auto got = hook.wait_for(2);
    BOOST_TEST_REQUIRE(got.size() == 2u);
    BOOST_TEST(got[0].second.at("run_id") == got[1].second.at("run_id")); // the same run, tried again after the 500
    BOOST_TEST(got[1].first == "/hooks/run?source=test");
    const auto& run = got[1].second;
    BOOST_TEST(run.at("thread_id").as_string() == tid);
    BOOST_TEST(run.at("status").as_string() == "success");
    BOOST_TEST(run.at("assistant_id").is_string());
    BOOST_TEST(run.at("run_id").is_string());
    BOOST_TEST(json::serialize(run.at("values").at("log")) == R"(["work","ask"])");
    BOOST_TEST(!run.as_object().contains("error"));
    BOOST_TEST(run.at("webhook_sent_at").is_string());
    // A failed run: its error.
    auto failed = post(s.port, "/threads/" + tid + "/runs/wait",
                       json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "fail"}}}, {"webhook", url}});
    BOOST_TEST(failed.status == 200u);
    got = hook.wait_for(3);
    BOOST_TEST_REQUIRE(got.size() == 3u);
    BOOST_TEST(got[2].second.at("status").as_string() == "error");
    BOOST_TEST(std::string(got[2].second.at("error").as_string()).find("work failed on purpose") != std::string::npos);
    // A URL that cannot be called: 422 naming the field, no run made.
    for (const json::value& bad : {json::value("ftp://127.0.0.1/x"), json::value("http:///x"), json::value("/relative"),
                                  json::value("http://127.0.0.1:99999/"), json::value(5)}) {
        auto r = post(s.port, "/threads/" + tid + "/runs/wait",
                      json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"webhook", bad}});
        BOOST_TEST(r.status == 422u, json::serialize(bad));
        BOOST_TEST(r.detail().find("webhook") != std::string::npos, r.detail());
    }
    // A webhook nobody answers: the run succeeds; the failure is logged with the run's id.
    unsigned short closed = 0;
    {
        net::io_context io;
        tcp::acceptor a(io, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
        closed = a.local_endpoint().port();
    }
    auto lost = post(s.port, "/threads/" + tid + "/runs/wait",
                     json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}},
                                  {"webhook", "http://127.0.0.1:" + std::to_string(closed) + "/"}});
    BOOST_TEST_REQUIRE(lost.status == 200u);
    BOOST_TEST(json::serialize(lost.json().at("log")).find("work") != std::string::npos);
    bool logged = false;
    for (int i = 0; i < 100 && !logged; ++i) { // the three attempts take about 2 s
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::lock_guard lock(*lines_mutex);
        for (const auto& l : *lines) logged = logged || (l.find("webhook") != std::string::npos && l.find("3 attempts") != std::string::npos);
    }
    BOOST_TEST(logged);
}

// Issue 24: a drain waits for the webhooks of runs that ended before it (within drain_timeout):
// a process stopped by SIGTERM right after a run ends still delivers its webhook.
BOOST_AUTO_TEST_CASE(drain_waits_for_webhooks) {
    struct undrain { // the drain flag is process-wide: the next tests run normally
        ~undrain() { stategraph::cancel_drain(); }
    } after;
    running_server s(test_options());
    webhook_test::sink hook(1); // a 500 first: the delivery comes on the second attempt, a second later
    const std::string url = "http://127.0.0.1:" + std::to_string(hook.port()) + "/hook";
    auto tid = new_thread(s.port);
    auto done = post(s.port, "/threads/" + tid + "/runs/wait",
                     json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"webhook", url}});
    BOOST_TEST_REQUIRE(done.status == 200u, done.body);
    std::promise<std::size_t> delivered_at_drain;
    net::post(s.io, [&] {
        s.server->drain([&] {
            std::lock_guard lock(hook.m);
            delivered_at_drain.set_value(hook.got.size());
        });
    });
    auto f = delivered_at_drain.get_future();
    BOOST_TEST_REQUIRE((f.wait_for(std::chrono::seconds(10)) == std::future_status::ready));
    BOOST_TEST(f.get() == 2u); // the 500, then the delivery: both before the drain ended
}

// Issues 24 and 27: assistants made over the API live in the run store (versions, latest, search,
// runs through them, another key sees nothing of them), and survive a restart.
BOOST_AUTO_TEST_CASE(assistants_created_over_the_api) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto o = test_options();
    o.api_keys = {"key-one", "key-two"};
    o.runs = srv::open_sqlite_run_store(":memory:"); // shared by both servers below
    const std::map<std::string, std::string> one{{"x-api-key", "key-one"}}, two{{"x-api-key", "key-two"}};
    std::string id;
    {
        running_server s(o, {}, saver);
        json::object body{{"graph_id", "chat"}, {"name", "strict"}, {"config", json::object{{"recursion_limit", 5}}},
                          {"metadata", json::object{{"team", "a"}}}};
        auto made = post(s.port, "/assistants", body, one);
        BOOST_TEST_REQUIRE(made.status == 200u, made.body);
        id = std::string(made.json().at("assistant_id").as_string());
        BOOST_TEST(made.json().at("version").as_int64() == 1);
        BOOST_TEST(made.json().at("graph_id").as_string() == "chat");
        BOOST_TEST(get(s.port, "/assistants/" + id, one).json().at("name").as_string() == "strict");
        BOOST_TEST(get(s.port, "/assistants/" + id, two).status == 404u); // another key's
        auto hits = post(s.port, "/assistants/search", json::object{{"metadata", json::object{{"team", "a"}}}}, one).json().as_array();
        BOOST_TEST_REQUIRE(hits.size() == 1u);
        BOOST_TEST(hits[0].at("assistant_id").as_string() == id);
        BOOST_TEST(post(s.port, "/assistants/search", json::object{{"metadata", json::object{{"team", "a"}}}}, two).json().as_array().empty());
        // A run through it: recorded with its id, runs the chat graph.
        auto tid = std::string(post(s.port, "/threads", json::object{}, one).json().at("thread_id").as_string());
        auto done = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", id}, {"input", json::object{{"question", "hi"}}}}, one);
        BOOST_TEST(done.status == 200u, done.body);
        BOOST_TEST(json::serialize(done.json().at("log")) == R"(["work","ask"])");
        auto runs = get(s.port, "/threads/" + tid + "/runs", one).json().as_array();
        BOOST_TEST_REQUIRE(runs.size() == 1u);
        BOOST_TEST(runs[0].at("assistant_id").as_string() == id);
        // PATCH: a new version, metadata merged; latest goes back to version 1.
        auto v2 = call(s.port, http::verb::patch, "/assistants/" + id, R"({"metadata":{"tier":"gold"},"name":"stricter"})", one);
        BOOST_TEST_REQUIRE(v2.status == 200u, v2.body);
        BOOST_TEST(v2.json().at("version").as_int64() == 2);
        BOOST_TEST(v2.json().at("metadata").at("team").as_string() == "a");
        BOOST_TEST(v2.json().at("metadata").at("tier").as_string() == "gold");
        auto versions = post(s.port, "/assistants/" + id + "/versions", json::object{}, one).json().as_array();
        BOOST_TEST_REQUIRE(versions.size() == 2u);
        BOOST_TEST(versions[0].at("version").as_int64() == 2);
        auto back = post(s.port, "/assistants/" + id + "/latest", json::object{{"version", 1}}, one);
        BOOST_TEST(back.status == 200u, back.body);
        BOOST_TEST(back.json().at("name").as_string() == "strict");
        BOOST_TEST(post(s.port, "/assistants/" + id + "/latest", json::object{{"version", 9}}, one).status == 404u);
        // Mistakes: 4xx naming what is wrong.
        auto unknown_graph = post(s.port, "/assistants", json::object{{"graph_id", "chatt"}}, one);
        BOOST_TEST(unknown_graph.status == 404u);
        BOOST_TEST(unknown_graph.detail().find("chatt") != std::string::npos, unknown_graph.detail());
        BOOST_TEST(post(s.port, "/assistants", json::object{}, one).status == 422u);
        BOOST_TEST(post(s.port, "/assistants", json::object{{"graph_id", "chat"}, {"assistant_id", id}}, one).status == 409u);
        BOOST_TEST(post(s.port, "/assistants", json::object{{"graph_id", "chat"}, {"assistant_id", id}, {"if_exists", "do_nothing"}}, one).status == 200u);
        BOOST_TEST(call(s.port, http::verb::patch, "/assistants/chat", R"({"name":"x"})", one).status == 409u); // the served graph
        BOOST_TEST(post(s.port, "/assistants", json::object{{"graph_id", "chat"}, {"config", json::object{{"recursion_limit", -1}}}}, one).status == 422u);
    }
    // After a restart: still there, at version 1 (the latest chosen), and deletable.
    running_server s(o, {}, saver);
    auto got = get(s.port, "/assistants/" + id, one);
    BOOST_TEST_REQUIRE(got.status == 200u, got.body);
    BOOST_TEST(got.json().at("version").as_int64() == 1);
    BOOST_TEST(call(s.port, http::verb::delete_, "/assistants/" + id, "", one).status == 204u);
    BOOST_TEST(get(s.port, "/assistants/" + id, one).status == 404u);
}

BOOST_AUTO_TEST_CASE(threads_crud_search_copy) {
    running_server s(test_options());
    auto tid = new_thread(s.port, json::object{{"metadata", json::object{{"user", "ann"}, {"graph_id", "chat"}}}});
    auto t = get(s.port, "/threads/" + tid).json();
    BOOST_TEST(t.at("status").as_string() == "idle");
    BOOST_TEST(t.at("metadata").at("user").as_string() == "ann");
    BOOST_TEST(t.at("created_at").as_string().size() > 20u);

    // Client-chosen id: raise (409) or do_nothing.
    std::string mine = "0b7a4c8e-6b3f-4b7e-9a53-1d2c3b4a5f60";
    BOOST_TEST(post(s.port, "/threads", json::object{{"thread_id", mine}}).status == 200u);
    auto dup = post(s.port, "/threads", json::object{{"thread_id", mine}});
    BOOST_TEST(dup.status == 409u);
    BOOST_TEST(dup.detail().find(mine) != std::string::npos);
    BOOST_TEST(post(s.port, "/threads", json::object{{"thread_id", mine}, {"if_exists", "do_nothing"}}).status == 200u);
    BOOST_TEST(post(s.port, "/threads", json::object{{"thread_id", "not-a-uuid"}}).status == 422u);

    // PATCH merges metadata; search by metadata and status; count.
    auto patched = call(s.port, http::verb::patch, "/threads/" + tid, R"({"metadata":{"tier":"gold"}})");
    BOOST_TEST(patched.json().at("metadata").at("tier").as_string() == "gold");
    auto hits = post(s.port, "/threads/search", json::object{{"metadata", json::object{{"tier", "gold"}}}}).json().as_array();
    BOOST_TEST_REQUIRE(hits.size() == 1u);
    BOOST_TEST(hits[0].at("thread_id").as_string() == tid);
    BOOST_TEST(post(s.port, "/threads/search", json::object{{"status", "idle"}}).json().as_array().size() == 2u);
    BOOST_TEST(post(s.port, "/threads/search", json::object{{"status", "busy"}}).json().as_array().empty());
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 2);
    BOOST_TEST(post(s.port, "/threads/search", json::object{{"status", "sleeping"}}).status == 422u);

    // A run, then a copy that has the same state.
    auto done = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}});
    BOOST_TEST(done.status == 200u);
    auto copy = post(s.port, "/threads/" + tid + "/copy", json::object{}).json();
    std::string cid(copy.at("thread_id").as_string());
    BOOST_TEST(cid != tid);
    auto copied_state = get(s.port, "/threads/" + cid + "/state").json();
    BOOST_TEST(copied_state.at("values").at("log").as_array().size() == 2u);

    // DELETE: gone afterwards.
    BOOST_TEST(call(s.port, http::verb::delete_, "/threads/" + cid).status == 204u);
    BOOST_TEST(get(s.port, "/threads/" + cid).status == 404u);
    BOOST_TEST(get(s.port, "/threads/" + mine + "/state").json().at("checkpoint").is_null()); // never ran
}

BOOST_AUTO_TEST_CASE(stream_interrupt_resume_history_update) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    json::object body{{"assistant_id", "chat"},
                      {"input", json::object{{"question", "ask"}}},
                      {"stream_mode", json::array{"values", "updates"}}};
    auto r = post(s.port, "/threads/" + tid + "/runs/stream", body);
    BOOST_TEST(r.status == 200u);
    BOOST_TEST(r.headers["Content-Type"] == "text/event-stream");
    BOOST_TEST(r.headers["Content-Location"].find("/threads/" + tid + "/runs/") == 0u);
    auto events = parse_sse(r.body);
    BOOST_TEST_REQUIRE(events.size() >= 4u);
    BOOST_TEST(events[0].event == "metadata");
    std::string run_id(events[0].data.at("run_id").as_string());
    BOOST_TEST(events[1].event == "values");
    bool saw_work = false, saw_interrupt = false;
    for (const auto& e : events) {
        if (e.event == "updates" && e.data.as_object().contains("work")) saw_work = true;
        if (e.event == "updates" && e.data.as_object().contains("__interrupt__")) saw_interrupt = true;
    }
    BOOST_TEST(saw_work);
    BOOST_TEST(saw_interrupt);
    BOOST_TEST(events.back().event == "values");
    BOOST_TEST(events.back().data.at("__interrupt__").at(0).at("value").as_string() == "approve?");

    // The thread is interrupted; the state says what is pending.
    auto th = get(s.port, "/threads/" + tid).json();
    BOOST_TEST(th.at("status").as_string() == "interrupted");
    BOOST_TEST(th.at("interrupts").as_object().size() == 1u);
    auto st = get(s.port, "/threads/" + tid + "/state").json();
    BOOST_TEST(st.at("next").at(0).as_string() == "ask");
    BOOST_TEST(st.at("tasks").at(0).at("interrupts").at(0).at("value").as_string() == "approve?");
    std::string interrupt_id(st.at("interrupts").at(0).at("id").as_string());

    // The run record: success (HITL is read from the thread), listed, joinable.
    auto run = get(s.port, "/threads/" + tid + "/runs/" + run_id).json();
    BOOST_TEST(run.at("status").as_string() == "success");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs").json().as_array().size() == 1u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + run_id + "/join").json().as_object().contains("__interrupt__"));

    // Join the finished stream again after event 1: the replay starts at event 2.
    auto replay = get(s.port, "/threads/" + tid + "/runs/" + run_id + "/stream", {{"Last-Event-ID", "1"}});
    auto again = parse_sse(replay.body);
    BOOST_TEST_REQUIRE(!again.empty());
    BOOST_TEST(again.front().id == "2");
    BOOST_TEST(again.size() == events.size() - 2);

    // Resume by interrupt id with /wait: the graph finishes.
    json::object resume{{"assistant_id", "chat"}, {"command", json::object{{"resume", json::object{{interrupt_id, "yes"}}}}}};
    auto w = post(s.port, "/threads/" + tid + "/runs/wait", resume);
    BOOST_TEST(w.status == 200u);
    auto final_values = json::parse(w.body);
    BOOST_TEST(final_values.at("answer").as_string() == "yes");
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "idle");

    // Nothing pending now: a resume is refused, naming the thread.
    json::object resume_again{{"assistant_id", "chat"}, {"command", json::object{{"resume", "again"}}}};
    auto nothing = post(s.port, "/threads/" + tid + "/runs/wait", resume_again);
    BOOST_TEST(nothing.status == 400u);
    BOOST_TEST(nothing.detail().find("no pending interrupt") != std::string::npos);

    // History: newest first, with parent links; one checkpoint by id.
    auto hist = post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 3}}).json().as_array();
    BOOST_TEST_REQUIRE(hist.size() == 3u);
    BOOST_TEST(hist[0].at("parent_checkpoint").at("checkpoint_id") == hist[1].at("checkpoint").at("checkpoint_id"));
    std::string older(hist[1].at("checkpoint").at("checkpoint_id").as_string());
    auto at = get(s.port, "/threads/" + tid + "/state/" + older).json();
    BOOST_TEST(at.at("checkpoint").at("checkpoint_id").as_string() == older);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state/nope").status == 404u);
    auto by_object = post(s.port, "/threads/" + tid + "/state/checkpoint",
                          json::object{{"checkpoint", json::object{{"checkpoint_id", older}}}});
    BOOST_TEST(by_object.json().at("checkpoint").at("checkpoint_id").as_string() == older);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/state/checkpoint", json::object{}).status == 422u);

    // update_state as a node: a new checkpoint, the values refreshed.
    auto upd = post(s.port, "/threads/" + tid + "/state",
                    json::object{{"values", json::object{{"answer", "edited"}}}, {"as_node", "ask"}});
    BOOST_TEST(upd.status == 200u);
    BOOST_TEST(upd.json().at("checkpoint").at("checkpoint_id").as_string().size() > 0u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state").json().at("values").at("answer").as_string() == "edited");
    auto bad_field = post(s.port, "/threads/" + tid + "/state", json::object{{"values", json::object{{"anwser", "x"}}}});
    BOOST_TEST(bad_field.status == 422u);
    BOOST_TEST(bad_field.detail().find("'anwser'") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/state", json::object{{"values", json::object{}}, {"as_node", "nobody"}}).status == 422u);
}

BOOST_AUTO_TEST_CASE(background_runs_busy_cancel_stateless) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    json::object slow{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}};
    auto created = post(s.port, "/threads/" + tid + "/runs", slow);
    BOOST_TEST(created.status == 200u);
    std::string rid(created.json().at("run_id").as_string());
    BOOST_TEST(created.headers["Content-Location"] == "/threads/" + tid + "/runs/" + rid);
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "busy");

    // A second run on the busy thread: refused (409) with the reason; update_state too.
    auto busy = post(s.port, "/threads/" + tid + "/runs", slow);
    BOOST_TEST(busy.status == 409u);
    BOOST_TEST(busy.detail().find("already running") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/state", json::object{{"values", json::object{}}}).status == 409u);
    BOOST_TEST(call(s.port, http::verb::delete_, "/threads/" + tid + "/runs/" + rid).status == 409u);

    // enqueue waits for it; join returns the values.
    json::object queued{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"multitask_strategy", "enqueue"}};
    auto second = post(s.port, "/threads/" + tid + "/runs", queued);
    BOOST_TEST(second.status == 200u);
    std::string rid2(second.json().at("run_id").as_string());
    auto joined = get(s.port, "/threads/" + tid + "/runs/" + rid2 + "/join").json();
    BOOST_TEST(joined.at("log").as_array().size() == 4u); // work, ask of both runs
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid).json().at("status").as_string() == "success");
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "idle");

    // Cancel: a slow run cancelled is interrupted; cancelling it again is a conflict.
    auto third = post(s.port, "/threads/" + tid + "/runs", slow).json();
    std::string rid3(third.at("run_id").as_string());
    auto cancel = post(s.port, "/threads/" + tid + "/runs/" + rid3 + "/cancel?wait=1&action=interrupt", json::object{});
    BOOST_TEST(cancel.status == 204u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid3).json().at("status").as_string() == "interrupted");
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + rid3 + "/cancel", json::object{}).status == 409u);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + rid3 + "/cancel?action=rollback", json::object{}).status == 409u);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + rid3 + "/cancel?action=undo", json::object{}).status == 422u);
    BOOST_TEST(call(s.port, http::verb::delete_, "/threads/" + tid + "/runs/" + rid3).status == 204u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid3).status == 404u);

    // multitask_strategy interrupt: the run in flight is cancelled (interrupted), the new one runs.
    auto victim = post(s.port, "/threads/" + tid + "/runs", slow).json();
    json::object urgent{{"assistant_id", "chat"}, {"input", json::object{{"question", "now"}}}, {"multitask_strategy", "interrupt"}};
    auto winner = post(s.port, "/threads/" + tid + "/runs", urgent).json();
    std::string victim_id(victim.at("run_id").as_string()), winner_id(winner.at("run_id").as_string());
    auto won = get(s.port, "/threads/" + tid + "/runs/" + winner_id + "/join").json();
    BOOST_TEST(won.at("question").as_string() == "now");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + victim_id).json().at("status").as_string() == "interrupted");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + winner_id).json().at("status").as_string() == "success");
    auto listed = get(s.port, "/threads/" + tid + "/runs?status=interrupted").json().as_array();
    BOOST_TEST(listed.size() == 1u); // this one (the run cancelled above was deleted)

    // A failing run: error event, run error, thread error; wait answers __error__.
    json::object fail{{"assistant_id", "chat"}, {"input", json::object{{"question", "fail"}}}};
    auto failed = post(s.port, "/threads/" + tid + "/runs/wait", fail);
    BOOST_TEST(failed.status == 200u);
    BOOST_TEST(json::parse(failed.body).at("__error__").at("message").as_string().find("on purpose") != std::string::npos);
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "error");

    // Stateless runs: wait and stream, on a temporary thread that is gone afterwards.
    json::object once{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}};
    auto w = post(s.port, "/runs/wait", once);
    BOOST_TEST(w.status == 200u);
    BOOST_TEST(json::parse(w.body).at("log").as_array().size() == 2u);
    BOOST_TEST(w.headers["Content-Location"].rfind("/runs/", 0) == 0u);
    once["stream_mode"] = "updates";
    auto st = parse_sse(post(s.port, "/runs/stream", once).body);
    BOOST_TEST_REQUIRE(st.size() == 3u); // metadata, updates work, updates ask
    BOOST_TEST(st[1].event == "updates");
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 1);

    // if_not_exists: create makes the thread; reject (the default) is 404.
    std::string fresh = "5d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6";
    BOOST_TEST(post(s.port, "/threads/" + fresh + "/runs/wait", once).status == 404u);
    once["if_not_exists"] = "create";
    auto created_fresh = post(s.port, "/threads/" + fresh + "/runs/wait", once);
    BOOST_TEST(created_fresh.status == 200u, created_fresh.body);
    BOOST_TEST(get(s.port, "/threads/" + fresh).json().at("metadata").at("graph_id").as_string() == "chat");

    // A request refused after its thread was made leaves no thread behind (stateless, or created).
    std::string other = "6e2f3a4b-5c6d-4e7f-8a91-a2b3c4d5e6f7";
    json::object wrong{{"assistant_id", "chat"}, {"input", json::object{{"question", 1}}}, {"if_not_exists", "create"}};
    BOOST_TEST(post(s.port, "/threads/" + other + "/runs/wait", wrong).status == 422u);
    BOOST_TEST(get(s.port, "/threads/" + other).status == 404u);
    BOOST_TEST(post(s.port, "/runs/wait", wrong).status == 422u);
    auto count_before = post(s.port, "/threads/count", json::object{}).json().as_int64();
    // on_completion keep: the stateless run's thread stays, visible.
    json::object kept{{"assistant_id", "chat"}, {"input", json::object{{"question", "keep me"}}}, {"on_completion", "keep"}};
    auto kept_run = post(s.port, "/runs/wait", kept);
    BOOST_TEST(kept_run.status == 200u);
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == count_before + 1);
}

BOOST_AUTO_TEST_CASE(bad_input_is_4xx_with_detail) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    // Malformed JSON, a body that is not an object, wrong types, unknown names.
    auto bad = call(s.port, http::verb::post, "/threads", "{\"metadata\": ");
    BOOST_TEST(bad.status == 400u);
    BOOST_TEST(bad.detail().find("malformed JSON") != std::string::npos);
    BOOST_TEST(call(s.port, http::verb::post, "/threads", "[1,2]").status == 422u);
    auto wrong = post(s.port, "/threads", json::object{{"metadata", "x"}});
    BOOST_TEST(wrong.status == 422u);
    BOOST_TEST(wrong.detail().find("'metadata'") != std::string::npos);
    auto no_assistant = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"input", json::object{}}});
    BOOST_TEST(no_assistant.status == 422u);
    BOOST_TEST(no_assistant.detail().find("assistant_id") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "nope"}}).status == 404u);
    auto field = post(s.port, "/threads/" + tid + "/runs/wait",
                      json::object{{"assistant_id", "chat"}, {"input", json::object{{"qestion", "hi"}}}});
    BOOST_TEST(field.status == 422u);
    BOOST_TEST(field.detail().find("'qestion'") != std::string::npos);
    auto type = post(s.port, "/threads/" + tid + "/runs/wait",
                     json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", 5}}}});
    BOOST_TEST(type.status == 422u);
    BOOST_TEST(type.detail().find("question") != std::string::npos);
    auto mode = post(s.port, "/threads/" + tid + "/runs/stream", json::object{{"assistant_id", "chat"}, {"stream_mode", "telepathy"}});
    BOOST_TEST(mode.status == 422u);
    BOOST_TEST(mode.detail().find("telepathy") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs", json::object{{"assistant_id", "chat"}, {"multitask_strategy", "maybe"}}).status == 422u);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/history", json::object{{"limit", "ten"}}).status == 422u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs?limit=abc").status == 422u);

    // Unknown thread and run (404), ids that are not UUIDs (422).
    std::string ghost = "11111111-2222-4333-8444-555555555555";
    auto unknown = get(s.port, "/threads/" + ghost);
    BOOST_TEST(unknown.status == 404u);
    BOOST_TEST(unknown.detail().find(ghost) != std::string::npos);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + ghost).status == 404u);
    BOOST_TEST(get(s.port, "/threads/xyz").status == 422u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/xyz").status == 422u);
    BOOST_TEST(call(s.port, http::verb::put, "/threads/" + tid).status == 405u);

    // Oversized body (413), oversized headers (431), a malformed request line (400).
    auto big = call(s.port, http::verb::post, "/threads", "{\"metadata\":{\"x\":\"" + std::string(100 << 10, 'a') + "\"}}");
    BOOST_TEST(big.status == 413u);
    BOOST_TEST(big.detail().find("larger than") != std::string::npos);
    auto huge = get(s.port, "/ok", {{"x-filler", std::string(10 << 10, 'b')}});
    BOOST_TEST(huge.status == 431u);
    auto garbage = raw(s.port, "HELLO WORLD\r\n\r\n");
    BOOST_TEST(garbage.find("400 Bad Request") != std::string::npos);

    // A client too slow to send its request: 408 after the read timeout, then closed.
    auto slow = raw(s.port, "POST /threads HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{");
    BOOST_TEST(slow.find("408") != std::string::npos);
    BOOST_TEST(slow.find("did not arrive") != std::string::npos);

    // The server still answers.
    BOOST_TEST(get(s.port, "/ok").status == 200u);
}

BOOST_AUTO_TEST_CASE(thread_stream) {
    // GET /threads/{id}/stream stays open and carries the events of the runs made after it.
    running_server s(test_options());
    auto tid = new_thread(s.port);
    net::io_context io;
    tcp::socket sock(io);
    sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
    std::string req = "GET /threads/" + tid + "/stream?stream_mode=updates HTTP/1.1\r\nHost: x\r\n\r\n";
    net::write(sock, net::buffer(req));
    // The stream has begun (its header is here) before the runs are made.
    std::string got;
    while (got.find("\r\n\r\n") == std::string::npos) {
        char buf[1024];
        got.append(buf, sock.read_some(net::buffer(buf)));
    }
    for (const char* q : {"one", "two"}) {
        auto r = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", q}}}});
        BOOST_TEST(r.status == 200u);
    }
    // Read what arrived: both runs' metadata and updates (work, ask), with "<run_id>:<n>" ids.
    sock.non_blocking(true);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
        char buf[4096];
        boost::system::error_code ec;
        auto n = sock.read_some(net::buffer(buf), ec);
        got.append(buf, n);
        std::size_t metas = 0, pos = 0;
        while ((pos = got.find("event: metadata", pos)) != std::string::npos) ++metas, ++pos;
        if (metas == 2 && got.rfind("event: updates") > got.rfind("event: metadata")) {
            auto tail = got.substr(got.rfind("event: metadata"));
            if (tail.find("\"ask\"") != std::string::npos) break;
        }
        if (ec && ec != net::error::would_block) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_TEST(got.find("200 OK") != std::string::npos);
    BOOST_TEST(got.find("text/event-stream") != std::string::npos);
    std::size_t metas = 0, updates = 0, pos = 0;
    while ((pos = got.find("event: metadata", pos)) != std::string::npos) ++metas, ++pos;
    pos = 0;
    while ((pos = got.find("event: updates", pos)) != std::string::npos) ++updates, ++pos;
    BOOST_TEST(metas == 2u);
    BOOST_TEST(updates == 4u);
    BOOST_TEST(got.find("event: values") == std::string::npos); // stream_mode=updates
    BOOST_TEST(got.find("id: ") != std::string::npos);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/stream?stream_mode=telepathy").status == 422u);
}

BOOST_AUTO_TEST_CASE(bounded_load) {
    // 16 clients, 10 stateless runs each, at most 3 runs executing at once: every answer is a
    // 200 with the run's values, and every temporary thread is gone afterwards; 50 finished runs
    // are kept at most.
    auto o = test_options();
    o.max_runs_in_flight = 3;
    o.max_finished_runs = 50;
    running_server s(std::move(o));
    std::atomic<int> ok{0}, bad{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 16; ++c)
        clients.emplace_back([&, c] {
            for (int i = 0; i < 10; ++i) {
                auto q = "q" + std::to_string(c) + "-" + std::to_string(i);
                auto r = post(s.port, "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", q}}}});
                if (r.status == 200u && json::parse(r.body).at("question").as_string() == q) ++ok;
                else ++bad;
            }
        });
    for (auto& t : clients) t.join();
    BOOST_TEST(ok.load() == 160);
    BOOST_TEST(bad.load() == 0);
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 0);
}

BOOST_AUTO_TEST_CASE(verbosity_levels) {
    // result: metadata, then only the final values; events: the updates, no values but the final ones.
    for (auto level : {srv::verbosity::result, srv::verbosity::events}) {
        auto o = test_options();
        o.verbosity = level;
        running_server s(std::move(o));
        json::object body{{"assistant_id", "chat"},
                          {"input", json::object{{"question", "ask"}}},
                          {"stream_mode", json::array{"values", "updates"}}};
        auto events = parse_sse(post(s.port, "/runs/stream", body).body);
        BOOST_TEST_REQUIRE(events.size() >= 2u);
        BOOST_TEST(events.front().event == "metadata");
        BOOST_TEST(events.back().event == "values");
        BOOST_TEST(events.back().data.as_object().contains("__interrupt__"));
        std::size_t values = 0, updates = 0;
        for (const auto& e : events) {
            values += e.event == "values";
            updates += e.event == "updates";
        }
        BOOST_TEST(values == 1u);
        if (level == srv::verbosity::result) BOOST_TEST(events.size() == 2u);
        else BOOST_TEST(updates == 2u); // work's update and ask's __interrupt__
    }
}

BOOST_AUTO_TEST_CASE(fuzzed_requests_never_5xx) {
    // A fuzz pass over request bodies, paths and query strings: valid requests mutated at random
    // (values of other types, fields dropped, bytes flipped, bodies cut, odd ids and queries).
    // Every answer must be a 2xx or a 4xx with {"detail"}, never a 5xx, and the server stays up.
    running_server s(test_options());
    auto tid = new_thread(s.port);
    auto first = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "ask"}}}});
    BOOST_TEST_REQUIRE(first.status == 200u);
    auto hist = post(s.port, "/threads/" + tid + "/history", json::object{}).json();
    std::string cp(hist.at(0).at("checkpoint").at("checkpoint_id").as_string());

    std::mt19937 rng(20261124);
    auto pick = [&rng](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
    const std::vector<json::value> odd = {nullptr, 1, -1, 1e308, "x", "", json::array{}, json::object{}, true,
                                          json::string(std::string(3000, 'z')), "../../etc", "chat",
                                          json::array{"values", "nope"}, json::object{{"resume", "Thomas"}}};
    const std::vector<std::string> ids = {tid, "11111111-2222-4333-8444-555555555555", "x", "%zz", "", std::string(300, 'a'), cp};
    struct seed {
        http::verb verb;
        std::string path; // {t} a thread id, {r} a run id or checkpoint id
        json::object body;
    };
    const std::vector<seed> seeds = {
        {http::verb::post, "/threads", json::object{{"thread_id", tid}, {"metadata", json::object{{"a", 1}}}, {"if_exists", "do_nothing"}}},
        {http::verb::post, "/threads/search", json::object{{"metadata", json::object{{"a", 1}}}, {"status", "idle"}, {"limit", 5}, {"offset", 0}, {"sort_by", "created_at"}}},
        {http::verb::post, "/threads/count", json::object{{"status", "busy"}}},
        {http::verb::patch, "/threads/{t}", json::object{{"metadata", json::object{{"b", 2}}}}},
        {http::verb::post, "/threads/{t}/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"stream_mode", "values"}, {"config", json::object{{"recursion_limit", 5}}}}},
        {http::verb::post, "/threads/{t}/runs/stream", json::object{{"assistant_id", "chat"}, {"command", json::object{{"resume", "yes"}}}, {"multitask_strategy", "enqueue"}}},
        {http::verb::post, "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "q"}, {"log", json::array{"a"}}}}, {"on_completion", "keep"}}},
        {http::verb::post, "/threads/{t}/state", json::object{{"values", json::object{{"answer", "a"}}}, {"as_node", "ask"}, {"checkpoint_id", cp}}},
        {http::verb::patch, "/threads/{t}/state", json::object{{"metadata", json::object{{"tag", "x"}}}, {"checkpoint_id", cp}}},
        {http::verb::post, "/threads/{t}/history", json::object{{"limit", 2}, {"before", cp}, {"metadata", json::object{{"step", 1}}}}},
        {http::verb::post, "/threads/{t}/state/checkpoint", json::object{{"checkpoint", json::object{{"checkpoint_id", cp}}}}},
        {http::verb::post, "/assistants/search", json::object{{"graph_id", "chat"}, {"limit", 3}, {"metadata", json::object{}}}},
        {http::verb::get, "/threads/{t}/state/{r}", json::object{}},
        {http::verb::get, "/threads/{t}/runs/{r}/join", json::object{}},
        {http::verb::post, "/threads/{t}/runs/{r}/cancel", json::object{}},
        {http::verb::get, "/assistants/{t}/graph", json::object{}},
        {http::verb::delete_, "/threads/{t}/runs/{r}", json::object{}},
    };
    const std::vector<std::string> queries = {"", "?limit=3", "?limit=-1", "?limit=99999999999999999999", "?stream_mode=%5B%22values%22%5D",
                                              "?wait=1&action=rollback", "?action=", "?format=dot", "?status=idle&offset=x",
                                              "?stream_mode=[", "?%zz=%", "?&&=&"};
    std::size_t n_4xx = 0, n_2xx = 0, fivexx = 0;
    for (int i = 0; i < 2000; ++i) {
        const auto& sd = seeds[pick(seeds.size())];
        std::string path = sd.path;
        for (const char* hole : {"{t}", "{r}"})
            if (auto at = path.find(hole); at != std::string::npos) path.replace(at, 3, ids[pick(ids.size())]);
        path += queries[pick(queries.size())];
        json::object body = sd.body;
        std::string text;
        switch (pick(4)) {
        case 0: // a field gets a value of another type
            if (!body.empty()) {
                auto it = body.begin() + static_cast<std::ptrdiff_t>(pick(body.size()));
                it->value() = odd[pick(odd.size())];
            }
            text = json::serialize(body);
            break;
        case 1: // a field goes
            if (!body.empty()) body.erase(body.begin() + static_cast<std::ptrdiff_t>(pick(body.size())));
            text = json::serialize(body);
            break;
        case 2: { // bytes flipped
            text = json::serialize(body);
            for (int k = 0; k < 3 && !text.empty(); ++k) text[pick(text.size())] = static_cast<char>(rng() & 0x7f);
            break;
        }
        default: // cut short
            text = json::serialize(body);
            text.resize(pick(text.size() + 1));
        }
        auto r = call(s.port, sd.verb, path, text);
        if (r.status >= 500) {
            ++fivexx;
            BOOST_TEST_MESSAGE("5xx for " << path << " " << text << ": " << r.body);
        } else if (r.status >= 400) {
            ++n_4xx;
            BOOST_TEST(json::parse(r.body).as_object().contains("detail"), path << " " << text << " -> " << r.body);
        } else {
            ++n_2xx;
        }
    }
    BOOST_TEST(fivexx == 0u);
    BOOST_TEST(n_4xx > 100u); // the mutations do reach the checks
    BOOST_TEST(n_2xx > 20u);
    BOOST_TEST(get(s.port, "/ok").status == 200u);
}

BOOST_AUTO_TEST_CASE(cors_for_browser_pages) {
    auto o = test_options();
    o.cors_origins = {"http://localhost:3000"};
    o.api_keys = {"key-one"};
    running_server s(std::move(o));
    // The preflight needs no key; the answer lists what the SDK sends.
    auto pre = call(s.port, http::verb::options, "/threads", "", {{"Origin", "http://localhost:3000"}});
    BOOST_TEST(pre.status == 204u);
    BOOST_TEST(pre.headers["Access-Control-Allow-Origin"] == "http://localhost:3000");
    BOOST_TEST(pre.headers["Access-Control-Allow-Headers"].find("X-Api-Key") != std::string::npos);
    // An allowed origin sees the run headers; another origin gets no CORS headers at all.
    auto made = post(s.port, "/threads", json::object{}, {{"Origin", "http://localhost:3000"}, {"x-api-key", "key-one"}});
    BOOST_TEST(made.headers["Access-Control-Expose-Headers"].find("Content-Location") != std::string::npos);
    auto other = post(s.port, "/threads", json::object{}, {{"Origin", "http://evil.example"}, {"x-api-key", "key-one"}});
    BOOST_TEST(other.status == 200u);
    BOOST_TEST(!other.headers.count("Access-Control-Allow-Origin"));
    BOOST_TEST(call(s.port, http::verb::options, "/threads", "", {{"Origin", "http://evil.example"}}).status == 405u);
}

BOOST_AUTO_TEST_CASE(api_keys_own_threads) {
    auto o = test_options();
    o.api_keys = {"key-one", "key-two"};
    auto log = std::make_shared<std::vector<std::string>>();
    o.log = [log](std::string_view line) { log->emplace_back(line); };
    {
    running_server s(std::move(o));
    BOOST_TEST(get(s.port, "/ok").status == 200u); // health checks need no key
    auto none = post(s.port, "/threads", json::object{});
    BOOST_TEST(none.status == 401u);
    BOOST_TEST(none.detail().find("x-api-key") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads", json::object{}, {{"x-api-key", "key-three"}}).status == 401u);

    auto mine = post(s.port, "/threads", json::object{}, {{"x-api-key", "key-one"}});
    BOOST_TEST(mine.status == 200u);
    std::string tid(mine.json().at("thread_id").as_string());
    BOOST_TEST(get(s.port, "/threads/" + tid, {{"x-api-key", "key-one"}}).status == 200u);
    BOOST_TEST(get(s.port, "/threads/" + tid, {{"x-api-key", "key-two"}}).status == 404u);
    BOOST_TEST(post(s.port, "/threads/search", json::object{}, {{"x-api-key", "key-two"}}).json().as_array().empty());
    BOOST_TEST(post(s.port, "/threads/search", json::object{}, {{"x-api-key", "key-one"}}).json().as_array().size() == 1u);

    }
    // The server is gone (its thread joined): the log lines never hold key material.
    BOOST_TEST(log->size() >= 6u);
    for (const auto& line : *log) BOOST_TEST(line.find("key-") == std::string::npos);
}

// A restarted server on the same storage knows every thread again: its metadata, its owner (the
// other key still gets 404), its state; a deleted thread stays deleted; no key is stored.
BOOST_AUTO_TEST_CASE(thread_records_survive_a_restart) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto o = test_options();
    o.api_keys = {"key-one", "key-two"};
    o.runs = srv::open_sqlite_run_store(":memory:"); // the records' storage, shared by both servers
    const std::map<std::string, std::string> one{{"x-api-key", "key-one"}}, two{{"x-api-key", "key-two"}};
    std::string idle, ran, gone, theirs;
    {
        running_server s(o, {}, saver);
        idle = std::string(post(s.port, "/threads", json::object{{"metadata", json::object{{"user", "ann"}}}}, one)
                               .json().at("thread_id").as_string());
        theirs = std::string(post(s.port, "/threads", json::object{}, two).json().at("thread_id").as_string());
        gone = std::string(post(s.port, "/threads", json::object{}, one).json().at("thread_id").as_string());
        BOOST_TEST(call(s.port, http::verb::delete_, "/threads/" + gone, "", one).status == 204u);
        // a thread made by its first run (if_not_exists), then patched
        ran = "6f1d2c3b-4a5e-4f70-8b9c-0d1e2f3a4b5c";
        json::object hi{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"if_not_exists", "create"}};
        BOOST_TEST_REQUIRE(post(s.port, "/threads/" + ran + "/runs/wait", hi, one).status == 200u);
        BOOST_TEST(call(s.port, http::verb::patch, "/threads/" + ran, R"({"metadata":{"tier":"gold"}})", one).status == 200u);
    }
    running_server s(o, {}, saver);
    reply got;
    for (int i = 0; i < 200; ++i) { // the records are read back as the server starts listening
        got = get(s.port, "/threads/" + idle, one);
        if (got.status == 200u) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_TEST_REQUIRE(got.status == 200u);
    BOOST_TEST(got.json().at("metadata").at("user") == "ann");
    BOOST_TEST(got.json().at("status") == "idle");
    BOOST_TEST(get(s.port, "/threads/" + idle, two).status == 404u); // still owned by key-one
    BOOST_TEST(get(s.port, "/threads/" + theirs, two).status == 200u);
    BOOST_TEST(get(s.port, "/threads/" + theirs, one).status == 404u);
    BOOST_TEST(get(s.port, "/threads/" + gone, one).status == 404u);
    auto r = get(s.port, "/threads/" + ran, one);
    BOOST_TEST_REQUIRE(r.status == 200u);
    BOOST_TEST(r.json().at("metadata").at("tier") == "gold");
    BOOST_TEST(r.json().at("metadata").at("graph_id") == "chat");
    BOOST_TEST(r.json().at("values").at("log").as_array().size() == 2u);
    BOOST_TEST(post(s.port, "/threads/search", json::object{}, one).json().as_array().size() == 2u);
    BOOST_TEST(post(s.port, "/threads/search", json::object{}, two).json().as_array().size() == 1u);
    // the thread goes on where it was
    json::object again{{"assistant_id", "chat"}, {"input", json::object{{"question", "again"}}}};
    auto more = post(s.port, "/threads/" + ran + "/runs/wait", again, one);
    BOOST_TEST_REQUIRE(more.status == 200u);
    BOOST_TEST(more.json().at("log").as_array().size() == 4u);
    // what is stored (the run store's records) names owners by a digest of their key, never the
    // key; with keys a thread is kept under an id of its key's own (the record names both)
    auto keys = sg::checkpoint::testing::run(o.runs->thread_keys());
    std::optional<srv::thread_record> rec;
    for (const auto& k : keys) {
        auto r = sg::checkpoint::testing::run(o.runs->get_thread(k));
        if (r && r->thread_id == idle) rec = r;
        if (r) BOOST_TEST((r->key + r->owner + r->thread_id + json::serialize(r->metadata)).find("key-one") == std::string::npos);
    }
    BOOST_TEST_REQUIRE(rec.has_value());
    BOOST_TEST(rec->key != idle);
    BOOST_TEST(rec->owner.starts_with("key:"));
}

// -- rollback: the run and the checkpoints it wrote go; the thread is as before it -----------

BOOST_AUTO_TEST_CASE(rollback_cancel_and_multitask) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    json::object hi{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}};
    BOOST_TEST_REQUIRE(post(s.port, "/threads/" + tid + "/runs/wait", hi).status == 200u);
    auto history = [&] { return post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array(); };
    // waits (up to 5 s) until the slow run on `thread` has written its first checkpoint
    auto until_written = [&](const std::string& thread, std::size_t had) {
        for (int i = 0; i < 500; ++i) {
            auto h = post(s.port, "/threads/" + thread + "/history", json::object{{"limit", 100}}).json().as_array();
            if (h.size() > had) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    };
    auto before = history();
    BOOST_TEST_REQUIRE(before.size() > 1u);
    auto state_before = get(s.port, "/threads/" + tid + "/state").json().at("values");

    // cancel?action=rollback on a running run: 204, the run is gone, the history as before
    json::object slow{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}};
    auto created = post(s.port, "/threads/" + tid + "/runs", slow).json();
    std::string rid(created.at("run_id").as_string());
    BOOST_TEST(until_written(tid, before.size())); // it runs and writes its input checkpoint
    auto cancel = post(s.port, "/threads/" + tid + "/runs/" + rid + "/cancel?wait=1&action=rollback", json::object{});
    BOOST_TEST(cancel.status == 204u);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid).status == 404u);
    auto after = history();
    BOOST_TEST_REQUIRE(after.size() == before.size());
    for (std::size_t i = 0; i < after.size(); ++i)
        BOOST_TEST(after[i].at("checkpoint").at("checkpoint_id") == before[i].at("checkpoint").at("checkpoint_id"));
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state").json().at("values") == state_before);
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "idle");

    // the thread still runs after a rollback (the rewritten checkpoints read back)
    json::object again{{"assistant_id", "chat"}, {"input", json::object{{"question", "again"}}}};
    auto ran = post(s.port, "/threads/" + tid + "/runs/wait", again).json();
    BOOST_TEST(ran.at("question").as_string() == "again");
    BOOST_TEST(ran.at("log").as_array().size() == 4u); // work, ask of "hi" and of "again"
    auto base = history();

    // multitask_strategy rollback: the run in flight goes with its checkpoints, the new one runs
    auto victim = post(s.port, "/threads/" + tid + "/runs", slow).json();
    std::string victim_id(victim.at("run_id").as_string());
    BOOST_TEST(until_written(tid, base.size()));
    json::object urgent{{"assistant_id", "chat"}, {"input", json::object{{"question", "now"}}}, {"multitask_strategy", "rollback"}};
    auto won = post(s.port, "/threads/" + tid + "/runs/wait", urgent);
    BOOST_TEST_REQUIRE(won.status == 200u);
    BOOST_TEST(won.json().at("question").as_string() == "now");
    BOOST_TEST(won.json().at("log").as_array().size() == 6u); // nothing of the slow run
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + victim_id).status == 404u);
    auto runs = get(s.port, "/threads/" + tid + "/runs").json().as_array();
    for (const auto& r : runs) BOOST_TEST(r.at("run_id") != json::value(victim_id));
    auto final_history = history();
    BOOST_TEST(final_history.size() == base.size() + (base.size() - before.size())); // one run's checkpoints more

    // rollback of a run on a fresh thread: no checkpoint is left, the thread is empty and idle
    auto fresh = new_thread(s.port);
    auto first = post(s.port, "/threads/" + fresh + "/runs", slow).json();
    std::string first_id(first.at("run_id").as_string());
    BOOST_TEST(until_written(fresh, 0));
    BOOST_TEST(post(s.port, "/threads/" + fresh + "/runs/" + first_id + "/cancel?wait=1&action=rollback", json::object{}).status == 204u);
    BOOST_TEST(post(s.port, "/threads/" + fresh + "/history", json::object{}).json().as_array().empty());
    BOOST_TEST(get(s.port, "/threads/" + fresh).json().at("status").as_string() == "idle");
}

// A rollback is one `rewind_thread` of the saver: the subgraph's checkpoints of earlier runs stay,
// and when the saver fails mid-rollback nothing of the thread is removed (no half thread).
BOOST_AUTO_TEST_CASE(rollback_keeps_subgraph_checkpoints_and_is_atomic) {
    auto memory = std::make_shared<sg::checkpoint::memory_saver>();
    auto saver = std::make_shared<failing_rewind_saver>(memory);
    std::vector<srv::assistant_spec> more{srv::make_assistant("nested", build_nested(saver))};
    running_server s(test_options(), std::move(more));
    auto tid = new_thread(s.port);
    auto stored = [&] { return sg::checkpoint::testing::run(memory->stats(tid)).checkpoints; };
    json::object hi{{"assistant_id", "nested"}, {"input", json::object{{"question", "hi"}}}};
    auto first = post(s.port, "/threads/" + tid + "/runs/wait", hi);
    BOOST_TEST_REQUIRE(first.status == 200u);
    BOOST_TEST(first.json().at("log").as_array().size() == 2u);
    auto history = [&] { return post(s.port, "/threads/" + tid + "/history", json::object{{"limit", 100}}).json().as_array(); };
    const auto root_before = history().size();
    const auto all_before = stored();
    BOOST_TEST_REQUIRE(all_before > root_before); // the subgraph wrote checkpoints of its own
    auto until_written = [&](std::size_t had) {
        for (int i = 0; i < 500; ++i) {
            if (stored() > had) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        return false;
    };

    // cancel?action=rollback mid-run: every checkpoint the run wrote goes (root and subgraph),
    // every checkpoint of the first run stays (root and subgraph)
    json::object slow{{"assistant_id", "nested"}, {"input", json::object{{"question", "slow"}}}};
    std::string rid(post(s.port, "/threads/" + tid + "/runs", slow).json().at("run_id").as_string());
    BOOST_TEST(until_written(all_before));
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + rid + "/cancel?wait=1&action=rollback", json::object{}).status == 204u);
    BOOST_TEST(stored() == all_before);
    BOOST_TEST(history().size() == root_before);
    BOOST_TEST(get(s.port, "/threads/" + tid).json().at("status").as_string() == "idle");
    auto again = post(s.port, "/threads/" + tid + "/runs/wait",
                      json::object{{"assistant_id", "nested"}, {"input", json::object{{"question", "again"}}}});
    BOOST_TEST_REQUIRE(again.status == 200u);
    BOOST_TEST(again.json().at("log").as_array().size() == 4u); // nothing of the rolled-back run
    const auto all_after_again = stored();

    // the saver fails during the rollback: the thread keeps everything (whole, not half), the
    // failure is on the run and the thread, and the thread can be rolled back no further by accident
    saver->fail = true;
    std::string rid2(post(s.port, "/threads/" + tid + "/runs", slow).json().at("run_id").as_string());
    BOOST_TEST(until_written(all_after_again));
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + rid2 + "/cancel?wait=1&action=rollback", json::object{}).status == 204u);
    const auto kept = stored();
    BOOST_TEST(kept > all_after_again); // what the cancelled run wrote is still there, untouched
    auto run = get(s.port, "/threads/" + tid + "/runs/" + rid2);
    BOOST_TEST_REQUIRE(run.status == 200u);
    BOOST_TEST(run.json().at("status").as_string() == "error");
    auto thread = get(s.port, "/threads/" + tid).json();
    BOOST_TEST(thread.at("status").as_string() == "error");
    BOOST_TEST(thread.at("error").at("message").as_string().find("mid-rollback") != std::string::npos);
    BOOST_TEST(stored() == kept);
    saver->fail = false;

    // A thread waiting at an interrupt inside the subgraph: a resumed run rolled back leaves it
    // waiting there (the subgraph's checkpoints newer than the root's head stay too).
    auto waiting = new_thread(s.port);
    json::object ask_body{{"assistant_id", "nested"}, {"input", json::object{{"question", "ask"}}}};
    auto asked = post(s.port, "/threads/" + waiting + "/runs/wait", ask_body);
    BOOST_TEST_REQUIRE(asked.status == 200u);
    BOOST_TEST_REQUIRE(get(s.port, "/threads/" + waiting).json().at("status").as_string() == "interrupted");
    const auto at_interrupt = sg::checkpoint::testing::run(memory->stats(waiting)).checkpoints;
    json::object resume_slow{{"assistant_id", "nested"}, {"command", json::object{{"resume", "slow"}}}};
    std::string rid3(post(s.port, "/threads/" + waiting + "/runs", resume_slow).json().at("run_id").as_string());
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // it runs: the node waits
    BOOST_TEST(post(s.port, "/threads/" + waiting + "/runs/" + rid3 + "/cancel?wait=1&action=rollback", json::object{}).status == 204u);
    BOOST_TEST(sg::checkpoint::testing::run(memory->stats(waiting)).checkpoints == at_interrupt);
    BOOST_TEST(get(s.port, "/threads/" + waiting).json().at("status").as_string() == "interrupted");
    json::object resume_yes{{"assistant_id", "nested"}, {"command", json::object{{"resume", "yes"}}}};
    auto answered = post(s.port, "/threads/" + waiting + "/runs/wait", resume_yes);
    BOOST_TEST_REQUIRE(answered.status == 200u);
    BOOST_TEST(answered.json().at("answer").as_string() == "yes");
    BOOST_TEST(answered.json().at("log").as_array().size() == 2u);
}

// Two levels of subgraphs: a thread waiting at an interrupt inside "middle/inner" keeps every
// checkpoint of both subgraphs when a resumed run is rolled back, and can still be resumed.
BOOST_AUTO_TEST_CASE(rollback_keeps_nested_subgraph_checkpoints) {
    auto memory = std::make_shared<sg::checkpoint::memory_saver>();
    std::vector<srv::assistant_spec> more{srv::make_assistant("deep", build_deep(memory))};
    running_server s(test_options(), std::move(more));
    auto waiting = new_thread(s.port);
    json::object ask_body{{"assistant_id", "deep"}, {"input", json::object{{"question", "ask"}}}};
    BOOST_TEST_REQUIRE(post(s.port, "/threads/" + waiting + "/runs/wait", ask_body).status == 200u);
    BOOST_TEST_REQUIRE(get(s.port, "/threads/" + waiting).json().at("status").as_string() == "interrupted");
    const auto at_interrupt = sg::checkpoint::testing::run(memory->stats(waiting)).checkpoints;
    json::object resume_slow{{"assistant_id", "deep"}, {"command", json::object{{"resume", "slow"}}}};
    std::string rid(post(s.port, "/threads/" + waiting + "/runs", resume_slow).json().at("run_id").as_string());
    std::this_thread::sleep_for(std::chrono::milliseconds(300)); // it runs: the node waits
    BOOST_TEST(post(s.port, "/threads/" + waiting + "/runs/" + rid + "/cancel?wait=1&action=rollback", json::object{}).status == 204u);
    BOOST_TEST(sg::checkpoint::testing::run(memory->stats(waiting)).checkpoints == at_interrupt);
    BOOST_TEST(get(s.port, "/threads/" + waiting).json().at("status").as_string() == "interrupted");
    json::object resume_yes{{"assistant_id", "deep"}, {"command", json::object{{"resume", "yes"}}}};
    auto answered = post(s.port, "/threads/" + waiting + "/runs/wait", resume_yes);
    BOOST_TEST_REQUIRE(answered.status == 200u);
    BOOST_TEST(answered.json().at("answer").as_string() == "yes");
}

// stream_subgraphs: events from inside a subgraph are named `<mode>|<node>:<task id>`; without
// it only the graph's own events come.
BOOST_AUTO_TEST_CASE(stream_subgraphs_names_events_by_namespace) {
    std::vector<srv::assistant_spec> more{srv::make_assistant("nested", build_nested(std::make_shared<sg::checkpoint::memory_saver>()))};
    running_server s(test_options(), std::move(more));
    auto stream = [&](bool subgraphs) {
        json::object body{{"assistant_id", "nested"}, {"input", json::object{{"question", "hi"}}},
                          {"stream_mode", json::array{"updates", "values"}}, {"stream_subgraphs", subgraphs}};
        auto r = post(s.port, "/runs/stream", body);
        BOOST_TEST_REQUIRE(r.status == 200u);
        return parse_sse(r.body);
    };
    auto events = stream(true);
    std::vector<std::string> inner_updates;
    std::string ns;
    bool outer_update = false, inner_values = false;
    for (const auto& e : events) {
        const auto bar = e.event.find('|');
        if (bar == std::string::npos) {
            if (e.event == "updates" && e.data.as_object().contains("inner")) outer_update = true;
            continue;
        }
        const auto mode = e.event.substr(0, bar), part = e.event.substr(bar + 1);
        BOOST_TEST(part.rfind("inner:", 0) == 0u, e.event); // `<node>:<task id>`
        BOOST_TEST(part.size() > 6u);
        if (ns.empty()) ns = part;
        BOOST_TEST(part == ns); // one subgraph call: one namespace
        if (mode == "updates")
            for (const auto& [node, update] : e.data.as_object()) inner_updates.emplace_back(node);
        if (mode == "values") inner_values = true;
    }
    BOOST_TEST(inner_updates == (std::vector<std::string>{"work", "ask"}), boost::test_tools::per_element());
    BOOST_TEST(inner_values);
    BOOST_TEST(outer_update); // the subgraph node's own update, at the top level
    BOOST_TEST(events.front().event == "metadata");
    for (const auto& e : stream(false)) BOOST_TEST(e.event.find('|') == std::string::npos, e.event);
    json::object bad{{"assistant_id", "nested"}, {"input", json::object{{"question", "hi"}}}, {"stream_subgraphs", "yes"}};
    auto r = post(s.port, "/runs/stream", bad);
    BOOST_TEST(r.status == 422u);
    BOOST_TEST(r.detail().find("stream_subgraphs") != std::string::npos);
}

// -- bounded memory: events kept per run, runs queued per thread, connections; a client that
// leaves an event stream is noticed at once ---------------------------------------------------

BOOST_AUTO_TEST_CASE(events_kept_per_run_are_bounded) {
    auto o = test_options();
    o.max_events_per_run = 3;
    running_server s(std::move(o));
    auto tid = new_thread(s.port);
    json::object body{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}},
                      {"stream_mode", json::array{"values", "updates"}}};
    auto made = post(s.port, "/threads/" + tid + "/runs", body);
    BOOST_TEST_REQUIRE(made.status == 200u, made.body);
    std::string rid(made.json().at("run_id").as_string());
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid + "/join").status == 200u);
    // metadata, 3 values, 2 updates: the first three are gone
    auto full = get(s.port, "/threads/" + tid + "/runs/" + rid + "/stream");
    BOOST_TEST_REQUIRE(full.status == 200u);
    auto events = parse_sse(full.body);
    BOOST_TEST_REQUIRE(events.size() == 3u);
    BOOST_TEST(events.front().id == "3");
    BOOST_TEST(events.back().event == "values");
    BOOST_TEST(events.back().data.at("log").as_array().size() == 2u);
    // a join after a kept event replays from there; one after an event that is gone gets 410
    auto kept = get(s.port, "/threads/" + tid + "/runs/" + rid + "/stream", {{"Last-Event-ID", "3"}});
    BOOST_TEST(parse_sse(kept.body).size() == 2u);
    auto gone = get(s.port, "/threads/" + tid + "/runs/" + rid + "/stream", {{"Last-Event-ID", "1"}});
    BOOST_TEST_REQUIRE(gone.status == 410u);
    BOOST_TEST(gone.detail().find("oldest kept has id 3") != std::string::npos, gone.detail());
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs/" + rid + "/stream", {{"Last-Event-ID", "2"}}).status == 200u);
}

// A run made by /runs/wait that asks for no stream mode and is not stream_resumable keeps no event
// of its steps (LangGraph keeps no events of a run that is not resumable; its waiter needs the end
// only): joined, its stream is its metadata and its final values, the answer, also while it runs.
// stream_resumable, or a stream_mode given, keeps every step's events; an interrupted wait run's
// one values event carries the interrupt; a stream_resumable that is not a boolean is a 422.
BOOST_AUTO_TEST_CASE(a_wait_run_keeps_its_answer_not_its_steps) {
    running_server s(test_options());
    const auto run_of = [](const reply& r) {
        const std::string loc = r.headers.count("Content-Location") ? r.headers.at("Content-Location") : std::string();
        return loc.substr(loc.rfind('/') + 1);
    };
    const auto joined = [&](const std::string& tid, const std::string& rid, const std::string& query = "") {
        auto r = get(s.port, "/threads/" + tid + "/runs/" + rid + "/stream" + query);
        BOOST_TEST_REQUIRE(r.status == 200u, r.body);
        return parse_sse(r.body);
    };
    const auto count = [](const std::vector<sse>& es, const std::string& name) {
        return std::count_if(es.begin(), es.end(), [&](const sse& e) { return e.event == name; });
    };

    // Quiet: the answer, then a join that replays only the metadata and that answer.
    auto tid = new_thread(s.port);
    auto w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}});
    BOOST_TEST_REQUIRE(w.status == 200u, w.body);
    const auto answer = json::parse(w.body);
    BOOST_TEST(answer.at("log") == (json::array{"work", "ask"}));
    auto events = joined(tid, run_of(w));
    BOOST_TEST_REQUIRE(events.size() == 2u);
    BOOST_TEST(events[0].event == "metadata");
    BOOST_TEST(events[0].data.at("run_id").as_string() == run_of(w));
    BOOST_TEST(events[1].event == "values");
    BOOST_TEST(events[1].data == answer);
    BOOST_TEST(count(joined(tid, run_of(w), "?stream_mode=updates"), "updates") == 0); // none kept
    BOOST_TEST(get(s.port, "/threads/" + tid + "/state").json().at("values") == answer); // the thread's values follow

    // stream_resumable: every step's values and updates are kept.
    tid = new_thread(s.port);
    w = post(s.port, "/threads/" + tid + "/runs/wait",
             json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"stream_resumable", true}});
    BOOST_TEST_REQUIRE(w.status == 200u, w.body);
    BOOST_TEST(json::parse(w.body) == answer);
    events = joined(tid, run_of(w));
    BOOST_TEST(count(events, "values") == 3); // the input, work, ask
    BOOST_TEST(events.back().data == answer);
    BOOST_TEST(count(joined(tid, run_of(w), "?stream_mode=updates"), "updates") == 2);

    // A stream mode asked for: its events are kept too.
    tid = new_thread(s.port);
    w = post(s.port, "/threads/" + tid + "/runs/wait",
             json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"stream_mode", json::array{"updates"}}});
    BOOST_TEST_REQUIRE(w.status == 200u, w.body);
    BOOST_TEST(json::parse(w.body) == answer);
    BOOST_TEST(count(joined(tid, run_of(w)), "updates") == 2);

    // Interrupted: the one values event is the answer with its interrupt; the resume is quiet too.
    tid = new_thread(s.port);
    w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "ask"}}}});
    BOOST_TEST_REQUIRE(w.status == 200u, w.body);
    const auto stopped = json::parse(w.body);
    BOOST_TEST(stopped.at("__interrupt__").at(0).at("value").as_string() == "approve?");
    events = joined(tid, run_of(w));
    BOOST_TEST_REQUIRE(events.size() == 2u);
    BOOST_TEST(events[1].data == stopped);
    w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"command", json::object{{"resume", "yes"}}}});
    BOOST_TEST_REQUIRE(w.status == 200u, w.body);
    BOOST_TEST(json::parse(w.body).at("answer").as_string() == "yes");
    BOOST_TEST(joined(tid, run_of(w)).size() == 2u);

    // Joined while it runs (work takes a second on "slow"): the metadata, then the final values.
    tid = new_thread(s.port);
    auto waiting = std::async(std::launch::async, [&, tid] {
        return post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}});
    });
    std::string rid;
    for (int i = 0; i < 200 && rid.empty(); ++i) { // bounded: 2 s
        auto runs = get(s.port, "/threads/" + tid + "/runs").json().as_array();
        if (!runs.empty()) rid = std::string(runs[0].at("run_id").as_string());
        else std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_TEST_REQUIRE(!rid.empty());
    events = joined(tid, rid);
    auto slow = waiting.get();
    BOOST_TEST_REQUIRE(slow.status == 200u, slow.body);
    BOOST_TEST_REQUIRE(events.size() == 2u);
    BOOST_TEST(events[0].event == "metadata");
    BOOST_TEST(events[1].data == json::parse(slow.body));

    auto bad = post(s.port, "/threads/" + new_thread(s.port) + "/runs/wait",
                    json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}, {"stream_resumable", "yes"}});
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("stream_resumable") != std::string::npos, bad.detail());
}

BOOST_AUTO_TEST_CASE(runs_queued_per_thread_are_bounded) {
    auto o = test_options();
    o.max_queued_runs_per_thread = 2;
    running_server s(std::move(o));
    auto tid = new_thread(s.port);
    json::object slow{{"assistant_id", "chat"}, {"input", json::object{{"question", "slow"}}}, {"multitask_strategy", "enqueue"}};
    std::vector<std::string> ids;
    for (int i = 0; i < 2; ++i) {
        auto r = post(s.port, "/threads/" + tid + "/runs", slow);
        BOOST_TEST_REQUIRE(r.status == 200u);
        ids.emplace_back(r.json().at("run_id").as_string());
    }
    auto full = post(s.port, "/threads/" + tid + "/runs", slow);
    BOOST_TEST_REQUIRE(full.status == 429u);
    BOOST_TEST(full.detail().find(tid) != std::string::npos);
    BOOST_TEST(full.detail().find("max_queued_runs_per_thread") != std::string::npos);
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs").json().as_array().size() == 2u); // nothing was made
    // a cancelled run no longer counts
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + ids[1] + "/cancel", json::object{}).status == 202u);
    auto again = post(s.port, "/threads/" + tid + "/runs", slow);
    BOOST_TEST(again.status == 200u);
    BOOST_TEST(post(s.port, "/threads/" + tid + "/runs/" + ids[0] + "/cancel", json::object{}).status == 202u);
    if (again.status == 200u)
        post(s.port, "/threads/" + tid + "/runs/" + std::string(again.json().at("run_id").as_string()) + "/cancel?wait=1", json::object{});
}

BOOST_AUTO_TEST_CASE(open_connections_are_bounded) {
    auto o = test_options();
    o.max_connections = 2;
    o.read_timeout = std::chrono::milliseconds(3000);
    running_server s(std::move(o));
    {
        net::io_context io;
        tcp::socket a(io), b(io);
        a.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
        b.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
        std::this_thread::sleep_for(std::chrono::milliseconds(100)); // both accepted
        auto refused = get(s.port, "/ok");
        BOOST_TEST_REQUIRE(refused.status == 503u);
        BOOST_TEST(refused.detail().find("max_connections") != std::string::npos);
        BOOST_TEST(refused.headers["Retry-After"] == "1");
    }
    // the two idle connections closed: room again
    unsigned status = 0;
    for (int i = 0; i < 100 && status != 200u; ++i) {
        status = get(s.port, "/ok").status;
        if (status != 200u) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    BOOST_TEST(status == 200u);
}

BOOST_AUTO_TEST_CASE(a_client_leaving_a_stream_cancels_its_run_at_once) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    json::object body{{"assistant_id", "chat"}, {"input", json::object{{"question", "stall"}}}, {"on_disconnect", "cancel"}};
    const std::string text = json::serialize(body);
    std::string rid;
    {
        net::io_context io;
        tcp::socket sock(io);
        sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
        std::string req = "POST /threads/" + tid + "/runs/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
        net::write(sock, net::buffer(req));
        const std::string got = read_until(sock, "event: metadata", std::chrono::seconds(10));
        auto at = got.find("/runs/");
        BOOST_TEST_REQUIRE(at != std::string::npos);
        rid = got.substr(at + 6, 36);
    } // the client leaves while the node waits (30 s, no event to write meanwhile)
    BOOST_TEST(run_status_settled(s.port, tid, rid, std::chrono::seconds(3)) == "interrupted");
    std::string thread_status;
    for (int i = 0; i < 100; ++i) { // the run's end settles the thread (its state refreshed)
        thread_status = std::string(get(s.port, "/threads/" + tid).json().at("status").as_string());
        if (thread_status != "busy") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    BOOST_TEST(thread_status != "busy");
}

// /runs/wait: a run that ends within a second is answered in one piece (Content-Length); a
// longer one gets a chunked answer at the first second, a newline each second after, and a
// client leaving it with on_disconnect "cancel" cancels the run at its next newline.
BOOST_AUTO_TEST_CASE(a_wait_is_answered_whole_or_kept_alive_past_a_second) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    auto request = [&](const json::object& body) {
        const std::string text = json::serialize(body);
        return "POST /threads/" + tid + "/runs/wait HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               "Connection: close\r\nContent-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
    };
    json::object quick{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}};
    const std::string whole = raw(s.port, request(quick));
    BOOST_TEST(whole.rfind("HTTP/1.1 200", 0) == 0u, whole);
    BOOST_TEST(whole.find("Content-Length: ") != std::string::npos, whole);
    BOOST_TEST(whole.find("chunked") == std::string::npos, whole);
    auto body_at = whole.find("\r\n\r\n");
    BOOST_TEST_REQUIRE(body_at != std::string::npos);
    BOOST_TEST(json::parse(whole.substr(body_at + 4)).at("log").as_array().size() == 2u);

    json::object stall{{"assistant_id", "chat"}, {"input", json::object{{"question", "stall"}}}, {"on_disconnect", "cancel"}};
    std::string rid;
    {
        net::io_context io;
        tcp::socket sock(io);
        sock.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), s.port));
        net::write(sock, net::buffer(request(stall)));
        const auto began = std::chrono::steady_clock::now();
        // the headers, then the first newline as a chunk of one byte ("1\r\n\n\r\n")
        const std::string got = read_until(sock, "1\r\n\n\r\n", std::chrono::seconds(5));
        BOOST_TEST(got.find("1\r\n\n\r\n") != std::string::npos, got);
        const bool not_before_a_second = std::chrono::steady_clock::now() - began >= std::chrono::milliseconds(900);
        BOOST_TEST(not_before_a_second);
        BOOST_TEST(got.find("Transfer-Encoding: chunked") != std::string::npos, got);
        auto at = got.find("/runs/");
        BOOST_TEST_REQUIRE(at != std::string::npos);
        rid = got.substr(at + 6, 36);
    } // the client leaves while the node stalls
    BOOST_TEST(run_status_settled(s.port, tid, rid, std::chrono::seconds(5)) == "interrupted");
}

// -- the Store endpoints ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(store_items_search_namespaces) {
    auto o = test_options();
    o.store = std::make_shared<sg::store::memory_store>();
    running_server s(std::move(o));
    BOOST_TEST(get(s.port, "/info").json().at("flags").at("store").as_bool());
    auto put = [&](json::array ns, const std::string& key, json::object value) {
        json::object body{{"namespace", std::move(ns)}, {"key", key}, {"value", std::move(value)}};
        return call(s.port, http::verb::put, "/store/items", json::serialize(body));
    };
    BOOST_TEST(put(json::array{"users", "u1", "facts"}, "f1", json::object{{"text", "likes coffee"}, {"n", 1}}).status == 204u);
    BOOST_TEST(put(json::array{"users", "u1", "facts"}, "f2", json::object{{"text", "plays chess"}, {"n", 2}}).status == 204u);
    BOOST_TEST(put(json::array{"users", "u2", "facts"}, "f1", json::object{{"text", "drinks tea"}, {"n", 3}}).status == 204u);
    json::object not_indexed{{"namespace", json::array{"users", "u2", "notes"}}, {"key", "n1"},
                             {"value", json::object{{"text", "coffee"}}}, {"index", false}, {"ttl", 5}};
    BOOST_TEST(call(s.port, http::verb::put, "/store/items", json::serialize(not_indexed)).status == 204u);

    auto got = get(s.port, "/store/items?namespace=users.u1.facts&key=f1");
    BOOST_TEST_REQUIRE(got.status == 200u);
    auto item = got.json().as_object();
    BOOST_TEST(item.at("namespace") == (json::array{"users", "u1", "facts"}));
    BOOST_TEST(item.at("key") == "f1");
    BOOST_TEST(item.at("value").at("text") == "likes coffee");
    BOOST_TEST(item.at("created_at").as_string().size() > 10u);
    BOOST_TEST(item.at("updated_at").is_string());
    auto missing = get(s.port, "/store/items?namespace=users.u1.facts&key=nope");
    BOOST_TEST(missing.status == 200u);
    BOOST_TEST(missing.json().is_null());

    // search: by prefix, by filter, ranked by a query, paged
    auto found = post(s.port, "/store/items/search", json::object{{"namespace_prefix", json::array{"users"}}, {"limit", 10}});
    BOOST_TEST_REQUIRE(found.status == 200u);
    BOOST_TEST(found.json().at("items").as_array().size() == 4u);
    auto filtered = post(s.port, "/store/items/search",
                         json::object{{"namespace_prefix", json::array{"users"}}, {"filter", json::object{{"n", json::object{{"$gte", 2}}}}}});
    BOOST_TEST(filtered.json().at("items").as_array().size() == 2u);
    auto ranked = post(s.port, "/store/items/search", json::object{{"namespace_prefix", json::array{"users"}}, {"query", "coffee"}});
    auto ranked_items = ranked.json().at("items").as_array();
    BOOST_TEST_REQUIRE(ranked_items.size() == 1u); // the note with the same word is not indexed
    BOOST_TEST(ranked_items[0].at("key") == "f1");
    BOOST_TEST(ranked_items[0].at("score").is_number());
    auto paged = post(s.port, "/store/items/search",
                      json::object{{"namespace_prefix", json::array{"users", "u1"}}, {"limit", 1}, {"offset", 1}});
    BOOST_TEST(paged.json().at("items").as_array().size() == 1u);

    // namespaces: all, by prefix, by suffix with a wildcard, cut at a depth
    auto all = post(s.port, "/store/namespaces", json::object{});
    BOOST_TEST_REQUIRE(all.status == 200u);
    BOOST_TEST(all.json().at("namespaces").as_array().size() == 3u);
    auto notes = post(s.port, "/store/namespaces", json::object{{"suffix", json::array{"notes"}}});
    BOOST_TEST(notes.json().at("namespaces") == (json::array{json::array{"users", "u2", "notes"}}));
    auto u2 = post(s.port, "/store/namespaces", json::object{{"prefix", json::array{"users", "u2"}}});
    BOOST_TEST(u2.json().at("namespaces").as_array().size() == 2u);
    auto depth = post(s.port, "/store/namespaces", json::object{{"max_depth", 2}});
    BOOST_TEST(depth.json().at("namespaces") == (json::array{json::array{"users", "u1"}, json::array{"users", "u2"}}));

    // delete
    json::object del{{"namespace", json::array{"users", "u1", "facts"}}, {"key", "f1"}};
    BOOST_TEST(call(s.port, http::verb::delete_, "/store/items", json::serialize(del)).status == 204u);
    BOOST_TEST(get(s.port, "/store/items?namespace=users.u1.facts&key=f1").json().is_null());
}

BOOST_AUTO_TEST_CASE(store_bad_input_and_no_store) {
    {
        running_server none(test_options());
        auto r = get(none.port, "/store/items?namespace=a&key=k");
        BOOST_TEST(r.status == 404u);
        BOOST_TEST(r.detail().find("no Store is configured") != std::string::npos);
        BOOST_TEST(post(none.port, "/store/namespaces", json::object{}).status == 404u);
        BOOST_TEST(!get(none.port, "/info").json().at("flags").at("store").as_bool());
    }
    auto o = test_options();
    o.store = std::make_shared<sg::store::memory_store>();
    running_server s(std::move(o));
    auto put = [&](const json::object& body) { return call(s.port, http::verb::put, "/store/items", json::serialize(body)); };
    auto expect = [](const reply& r, unsigned status, const std::string& words) {
        BOOST_TEST(r.status == status);
        if (r.status == status) {
            auto d = r.detail();
            BOOST_TEST(d.find(words) != std::string::npos, "detail '" << d << "' should name '" << words << "'");
        }
    };
    expect(put(json::object{{"key", "k"}, {"value", json::object{}}}), 422u, "namespace");
    expect(put(json::object{{"namespace", "a.b"}, {"key", "k"}, {"value", json::object{}}}), 422u, "namespace");
    expect(put(json::object{{"namespace", json::array{"a", 1}}, {"key", "k"}, {"value", json::object{}}}), 422u, "namespace[1]");
    expect(put(json::object{{"namespace", json::array{"a.b"}}, {"key", "k"}, {"value", json::object{}}}), 422u, "a.b");
    expect(put(json::object{{"namespace", json::array{}}, {"key", "k"}, {"value", json::object{}}}), 422u, "namespace");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"value", json::object{}}}), 422u, "key");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"key", ""}, {"value", json::object{}}}), 422u, "key");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"key", "k"}}), 422u, "value");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"key", "k"}, {"value", 3}}), 422u, "value");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"key", "k"}, {"value", json::object{}}, {"index", "text"}}), 422u, "index");
    expect(put(json::object{{"namespace", json::array{"a"}}, {"key", "k"}, {"value", json::object{}}, {"ttl", -1}}), 422u, "ttl");
    expect(call(s.port, http::verb::put, "/store/items", "{not json"), 400u, "malformed JSON");
    expect(get(s.port, "/store/items?key=k"), 422u, "namespace");
    expect(get(s.port, "/store/items?namespace=a"), 422u, "key");
    expect(get(s.port, "/store/items?namespace=a..b&key=k"), 422u, "namespace");
    expect(call(s.port, http::verb::delete_, "/store/items", json::serialize(json::object{{"namespace", json::array{"a"}}})), 422u, "key");
    expect(post(s.port, "/store/items/search", json::object{{"namespace_prefix", "a"}}), 422u, "namespace_prefix");
    expect(post(s.port, "/store/items/search", json::object{{"filter", json::object{{"n", json::object{{"$near", 1}}}}}}), 422u, "$near");
    expect(post(s.port, "/store/items/search", json::object{{"limit", -1}}), 422u, "limit");
    expect(post(s.port, "/store/namespaces", json::object{{"max_depth", "two"}}), 422u, "max_depth");
    expect(post(s.port, "/store/namespaces", json::object{{"suffix", json::array{""}}}), 422u, "namespace");
    expect(get(s.port, "/store/elsewhere"), 404u, "no route");
}

// Issue 24: with API keys the Store is scoped per key as threads are: another key neither reads,
// finds, lists nor deletes a key's items, and both may use the same namespace and key.
BOOST_AUTO_TEST_CASE(store_is_scoped_per_api_key) {
    auto o = test_options();
    o.api_keys = {"key-one", "key-two"};
    o.store = std::make_shared<sg::store::memory_store>();
    running_server s(std::move(o));
    const std::map<std::string, std::string> one{{"x-api-key", "key-one"}}, two{{"x-api-key", "key-two"}};
    auto put = [&](const std::map<std::string, std::string>& who, const std::string& text) {
        json::object body{{"namespace", json::array{"users", "u1"}}, {"key", "k"}, {"value", json::object{{"text", text}}}};
        return call(s.port, http::verb::put, "/store/items", json::serialize(body), who);
    };
    BOOST_TEST(put(one, "coffee").status == 204u);
    const std::string item = "/store/items?namespace=users.u1&key=k";
    auto mine = get(s.port, item, one);
    BOOST_TEST_REQUIRE(mine.status == 200u);
    BOOST_TEST(mine.json().at("namespace") == (json::array{"users", "u1"})); // the key's label is not shown
    BOOST_TEST(mine.json().at("value").at("text") == "coffee");

    // The other key: nothing to read, find or list; its delete removes nothing of the first's.
    BOOST_TEST(get(s.port, item, two).json().is_null());
    BOOST_TEST(post(s.port, "/store/items/search", json::object{}, two).json().at("items").as_array().empty());
    BOOST_TEST(post(s.port, "/store/items/search", json::object{{"query", "coffee"}}, two).json().at("items").as_array().empty());
    BOOST_TEST(post(s.port, "/store/namespaces", json::object{}, two).json().at("namespaces").as_array().empty());
    json::object del{{"namespace", json::array{"users", "u1"}}, {"key", "k"}};
    BOOST_TEST(call(s.port, http::verb::delete_, "/store/items", json::serialize(del), two).status == 204u);
    BOOST_TEST(get(s.port, item, one).json().at("value").at("text") == "coffee");

    // The same namespace and key under the other key: two items.
    BOOST_TEST(put(two, "tea").status == 204u);
    BOOST_TEST(get(s.port, item, one).json().at("value").at("text") == "coffee");
    BOOST_TEST(get(s.port, item, two).json().at("value").at("text") == "tea");
    auto found = post(s.port, "/store/items/search", json::object{{"namespace_prefix", json::array{"users"}}}, one).json();
    BOOST_TEST_REQUIRE(found.at("items").as_array().size() == 1u);
    BOOST_TEST(found.at("items").at(0).at("namespace") == (json::array{"users", "u1"}));
    BOOST_TEST(found.at("items").at(0).at("value").at("text") == "coffee");

    // Namespaces as the key sees them: cut at a depth, by suffix (never matching the key's label).
    auto listed = [&](const json::object& body) { return post(s.port, "/store/namespaces", body, one).json().at("namespaces"); };
    BOOST_TEST(listed(json::object{}) == (json::array{json::array{"users", "u1"}}));
    BOOST_TEST(listed(json::object{{"max_depth", 1}}) == (json::array{json::array{"users"}}));
    BOOST_TEST(listed(json::object{{"suffix", json::array{"u1"}}}) == (json::array{json::array{"users", "u1"}}));
    BOOST_TEST(listed(json::object{{"suffix", json::array{"*", "users", "u1"}}}).as_array().empty());
    BOOST_TEST(listed(json::object{{"prefix", json::array{"users"}}}) == (json::array{json::array{"users", "u1"}}));

    // The key's own delete removes its item only.
    BOOST_TEST(call(s.port, http::verb::delete_, "/store/items", json::serialize(del), one).status == 204u);
    BOOST_TEST(get(s.port, item, one).json().is_null());
    BOOST_TEST(get(s.port, item, two).json().at("value").at("text") == "tea");
}

// Issue 24: a thread id is the key's own: POST /threads with an id another key holds answers as
// for a free id (the caller's own thread is made), so it learns nothing of the other's; the two
// threads of one id stay apart (state, runs, delete) and across a restart.
BOOST_AUTO_TEST_CASE(thread_ids_are_per_api_key) {
    auto saver = std::make_shared<sg::checkpoint::memory_saver>();
    auto o = test_options();
    o.api_keys = {"key-one", "key-two"};
    o.runs = srv::open_sqlite_run_store(":memory:"); // the records' storage, shared by both servers
    const std::map<std::string, std::string> one{{"x-api-key", "key-one"}}, two{{"x-api-key", "key-two"}};
    const std::string tid = "6f1d2c3b-4a59-4e6f-8a7b-9c0d1e2f3a4b", taken = "7a2b3c4d-5e6f-4a1b-9c2d-3e4f5a6b7c8d";
    {
        running_server s(o, {}, saver);
        auto first = post(s.port, "/threads", json::object{{"thread_id", tid}, {"metadata", json::object{{"who", "one"}}}}, one);
        BOOST_TEST_REQUIRE(first.status == 200u);
        auto w = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "hi"}}}}, one);
        BOOST_TEST_REQUIRE(w.status == 200u);

        // The other key: the same answer as for an id nobody holds (200, its own new thread).
        auto free_id = post(s.port, "/threads", json::object{{"thread_id", taken}, {"metadata", json::object{{"who", "two"}}}}, two);
        auto same_id = post(s.port, "/threads", json::object{{"thread_id", tid}, {"metadata", json::object{{"who", "two"}}}}, two);
        BOOST_TEST(same_id.status == free_id.status);
        BOOST_TEST_REQUIRE(same_id.status == 200u);
        BOOST_TEST(same_id.json().at("thread_id").as_string() == tid);
        BOOST_TEST(same_id.json().at("metadata") == free_id.json().at("metadata"));
        BOOST_TEST(same_id.json().at("values").is_null()); // not the first key's state
        BOOST_TEST(same_id.json().at("status") == "idle");
        // Its own thread now: raise / do_nothing as for any of its ids.
        BOOST_TEST(post(s.port, "/threads", json::object{{"thread_id", tid}}, two).status == 409u);
        auto mine = post(s.port, "/threads", json::object{{"thread_id", tid}, {"if_exists", "do_nothing"}}, two);
        BOOST_TEST(mine.json().at("metadata").at("who") == "two");

        // Apart: state, runs, metadata; a run of the second does not touch the first's.
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", two).json().at("checkpoint").is_null());
        BOOST_TEST(get(s.port, "/threads/" + tid + "/runs", two).json().as_array().empty());
        auto w2 = post(s.port, "/threads/" + tid + "/runs/wait",
                       json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "other"}}}}, two);
        BOOST_TEST(w2.status == 200u);
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", one).json().at("values").at("question") == "hi");
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", two).json().at("values").at("question") == "other");
        BOOST_TEST(get(s.port, "/threads/" + tid + "/runs", one).json().as_array().size() == 1u);
        BOOST_TEST(get(s.port, "/threads/" + tid, one).json().at("metadata").at("who") == "one");
        // A run that creates its thread (if_not_exists) on an id the other key holds: its own too.
        const std::string third = "8b3c4d5e-6f7a-4b2c-8d3e-4f5a6b7c8d9e";
        BOOST_TEST(post(s.port, "/threads", json::object{{"thread_id", third}}, one).status == 200u);
        auto made = post(s.port, "/threads/" + third + "/runs/wait",
                         json::object{{"assistant_id", "chat"}, {"if_not_exists", "create"}, {"input", json::object{{"question", "x"}}}}, two);
        BOOST_TEST(made.status == 200u);
        BOOST_TEST(get(s.port, "/threads/" + third + "/state", one).json().at("checkpoint").is_null());
    }
    {
        // After a restart on the same storage, each key has its thread of that id, as it was.
        running_server s(o, {}, saver);
        BOOST_TEST(get(s.port, "/threads/" + tid, one).json().at("metadata").at("who") == "one");
        BOOST_TEST(get(s.port, "/threads/" + tid, two).json().at("metadata").at("who") == "two");
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", one).json().at("values").at("question") == "hi");
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", two).json().at("values").at("question") == "other");
        // Deleting the second key's removes only its own.
        BOOST_TEST(call(s.port, http::verb::delete_, "/threads/" + tid, "", two).status == 204u);
        BOOST_TEST(get(s.port, "/threads/" + tid, two).status == 404u);
        BOOST_TEST(get(s.port, "/threads/" + tid + "/state", one).json().at("values").at("question") == "hi");
    }
}

// Issue 24: a number no double holds (1e999999) anywhere in a body is a 422 naming its path, and
// nothing is stored (Boost.JSON reads it as infinity, which it would write back as `Infinity`).
BOOST_AUTO_TEST_CASE(numbers_too_large_for_a_double_are_refused) {
    auto o = test_options();
    o.store = std::make_shared<sg::store::memory_store>();
    running_server s(std::move(o));
    auto tid = new_thread(s.port);
    auto expect_422 = [](const reply& r, const std::string& path) {
        BOOST_TEST(r.status == 422u);
        if (r.status == 422u) {
            auto d = r.detail();
            BOOST_TEST(d.find("'" + path + "'") != std::string::npos, "detail '" << d << "' should name '" << path << "'");
        }
    };
    expect_422(call(s.port, http::verb::post, "/threads", R"({"metadata":{"a":1e999999}})"), "metadata.a");
    expect_422(call(s.port, http::verb::post, "/threads", R"({"metadata":{"a":{"b":[1,-1e999999]}}})"), "metadata.a.b[1]");
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 1); // only tid
    expect_422(call(s.port, http::verb::patch, "/threads/" + tid, R"({"metadata":{"n":-1e999999}})"), "metadata.n");
    BOOST_TEST(!get(s.port, "/threads/" + tid).json().at("metadata").as_object().contains("n"));
    const std::string runs = "/threads/" + tid + "/runs/wait";
    expect_422(call(s.port, http::verb::post, runs, R"({"assistant_id":"chat","input":{"question":"hi","log":[1e999999]}})"),
               "input.log[0]");
    expect_422(call(s.port, http::verb::post, runs, R"({"assistant_id":"chat","config":{"recursion_limit":1e999999}})"),
               "config.recursion_limit");
    expect_422(call(s.port, http::verb::post, runs, R"({"assistant_id":"chat","command":{"resume":-1e999999}})"), "command.resume");
    expect_422(call(s.port, http::verb::post, "/runs/wait", R"({"assistant_id":"chat","metadata":{"x":1e999999}})"), "metadata.x");
    BOOST_TEST(get(s.port, "/threads/" + tid + "/runs").json().as_array().empty());
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 1);
    expect_422(call(s.port, http::verb::put, "/store/items", R"({"namespace":["a"],"key":"k","value":{"x":1e999999}})"), "value.x");
    BOOST_TEST(get(s.port, "/store/items?namespace=a&key=k").json().is_null());
    // Large numbers that fit stay accepted.
    BOOST_TEST(call(s.port, http::verb::post, "/threads", R"({"metadata":{"a":1e308,"b":-1.7e308}})").status == 200u);
}

/// A graph whose node writes a number no JSON text can hold (what a computation may give).
struct numbers_state {
    double x = 0;
};
BOOST_DESCRIBE_STRUCT(numbers_state, (), (x))
sg::compiled_graph<numbers_state> build_numbers() {
    sg::state_graph<numbers_state> g("numbers");
    g.add_node("overflow", [](const numbers_state&) {
        return sg::update<numbers_state>{}.set<&numbers_state::x>(std::numeric_limits<double>::infinity());
    });
    g.add_edge(sg::START, "overflow").add_edge("overflow", sg::END);
    return g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
}

// What the server writes is JSON a strict reader takes even when a graph computed a non-finite
// number: it is written as null (as JavaScript's JSON.stringify does), never `Infinity`.
BOOST_AUTO_TEST_CASE(non_finite_numbers_a_graph_computes_are_written_as_null) {
    std::vector<srv::assistant_spec> more{srv::make_assistant("numbers", build_numbers())};
    running_server s(test_options(), std::move(more));
    auto tid = new_thread(s.port);
    auto done = post(s.port, "/threads/" + tid + "/runs/wait", json::object{{"assistant_id", "numbers"}, {"input", json::object{}}});
    BOOST_TEST(done.status == 200u);
    BOOST_TEST(done.body.find("Infinity") == std::string::npos, done.body);
    boost::system::error_code ec;
    auto v = json::parse(done.body, ec);
    BOOST_TEST_REQUIRE(!ec);
    BOOST_TEST(v.at("x").is_null());
    // The events of a stream likewise. (The checkpoint itself cannot be read back: the codec
    // writes `Infinity`, a checkpoint-layer matter.)
    auto streamed = post(s.port, "/runs/stream", json::object{{"assistant_id", "numbers"}, {"input", json::object{}}});
    BOOST_TEST(streamed.status == 200u);
    BOOST_TEST(streamed.body.find("Infinity") == std::string::npos);
    bool seen = false;
    for (const auto& e : parse_sse(streamed.body))
        if (e.event == "values") seen = e.data.at("x").is_null();
    BOOST_TEST(seen);
}

// Issue 24: a detail that echoes a part of the request (here a thread id in the path holding an
// invalid byte) is valid UTF-8, the bad bytes replaced by U+FFFD: a strict parser reads it.
BOOST_AUTO_TEST_CASE(error_details_are_valid_utf8) {
    running_server s(test_options());
    auto bad = get(s.port, "/threads/ab%FFcd");
    BOOST_TEST(bad.status == 422u);
    boost::system::error_code ec;
    auto v = json::parse(bad.body, ec); // strict: invalid UTF-8 is an error
    BOOST_TEST_REQUIRE(!ec, "the answer is not valid JSON: " << ec.message());
    std::string detail(v.at("detail").as_string());
    BOOST_TEST(detail.find("ab\xEF\xBF\xBD" "cd") != std::string::npos, detail);
    // A truncated sequence in a run id, and bytes in a store namespace, likewise.
    auto tid = new_thread(s.port);
    auto run = get(s.port, "/threads/" + tid + "/runs/x%E2%82");
    BOOST_TEST(run.status == 422u);
    BOOST_TEST(run.detail().find("x\xEF\xBF\xBD") != std::string::npos);
    auto route = get(s.port, "/nowhere/%C0%AF");
    BOOST_TEST(route.status == 404u);
    BOOST_TEST(!json::parse(route.body, ec).is_null());
    BOOST_TEST(!ec);
}

// Issue 24: POST /threads/{id}/copy refuses a body that is not JSON, not an object or that has
// fields (it takes none), naming the problem, and copies nothing.
BOOST_AUTO_TEST_CASE(copy_refuses_a_malformed_body) {
    running_server s(test_options());
    auto tid = new_thread(s.port);
    const std::string copy = "/threads/" + tid + "/copy";
    auto not_json = call(s.port, http::verb::post, copy, "{not json");
    BOOST_TEST(not_json.status == 400u);
    BOOST_TEST(not_json.detail().find("malformed JSON") != std::string::npos);
    auto list = call(s.port, http::verb::post, copy, "[1]");
    BOOST_TEST(list.status == 422u);
    BOOST_TEST(list.detail().find("must be a JSON object") != std::string::npos);
    auto text = call(s.port, http::verb::post, copy, "\"x\"");
    BOOST_TEST(text.status == 422u);
    auto field = post(s.port, copy, json::object{{"metadata", 5}});
    BOOST_TEST(field.status == 422u);
    BOOST_TEST(field.detail().find("'metadata'") != std::string::npos);
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 1);
    // No body, or {}: copied.
    BOOST_TEST(call(s.port, http::verb::post, copy).status == 200u);
    BOOST_TEST(post(s.port, copy, json::object{}).status == 200u);
    BOOST_TEST(post(s.port, "/threads/count", json::object{}).json().as_int64() == 3);
}

BOOST_AUTO_TEST_SUITE_END()

// -- the studio page (GET /studio) and the graph as SVG (dot -Tsvg) ------------------------------
namespace {

/// The chat graph again, its nodes in two stages (drawn as clusters).
sg::compiled_graph<chat_state> build_staged() {
    sg::state_graph<chat_state> g("staged");
    g.add_node("work", work, {.stage = "1. Work"}).add_node("ask", ask, {.stage = "2. Review"});
    g.add_edge(sg::START, "work").add_edge("work", "ask").add_edge("ask", sg::END);
    return g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
}

/// Serves one more graph (on the server's thread, where every call of the server belongs).
void add_assistant(running_server& s, srv::assistant_spec spec) {
    std::promise<void> done;
    net::post(s.io, [&] {
        s.server->add(std::move(spec));
        done.set_value();
    });
    done.get_future().get();
}

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto i = text.find(what); i != std::string::npos; i = text.find(what, i + what.size())) ++n;
    return n;
}

/// A program that takes its time (a `dot` that hangs); removed with the object.
struct slow_program {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("stategraph-slow-dot-" + std::to_string(std::random_device{}()));
    slow_program() {
        std::ofstream(path) << "#!/bin/sh\nexec sleep 30\n";
        std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    }
    ~slow_program() { std::filesystem::remove(path); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(studio)

BOOST_AUTO_TEST_CASE(page_and_assets) {
    running_server s(test_options());
    auto page = get(s.port, "/studio");
    BOOST_TEST(page.status == 200u);
    BOOST_TEST(page.headers.at("Content-Type").rfind("text/html", 0) == 0u);
    BOOST_TEST(page.body.find("<script src=\"/studio/app.js\">") != std::string::npos);
    BOOST_TEST(page.body.find("id=\"timeline\"") != std::string::npos);
    BOOST_TEST(get(s.port, "/studio/").body == page.body);
    BOOST_TEST(get(s.port, "/studio/index.html").body == page.body);
    auto js = get(s.port, "/studio/app.js");
    BOOST_TEST(js.status == 200u);
    BOOST_TEST(js.headers.at("Content-Type").rfind("text/javascript", 0) == 0u);
    // The page speaks the server's own API: runs streamed, resumed, forked from a checkpoint.
    for (const char* call_of_page : {"/runs/stream", "command: { resume }", "/history", "checkpoint_id", "format=svg"})
        BOOST_TEST(js.body.find(call_of_page) != std::string::npos, call_of_page);
    auto css = get(s.port, "/studio/app.css");
    BOOST_TEST(css.status == 200u);
    BOOST_TEST(css.headers.at("Content-Type").rfind("text/css", 0) == 0u);

    auto missing = get(s.port, "/studio/nope.js");
    BOOST_TEST(missing.status == 404u);
    BOOST_TEST(missing.detail().find("/studio/nope.js") != std::string::npos);
    BOOST_TEST(missing.detail().find("the page is at /studio") != std::string::npos);
    BOOST_TEST(get(s.port, "/studio/app.js/more").status == 404u);
    BOOST_TEST(post(s.port, "/studio", json::object{}).status == 404u);
}

BOOST_AUTO_TEST_CASE(page_needs_no_key_the_api_does) {
    auto o = test_options();
    o.api_keys = {"k1"};
    running_server s(o);
    BOOST_TEST(get(s.port, "/studio").status == 200u);
    BOOST_TEST(get(s.port, "/studio/app.js").status == 200u);
    BOOST_TEST(get(s.port, "/assistants/chat/graph?format=svg").status == 401u);
    BOOST_TEST(get(s.port, "/assistants/chat/graph?format=svg", {{"x-api-key", "k1"}}).status == 200u);
}

BOOST_AUTO_TEST_CASE(graph_as_svg_with_stages_as_clusters) {
    running_server s(test_options());
    add_assistant(s, srv::make_assistant("staged", build_staged()));
    auto svg = get(s.port, "/assistants/staged/graph?format=svg");
    BOOST_TEST_REQUIRE(svg.status == 200u);
    BOOST_TEST(svg.headers.at("Content-Type") == "image/svg+xml");
    BOOST_TEST(svg.body.find("<svg") != std::string::npos);
    BOOST_TEST(svg.body.find("</svg>") != std::string::npos);
    BOOST_TEST(count_of(svg.body, "class=\"cluster\"") == 2u);
    BOOST_TEST(svg.body.find("1. Work") != std::string::npos);
    BOOST_TEST(svg.body.find("2. Review") != std::string::npos);
    auto plain = get(s.port, "/assistants/chat/graph?format=svg");
    BOOST_TEST(plain.status == 200u);
    BOOST_TEST(count_of(plain.body, "class=\"cluster\"") == 0u);
    BOOST_TEST(plain.body.find("<title>work</title>") != std::string::npos);
    BOOST_TEST(plain.body.find("<title>ask</title>") != std::string::npos);
    auto bad = get(s.port, "/assistants/chat/graph?format=png");
    BOOST_TEST(bad.status == 422u);
    BOOST_TEST(bad.detail().find("json, dot or svg") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(graph_with_a_thread_drawn_on_it) {
    running_server s(test_options());
    add_assistant(s, srv::make_assistant("staged", build_staged()));
    auto tid = new_thread(s.port);
    auto run = post(s.port, "/threads/" + tid + "/runs/wait",
                    json::object{{"assistant_id", "chat"}, {"input", json::object{{"question", "ask"}}}});
    BOOST_TEST_REQUIRE(run.status == 200u);
    auto hist = post(s.port, "/threads/" + tid + "/history", json::object{}).json().as_array();
    BOOST_TEST_REQUIRE(hist.size() >= 3u);
    std::string latest(hist.front().at("checkpoint").at("checkpoint_id").as_string());
    std::string oldest(hist.back().at("checkpoint").at("checkpoint_id").as_string());

    // The latest checkpoint: the path to ask, which waits on its interrupt.
    auto dot = get(s.port, "/assistants/chat/graph?format=dot&thread_id=" + tid);
    BOOST_TEST_REQUIRE(dot.status == 200u);
    BOOST_TEST(dot.body.find("thread " + tid + " at checkpoint " + latest) != std::string::npos);
    BOOST_TEST(dot.body.find("waiting: interrupt") != std::string::npos);
    auto svg = get(s.port, "/assistants/chat/graph?format=svg&thread_id=" + tid);
    BOOST_TEST(svg.status == 200u);
    BOOST_TEST(svg.body.find("waiting: interrupt") != std::string::npos);
    // An earlier checkpoint: nothing waits there yet.
    auto early = get(s.port, "/assistants/chat/graph?format=dot&thread_id=" + tid + "&checkpoint_id=" + oldest);
    BOOST_TEST(early.status == 200u);
    BOOST_TEST(early.body.find("at checkpoint " + oldest) != std::string::npos);
    BOOST_TEST(early.body.find("waiting: interrupt") == std::string::npos);

    // Each bad thread or checkpoint is named.
    auto no_cp = get(s.port, "/assistants/chat/graph?format=svg&thread_id=" + tid + "&checkpoint_id=nope");
    BOOST_TEST(no_cp.status == 404u);
    BOOST_TEST(no_cp.detail().find("checkpoint 'nope'") != std::string::npos);
    BOOST_TEST(no_cp.detail().find(tid) != std::string::npos);
    auto no_thread = get(s.port, "/assistants/chat/graph?format=svg&thread_id=11111111-2222-4333-8444-555555555555");
    BOOST_TEST(no_thread.status == 404u);
    BOOST_TEST(no_thread.detail().find("11111111-2222-4333-8444-555555555555") != std::string::npos);
    auto never_ran = new_thread(s.port, json::object{{"metadata", json::object{{"graph_id", "chat"}}}});
    auto empty = get(s.port, "/assistants/chat/graph?format=svg&thread_id=" + never_ran);
    BOOST_TEST(empty.status == 404u);
    BOOST_TEST(empty.detail().find("has no checkpoint") != std::string::npos);
    auto other = get(s.port, "/assistants/staged/graph?format=svg&thread_id=" + tid);
    BOOST_TEST(other.status == 422u);
    BOOST_TEST(other.detail().find("not a thread of graph 'staged'") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(svg_without_dot_is_501) {
    // Documented answer: 501 Not Implemented, the detail naming the program and the way out.
    for (std::string program : {"stategraph-no-such-dot", "/nonexistent/bin/dot"}) {
        auto o = test_options();
        o.dot_program = program;
        running_server s(o);
        auto r = get(s.port, "/assistants/chat/graph?format=svg");
        BOOST_TEST(r.status == 501u);
        BOOST_TEST(r.detail().find("Graphviz is not installed") != std::string::npos);
        BOOST_TEST(r.detail().find("'" + program + "'") != std::string::npos);
        BOOST_TEST(r.detail().find("?format=dot") != std::string::npos);
        BOOST_TEST(get(s.port, "/assistants/chat/graph?format=dot").status == 200u);
        BOOST_TEST(get(s.port, "/studio").status == 200u);
    }
}

BOOST_AUTO_TEST_CASE(svg_when_dot_fails_or_hangs) {
    auto o = test_options();
    o.dot_program = "false"; // runs, writes nothing, exits 1
    {
        running_server s(o);
        auto r = get(s.port, "/assistants/chat/graph?format=svg");
        BOOST_TEST(r.status == 500u);
        BOOST_TEST(r.detail().find("failed (exit 1)") != std::string::npos);
    }
    slow_program slow;
    o.dot_program = slow.path.string();
    o.dot_timeout = std::chrono::milliseconds(2000);
    running_server s(o);
    // While dot hangs, the server answers other requests: its thread does not wait for dot.
    std::atomic<bool> svg_done{false};
    reply r;
    auto started = std::chrono::steady_clock::now();
    std::thread svg_client([&] {
        r = get(s.port, "/assistants/chat/graph?format=svg");
        svg_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    BOOST_TEST(get(s.port, "/ok").status == 200u);
    BOOST_TEST(!svg_done.load()); // answered while dot was still running
    svg_client.join();
    auto took = std::chrono::steady_clock::now() - started;
    BOOST_TEST(r.status == 504u);
    BOOST_TEST(r.detail().find("took longer than 2000 ms") != std::string::npos);
    BOOST_TEST(took < std::chrono::seconds(25)); // killed, not waited for (it sleeps 30 s)
    BOOST_TEST(get(s.port, "/ok").status == 200u);
}

BOOST_AUTO_TEST_SUITE_END()
