#pragma once
// What the PostgreSQL saver's tests share: where the server is (STATEGRAPH_TEST_POSTGRES), a
// blocking second connection, and savers on schemas of their own.

#include <stategraph/checkpoint/postgres_saver.hpp>

#include <boost/test/unit_test.hpp>

#include <libpq-fe.h>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace stategraph::checkpoint::pg_testing {

inline const char* server_url() {
    const char* url = std::getenv("STATEGRAPH_TEST_POSTGRES");
    return url && *url ? url : nullptr;
}

/// Skips a case (or a suite) when no server is configured.
inline boost::test_tools::assertion_result server_configured(boost::unit_test::test_unit_id) {
    boost::test_tools::assertion_result r(server_url() != nullptr);
    if (!r)
        r.message() << "STATEGRAPH_TEST_POSTGRES is not set: the PostgreSQL saver is not tested (scripts/test starts "
                       "a private server with scripts/pg-server and sets it; by hand: "
                       "export STATEGRAPH_TEST_POSTGRES=$(scripts/pg-server start))";
    return r;
}

inline std::string quoted(const std::string& name) { return "\"" + name + "\""; }

/// A blocking admin connection (the tests' second connection, behind the saver's back).
struct admin {
    PGconn* c = nullptr;
    explicit admin(const std::string& conninfo = server_url()) {
        c = PQconnectdb(conninfo.c_str());
        BOOST_REQUIRE_MESSAGE(PQstatus(c) == CONNECTION_OK, "admin connection: " << PQerrorMessage(c));
        PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    }
    admin(const admin&) = delete;
    admin& operator=(const admin&) = delete;
    ~admin() { PQfinish(c); }
    /// Runs `sql` with text parameters; returns the first column of each row (or, for a
    /// command, the count of rows it touched).
    std::vector<std::string> query(const std::string& sql, const std::vector<std::string>& params = {}) {
        std::vector<const char*> values;
        for (const auto& p : params) values.push_back(p.c_str());
        PGresult* r = PQexecParams(c, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                                   nullptr, 0);
        const auto st = PQresultStatus(r);
        std::vector<std::string> out;
        if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
            std::string msg = PQresultErrorMessage(r);
            PQclear(r);
            BOOST_FAIL(sql << ": " << msg);
        }
        for (int i = 0; i < PQntuples(r); ++i) out.emplace_back(PQgetvalue(r, i, 0), PQgetlength(r, i, 0));
        if (st == PGRES_COMMAND_OK && PQcmdTuples(r)[0]) out.emplace_back(PQcmdTuples(r));
        PQclear(r);
        return out;
    }
};

/// A schema name of its own for each saver the tests make (dropped when the saver goes).
inline std::string fresh_schema() {
    static std::atomic<int> counter{0};
    static const auto salt = std::random_device{}();
    return "sg_test_" + std::to_string(getpid()) + "_" + std::to_string(salt % 100000) + "_" + std::to_string(counter++);
}

inline postgres_options options_for(const std::string& schema, const std::string& conninfo = server_url()) {
    postgres_options o;
    o.conninfo = conninfo;
    o.schema = schema;
    o.lease_ttl = std::chrono::seconds(1);
    o.pool_size = 4;
    return o;
}

/// `o` for a saver whose backends a `backend_killer` terminates every 5-30 ms: retried every
/// 2-20 ms for up to 30 s, so that one attempt gets through between two kills even when a
/// connection and its statements take several milliseconds (a sanitizer build on a loaded
/// machine), where the default backoff (20 ms doubling to 1 s, 10 s) allowed 16 attempts.
inline postgres_options under_killer(postgres_options o) {
    o.backoff = std::chrono::milliseconds(2);
    o.max_backoff = std::chrono::milliseconds(20);
    o.retry_for = std::chrono::seconds(30);
    return o;
}

/// A saver on a schema of its own; the schema is dropped after the saver is destroyed.
inline std::shared_ptr<postgres_saver> make_saver(postgres_options o) {
    struct fixture {
        std::string schema;
        postgres_saver saver;
        explicit fixture(postgres_options o) : schema(o.schema), saver(std::move(o)) {}
    };
    auto f = std::shared_ptr<fixture>(new fixture(std::move(o)), [](fixture* p) {
        const auto schema = p->schema;
        delete p;
        try {
            admin a;
            a.query("DROP SCHEMA IF EXISTS " + quoted(schema) + " CASCADE");
        } catch (...) {
        }
    });
    return std::shared_ptr<postgres_saver>(f, &f->saver);
}

/// The conninfo keywords of the server URL (host, port, user, dbname, ...), via libpq's parser.
inline std::vector<std::pair<std::string, std::string>> url_keywords() {
    std::vector<std::pair<std::string, std::string>> out;
    char* err = nullptr;
    PQconninfoOption* opts = PQconninfoParse(server_url(), &err);
    if (!opts) {
        std::string m = err ? err : "?";
        PQfreemem(err);
        BOOST_FAIL("cannot parse STATEGRAPH_TEST_POSTGRES: " << m);
    }
    for (auto* o = opts; o->keyword; ++o)
        if (o->val) out.emplace_back(o->keyword, o->val);
    PQconninfoFree(opts);
    return out;
}

/// The server URL with an application_name (to find the saver's backends in pg_stat_activity),
/// and optionally another host and port (keyword form).
inline std::string conninfo_named(const std::string& application, const std::string& host = "", int port = 0) {
    std::string out;
    for (auto [k, v] : url_keywords()) {
        if (k == "application_name" || k == "hostaddr" || (port && (k == "host" || k == "port"))) continue;
        std::string escaped;
        for (char ch : v) {
            if (ch == '\'' || ch == '\\') escaped += '\\';
            escaped += ch;
        }
        out += k + "='" + escaped + "' ";
    }
    if (port) out += "host='" + host + "' port='" + std::to_string(port) + "' ";
    return out + "application_name='" + application + "'";
}

/// The server's host and port, from the URL.
inline std::pair<std::string, int> server_address() {
    std::string host = "127.0.0.1";
    int port = 5432;
    for (const auto& [k, v] : url_keywords()) {
        if (k == "host" && !v.empty()) host = v;
        if (k == "port" && !v.empty()) port = std::stoi(v);
    }
    return {host, port};
}

/// A second connection that terminates (pg_terminate_backend) every backend whose
/// application_name is `application`, every 5 to 30 ms, from construction to destruction.
class backend_killer {
public:
    explicit backend_killer(std::string application) : application_(std::move(application)) {
        thread_ = std::thread([this] { kill_until_done(); });
    }
    backend_killer(const backend_killer&) = delete;
    backend_killer& operator=(const backend_killer&) = delete;
    ~backend_killer() { stop(); }
    /// Stops killing (waits for the killer thread); returns how many backends it terminated.
    int stop() {
        done_ = true;
        if (thread_.joinable()) thread_.join();
        return killed_;
    }

private:
    void kill_until_done() {
        try {
            admin a;
            std::minstd_rand rng(42);
            while (!done_) {
                auto n = a.query("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
                                 {application_});
                if (!n.empty()) killed_ += std::stoi(n[0]);
                std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 25));
            }
        } catch (...) {
        }
    }
    std::string application_;
    std::atomic<bool> done_{false};
    std::atomic<int> killed_{0};
    std::thread thread_;
};

} // namespace stategraph::checkpoint::pg_testing
