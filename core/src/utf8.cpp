#include <stategraph/core/utf8.hpp>

#include <boost/json/serialize.hpp>

#include <cmath>
#include <vector>

namespace stategraph {

namespace json = boost::json;

namespace {

/// The sequence that starts at `text[at]`: its length in bytes when it is well-formed, else the
/// length of its maximal subpart (the longest prefix that could still begin a valid sequence,
/// at least one byte), which is replaced as a whole.
struct sequence {
    std::size_t length;
    bool valid;
};

sequence sequence_at(std::string_view text, std::size_t at) noexcept {
    const auto lead = static_cast<unsigned char>(text[at]);
    if (lead < 0x80) return {1, true};
    // Unicode table 3-7: the lead byte gives the length and the range of the second byte, which
    // excludes overlong forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4).
    std::size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) low = 0xA0;
        if (lead == 0xED) high = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) low = 0x90;
        if (lead == 0xF4) high = 0x8F;
    } else {
        return {1, false}; // a continuation byte, C0, C1 or F5..FF: never starts a sequence
    }
    for (std::size_t i = 1; i < length; ++i) {
        if (at + i >= text.size()) return {i, false};
        const auto byte = static_cast<unsigned char>(text[at + i]);
        if (byte < (i == 1 ? low : 0x80) || byte > (i == 1 ? high : 0xBF)) return {i, false};
    }
    return {length, true};
}

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

} // namespace

bool is_valid_utf8(std::string_view text) noexcept {
    for (std::size_t at = 0; at < text.size();) {
        const auto s = sequence_at(text, at);
        if (!s.valid) return false;
        at += s.length;
    }
    return true;
}

std::string valid_utf8(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t at = 0; at < text.size();) {
        const auto s = sequence_at(text, at);
        if (s.valid) out.append(text.substr(at, s.length));
        else out.append(replacement);
        at += s.length;
    }
    return out;
}

void make_valid_utf8(json::value& v) {
    // An explicit stack instead of recursion: a stored value may nest deeper than the call
    // stack should.
    std::vector<json::value*> pending{&v};
    while (!pending.empty()) {
        json::value& item = *pending.back();
        pending.pop_back();
        if (auto* s = item.if_string()) {
            if (!is_valid_utf8(*s)) *s = valid_utf8(*s);
        } else if (auto* a = item.if_array()) {
            for (auto& element : *a) pending.push_back(&element);
        } else if (auto* o = item.if_object()) {
            bool keys_valid = true;
            for (const auto& member : *o) keys_valid = keys_valid && is_valid_utf8(member.key());
            if (!keys_valid) {
                // Keys cannot be changed in place: the object is rebuilt, in its order.
                json::object fixed(o->storage());
                fixed.reserve(o->size());
                for (auto& member : *o) fixed.emplace(valid_utf8(member.key()), std::move(member.value()));
                *o = std::move(fixed);
            }
            for (auto& member : *o) pending.push_back(&member.value());
        }
    }
}

std::string serialize_valid_utf8(json::value v) {
    make_valid_utf8(v);
    return json::serialize(v);
}

std::string serialize_strict_json(const json::value& v) {
    std::string text = json::serialize(v);
    const bool finite = text.find("Infinity") == std::string::npos && text.find("NaN") == std::string::npos;
    if (finite && is_valid_utf8(text)) return text;
    json::value fixed = v;
    if (!finite) {
        std::vector<json::value*> pending{&fixed}; // a stack: a value may nest deeper than the call stack should
        while (!pending.empty()) {
            json::value* x = pending.back();
            pending.pop_back();
            if (x->is_double() && !std::isfinite(x->get_double())) *x = nullptr;
            else if (auto* a = x->if_array())
                for (auto& e : *a) pending.push_back(&e);
            else if (auto* o = x->if_object())
                for (auto& m : *o) pending.push_back(&m.value());
        }
    }
    make_valid_utf8(fixed);
    return json::serialize(fixed);
}

} // namespace stategraph
