// Prometheus's text exposition format 0.0.4 (prometheus_text.hpp).
#include "prometheus_text.hpp"

#include <charconv>
#include <cmath>
#include <limits>

namespace stategraph::server {

std::string escape_label_value(std::string_view v) {
    std::string out;
    out.reserve(v.size());
    for (char ch : v) {
        if (ch == '\\') out += "\\\\";
        else if (ch == '"') out += "\\\"";
        else if (ch == '\n') out += "\\n";
        else out += ch;
    }
    return out;
}

std::string format_sample(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    char buf[64];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    if (ec != std::errc()) return "NaN";
    return std::string(buf, end);
}

void prometheus_text::family(std::string_view name, std::string_view help, std::string_view type) {
    out_ += "# HELP ";
    out_ += name;
    out_ += ' ';
    for (char ch : help) {
        if (ch == '\\') out_ += "\\\\";
        else if (ch == '\n') out_ += "\\n";
        else out_ += ch;
    }
    out_ += "\n# TYPE ";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
}

void prometheus_text::line(std::string_view name, const labels& ls, std::string_view extra_name,
                           std::string_view extra_value, std::string_view value) {
    out_ += name;
    if (!ls.empty() || !extra_name.empty()) {
        out_ += '{';
        bool first = true;
        auto one = [&](std::string_view k, std::string_view v) {
            if (!first) out_ += ',';
            first = false;
            out_ += k;
            out_ += "=\"";
            out_ += escape_label_value(v);
            out_ += '"';
        };
        for (const auto& [k, v] : ls) one(k, v);
        if (!extra_name.empty()) one(extra_name, extra_value);
        out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
}

void prometheus_text::sample(std::string_view name, const labels& ls, double value) {
    line(name, ls, {}, {}, format_sample(value));
}

void prometheus_text::histogram_samples(std::string_view name, const labels& ls, const histogram& h) {
    const std::string bucket = std::string(name) + "_bucket";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < h.bounds().size(); ++i) {
        cumulative += h.bucket(i);
        line(bucket, ls, "le", format_sample(h.bounds()[i]), std::to_string(cumulative));
    }
    cumulative += h.bucket(h.bounds().size());
    line(bucket, ls, "le", "+Inf", std::to_string(cumulative));
    line(std::string(name) + "_sum", ls, {}, {}, format_sample(h.sum()));
    line(std::string(name) + "_count", ls, {}, {}, std::to_string(cumulative));
}

} // namespace stategraph::server
