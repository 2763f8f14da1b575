// The Redis saver's scripts (the fenced write, leases, reads), its pooled connections, the
// round trip with its retries, the fenced write, and its opening and closing. The class:
// redis_saver_impl.hpp.
#include "redis_saver_impl.hpp"

#include <stategraph/core/detail/spawned.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <algorithm>

namespace stategraph::checkpoint {

namespace {

// clang-format off
/// Every write on a thread. KEYS[1]: the thread's lease; KEYS[2..]: the thread's keys (their
/// time to live is refreshed). ARGV[1]: this saver's owner name; ARGV[2]: '1' the lease must be
/// ours, '0' no other owner may hold it, '2' nobody may (sweep), '3' ours or nobody's (the retry
/// of a write that gives the lease back, whose first try may have run); ARGV[3]: the thread's
/// time to live in ms ('0': none); then the operations, each as a word count and its words.
/// Guards (ABSENT key, HEQ key field value) are checked before anything is written; HMAX key
/// field value keeps the larger text; RELEASE deletes the lease if it is ours; any other
/// operation is a Redis command.
constexpr std::string_view write_script = R"lua(
local holder = redis.call('GET', KEYS[1])
local mode = ARGV[2]
if mode == '1' or mode == '3' then
  if holder ~= ARGV[1] and (mode == '1' or holder) then return {'LOST', holder or ''} end
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
  elseif op[1] == 'RELEASE' then
    if holder == ARGV[1] then redis.call('DEL', KEYS[1]) end
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

} // namespace

/// A connection for the calling coroutine, bound to its executor: an idle one, a new one
/// while fewer than `pool_size` were made, or the first one given back.
asio::awaitable<std::unique_ptr<redis::connection>> redis_saver::impl::take() {
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
void redis_saver::impl::give(std::unique_ptr<redis::connection> c) {
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
asio::awaitable<void> redis_saver::impl::load_scripts(redis::connection& c, bool fresh) {
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
asio::awaitable<std::vector<reply>> redis_saver::impl::exec(std::vector<command> cmds, const std::string& thread,
                                                            bool* retried, const retry_word* on_retry) {
    std::string last;
    for (int attempt = 1;; ++attempt) {
        if (attempt > 1 && on_retry && !cmds.empty() && on_retry->index < cmds[0].size())
            cmds[0][on_retry->index] = on_retry->text;
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
asio::awaitable<reply> redis_saver::impl::one(command cmd, const std::string& thread, bool* retried,
                                              const retry_word* on_retry) {
    std::vector<command> cmds{std::move(cmd)};
    auto r = co_await exec(std::move(cmds), thread, retried, on_retry);
    if (r.at(0).is_error()) failed(thread, "Redis answered: " + r[0].str);
    co_return std::move(r[0]);
}

/// The replies of `cmds`; any error reply is thrown as `storage_failure`.
asio::awaitable<std::vector<reply>> redis_saver::impl::all(std::vector<command> cmds, const std::string& thread) {
    auto r = co_await exec(std::move(cmds), thread);
    for (const auto& x : r)
        if (x.is_error()) failed(thread, "Redis answered: " + x.str);
    co_return r;
}

asio::awaitable<bool> redis_saver::impl::lease_call(const std::string& thread, std::string_view op,
                                                    const std::string& holder) {
    command cmd{"EVALSHA", std::string(lease_marker), "1", tkey(thread, "lease"), std::string(op), holder,
                std::to_string(opt.lease_ttl.count())};
    auto r = co_await one(std::move(cmd), thread);
    co_return r.integer == 1;
}

/// Runs the write script on `thread` with `ops`; returns its status ("OK", "EXISTS",
/// "CHANGED", "BUSY") after taking over a lease whose holder is provably gone; throws
/// `lease_lost`, and `thread_busy` unless `f` is `nobody` (then "BUSY" is returned).
asio::awaitable<std::string> redis_saver::impl::fenced(std::string thread, std::vector<command> ops, fence f,
                                                       bool* retried, bool releases) {
    for (int round = 0;; ++round) {
        const bool ours = is_held(thread);
        command cmd{"EVALSHA", std::string(write_marker)};
        auto keys = thread_keys(thread);
        cmd.push_back(std::to_string(keys.size() + 1));
        cmd.push_back(tkey(thread, "lease"));
        for (auto& k : keys) cmd.push_back(std::move(k));
        cmd.push_back(owner);
        const std::string mode = f == fence::nobody ? "2" : ours ? "1" : "0";
        // A retried write that gives the lease back may find it given back by its first try.
        std::optional<retry_word> relax;
        if (releases && mode == "1") relax.emplace(retry_word{cmd.size(), "3"});
        cmd.push_back(mode);
        cmd.push_back(std::to_string(std::max<std::int64_t>(0, opt.thread_ttl.count())));
        for (const auto& op : ops) {
            cmd.push_back(std::to_string(op.size()));
            cmd.insert(cmd.end(), op.begin(), op.end());
        }
        auto r = co_await one(std::move(cmd), thread, retried, relax ? &*relax : nullptr);
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

} // namespace stategraph::checkpoint
