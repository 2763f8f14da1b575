#pragma once
/// @file core/id_text.hpp
/// @brief `id_text`: a short id held inline, so that the option types that carry one (a call's
/// `run_config`, `get_state`'s options, a saver's `list_options`, the run store's rules) own no
/// memory and may be braced inside a `co_await` expression under g++ 12.

#include <stategraph/core/error.hpp>

#include <cstddef>
#include <cstring>
#include <ostream>
#include <string>
#include <string_view>

namespace stategraph {

/// @brief A short identifier (thread or checkpoint id) stored inline: trivially copyable and
/// destructible, at most `max_size` bytes (a longer one throws `graph_error(invalid_input)`).
/// Thread safety: a plain value; distinct objects are independent.
class id_text {
public:
    static constexpr std::size_t max_size = 255;

    constexpr id_text() noexcept = default;
    id_text(const char* s) { assign(s ? std::string_view(s) : std::string_view()); }
    /// @param s the id's text, copied; more than `max_size` bytes throws `graph_error(invalid_input)`.
    id_text(std::string_view s) { assign(s); }
    id_text(const std::string& s) { assign(s); }

    std::string_view view() const noexcept { return {data_, size_}; }
    std::string str() const { return std::string(view()); }
    operator std::string_view() const noexcept { return view(); }
    operator std::string() const { return str(); }
    bool empty() const noexcept { return size_ == 0; }
    std::size_t size() const noexcept { return size_; }
    /// @brief Whether an id is set (an empty id means "none").
    explicit operator bool() const noexcept { return size_ != 0; }

    friend bool operator==(const id_text& a, const id_text& b) noexcept { return a.view() == b.view(); }
    friend bool operator==(const id_text& a, std::string_view b) noexcept { return a.view() == b; }
    friend std::ostream& operator<<(std::ostream& os, const id_text& t) { return os << t.view(); }

private:
    void assign(std::string_view s) {
        if (s.size() > max_size)
            throw graph_error(errc::invalid_input, "an id of " + std::to_string(s.size()) + " bytes is longer than the " +
                                                       std::to_string(max_size) + " bytes a thread or checkpoint id may have",
                              {std::string(s.substr(0, 40))});
        std::memcpy(data_, s.data(), s.size());
        size_ = static_cast<unsigned char>(s.size());
    }
    char data_[max_size] = {};
    unsigned char size_ = 0;
};

} // namespace stategraph
