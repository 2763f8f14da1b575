#pragma once
// What the tests of several instances on one host share: a directory of the case's own for the
// files they all open (the run store, the chat graph's SQLite checkpoints).

#include "server_test_support.hpp"

#include <stategraph/checkpoint/sqlite_saver.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <unistd.h>

namespace server_test {

/// A fresh directory for one case's files, removed at the end.
struct temp_dir {
    std::filesystem::path path;
    explicit temp_dir(const std::string& tag = "sg-durable") {
        path = std::filesystem::temp_directory_path() / (tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(std::rand()));
        std::filesystem::create_directories(path);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

/// The chat graph's checkpointer on the case's SQLite file, shared by every instance of the case.
inline std::shared_ptr<sg::checkpoint::saver> chat_saver(const temp_dir& d) {
    sg::checkpoint::sqlite_options so;
    so.path = (d.path / "chat.db").string();
    return std::make_shared<sg::checkpoint::sqlite_saver>(so);
}

/// A run's status as an instance answers it ("http 404" when it does not).
inline std::string status_of(unsigned short port, const std::string& tid, const std::string& rid) {
    auto r = get(port, "/threads/" + tid + "/runs/" + rid);
    return r.status == 200u ? std::string(r.json().at("status").as_string()) : "http " + std::to_string(r.status);
}

} // namespace server_test
