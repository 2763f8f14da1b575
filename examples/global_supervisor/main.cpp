// global_supervisor: the command line of the Global Supervisor example.
//
//   global_supervisor chat    --db FILE --thread ID [--json] [--stream MODES] [--user ID] [--model-url URL --model NAME] MESSAGE
//   global_supervisor chat    --db FILE --thread ID [--json] [--stream MODES] --input JSON
//   global_supervisor update-state --db FILE --thread ID [--as-node NODE] JSON
//   global_supervisor resume  --db FILE --thread ID [--json] [--stream MODES] [--model-url URL --model NAME] ANSWER
//   global_supervisor state   --db FILE --thread ID [--json]
//   global_supervisor history --db FILE --thread ID [--json]
//   global_supervisor dot     [--db FILE --thread ID [--checkpoint ID]] [--format dot|json|summary] [--diff OLD.json]
//   global_supervisor demo    [--db FILE] [--model-url URL --model NAME]
//   global_supervisor break-lease --db FILE --thread ID
//   global_supervisor serve   [--db FILE] [--port 8123] [--host 127.0.0.1] [--cors ORIGINS] [--checkpointer URL [--fallback URL]] [--model-url URL --model NAME]
//                             [--runs FILE|postgresql://...] [--workers N] [--role api|worker|both] [--instance NAME] [--lease-ms MS]
//                             [--wakeups redis://HOST:PORT[/DB]] [--poll-ms MS] [--verbosity full|events|result]
//                             [--metrics keyed|open|off]
//   (chat, resume, demo, serve: --permissions FILE, permission rules over the agents' steps)
//   (chat, resume, serve: --otlp URL, OpenTelemetry traces of the turns to that OTLP/HTTP collector)
//
// FILE is the memory database (contacts, facts, messages); the checkpoints are kept beside it in
// FILE.checkpoints (one SQLite file each: both use SQLite's user_version for their schema).
// The thread id is the chat id. Every call is one process: a thread interrupted by one call is
// resumed by another. Exit status: 0 success, 1 failure (one line on stderr), 2 bad usage.
// --json output is always valid UTF-8: text stored with invalid bytes is written with U+FFFD.
// --stream tasks,checkpoints (any of values, updates, custom, tasks, checkpoints, messages, debug)
// prints the turn's events of those stream modes first, one JSON object per line:
// {"mode", "ns", "step", "node", "data"}.
// break-lease removes the lease a process holds on the chat (see docs/persistence-and-resume.md, "Leases"): for a
// holder on a crashed host; a dead process on this host is taken over by the next call anyway.
// --checkpointer redis://HOST:PORT[/DB] or postgresql://... (chat, resume, state, history,
// break-lease) keeps the checkpoints on a Redis server (keys under "global_supervisor:") or in
// PostgreSQL (schema "global_supervisor") instead of FILE.checkpoints; the memory stays in FILE.
// Needs a build with that saver (STATEGRAPH_WITH_REDIS, STATEGRAPH_WITH_POSTGRES).
// --checkpointer redis://... --fallback postgresql://... puts Redis in front of PostgreSQL (the
// tiered saver: written to PostgreSQL first, read from Redis, PostgreSQL when Redis lost the chat).
// serve runs the LangGraph Agent Server API (stategraph::server) with the graph as assistant
// "global_supervisor": point @langchain/langgraph-sdk at http://HOST:PORT. A run's input is the
// graph's input schema, as chat --input takes it: {"user_message": "...", "chat_id"?, "user_id"?,
// "model"?, "avatar_id"?}; a run's result is its output schema. --port 0 picks a free port; the first
// line printed names the address. API keys (x-api-key) come from STATEGRAPH_API_KEYS (comma
// separated), never from the command line.
// serve --wakeups redis://HOST:PORT[/DB]: the instances on one run store (--runs) wake each other
// through Redis pub/sub (channels "global_supervisor:<DB>:..."; deployments sharing a Redis server
// take different DB numbers) when a run is queued, cancelled or ends, or has new events, instead of
// finding out at their next poll; they then poll every second (--poll-ms; without --wakeups every
// 100 ms, or PostgreSQL's LISTEN/NOTIFY wakes them). A Redis server that does not answer at start
// is an error; one lost later is logged and the instances poll until it is back.

#include "graph.hpp"
#include "research_mcp.hpp"
#include "services.hpp"
#include "utf8.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>
#ifdef STATEGRAPH_HAVE_REDIS
#include <stategraph/checkpoint/redis_saver.hpp>
#endif
#ifdef STATEGRAPH_HAVE_POSTGRES
#include <stategraph/checkpoint/postgres_saver.hpp>
#endif
#ifdef STATEGRAPH_HAVE_TIERED
#include <stategraph/checkpoint/tiered_saver.hpp>
#endif
#include <stategraph/drain.hpp>
#include <stategraph/graph_description.hpp>
#include <stategraph/thread_overlay.hpp>

#include <csignal>
#include <stategraph/core/error.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>
#include <stategraph/nodes/otlp_tracer.hpp>
#include <stategraph/server/redis_notifier.hpp>
#include <stategraph/server/run_store.hpp>
#include <stategraph/server/server.hpp>
#include <stategraph/checkpoint/store/sqlite_store.hpp>

#include <boost/asio/signal_set.hpp>
#include <boost/describe/enum_to_string.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value_from.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <unistd.h>

namespace gs = global_supervisor;
namespace sg = stategraph;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

constexpr const char* usage_text =
    "usage:\n"
    "  global_supervisor chat    --db FILE --thread ID [--json] [--stream MODES] [--user ID] [--model-url URL --model NAME] MESSAGE\n"
    "  global_supervisor chat    --db FILE --thread ID [--json] [--stream MODES] --input JSON\n"
    "                            (JSON: the graph's input, {\"user_message\": ..., \"chat_id\"?, \"user_id\"?, \"model\"?, \"avatar_id\"?})\n"
    "  global_supervisor update-state --db FILE --thread ID [--as-node NODE] JSON\n"
    "                            (JSON: state fields; a nested struct's members left out keep the thread's values)\n"
    "  global_supervisor resume  --db FILE --thread ID [--json] [--stream MODES] [--model-url URL --model NAME] ANSWER\n"
    "  global_supervisor state   --db FILE --thread ID [--json]\n"
    "  global_supervisor history --db FILE --thread ID [--json]\n"
    "  global_supervisor dot     [--db FILE --thread ID [--checkpoint ID]] [--format dot|json|summary] [--diff OLD.json]\n"
    "  global_supervisor demo    [--db FILE] [--model-url URL --model NAME]\n"
    "  global_supervisor break-lease --db FILE --thread ID\n"
    "  global_supervisor serve   [--db FILE] [--port 8123] [--host 127.0.0.1] [--cors ORIGINS] [--model-url URL --model NAME]\n"
    "                            [--checkpointer URL [--fallback URL]] [--runs FILE|postgresql://...] [--workers N]\n"
    "                            [--role api|worker|both] [--instance NAME] [--lease-ms MS]\n"
    "                            [--wakeups redis://HOST:PORT[/DB]] [--poll-ms MS] [--verbosity full|events|result]\n"
    "                            [--metrics keyed|open|off]\n"
    "  (serve: runs, their queue, events and thread records live in --runs: an SQLite file (default FILE.runs beside\n"
    "   --db; any number of instances on one host share it) or PostgreSQL (instances on many hosts); --workers runs\n"
    "   at once per instance (default 64); --role api takes requests and runs nothing, worker runs and listens on\n"
    "   no port; a run whose instance died is taken over after --lease-ms (default 10000); --wakeups: the instances\n"
    "   wake each other through Redis pub/sub and poll the run store every --poll-ms (default 1000 with --wakeups,\n"
    "   else 100); --verbosity: how much of a run every stream shows: full (default), events (no state but the\n"
    "   final values), result (messages, errors and the final values); --metrics: who may read GET /metrics: keyed\n"
    "   (default: with STATEGRAPH_API_KEYS set, callers with a key; else anyone), open (anyone) or off (404))\n"
    "  (chat, resume, serve: --otlp URL, the traces of every turn (its steps, nodes, model and tool calls) to an\n"
    "   OpenTelemetry collector over OTLP/HTTP, e.g. http://127.0.0.1:4318/v1/traces; without it, the variables\n"
    "   OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT turn traces on; a resume continues the\n"
    "   trace of the turn it answers)\n"
    "  (chat, resume, demo, serve: --mcp FILE, the research agent's MCP servers as JSON {\"mcp_servers\": [{\"name\",\n"
    "   \"type\": \"stdio\"|\"http\", \"command\", \"args\", \"url\", ...}]}: it asks each one's search tool)\n"
    "  (chat, resume, demo, serve: --permissions FILE, a JSON object {\"allow\": [...], \"deny\": [...], \"ask\": [...]}\n"
    "   of rules agent(task glob) over the planned agent steps, e.g. {\"deny\": [\"wealth(*transfer*)\"]})\n"
    "  (chat, resume, state, history, break-lease: --checkpointer redis://HOST:PORT or postgresql://... keeps the\n"
    "   checkpoints on Redis or in PostgreSQL; --checkpointer redis://... --fallback postgresql://... puts Redis in\n"
    "   front of PostgreSQL)\n";

struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct args {
    std::string command;
    std::map<std::string, std::string> options;
    bool json = false;
    std::vector<std::string> positional;

    std::optional<std::string> get(const std::string& k) const {
        auto it = options.find(k);
        if (it == options.end()) return std::nullopt;
        return it->second;
    }
    std::string need(const std::string& k) const {
        auto v = get(k);
        if (!v || v->empty()) throw usage_error(command + ": missing --" + k);
        return *v;
    }
};

/// --otlp URL, else OpenTelemetry's OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT:
/// a tracer exporting there (service.name global_supervisor unless OTEL_SERVICE_NAME says);
/// null when none is given.
std::unique_ptr<sg::otlp_tracer> tracer_for(const args& a) {
    auto options = sg::otlp_options::from_environment();
    if (auto url = a.get("otlp")) options.endpoint = *url;
    else if (!std::getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") && !std::getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) return nullptr;
    if (!std::getenv("OTEL_SERVICE_NAME")) options.service_name = "global_supervisor";
    return std::make_unique<sg::otlp_tracer>(std::move(options));
}

args parse(int argc, char** argv) {
    if (argc < 2) throw usage_error("missing command");
    args a;
    a.command = argv[1];
    static const std::map<std::string, std::vector<std::string>> allowed = {
        {"chat", {"db", "thread", "user", "model-url", "model", "stream", "checkpointer", "fallback", "permissions", "input", "mcp",
                  "otlp"}},
        {"update-state", {"db", "thread", "as-node", "checkpointer", "fallback"}},
        {"resume", {"db", "thread", "user", "model-url", "model", "stream", "checkpointer", "fallback", "permissions", "mcp", "otlp"}},
        {"state", {"db", "thread", "checkpointer", "fallback"}},
        {"history", {"db", "thread", "checkpointer", "fallback"}},
        {"dot", {"db", "thread", "checkpoint", "format", "diff"}},
        {"demo", {"db", "model-url", "model", "permissions", "mcp"}},
        {"break-lease", {"db", "thread", "checkpointer", "fallback"}},
        {"serve", {"db", "port", "host", "checkpointer", "fallback", "model-url", "model", "user", "cors", "permissions", "mcp", "runs",
                   "workers", "role", "instance", "lease-ms", "wakeups", "poll-ms", "verbosity", "metrics", "otlp"}},
    };
    auto cmd = allowed.find(a.command);
    if (cmd == allowed.end()) throw usage_error("unknown command '" + a.command + "'");
    bool json_allowed = a.command == "chat" || a.command == "resume" || a.command == "state" || a.command == "history" ||
                        a.command == "update-state";
    for (int i = 2; i < argc; ++i) {
        std::string s = argv[i];
        if (s == "--") {
            for (++i; i < argc; ++i) a.positional.push_back(argv[i]);
            break;
        }
        if (s.rfind("--", 0) == 0) {
            std::string key = s.substr(2), value;
            if (auto eq = key.find('='); eq != std::string::npos) {
                value = key.substr(eq + 1);
                key = key.substr(0, eq);
            } else if (key == "json") {
                if (!json_allowed) throw usage_error(a.command + ": unknown flag --json");
                a.json = true;
                continue;
            } else {
                if (std::find(cmd->second.begin(), cmd->second.end(), key) == cmd->second.end())
                    throw usage_error(a.command + ": unknown flag " + s);
                if (i + 1 >= argc) throw usage_error(a.command + ": " + s + " needs a value");
                value = argv[++i];
            }
            if (std::find(cmd->second.begin(), cmd->second.end(), key) == cmd->second.end())
                throw usage_error(a.command + ": unknown flag --" + key);
            a.options[key] = value;
        } else {
            a.positional.push_back(s);
        }
    }
    if (a.get("model-url").has_value() != a.get("model").has_value())
        throw usage_error(a.command + ": --model-url and --model go together");
    return a;
}

template <class T>
T run(boost::asio::io_context& io, boost::asio::awaitable<T> a) {
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.restart();
    io.run();
    return f.get();
}

/// The saver at `url` (redis://... or postgresql://...), or null when `url` is empty.
std::shared_ptr<sg::checkpoint::saver> saver_at(const args& a, const std::optional<std::string>& url) {
    if (url) {
        if (url->rfind("postgres://", 0) == 0 || url->rfind("postgresql://", 0) == 0) {
#ifdef STATEGRAPH_HAVE_POSTGRES
            sg::checkpoint::postgres_options po;
            po.conninfo = *url;
            po.schema = "global_supervisor";
            return std::make_shared<sg::checkpoint::postgres_saver>(po);
#else
            throw usage_error(a.command +
                              ": --checkpointer postgresql://: this build has no PostgreSQL saver (STATEGRAPH_WITH_POSTGRES=OFF)");
#endif
        }
        if (url->rfind("redis://", 0) != 0)
            throw usage_error(a.command + ": --checkpointer takes redis://HOST:PORT or postgresql://... (got '" + *url + "')");
#ifdef STATEGRAPH_HAVE_REDIS
        sg::checkpoint::redis_options ro;
        ro.url = *url;
        ro.key_prefix = "global_supervisor";
        ro.client_name = "global_supervisor";
        return std::make_shared<sg::checkpoint::redis_saver>(ro);
#else
        throw usage_error(a.command + ": --checkpointer redis://: this build has no Redis saver (STATEGRAPH_WITH_REDIS=OFF)");
#endif
    }
    return nullptr;
}

/// The checkpointer: a Redis server (`--checkpointer redis://...`), PostgreSQL
/// (`--checkpointer postgresql://...`), Redis in front of PostgreSQL (`--fallback`), or the
/// SQLite file beside `db`.
std::shared_ptr<sg::checkpoint::saver> make_checkpointer(const args& a, const std::string& db) {
    if (auto fallback = a.get("fallback")) {
        auto front = a.get("checkpointer");
        if (!front || front->rfind("redis://", 0) != 0 ||
            (fallback->rfind("postgres://", 0) != 0 && fallback->rfind("postgresql://", 0) != 0))
            throw usage_error(a.command + ": --fallback postgresql://... goes with --checkpointer redis://...");
#ifdef STATEGRAPH_HAVE_TIERED
        return std::make_shared<sg::checkpoint::tiered_saver>(saver_at(a, front), saver_at(a, fallback));
#else
        throw usage_error(a.command + ": --fallback: this build has no tiered saver (it needs both the Redis and the PostgreSQL saver)");
#endif
    }
    if (auto remote = saver_at(a, a.get("checkpointer"))) return remote;
    sg::checkpoint::sqlite_options so;
    so.path = gs::checkpoint_path(db);
    return std::make_shared<sg::checkpoint::sqlite_saver>(so);
}

/// The permission rules of `--permissions FILE`: {"allow": [...], "deny": [...], "ask": [...]}, each
/// a list of rules `agent(task glob)`. A missing file, bad JSON, an unknown key or a malformed
/// rule is a usage error naming the file (and the key or every bad rule).
sg::nodes::permission_rules load_permissions(const args& a, const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw usage_error(a.command + ": cannot read --permissions file '" + file + "'");
    std::ostringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    auto doc = json::parse(text.str(), ec);
    if (ec || !doc.is_object())
        throw usage_error(a.command + ": --permissions file '" + file + "' is not a JSON object");
    std::map<std::string, std::vector<std::string>> lists{{"allow", {}}, {"deny", {}}, {"ask", {}}};
    for (const auto& [key, value] : doc.as_object()) {
        auto it = lists.find(std::string(key));
        if (it == lists.end())
            throw usage_error(a.command + ": --permissions file '" + file + "': unknown key '" + std::string(key) +
                              "' (allow, deny, ask)");
        if (!value.is_array())
            throw usage_error(a.command + ": --permissions file '" + file + "': '" + std::string(key) +
                              "' must be a list of rules");
        for (const auto& rule : value.as_array()) {
            if (!rule.is_string())
                throw usage_error(a.command + ": --permissions file '" + file + "': '" + std::string(key) +
                                  "' must be a list of strings");
            it->second.emplace_back(rule.as_string());
        }
    }
    try {
        return sg::nodes::permission_rules(lists["allow"], lists["deny"], lists["ask"]);
    } catch (const sg::nodes::agent_error& e) {
        throw usage_error(a.command + ": --permissions file '" + file + "': " + e.what());
    }
}

/// Everything one process needs: the services (memory + brain) and the compiled graph.
struct app {
    boost::asio::io_context& io;
    std::unique_ptr<gs::services> svc;
    gs::supervisor_graph graph;  ///< uses *svc

    app(boost::asio::io_context& io_, const args& a, const std::string& db, bool create) : io(io_) {
        if (!create && !fs::exists(db)) throw std::runtime_error("no database at '" + db + "'");
        if (!create && !a.get("checkpointer") && !fs::exists(gs::checkpoint_path(db)))
            throw std::runtime_error("database '" + db + "' has no checkpoints (" + gs::checkpoint_path(db) + ")");
        gs::services::options o;
        o.db = db;
        if (auto u = a.get("user")) o.user_id = *u;
        if (auto url = a.get("model-url")) {
            sg::nodes::openai_options oo;
            oo.base_url = *url;
            oo.model = *a.get("model");
            if (const char* key = std::getenv("OPENAI_API_KEY")) oo.api_key = key;
            auto model = std::make_shared<sg::nodes::openai_chat_model>(io.get_executor(), oo);
            o.model = std::make_shared<gs::llm_brain>(model, oo.model);
        }
        if (auto file = a.get("permissions")) o.agents.permissions = load_permissions(a, *file);
        if (auto file = a.get("mcp")) o.research = std::make_shared<const gs::research_tools>(gs::connect_research_servers(*file));
        svc = std::make_unique<gs::services>(std::move(o));
        graph = gs::build_graph(make_checkpointer(a, db), *svc);
    }
};

std::string joined(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
    return out;
}

void print_turn(const gs::turn_outcome& t, bool as_json, double ms, const std::string& db) {
    if (as_json) {
        std::cout << gs::serialize_valid_utf8(gs::to_json(t)) << "\n";
        return;
    }
    if (!t.recovered.empty())
        std::cout << "  finished the turn a stopped call left on " << t.thread_id << " (" << t.recovered.size()
                  << " nodes): " << joined(t.recovered, " > ") << "\n";
    std::cout << "assistant: " << t.reply << "\n";
    std::cout << "  path (" << t.nodes.size() << " nodes, " << static_cast<long>(ms) << " ms): " << joined(t.nodes, " > ")
              << "\n";
    if (t.interrupted)
        std::cout << "  waiting for your answer: global_supervisor resume --db " << db << " --thread " << t.thread_id
                  << " ANSWER\n";
    if (t.drained)
        std::cout << "  stopped by SIGTERM between two steps, everything saved: the next chat or resume on "
                  << t.thread_id << " goes on from there\n";
}

std::string message_of(const args& a, const char* what) {
    if (a.positional.empty()) throw usage_error(a.command + ": missing " + what);
    return joined(a.positional, " ");
}

/// The stream modes named in `--stream a,b,c`.
sg::stream_mode stream_modes_of(const args& a) {
    static const std::map<std::string, sg::stream_mode> by_name = {
        {"values", sg::stream_mode::values},           {"updates", sg::stream_mode::updates},
        {"custom", sg::stream_mode::custom},           {"tasks", sg::stream_mode::tasks},
        {"checkpoints", sg::stream_mode::checkpoints}, {"messages", sg::stream_mode::messages},
        {"debug", sg::stream_mode::debug},
    };
    auto list = a.get("stream");
    sg::stream_mode modes = sg::stream_mode::none;
    if (!list) return modes;
    std::stringstream in(*list);
    for (std::string name; std::getline(in, name, ',');) {
        auto it = by_name.find(name);
        if (it == by_name.end())
            throw usage_error(a.command + ": --stream: unknown stream mode '" + name +
                              "' (values, updates, custom, tasks, checkpoints, messages, debug)");
        modes = modes | it->second;
    }
    return modes;
}

const char* mode_name(sg::stream_mode m) {
    switch (m) {
    case sg::stream_mode::values: return "values";
    case sg::stream_mode::updates: return "updates";
    case sg::stream_mode::custom: return "custom";
    case sg::stream_mode::debug: return "debug";
    case sg::stream_mode::tasks: return "tasks";
    case sg::stream_mode::checkpoints: return "checkpoints";
    case sg::stream_mode::messages: return "messages";
    default: return "none";
    }
}

/// One streamed event as a line of JSON.
void print_event(const sg::stream_event& e) {
    json::array ns;
    for (const auto& n : e.ns) ns.push_back(json::string(n));
    json::object line{{"mode", mode_name(e.mode)}, {"ns", std::move(ns)}, {"step", e.step}, {"node", e.node}, {"data", e.data}};
    std::cout << gs::serialize_valid_utf8(std::move(line)) << "\n";
}

int cmd_chat_or_resume(const args& a) {
    std::string db = a.need("db"), thread = a.need("thread");
    // SIGTERM (a deployment stopping the process) drains: the turn stops at its next step
    // boundary with everything saved, and the process exits normally.
    std::signal(SIGTERM, [](int) { sg::request_drain(); });
    // chat --input: the graph's input schema, read as the server reads a run's input.
    std::optional<gs::supervisor_input> input;
    if (auto in = a.get("input")) {
        if (!a.positional.empty() || a.get("user")) throw usage_error("chat: --input replaces MESSAGE and --user");
        boost::system::error_code ec;
        json::value v = json::parse(*in, ec);
        if (ec || !v.is_object()) throw usage_error("chat: --input takes a JSON object (the graph's input)");
        input = sg::read_json<gs::supervisor_input>(v, sg::errc::invalid_input, "input");
    }
    std::string text = input ? std::string() : message_of(a, a.command == "chat" ? "MESSAGE" : "ANSWER");
    // Traces (--otlp, or OpenTelemetry's variables): flushed when the tracer goes, after the turn.
    const auto tracer = tracer_for(a);
    const gs::turn_watch watch{stream_modes_of(a), print_event, tracer.get()};
    boost::asio::io_context io;
    app ap(io, a, db, a.command == "chat");
    auto start = std::chrono::steady_clock::now();
    gs::turn_outcome t = input                  ? run(io, gs::chat(ap.graph, thread, std::move(*input), watch))
                         : a.command == "chat" ? run(io, gs::chat(ap.graph, thread, text, ap.svc->user_id(), watch))
                                               : run(io, gs::resume(ap.graph, thread, text, watch));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    print_turn(t, a.json, ms, db);
    return 0;
}

int cmd_state(const args& a) {
    std::string db = a.need("db"), thread = a.need("thread");
    boost::asio::io_context io;
    app ap(io, a, db, false);
    auto o = run(io, gs::state_json(ap.graph, thread));
    if (a.json) {
        std::cout << gs::serialize_valid_utf8(std::move(o)) << "\n";
        return 0;
    }
    const auto& v = o.at("values").as_object();
    std::cout << "thread:  " << thread << "\n";
    auto str = [](const json::value& v) { return std::string(v.as_string()); };
    std::cout << "status:  " << str(o.at("status")) << "\n";
    for (const auto& i : o.at("interrupts").as_array())
        if (auto* q = i.at("value").as_object().if_contains("question"))
            std::cout << "waiting: " << str(*q) << "\n";
    std::cout << "message: " << str(v.at("conversation").at("user_message")) << "\n";
    if (auto reply = str(v.at("response").at("reply")); !reply.empty()) std::cout << "reply:   " << reply << "\n";
    std::vector<std::string> trace;
    for (const auto& n : o.at("trace").as_array()) trace.push_back(std::string(n.as_string()));
    std::cout << "path:    " << joined(trace, " > ") << "\n";
    std::vector<std::string> next;
    for (const auto& n : o.at("next").as_array()) next.push_back(std::string(n.as_string()));
    std::cout << "next:    " << (next.empty() ? "(end)" : joined(next, ", ")) << "\n";
    return 0;
}

int cmd_history(const args& a) {
    std::string db = a.need("db"), thread = a.need("thread");
    boost::asio::io_context io;
    app ap(io, a, db, false);
    auto list = run(io, gs::history_json(ap.graph, thread));
    if (a.json) {
        std::cout << gs::serialize_valid_utf8(std::move(list)) << "\n";
        return 0;
    }
    for (const auto& c : list) {
        const auto& o = c.as_object();
        std::vector<std::string> writers, next;
        for (const auto& w : o.at("writers").as_array()) writers.push_back(std::string(w.as_string()));
        for (const auto& n : o.at("next").as_array()) next.push_back(std::string(n.as_string()));
        std::cout << "step " << o.at("step").as_int64() << "  " << std::string(o.at("source").as_string()) << "  by "
                  << (writers.empty() ? "-" : joined(writers, ",")) << "  -> "
                  << (next.empty() ? "(end)" : joined(next, ",")) << "\n";
    }
    return 0;
}

/// update-state: writes state fields into the thread's newest checkpoint (a new checkpoint, as
/// LangGraph's update_state); a nested struct's members left out keep the thread's values.
int cmd_update_state(const args& a) {
    std::string db = a.need("db"), thread = a.need("thread");
    if (a.positional.size() != 1) throw usage_error("update-state: give one JSON object of state fields");
    boost::system::error_code ec;
    json::value v = json::parse(a.positional[0], ec);
    if (ec || !v.is_object()) throw usage_error("update-state: the values must be a JSON object of state fields");
    boost::asio::io_context io;
    app ap(io, a, db, false);
    auto id = run(io, ap.graph.update_state(thread, std::move(v.as_object()), a.get("as-node")));
    if (a.json) std::cout << json::serialize(json::object{{"thread_id", thread}, {"checkpoint_id", id}}) << "\n";
    else std::cout << "thread " << thread << ": checkpoint " << id << "\n";
    return 0;
}

int cmd_break_lease(const args& a) {
    std::string db = a.need("db"), thread = a.need("thread");
    if (!a.get("checkpointer") && !fs::exists(gs::checkpoint_path(db)))
        throw std::runtime_error("database '" + db + "' has no checkpoints (" + gs::checkpoint_path(db) + ")");
    boost::asio::io_context io;
    auto saver = make_checkpointer(a, db);
    auto holder = run(io, saver->break_lease(thread));
    if (holder) std::cout << "thread " << thread << ": removed the lease held by " << *holder << "\n";
    else std::cout << "thread " << thread << ": no lease was held\n";
    return 0;
}

int cmd_dot(const args& a) {
    auto db = a.get("db"), thread = a.get("thread");
    if (thread && !db) throw usage_error("dot: --thread needs --db");
    if (a.get("checkpoint") && !thread) throw usage_error("dot: --checkpoint needs --thread");
    std::string format = a.get("format").value_or("dot");
    auto diff = a.get("diff");
    if (format != "dot" && format != "json" && format != "summary") throw usage_error("dot: --format is dot, json or summary");
    if (format == "summary" && !diff) throw usage_error("dot: --format summary needs --diff OLD.json");
    boost::asio::io_context io;
    if (format == "json" || diff) {
        // The description (stable: commit it next to the code), or the diff against an older one.
        gs::services::options o;
        o.db = ":memory:";
        o.seed_demo = false;
        gs::services svc(std::move(o));
        auto g = gs::build_graph(nullptr, svc);
        if (!diff) {
            sg::write_json(std::cout, g);
            return 0;
        }
        std::ifstream in(*diff, std::ios::binary);
        if (!in) throw usage_error("dot: cannot read --diff file '" + *diff + "'");
        std::ostringstream text;
        text << in.rdbuf();
        auto old_graph = sg::read_json(text.str());
        if (format == "summary") std::cout << sg::diff_summary(sg::diff_graphs(old_graph, g.shape()));
        else sg::write_diff_dot(std::cout, old_graph, g.shape());
        return 0;
    }
    if (!db) {
        // The graph alone: its services on an empty in-memory database, never used.
        gs::services::options o;
        o.db = ":memory:";
        o.seed_demo = false;
        gs::services svc(std::move(o));
        auto g = gs::build_graph(nullptr, svc);
        run(io, gs::write_dot(g, std::cout));
        return 0;
    }
    app ap(io, a, *db, false);
    if (auto checkpoint = a.get("checkpoint")) {
        // The path up to that checkpoint, with its pending interrupts and failed nodes.
        auto overlay = run(io, sg::thread_overlay(ap.graph, *thread, *checkpoint));
        ap.graph.write_dot(std::cout, overlay);
        return 0;
    }
    run(io, gs::write_dot(ap.graph, std::cout, thread.value_or("")));
    return 0;
}

int cmd_demo(const args& a) {
    fs::path dir;
    std::string db;
    bool temporary = !a.get("db");
    if (temporary) {
        dir = fs::temp_directory_path() / ("global_supervisor_demo_" + std::to_string(::getpid()));
        fs::create_directories(dir);
        db = (dir / "demo.db").string();
    } else {
        db = *a.get("db");
        if (fs::exists(db)) throw std::runtime_error("demo: '" + db + "' exists; the demo starts from a fresh database");
    }
    const std::string thread = "demo";
    struct step {
        bool resume;
        std::string text;
    };
    const std::vector<step> script = {
        {false, "Hi there!"},
        {false, "Plan my week: book flights to Zurich and review my portfolio"},
        {false, "Thomas is traveling to Mallorca next week"},
        {true, "Thomas Berger"},
        {false, "What does Thomas like?"},
    };
    int status = 0;
    try {
        for (const auto& st : script) {
            // A new io_context, services and graph for every message: as separate processes would.
            boost::asio::io_context io;
            app ap(io, a, db, true);
            std::cout << (st.resume ? "resume> " : "user> ") << st.text << "\n";
            auto start = std::chrono::steady_clock::now();
            auto t = st.resume ? run(io, gs::resume(ap.graph, thread, st.text))
                               : run(io, gs::chat(ap.graph, thread, st.text, ap.svc->user_id()));
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
            print_turn(t, false, ms, db);
            std::cout << "\n";
        }
    } catch (...) {
        status = 1;
        if (temporary) fs::remove_all(dir);
        throw;
    }
    if (temporary) fs::remove_all(dir);
    return status;
}

/// The LangGraph Agent Server API over the graph, until SIGINT or SIGTERM.
int cmd_serve(const args& a) {
    namespace srv = sg::server;
    std::string db = a.get("db").value_or("global_supervisor.db");
    srv::server_options so;
    if (auto h = a.get("host")) so.host = *h;
    if (auto p = a.get("port")) {
        try {
            std::size_t used = 0;
            long port = std::stol(*p, &used);
            if (used != p->size() || port < 0 || port > 65535) throw std::out_of_range(*p);
            so.port = static_cast<unsigned short>(port);
        } catch (const std::exception&) {
            throw usage_error("serve: --port takes a number from 0 to 65535 (got '" + *p + "')");
        }
    }
    if (const char* keys = std::getenv("STATEGRAPH_API_KEYS")) {
        std::stringstream in(keys);
        for (std::string k; std::getline(in, k, ',');)
            if (!k.empty()) so.api_keys.insert(k);
    }
    if (auto cors = a.get("cors")) { // --cors http://localhost:3000,http://other or '*'
        std::stringstream in(*cors);
        for (std::string o; std::getline(in, o, ',');)
            if (!o.empty()) so.cors_origins.insert(o);
    }
    so.log = [](std::string_view line) { std::cerr << line << "\n"; };
    auto number = [&](const char* name, long lo, long hi) -> std::optional<long> {
        auto v = a.get(name);
        if (!v) return std::nullopt;
        try {
            std::size_t used = 0;
            long n = std::stol(*v, &used);
            if (used != v->size() || n < lo || n > hi) throw std::out_of_range(*v);
            return n;
        } catch (const std::exception&) {
            throw usage_error("serve: --" + std::string(name) + " takes a number from " + std::to_string(lo) + " to " +
                              std::to_string(hi) + " (got '" + *v + "')");
        }
    };
    { // where runs, their queue, their events and the thread records live
        srv::run_store_options ro;
        if (auto ms = number("lease-ms", 100, 3'600'000)) ro.lease = std::chrono::milliseconds(*ms);
        if (auto url = a.get("wakeups")) { // Redis pub/sub between the instances
            if (url->rfind("redis://", 0) != 0)
                throw usage_error("serve: --wakeups takes redis://HOST:PORT[/DB] (got '" + *url + "')");
            srv::redis_notifier_options no;
            no.url = *url;
            no.channel_prefix = "global_supervisor";
            no.log = [](std::string_view line) { std::cerr << "global_supervisor: " << line << "\n"; };
            ro.notifier = srv::open_redis_notifier(std::move(no));
            so.poll_interval = std::chrono::milliseconds(1000); // a safety net now
        }
        if (auto ms = number("poll-ms", 10, 3'600'000)) so.poll_interval = std::chrono::milliseconds(*ms);
        const std::string runs = a.get("runs").value_or(db + ".runs");
        if (runs.rfind("postgres://", 0) == 0 || runs.rfind("postgresql://", 0) == 0) {
            srv::postgres_run_store_options po;
            po.conninfo = runs;
            po.store = ro;
            so.runs = srv::open_postgres_run_store(std::move(po));
        } else {
            so.runs = srv::open_sqlite_run_store(runs, ro);
        }
    }
    if (auto w = number("workers", 0, 100'000)) so.max_runs_in_flight = static_cast<std::size_t>(*w);
    if (auto role = a.get("role")) {
        if (*role == "api") so.max_runs_in_flight = 0;
        else if (*role == "worker") so.serve_api = false;
        else if (*role != "both") throw usage_error("serve: --role takes api, worker or both (got '" + *role + "')");
    }
    if (auto name = a.get("instance")) so.instance_id = *name;
    if (auto level = a.get("verbosity")) { // how much of a run every stream shows
        auto v = sg::parse_verbosity(*level);
        if (!v) throw usage_error("serve: --verbosity takes full, events or result (got '" + *level + "')");
        so.verbosity = *v;
    }
    const auto tracer = tracer_for(a); // --otlp: every run's spans (docs/observability.md)
    so.tracer = tracer.get();
    if (auto m = a.get("metrics")) { // who may read GET /metrics (docs/observability.md)
        if (*m == "keyed") so.metrics = srv::metrics_access::keyed;
        else if (*m == "open") so.metrics = srv::metrics_access::open;
        else if (*m == "off") so.metrics = srv::metrics_access::off;
        else throw usage_error("serve: --metrics takes keyed, open or off (got '" + *m + "')");
    }
    { // the Store endpoints (/store/...): a SQLite store beside the database
        sg::store::sqlite_store_options sto;
        sto.path = db + ".store";
        so.store = std::make_shared<sg::store::sqlite_store>(std::move(sto));
    }
    boost::asio::io_context io;
    app ap(io, a, db, true);
    srv::assistant_options ao;
    ao.description = "The Global Supervisor: classification, memory, disambiguation, planning, response";
    ao.recursion_limit = 60;
    // A run's input is the graph's input schema (supervisor_input), as `chat --input` takes it.
    srv::server server(io.get_executor(), so);
    server.add(srv::make_assistant("global_supervisor", ap.graph, std::move(ao)));
    auto port = server.listen();
    if (!so.serve_api) {
        std::cout << "global_supervisor: a worker: running the queued runs of " << so.runs->backend().describe()
                  << " (SIGINT or SIGTERM stops)" << std::endl;
    } else {
        std::cout << "global_supervisor: serving the LangGraph API on http://" << so.host << ":" << port
              << " (assistant global_supervisor; SIGINT or SIGTERM stops)\n"
              << "global_supervisor: the studio page: http://" << so.host << ":" << port << "/studio" << std::endl;
    }
    if (const auto& wakeups = so.runs->options().notifier)
        std::cout << "global_supervisor: wake-ups through " << wakeups->describe() << std::endl;
    boost::asio::signal_set signals(io, SIGINT, SIGTERM);
    // SIGTERM or SIGINT: stop accepting, let every run reach a step boundary with its
    // checkpoint written, then exit.
    signals.async_wait([&](const boost::system::error_code&, int) {
        std::cerr << "global_supervisor: draining the runs in flight, then stopping\n";
        server.drain([&io] { io.stop(); });
    });
    io.run();
    return 0;
}

/// One line: messages from the engine may span lines (drift reports).
std::string one_line(std::string s) {
    for (auto& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

/// The kind of an error, for the error line: a stategraph error's errc, a memory database
/// error's memory_errc ("memory.io_failed"), a store's category and code; a failed node's cause
/// first. Empty for other exceptions.
std::string error_kind(const std::exception& e) {
    if (const auto* n = dynamic_cast<const sg::node_error*>(&e); n && n->nested()) {
        try {
            n->rethrow_nested();
        } catch (const std::exception& inner) {
            if (auto k = error_kind(inner); !k.empty()) return k;
        } catch (...) {
        }
    }
    if (const auto* g = dynamic_cast<const sg::graph_error*>(&e)) return sg::to_string(g->kind());
    if (const auto* m = dynamic_cast<const gs::memory_error*>(&e))
        return std::string("memory.") + boost::describe::enum_to_string(m->code(), "unknown");
    if (const auto* x = dynamic_cast<const std::system_error*>(&e))
        return std::string(x->code().category().name()) + "." + std::to_string(x->code().value());
    return {};
}

/// The error line: the message, the thread it concerns when the message does not name it (a
/// damaged file found at open names the file only), and the kind.
std::string error_line(const std::exception& e, const std::optional<std::string>& thread) {
    std::string text = one_line(e.what());
    const auto* g = dynamic_cast<const sg::graph_error*>(&e);
    if (g && thread && text.find("'" + *thread + "'") == std::string::npos &&
        (g->kind() == sg::errc::corrupt_checkpoint || g->kind() == sg::errc::storage_failure))
        text = "thread '" + *thread + "': " + text;
    const auto kind = error_kind(e);
    // A stategraph error's text ends with its kind already (": corrupt_checkpoint").
    return kind.empty() || text.ends_with(kind) ? text : text + " [" + kind + "]";
}

} // namespace

int main(int argc, char** argv) {
    if (argc == 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "help")) {
        std::cout << usage_text;
        return 0;
    }
    std::optional<std::string> thread; // for the error line
    try {
        args a = parse(argc, argv);
        if (auto t = a.get("thread")) thread = *t;
        if (a.command == "chat" || a.command == "resume") return cmd_chat_or_resume(a);
        if (a.command == "state") return cmd_state(a);
        if (a.command == "history") return cmd_history(a);
        if (a.command == "dot") return cmd_dot(a);
        if (a.command == "demo") return cmd_demo(a);
        if (a.command == "break-lease") return cmd_break_lease(a);
        if (a.command == "update-state") return cmd_update_state(a);
        if (a.command == "serve") return cmd_serve(a);
    } catch (const usage_error& e) {
        std::cerr << "error: " << one_line(e.what()) << " (see global_supervisor --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "error: " << error_line(e, thread) << "\n";
        return 1;
    }
    return 2;
}
