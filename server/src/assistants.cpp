// /assistants...: the graphs this server serves, their drawings (JSON, DOT, SVG with a thread's
// path on it) and their schemas.

#include "impl.hpp"

namespace stategraph::server {

namespace {
/// The fields an assistant's body may set (POST /assistants, PATCH /assistants/{id}).
/// A graph served with a typed context (`assistant_options::context`) checks the assistant's
/// context now: a member it does not have, or a value that does not fit, is a 422 naming it.
void read_assistant_fields(const json::object& body, assistant_record& r, bool merge_metadata, const assistant_rec& served) {
    if (auto n = opt_string(body, "name")) r.name = *n;
    if (auto d = opt_string(body, "description")) r.description = *d;
    if (auto conf = opt_object(body, "config")) {
        if (const auto* limit = conf->if_contains("recursion_limit"); limit && (!limit->is_int64() || limit->get_int64() < 1))
            throw http_error(422, "field 'config.recursion_limit' must be a positive integer");
        r.config = *conf;
    }
    if (auto ctx = opt_object(body, "context")) {
        if (const auto& reader = served.spec.options.context) (void)reader->read(*ctx);
        r.context = *ctx;
    }
    if (auto meta = opt_object(body, "metadata")) {
        if (!merge_metadata) r.metadata = *meta;
        else
            for (const auto& [k, v] : *meta) r.metadata[k] = v;
    }
}
} // namespace

awaitable<void> server::impl::create_assistant(call& c) {
    json::object body = body_object(c);
    auto gid = opt_string(body, "graph_id");
    if (!gid) throw http_error(422, "field 'graph_id' is required (a graph this server serves)");
    auto served = assistant_or_404(*gid); // 404 naming the graphs served
    auto if_exists = one_of(body, "if_exists", {"raise", "do_nothing"});
    assistant_record r;
    r.assistant_id = opt_string(body, "assistant_id").value_or(new_uuid());
    if (!is_uuid(r.assistant_id)) throw http_error(422, "assistant_id '" + r.assistant_id + "' is not a UUID");
    if (find_assistant(r.assistant_id)) throw http_error(409, "assistant '" + r.assistant_id + "' already exists");
    r.owner = c.owner;
    r.graph_id = served->spec.graph_id;
    r.name = "Untitled";
    read_assistant_fields(body, r, false, *served);
    r.created_at = r.updated_at = run_store::now();
    if (!co_await store->create_assistant(r)) {
        auto have = co_await store->get_assistant(r.assistant_id);
        if (!have || have->owner != c.owner || if_exists == "raise")
            throw http_error(409, "assistant '" + r.assistant_id + "' already exists");
        r = std::move(*have);
    }
    assistant_rec view;
    view.stored = std::move(r);
    reply(c, 200, assistant_json(view));
}

awaitable<void> server::impl::change_assistant(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    auto a = co_await resolve_assistant(c, p[1]);
    if (!a->stored)
        throw http_error(409, "assistant '" + p[1] + "' is the graph '" + a->spec.graph_id +
                                  "' this server serves; create an assistant of it (POST /assistants) to change config or metadata");
    const std::string id = a->stored->assistant_id;
    if (p.size() == 2 && verb == http::verb::patch) {
        json::object body = body_object(c);
        assistant_record r = *a->stored;
        auto served = assistant_or_404(r.graph_id);
        if (auto gid = opt_string(body, "graph_id")) {
            served = assistant_or_404(*gid);
            r.graph_id = served->spec.graph_id;
        }
        read_assistant_fields(body, r, true, *served);
        r.updated_at = run_store::now();
        auto written = co_await store->add_assistant_version(std::move(r));
        if (!written) throw http_error(404, "assistant '" + id + "' not found");
        assistant_rec view;
        view.stored = std::move(written);
        reply(c, 200, assistant_json(view));
        co_return;
    }
    if (p.size() == 2 && verb == http::verb::delete_) {
        (void)co_await store->delete_assistant(id);
        reply(c, 204, nullptr);
        co_return;
    }
    if (p.size() == 3 && p[2] == "versions" && verb == http::verb::post) {
        json::object body = body_object(c);
        auto meta = opt_object(body, "metadata");
        auto limit = opt_int(body, "limit", 10, 1, 1000), offset = opt_int(body, "offset", 0, 0, INT64_MAX);
        json::array out;
        std::int64_t skipped = 0;
        for (auto& r : co_await store->assistant_versions(id)) {
            assistant_rec view;
            view.stored = std::move(r);
            auto j = assistant_json(view);
            if (meta && !contains(j["metadata"], *meta)) continue;
            if (skipped++ < offset) continue;
            if (out.size() >= static_cast<std::size_t>(limit)) break;
            out.push_back(std::move(j));
        }
        reply(c, 200, out);
        co_return;
    }
    if (p.size() == 3 && p[2] == "latest" && verb == http::verb::post) {
        json::object body = body_object(c);
        const auto* v = field(body, "version");
        if (!v || !v->is_int64()) throw http_error(422, "field 'version' is required (a version number)");
        if (!co_await store->set_latest_assistant(id, v->get_int64()))
            throw http_error(404, "assistant '" + id + "' has no version " + std::to_string(v->get_int64()));
        auto now = co_await resolve_assistant(c, id);
        reply(c, 200, assistant_json(*now));
        co_return;
    }
    throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on " + std::string(c.req.target()));
}

awaitable<void> server::impl::route_assistants(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    if (p.size() == 2 && (p[1] == "search" || p[1] == "count") && verb == http::verb::post) {
        json::object body = body_object(c);
        auto graph = opt_string(body, "graph_id");
        auto name = opt_string(body, "name");
        auto meta = opt_object(body, "metadata");
        auto limit = opt_int(body, "limit", 10, 1, 1000), offset = opt_int(body, "offset", 0, 0, INT64_MAX);
        json::array out;
        auto consider = [&](json::object j) {
            if (graph && j["graph_id"].as_string() != *graph) return;
            if (name && (!j["name"].is_string() || std::string_view(j["name"].get_string()).find(*name) == std::string_view::npos)) return;
            if (meta && !contains(j["metadata"], *meta)) return;
            out.push_back(std::move(j));
        };
        for (const auto& a : assistants) consider(assistant_json(*a));
        for (auto& r : co_await store->list_assistants(c.owner)) {
            assistant_rec view;
            view.stored = std::move(r);
            consider(assistant_json(view));
        }
        if (p[1] == "count") {
            reply(c, 200, static_cast<std::int64_t>(out.size()));
            co_return;
        }
        json::array page;
        for (std::size_t i = static_cast<std::size_t>(offset); i < out.size() && page.size() < static_cast<std::size_t>(limit); ++i)
            page.push_back(out[i]);
        std::vector<std::pair<std::string, std::string>> h{{"X-Pagination-Total", std::to_string(out.size())}};
        if (page.size() == static_cast<std::size_t>(limit)) h.emplace_back("X-Pagination-Next", std::to_string(offset + limit));
        reply(c, 200, page, std::move(h));
        co_return;
    }
    if (p.size() == 1 && verb == http::verb::post) {
        co_await create_assistant(c);
        co_return;
    }
    if (p.size() < 2) throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
    if (verb != http::verb::get) {
        co_await change_assistant(c);
        co_return;
    }
    auto a = co_await resolve_assistant(c, p[1]);
    if (p.size() == 2) {
        reply(c, 200, assistant_json(*a));
        co_return;
    }
    if (p.size() == 3 && p[2] == "graph") {
        const topology& t = a->graph.shape();
        if (auto f = c.query.get("format"); f && *f != "json") {
            if (*f != "dot" && *f != "svg") throw http_error(422, "query parameter 'format' must be json, dot or svg (got '" + *f + "')");
            // ?thread_id=T[&checkpoint_id=C]: the thread's path, next nodes, interrupts and failures drawn on it.
            dot_options overlay;
            if (auto tid = c.query.get("thread_id")) {
                auto th = co_await thread_or_404(c, *tid);
                if (th.graph_id != a->spec.graph_id)
                    throw http_error(422, "thread '" + *tid + "' is not a thread of graph '" + a->spec.graph_id + "'");
                auto history = co_await a->graph.get_state_history(th.key);
                overlay = overlay_of_history(history, *tid, c.query.get("checkpoint_id").value_or(""));
            }
            std::ostringstream os;
            write_dot(os, t, overlay);
            if (*f == "dot") {
                reply_text(c, 200, os.str(), "text/vnd.graphviz");
                co_return;
            }
            auto job = std::make_unique<studio::svg_job>(studio::svg_job{opts.dot_program, os.str(), opts.dot_timeout});
            auto svg = co_await studio::render_svg(std::move(job));
            if (svg.status != 200) throw http_error(svg.status, svg.body);
            reply_text(c, 200, std::move(svg.body), "image/svg+xml");
            co_return;
        }
        json::array nodes{json::object{{"id", START}, {"type", "schema"}, {"data", START}}};
        for (const auto& n : t.nodes)
            nodes.push_back(json::object{{"id", n.name},
                                         {"type", "runnable"},
                                         {"data", json::object{{"id", json::array{"stategraph", "node", json::string(n.name)}},
                                                               {"name", n.name}}},
                                         {"metadata", n.stage.empty() ? json::value(nullptr) : json::value(json::object{{"stage", n.stage}})}});
        nodes.push_back(json::object{{"id", END}, {"type", "schema"}, {"data", END}});
        json::array edges;
        for (const auto& e : t.edges) edges.push_back(json::object{{"source", e.from}, {"target", e.to}});
        for (const auto& j : t.joins)
            for (const auto& s : j.sources) edges.push_back(json::object{{"source", s}, {"target", j.target}});
        for (const auto& b : t.branches)
            for (const auto& [label, target] : b.routes)
                edges.push_back(json::object{{"source", b.from}, {"target", target}, {"data", label}, {"conditional", true}});
        for (const auto& n : t.nodes)
            for (const auto& e : n.ends) edges.push_back(json::object{{"source", n.name}, {"target", e}, {"conditional", true}});
        reply(c, 200, json::object{{"nodes", std::move(nodes)}, {"edges", std::move(edges)}});
        co_return;
    }
    if (p.size() == 3 && p[2] == "schemas") {
        // JSON Schema of the state, and of what callers send and get back: the graph's input and
        // output schemas when it declares them (state_graph::input_schema / output_schema), else the state.
        const auto& core = *a->graph.core();
        json::object state = core.state_schema;
        state["title"] = a->spec.graph_id;
        const json::value input = core.input ? json::value(core.input->json_schema) : json::value(state);
        const json::value output = core.output ? json::value(core.output->json_schema) : json::value(state);
        reply(c, 200,
              json::object{{"graph_id", a->spec.graph_id}, {"input_schema", input}, {"output_schema", output},
                           {"state_schema", state}, {"config_schema", nullptr},
                           {"context_schema", a->spec.options.context ? json::value(a->spec.options.context->schema) : json::value(nullptr)}});
        co_return;
    }
    throw http_error(404, "no route GET " + std::string(c.req.target()));
}

} // namespace stategraph::server
