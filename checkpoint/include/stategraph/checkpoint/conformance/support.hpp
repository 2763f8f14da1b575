#pragma once
/// @file conformance/support.hpp
/// @brief What the saver conformance suite shares (stategraph/checkpoint/conformance.hpp): the
/// capabilities a saver declares beyond the interface, the factory type, and the helpers the
/// checks are written with (public for a saver's own extra tests).

#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>
#include <stategraph/core/error.hpp>

#include <boost/json.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::testing {

namespace json = boost::json;

// -- what a saver supports beyond the interface -------------------------------------------------

/// @brief Which part of a stored checkpoint `capabilities::corrupt` damages.
enum class part {
    value,  ///< the stored value of `channel` at version `checkpoint_id` (its own blob, or its row)
    record, ///< the checkpoint's own record (versions, frontier, metadata)
    write,  ///< the pending write on `channel` saved against `checkpoint_id`
};

/// @brief Where to damage stored data (see `capabilities::corrupt`).
struct damage {
    part what = part::value;
    std::string thread_id;
    std::string ns;
    std::string checkpoint_id;
    std::string channel; ///< for `part::value` and `part::write`
    /// Change one byte in the middle of the stored bytes (a failing disk, a bad edit) rather than
    /// replace them with garbage: the damaged bytes may still be well-formed, so only a checksum
    /// tells.
    bool flip = false;
};

/// @brief What a saver supports beyond the interface; the checks that need a capability are
/// skipped (reported as such) when it is missing.
struct capabilities {
    /// A second saver on the same storage as `first` (another connection: what another process
    /// would see). It is destroyed before `first`. Empty: each instance has storage of its own
    /// (the in-memory saver). Needed by `second_instance` and `leases_across_instances`.
    std::function<std::shared_ptr<saver>(saver& first)> open_same_storage;
    /// `acquire()` takes a lease the other instances see: their `acquire`, `put` and
    /// `delete_thread` on that thread throw `checkpoint_error(thread_busy)` until it is released
    /// or its holder is destroyed; reads are never refused. Needs `open_same_storage`.
    bool exclusive_leases = false;
    /// The time to live of the leases of the savers the factory and `open_same_storage` make,
    /// when it is short enough to wait out in a test (a second or so): `lease_renewal` holds a
    /// lease for several times it. Zero: `lease_renewal` is skipped.
    std::chrono::milliseconds lease_ttl{0};
    /// Damages what `s` stored (behind its back, as a failing disk or a foreign writer would), so
    /// that reading it must throw `checkpoint_error(corrupt_checkpoint)`. Returns false when it
    /// cannot damage that part (that part is then skipped). Empty: `corruption` is skipped.
    std::function<bool(saver& s, const damage& where)> corrupt;
};

/// @brief Makes the saver one check runs on: fresh, empty storage each call.
using saver_factory = std::function<std::shared_ptr<saver>()>;

// -- helpers ------------------------------------------------------------------------------------

/// The checkpoint that follows `prev` (nullptr: the first), writing the channels of `writes`.
inline checkpoint next_cp(const checkpoint* prev, std::int64_t step, const std::string& source,
                          const json::object& writes) {
    checkpoint cp;
    cp.id = new_checkpoint_id();
    cp.parent_id = prev ? prev->id : "";
    cp.step = step;
    cp.source = source;
    if (prev) cp.versions = prev->versions;
    for (const auto& [channel, value] : writes) cp.versions[std::string(channel)] = cp.id;
    cp.values = writes;
    json::array frontier;
    frontier.emplace_back("node_" + std::to_string(step + 1));
    cp.frontier = std::move(frontier);
    cp.metadata["step"] = step;
    cp.metadata["source"] = source;
    cp.signature = "sig-1";
    return cp;
}

inline std::optional<checkpoint_tuple> get(saver& s, const std::string& thread, const std::string& ns,
                                           std::optional<std::string> id = std::nullopt) {
    return run(s.get(thread, ns, std::move(id)));
}
inline std::vector<checkpoint_tuple> list(saver& s, const std::string& thread, const std::string& ns,
                                          list_options options) {
    return run(s.list(thread, ns, std::move(options)));
}
inline void put(saver& s, const std::string& thread, const std::string& ns, const checkpoint& cp) {
    run(s.put(thread, ns, cp));
}
inline pending_write write_of(const std::string& task_id, const std::string& task_name, const std::string& channel,
                              json::value value) {
    pending_write w;
    w.task_id = task_id;
    w.task_name = task_name;
    w.channel = channel;
    w.value = std::move(value);
    return w;
}
inline std::vector<std::string> ids_of(const std::vector<checkpoint_tuple>& ts) {
    std::vector<std::string> out;
    for (const auto& t : ts) out.push_back(t.cp.id);
    return out;
}

/// `got` is `want` (as stored: its fields) holding all of `values`.
inline void check_checkpoint(const checkpoint_tuple& got, const std::string& thread, const std::string& ns,
                             const checkpoint& want, const json::object& values) {
    BOOST_TEST(got.thread_id == thread);
    BOOST_TEST(got.ns == ns);
    BOOST_TEST(got.cp.id == want.id);
    BOOST_TEST(got.cp.parent_id == want.parent_id);
    BOOST_TEST(got.cp.step == want.step);
    BOOST_TEST(got.cp.source == want.source);
    BOOST_TEST((got.cp.versions == want.versions));
    BOOST_TEST(got.cp.values == values);
    BOOST_TEST(got.cp.frontier == want.frontier);
    BOOST_TEST(got.cp.metadata == want.metadata);
    BOOST_TEST(got.cp.signature == want.signature);
}


/// Runs `f`, which must throw `checkpoint_error` with `code`; returns it (nullopt when it did not).
template <class F>
std::optional<checkpoint_error> expect_error(errc code, F&& f) {
    try {
        f();
    } catch (const checkpoint_error& e) {
        BOOST_TEST_MESSAGE(to_string(e.kind()) << ": " << e.what());
        BOOST_CHECK_MESSAGE(e.kind() == code,
                            "expected " << to_string(code) << ", got " << to_string(e.kind()) << ": " << e.what());
        return e;
    } catch (const std::exception& e) {
        BOOST_ERROR("expected checkpoint_error " << to_string(code) << ", got " << e.what());
        return std::nullopt;
    }
    BOOST_ERROR("expected checkpoint_error " << to_string(code) << ", nothing was thrown");
    return std::nullopt;
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
/// The error names `name` (a thread, channel or node) among the names it carries.
inline bool has_name(const graph_error& e, const std::string& name) {
    return std::find(e.names().begin(), e.names().end(), name) != e.names().end();
}

/// `next_cp`, made `age` ago: its id says so (ids are time-ordered), and it is newer than `prev`.
inline checkpoint aged_cp(const checkpoint* prev, std::int64_t step, const std::string& source, const json::object& writes,
                          std::chrono::system_clock::duration age) {
    auto cp = next_cp(prev, step, source, writes);
    auto at = std::chrono::system_clock::now() - age;
    if (prev)
        if (auto p = checkpoint_time(prev->id); p && at <= *p) at = *p + std::chrono::microseconds(1);
    const std::string fresh = cp.id;
    cp.id = checkpoint_id_at(at);
    for (auto& [channel, version] : cp.versions)
        if (version == fresh) version = cp.id;
    return cp;
}

} // namespace stategraph::checkpoint::testing
