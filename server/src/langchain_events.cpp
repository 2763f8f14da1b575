// Stream mode "events": LangChain's astream_events v2 records, as LangGraph's server sends them
// (`event: events`), made from what the engine already streams:
//
//   the run starts              -> on_chain_start  "LangGraph"  data {input}
//   a task starts (tasks)       -> on_chain_start  <node>       data {input: the state it reads}
//   a model token (messages)    -> on_chat_model_stream         data {chunk}
//   a node's update (updates)   -> on_chain_stream "LangGraph"  data {chunk: {<node>: update}}
//   a task ends (tasks)         -> on_chain_end    <node>       data {output: its writes, input}
//   the run ends or interrupts  -> on_chain_end    "LangGraph"  data {output: the values}
//
// Each record has LangChain's fields: event, name, run_id (the run's for the graph, the task's id
// for a node), tags (`graph:step:N` for a node), metadata (thread_id and the langgraph_* keys),
// data and parent_ids. Differences from LangGraph, on purpose or not built: no records for the
// hidden `__start__` task; a task that interrupts or fails has no on_chain_end (LangChain ends it
// with an error, which astream_events does not stream); subgraphs' records come with
// `stream_subgraphs` only, named `events|<ns>` as the other modes (LangGraph nests them in the
// parent's stream).

#include "impl.hpp"

namespace stategraph::server {

namespace {

constexpr std::string_view graph_name = "LangGraph"; // LangGraph's name for a compiled graph

json::object langchain_record(std::string_view event, std::string_view name, std::string_view run_id, json::array tags,
                              json::object metadata, json::object data, json::array parent_ids) {
    return json::object{{"event", event},        {"name", name},         {"run_id", run_id},
                        {"tags", std::move(tags)}, {"metadata", std::move(metadata)}, {"data", std::move(data)},
                        {"parent_ids", std::move(parent_ids)}};
}

/// The event name: "events", or "events|<ns>..." for a subgraph's.
std::string event_name(const std::vector<std::string>& ns) {
    std::string name = "events";
    for (const auto& n : ns) name.append(1, reserved::ns_separator).append(n);
    return name;
}

} // namespace

void server::impl::record_graph_event(live_run& run, bool start, json::value data) {
    json::object meta{{"thread_id", run.rec.thread_id}, {"run_id", run.rec.run_id}, {"graph_id", run.rec.graph_id}};
    json::object d;
    d[start ? "input" : "output"] = std::move(data);
    record(run, "events",
           langchain_record(start ? "on_chain_start" : "on_chain_end", graph_name, run.rec.run_id, {}, std::move(meta), std::move(d), {}));
}

void server::impl::record_langchain_events(live_run& run, const stream_event& e) {
    const std::string& root = run.rec.run_id;
    switch (e.mode) {
    case stream_mode::tasks: {
        const auto* task = e.data.if_object();
        if (!task) return;
        const auto* id_value = task->if_contains("id");
        if (!id_value || !id_value->is_string()) return;
        const std::string id(id_value->get_string());
        std::string ns;
        for (const auto& n : e.ns) ns.append(n).append(1, reserved::ns_separator);
        ns.append(e.node).append(":").append(id);
        json::object meta{{"thread_id", run.rec.thread_id},
                          {"langgraph_step", e.step},
                          {"langgraph_node", e.node},
                          {"langgraph_checkpoint_ns", ns},
                          {"checkpoint_ns", ns}};
        const bool start = !task->contains("result");
        if (start) {
            const json::value* triggers = task->if_contains("triggers");
            meta["langgraph_triggers"] = triggers ? *triggers : json::value(json::array{});
            const bool pushed = triggers && triggers->is_array() && !triggers->get_array().empty() &&
                                triggers->get_array()[0] == "__pregel_push";
            meta["langgraph_path"] = json::array{pushed ? "__pregel_push" : "__pregel_pull", e.node};
            const json::value input = task->contains("input") ? task->at("input") : json::value(nullptr);
            run.task_inputs[id] = input;
            record(run, event_name(e.ns),
                   langchain_record("on_chain_start", e.node, id, json::array{json::string("graph:step:" + std::to_string(e.step))},
                                    std::move(meta), json::object{{"input", input}}, json::array{json::string(root)}));
            return;
        }
        json::value input = nullptr;
        if (auto it = run.task_inputs.find(id); it != run.task_inputs.end()) {
            input = std::move(it->second);
            run.task_inputs.erase(it);
        }
        const auto* interrupts = task->if_contains("interrupts");
        const auto* error = task->if_contains("error");
        if ((interrupts && interrupts->is_array() && !interrupts->get_array().empty()) || (error && !error->is_null())) return;
        record(run, event_name(e.ns),
               langchain_record("on_chain_end", e.node, id, json::array{json::string("graph:step:" + std::to_string(e.step))},
                                std::move(meta), json::object{{"output", task->at("result")}, {"input", std::move(input)}},
                                json::array{json::string(root)}));
        return;
    }
    case stream_mode::updates: {
        if (e.interrupt || !e.ns.empty()) return;
        json::object meta{{"thread_id", run.rec.thread_id}};
        record(run, "events",
               langchain_record("on_chain_stream", graph_name, root, {}, std::move(meta),
                                json::object{{"chunk", json::object{{e.node, e.data}}}}, {}));
        return;
    }
    case stream_mode::messages: {
        // The engine's message event: [chunk, metadata] (messages-tuple).
        const auto* pair = e.data.if_array();
        if (!pair || pair->size() != 2) return;
        json::object meta = (*pair)[1].is_object() ? (*pair)[1].get_object() : json::object{};
        std::string model = "chat_model";
        if (const auto* m = meta.if_contains("ls_model_name"); m && m->is_string()) model = m->get_string();
        std::string id;
        if (const auto* c = (*pair)[0].if_object())
            if (const auto* i = c->if_contains("id"); i && i->is_string()) id = i->get_string();
        json::array parents{json::string(root)};
        if (const auto* t = meta.if_contains("langgraph_task_id"); t && t->is_string()) parents.push_back(*t);
        record(run, event_name(e.ns),
               langchain_record("on_chat_model_stream", model, id, json::array{json::string("graph:step:" + std::to_string(e.step))},
                                std::move(meta), json::object{{"chunk", (*pair)[0]}}, std::move(parents)));
        return;
    }
    default: return;
    }
}

} // namespace stategraph::server
