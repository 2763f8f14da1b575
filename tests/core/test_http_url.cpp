// stategraph/core/http_url.hpp: the one URL parser of the HTTP clients (model, MCP, OTLP).
#include <stategraph/core/http_url.hpp>

#include <boost/test/unit_test.hpp>

#include <string>

namespace sg = stategraph;

BOOST_AUTO_TEST_SUITE(http_url)

BOOST_AUTO_TEST_CASE(urls_split_into_host_port_and_target) {
    struct good {
        const char* text;
        bool tls;
        const char* host;
        const char* port;
        const char* target;
        const char* host_header;
    };
    for (const auto& c : {good{"http://127.0.0.1:8080/v1/", false, "127.0.0.1", "8080", "/v1/", "127.0.0.1:8080"},
                          good{"HTTPS://api.example.com/v1", true, "api.example.com", "443", "/v1", "api.example.com"},
                          good{"https://api.example.com:443", true, "api.example.com", "443", "/", "api.example.com"},
                          good{"http://host:0080/mcp?key=a%20b", false, "host", "80", "/mcp?key=a%20b", "host"},
                          good{"http://[::1]:9000", false, "::1", "9000", "/", "[::1]:9000"},
                          good{"http://[fe80::1]/x", false, "fe80::1", "80", "/x", "[fe80::1]"},
                          good{"http://my_host.internal?x=1", false, "my_host.internal", "80", "/?x=1", "my_host.internal"}}) {
        BOOST_TEST_CONTEXT("url " << c.text) {
            auto const r = sg::parse_http_url(c.text);
            BOOST_REQUIRE_MESSAGE(r.url, r.error);
            BOOST_TEST(r.error.empty());
            BOOST_TEST(r.url->tls == c.tls);
            BOOST_TEST(r.url->host == c.host);
            BOOST_TEST(r.url->port == c.port);
            BOOST_TEST(r.url->target() == c.target);
            BOOST_TEST(r.url->host_header() == c.host_header);
            BOOST_TEST(r.url->origin() == std::string(c.tls ? "https://" : "http://") + c.host_header);
        }
    }
}

BOOST_AUTO_TEST_CASE(bad_urls_name_the_reason) {
    struct bad {
        const char* text;
        const char* reason;
    };
    for (const auto& c : {bad{"", "expected http://"}, bad{"localhost:8080/v1", "expected http://"},
                          bad{"ftp://example.com/v1", "expected http://"}, bad{"http://", "no host"},
                          bad{"http:///v1", "no host"}, bad{"http://host:99999/v1", "out of range"},
                          bad{"http://host:0/v1", "out of range"}, bad{"http://host:123456/v1", "out of range"},
                          bad{"http://host:abc/v1", "not a number"}, bad{"http://host:/v1", "empty port"},
                          bad{"http://user@host/v1", "user information"}, bad{"http://host/v1#top", "fragment"},
                          bad{"http://[::1/v1", "unterminated"}, bad{"http://[zz]/v1", "invalid IPv6"},
                          bad{"http://[::1]x/v1", "after the IPv6"}, bad{"http://ho st/v1", "whitespace"},
                          bad{"http://a:1:2/v1", "not a number"}, bad{"http://h%41st/", "invalid character"}}) {
        BOOST_TEST_CONTEXT("url " << c.text) {
            auto const r = sg::parse_http_url(c.text);
            BOOST_TEST(!r);
            BOOST_TEST(r.error.find(c.reason) != std::string::npos, r.error);
        }
    }
}

BOOST_AUTO_TEST_SUITE_END()
