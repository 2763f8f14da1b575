// make_tools: an MCP server's tools as stategraph::nodes::tool values.

#include <stategraph/mcp/tools.hpp>

#include <boost/json/serialize.hpp>

namespace stategraph::mcp {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

asio::awaitable<json::value> call_adapted(client server, std::string tool, json::object arguments,
                                          std::chrono::milliseconds timeout) {
    call_options options;
    options.timeout = timeout;
    auto op = server.call_tool(tool, std::move(arguments), std::move(options));
    auto result = co_await std::move(op);
    if (result.is_error) {
        auto text = result.text();
        if (text.empty()) text = json::serialize(result.content);
        throw mcp_error(errc::tool_error, server.name(),
                        "MCP server '" + server.name() + "': tool '" + tool + "' reported an error: " + text, tool);
    }
    co_return tool_message_content(result);
}

}  // namespace

json::value tool_message_content(call_result const& result) {
    bool all_text = !result.content.empty();
    for (auto const& item : result.content) {
        auto const* obj = item.if_object();
        auto const* type = obj ? obj->if_contains("type") : nullptr;
        all_text = all_text && type && type->is_string() && type->get_string() == "text";
    }
    if (all_text) return json::value(result.text());
    if (!result.structured_content.is_null()) return result.structured_content;
    return json::value(result.content);
}

asio::awaitable<json::value> tool_function::operator()(json::object const& arguments) const {
    return call_adapted(server, tool, arguments, timeout);
}

std::vector<nodes::tool> make_tools(client const& server, tool_options const& options) {
    std::vector<nodes::tool> out;
    for (auto const& info : server.tools()) {
        json::value schema = info.input_schema;
        if (schema.is_null()) schema = json::object{{"type", "object"}};
        auto description = info.description.empty() ? info.title : info.description;
        tool_function fn{server, info.name, options.timeout};
        nodes::tool t(options.prefix + info.name, std::move(description), std::move(schema), std::move(fn));
        t.ask_first(options.ask_first);
        out.push_back(std::move(t));
    }
    return out;
}

std::vector<nodes::tool> make_tools(std::vector<client> const& servers, tool_options const& options) {
    std::vector<nodes::tool> out;
    for (auto const& s : servers) {
        auto some = make_tools(s, options);
        for (auto& t : some) out.push_back(std::move(t));
    }
    return out;
}

}  // namespace stategraph::mcp
