// The memory store's dates: parsing, formatting and checking ISO dates ("YYYY-MM-DD"), trim,
// today_iso_date and add_days.

#include "memory_store_internal.hpp"

#include <array>
#include <cstdio>

namespace global_supervisor {

using namespace memory_detail;

// ---------------------------------------------------------------------------------------------
// dates

namespace {

/// Parses the leading "YYYY-MM-DD" of @p s; anything after must start with 'T' or ' '.
std::optional<std::chrono::year_month_day> parse_iso_date(std::string_view s)
{
    auto digits = [&](std::size_t pos, std::size_t n, int& out) {
        out = 0;
        for (std::size_t i = pos; i < pos + n; ++i) {
            if (s[i] < '0' || s[i] > '9') return false;
            out = out * 10 + (s[i] - '0');
        }
        return true;
    };
    if (s.size() < 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
    if (s.size() > 10 && s[10] != 'T' && s[10] != ' ') return std::nullopt;
    int y = 0, m = 0, d = 0;
    if (!digits(0, 4, y) || !digits(5, 2, m) || !digits(8, 2, d)) return std::nullopt;
    const std::chrono::year_month_day ymd{std::chrono::year{y},
                                          std::chrono::month{static_cast<unsigned>(m)},
                                          std::chrono::day{static_cast<unsigned>(d)}};
    if (!ymd.ok()) return std::nullopt;
    return ymd;
}

}  // namespace

namespace memory_detail {

std::string format_iso_date(std::chrono::year_month_day ymd)
{
    std::array<char, 16> buf{};
    std::snprintf(buf.data(), buf.size(), "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
    return buf.data();
}

std::string_view trim(std::string_view s)
{
    constexpr std::string_view ws = " \t\r\n";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string_view::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

std::chrono::year_month_day require_date(std::string_view s, std::string_view operation,
                                         const std::filesystem::path& path)
{
    auto ymd = parse_iso_date(trim(s));
    if (!ymd)
        throw memory_error(memory_errc::invalid_argument, operation,
                           "not an ISO date (YYYY-MM-DD): '" + std::string(s) + "'", path);
    return *ymd;
}

}  // namespace memory_detail

std::string today_iso_date()
{
    const auto today = std::chrono::floor<std::chrono::days>(std::chrono::system_clock::now());
    return format_iso_date(std::chrono::year_month_day{today});
}

std::string add_days(std::string_view iso_date, int days)
{
    const auto ymd = require_date(iso_date, "add_days", {});
    return format_iso_date(
        std::chrono::year_month_day{std::chrono::sys_days{ymd} + std::chrono::days{days}});
}

}  // namespace global_supervisor
