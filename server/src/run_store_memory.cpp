// The run store kept in this process's memory (`open_memory_run_store`): the rules of the SQL
// stores (run_store.cpp, run_store_queue.cpp, run_store_workers.cpp) over plain containers, for
// a server given no store. Each call takes one mutex, does its work without suspending and
// returns; records are copied in and out (no JSON text written or parsed back). The same
// conformance suite (tests/server/test_run_store.cpp) runs on it and on the SQL backends.

#include "run_store_sql.hpp" // the steps both kinds of store share (as_queued, attempts_exhausted)

#include <stategraph/server/run_store.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

namespace stategraph::server {

namespace json = boost::json;
namespace net = boost::asio;
using net::awaitable;
using run_store_sql::as_queued;
using run_store_sql::attempts_exhausted;

namespace {

bool active(const std::string& status) { return status == "pending" || status == "running"; }

class memory_run_store final : public run_store {
public:
    explicit memory_run_store(run_store_options o) : run_store(std::move(o)) {}

    bool listen(std::function<void(std::string, std::string)>) override { return false; }

    // -- threads ------------------------------------------------------------------------------

    awaitable<bool> create_thread(const thread_record& t) override {
        std::lock_guard lock(mutex_);
        co_return insert_thread(t);
    }

    awaitable<std::optional<thread_record>> get_thread(std::string key) override {
        std::lock_guard lock(mutex_);
        auto it = threads_.find(key);
        if (it == threads_.end()) co_return std::nullopt;
        co_return it->second.t;
    }

    awaitable<bool> put_thread(const thread_record& t) override {
        std::lock_guard lock(mutex_);
        auto it = threads_.find(t.key);
        if (it == threads_.end()) co_return false;
        auto& x = it->second;
        const std::string old_rest = x.rest;
        const std::string asked = t.status;
        x.t = t;
        // As the SQL stores: a status of busy keeps what the thread rests at; while a run of it
        // waits it reads busy whatever it rests at.
        if (asked != "busy") x.rest = asked;
        x.t.status = busy(t.key) ? std::string("busy") : (asked == "busy" ? old_rest : asked);
        co_return true;
    }

    awaitable<std::optional<thread_record>> patch_thread(std::string key, json::object metadata) override {
        std::lock_guard lock(mutex_);
        auto it = threads_.find(key);
        if (it == threads_.end()) co_return std::nullopt;
        auto& t = it->second.t;
        for (const auto& [k, v] : metadata) t.metadata[k] = v;
        t.updated_at = now();
        co_return t;
    }

    awaitable<bool> delete_thread(std::string key) override {
        std::lock_guard lock(mutex_);
        if (busy(key)) co_return false;
        if (auto r = by_thread_.find(key); r != by_thread_.end()) {
            const auto ids = r->second; // remove_run edits the index
            for (const auto& [seq, id] : ids) remove_run(id);
        }
        by_thread_.erase(key);
        co_return threads_.erase(key) > 0;
    }

    awaitable<std::vector<thread_record>> list_threads(thread_query q) override {
        static const std::vector<std::string> sortable = {"created_at", "updated_at", "state_updated_at", "thread_id", "status"};
        const std::string by = q.sort_by.str();
        if (std::find(sortable.begin(), sortable.end(), by) == sortable.end())
            throw std::invalid_argument("run_store::list_threads: cannot sort by '" + by + "'");
        std::vector<thread_record> out;
        {
            std::lock_guard lock(mutex_);
            const std::string owner = q.owner.str(), status = q.status.str();
            for (const auto& [key, x] : threads_) {
                if (x.t.owner != owner || x.t.temporary) continue;
                if (!status.empty() && x.t.status != status) continue;
                if (q.keys && std::find(q.keys->begin(), q.keys->end(), key) == q.keys->end()) continue;
                out.push_back(x.t);
            }
        }
        // -1, 0 or 1: a against b on the field asked for.
        auto field = [&by](const thread_record& a, const thread_record& b) -> int {
            auto cmp = [](const auto& x, const auto& y) { return x < y ? -1 : (y < x ? 1 : 0); };
            if (by == "created_at") return cmp(a.created_at, b.created_at);
            if (by == "updated_at") return cmp(a.updated_at, b.updated_at);
            if (by == "state_updated_at") return cmp(a.state_updated_at, b.state_updated_at);
            if (by == "thread_id") return a.thread_id.compare(b.thread_id) < 0 ? -1 : (a.thread_id == b.thread_id ? 0 : 1);
            return a.status.compare(b.status) < 0 ? -1 : (a.status == b.status ? 0 : 1);
        };
        const bool asc = q.ascending;
        std::sort(out.begin(), out.end(), [&](const thread_record& a, const thread_record& b) {
            const int c = field(a, b);
            if (c != 0) return asc ? c < 0 : c > 0;
            return a.key < b.key; // ties: by key, ascending, as the SQL stores order them
        });
        co_return out;
    }

    awaitable<std::vector<std::string>> thread_keys() override {
        std::lock_guard lock(mutex_);
        std::vector<std::string> out;
        out.reserve(threads_.size());
        for (const auto& [key, x] : threads_) out.push_back(key);
        co_return out;
    }

    // -- assistants ---------------------------------------------------------------------------

    awaitable<bool> create_assistant(const assistant_record& a) override {
        std::lock_guard lock(mutex_);
        auto& versions = assistants_[a.assistant_id];
        if (!versions.empty()) co_return false;
        auto first = a;
        first.version = 1;
        versions.emplace(1, first);
        latest_[a.assistant_id] = 1;
        co_return true;
    }

    awaitable<std::optional<assistant_record>> get_assistant(std::string id, std::int64_t version) override {
        std::lock_guard lock(mutex_);
        auto it = assistants_.find(id);
        if (it == assistants_.end() || it->second.empty()) co_return std::nullopt;
        const std::int64_t v = version > 0 ? version : latest_[id];
        auto found = it->second.find(v);
        if (found == it->second.end()) co_return std::nullopt;
        co_return found->second;
    }

    awaitable<std::optional<assistant_record>> add_assistant_version(assistant_record a) override {
        std::lock_guard lock(mutex_);
        auto it = assistants_.find(a.assistant_id);
        if (it == assistants_.end() || it->second.empty()) co_return std::nullopt;
        a.version = it->second.rbegin()->first + 1;
        it->second.emplace(a.version, a);
        latest_[a.assistant_id] = a.version;
        co_return a;
    }

    awaitable<bool> set_latest_assistant(std::string id, std::int64_t version) override {
        std::lock_guard lock(mutex_);
        auto it = assistants_.find(id);
        if (it == assistants_.end() || !it->second.count(version)) co_return false;
        latest_[id] = version;
        co_return true;
    }

    awaitable<std::vector<assistant_record>> list_assistants(std::string owner) override {
        std::vector<assistant_record> out;
        {
            std::lock_guard lock(mutex_);
            for (const auto& [id, versions] : assistants_) {
                if (versions.empty()) continue;
                const auto& a = versions.at(latest_.at(id));
                if (a.owner == owner) out.push_back(a);
            }
        }
        std::sort(out.begin(), out.end(), [](const assistant_record& x, const assistant_record& y) {
            return std::tie(x.created_at, x.assistant_id) < std::tie(y.created_at, y.assistant_id);
        });
        co_return out;
    }

    awaitable<std::vector<assistant_record>> assistant_versions(std::string id) override {
        std::lock_guard lock(mutex_);
        std::vector<assistant_record> out;
        if (auto it = assistants_.find(id); it != assistants_.end())
            for (auto v = it->second.rbegin(); v != it->second.rend(); ++v) out.push_back(v->second);
        co_return out;
    }

    awaitable<bool> delete_assistant(std::string id) override {
        std::lock_guard lock(mutex_);
        auto it = assistants_.find(id);
        const bool had = it != assistants_.end() && !it->second.empty();
        if (it != assistants_.end()) assistants_.erase(it);
        latest_.erase(id);
        co_return had;
    }

    // -- runs ---------------------------------------------------------------------------------

    awaitable<submit_result> submit(run_record& run, submit_rules rules) override {
        std::lock_guard lock(mutex_);
        submit_result out;
        const auto when = now();
        // Refused before anything changes (the SQL stores roll the whole transaction back).
        if (runs_.count(run.run_id))
            throw run_store_error("run store (memory): run '" + run.run_id + "' is already stored", false);
        auto th = threads_.find(run.thread_key);
        if (th == threads_.end() || (th->second.t.temporary && !(rules.create && rules.create->temporary))) {
            if (!rules.create || th != threads_.end()) {
                out.refused = submit_refusal::thread_missing;
                co_return out;
            }
            insert_thread(*rules.create);
            th = threads_.find(run.thread_key);
            out.created_thread = true;
        }
        auto& t = th->second.t;
        const std::string graph = t.graph_id.empty() ? rules.graph_id.str() : t.graph_id;
        if (!rules.graph_id.empty() && !t.graph_id.empty() && t.graph_id != rules.graph_id) {
            out.refused = submit_refusal::other_graph;
            out.graph_id = t.graph_id;
            co_return out;
        }
        // The thread's queue: its runs pending or running, in seq order.
        std::vector<run_entry*> queue;
        if (auto a = active_of_thread_.find(run.thread_key); a != active_of_thread_.end())
            for (auto seq : a->second) queue.push_back(active_.at(seq));
        std::size_t live = 0;
        for (const auto* q : queue)
            if (q->r.cancel.empty()) ++live;
        out.queued = live;
        if (rules.reject_if_busy && !queue.empty()) {
            out.refused = submit_refusal::busy;
            out.busy_run = queue.front()->r.run_id;
            co_return out;
        }
        if (live >= std::max<std::size_t>(rules.max_queued, 1) && rules.cancel_others.empty()) {
            out.refused = submit_refusal::queue_full;
            co_return out;
        }
        if (!rules.cancel_others.empty())
            for (auto* q : queue) {
                if (!q->r.cancel.empty()) continue;
                q->r.cancel = rules.cancel_others.str();
                q->r.updated_at = when;
                out.cancelled.push_back(q->r.run_id);
            }
        // Pending runs nobody holds end at once.
        for (const auto& id : out.cancelled) {
            auto& x = runs_.at(id);
            if (x.r.status == "pending" && x.r.worker.empty()) {
                x.r.error = nullptr;
                set_status(x, "interrupted", when);
            }
        }
        as_queued(run, ++seq_, when);
        run.result = nullptr;
        run.error = nullptr;
        run_entry e;
        e.r = run;
        e.anchored = !run.anchor.is_null();
        auto stored = runs_.emplace(run.run_id, std::move(e)).first;
        by_thread_[run.thread_key].emplace(run.seq, run.run_id);
        active_.emplace(run.seq, &stored->second);
        active_of_thread_[run.thread_key].insert(run.seq);
        // The thread: busy, its graph chosen.
        if (t.graph_id.empty() && !graph.empty()) {
            t.metadata["graph_id"] = graph;
            if (rules.graph_metadata)
                for (const auto& [k, v] : *rules.graph_metadata) t.metadata[k] = v;
        }
        t.graph_id = graph;
        t.status = "busy";
        t.updated_at = when;
        co_return out;
    }

    awaitable<std::optional<run_record>> get_run(std::string run_id) override {
        std::lock_guard lock(mutex_);
        auto it = runs_.find(run_id);
        if (it == runs_.end()) co_return std::nullopt;
        co_return it->second.r;
    }

    awaitable<std::vector<run_record>> list_runs(std::string thread_key, std::optional<std::string> status, std::size_t limit,
                                                 std::size_t offset) override {
        std::lock_guard lock(mutex_);
        std::vector<run_record> out;
        auto it = by_thread_.find(thread_key);
        if (it == by_thread_.end()) co_return out;
        std::size_t skipped = 0;
        for (auto r = it->second.rbegin(); r != it->second.rend() && out.size() < limit; ++r) {
            const auto& x = runs_.at(r->second).r;
            if (status && x.status != *status) continue;
            if (skipped++ < offset) continue;
            out.push_back(x);
        }
        co_return out;
    }

    awaitable<std::vector<run_record>> runs_after(std::string thread_key, std::int64_t after) override {
        std::lock_guard lock(mutex_);
        std::vector<run_record> out;
        if (auto it = by_thread_.find(thread_key); it != by_thread_.end())
            for (auto r = it->second.upper_bound(after); r != it->second.end(); ++r) out.push_back(runs_.at(r->second).r);
        co_return out;
    }

    awaitable<std::int64_t> current_seq(std::string thread_key) override {
        std::lock_guard lock(mutex_);
        if (auto a = active_of_thread_.find(thread_key); a != active_of_thread_.end() && !a->second.empty())
            co_return *a->second.begin();
        auto it = by_thread_.find(thread_key);
        co_return it == by_thread_.end() || it->second.empty() ? 0 : it->second.rbegin()->first;
    }

    awaitable<bool> delete_run(std::string run_id) override {
        std::lock_guard lock(mutex_);
        auto it = runs_.find(run_id);
        if (it == runs_.end() || active(it->second.r.status)) co_return false;
        const std::string key = it->second.r.thread_key;
        remove_run(run_id);
        drop_temporary_thread(key); // a stateless run's thread goes with its last run
        co_return true;
    }

    awaitable<std::optional<run_record>> cancel(std::string run_id, std::string action) override {
        if (action != "interrupt" && action != "rollback")
            throw std::invalid_argument("run_store::cancel: action must be interrupt or rollback (got '" + action + "')");
        std::lock_guard lock(mutex_);
        auto it = runs_.find(run_id);
        if (it == runs_.end()) co_return std::nullopt;
        auto& x = it->second;
        if (!x.r.finished()) {
            const auto when = now();
            // rollback wins over interrupt; a run already asked keeps the stronger action
            x.r.cancel = x.r.cancel == "rollback" ? x.r.cancel : action;
            x.r.updated_at = when;
            if (x.r.status == "pending" && x.r.worker.empty()) end_unheld(x, "interrupted", nullptr, when);
        }
        co_return x.r;
    }

    // -- workers ------------------------------------------------------------------------------

    awaitable<std::optional<run_record>> claim(std::string worker) override {
        const std::string who = std::move(worker);
        auto some = co_await claim_some(who, 1);
        if (some.empty()) co_return std::nullopt;
        co_return std::move(some.front());
    }

    awaitable<std::vector<run_record>> claim_some(std::string worker, std::size_t most) override {
        std::vector<run_record> out;
        if (most == 0) co_return out;
        most = std::min<std::size_t>(most, 64);
        std::lock_guard lock(mutex_);
        const auto when = now();
        const auto lease = std::chrono::duration_cast<std::chrono::microseconds>(options().lease).count();
        // The head of each thread's queue, oldest first: pending and due, or running with its
        // claim expired (a takeover).
        std::vector<run_entry*> heads;
        for (const auto& [seq, e] : active_) {
            const auto& x = e->r;
            if (!(x.status == "pending" ? x.not_before <= when : x.lease_until < when)) continue; // most: running, held
            if (*active_of_thread_.at(x.thread_key).begin() != seq) continue;
            heads.push_back(e);
        }
        for (auto* e : heads) {
            auto& x = *e;
            auto& r = x.r;
            if (!r.cancel.empty()) { // asked to stop before (or while) its worker held it
                end_unheld(x, "interrupted", nullptr, when);
                continue;
            }
            if (r.attempts >= std::max(options().max_attempts, 1)) {
                end_unheld(x, "error", attempts_exhausted(r, options().max_attempts), when);
                continue;
            }
            r.status = "running";
            r.worker = worker;
            r.lease_until = when + lease;
            ++r.attempts;
            r.updated_at = when;
            out.push_back(r);
            if (out.size() == most) break;
        }
        co_return out;
    }

    awaitable<std::optional<std::int64_t>> next_due() override {
        std::lock_guard lock(mutex_);
        std::optional<std::int64_t> due;
        for (const auto& [seq, e] : active_) {
            const auto& x = e->r;
            if (x.status == "pending" && (!due || x.not_before < *due)) due = x.not_before;
        }
        co_return due;
    }

    awaitable<heartbeat_result> heartbeat(std::string worker, std::vector<std::string> runs) override {
        heartbeat_result out;
        std::lock_guard lock(mutex_);
        const auto until = now() + std::chrono::duration_cast<std::chrono::microseconds>(options().lease).count();
        for (const auto& id : runs) {
            auto* x = held(id, worker);
            if (!x) {
                out.lost.push_back(id);
                continue;
            }
            x->r.lease_until = until;
            if (!x->r.cancel.empty()) out.cancelled.emplace_back(id, x->r.cancel);
        }
        co_return out;
    }

    awaitable<void> set_anchor(std::string run_id, std::string worker, json::value anchor) override {
        std::lock_guard lock(mutex_);
        auto it = runs_.find(run_id);
        if (it == runs_.end() || it->second.r.worker != worker || it->second.anchored) co_return;
        it->second.r.anchor = std::move(anchor);
        it->second.anchored = true;
    }

    awaitable<bool> finish(const run_record& run, std::string worker, const thread_record* thread,
                           std::span<const run_event> events) override {
        std::lock_guard lock(mutex_);
        auto* x = held(run.run_id, worker);
        if (!x) co_return false;
        const auto when = now();
        x->r.result = run.result;
        x->r.error = run.error;
        x->r.updated_at = when;
        x->r.worker.clear();
        if (run.spec.contains("usage")) x->r.spec = run.spec;
        set_status(*x, run.status, when);
        store_events(*x, events);
        const std::string key = x->r.thread_key;
        if (thread) {
            if (auto t = threads_.find(thread->key); t != threads_.end()) {
                const std::string status = t->second.t.status;
                t->second.t = *thread;
                t->second.t.updated_at = when;
                t->second.t.status = status; // settled below
                t->second.rest = thread->status;
            }
        }
        settle(key, when);
        trim_finished();
        co_return true;
    }

    awaitable<std::vector<std::pair<std::string, std::string>>> cancel_requests(std::string worker) override {
        std::lock_guard lock(mutex_);
        std::vector<std::pair<std::string, std::string>> out;
        for (const auto& [seq, e] : active_) {
            const auto& r = e->r;
            if (r.status == "running" && r.worker == worker && !r.cancel.empty()) out.emplace_back(r.run_id, r.cancel);
        }
        co_return out;
    }

    awaitable<std::vector<std::string>> running_workers() override {
        std::lock_guard lock(mutex_);
        std::set<std::string> workers;
        for (const auto& [seq, e] : active_) {
            const auto& r = e->r;
            if (r.status == "running" && !r.worker.empty()) workers.insert(r.worker);
        }
        co_return std::vector<std::string>(workers.begin(), workers.end());
    }

    awaitable<std::map<std::string, std::int64_t>> count_runs() override {
        std::lock_guard lock(mutex_);
        std::map<std::string, std::int64_t> out;
        for (const auto& [id, x] : runs_) ++out[x.r.status];
        co_return out;
    }

    awaitable<std::size_t> expire_worker(std::string worker) override {
        std::lock_guard lock(mutex_);
        std::size_t n = 0;
        for (const auto& [seq, e] : active_) {
            auto& r = e->r;
            if (r.status == "running" && r.worker == worker) {
                r.lease_until = 0;
                ++n;
            }
        }
        co_return n;
    }

    awaitable<bool> release(std::string run_id, std::string worker) override {
        std::lock_guard lock(mutex_);
        auto* x = held(run_id, worker);
        if (!x) co_return false;
        auto& r = x->r;
        r.status = "pending";
        r.worker.clear();
        r.lease_until = 0;
        r.attempts = r.attempts > 0 ? r.attempts - 1 : 0;
        r.not_before = 0;
        r.updated_at = now();
        co_return true;
    }

    // -- events -------------------------------------------------------------------------------

    awaitable<bool> append_events(std::string run_id, std::string worker, std::vector<run_event> events) override {
        if (events.empty()) co_return true;
        std::lock_guard lock(mutex_);
        auto* x = held(run_id, worker);
        if (!x) co_return false;
        store_events(*x, events);
        co_return true;
    }

    awaitable<std::vector<run_event>> read_events(std::string run_id, std::int64_t from, std::size_t limit) override {
        std::lock_guard lock(mutex_);
        std::vector<run_event> out;
        auto it = runs_.find(run_id);
        if (it == runs_.end()) co_return out;
        for (auto e = it->second.events.lower_bound(from); e != it->second.events.end() && out.size() < limit; ++e)
            out.push_back(e->second);
        co_return out;
    }

    awaitable<std::pair<std::int64_t, std::int64_t>> event_bounds(std::string run_id) override {
        std::lock_guard lock(mutex_);
        auto it = runs_.find(run_id);
        if (it == runs_.end() || it->second.events.empty()) co_return std::pair<std::int64_t, std::int64_t>{0, 0};
        const auto& ev = it->second.events;
        co_return std::pair<std::int64_t, std::int64_t>{ev.begin()->first, ev.rbegin()->first + 1};
    }

private:
    /// A thread as stored: its record (`status` as read: busy while a run of it waits) and the
    /// status it rests at otherwise.
    struct thread_entry {
        thread_record t;
        std::string rest = "idle";
    };
    /// A run as stored, with its events and whether its anchor was recorded.
    struct run_entry {
        run_record r;
        bool anchored = false;
        std::int64_t finished_at = 0;
        std::map<std::int64_t, run_event> events;
    };

    bool insert_thread(const thread_record& t) {
        auto [it, inserted] = threads_.try_emplace(t.key);
        if (inserted) it->second.t = t; // rests at idle, as a new row of the SQL stores
        return inserted;
    }

    bool busy(const std::string& key) const {
        auto a = active_of_thread_.find(key);
        return a != active_of_thread_.end() && !a->second.empty();
    }

    /// The run `worker` holds (running, its worker), or null.
    run_entry* held(const std::string& run_id, const std::string& worker) {
        auto it = runs_.find(run_id);
        if (it == runs_.end() || it->second.r.status != "running" || it->second.r.worker != worker) return nullptr;
        return &it->second;
    }

    /// Sets a run's status, keeping the indexes: a run that leaves pending or running leaves
    /// its thread's queue and joins the finished runs.
    void set_status(run_entry& x, const std::string& status, std::int64_t when) {
        const bool was = active(x.r.status), is = active(status);
        x.r.status = status;
        x.r.updated_at = when;
        if (was && !is) {
            active_.erase(x.r.seq);
            if (auto a = active_of_thread_.find(x.r.thread_key); a != active_of_thread_.end()) {
                a->second.erase(x.r.seq);
                if (a->second.empty()) active_of_thread_.erase(a);
            }
            x.finished_at = when;
            finished_.emplace(std::pair{when, x.r.seq}, x.r.run_id);
        }
    }

    /// Ends a run no worker holds (cancelled while pending, or out of attempts).
    void end_unheld(run_entry& x, const std::string& status, const json::value& error, std::int64_t when) {
        x.r.error = error;
        x.r.worker.clear();
        set_status(x, status, when);
        if (!error.is_null())
            if (auto t = threads_.find(x.r.thread_key); t != threads_.end()) {
                t->second.rest = "error";
                t->second.t.error = error;
            }
        settle(x.r.thread_key, when);
    }

    /// The thread's status once a run left its queue: busy while others wait, else what it rests at.
    void settle(const std::string& key, std::int64_t when) {
        auto t = threads_.find(key);
        if (t == threads_.end()) return;
        t->second.t.status = busy(key) ? std::string("busy") : t->second.rest;
        t->second.t.updated_at = when;
    }

    void drop_temporary_thread(const std::string& key) {
        auto t = threads_.find(key);
        if (t == threads_.end() || !t->second.t.temporary) return;
        if (auto r = by_thread_.find(key); r != by_thread_.end() && !r->second.empty()) return;
        threads_.erase(t);
        by_thread_.erase(key);
    }

    void remove_run(const std::string& run_id) {
        auto it = runs_.find(run_id);
        if (it == runs_.end()) return;
        const auto& r = it->second.r;
        if (auto b = by_thread_.find(r.thread_key); b != by_thread_.end()) {
            b->second.erase(r.seq);
            if (b->second.empty()) by_thread_.erase(b);
        }
        if (active(r.status)) {
            active_.erase(r.seq);
            if (auto a = active_of_thread_.find(r.thread_key); a != active_of_thread_.end()) {
                a->second.erase(r.seq);
                if (a->second.empty()) active_of_thread_.erase(a);
            }
        } else {
            finished_.erase(std::pair{it->second.finished_at, r.seq});
        }
        runs_.erase(it);
    }

    /// Removes the oldest finished runs beyond the bound (their events too, and a stateless
    /// run's thread with its last run).
    void trim_finished() {
        const auto keep = std::max<std::size_t>(options().max_finished_runs, 1);
        while (finished_.size() > keep) {
            const auto id = finished_.begin()->second;
            const auto key = runs_.at(id).r.thread_key;
            remove_run(id);
            drop_temporary_thread(key);
        }
    }

    /// Appends (or replaces, by id) a run's events and drops the oldest beyond the bound.
    void store_events(run_entry& x, std::span<const run_event> events) {
        if (events.empty()) return;
        for (const auto& e : events) x.events.insert_or_assign(e.id, e);
        const auto keep = static_cast<std::int64_t>(std::max<std::size_t>(options().max_events_per_run, 1));
        const auto first_kept = events.back().id + 1 - keep;
        if (first_kept > 0) x.events.erase(x.events.begin(), x.events.lower_bound(first_kept));
    }

    std::mutex mutex_;
    std::int64_t seq_ = 0;
    std::unordered_map<std::string, thread_entry> threads_;
    std::unordered_map<std::string, run_entry> runs_;
    /// Every run of a thread, by seq.
    std::unordered_map<std::string, std::map<std::int64_t, std::string>> by_thread_;
    /// Runs pending or running, by seq (the claim's order; an element of `runs_` stays where it
    /// is until erased), and each thread's.
    std::map<std::int64_t, run_entry*> active_;
    std::unordered_map<std::string, std::set<std::int64_t>> active_of_thread_;
    /// Finished runs, oldest first (finished_at, seq), for the bound.
    std::map<std::pair<std::int64_t, std::int64_t>, std::string> finished_;
    /// Assistants: every version by number, and the latest's.
    std::unordered_map<std::string, std::map<std::int64_t, assistant_record>> assistants_;
    std::unordered_map<std::string, std::int64_t> latest_;
};

} // namespace

std::shared_ptr<run_store> open_memory_run_store(run_store_options options) {
    return std::make_shared<memory_run_store>(std::move(options));
}

} // namespace stategraph::server
