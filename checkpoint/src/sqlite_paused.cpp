/// @file sqlite_paused.cpp
/// @brief A SQLite saver remembers the state of threads its runs left paused at an interrupt, so
/// that the resume, by the process that paused the thread, starts without reading values back.
///
/// A run that pauses (its end writes an `__interrupt__`) is nearly always resumed, and soon. The
/// resume's start read every channel value of the thread, each from the row of the checkpoint
/// that wrote it, and parsed it: most of a resume's start, and on a supervisor's turn more than
/// the resume's commit. The saver knows that state already: the call's start read it (its bytes
/// are kept as they are read) or found the thread empty, and the run's writes went through this
/// saver. An entry is what `get` would return for the thread's latest checkpoint; it is used
/// only while
/// - no other connection committed to the file since it was known current (`PRAGMA
///   data_version`, read inside the transaction that reads or ends the call; this connection's
///   own commits leave it alone): another saver or process that wrote anything makes it stale;
/// - every write of this saver to the thread since was applied to it, after its commit, while
///   this saver held the thread's lease (which keeps every other writer out); anything else
///   (a batch's commit, a rollback, a write without the lease, a deletion, a prune, a copy onto
///   it, a sweep, a rewind) forgets it.

#include "sqlite_saver_impl.hpp"

#include <algorithm>

namespace stategraph::checkpoint {

using namespace sqlite_detail;

namespace {
constexpr std::string_view sql_data_version = "PRAGMA data_version";

/// The whole value at `version` of a channel kept as `links` (a value and the appended items
/// after it, oldest first). Throws codec::corrupt.
boost::json::value resolve_links(const std::vector<std::pair<std::string, std::string>>& links,
                                 const std::string& version) {
    return codec::resolve_value(version, [&](const std::string& wanted) -> std::optional<std::string> {
        for (const auto& [at, bytes] : links)
            if (at == wanted) return bytes;
        return std::nullopt;
    });
}
} // namespace

std::int64_t sqlite_saver::impl::data_version() {
    static const std::string none;
    std::int64_t v = 0;
    {
        stmt s(*this, sql_data_version, none, "reading the file's data version");
        if (s.step()) v = s.integer(0);
    }
    // Paused threads known current at an older version are stale: another connection committed
    // since. (A thread whose run is under way is this saver's alone until the run ends: its lease
    // keeps every other writer out.)
    if (v != paused_version) {
        std::erase_if(paused, [](const auto& entry) { return entry.second.paused; });
        paused_version = v;
    }
    return v;
}

void sqlite_saver::impl::forget(const std::string& thread) noexcept {
    if (paused.empty()) return;
    if (thread.empty()) paused.clear();
    else if (auto it = paused.find(thread); it != paused.end()) paused.erase(it);
}

std::optional<checkpoint_tuple> sqlite_saver::impl::recall_or_get(const std::string& thread, const std::string& ns,
                                                                  const std::string* held) {
    if (!ns.empty() || opt.read_only) return get(thread, ns, std::nullopt);
    if (paused.count(thread)) {
        // Inside the call's read transaction, which holds the thread's lease from here on. Read
        // first: it drops the paused entries another connection's commit made stale.
        const auto version = data_version();
        auto it = paused.find(thread);
        if (it != paused.end() && it->second.paused && it->second.data_version == version) {
            it->second.used = ++paused_clock;
            // The caller holds this checkpoint's values: nothing was written to the thread since
            // its pause (the entry is paused and current), so they are the file's.
            const bool omit = held && *held == it->second.id;
            if (auto got = recall(thread, ns, it->second, omit)) {
                ++paused_recalled;
                paused_omitted += omit ? 1 : 0;
                return got;
            }
        }
        forget(thread);
    }
    // Read from the file, its bytes kept: the run's writes then advance the state in memory, and
    // a pause keeps it. No data version yet: the run's lease keeps other writers out until its
    // end, which sets it. (A thread with no checkpoint: its run's writes make up the whole state.)
    paused_thread e;
    e.used = ++paused_clock;
    std::optional<checkpoint_tuple> got;
    capture = &e;
    try {
        got = get(thread, ns, std::nullopt);
    } catch (...) {
        capture = nullptr;
        throw;
    }
    capture = nullptr;
    if (got) {
        e.started = true;
        e.writes = got->writes;
    }
    paused.insert_or_assign(thread, std::move(e));
    if (paused.size() > paused_max) {
        auto oldest = paused.begin();
        for (auto i = paused.begin(); i != paused.end(); ++i)
            if (i->second.used < oldest->second.used) oldest = i;
        paused.erase(oldest);
    }
    return got;
}

std::optional<checkpoint_tuple> sqlite_saver::impl::recall(const std::string& thread, const std::string& ns,
                                                           const paused_thread& e, bool omit_values) {
    checkpoint_tuple t{thread, ns, {}, e.writes};
    auto& cp = t.cp;
    cp.id = e.id;
    cp.parent_id = e.parent_id;
    cp.step = e.step;
    cp.source = e.source;
    try {
        codec::decode_record(e.record, cp);
    } catch (const codec::corrupt&) {
        return std::nullopt; // cannot happen (this saver encoded it); read from the file instead
    }
    if (omit_values) {
        t.values_omitted = true;
        return t;
    }
    for (const auto& [channel, version] : cp.versions) {
        if (version.empty()) continue;
        auto links = e.values.find(channel);
        if (links == e.values.end() || links->second.empty() || links->second.back().first != version) {
            // A graph's shape the run did not write (stored once per graph): read as `get` does.
            if (channel != reserved::graph) return std::nullopt;
            auto shape = shapes.find(version);
            if (shape == shapes.end()) {
                if (shapes.size() >= paused_max) shapes.clear();
                shape = shapes.emplace(version, read_value(thread, ns, cp.id, channel, version)).first;
            }
            cp.values[channel] = shape->second;
            continue;
        }
        const auto& held = links->second;
        const auto what = [&] { return "checkpoint " + cp.id + ": channel " + quote(channel) + " (version " + version + ")"; };
        if (held.size() == 1) {
            cp.values[channel] = parse(held.front().second, thread, ns, what(), {thread, channel});
            continue;
        }
        try {
            cp.values[channel] = resolve_links(held, version);
        } catch (const codec::corrupt&) {
            return std::nullopt;
        }
    }
    return t;
}

bool sqlite_saver::impl::noting_paused(const std::string& thread, const std::string& ns) noexcept {
    if (paused.empty() || !ns.empty()) return false; // the root namespace's state only
    auto it = paused.find(thread);
    if (it == paused.end()) return false;
    if (held.count(thread)) return true;
    paused.erase(it);
    return false;
}

void sqlite_saver::impl::note_paused(paused_write w) { paused_log.push_back(std::move(w)); }

void sqlite_saver::impl::settle_paused(bool apply) noexcept {
    for (auto& w : paused_log) {
        auto it = paused.find(*w.thread);
        if (it == paused.end()) continue;
        bool keep = false;
        if (apply) {
            try {
                keep = advance_paused(it->second, w);
            } catch (...) { // allocation failure: the entry is dropped, nothing else depends on it
            }
        }
        if (!keep) paused.erase(it);
    }
    paused_log.clear();
}

bool sqlite_saver::impl::advance_paused(paused_thread& e, paused_write& w) {
    if (w.call_end) { // a call that paused: the entry is current as of its data version
        if (!e.started) return false;
        e.data_version = w.data_version;
        e.paused = true;
        return true;
    }
    e.paused = false; // a run under way
    if (w.writes) { // pending writes, as put_writes stores them: a task's write to a channel replaced
        if (!e.started || e.id != *w.writes_to) return false;
        for (const auto& pw : *w.writes) {
            auto same = std::find_if(e.writes.begin(), e.writes.end(), [&](const pending_write& o) {
                return o.task_id == pw.task_id && o.channel == pw.channel;
            });
            if (same == e.writes.end()) {
                e.writes.push_back(pw);
            } else {
                same->task_name = pw.task_name;
                same->value = pw.value;
            }
        }
        return true;
    }
    // A checkpoint: the thread's next (its parent is the latest), with the values it wrote.
    const checkpoint& cp = *w.cp;
    if (cp.parent_id != (e.started ? e.id : std::string())) return false;
    for (auto& [channel, bytes] : w.values) {
        const std::string name(channel);
        auto v = cp.versions.find(name);
        const std::string& version = v == cp.versions.end() ? cp.id : v->second;
        auto found = e.values.find(channel);
        if (found == e.values.end()) found = e.values.emplace(name, std::vector<std::pair<std::string, std::string>>()).first;
        auto& links = found->second;
        if (auto x = cp.extends.find(name); x != cp.extends.end()) {
            // Items appended to the value at the version it extends: kept beside it.
            if (links.empty() || links.back().first != x->second) return false;
            if (links.size() >= paused_links) { // many runs' appends: kept as one whole value again
                std::string collapsed =
                    codec::encode_value(resolve_links(links, links.back().first), nullptr, links.back().first);
                links.erase(links.begin(), links.end() - 1);
                links.back().second = std::move(collapsed);
            }
        } else {
            links.clear();
        }
        links.emplace_back(version, std::move(bytes));
    }
    e.started = true;
    e.id = cp.id;
    e.parent_id = cp.parent_id;
    e.step = cp.step;
    e.source = cp.source;
    e.record = std::move(w.record);
    e.writes.clear();
    return true;
}

} // namespace stategraph::checkpoint
