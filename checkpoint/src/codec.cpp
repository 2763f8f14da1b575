#include "codec.hpp"

#include <stategraph/checkpoint/reserved.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>


#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <utility>
#include <vector>

namespace stategraph::checkpoint::codec {

namespace {

constexpr unsigned char record_format = 1;
constexpr unsigned char extends_marker = 0x01; // never the first byte of JSON text
// Starts sealed bytes: neither a record's format byte, nor the extends marker, nor a byte JSON
// text can start with.
constexpr unsigned char sealed_marker = 0xC5;
constexpr std::size_t seal_size = seal_overhead;

// Object keys the engine writes on every checkpoint, one byte each. Append only: the position is
// the stored code.
// Taken from the names every saver and the engine share (reserved.hpp); the last two are keys of
// older records.
namespace rk = reserved;
constexpr std::array<std::string_view, 16> key_dictionary = {
    rk::pull, rk::push, rk::deferred, rk::barriers, rk::seen, rk::writers, rk::delta, rk::node,
    rk::arg,  rk::step, rk::source,   rk::graph,    rk::id,   rk::value,   "writes",  "parents"};

constexpr std::size_t longest_key = [] {
    std::size_t n = 0;
    for (auto k : key_dictionary) n = k.size() > n ? k.size() : n;
    return n;
}();

constexpr char id_alphabet[] = "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
constexpr std::size_t id_width = 11;

// Deepest nesting read back (records and values alike), as the savers' JSON parse options.
constexpr int max_depth = 4096;

enum json_tag : unsigned char { t_null, t_false, t_true, t_int, t_uint, t_double, t_string, t_array, t_object };
enum ref_tag : unsigned char { r_same, r_older, r_newer, r_hex16, r_raw };

// ---- writing ---------------------------------------------------------------------------------

void put_varint(std::string& out, std::uint64_t v) {
    if (v < 0x80) { // the usual case: lengths, counts, small numbers
        out.push_back(static_cast<char>(v));
        return;
    }
    char b[10];
    int n = 0;
    while (v >= 0x80) {
        b[n++] = static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    b[n++] = static_cast<char>(v);
    out.append(b, static_cast<std::size_t>(n));
}

void put_bytes(std::string& out, std::string_view s) {
    put_varint(out, s.size());
    out.append(s);
}

void put_key(std::string& out, std::string_view k) {
    if (!k.empty() && k.size() <= longest_key)
        for (std::size_t i = 0; i < key_dictionary.size(); ++i) {
            const auto d = key_dictionary[i];
            if (d.size() == k.size() && d[0] == k[0] && d == k) {
                put_varint(out, i);
                return;
            }
        }
    put_varint(out, key_dictionary.size() + k.size());
    out.append(k);
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

bool is_hex16(std::string_view s) {
    if (s.size() != 16) return false;
    for (char c : s)
        if (hex_digit(c) < 0) return false;
    return true;
}

// A version (or signature) relative to `own`: the same id, a distance between two ids, 8 bytes
// for a 16-hex-digit signature, or the text itself.
void put_ref(std::string& out, std::string_view v, std::optional<std::uint64_t> own) {
    if (own) {
        if (auto n = id_number(v)) {
            if (*n == *own) {
                out.push_back(static_cast<char>(r_same));
            } else if (*n < *own) {
                out.push_back(static_cast<char>(r_older));
                put_varint(out, *own - *n);
            } else {
                out.push_back(static_cast<char>(r_newer));
                put_varint(out, *n - *own);
            }
            return;
        }
    }
    if (is_hex16(v)) {
        out.push_back(static_cast<char>(r_hex16));
        for (std::size_t i = 0; i < 16; i += 2)
            out.push_back(static_cast<char>(hex_digit(v[i]) * 16 + hex_digit(v[i + 1])));
        return;
    }
    out.push_back(static_cast<char>(r_raw));
    put_bytes(out, v);
}

void put_json(std::string& out, const boost::json::value& v, int depth = 0) {
    if (depth > max_depth)
        throw std::length_error("checkpoint record: frontier or metadata nested deeper than " +
                                std::to_string(max_depth) + " levels");
    switch (v.kind()) {
    case boost::json::kind::null: out.push_back(static_cast<char>(t_null)); break;
    case boost::json::kind::bool_: out.push_back(static_cast<char>(v.get_bool() ? t_true : t_false)); break;
    case boost::json::kind::int64: {
        out.push_back(static_cast<char>(t_int));
        const auto i = v.get_int64();
        put_varint(out, (static_cast<std::uint64_t>(i) << 1) ^ static_cast<std::uint64_t>(i >> 63)); // zigzag
        break;
    }
    case boost::json::kind::uint64:
        out.push_back(static_cast<char>(t_uint));
        put_varint(out, v.get_uint64());
        break;
    case boost::json::kind::double_: {
        out.push_back(static_cast<char>(t_double));
        char b[8];
        const double d = v.get_double();
        std::memcpy(b, &d, 8);
        out.append(b, 8);
        break;
    }
    case boost::json::kind::string:
        out.push_back(static_cast<char>(t_string));
        put_bytes(out, v.get_string());
        break;
    case boost::json::kind::array:
        out.push_back(static_cast<char>(t_array));
        put_varint(out, v.get_array().size());
        for (const auto& e : v.get_array()) put_json(out, e, depth + 1);
        break;
    case boost::json::kind::object:
        out.push_back(static_cast<char>(t_object));
        put_varint(out, v.get_object().size());
        for (const auto& [k, e] : v.get_object()) {
            put_key(out, k);
            put_json(out, e, depth + 1);
        }
        break;
    }
}

// JSON text, as boost::json::serialize writes it for everything but doubles (left to it), without
// its serializer's set-up: most stored values are a number or a short list.
void put_text_string(std::string& out, std::string_view str) {
    static constexpr char hex[] = "0123456789abcdef";
    out.push_back('"');
    std::size_t run = 0; // start of the characters not yet written
    for (std::size_t i = 0; i < str.size(); ++i) {
        const auto c = static_cast<unsigned char>(str[i]);
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        out.append(str.data() + run, i - run);
        run = i + 1;
        switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            out += "\\u00";
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    out.append(str.data() + run, str.size() - run);
    out.push_back('"');
}

void put_text(std::string& out, const boost::json::value& v) {
    char buf[32];
    switch (v.kind()) {
    case boost::json::kind::null: out += "null"; break;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; break;
    case boost::json::kind::int64: {
        auto r = std::to_chars(buf, buf + sizeof buf, v.get_int64());
        out.append(buf, r.ptr);
        break;
    }
    case boost::json::kind::uint64: {
        auto r = std::to_chars(buf, buf + sizeof buf, v.get_uint64());
        out.append(buf, r.ptr);
        break;
    }
    case boost::json::kind::double_: out += boost::json::serialize(v); break;
    case boost::json::kind::string: put_text_string(out, v.get_string()); break;
    case boost::json::kind::array: {
        out.push_back('[');
        bool first = true;
        for (const auto& e : v.get_array()) {
            if (!first) out.push_back(',');
            first = false;
            put_text(out, e);
        }
        out.push_back(']');
        break;
    }
    case boost::json::kind::object: {
        out.push_back('{');
        bool first = true;
        for (const auto& [k, e] : v.get_object()) {
            if (!first) out.push_back(',');
            first = false;
            put_text_string(out, k);
            out.push_back(':');
            put_text(out, e);
        }
        out.push_back('}');
        break;
    }
    }
}

// ---- reading ---------------------------------------------------------------------------------

// Reads stored bytes. Every number read from them that sizes, counts or places something is
// checked against the bytes still unread before it drives a loop or an allocation: stored bytes
// may be damaged or hostile, and a number must never cost more than the bytes that carry it.
struct reader {
    std::string_view in;
    std::size_t pos = 0;
    int depth = 0;

    [[noreturn]] void fail(const char* what) const {
        throw corrupt(std::string("checkpoint record: ") + what + " at byte " + std::to_string(pos));
    }
    std::size_t remaining() const { return pos < in.size() ? in.size() - pos : 0; }
    unsigned char byte() {
        if (pos >= in.size()) fail("truncated");
        return static_cast<unsigned char>(in[pos++]);
    }
    std::uint64_t varint() {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            const unsigned char b = byte();
            // The tenth byte holds bit 63 only: more would be cut off, not read.
            if (shift == 63 && b > 1) fail("number wider than 64 bits");
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if (!(b & 0x80)) return v;
        }
        fail("varint too long");
    }
    // A count of items that take at least `each` bytes apiece: never more than the bytes left
    // can hold, so that reserving it or looping over it is bounded by the input.
    std::size_t count(std::size_t each, const char* what) {
        const auto n = varint();
        if (n > remaining() / each) fail(what);
        return static_cast<std::size_t>(n);
    }
    std::string_view bytes(std::uint64_t n) {
        if (n > remaining()) fail("truncated");
        auto s = in.substr(pos, static_cast<std::size_t>(n));
        pos += static_cast<std::size_t>(n);
        return s;
    }
    std::string_view key() {
        const auto x = varint();
        if (x < key_dictionary.size()) return key_dictionary[static_cast<std::size_t>(x)];
        return bytes(x - key_dictionary.size());
    }
    std::string ref(std::optional<std::uint64_t> own) {
        switch (byte()) {
        case r_same:
            if (!own) fail("relative version without an id");
            return id_text(*own);
        case r_older: {
            if (!own) fail("relative version without an id");
            const auto d = varint();
            if (d > *own) fail("version out of range");
            return id_text(*own - d);
        }
        case r_newer: {
            if (!own) fail("relative version without an id");
            const auto d = varint();
            if (d > ~*own) fail("version out of range");
            return id_text(*own + d);
        }
        case r_hex16: {
            static constexpr char hex[] = "0123456789abcdef";
            std::string s;
            for (unsigned char c : bytes(8)) {
                s.push_back(hex[c >> 4]);
                s.push_back(hex[c & 15]);
            }
            return s;
        }
        case r_raw: return std::string(bytes(varint()));
        default: fail("unknown version form");
        }
    }
    boost::json::value json() {
        if (++depth > max_depth) fail("nesting too deep");
        boost::json::value v;
        switch (byte()) {
        case t_null: break;
        case t_false: v = false; break;
        case t_true: v = true; break;
        case t_int: {
            const auto z = varint();
            v = static_cast<std::int64_t>((z >> 1) ^ (~(z & 1) + 1));
            break;
        }
        case t_uint: v = varint(); break;
        case t_double: {
            double d;
            std::memcpy(&d, bytes(8).data(), 8);
            v = d;
            break;
        }
        case t_string: v = boost::json::string(bytes(varint())); break;
        case t_array: {
            const auto n = count(1, "array longer than the record"); // an item is 1 byte or more
            auto& a = v.emplace_array();
            a.reserve(n);
            for (std::size_t i = 0; i < n; ++i) a.push_back(json());
            break;
        }
        case t_object: {
            const auto n = count(2, "object longer than the record"); // a key and a value
            auto& o = v.emplace_object();
            o.reserve(n);
            for (std::size_t i = 0; i < n; ++i) {
                auto k = key();
                o.insert_or_assign(k, json());
            }
            break;
        }
        default: fail("unknown value form");
        }
        --depth;
        return v;
    }
};

} // namespace

std::string id_text(std::uint64_t n) {
    char buf[id_width];
    for (int i = static_cast<int>(id_width) - 1; i >= 0; --i) {
        buf[i] = id_alphabet[n & 63u];
        n >>= 6;
    }
    return std::string(buf, id_width);
}

std::optional<std::uint64_t> id_number(std::string_view id) {
    // Symbol -> digit (-1: not an id symbol), built once from the alphabet.
    static const auto digits = [] {
        std::array<signed char, 256> d{};
        d.fill(-1);
        for (int i = 0; i < 64; ++i) d[static_cast<unsigned char>(id_alphabet[i])] = static_cast<signed char>(i);
        return d;
    }();
    if (id.size() != id_width) return std::nullopt;
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < id_width; ++i) {
        const int d = digits[static_cast<unsigned char>(id[i])];
        if (d < 0) return std::nullopt;
        if (i == 0 && d >= 16) return std::nullopt; // would not fit in 64 bits
        n = (n << 6) | static_cast<std::uint64_t>(d);
    }
    return n;
}

std::string encode_record(const checkpoint& cp) {
    std::string out;
    std::size_t size = 48;
    for (const auto& [channel, version] : cp.versions) size += channel.size() + 12;
    out.reserve(size); // versions without reallocating; frontier and metadata mostly fit too
    out.push_back(static_cast<char>(record_format));
    const auto own = id_number(cp.id);
    put_varint(out, cp.versions.size());
    for (const auto& [channel, version] : cp.versions) {
        put_key(out, channel);
        if (own && version.size() == cp.id.size() && version == cp.id) {
            out.push_back(static_cast<char>(r_same)); // written by this checkpoint
            continue;
        }
        put_ref(out, version, own);
    }
    put_json(out, cp.frontier);
    // metadata without `step`/`source` when they repeat the columns; their positions are kept so
    // that the object reads back in the same order.
    std::size_t step_at = 0, source_at = 0, i = 0;
    for (const auto& [k, v] : cp.metadata) {
        ++i;
        if (k == "step" && !step_at && v.is_int64() && v.get_int64() == cp.step) step_at = i;
        else if (k == "source" && !source_at && v.is_string() && v.get_string() == cp.source) source_at = i;
    }
    put_varint(out, step_at);
    put_varint(out, source_at);
    out.push_back(static_cast<char>(t_object));
    put_varint(out, cp.metadata.size() - (step_at ? 1 : 0) - (source_at ? 1 : 0));
    i = 0;
    for (const auto& [k, v] : cp.metadata) {
        ++i;
        if (i == step_at || i == source_at) continue;
        put_key(out, k);
        put_json(out, v);
    }
    put_ref(out, cp.signature, std::nullopt);
    return out;
}

void decode_record(std::string_view bytes, checkpoint& cp) {
    reader r{bytes};
    if (r.byte() != record_format) r.fail("unknown record format");
    const auto own = id_number(cp.id);
    cp.versions.clear();
    // A version is a channel key and a reference: 2 bytes at least.
    for (auto n = r.count(2, "more versions than the record holds"); n > 0; --n) {
        auto k = std::string(r.key());
        cp.versions.insert_or_assign(std::move(k), r.ref(own));
    }
    cp.frontier = r.json();
    // Where `step` and `source` stood in the metadata (1-based; 0: stored with the rest).
    const auto step_at = r.varint(), source_at = r.varint();
    auto rest = r.json();
    if (!rest.is_object()) r.fail("metadata is not an object");
    auto& stored = rest.get_object();
    const std::uint64_t total = stored.size() + (step_at ? 1 : 0) + (source_at ? 1 : 0);
    if (step_at > total || source_at > total) r.fail("metadata position out of range");
    if (step_at && step_at == source_at) r.fail("step and source at one metadata position");
    if ((step_at && stored.contains("step")) || (source_at && stored.contains("source")))
        r.fail("metadata key both left out and stored");
    cp.metadata.clear();
    cp.metadata.reserve(static_cast<std::size_t>(total));
    // Exactly `total` places: the two left out where they stood, the stored keys in between.
    auto next = stored.begin();
    for (std::uint64_t at = 1; at <= total; ++at) {
        if (at == step_at) cp.metadata.insert_or_assign("step", cp.step);
        else if (at == source_at) cp.metadata.insert_or_assign("source", cp.source);
        else {
            cp.metadata.insert_or_assign(next->key(), std::move(next->value()));
            ++next;
        }
    }
    cp.signature = r.ref(std::nullopt);
    if (r.pos != bytes.size()) r.fail("trailing bytes");
}

std::string encode_inline(const std::vector<std::pair<std::string_view, std::string_view>>& values) {
    std::string out;
    std::size_t size = 1;
    for (const auto& [channel, bytes] : values) size += channel.size() + bytes.size() + 4;
    out.reserve(size);
    put_varint(out, values.size());
    for (const auto& [channel, bytes] : values) {
        put_key(out, channel);
        put_bytes(out, bytes);
    }
    return out;
}

std::vector<std::pair<std::string_view, std::string_view>> decode_inline(std::string_view bytes) {
    reader r{bytes};
    std::vector<std::pair<std::string_view, std::string_view>> out;
    // A value is a channel key and a length: 2 bytes at least.
    const auto n = r.count(2, "more inline values than bytes");
    out.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
        auto channel = r.key();
        auto value = r.bytes(r.varint());
        out.emplace_back(channel, value);
    }
    if (r.pos != bytes.size()) r.fail("trailing bytes after inline values");
    return out;
}

std::string merge_inline(std::string_view old, const std::vector<std::pair<std::string_view, std::string_view>>& fresh,
                         const std::function<bool(std::string_view)>& rewritten) {
    auto merged = fresh;
    if (!old.empty())
        for (const auto& kept : decode_inline(old)) {
            // (a named pair: clang 14 cannot capture a structured binding in a lambda)
            const bool again = rewritten(kept.first) || std::any_of(fresh.begin(), fresh.end(), [&](const auto& f) {
                                   return f.first == kept.first;
                               });
            if (!again) merged.push_back(kept);
        }
    return merged.empty() ? std::string() : encode_inline(merged);
}

inline_size measure_inline(std::string_view bytes) {
    inline_size out;
    for (const auto& [channel, value] : decode_inline(bytes)) {
        ++out.values;
        out.value_bytes += value.size() - framing_of(value);
    }
    return out;
}

void mark_needed(const std::string& channel, const std::string& version,
                 const std::function<std::optional<std::string>(const std::string&)>& fetch,
                 std::set<std::pair<std::string, std::string>>& needed) {
    std::string v = version;
    while (!v.empty() && needed.emplace(channel, v).second) {
        auto stored = fetch(v);
        if (!stored) return;
        auto parts = split_value(*stored, v);
        v = parts.extends ? std::move(*parts.extends) : std::string();
    }
}

std::string encode_value(const boost::json::value& v, const std::string* extends, const std::string& version) {
    std::string out;
    if (extends) {
        out.push_back(static_cast<char>(extends_marker));
        put_ref(out, *extends, id_number(version));
    }
    put_text(out, v);
    return out;
}

boost::json::value shape_json(const std::vector<std::string>& shape) {
    boost::json::array a;
    a.reserve(shape.size());
    for (const auto& line : shape) a.emplace_back(line);
    return a;
}

std::string encode_shape(const std::vector<std::string>& shape, const std::string& signature) {
    return encode_value(shape_json(shape), nullptr, signature);
}

bool shared_shape(std::string_view channel, const std::string* extends, const std::string& version,
                  const std::string& checkpoint_id) noexcept {
    return channel == rk::graph && !extends && version != checkpoint_id;
}

std::vector<std::string> shape_from(std::string_view stored, const std::string& signature) {
    const std::string bytes(stored);
    auto v = resolve_value(signature, [&](const std::string&) { return std::optional<std::string>(bytes); });
    const auto* a = v.if_array();
    if (!a) throw corrupt("the shape of graph " + signature + " is not a list of lines");
    std::vector<std::string> out;
    out.reserve(a->size());
    for (const auto& line : *a) {
        if (!line.is_string()) throw corrupt("the shape of graph " + signature + " holds a line that is not text");
        out.emplace_back(line.get_string());
    }
    return out;
}

value_parts split_value(std::string_view stored, const std::string& version) {
    if (stored.empty() || static_cast<unsigned char>(stored[0]) != extends_marker) return {std::nullopt, stored};
    reader r{stored, 1};
    auto base = r.ref(id_number(version));
    return {std::move(base), stored.substr(r.pos)};
}

boost::json::value resolve_value(const std::string& version,
                                 const std::function<std::optional<std::string>(const std::string&)>& fetch) {
    std::vector<boost::json::value> tails; // newest first
    std::string at = version;
    for (std::size_t links = 0;; ++links) {
        std::optional<std::string> stored;
        value_parts parts;
        try {
            stored = fetch(at);
            if (stored) parts = split_value(*stored, at);
        } catch (const corrupt& e) {
            // A damaged link is named: the version whose stored bytes are bad, not only the first.
            if (links == 0) throw;
            throw corrupt("the value at version " + version + " extends version " + at + ", which cannot be read: " + e.what());
        }
        if (!stored) {
            if (links == 0) throw corrupt("no value stored at version " + at);
            throw corrupt("the value at version " + version + " extends version " + at + ", which is not stored");
        }
        boost::system::error_code ec;
        boost::json::parse_options options;
        options.max_depth = max_depth;      // as deep as anything serialize() wrote
        options.allow_invalid_utf8 = true; // strings holding arbitrary bytes read back as written
        auto v = boost::json::parse(parts.json, ec, {}, options);
        if (ec) throw corrupt("the value at version " + at + " is not JSON: " + ec.message());
        if (!parts.extends) {
            if (tails.empty()) return v;
            if (!v.is_array()) throw corrupt("the value at version " + at + " is extended but is not a list");
            auto& a = v.get_array();
            for (auto t = tails.rbegin(); t != tails.rend(); ++t)
                for (auto& e : t->get_array()) a.push_back(std::move(e));
            return v;
        }
        if (!v.is_array()) throw corrupt("the items appended at version " + at + " are not a list");
        if (!(*parts.extends < at) || links > 100000)
            throw corrupt("the value at version " + at + " extends version " + *parts.extends + ", which is not older");
        tails.push_back(std::move(v));
        at = std::move(*parts.extends);
    }
}

namespace {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// CRC-32C with SSE 4.2's `crc32` instruction (the polynomial it computes): 8 bytes at a time.
__attribute__((target("sse4.2"))) std::uint32_t crc32c_hardware(std::uint32_t crc, const unsigned char* p, std::size_t n) {
    std::uint64_t c = crc;
    for (; n >= 8; n -= 8, p += 8) {
        std::uint64_t w;
        std::memcpy(&w, p, sizeof w);
        c = __builtin_ia32_crc32di(c, w);
    }
    auto c32 = static_cast<std::uint32_t>(c);
    for (; n > 0; --n, ++p) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
const bool has_crc32_instruction = __builtin_cpu_supports("sse4.2");
#endif

/// Continues CRC-32C `crc` (its running remainder: start from 0xFFFFFFFF, end by inverting)
/// over `n` bytes: by the processor's instruction where it has one, else by table.
std::uint32_t crc32c_update(std::uint32_t crc, const void* data, std::size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (has_crc32_instruction) return crc32c_hardware(crc, p, n);
#endif
    return crc32c_by_table(crc, p, n);
}

/// CRC-32C (Castagnoli) over the address parts, each followed by its length so that no two
/// different addresses hash the same bytes, then the payload.
std::uint32_t checksum(std::string_view payload, std::initializer_list<std::string_view> parts) {
    std::uint32_t crc = 0xFFFF'FFFFu;
    for (auto p : parts) {
        crc = crc32c_update(crc, p.data(), p.size());
        const std::uint64_t n = p.size();
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
        crc = crc32c_update(crc, len, sizeof len);
    }
    crc = crc32c_update(crc, payload.data(), payload.size());
    return ~crc;
}
} // namespace

std::uint32_t crc32c_by_table(std::uint32_t crc, const unsigned char* p, std::size_t n) {
    // The reflected CRC-32C's byte table (polynomial 0x1EDC6F41, reversed 0x82F63B78).
    static const auto table = [] {
        std::array<std::uint32_t, 256> t{};
        for (std::uint32_t i = 0; i < 256; ++i) {
            std::uint32_t c = i;
            for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F6'3B78u : c >> 1;
            t[i] = c;
        }
        return t;
    }();
    for (; n > 0; --n, ++p) crc = table[(crc ^ *p) & 0xff] ^ (crc >> 8);
    return crc;
}

std::uint32_t crc32c(std::string_view bytes) { return ~crc32c_update(0xFFFF'FFFFu, bytes.data(), bytes.size()); }

std::string seal(std::string_view payload, std::initializer_list<std::string_view> parts) {
    const auto sum = checksum(payload, parts);
    std::string out;
    out.reserve(seal_size + payload.size());
    out.push_back(static_cast<char>(sealed_marker));
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((sum >> (8 * i)) & 0xff));
    out.append(payload);
    return out;
}

std::size_t framing_of(std::string_view stored) noexcept {
    if (is_sealed(stored) && stored.size() >= seal_size) return seal_size;
    if (is_encrypted(stored) && stored.size() >= encrypted_overhead) return encrypted_overhead;
    return 0;
}

bool is_sealed(std::string_view stored) noexcept {
    return !stored.empty() && static_cast<unsigned char>(stored[0]) == sealed_marker;
}

std::string_view unseal(std::string_view stored, std::initializer_list<std::string_view> parts) {
    if (!is_sealed(stored)) return stored;
    if (stored.size() < seal_size) throw corrupt("its checksum is cut short");
    std::uint32_t want = 0;
    for (int i = 0; i < 4; ++i) want |= static_cast<std::uint32_t>(static_cast<unsigned char>(stored[1 + i])) << (8 * i);
    const auto payload = stored.substr(seal_size);
    if (checksum(payload, parts) != want)
        throw corrupt("checksum mismatch: the stored bytes were changed after they were written (" +
                      std::to_string(stored.size()) + " bytes)");
    return payload;
}

} // namespace stategraph::checkpoint::codec
