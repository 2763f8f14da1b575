#include <stategraph/core/http_url.hpp>

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace stategraph {

namespace {

bool is_control_or_space(char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; }

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool is_host_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '.' || c == '_';
}

bool starts_with_nocase(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), s.begin(), [](char a, char b) {
               return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
           });
}

http_url_result refused(std::string why) { return {std::nullopt, std::move(why)}; }

} // namespace

std::string http_url::host_header() const {
    std::string out = ipv6 ? "[" + host + "]" : host;
    if (!default_port()) out += ":" + port;
    return out;
}

std::string http_url::target() const {
    std::string out = path.empty() ? std::string("/") : path;
    if (!query.empty()) out += "?" + query;
    return out;
}

std::string http_url::origin() const { return std::string(scheme()) + "://" + host_header(); }

http_url_result parse_http_url(std::string_view text) {
    if (std::any_of(text.begin(), text.end(), is_control_or_space))
        return refused("contains whitespace or control characters");
    http_url out;
    std::string_view rest;
    if (starts_with_nocase(text, "http://")) {
        rest = text.substr(7);
    } else if (starts_with_nocase(text, "https://")) {
        rest = text.substr(8);
        out.tls = true;
    } else {
        return refused("expected http://host[:port][/path] or https://...");
    }
    if (rest.find('#') != std::string_view::npos) return refused("a fragment (#...) is not sent to a server");

    auto const authority_end = std::min(rest.find_first_of("/?"), rest.size());
    auto const authority = rest.substr(0, authority_end);
    auto const after = rest.substr(authority_end);
    auto const question = after.find('?');
    out.path = std::string(after.substr(0, question));
    if (question != std::string_view::npos) out.query = std::string(after.substr(question + 1));
    if (authority.find('@') != std::string_view::npos) return refused("user information (user@) is not supported");

    std::string_view port;
    bool has_port = false;
    if (!authority.empty() && authority.front() == '[') {
        auto const close = authority.find(']');
        if (close == std::string_view::npos) return refused("unterminated IPv6 literal");
        out.host = std::string(authority.substr(1, close - 1));
        auto const tail = authority.substr(close + 1);
        if (!tail.empty()) {
            if (tail.front() != ':') return refused("unexpected characters after the IPv6 literal");
            port = tail.substr(1);
            has_port = true;
        }
        in6_addr parsed{};
        if (inet_pton(AF_INET6, out.host.c_str(), &parsed) != 1) return refused("invalid IPv6 literal");
        out.ipv6 = true;
    } else {
        auto const colon = authority.find(':');
        out.host = std::string(authority.substr(0, colon));
        if (colon != std::string_view::npos) {
            port = authority.substr(colon + 1);
            has_port = true;
        }
        if (!std::all_of(out.host.begin(), out.host.end(), is_host_char)) return refused("invalid character in the host");
    }
    if (out.host.empty()) return refused("no host");

    if (!has_port) {
        out.port = out.tls ? "443" : "80";
        return {std::move(out), {}};
    }
    if (port.empty()) return refused("empty port");
    if (!std::all_of(port.begin(), port.end(), is_digit)) return refused("the port is not a number");
    auto const digits = port.substr(std::min(port.find_first_not_of('0'), port.size()));
    if (digits.empty() || digits.size() > 5) return refused("port out of range (1 to 65535)");
    unsigned long value = 0;
    for (char c : digits) value = value * 10 + static_cast<unsigned long>(c - '0');
    if (value > 65535) return refused("port out of range (1 to 65535)");
    out.port = std::string(digits);
    return {std::move(out), {}};
}

} // namespace stategraph
