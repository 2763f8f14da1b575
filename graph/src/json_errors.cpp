// Reading JSON into a state or a described type: the error paths and helpers that do not depend
// on the type (see json_shape.hpp and detail/state_ops.hpp), compiled here once.
#include <stategraph/detail/state_ops.hpp>
#include <stategraph/json_shape.hpp>

#include <boost/core/demangle.hpp>
#include <boost/json/serialize.hpp>

#include <cmath>

namespace stategraph::detail {

std::string short_type_name(const std::type_info& type) {
    std::string n = boost::core::demangle(type.name());
    const auto tmpl = n.find('<');
    const auto colon = n.rfind("::", tmpl);
    return colon == std::string::npos ? n : n.substr(colon + 2);
}

void throw_json_type(errc code, const std::string& where, const std::type_info& type, const boost::json::value& v) {
    throw graph_error(code, where + ": expects " + boost::core::demangle(type.name()) + ", got " + boost::json::serialize(v),
                      {where});
}

void throw_unknown_member(errc code, const std::string& where, std::string_view key, const std::type_info& type,
                          const std::vector<std::string>& members) {
    const std::string name = short_type_name(type);
    const auto near = nearest_name(std::string(key), members);
    throw unknown_member_error(code,
                               where + ": '" + std::string(key) + "' is not a member of " + name +
                                   (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                               std::string(key), name);
}

bool holds_non_finite(const boost::json::value& v) {
    if (const double* d = v.if_double()) return !std::isfinite(*d);
    if (const auto* a = v.if_array()) {
        for (const auto& e : *a)
            if (holds_non_finite(e)) return true;
    } else if (const auto* o = v.if_object()) {
        for (const auto& kv : *o)
            if (holds_non_finite(kv.value())) return true;
    }
    return false;
}

void throw_non_finite(std::string_view name, errc code, const std::string& where) {
    const std::string field(name);
    throw graph_error(code, where + ": field '" + field + "' holds a number JSON cannot carry (NaN or infinity)", {field});
}

void throw_field_type(std::string_view name, const std::type_info& type, const boost::json::value& v, errc code,
                      const std::string& where) {
    const std::string field(name);
    throw graph_error(code,
                      where + ": field '" + field + "' expects " + boost::core::demangle(type.name()) + ", got " +
                          boost::json::serialize(v),
                      {field});
}

void throw_unknown_field(std::string_view key, const std::vector<std::string>& names, errc code, const std::string& where) {
    const std::string k(key);
    const auto near = nearest_name(k, names);
    throw graph_error(code, where + ": unknown field '" + k + "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                      {k});
}

} // namespace stategraph::detail
