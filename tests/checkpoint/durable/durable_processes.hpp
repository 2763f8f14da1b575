#pragma once
// Child processes of the durable-thread tests: starts the helper program durable_child
// (fork + exec) and waits for it within a bounded time, so that no test can hang on a child.

#include <stategraph/core/error.hpp>

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace durable {

/// Starts durable_child with `args`. With `output`, the child's stdout and stderr are appended
/// to that file (the kill loop starts hundreds of children: their lines would drown the log).
inline pid_t spawn(const std::vector<std::string>& args, const std::string& output = {}) {
    std::vector<std::string> all{STATEGRAPH_DURABLE_CHILD};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
        // Only async-signal-safe calls between fork and exec.
        if (!output.empty()) {
            int fd = ::open(output.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                ::dup2(fd, 1);
                ::dup2(fd, 2);
                ::close(fd);
            }
        }
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    return pid;
}

/// Waits at most `limit` for the child; past it, SIGKILLs and reaps it and sets `*expired`.
/// Returns how the child ended: its exit code, or -signal.
inline int wait_or_kill(pid_t pid, std::chrono::microseconds limit, bool* expired = nullptr) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
        int status = 0;
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
        if (r < 0) return -1001;
        const auto now = std::chrono::steady_clock::now();
        if (now >= until) {
            ::kill(pid, SIGKILL);
            if (expired) *expired = true;
            ::waitpid(pid, &status, 0);
            return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
        }
        // Sleep to the deadline at the latest: a kill lands when it was meant to.
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(1)));
    }
}

/// Waits for the child (at most `limit`); returns its exit code, or -signal when killed, or
/// -1002 when it was still running at the limit (it is then killed and reaped).
inline int wait_child(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(60)) {
    bool expired = false;
    const int r = wait_or_kill(pid, limit, &expired);
    return expired ? -1002 : r;
}

inline int run_child(const std::vector<std::string>& args) { return wait_child(spawn(args)); }

/// The exit code durable_child uses for a stategraph error.
inline int exit_code(stategraph::errc e) { return 10 + static_cast<int>(e); }

} // namespace durable
