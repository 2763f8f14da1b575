#include "lease_owner.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include <unistd.h>

namespace stategraph::checkpoint::lease_owner {

namespace {

std::string host_name() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "unknown-host";
    std::string h = host;
    for (auto& c : h)
        if (c == ':') c = '_'; // the separator of the owner's parts
    return h;
}

/// The inode of this process's pid namespace ("pid:[4026531836]" -> "4026531836"), or "" when
/// /proc does not say (then no holder is ever judged gone).
std::string pid_namespace() {
    char buf[64] = {};
    const auto n = readlink("/proc/self/ns/pid", buf, sizeof buf - 1);
    if (n <= 0) return {};
    std::string_view link(buf, static_cast<std::size_t>(n));
    const auto open = link.find('['), close = link.find(']');
    if (open == std::string_view::npos || close == std::string_view::npos || close <= open + 1) return {};
    return std::string(link.substr(open + 1, close - open - 1));
}

std::vector<std::string_view> split(std::string_view s) {
    std::vector<std::string_view> parts;
    std::size_t at = 0;
    for (;;) {
        const auto colon = s.find(':', at);
        parts.push_back(s.substr(at, colon == std::string_view::npos ? std::string_view::npos : colon - at));
        if (colon == std::string_view::npos) return parts;
        at = colon + 1;
    }
}

} // namespace

std::string make() {
    std::random_device rd;
    const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    char random[17];
    std::snprintf(random, sizeof random, "%016llx", static_cast<unsigned long long>(r));
    return host_name() + ":" + std::to_string(static_cast<long>(getpid())) + ":" + random + ":" + pid_namespace();
}

bool is_gone(std::string_view holder) noexcept {
    try {
        static const std::string host = host_name(), ns = pid_namespace();
        if (ns.empty()) return false;
        const auto parts = split(holder);
        if (parts.size() != 4 || parts[0] != host || parts[3] != ns) return false;
        long pid = 0;
        for (char c : parts[1]) {
            if (c < '0' || c > '9' || pid > 1'000'000'000) return false;
            pid = pid * 10 + (c - '0');
        }
        if (pid <= 1 || pid == static_cast<long>(getpid())) return false;
        // Signal 0 checks that the process exists; EPERM means it exists under another user.
        return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
    } catch (...) {
        return false;
    }
}

} // namespace stategraph::checkpoint::lease_owner
