#define BOOST_TEST_MODULE nodes
#include <boost/test/unit_test.hpp>

#include "fake_openai_server.hpp"
#include "run_with_server.hpp"

#include <stategraph/nodes/chat_model.hpp>
#include <stategraph/nodes/openai_chat_model.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using stategraph::nodes::chat_error;
using stategraph::nodes::chat_message;
using stategraph::nodes::chat_model;
using stategraph::nodes::chat_request;
using stategraph::nodes::chat_response;
using stategraph::nodes::openai_chat_model;
using stategraph::nodes::openai_options;
using stategraph::test::fake_openai_server;
using stategraph::test::fake_reply;

constexpr char const* api_key = "sk-test-123";

template <class T>
T run(asio::io_context& ioc, fake_openai_server* server, asio::awaitable<T> task) {
    return stategraph::test::run_with_server(ioc, server, std::move(task));
}

chat_response complete(asio::io_context& ioc, fake_openai_server* server, chat_model& model, chat_request request) {
    return run(ioc, server, model.complete(std::move(request)));
}

chat_request hello_request() {
    chat_request request;
    request.messages.push_back(chat_message{"system", "You are terse."});
    request.messages.push_back(chat_message{"user", "Say hello to the graph"});
    return request;
}

openai_options options_for(fake_openai_server const& server) { return stategraph::test::options_for(server, api_key); }

/// @brief Run @p f, require a system_error equal to @p expected whose message contains @p needle.
template <class F>
std::string require_chat_error(F&& f, chat_error expected, std::string const& needle) {
    try {
        f();
    } catch (boost::system::system_error const& e) {
        BOOST_TEST_MESSAGE("caught: " << e.what());
        BOOST_CHECK_MESSAGE(e.code() == expected, "got code " << e.code().message() << " / " << e.what());
        BOOST_CHECK_EQUAL(e.code().category().name(), std::string("stategraph.chat"));
        std::string const what = e.what();
        BOOST_CHECK_MESSAGE(what.find(needle) != std::string::npos, "\"" << what << "\" lacks \"" << needle << "\"");
        return what;
    }
    BOOST_FAIL("no boost::system::system_error thrown");
    return {};
}

}  // namespace

BOOST_AUTO_TEST_SUITE(chat_model_interface)

BOOST_AUTO_TEST_CASE(rule_chat_model_answers_with_its_rule) {
    auto rule = [](chat_request const& r) {
        chat_response out;
        out.content = "echo: " + r.messages.back().content;
        out.finish_reason = "stop";
        out.prompt_tokens = static_cast<int>(r.messages.size());
        return out;
    };
    stategraph::nodes::rule_chat_model model(rule);
    asio::io_context ioc;
    chat_response const response = complete(ioc, nullptr, model, hello_request());
    BOOST_TEST(response.content == "echo: Say hello to the graph");
    BOOST_TEST(response.finish_reason == "stop");
    BOOST_TEST(response.prompt_tokens == 2);
    BOOST_TEST(response.completion_tokens == 0);
}

BOOST_AUTO_TEST_CASE(rule_chat_model_rejects_empty_rule_and_propagates_errors) {
    BOOST_CHECK_THROW(stategraph::nodes::rule_chat_model(nullptr), std::invalid_argument);
    auto failing = [](chat_request const&) -> chat_response { throw std::runtime_error("rule failed"); };
    stategraph::nodes::rule_chat_model model(failing);
    asio::io_context ioc;
    BOOST_CHECK_THROW(complete(ioc, nullptr, model, hello_request()), std::runtime_error);
}

BOOST_AUTO_TEST_CASE(error_category_and_codes) {
    std::error_code const code = chat_error::timeout;
    BOOST_TEST(code.category().name() == std::string("stategraph.chat"));
    BOOST_TEST(code.value() == static_cast<int>(chat_error::timeout));
    BOOST_TEST((code == chat_error::timeout));
    BOOST_TEST((code != chat_error::http_status));
    boost::system::error_code const boost_code = chat_error::bad_url;
    BOOST_TEST((boost_code == chat_error::bad_url));
    BOOST_TEST((boost_code.category() == stategraph::nodes::chat_category()));
    BOOST_TEST(boost_code.category().name() == std::string("stategraph.chat"));
    std::error_code const converted = boost_code;  // Boost -> std keeps the category
    BOOST_TEST((converted == chat_error::bad_url));
    BOOST_TEST(converted.message() == boost_code.message());
    boost::system::error_code const round_trip = code;  // std -> Boost finds the original category
    BOOST_TEST((round_trip.category() == stategraph::nodes::chat_category()));
    BOOST_TEST(boost_code.message() != std::error_code(chat_error::bad_response).message());
    BOOST_TEST(!code.message().empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(openai_protocol)

BOOST_AUTO_TEST_CASE(successful_completion) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request = hello_request();
    request.temperature = 0.25;

    chat_response const response = complete(ioc, &server, model, request);

    BOOST_TEST(response.content == "Hello from the fake server.");
    BOOST_TEST(response.finish_reason == "stop");
    BOOST_TEST(response.prompt_tokens == 3 + 5);  // words in the two messages
    BOOST_TEST(response.completion_tokens == 5);

    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    auto const& seen = server.requests.front();
    BOOST_TEST(seen.status == 200u);
    BOOST_TEST(seen.method == "POST");
    BOOST_TEST(seen.target == "/v1/chat/completions");
    BOOST_TEST(seen.authorization == std::string("Bearer ") + api_key);
    BOOST_TEST(seen.content_type == "application/json");
    auto const& body = seen.body.as_object();
    BOOST_TEST(body.at("model").as_string() == "gpt-test");  // default from the options
    json::value const expected_messages = json::parse(
        R"([{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello to the graph"}])");
    BOOST_TEST(body.at("messages") == expected_messages);
    BOOST_TEST(body.at("temperature").as_double() == 0.25);
    BOOST_TEST(!body.contains("response_format"));
}

BOOST_AUTO_TEST_CASE(json_mode_sends_response_format_and_request_model_wins) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply_content = R"({"answer": 42})";
    openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request request = hello_request();
    request.model = "gpt-override";
    request.json_mode = true;

    chat_response const response = complete(ioc, &server, model, request);

    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    auto const& body = server.requests.front().body.as_object();
    BOOST_TEST(body.at("model").as_string() == "gpt-override");
    json::value const expected_format = json::parse(R"({"type":"json_object"})");
    BOOST_TEST(body.at("response_format") == expected_format);
    BOOST_TEST(!body.contains("temperature"));
    BOOST_TEST(json::parse(response.content).at("answer").as_int64() == 42);
}

BOOST_AUTO_TEST_CASE(concurrent_requests_share_one_model) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    openai_chat_model model(ioc.get_executor(), options_for(server));
    chat_request first = hello_request();
    chat_request second = hello_request();
    second.messages.back().content = "second";
    std::vector<std::optional<chat_response>> responses(2);
    int pending = 2;
    auto spawn = [&](std::size_t index, chat_request request) {
        auto on_done = [&, index](std::exception_ptr e, chat_response response) {
            if (!e)
                responses[index] = std::move(response);
            if (--pending == 0)
                server.stop();
        };
        asio::co_spawn(ioc, model.complete(std::move(request)), on_done);
    };
    spawn(0, first);
    spawn(1, second);
    ioc.run_for(std::chrono::seconds(20));
    BOOST_REQUIRE_EQUAL(pending, 0);
    BOOST_REQUIRE(responses[0] && responses[1]);
    BOOST_TEST(responses[0]->prompt_tokens == 8);
    BOOST_TEST(responses[1]->prompt_tokens == 4);
    BOOST_TEST(server.requests.size() == 2u);
}

BOOST_AUTO_TEST_CASE(http_401_is_http_status) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    openai_options options = options_for(server);
    options.api_key = "sk-wrong";
    openai_chat_model model(ioc.get_executor(), options);

    auto const what = require_chat_error([&] { complete(ioc, &server, model, hello_request()); },
                                         chat_error::http_status, "HTTP 401");
    BOOST_TEST(what.find("invalid_api_key") != std::string::npos);  // start of the body
    BOOST_TEST(what.find(server.base_url() + "/chat/completions") != std::string::npos);
    BOOST_TEST(what.find("sk-wrong") == std::string::npos);  // never leak the key
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    BOOST_TEST(server.requests.front().status == 401u);
}

BOOST_AUTO_TEST_CASE(malformed_json_is_bad_response) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply = fake_reply::malformed_json;
    openai_chat_model model(ioc.get_executor(), options_for(server));
    require_chat_error([&] { complete(ioc, &server, model, hello_request()); }, chat_error::bad_response,
                       "not JSON");
}

BOOST_AUTO_TEST_CASE(missing_choices_is_bad_response) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply = fake_reply::no_choices;
    openai_chat_model model(ioc.get_executor(), options_for(server));
    require_chat_error([&] { complete(ioc, &server, model, hello_request()); }, chat_error::bad_response,
                       "no choices");
}

BOOST_AUTO_TEST_CASE(silent_server_times_out) {
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key);
    server.reply = fake_reply::hang;
    openai_options options = options_for(server);
    options.timeout = std::chrono::milliseconds(200);
    openai_chat_model model(ioc.get_executor(), options);

    auto const start = std::chrono::steady_clock::now();
    require_chat_error([&] { complete(ioc, &server, model, hello_request()); }, chat_error::timeout, "timed out");
    auto const elapsed = std::chrono::steady_clock::now() - start;
    BOOST_CHECK(elapsed >= std::chrono::milliseconds(150));
    BOOST_CHECK(elapsed < std::chrono::seconds(5));
    BOOST_TEST(server.requests.size() == 1u);  // the request did arrive
    BOOST_TEST(server.requests.front().status == 0u);
}

BOOST_AUTO_TEST_CASE(refused_connection_is_connect_failed) {
    asio::io_context ioc;
    unsigned short port = 0;
    {
        // Take an ephemeral port and release it: nothing listens there afterwards.
        asio::ip::tcp::acceptor probe(ioc, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
        port = probe.local_endpoint().port();
    }
    openai_options options;
    options.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
    options.api_key = api_key;
    options.model = "gpt-test";
    options.timeout = std::chrono::seconds(5);
    openai_chat_model model(ioc.get_executor(), options);
    require_chat_error([&] { complete(ioc, nullptr, model, hello_request()); }, chat_error::connect_failed,
                       "127.0.0.1:" + std::to_string(port));
}

BOOST_AUTO_TEST_CASE(missing_model_is_bad_request) {
    asio::io_context ioc;
    openai_options options;
    options.base_url = "http://127.0.0.1:9/v1";
    openai_chat_model model(ioc.get_executor(), options);
    require_chat_error([&] { complete(ioc, nullptr, model, hello_request()); }, chat_error::bad_request, "model");
}

BOOST_AUTO_TEST_CASE(bad_urls_are_rejected) {
    asio::io_context ioc;
    for (std::string const url : {"", "not a url", "localhost:8080/v1", "ftp://example.com/v1", "http://",
                                  "http:///v1", "http://host:99999/v1", "http://host:0/v1", "http://host:abc/v1",
                                  "http://host:/v1", "http://user@host/v1", "http://host/v1?x=1",
                                  "http://[::1/v1", "http://[zz]/v1", "http://ho st/v1", "http://a:1:2/v1"}) {
        BOOST_TEST_CONTEXT("url " << url) {
            openai_options options;
            options.base_url = url;
            options.model = "m";
            require_chat_error([&] { openai_chat_model model(ioc.get_executor(), options); }, chat_error::bad_url,
                               "base_url");
        }
    }
}

BOOST_AUTO_TEST_CASE(good_urls_are_normalized) {
    asio::io_context ioc;
    struct url_case {
        char const* base_url;
        char const* endpoint;
    };
    for (auto const& c : {url_case{"http://127.0.0.1:8080/v1/", "http://127.0.0.1:8080/v1/chat/completions"},
                          url_case{"HTTPS://api.example.com/v1", "https://api.example.com/v1/chat/completions"},
                          url_case{"https://api.example.com:443", "https://api.example.com/chat/completions"},
                          url_case{"http://host:80/a/b//", "http://host/a/b/chat/completions"},
                          url_case{"http://[::1]:9000", "http://[::1]:9000/chat/completions"}}) {
        openai_options options;
        options.base_url = c.base_url;
        openai_chat_model const model(ioc.get_executor(), options);
        BOOST_TEST(model.endpoint() == c.endpoint);
        BOOST_TEST(model.options().base_url == c.base_url);
    }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(openai_tls)

namespace {

asio::ssl::context server_context(stategraph::test::test_certificate const& cert) {
    asio::ssl::context ctx(asio::ssl::context::tls_server);
    ctx.use_certificate_chain(asio::buffer(cert.cert_pem));
    ctx.use_private_key(asio::buffer(cert.key_pem), asio::ssl::context::pem);
    return ctx;
}

}  // namespace

BOOST_AUTO_TEST_CASE(https_with_trusted_certificate_and_sni) {
    auto const cert = stategraph::test::make_self_signed_certificate("DNS:localhost,IP:127.0.0.1");
    asio::ssl::context tls = server_context(cert);
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key, &tls);
    openai_options options = options_for(server);
    options.base_url = server.base_url("localhost");
    options.extra_ca_pem = cert.cert_pem;
    openai_chat_model model(ioc.get_executor(), options);

    chat_response const response = complete(ioc, &server, model, hello_request());

    BOOST_TEST(response.content == "Hello from the fake server.");
    BOOST_REQUIRE_EQUAL(server.requests.size(), 1u);
    BOOST_TEST(server.requests.front().server_name == "localhost");
    BOOST_TEST(server.requests.front().authorization == std::string("Bearer ") + api_key);
}

BOOST_AUTO_TEST_CASE(https_untrusted_certificate_is_tls_failed) {
    auto const cert = stategraph::test::make_self_signed_certificate("DNS:localhost,IP:127.0.0.1");
    asio::ssl::context tls = server_context(cert);
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key, &tls);
    openai_options options = options_for(server);  // system trust store only
    openai_chat_model model(ioc.get_executor(), options);
    require_chat_error([&] { complete(ioc, &server, model, hello_request()); }, chat_error::tls_failed,
                       "certificate verify failed");
    BOOST_TEST(server.requests.empty());
}

BOOST_AUTO_TEST_CASE(https_wrong_host_name_is_tls_failed) {
    auto const cert = stategraph::test::make_self_signed_certificate("DNS:other.example");
    asio::ssl::context tls = server_context(cert);
    asio::io_context ioc;
    fake_openai_server server(ioc, api_key, &tls);
    openai_options options = options_for(server);
    options.base_url = server.base_url("localhost");
    options.extra_ca_pem = cert.cert_pem;  // trusted, but issued for another name
    openai_chat_model model(ioc.get_executor(), options);
    require_chat_error([&] { complete(ioc, &server, model, hello_request()); }, chat_error::tls_failed,
                       "TLS handshake failed");
    BOOST_TEST(server.requests.empty());
}

BOOST_AUTO_TEST_SUITE_END()
