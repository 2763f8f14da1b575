// Private to the Redis saver: `redis_saver::impl` (its state, keys, errors, the stored forms of
// checkpoints) and what its files share (redis_detail: the script markers, field joining and
// splitting, chunked operations). Its members are defined by concern: redis_saver.cpp (the
// scripts, connections, the fenced write, opening and closing), redis_checkpoints.cpp
// (checkpoints and pending writes), redis_threads.cpp (thread maintenance), redis_cache.cpp
// (node cache, graph shapes), redis_leases.cpp.
#pragma once

#include <stategraph/checkpoint/redis_saver.hpp>
#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/core/error.hpp>

#include "codec.hpp"
#include "lease_owner.hpp"
#include "redis_connection.hpp"
#include "saver_common.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::checkpoint {

namespace asio = boost::asio;
using redis::command;
using redis::reply;

/// What several files of the Redis saver use.
namespace redis_detail {

inline constexpr std::string_view write_marker = "@write";
inline constexpr std::string_view lease_marker = "@lease";
inline constexpr std::string_view read_marker = "@read";
inline constexpr std::string_view graph_channel = reserved::graph;
/// Words per operation of the write script (Lua's unpack has a limit of a few thousand).
inline constexpr std::size_t chunk_words = 1000;

inline std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

using redis::join_fields;
inline std::string join(std::initializer_list<std::string_view> parts) { return join_fields(parts); }

inline std::vector<std::string_view> split(std::string_view s) {
    std::vector<std::string_view> out;
    for (;;) {
        auto z = s.find('\0');
        out.push_back(s.substr(0, z));
        if (z == std::string_view::npos) return out;
        s = s.substr(z + 1);
    }
}

/// Appends `words` as operations of at most `chunk_words` words: `head` then pairs (or singles).
inline void add_chunked(std::vector<command>& ops, const command& head, const std::vector<std::string>& items,
                        std::size_t group) {
    for (std::size_t i = 0; i < items.size();) {
        command op = head;
        while (i < items.size() && op.size() + group <= chunk_words) {
            for (std::size_t g = 0; g < group && i < items.size(); ++g) op.push_back(items[i++]);
        }
        ops.push_back(std::move(op));
    }
}

/// The thread named by errors of operations on no thread.
inline const std::string no_thread;

/// A reply as text (nil: nullopt).
inline std::optional<std::string> text_of(const reply& r) {
    if (r.is_nil()) return std::nullopt;
    return r.str;
}

} // namespace redis_detail

// The saver's files name these unqualified, as when they were one file.
using namespace redis_detail;

struct redis_saver::impl {
    redis_options opt;
    redis::endpoint ep;
    std::string owner = lease_owner::make();
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
    std::thread runner;

    // Calls run on their callers' executors (no hand-off to a thread of the saver's: each would
    // cost two cross-thread wake-ups per call); a pooled connection is bound to the executor of
    // the coroutine that takes it. The saver's own thread (`io`) runs only the lease keeper and
    // the shutdown.
    /// A caller asleep in `take` while every connection is out: woken by `give` (a cancel posted
    /// to its executor). Its timer's limit only bounds a wake-up lost to a context run by
    /// several threads (the cancel running before the wait began).
    struct pool_waiter {
        asio::steady_timer timer;
        explicit pool_waiter(const asio::any_io_executor& ex) : timer(ex, std::chrono::milliseconds(50)) {}
    };
    std::mutex mutex; ///< guards the members down to `graphs_sent`
    std::vector<std::unique_ptr<redis::connection>> idle;
    std::size_t made = 0;
    std::deque<std::shared_ptr<pool_waiter>> waiters;
    std::string write_sha, lease_sha, read_sha;
    std::set<std::string> held;
    /// Graph shapes this saver stored, and when: `put_graph` sends a shape again only after
    /// `graph_resend` (a server that lost it, a `FLUSHALL`, gets it back within that time) instead
    /// of on every call.
    std::map<std::string, std::chrono::steady_clock::time_point> graphs_sent;
    static constexpr std::chrono::seconds graph_resend{60};
    std::optional<asio::steady_timer> keeper; ///< touched only on the saver's thread
    std::atomic<bool> stopping{false};
    std::atomic<std::uint64_t> round_trips{0}; ///< read from any thread

    explicit impl(redis_options o) : opt(std::move(o)) {
        try {
            ep = redis::parse_url(opt.url);
        } catch (const std::invalid_argument& e) {
            throw checkpoint_error(errc::storage_failure, std::string("redis_saver: ") + e.what(), {opt.url});
        }
        if (opt.pool_size == 0) opt.pool_size = 1;
        if (opt.attempts < 1) opt.attempts = 1;
        runner = std::thread([this] { io.run(); });
    }

    // -- keys -------------------------------------------------------------------------------
    std::string tkey(const std::string& thread, std::string_view what) const {
        return opt.key_prefix + ":{" + thread + "}:" + std::string(what);
    }
    std::string threads_key() const { return opt.key_prefix + ":threads"; }
    std::string graphs_key() const { return opt.key_prefix + ":graphs"; }
    std::string cache_key(const std::string& ns, const std::string& key) const {
        return opt.key_prefix + ":cache:" + join({ns, key});
    }
    std::string cache_index(const std::string& ns) const { return opt.key_prefix + ":cachekeys:" + ns; }
    std::string cache_namespaces() const { return opt.key_prefix + ":cachens"; }
    /// The keys of a thread, all but its lease (deleted, copied and expired together).
    std::vector<std::string> thread_keys(const std::string& thread) const {
        return {tkey(thread, "ids"), tkey(thread, "cp"), tkey(thread, "vals"), tkey(thread, "writes"),
                tkey(thread, "wseq"), tkey(thread, "meta")};
    }

    // -- errors -----------------------------------------------------------------------------
    static std::string who(const std::string& thread) {
        return thread.empty() ? std::string("redis_saver") : "thread " + quote(thread);
    }
    [[noreturn]] static void corrupt(const std::string& thread, const std::string& what, std::vector<std::string> names) {
        throw checkpoint_error(errc::corrupt_checkpoint, who(thread) + ": " + what, std::move(names));
    }
    [[noreturn]] void failed(const std::string& thread, const std::string& what) const {
        throw checkpoint_error(errc::storage_failure,
                               who(thread) + ": " + what + " (Redis at " + ep.host + ":" + ep.port + ")",
                               thread.empty() ? std::vector<std::string>{} : std::vector<std::string>{thread});
    }

    // -- stored forms -----------------------------------------------------------------------
    /// A checkpoint's entry in `cp`: parent, step, source, then the sealed record.
    static std::string entry_of(const std::string& ns, const checkpoint& cp, std::string_view record) {
        const auto step = std::to_string(cp.step);
        return join({cp.parent_id, step, cp.source, codec::seal(record, {ns, cp.id, cp.parent_id, step, cp.source})});
    }

    /// Reads an entry back (without values). Throws `corrupt_checkpoint`.
    static checkpoint read_entry(const std::string& thread, const std::string& ns, const std::string& id,
                                 std::string_view bytes) {
        checkpoint cp;
        cp.id = id;
        try {
            std::string_view rest = bytes;
            std::string_view fields[3];
            for (auto& f : fields) {
                auto z = rest.find('\0');
                if (z == std::string_view::npos) throw codec::corrupt("its entry is cut short");
                f = rest.substr(0, z);
                rest = rest.substr(z + 1);
            }
            cp.parent_id = std::string(fields[0]);
            std::int64_t step = 0;
            auto [p, ec] = std::from_chars(fields[1].data(), fields[1].data() + fields[1].size(), step);
            if (ec != std::errc() || p != fields[1].data() + fields[1].size())
                throw codec::corrupt("its step is not a number");
            cp.step = step;
            cp.source = std::string(fields[2]);
            const auto record = codec::unseal(rest, {ns, id, fields[0], fields[1], fields[2]});
            codec::decode_record(record, cp);
        } catch (const codec::corrupt& e) {
            corrupt(thread, "checkpoint " + id + " (namespace " + quote(ns) + ") cannot be read: " + e.what(), {thread});
        }
        return cp;
    }

    // -- reading ----------------------------------------------------------------------------
    /// Unsealed stored values by (channel, version); nullopt: not stored.
    using value_map = std::map<std::pair<std::string, std::string>, std::optional<std::string>>;

    static std::set<std::pair<std::string, std::string>> versions_of(const std::vector<checkpoint>& cps) {
        std::set<std::pair<std::string, std::string>> out;
        for (const auto& cp : cps)
            for (const auto& [channel, version] : cp.versions)
                if (!version.empty()) out.emplace(channel, version);
        return out;
    }

    struct head {
        std::string thread;
        std::string newest;
        std::size_t count = 0;
        std::optional<std::string> root_id;
    };

    bool is_held(const std::string& thread) {
        std::lock_guard lock(mutex);
        return held.count(thread) != 0;
    }

    /// Runs `op` in the awaiting coroutine, on its executor (see `take`).
    template <class T>
    asio::awaitable<T> call(asio::awaitable<T>& op) {
        if constexpr (std::is_void_v<T>) co_await std::move(op);
        else co_return co_await std::move(op);
    }

    // -- connections and the fenced write (redis_saver.cpp) ----------------------------------
    asio::awaitable<std::unique_ptr<redis::connection>> take();
    void give(std::unique_ptr<redis::connection> c);
    asio::awaitable<void> load_scripts(redis::connection& c, bool fresh);
    /// On a retry (an earlier try may have run), word `index` of the round's first command
    /// becomes `text`.
    struct retry_word {
        std::size_t index = 0;
        std::string text;
    };
    asio::awaitable<std::vector<reply>> exec(std::vector<command> cmds, const std::string& thread,
                                             bool* retried = nullptr, const retry_word* on_retry = nullptr);
    asio::awaitable<reply> one(command cmd, const std::string& thread, bool* retried = nullptr,
                               const retry_word* on_retry = nullptr);
    asio::awaitable<std::vector<reply>> all(std::vector<command> cmds, const std::string& thread);
    asio::awaitable<bool> lease_call(const std::string& thread, std::string_view op, const std::string& holder);
    enum class fence { ours_or_free, nobody };
    /// `releases`: `ops` end with a RELEASE of this saver's lease, so a retry whose first try
    /// ran finds no lease and must not read that as a lost one.
    asio::awaitable<std::string> fenced(std::string thread, std::vector<command> ops, fence f, bool* retried = nullptr,
                                        bool releases = false);

    // -- checkpoints and pending writes (redis_checkpoints.cpp) ------------------------------
    std::vector<command> plan_puts(const std::string& thread, const std::string& ns, std::span<const checkpoint> cps) const;
    std::vector<command> plan_writes(const std::string& thread, const std::string& ns, const std::string& checkpoint_id,
                                     const std::vector<pending_write>& writes) const;
    asio::awaitable<void> end_call_op(const std::string& thread, const std::string& ns, saver::call_end& end);
    asio::awaitable<common::call_start> start_call(std::string thread, std::string ns, std::optional<std::string> id);
    asio::awaitable<void> write_op(std::string thread, std::vector<command> ops);
    asio::awaitable<void> fetch_values(std::string thread, std::string ns, std::set<std::pair<std::string, std::string>> wanted,
                                       value_map& got);
    static void assemble(const std::string& thread, checkpoint& cp, const value_map& got);
    static std::map<std::string, std::vector<pending_write>> writes_of(const std::string& thread, const std::string& ns,
                                                                      const reply& found, const reply& scores);
    command read_command(const std::string& thread, const std::string& ns, const list_options& o,
                         const std::optional<std::string>& exact) const;
    asio::awaitable<std::vector<checkpoint_tuple>> load(std::string thread, std::string ns, list_options o,
                                                        std::optional<std::string> exact);
    asio::awaitable<std::vector<checkpoint_tuple>> load_from(std::string thread, std::string ns, list_options o, reply r);
    asio::awaitable<std::vector<checkpoint_tuple>> load_consistent(std::string thread, std::string ns, list_options o,
                                                                   std::optional<std::string> exact);
    asio::awaitable<std::optional<checkpoint_tuple>> get_op(std::string thread, std::string ns, std::optional<std::string> id);
    asio::awaitable<std::vector<checkpoint_tuple>> list_op(std::string thread, std::string ns, list_options o);

    // -- thread maintenance (redis_threads.cpp) ----------------------------------------------
    asio::awaitable<void> delete_op(std::string thread);
    asio::awaitable<std::vector<command>> plan_prune(std::string thread, std::size_t keep_last, std::size_t& removed);
    asio::awaitable<void> prune_op(std::string thread, std::size_t keep_last);
    asio::awaitable<thread_stats> stats_op(std::string thread);
    asio::awaitable<bool> holds_op(std::string thread);
    asio::awaitable<void> copy_op(std::string from, std::string to);
    asio::awaitable<std::size_t> rewind_op(std::string thread, std::string target);
    asio::awaitable<std::vector<head>> heads();
    asio::awaitable<std::vector<thread_info>> list_threads_op(thread_query q);
    asio::awaitable<sweep_result> sweep_op(ttl_policy policy);

    // -- node cache and graph shapes (redis_cache.cpp) ---------------------------------------
    asio::awaitable<std::optional<boost::json::value>> cache_get_op(std::string ns, std::string key);
    asio::awaitable<void> cache_put_op(std::string ns, std::string key, std::string bytes, std::chrono::milliseconds ttl);
    asio::awaitable<std::size_t> cache_clear_op(std::vector<std::string> namespaces);
    asio::awaitable<void> put_graph_op(std::string signature, std::string bytes);
    bool graph_sent_lately(const std::string& signature);
    asio::awaitable<std::optional<std::vector<std::string>>> get_graph_op(std::string signature);

    // -- leases (redis_leases.cpp) -----------------------------------------------------------
    asio::awaitable<void> acquire_op(std::string thread);
    asio::awaitable<void> release_op(std::string thread);
    std::vector<std::string> held_now();
    asio::awaitable<std::optional<std::string>> break_op(std::string thread);
    void start_keeper();
    asio::awaitable<void> keep_leases();
    asio::awaitable<void> shutdown();
};

} // namespace stategraph::checkpoint
