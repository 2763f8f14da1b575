// The LangGraph Agent Server HTTP API on Boost.Beast: the public `server`, HTTP/1.1 sessions
// (reading a request, answering it, the connection bound) and the dispatch of a request to its
// route family (impl.hpp lists the files of the others).

#include "impl.hpp"

#include <boost/asio/ip/host_name.hpp>

#include <unistd.h>

#include <functional>
#include <memory>
#include <utility>

namespace stategraph::server {

namespace {

std::string default_instance_id() {
    std::string host;
    try {
        host = boost::asio::ip::host_name();
    } catch (const std::exception&) {
        host = "host";
    }
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == 0) host = buf;
    return host + ":" + std::to_string(::getpid()) + ":" + new_uuid().substr(0, 8);
}

} // namespace

server::impl::impl(net::any_io_executor e, server_options o) : ex(e), opts(std::move(o)), acceptor(e) {
    store = opts.runs;
    if (!store) {
        run_store_options ro;
        ro.max_finished_runs = opts.max_finished_runs;
        ro.max_events_per_run = opts.max_events_per_run;
        store = open_memory_run_store(ro);
    }
    instance = opts.instance_id.empty() ? default_instance_id() : opts.instance_id;
}

awaitable<void> server::impl::adopt_then_accept(std::shared_ptr<impl> self) {
    try {
        co_await reclaim_dead_local(self);
    } catch (const std::exception& e) {
        self->log_line(std::string("could not look for runs of a stopped process: ") + e.what());
    }
    try {
        co_await adopt_threads(self);
    } catch (const std::exception& e) {
        self->log_line(std::string("could not adopt the stored threads: ") + e.what());
    }
    if (self->stopping) co_return;
    self->start_workers();
    if (!self->opts.serve_api) co_return;
    auto accepting = self->accept_loop();
    co_await std::move(accepting);
}

awaitable<void> server::impl::dispatch(call& c) {
    auto& p = c.path;
    auto verb = c.req.method();
    // A browser's CORS preflight: no key needed (browsers send none with it).
    if (verb == http::verb::options) {
        if (c.cors_origin.empty()) throw http_error(405, "method OPTIONS is not allowed (CORS is off for this origin)");
        c.answer.emplace();
        c.answer->status = 204;
        c.answer->headers = {{"Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"},
                             {"Access-Control-Allow-Headers", "Content-Type, X-Api-Key, Last-Event-ID, Authorization"},
                             {"Access-Control-Max-Age", "600"}};
        co_return;
    }
    if (p.size() == 1 && p[0] == "ok" && verb == http::verb::get) {
        reply(c, 200, json::object{{"ok", true}});
        co_return;
    }
    // The studio page's files: no key needed (the page asks for one and sends it with its calls).
    if (!p.empty() && p[0] == "studio" && verb == http::verb::get) {
        const auto* f = p.size() <= 2 ? studio::find_asset(p.size() == 2 ? p[1] : std::string()) : nullptr;
        if (!f) throw http_error(404, "no studio file " + std::string(c.req.target()) + " (the page is at /studio)");
        reply_text(c, 200, std::string(f->body), f->type);
        co_return;
    }
    if (p.size() == 1 && p[0] == "metrics" && verb == http::verb::get) {
        co_await serve_metrics(c);
        co_return;
    }
    if (!opts.api_keys.empty()) {
        auto k = c.req.find("x-api-key");
        if (k == c.req.end()) throw http_error(401, "missing x-api-key header");
        std::string key(k->value());
        if (!opts.api_keys.count(key)) throw http_error(401, "unknown x-api-key");
        c.owner = owner_of(key);
    }
    if (p.size() == 1 && p[0] == "info" && verb == http::verb::get) {
        reply(c, 200,
                            json::object{{"version", opts.version},
                                         {"server", "stategraph"},
                                         {"flags", json::object{{"assistants", true}, {"crons", false}, {"langsmith", false}, {"store", opts.store != nullptr}}}});
        co_return;
    }
    if (!p.empty() && p[0] == "assistants") {
        co_await route_assistants(c);
        co_return;
    }
    if (!p.empty() && p[0] == "threads") {
        co_await route_threads(c);
        co_return;
    }
    if (!p.empty() && p[0] == "store") {
        co_await route_store(c);
        co_return;
    }
    if (p.size() == 2 && p[0] == "runs" && p[1] == "cancel" && verb == http::verb::post) {
        co_await cancel_runs(c);
        co_return;
    }
    if (p.size() == 2 && p[0] == "runs" && (p[1] == "stream" || p[1] == "wait") && verb == http::verb::post) {
        co_await create_run(c, true, p[1]);
        co_return;
    }
    if (p.size() == 1 && p[0] == "runs" && verb == http::verb::post) {
        const std::string how = "create";
        co_await create_run(c, true, how);
        co_return;
    }
    throw http_error(404, "no route " + std::string(c.req.method_string()) + " " + std::string(c.req.target()));
}

awaitable<void> server::impl::session(tcp::socket sock) {
    auto self = shared_from_this();
    beast::tcp_stream stream(std::move(sock));
    auto reg = sessions.insert(sessions.end(), &stream);
    beast::flat_buffer buf;
    for (;;) {
        http::request_parser<http::string_body> parser;
        parser.body_limit(opts.body_limit);
        parser.header_limit(static_cast<std::uint32_t>(opts.header_limit));
        // The read deadline: a timer that cancels the read (tcp_stream's own timeout would close
        // the socket, and a slow client would get no 408).
        bool timed_out = false;
        net::steady_timer deadline(ex);
        deadline.expires_after(opts.read_timeout);
        deadline.async_wait([&timed_out, &stream](boost::system::error_code wec) {
            if (wec) return;
            timed_out = true;
            boost::system::error_code ignored;
            stream.socket().cancel(ignored);
        });
        auto [ec, n] = co_await http::async_read(stream, buf, parser, net::as_tuple(use_awaitable));
        deadline.cancel();
        if (ec) {
            unsigned status = 0;
            std::string detail;
            if (ec == http::error::body_limit) {
                status = 413;
                detail = "request body larger than " + std::to_string(opts.body_limit) + " bytes";
            } else if (ec == http::error::header_limit) {
                status = 431;
                detail = "request headers larger than " + std::to_string(opts.header_limit) + " bytes";
            } else if (timed_out) {
                if (parser.got_some()) {
                    status = 408;
                    detail = "the request did not arrive within " + std::to_string(opts.read_timeout.count()) + " ms";
                }
            } else if (ec.category() == http::make_error_code(http::error::end_of_stream).category() && ec != http::error::end_of_stream &&
                       ec != http::error::partial_message) {
                status = 400;
                detail = "malformed HTTP request: " + ec.message();
            }
            if (status) {
                call c;
                c.stream = &stream;
                c.keep_alive = false;
                c.req.version(11);
                stream.expires_after(std::chrono::seconds(5));
                reply(c, status, json::object{{"detail", detail}});
                co_await write_answer(c);
                if (opts.log) opts.log(std::to_string(status) + " (unread request): " + detail);
            }
            break;
        }
        stream.expires_never();
        call c;
        c.req = parser.release();
        c.stream = &stream;
        c.keep_alive = c.req.keep_alive() && !stopping;
        if (auto origin = c.req.find(http::field::origin); origin != c.req.end() && !opts.cors_origins.empty()) {
            std::string o(origin->value());
            if (opts.cors_origins.count("*")) c.cors_origin = "*";
            else if (opts.cors_origins.count(o)) c.cors_origin = o;
        }
        std::string_view target = c.req.target();
        auto q = target.find('?');
        std::string_view path = target.substr(0, q);
        for (std::size_t i = 0; i < path.size();) {
            auto j = path.find('/', i);
            if (j == std::string_view::npos) j = path.size();
            if (j > i) c.path.push_back(percent_decode(path.substr(i, j - i)));
            i = j + 1;
        }
        if (q != std::string_view::npos) {
            std::string_view qs = target.substr(q + 1);
            for (std::size_t i = 0; i <= qs.size();) {
                auto j = qs.find('&', i);
                if (j == std::string_view::npos) j = qs.size();
                auto item = qs.substr(i, j - i);
                if (!item.empty()) {
                    auto eq = item.find('=');
                    c.query.items[percent_decode(item.substr(0, eq))] =
                        eq == std::string_view::npos ? "" : percent_decode(item.substr(eq + 1));
                }
                i = j + 1;
            }
        }
        auto started = std::chrono::steady_clock::now();
        std::optional<http_error> failure;
        try {
            co_await dispatch(c);
        } catch (const http_error& e) {
            failure = e;
        } catch (const std::exception& e) {
            try {
                rethrow_as_http(e);
            } catch (const http_error& h) {
                failure = h;
            }
        }
        if (failure) {
            if (c.streamed) c.keep_alive = false; // too late for a status: the body has begun
            else reply(c, failure->status(), json::object{{"detail", failure->what()}});
        }
        if (c.answer && !c.streamed) co_await write_answer(c);
        if (opts.log) {
            auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
            opts.log(std::string(c.req.method_string()) + " " + std::string(path) + " " + std::to_string(c.status) + " " +
                     std::to_string(static_cast<long>(ms)) + "ms");
        }
        if (!c.keep_alive) break;
    }
    sessions.erase(reg);
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream.socket().close(ignored);
}

awaitable<void> server::impl::accept_loop() {
    auto self = shared_from_this();
    while (!stopping) {
        auto [ec, sock] = co_await acceptor.async_accept(net::as_tuple(use_awaitable));
        if (ec) {
            if (stopping || ec == net::error::operation_aborted) co_return;
            continue;
        }
        // Events go out as they happen: no Nagle delay between a header and its first chunk.
        boost::system::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        if (open_connections >= std::max<std::size_t>(opts.max_connections, 1)) {
            net::co_spawn(ex, refuse(self, std::move(sock)), logged("refusing a connection over max_connections"));
            continue;
        }
        ++open_connections;
        net::co_spawn(ex, session(std::move(sock)), [self](std::exception_ptr) { --self->open_connections; });
    }
}

awaitable<void> server::impl::refuse(std::shared_ptr<impl> self, tcp::socket sock) {
    beast::tcp_stream stream(std::move(sock));
    stream.expires_after(std::chrono::seconds(2));
    http::response<http::string_body> res{http::status::service_unavailable, 11};
    res.set(http::field::content_type, "application/json");
    res.set(http::field::retry_after, "1");
    res.keep_alive(false);
    res.body() = json::serialize(json::object{
        {"detail", "the server has " + std::to_string(self->open_connections) +
                       " connections open, the most it takes (max_connections); retry shortly"}});
    res.prepare_payload();
    auto [ec, n] = co_await http::async_write(stream, res, net::as_tuple(use_awaitable));
    (void)ec;
    (void)n;
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
}

server::server(net::any_io_executor ex, server_options options) : impl_(std::make_shared<impl>(ex, std::move(options))) {}

server::~server() {
    if (impl_) impl_->stopping = true;
    boost::system::error_code ignored;
    if (impl_) impl_->acceptor.close(ignored);
}

void server::add(assistant_spec spec) {
    if (!spec.core || !spec.core->saver)
        throw std::invalid_argument("server::add: graph '" + spec.graph_id + "' has no checkpointer (use make_assistant)");
    if (impl_->find_assistant(spec.graph_id))
        throw std::invalid_argument("server::add: graph id '" + spec.graph_id + "' is already served");
    json_graph graph(spec.core);
    auto a = std::make_shared<assistant_rec>(assistant_rec{std::move(spec), "", now_iso(), std::move(graph)});
    a->assistant_id = assistant_uuid(a->spec.graph_id);
    impl_->assistants.push_back(std::move(a));
}

unsigned short server::listen() {
    if (!impl_->opts.serve_api) { // a worker-only instance: no socket, only workers
        net::co_spawn(impl_->ex, impl::adopt_then_accept(impl_), impl_->logged("the worker-only instance's start"));
        return 0;
    }
    auto& acc = impl_->acceptor;
    tcp::endpoint ep(net::ip::make_address(impl_->opts.host), impl_->opts.port);
    acc.open(ep.protocol());
    acc.set_option(net::socket_base::reuse_address(true));
    acc.bind(ep);
    acc.listen();
    impl_->bound = acc.local_endpoint().port();
    net::co_spawn(impl_->ex, impl::adopt_then_accept(impl_), impl_->logged("accepting connections"));
    return impl_->bound;
}

void server::stop() {
    impl_->stopping = true;
    impl_->stopping_workers = true; // no run starts here any more; those running go on to their end
    boost::system::error_code ignored;
    impl_->acceptor.close(ignored);
    for (auto* s : impl_->sessions) s->socket().cancel(ignored);
    // Streams and waiters end (they wait on timers, not on the socket).
    impl_->wake(impl_->runs_changed);
    impl_->wake(impl_->any_run_wake);
    impl_->wake(impl_->dispatch_wake);
    for (auto& [id, w] : impl_->run_watch) impl_->wake(w);
    for (auto& [id, w] : impl_->run_end_watch) impl_->wake(w);
}

void server::drain(std::function<void()> done) {
    impl_->draining = true;
    stop();
    request_drain();
    // wait_idle calls `done` itself; if it fails, `done` is still called (a drain always ends).
    auto finish = std::make_shared<std::function<void()>>(std::move(done));
    std::function<void()> once = [finish] {
        if (auto f = std::exchange(*finish, nullptr)) f();
    };
    auto idle = impl::wait_idle(impl_, once);
    net::co_spawn(impl_->ex, std::move(idle), [self = impl_, once](std::exception_ptr e) {
        if (!e) return;
        self->logged("the drain")(e);
        self->stopping_workers = true;
        once();
    });
}

unsigned short server::port() const noexcept { return impl_->bound; }

} // namespace stategraph::server
