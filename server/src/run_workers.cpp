// This instance's workers: the dispatcher (claims runs from the run store while there is room),
// the heartbeat (renews claims, picks up cancellations, notices runs taken over), reclaiming the
// runs of this host's dead processes, and a drain's wait for the runs executing here.

#include "impl.hpp"

#include <csignal>
#include <unistd.h>

namespace stategraph::server {

using run_spec::flag_of;
using run_spec::modes_of;

// -- workers --------------------------------------------------------------------------------------

void server::impl::start_workers() {
    auto self = shared_from_this();
    std::weak_ptr<impl> weak = self;
    auto ex2 = ex;
    if (!listening) listening = store->listen([weak, ex2](std::string channel, std::string payload) {
        net::post(ex2, [weak, channel = std::move(channel), payload = std::move(payload)] {
            if (auto s = weak.lock()) s->on_notification(channel, payload);
        });
    });
    if (opts.max_runs_in_flight == 0) return; // API only
    if (!dispatching) {
        dispatching = true;
        net::co_spawn(ex, dispatch_loop(self), [self](std::exception_ptr e) {
            self->dispatching = false;
            if (e) self->log_line("the run dispatcher stopped on an error");
        });
    }
    if (!beating) {
        beating = true;
        net::co_spawn(ex, heartbeat_loop(self), [self](std::exception_ptr e) {
            self->beating = false;
            if (e) self->log_line("the run heartbeat stopped on an error");
        });
    }
}

awaitable<void> server::impl::dispatch_loop(std::shared_ptr<impl> self) {
    while (!self->draining && !self->stopping_workers) {
        while (!self->draining && self->local.size() < self->opts.max_runs_in_flight) {
            std::vector<run_record> claimed;
            try {
                const std::string me = self->instance;
                const std::size_t room = self->opts.max_runs_in_flight - self->local.size();
                claimed = co_await self->store->claim_some(me, room);
            } catch (const std::exception& e) {
                self->log_line(std::string("could not claim a run: ") + e.what());
                break;
            }
            if (claimed.empty()) break;
            if (self->draining) { // drain began while claiming: hand them straight back
                for (const auto& r : claimed) {
                    const std::string id = r.run_id, me = self->instance;
                    try {
                        (void)co_await self->store->release(id, me);
                    } catch (const std::exception&) {
                    }
                }
                break;
            }
            for (auto& r : claimed) {
                auto live = std::make_shared<live_run>();
                live->rec = std::move(r);
                live->modes = modes_of(live->rec.spec);
                live->subgraphs = flag_of(live->rec.spec, "subgraphs");
                // Quiet unless a thread stream watches its thread here (one elsewhere sees its end only).
                live->quiet = flag_of(live->rec.spec, "quiet") && !self->thread_watchers.count(live->rec.thread_key);
                live->langchain_events = live->modes.count("events") != 0;
                self->local[live->rec.run_id] = live;
                auto sig = live->cancel;
                // The signal outlives the coroutine: its completion handler holds it.
                net::co_spawn(self->ex, execute(self, live), net::bind_cancellation_slot(sig->slot(), [sig](std::exception_ptr) {}));
            }
        }
        co_await wait_on(&self->dispatch_wake, nullptr, self->opts.poll_interval);
    }
}

awaitable<void> server::impl::heartbeat_loop(std::shared_ptr<impl> self) {
    auto renewed = std::chrono::steady_clock::now();
    const auto renew_every = std::max<std::chrono::milliseconds>(self->store->options().lease / 3, std::chrono::milliseconds(10));
    net::steady_timer t(self->ex);
    while (!self->stopping_workers || !self->local.empty()) {
        // Claims are renewed in time even when polling is rare (wake-ups carry the news).
        t.expires_after(std::min(self->opts.poll_interval, renew_every));
        auto [ec] = co_await t.async_wait(net::as_tuple(use_awaitable));
        (void)ec;
        if (self->local.empty()) {
            if (self->stopping_workers) break;
            continue;
        }
        const std::string me = self->instance;
        try {
            auto asks = co_await self->store->cancel_requests(me);
            for (const auto& [id, action] : asks)
                if (auto it = self->local.find(id); it != self->local.end() && it->second->cancel_action.empty()) {
                    it->second->cancel_action = action;
                    it->second->cancel->emit(net::cancellation_type::terminal);
                }
            if (std::chrono::steady_clock::now() - renewed >= renew_every) {
                std::vector<std::string> ids;
                for (const auto& [id, r] : self->local) ids.push_back(id);
                auto hb = co_await self->store->heartbeat(me, std::move(ids));
                renewed = std::chrono::steady_clock::now();
                for (const auto& id : hb.lost)
                    if (auto it = self->local.find(id); it != self->local.end() && !it->second->lost) {
                        self->log_line("run '" + id + "': another instance took it over; stopping it here");
                        it->second->lost = true;
                        it->second->cancel->emit(net::cancellation_type::terminal);
                    }
            }
        } catch (const std::exception& e) {
            self->log_line(std::string("run heartbeat failed: ") + e.what());
        }
    }
}

awaitable<void> server::impl::reclaim_dead_local(std::shared_ptr<impl> self) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string prefix = std::string(host) + ":";
    auto workers = co_await self->store->running_workers();
    for (const auto& w : workers) {
        if (w.rfind(prefix, 0) != 0 || w == self->instance) continue;
        auto rest = w.substr(prefix.size());
        auto colon = rest.find(':');
        long pid = 0;
        try {
            pid = std::stol(rest.substr(0, colon));
        } catch (const std::exception&) {
            continue;
        }
        if (pid <= 0 || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)) continue;
        const std::string name = w;
        auto n = co_await self->store->expire_worker(name);
        if (n) self->log_line(std::to_string(n) + " runs of instance '" + w + "' (its process is gone) are taken over");
    }
}

awaitable<void> server::impl::wait_idle(std::shared_ptr<impl> self, std::function<void()> done) {
    const auto until = std::chrono::steady_clock::now() + self->opts.drain_timeout;
    while ((!self->local.empty() || self->webhooks_in_flight > 0) && std::chrono::steady_clock::now() < until)
        co_await wait_on(&self->drained_wake, nullptr, std::chrono::milliseconds(50));
    // Runs still going past the bound keep their claims, which expire; another instance takes them.
    self->stopping_workers = true;
    self->wake(self->dispatch_wake);
    done();
}

} // namespace stategraph::server
