// parse_server_configs: the JSON form of a worker's MCP servers, every problem reported at once.

#include <stategraph/mcp/error.hpp>
#include <stategraph/mcp/server_config.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>
#include <set>

namespace stategraph::mcp {

namespace json = boost::json;

namespace {

class config_parser {
public:
    std::vector<server_config> parse(json::value const& root) {
        json::array const* list = root.if_array();
        std::string where = "the server list";
        if (auto const* obj = root.if_object()) {
            auto const* servers = obj->if_contains("mcp_servers");
            if (!servers) problem("expected a JSON array of servers, or an object with an \"mcp_servers\" array");
            else if (!(list = servers->if_array())) problem("\"mcp_servers\" must be an array");
        } else if (!list) {
            problem("expected a JSON array of servers, or an object with an \"mcp_servers\" array");
        }
        std::vector<server_config> out;
        std::set<std::string> names;
        if (list) {
            for (std::size_t i = 0; i < list->size(); ++i) {
                auto config = parse_one((*list)[i], i);
                if (!config.name.empty() && !names.insert(config.name).second)
                    problem("mcp_servers[" + std::to_string(i) + "]: the name \"" + config.name + "\" is used twice");
                out.push_back(std::move(config));
            }
        }
        if (!problems_.empty()) {
            std::string text = std::to_string(problems_.size()) + " problem(s) in the MCP server configuration:";
            for (auto const& p : problems_) text += "\n  " + p;
            throw mcp_error(errc::bad_config, first_server_, text);
        }
        return out;
    }

private:
    void problem(std::string text) { problems_.push_back(std::move(text)); }

    server_config parse_one(json::value const& item, std::size_t index) {
        server_config c;
        std::string where = "mcp_servers[" + std::to_string(index) + "]";
        auto const* obj = item.if_object();
        if (!obj) {
            problem(where + ": expected an object, got " + json::serialize(item));
            return c;
        }
        if (auto const* name = obj->if_contains("name"); name && name->is_string() && !name->get_string().empty()) {
            c.name = std::string(name->get_string());
            where += " (server '" + c.name + "')";
            if (first_server_.empty()) first_server_ = c.name;
        } else {
            problem(where + ": field 'name' is required (a non-empty string)");
        }
        static std::set<std::string> const known{"name", "type", "command", "args", "env", "url",
                                                 "headers", "timeout", "description"};
        for (auto const& [key, value] : *obj)
            if (!known.count(std::string(key)))
                problem(where + ": unknown field '" + std::string(key) +
                        "' (the fields are name, type, command, args, env, url, headers, timeout, description)");
        auto text = [&](char const* field, std::string& out) {
            auto const* v = obj->if_contains(field);
            if (!v) return false;
            if (!v->is_string()) {
                problem(where + ": field '" + field + "' must be a string");
                return false;
            }
            out = std::string(v->get_string());
            return true;
        };
        auto string_map = [&](char const* field, std::map<std::string, std::string>& out) {
            auto const* v = obj->if_contains(field);
            if (!v) return;
            auto const* m = v->if_object();
            if (!m) {
                problem(where + ": field '" + field + "' must be an object of strings");
                return;
            }
            for (auto const& [key, value] : *m) {
                if (!value.is_string()) problem(where + ": field '" + field + "." + std::string(key) + "' must be a string");
                else out[std::string(key)] = std::string(value.get_string());
            }
        };
        std::string type;
        if (!obj->contains("type")) {
            problem(where + ": field 'type' is required (\"stdio\" or \"http\")");
        } else if (text("type", type)) {
            if (type == "stdio") c.type = transport_kind::stdio;
            else if (type == "http" || type == "streamable-http" || type == "streamableHttp") c.type = transport_kind::http;
            else problem(where + ": field 'type' is \"" + type + "\"; expected \"stdio\" or \"http\"");
        }
        text("command", c.command);
        text("url", c.url);
        text("description", c.description);
        if (auto const* args = obj->if_contains("args")) {
            if (auto const* a = args->if_array()) {
                for (std::size_t i = 0; i < a->size(); ++i) {
                    if (!(*a)[i].is_string()) problem(where + ": field 'args[" + std::to_string(i) + "]' must be a string");
                    else c.args.emplace_back((*a)[i].get_string());
                }
            } else {
                problem(where + ": field 'args' must be an array of strings");
            }
        }
        string_map("env", c.env);
        string_map("headers", c.headers);
        if (auto const* t = obj->if_contains("timeout")) {
            double seconds = -1;
            if (t->is_int64()) seconds = static_cast<double>(t->get_int64());
            else if (t->is_uint64()) seconds = static_cast<double>(t->get_uint64());
            else if (t->is_double()) seconds = t->get_double();
            if (!(seconds > 0) || !std::isfinite(seconds) || seconds > 86400.0 * 365)
                problem(where + ": field 'timeout' must be a positive number of seconds, got " + json::serialize(*t));
            else c.timeout = std::chrono::milliseconds(static_cast<long long>(std::ceil(seconds * 1000)));
        }
        if (c.type == transport_kind::stdio && type == "stdio") {
            if (c.command.empty()) problem(where + ": field 'command' is required for type \"stdio\"");
            for (char const* field : {"url", "headers"})
                if (obj->contains(field)) problem(where + ": field '" + std::string(field) + "' is for type \"http\", not \"stdio\"");
        }
        if (c.type == transport_kind::http && !type.empty()) {
            if (c.url.empty()) problem(where + ": field 'url' is required for type \"http\"");
            else if (c.url.rfind("http://", 0) != 0 && c.url.rfind("https://", 0) != 0)
                problem(where + ": field 'url' must start with http:// or https://, got \"" + c.url + "\"");
            for (char const* field : {"command", "args", "env"})
                if (obj->contains(field)) problem(where + ": field '" + std::string(field) + "' is for type \"stdio\", not \"http\"");
        }
        return c;
    }

    std::vector<std::string> problems_;
    std::string first_server_;
};

}  // namespace

std::vector<server_config> parse_server_configs(json::value const& json) {
    config_parser parser;
    return parser.parse(json);
}

std::vector<server_config> parse_server_configs(std::string_view json_text) {
    boost::system::error_code ec;
    auto value = json::parse(json_text, ec);
    if (ec)
        throw mcp_error(errc::bad_config, std::string(),
                        "the MCP server configuration is not valid JSON: " + ec.message());
    return parse_server_configs(value);
}

}  // namespace stategraph::mcp
