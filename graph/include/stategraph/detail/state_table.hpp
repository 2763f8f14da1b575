#pragma once
/// @file detail/state_table.hpp
/// @brief The thin per-state part of the engine: a table of functions, generated once per state
/// type, through which the engine (compiled once, in graph/src) creates states and updates,
/// applies updates through the reducers and converts fields to and from JSON.

#include <stategraph/detail/state_ops.hpp>

#include <boost/json/value.hpp>

#include <bitset>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::detail {

/// At most this many fields per state (the engine's field sets are fixed-size bitsets).
inline constexpr std::size_t max_fields = 256;
using field_mask = std::bitset<max_fields>;

/// What the engine may do with a state type it does not know. `void*` states are `S*`,
/// `void*` updates are `update<S>*`.
struct state_table {
    std::size_t n = 0;
    std::string type_name;                      ///< the state type's name, without its namespaces
    std::vector<std::string> names;             ///< field names, in declaration order
    std::vector<char> last_value;               ///< per field: keeps the last value (no reducer)
    std::vector<std::pair<std::string, std::string>> describe; ///< per field: (name, reducer kind + type)

    void* (*new_state)() = nullptr;
    void* (*copy_state)(const void*) = nullptr;
    void (*delete_state)(void*) = nullptr;
    void (*reset_state)(void*) = nullptr;

    void* (*new_update)() = nullptr;
    void* (*copy_update)(const void*) = nullptr;
    void (*delete_update)(void*) = nullptr;
    field_mask (*update_fields)(const void* u) = nullptr;
    void (*mark)(void* u, std::size_t i) = nullptr;
    field_mask (*update_overwrites)(const void* u) = nullptr; ///< the fields set bypassing their reducer
    void (*mark_overwrite)(void* u, std::size_t i) = nullptr;
    void (*unmark)(void* u, std::size_t i) = nullptr;     ///< drops field i from the update
    void* (*update_values)(void* u) = nullptr; ///< the `S` inside an update

    void (*apply)(void* s, void* u) = nullptr;            ///< through the reducers; consumes `u`
    void (*apply_copy)(void* s, const void* u) = nullptr; ///< through the reducers; keeps `u`

    boost::json::value (*to_json)(const void* s, std::size_t i, boost::json::storage_ptr sp) = nullptr;
    void (*from_json)(void* s, std::size_t i, const boost::json::value& v, errc code, const std::string& where) = nullptr;
    /// field i of update values `s` from JSON, merged into `current`'s value (null: the defaults)
    /// when it is a last-value described struct (the partial nested input rule)
    void (*merge_json)(void* s, const void* current, std::size_t i, const boost::json::value& v, errc code,
                       const std::string& where) = nullptr;
    std::size_t (*sequence_size)(const void* s, std::size_t i) = nullptr; ///< npos unless an append list
    boost::json::value (*tail_json)(const void* s, std::size_t i, std::size_t from, boost::json::storage_ptr sp) = nullptr;

    int index_of(std::string_view name) const {
        for (std::size_t i = 0; i < n; ++i)
            if (names[i] == name) return static_cast<int>(i);
        return -1;
    }
};

template <class S>
const state_table& table_of() {
    static_assert(field_count_v<S> <= max_fields, "a state may have at most 256 fields");
    static const state_table t = [] {
        using ops = state_ops<S>;
        state_table t;
        t.n = ops::n;
        t.type_name = short_type_name<S>();
        for (auto name : field_names<S>()) t.names.emplace_back(name);
        for (std::size_t i = 0; i < ops::n; ++i) t.last_value.push_back(ops::last_value(i) ? 1 : 0);
        t.describe = ops::describe_fields();
        t.new_state = [] { return static_cast<void*>(new S{}); };
        t.copy_state = [](const void* s) { return static_cast<void*>(new S(*static_cast<const S*>(s))); };
        t.delete_state = [](void* s) { delete static_cast<S*>(s); };
        t.reset_state = [](void* s) { *static_cast<S*>(s) = S{}; };
        t.new_update = [] { return static_cast<void*>(new update<S>{}); };
        t.copy_update = [](const void* u) { return static_cast<void*>(new update<S>(*static_cast<const update<S>*>(u))); };
        t.delete_update = [](void* u) { delete static_cast<update<S>*>(u); };
        t.update_fields = [](const void* u) {
            field_mask m;
            const auto& f = static_cast<const update<S>*>(u)->fields();
            for (std::size_t i = 0; i < ops::n; ++i)
                if (f.test(i)) m.set(i);
            return m;
        };
        t.mark = [](void* u, std::size_t i) { static_cast<update<S>*>(u)->mark(i); };
        t.update_overwrites = [](const void* u) {
            field_mask m;
            const auto& f = static_cast<const update<S>*>(u)->overwritten();
            for (std::size_t i = 0; i < ops::n; ++i)
                if (f.test(i)) m.set(i);
            return m;
        };
        t.mark_overwrite = [](void* u, std::size_t i) { static_cast<update<S>*>(u)->mark_overwrite(i); };
        t.unmark = [](void* u, std::size_t i) { static_cast<update<S>*>(u)->unmark(i); };
        t.update_values = [](void* u) { return static_cast<void*>(&static_cast<update<S>*>(u)->values()); };
        t.apply = [](void* s, void* u) {
            static const auto reds = state_reducers<S>();
            ops::apply(*static_cast<S*>(s), *static_cast<update<S>*>(u), reds);
        };
        t.apply_copy = [](void* s, const void* u) {
            static const auto reds = state_reducers<S>();
            ops::apply_copy(*static_cast<S*>(s), *static_cast<const update<S>*>(u), reds);
        };
        t.to_json = [](const void* s, std::size_t i, boost::json::storage_ptr sp) {
            return ops::to_json(*static_cast<const S*>(s), i, std::move(sp));
        };
        t.from_json = [](void* s, std::size_t i, const boost::json::value& v, errc code, const std::string& where) {
            ops::from_json(*static_cast<S*>(s), i, v, code, where);
        };
        t.merge_json = [](void* s, const void* current, std::size_t i, const boost::json::value& v, errc code,
                          const std::string& where) {
            ops::merge_from_json(*static_cast<S*>(s), static_cast<const S*>(current), i, v, code, where);
        };
        t.sequence_size = [](const void* s, std::size_t i) { return ops::sequence_size(*static_cast<const S*>(s), i); };
        t.tail_json = [](const void* s, std::size_t i, std::size_t from, boost::json::storage_ptr sp) {
            return ops::tail_json(*static_cast<const S*>(s), i, from, std::move(sp));
        };
        return t;
    }();
    return t;
}

/// An owned state of a type known only through its table.
class state_box {
public:
    state_box() = default;
    explicit state_box(const state_table& t) : t_(&t), p_(t.new_state()) {}
    state_box(const state_box& o) : t_(o.t_), p_(o.p_ ? o.t_->copy_state(o.p_) : nullptr) {}
    state_box(state_box&& o) noexcept : t_(o.t_), p_(std::exchange(o.p_, nullptr)) {}
    state_box& operator=(state_box o) noexcept {
        std::swap(t_, o.t_);
        std::swap(p_, o.p_);
        return *this;
    }
    ~state_box() {
        if (p_) t_->delete_state(p_);
    }
    void* get() noexcept { return p_; }
    const void* get() const noexcept { return p_; }
    const state_table& table() const noexcept { return *t_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }

private:
    const state_table* t_ = nullptr;
    void* p_ = nullptr;
};

/// An owned `update<S>` of a type known only through its table; empty (null) means "no fields".
class update_box {
public:
    update_box() = default;
    update_box(const state_table& t, void* adopted) : t_(&t), p_(adopted) {}
    explicit update_box(const state_table& t) : t_(&t), p_(t.new_update()) {}
    update_box(const update_box& o) : t_(o.t_), p_(o.p_ ? o.t_->copy_update(o.p_) : nullptr) {}
    update_box(update_box&& o) noexcept : t_(o.t_), p_(std::exchange(o.p_, nullptr)) {}
    update_box& operator=(update_box o) noexcept {
        std::swap(t_, o.t_);
        std::swap(p_, o.p_);
        return *this;
    }
    ~update_box() {
        if (p_) t_->delete_update(p_);
    }
    /// Wraps a typed update.
    template <class S>
    static update_box of(update<S>&& u) {
        return update_box(table_of<S>(), new update<S>(std::move(u)));
    }
    void* get() noexcept { return p_; }
    const void* get() const noexcept { return p_; }
    explicit operator bool() const noexcept { return p_ != nullptr; }
    field_mask fields() const { return p_ ? t_->update_fields(p_) : field_mask{}; }
    bool has(std::size_t i) const { return p_ && t_->update_fields(p_).test(i); }
    field_mask overwrites() const { return p_ ? t_->update_overwrites(p_) : field_mask{}; }
    const void* values() const { return p_ ? t_->update_values(p_) : nullptr; }
    void* values() { return p_ ? t_->update_values(p_) : nullptr; }
    /// The state type's table (null for an empty box made without one).
    const state_table* table() const noexcept { return t_; }

private:
    const state_table* t_ = nullptr;
    void* p_ = nullptr;
};

} // namespace stategraph::detail
