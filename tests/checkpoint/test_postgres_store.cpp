// The PostgreSQL store: the store conformance suite on a schema of its own per case, against the
// server in STATEGRAPH_TEST_POSTGRES (skipped, saying so, when it is unset), and its own errors.
#include <stategraph/checkpoint/store/conformance.hpp>
#include <stategraph/checkpoint/store/postgres_store.hpp>

#include "postgres_test_support.hpp"

namespace st = stategraph::store;
namespace pgt = stategraph::checkpoint::pg_testing;
using stategraph::checkpoint::testing::run;

namespace {

st::postgres_store_options store_options_for(const std::string& schema, st::store_options o = {}) {
    st::postgres_store_options p;
    p.conninfo = pgt::server_url();
    p.schema = schema;
    p.store = std::move(o);
    return p;
}

/// A store on a schema of its own, dropped after the store goes.
std::shared_ptr<st::base_store> store_on_fresh_schema(st::store_options o) {
    const auto schema = pgt::fresh_schema();
    auto* s = new st::postgres_store(store_options_for(schema, std::move(o)));
    return std::shared_ptr<st::base_store>(s, [schema](st::base_store* p) {
        delete p;
        try {
            pgt::admin a;
            a.query("DROP SCHEMA IF EXISTS " + pgt::quoted(schema) + " CASCADE");
        } catch (...) {
        }
    });
}

} // namespace

BOOST_AUTO_TEST_SUITE(postgres_store, *boost::unit_test::precondition(pgt::server_configured))

STATEGRAPH_STORE_CONFORMANCE(postgres_store_conformance, store_on_fresh_schema)

BOOST_AUTO_TEST_CASE(items_use_a_gin_indexed_tsvector_and_a_newer_schema_is_refused) {
    const auto schema = pgt::fresh_schema();
    {
        st::postgres_store s(store_options_for(schema));
        const st::namespace_path ns{"users", "u1", "facts"};
        const boost::json::object v{{"text", "Walks the dog at dawn"}};
        run(s.put(ns, "f", v));
        pgt::admin a;
        auto tsv = a.query("SELECT tsv::text FROM " + pgt::quoted(schema) + ".stategraph_store_items");
        BOOST_TEST_REQUIRE(tsv.size() == 1u);
        BOOST_TEST(tsv[0].find("'dawn'") != std::string::npos, tsv[0]);
        auto index = a.query("SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = "
                             "'stategraph_store_items_tsv'",
                             {schema});
        BOOST_TEST_REQUIRE(index.size() == 1u);
        BOOST_TEST(index[0].find("gin") != std::string::npos, index[0]);
        a.query("UPDATE " + pgt::quoted(schema) + ".stategraph_store_schema SET version = 42");
    }
    st::testing::expect_store_error([&] { st::postgres_store again(store_options_for(schema)); },
                                    st::store_errc::schema_too_new, "version 42");
    pgt::admin a;
    a.query("DROP SCHEMA IF EXISTS " + pgt::quoted(schema) + " CASCADE");
}

// A mixed-case schema is that schema, not its lower-cased namesake (the search path is quoted),
// and a role that may use an existing schema but not create schemas opens the store there.
BOOST_AUTO_TEST_CASE(mixed_case_schema_and_a_role_without_create_on_the_database) {
    const auto lower = pgt::fresh_schema();
    const auto mixed = "Tenant_" + lower;
    const auto lower_namesake = "tenant_" + lower;
    pgt::admin a;
    a.query("CREATE SCHEMA " + pgt::quoted(lower_namesake));
    {
        st::postgres_store s(store_options_for(mixed));
        run(s.put({"users", "u1"}, "k", {{"tenant", "mixed"}}));
        BOOST_TEST(run(s.get({"users", "u1"}, "k")).has_value());
    }
    auto tables = a.query("SELECT table_schema FROM information_schema.tables WHERE table_name = "
                          "'stategraph_store_items' AND table_schema IN ($1, $2)",
                          {mixed, lower_namesake});
    BOOST_TEST_REQUIRE(tables.size() == 1u);
    BOOST_TEST(tables[0] == mixed);

    // The application role: no CREATE on the database, all rights on one existing schema.
    const auto role = "sg_app_" + lower;
    a.query("CREATE ROLE " + pgt::quoted(role) + " LOGIN");
    a.query("CREATE SCHEMA " + pgt::quoted(lower) + " AUTHORIZATION " + pgt::quoted(role));
    std::string url = pgt::server_url();
    const auto at = url.find("postgres@");
    BOOST_TEST_REQUIRE(at != std::string::npos, url);
    url.replace(at, std::string("postgres@").size(), role + "@");
    auto o = store_options_for(lower);
    o.conninfo = url;
    {
        st::postgres_store s(o);
        run(s.put({"users", "u2"}, "k", {{"role", "app"}}));
        BOOST_TEST(run(s.get({"users", "u2"}, "k")).has_value());
    }
    for (const auto& schema : {mixed, lower_namesake, lower})
        a.query("DROP SCHEMA IF EXISTS " + pgt::quoted(schema) + " CASCADE");
    a.query("DROP ROLE IF EXISTS " + pgt::quoted(role));
}

BOOST_AUTO_TEST_CASE(an_unreachable_server_is_a_storage_failure) {
    st::postgres_store_options o;
    o.conninfo = "postgresql://nobody@127.0.0.1:1/none";
    o.schema = "x";
    o.retry_for = std::chrono::milliseconds(50);
    o.connect_timeout = std::chrono::milliseconds(200);
    st::testing::expect_store_error([&] { st::postgres_store s(o); }, st::store_errc::storage_failure, "postgres_store");
    o.conninfo.clear();
    st::testing::expect_store_error([&] { st::postgres_store s(o); }, st::store_errc::storage_failure, "conninfo");
}

BOOST_AUTO_TEST_SUITE_END()
