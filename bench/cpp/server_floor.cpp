// The physical floor of the server checkpointers (postgres, redis, tiered), measured in the same
// run as their scenarios: one loopback round trip to the server, on a connection of its own,
// blocking (PostgreSQL: a prepared `SELECT 1`; Redis: `PING`). A checkpointer that writes a step
// in one round trip cannot do it in less. C++ only.
#include "harness.hpp"

#ifdef STATEGRAPH_HAVE_POSTGRES
#include <libpq-fe.h>
#endif

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

boost::json::object redis_floor(const std::string& url, int round_trips) {
    // redis://host:port[/db]
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
        throw bench_error("redis floor: cannot resolve " + host + ":" + port);
    const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    const bool connected = fd >= 0 && connect(fd, found->ai_addr, found->ai_addrlen) == 0;
    freeaddrinfo(found);
    struct closer {
        int fd;
        ~closer() {
            if (fd >= 0) close(fd);
        }
    } close_it{fd};
    if (!connected) throw bench_error("redis floor: cannot connect to " + host + ":" + port);
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

} // namespace stategraph::bench
