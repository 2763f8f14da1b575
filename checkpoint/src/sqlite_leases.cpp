/// @file sqlite_leases.cpp
/// @brief A SQLite saver's thread leases: acquire, release and break_lease, the fence every write
/// passes (check_lease), and the keeper thread that renews the leases this saver holds.

#include "sqlite_saver_impl.hpp"
#include "lease_owner.hpp"

#include <algorithm>
#include <chrono>

namespace stategraph::checkpoint {

namespace {

constexpr std::string_view sql_get_lease = "SELECT owner, expires_at FROM leases WHERE thread_id = ?1";
constexpr std::string_view sql_put_lease =
    "INSERT OR REPLACE INTO leases(thread_id, owner, expires_at) VALUES(?1, ?2, ?3)";
constexpr std::string_view sql_renew_lease = "UPDATE leases SET expires_at = ?3 WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_release_lease = "DELETE FROM leases WHERE thread_id = ?1 AND owner = ?2";
constexpr std::string_view sql_break_lease = "DELETE FROM leases WHERE thread_id = ?1 RETURNING owner";

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
            if (ours) throw_lost(thread, "");
            return;
        }
        holder = s.text(0);
        expires = s.integer(1);
    }
    if (holder != owner) {
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

void sqlite_saver::impl::throw_lost(const std::string& thread, const std::string& holder) {
    lost.insert(thread);
    throw common::lease_lost(thread, owner, holder, where());
}

void sqlite_saver::impl::throw_busy(const std::string& thread, const std::string& holder, std::int64_t expires) const {
    throw common::thread_busy(thread, holder, expires, where());
}

bool sqlite_saver::impl::leased(const std::string& thread, std::int64_t now) {
    if (held.count(thread) && !lost.count(thread)) return true;
    stmt s(*this, sql_get_lease, thread, "reading the thread's lease");
    s.bind(1, thread);
    if (!s.step()) return false;
    const auto holder = s.text(0);
    const auto expires = s.integer(1);
    return expires > now && (holder == owner || !lease_owner::is_gone(holder));
}

void sqlite_saver::impl::acquire(const std::string& thread) {
    lease_only_commit unsynced(*this);
    transaction t(*this, true, thread, "taking the thread's lease");
    take_lease(thread);
    t.commit();
    lease_taken(t, thread);
    start_keeper();
}

std::optional<checkpoint_tuple> sqlite_saver::impl::acquire_and_get(const std::string& thread, const std::string& ns,
                                                                    const std::optional<std::string>& checkpoint_id) {
    lease_only_commit unsynced(*this); // the read writes nothing
    transaction t(*this, true, thread, "taking the thread's lease");
    take_lease(thread);
    auto got = get(thread, ns, checkpoint_id); // its transaction nested in `t`
    t.commit();
    lease_taken(t, thread);
    start_keeper();
    return got;
}

void sqlite_saver::impl::take_lease(const std::string& thread) {
    auto now = now_ms();
    {
        stmt s(*this, sql_get_lease, thread, "taking the thread's lease");
        s.bind(1, thread);
        if (s.step()) {
            auto holder = s.text(0);
            auto expires = s.integer(1);
            if (holder != owner && expires > now && !lease_owner::is_gone(holder))
                throw_busy(thread, holder, expires);
        }
    }
    stmt s(*this, sql_put_lease, thread, "taking the thread's lease");
    s.bind(1, thread).bind(2, owner).bind(3, now + lease_ms());
    s.run();
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
        const auto until = now_ms() + lease_ms();
        for (const auto& thread : held) {
            if (lost.count(thread)) continue;
            stmt r(*this, sql_renew_lease, thread, "renewing the thread's lease");
            r.bind(1, thread).bind(2, owner).bind(3, until);
            r.run();
            if (sqlite3_changes(db.get()) == 0) lost.insert(thread);
        }
        t.commit();
    } catch (...) {
    }
}

std::optional<std::string> sqlite_saver::impl::break_lease(const std::string& thread) {
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
    t.commit();
    if (holder == owner) lost.insert(thread);
    return holder;
}

void sqlite_saver::impl::delete_lease(const std::string& thread) {
    // Forgotten first: a release that fails below (a full disk) leaves a row that simply
    // expires, and never makes this saver fence its own later writes.
    held.erase(thread);
    lost.erase(thread);
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
