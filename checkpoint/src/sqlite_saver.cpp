/// @file sqlite_saver.cpp
/// @brief The SQLite saver's connection and front door: opening the file (impl's constructor) and
/// closing it, the errors SQLite's result codes become, the dispatch of calls (in place when the
/// saver is idle, else queued) with group commit, and sqlite_saver's public entry points. The
/// class is in sqlite_saver_impl.hpp; the SQLite work of each call is in the sqlite_*.cpp beside
/// this file.

#include "sqlite_saver_impl.hpp"
#include "lease_owner.hpp"
#include "sqlite_checksum_vfs.hpp"

#include <stategraph/core/error.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <random>
#include <system_error>
#include <type_traits>

namespace stategraph::checkpoint {

namespace {

// One write of a batch (impl::write_batch): undone alone when it fails.
constexpr std::string_view sql_savepoint = "SAVEPOINT batch_item";
constexpr std::string_view sql_release_savepoint = "RELEASE batch_item";
constexpr std::string_view sql_rollback_savepoint = "ROLLBACK TO batch_item";
// The leases a closing saver leaves (impl::~impl).
constexpr std::string_view sql_release_all_leases = "DELETE FROM leases WHERE owner = ?1";

} // namespace

using namespace sqlite_detail;

std::string sqlite_saver::impl::damage_text(int rc, const char* msg) const {
    if (rc != SQLITE_IOERR_DATA) return std::string("the file is damaged: ") + msg;
    const auto page = db ? detail::last_damaged_page(db.get()) : std::nullopt;
    return (page ? "page " + std::to_string(*page) : std::string("a page")) +
           " of the file is damaged (its checksum does not match its bytes)";
}

void sqlite_saver::impl::refuse_write(const std::string& thread, const char* what) const {
    std::string affected;
    for (const auto& t : damaged_threads) affected += (affected.empty() ? "" : ", ") + quote(t);
    auto names = names_of(thread);
    for (const auto& t : damaged_threads)
        if (t != thread) names.push_back(t);
    throw checkpoint_error(errc::corrupt_checkpoint,
                           (thread.empty() ? std::string() : "thread " + quote(thread) + ": ") + what +
                               " refused: the file was found damaged earlier (" + *damage + ")" +
                               (affected.empty() ? std::string() : ", reading thread " + affected) +
                               "; nothing more is written into it" + where(),
                           std::move(names));
}

void sqlite_saver::impl::fail(int rc, const std::string& thread, const std::string& what) const {
    const char* msg = db ? sqlite3_errmsg(db.get()) : sqlite3_errstr(rc);
    std::string prefix = thread.empty() ? std::string() : "thread " + quote(thread) + ": ";
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        throw checkpoint_error(errc::thread_busy,
                               (thread.empty() ? std::string("the database") : "thread " + quote(thread)) +
                                   " is busy: another connection held the database lock longer than "
                                   "busy_timeout (" + std::to_string(opt.busy_timeout.count()) + " ms) while " +
                                   what + ": " + msg + where(),
                               names_of(thread));
    default:
        if (is_damage(rc)) {
            auto text = damage_text(rc, msg);
            if (!damage) damage = text;
            if (!thread.empty()) damaged_threads.insert(thread);
            throw checkpoint_error(errc::corrupt_checkpoint, prefix + what + ": " + text + where(), names_of(thread));
        }
        throw checkpoint_error(errc::storage_failure, prefix + what + ": " + msg + where(), names_of(thread));
    }
}

sqlite_saver::impl::impl(sqlite_options o) : opt(std::move(o)), owner(lease_owner::make()) {
    if (opt.own_thread) pool.emplace(1);
    if (opt.path.empty())
        throw checkpoint_error(errc::storage_failure, "sqlite_saver: sqlite_options::path is empty");
    make_cipher();
    check_header();

    int flags = opt.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    flags |= SQLITE_OPEN_NOMUTEX; // one connection, guarded by `mutex`
    sqlite3* raw = nullptr;
    // Through the page-checksum VFS (sqlite_checksum_vfs.hpp): pages are checked as read.
    int rc = sqlite3_open_v2(opt.path.c_str(), &raw, flags, detail::checksum_vfs());
    db.reset(raw);
    if (rc != SQLITE_OK) {
        std::string msg = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
        throw checkpoint_error(errc::storage_failure,
                               "sqlite_saver: cannot open " + opt.path + (opt.read_only ? " read-only" : "") +
                                   ": " + msg);
    }
    sqlite3_extended_result_codes(db.get(), 1);
    // The leases' file locks (sqlite_saver_impl.hpp, `locks`): every writable saver of a file
    // takes them, so that a run holding a thread by its lock alone is seen by all.
    if (!opt.read_only && opt.path != ":memory:" && detail::thread_locks::available()) {
        struct stat file {};
        const unsigned mode = ::stat(opt.path.c_str(), &file) == 0 ? static_cast<unsigned>(file.st_mode) : 0644u;
        try {
            locks.emplace(opt.path + "-leases", mode);
        } catch (const std::system_error& e) {
            throw checkpoint_error(errc::storage_failure, std::string("sqlite_saver: ") + e.what() + where());
        }
    }
    sqlite3_busy_timeout(db.get(), static_cast<int>(std::min<std::int64_t>(opt.busy_timeout.count(), INT_MAX)));

    // Several processes opening one fresh file race to create it, switch it to WAL and
    // migrate it. SQLite answers some of those steps with SQLITE_BUSY at once, without its busy
    // handler (switching the journal mode while another connection reads, to avoid a
    // deadlock), so the whole set-up is retried, with backoff, until busy_timeout is spent.
    const auto deadline = std::chrono::steady_clock::now() + opt.busy_timeout;
    std::minstd_rand jitter(static_cast<unsigned>(reinterpret_cast<std::uintptr_t>(this) ^ getpid()));
    for (int attempt = 0;; ++attempt) {
        try {
            set_up();
            return;
        } catch (const checkpoint_error& e) {
            if (e.kind() != errc::thread_busy || std::chrono::steady_clock::now() >= deadline) throw;
        }
        const auto pause = std::chrono::milliseconds(std::min(1 << std::min(attempt, 6), 50) + jitter() % 5);
        std::this_thread::sleep_for(pause);
    }
}

sqlite_saver::impl::~impl() {
    {
        // Flushes still posted somewhere find the saver gone; one under way is waited for.
        std::unique_lock g(link->m);
        link->owner = nullptr;
        link->idle.wait(g, [this] { return link->running == 0; });
    }
    {
        std::lock_guard k(keeper.mutex);
        keeper.stopping = true;
    }
    keeper.wake.notify_all();
    if (keeper.thread.joinable()) keeper.thread.join();
    if (pool) pool->join();
    if (!db || opt.read_only) return;
    try { // best effort: leave no lease of ours behind
        static const std::string none;
        std::lock_guard lock(mutex);
        transaction t(*this, true, none, "releasing leases");
        {
            stmt s(*this, sql_release_all_leases, none, "releasing leases");
            s.bind(1, owner);
            s.run();
        }
        t.commit();
    } catch (...) {
    }
}

bool sqlite_saver::impl::try_lead() {
    if (pool) return false;
    std::lock_guard q(queue_mutex);
    if (leading || !posted_to.empty() || !queue.empty()) return false;
    leading = true;
    return true;
}

void sqlite_saver::impl::end_lead() noexcept {
    std::lock_guard q(queue_mutex);
    leading = false;
    post_flushes();
}

void sqlite_saver::impl::enqueue(std::unique_ptr<job> j) {
    std::lock_guard q(queue_mutex);
    queue.push_back(std::move(j));
    if (!leading) post_flush(queue.back()->executor());
}

struct sqlite_saver::impl::flush_handler {
    std::shared_ptr<flush_link> link; // null once moved from, run or disarmed
    boost::asio::any_io_executor ex;  // where it is posted (empty: the saver's own thread)
    flush_handler(std::shared_ptr<flush_link> l, boost::asio::any_io_executor e) : link(std::move(l)), ex(std::move(e)) {}
    flush_handler(flush_handler&& o) noexcept : link(std::move(o.link)), ex(o.ex) {}
    flush_handler& operator=(flush_handler&&) = delete;
    ~flush_handler() { // destroyed unrun (its io_context went first): another call may post again
        if (!link) return;
        std::lock_guard g(link->m);
        if (!link->owner) return;
        std::lock_guard q(link->owner->queue_mutex);
        link->owner->unpost(ex);
    }
    void operator()() {
        const auto l = std::move(link);
        impl* owner = nullptr;
        {
            std::lock_guard g(l->m);
            if (!l->owner) return; // the saver is gone: its calls were all served
            owner = l->owner;
            ++l->running;
        }
        struct done {
            flush_link& l;
            ~done() {
                std::lock_guard g(l.m);
                if (--l.running == 0) l.idle.notify_all();
            }
        } d{*l};
        owner->flush(ex);
    }
};

void sqlite_saver::impl::unpost(const boost::asio::any_io_executor& ex) noexcept {
    auto it = std::find(posted_to.begin(), posted_to.end(), ex);
    if (it != posted_to.end()) posted_to.erase(it);
}

void sqlite_saver::impl::post_flush(const boost::asio::any_io_executor& ex) noexcept {
    const boost::asio::any_io_executor where = pool ? boost::asio::any_io_executor() : ex;
    if (std::find(posted_to.begin(), posted_to.end(), where) != posted_to.end()) return;
    try {
        posted_to.push_back(where);
    } catch (...) {
        return; // the next call posts again
    }
    flush_handler h(link, where);
    try {
        if (pool) boost::asio::post(*pool, std::move(h));
        else boost::asio::post(ex, std::move(h));
    } catch (...) { // not posted (no memory): `h` was not moved from
        h.link.reset();
        unpost(where); // the next call posts again
    }
}

void sqlite_saver::impl::post_flushes() noexcept {
    constexpr std::size_t most = 4; // executors looked for among the queued calls
    std::size_t posted = 0;
    boost::asio::any_io_executor seen[most];
    for (const auto& j : queue) {
        if (posted == most || pool) break;
        auto ex = j->executor();
        if (std::find(seen, seen + posted, ex) != seen + posted) continue;
        seen[posted++] = ex;
        post_flush(ex);
    }
    if (pool && !queue.empty()) post_flush({});
}

void sqlite_saver::impl::flush(const boost::asio::any_io_executor& ex) {
    std::vector<std::unique_ptr<job>> jobs;
    {
        std::lock_guard q(queue_mutex);
        unpost(ex);
        // The leader posts flushes for what waits when it ends; a flush posted beside another
        // that ran first may find nothing left.
        if (leading || queue.empty()) return;
        leading = true;
        jobs.swap(queue);
    }
    {
        std::lock_guard lock(mutex);
        write_batch(jobs);
    }
    for (auto& j : jobs) j->complete();
    jobs.clear();
    end_lead();
}

void sqlite_saver::impl::write_batch(std::vector<std::unique_ptr<job>>& jobs) {
    static const std::string none;
    batch_graphs.clear();
    batch_leases.clear();
    batch_locks.clear();
    if (jobs.size() == 1) {
        try {
            jobs.front()->run();
        } catch (...) {
            jobs.front()->error = std::current_exception();
        }
        return;
    }
    try {
        // A damaged file takes no more writes: the batch then only reads, and each write in
        // it is refused by its own (nested) transaction.
        transaction t(*this, !opt.read_only && !damage, none, "saving the work of several calls at once");
        in_batch = true; // until `t` ends: its calls' writes to remembered threads are forgotten
        for (auto& j : jobs) {
            const std::string& who = j->thread ? *j->thread : none;
            const char* what = j->what ? j->what : "running a call";
            stmt(*this, sql_savepoint, who, what).run();
            const auto graphs_before = batch_graphs.size();
            const auto leases_before = batch_leases.size();
            const auto locks_before = batch_locks.size();
            try {
                j->run();
            } catch (...) {
                j->error = std::current_exception();
                batch_graphs.resize(graphs_before);
                batch_leases.resize(leases_before);
                for (auto k = locks_before; k < batch_locks.size(); ++k) drop_lease_lock(batch_locks[k]);
                batch_locks.resize(locks_before);
                inline_rows.clear();
                // SQLite rolled the whole transaction back (an I/O error, a full disk): the
                // batch fails; otherwise only this call's work is undone.
                if (sqlite3_get_autocommit(db.get())) throw;
                stmt(*this, sql_rollback_savepoint, who, what).run();
            }
            stmt(*this, sql_release_savepoint, who, what).run();
        }
        t.commit();
        graphs_known(batch_graphs.begin(), batch_graphs.end());
        for (const auto& [thread, row] : batch_leases) lease_held(thread, row);
    } catch (...) {
        const auto e = std::current_exception();
        for (auto& j : jobs)
            if (!j->error) j->error = batch_error(e, j->thread ? *j->thread : none, jobs.size());
        for (const auto& thread : batch_locks) drop_lease_lock(thread); // their leases were not taken
    }
    batch_graphs.clear();
    batch_leases.clear();
    batch_locks.clear();
    inline_rows.clear();
}

// The writes' arguments, and what their callers encoded (prepare_put), outlive their co_await.
struct sqlite_saver::impl::put_call {
    static constexpr const char* what = "saving a checkpoint";
    impl* i;
    const std::string& thread;
    const std::string& ns;
    const checkpoint& cp;
    prepared_put* prepared;
    void operator()() const { i->write_put(thread, ns, cp, *prepared, std::string()); }
};

struct sqlite_saver::impl::put_many_call {
    static constexpr const char* what = "saving checkpoints";
    impl* i;
    const std::string& thread;
    const std::string& ns;
    std::span<const checkpoint> cps;
    prepared_call* prepared;
    void operator()() const { i->put_many(thread, ns, cps, prepared); }
};

struct sqlite_saver::impl::put_writes_call {
    static constexpr const char* what = "saving pending writes";
    impl* i;
    std::string thread, ns, checkpoint_id;
    std::vector<pending_write> writes;
    void operator()() const { i->put_writes(thread, ns, checkpoint_id, writes); }
};

struct sqlite_saver::impl::end_call_call {
    static constexpr const char* what = "saving the call's last writes";
    impl* i;
    const std::string& thread;
    const std::string& ns;
    const saver::call_end& end;
    prepared_call* prepared;
    void operator()() const { i->end_call(thread, ns, end, prepared); }
};

std::exception_ptr sqlite_saver::impl::batch_error(std::exception_ptr e, const std::string& thread, std::size_t n) {
    try {
        std::rethrow_exception(e);
    } catch (const checkpoint_error& c) {
        if (thread.empty()) return e;
        // what() ends in ": <kind>" (std::system_error): said once, by the new error.
        std::string_view text = c.what();
        const std::string kind = ": " + c.code().message();
        if (text.size() >= kind.size() && text.substr(text.size() - kind.size()) == kind)
            text.remove_suffix(kind.size());
        return std::make_exception_ptr(checkpoint_error(
            c.kind(), "thread " + quote(thread) + ": its write, committed together with " + std::to_string(n - 1) +
                          " other call(s), failed: " + std::string(text),
            {thread}));
    } catch (...) {
        return e;
    }
}

// =============================================================================================

sqlite_saver::sqlite_saver(sqlite_options options) : impl_(std::make_unique<impl>(std::move(options))) {}

sqlite_saver::~sqlite_saver() = default;

const std::string& sqlite_saver::owner() const noexcept { return impl_->owner; }
const std::string& sqlite_saver::path() const noexcept { return impl_->opt.path; }

std::uint64_t sqlite_saver::omitted_values() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->paused_omitted;
}

sqlite_saver::paused_memory sqlite_saver::remembered() const {
    std::lock_guard lock(impl_->mutex);
    paused_memory m;
    m.recalled = impl_->paused_recalled;
    for (const auto& [thread, e] : impl_->paused) m.threads += e.paused ? 1 : 0;
    return m;
}

namespace {
/// The value a call hands back, and the moment its completion was posted (see `call::complete`).
template <class R>
struct handback {
    std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
    std::exception_ptr error;
    std::atomic<bool> posted{false};
};

/// A queued call (impl::job) of result `R`: `f` is its SQLite work, `handler` its caller's
/// completion, `work` keeps the caller's executor running while it waits.
template <class Job, class R, class F, class Handler>
struct call final : Job {
    F f;
    Handler handler;
    boost::asio::executor_work_guard<boost::asio::associated_executor_t<Handler>> work;
    std::shared_ptr<handback<R>> h;

    call(F fn, Handler hd, std::shared_ptr<handback<R>> back)
        : f(std::move(fn)), handler(std::move(hd)), work(boost::asio::get_associated_executor(handler)), h(std::move(back)) {}

    void run() override {
        if constexpr (std::is_void_v<R>) f();
        else h->value.emplace(f());
    }
    boost::asio::any_io_executor executor() const override { return work.get_executor(); }

    /// The hand-back: the completion is posted to the caller's executor and, once that post has
    /// returned, the thread that ran the call (a flush serving several callers, maybe of other
    /// threads, or the saver's own thread) touches nothing of the caller's again: the work guard
    /// and the executor travel inside the completion and die on the caller's side; the
    /// completion waits for that moment before it resumes the caller, at most the few
    /// instructions left in `post`. Asio wakes a waiting thread only after unlocking its queue,
    /// so without the wait a caller that resumes and at once destroys its io_context (run_sync,
    /// a context per request, with a saver that outlives them) could do so while this thread is
    /// still signalling it: the data race ThreadSanitizer reported (pthread_cond_signal against
    /// ~io_context; scripts/test --tsan).
    void complete() noexcept override {
        h->error = this->error;
        auto back = h;
        {
            auto ex = work.get_executor();
            boost::asio::post(ex, [back, handler = std::move(handler), work = std::move(work)]() mutable {
                back->posted.wait(false);
                std::move(handler)();
            });
        }
        back->posted.store(true);
        back->posted.notify_one();
    }
};

/// Runs `f` (SQLite work) for the caller. When the saver is idle, in place, inside the awaiting
/// coroutine: no thread hand-off, no post. Otherwise, and always for a write (`Batched`: a put
/// or put_writes, `f.thread` the thread it writes) or with `own_thread`, it queues and is run by
/// the next flush (impl::flush), which batches the writes queued beside it into one transaction;
/// the caller resumes on its own executor once its work is done and, for a write, committed.
template <class R, bool Batched = false, class Impl, class F>
boost::asio::awaitable<R> on_saver_thread(Impl& i, F f) {
    if (!Batched && i.try_lead()) {
        struct unlead {
            Impl& i;
            ~unlead() { i.end_lead(); }
        } u{i};
        std::lock_guard lock(i.mutex);
        co_return f();
    }
    auto h = std::make_shared<handback<R>>();
    auto initiate = [&i, &f, h](auto handler) {
        auto j = std::make_unique<call<typename Impl::job, R, F, decltype(handler)>>(std::move(f), std::move(handler), h);
        if constexpr (Batched) {
            j->batched = true;
            j->thread = &j->f.thread;
            j->what = F::what;
        }
        i.enqueue(std::move(j));
    };
    co_await boost::asio::async_initiate<const boost::asio::use_awaitable_t<>&, void()>(initiate, boost::asio::use_awaitable);
    if (h->error) std::rethrow_exception(h->error);
    if constexpr (!std::is_void_v<R>) co_return std::move(*h->value);
}
} // namespace

// The writes encode their checkpoints first, on the caller's thread, without the connection: a
// flush writing the calls of many threads at once then only binds and steps (impl::prepare_put).
boost::asio::awaitable<void> sqlite_saver::put(const std::string& thread_id, const std::string& ns, const checkpoint& cp) {
    auto prepared = impl_->prepare_put(thread_id, ns, cp);
    impl::put_call c{impl_.get(), thread_id, ns, cp, &prepared};
    co_await on_saver_thread<void, true>(*impl_, c);
}

boost::asio::awaitable<void> sqlite_saver::put_many(const std::string& thread_id, const std::string& ns,
                                                    std::span<const checkpoint> cps) {
    auto prepared = impl_->prepare_many(thread_id, ns, cps);
    impl::put_many_call c{impl_.get(), thread_id, ns, cps, &prepared};
    co_await on_saver_thread<void, true>(*impl_, c);
}

boost::asio::awaitable<void> sqlite_saver::put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                                      std::vector<pending_write> writes) {
    return on_saver_thread<void, true>(*impl_, impl::put_writes_call{impl_.get(), std::move(thread_id), std::move(ns),
                                                                      std::move(checkpoint_id), std::move(writes)});
}

boost::asio::awaitable<void> sqlite_saver::end_call(const std::string& thread_id, const std::string& ns, call_end& end) {
    auto prepared = impl_->prepare_end(thread_id, ns, end);
    impl::end_call_call c{impl_.get(), thread_id, ns, end, &prepared};
    co_await on_saver_thread<void, true>(*impl_, c);
}

boost::asio::awaitable<std::optional<checkpoint_tuple>>
sqlite_saver::acquire_and_get(const std::string& thread_id, const std::string& ns, const std::optional<std::string>& checkpoint_id) {
    return on_saver_thread<std::optional<checkpoint_tuple>>(*impl_, [i = impl_.get(), &thread_id, &ns, &checkpoint_id] {
        return i->acquire_and_get(thread_id, ns, checkpoint_id); // the arguments outlive the co_await
    });
}

boost::asio::awaitable<std::optional<checkpoint_tuple>>
sqlite_saver::acquire_and_get_held(const std::string& thread_id, const std::string& ns, const std::string& held_id) {
    return on_saver_thread<std::optional<checkpoint_tuple>>(*impl_, [i = impl_.get(), &thread_id, &ns, &held_id] {
        static const std::optional<std::string> newest;
        return i->acquire_and_get(thread_id, ns, newest, &held_id); // the arguments outlive the co_await
    });
}

boost::asio::awaitable<std::optional<checkpoint_tuple>> sqlite_saver::get(std::string thread_id, std::string ns,
                                                                          std::optional<std::string> checkpoint_id) {
    return on_saver_thread<std::optional<checkpoint_tuple>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id), ns = std::move(ns), checkpoint_id = std::move(checkpoint_id)] {
            return i->get(thread_id, ns, checkpoint_id);
        });
}

boost::asio::awaitable<std::vector<checkpoint_tuple>> sqlite_saver::list(std::string thread_id, std::string ns,
                                                                         list_options options) {
    return on_saver_thread<std::vector<checkpoint_tuple>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id), ns = std::move(ns), options = std::move(options)] {
            return i->list(thread_id, ns, options);
        });
}

boost::asio::awaitable<void> sqlite_saver::delete_thread(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->delete_thread(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::prune(std::string thread_id, std::size_t keep_last) {
    return on_saver_thread<void>(*impl_,
                                 [i = impl_.get(), thread_id = std::move(thread_id), keep_last] { i->prune(thread_id, keep_last); });
}

boost::asio::awaitable<thread_stats> sqlite_saver::stats(std::string thread_id) {
    return on_saver_thread<thread_stats>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { return i->stats(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::copy_thread(std::string from, std::string to) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), from = std::move(from), to = std::move(to)] {
        i->copy_thread(from, to);
    });
}

boost::asio::awaitable<std::size_t> sqlite_saver::rewind_thread(std::string thread_id, std::string checkpoint_id) {
    return on_saver_thread<std::size_t>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id),
                                                 checkpoint_id = std::move(checkpoint_id)] {
        return i->rewind_thread(thread_id, checkpoint_id);
    });
}

boost::asio::awaitable<std::vector<thread_info>> sqlite_saver::list_threads(thread_query query) {
    // The filter is a view: copied now, before the caller's object can go.
    std::optional<boost::json::object> match;
    if (query.metadata.get()) match.emplace(*query.metadata.get());
    return on_saver_thread<std::vector<thread_info>>(*impl_, [i = impl_.get(), query, match = std::move(match)] {
        return i->list_threads(query, match ? &*match : nullptr);
    });
}

boost::asio::awaitable<sweep_result> sqlite_saver::sweep(ttl_policy policy) {
    // One hop to the saver's thread per swept thread, each in a transaction of its own: the saver's
    // other calls (the runs of this process) go on between them. (Each lambda is named before the
    // `co_await`: g++ 12 destroys the captures of one built in that expression twice.)
    const std::string cutoff =
        checkpoint_id_at(std::chrono::system_clock::now() - std::max(policy.older_than, std::chrono::milliseconds(0)));
    auto scan = [i = impl_.get(), &cutoff] { return i->expired_threads(cutoff); };
    const auto expired = co_await on_saver_thread<std::vector<std::string>>(*impl_, std::move(scan));
    sweep_result result;
    for (const auto& thread : expired) {
        auto one = [i = impl_.get(), &thread, &cutoff, action = policy.action, &result] {
            i->sweep_thread(thread, cutoff, action, result);
        };
        co_await on_saver_thread<void>(*impl_, std::move(one));
    }
    co_return result;
}

boost::asio::awaitable<std::optional<boost::json::value>> sqlite_saver::cache_get(std::string ns, std::string key) {
    return on_saver_thread<std::optional<boost::json::value>>(
        *impl_, [i = impl_.get(), ns = std::move(ns), key = std::move(key)] { return i->cache_get(ns, key); });
}

boost::asio::awaitable<void> sqlite_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                                     std::chrono::milliseconds ttl) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), ns = std::move(ns), key = std::move(key),
                                          value = std::move(value), ttl] { i->cache_put(ns, key, value, ttl); });
}

boost::asio::awaitable<std::size_t> sqlite_saver::cache_clear(std::vector<std::string> namespaces) {
    return on_saver_thread<std::size_t>(
        *impl_, [i = impl_.get(), namespaces = std::move(namespaces)] { return i->cache_clear(namespaces); });
}

bool sqlite_saver::encryption_available() noexcept { return codec::cipher::available(); }

bool sqlite_saver::encrypted() const noexcept { return impl_->box != nullptr; }

boost::asio::awaitable<void> sqlite_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), signature = std::move(signature), shape = std::move(shape)] {
        i->put_graph(signature, shape);
    });
}

boost::asio::awaitable<std::optional<std::vector<std::string>>> sqlite_saver::get_graph(std::string signature) {
    return on_saver_thread<std::optional<std::vector<std::string>>>(
        *impl_, [i = impl_.get(), signature = std::move(signature)] { return i->get_graph(signature); });
}

boost::asio::awaitable<void> sqlite_saver::acquire(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->acquire(thread_id); });
}

boost::asio::awaitable<void> sqlite_saver::release(std::string thread_id) {
    return on_saver_thread<void>(*impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { i->release(thread_id); });
}

boost::asio::awaitable<std::optional<std::string>> sqlite_saver::break_lease(std::string thread_id) {
    return on_saver_thread<std::optional<std::string>>(
        *impl_, [i = impl_.get(), thread_id = std::move(thread_id)] { return i->break_lease(thread_id); });
}

} // namespace stategraph::checkpoint
