#include <stategraph/checkpoint/tiered_saver.hpp>

#include <stategraph/core/error.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <utility>

namespace stategraph::checkpoint {

namespace {

bool holds_anything(const thread_stats& s) { return s.checkpoints > 0 || s.writes > 0; }

} // namespace

tiered_saver::tiered_saver(std::shared_ptr<saver> front, std::shared_ptr<saver> back)
    : front_(std::move(front)), back_(std::move(back)) {
    if (!front_ || !back_)
        throw checkpoint_error(errc::storage_failure, "tiered_saver: both a front and a back saver are needed");
}

tiered_saver::~tiered_saver() = default;

std::optional<bool> tiered_saver::kept_takes(const std::string& thread) {
    std::lock_guard lock(mutex_);
    auto it = leased_.find(thread);
    return it == leased_.end() ? std::nullopt : it->second;
}

void tiered_saver::keep_takes(const std::string& thread, bool takes) {
    std::lock_guard lock(mutex_);
    if (auto it = leased_.find(thread); it != leased_.end()) it->second = takes;
}

void tiered_saver::forget_takes(const std::string& thread) {
    std::lock_guard lock(mutex_);
    if (auto it = leased_.find(thread); it != leased_.end()) it->second.reset();
}

boost::asio::awaitable<bool> tiered_saver::front_takes(const std::string& thread) {
    if (const auto kept = kept_takes(thread)) co_return *kept; // asked once per lease
    bool takes = true;
    auto in_front = front_->holds_thread(thread);
    if (!co_await std::move(in_front)) {
        auto in_back = back_->holds_thread(thread);
        takes = !co_await std::move(in_back); // a new thread: both get it from its first write
    }
    keep_takes(thread, takes);
    co_return takes;
}

boost::asio::awaitable<void> tiered_saver::write_front(const std::string& thread,
                                                      boost::asio::awaitable<void> write) {
    std::string reason;
    try {
        co_await std::move(write);
        co_return;
    } catch (const std::exception& e) {
        reason = e.what();
    }
    forget_takes(thread);
    try {
        auto drop = front_->delete_thread(thread);
        co_await std::move(drop);
        keep_takes(thread, false); // the back holds it, the front no longer does
        co_return; // the front no longer has the thread: reads fall back to the back
    } catch (const std::exception& e) {
        reason += "; dropping the thread from the front failed too: ";
        reason += e.what();
    }
    throw checkpoint_error(errc::storage_failure,
                           "thread '" + thread + "': the front saver failed after the back stored the write (" +
                               reason + "); the front may now be stale",
                           {thread});
}

boost::asio::awaitable<void> tiered_saver::put(const std::string& thread_id, const std::string& ns,
                                               const checkpoint& cp) {
    return put_many(thread_id, ns, std::span<const checkpoint>(&cp, 1)); // a batch of one is a put
}

boost::asio::awaitable<void> tiered_saver::put_many(const std::string& thread_id, const std::string& ns,
                                                    std::span<const checkpoint> cps) {
    auto takes = front_takes(thread_id);
    const bool to_front = co_await std::move(takes);
    auto back_put = back_->put_many(thread_id, ns, cps);
    co_await std::move(back_put);
    if (!to_front) co_return;
    auto front_put = front_->put_many(thread_id, ns, cps);
    auto mirrored = write_front(thread_id, std::move(front_put));
    co_await std::move(mirrored);
}

boost::asio::awaitable<void> tiered_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    auto takes = front_takes(thread_id);
    const bool to_front = co_await std::move(takes);
    auto copy = to_front ? writes : std::vector<pending_write>{};
    auto back_put = back_->put_writes(thread_id, ns, checkpoint_id, std::move(writes));
    co_await std::move(back_put);
    if (!to_front) co_return;
    auto front_put = front_->put_writes(thread_id, ns, checkpoint_id, std::move(copy));
    auto mirrored = write_front(thread_id, std::move(front_put));
    co_await std::move(mirrored);
}

boost::asio::awaitable<void> tiered_saver::end_call(const std::string& thread_id, const std::string& ns, call_end& end) {
    if (!end.checkpoints.empty() || !end.writes.empty()) {
        auto takes = front_takes(thread_id);
        const bool to_front = co_await std::move(takes);
        call_end data;
        data.checkpoints = end.checkpoints;
        data.writes_to = end.writes_to;
        data.writes = to_front ? end.writes : std::move(end.writes);
        auto back_end = back_->end_call(thread_id, ns, data); // the lease stays held
        co_await std::move(back_end);
        if (to_front) {
            call_end mirror;
            mirror.checkpoints = end.checkpoints;
            mirror.writes_to = end.writes_to;
            mirror.writes = std::move(end.writes);
            auto front_end = front_->end_call(thread_id, ns, mirror);
            auto mirrored = write_front(thread_id, std::move(front_end));
            co_await std::move(mirrored);
        }
    }
    if (end.release) {
        auto r = release(thread_id);
        co_await std::move(r);
    }
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> tiered_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    auto front_get = front_->get(thread_id, ns, checkpoint_id);
    auto got = co_await std::move(front_get);
    if (got) co_return got;
    auto back_get = back_->get(std::move(thread_id), std::move(ns), std::move(checkpoint_id));
    co_return co_await std::move(back_get);
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> tiered_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    auto front_list = front_->list(thread_id, ns, options);
    auto got = co_await std::move(front_list);
    if (!got.empty()) co_return got;
    auto back_list = back_->list(std::move(thread_id), std::move(ns), std::move(options));
    co_return co_await std::move(back_list);
}

boost::asio::awaitable<void> tiered_saver::delete_thread(std::string thread_id) {
    forget_takes(thread_id);
    auto front_delete = front_->delete_thread(thread_id);
    co_await std::move(front_delete);
    auto back_delete = back_->delete_thread(std::move(thread_id));
    co_await std::move(back_delete);
}

boost::asio::awaitable<void> tiered_saver::prune(std::string thread_id, std::size_t keep_last) {
    forget_takes(thread_id);
    auto back_prune = back_->prune(thread_id, keep_last);
    co_await std::move(back_prune);
    auto in_front = front_->holds_thread(thread_id);
    if (!co_await std::move(in_front)) co_return;
    auto front_prune = front_->prune(thread_id, keep_last);
    auto mirrored = write_front(thread_id, std::move(front_prune));
    co_await std::move(mirrored);
}

boost::asio::awaitable<thread_stats> tiered_saver::stats(std::string thread_id) {
    auto front_stats = front_->stats(thread_id);
    const auto f = co_await std::move(front_stats);
    if (holds_anything(f)) co_return f;
    auto back_stats = back_->stats(std::move(thread_id));
    co_return co_await std::move(back_stats);
}

boost::asio::awaitable<bool> tiered_saver::holds_thread(std::string thread_id) {
    auto in_front = front_->holds_thread(thread_id);
    if (co_await std::move(in_front)) co_return true;
    auto in_back = back_->holds_thread(std::move(thread_id));
    co_return co_await std::move(in_back);
}

boost::asio::awaitable<void> tiered_saver::copy_thread(std::string from, std::string to) {
    forget_takes(to);
    auto back_copy = back_->copy_thread(from, to);
    co_await std::move(back_copy);
    auto in_front = front_->holds_thread(from);
    if (!co_await std::move(in_front)) co_return; // `to` is served by the back, as `from` is
    auto front_copy = front_->copy_thread(from, to);
    auto mirrored = write_front(to, std::move(front_copy));
    co_await std::move(mirrored);
}

boost::asio::awaitable<std::size_t> tiered_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    // The back is the record: rewound first, in its own transaction. The front follows when it
    // holds the thread; should it fail, it drops the thread and reads fall back to the back.
    forget_takes(thread_id);
    auto back_rewind = back_->rewind_thread(thread_id, checkpoint_id);
    const auto removed = co_await std::move(back_rewind);
    auto in_front = front_->holds_thread(thread_id);
    if (!co_await std::move(in_front)) co_return removed;
    auto front_rewind = rewind_front(thread_id, checkpoint_id);
    auto mirrored = write_front(thread_id, std::move(front_rewind));
    co_await std::move(mirrored);
    co_return removed;
}

boost::asio::awaitable<void> tiered_saver::rewind_front(std::string thread_id, std::string checkpoint_id) {
    auto rewind = front_->rewind_thread(std::move(thread_id), std::move(checkpoint_id));
    (void)co_await std::move(rewind);
}

boost::asio::awaitable<std::vector<thread_info>> tiered_saver::list_threads(thread_query query) {
    auto back_list = back_->list_threads(query);
    co_return co_await std::move(back_list);
}

boost::asio::awaitable<sweep_result> tiered_saver::sweep(ttl_policy policy) {
    auto back_sweep = back_->sweep(policy);
    auto result = co_await std::move(back_sweep);
    ttl_policy front_policy;
    front_policy.older_than = policy.older_than;
    front_policy.action = ttl_action::delete_thread;
    auto front_sweep = front_->sweep(front_policy);
    (void)co_await std::move(front_sweep);
    {
        std::lock_guard lock(mutex_); // the front may have lost any thread
        for (auto& [thread, takes] : leased_) takes.reset();
    }
    co_return result;
}

boost::asio::awaitable<std::optional<boost::json::value>> tiered_saver::cache_get(std::string ns, std::string key) {
    auto front_get = front_->cache_get(ns, key);
    auto got = co_await std::move(front_get);
    if (got) co_return got;
    auto back_get = back_->cache_get(std::move(ns), std::move(key));
    co_return co_await std::move(back_get);
}

boost::asio::awaitable<void> tiered_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                                     std::chrono::milliseconds ttl) {
    auto back_put = back_->cache_put(ns, key, value, ttl);
    co_await std::move(back_put);
    auto front_put = front_->cache_put(std::move(ns), std::move(key), std::move(value), ttl);
    co_await std::move(front_put);
}

boost::asio::awaitable<std::size_t> tiered_saver::cache_clear(std::vector<std::string> namespaces) {
    auto front_clear = front_->cache_clear(namespaces);
    (void)co_await std::move(front_clear);
    auto back_clear = back_->cache_clear(std::move(namespaces));
    co_return co_await std::move(back_clear);
}

boost::asio::awaitable<void> tiered_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    auto back_put = back_->put_graph(signature, shape);
    co_await std::move(back_put);
    auto front_put = front_->put_graph(std::move(signature), std::move(shape));
    co_await std::move(front_put);
}

boost::asio::awaitable<std::optional<std::vector<std::string>>> tiered_saver::get_graph(std::string signature) {
    auto front_get = front_->get_graph(signature);
    auto got = co_await std::move(front_get);
    if (got) co_return got;
    auto back_get = back_->get_graph(std::move(signature));
    co_return co_await std::move(back_get);
}

boost::asio::awaitable<void> tiered_saver::acquire(std::string thread_id) {
    auto a = back_->acquire(thread_id);
    co_await std::move(a);
    auto checked = check_front(thread_id);
    co_await std::move(checked);
}

boost::asio::awaitable<std::optional<checkpoint_tuple>>
tiered_saver::acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) {
    // The back is the record and reads the thread with its lease (PostgreSQL: in the same round
    // trip): its answer is the one returned, so the front is not read at all.
    auto a = back_->acquire_and_get(thread_id, ns, checkpoint_id);
    auto got = co_await std::move(a);
    auto checked = check_front(thread_id);
    co_await std::move(checked);
    co_return got;
}

boost::asio::awaitable<void> tiered_saver::check_front(std::string thread_id) {
    // A writer that died between the back's write and the front's left the front behind: with
    // the lease held, compare the counts and drop a front copy that differs (reads fall back).
    // Both tiers are counted at once (one round trip's wait, not two), and the answer of
    // `front_takes` follows from the counts, so the first write asks nothing: it is kept for the
    // lease.
    std::string failure;
    try {
        auto ex = co_await boost::asio::this_coro::executor;
        auto in_front = front_->stats(thread_id);
        auto in_back = back_->stats(thread_id);
        auto both = boost::asio::experimental::make_parallel_group(
            boost::asio::co_spawn(ex, std::move(in_front), boost::asio::deferred),
            boost::asio::co_spawn(ex, std::move(in_back), boost::asio::deferred));
        auto counted = std::move(both).async_wait(boost::asio::experimental::wait_for_all(), boost::asio::use_awaitable);
        auto [order, front_error, f, back_error, b] = co_await std::move(counted);
        (void)order;
        if (front_error) std::rethrow_exception(front_error);
        if (back_error) std::rethrow_exception(back_error);
        bool takes = !holds_anything(b); // a front without the thread takes it only when it is new
        if (holds_anything(f)) {
            if (f.checkpoints == b.checkpoints && f.writes == b.writes) {
                takes = true;
            } else {
                auto drop = front_->delete_thread(thread_id);
                co_await std::move(drop);
            }
        }
        std::lock_guard lock(mutex_);
        leased_.insert_or_assign(thread_id, takes);
        co_return;
    } catch (const std::exception& e) {
        failure = e.what();
    }
    auto r = back_->release(thread_id);
    co_await std::move(r);
    throw checkpoint_error(errc::storage_failure,
                           "thread '" + thread_id + "': checking the front saver's copy failed: " + failure, {thread_id});
}

boost::asio::awaitable<void> tiered_saver::release(std::string thread_id) {
    {
        std::lock_guard lock(mutex_);
        leased_.erase(thread_id);
    }
    auto r = back_->release(std::move(thread_id));
    co_await std::move(r);
}

boost::asio::awaitable<std::optional<std::string>> tiered_saver::break_lease(std::string thread_id) {
    {
        std::lock_guard lock(mutex_);
        leased_.erase(thread_id);
    }
    auto b = back_->break_lease(std::move(thread_id));
    co_return co_await std::move(b);
}

} // namespace stategraph::checkpoint
