#pragma once
// A TCP proxy for the tests of the server savers (PostgreSQL, Redis): it cuts connections as a
// restarting server or a broken network does, on a thread of its own.
#include <stategraph/checkpoint/conformance/support.hpp>
#include <stategraph/checkpoint/saver.hpp>
#include <stategraph/checkpoint/testing/run.hpp>

#include <boost/test/unit_test.hpp>

#include <boost/json/value.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace stategraph::checkpoint::testing {

/// A TCP proxy in front of a server, on a thread of its own: `drop()` cuts every connection
/// through it (as a restarted server does), `stop()` also stops listening (a server gone).
class tcp_proxy {
public:
    tcp_proxy(const std::string& host, int port)
        : target_(boost::asio::ip::make_address(host), static_cast<unsigned short>(port)),
          acceptor_(io_, boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0)) {
        boost::asio::co_spawn(io_, accept(this), boost::asio::detached);
        thread_ = std::thread([this] { io_.run(); });
    }
    tcp_proxy(const tcp_proxy&) = delete;
    tcp_proxy& operator=(const tcp_proxy&) = delete;
    ~tcp_proxy() {
        stop();
        work_.reset();
        io_.stop();
        thread_.join();
    }
    int port() const { return acceptor_.local_endpoint().port(); }
    /// Answers dropped so far (cut_answer_to).
    int cuts() const { return cuts_.load(); }
    void drop() {
        std::promise<void> done;
        boost::asio::post(io_, [&] {
            for (auto& s : sockets_) {
                boost::system::error_code ec;
                s->close(ec);
            }
            sockets_.clear();
            done.set_value();
        });
        done.get_future().wait();
    }
    /// The next request whose bytes hold `marker` reaches the server, and the connection is cut
    /// as its answer comes back: the work is done, the caller never hears of it.
    void cut_answer_to(std::string marker) {
        std::promise<void> done;
        boost::asio::post(io_, [&] {
            armed_ = std::move(marker);
            done.set_value();
        });
        done.get_future().wait();
    }
    void stop() {
        std::promise<void> done;
        boost::asio::post(io_, [&] {
            boost::system::error_code ec;
            acceptor_.close(ec);
            done.set_value();
        });
        done.get_future().wait();
        drop();
    }

private:
    using socket_ptr = std::shared_ptr<boost::asio::ip::tcp::socket>;
    static boost::asio::awaitable<void> accept(tcp_proxy* self) {
        for (;;) {
            auto client = std::make_shared<boost::asio::ip::tcp::socket>(self->io_);
            auto [ec] = co_await self->acceptor_.async_accept(*client, boost::asio::as_tuple(boost::asio::use_awaitable));
            if (ec) co_return;
            auto server = std::make_shared<boost::asio::ip::tcp::socket>(self->io_);
            auto [cec] = co_await server->async_connect(self->target_, boost::asio::as_tuple(boost::asio::use_awaitable));
            if (cec) continue;
            self->sockets_.push_back(client);
            self->sockets_.push_back(server);
            auto cut = std::make_shared<bool>(false);
            boost::asio::co_spawn(self->io_, pump(self, client, server, cut, true), boost::asio::detached);
            boost::asio::co_spawn(self->io_, pump(self, server, client, cut, false), boost::asio::detached);
        }
    }
    static boost::asio::awaitable<void> pump(tcp_proxy* self, socket_ptr from, socket_ptr to, std::shared_ptr<bool> cut,
                                      bool requests) {
        std::array<char, 16384> buf;
        for (;;) {
            auto [ec, n] = co_await from->async_read_some(boost::asio::buffer(buf), boost::asio::as_tuple(boost::asio::use_awaitable));
            if (ec) break;
            if (!requests && *cut) { // the answer is dropped with the connection
                ++self->cuts_;
                break;
            }
            if (requests && !self->armed_.empty() &&
                std::string_view(buf.data(), n).find(self->armed_) != std::string_view::npos) {
                self->armed_.clear();
                *cut = true;
            }
            auto [wec, m] = co_await boost::asio::async_write(*to, boost::asio::buffer(buf.data(), n), boost::asio::as_tuple(boost::asio::use_awaitable));
            if (wec) break;
        }
        boost::system::error_code ignored;
        from->close(ignored);
        to->close(ignored);
    }

    boost::asio::io_context io_;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ = boost::asio::make_work_guard(io_);
    boost::asio::ip::tcp::endpoint target_;
    boost::asio::ip::tcp::acceptor acceptor_;
    std::vector<socket_ptr> sockets_;
    std::string armed_; ///< touched on io_ only
    std::atomic<int> cuts_{0};
    std::thread thread_;
};

/// `holder` holds thread "t"; `through` (connected by `proxy`) breaks the lease while the proxy
/// cuts the connection as the answer of the request holding `marker` comes back. The retried call
/// must still name the holder (not "none"), and the lease must be gone.
inline void check_break_answer_survives_a_cut(saver& holder, saver& through, tcp_proxy& proxy, const std::string& marker) {
    run(holder.acquire("t"));
    const int cuts = proxy.cuts();
    proxy.cut_answer_to(marker);
    auto broken = run(through.break_lease("t"));
    BOOST_TEST(proxy.cuts() == cuts + 1); // the first try's answer was lost
    BOOST_TEST_REQUIRE(broken.has_value());
    BOOST_TEST(!broken->empty());
    run(through.acquire("t")); // the lease is gone indeed: another owner takes it at once
}

/// `through` (connected by `proxy`) ends a call on thread "t" with `end_call` (two checkpoints, a
/// write, the lease given back) while the proxy cuts the connection as the answer of the request
/// holding `marker` comes back: the first try ran, so its retry finds the lease already given back
/// and must succeed, not be refused as a lost lease; `other` (the same storage, not through the
/// proxy) then takes the thread at once and reads everything once. And the retry does not let a
/// stale writer through: with `through`'s lease on "u" broken and taken by `other`, a cut
/// end_call of `through` is refused with `lease_lost` and stores nothing.
inline void check_end_call_survives_a_cut(saver& through, saver& other, tcp_proxy& proxy, const std::string& marker) {
    run(through.acquire("t"));
    std::vector<checkpoint> cps;
    cps.push_back(next_cp(nullptr, -1, "input", boost::json::object{{"n", 0}, {"big", std::string(3000, 'x')}}));
    cps.push_back(next_cp(&cps.back(), 0, "loop", boost::json::object{{"n", 1}}));
    saver::call_end end;
    end.checkpoints = cps;
    end.writes_to = cps[1].id;
    end.writes = {write_of("task1", "node", "n", 2)};
    end.release = true;
    const int cuts = proxy.cuts();
    proxy.cut_answer_to(marker);
    run(through.end_call("t", "", end));
    BOOST_TEST(proxy.cuts() == cuts + 1); // the first try's answer was lost
    run(other.acquire("t"));              // the lease was given back
    auto got = get(other, "t", "");
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->cp.id == cps[1].id);
    BOOST_TEST(got->cp.values.at("n") == 1);
    BOOST_TEST_REQUIRE(got->writes.size() == 1u);
    BOOST_TEST(got->writes[0].value == 2);
    BOOST_TEST(list(other, "t", "", list_options{}).size() == 2u);
    run(other.release("t"));

    run(through.acquire("u"));
    run(other.break_lease("u"));
    run(other.acquire("u"));
    std::vector<checkpoint> stale{next_cp(nullptr, -1, "input", boost::json::object{{"n", 7}})};
    saver::call_end late;
    late.checkpoints = stale;
    late.release = true;
    proxy.cut_answer_to(marker);
    BOOST_CHECK_EXCEPTION(run(through.end_call("u", "", late)), stategraph::checkpoint_error,
                          [](const stategraph::checkpoint_error& e) { return e.kind() == stategraph::errc::lease_lost; });
    BOOST_TEST(!get(other, "u", "").has_value());
    run(other.release("u"));
}

} // namespace stategraph::checkpoint::testing
