// /assistants...: the graphs this server serves, their drawings (JSON, DOT, SVG with a thread's
// path on it) and their schemas.

#include "impl.hpp"

namespace stategraph::server {

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
        for (const auto& a : assistants) {
            if (graph && a->spec.graph_id != *graph) continue;
            if (name && a->spec.graph_id.find(*name) == std::string::npos) continue;
            auto j = assistant_json(*a);
            if (meta && !contains(j["metadata"], *meta)) continue;
            out.push_back(std::move(j));
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
    if (p.size() < 2) throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
    if (verb != http::verb::get) throw http_error(405, "method " + std::string(c.req.method_string()) + " is not allowed on " + std::string(c.req.target()));
    auto a = assistant_or_404(p[1]);
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
                           {"state_schema", state}, {"config_schema", nullptr}, {"context_schema", nullptr}});
        co_return;
    }
    throw http_error(404, "no route GET " + std::string(c.req.target()));
}

} // namespace stategraph::server
