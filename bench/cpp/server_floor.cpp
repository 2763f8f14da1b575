// The physical floor of the server checkpointers (postgres, redis, tiered), measured in the same
// run as their scenarios: one loopback round trip to the server, on a connection of its own,
// blocking (PostgreSQL: a prepared `SELECT 1`; Redis: `PING`). A checkpointer that writes a step
// in one round trip cannot do it in less. C++ only. And the removal of what a run stored there
// (its PostgreSQL schema, its Redis keys) when it ends.
#include "harness.hpp"

#ifdef STATEGRAPH_HAVE_POSTGRES
#include <libpq-fe.h>
#endif

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace stategraph::bench {

namespace {

double median_of(std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    const auto n = xs.size();
    if (n == 0) return 0;
    return n % 2 ? xs[n / 2] : (xs[n / 2 - 1] + xs[n / 2]) / 2;
}

/// `round_trips` timed calls of `one` (after 10 untimed ones): their median, in µs.
template <class F>
double timed_median(int round_trips, F one) {
    for (int i = 0; i < 10; ++i) one();
    std::vector<double> xs;
    xs.reserve(static_cast<std::size_t>(round_trips));
    for (int i = 0; i < round_trips; ++i) {
        const double t0 = now_us();
        one();
        xs.push_back(now_us() - t0);
    }
    return median_of(std::move(xs));
}

} // namespace

#ifdef STATEGRAPH_HAVE_POSTGRES
boost::json::object postgres_floor(const std::string& url, int round_trips) {
    PGconn* c = PQconnectdb(url.c_str());
    struct closer {
        PGconn* c;
        ~closer() { PQfinish(c); }
    } close_it{c};
    if (PQstatus(c) != CONNECTION_OK) throw bench_error("postgres floor: cannot connect: " + std::string(PQerrorMessage(c)));
    PGresult* p = PQprepare(c, "floor", "SELECT 1", 0, nullptr);
    const bool prepared = PQresultStatus(p) == PGRES_COMMAND_OK;
    PQclear(p);
    if (!prepared) throw bench_error("postgres floor: cannot prepare: " + std::string(PQerrorMessage(c)));
    const double us = timed_median(round_trips, [&] {
        PGresult* r = PQexecPrepared(c, "floor", 0, nullptr, nullptr, nullptr, 1);
        const bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
        PQclear(r);
        if (!ok) throw bench_error("postgres floor: SELECT 1 failed: " + std::string(PQerrorMessage(c)));
    });
    boost::json::object o;
    o["us_per_round_trip"] = us;
    o["round_trips"] = round_trips;
    o["request"] = "prepared SELECT 1, blocking libpq, one connection";
    return o;
}
#endif

/// A connected socket to the Redis server of `url` (redis://host:port[/db]); throws bench_error.
static int redis_socket(const std::string& url, const char* what) {
    std::string rest = url.rfind("redis://", 0) == 0 ? url.substr(8) : url;
    rest = rest.substr(0, rest.find('/'));
    if (auto at = rest.rfind('@'); at != std::string::npos) rest = rest.substr(at + 1);
    std::string host = rest, port = "6379";
    if (auto colon = rest.rfind(':'); colon != std::string::npos) {
        host = rest.substr(0, colon);
        port = rest.substr(colon + 1);
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found)
        throw bench_error(std::string(what) + ": cannot resolve " + host + ":" + port);
    const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
    freeaddrinfo(found);
    if (!connected) {
        if (fd >= 0) close(fd);
        throw bench_error(std::string(what) + ": cannot connect to " + host + ":" + port);
    }
    return fd;
}

namespace {
struct fd_closer {
    int fd;
    ~fd_closer() { close(fd); }
};
} // namespace

boost::json::object redis_floor(const std::string& url, int round_trips) {
    const int fd = redis_socket(url, "redis floor");
    fd_closer close_it{fd};
    const double us = timed_median(round_trips, [&] {
        static constexpr char ping[] = "PING\r\n";
        if (send(fd, ping, sizeof ping - 1, 0) != static_cast<ssize_t>(sizeof ping - 1))
            throw bench_error("redis floor: send failed");
        std::string got;
        char buf[64];
        while (got.find("\r\n") == std::string::npos) {
            const auto n = recv(fd, buf, sizeof buf, 0);
            if (n <= 0) throw bench_error("redis floor: the server closed the connection");
            got.append(buf, static_cast<std::size_t>(n));
        }
        if (got != "+PONG\r\n") throw bench_error("redis floor: unexpected answer " + got);
    });
    boost::json::object o;
    o["us_per_round_trip"] = us;
    o["round_trips"] = round_trips;
    o["request"] = "PING, blocking socket, one connection";
    return o;
}

#ifdef STATEGRAPH_HAVE_POSTGRES
void postgres_drop_schema(const std::string& url, const std::string& schema) {
    PGconn* c = PQconnectdb(url.c_str());
    struct closer {
        PGconn* c;
        ~closer() { PQfinish(c); }
    } close_it{c};
    if (PQstatus(c) != CONNECTION_OK) throw bench_error("dropping schema " + schema + ": cannot connect: " + PQerrorMessage(c));
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr); // not the "drop cascades to" list
    char* quoted = PQescapeIdentifier(c, schema.c_str(), schema.size());
    if (!quoted) throw bench_error("dropping schema " + schema + ": " + PQerrorMessage(c));
    const std::string sql = std::string("DROP SCHEMA IF EXISTS ") + quoted + " CASCADE";
    PQfreemem(quoted);
    PGresult* r = PQexec(c, sql.c_str());
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    if (!ok) throw bench_error("dropping schema " + schema + ": " + PQerrorMessage(c));
}
#endif

std::int64_t redis_delete_prefix(const std::string& url, const std::string& prefix) {
    for (char ch : prefix)
        if (ch == '*' || ch == '?' || ch == '[' || ch == ']' || ch == '\\')
            throw bench_error("deleting Redis keys: the prefix \"" + prefix + "\" holds a glob character");
    const int fd = redis_socket(url, "deleting Redis keys");
    fd_closer close_it{fd};
    // One script walks the keyspace (SCAN, bounded batches) and unlinks the prefix's keys.
    static const std::string script =
        "local n, c = 0, '0' repeat local r = redis.call('SCAN', c, 'MATCH', ARGV[1], 'COUNT', 1000) c = r[1] "
        "for _, k in ipairs(r[2]) do redis.call('UNLINK', k) n = n + 1 end until c == '0' return n";
    const std::string pattern = prefix + "*";
    std::string request = "*4\r\n";
    for (const std::string& x : {std::string("EVAL"), script, std::string("0"), pattern})
        request.append(1, '$').append(std::to_string(x.size())).append("\r\n").append(x).append("\r\n");
    if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size()))
        throw bench_error("deleting Redis keys: send failed");
    std::string got;
    char buf[256];
    for (int i = 0; i < 10'000 && got.find("\r\n") == std::string::npos; ++i) {
        const auto n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) throw bench_error("deleting Redis keys: the server closed the connection");
        got.append(buf, static_cast<std::size_t>(n));
    }
    if (got.empty() || got[0] != ':') throw bench_error("deleting Redis keys of " + prefix + ": " + got.substr(0, got.find("\r\n")));
    return std::stoll(got.substr(1));
}

} // namespace stategraph::bench
