#pragma once
// Internal to stategraph::server: Prometheus's text exposition format 0.0.4, written family by
// family (HELP and TYPE lines, then the samples).

#include "histogram.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stategraph::server {

/// A label value as the format quotes it: backslash, double quote and newline escaped.
std::string escape_label_value(std::string_view v);
/// A sample value: integers as such, +Inf, -Inf, NaN, else the shortest decimal that reads back.
std::string format_sample(double v);

class prometheus_text {
public:
    using labels = std::vector<std::pair<std::string_view, std::string_view>>;
    /// The content type of the format.
    static constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

    /// Starts family `name` (`type`: counter, gauge, histogram); `help` escaped as the format says.
    void family(std::string_view name, std::string_view help, std::string_view type);
    void sample(std::string_view name, const labels& ls, double value);
    /// The `_bucket` (cumulative, with `le="+Inf"`), `_sum` and `_count` samples of `h`.
    void histogram_samples(std::string_view name, const labels& ls, const histogram& h);

    const std::string& str() const& noexcept { return out_; }
    std::string str() && noexcept { return std::move(out_); }

private:
    void line(std::string_view name, const labels& ls, std::string_view extra_name, std::string_view extra_value,
              std::string_view value);
    std::string out_;
};

} // namespace stategraph::server
