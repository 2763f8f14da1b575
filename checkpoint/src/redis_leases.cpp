// The Redis saver's leases: acquire, release and break_lease, the keeper renewing the leases held
// (on the saver's own thread), and the release of them all at shutdown.
#include "redis_saver_impl.hpp"

#include <stategraph/core/detail/spawned.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace stategraph::checkpoint {

asio::awaitable<void> redis_saver::impl::acquire_op(std::string thread) {
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

/// The lease and the read of the newest (or `id`'s) checkpoint in one round trip: `SET NX PX`
/// pipelined before the read script, then the values. Not settled when the lease was not free
/// (held by this saver already, by a gone process, or by another owner), or when the read failed
/// with the lease taken (a prune in between, a connection lost): `saver::acquire_and_get`'s
/// default then acquires (renewing), reads again, and gives the lease back if that fails.
asio::awaitable<common::call_start> redis_saver::impl::start_call(std::string thread, std::string ns,
                                                                  std::optional<std::string> id) {
    list_options o;
    o.limit = 1;
    std::vector<command> cmds{command{"SET", tkey(thread, "lease"), owner, "NX", "PX", std::to_string(opt.lease_ttl.count())},
                              read_command(thread, ns, o, id)};
    auto r = co_await exec(std::move(cmds), thread);
    if (r.at(0).is_error()) failed(thread, "Redis answered: " + r[0].str);
    common::call_start out;
    if (r[0].type != reply::kind::status) co_return out; // not free
    {
        std::lock_guard lock(mutex);
        held.insert(thread);
    }
    start_keeper();
    if (r.at(1).is_error()) co_return out;
    try {
        auto loading = load_from(thread, ns, o, std::move(r[1]));
        auto got = co_await std::move(loading);
        out.settled = true;
        if (!got.empty()) out.got = std::move(got.front());
    } catch (const std::exception&) {
        // Read again by the default, which reports what fails then.
    }
    co_return out;
}

asio::awaitable<void> redis_saver::impl::release_op(std::string thread) {
    {
        std::lock_guard lock(mutex);
        held.erase(thread);
    }
    co_await lease_call(thread, "release", owner);
}

std::vector<std::string> redis_saver::impl::held_now() {
    std::lock_guard lock(mutex);
    return {held.begin(), held.end()};
}

asio::awaitable<std::optional<std::string>> redis_saver::impl::break_op(std::string thread) {
    static std::atomic<std::uint64_t> calls{0};
    const std::string answer = tkey(thread, "answer:" + owner + "#" + std::to_string(++calls));
    command cmd{"EVALSHA", std::string(lease_marker), "2", tkey(thread, "lease"), answer, "break"};
    auto r = co_await one(std::move(cmd), thread);
    if (r.str.empty() || r.str[0] != '1') co_return std::nullopt;
    co_return r.str.substr(1);
}

/// Starts the lease keeper on the saver's thread, once.
void redis_saver::impl::start_keeper() {
    asio::post(io, [this] {
        if (keeper || stopping) return;
        keeper.emplace(io);
        asio::co_spawn(io, keep_leases(), stategraph::detail::report_to("redis_saver: the lease keeper"));
    });
}

/// Renews the held leases every third of their time to live until the saver stops.
asio::awaitable<void> redis_saver::impl::keep_leases() {
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

asio::awaitable<void> redis_saver::impl::shutdown() {
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
