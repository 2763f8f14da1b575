// Input and output schemas (LangGraph's input_schema / output_schema) and partial nested input.
//
// The partial nested input rule is a deliberate difference from LangGraph: there a dict channel
// written by an input or update_state is replaced whole; here a JSON object given for a nested
// described struct (a field without a reducer) sets the members it names and the others keep
// the thread's current values (their defaults on a new thread). An unknown member is an
// unknown_member_error naming the member and the struct.
#include <stategraph/json_shape.hpp>

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/test/unit_test.hpp>

#include "run_awaitable.hpp"

namespace sg = stategraph;
using sg::test::run;

namespace io_schema_test {

struct profile {
    std::string name;
    std::string city = "Berlin";
    int age = 0;
};
BOOST_DESCRIBE_STRUCT(profile, (), (name, city, age))

struct settings {
    std::string theme = "light";
    profile owner;
    std::vector<std::string> tags;
};
BOOST_DESCRIBE_STRUCT(settings, (), (theme, owner, tags))

struct st {
    settings conf;
    std::vector<std::string> log;
    std::string reply;
};
BOOST_DESCRIBE_STRUCT(st, (), (conf, log, reply))
inline auto reducers(sg::for_state<st>) { return sg::reducers{sg::reduce<&st::log>(sg::append)}; }
using upd = sg::update<st>;

/// What callers send: flat.
struct chat_in {
    std::string text;
    std::optional<std::string> theme;
};
BOOST_DESCRIBE_STRUCT(chat_in, (), (text, theme))

/// What callers get back.
struct chat_out {
    std::string reply;
    std::string theme;
    std::vector<std::string> path;
};
BOOST_DESCRIBE_STRUCT(chat_out, (), (reply, theme, path))

/// Input members named as state fields (by-name schema).
struct by_name_in {
    std::string reply;
};
BOOST_DESCRIBE_STRUCT(by_name_in, (), (reply))
struct not_fields {
    std::string replay;
};
BOOST_DESCRIBE_STRUCT(not_fields, (), (replay))

sg::state_graph<st> echo_graph() {
    sg::state_graph<st> g("echo");
    g.add_node("answer", [](const st& s) {
        return upd{}.set<&st::reply>(s.conf.owner.name + "@" + s.conf.owner.city + ":" + (s.log.empty() ? "" : s.log.back()));
    });
    g.add_edge(sg::START, "answer").add_edge("answer", sg::END);
    return g;
}

sg::compiled_graph<st> with_schemas() {
    auto g = echo_graph();
    g.input_schema<chat_in>([](const chat_in& in, const st& now) {
        auto c = now.conf;
        if (in.theme) c.theme = *in.theme;
        return upd{}.set<&st::log>({in.text}).set<&st::conf>(std::move(c));
    });
    g.output_schema<chat_out>([](const st& s, const sg::output_context& ctx) {
        return chat_out{s.reply, s.conf.theme, ctx.path};
    });
    return g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
}

boost::json::object obj(std::string_view text) { return boost::json::parse(text).as_object(); }

} // namespace io_schema_test
using namespace io_schema_test;

BOOST_AUTO_TEST_SUITE(io_schema)

BOOST_AUTO_TEST_CASE(merge_json_sets_named_members_and_keeps_the_others) {
    settings s;
    s.owner = {"Ann", "Paris", 30};
    s.tags = {"a"};
    sg::merge_json(s, boost::json::parse(R"({"owner": {"age": 31}, "tags": ["b"]})"), sg::errc::invalid_input, "conf");
    BOOST_TEST(s.owner.name == "Ann");
    BOOST_TEST(s.owner.city == "Paris");
    BOOST_TEST(s.owner.age == 31);
    BOOST_TEST(s.tags == (std::vector<std::string>{"b"})); // a list is replaced, not merged
    BOOST_TEST(s.theme == "light");
    try {
        sg::merge_json(s, boost::json::parse(R"({"owner": {"nmae": "x"}})"), sg::errc::invalid_input, "conf");
        BOOST_FAIL("an unknown member must throw");
    } catch (const sg::unknown_member_error& e) {
        BOOST_TEST(e.member() == "nmae");
        BOOST_TEST(e.type() == "profile");
        BOOST_TEST(e.kind() == sg::errc::invalid_input);
        BOOST_TEST(std::string(e.what()).find("conf.owner: 'nmae' is not a member of profile (did you mean 'name'?)") !=
                   std::string::npos, e.what());
    }
    BOOST_CHECK_THROW(sg::merge_json(s, boost::json::parse(R"({"owner": {"age": "old"}})"), sg::errc::invalid_input, "conf"),
                      sg::graph_error);
}

BOOST_AUTO_TEST_CASE(partial_nested_input_keeps_the_threads_values) {
    auto app = echo_graph().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    // A new thread: the members left out take their defaults (city "Berlin").
    auto r1 = run(app.invoke(sg::as_input(obj(R"({"conf": {"theme": "dark", "owner": {"name": "Ann", "age": 30}}, "log": ["hi"]})")), cfg));
    BOOST_TEST(r1.values.conf.theme == "dark");
    BOOST_TEST(r1.values.conf.owner.city == "Berlin");
    BOOST_TEST(r1.values.reply == "Ann@Berlin:hi");
    // The same thread: only the named member changes (LangGraph would replace `conf` whole).
    auto r2 = run(app.invoke(sg::as_input(obj(R"({"conf": {"owner": {"city": "Paris"}}, "log": ["again"]})")), cfg));
    BOOST_TEST(r2.values.conf.theme == "dark");
    BOOST_TEST(r2.values.conf.owner.name == "Ann");
    BOOST_TEST(r2.values.conf.owner.age == 30);
    BOOST_TEST(r2.values.conf.owner.city == "Paris");
    BOOST_TEST(r2.values.reply == "Ann@Paris:again");
    BOOST_TEST(r2.output.empty()); // no output schema declared

    // An unknown member names itself and its struct; nothing runs.
    try {
        run(app.invoke(sg::as_input(obj(R"({"conf": {"owner": {"town": "Rome"}}})")), cfg));
        BOOST_FAIL("an unknown member must throw");
    } catch (const sg::unknown_member_error& e) {
        BOOST_TEST(e.member() == "town");
        BOOST_TEST(e.type() == "profile");
        BOOST_TEST(e.names() == (std::vector<std::string>{"town", "profile"}));
    }
    // An unknown top-level field names the state.
    try {
        run(app.invoke(sg::as_input(obj(R"({"confg": {}})")), cfg));
        BOOST_FAIL("an unknown field must throw");
    } catch (const sg::unknown_member_error& e) {
        BOOST_TEST(e.member() == "confg");
        BOOST_TEST(e.type() == "st");
        BOOST_TEST(std::string(e.what()).find("did you mean 'conf'") != std::string::npos, e.what());
    }
    BOOST_TEST(run(app.get_state("t")).values.conf.owner.city == "Paris");
}

// A number JSON cannot carry (1e999999 parses as infinity, 0e13333330 as NaN: the fuzzer's find)
// is refused naming the field, and nothing is written: it could not be read back as itself.
BOOST_AUTO_TEST_CASE(update_state_refuses_non_finite_numbers) {
    auto app = echo_graph().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    run(app.invoke(sg::as_input(obj(R"({"conf": {"owner": {"name": "Ann", "age": 30}}})")), cfg));
    for (const char* text : {R"({"conf": {"owner": {"age": 1e999999}}})", R"({"conf": {"tags": [0e13333330]}})"}) {
        try {
            run(app.update_state("t", obj(text)));
            BOOST_FAIL("a non-finite number must be refused: " << text);
        } catch (const sg::graph_error& e) {
            BOOST_TEST((e.code() == sg::errc::invalid_input), e.what());
            BOOST_TEST(std::string(e.what()).find("field 'conf' holds a number JSON cannot carry") != std::string::npos, e.what());
        }
    }
    BOOST_TEST(run(app.get_state("t")).values.conf.owner.age == 30);
}

// A value of the wrong type is refused naming where it sits and what was expected (a whole
// field, and a member inside a merged struct), and nothing is written. The messages are built in
// the library (json_errors.cpp), not in every program.
BOOST_AUTO_TEST_CASE(update_state_names_a_value_of_the_wrong_type) {
    auto app = echo_graph().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    run(app.invoke(sg::as_input(obj(R"({"conf": {"owner": {"name": "Ann", "age": 30}}})")), cfg));
    const std::string reply = run(app.get_state("t")).values.reply; // the graph's node set it
    try {
        run(app.update_state("t", obj(R"({"reply": 42})")));
        BOOST_FAIL("a number for a string field must be refused");
    } catch (const sg::graph_error& e) {
        BOOST_TEST((e.code() == sg::errc::invalid_input), e.what());
        const std::string what = e.what();
        BOOST_TEST(what.find("field 'reply' expects std::__cxx11::basic_string") != std::string::npos, what);
        BOOST_TEST(what.find("got 42") != std::string::npos, what);
        BOOST_TEST(e.names() == (std::vector<std::string>{"reply"}));
    }
    try {
        run(app.update_state("t", obj(R"({"conf": {"owner": {"age": "thirty"}}})")));
        BOOST_FAIL("a string for an int member must be refused");
    } catch (const sg::graph_error& e) {
        BOOST_TEST((e.code() == sg::errc::invalid_input), e.what());
        const std::string what = e.what();
        BOOST_TEST(what.find(".conf.owner.age: expects int, got \"thirty\"") != std::string::npos, what);
    }
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.reply == reply);
    BOOST_TEST(s.values.conf.owner.age == 30);
}

BOOST_AUTO_TEST_CASE(update_state_from_json_merges_nested_structs) {
    auto app = echo_graph().compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    run(app.invoke(sg::as_input(obj(R"({"conf": {"owner": {"name": "Ann", "age": 30}, "tags": ["x"]}})")), cfg));
    run(app.update_state("t", obj(R"({"conf": {"theme": "blue", "owner": {"age": 31}}})")));
    auto s = run(app.get_state("t"));
    BOOST_TEST(s.values.conf.theme == "blue");
    BOOST_TEST(s.values.conf.owner.name == "Ann");
    BOOST_TEST(s.values.conf.owner.age == 31);
    BOOST_TEST(s.values.conf.tags == (std::vector<std::string>{"x"}));
    BOOST_TEST(s.source == "update");
    BOOST_CHECK_THROW(run(app.update_state("t", obj(R"({"conf": {"colour": "red"}})"))), sg::unknown_member_error);
    // A reducer field is still reduced (the JSON is the update), not merged.
    run(app.update_state("t", obj(R"({"log": ["more"]})")));
    BOOST_TEST(run(app.get_state("t")).values.log.back() == "more");
}

BOOST_AUTO_TEST_CASE(input_and_output_schemas_shape_what_callers_send_and_get) {
    auto app = with_schemas();
    sg::run_config cfg;
    cfg.thread_id = "t";
    // Typed, in process.
    auto r = run(app.invoke(sg::as_input(chat_in{"hello", "dark"}), cfg));
    auto out = r.output_as<chat_out>();
    BOOST_TEST(out.reply == "@Berlin:hello");
    BOOST_TEST(out.theme == "dark");
    BOOST_TEST(out.path == (std::vector<std::string>{"answer"}));
    BOOST_TEST(r.values.conf.theme == "dark"); // the state keeps its own shape
    // As a caller's JSON: members left out keep chat_in's defaults (theme: the thread keeps "dark").
    auto r2 = run(app.invoke(sg::as_input(obj(R"({"text": "again"})")), cfg));
    BOOST_TEST(r2.output_as<chat_out>().theme == "dark");
    BOOST_TEST(boost::json::serialize(r2.output) == R"({"reply":"@Berlin:again","theme":"dark","path":["answer"]})");
    // The values stream shows the output (as LangGraph streams its output keys).
    std::vector<boost::json::value> values;
    auto on_event = [&values](const sg::stream_event& e) { values.push_back(e.data); };
    run(app.stream(sg::as_input(chat_in{"third", std::nullopt}), cfg, sg::stream_mode::values, on_event));
    BOOST_REQUIRE(!values.empty());
    BOOST_TEST(boost::json::serialize(values.back()) == R"({"reply":"@Berlin:third","theme":"dark","path":["answer"]})");
    // get_state shows the whole state.
    BOOST_TEST(run(app.get_state("t")).values.log.size() == 3u);
    // A member the input does not have, or another input type, is refused.
    try {
        run(app.invoke(sg::as_input(obj(R"({"text": "x", "conf": {}})")), cfg));
        BOOST_FAIL("a state field is not an input member");
    } catch (const sg::unknown_member_error& e) {
        BOOST_TEST(e.member() == "conf");
        BOOST_TEST(e.type() == "chat_in");
    }
    BOOST_CHECK_THROW(run(app.invoke(sg::as_input(by_name_in{"x"}), cfg)), sg::graph_error);
    // The JSON Schemas.
    const auto& in = app.input_json_schema();
    BOOST_TEST(in.at("title") == "chat_in");
    BOOST_TEST(boost::json::serialize(in.at("properties").at("theme")) == R"({"anyOf":[{"type":"string"},{"type":"null"}]})");
    BOOST_TEST(!in.contains("required")); // every input member may be left out
    const auto& o = app.output_json_schema();
    BOOST_TEST(o.at("title") == "chat_out");
    BOOST_TEST(boost::json::serialize(o.at("required")) == R"(["reply","theme","path"])");
    BOOST_TEST(boost::json::serialize(o.at("properties").at("path")) == R"({"type":"array","items":{"type":"string"}})");
}

BOOST_AUTO_TEST_CASE(by_name_schemas_read_and_write_state_fields) {
    auto g = echo_graph();
    g.input_schema<by_name_in>();
    g.output_schema<by_name_in>();
    auto app = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    auto r = run(app.invoke(sg::as_input(by_name_in{"ignored"}), cfg));
    BOOST_TEST(boost::json::serialize(r.output) == R"({"reply":"@Berlin:"})");
    // A member that is no state field is a compile() problem naming it.
    auto bad = echo_graph();
    bad.input_schema<not_fields>();
    std::vector<sg::graph_problem> problems;
    BOOST_TEST(!bad.compile({}, problems).has_value());
    BOOST_REQUIRE_EQUAL(problems.size(), 1u);
    BOOST_TEST(problems[0].code == sg::errc::invalid_input);
    BOOST_TEST(problems[0].nodes == (std::vector<std::string>{"replay", "not_fields"}));
}

BOOST_AUTO_TEST_CASE(per_call_breakpoints_replace_the_compiled_ones) {
    auto g = echo_graph();
    g.interrupt_after({"answer"});
    auto app = g.compile({.checkpointer = std::make_shared<sg::checkpoint::memory_saver>()});
    sg::run_config cfg;
    cfg.thread_id = "t";
    auto in = upd{}.set<&st::log>({"hi"});
    // Before "answer", for this call only (the compiled interrupt_after is replaced only for its kind).
    auto r = run(app.invoke(in, cfg, sg::run_breakpoints{.before = std::vector<std::string>{"answer"}}));
    BOOST_TEST(r.interrupted());
    BOOST_TEST(r.next == (std::vector<std::string>{"answer"}));
    BOOST_TEST(r.values.reply.empty());
    // Continuing with no breakpoint after: it ends.
    auto done = run(app.invoke(sg::continue_run, cfg, sg::run_breakpoints{.after = std::vector<std::string>{}}));
    BOOST_TEST(!done.interrupted());
    BOOST_TEST(done.values.reply == "@Berlin:hi");
    // "*": after every node; the compiled breakpoint applies again without per-call ones.
    BOOST_TEST(run(app.invoke(in, cfg, sg::run_breakpoints{.after = std::vector<std::string>{"*"}})).interrupted());
    BOOST_TEST(run(app.invoke(in, cfg)).interrupted());
    try {
        run(app.invoke(in, cfg, sg::run_breakpoints{.before = std::vector<std::string>{"answr"}}));
        BOOST_FAIL("an unknown node must throw");
    } catch (const sg::graph_error& e) {
        BOOST_TEST(e.kind() == sg::errc::unknown_node);
        BOOST_TEST(std::string(e.what()).find("did you mean 'answer'") != std::string::npos, e.what());
    }
}

BOOST_AUTO_TEST_SUITE_END()
