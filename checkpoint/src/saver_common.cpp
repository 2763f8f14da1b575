#include "saver_common.hpp"

#include "codec.hpp"

#include <boost/json/parse.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>

namespace stategraph::checkpoint::common {

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string format_utc(std::int64_t ms) {
    std::time_t secs = static_cast<std::time_t>(ms / 1000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
    return buf;
}

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

const boost::json::parse_options& json_options() {
    static const auto options = [] {
        boost::json::parse_options o;
        o.max_depth = 4096;          // serialize() has no depth limit; read back what we wrote
        o.allow_invalid_utf8 = true; // likewise for strings holding arbitrary bytes
        return o;
    }();
    return options;
}

checkpoint_error corrupt(const std::string& thread, const std::string& ns, const std::string& detail,
                         const std::string& where, std::vector<std::string> names) {
    return checkpoint_error(errc::corrupt_checkpoint,
                            "thread " + quote(thread) + (ns.empty() ? "" : " namespace " + quote(ns)) + ": " + detail + where,
                            std::move(names));
}

void count_row_values(thread_stats& st, std::string_view bytes, const std::string& thread, const std::string& where) {
    codec::inline_size in;
    try {
        in = codec::measure_inline(bytes);
    } catch (const codec::corrupt& e) {
        throw corrupt(thread, "", std::string("values inside a checkpoint row cannot be read: ") + e.what(), where, {thread});
    }
    st.blobs += in.values;
    st.bytes += in.value_bytes;
    st.record_bytes += bytes.size() - in.value_bytes;
}

boost::json::value parse_stored(std::string_view text, const std::string& thread, const std::string& ns,
                                const std::string& what, const std::string& where, std::vector<std::string> names) {
    boost::system::error_code ec;
    boost::json::value v;
    try {
        v = boost::json::parse(text, ec, {}, json_options());
    } catch (const std::exception& e) { // allocation failure and the like
        throw corrupt(thread, ns, what + " cannot be read: " + e.what(), where, std::move(names));
    }
    if (ec) throw corrupt(thread, ns, what + " holds invalid JSON (" + ec.message() + ")", where, std::move(names));
    return v;
}

std::string write_label(const std::string& checkpoint_id, const pending_write& w) {
    return "checkpoint " + checkpoint_id + ": pending write of task " + quote(w.task_id) + " (" + w.task_name +
           ") to channel " + quote(w.channel);
}

checkpoint_error lease_lost(const std::string& thread, const std::string& owner, const std::string& holder,
                            const std::string& where) {
    return checkpoint_error(errc::lease_lost,
                            "thread " + quote(thread) + ": this saver's lease (" + owner + ") was " +
                                (holder.empty() ? std::string("broken") : "taken over by " + holder) +
                                "; the write was refused, so that two runs never write one thread. The thread "
                                "goes on from its last saved checkpoint" + where,
                            {thread});
}

checkpoint_error thread_busy(const std::string& thread, const std::string& holder, std::int64_t expires_ms,
                             const std::string& where) {
    return checkpoint_error(errc::thread_busy,
                            "thread " + quote(thread) + " is busy: held by " + holder + " until " + format_utc(expires_ms) +
                                where,
                            {thread});
}

checkpoint_error copy_target_exists(const std::string& from, const std::string& to, const std::string& where) {
    return checkpoint_error(errc::thread_exists,
                            "copy_thread: thread " + quote(to) + " exists already (copying " + quote(from) +
                                " there would mix two threads); delete it first or choose another id" + where,
                            {to, from});
}

checkpoint_error copy_source_missing(const std::string& from, const std::string& to, const std::string& where) {
    return checkpoint_error(errc::thread_not_found,
                            "copy_thread: thread " + quote(from) + " has no checkpoint to copy (to " + quote(to) + ")" + where,
                            {from, to});
}

checkpoint_error rewind_target_missing(const std::string& thread, const std::string& checkpoint_id,
                                       const std::string& where) {
    return checkpoint_error(errc::checkpoint_not_found,
                            "rewind_thread: thread " + quote(thread) + " has no checkpoint " + quote(checkpoint_id) +
                                " in any namespace; nothing was removed" + where,
                            {thread, checkpoint_id});
}

checkpoint_error cache_corrupt(const std::string& ns, const std::string& key, const std::string& why,
                               const std::string& where) {
    return checkpoint_error(errc::corrupt_checkpoint, "node cache entry " + quote(key) + " of " + quote(ns) + ": " + why + where,
                            {ns, key});
}

boost::json::value cache_value(std::string_view text, const std::string& ns, const std::string& key,
                               const std::string& where) {
    boost::system::error_code ec;
    auto v = boost::json::parse(text, ec, {}, json_options());
    if (ec) throw cache_corrupt(ns, key, "its JSON does not parse: " + ec.message(), where);
    return v;
}

std::vector<thread_info> page_threads(std::vector<thread_info> infos, const thread_query& q,
                                      const boost::json::object* match) {
    const bool filtered = match && !match->empty();
    std::vector<thread_info> out;
    std::size_t skipped = 0;
    for (auto& info : infos) {
        if (filtered && q.limit && out.size() >= q.limit) break;
        if (filtered) {
            if (info.checkpoint_id.empty() || !metadata_filter(*match).matches(info.metadata)) continue;
            if (skipped < q.offset) {
                ++skipped;
                continue;
            }
        }
        out.push_back(std::move(info));
    }
    return out;
}

std::set<std::pair<std::string, std::string>> values_kept(const std::vector<checkpoint>& kept, const value_fetch& fetch,
                                                          const corrupt_report& report) {
    std::set<std::pair<std::string, std::string>> needed;
    for (const auto& cp : kept)
        for (const auto& [channel, version] : cp.versions) {
            if (version.empty()) continue;
            // init-capture: clang 14 cannot capture a structured binding (channel) directly
            auto one = [&fetch, &ch = channel](const std::string& v) { return fetch(ch, v); };
            try {
                codec::mark_needed(channel, version, one, needed);
            } catch (const codec::corrupt& e) {
                report("checkpoint " + cp.id + ": channel " + quote(channel) + " (version " + version +
                           ") cannot be read: " + e.what(),
                       channel);
                throw; // a report that returned: the codec's error stands
            }
        }
    return needed;
}

} // namespace stategraph::checkpoint::common
