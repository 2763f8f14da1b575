#pragma once
/// @file mcp_servers.hpp
/// @brief Test helpers: the real MCP servers installed from npm (package-lock.json, install.sh)
/// as server_config values, and server-everything serving streamable HTTP as a child process.

#include <stategraph/mcp/server_config.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

namespace stategraph::test::mcp_servers {

inline std::string package_dir() { return std::string(STATEGRAPH_SOURCE_DIR) + "/tests/mcp/node_modules/@modelcontextprotocol/"; }
inline std::string everything_js() { return package_dir() + "server-everything/dist/index.js"; }
inline std::string filesystem_js() { return package_dir() + "server-filesystem/dist/index.js"; }

inline stategraph::mcp::server_config everything_stdio() {
    stategraph::mcp::server_config c;
    c.name = "everything";
    c.type = stategraph::mcp::transport_kind::stdio;
    c.command = "node";
    c.args = {everything_js(), "stdio"};
    c.timeout = std::chrono::seconds(30);
    return c;
}

inline stategraph::mcp::server_config filesystem_stdio(std::string const& root) {
    stategraph::mcp::server_config c;
    c.name = "filesystem";
    c.command = "node";
    c.args = {filesystem_js(), root};
    c.timeout = std::chrono::seconds(30);
    return c;
}

/// @brief A free TCP port on 127.0.0.1 (bound, read, released).
inline unsigned short free_port() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor a(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return a.local_endpoint().port();
}

/// @brief `node ARGS...` in a process group of its own, with `PORT` set to @p port, waited for
/// until 127.0.0.1:port accepts connections; stopped (SIGTERM, then SIGKILL) and reaped when
/// this goes.
class node_process {
public:
    node_process(std::vector<std::string> args, unsigned short port) {
        pid_ = ::fork();
        if (pid_ < 0) throw std::runtime_error("fork failed");
        if (pid_ == 0) {
            ::setpgid(0, 0);
            std::string const port_text = std::to_string(port);
            ::setenv("PORT", port_text.c_str(), 1);
            std::vector<char*> argv{const_cast<char*>("node")};
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execvp("node", argv.data());
            ::_exit(127);
        }
        ::setpgid(pid_, pid_);
        auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        for (;;) {
            boost::asio::io_context io;
            boost::asio::ip::tcp::socket s(io);
            boost::system::error_code ec;
            s.connect({boost::asio::ip::make_address("127.0.0.1"), port}, ec);
            if (!ec) break;
            if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("node " + args.at(0) + " did not listen");
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
    }
    node_process(node_process const&) = delete;
    node_process& operator=(node_process const&) = delete;
    ~node_process() {
        ::kill(-pid_, SIGTERM);
        for (int i = 0; i < 100; ++i) {
            if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ::kill(-pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }

private:
    pid_t pid_ = -1;
};

/// @brief `node server-everything streamableHttp` on a free port.
class everything_http {
public:
    everything_http() : port_(free_port()), process_({everything_js(), "streamableHttp"}, port_) {}

    unsigned short port() const { return port_; }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }
    stategraph::mcp::server_config config() const {
        stategraph::mcp::server_config c;
        c.name = "everything-http";
        c.type = stategraph::mcp::transport_kind::http;
        c.url = url();
        c.timeout = std::chrono::seconds(30);
        return c;
    }

private:
    unsigned short port_;
    node_process process_;
};

/// @brief tls_proxy.mjs in front of @p backend_port: TLS on a free port with @p cert and @p key.
class tls_front {
public:
    tls_front(std::string const& cert, std::string const& key, unsigned short backend_port)
        : port_(free_port()),
          process_({std::string(STATEGRAPH_SOURCE_DIR) + "/tests/mcp/tls_proxy.mjs", cert, key, std::to_string(port_),
                    std::to_string(backend_port)},
                   port_) {}
    unsigned short port() const { return port_; }

private:
    unsigned short port_;
    node_process process_;
};

}  // namespace stategraph::test::mcp_servers
