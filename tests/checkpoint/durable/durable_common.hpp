#pragma once
// Shared helpers of the durable-thread tests: the two checkpointers behind one test body,
// temporary directories, a byte-counting saver wrapper, and small JSON helpers.

#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>
#include <stategraph/state_graph.hpp>

#include <boost/json.hpp>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include "run_awaitable.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>

namespace durable {

namespace sg = stategraph;
namespace cp = stategraph::checkpoint;
namespace json = boost::json;
using sg::test::run;

/// The checkpointers every durable test runs on.
enum class saver_kind { memory, sqlite };
inline std::ostream& operator<<(std::ostream& os, saver_kind k) {
    return os << (k == saver_kind::memory ? "memory" : "sqlite");
}
inline const saver_kind all_savers[] = {saver_kind::memory, saver_kind::sqlite};
inline auto savers() { return boost::unit_test::data::make(all_savers); }

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it at scope exit.
class temp_dir {
public:
    temp_dir() {
        static std::atomic<int> n{0};
        const char* base = std::getenv("TMPDIR");
        path_ = std::filesystem::path(base && *base ? base : "/tmp") /
                ("stategraph-durable-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

/// One saver of the given kind; the SQLite file lives in the fixture's temporary directory.
struct saver_env {
    saver_kind kind;
    temp_dir dir;
    std::string db_path;
    std::shared_ptr<cp::saver> saver;

    explicit saver_env(saver_kind k) : kind(k), db_path(dir.file("threads.db")) { saver = open(); }
    /// A new saver on the same storage (SQLite: a second connection; memory: the same object).
    std::shared_ptr<cp::saver> open(cp::sqlite_options o = {}) const {
        if (kind == saver_kind::memory) return saver ? saver : std::make_shared<cp::memory_saver>();
        o.path = db_path;
        return std::make_shared<cp::sqlite_saver>(o);
    }
};

/// Forwards to another saver and counts what it is asked to store (the bytes of the JSON text
/// of values, versions, frontier, metadata and pending writes).
class counting_saver final : public cp::saver {
public:
    explicit counting_saver(std::shared_ptr<cp::saver> inner) : inner_(std::move(inner)) {}

    std::size_t bytes() const { return bytes_; }
    std::size_t puts() const { return puts_; }
    std::size_t write_calls() const { return write_calls_; }
    /// Bytes of the last `put`.
    std::size_t last_put_bytes() const { return last_put_; }
    /// Refuses every `put` after the first `n` (as a process killed before its checkpoint).
    void fail_puts_from(std::size_t n) { fail_from_ = n; }

    boost::asio::awaitable<void> put(const std::string& thread_id, const std::string& ns, const cp::checkpoint& c) override {
        std::size_t n = json::serialize(c.values).size() + json::serialize(c.frontier).size() +
                        json::serialize(c.metadata).size() + c.id.size() + c.parent_id.size() + c.signature.size();
        for (const auto& [k, v] : c.versions) n += k.size() + v.size();
        if (puts_ >= fail_from_)
            throw sg::checkpoint_error(sg::errc::storage_failure, "test: put refused", {thread_id});
        bytes_ += n;
        last_put_ = n;
        ++puts_;
        co_await inner_->put(thread_id, ns, c);
    }
    boost::asio::awaitable<void> put_writes(std::string thread_id, std::string ns, std::string checkpoint_id,
                                            std::vector<cp::pending_write> writes) override {
        for (const auto& w : writes)
            bytes_ += json::serialize(w.value).size() + w.channel.size() + w.task_id.size() + w.task_name.size();
        ++write_calls_;
        co_await inner_->put_writes(std::move(thread_id), std::move(ns), std::move(checkpoint_id), std::move(writes));
    }
    boost::asio::awaitable<std::optional<cp::checkpoint_tuple>> get(std::string thread_id, std::string ns,
                                                                    std::optional<std::string> id) override {
        co_return co_await inner_->get(std::move(thread_id), std::move(ns), std::move(id));
    }
    boost::asio::awaitable<std::vector<cp::checkpoint_tuple>> list(std::string thread_id, std::string ns,
                                                                   cp::list_options o) override {
        co_return co_await inner_->list(std::move(thread_id), std::move(ns), std::move(o));
    }
    boost::asio::awaitable<void> delete_thread(std::string thread_id) override {
        co_await inner_->delete_thread(std::move(thread_id));
    }
    boost::asio::awaitable<void> prune(std::string thread_id, std::size_t keep_last) override {
        co_await inner_->prune(std::move(thread_id), keep_last);
    }
    boost::asio::awaitable<cp::thread_stats> stats(std::string thread_id) override {
        co_return co_await inner_->stats(std::move(thread_id));
    }
    boost::asio::awaitable<void> copy_thread(std::string from, std::string to) override {
        co_await inner_->copy_thread(std::move(from), std::move(to));
    }
    boost::asio::awaitable<std::vector<cp::thread_info>> list_threads(cp::thread_query query) override {
        co_return co_await inner_->list_threads(query);
    }
    boost::asio::awaitable<cp::sweep_result> sweep(cp::ttl_policy policy) override {
        co_return co_await inner_->sweep(policy);
    }
    boost::asio::awaitable<std::optional<boost::json::value>> cache_get(std::string ns, std::string key) override {
        co_return co_await inner_->cache_get(std::move(ns), std::move(key));
    }
    boost::asio::awaitable<void> cache_put(std::string ns, std::string key, boost::json::value value,
                                           std::chrono::milliseconds ttl) override {
        co_await inner_->cache_put(std::move(ns), std::move(key), std::move(value), ttl);
    }
    boost::asio::awaitable<std::size_t> cache_clear(std::vector<std::string> namespaces) override {
        co_return co_await inner_->cache_clear(std::move(namespaces));
    }
    boost::asio::awaitable<void> put_graph(std::string signature, std::vector<std::string> shape) override {
        co_await inner_->put_graph(std::move(signature), std::move(shape));
    }
    boost::asio::awaitable<std::optional<std::vector<std::string>>> get_graph(std::string signature) override {
        co_return co_await inner_->get_graph(std::move(signature));
    }
    boost::asio::awaitable<void> acquire(std::string thread_id) override { co_await inner_->acquire(std::move(thread_id)); }
    boost::asio::awaitable<void> release(std::string thread_id) override { co_await inner_->release(std::move(thread_id)); }

private:
    std::shared_ptr<cp::saver> inner_;
    std::size_t fail_from_ = std::size_t(-1);
    std::size_t bytes_ = 0, puts_ = 0, write_calls_ = 0, last_put_ = 0;
};

/// Side counters bumped by node bodies (how often a node body started).
struct counters {
    std::mutex m;
    std::map<std::string, int> c;
    void bump(const std::string& k) {
        std::lock_guard l(m);
        ++c[k];
    }
    int operator[](const std::string& k) {
        std::lock_guard l(m);
        auto it = c.find(k);
        return it == c.end() ? 0 : it->second;
    }
};

/// Runs `f` and returns the stategraph error kind it threw (errc::ok when it did not throw).
template <class F>
sg::errc error_of(F&& f, std::string* message = nullptr, std::vector<std::string>* names = nullptr) {
    try {
        f();
    } catch (const sg::graph_error& e) {
        if (message) *message = e.what();
        if (names) *names = e.names();
        return e.kind();
    }
    return sg::errc::ok;
}

/// A count or seed from the environment (CI and local runs pick their own size), or `fallback`.
inline std::uint64_t env_number(const char* name, std::uint64_t fallback) {
    const char* v = std::getenv(name);
    if (!v || !*v) return fallback;
    try {
        return std::stoull(v);
    } catch (const std::exception&) {
        return fallback;
    }
}

inline sg::run_config thread(const std::string& id) {
    sg::run_config c;
    c.thread_id = id;
    return c;
}

} // namespace durable
