#ifndef STATEGRAPH_NODES_ARTIFACTS_HPP
#define STATEGRAPH_NODES_ARTIFACTS_HPP

/// @file
/// @brief The supervisor's artifacts side channel (seeds 000/001): a JSON bag that intents
/// write during an iteration and that the supervisor merges into the state at the end of it.
///
/// The bag is a `boost::json::object` field of the state with the `merge_artifacts` reducer:
///
///     struct desk { ...; boost::json::object artifacts; nodes::supervision sup; };
///     inline auto reducers(stategraph::for_state<desk>) {
///         return stategraph::reducers{stategraph::reduce<&desk::artifacts>(nodes::merge_artifacts)};
///     }
///     nodes::supervisor<&desk::sup>("desk").artifacts<&desk::artifacts>()   // default: spread
///
/// An intent writes `update<desk>{}.set<&desk::artifacts>(nodes::artifact("blocks", blocks))`.

#include <stategraph/nodes/error.hpp>
#include <stategraph/state.hpp>
#include <stategraph/update.hpp>

#include <boost/describe/members.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>
#include <boost/mp11/algorithm.hpp>

#include <exception>
#include <string>
#include <string_view>
#include <utility>

namespace stategraph::nodes {

/// @brief The reducer of an artifacts bag: the keys of both objects; under a key both wrote,
/// two arrays are concatenated (so intents of a fan-out can each add blocks), anything else is
/// the later write's. `reduce<&S::artifacts>(nodes::merge_artifacts)`.
/// @param bag the current bag.
/// @param more what one node wrote.
/// @return the merged bag. Thread safety: pure; any thread.
inline boost::json::object merge_artifacts(boost::json::object bag, boost::json::object more) {
    for (auto& [key, value] : more) {
        auto* old = bag.if_contains(key);
        if (old && old->is_array() && value.is_array()) {
            auto& list = old->as_array();
            for (auto& v : value.as_array()) list.push_back(std::move(v));
        } else {
            bag[key] = std::move(value);
        }
    }
    return bag;
}

/// @brief A bag with one artifact: `update<S>{}.set<&S::artifacts>(artifact("blocks", blocks))`.
/// @tparam T any type with a JSON conversion.
/// @param key the artifact's key (a state field's name, for the default finalize).
/// @param value the artifact, converted to JSON now.
template <class T>
boost::json::object artifact(std::string_view key, T const& value) {
    boost::json::object bag;
    bag[key] = boost::json::value_from(value);
    return bag;
}

/// @brief The default finalize (the seed's `{...state, ...artifacts}`): each key of @p bag sets
/// the state field of that name, replacing its value (bypassing its reducer, as a spread does).
/// @throws agent_error(errc::unknown_artifact) for a key that names no field (or names the bag
/// or @p reserved), agent_error(errc::bad_artifact) for a value that does not convert to the
/// field's type; both name the key, @p where says which supervisor.
/// @tparam S the state type.
/// @param bag the artifacts bag.
/// @param where a prefix for messages ("supervisor 'desk': ").
/// @param bag_field the bag's own field name (never spread onto).
/// @param reserved another field never spread onto (the supervision field).
/// @return an update overwriting each named field. Thread safety: pure; any thread.
template <class S>
update<S> spread_artifacts(boost::json::object const& bag, std::string const& where, std::string_view bag_field,
                           std::string_view reserved) {
    update<S> out;
    for (auto const& [key, value] : bag) {
        bool found = false;
        for_each_field<S>([&](auto I, auto member) {
            if (found || key != member.name || key == bag_field || key == reserved) return;
            found = true;
            constexpr std::size_t i = decltype(I)::value;
            using T = std::remove_cvref_t<decltype(std::declval<S&>().*member.pointer)>;
            try {
                out.values().*member.pointer = boost::json::value_to<T>(value);
            } catch (std::exception const& e) {
                throw agent_error(errc::bad_artifact, where + "artifact '" + std::string(key) + "' = " +
                                                          boost::json::serialize(value).substr(0, 120) +
                                                          " does not convert to the field's type: " + e.what());
            }
            out.mark_overwrite(i);
        });
        if (!found)
            throw agent_error(errc::unknown_artifact,
                              where + "artifact '" + std::string(key) +
                                  "' names no field of the state; the default finalize spreads each key onto the field "
                                  "of that name: rename it or give .artifacts<&S::bag>(finalize)");
    }
    return out;
}

}  // namespace stategraph::nodes

#endif  // STATEGRAPH_NODES_ARTIFACTS_HPP
