#include <stategraph/core/detail/names.hpp>

#include <algorithm>

namespace stategraph::detail {

std::size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
        }
        std::swap(prev, cur);
    }
    return prev[b.size()];
}

std::string nearest_name(const std::string& name, const std::vector<std::string>& candidates) {
    std::string best;
    std::size_t best_d = static_cast<std::size_t>(-1);
    for (const auto& c : candidates) {
        auto d = edit_distance(name, c);
        if (d < best_d) best_d = d, best = c;
    }
    // Close enough: at most a third of the name's length in edits (at least 2), or a prefix/suffix.
    std::size_t allowed = std::max<std::size_t>(2, name.size() / 3);
    if (best_d <= allowed) return best;
    for (const auto& c : candidates)
        if (!name.empty() && (c.find(name) != std::string::npos || name.find(c) != std::string::npos)) return c;
    return "";
}

} // namespace stategraph::detail
