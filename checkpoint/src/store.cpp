// The store interface's shared part (validation, full-text words, filters, paging) and the
// in-memory store.

#include <stategraph/checkpoint/store/memory_store.hpp>
#include <stategraph/checkpoint/store/store.hpp>

#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>

namespace stategraph::store {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "stategraph.store"; }
    std::string message(int v) const override {
        switch (static_cast<store_errc>(v)) {
        case store_errc::invalid_namespace: return "invalid namespace";
        case store_errc::invalid_key: return "invalid key";
        case store_errc::invalid_filter: return "invalid search filter";
        case store_errc::storage_failure: return "storage failure";
        case store_errc::corrupt_item: return "corrupt item";
        case store_errc::schema_too_new: return "schema too new";
        }
        return "unknown store error";
    }
};

std::string quoted(const namespace_path& ns) {
    std::string out = "(";
    for (std::size_t i = 0; i < ns.size(); ++i) out += (i ? ", \"" : "\"") + ns[i] + "\"";
    return out + ")";
}

void check_key(const namespace_path& ns, const std::string& key) {
    if (key.empty())
        throw store_error(store_errc::invalid_key, "store: empty key in namespace " + quoted(ns), ns, key);
    // PostgreSQL's text parameters end at a NUL: "a\0b" and "a\0c" would be one item there.
    // Refused everywhere, so every store keeps the same items.
    if (key.find('\0') != std::string::npos)
        throw store_error(store_errc::invalid_key,
                          "store: key in namespace " + quoted(ns) + " contains a NUL byte at offset " +
                              std::to_string(key.find('\0')),
                          ns, key);
}

/// The value at a dotted path ("a.b"): the member named so, else the path walked through objects.
const json::value* lookup(const json::object& value, std::string_view path) {
    if (const auto* v = value.if_contains(path)) return v;
    const json::object* at = &value;
    while (true) {
        const auto dot = path.find('.');
        const auto* v = at->if_contains(path.substr(0, dot));
        if (!v || dot == std::string_view::npos) return v;
        at = v->if_object();
        if (!at) return nullptr;
        path.remove_prefix(dot + 1);
    }
}

void collect_strings(const json::value& v, std::string& out) {
    if (const auto* s = v.if_string()) {
        if (!out.empty()) out += ' ';
        out.append(s->data(), s->size());
    } else if (const auto* a = v.if_array()) {
        for (const auto& e : *a) collect_strings(e, out);
    } else if (const auto* o = v.if_object()) {
        for (const auto& m : *o) collect_strings(m.value(), out);
    }
}

std::optional<double> number(const json::value& v) {
    if (v.is_int64()) return static_cast<double>(v.get_int64());
    if (v.is_uint64()) return static_cast<double>(v.get_uint64());
    if (v.is_double()) return v.get_double();
    return std::nullopt;
}

/// -1, 0 or 1 for two numbers: exact when both are integers (2^53 + 1 is not 2^53, and int64
/// against uint64 is compared by sign first), as doubles otherwise; nullopt when either is not a
/// number.
std::optional<int> compare_numbers(const json::value& a, const json::value& b) {
    const bool ai = a.is_int64() || a.is_uint64(), bi = b.is_int64() || b.is_uint64();
    if (ai && bi) {
        const bool an = a.is_int64() && a.get_int64() < 0, bn = b.is_int64() && b.get_int64() < 0;
        if (an != bn) return an ? -1 : 1;
        if (an) return a.get_int64() < b.get_int64() ? -1 : (a.get_int64() > b.get_int64() ? 1 : 0);
        const auto magnitude = [](const json::value& v) {
            return v.is_uint64() ? v.get_uint64() : static_cast<std::uint64_t>(v.get_int64());
        };
        const auto x = magnitude(a), y = magnitude(b);
        return x < y ? -1 : (x > y ? 1 : 0);
    }
    auto x = number(a), y = number(b);
    if (!x || !y) return std::nullopt;
    return *x < *y ? -1 : (*x > *y ? 1 : 0);
}

bool equal(const json::value& a, const json::value& b) {
    if (auto c = compare_numbers(a, b)) return *c == 0;
    return a == b;
}

/// -1, 0, 1, or nullopt when the two cannot be ordered (different kinds).
std::optional<int> order(const json::value& a, const json::value& b) {
    if (auto c = compare_numbers(a, b)) return c;
    if (a.is_string() && b.is_string()) {
        const int c = std::string_view(a.get_string()).compare(std::string_view(b.get_string()));
        return c < 0 ? -1 : (c > 0 ? 1 : 0);
    }
    return std::nullopt;
}

bool is_operator_object(const json::value& v) {
    const auto* o = v.if_object();
    return o && !o->empty() && std::any_of(o->begin(), o->end(), [](const auto& m) { return m.key().starts_with("$"); });
}

void check_filter(const json::object& filter) {
    static const std::set<std::string_view> ops{"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"};
    for (const auto& [field, cond] : filter) {
        if (field.empty()) throw store_error(store_errc::invalid_filter, "store: search filter has an empty field name");
        if (!is_operator_object(cond)) continue;
        for (const auto& [op, operand] : cond.get_object()) {
            if (!ops.count(op))
                throw store_error(store_errc::invalid_filter,
                                  "store: search filter on field '" + std::string(field) + "' uses unknown operator '" +
                                      std::string(op) + "' (known: $eq, $ne, $gt, $gte, $lt, $lte)");
            if (op != "$eq" && op != "$ne" && !number(operand) && !operand.is_string())
                throw store_error(store_errc::invalid_filter,
                                  "store: search filter on field '" + std::string(field) + "': operator '" +
                                      std::string(op) + "' needs a number or a string, not " + json::serialize(operand));
        }
    }
}

asio::awaitable<std::vector<search_item>> search_impl(base_store* self,
                                                      asio::awaitable<std::vector<search_item>> candidates,
                                                      std::optional<json::object> filter, std::size_t limit,
                                                      std::size_t offset, bool refresh,
                                                      asio::awaitable<void> (*refresher)(base_store*, std::vector<std::pair<namespace_path, std::string>>)) {
    auto all = co_await std::move(candidates);
    std::vector<search_item> out;
    std::size_t skipped = 0;
    for (auto& c : all) {
        if (out.size() >= limit) break;
        if (filter && !base_store::matches(*filter, c.value)) continue;
        if (skipped < offset) {
            ++skipped;
            continue;
        }
        out.push_back(std::move(c));
    }
    if (refresh && !out.empty()) {
        std::vector<std::pair<namespace_path, std::string>> keys;
        for (const auto& i : out) keys.emplace_back(i.ns, i.key);
        co_await refresher(self, std::move(keys));
    }
    co_return out;
}

asio::awaitable<std::vector<namespace_path>> namespaces_impl(asio::awaitable<std::vector<namespace_path>> all_of,
                                                             std::optional<namespace_path> prefix,
                                                             std::optional<namespace_path> suffix,
                                                             std::size_t max_depth, std::size_t limit,
                                                             std::size_t offset) {
    auto all = co_await std::move(all_of);
    auto label_ok = [](const std::string& want, const std::string& got) { return want == "*" || want == got; };
    std::set<namespace_path> found;
    for (auto& ns : all) {
        if (prefix && (ns.size() < prefix->size() || !std::equal(prefix->begin(), prefix->end(), ns.begin(), label_ok)))
            continue;
        if (suffix && (ns.size() < suffix->size() ||
                       !std::equal(suffix->begin(), suffix->end(), ns.end() - static_cast<std::ptrdiff_t>(suffix->size()),
                                   label_ok)))
            continue;
        if (max_depth && ns.size() > max_depth) ns.resize(max_depth);
        found.insert(std::move(ns));
    }
    std::vector<namespace_path> out;
    std::size_t i = 0;
    for (auto& ns : found) {
        if (i++ < offset) continue;
        if (out.size() >= limit) break;
        out.push_back(ns);
    }
    co_return out;
}

} // namespace

const std::error_category& store_category() noexcept {
    static const category c;
    return c;
}

std::string to_string(const namespace_path& ns) {
    std::string out;
    for (std::size_t i = 0; i < ns.size(); ++i) out += (i ? "." : "") + ns[i];
    return out;
}

void base_store::check_namespace(const namespace_path& ns, bool allow_empty) {
    if (ns.empty() && !allow_empty)
        throw store_error(store_errc::invalid_namespace, "store: the namespace is empty (give at least one label)", ns);
    for (std::size_t i = 0; i < ns.size(); ++i) {
        if (ns[i].empty())
            throw store_error(store_errc::invalid_namespace,
                              "store: namespace " + quoted(ns) + " has an empty label at position " + std::to_string(i), ns);
        if (ns[i].find('\0') != std::string::npos)
            throw store_error(store_errc::invalid_namespace,
                              "store: namespace label " + std::to_string(i) + " contains a NUL byte", ns);
        if (ns[i].find('.') != std::string::npos)
            throw store_error(store_errc::invalid_namespace,
                              "store: namespace " + quoted(ns) + ": label \"" + ns[i] +
                                  "\" contains '.' (labels are joined with '.'; use another separator)",
                              ns);
    }
}

std::vector<std::string> base_store::words_of(std::string_view text) {
    std::vector<std::string> out;
    std::string word;
    for (unsigned char ch : text) {
        if (ch >= 0x80 || std::isalnum(ch)) {
            word += static_cast<char>(ch < 0x80 ? std::tolower(ch) : ch);
        } else if (!word.empty()) {
            out.push_back(std::move(word));
            word.clear();
        }
    }
    if (!word.empty()) out.push_back(std::move(word));
    return out;
}

std::optional<std::string> base_store::text_of(const json::object& value, index_spec index) const {
    if (index.is_off()) return std::nullopt;
    const auto& fields = index.fields() ? *index.fields() : options_.index_fields;
    std::string out;
    if (fields.empty()) {
        collect_strings(value, out);
        return out;
    }
    for (const auto& f : fields) {
        if (f == "$") {
            collect_strings(value, out);
        } else if (const auto* v = lookup(value, f)) {
            collect_strings(*v, out);
        }
    }
    return out;
}

bool base_store::matches(const json::object& filter, const json::object& value) {
    for (const auto& [field, cond] : filter) {
        const json::value* got = lookup(value, field);
        if (!is_operator_object(cond)) {
            if (!got || !equal(*got, cond)) return false;
            continue;
        }
        for (const auto& [op, operand] : cond.get_object()) {
            if (op == "$eq") {
                if (!got || !equal(*got, operand)) return false;
            } else if (op == "$ne") {
                if (got && equal(*got, operand)) return false;
            } else {
                if (!got) return false;
                auto o = order(*got, operand);
                if (!o) return false;
                if (op == "$gt" && !(*o > 0)) return false;
                if (op == "$gte" && !(*o >= 0)) return false;
                if (op == "$lt" && !(*o < 0)) return false;
                if (op == "$lte" && !(*o <= 0)) return false;
                if (op != "$gt" && op != "$gte" && op != "$lt" && op != "$lte") {
                    check_filter(filter); // throws: unknown operator
                    return false;
                }
            }
        }
    }
    return true;
}

namespace_path base_store::parse_namespace(std::string_view joined) {
    namespace_path out;
    while (true) {
        const auto dot = joined.find('.');
        out.emplace_back(joined.substr(0, dot));
        if (dot == std::string_view::npos) return out;
        joined.remove_prefix(dot + 1);
    }
}

json::object base_store::parse_value(std::string_view text, const namespace_path& ns, const std::string& key) {
    boost::system::error_code ec;
    json::parse_options lenient;
    lenient.allow_invalid_utf8 = true; // a value holding invalid UTF-8 comes back as it was stored
    auto v = json::parse(text, ec, {}, lenient);
    if (ec || !v.is_object())
        throw store_error(store_errc::corrupt_item,
                          "store: the item at namespace " + quoted(ns) + ", key \"" + key +
                              "\" cannot be read back (not a JSON object" + (ec ? ": " + ec.message() : std::string()) + ")",
                          ns, key);
    return std::move(v.get_object());
}

std::int64_t base_store::now_ms() noexcept {
    return std::chrono::duration_cast<std::chrono::milliseconds>(clock::now().time_since_epoch()).count();
}

clock::time_point base_store::from_ms(std::int64_t ms) noexcept {
    return clock::time_point(std::chrono::duration_cast<clock::duration>(std::chrono::milliseconds(ms)));
}

value_arg::value_arg(field f1, field f2, field f3, field f4, field f5, field f6, field f7, field f8) {
    for (const field* f : {&f1, &f2, &f3, &f4, &f5, &f6, &f7, &f8})
        if (!f->name.empty()) value_[f->name] = json::value(f->value);
}

asio::awaitable<void> base_store::put(const namespace_arg& nsa, const std::string& key, const value_arg& valuea,
                                      put_options options) {
    const namespace_path& ns = nsa;
    const json::object& value = valuea;
    check_namespace(ns);
    check_key(ns, key);
    write w{ns, key, value, text_of(value, options.index), std::nullopt};
    const auto ttl = options.ttl.count() != 0 ? options.ttl : options_.default_ttl;
    if (ttl.count() > 0) w.ttl = ttl;
    return do_put(std::move(w));
}

asio::awaitable<std::optional<item>> base_store::get(const namespace_arg& nsa, const std::string& key,
                                                     std::optional<bool> refresh_ttl) {
    const namespace_path& ns = nsa;
    check_namespace(ns);
    check_key(ns, key);
    return do_get(ns, key, refresh_ttl.value_or(options_.refresh_on_read));
}

asio::awaitable<void> base_store::remove(const namespace_arg& nsa, const std::string& key) {
    const namespace_path& ns = nsa;
    check_namespace(ns);
    check_key(ns, key);
    return do_remove(ns, key);
}

asio::awaitable<std::vector<search_item>> base_store::search(const namespace_arg& prefixa, search_options options) {
    const namespace_path& prefix = prefixa;
    check_namespace(prefix, true);
    std::optional<json::object> filter;
    if (const auto* f = options.filter.get(); f && !f->empty()) {
        check_filter(*f);
        filter = *f;
    }
    std::vector<std::string> words;
    std::size_t limit = options.limit;
    if (!options.query.empty()) {
        words = words_of(options.query);
        if (words.empty()) limit = 0; // a query without a word matches nothing
    }
    const bool refresh = options.refresh_ttl == search_options::refresh::store_default
                             ? options_.refresh_on_read
                             : options.refresh_ttl == search_options::refresh::yes;
    // offset + limit, saturated below INT64_MAX (a database LIMIT is a signed 64-bit number).
    constexpr std::size_t max_want = static_cast<std::size_t>(std::numeric_limits<std::int64_t>::max());
    const std::size_t want = filter                                  ? 0
                             : options.offset >= max_want - std::min(options.limit, max_want) ? max_want
                                                                     : options.offset + options.limit;
    auto refresher = [](base_store* self, std::vector<std::pair<namespace_path, std::string>> keys) {
        return self->do_refresh(std::move(keys));
    };
    auto candidates = do_search(prefix, std::move(words), limit ? want : 1);
    return search_impl(this, std::move(candidates), std::move(filter), limit, options.offset, refresh, +refresher);
}

asio::awaitable<std::vector<namespace_path>> base_store::list_namespaces(namespace_query query) {
    std::optional<namespace_path> prefix, suffix;
    if (query.prefix) prefix = *query.prefix;
    if (query.suffix) suffix = *query.suffix;
    return namespaces_impl(do_namespaces(), std::move(prefix), std::move(suffix), query.max_depth, query.limit,
                           query.offset);
}

asio::awaitable<std::size_t> base_store::sweep() { return do_sweep(); }

// ---------------------------------------------------------------------------------------------
// memory_store

asio::awaitable<void> memory_store::do_put(write w) {
    const auto now = now_ms();
    std::lock_guard lock(mutex_);
    auto k = std::make_pair(w.ns, w.key);
    auto it = items_.find(k);
    entry e;
    e.it = item{std::move(w.ns), std::move(w.key), std::move(w.value), from_ms(now), from_ms(now)};
    if (it != items_.end() && live(it->second, now)) e.it.created_at = it->second.it.created_at;
    if (w.text) e.words = words_of(*w.text);
    if (w.ttl) {
        e.ttl_ms = w.ttl->count();
        e.expires_ms = now + *e.ttl_ms;
    }
    items_[std::move(k)] = std::move(e);
    co_return;
}

asio::awaitable<std::optional<item>> memory_store::do_get(namespace_path ns, std::string key, bool refresh) {
    const auto now = now_ms();
    std::lock_guard lock(mutex_);
    auto it = items_.find(std::make_pair(ns, key));
    if (it == items_.end() || !live(it->second, now)) co_return std::nullopt;
    if (refresh && it->second.ttl_ms) it->second.expires_ms = now + *it->second.ttl_ms;
    co_return it->second.it;
}

asio::awaitable<void> memory_store::do_remove(namespace_path ns, std::string key) {
    std::lock_guard lock(mutex_);
    items_.erase(std::make_pair(ns, key));
    co_return;
}

asio::awaitable<std::vector<search_item>> memory_store::do_search(namespace_path prefix, std::vector<std::string> words,
                                                                  std::size_t) {
    const auto now = now_ms();
    std::vector<search_item> out;
    std::lock_guard lock(mutex_);
    std::vector<const entry*> cands;
    for (const auto& [k, e] : items_) {
        if (!live(e, now)) continue;
        if (k.first.size() < prefix.size() || !std::equal(prefix.begin(), prefix.end(), k.first.begin())) continue;
        if (!words.empty() && !e.words) continue;
        cands.push_back(&e);
    }
    if (words.empty()) {
        for (const auto* e : cands) out.push_back(search_item{e->it, std::nullopt});
        std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.updated_at > b.updated_at; });
        co_return out;
    }
    std::set<std::string> query(words.begin(), words.end());
    std::map<std::string, double> idf;
    for (const auto& w : query) {
        std::size_t df = 0;
        for (const auto* e : cands)
            if (std::find(e->words->begin(), e->words->end(), w) != e->words->end()) ++df;
        idf[w] = std::log(1.0 + static_cast<double>(cands.size() + 1) / static_cast<double>(df + 1));
    }
    double total = 0;
    for (const auto& [w, v] : idf) total += v;
    for (const auto* e : cands) {
        double score = 0;
        for (const auto& w : query) {
            const auto n = std::count(e->words->begin(), e->words->end(), w);
            if (n) score += idf[w] * (1.0 + std::log(static_cast<double>(n)));
        }
        if (score > 0) out.push_back(search_item{e->it, score / total});
    }
    std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return *a.score != *b.score ? *a.score > *b.score : a.updated_at > b.updated_at;
    });
    co_return out;
}

asio::awaitable<void> memory_store::do_refresh(std::vector<std::pair<namespace_path, std::string>> keys) {
    const auto now = now_ms();
    std::lock_guard lock(mutex_);
    for (const auto& k : keys) {
        auto it = items_.find(k);
        if (it != items_.end() && it->second.ttl_ms && live(it->second, now))
            it->second.expires_ms = now + *it->second.ttl_ms;
    }
    co_return;
}

asio::awaitable<std::vector<namespace_path>> memory_store::do_namespaces() {
    const auto now = now_ms();
    std::vector<namespace_path> out;
    std::lock_guard lock(mutex_);
    for (const auto& [k, e] : items_)
        if (live(e, now) && (out.empty() || out.back() != k.first)) out.push_back(k.first);
    co_return out;
}

asio::awaitable<std::size_t> memory_store::do_sweep() {
    const auto now = now_ms();
    std::lock_guard lock(mutex_);
    std::size_t n = 0;
    for (auto it = items_.begin(); it != items_.end();) {
        if (!live(it->second, now)) {
            it = items_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    co_return n;
}

} // namespace stategraph::store
