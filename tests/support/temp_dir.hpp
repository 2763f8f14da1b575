#pragma once
/// @file temp_dir.hpp
/// @brief Test helper: a fresh directory under /tmp, removed with everything in it.

#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>

#include <stdlib.h> // mkdtemp

namespace stategraph::test {

struct temp_dir {
    std::filesystem::path path;
    temp_dir() {
        char pattern[] = "/tmp/stategraph-sqlite-XXXXXX";
        const char* made = mkdtemp(pattern);
        if (!made) throw std::runtime_error("mkdtemp failed");
        path = made;
    }
    temp_dir(const temp_dir&) = delete;
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

} // namespace stategraph::test
