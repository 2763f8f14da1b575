// Stream mode "messages" (LangGraph's legacy form; "messages-tuple" is the current one), as
// LangGraph's server sends it, made from the engine's message chunks:
//
//   the first chunk of a message id  -> messages/metadata  {"<id>": {"metadata": {...}}}
//   each chunk                       -> messages/partial   [the message accumulated so far]
//   a whole message (not a chunk)    -> messages/complete  [the message]
//
// The accumulated message is shown as a message, not a chunk: its type loses "MessageChunk"
// ("AIMessageChunk" -> "ai"), its content is the chunks' content joined, and its tool calls are
// the tool-call chunks merged by index with their arguments parsed (those that do not parse are
// `invalid_tool_calls`), as LangChain's message_chunk_to_message does. A subgraph's events come
// with `stream_subgraphs` only, named `messages/partial|<ns>` as the other modes.

#include "impl.hpp"

namespace stategraph::server {

namespace {

/// "AIMessageChunk" -> "ai", "ToolMessageChunk" -> "tool"; other types as they are.
std::string message_type_of(std::string_view chunk_type) {
    constexpr std::string_view suffix = "MessageChunk";
    if (chunk_type.size() <= suffix.size() || chunk_type.substr(chunk_type.size() - suffix.size()) != suffix)
        return std::string(chunk_type);
    std::string base(chunk_type.substr(0, chunk_type.size() - suffix.size()));
    for (auto& c : base) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return base;
}

bool is_chunk(const json::object& m) {
    const auto* t = m.if_contains("type");
    return t && t->is_string() && std::string_view(t->get_string()).ends_with("Chunk");
}

/// Adds @p chunk's tool-call chunks to @p acc's, merging those of one index (their name and id
/// kept from the first that has them, their arguments joined).
void merge_tool_call_chunks(json::array& acc, const json::array& more) {
    for (const auto& c : more) {
        const auto* o = c.if_object();
        if (!o) continue;
        const auto* index = o->if_contains("index");
        json::object* same = nullptr;
        if (index && !index->is_null())
            for (auto& a : acc)
                if (auto* ao = a.if_object(); ao && ao->contains("index") && ao->at("index") == *index) same = ao;
        if (!same) {
            acc.push_back(*o);
            continue;
        }
        for (const char* k : {"name", "id"})
            if (const auto* v = o->if_contains(k); v && v->is_string() && !v->get_string().empty()) {
                auto* mine = same->if_contains(k);
                if (!mine || !mine->is_string() || mine->get_string().empty()) (*same)[k] = *v;
            }
        if (const auto* args = o->if_contains("args"); args && args->is_string()) {
            std::string joined;
            if (const auto* mine = same->if_contains("args"); mine && mine->is_string()) joined = mine->get_string();
            joined += args->get_string();
            (*same)["args"] = joined;
        }
    }
}

/// Adds @p chunk to @p acc (the message accumulated from the chunks before it).
void accumulate(json::object& acc, const json::object& chunk) {
    for (const auto& [k, v] : chunk) {
        if (k == "content" && v.is_string()) {
            const auto* mine = acc.if_contains("content");
            std::string joined = mine && mine->is_string() ? std::string(mine->get_string()) : std::string();
            joined += v.get_string();
            acc["content"] = joined;
        } else if (k == "tool_call_chunks" && v.is_array()) {
            auto* mine = acc.if_contains("tool_call_chunks");
            if (!mine || !mine->is_array()) mine = &(acc["tool_call_chunks"] = json::array{});
            merge_tool_call_chunks(mine->get_array(), v.get_array());
        } else if (!acc.contains(k) || acc.at(k).is_null()) {
            acc[k] = v;
        }
    }
}

/// The message @p acc (accumulated chunks) stands for.
json::object as_message(const json::object& acc) {
    json::object out;
    json::array calls, invalid;
    for (const auto& [k, v] : acc) {
        if (k == "type" && v.is_string()) {
            out["type"] = message_type_of(v.get_string());
        } else if (k == "tool_call_chunks" && v.is_array()) {
            for (const auto& c : v.get_array()) {
                const auto* o = c.if_object();
                if (!o) continue;
                json::value name = o->contains("name") ? o->at("name") : json::value(nullptr);
                json::value id = o->contains("id") ? o->at("id") : json::value(nullptr);
                const auto* args = o->if_contains("args");
                const std::string text = args && args->is_string() ? std::string(args->get_string()) : std::string();
                boost::system::error_code ec;
                json::value parsed = text.empty() ? json::value(json::object{}) : json::parse(text, ec);
                if (!ec && parsed.is_object())
                    calls.push_back(json::object{{"name", name}, {"args", parsed}, {"id", id}, {"type", "tool_call"}});
                else
                    invalid.push_back(json::object{{"name", name}, {"args", text}, {"id", id}, {"error", nullptr}, {"type", "invalid_tool_call"}});
            }
        } else {
            out[k] = v;
        }
    }
    if (!out.contains("tool_calls")) out["tool_calls"] = std::move(calls);
    if (!out.contains("invalid_tool_calls")) out["invalid_tool_calls"] = std::move(invalid);
    for (const char* k : {"additional_kwargs", "response_metadata"})
        if (!out.contains(k)) out[k] = json::object{};
    return out;
}

} // namespace

void server::impl::record_legacy_messages(live_run& run, const stream_event& e) {
    const auto* pair = e.data.if_array();
    if (!pair || pair->size() != 2 || !(*pair)[0].is_object()) return;
    const json::object& message = (*pair)[0].get_object();
    std::string suffix;
    for (const auto& n : e.ns) suffix.append(1, reserved::ns_separator).append(n);
    std::string id;
    if (const auto* i = message.if_contains("id"); i && i->is_string()) id = i->get_string();
    // A message with no id is one of its own (LangChain gives every message one before streaming).
    const std::string key = suffix + '\n' + (id.empty() ? "#" + std::to_string(run.legacy_messages.size()) : id);
    auto it = run.legacy_messages.find(key);
    const bool chunk = is_chunk(message);
    if (it == run.legacy_messages.end()) {
        it = run.legacy_messages.emplace(key, chunk ? json::object{} : message).first;
        json::object meta = (*pair)[1].is_object() ? (*pair)[1].get_object() : json::object{};
        json::object announced;
        announced[id] = json::object{{"metadata", std::move(meta)}};
        record(run, "messages/metadata" + suffix, announced);
    } else if (!chunk) {
        it->second = message;
    }
    if (chunk) accumulate(it->second, message);
    const json::array shown{as_message(it->second)};
    record(run, (chunk ? "messages/partial" : "messages/complete") + suffix, shown);
}

} // namespace stategraph::server
