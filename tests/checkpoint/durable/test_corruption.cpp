// The corruption probe of issue 11, made permanent (SQLite file). A realistic file (three
// threads of a graph with parallel tasks, a Send, a join barrier, an append list, values large
// enough for `blobs` and small ones inline, a pending interrupt, an update_state) is damaged in
// every way the issue lists, and every read of it must give either a typed stategraph error or
// exactly what the undamaged file gives (its "truth"): never a different successful result.
//
// - row_flips: bytes of every stored record, inline value string, blob, pending write and graph
//   shape (every byte of a small row, 16 of a large one, two masks each, and every mask on the
//   first byte of one row of each kind), read back through the engine: get_state and
//   get_state_history of the thread the row belongs to, and a resume of the interrupted thread.
// - row_edits: stored data that is well-formed but wrong (a frontier or a pending write naming a
//   node or field this graph does not have, re-sealed), rows' values swapped, a record copied to
//   another checkpoint, a write moved to another task.
// - file_flips: random bytes of the database file. A byte outside every seal (a row's key, the
//   b-tree page around the rows) can move rows out of reach: such a file must read as the
//   undamaged one with rows gone and none altered; those are counted and reported, not failed
//   (STATEGRAPH_CORRUPTION_STRICT=1 fails them: the engine cannot tell a row gone from a row
//   never written).
// - truncated_files_and_wal: the file and its write-ahead log cut at random lengths and inside
//   each page; a WAL cut reads as the transactions committed before the cut.
// - read_only_files: files and folder without write permission (as another user when the test
//   runs as root, for whom permissions do not stop writes).
// - full_disk: a run fills a 2 MB tmpfs (only where the test may mount one).
//
// Every damaged file is read in a forked child under a time limit: a hang or a crash is reported
// with the damage that caused it and never takes the test run down. Each case prints its counts.
// STATEGRAPH_CORRUPTION_SEED repeats a run's random flips and cuts, STATEGRAPH_CORRUPTION_FILE_FLIPS
// sets how many (100), STATEGRAPH_CORRUPTION_REPORT=<file> appends every outcome that is not the
// truth or a typed error to that file.
#include "durable_common.hpp"

#include "codec.hpp" // checkpoint/src: to re-seal well-formed but wrong edits
#include "sqlite_checksum_vfs.hpp" // checkpoint/src: edits keep the pages' checksums right

#include <sqlite3.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <sstream>

using namespace durable;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace corruption {

// -- the graph ----------------------------------------------------------------------------------
struct probe_state {
    std::vector<std::string> log; ///< "<node>@<round>" from every node (append: stored as deltas)
    std::string note;             ///< prep: ~1.5 KB (a row in `blobs`); join: a few bytes (inline)
    int answer = 0;               ///< the sum of the answers to ask's questions
    int round = 0;
};
BOOST_DESCRIBE_STRUCT(probe_state, (), (log, note, answer, round))
inline auto reducers(sg::for_state<probe_state>) { return sg::reducers{sg::reduce<&probe_state::log>(sg::append)}; }

using st = probe_state;
using upd = sg::update<st>;

/// START -> prep -> {fan_a, fan_b, ask} (a join barrier) and a Send to echo -> join, which loops
/// back to prep for a second round. ask asks a question every round; prep writes a note too
/// large to stay inline, join a small one over it.
sg::state_graph<st> probe_graph() {
    sg::state_graph<st> g("corruption_probe");
    auto at = [](const st& s) { return "@" + std::to_string(s.round); };
    g.add_node("prep", [at](const st& s) {
        std::string note;
        while (note.size() < 1500) note += "prep" + at(s) + ";";
        return upd{}.set<&st::log>({"prep" + at(s)}).set<&st::note>(note);
    });
    g.add_node("fan_a", [at](const st& s) { return upd{}.set<&st::log>({"a" + at(s)}); });
    g.add_node("fan_b", [at](const st& s) { return upd{}.set<&st::log>({"b" + at(s)}); });
    g.add_node("echo", [](const st& arg) { return upd{}.set<&st::log>({"echo:" + arg.note}); });
    g.add_node("ask", [at](const st& s, sg::context& ctx) -> boost::asio::awaitable<upd> {
        const int n = ctx.interrupt_now<int>(json::object{{"q", "round" + at(s)}});
        co_return upd{}.set<&st::answer>(s.answer + n).set<&st::log>({"ask" + at(s)});
    });
    g.add_node("join", [at](const st& s) {
        return upd{}.set<&st::round>(s.round + 1).set<&st::note>("joined" + at(s)).set<&st::log>({"join" + at(s)});
    });
    g.add_edge(sg::START, "prep");
    for (const char* n : {"fan_a", "fan_b", "ask"}) g.add_edge("prep", n);
    g.add_conditional_edges(
        "prep", [at](const st& s) { return std::vector<sg::send>{sg::send("echo", st{{}, "sent" + at(s), 0, 0})}; },
        std::vector<std::string>{"echo"});
    g.add_edge(std::vector<std::string>{"fan_a", "fan_b", "ask"}, "join").add_edge("echo", "join");
    g.add_conditional_edges(
        "join", [](const st& s) -> std::string { return s.round < 2 ? "again" : "end"; },
        std::map<std::string, std::string>{{"again", "prep"}, {"end", sg::END}});
    return g;
}

/// The threads of the probe file.
const std::vector<std::string> threads{"done", "asking", "first"};
/// The thread with a pending question after one answered: the one resumed.
const std::string asking = "asking";
constexpr int resume_answer = 6;

// -- JSON of what the engine reads ----------------------------------------------------------------
json::value task_json(const sg::task_snapshot& t) {
    json::array interrupts;
    for (const auto& i : t.interrupts) interrupts.push_back(json::object{{"id", i.id}, {"node", i.node}, {"value", i.value}});
    json::object o{{"id", t.id}, {"name", t.name}, {"interrupts", std::move(interrupts)}};
    if (t.error) o["error"] = *t.error;
    if (t.result) o["result"] = *t.result;
    return o;
}

/// Everything a snapshot says, as JSON.
json::value snapshot_json(const sg::state_snapshot<st>& s) {
    json::array tasks;
    for (const auto& t : s.tasks) tasks.push_back(task_json(t));
    return json::object{{"values", json::value_from(s.values)}, {"step", s.step}, {"source", s.source},
                        {"checkpoint_id", s.checkpoint_id}, {"parent", s.parent_checkpoint_id}, {"metadata", s.metadata},
                        {"next", json::value_from(s.next)}, {"tasks", std::move(tasks)}};
}

/// A run's result without the ids a new run makes anew (checkpoint and interrupt ids).
json::value result_json(const sg::run_result<st>& r) {
    json::array interrupts;
    for (const auto& i : r.interrupts) interrupts.push_back(json::object{{"node", i.node}, {"value", i.value}});
    return json::object{{"interrupted", r.interrupted()}, {"values", json::value_from(r.values)},
                        {"step", r.step}, {"next", json::value_from(r.next)}, {"interrupts", std::move(interrupts)}};
}

// -- reading a file ---------------------------------------------------------------------------------
/// Text of a read: JSON, or "!<kind> <message>" for a stategraph error, or "?<what>" for any other.
template <class F>
std::string text_of(F&& read) {
    try {
        return read();
    } catch (const sg::graph_error& e) {
        return "!" + std::string(sg::to_string(e.kind())) + " " + e.what();
    } catch (const std::exception& e) {
        return "?" + std::string(e.what());
    }
}

/// The probe graph on a saver of its own (no thread of its own: SQLite runs on the caller's).
struct reader {
    std::shared_ptr<cp::sqlite_saver> saver;
    sg::compiled_graph<st> app;
    explicit reader(const std::string& db, bool read_only = false)
        : saver(std::make_shared<cp::sqlite_saver>(cp::sqlite_options{
              .path = db, .synchronous = cp::sqlite_options::sync_mode::off, .read_only = read_only, .own_thread = false})),
          app(probe_graph().compile({.checkpointer = saver})) {}

    std::string state(const std::string& thread) const {
        return text_of([&] { return json::serialize(snapshot_json(run(app.get_state(thread)))); });
    }
    std::string history(const std::string& thread) const {
        return text_of([&] {
            json::array out;
            for (const auto& s : run(app.get_state_history(thread))) out.push_back(snapshot_json(s));
            return json::serialize(out);
        });
    }
    std::string resume() const {
        return text_of([&] { return json::serialize(result_json(run(app.invoke(sg::resume(resume_answer), thread(asking))))); });
    }
};

/// What the undamaged file reads as.
struct truth_t {
    std::map<std::string, std::string> state, history; ///< by thread
    std::string resumed;                              ///< resuming `asking` (result_json)
};

/// What a job found: a token per read ("state=same", "history=typed:corrupt_checkpoint", ...)
/// and the details of anything that is neither the truth nor a typed error.
struct verdict {
    std::string tokens, details;

    void add(const std::string& read, const std::string& outcome, const std::string& detail = {}) {
        tokens += (tokens.empty() ? "" : " ") + read + "=" + outcome;
        if (!detail.empty()) details += (details.empty() ? "" : "; ") + read + ": " + detail;
    }
    /// Judges a read against the truth: same, typed:<kind>, changed, untyped. With `names`, a
    /// corrupt_checkpoint error must name each of them (thread, checkpoint or version), else
    /// it is "unnamed:corrupt_checkpoint".
    void judge(const std::string& read, const std::string& got, const std::string& truth,
               const std::vector<std::string>& names = {}) {
        if (got == truth) return add(read, "same");
        if (got.starts_with("!")) {
            const auto kind = got.substr(1, got.find(' ') - 1);
            for (const auto& n : names)
                if (kind == "corrupt_checkpoint" && got.find(n) == std::string::npos)
                    return add(read, "unnamed:" + kind, "does not name " + n + ": " + got.substr(0, 300));
            return add(read, "typed:" + kind);
        }
        if (got.starts_with("?")) return add(read, "untyped", got.substr(0, 300));
        add(read, "changed", first_difference(got, truth));
    }
    std::string line() const { return tokens + (details.empty() ? "" : " | " + details); }

    static std::string first_difference(const std::string& got, const std::string& truth) {
        std::size_t i = 0;
        while (i < got.size() && i < truth.size() && got[i] == truth[i]) ++i;
        const auto from = i > 80 ? i - 80 : 0;
        return "reads back different at character " + std::to_string(i) + ": ..." + got.substr(from, 160) +
               "... where the truth is ..." + truth.substr(from, 160) + "...";
    }
};

/// Reads every thread of `threads_read` from a saver on `db` and judges them; with `resume`,
/// also resumes `asking` on that file (callers pass a copy they may change).
void judge_file(verdict& v, const std::string& db, const truth_t& truth, const std::vector<std::string>& threads_read,
                bool resume, const std::vector<std::string>& names = {}, bool read_only = false) {
    std::optional<reader> r;
    const auto opened = text_of([&] {
        r.emplace(db, read_only);
        return std::string();
    });
    if (!opened.empty()) return v.judge("open", opened, "");
    for (const auto& t : threads_read) {
        auto with_thread = names;
        if (!names.empty()) with_thread.push_back("'" + t + "'");
        v.judge("state:" + t, r->state(t), truth.state.at(t), with_thread);
        v.judge("history:" + t, r->history(t), truth.history.at(t), with_thread);
    }
    if (resume) v.judge("resume", r->resume(), truth.resumed);
}

// -- files, raw ------------------------------------------------------------------------------------
std::string file_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_file(const std::string& path, std::string_view bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}
/// `to` becomes a copy of `from` (and of its -wal with `wal`), without a -wal or -shm left from before.
void copy_db(const std::string& from, const std::string& to, bool wal = false) {
    for (const char* s : {"", "-wal", "-shm", "-leases"}) fs::remove(to + s);
    fs::copy_file(from, to);
    if (wal) fs::copy_file(from + "-wal", to + "-wal");
}

/// A connection of its own to a file, to read or damage it behind the saver's back. Throws
/// std::runtime_error (no Boost.Test macros: it also runs in the forked children).
class sql_file {
public:
    struct arg {
        std::string bytes;
        bool blob = false;
    };
    using row = std::vector<std::optional<std::string>>;

    explicit sql_file(const std::string& path) {
        if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE, cp::detail::checksum_vfs()) != SQLITE_OK)
            throw std::runtime_error("cannot open " + path + ": " + sqlite3_errmsg(db_));
        sqlite3_busy_timeout(db_, 5000);
        exec("PRAGMA synchronous = OFF"); // the damage need not survive a power cut
    }
    ~sql_file() { sqlite3_close(db_); }
    sql_file(const sql_file&) = delete;
    sql_file& operator=(const sql_file&) = delete;

    /// The rows `sql` returns (text and blobs as bytes, NULL as nullopt); `args` bind ?1, ?2, ...
    std::vector<row> query(const std::string& sql, const std::vector<arg>& args = {}) {
        sqlite3_stmt* s = nullptr;
        if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
            throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
        for (std::size_t i = 0; i < args.size(); ++i) {
            const auto& a = args[i];
            const int at = static_cast<int>(i + 1);
            if (a.blob) sqlite3_bind_blob64(s, at, a.bytes.data(), a.bytes.size(), SQLITE_TRANSIENT);
            else sqlite3_bind_text64(s, at, a.bytes.data(), a.bytes.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
        }
        std::vector<row> out;
        int rc;
        while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
            row r;
            for (int c = 0; c < sqlite3_column_count(s); ++c) {
                if (sqlite3_column_type(s, c) == SQLITE_NULL) {
                    r.emplace_back();
                    continue;
                }
                const auto* p = static_cast<const char*>(sqlite3_column_blob(s, c));
                r.emplace_back(std::string(p ? p : "", static_cast<std::size_t>(sqlite3_column_bytes(s, c))));
            }
            out.push_back(std::move(r));
        }
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) throw std::runtime_error(sql + ": " + sqlite3_errmsg(db_));
        return out;
    }
    /// Runs a statement; returns how many rows it changed.
    int exec(const std::string& sql, const std::vector<arg>& args = {}) {
        query(sql, args);
        return sqlite3_changes(db_);
    }
    std::string text(const std::string& sql) {
        auto rows = query(sql);
        return rows.empty() || rows[0].empty() || !rows[0][0] ? std::string() : *rows[0][0];
    }
    /// A consistent copy of the database (the backup API) in `to`, a fresh file.
    void copy_to(const std::string& to) {
        for (const char* s : {"", "-wal", "-shm", "-leases"}) fs::remove(to + s);
        sqlite3* dest = nullptr;
        if (sqlite3_open_v2(to.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, cp::detail::checksum_vfs()) != SQLITE_OK)
            throw std::runtime_error("cannot open " + to);
        sqlite3_exec(dest, "PRAGMA synchronous = OFF; PRAGMA journal_mode = OFF", nullptr, nullptr, nullptr);
        sqlite3_backup* b = sqlite3_backup_init(dest, "main", db_, "main");
        const int rc = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
        sqlite3_backup_finish(b);
        sqlite3_close(dest);
        if (rc != SQLITE_DONE) throw std::runtime_error("backup to " + to + " failed");
    }

private:
    sqlite3* db_ = nullptr;
};

/// One stored column value of one row: what the row probe flips.
struct cell {
    std::string kind; ///< record, vals, blob, write, graph
    std::string table, column;
    std::vector<std::pair<std::string, std::string>> key; ///< primary key columns and values
    std::string bytes;                                    ///< as stored
    std::vector<std::string> threads;                     ///< the threads that read it
    std::string address; ///< what an error about it must name: its checkpoint id or version

    std::string describe() const {
        std::string out = table + "." + column + " (" + kind + ", " + std::to_string(bytes.size()) + " bytes) of";
        for (const auto& [k, v] : key) out += " " + k + "=" + v;
        return out;
    }
    /// Stores `bytes` in this cell of the file behind `f`.
    void store(sql_file& f, const std::string& value) const {
        std::string sql = "UPDATE " + table + " SET " + column + " = ?1 WHERE ";
        std::vector<sql_file::arg> args{{value, true}};
        for (std::size_t i = 0; i < key.size(); ++i) {
            sql += (i ? " AND " : "") + key[i].first + " = ?" + std::to_string(i + 2);
            args.push_back({key[i].second});
        }
        if (f.exec(sql, args) != 1) throw std::runtime_error("no such row: " + describe());
    }
};

/// Every stored record, inline value string, blob, pending write and graph shape of `db`.
std::vector<cell> cells_of(const std::string& db) {
    sql_file f(db);
    std::vector<cell> out;
    for (auto& r : f.query("SELECT thread_id, ns, id, record, vals FROM checkpoints ORDER BY thread_id, id")) {
        std::vector<std::pair<std::string, std::string>> key{{"thread_id", *r[0]}, {"ns", *r[1]}, {"id", *r[2]}};
        out.push_back({"record", "checkpoints", "record", key, *r[3], {*r[0]}, *r[2]});
        if (r[4]) out.push_back({"vals", "checkpoints", "vals", key, *r[4], {*r[0]}, *r[2]});
    }
    for (auto& r : f.query("SELECT thread_id, ns, channel, version, value FROM blobs ORDER BY thread_id, version"))
        out.push_back({"blob", "blobs", "value", {{"thread_id", *r[0]}, {"ns", *r[1]}, {"channel", *r[2]}, {"version", *r[3]}},
                       *r[4], {*r[0]}, *r[3]});
    for (auto& r : f.query("SELECT thread_id, ns, checkpoint_id, task_id, channel, value FROM writes "
                           "ORDER BY thread_id, checkpoint_id, seq"))
        out.push_back({"write", "writes", "value",
                       {{"thread_id", *r[0]}, {"ns", *r[1]}, {"checkpoint_id", *r[2]}, {"task_id", *r[3]}, {"channel", *r[4]}},
                       *r[5], {*r[0]}, *r[2]});
    for (auto& r : f.query("SELECT version, value FROM graphs"))
        out.push_back({"graph", "graphs", "value", {{"version", *r[0]}}, *r[1], threads, *r[0]});
    return out;
}

// -- jobs in forked children -------------------------------------------------------------------------
/// Runs jobs `from`..n-1 in this (forked) process, writing one line per job to `fd`; never returns.
[[noreturn]] void child_main(int fd, std::size_t from, std::size_t n, const std::function<std::string(std::size_t)>& job) {
    // Boost.Test's handlers would report a crash here as a test failure and run on: die instead,
    // so that the parent sees the signal.
    for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) ::signal(s, SIG_DFL);
    for (std::size_t i = from; i < n; ++i) {
        std::string line;
        try {
            line = job(i);
        } catch (const std::exception& e) {
            line = std::string("untyped ") + e.what();
        } catch (...) {
            line = "untyped (not a std::exception)";
        }
        std::replace(line.begin(), line.end(), '\n', ' ');
        line += '\n';
        for (std::size_t done = 0; done < line.size();) {
            const auto w = ::write(fd, line.data() + done, line.size() - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) ::_exit(3);
            done += static_cast<std::size_t>(w);
        }
    }
    ::_exit(0);
}

/// Runs jobs 0..n-1, one after another, in forked children, and returns each job's line. A job
/// that kills its child reads "crash <signal or exit code>"; one still running `limit` after the
/// previous one ended reads "hang" (its child is killed). Either way the next job goes on in a new
/// child. The children share nothing with the test but what was in memory at the fork: the caller
/// must hold no open database and no thread.
std::vector<std::string> run_isolated(std::size_t n, const std::function<std::string(std::size_t)>& job,
                                      std::chrono::milliseconds limit = 30s) {
    std::vector<std::string> out(n);
    std::size_t next = 0;
    std::cout.flush();
    std::fflush(nullptr);
    while (next < n) {
        int fds[2];
        BOOST_REQUIRE(::pipe(fds) == 0);
        const pid_t pid = ::fork();
        BOOST_REQUIRE(pid >= 0);
        if (pid == 0) {
            ::close(fds[0]);
            child_main(fds[1], next, n, job);
        }
        ::close(fds[1]);
        std::string buffer;
        bool hung = false;
        auto deadline = std::chrono::steady_clock::now() + limit;
        for (;;) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
            pollfd p{fds[0], POLLIN, 0};
            const int r = left.count() > 0 ? ::poll(&p, 1, static_cast<int>(left.count())) : 0;
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) {
                hung = true;
                break;
            }
            char chunk[4096];
            const auto got = ::read(fds[0], chunk, sizeof chunk);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) break; // the child ended
            buffer.append(chunk, static_cast<std::size_t>(got));
            for (std::size_t eol; (eol = buffer.find('\n')) != std::string::npos && next < n;) {
                out[next++] = buffer.substr(0, eol);
                buffer.erase(0, eol + 1);
                deadline = std::chrono::steady_clock::now() + limit;
            }
        }
        ::close(fds[0]);
        if (hung) ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        if (next < n) {
            out[next++] = hung                   ? "hang"
                          : WIFSIGNALED(status) ? "crash signal " + std::to_string(WTERMSIG(status))
                                                : "crash exit " + std::to_string(WEXITSTATUS(status));
        }
    }
    return out;
}

/// Counts of a probe's outcomes: reads that gave the truth, typed errors by kind, and every
/// outcome that breaks the rule (a different result, an untyped error, a crash, a hang).
struct tally {
    std::size_t jobs = 0, reads = 0, same = 0;
    std::map<std::string, std::size_t> typed;
    std::vector<std::string> broken;
    /// Silent changes from damage outside every seal, rows gone and none altered (see
    /// only_rows_gone): counted and reported; failures only with STATEGRAPH_CORRUPTION_STRICT=1.
    std::vector<std::string> rows_gone;

    /// Adds a job's line; `what` describes the damage, for the report of a broken rule.
    void add(const std::string& what, const std::string& line) {
        ++jobs;
        const auto bar = line.find(" | ");
        std::istringstream tokens(line.substr(0, bar));
        bool bad = false, gone = false;
        for (std::string t; tokens >> t;) {
            if (t.starts_with("#")) continue; // a figure, not a read
            const auto eq = t.find('=');
            if (eq == std::string::npos) { // crash, hang, untyped: the whole job
                bad = true;
                break;
            }
            const auto outcome = t.substr(eq + 1);
            ++reads;
            if (outcome == "same") ++same;
            else if (outcome.starts_with("typed:")) ++typed[outcome.substr(6)];
            else if (outcome == "rows_gone" && !std::getenv("STATEGRAPH_CORRUPTION_STRICT")) gone = true;
            else bad = true;
        }
        if (bad) broken.push_back(what + ": " + line);
        else if (gone) rows_gone.push_back(what + ": " + line);
    }
    std::size_t typed_total() const {
        std::size_t n = 0;
        for (const auto& [k, c] : typed) n += c;
        return n;
    }
    std::string kinds() const {
        std::string out;
        for (const auto& [k, c] : typed) out += (out.empty() ? "" : ", ") + std::to_string(c) + " " + k;
        return out.empty() ? "none" : out;
    }
    /// Fails the test once per broken outcome (the first 25 spelled out; all of them, and the
    /// files read with rows gone, in the file STATEGRAPH_CORRUPTION_REPORT names).
    void check(const std::string& probe) const {
        if (const char* report = std::getenv("STATEGRAPH_CORRUPTION_REPORT")) {
            std::ofstream out(report, std::ios::app);
            for (const auto& b : broken) out << probe << ": " << b << "\n";
            for (const auto& g : rows_gone) out << probe << " (rows gone): " << g << "\n";
        }
        for (const auto& g : rows_gone) BOOST_TEST_MESSAGE(probe << ": rows gone without an error: " << g);
        BOOST_WARN_MESSAGE(rows_gone.empty(), probe << ": " << rows_gone.size()
                                                    << " damaged files read back with rows gone and no error: the damage hit "
                                                       "bytes no seal covers (a row's key, the b-tree around it); "
                                                       "STATEGRAPH_CORRUPTION_STRICT=1 fails them");
        for (std::size_t i = 0; i < broken.size() && i < 25; ++i) BOOST_ERROR(probe << ": " << broken[i]);
        BOOST_TEST(broken.empty(), probe << ": " << broken.size() << " of " << jobs
                                         << " damaged files read back as something other than the truth or a typed error");
    }
};

// -- the probe file ----------------------------------------------------------------------------------
/// The probe file, built once per test case: `pristine` (closed, its WAL folded in) and `live`
/// with `live-wal` (copied while the writer still had it open, so the WAL holds its last commits),
/// and the truth both read back as.
struct probe_file {
    temp_dir dir;
    std::string pristine = dir.file("pristine.db"), live = dir.file("live.db");
    truth_t truth;

    probe_file() {
        const std::string built = dir.file("built.db");
        {
            auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = built});
            auto app = probe_graph().compile({.checkpointer = saver});
            // done: both questions answered, then edited by hand (an update_state checkpoint).
            BOOST_REQUIRE(run(app.invoke(upd{}, thread("done"))).interrupted());
            BOOST_REQUIRE(run(app.invoke(sg::resume(3), thread("done"))).interrupted());
            BOOST_REQUIRE(!run(app.invoke(sg::resume(4), thread("done"))).interrupted());
            run(app.update_state("done", upd{}.set<&st::note>("edited by hand")));
            // asking: the second question pending, its siblings' writes saved against its step.
            BOOST_REQUIRE(run(app.invoke(upd{}, thread(asking))).interrupted());
            BOOST_REQUIRE(run(app.invoke(sg::resume(5), thread(asking))).interrupted());
            // first: the first question pending.
            BOOST_REQUIRE(run(app.invoke(upd{}, thread("first"))).interrupted());
            BOOST_REQUIRE(fs::exists(built + "-wal"));
            copy_db(built, live, true);
        }
        copy_db(built, pristine); // closing the last connection folded the WAL into the file
        BOOST_REQUIRE(!fs::exists(built + "-wal"));

        const std::string copy = dir.file("truth.db");
        copy_db(pristine, copy);
        {
            reader r(copy);
            for (const auto& t : threads) {
                truth.state[t] = r.state(t);
                truth.history[t] = r.history(t);
                BOOST_REQUIRE_MESSAGE(truth.state[t].starts_with("{"), truth.state[t]);
                BOOST_REQUIRE_MESSAGE(truth.history[t].starts_with("["), truth.history[t]);
            }
            // Reading is deterministic: the same file reads the same twice.
            BOOST_REQUIRE(r.state(asking) == truth.state[asking]);
            truth.resumed = r.resume();
            BOOST_REQUIRE_MESSAGE(truth.resumed.starts_with("{"), truth.resumed);
        }
        // The file holds every kind of row the probe damages.
        sql_file f(pristine);
        BOOST_REQUIRE(std::stoi(f.text("SELECT count(*) FROM blobs")) >= 4);
        BOOST_REQUIRE(std::stoi(f.text("SELECT count(*) FROM checkpoints WHERE vals IS NOT NULL")) >= 4);
        BOOST_REQUIRE(std::stoi(f.text("SELECT count(*) FROM writes WHERE thread_id = 'asking' AND channel = '__interrupt__'")) >= 1);
        BOOST_REQUIRE(std::stoi(f.text("SELECT count(*) FROM graphs")) == 1);
    }
};

/// The byte positions flipped in a stored value of `size` bytes: every one of a small value;
/// of a larger one its first six (a seal's marker and checksum, the payload's format byte), its
/// last, and ten spread over the rest.
std::vector<std::size_t> positions_of(std::size_t size) {
    std::vector<std::size_t> out;
    if (size <= 96) {
        for (std::size_t i = 0; i < size; ++i) out.push_back(i);
        return out;
    }
    for (std::size_t i = 0; i < 6; ++i) out.push_back(i);
    for (std::size_t k = 1; k <= 10; ++k) out.push_back(6 + (size - 7) * k / 11);
    out.push_back(size - 1);
    return out;
}

/// The record of `c` as the SQLite saver stores it in thread `thread`: well-formed, sealed to its
/// row's thread, namespace and id and to the columns beside it (parent, step, source).
std::string sealed_record(const cp::checkpoint& c, const std::string& thread) {
    return cp::codec::seal(cp::codec::encode_record(c), {thread, "", c.id, c.parent_id, std::to_string(c.step), c.source});
}
/// The checkpoint stored in row (`thread`, `id`) of `f`, decoded with the savers' codec.
cp::checkpoint stored_checkpoint(sql_file& f, const std::string& thread, const std::string& id) {
    auto rows = f.query("SELECT parent_id, step, source, record FROM checkpoints WHERE thread_id = ?1 AND ns = '' AND id = ?2",
                        {{thread}, {id}});
    if (rows.size() != 1) throw std::runtime_error("no checkpoint " + id + " in thread " + thread);
    cp::checkpoint c;
    c.id = id;
    c.parent_id = *rows[0][0];
    c.step = std::stoll(*rows[0][1]);
    c.source = *rows[0][2];
    cp::codec::decode_record(cp::codec::unseal(*rows[0][3], {thread, "", id, c.parent_id, *rows[0][1], c.source}), c);
    return c;
}

/// Replaces, in the arrays of a frontier, the first node name `from` (a pulled node, or the node
/// of a Send) with `to`; false when the frontier names no such node.
bool rename_in_frontier(json::value& frontier, const std::string& from, const std::string& to) {
    for (auto& [key, list] : frontier.as_object()) {
        if (!list.is_array()) continue;
        for (auto& e : list.as_array()) {
            if (e.is_string() && e.as_string() == from) {
                e = json::string(to);
                return true;
            }
            if (auto* o = e.if_object(); o && o->contains("node") && o->at("node") == json::value(from)) {
                (*o)["node"] = json::string(to);
                return true;
            }
        }
    }
    return false;
}

/// Pages of the file by number: the table that owns each and its kind (the dbstat table), to say
/// where a flipped byte landed.
std::map<std::size_t, std::string> page_owners(const std::string& db) {
    std::map<std::size_t, std::string> out;
    try {
        sql_file f(db);
        for (auto& r : f.query("SELECT pageno, name, pagetype FROM dbstat"))
            out[std::stoul(*r[0])] = *r[1] + " " + (r[2] ? *r[2] : "");
    } catch (const std::exception&) {
        // a SQLite without dbstat: flips are reported by offset only
    }
    return out;
}

/// Every thread's state and history read from `db` (JSON, or the error each read gave), or the
/// error opening it gave: what a reader of the whole file sees.
std::string read_everything(const std::string& db) {
    std::optional<reader> r;
    const auto opened = text_of([&] {
        r.emplace(db);
        return std::string();
    });
    if (!opened.empty()) return opened;
    std::string out;
    for (const auto& t : threads) out += r->state(t) + "\n" + r->history(t) + "\n";
    return out;
}

/// The checkpoints of a history (JSON text) by id, without next and tasks (they depend on
/// pending writes saved after the checkpoint).
std::map<std::string, json::value> checkpoints_by_id(const std::string& history) {
    std::map<std::string, json::value> out;
    const auto list = json::parse(history);
    for (const auto& e : list.as_array()) {
        auto o = e.as_object();
        o.erase("next");
        o.erase("tasks");
        out[std::string(o.at("checkpoint_id").as_string())] = o;
    }
    return out;
}

/// Whether `everything` (read_everything of a committed earlier state of the file) is a prefix
/// of the truth: every checkpoint it lists is the truth's checkpoint of the same id, unchanged,
/// and a thread it does not hold yet reads as thread_not_found. Empty when it is; else why not.
std::string prefix_problem(const std::string& everything, const truth_t& truth) {
    std::istringstream lines(everything);
    for (const auto& t : threads) {
        std::string state, history;
        if (!std::getline(lines, state) || !std::getline(lines, history)) return "unreadable: " + everything.substr(0, 300);
        if (history.starts_with("!") || history.starts_with("?")) return "history of " + t + ": " + history.substr(0, 300);
        const auto got = checkpoints_by_id(history), want = checkpoints_by_id(truth.history.at(t));
        if (got.empty() && !state.starts_with("!thread_not_found")) return "state of " + t + " without history: " + state.substr(0, 300);
        if (!got.empty() && !state.starts_with("{")) return "state of " + t + ": " + state.substr(0, 300);
        for (const auto& [id, c] : got) {
            auto it = want.find(id);
            if (it == want.end()) return "checkpoint " + id + " of " + t + " is not in the truth";
            if (it->second != c) return "checkpoint " + id + " of " + t + " differs from the truth";
        }
    }
    return {};
}

/// The end offsets of the transactions committed in a WAL (after each commit frame, in order),
/// as SQLite recovers them: frames with the header's salts, up to the first that has others.
std::vector<std::size_t> wal_commits(const std::string& wal) {
    auto be32 = [&](std::size_t at) {
        const auto* p = reinterpret_cast<const unsigned char*>(wal.data() + at);
        return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
    };
    std::vector<std::size_t> out;
    if (wal.size() < 32 || (be32(0) & ~1u) != 0x377f0682u) return out;
    const std::size_t page = be32(8);
    for (std::size_t at = 32; at + 24 + page <= wal.size(); at += 24 + page) {
        if (be32(at + 8) != be32(16) || be32(at + 12) != be32(20)) break;
        if (be32(at + 4) != 0) out.push_back(at + 24 + page);
    }
    return out;
}

// -- the full-disk graph --------------------------------------------------------------------------
struct fill_state {
    std::string big; ///< 48 KB, a new one every step
    int n = 0;
};
BOOST_DESCRIBE_STRUCT(fill_state, (), (big, n))

/// START -> fill, looping: each step writes a new 48 KB value (run with a breakpoint after fill,
/// one step per call).
sg::state_graph<fill_state> fill_graph() {
    sg::state_graph<fill_state> g("fill");
    g.add_node("fill", [](const fill_state& s) {
        return sg::update<fill_state>{}.set<&fill_state::big>(std::string(48u << 10, char('a' + s.n % 26))).set<&fill_state::n>(s.n + 1);
    });
    g.add_edge(sg::START, "fill");
    g.add_conditional_edges(
        "fill", [](const fill_state& s) -> std::string { return s.n < 1000 ? "more" : "end"; },
        std::map<std::string, std::string>{{"more", "fill"}, {"end", sg::END}});
    return g;
}

/// Whether `damaged` reads, through the saver, as the pristine file with rows gone and none
/// altered: every checkpoint it lists is the pristine one of that id, unchanged, and its pending
/// writes are some of that checkpoint's. Damage outside every seal does that (a row's key, or
/// the b-tree page around the rows: they move out of reach), and the engine cannot tell a row
/// that is gone from one never written. Returns what is gone; empty when something reads back
/// altered (what the seals must never let through) or nothing explains the change.
std::string only_rows_gone(const std::string& pristine, const std::string& damaged) {
    // The thread's checkpoints (its head only when its history does not read) by id.
    auto rows = [](const std::string& db, const std::string& thread, bool head_only) {
        cp::sqlite_saver saver(cp::sqlite_options{.path = db, .read_only = true, .own_thread = false});
        std::map<std::string, std::pair<std::string, std::multiset<std::string>>> out; // id -> checkpoint, writes
        std::vector<cp::checkpoint_tuple> tuples;
        if (!head_only) tuples = run(saver.list(thread, "", {}));
        else if (auto head = run(saver.get(thread, "", std::nullopt))) tuples.push_back(std::move(*head));
        for (auto& t : tuples) {
            json::object c{{"parent", t.cp.parent_id}, {"step", t.cp.step}, {"source", t.cp.source},
                           {"versions", json::value_from(t.cp.versions)}, {"values", t.cp.values},
                           {"frontier", t.cp.frontier}, {"metadata", t.cp.metadata}, {"signature", t.cp.signature}};
            auto& [checkpoint, writes] = out[t.cp.id];
            checkpoint = json::serialize(c);
            for (const auto& w : t.writes)
                writes.insert(json::serialize(json::array{json::string(w.task_id), json::string(w.task_name), json::string(w.channel), w.value}));
        }
        return out;
    };
    std::size_t checkpoints_gone = 0, writes_gone = 0;
    for (const auto& thread : threads) {
        decltype(rows(pristine, thread, false)) before, after;
        try {
            before = rows(pristine, thread, false);
            after = rows(damaged, thread, false);
        } catch (const sg::graph_error&) {
            try {
                auto head = rows(damaged, thread, true);
                if (head.empty()) continue;
                after = std::move(head);
                before.erase(before.begin(), before.lower_bound(after.begin()->first)); // its head's history is unread
            } catch (const sg::graph_error&) {
                continue; // this thread reads as a typed error
            }
        }
        for (const auto& [id, c] : after) {
            auto it = before.find(id);
            if (it == before.end() || it->second.first != c.first) return {};
            for (const auto& w : c.second)
                if (!it->second.second.count(w)) return {};
            writes_gone += it->second.second.size() - c.second.size();
        }
        for (const auto& [id, c] : before)
            if (!after.count(id)) ++checkpoints_gone, writes_gone += c.second.size();
    }
    if (checkpoints_gone + writes_gone == 0) return {};
    return std::to_string(checkpoints_gone) + " checkpoints and " + std::to_string(writes_gone) +
           " pending writes gone, nothing read back altered; ";
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace corruption

using namespace corruption;

BOOST_AUTO_TEST_SUITE(corruption_probe)

// Every byte of small rows (16 of large ones), two masks each, and every mask on the first byte
// of one row of each kind: each flip, read back through the engine, gives corrupt_checkpoint
// naming the thread and the checkpoint or version, or (a byte nothing reads) exactly the truth.
BOOST_AUTO_TEST_CASE(row_flips) {
    const auto t0 = std::chrono::steady_clock::now();
    probe_file file;
    const auto cells = cells_of(file.pristine);
    struct flip {
        std::size_t cell, position;
        unsigned char mask;
    };
    // The rows resuming `asking` reads: its head's record, values and pending writes, and the
    // values its versions name. Every flip of them is also resumed; of its other rows, every
    // fourth (a resume reads the head only: the reads of the history cover them).
    std::set<std::string> head_reads;
    {
        sql_file f(file.pristine);
        const auto head = f.text("SELECT max(id) FROM checkpoints WHERE thread_id = 'asking'");
        head_reads.insert(head);
        for (const auto& [channel, version] : stored_checkpoint(f, asking, head).versions) head_reads.insert(version);
    }
    std::vector<flip> flips;
    std::set<std::string> every_mask_done;
    std::map<std::string, std::size_t> cells_by_kind, flips_by_kind;
    for (std::size_t c = 0; c < cells.size(); ++c) {
        ++cells_by_kind[cells[c].kind];
        for (auto p : positions_of(cells[c].bytes.size()))
            for (unsigned char m : {0x01, 0x80}) flips.push_back({c, p, m});
        if (every_mask_done.insert(cells[c].kind).second)
            for (int m = 2; m < 256; ++m)
                if (m != 0x80) flips.push_back({c, 0, static_cast<unsigned char>(m)});
    }

    // In the child: one copy of the file, each flip made and undone in place; the resume runs
    // on a copy of the damaged file.
    const std::string work = file.dir.file("work.db"), scratch = file.dir.file("scratch.db");
    std::optional<sql_file> raw;
    auto job = [&](std::size_t i) {
        const auto& f = flips[i];
        const auto& c = cells[f.cell];
        if (!raw) {
            copy_db(file.pristine, work);
            raw.emplace(work);
        }
        auto bytes = c.bytes;
        bytes[f.position] = static_cast<char>(bytes[f.position] ^ f.mask);
        c.store(*raw, bytes);
        verdict v;
        judge_file(v, work, file.truth, c.threads, false, {c.address});
        if (std::find(c.threads.begin(), c.threads.end(), asking) != c.threads.end() &&
            (head_reads.count(c.address) || i % 4 == 0)) {
            raw->copy_to(scratch);
            judge_file(v, scratch, file.truth, {}, true);
        }
        c.store(*raw, c.bytes);
        return v.line();
    };
    const auto lines = run_isolated(flips.size(), job);

    tally t;
    for (std::size_t i = 0; i < flips.size(); ++i) {
        const auto& f = flips[i];
        ++flips_by_kind[cells[f.cell].kind];
        std::ostringstream what;
        what << "byte " << f.position << " ^ 0x" << std::hex << int(f.mask) << std::dec << " of " << cells[f.cell].describe();
        t.add(what.str(), lines[i]);
    }
    t.check("row_flips");
    std::cout << "corruption_probe/row_flips: " << cells.size() << " rows (";
    for (const auto& [k, n] : cells_by_kind) std::cout << n << " " << k << " ";
    std::cout << "), " << flips.size() << " flips (";
    for (const auto& [k, n] : flips_by_kind) std::cout << n << " " << k << " ";
    std::cout << "), " << t.reads << " reads: " << t.typed_total() << " typed errors (" << t.kinds() << "), " << t.same
              << " read the truth, " << t.broken.size() << " broken; " << seconds_since(t0) << " s\n";
}

// Stored data that is well-formed but wrong, re-sealed with a right checksum so that only the
// engine's checks can tell (a frontier or a pending write naming a node or field this graph does
// not have, a version that is not stored, an interrupt without an id), intact bytes standing
// where they do not belong (rows' values swapped, a record or a blob of another checkpoint or
// thread, a write moved to another task), and the columns beside a sealed record (step, source,
// parent): each is a typed error naming the thread, never read as different valid data.
BOOST_AUTO_TEST_CASE(row_edits) {
    const auto t0 = std::chrono::steady_clock::now();
    probe_file file;
    struct edit {
        std::string what, thread;
        std::vector<std::string> names; ///< what an error must name besides the thread
        std::function<void(sql_file&)> apply;
        bool read = true; ///< the edit changes what the thread reads: some read must notice it
    };
    struct stored_write {
        std::string task_id, task_name, channel, value;
    };
    std::vector<edit> edits;
    {
        sql_file f(file.pristine);
        const auto head = f.text("SELECT max(id) FROM checkpoints WHERE thread_id = 'asking'");
        const auto grandparent = f.text("SELECT id FROM checkpoints WHERE thread_id = 'asking' ORDER BY id DESC LIMIT 1 OFFSET 2");
        const auto first_head = f.text("SELECT max(id) FROM checkpoints WHERE thread_id = 'first'");
        const auto hc = stored_checkpoint(f, asking, head);
        std::vector<stored_write> ws;
        for (auto& r : f.query("SELECT task_id, task_name, channel, value FROM writes WHERE thread_id = 'asking' AND "
                               "checkpoint_id = ?1 ORDER BY seq",
                               {{head}}))
            ws.push_back({*r[0], *r[1], *r[2], *r[3]});
        auto write_of = [&](const std::string& node, const std::string& channel) {
            auto it = std::find_if(ws.begin(), ws.end(), [&](const auto& w) { return w.task_name == node && w.channel == channel; });
            BOOST_REQUIRE_MESSAGE(it != ws.end(), "no write of " << node << " to " << channel << " on the head of asking");
            return *it;
        };
        const auto fan_a = write_of("fan_a", "log"), fan_b = write_of("fan_b", "log"), ask = write_of("ask", "__interrupt__");
        // Two rows of one thread whose column holds as many bytes (so that a swap keeps lengths),
        // else the two newest: the lengths of values that extend an earlier version depend on
        // the time between checkpoint ids (a relative reference), so a slow run (sanitizers) may
        // have no two of one length.
        auto same_length = [&](const std::string& table, const std::string& key, const std::string& column,
                               const std::string& thread) -> std::pair<std::string, std::string> {
            auto rows = f.query("SELECT a." + key + ", b." + key + " FROM " + table + " a JOIN " + table + " b ON a.thread_id = b.thread_id AND length(a." +
                                column + ") = length(b." + column + ") AND a." + key + " < b." + key + " WHERE a.thread_id = ?1 AND a." +
                                column + " IS NOT NULL ORDER BY b." + key + " DESC LIMIT 1",
                                {{thread}});
            if (rows.empty()) {
                BOOST_TEST_MESSAGE("no two rows of " << table << "." << column << " of one length in " << thread
                                                     << ": the two newest are swapped");
                auto newest = f.query("SELECT " + key + " FROM " + table + " WHERE thread_id = ?1 AND " + column +
                                          " IS NOT NULL ORDER BY " + key + " DESC LIMIT 2",
                                      {{thread}});
                BOOST_REQUIRE_MESSAGE(newest.size() == 2u, "fewer than two rows of " << table << "." << column << " in " << thread);
                return {*newest[1][0], *newest[0][0]};
            }
            return {*rows[0][0], *rows[0][1]};
        };
        const auto blobs = same_length("blobs", "version", "value", "done");
        const auto parent = f.text("SELECT id FROM checkpoints WHERE thread_id = 'asking' ORDER BY id DESC LIMIT 1 OFFSET 1");
        const auto vals = same_length("checkpoints", "id", "vals", "done");
        const auto done_note = f.text("SELECT max(version) FROM blobs WHERE thread_id = 'done' AND channel = 'note'");
        const auto asking_note = f.text("SELECT max(version) FROM blobs WHERE thread_id = 'asking' AND channel = 'note'");
        BOOST_REQUIRE(!done_note.empty() && !asking_note.empty() && !grandparent.empty());

        // The head's record, changed by `change` and sealed again.
        auto record_edit = [&](const std::string& what, const std::function<bool(cp::checkpoint&)>& change) {
            auto c = hc;
            BOOST_REQUIRE_MESSAGE(change(c), what);
            const auto bytes = sealed_record(c, asking);
            edits.push_back({what + " (re-sealed)", asking, {head}, [=](sql_file& db) {
                                 db.exec("UPDATE checkpoints SET record = ?1 WHERE thread_id = 'asking' AND id = ?2", {{bytes, true}, {head}});
                             }});
        };
        // A pending write of the head, its node, channel and value changed and sealed again.
        auto write_edit = [&](const std::string& what, const stored_write& w, const std::string& node, const std::string& channel,
                              const std::string& value) {
            const auto bytes = cp::codec::seal(value, {asking, "", head, w.task_id, node, channel});
            edits.push_back({what + " (re-sealed)", asking, {head}, [=](sql_file& db) {
                                 db.exec("UPDATE writes SET task_name = ?1, channel = ?2, value = ?3 WHERE thread_id = 'asking' AND "
                                         "checkpoint_id = ?4 AND task_id = ?5 AND channel = ?6",
                                         {{node}, {channel}, {bytes, true}, {head}, {w.task_id}, {w.channel}});
                             }});
        };
        // Swaps `column` of two rows of `table` (keyed by `key` within `thread`).
        auto swap_edit = [&](const std::string& what, const std::string& table, const std::string& key, const std::string& column,
                             const std::string& thread, std::pair<std::string, std::string> rows, std::vector<std::string> names) {
            edits.push_back({what, thread, names, [=](sql_file& db) {
                                 const auto select = "SELECT " + column + " FROM " + table + " WHERE thread_id = ?1 AND " + key + " = ?2";
                                 const auto update = "UPDATE " + table + " SET " + column + " = ?1 WHERE thread_id = ?2 AND " + key + " = ?3";
                                 const auto a = db.query(select, {{thread}, {rows.first}}), b = db.query(select, {{thread}, {rows.second}});
                                 db.exec(update, {{*b.at(0).at(0), true}, {thread}, {rows.first}});
                                 db.exec(update, {{*a.at(0).at(0), true}, {thread}, {rows.second}});
                             }});
        };

        record_edit("the frontier names a node the graph does not have",
                    [](cp::checkpoint& c) { return rename_in_frontier(c.frontier, "ask", "a_k"); });
        record_edit("the frontier sends to a node the graph does not have",
                    [](cp::checkpoint& c) { return rename_in_frontier(c.frontier, "echo", "ech0"); });
        record_edit("the frontier is not an object", [](cp::checkpoint& c) {
            c.frontier = json::array{1};
            return true;
        });
        record_edit("the versions name a field the state does not have", [](cp::checkpoint& c) {
            c.versions["lgo"] = c.versions.at("log");
            return true;
        });
        record_edit("the versions name a version that is not stored", [](cp::checkpoint& c) {
            c.versions["note"] = "00000000000";
            return true;
        });
        write_edit("a pending write of a node the graph does not have", fan_a, "fan_z", "log",
                   std::string(cp::codec::unseal(fan_a.value, {asking, "", head, fan_a.task_id, fan_a.task_name, fan_a.channel})));
        write_edit("a pending write to a field the state does not have", fan_a, "fan_a", "lgo",
                   std::string(cp::codec::unseal(fan_a.value, {asking, "", head, fan_a.task_id, fan_a.task_name, fan_a.channel})));
        write_edit("a pending write that is not a list of items", fan_a, "fan_a", "log", "5");
        write_edit("an interrupt without an id", ask, "ask", "__interrupt__", R"([{"x":1}])");
        edits.push_back({"a pending write moved to another task", asking, {head}, [=](sql_file& db) {
                             db.exec("UPDATE writes SET task_id = ?1 WHERE thread_id = 'asking' AND checkpoint_id = ?2 AND task_id = ?3 "
                                     "AND channel = 'log'",
                                     {{ask.task_id}, {head}, {fan_a.task_id}});
                         }});
        BOOST_REQUIRE_EQUAL(fan_a.value.size(), fan_b.value.size());
        swap_edit("two pending writes' values swapped", "writes", "task_id", "value", asking, {fan_a.task_id, fan_b.task_id}, {head});
        swap_edit("two blobs' values swapped", "blobs", "version", "value", "done", blobs, {});
        swap_edit("the records of the head and its parent swapped", "checkpoints", "id", "record", asking, {parent, head}, {head});
        swap_edit("two checkpoints' inline values swapped", "checkpoints", "id", "vals", "done", vals, {});
        edits.push_back({"the record of another thread's checkpoint", asking, {head}, [=](sql_file& db) {
                             db.exec("UPDATE checkpoints SET record = (SELECT record FROM checkpoints WHERE thread_id = 'first' AND "
                                     "id = ?1) WHERE thread_id = 'asking' AND id = ?2",
                                     {{first_head}, {head}});
                         }});
        edits.push_back({"another thread's value of the channel", asking, {}, [=](sql_file& db) {
                             db.exec("UPDATE blobs SET value = (SELECT value FROM blobs WHERE thread_id = 'done' AND version = ?1) "
                                     "WHERE thread_id = 'asking' AND version = ?2",
                                     {{done_note}, {asking_note}});
                         }});
        // The columns beside the sealed record and values: step, source, parent, order of writes.
        edits.push_back({"the step of the head changed", asking, {head}, [=](sql_file& db) {
                             db.exec("UPDATE checkpoints SET step = step + 1 WHERE thread_id = 'asking' AND id = ?1", {{head}});
                         }});
        edits.push_back({"the source of the head changed", asking, {head}, [=](sql_file& db) {
                             db.exec("UPDATE checkpoints SET source = 'fork' WHERE thread_id = 'asking' AND id = ?1", {{head}});
                         }});
        edits.push_back({"the parent of the head changed", asking, {head}, [=](sql_file& db) {
                             db.exec("UPDATE checkpoints SET parent_id = ?1 WHERE thread_id = 'asking' AND id = ?2", {{grandparent}, {head}});
                         }});
        // (The engine applies a step's writes in task order, whatever order they were saved in:
        // this one may read as the truth.)
        edits.push_back({"the order of the pending writes reversed", asking, {head},
                         [=](sql_file& db) {
                             db.exec("UPDATE writes SET seq = -1 - seq WHERE thread_id = 'asking' AND checkpoint_id = ?1", {{head}});
                         },
                         false});
    }

    const std::string work = file.dir.file("work.db");
    auto job = [&](std::size_t i) {
        const auto& e = edits[i];
        copy_db(file.pristine, work);
        {
            sql_file db(work);
            e.apply(db);
        }
        verdict v;
        judge_file(v, work, file.truth, {e.thread}, e.thread == asking, e.names);
        return v.line();
    };
    const auto lines = run_isolated(edits.size(), job);
    tally t;
    for (std::size_t i = 0; i < edits.size(); ++i) {
        t.add(edits[i].what, lines[i]);
        BOOST_TEST_MESSAGE("row_edits: " << edits[i].what << ": " << lines[i]);
        // The damage is read: at least one read notices it.
        if (edits[i].read) BOOST_TEST(lines[i].find("=typed:") != std::string::npos, edits[i].what << " went unnoticed: " << lines[i]);
    }
    t.check("row_edits");
    std::cout << "corruption_probe/row_edits: " << edits.size() << " edits, " << t.reads << " reads: " << t.typed_total()
              << " typed errors (" << t.kinds() << "), " << t.same << " read the truth, " << t.broken.size() << " broken; "
              << seconds_since(t0) << " s\n";
}

// Random bytes of the database file flipped (a fresh copy each): opening it and reading every
// thread, and resuming the interrupted one, give a typed error or the truth.
BOOST_AUTO_TEST_CASE(file_flips) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto seed = env_number("STATEGRAPH_CORRUPTION_SEED", std::random_device{}());
    const auto count = env_number("STATEGRAPH_CORRUPTION_FILE_FLIPS", 100);
    std::cout << "corruption_probe/file_flips: seed " << seed << " (STATEGRAPH_CORRUPTION_SEED=" << seed << " repeats it)\n";
    probe_file file;
    const auto bytes = file_bytes(file.pristine);
    const auto owners = page_owners(file.pristine);
    const std::size_t page = (std::size_t(std::uint8_t(bytes[16])) << 8 | std::uint8_t(bytes[17])) == 1
                                 ? 65536
                                 : std::size_t(std::uint8_t(bytes[16])) << 8 | std::uint8_t(bytes[17]);
    std::mt19937_64 rng(seed);
    std::vector<std::pair<std::size_t, unsigned char>> flips;
    for (std::uint64_t i = 0; i < count; ++i)
        flips.emplace_back(std::uniform_int_distribution<std::size_t>(0, bytes.size() - 1)(rng),
                           static_cast<unsigned char>(std::uniform_int_distribution<int>(1, 255)(rng)));

    const std::string work = file.dir.file("work.db");
    auto job = [&](std::size_t i) {
        auto damaged = bytes;
        damaged[flips[i].first] = static_cast<char>(damaged[flips[i].first] ^ flips[i].second);
        for (const char* s : {"", "-wal", "-shm", "-leases"}) fs::remove(work + s);
        write_file(work, damaged);
        verdict v;
        judge_file(v, work, file.truth, threads, true);
        // A different result: rows gone (damage outside the seals, which the engine cannot tell
        // from rows never written), or rows altered (which the seals must never let through)?
        if (v.tokens.find("=changed") != std::string::npos) {
            auto copy = file.dir.file("classify.db");
            for (const char* s : {"", "-wal", "-shm", "-leases"}) fs::remove(copy + s);
            write_file(copy, damaged);
            const auto where = only_rows_gone(file.pristine, copy);
            if (!where.empty()) {
                for (std::size_t at; (at = v.tokens.find("=changed")) != std::string::npos;) v.tokens.replace(at, 8, "=rows_gone");
                v.details = where + v.details;
            }
        }
        return v.line();
    };
    const auto lines = run_isolated(flips.size(), job);
    tally t;
    std::map<std::string, std::size_t> by_owner;
    for (std::size_t i = 0; i < flips.size(); ++i) {
        const auto [offset, mask] = flips[i];
        const auto at = owners.find(offset / page + 1);
        const std::string owner = at == owners.end() ? "free or unused" : at->second;
        ++by_owner[owner.substr(0, owner.find(' '))];
        std::ostringstream what;
        what << "byte " << offset << " ^ 0x" << std::hex << int(mask) << std::dec << " (page " << offset / page + 1 << ": " << owner
             << ", seed " << seed << ")";
        t.add(what.str(), lines[i]);
    }
    t.check("file_flips");
    std::cout << "corruption_probe/file_flips: " << flips.size() << " flips in a " << bytes.size() << "-byte file (";
    for (const auto& [o, n] : by_owner) std::cout << n << " " << o << " ";
    std::cout << "), " << t.reads << " reads: " << t.typed_total() << " typed errors (" << t.kinds() << "), " << t.same
              << " read the truth, " << t.rows_gone.size() << " read back with rows gone (damage outside the seals), " << t.broken.size()
              << " broken; " << seconds_since(t0) << " s\n";
    for (const auto& g : t.rows_gone) std::cout << "  rows gone: " << g.substr(0, g.find(" | ") == std::string::npos ? 400 : g.find(" | ") + 120) << "\n";
}

// The closed file cut short, and a file whose WAL still holds its last commits with the file or
// the WAL cut short: a typed error or the truth, and a WAL cut anywhere reads exactly as the
// transactions committed before the cut (an earlier state of the truth, never a mix).
BOOST_AUTO_TEST_CASE(truncated_files_and_wal) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto seed = env_number("STATEGRAPH_CORRUPTION_SEED", std::random_device{}());
    std::cout << "corruption_probe/truncated_files_and_wal: seed " << seed << "\n";
    probe_file file;
    const auto closed = file_bytes(file.pristine), live = file_bytes(file.live), wal = file_bytes(file.live + "-wal");
    const auto commits = wal_commits(wal);
    BOOST_REQUIRE(!commits.empty());
    enum class part { closed_file, live_file, wal };
    struct cut {
        part what;
        std::size_t length;
    };
    std::vector<cut> cuts;
    std::mt19937_64 rng(seed);
    auto some = [&](std::size_t n, part what, std::size_t below) {
        for (std::size_t i = 0; i < n; ++i) cuts.push_back({what, std::uniform_int_distribution<std::size_t>(0, below - 1)(rng)});
    };
    some(20, part::closed_file, closed.size());
    for (std::size_t p = 4096; p < closed.size(); p += 4 * 4096) cuts.push_back({part::closed_file, p}); // whole pages
    for (std::size_t p = 0; p < closed.size(); p += 4096)
        for (std::size_t into : {100, 2048}) cuts.push_back({part::closed_file, p + into}); // inside each page
    cuts.push_back({part::live_file, live.size() - 2048});
    cuts.push_back({part::live_file, 0}); // nothing left but the WAL (SQLite would delete it)
    some(10, part::live_file, live.size());
    some(30, part::wal, wal.size());
    for (std::size_t k = 0; k < commits.size(); k += std::max<std::size_t>(1, commits.size() / 5))
        cuts.push_back({part::wal, commits[k]}); // right at a commit

    const std::string work = file.dir.file("work.db");
    std::map<std::size_t, std::string> committed; // in the child: what a WAL cut after each commit reads
    auto job = [&](std::size_t i) {
        const auto& c = cuts[i];
        verdict v;
        auto lay_out = [&](std::string_view db, std::optional<std::string_view> w) {
            for (const char* s : {"", "-wal", "-shm", "-leases"}) fs::remove(work + s);
            write_file(work, db);
            if (w) write_file(work + "-wal", *w);
        };
        if (c.what == part::closed_file) {
            lay_out(std::string_view(closed).substr(0, c.length), std::nullopt);
            judge_file(v, work, file.truth, threads, true);
        } else if (c.what == part::live_file) {
            lay_out(std::string_view(live).substr(0, c.length), wal);
            judge_file(v, work, file.truth, threads, true);
        } else {
            // The last commit at or before the cut, read once: it is an earlier state of the truth.
            std::size_t upto = 0;
            for (auto end : commits)
                if (end <= c.length) upto = end;
            if (!committed.count(upto)) {
                lay_out(live, std::string_view(wal).substr(0, upto));
                committed[upto] = read_everything(work);
                const auto problem = prefix_problem(committed[upto], file.truth);
                v.add("commit", problem.empty() ? "same" : "changed", problem);
            }
            lay_out(live, std::string_view(wal).substr(0, c.length));
            const auto got = read_everything(work);
            // The first read that failed, if any (a line that starts with ! or ?).
            std::size_t failed = got.starts_with("!") || got.starts_with("?") ? 0 : got.find_first_of("!?");
            while (failed != std::string::npos && failed > 0 && got[failed - 1] != '\n') failed = got.find_first_of("!?", failed + 1);
            if (got == committed[upto]) v.add("wal", "same");
            else if (failed != std::string::npos) v.judge("wal", got.substr(failed, got.find('\n', failed) - failed), "");
            else v.add("wal", "changed", verdict::first_difference(got, committed[upto]));
        }
        return v.line();
    };
    const auto lines = run_isolated(cuts.size(), job);
    tally t;
    std::map<part, std::size_t> n;
    for (std::size_t i = 0; i < cuts.size(); ++i) {
        ++n[cuts[i].what];
        const char* names[] = {"the closed file", "the file (its WAL whole)", "the WAL"};
        t.add(std::string(names[static_cast<int>(cuts[i].what)]) + " cut at " + std::to_string(cuts[i].length) + " bytes (seed " +
                  std::to_string(seed) + ")",
              lines[i]);
    }
    t.check("truncated_files_and_wal");
    std::cout << "corruption_probe/truncated_files_and_wal: " << n[part::closed_file] << " cuts of the closed " << closed.size()
              << "-byte file, " << n[part::live_file] << " of a " << live.size() << "-byte file with its WAL, " << n[part::wal]
              << " of the " << wal.size() << "-byte WAL (" << commits.size() << " commits); " << t.reads
              << " reads: " << t.typed_total() << " typed errors (" << t.kinds() << "), " << t.same << " read the truth (or, "
              << "for a WAL cut, the commits before the cut), " << t.broken.size() << " broken; " << seconds_since(t0) << " s\n";
}

// Files and folder without write permission (as another user when the test runs as root, whom
// permissions do not stop): opening and reading give the truth or a typed error; every write is
// refused with a typed error and the files stay as they were.
BOOST_AUTO_TEST_CASE(read_only_files) {
    const auto t0 = std::chrono::steady_clock::now();
    probe_file file;
    const bool root = ::geteuid() == 0;
    constexpr uid_t nobody = 65534;
    struct variant {
        std::string what;
        bool file_read_only, folder_read_only, with_wal, read_only_saver;
        std::string db;
    };
    std::vector<variant> variants{
        {"file read-only", true, false, false, false, {}},
        {"file read-only, read_only saver", true, false, false, true, {}},
        {"folder read-only", false, true, false, false, {}},
        {"folder read-only, read_only saver", false, true, false, true, {}},
        {"file and folder read-only", true, true, false, false, {}},
        {"file and folder read-only, read_only saver", true, true, false, true, {}},
        {"file, WAL and folder read-only", true, true, true, false, {}},
        {"file, WAL and folder read-only, read_only saver", true, true, true, true, {}},
        {"file and WAL read-only, read_only saver", true, false, true, true, {}},
    };
    std::vector<std::string> folders;
    for (std::size_t i = 0; i < variants.size(); ++i) {
        auto& v = variants[i];
        const auto folder = file.dir.file("read-only-" + std::to_string(i));
        fs::create_directory(folder);
        folders.push_back(folder);
        v.db = folder + "/probe.db";
        copy_db(v.with_wal ? file.live : file.pristine, v.db, v.with_wal);
        for (const char* suffix : {"", "-wal"}) {
            if (!fs::exists(v.db + suffix)) continue;
            ::chmod((v.db + suffix).c_str(), v.file_read_only ? 0444 : 0644);
            if (root && !v.file_read_only) BOOST_REQUIRE(::chown((v.db + suffix).c_str(), nobody, nobody) == 0);
        }
        ::chmod(folder.c_str(), v.folder_read_only ? 0555 : 0755);
        if (root && !v.folder_read_only) BOOST_REQUIRE(::chown(folder.c_str(), nobody, nobody) == 0);
    }
    struct restore_permissions { // so that the temporary folder can be removed
        std::vector<std::string>& folders;
        ~restore_permissions() {
            for (const auto& f : folders) ::chmod(f.c_str(), 0755);
        }
    } restore{folders};
    std::vector<std::string> before;
    for (const auto& v : variants) before.push_back(file_bytes(v.db) + "|" + file_bytes(v.db + "-wal"));

    auto job = [&](std::size_t i) -> std::string {
        const auto& variant = variants[i];
        if (root && ::getuid() == 0) {
            if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0)
                return "skip: running as root, and cannot become another user to whom permissions apply";
        }
        if (variant.file_read_only && ::access(variant.db.c_str(), W_OK) == 0)
            return "skip: permissions do not stop this user's writes";
        verdict v;
        judge_file(v, variant.db, file.truth, threads, false, {}, variant.read_only_saver);
        if (v.tokens.starts_with("open=")) return v.line();
        // Writes: each refused with a typed error (a success is a write to a read-only file).
        std::optional<reader> r;
        const auto opened = text_of([&] {
            r.emplace(variant.db, variant.read_only_saver);
            return std::string();
        });
        if (!opened.empty()) return v.line();
        auto refused = [&](const std::string& what, const std::string& got) {
            if (got.starts_with("!") || got.starts_with("?")) v.judge(what, got, "");
            else v.add(what, "wrote", "a write to a read-only file succeeded: " + got.substr(0, 200));
        };
        refused("resume", r->resume());
        refused("update_state", text_of([&] { return run(r->app.update_state("done", upd{}.set<&st::note>("x"))); }));
        refused("new_thread", text_of([&] { return json::serialize(result_json(run(r->app.invoke(upd{}, thread("new"))))); }));
        return v.line();
    };
    const auto lines = run_isolated(variants.size(), job);
    tally t;
    for (std::size_t i = 0; i < variants.size(); ++i) {
        BOOST_TEST_MESSAGE("read_only_files: " << variants[i].what << ": " << lines[i]);
        if (lines[i].starts_with("skip")) {
            BOOST_TEST_MESSAGE("read_only_files skipped: " << lines[i]);
            std::cout << "corruption_probe/read_only_files: " << lines[i] << "\n";
            return;
        }
        t.add(variants[i].what, lines[i]);
        BOOST_TEST((file_bytes(variants[i].db) + "|" + file_bytes(variants[i].db + "-wal") == before[i]),
                   variants[i].what << ": the read-only files were changed");
    }
    t.check("read_only_files");
    std::cout << "corruption_probe/read_only_files: " << variants.size() << " cases" << (root ? " (as uid 65534)" : "") << ", "
              << t.reads << " reads and writes: " << t.typed_total() << " typed errors (" << t.kinds() << "), " << t.same
              << " read the truth, " << t.broken.size() << " broken; " << seconds_since(t0) << " s\n";
}

// A full disk (a 2 MB tmpfs, when the test may mount one): the run that finds no room fails with
// storage_failure; the last checkpoint committed before it reads back unchanged, the history
// reads, and with room again a new process's saver continues the thread.
BOOST_AUTO_TEST_CASE(full_disk) {
    const auto t0 = std::chrono::steady_clock::now();
    temp_dir dir;
    const std::string mount_point = dir.file("tmpfs");
    fs::create_directory(mount_point);
    if (::geteuid() != 0 || ::mount("tmpfs", mount_point.c_str(), "tmpfs", MS_NOSUID | MS_NODEV, "size=2m") != 0) {
        const std::string why = ::geteuid() != 0 ? "mounting a tmpfs needs root" : std::string("mount: ") + std::strerror(errno);
        BOOST_TEST_MESSAGE("full_disk skipped: " << why);
        std::cout << "corruption_probe/full_disk: skipped (" << why << ")\n";
        return;
    }
    struct unmount {
        const std::string& at;
        ~unmount() { ::umount2(at.c_str(), MNT_DETACH); }
    } unmount_at_exit{mount_point};
    const std::string db = mount_point + "/full.db", ballast = mount_point + "/ballast";

    auto job = [&](std::size_t) -> std::string {
        write_file(ballast, std::string(256u << 10, 'b')); // freed later, to make room again
        verdict v;
        auto head = [](const sg::compiled_graph<fill_state>& app) {
            return text_of([&] {
                auto s = run(app.get_state("fill"));
                json::object o{{"n", s.values.n}, {"big", s.values.big.size() ? s.values.big.substr(0, 1) + std::to_string(s.values.big.size()) : ""},
                               {"checkpoint_id", s.checkpoint_id}, {"parent", s.parent_checkpoint_id}, {"step", s.step}, {"metadata", s.metadata}};
                return json::serialize(o);
            });
        };
        int calls = 0;
        {
            auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = db});
            auto app = fill_graph().compile({.checkpointer = saver, .interrupt_after = {"fill"}});
            std::string last_good = "", got;
            for (; calls < 200; ++calls) {
                got = text_of([&] {
                    auto r = run(calls == 0 ? app.invoke(sg::update<fill_state>{}, thread("fill")) : app.invoke(sg::continue_run, thread("fill")));
                    return std::to_string(r.values.n);
                });
                if (got.starts_with("!") || got.starts_with("?")) break;
                last_good = head(app);
            }
            if (calls == 200) return "untyped: 200 steps of 48 KB fit in a 2 MB file system";
            v.judge("full", got, "");
            if (!got.starts_with("!storage_failure")) v.add("storage_failure", "changed", "a full disk gave " + got.substr(0, 200));
            v.judge("last_good", head(app), last_good);
            const auto history = text_of([&] { return std::to_string(run(app.get_state_history("fill")).size()); });
            v.judge("history", history.starts_with("!") || history.starts_with("?") ? history : "read", "read");
        }
        // Room again: a new saver (another process would do the same) continues where it stopped.
        fs::remove(ballast);
        auto saver = std::make_shared<cp::sqlite_saver>(cp::sqlite_options{.path = db});
        auto app = fill_graph().compile({.checkpointer = saver, .interrupt_after = {"fill"}});
        const auto n = text_of([&] { return std::to_string(run(app.get_state("fill")).values.n); });
        const auto next = text_of([&] { return std::to_string(run(app.invoke(sg::continue_run, thread("fill"))).values.n); });
        v.judge("continued", next, n.starts_with("!") ? n : std::to_string(std::stoi(n) + 1));
        v.add("#steps_before_full", std::to_string(calls));
        return v.line();
    };
    const auto lines = run_isolated(1, job, 120s);
    BOOST_TEST_MESSAGE("full_disk: " << lines[0]);
    tally t;
    t.add("a 2 MB tmpfs filled", lines[0]);
    t.check("full_disk");
    BOOST_TEST(lines[0].find("full=typed:storage_failure") != std::string::npos, lines[0]);
    std::cout << "corruption_probe/full_disk: " << lines[0].substr(0, lines[0].find(" | ")) << "; " << seconds_since(t0) << " s\n";
}

// -- issue 23, break 3: a damaged page of one thread, then a write on another ----------------------
// One bit flipped in a leaf page of `checkpoints` holding only thread b's rows. Reading b must
// say corrupt_checkpoint naming b (the page fails its checksum); the saver that found the damage
// writes nothing more into the file (a write on a is refused, naming the file and b); a new
// saver's write on a either succeeds without touching b's page or is refused with a typed error;
// b never reads back as a different, successful state.
struct loop_state {
    int n = 0;
    std::string note;
};
BOOST_DESCRIBE_STRUCT(loop_state, (), (n, note))

/// work loops eleven times (a 300-byte note each: rows fill pages), then ask interrupts.
sg::state_graph<loop_state> loop_graph() {
    using lupd = sg::update<loop_state>;
    sg::state_graph<loop_state> g("loop_probe");
    g.add_node("work", [](const loop_state& s) {
        return lupd{}.set<&loop_state::n>(s.n + 1).set<&loop_state::note>(std::string(300, char('a' + s.n % 26)));
    });
    g.add_node("ask", [](const loop_state& s, sg::context& ctx) -> boost::asio::awaitable<lupd> {
        const int k = ctx.interrupt_now<int>(json::object{{"q", "more?"}});
        co_return lupd{}.set<&loop_state::n>(s.n + k);
    });
    g.add_edge(sg::START, "work");
    g.add_conditional_edges(
        "work", [](const loop_state& s) -> std::string { return s.n < 11 ? "again" : "ask"; },
        std::map<std::string, std::string>{{"again", "work"}, {"ask", "ask"}});
    g.add_edge("ask", sg::END);
    return g;
}

struct loop_reader {
    std::shared_ptr<cp::sqlite_saver> saver;
    sg::compiled_graph<loop_state> app;
    explicit loop_reader(const std::string& db)
        : saver(std::make_shared<cp::sqlite_saver>(cp::sqlite_options{
              .path = db, .synchronous = cp::sqlite_options::sync_mode::off, .own_thread = false})),
          app(loop_graph().compile({.checkpointer = saver})) {}
    std::string state(const std::string& thread) const {
        return text_of([&] {
            const auto s = run(app.get_state(thread));
            return json::serialize(json::object{{"n", s.values.n}, {"step", s.step}, {"next", json::value_from(s.next)},
                                                {"checkpoint", s.checkpoint_id}});
        });
    }
    std::string history(const std::string& thread) const {
        return text_of([&] {
            json::array out;
            for (const auto& s : run(app.get_state_history(thread))) out.push_back(json::value(s.checkpoint_id));
            return json::serialize(out);
        });
    }
    std::string start(const std::string& thread) const {
        return text_of([&] { return std::to_string(run(app.invoke(sg::update<loop_state>{}, durable::thread(thread))).step); });
    }
    std::string resume(const std::string& thread) const {
        return text_of([&] { return std::to_string(run(app.invoke(sg::resume(1), durable::thread(thread))).step); });
    }
};

BOOST_AUTO_TEST_CASE(damaged_page_then_write_on_another_thread) {
    temp_dir dir;
    const std::string db = dir.file("two.db"), a = "thread-alpha", b = "thread-bravo";
    {
        loop_reader r(db);
        BOOST_REQUIRE_EQUAL(r.start(a), "11");
        BOOST_REQUIRE_EQUAL(r.start(b), "11");
    }
    std::string truth_state, truth_history;
    {
        loop_reader r(db);
        truth_state = r.state(b);
        truth_history = r.history(b);
    }
    BOOST_REQUIRE(truth_state.starts_with("{"));
    BOOST_REQUIRE(!fs::exists(db + "-wal"));

    // The last leaf page of `checkpoints` that holds b's rows and none of a's: b's newest rows.
    auto bytes = file_bytes(db);
    BOOST_TEST(static_cast<int>(std::uint8_t(bytes[20])) == cp::detail::page_reserve); // a new file has page checksums
    const std::size_t page = std::size_t(std::uint8_t(bytes[16])) << 8 | std::uint8_t(bytes[17]);
    std::size_t victim = 0;
    for (const auto& [no, owner] : page_owners(db)) {
        const auto body = std::string_view(bytes).substr((no - 1) * page, page);
        if (owner == "checkpoints leaf" && body.find(b) != std::string_view::npos && body.find(a) == std::string_view::npos)
            victim = no;
    }
    BOOST_REQUIRE_MESSAGE(victim != 0, "no leaf page of checkpoints holds only " + b + "'s rows (dbstat missing?)");
    const auto at = (victim - 1) * page + std::string_view(bytes).substr((victim - 1) * page, page).find(b) + 7;
    bytes[at] = static_cast<char>(bytes[at] ^ 0x04); // one bit of one key
    write_file(db, bytes);

    // The saver that finds the damage refuses every later write: nothing goes into the file.
    {
        loop_reader r(db);
        const auto state = r.state(b), history = r.history(b);
        BOOST_TEST((state == truth_state || state.starts_with("!corrupt_checkpoint")), state);
        BOOST_TEST((history == truth_history || history.starts_with("!corrupt_checkpoint")), history);
        const auto& found = state.starts_with("!") ? state : history;
        BOOST_TEST(found.starts_with("!corrupt_checkpoint"), found);
        BOOST_TEST(found.find("'" + b + "'") != std::string::npos, found);
        BOOST_TEST(found.find("page " + std::to_string(victim)) != std::string::npos, found);
        const auto write = r.resume(a);
        BOOST_TEST(write.starts_with("!corrupt_checkpoint"), write);
        BOOST_TEST(write.find("'" + a + "'") != std::string::npos, write);
        BOOST_TEST(write.find("'" + b + "'") != std::string::npos, write);
        BOOST_TEST(write.find(db) != std::string::npos, write);
    }
    BOOST_TEST((file_bytes(db) == bytes), "the file changed after the damage was found");

    // A new saver (a new process) writing on a first: done without b's page, or refused; b
    // reads as before or as corrupt, then and in yet another saver.
    for (int round = 0; round < 2; ++round) {
        loop_reader r(db);
        if (round == 0) {
            const auto write = r.resume(a);
            BOOST_TEST((write == "12" || write.starts_with("!corrupt_checkpoint")), write);
        }
        const auto state = r.state(b), history = r.history(b);
        BOOST_TEST((state == truth_state || state.starts_with("!corrupt_checkpoint")), "round " << round << ": " << state);
        BOOST_TEST((history == truth_history || history.starts_with("!corrupt_checkpoint")),
                   "round " << round << ": " << history);
        BOOST_TEST((state.starts_with("!") || history.starts_with("!")), "round " << round << ": the damage went unseen");
    }
}

// Whole-file damage: a flipped bit in the header's reserved-bytes count (the page checksums'
// room) is refused at open, the file untouched, naming what it affects.
BOOST_AUTO_TEST_CASE(damaged_reserve_byte_in_header) {
    temp_dir dir;
    const std::string db = dir.file("one.db");
    {
        loop_reader r(db);
        BOOST_REQUIRE_EQUAL(r.start("t"), "11");
    }
    auto bytes = file_bytes(db);
    for (int bit = 0; bit < 8; ++bit) {
        auto damaged = bytes;
        damaged[20] = static_cast<char>(damaged[20] ^ (1 << bit));
        write_file(db, damaged);
        const auto got = text_of([&] {
            loop_reader r(db);
            return r.state("t");
        });
        BOOST_TEST(got.starts_with("!corrupt_checkpoint"), "bit " << bit << ": " << got);
        BOOST_TEST(got.find("every thread stored in it is affected") != std::string::npos, got);
        BOOST_TEST((file_bytes(db) == damaged), "bit " << bit << ": the file was written");
    }
}

BOOST_AUTO_TEST_SUITE_END()
