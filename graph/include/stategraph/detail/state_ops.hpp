#pragma once
/// @file detail/state_ops.hpp
/// @brief Per-field operations generated from a state's description: apply an update through
/// the reducers, and convert fields to and from JSON.

#include <stategraph/core/error.hpp>
#include <stategraph/json_shape.hpp>
#include <stategraph/reducer.hpp>
#include <stategraph/update.hpp>

#include <boost/core/demangle.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <boost/mp11/algorithm.hpp>

#include <typeinfo>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::detail {

/// True when `v` holds a double that is NaN or infinite, at any depth.
bool holds_non_finite(const boost::json::value& v);

// A state field's read errors, compiled once in the library.
/// Throws `graph_error(code)`: field `name` holds NaN or an infinity.
[[noreturn]] void throw_non_finite(std::string_view name, errc code, const std::string& where);
/// Throws `graph_error(code)`: field `name` expects `type`, got `v`.
[[noreturn]] void throw_field_type(std::string_view name, const std::type_info& type, const boost::json::value& v,
                                   errc code, const std::string& where);
/// Throws `graph_error(code)`: `key` is no field of the state (with the nearest of `names`).
[[noreturn]] void throw_unknown_field(std::string_view key, const std::vector<std::string>& names, errc code,
                                      const std::string& where);

/// The key of LangGraph's wire form of an overwrite: `{"__overwrite__": value}`.
inline constexpr std::string_view overwrite_key = "__overwrite__";

/// `{"__overwrite__": v}`.
inline boost::json::value wrap_overwrite(boost::json::value v) {
    boost::json::object o(v.storage());
    o[overwrite_key] = std::move(v);
    return o;
}

/// The value inside an overwrite's wire form, or null when `v` is not one.
inline const boost::json::value* overwritten_value(const boost::json::value& v) noexcept {
    const auto* o = v.if_object();
    if (!o || o->size() != 1) return nullptr;
    return o->if_contains(overwrite_key);
}

template <class S>
struct state_ops {
    static constexpr std::size_t n = field_count_v<S>;
    using red_t = reducers_of<S>;
    using tuple_t = std::remove_cvref_t<decltype(std::declval<red_t>().list)>;

    /// Whether field I keeps the last value (no reducer).
    template <std::size_t I>
    static constexpr bool is_last_value() { return reducer_slot<S, I, tuple_t>() < 0; }

    static bool last_value(std::size_t i) {
        return boost::mp11::mp_with_index<n>(i, [](auto I) { return is_last_value<decltype(I)::value>(); });
    }

    /// Applies field I of `u` onto `s` (reducer or replace).
    template <std::size_t I>
    static void apply_field(S& s, S& u, const red_t& reds) {
        constexpr auto ptr = boost::mp11::mp_at_c<state_fields<S>, I>::pointer;
        constexpr int slot = reducer_slot<S, I, tuple_t>();
        if constexpr (slot < 0) {
            s.*ptr = std::move(u.*ptr);
        } else {
            s.*ptr = std::get<slot>(reds.list).op(std::move(s.*ptr), std::move(u.*ptr));
        }
    }

    /// Applies every field set in `u` onto `s`; an overwritten field is assigned, bypassing its
    /// reducer. `u` is consumed.
    static void apply(S& s, update<S>& u, const red_t& reds) {
        if (u.empty()) return;
        for_each_field<S>([&](auto I, auto) {
            constexpr std::size_t i = decltype(I)::value;
            if (!u.has_index(i)) return;
            if (u.overwrites_index(i)) {
                constexpr auto ptr = boost::mp11::mp_at_c<state_fields<S>, i>::pointer;
                s.*ptr = std::move(u.values().*ptr);
            } else {
                apply_field<i>(s, u.values(), reds);
            }
        });
    }

    /// Applies `u` onto `s` without consuming it.
    static void apply_copy(S& s, const update<S>& u, const red_t& reds) {
        update<S> c = u;
        apply(s, c, reds);
    }

    /// Whether field I is a list under the `append` reducer: its saved versions can be deltas.
    template <std::size_t I>
    static constexpr bool is_append_list() {
        constexpr int slot = reducer_slot<S, I, tuple_t>();
        if constexpr (slot < 0) {
            return false;
        } else {
            using R = std::tuple_element_t<static_cast<std::size_t>(slot), tuple_t>;
            using T = std::remove_cvref_t<decltype(std::declval<S&>().*boost::mp11::mp_at_c<state_fields<S>, I>::pointer)>;
            return std::is_same_v<std::remove_cvref_t<decltype(std::declval<R&>().op)>, append_t> &&
                   !std::is_convertible_v<const T&, std::string_view> &&
                   requires(const T& t) { t.size(); t.begin() + 1; };
        }
    }

    /// Number of items of field i when it is an append list, npos otherwise.
    static std::size_t sequence_size(const S& s, std::size_t i) {
        return boost::mp11::mp_with_index<n>(i, [&](auto I) -> std::size_t {
            if constexpr (is_append_list<decltype(I)::value>()) {
                constexpr auto ptr = boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>::pointer;
                return static_cast<std::size_t>((s.*ptr).size());
            } else {
                return std::size_t(-1);
            }
        });
    }

    /// The items of append list i from position `from` on, as a JSON array.
    static boost::json::value tail_json(const S& s, std::size_t i, std::size_t from, boost::json::storage_ptr sp = {}) {
        return boost::mp11::mp_with_index<n>(i, [&](auto I) -> boost::json::value {
            if constexpr (is_append_list<decltype(I)::value>()) {
                constexpr auto ptr = boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>::pointer;
                const auto& c = s.*ptr;
                boost::json::array a(sp);
                a.reserve(c.size() - from);
                for (auto it = c.begin() + static_cast<std::ptrdiff_t>(from); it != c.end(); ++it)
                    a.push_back(boost::json::value_from(*it, sp));
                return a;
            } else {
                return to_json(s, i, sp);
            }
        });
    }

    static boost::json::value to_json(const S& s, std::size_t i, boost::json::storage_ptr sp = {}) {
        return boost::mp11::mp_with_index<n>(i, [&](auto I) {
            constexpr auto ptr = boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>::pointer;
            return boost::json::value_from(s.*ptr, sp);
        });
    }

    /// Reads field i from JSON; throws graph_error(code) naming the field on failure.
    /// A number JSON cannot carry (NaN or an infinity, which the parser makes of `1e999999` or
    /// `0e99999999`) anywhere in field i's value is an error naming the field: it could not be
    /// written out and read back as itself.
    static void refuse_non_finite(std::size_t i, const boost::json::value& v, errc code, const std::string& where) {
        if (holds_non_finite(v)) throw_non_finite(field_names<S>()[i], code, where);
    }

    static void from_json(S& s, std::size_t i, const boost::json::value& v, errc code, const std::string& where) {
        refuse_non_finite(i, v, code, where);
        boost::mp11::mp_with_index<n>(i, [&](auto I) {
            using D = boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>;
            using T = std::remove_cvref_t<decltype(std::declval<S&>().*D::pointer)>;
            auto r = boost::json::try_value_to<T>(v);
            if (!r) throw_field_type(D::name, typeid(T), v, code, where);
            s.*D::pointer = std::move(*r);
        });
    }

    /// Reads field i of an update from JSON against the thread's current state `current` (null:
    /// a new thread, the defaults): a last-value field holding a described struct starts from its
    /// current value and takes only the members `v` names (json_shape.hpp's merge rule); any
    /// other field is read whole, as `from_json`.
    static void merge_from_json(S& dst, const S* current, std::size_t i, const boost::json::value& v, errc code,
                                const std::string& where) {
        refuse_non_finite(i, v, code, where);
        boost::mp11::mp_with_index<n>(i, [&](auto I) {
            using D = boost::mp11::mp_at_c<state_fields<S>, decltype(I)::value>;
            using T = std::remove_cvref_t<decltype(std::declval<S&>().*D::pointer)>;
            if constexpr (is_described_struct_v<T> && is_last_value<decltype(I)::value>()) {
                if (v.is_object()) {
                    T merged = current ? current->*D::pointer : T{};
                    merge_json(merged, v, code, where + "." + std::string(D::name));
                    dst.*D::pointer = std::move(merged);
                    return;
                }
            }
            from_json(dst, i, v, code, where);
        });
    }

    static int index_of(std::string_view name) {
        const auto& names = field_names<S>();
        for (std::size_t i = 0; i < n; ++i)
            if (names[i] == name) return static_cast<int>(i);
        return -1;
    }

    /// The JSON object of every field set in `u`; an overwritten field with a reducer is written
    /// as `{"__overwrite__": value}`, LangGraph's wire form of `Overwrite`.
    static boost::json::object update_json(const update<S>& u) {
        boost::json::object o;
        const auto& names = field_names<S>();
        for (std::size_t i = 0; i < n; ++i) {
            if (!u.has_index(i)) continue;
            auto v = to_json(u.values(), i);
            if (u.overwrites_index(i) && !last_value(i)) o[names[i]] = wrap_overwrite(std::move(v));
            else o[names[i]] = std::move(v);
        }
        return o;
    }

    /// An update from a JSON object; unknown keys are an error naming the key. A reducer field
    /// given as `{"__overwrite__": value}` is overwritten.
    static update<S> update_from_json(const boost::json::object& o, errc code, const std::string& where) {
        update<S> u;
        for (const auto& [k, v] : o) {
            int i = index_of(k);
            if (i < 0)
                throw_unknown_field(k, std::vector<std::string>(field_names<S>().begin(), field_names<S>().end()), code,
                                    where);
            const auto f = static_cast<std::size_t>(i);
            if (const boost::json::value* inner = last_value(f) ? nullptr : overwritten_value(v)) {
                from_json(u.values(), f, *inner, code, where);
                u.mark_overwrite(f);
            } else {
                from_json(u.values(), f, v, code, where);
                u.mark(f);
            }
        }
        return u;
    }

    static boost::json::object state_json(const S& s) {
        boost::json::object o;
        const auto& names = field_names<S>();
        for (std::size_t i = 0; i < n; ++i) o[names[i]] = to_json(s, i);
        return o;
    }

    /// "name: reducer type" for each field (drift signature).
    static std::vector<std::pair<std::string, std::string>> describe_fields() {
        std::vector<std::pair<std::string, std::string>> out;
        for_each_field<S>([&](auto I, auto D) {
            using T = std::remove_cvref_t<decltype(std::declval<S&>().*decltype(D)::pointer)>;
            out.emplace_back(std::string(decltype(D)::name),
                             std::string(is_last_value<decltype(I)::value>() ? "last_value " : "reduced ") +
                                 boost::core::demangle(typeid(T).name()));
        });
        return out;
    }
};

} // namespace stategraph::detail
