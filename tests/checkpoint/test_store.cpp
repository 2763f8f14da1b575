// The stores: the conformance suite over the memory store and the SQLite store (FTS5), and what
// is particular to SQLite (a file that outlives the store, its schema version, a shared file).
#include <stategraph/checkpoint/store/conformance.hpp>
#include <stategraph/checkpoint/store/memory_store.hpp>
#include <stategraph/checkpoint/store/sqlite_store.hpp>
#include <stategraph/checkpoint/sqlite_saver.hpp>

#include <boost/test/unit_test.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

namespace json = boost::json;
namespace st = stategraph::store;
using stategraph::checkpoint::testing::run;

namespace {

std::string temp_path(const std::string& name) {
    static std::atomic<int> counter{0};
    auto dir = std::filesystem::temp_directory_path() /
               ("sg_store_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(dir);
    return (dir / name).string();
}

/// A SQLite store on a new file, removed with the store.
std::shared_ptr<st::base_store> sqlite_on_temp_file(st::store_options o) {
    const auto path = temp_path("store.db");
    auto* s = new st::sqlite_store({path, std::move(o)});
    return std::shared_ptr<st::base_store>(s, [path](st::base_store* p) {
        delete p;
        std::filesystem::remove_all(std::filesystem::path(path).parent_path());
    });
}

} // namespace

BOOST_AUTO_TEST_SUITE(store)

STATEGRAPH_STORE_CONFORMANCE(memory_store_conformance,
                             [](st::store_options o) { return std::make_shared<st::memory_store>(std::move(o)); })
STATEGRAPH_STORE_CONFORMANCE(sqlite_store_conformance, sqlite_on_temp_file)

BOOST_AUTO_TEST_CASE(sqlite_store_outlives_the_process_object) {
    const auto path = temp_path("kept.db");
    const st::namespace_path ns{"users", "u1", "facts"};
    const json::object v{{"text", "remembers the lighthouse"}};
    {
        st::sqlite_store s({path, {}});
        run(s.put(ns, "f", v));
    }
    st::sqlite_store again({path, {}});
    auto got = run(again.get(ns, "f"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->value == v);
    const std::string q = "lighthouse";
    BOOST_TEST(run(again.search(ns, {.query = q})).size() == 1u);
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(sqlite_store_keeps_invalid_utf8_as_it_was_given) {
    auto s = sqlite_on_temp_file({});
    const st::namespace_path ns{"chat"};
    const json::object v{{"text", "caf\xc3 and \xff\xfe cake"}};
    run(s->put(ns, "bad", v));
    auto got = run(s->get(ns, "bad"));
    BOOST_TEST_REQUIRE(got.has_value());
    BOOST_TEST(got->value == v);
    const std::string q = "cake";
    BOOST_TEST(run(s->search(ns, {.query = q})).size() == 1u);
}

BOOST_AUTO_TEST_CASE(sqlite_store_shares_a_file_with_the_saver) {
    const auto path = temp_path("shared.db");
    stategraph::checkpoint::sqlite_saver saver({.path = path});
    st::sqlite_store s({path, {}});
    const st::namespace_path ns{"n"};
    const json::object v{{"x", 1}};
    run(s.put(ns, "k", v));
    BOOST_TEST(run(s.get(ns, "k")).has_value());
    BOOST_TEST(run(saver.list_threads({})).empty());
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(sqlite_store_refuses_a_newer_schema) {
    const auto path = temp_path("newer.db");
    { st::sqlite_store s({path, {}}); }
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "UPDATE store_schema SET version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    try {
        st::sqlite_store s({path, {}});
        BOOST_ERROR("opened a store of schema version 99");
    } catch (const st::store_error& e) {
        BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(st::store_errc::schema_too_new));
        BOOST_TEST(std::string(e.what()).find("version 99") != std::string::npos, e.what());
    }
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(sqlite_store_reports_a_corrupt_item_and_a_bad_path) {
    const auto path = temp_path("corrupt.db");
    {
        st::sqlite_store s({path, {}});
        const st::namespace_path ns{"a", "b"};
        const json::object v{{"x", 1}};
        run(s.put(ns, "k", v));
    }
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "UPDATE store_items SET value = '[1, 2'", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    st::sqlite_store s({path, {}});
    const st::namespace_path ns{"a", "b"};
    st::testing::expect_store_error([&] { (void)run(s.get(ns, "k")); }, st::store_errc::corrupt_item,
                                    "namespace (\"a\", \"b\"), key \"k\"");
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
    st::testing::expect_store_error([] { st::sqlite_store bad({"/nonexistent-dir/x/store.db", {}}); },
                                    st::store_errc::storage_failure, "/nonexistent-dir/x/store.db");
    st::testing::expect_store_error([] { st::sqlite_store bad({"", {}}); }, st::store_errc::storage_failure, "path");
}

// The braced spellings a newcomer writes inside co_await: labels and fields given in place,
// which g++ 12 accepts because namespace_arg and value_arg make no initializer_list.
namespace {
boost::asio::awaitable<std::optional<st::item>> put_then_get(st::base_store& s, std::string user) {
    co_await s.put({"users", user, "prefs"}, "ui", {{"theme", "dark"}, {"size", 12}, {"theme", "light"}, {"on", true}});
    co_await s.put({"users", user}, "empty", {});
    auto empty = co_await s.get({"users", user}, "empty");
    if (!empty || !empty->value.empty()) throw std::runtime_error("the empty value did not come back empty");
    auto found = co_await s.search({"users"}, {.limit = 5});
    if (found.size() != 2) throw std::runtime_error("search under {\"users\"} found " + std::to_string(found.size()));
    co_await s.remove({"users", user}, "empty");
    co_return co_await s.get({"users", user, "prefs"}, "ui");
}
} // namespace

BOOST_AUTO_TEST_CASE(braced_namespaces_and_values_inside_co_await) {
    st::memory_store s;
    auto got = run(put_then_get(s, "u7"));
    BOOST_REQUIRE(got);
    BOOST_TEST(got->ns == (st::namespace_path{"users", "u7", "prefs"}));
    BOOST_TEST(got->value == (json::object{{"theme", "light"}, {"size", 12}, {"on", true}})); // the last "theme" wins
    // A namespace_arg of labels is checked like any namespace.
    BOOST_CHECK_THROW(run(s.put({"users", ""}, "k", {{"a", 1}})), st::store_error);
    const st::namespace_arg three{"a", std::string("b"), std::string_view("c")};
    BOOST_TEST(three.path() == (st::namespace_path{"a", "b", "c"}));
}

BOOST_AUTO_TEST_CASE(sqlite_store_read_only_reads_without_refreshing) {
    const auto path = temp_path("ro.db");
    const st::namespace_path ns{"users", "u1"};
    const json::object v{{"theme", "dark"}};
    {
        st::sqlite_store writer({path});
        run(writer.put(ns, "prefs", v));
        run(writer.put(ns, "session", v, {.ttl = std::chrono::minutes(5)}));
    }
    st::sqlite_store reader({.path = path, .read_only = true}); // refresh_on_read stays at its default (true)
    auto got = run(reader.get(ns, "prefs"));
    BOOST_REQUIRE(got);
    BOOST_TEST(got->value == v);
    BOOST_TEST(run(reader.get(ns, "session")).has_value()); // an item with a ttl too
    BOOST_TEST(run(reader.search(ns)).size() == 2u);
    BOOST_CHECK_THROW(run(reader.put(ns, "new", v)), st::store_error); // writes still fail
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(sqlite_store_lock_failure_names_the_item) {
    const auto path = temp_path("busy.db");
    st::sqlite_store s({.path = path, .busy_timeout = std::chrono::milliseconds(50)});
    sqlite3* other = nullptr;
    BOOST_REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
    BOOST_REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    const st::namespace_path ns{"users", "u1"};
    try {
        run(s.put(ns, "prefs", {{"theme", "dark"}}));
        BOOST_FAIL("a put under another connection's write lock succeeded");
    } catch (const st::store_error& e) {
        BOOST_TEST(e.code() == st::store_errc::storage_failure);
        BOOST_TEST(e.ns() == ns);
        BOOST_TEST(e.key() == "prefs");
        BOOST_TEST(std::string(e.what()).find("key \"prefs\"") != std::string::npos, e.what());
    }
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

BOOST_AUTO_TEST_CASE(store_error_codes_have_messages) {
    for (int e = 1; e <= 6; ++e)
        BOOST_TEST(st::store_category().message(e) != "unknown store error");
    BOOST_TEST(st::to_string(st::namespace_path{"users", "u1"}) == "users.u1");
}

BOOST_AUTO_TEST_SUITE_END()
