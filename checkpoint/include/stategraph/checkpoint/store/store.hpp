#pragma once
/// @file store.hpp
/// @brief Long-term memory: the `base_store` interface (LangGraph's `BaseStore`), shared by
/// every thread and run, as opposed to a checkpointer, which keeps one thread's state.
///
/// Model, as LangGraph's:
/// - an item lives at (namespace, key): the namespace is a path of labels such as
///   `{"users", "u42", "facts"}`, the key a string; the value is a JSON object; every item has
///   `created_at` and `updated_at`;
/// - `put` stores (or replaces) an item, with an optional time to live and a choice of which
///   fields feed full-text search; `get` reads one item; `remove` deletes one;
/// - `search(prefix, {...})` lists the items whose namespace starts with `prefix`, filtered on
///   their value's fields (equality, or `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`), optionally
///   ranked by a full-text query (each item then has a `score`), paged by `limit` and `offset`;
/// - `list_namespaces({...})` lists the namespaces that hold items, by prefix and suffix (a label
///   `"*"` matches any label), cut at `max_depth` labels;
/// - time to live: an item put with a ttl (or under a store whose `default_ttl` is set) expires
///   that long after its last write, or its last read when reads refresh it (`refresh_on_read`,
///   LangGraph's `refresh_ttl`); an expired item is invisible at once and `sweep` deletes it.
///   LangGraph counts ttl in minutes: write `std::chrono::minutes(n)`.
///
/// Full text: the text of an item is the string values (searched recursively through objects
/// and arrays) of its indexed fields, lower-cased and split into words on anything that is not a
/// letter or digit (bytes of UTF-8 sequences count as letters); no stemming. A query matches an
/// item holding any of its words; more of the words, and rarer ones, rank higher.
///
/// g++ 12 and `co_await`: every option type here is trivially destructible and the calls are
/// plain functions that copy their arguments into the coroutine they return, so
/// `co_await store.search(ns, {.query = "coffee", .limit = 3})` is safe. g++ 12 rejects any
/// `std::initializer_list` inside a `co_await` expression ("array used as initializer"), so the
/// namespace and value parameters are `namespace_arg` and `value_arg`, which take their labels
/// and fields as constructor arguments instead: the natural spelling
/// `co_await ctx.store().put({"users", id}, "prefs", {{"theme", "dark"}, {"size", 12}})` compiles
/// and is safe. (Only a list nested inside a field, `{"tags", {"a", "b"}}`, must still be named
/// first.)

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/json/value_ref.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace stategraph::store {

/// @brief A namespace: a non-empty path of non-empty labels without '.'.
using namespace_path = std::vector<std::string>;
using clock = std::chrono::system_clock;

/// @brief A namespace argument: a `namespace_path`, or its labels written in place,
/// `{"users", id}` (each label anything a `std::string_view` can be made of). Built from labels it
/// makes no `std::initializer_list`, so the braced spelling is safe inside `co_await` under g++ 12.
class namespace_arg {
public:
    namespace_arg() = default; ///< the empty path (a search prefix matching every namespace)
    namespace_arg(const namespace_path& path) : path_(path) {}
    namespace_arg(namespace_path&& path) noexcept : path_(std::move(path)) {}
    template <class... Labels>
        requires(sizeof...(Labels) > 0 && (std::convertible_to<const Labels&, std::string_view> && ...))
    /// @tparam Labels types convertible to `std::string_view` (string literals, `std::string`, ...).
    /// @param labels the namespace's labels, copied; they are validated by the call that takes the
    /// namespace (`store_error(invalid_namespace)`).
    namespace_arg(const Labels&... labels) {
        path_.reserve(sizeof...(Labels));
        (path_.emplace_back(std::string_view(labels)), ...);
    }
    const namespace_path& path() const noexcept { return path_; }
    operator const namespace_path&() const noexcept { return path_; }

private:
    namespace_path path_;
};

/// @brief One field of a `value_arg` written in place: `{"theme", "dark"}`.
struct field {
    std::string_view name;
    boost::json::value_ref value;
};

/// @brief An item value argument: a JSON object, or up to eight fields written in place,
/// `{{"theme", "dark"}, {"size", 12}}`, which makes no `std::initializer_list` at the call (safe
/// inside `co_await` under g++ 12). A field written twice keeps its last value.
class value_arg {
public:
    value_arg() = default; ///< `{}`: the empty object
    value_arg(const boost::json::object& value) : value_(value) {}
    value_arg(boost::json::object&& value) noexcept : value_(std::move(value)) {}
    /// @brief An object of the fields given, in place.
    /// @param f1 the first field; `f2` .. `f8` more (unset ones are skipped). A repeated name keeps
    /// its last value.
    value_arg(field f1, field f2 = unset(), field f3 = unset(), field f4 = unset(), field f5 = unset(),
              field f6 = unset(), field f7 = unset(), field f8 = unset());
    const boost::json::object& object() const noexcept { return value_; }
    operator const boost::json::object&() const noexcept { return value_; }

private:
    static field unset() noexcept { return {{}, nullptr}; }
    boost::json::object value_;
};

/// @brief Every kind of error a store reports.
enum class store_errc {
    invalid_namespace = 1, ///< empty namespace, an empty label, or a label containing '.'
    invalid_key,           ///< an empty key
    invalid_filter,        ///< a search filter with an unknown `$` operator or a malformed operand
    storage_failure,       ///< the database could not be reached or refused a statement
    corrupt_item,          ///< a stored item cannot be read back (not a JSON object)
    schema_too_new,        ///< the database was written by a newer stategraph
};

/// @brief The category of `store_errc`, named "stategraph.store".
const std::error_category& store_category() noexcept;
inline std::error_code make_error_code(store_errc e) noexcept { return {static_cast<int>(e), store_category()}; }

/// @brief The namespace written as LangGraph prints it: labels joined with '.' ("users.u42.facts").
std::string to_string(const namespace_path& ns);

/// @brief What every store throws: a `std::system_error` with a `store_errc`, plus the
/// namespace and key involved (empty when none is).
/// Thread safety: an immutable exception object; copies may be read from any thread.
class store_error : public std::system_error {
public:
    /// @param code the kind of failure.
    /// @param what the message.
    /// @param ns the namespace involved (empty when none).
    /// @param key the key involved (empty when none).
    store_error(store_errc code, const std::string& what, namespace_path ns = {}, std::string key = {})
        : std::system_error(make_error_code(code), what), ns_(std::move(ns)), key_(std::move(key)) {}
    store_errc kind() const noexcept { return static_cast<store_errc>(code().value()); }
    const namespace_path& ns() const noexcept { return ns_; }
    const std::string& key() const noexcept { return key_; }

private:
    namespace_path ns_;
    std::string key_;
};

/// @brief One stored item.
struct item {
    namespace_path ns;
    std::string key;
    boost::json::object value;
    clock::time_point created_at;
    clock::time_point updated_at;
};

/// @brief One search result: the item and, for a full-text query, its relevance (higher is
/// better; comparable within one result list only).
struct search_item : item {
    std::optional<double> score;
};

/// @brief Which fields of a value feed full-text search (a view; trivially destructible).
class index_spec {
public:
    /// The store's own choice (`store_options`): its index fields, or the whole value.
    constexpr index_spec() noexcept = default;
    /// These fields (dotted paths into the value: "text", "profile.bio"; "$" is the whole value).
    /// The vector must outlive the `co_await` of the call.
    /// @param fields dotted paths into the value ("$": the whole value).
    index_spec(const std::vector<std::string>& fields) noexcept : fields_(&fields) {}
    index_spec(std::vector<std::string>&&) = delete; ///< a temporary would be gone before the store reads it
    /// Not indexed: the item is found by filters, never by a query (LangGraph's `index=False`).
    static constexpr index_spec off() noexcept {
        index_spec s;
        s.off_ = true;
        return s;
    }
    bool is_off() const noexcept { return off_; }
    const std::vector<std::string>* fields() const noexcept { return fields_; }

private:
    const std::vector<std::string>* fields_ = nullptr;
    bool off_ = false;
};

/// @brief How `put` stores an item: `co_await s.put(ns, key, value, {.ttl = std::chrono::minutes(30)})`.
struct put_options {
    /// The item expires this long after it is written (or last read, see `refresh_on_read`);
    /// zero: the store's `default_ttl` (itself zero: never). Negative: never, whatever the default.
    std::chrono::milliseconds ttl{0};
    index_spec index;
};
static_assert(std::is_trivially_destructible_v<put_options>);

/// @brief A filter on value fields for `search` (a view of a JSON object that must outlive the
/// `co_await`). Each member is a field (a dotted path) and either a value (equality) or an object
/// of operators: `{"age": {"$gte": 18, "$lt": 65}, "kind": "fact"}`. Numbers compare as numbers,
/// strings as bytes; `$gt`.. between different kinds is false; `$ne` holds for a missing field.
class value_filter {
public:
    constexpr value_filter() noexcept = default;
    /// @param f the filter; only its address is kept (it must outlive the `co_await`).
    value_filter(const boost::json::object& f) noexcept : f_(&f) {}
    value_filter(boost::json::object&&) = delete; ///< a temporary would be gone before the store reads it
    const boost::json::object* get() const noexcept { return f_; }

private:
    const boost::json::object* f_ = nullptr;
};

/// @brief What `search` returns.
struct search_options {
    value_filter filter;          ///< only items whose value matches (default: all)
    std::string_view query;       ///< full-text query ("": no ranking, newest update first)
    std::size_t limit = 10;       ///< at most this many
    std::size_t offset = 0;       ///< skip this many first (paging)
    /// Refresh the ttl of the items returned: `yes`, `no`, or the store's `refresh_on_read`.
    enum class refresh { store_default, yes, no } refresh_ttl = refresh::store_default;
};
static_assert(std::is_trivially_destructible_v<search_options>);

/// @brief What `list_namespaces` returns (views: the paths must outlive the `co_await`).
struct namespace_query {
    const namespace_path* prefix = nullptr; ///< namespaces starting with these labels ("*": any label)
    const namespace_path* suffix = nullptr; ///< namespaces ending with these labels ("*": any label)
    std::size_t max_depth = 0;              ///< cut namespaces to this many labels (0: whole); duplicates merge
    std::size_t limit = 100;
    std::size_t offset = 0;
};
static_assert(std::is_trivially_destructible_v<namespace_query>);

/// @brief Settings shared by every store.
/// Thread safety: a plain value, copied by the store's constructor.
struct store_options {
    /// The ttl of items put without one (zero: they never expire).
    std::chrono::milliseconds default_ttl{0};
    /// Whether `get` and `search` restart the ttl of the items they return (LangGraph's
    /// `refresh_on_read`, default true).
    bool refresh_on_read = true;
    /// Fields indexed for full text when `put` does not say (empty: the whole value).
    std::vector<std::string> index_fields;
};

/// @brief The store interface. Thread safety: every implementation may be shared by many runs on
/// many threads. Errors: `store_error` (see `store_errc`). The public calls validate their
/// arguments (bad namespaces and keys are refused naming them) before any storage is touched.
class base_store {
public:
    /// @param options default ttl, refresh on read and index fields shared by every call.
    explicit base_store(store_options options = {}) : options_(std::move(options)) {}
    virtual ~base_store() = default;
    base_store(const base_store&) = delete;
    base_store& operator=(const base_store&) = delete;

    /// @brief Stores (or replaces, keeping `created_at`) the item at (`ns`, `key`).
    /// @param ns the item's namespace: at least one label, none empty or holding '.'
    /// (`store_error(invalid_namespace)` otherwise).
    /// @param key the item's key, not empty (`store_error(invalid_key)`).
    /// @param value the item's JSON object (fields in place, or an object), copied into the call.
    /// @param options ttl (zero: the store's default; negative: never) and which fields are indexed.
    /// @throws store_error(storage_failure) when the database fails.
    boost::asio::awaitable<void> put(const namespace_arg& ns, const std::string& key, const value_arg& value,
                                     put_options options = {});
    /// @brief The item at (`ns`, `key`), or nullopt when there is none or it expired. Refreshes
    /// its ttl when `refresh_ttl` (default: the store's `refresh_on_read`).
    /// @param ns the namespace (validated as for `put`).
    /// @param key the key (not empty).
    /// @param refresh_ttl restart the item's ttl (nullopt: the store's `refresh_on_read`).
    boost::asio::awaitable<std::optional<item>> get(const namespace_arg& ns, const std::string& key,
                                                    std::optional<bool> refresh_ttl = std::nullopt);
    /// @brief Deletes the item at (`ns`, `key`) (nothing when there is none).
    /// @param ns the namespace (validated as for `put`).
    /// @param key the key (not empty).
    boost::asio::awaitable<void> remove(const namespace_arg& ns, const std::string& key);
    /// @brief Items under `prefix` (empty: all namespaces); see `search_options`. With a query,
    /// best match first (items without indexed text never match); without, newest update first.
    /// @param prefix a namespace prefix; the empty path searches every namespace.
    /// @param options value filter (`store_error(invalid_filter)` for an unknown `$` operator), full-text
    /// query, limit (default 10), offset and ttl refresh.
    boost::asio::awaitable<std::vector<search_item>> search(const namespace_arg& prefix, search_options options = {});
    /// @brief The namespaces holding live items, sorted; see `namespace_query`.
    /// @param query prefix and suffix (views; "*" matches any label), max depth, limit (default 100)
    /// and offset.
    boost::asio::awaitable<std::vector<namespace_path>> list_namespaces(namespace_query query = {});
    /// @brief Deletes the expired items now; returns how many went. (Reads never see them anyway.)
    boost::asio::awaitable<std::size_t> sweep();

    const store_options& options() const noexcept { return options_; }

    /// @brief Throws `store_error(invalid_namespace)` naming `ns` unless it is a valid namespace
    /// (`allow_empty`: the empty path too, as a search prefix).
    /// @param ns the namespace checked.
    /// @param allow_empty accept the empty path.
    static void check_namespace(const namespace_path& ns, bool allow_empty = false);

protected:
    /// What an implementation stores with an item: its text for full-text search (nullopt: not
    /// indexed) and its ttl (nullopt: never expires).
    struct write {
        namespace_path ns;
        std::string key;
        boost::json::object value;
        std::optional<std::string> text;
        std::optional<std::chrono::milliseconds> ttl;
    };
    /// A candidate of a search, before filtering and paging (in the order of the results).
    virtual boost::asio::awaitable<void> do_put(write w) = 0;
    virtual boost::asio::awaitable<std::optional<item>> do_get(namespace_path ns, std::string key, bool refresh) = 0;
    virtual boost::asio::awaitable<void> do_remove(namespace_path ns, std::string key) = 0;
    /// Live items under `prefix`: with `words` (the query's words, at least one), those whose
    /// text holds any of them, best first with a score; else every item, newest update first.
    /// `want`: how many the caller keeps when no filter applies (0: all); an implementation may
    /// return more.
    virtual boost::asio::awaitable<std::vector<search_item>> do_search(namespace_path prefix,
                                                                        std::vector<std::string> words,
                                                                        std::size_t want) = 0;
    /// Restarts the ttl of these items.
    virtual boost::asio::awaitable<void> do_refresh(std::vector<std::pair<namespace_path, std::string>> items) = 0;
    /// Every namespace holding a live item (any order, no duplicates needed).
    virtual boost::asio::awaitable<std::vector<namespace_path>> do_namespaces() = 0;
    virtual boost::asio::awaitable<std::size_t> do_sweep() = 0;

public:
    // -- helpers shared by the implementations ---------------------------------------------
    /// Lower-cased words of `text` (see the file comment).
    static std::vector<std::string> words_of(std::string_view text);
    /// The full-text text of `value` for `index` (nullopt: not indexed).
    std::optional<std::string> text_of(const boost::json::object& value, index_spec index) const;
    /// Whether `value` matches `filter`. Throws `store_error(invalid_filter)` for a bad filter.
    static bool matches(const boost::json::object& filter, const boost::json::object& value);
    /// The namespace of `to_string(ns)` (labels never hold '.').
    static namespace_path parse_namespace(std::string_view joined);
    /// A stored value read back. Throws `store_error(corrupt_item)` naming the namespace and key.
    static boost::json::object parse_value(std::string_view text, const namespace_path& ns, const std::string& key);
    /// Milliseconds since the Unix epoch.
    static std::int64_t now_ms() noexcept;
    static clock::time_point from_ms(std::int64_t ms) noexcept;

private:
    store_options options_;
};

} // namespace stategraph::store

template <> struct std::is_error_code_enum<stategraph::store::store_errc> : std::true_type {};
