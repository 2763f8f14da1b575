#include <stategraph/checkpoint/redis_saver.hpp>
#include <stategraph/detail/spawned.hpp>

#include <stategraph/checkpoint/reserved.hpp>
#include <stategraph/error.hpp>

#include "codec.hpp"
#include "lease_owner.hpp"
#include "redis_connection.hpp"
#include "saver_common.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <deque>
#include <mutex>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <type_traits>
#include <utility>

namespace stategraph::checkpoint {

namespace asio = boost::asio;
using redis::command;
using redis::reply;

namespace {

// clang-format off
/// Every write on a thread. KEYS[1]: the thread's lease; KEYS[2..]: the thread's keys (their
/// time to live is refreshed). ARGV[1]: this saver's owner name; ARGV[2]: '1' the lease must be
/// ours, '0' no other owner may hold it, '2' nobody may (sweep); ARGV[3]: the thread's time to
/// live in ms ('0': none); then the operations, each as a word count and its words. Guards
/// (ABSENT key, HEQ key field value) are checked before anything is written; HMAX key field value
/// keeps the larger text; any other operation is a Redis command.
constexpr std::string_view write_script = R"lua(
local holder = redis.call('GET', KEYS[1])
local mode = ARGV[2]
if mode == '1' then
  if holder ~= ARGV[1] then return {'LOST', holder or ''} end
elseif holder and (mode == '2' or holder ~= ARGV[1]) then
  return {'BUSY', holder, tostring(redis.call('PTTL', KEYS[1]))}
end
local ops = {}
local i = 4
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local op = {}
  for j = 1, n do op[j] = ARGV[i + j] end
  ops[#ops + 1] = op
  i = i + n + 1
end
for _, op in ipairs(ops) do
  if op[1] == 'ABSENT' then
    if redis.call('EXISTS', op[2]) == 1 then return {'EXISTS', op[2]} end
  elseif op[1] == 'HEQ' then
    local v = redis.call('HGET', op[2], op[3])
    if (v or '') ~= op[4] then return {'CHANGED', op[2]} end
  end
end
for _, op in ipairs(ops) do
  if op[1] == 'HMAX' then
    local v = redis.call('HGET', op[2], op[3])
    if not v or op[4] > v then redis.call('HSET', op[2], op[3], op[4]) end
  elseif op[1] ~= 'ABSENT' and op[1] ~= 'HEQ' then
    redis.call(unpack(op))
  end
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  for k = 2, #KEYS do redis.call('PEXPIRE', KEYS[k], ttl) end
end
return {'OK'}
)lua";

/// A lease changed only by its holder. KEYS[1]: the lease; ARGV[1]: 'renew' or 'release';
/// ARGV[2]: the holder expected; ARGV[3]: the new time to live (renew). 1 when done.
/// ARGV[1] 'break': the lease deleted whoever holds it; the answer ('1' and the holder, or '0')
/// is kept ten minutes under KEYS[2] (the call's own key), and a retried call whose first try
/// ran (its answer lost with the connection) gets that answer instead of breaking again.
constexpr std::string_view lease_script = R"lua(
if ARGV[1] == 'break' then
  local kept = redis.call('GET', KEYS[2])
  if kept then return kept end
  local holder = redis.call('GET', KEYS[1])
  redis.call('DEL', KEYS[1])
  local answer = holder and ('1' .. holder) or '0'
  redis.call('SET', KEYS[2], answer, 'PX', 600000)
  return answer
end
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return 0 end
if ARGV[1] == 'renew' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) else redis.call('DEL', KEYS[1]) end
return 1
)lua";
/// Reads. ARGV[1] 'exact' or 'range': checkpoints in one round trip. KEYS: the thread's ids, cp,
/// writes and wseq keys; 'exact': ARGV[2] is the one entry's field; 'range': ARGV[2], ARGV[3]
/// are the lex bounds, newest first, ARGV[4] a LIMIT or ''; ARGV[5]: the glob of the namespace's
/// write fields (read when several entries are found; one entry: its own writes only). Returns
/// {fields, entries, write fields and values (alternating), write arrival scores}; a missing
/// entry or score is nil. ARGV[1] 'chain': every stored version of some channels, for the links
/// of appended values (one round trip whatever the chain's length). KEYS[1]: the thread's vals;
/// ARGV[2..]: one glob per channel. Returns the fields and values found (alternating).
constexpr std::string_view read_script = R"lua(
local function scan(key, pattern, out)
  local cursor = '0'
  repeat
    local r = redis.call('HSCAN', key, cursor, 'MATCH', pattern, 'COUNT', 1000)
    cursor = r[1]
    for _, x in ipairs(r[2]) do out[#out + 1] = x end
  until cursor == '0'
  return out
end
if ARGV[1] == 'chain' then
  local out = {}
  for i = 2, #ARGV do scan(KEYS[1], ARGV[i], out) end
  return out
end
local fields
if ARGV[1] == 'exact' then
  fields = {ARGV[2]}
elseif ARGV[4] ~= '' then
  fields = redis.call('ZREVRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3], 'LIMIT', 0, tonumber(ARGV[4]))
else
  fields = redis.call('ZREVRANGEBYLEX', KEYS[1], ARGV[2], ARGV[3])
end
local entries, found = {}, 0
for i, f in ipairs(fields) do
  entries[i] = redis.call('HGET', KEYS[2], f)
  if entries[i] then found = found + 1 end
end
local writes, scores = {}, {}
if found > 0 then
  local pattern = ARGV[5]
  if found == 1 then -- that checkpoint's writes only
    for i, e in ipairs(entries) do
      if e then pattern = string.gsub(fields[i] .. '\0', '([%*%?%[%]\\])', '\\%1') .. '*' end
    end
  end
  scan(KEYS[3], pattern, writes)
  for i = 1, #writes, 2 do scores[#scores + 1] = redis.call('ZSCORE', KEYS[4], writes[i]) end
end
return {fields, entries, writes, scores}
)lua";
// clang-format on

constexpr std::string_view write_marker = "@write";
constexpr std::string_view lease_marker = "@lease";
constexpr std::string_view read_marker = "@read";
constexpr std::string_view graph_channel = reserved::graph;
/// Words per operation of the write script (Lua's unpack has a limit of a few thousand).
constexpr std::size_t chunk_words = 1000;

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

using redis::join_fields;
std::string join(std::initializer_list<std::string_view> parts) { return join_fields(parts); }

std::vector<std::string_view> split(std::string_view s) {
    std::vector<std::string_view> out;
    for (;;) {
        auto z = s.find('\0');
        out.push_back(s.substr(0, z));
        if (z == std::string_view::npos) return out;
        s = s.substr(z + 1);
    }
}

/// `s` as a literal in a Redis glob pattern.
std::string glob_literal(std::string_view s) {
    std::string out;
    for (char c : s) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

/// The first of `n` consecutive arrival numbers for pending writes: microseconds since the epoch
/// (time-ordered across processes, exact in a sorted set's double score), strictly increasing in
/// this process.
std::int64_t reserve_seq(std::size_t n) {
    static std::atomic<std::int64_t> last{0};
    const std::int64_t now =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    auto cur = last.load();
    std::int64_t start = 0;
    do {
        start = std::max(now, cur + 1);
    } while (!last.compare_exchange_weak(cur, start + static_cast<std::int64_t>(n) - 1));
    return start;
}

/// Appends `words` as operations of at most `chunk_words` words: `head` then pairs (or singles).
void add_chunked(std::vector<command>& ops, const command& head, const std::vector<std::string>& items,
                 std::size_t group) {
    for (std::size_t i = 0; i < items.size();) {
        command op = head;
        while (i < items.size() && op.size() + group <= chunk_words) {
            for (std::size_t g = 0; g < group && i < items.size(); ++g) op.push_back(items[i++]);
        }
        ops.push_back(std::move(op));
    }
}

const std::string& version_of(const checkpoint& cp, const std::string& channel) {
    auto it = cp.versions.find(channel);
    return it == cp.versions.end() ? cp.id : it->second;
}

/// The thread named by errors of operations on no thread.
const std::string no_thread;

/// A reply as text (nil: nullopt).
std::optional<std::string> text_of(const reply& r) {
    if (r.is_nil()) return std::nullopt;
    return r.str;
}

} // namespace

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
    std::mutex mutex; ///< guards the members down to `held`
    std::vector<std::unique_ptr<redis::connection>> idle;
    std::size_t made = 0;
    std::deque<std::shared_ptr<pool_waiter>> waiters;
    std::string write_sha, lease_sha, read_sha;
    std::set<std::string> held;
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

    // -- connections ------------------------------------------------------------------------
    /// A connection for the calling coroutine, bound to its executor: an idle one, a new one
    /// while fewer than `pool_size` were made, or the first one given back.
    asio::awaitable<std::unique_ptr<redis::connection>> take() {
        const asio::any_io_executor ex = co_await asio::this_coro::executor;
        for (;;) {
            std::unique_ptr<redis::connection> c;
            std::shared_ptr<pool_waiter> w;
            bool fresh = false;
            {
                std::lock_guard lock(mutex);
                if (!idle.empty()) {
                    c = std::move(idle.back());
                    idle.pop_back();
                } else if (made < opt.pool_size) {
                    ++made;
                    fresh = true;
                } else {
                    w = std::make_shared<pool_waiter>(ex);
                    waiters.push_back(w);
                }
            }
            if (c) {
                c->bind_to(ex);
                co_return c;
            }
            if (fresh) co_return std::make_unique<redis::connection>(ex, opt.timeout);
            auto waiting = w->timer.async_wait(asio::as_tuple(asio::use_awaitable));
            co_await std::move(waiting);
            std::lock_guard lock(mutex);
            std::erase(waiters, w);
        }
    }

    /// Gives a connection back, unbound from its caller's executor (whose context may end
    /// once the call returns), and wakes the first caller waiting for one.
    void give(std::unique_ptr<redis::connection> c) {
        c->unbind();
        std::shared_ptr<pool_waiter> w;
        {
            std::lock_guard lock(mutex);
            idle.push_back(std::move(c));
            if (!waiters.empty()) {
                w = std::move(waiters.front());
                waiters.pop_front();
            }
        }
        if (w) {
            auto ex = w->timer.get_executor();
            asio::post(ex, [w] { w->timer.cancel(); });
        }
    }

    /// Loads the scripts on a connection (and names it, when it is new).
    asio::awaitable<void> load_scripts(redis::connection& c, bool fresh) {
        std::vector<command> load{command{"SCRIPT", "LOAD", std::string(write_script)},
                                  command{"SCRIPT", "LOAD", std::string(lease_script)},
                                  command{"SCRIPT", "LOAD", std::string(read_script)}};
        if (fresh && !opt.client_name.empty()) {
            std::string name = opt.client_name;
            std::replace_if(name.begin(), name.end(), [](unsigned char ch) { return ch <= ' '; }, '_');
            load.push_back(command{"CLIENT", "SETNAME", std::move(name)});
        }
        round_trips.fetch_add(1, std::memory_order_relaxed);
        auto r = co_await c.run(load);
        for (const auto& x : r)
            if (x.is_error()) throw redis::protocol_error("setting the connection up: " + x.str);
        std::lock_guard lock(mutex);
        write_sha = r[0].str;
        lease_sha = r[1].str;
        read_sha = r[2].str;
    }

    /// Runs `cmds` in one round trip on a pooled connection, connecting (again) when needed and
    /// trying up to `attempts` times when the connection fails; throws `storage_failure` naming
    /// `thread` then. `*retried` (when given) says whether an earlier try may have reached the server.
    asio::awaitable<std::vector<reply>> exec(std::vector<command> cmds, const std::string& thread,
                                             bool* retried = nullptr) {
        std::string last;
        for (int attempt = 1;; ++attempt) {
            auto c = co_await take();
            std::optional<std::vector<reply>> out;
            bool reload = false;
            try {
                if (!c->is_open()) {
                    co_await c->connect(ep);
                    co_await load_scripts(*c, true);
                }
                {
                    std::lock_guard lock(mutex);
                    for (auto& cmd : cmds)
                        if (cmd.size() > 1 && cmd[0] == "EVALSHA") {
                            if (cmd[1] == write_marker) cmd[1] = write_sha;
                            else if (cmd[1] == lease_marker) cmd[1] = lease_sha;
                            else if (cmd[1] == read_marker) cmd[1] = read_sha;
                        }
                }
                round_trips.fetch_add(1, std::memory_order_relaxed);
                auto r = co_await c->run(cmds);
                for (const auto& x : r)
                    if (x.is_error() && x.str.rfind("NOSCRIPT", 0) == 0) reload = true;
                if (!reload) out = std::move(r);
            } catch (const std::exception& e) {
                last = e.what();
                c->close();
            }
            if (reload) {
                // The server forgot the scripts (SCRIPT FLUSH, a restart behind a proxy): load
                // them again on this connection and send the round again.
                try {
                    co_await load_scripts(*c, false);
                } catch (const std::exception& e) {
                    last = e.what();
                    c->close();
                }
            }
            give(std::move(c));
            if (out) {
                if (retried) *retried = attempt > 1;
                co_return std::move(*out);
            }
            if (attempt >= opt.attempts || stopping) break;
            asio::steady_timer pause(co_await asio::this_coro::executor,
                                     std::chrono::milliseconds(20 << std::min(attempt, 5)));
            auto pausing = pause.async_wait(asio::as_tuple(asio::use_awaitable));
            co_await std::move(pausing);
        }
        failed(thread, "the Redis server cannot be reached: " + last + " (after " + std::to_string(opt.attempts) +
                           " attempts)");
    }

    /// One command's reply; an error reply is thrown as `storage_failure`.
    asio::awaitable<reply> one(command cmd, const std::string& thread, bool* retried = nullptr) {
        std::vector<command> cmds{std::move(cmd)};
        auto r = co_await exec(std::move(cmds), thread, retried);
        if (r.at(0).is_error()) failed(thread, "Redis answered: " + r[0].str);
        co_return std::move(r[0]);
    }

    /// The replies of `cmds`; any error reply is thrown as `storage_failure`.
    asio::awaitable<std::vector<reply>> all(std::vector<command> cmds, const std::string& thread) {
        auto r = co_await exec(std::move(cmds), thread);
        for (const auto& x : r)
            if (x.is_error()) failed(thread, "Redis answered: " + x.str);
        co_return r;
    }

    asio::awaitable<bool> lease_call(const std::string& thread, std::string_view op, const std::string& holder) {
        command cmd{"EVALSHA", std::string(lease_marker), "1", tkey(thread, "lease"), std::string(op), holder,
                    std::to_string(opt.lease_ttl.count())};
        auto r = co_await one(std::move(cmd), thread);
        co_return r.integer == 1;
    }

    // -- fenced writes ----------------------------------------------------------------------
    enum class fence { ours_or_free, nobody };

    /// Runs the write script on `thread` with `ops`; returns its status ("OK", "EXISTS",
    /// "CHANGED", "BUSY") after taking over a lease whose holder is provably gone; throws
    /// `lease_lost`, and `thread_busy` unless `f` is `nobody` (then "BUSY" is returned).
    asio::awaitable<std::string> fenced(std::string thread, std::vector<command> ops, fence f, bool* retried = nullptr) {
        for (int round = 0;; ++round) {
            const bool ours = is_held(thread);
            command cmd{"EVALSHA", std::string(write_marker)};
            auto keys = thread_keys(thread);
            cmd.push_back(std::to_string(keys.size() + 1));
            cmd.push_back(tkey(thread, "lease"));
            for (auto& k : keys) cmd.push_back(std::move(k));
            cmd.push_back(owner);
            cmd.push_back(f == fence::nobody ? "2" : ours ? "1" : "0");
            cmd.push_back(std::to_string(std::max<std::int64_t>(0, opt.thread_ttl.count())));
            for (const auto& op : ops) {
                cmd.push_back(std::to_string(op.size()));
                cmd.insert(cmd.end(), op.begin(), op.end());
            }
            auto r = co_await one(std::move(cmd), thread, retried);
            if (!r.is_array() || r.elements.empty()) failed(thread, "unexpected answer of the write script");
            const auto status = r.elements[0].str;
            if (status == "LOST") {
                const auto holder = r.elements.size() > 1 ? r.elements[1].str : std::string();
                throw checkpoint_error(errc::lease_lost,
                                       "thread " + quote(thread) + ": this saver's lease (" + owner + ") was " +
                                           (holder.empty() ? std::string("broken or expired") : "taken over by " + holder) +
                                           "; the write was refused and nothing of it stored",
                                       {thread});
            }
            if (status == "BUSY") {
                const auto holder = r.elements.at(1).str;
                if (round == 0 && lease_owner::is_gone(holder)) {
                    co_await lease_call(thread, "release", holder);
                    continue;
                }
                if (f == fence::nobody) co_return status;
                throw checkpoint_error(errc::thread_busy,
                                       "thread " + quote(thread) + " is busy: held by " + holder + " for " +
                                           r.elements.at(2).str + " ms more",
                                       {thread});
            }
            co_return status;
        }
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

    /// Plans the operations of `put`.
    std::vector<command> plan_put(const std::string& thread, const std::string& ns, const checkpoint& cp) const {
        std::vector<command> ops;
        std::vector<std::string> vals; // field, bytes
        for (const auto& [channel, value] : cp.values) {
            const std::string name(channel);
            const auto& version = version_of(cp, name);
            auto x = cp.extends.find(name);
            const std::string* extends = x == cp.extends.end() ? nullptr : &x->second;
            auto bytes = codec::encode_value(value, extends, version);
            if (name == graph_channel && !extends && version != cp.id) {
                ops.push_back(command{"HSETNX", graphs_key(), version, codec::seal(bytes, {graph_channel, version})});
                continue;
            }
            vals.push_back(join({ns, name, version}));
            vals.push_back(codec::seal(bytes, {ns, name, version}));
        }
        add_chunked(ops, command{"HSET", tkey(thread, "vals")}, vals, 2);
        ops.push_back(command{"HSET", tkey(thread, "cp"), join({ns, cp.id}), entry_of(ns, cp, codec::encode_record(cp))});
        ops.push_back(command{"ZADD", tkey(thread, "ids"), "0", join({ns, cp.id})});
        ops.push_back(command{"HMAX", tkey(thread, "meta"), "newest", cp.id});
        ops.push_back(command{"SADD", threads_key(), thread});
        return ops;
    }

    asio::awaitable<void> write_op(std::string thread, std::vector<command> ops) {
        co_await fenced(thread, std::move(ops), fence::ours_or_free);
    }

    // -- reading ----------------------------------------------------------------------------
    /// Unsealed stored values by (channel, version); nullopt: not stored.
    using value_map = std::map<std::pair<std::string, std::string>, std::optional<std::string>>;

    /// Fetches `wanted` values of (thread, ns) and every earlier version their appended items
    /// extend, into `got`: one round trip for `wanted`, and, when appended items link to versions
    /// not read yet, one more (the read script's chain mode) for every version of those channels up to the
    /// newest link missing, so a chain of any length costs two round trips, not one per link.
    asio::awaitable<void> fetch_values(std::string thread, std::string ns, std::set<std::pair<std::string, std::string>> wanted,
                                       value_map& got) {
        // Unseals one stored value (or the shared graph copy) into `got`, asking for its link.
        auto take = [&](const std::pair<std::string, std::string>& key, const std::optional<std::string>& stored,
                        const std::optional<std::string>& shared) {
            const auto& [channel, version] = key;
            std::optional<std::string> plain;
            try {
                if (!stored && shared) plain.emplace(codec::unseal(*shared, {graph_channel, version}));
                if (stored) plain.emplace(codec::unseal(*stored, {ns, channel, version}));
                if (plain)
                    if (auto parts = codec::split_value(*plain, version); parts.extends) wanted.emplace(channel, *parts.extends);
            } catch (const codec::corrupt& e) {
                corrupt(thread, "channel " + quote(channel) + " (version " + version + ") cannot be read: " + e.what(),
                        {thread, channel});
            }
            got[key] = std::move(plain);
        };
        for (bool first = true;; first = false) {
            std::vector<std::pair<std::string, std::string>> missing;
            for (const auto& w : wanted)
                if (!got.count(w)) missing.push_back(w);
            if (missing.empty()) co_return;
            if (first) {
                command vals{"HMGET", tkey(thread, "vals")};
                command graphs{"HMGET", graphs_key()};
                for (const auto& [channel, version] : missing) {
                    vals.push_back(join({ns, channel, version}));
                    if (channel == graph_channel) graphs.push_back(version);
                }
                std::vector<command> cmds{std::move(vals)};
                if (graphs.size() > 2) cmds.push_back(std::move(graphs));
                auto r = co_await all(std::move(cmds), thread);
                std::size_t g = 0;
                for (std::size_t i = 0; i < missing.size(); ++i) {
                    std::optional<std::string> shared;
                    if (missing[i].first == graph_channel) shared = text_of(r.at(1).elements.at(g++));
                    take(missing[i], text_of(r[0].elements.at(i)), shared);
                }
                continue;
            }
            // Links: per channel, every stored version up to the newest link missing.
            std::map<std::string, std::string> upto;
            for (const auto& [channel, version] : missing)
                if (auto& u = upto[channel]; u < version) u = version;
            command chain{"EVALSHA", std::string(read_marker), "1", tkey(thread, "vals"), "chain"};
            for (const auto& [channel, version] : upto) chain.push_back(glob_literal(join({ns, channel, ""})) + "*");
            auto r = co_await one(std::move(chain), thread);
            const auto& fv = r.elements;
            for (std::size_t i = 0; i + 1 < fv.size(); i += 2) {
                const auto parts = split(fv[i].str);
                if (parts.size() != 3 || parts[0] != ns) continue;
                std::pair<std::string, std::string> key{std::string(parts[1]), std::string(parts[2])};
                auto u = upto.find(key.first);
                if (u == upto.end() || key.second > u->second || got.count(key)) continue;
                take(key, fv[i + 1].str, std::nullopt);
            }
            for (const auto& m : missing)
                if (!got.count(m)) got[m] = std::nullopt; // not stored: reported by `assemble`
        }
    }

    static std::set<std::pair<std::string, std::string>> versions_of(const std::vector<checkpoint>& cps) {
        std::set<std::pair<std::string, std::string>> out;
        for (const auto& cp : cps)
            for (const auto& [channel, version] : cp.versions)
                if (!version.empty()) out.emplace(channel, version);
        return out;
    }

    /// Fills `cp.values` from `got`. Throws `corrupt_checkpoint`.
    static void assemble(const std::string& thread, checkpoint& cp, const value_map& got) {
        for (const auto& [channel, version] : cp.versions) {
            if (version.empty()) continue;
            auto fetch = [&, &ch = channel](const std::string& v) -> std::optional<std::string> {
                auto it = got.find({ch, v});
                return it == got.end() ? std::nullopt : it->second;
            };
            try {
                if (!fetch(version))
                    corrupt(thread,
                            "checkpoint " + cp.id + " needs channel " + quote(channel) + " at version " + version +
                                ", which is not stored",
                            {thread, channel});
                cp.values[channel] = codec::resolve_value(version, fetch);
            } catch (const codec::corrupt& e) {
                corrupt(thread, "checkpoint " + cp.id + ": channel " + quote(channel) + " cannot be read: " + e.what(),
                        {thread, channel});
            }
        }
    }

    /// The pending writes found by the read script (fields and values alternating, then their
    /// arrival scores), by checkpoint id and in the order they were first saved.
    static std::map<std::string, std::vector<pending_write>> writes_of(const std::string& thread, const std::string& ns,
                                                                      const reply& found, const reply& scores) {
        struct item {
            double seq;
            std::string cp;
            pending_write w;
        };
        std::vector<item> items;
        const auto& fv = found.elements;
        for (std::size_t i = 0; i + 1 < fv.size(); i += 2) {
            const std::string& field = fv[i].str;
            const std::string& value = fv[i + 1].str;
            const auto parts = split(field);
            if (parts.size() != 4) corrupt(thread, "a pending write is stored under a malformed field", {thread});
            item it{0, std::string(parts[1]), {}};
            const std::size_t k = i / 2;
            if (k < scores.elements.size() && !scores.elements[k].is_nil())
                it.seq = std::strtod(scores.elements[k].str.c_str(), nullptr);
            it.w.task_id = std::string(parts[2]);
            it.w.channel = std::string(parts[3]);
            const std::string what = "checkpoint " + it.cp + ": pending write of task " + quote(it.w.task_id) +
                                     " to channel " + quote(it.w.channel);
            const auto z = std::string_view(value).find('\0');
            if (z == std::string_view::npos) corrupt(thread, what + " cannot be read: it is cut short", {thread, it.w.channel});
            it.w.task_name = value.substr(0, z);
            try {
                const auto text = codec::unseal(std::string_view(value).substr(z + 1),
                                                {ns, it.cp, it.w.task_id, it.w.task_name, it.w.channel});
                boost::system::error_code ec;
                it.w.value = boost::json::parse(text, ec);
                if (ec) throw codec::corrupt("bad JSON: " + ec.message());
            } catch (const codec::corrupt& e) {
                corrupt(thread, what + " cannot be read: " + e.what(), {thread, it.w.channel, it.w.task_name});
            }
            items.push_back(std::move(it));
        }
        std::stable_sort(items.begin(), items.end(), [](const item& a, const item& b) { return a.seq < b.seq; });
        std::map<std::string, std::vector<pending_write>> out;
        for (auto& it : items) out[it.cp].push_back(std::move(it.w));
        return out;
    }

    /// Checkpoints of (thread, ns), newest first, with values and writes: the one with `exact`,
    /// or those `o` selects. One round trip (the read script: ids, entries and pending writes, as
    /// one atomic snapshot), then one for the values, and one more only when appended values
    /// link to versions not read yet (the read script's chain mode, whatever the chain's length).
    asio::awaitable<std::vector<checkpoint_tuple>> load(std::string thread, std::string ns, list_options o,
                                                        std::optional<std::string> exact) {
        std::vector<checkpoint_tuple> out;
        if (o.limit && *o.limit == 0) co_return out;
        command read{"EVALSHA", std::string(read_marker), "4", tkey(thread, "ids"), tkey(thread, "cp"),
                     tkey(thread, "writes"), tkey(thread, "wseq")};
        if (exact) {
            read.push_back("exact");
            read.push_back(join({ns, *exact}));
            read.push_back("");
            read.push_back("");
        } else {
            read.push_back("range");
            read.push_back(o.before ? "(" + join({ns, *o.before}) : "(" + ns + '\x01');
            read.push_back("[" + ns + '\0');
            read.push_back(o.limit && !o.source && !o.step ? std::to_string(*o.limit) : std::string());
        }
        read.push_back(glob_literal(join({ns, ""})) + "*");
        auto r = co_await one(std::move(read), thread);
        if (!r.is_array() || r.elements.size() != 4) failed(thread, "unexpected answer of the read script");
        const auto& fields = r.elements[0].elements;
        const auto& entries = r.elements[1].elements;
        std::vector<checkpoint> cps;
        for (std::size_t i = 0; i < fields.size() && i < entries.size(); ++i) {
            auto bytes = text_of(entries[i]);
            if (!bytes) continue;
            const std::string id = fields[i].str.substr(ns.size() + 1);
            auto cp = read_entry(thread, ns, id, *bytes);
            if (o.source && cp.source != *o.source) continue;
            if (o.step && cp.step != *o.step) continue;
            if (o.limit && cps.size() >= *o.limit) break;
            cps.push_back(std::move(cp));
        }
        if (cps.empty()) co_return out;
        auto writes = writes_of(thread, ns, r.elements[2], r.elements[3]);
        value_map got;
        auto wanted = versions_of(cps);
        co_await fetch_values(thread, ns, std::move(wanted), got);
        out.reserve(cps.size());
        for (auto& cp : cps) {
            assemble(thread, cp, got);
            checkpoint_tuple t{thread, ns, std::move(cp), {}};
            if (auto w = writes.find(t.cp.id); w != writes.end()) t.writes = std::move(w->second);
            out.push_back(std::move(t));
        }
        co_return out;
    }

    /// `load`, read again once when it finds a value or record missing or unreadable: a prune or
    /// delete_thread of another client may have run between its round trips. A second failure is
    /// real damage.
    asio::awaitable<std::vector<checkpoint_tuple>> load_consistent(std::string thread, std::string ns, list_options o,
                                                                   std::optional<std::string> exact) {
        for (int attempt = 0;; ++attempt) {
            try {
                co_return co_await load(thread, ns, o, exact);
            } catch (const checkpoint_error& e) {
                if (e.kind() != errc::corrupt_checkpoint || attempt > 0) throw;
            }
        }
    }

    asio::awaitable<std::optional<checkpoint_tuple>> get_op(std::string thread, std::string ns, std::optional<std::string> id) {
        list_options o;
        o.limit = 1;
        auto got = co_await load_consistent(thread, ns, o, id);
        if (got.empty()) co_return std::nullopt;
        co_return std::move(got.front());
    }

    asio::awaitable<std::vector<checkpoint_tuple>> list_op(std::string thread, std::string ns, list_options o) {
        std::optional<std::string> any;
        co_return co_await load_consistent(thread, ns, o, any);
    }

    asio::awaitable<void> delete_op(std::string thread) {
        std::vector<command> ops;
        command del{"DEL"};
        for (auto& k : thread_keys(thread)) del.push_back(std::move(k));
        ops.push_back(std::move(del));
        ops.push_back(command{"SREM", threads_key(), thread});
        co_await fenced(thread, std::move(ops), fence::ours_or_free);
    }

    // -- pruning ----------------------------------------------------------------------------
    /// The operations that keep the newest `keep_last` checkpoints per namespace of `thread` and
    /// the values they need; `removed` gets how many checkpoints go.
    asio::awaitable<std::vector<command>> plan_prune(std::string thread, std::size_t keep_last, std::size_t& removed) {
        if (keep_last == 0) keep_last = 1;
        std::vector<command> reads{command{"ZRANGE", tkey(thread, "ids"), "0", "-1"}, command{"HKEYS", tkey(thread, "vals")},
                                   command{"HKEYS", tkey(thread, "writes")}};
        auto r = co_await all(std::move(reads), thread);
        std::map<std::string, std::vector<std::string>> by_ns; // ns -> ids, oldest first
        for (const auto& m : r[0].elements) {
            const auto z = m.str.find('\0');
            if (z == std::string::npos) continue;
            by_ns[m.str.substr(0, z)].push_back(m.str.substr(z + 1));
        }
        std::set<std::pair<std::string, std::string>> dropped; // (ns, id)
        std::map<std::string, std::set<std::pair<std::string, std::string>>> needed; // ns -> (channel, version)
        std::vector<command> ops;
        command zrem{"ZREM", tkey(thread, "ids")}, hdel_cp{"HDEL", tkey(thread, "cp")};
        std::vector<std::string> gone_ids, gone_entries;
        for (const auto& [ns, ids] : by_ns) {
            const std::size_t drop = ids.size() > keep_last ? ids.size() - keep_last : 0;
            for (std::size_t i = 0; i < drop; ++i) {
                dropped.emplace(ns, ids[i]);
                gone_ids.push_back(join({ns, ids[i]}));
            }
            command entries{"HMGET", tkey(thread, "cp")};
            for (std::size_t i = drop; i < ids.size(); ++i) entries.push_back(join({ns, ids[i]}));
            auto e = co_await one(std::move(entries), thread);
            std::vector<checkpoint> kept;
            for (std::size_t i = drop; i < ids.size(); ++i)
                if (auto bytes = text_of(e.elements.at(i - drop))) kept.push_back(read_entry(thread, ns, ids[i], *bytes));
            value_map got;
            auto wanted = versions_of(kept);
            co_await fetch_values(thread, ns, std::move(wanted), got);
            auto& need = needed[ns];
            for (const auto& cp : kept)
                for (const auto& [channel, version] : cp.versions) {
                    auto fetch = [&, &ch = channel](const std::string& v) -> std::optional<std::string> {
                        auto it = got.find({ch, v});
                        return it == got.end() ? std::nullopt : it->second;
                    };
                    try {
                        codec::mark_needed(channel, version, fetch, need);
                    } catch (const codec::corrupt& ex) {
                        corrupt(thread, "checkpoint " + cp.id + ": " + ex.what(), {thread, channel});
                    }
                }
            if (drop && !kept.empty() && !kept.front().parent_id.empty()) {
                // The oldest kept checkpoint has no parent any more (as in the other savers).
                auto first = kept.front();
                first.parent_id.clear();
                first.values.clear();
                ops.push_back(command{"HSET", tkey(thread, "cp"), join({ns, first.id}),
                                      entry_of(ns, first, codec::encode_record(first))});
            }
        }
        removed = gone_ids.size();
        add_chunked(ops, zrem, gone_ids, 1);
        add_chunked(ops, hdel_cp, gone_ids, 1);
        std::vector<std::string> gone_vals;
        for (const auto& f : r[1].elements) {
            const auto parts = split(f.str);
            if (parts.size() != 3) continue;
            auto it = needed.find(std::string(parts[0]));
            if (it == needed.end() || !it->second.count({std::string(parts[1]), std::string(parts[2])}))
                gone_vals.push_back(f.str);
        }
        add_chunked(ops, command{"HDEL", tkey(thread, "vals")}, gone_vals, 1);
        std::vector<std::string> gone_writes;
        for (const auto& f : r[2].elements) {
            const auto parts = split(f.str);
            if (parts.size() == 4 && dropped.count({std::string(parts[0]), std::string(parts[1])}))
                gone_writes.push_back(f.str);
        }
        add_chunked(ops, command{"HDEL", tkey(thread, "writes")}, gone_writes, 1);
        add_chunked(ops, command{"ZREM", tkey(thread, "wseq")}, gone_writes, 1);
        co_return ops;
    }

    asio::awaitable<void> prune_op(std::string thread, std::size_t keep_last) {
        std::size_t removed = 0;
        auto ops = co_await plan_prune(thread, keep_last, removed);
        co_await fenced(thread, std::move(ops), fence::ours_or_free);
    }

    asio::awaitable<thread_stats> stats_op(std::string thread) {
        std::vector<command> reads{command{"HVALS", tkey(thread, "cp")}, command{"HVALS", tkey(thread, "vals")},
                                   command{"HVALS", tkey(thread, "writes")}};
        auto r = co_await all(std::move(reads), thread);
        thread_stats s;
        s.checkpoints = r[0].elements.size();
        for (const auto& e : r[0].elements) s.record_bytes += e.str.size();
        s.blobs = r[1].elements.size();
        for (const auto& v : r[1].elements) s.bytes += v.str.size() - std::min(v.str.size(), codec::framing_of(v.str));
        s.writes = r[2].elements.size();
        for (const auto& w : r[2].elements) {
            const auto z = w.str.find('\0');
            if (z == std::string::npos) continue;
            const auto sealed = std::string_view(w.str).substr(z + 1);
            s.bytes += sealed.size() - std::min(sealed.size(), codec::framing_of(sealed));
        }
        co_return s;
    }

    asio::awaitable<bool> holds_op(std::string thread) {
        std::vector<command> reads{command{"EXISTS", tkey(thread, "cp"), tkey(thread, "writes")}};
        auto r = co_await all(std::move(reads), thread);
        co_return r[0].integer > 0;
    }

    // -- thread maintenance -----------------------------------------------------------------
    asio::awaitable<void> copy_op(std::string from, std::string to) {
        std::vector<command> reads{command{"ZRANGE", tkey(from, "ids"), "0", "-1"}, command{"HGETALL", tkey(from, "cp")},
                                   command{"HGETALL", tkey(from, "vals")},     command{"HGETALL", tkey(from, "writes")},
                                   command{"ZRANGE", tkey(from, "wseq"), "0", "-1", "WITHSCORES"},
                                   command{"HGET", tkey(from, "meta"), "newest"}};
        auto r = co_await all(std::move(reads), from);
        if (r[0].elements.empty())
            throw checkpoint_error(errc::thread_not_found,
                                   "copy_thread: thread " + quote(from) + " has no checkpoint to copy (to " + quote(to) + ")",
                                   {from, to});
        std::vector<command> ops{command{"ABSENT", tkey(to, "ids")}, command{"ABSENT", tkey(to, "writes")},
                                 command{"ABSENT", tkey(to, "cp")}};
        auto flat = [](const reply& x) {
            std::vector<std::string> out;
            out.reserve(x.elements.size());
            for (const auto& e : x.elements) out.push_back(e.str);
            return out;
        };
        std::vector<std::string> members;
        for (const auto& m : r[0].elements) {
            members.push_back("0");
            members.push_back(m.str);
        }
        add_chunked(ops, command{"ZADD", tkey(to, "ids")}, members, 2);
        add_chunked(ops, command{"HSET", tkey(to, "cp")}, flat(r[1]), 2);
        add_chunked(ops, command{"HSET", tkey(to, "vals")}, flat(r[2]), 2);
        add_chunked(ops, command{"HSET", tkey(to, "writes")}, flat(r[3]), 2);
        std::vector<std::string> seqs; // score, member
        for (std::size_t i = 0; i + 1 < r[4].elements.size(); i += 2) {
            seqs.push_back(r[4].elements[i + 1].str);
            seqs.push_back(r[4].elements[i].str);
        }
        add_chunked(ops, command{"ZADD", tkey(to, "wseq")}, seqs, 2);
        if (!r[5].is_nil()) ops.push_back(command{"HSET", tkey(to, "meta"), "newest", r[5].str});
        ops.push_back(command{"SADD", threads_key(), to});
        bool exec_retried = false;
        auto status = co_await fenced(to, std::move(ops), fence::ours_or_free, &exec_retried);
        if (status == "EXISTS" && exec_retried) {
            // A retried copy whose first try was stored (its answer lost with the connection)
            // finds exactly the source's checkpoints there: that is success, not a clash.
            command ids{"ZRANGE", tkey(to, "ids"), "0", "-1"};
            auto there = co_await one(std::move(ids), to);
            std::vector<std::string> want, got;
            for (const auto& m : r[0].elements) want.push_back(m.str);
            for (const auto& m : there.elements) got.push_back(m.str);
            if (want == got) status = "OK";
        }
        if (status == "EXISTS")
            throw checkpoint_error(errc::thread_exists,
                                   "copy_thread: thread " + quote(to) + " exists already (copying " + quote(from) +
                                       " there would mix two threads); delete it first or choose another id",
                                   {to, from});
    }

    /// `rewind_thread`: the thread's keys are read, the removals planned, and the write script
    /// applies them all at once, guarded by the thread's newest id (a write in between makes the
    /// script refuse, and the plan is made again) and fenced by its lease.
    asio::awaitable<std::size_t> rewind_op(std::string thread, std::string target) {
        for (int attempt = 0;; ++attempt) {
            std::vector<command> reads{command{"ZRANGE", tkey(thread, "ids"), "0", "-1"}, command{"HKEYS", tkey(thread, "vals")},
                                       command{"HKEYS", tkey(thread, "writes")}, command{"HGET", tkey(thread, "meta"), "newest"}};
            auto r = co_await all(std::move(reads), thread);
            std::set<std::pair<std::string, std::string>> gone; // (ns, id)
            std::vector<std::string> gone_members;
            std::string newest; // of what stays
            bool known = false;
            for (const auto& m : r[0].elements) {
                const auto z = m.str.find('\0');
                if (z == std::string::npos) continue;
                auto id = m.str.substr(z + 1);
                if (id == target) known = true;
                if (id > target) {
                    gone.emplace(m.str.substr(0, z), id);
                    gone_members.push_back(m.str);
                } else if (id > newest) {
                    newest = id;
                }
            }
            if (!known) throw common::rewind_target_missing(thread, target, "");
            std::vector<command> ops{command{"HEQ", tkey(thread, "meta"), "newest", text_of(r[3]).value_or("")}};
            add_chunked(ops, command{"ZREM", tkey(thread, "ids")}, gone_members, 1);
            add_chunked(ops, command{"HDEL", tkey(thread, "cp")}, gone_members, 1);
            std::vector<std::string> gone_vals, gone_writes;
            for (const auto& f : r[1].elements) {
                const auto parts = split(f.str); // ns, channel, version
                if (parts.size() == 3 && gone.count({std::string(parts[0]), std::string(parts[2])})) gone_vals.push_back(f.str);
            }
            for (const auto& f : r[2].elements) {
                const auto parts = split(f.str); // ns, checkpoint id, task, channel
                if (parts.size() == 4 && parts[1] > target) gone_writes.push_back(f.str);
            }
            add_chunked(ops, command{"HDEL", tkey(thread, "vals")}, gone_vals, 1);
            add_chunked(ops, command{"HDEL", tkey(thread, "writes")}, gone_writes, 1);
            add_chunked(ops, command{"ZREM", tkey(thread, "wseq")}, gone_writes, 1);
            ops.push_back(command{"HSET", tkey(thread, "meta"), "newest", newest});
            auto status = co_await fenced(thread, std::move(ops), fence::ours_or_free);
            if (status == "OK") co_return gone_members.size();
            if (attempt >= 4)
                failed(thread, "rewind_thread: the thread kept changing while it was being rewound; nothing was removed");
        }
    }

    struct head {
        std::string thread;
        std::string newest;
        std::size_t count = 0;
        std::optional<std::string> root_id;
    };

    /// Every listed thread that still has checkpoints, with its newest id of any namespace.
    asio::awaitable<std::vector<head>> heads() {
        command cmd{"SMEMBERS", threads_key()};

        auto members = co_await one(std::move(cmd), no_thread);
        std::vector<head> out;
        if (members.elements.empty()) co_return out;
        std::vector<command> cmds;
        for (const auto& m : members.elements) {
            cmds.push_back(command{"HGET", tkey(m.str, "meta"), "newest"});
            cmds.push_back(command{"ZCARD", tkey(m.str, "ids")});
            cmds.push_back(command{"ZREVRANGEBYLEX", tkey(m.str, "ids"), "(\x01", std::string("[\0", 2), "LIMIT", "0", "1"});
        }
        auto r = co_await all(std::move(cmds), no_thread);
        for (std::size_t i = 0; i < members.elements.size(); ++i) {
            head h;
            h.thread = members.elements[i].str;
            h.count = static_cast<std::size_t>(r[3 * i + 1].integer);
            if (auto n = text_of(r[3 * i])) h.newest = *n;
            if (!r[3 * i + 2].elements.empty()) h.root_id = r[3 * i + 2].elements[0].str.substr(1);
            out.push_back(std::move(h));
        }
        co_return out;
    }

    asio::awaitable<std::vector<thread_info>> list_threads_op(thread_query q) {
        auto hs = co_await heads();
        std::erase_if(hs, [](const head& h) { return h.count == 0; });
        std::sort(hs.begin(), hs.end(), [](const head& a, const head& b) {
            return a.newest != b.newest ? a.newest > b.newest : a.thread < b.thread;
        });
        std::vector<thread_info> out;
        std::size_t skipped = 0;
        // Root heads are read in batches: all of them with a filter, only the page without one.
        const std::size_t batch = q.metadata.empty() && q.limit ? q.offset + q.limit : 256;
        for (std::size_t at = 0; at < hs.size();) {
            const std::size_t end = std::min(hs.size(), at + batch);
            std::vector<command> cmds;
            for (std::size_t i = at; i < end; ++i)
                cmds.push_back(command{"HGET", tkey(hs[i].thread, "cp"), join({"", hs[i].root_id.value_or("")})});
            auto r = co_await all(std::move(cmds), no_thread);
            for (std::size_t i = at; i < end; ++i) {
                thread_info info;
                info.thread_id = hs[i].thread;
                info.newest_id = hs[i].newest;
                info.checkpoints = hs[i].count;
                if (hs[i].root_id)
                    if (auto bytes = text_of(r[i - at])) {
                        auto cp = read_entry(hs[i].thread, "", *hs[i].root_id, *bytes);
                        info.checkpoint_id = cp.id;
                        info.created_at = checkpoint_time(cp.id);
                        info.metadata = std::move(cp.metadata);
                    }
                if (!q.metadata.empty() && (info.checkpoint_id.empty() || !q.metadata.matches(info.metadata))) continue;
                if (skipped < q.offset) {
                    ++skipped;
                    continue;
                }
                out.push_back(std::move(info));
                if (q.limit && out.size() >= q.limit) co_return out;
            }
            at = end;
        }
        co_return out;
    }

    asio::awaitable<sweep_result> sweep_op(ttl_policy policy) {
        const auto cutoff = checkpoint_id_at(std::chrono::system_clock::now() -
                                             std::max(policy.older_than, std::chrono::milliseconds(0)));
        auto hs = co_await heads();
        sweep_result result;
        for (const auto& h : hs) {
            if (h.count == 0) {
                // Its keys expired (thread_ttl) or went: drop it from the list of threads.
                std::vector<command> ops{command{"ABSENT", tkey(h.thread, "ids")}, command{"SREM", threads_key(), h.thread}};
                co_await fenced(h.thread, std::move(ops), fence::nobody);
                continue;
            }
            if (!(h.newest < cutoff)) continue;
            ++result.expired;
            std::vector<command> ops{command{"HEQ", tkey(h.thread, "meta"), "newest", h.newest}};
            std::size_t removed = h.count;
            if (policy.action == ttl_action::delete_thread) {
                command del{"DEL"};
                for (auto& k : thread_keys(h.thread)) del.push_back(std::move(k));
                ops.push_back(std::move(del));
                ops.push_back(command{"SREM", threads_key(), h.thread});
            } else {
                auto more = co_await plan_prune(h.thread, 1, removed);
                ops.insert(ops.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
            }
            auto status = co_await fenced(h.thread, std::move(ops), fence::nobody);
            if (status == "BUSY") {
                ++result.skipped_busy;
                continue;
            }
            if (status != "OK") continue; // written meanwhile: kept
            result.checkpoints_removed += removed;
            if (policy.action == ttl_action::delete_thread) ++result.deleted;
            else if (removed) ++result.pruned;
        }
        co_return result;
    }

    // -- node cache and graphs --------------------------------------------------------------
    asio::awaitable<std::optional<boost::json::value>> cache_get_op(std::string ns, std::string key) {
        command cmd{"GET", cache_key(ns, key)};

        auto r = co_await one(std::move(cmd), no_thread);
        if (r.is_nil()) co_return std::nullopt;
        try {
            const auto text = codec::unseal(r.str, {ns, key});
            boost::system::error_code ec;
            auto v = boost::json::parse(text, ec);
            if (ec) throw codec::corrupt("bad JSON: " + ec.message());
            co_return v;
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint,
                                   "node cache: the entry " + quote(key) + " of namespace " + quote(ns) +
                                       " cannot be read: " + e.what(),
                                   {ns, key});
        }
    }

    asio::awaitable<void> cache_put_op(std::string ns, std::string key, std::string bytes, std::chrono::milliseconds ttl) {
        command set{"SET", cache_key(ns, key), std::move(bytes)};
        if (ttl.count() > 0) {
            set.push_back("PX");
            set.push_back(std::to_string(ttl.count()));
        }
        std::vector<command> cmds{command{"MULTI"}, std::move(set), command{"SADD", cache_index(ns), key},
                                  command{"SADD", cache_namespaces(), ns}, command{"EXEC"}};
        co_await all(std::move(cmds), no_thread);
    }

    asio::awaitable<std::size_t> cache_clear_op(std::vector<std::string> namespaces) {
        if (namespaces.empty()) {
            command cmd{"SMEMBERS", cache_namespaces()};

            auto r = co_await one(std::move(cmd), no_thread);
            for (const auto& m : r.elements) namespaces.push_back(m.str);
        }
        std::size_t count = 0;
        for (const auto& ns : namespaces) {
            command cmd{"SMEMBERS", cache_index(ns)};

            auto keys = co_await one(std::move(cmd), no_thread);
            // Entries that expired on their own still count: they are in the namespace's index.
            count += keys.elements.size();
            std::vector<std::string> names;
            for (const auto& k : keys.elements) names.push_back(cache_key(ns, k.str));
            std::vector<command> cmds{command{"MULTI"}};
            add_chunked(cmds, command{"DEL"}, names, 1);
            cmds.push_back(command{"DEL", cache_index(ns)});
            cmds.push_back(command{"SREM", cache_namespaces(), ns});
            cmds.push_back(command{"EXEC"});
            co_await all(std::move(cmds), no_thread);
        }
        co_return count;
    }

    asio::awaitable<void> put_graph_op(std::string signature, std::string bytes) {
        command cmd{"HSETNX", graphs_key(), signature, std::move(bytes)};

        co_await one(std::move(cmd), no_thread);
    }

    asio::awaitable<std::optional<std::vector<std::string>>> get_graph_op(std::string signature) {
        command cmd{"HGET", graphs_key(), signature};

        auto r = co_await one(std::move(cmd), no_thread);
        if (r.is_nil()) co_return std::nullopt;
        try {
            const auto plain = codec::unseal(r.str, {graph_channel, signature});
            co_return codec::shape_from(plain, signature);
        } catch (const codec::corrupt& e) {
            throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what(), {signature});
        }
    }

    // -- leases -----------------------------------------------------------------------------
    asio::awaitable<void> acquire_op(std::string thread) {
        const auto lease = tkey(thread, "lease");
        for (int round = 0;; ++round) {
            std::vector<command> cmds{command{"SET", lease, owner, "NX", "PX", std::to_string(opt.lease_ttl.count())},
                                      command{"GET", lease}, command{"PTTL", lease}};
            auto r = co_await all(std::move(cmds), thread);
            if (r[0].type == reply::kind::status) break; // OK: taken
            if (r[1].is_nil()) continue;                 // expired in between
            const auto holder = r[1].str;
            if (holder == owner) {
                co_await lease_call(thread, "renew", owner);
                break;
            }
            if (round == 0 && lease_owner::is_gone(holder)) {
                co_await lease_call(thread, "release", holder);
                continue;
            }
            throw checkpoint_error(errc::thread_busy,
                                   "thread " + quote(thread) + " is busy: held by " + holder + " for " +
                                       std::to_string(r[2].integer) + " ms more",
                                   {thread});
        }
        {
            std::lock_guard lock(mutex);
            held.insert(thread);
        }
        start_keeper();
    }

    asio::awaitable<void> release_op(std::string thread) {
        {
            std::lock_guard lock(mutex);
            held.erase(thread);
        }
        co_await lease_call(thread, "release", owner);
    }

    bool is_held(const std::string& thread) {
        std::lock_guard lock(mutex);
        return held.count(thread) != 0;
    }

    std::vector<std::string> held_now() {
        std::lock_guard lock(mutex);
        return {held.begin(), held.end()};
    }

    asio::awaitable<std::optional<std::string>> break_op(std::string thread) {
        static std::atomic<std::uint64_t> calls{0};
        const std::string answer = tkey(thread, "answer:" + owner + "#" + std::to_string(++calls));
        command cmd{"EVALSHA", std::string(lease_marker), "2", tkey(thread, "lease"), answer, "break"};
        auto r = co_await one(std::move(cmd), thread);
        if (r.str.empty() || r.str[0] != '1') co_return std::nullopt;
        co_return r.str.substr(1);
    }

    /// Starts the lease keeper on the saver's thread, once.
    void start_keeper() {
        asio::post(io, [this] {
            if (keeper || stopping) return;
            keeper.emplace(io);
            asio::co_spawn(io, keep_leases(), stategraph::detail::report_to("redis_saver: the lease keeper"));
        });
    }

    /// Renews the held leases every third of their time to live until the saver stops.
    asio::awaitable<void> keep_leases() {
        const auto every = std::max(opt.lease_ttl / 3, std::chrono::milliseconds(10));
        while (!stopping) {
            keeper->expires_after(every);
            auto waiting = keeper->async_wait(asio::as_tuple(asio::use_awaitable));
            co_await std::move(waiting);
            if (stopping) break;
            const auto threads = held_now();
            for (const auto& t : threads) {
                try {
                    co_await lease_call(t, "renew", owner);
                } catch (const std::exception&) {
                    // The server is away: the next write reports it, or finds the lease lost.
                }
            }
        }
    }

    asio::awaitable<void> shutdown() {
        const auto threads = held_now();
        opt.attempts = 1;
        for (const auto& t : threads) {
            try {
                co_await lease_call(t, "release", owner);
            } catch (const std::exception&) {
                // Unreachable: the lease expires on its own.
            }
        }
        stopping = true;
        if (keeper) keeper->cancel();
        std::lock_guard lock(mutex);
        held.clear();
        for (auto& c : idle) c->close();
        idle.clear();
    }

    /// Runs `op` in the awaiting coroutine, on its executor (see `take`).
    template <class T>
    asio::awaitable<T> call(asio::awaitable<T>& op) {
        if constexpr (std::is_void_v<T>) co_await std::move(op);
        else co_return co_await std::move(op);
    }
};

redis_saver::redis_saver(redis_options options) : impl_(std::make_shared<impl>(std::move(options))) {}

redis_saver::~redis_saver() {
    try {
        asio::co_spawn(impl_->io, impl_->shutdown(), asio::use_future).wait();
    } catch (...) {
    }
    impl_->work.reset();
    impl_->io.stop();
    if (impl_->runner.joinable()) impl_->runner.join();
}

const std::string& redis_saver::owner() const noexcept { return impl_->owner; }
const redis_options& redis_saver::options() const noexcept { return impl_->opt; }
std::uint64_t redis_saver::round_trips() const noexcept { return impl_->round_trips.load(std::memory_order_relaxed); }

asio::awaitable<void> redis_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    auto ops = impl_->plan_put(thread_id, ns, cp);
    auto op = impl_->write_op(thread_id, std::move(ops));
    co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                              std::vector<pending_write> writes) {
    if (writes.empty()) co_return;
    std::vector<command> ops;
    std::vector<std::string> set; // field, bytes
    const auto base = reserve_seq(writes.size());
    std::int64_t n = 0;
    for (const auto& w : writes) {
        auto field = join({ns, checkpoint_id, w.task_id, w.channel});
        ops.push_back(command{"ZADD", impl_->tkey(thread_id, "wseq"), "NX", std::to_string(base + n++), field});
        set.push_back(std::move(field));
        set.push_back(join({w.task_name, codec::seal(boost::json::serialize(w.value),
                                                     {ns, checkpoint_id, w.task_id, w.task_name, w.channel})}));
    }
    add_chunked(ops, command{"HSET", impl_->tkey(thread_id, "writes")}, set, 2);
    auto op = impl_->write_op(thread_id, std::move(ops));
    co_await impl_->call(op);
}

asio::awaitable<std::optional<checkpoint_tuple>> redis_saver::get(std::string thread_id, std::string ns,
                                                                  std::optional<std::string> checkpoint_id) {
    auto op = impl_->get_op(std::move(thread_id), std::move(ns), std::move(checkpoint_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<std::vector<checkpoint_tuple>> redis_saver::list(std::string thread_id, std::string ns,
                                                                 list_options options) {
    auto op = impl_->list_op(std::move(thread_id), std::move(ns), std::move(options));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::delete_thread(std::string thread_id) {
    auto op = impl_->delete_op(std::move(thread_id));
    co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::prune(std::string thread_id, std::size_t keep_last) {
    auto op = impl_->prune_op(std::move(thread_id), keep_last);
    co_await impl_->call(op);
}

asio::awaitable<thread_stats> redis_saver::stats(std::string thread_id) {
    auto op = impl_->stats_op(std::move(thread_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<bool> redis_saver::holds_thread(std::string thread_id) {
    auto op = impl_->holds_op(std::move(thread_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::copy_thread(std::string from, std::string to) {
    auto op = impl_->copy_op(std::move(from), std::move(to));
    co_await impl_->call(op);
}

asio::awaitable<std::size_t> redis_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    auto op = impl_->rewind_op(std::move(thread_id), std::move(checkpoint_id));
    co_return co_await impl_->call(op);
}

asio::awaitable<std::vector<thread_info>> redis_saver::list_threads(thread_query query) {
    auto op = impl_->list_threads_op(query);
    co_return co_await impl_->call(op);
}

asio::awaitable<sweep_result> redis_saver::sweep(ttl_policy policy) {
    auto op = impl_->sweep_op(policy);
    co_return co_await impl_->call(op);
}

asio::awaitable<std::optional<boost::json::value>> redis_saver::cache_get(std::string ns, std::string key) {
    auto op = impl_->cache_get_op(std::move(ns), std::move(key));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                             std::chrono::milliseconds ttl) {
    auto bytes = codec::seal(boost::json::serialize(value), {ns, key});
    auto op = impl_->cache_put_op(std::move(ns), std::move(key), std::move(bytes), ttl);
    co_await impl_->call(op);
}

asio::awaitable<std::size_t> redis_saver::cache_clear(std::vector<std::string> namespaces) {
    auto op = impl_->cache_clear_op(std::move(namespaces));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    auto bytes = codec::seal(codec::encode_value(codec::shape_json(shape), nullptr, signature), {graph_channel, signature});
    auto op = impl_->put_graph_op(std::move(signature), std::move(bytes));
    co_await impl_->call(op);
}

asio::awaitable<std::optional<std::vector<std::string>>> redis_saver::get_graph(std::string signature) {
    auto op = impl_->get_graph_op(std::move(signature));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::acquire(std::string thread_id) {
    auto op = impl_->acquire_op(std::move(thread_id));
    co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::release(std::string thread_id) {
    auto op = impl_->release_op(std::move(thread_id));
    co_await impl_->call(op);
}

asio::awaitable<std::optional<std::string>> redis_saver::break_lease(std::string thread_id) {
    auto op = impl_->break_op(std::move(thread_id));
    co_return co_await impl_->call(op);
}

} // namespace stategraph::checkpoint
