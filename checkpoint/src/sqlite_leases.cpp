/// @file sqlite_leases.cpp
/// @brief A SQLite saver's thread leases: acquire, release and break_lease, the fence every write
/// passes (check_lease), and the keeper thread that renews the leases this saver holds.

#include "sqlite_saver_impl.hpp"
#include "lease_owner.hpp"

#include <algorithm>
#include <chrono>
#include <system_error>

namespace stategraph::checkpoint {

namespace {

constexpr std::string_view sql_get_lease = "SELECT owner, expires_at FROM leases WHERE thread_id = ?1";
constexpr std::string_view sql_put_lease =
    "INSERT OR REPLACE INTO leases(thread_id, owner, expires_at) VALUES(?1, ?2, ?3)";
constexpr std::string_view sql_renew_lease = "UPDATE leases SET expires_at = ?3 WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_lease = "DELETE FROM leases WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_break_lease = "DELETE FROM leases WHERE thread_id = ?1 RETURNING owner";
/// The owner of the row break_lease leaves where a run held the thread by its file lock alone.
constexpr std::string_view broken_lease_owner = "(broken)";

} // namespace

using namespace sqlite_detail;

void sqlite_saver::impl::check_lease(const std::string& thread, std::int64_t now) {
    std::string holder;
    std::int64_t expires = 0;
    const bool ours = held.count(thread) != 0;
    {
        stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
        s.bind(1, thread);
        if (!s.step()) {
            if (ours && !unwritten.count(thread)) throw_lost(thread, "");
            if (!ours) fence_locked(thread); // a run holding the file lock alone
            return;
        }
        holder = s.text(0);
        expires = s.integer(1);
    }
    if (holder != owner) {
        // A lease held by the lock alone meets a row when it was broken, or taken over by a
        // process that found the row expired.
        if (ours) throw_lost(thread, holder);
        if (expires > now && !lease_owner::is_gone(holder)) throw_busy(thread, holder, expires);
        return;
    }
    // Our own lease: renew it only once half of its time is gone (one UPDATE less per write).
    if (expires - now > lease_ms() / 2) return;
    stmt r(*this, sql_renew_lease, thread, "renewing the thread's lease");
    r.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
    r.run();
}

bool sqlite_saver::impl::take_lock(const std::string& thread, detail::thread_locks::use u) {
    try {
        return locks->take(thread, u);
    } catch (const std::system_error& e) {
        throw checkpoint_error(errc::storage_failure, "thread " + quote(thread) + ": " + e.what() + where(), {thread});
    }
}

bool sqlite_saver::impl::lock_for_transaction(const std::string& thread) {
    if (!take_lock(thread, detail::thread_locks::use::write)) return false;
    end_unlocks.emplace_back(thread, detail::thread_locks::use::write);
    return true;
}

void sqlite_saver::impl::fence_locked(const std::string& thread) {
    if (locks && !lock_for_transaction(thread)) throw_busy_locked(thread);
}

void sqlite_saver::impl::throw_busy_locked(const std::string& thread) const {
    throw checkpoint_error(errc::thread_busy,
                           "thread " + quote(thread) +
                               " is busy: held by a run of another saver on this host (its lease is a lock on " +
                               locks->path() + "; its row is written once the run has held it for a third of its time to live)" +
                               where(),
                           {thread});
}

void sqlite_saver::impl::throw_lost(const std::string& thread, const std::string& holder) {
    lost.insert(thread);
    throw common::lease_lost(thread, owner, holder, where());
}

void sqlite_saver::impl::throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const {
    throw common::thread_busy(thread, holder, expires, where());
}

bool sqlite_saver::impl::leased(const std::string& thread, std::int64_t now) {
    if (held.count(thread) && !lost.count(thread)) return true;
    bool row = false;
    {
        stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
        s.bind(1, thread);
        if (s.step()) {
            row = true;
            const auto holder = s.text(0);
            const auto expires = s.integer(1);
            if (expires > now && (holder == owner || !lease_owner::is_gone(holder))) return true;
        }
    }
    if (!locks) return false;
    // No live row: a run may hold the thread by its file lock alone. The lock is taken for the
    // caller's transaction, so that no run starts on the thread before that transaction ends; a
    // lock held with an expired row is a frozen holder's, whose lease is over.
    return !lock_for_transaction(thread) && !row;
}

void sqlite_saver::impl::acquire(const std::string& thread) {
    lease_only_commit unsynced(*this);
    transaction t(*this, true, thread, "taking the thread's lease");
    const auto took = take_lease(thread, false);
    try {
        t.commit();
    } catch (...) {
        if (took.fresh_lock) drop_lease_lock(thread);
        throw;
    }
    lease_taken(t, thread, took);
    start_keeper();
}

std::optional<checkpoint_tuple> sqlite_saver::impl::acquire_and_get(const std::string& thread, const std::string& ns,
                                                                    const std::optional<std::string>& checkpoint_id,
                                                                    const std::string* held_values) {
    // With the thread's file lock free and no row there, the lease is the lock alone: the call's
    // start reads and writes nothing (a read transaction, no commit; or nothing in a batch's).
    // The lock is taken before the first read, so the read sees every commit of the run that
    // held it before (which gave it back only after its last commit).
    const bool alone = locks && !held.count(thread);
    lease_only_commit unsynced(*this); // the read writes nothing
    std::optional<transaction> t;
    t.emplace(*this, !alone, thread, "taking the thread's lease");
    auto took = take_lease(thread, alone);
    if (alone && took.row) {
        // A row of another owner was there (expired, or its holder gone): it is replaced, which
        // takes a write transaction. Our lock is kept across the change.
        t.reset();
        const bool fresh = took.fresh_lock;
        try {
            t.emplace(*this, true, thread, "taking the thread's lease");
            took = take_lease(thread, false);
        } catch (...) {
            if (fresh) drop_lease_lock(thread);
            throw;
        }
        took.fresh_lock = fresh;
    }
    std::optional<checkpoint_tuple> got;
    try {
        // its transaction nested in `t`; the latest checkpoint may be remembered (sqlite_paused.cpp)
        got = checkpoint_id ? get(thread, ns, checkpoint_id) : recall_or_get(thread, ns, held_values);
        t->commit();
    } catch (...) {
        if (took.fresh_lock) drop_lease_lock(thread);
        throw;
    }
    lease_taken(*t, thread, took);
    start_keeper();
    return got;
}

sqlite_saver::impl::lease_taking sqlite_saver::impl::take_lease(const std::string& thread, bool lock_alone) {
    using use = detail::thread_locks::use;
    const auto now = now_ms();
    lease_taking took;
    bool locked = !locks; // no file locks: rows alone
    if (locks) {
        took.fresh_lock = !locks->leased(thread);
        locked = take_lock(thread, use::lease);
        if (!locked) took.fresh_lock = false;
    }
    try {
        std::optional<std::string> holder;
        {
            stmt s(*this, sql_get_lease, thread, "taking the thread's lease");
            s.bind(1, thread);
            if (s.step()) {
                holder = s.text(0);
                const auto expires = s.integer(1);
                if (*holder != owner && expires > now && !lease_owner::is_gone(*holder))
                    throw_busy(thread, *holder, expires);
            }
        }
        // The lock held by another saver's run and no row of its: that run holds the thread
        // (a row it left that expired, or whose holder is gone, is taken over as before).
        if (!locked && !holder) throw_busy_locked(thread);
        if (locked && lock_alone && !holder) {
            took.row = false;
            return took;
        }
        if (lock_alone) return took; // the caller takes the row in a write transaction
        stmt s(*this, sql_put_lease, thread, "taking the thread's lease");
        s.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
        s.run();
        return took;
    } catch (...) {
        if (took.fresh_lock) drop_lease_lock(thread);
        throw;
    }
}

void sqlite_saver::impl::start_keeper() {
    std::lock_guard k(keeper.mutex);
    if (keeper.thread.joinable() || keeper.stopping) return;
    keeper.thread = std::thread([this] { keep_leases(); });
}

void sqlite_saver::impl::keep_leases() {
    const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(lease_ms() / 3),
                                                            std::chrono::milliseconds(10));
    std::unique_lock k(keeper.mutex);
    while (!keeper.stopping) {
        keeper.wake.wait_for(k, period, [&] { return keeper.stopping; });
        if (keeper.stopping) break;
        k.unlock();
        renew_held();
        k.lock();
    }
}

void sqlite_saver::impl::renew_held() noexcept {
    try {
        std::lock_guard lock(mutex);
        if (held.size() == lost.size()) return;
        static const std::string none;
        lease_only_commit unsynced(*this);
        transaction t(*this, true, none, "renewing leases");
        const auto now = now_ms(), until = now + lease_ms();
        std::vector<std::string> written;
        for (const auto& thread : held) {
            if (lost.count(thread)) continue;
            if (const auto u = unwritten.find(thread); u != unwritten.end()) {
                if (now - u->second < lease_ms() / 3) continue; // a short run writes no row
                // Held by the file lock alone for a tick: its row is written now, so that its
                // holder shows and, should the holder freeze, the lease expires.
                bool foreign = false;
                {
                    stmt s(*this, sql_get_lease, thread, "writing the lease's row");
                    s.bind(1, thread);
                    foreign = s.step();
                }
                if (foreign) { // broken, or taken over: lost
                    lost.insert(thread);
                    continue;
                }
                stmt w(*this, sql_put_lease, thread, "writing the lease's row");
                w.bind(1, thread).bind(2, owner).bind(3, until);
                w.run();
                written.push_back(thread);
                continue;
            }
            stmt r(*this, sql_renew_lease, thread, "renewing the thread's lease");
            r.bind(1, thread).bind(2, owner).bind(3, until);
            r.run();
            if (sqlite3_changes(db.get()) == 0) lost.insert(thread);
        }
        t.commit();
        for (const auto& thread : written) unwritten.erase(thread);
    } catch (...) {
    }
}

std::optional<std::string> sqlite_saver::impl::break_lease(const std::string& thread) {
    using use = detail::thread_locks::use;
    lease_only_commit unsynced(*this);
    transaction t(*this, true, thread, "breaking the thread's lease");
    std::optional<std::string> holder;
    {
        stmt s(*this, sql_break_lease, thread, "breaking the thread's lease");
        s.bind(1, thread);
        if (s.step()) holder = s.text(0);
        while (s.step()) {
        }
    }
    const bool ours = held.count(thread) && !lost.count(thread);
    if (ours && !holder) holder = owner; // ours by the lock alone
    bool elsewhere = false;
    try {
        elsewhere = !ours && locks && locks->held_elsewhere(thread);
    } catch (const std::system_error& e) {
        throw checkpoint_error(errc::storage_failure, "thread " + quote(thread) + ": " + e.what() + where(), {thread});
    }
    if (elsewhere) {
        // A run of another saver holds the thread's file lock, which cannot be taken from it: a
        // row of no one's, expired, fences its writes (lease_lost) and lets the next run take
        // the thread over as from any expired lease.
        stmt s(*this, sql_put_lease, thread, "breaking the thread's lease");
        s.bind(1, thread).bind(2, std::string(broken_lease_owner)).bind(3, std::int64_t{0});
        s.run();
        if (!holder) holder = "a run of another saver on this host (its lease a lock on " + locks->path() + ")";
    }
    t.commit();
    if (holder == owner) {
        lost.insert(thread);
        unwritten.erase(thread);
        if (locks) locks->drop(thread, use::lease);
    }
    return holder;
}

void sqlite_saver::impl::delete_lease(const std::string& thread) {
    // Forgotten first: a release that fails below (a full disk) leaves a row that simply
    // expires, and never makes this saver fence its own later writes.
    held.erase(thread);
    lost.erase(thread);
    // Its file lock goes once the transaction ends: never before the call's writes commit.
    if (locks && locks->leased(thread)) end_unlocks.emplace_back(thread, detail::thread_locks::use::lease);
    if (unwritten.erase(thread)) return; // no row of ours
    stmt s(*this, sql_release_lease, thread, "releasing the thread's lease");
    s.bind(1, thread).bind(2, owner);
    s.run();
}

void sqlite_saver::impl::release(const std::string& thread) {
    lease_only_commit unsynced(*this);
    transaction t(*this, true, thread, "releasing the thread's lease");
    delete_lease(thread);
    t.commit();
}

} // namespace stategraph::checkpoint
