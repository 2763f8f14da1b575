#pragma once
/// @file json_shape.hpp
/// @brief How described types meet a caller's JSON: `merge_json` reads a JSON object into a
/// described struct member by member (the members it leaves out keep their values), and
/// `json_schema_of<T>()` writes the JSON Schema of a type (for `/assistants/{id}/schemas`).
///
/// The merge rule (partial nested input): a JSON object given for a described struct sets the
/// members it names and leaves the others as they are, recursively for members that are
/// described structs themselves; every other value (a list, an optional, a map, a number, a
/// string, an enum) replaces what was there. A member the struct does not have is an
/// `unknown_member_error` naming the member and the struct. LangGraph replaces a dict channel
/// whole; stategraph merges on purpose (see the README's "Partial nested input").

#include <stategraph/core/detail/names.hpp>
#include <stategraph/core/error.hpp>

#include <boost/core/demangle.hpp>
#include <boost/describe/enumerators.hpp>
#include <boost/describe/members.hpp>
#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_to.hpp>
#include <boost/mp11/algorithm.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace stategraph {

/// @brief A caller's JSON names a member that a described struct does not have.
/// `names()` is {member, struct}; the code is the caller's (`invalid_input` for input and
/// `update_state`).
class unknown_member_error : public graph_error {
public:
    unknown_member_error(errc code, const std::string& what, std::string member, std::string type)
        : graph_error(code, what, {member, type}), member_(std::move(member)), type_(std::move(type)) {}
    /// @brief The member the JSON named.
    const std::string& member() const noexcept { return member_; }
    /// @brief The struct it is not a member of (its unqualified name).
    const std::string& type() const noexcept { return type_; }

private:
    std::string member_, type_;
};

namespace detail {

template <class T>
inline constexpr bool is_described_struct_v =
    std::is_class_v<T> && boost::describe::has_describe_members<T>::value;

template <class T>
inline constexpr bool is_described_enum_v = std::is_enum_v<T> && boost::describe::has_describe_enumerators<T>::value;

template <class T> struct is_optional : std::false_type {};
template <class T> struct is_optional<std::optional<T>> : std::true_type { using type = T; };
template <class T> struct is_std_vector : std::false_type {};
template <class T, class A> struct is_std_vector<std::vector<T, A>> : std::true_type { using type = T; };
template <class T> struct is_string_map : std::false_type {};
template <class T, class C, class A> struct is_string_map<std::map<std::string, T, C, A>> : std::true_type { using type = T; };

template <class T>
using public_members = boost::describe::describe_members<T, boost::describe::mod_public | boost::describe::mod_inherited>;

/// The type's name without its namespaces ("conversation_state").
/// The unqualified name of a type (`"my::ns::order"` -> `"order"`).
std::string short_type_name(const std::type_info& type);
template <class T>
std::string short_type_name() {
    return short_type_name(typeid(T));
}

// The errors of reading JSON into a type, compiled once in the library (not in every program
// that reads its state): their messages name the path, the type and the value.
/// Throws `graph_error(code)`: `where` expects `type`, got `v`.
[[noreturn]] void throw_json_type(errc code, const std::string& where, const std::type_info& type,
                                  const boost::json::value& v);
/// Throws `unknown_member_error(code)`: `key` is not a member of `type` (with the nearest of `members`).
[[noreturn]] void throw_unknown_member(errc code, const std::string& where, std::string_view key,
                                       const std::type_info& type, const std::vector<std::string>& members);

template <class T>
std::vector<std::string> member_names() {
    std::vector<std::string> out;
    boost::mp11::mp_for_each<public_members<T>>([&](auto m) { out.emplace_back(m.name); });
    return out;
}

} // namespace detail

/// @brief Reads `v` into `target` under the merge rule above. `where` names the place for
/// messages ("input.conversation"). Throws `unknown_member_error`, or `graph_error(code)` naming
/// the member when a value does not convert.
/// @tparam T a described struct (merged member by member) or any type with a JSON conversion
/// (replaced whole).
/// @param target the value read into; members the JSON leaves out keep their values.
/// @param v the caller's JSON.
/// @param code the `errc` of the error thrown (`invalid_input` for callers' input).
/// @param where the path for messages; each nested member appends ".name".
/// Thread safety: touches only `target`; any thread.
template <class T>
void merge_json(T& target, const boost::json::value& v, errc code, const std::string& where) {
    if constexpr (detail::is_described_struct_v<T>) {
        if (const auto* o = v.if_object()) {
            for (const auto& kv : *o) {
                // (named, not a structured binding: clang 14 cannot capture those in a lambda)
                const boost::json::string_view key = kv.key();
                const boost::json::value& value = kv.value();
                bool found = false;
                boost::mp11::mp_for_each<detail::public_members<T>>([&](auto m) {
                    if (found || key != m.name) return;
                    found = true;
                    merge_json(target.*m.pointer, value, code, where + "." + std::string(key));
                });
                if (!found) detail::throw_unknown_member(code, where, key, typeid(T), detail::member_names<T>());
            }
            return;
        }
    }
    auto r = boost::json::try_value_to<T>(v);
    if (!r) detail::throw_json_type(code, where, typeid(T), v);
    target = std::move(*r);
}

/// @brief Reads a whole `T` from `v` under the merge rule: members left out keep `T{}`'s values.
/// @tparam T as for `merge_json`, default-constructible.
/// @param v the JSON.
/// @param code the `errc` of the error thrown.
/// @param where the path for messages.
template <class T>
T read_json(const boost::json::value& v, errc code, const std::string& where) {
    T out{};
    merge_json(out, v, code, where);
    return out;
}

/// @brief The JSON Schema of `T`: objects for described structs (with a title and, when
/// `required` is true, every member required), strings with an `enum` for described enums,
/// arrays, maps as objects with `additionalProperties`, optionals as `anyOf [T, null]`.
/// @tparam T the type described.
/// @param required list every member of a described struct as required.
/// (Built once per graph: `[[gnu::cold]]` has it optimized for size, and compiled quicker.)
template <class T>
[[gnu::cold]] boost::json::object json_schema_of(bool required = false) {
    using boost::json::object;
    if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view>) {
        return object{{"type", "string"}};
    } else if constexpr (std::is_same_v<T, bool>) {
        return object{{"type", "boolean"}};
    } else if constexpr (detail::is_described_enum_v<T>) {
        boost::json::array names;
        boost::mp11::mp_for_each<boost::describe::describe_enumerators<T>>([&](auto e) { names.emplace_back(e.name); });
        return object{{"type", "string"}, {"enum", std::move(names)}, {"title", detail::short_type_name<T>()}};
    } else if constexpr (std::is_integral_v<T>) {
        return object{{"type", "integer"}};
    } else if constexpr (std::is_floating_point_v<T>) {
        return object{{"type", "number"}};
    } else if constexpr (detail::is_optional<T>::value) {
        return object{{"anyOf", boost::json::array{json_schema_of<typename detail::is_optional<T>::type>(required),
                                                   object{{"type", "null"}}}}};
    } else if constexpr (detail::is_std_vector<T>::value) {
        return object{{"type", "array"}, {"items", json_schema_of<typename detail::is_std_vector<T>::type>(required)}};
    } else if constexpr (detail::is_string_map<T>::value) {
        return object{{"type", "object"},
                      {"additionalProperties", json_schema_of<typename detail::is_string_map<T>::type>(required)}};
    } else if constexpr (detail::is_described_struct_v<T>) {
        object props;
        boost::json::array names;
        boost::mp11::mp_for_each<detail::public_members<T>>([&](auto m) {
            using M = std::remove_cvref_t<decltype(std::declval<T&>().*m.pointer)>;
            props[m.name] = json_schema_of<M>(required);
            names.emplace_back(m.name);
        });
        object o{{"title", detail::short_type_name<T>()}, {"type", "object"}, {"properties", std::move(props)},
                 {"additionalProperties", false}};
        if (required) o["required"] = std::move(names);
        return o;
    } else if constexpr (std::is_same_v<T, boost::json::object>) {
        return object{{"type", "object"}};
    } else if constexpr (std::is_same_v<T, boost::json::array>) {
        return object{{"type", "array"}};
    } else {
        return object{{"description", boost::core::demangle(typeid(T).name())}};
    }
}

} // namespace stategraph
