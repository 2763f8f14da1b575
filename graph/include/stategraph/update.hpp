#pragma once
/// @file update.hpp
/// @brief `update<S>`: a typed partial update of state `S`, holding only the fields a node set.

#include <stategraph/state.hpp>

#include <bitset>
#include <utility>

namespace stategraph {

/// @brief A partial update of state `S`: the values of the fields a node sets, and which
/// fields those are. Fields not set are left alone by the engine.
/// @code
/// co_return update<turn>{}.set<&turn::route>("complex").set<&turn::trail>({"planner"});
/// @endcode
/// A field with a reducer can also be overwritten, bypassing its reducer (LangGraph's
/// `Overwrite`): `update<turn>{}.overwrite<&turn::trail>({})` empties the trail for a new turn.
/// @tparam S the state type: a struct described with `BOOST_DESCRIBE_STRUCT`.
/// Thread safety: a plain value; distinct objects are independent, a shared one is safe for
/// concurrent const calls only.
template <class S>
class update {
    static_assert(described_state<S>,
                  "update<S>: S must be a default-constructible struct described with "
                  "BOOST_DESCRIBE_STRUCT(S, (), (field1, field2, ...))");

public:
    static constexpr std::size_t size = field_count_v<S>;
    using state_type = S;

    update() = default;
    /// @brief An update that sets every field of `values`.
    /// @param values the whole state, every field of which is written (through its reducer).
    static update all(S values) {
        update u;
        u.values_ = std::move(values);
        u.set_.set();
        return u;
    }

    /// @brief Sets field `M` (a pointer to a member of S) to `v`; a braced list works too:
    /// `set<&S::log>({"a", "b"})`.
    /// @tparam M `&S::field`, a field listed in `BOOST_DESCRIBE_STRUCT` (a field of another struct is a
    /// compile error).
    /// @param v the value written; reduced with the current value when the field has a reducer.
    /// @return `*this` (the `&&` overload returns it moved, for chaining on a temporary).
    template <auto M>
    update& set(typename member_traits<M>::value_type v) & {
        static_assert(std::is_same_v<typename member_traits<M>::state_type, S>,
                      "update<S>::set<&X::field>: the field belongs to another state type than S; "
                      "name a field of S (update<S>{}.set<&S::field>(value)), or build an update<X> in a node of a graph over X");
        constexpr std::size_t i = field_index<M>();
        values_.*M = std::move(v);
        set_.set(i);
        return *this;
    }
    template <auto M>
    update&& set(typename member_traits<M>::value_type v) && {
        static_cast<update&>(*this).template set<M>(std::move(v));
        return std::move(*this);
    }

    /// @brief Sets field `M` to `v` bypassing its reducer: the field becomes `v` whatever it held
    /// (as LangGraph's `Overwrite`). In a step, an overwrite wins over the other nodes' writes of
    /// the field; two nodes overwriting one field in one step is an `invalid_concurrent_update`.
    /// On a field without a reducer it is the same as `set`.
    /// @tparam M `&S::field`.
    /// @param v the field's new value, replacing what it held.
    /// @return `*this`.
    template <auto M>
    update& overwrite(typename member_traits<M>::value_type v) & {
        set<M>(std::move(v));
        overwrite_.set(field_index<M>());
        return *this;
    }
    template <auto M>
    update&& overwrite(typename member_traits<M>::value_type v) && {
        static_cast<update&>(*this).template overwrite<M>(std::move(v));
        return std::move(*this);
    }

    /// @brief Whether field `M` is set.
    template <auto M>
    bool has() const { return set_.test(field_index<M>()); }
    /// @brief The value of field `M` (meaningful when `has<M>()`).
    template <auto M>
    const auto& get() const { return values_.*M; }

    bool has_index(std::size_t i) const { return set_.test(i); }
    /// @brief Whether field `M` is overwritten (set bypassing its reducer).
    template <auto M>
    bool overwrites() const { return overwrite_.test(field_index<M>()); }
    bool overwrites_index(std::size_t i) const { return overwrite_.test(i); }
    void mark(std::size_t i) { set_.set(i); }
    void mark_overwrite(std::size_t i) {
        set_.set(i);
        overwrite_.set(i);
    }
    /// Drops field `i` from the update.
    void unmark(std::size_t i) {
        set_.reset(i);
        overwrite_.reset(i);
    }
    const std::bitset<size>& overwritten() const { return overwrite_; }
    bool empty() const { return set_.none(); }
    const std::bitset<size>& fields() const { return set_; }
    S& values() { return values_; }
    const S& values() const { return values_; }

private:
    S values_{};
    std::bitset<size> set_{};
    std::bitset<size> overwrite_{};
};

} // namespace stategraph
