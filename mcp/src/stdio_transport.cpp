// The stdio transport: the server as a child process (posix_spawnp, a process group of its own),
// one JSON-RPC message per line on its stdin and stdout (Asio stream descriptors), its stderr
// kept as a tail for error messages.

#include <stategraph/core/detail/spawned.hpp>
#include "transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace stategraph::mcp::detail {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

/// A write to a pipe whose reader is gone raises SIGPIPE, which ends the process by default:
/// ignore it (the write fails with EPIPE instead), unless the program installed a handler.
void ignore_sigpipe_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        struct sigaction current {};
        if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
    });
}

std::string describe_status(int status) {
    if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status)) {
        int const sig = WTERMSIG(status);
        char const* name = sigabbrev_np(sig);
        return "was killed by signal " + std::to_string(sig) + (name ? std::string(" (SIG") + name + ")" : std::string());
    }
    return "stopped (status " + std::to_string(status) + ")";
}

class stdio_transport final : public transport, public std::enable_shared_from_this<stdio_transport> {
public:
    stdio_transport(asio::any_io_executor io, server_config const& config)
        : io_(io), name_(config.name), command_(config.command), args_(config.args), env_(config.env), in_(io), out_(io),
          err_(io) {}

    asio::awaitable<void> start(transport_events events) override {
        events_ = std::move(events);
        ignore_sigpipe_once();
        spawn();
        auto self = shared_from_this();
        auto reader = read_loop(self);
        asio::co_spawn(io_, std::move(reader), stategraph::detail::report_to("MCP server '" + name_ + "': reading its output"));
        auto drain = drain_stderr(self);
        asio::co_spawn(io_, std::move(drain), stategraph::detail::report_to("MCP server '" + name_ + "': reading its standard error"));
        co_return;
    }

    void send(std::string message, std::optional<std::int64_t>) override {
        message += '\n';
        queue_.push_back(std::move(message));
        if (writing_) return;
        writing_ = true;
        auto writer = write_loop(shared_from_this());
        asio::co_spawn(io_, std::move(writer), stategraph::detail::report_to("MCP server '" + name_ + "': writing to it"));
    }

    asio::awaitable<void> after_initialize(std::string) override { co_return; }
    void abandon(std::int64_t) override {}

    asio::awaitable<void> stop() override {
        stopping_ = true;
        boost::system::error_code ignored;
        in_.close(ignored);  // EOF on its stdin: a well-behaved server exits
        auto first = wait_exit(1000ms);
        bool gone = co_await std::move(first);
        if (!gone) {
            signal_group(SIGTERM);
            auto second = wait_exit(2000ms);
            gone = co_await std::move(second);
        }
        if (!gone) {
            signal_group(SIGKILL);
            reap(true);
        }
        out_.close(ignored);
        err_.close(ignored);
    }

    /// Whether the child ends within @p budget.
    asio::awaitable<bool> wait_exit(std::chrono::milliseconds budget) {
        asio::steady_timer timer(io_);
        for (auto spent = 0ms; spent < budget; spent += 20ms) {
            if (reap(false)) co_return true;
            timer.expires_after(20ms);
            co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        co_return reap(false);
    }

    void stop_now() noexcept override {
        stopping_ = true;
        if (pid() == std::nullopt) return;
        signal_group(SIGTERM);
        for (int i = 0; i < 50 && !reap(false); ++i) std::this_thread::sleep_for(10ms);
        if (pid() != std::nullopt) {
            signal_group(SIGKILL);
            reap(true);
        }
    }

    std::optional<int> pid() const override {
        std::lock_guard lock(mutex_);
        return pid_ > 0 ? std::optional<int>(pid_) : std::nullopt;
    }

    std::string stderr_tail() const override {
        std::lock_guard lock(mutex_);
        return tail_;
    }

private:
    void spawn() {
        int in[2], out[2], err[2];
        if (pipe2(in, O_CLOEXEC) != 0) fail_start(errno);
        if (pipe2(out, O_CLOEXEC) != 0) {
            int const e = errno;
            close_all({in[0], in[1]});
            fail_start(e);
        }
        if (pipe2(err, O_CLOEXEC) != 0) {
            int const e = errno;
            close_all({in[0], in[1], out[0], out[1]});
            fail_start(e);
        }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_adddup2(&actions, in[0], 0);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        posix_spawn_file_actions_adddup2(&actions, err[1], 2);
        posix_spawnattr_t attr;
        posix_spawnattr_init(&attr);
        posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
        posix_spawnattr_setpgroup(&attr, 0);  // a group of its own: stop() reaches what it starts (npx -> node)
        sigset_t none, defaults;
        sigemptyset(&none);
        sigemptyset(&defaults);
        sigaddset(&defaults, SIGPIPE);
        posix_spawnattr_setsigmask(&attr, &none);
        posix_spawnattr_setsigdefault(&attr, &defaults);

        std::vector<std::string> argv_text;
        argv_text.push_back(command_);
        argv_text.insert(argv_text.end(), args_.begin(), args_.end());
        std::vector<char*> argv;
        for (auto& a : argv_text) argv.push_back(a.data());
        argv.push_back(nullptr);
        std::vector<std::string> env_text;
        for (char** e = environ; e && *e; ++e) {
            std::string_view entry(*e);
            auto const eq = entry.find('=');
            if (eq != std::string_view::npos && env_.count(std::string(entry.substr(0, eq)))) continue;
            env_text.emplace_back(entry);
        }
        for (auto const& [key, value] : env_) env_text.push_back(key + "=" + value);
        std::vector<char*> envp;
        for (auto& e : env_text) envp.push_back(e.data());
        envp.push_back(nullptr);

        pid_t child = -1;
        int const rc = posix_spawnp(&child, command_.c_str(), &actions, &attr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
        close_all({in[0], out[1], err[1]});
        if (rc != 0) {
            close_all({in[1], out[0], err[0]});
            fail_start(rc);
        }
        {
            std::lock_guard lock(mutex_);
            pid_ = child;
        }
        in_.assign(in[1]);
        out_.assign(out[0]);
        err_.assign(err[0]);
    }

    [[noreturn]] void fail_start(int error) const {
        std::string cmd = command_;
        for (auto const& a : args_) cmd += " " + a;
        throw mcp_error(errc::start_failed, name_,
                        server_label(name_) + " could not be started: `" + cmd + "`: " + std::strerror(error));
    }

    static void close_all(std::initializer_list<int> fds) {
        for (int fd : fds) ::close(fd);
    }

    void signal_group(int sig) {
        if (auto p = pid()) ::kill(-*p, sig);
    }

    /// Collect the child's status if it ended (or wait for it with @p block); true once reaped.
    bool reap(bool block) {
        std::lock_guard lock(mutex_);
        if (pid_ <= 0) return true;
        int status = 0;
        pid_t const r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
        if (r == pid_ || (r < 0 && errno == ECHILD)) {
            exit_text_ = r == pid_ ? describe_status(status) : "ended";
            pid_ = -1;
            return true;
        }
        return false;
    }

    void note(std::string text) {
        std::lock_guard lock(mutex_);
        tail_ += text;
        if (tail_.size() > 8192) tail_.erase(0, tail_.size() - 8192);
    }

    static asio::awaitable<void> write_loop(std::shared_ptr<stdio_transport> self) {
        while (!self->queue_.empty()) {
            std::string message = std::move(self->queue_.front());
            self->queue_.pop_front();
            auto [ec, n] = co_await asio::async_write(self->in_, asio::buffer(message), asio::as_tuple(asio::use_awaitable));
            (void)n;
            if (ec) {
                self->queue_.clear();  // the reader sees the end of the process and reports it
                break;
            }
        }
        self->writing_ = false;
    }

    static asio::awaitable<void> read_loop(std::shared_ptr<stdio_transport> self) {
        std::string buffer;
        for (;;) {
            auto [ec, n] = co_await asio::async_read_until(self->out_, asio::dynamic_buffer(buffer, 256u << 20), '\n',
                                                           asio::as_tuple(asio::use_awaitable));
            if (ec) break;
            std::string line = buffer.substr(0, n);
            buffer.erase(0, n);
            while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
            if (line.empty()) continue;
            boost::system::error_code jec;
            auto message = json::parse(line, jec);
            if (jec) {
                self->note("[stdout, not JSON-RPC] " + line.substr(0, 300) + "\n");
                continue;
            }
            self->events_.message(std::move(message));
        }
        if (self->stopping_) co_return;
        // The child closed its stdout: it is ending. Give it a moment, for its exit status.
        asio::steady_timer timer(self->io_);
        for (int i = 0; i < 25 && !self->reap(false); ++i) {
            timer.expires_after(10ms);
            co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
        }
        std::string reason;
        {
            std::lock_guard lock(self->mutex_);
            reason = self->pid_ > 0 ? "closed its stdout" : self->exit_text_;
        }
        self->events_.lost(errc::server_exited, reason);
    }

    static asio::awaitable<void> drain_stderr(std::shared_ptr<stdio_transport> self) {
        char chunk[4096];
        for (;;) {
            auto [ec, n] = co_await self->err_.async_read_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable));
            if (ec) break;
            self->note(std::string(chunk, n));
        }
    }

    asio::any_io_executor io_;
    std::string name_;
    std::string command_;
    std::vector<std::string> args_;
    std::map<std::string, std::string> env_;
    asio::posix::stream_descriptor in_;   // the child's stdin
    asio::posix::stream_descriptor out_;  // the child's stdout
    asio::posix::stream_descriptor err_;  // the child's stderr
    transport_events events_;
    std::deque<std::string> queue_;
    bool writing_ = false;
    bool stopping_ = false;

    mutable std::mutex mutex_;  // pid_, exit_text_, tail_ (read from any thread)
    int pid_ = -1;
    std::string exit_text_;
    std::string tail_;
};

}  // namespace

std::shared_ptr<transport> make_stdio_transport(asio::any_io_executor io, server_config const& config) {
    return std::make_shared<stdio_transport>(io, config);
}

}  // namespace stategraph::mcp::detail
