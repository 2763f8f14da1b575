// The client: the JSON-RPC session on a private I/O thread (requests, replies, notifications,
// time limits, cancellation) over a transport (stdio_transport.cpp, http_transport.cpp).

#include <stategraph/core/detail/spawned.hpp>
#include <stategraph/mcp/client.hpp>

#include "transport.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace stategraph::mcp {

namespace asio = boost::asio;
namespace json = boost::json;

namespace detail {

namespace {

std::string string_field(json::object const& o, char const* key) {
    auto const* v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

std::optional<std::int64_t> integer_id(json::value const& id) {
    if (id.is_int64()) return id.get_int64();
    if (id.is_uint64()) return static_cast<std::int64_t>(id.get_uint64());
    if (id.is_double() && id.get_double() == static_cast<double>(static_cast<std::int64_t>(id.get_double())))
        return static_cast<std::int64_t>(id.get_double());
    return std::nullopt;
}

std::optional<double> number_field(json::object const& o, char const* key) {
    auto const* v = o.if_contains(key);
    if (!v) return std::nullopt;
    if (v->is_double()) return v->get_double();
    if (v->is_int64()) return static_cast<double>(v->get_int64());
    if (v->is_uint64()) return static_cast<double>(v->get_uint64());
    return std::nullopt;
}

tool_info parse_tool(json::object const& o) {
    tool_info t;
    t.name = string_field(o, "name");
    t.title = string_field(o, "title");
    t.description = string_field(o, "description");
    if (auto const* s = o.if_contains("inputSchema")) t.input_schema = *s;
    if (auto const* s = o.if_contains("outputSchema")) t.output_schema = *s;
    if (auto const* a = o.if_contains("annotations"); a && a->is_object()) t.annotations = a->get_object();
    return t;
}

char const* const supported_versions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

}  // namespace

/// The shared state of a client's copies. Everything but the handshake results, the tool
/// list and the atomics is touched on the I/O thread only.
class client_impl {
public:
    explicit client_impl(server_config config) : config_(std::move(config)) {
        io_.emplace(1);
        work_.emplace(io_->get_executor());
        thread_ = std::thread([this] { io_->run(); });
    }

    ~client_impl() {
        work_.reset();
        io_->stop();
        if (thread_.joinable()) {
            // A callback that held the last copy (client.hpp says not to) cannot join its own thread.
            if (thread_.get_id() == std::this_thread::get_id()) std::terminate();
            thread_.join();
        }
        if (transport_) transport_->stop_now();
        pending_.clear();
        transport_.reset();
        io_.reset();  // destroys the suspended coroutines, and the I/O objects they hold
    }

    client_impl(client_impl const&) = delete;
    client_impl& operator=(client_impl const&) = delete;

    asio::any_io_executor io() { return io_->get_executor(); }

    // -- on the I/O thread -------------------------------------------------------------------

    struct pending {
        std::string method;
        std::string tool;
        std::unique_ptr<asio::steady_timer> timer;
        std::function<void(progress const&)> on_progress;
        std::chrono::milliseconds timeout{0};
        bool reset_on_progress = false;
        std::chrono::steady_clock::time_point latest;  // the end, whatever progress says
        bool done = false;
        json::value result;
        std::exception_ptr error;
    };

    std::string what_of(pending const& p) const {
        return p.tool.empty() ? "request '" + p.method + "'" : "call of tool '" + p.tool + "'";
    }

    mcp_error lost_error(std::string const& method, std::string const& tool) const {
        std::string const what = tool.empty() ? "request '" + method + "'" : "call of tool '" + tool + "'";
        return mcp_error(lost_kind_, config_.name,
                         server_label(config_.name) + " is not connected (" + lost_reason_ + "); the " + what + " was not sent",
                         tool);
    }

    void finish(pending& p, std::exception_ptr error, json::value result) {
        if (p.done) return;
        p.done = true;
        p.error = std::move(error);
        p.result = std::move(result);
        p.timer->cancel();
    }

    void send_message(json::object const& message, std::optional<std::int64_t> id) {
        if (transport_ && !lost_) transport_->send(json::serialize(message), id);
    }

    void send_cancelled(std::int64_t id, std::string const& reason) {
        json::object params{{"requestId", id}, {"reason", reason}};
        json::object note{{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"}, {"params", std::move(params)}};
        send_message(note, std::nullopt);
        if (transport_) transport_->abandon(id);
    }

    void on_lost(errc kind, std::string reason) {
        if (lost_) return;
        lost_ = true;
        lost_kind_ = kind;
        lost_reason_ = reason;
        connected_ = false;
        std::string tail = transport_ && kind != errc::closed ? transport_->stderr_tail() : std::string();
        if (tail.size() > 1000) tail = "..." + tail.substr(tail.size() - 1000);
        while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
        if (!tail.empty()) tail = "; its stderr ends with: " + tail;
        for (auto& [id, p] : pending_) {
            auto error = std::make_exception_ptr(mcp_error(
                kind, config_.name, server_label(config_.name) + " " + reason + " during the " + what_of(*p) + tail,
                p->tool));
            finish(*p, std::move(error), {});
        }
    }

    void on_request_failed(std::int64_t id, errc kind, std::string const& reason) {
        auto it = pending_.find(id);
        if (it == pending_.end()) return;
        auto& p = *it->second;
        finish(p, std::make_exception_ptr(mcp_error(kind, config_.name,
                                                    server_label(config_.name) + ": the " + what_of(p) + " failed: " + reason,
                                                    p.tool)),
               {});
    }

    void on_message(json::value message) {
        if (auto* batch = message.if_array()) {
            for (auto& m : *batch) on_message(std::move(m));
            return;
        }
        auto* obj = message.if_object();
        if (!obj) return;  // not JSON-RPC: ignored (the official clients do the same)
        auto const* method = obj->if_contains("method");
        auto const* id = obj->if_contains("id");
        if (method && method->is_string()) {
            std::string const name(method->get_string());
            if (id) answer_server_request(*id, name);
            else on_notification(name, obj->if_contains("params"));
            return;
        }
        if (!id) return;
        auto const key = integer_id(*id);
        if (!key) return;
        auto it = pending_.find(*key);
        if (it == pending_.end()) return;  // a late answer to a request given up on
        auto& p = *it->second;
        if (auto const* err = obj->if_contains("error")) {
            std::optional<std::int64_t> code;
            std::string text;
            if (auto const* e = err->if_object()) {
                if (auto const* c = e->if_contains("code"); c && c->is_int64()) code = c->get_int64();
                text = string_field(*e, "message");
            }
            std::string what = server_label(config_.name) + " answered the " + what_of(p) + " with JSON-RPC error" +
                               (code ? " " + std::to_string(*code) : std::string()) + ": " + text;
            finish(p, std::make_exception_ptr(mcp_error(errc::server_error, config_.name, what, p.tool, code)), {});
        } else if (auto const* result = obj->if_contains("result")) {
            finish(p, nullptr, *result);
        } else {
            finish(p,
                   std::make_exception_ptr(mcp_error(errc::protocol_error, config_.name,
                                                     server_label(config_.name) + " answered the " + what_of(p) +
                                                         " with neither a result nor an error: " + json::serialize(*obj),
                                                     p.tool)),
                   {});
        }
    }

    void answer_server_request(json::value const& id, std::string const& method) {
        json::object reply{{"jsonrpc", "2.0"}, {"id", id}};
        if (method == "ping") {
            reply["result"] = json::object();
        } else {
            json::object error{{"code", -32601}, {"message", "method not supported by this client: " + method}};
            reply["error"] = std::move(error);
        }
        send_message(reply, std::nullopt);
    }

    void on_notification(std::string const& method, json::value const* params) {
        json::object const* p = params ? params->if_object() : nullptr;
        if (method == "notifications/tools/list_changed") {
            schedule_refresh();
        } else if (method == "notifications/progress" && p) {
            auto const* token = p->if_contains("progressToken");
            auto const key = token ? integer_id(*token) : std::nullopt;
            if (!key) return;
            auto it = pending_.find(*key);
            if (it == pending_.end() || it->second->done) return;
            progress step;
            step.value = number_field(*p, "progress").value_or(0);
            step.total = number_field(*p, "total");
            step.message = string_field(*p, "message");
            auto& call = *it->second;
            if (call.reset_on_progress)  // the waiter sees its wait end early and waits again
                call.timer->expires_at(std::min(std::chrono::steady_clock::now() + call.timeout, call.latest));
            try {
                if (call.on_progress) call.on_progress(step);
            } catch (...) {
                // a callback's failure is its own; the call goes on
            }
        }
        // notifications/message (logging), notifications/cancelled and the rest: nothing to do.
    }

    void schedule_refresh() {
        if (lost_) return;
        if (refreshing_) {
            refresh_again_ = true;
            return;
        }
        refreshing_ = true;
        auto op = refresh(this);
        asio::co_spawn(io(), std::move(op), stategraph::detail::report_to("MCP client: refreshing the tool list"));
    }

    static asio::awaitable<void> refresh(client_impl* self) {
        do {
            self->refresh_again_ = false;
            try {
                auto op = list_all(self);
                auto list = co_await std::move(op);
                std::function<void(std::vector<tool_info> const&)> callback;
                {
                    std::lock_guard lock(self->tools_mutex_);
                    callback = self->on_tools_changed_;
                }
                if (callback) callback(list);
            } catch (...) {
                // the next list_changed, or list_tools(), tries again
            }
        } while (self->refresh_again_ && !self->lost_);
        self->refreshing_ = false;
    }

    /// One request, answered or failed. Runs on the I/O thread.
    static asio::awaitable<json::value> request(client_impl* self, std::string method, json::object params,
                                                std::string tool, call_options options) {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        if (self->lost_) throw self->lost_error(method, tool);
        auto const timeout = options.timeout.count() > 0 ? options.timeout : self->config_.timeout;
        std::int64_t const id = self->next_id_++;
        auto p = std::make_shared<pending>();
        p->method = method;
        p->tool = tool;
        p->timer = std::make_unique<asio::steady_timer>(self->io());
        p->timer->expires_after(timeout);
        p->timeout = timeout;
        if (options.on_progress) {
            p->on_progress = std::move(options.on_progress);
            p->reset_on_progress = options.reset_timeout_on_progress;
            p->latest = std::chrono::steady_clock::now() +
                        (options.max_timeout.count() > 0 ? options.max_timeout : 10 * timeout);
            auto& meta = params["_meta"];
            if (!meta.is_object()) meta = json::object();
            meta.get_object()["progressToken"] = id;
        }
        self->pending_[id] = p;
        json::object message{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
        self->send_message(message, id);
        bool cancelled = false;
        for (;;) {
            auto [ec] = co_await p->timer->async_wait(asio::as_tuple(asio::use_awaitable));
            if (p->done) break;
            auto const state = co_await asio::this_coro::cancellation_state;
            cancelled = state.cancelled() != asio::cancellation_type::none;
            if (cancelled || ec != asio::error::operation_aborted) break;
            // else progress moved the deadline: wait again
        }
        self->pending_.erase(id);
        if (p->done) {
            if (p->error) std::rethrow_exception(p->error);
            co_return std::move(p->result);
        }
        std::string const what = self->what_of(*p);
        self->send_cancelled(id, cancelled ? "cancelled by the client" : "timed out");
        if (cancelled)
            throw mcp_error(errc::cancelled, self->config_.name,
                            server_label(self->config_.name) + ": the " + what +
                                " was cancelled by the caller (the server was sent notifications/cancelled)",
                            tool);
        throw mcp_error(errc::timeout, self->config_.name,
                        server_label(self->config_.name) + ": the " + what + " got no answer within " +
                            std::to_string(timeout.count()) + " ms" +
                            (p->reset_on_progress ? std::string(" of its last progress (or its maximum)") : std::string()) +
                            " (the server was sent notifications/cancelled)",
                        tool);
    }

    static asio::awaitable<std::vector<tool_info>> list_all(client_impl* self) {
        std::vector<tool_info> list;
        std::string cursor;
        for (int page = 0; page < 10000; ++page) {
            json::object params;
            if (!cursor.empty()) params["cursor"] = cursor;
            std::string method = "tools/list";
            std::string no_tool;
            call_options defaults;
            auto op = request(self, std::move(method), std::move(params), std::move(no_tool), std::move(defaults));
            auto result = co_await std::move(op);
            auto const* obj = result.if_object();
            auto const* tools = obj ? obj->if_contains("tools") : nullptr;
            if (!tools || !tools->is_array())
                throw mcp_error(errc::protocol_error, self->config_.name,
                                server_label(self->config_.name) + " answered tools/list without a \"tools\" array: " +
                                    json::serialize(result));
            for (auto const& t : tools->get_array())
                if (auto const* o = t.if_object()) list.push_back(parse_tool(*o));
            cursor = string_field(*obj, "nextCursor");
            if (cursor.empty()) break;
        }
        {
            std::lock_guard lock(self->tools_mutex_);
            self->tools_ = list;
        }
        co_return list;
    }

    static asio::awaitable<void> start(client_impl* self) {
        auto const& cfg = self->config_;
        self->transport_ = cfg.type == transport_kind::http ? make_http_transport(self->io(), cfg)
                                                            : make_stdio_transport(self->io(), cfg);
        transport_events events;
        events.message = [self](json::value v) { self->on_message(std::move(v)); };
        events.lost = [self](errc kind, std::string reason) { self->on_lost(kind, std::move(reason)); };
        events.request_failed = [self](std::int64_t id, errc kind, std::string reason) {
            self->on_request_failed(id, kind, reason);
        };
        auto started = self->transport_->start(std::move(events));
        co_await std::move(started);

        json::object client_info{{"name", "stategraph"}, {"version", "0.1.0"}};
        json::object params{{"protocolVersion", latest_protocol_version},
                            {"capabilities", json::object()},
                            {"clientInfo", std::move(client_info)}};
        json::value result;
        std::exception_ptr failure;
        try {
            std::string method = "initialize";
            std::string no_tool;
            call_options defaults;
            auto op = request(self, std::move(method), std::move(params), std::move(no_tool), std::move(defaults));
            result = co_await std::move(op);
        } catch (mcp_error const& e) {
            if (e.kind() != errc::server_exited && e.kind() != errc::connection_lost && e.kind() != errc::protocol_error)
                throw;
            failure = std::current_exception();
        }
        if (failure) {
            std::string what;
            try {
                std::rethrow_exception(failure);
            } catch (mcp_error const& e) {
                what = e.what();
            }
            throw mcp_error(errc::start_failed, cfg.name,
                            server_label(cfg.name) + " did not complete the initialize handshake: " + what);
        }
        auto const* obj = result.if_object();
        if (!obj)
            throw mcp_error(errc::protocol_error, cfg.name,
                            server_label(cfg.name) + " answered initialize with a non-object: " + json::serialize(result));
        self->protocol_version_ = string_field(*obj, "protocolVersion");
        bool known = false;
        for (auto const* v : supported_versions) known = known || self->protocol_version_ == v;
        if (!known)
            throw mcp_error(errc::protocol_error, cfg.name,
                            server_label(cfg.name) + " chose protocol revision '" + self->protocol_version_ +
                                "', which this client does not speak (it speaks 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)");
        if (auto const* v = obj->if_contains("serverInfo"); v && v->is_object()) self->server_info_ = v->get_object();
        if (auto const* v = obj->if_contains("capabilities"); v && v->is_object()) self->capabilities_ = v->get_object();
        self->instructions_ = string_field(*obj, "instructions");
        auto after = self->transport_->after_initialize(self->protocol_version_);
        co_await std::move(after);
        json::object initialized{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}};
        self->send_message(initialized, std::nullopt);
        self->connected_ = true;
        if (self->capabilities_.contains("tools")) {
            auto op = list_all(self);
            co_await std::move(op);
        }
    }

    static asio::awaitable<void> close(client_impl* self) {
        if (!self->lost_) self->on_lost(errc::closed, "was closed by the client");
        if (self->transport_ && !self->stopped_) {
            self->stopped_ = true;
            auto op = self->transport_->stop();
            co_await std::move(op);
        }
    }

    server_config config_;
    std::optional<asio::io_context> io_;
    std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_;
    std::thread thread_;
    std::shared_ptr<transport> transport_;

    std::map<std::int64_t, std::shared_ptr<pending>> pending_;
    std::int64_t next_id_ = 1;
    bool lost_ = false;
    bool stopped_ = false;
    errc lost_kind_ = errc::closed;
    std::string lost_reason_;
    bool refreshing_ = false;
    bool refresh_again_ = false;
    std::atomic<bool> connected_{false};

    // Written by start() before connect() returns; read-only afterwards.
    std::string protocol_version_;
    json::object server_info_;
    json::object capabilities_;
    std::string instructions_;

    mutable std::mutex tools_mutex_;
    std::vector<tool_info> tools_;
    std::function<void(std::vector<tool_info> const&)> on_tools_changed_;
};

}  // namespace detail

namespace {

// The public calls: each runs its work on the client's I/O thread and resumes the caller on its
// own executor. `impl` keeps the client alive while the caller waits.

asio::awaitable<std::vector<tool_info>> list_tools_on(std::shared_ptr<detail::client_impl> impl) {
    auto io = impl->io();
    auto op = detail::client_impl::list_all(impl.get());
    co_return co_await asio::co_spawn(io, std::move(op), asio::use_awaitable);
}

asio::awaitable<call_result> call_tool_on(std::shared_ptr<detail::client_impl> impl, std::string tool,
                                          json::object arguments, call_options options) {
    auto io = impl->io();
    json::object params{{"name", tool}, {"arguments", std::move(arguments)}};
    std::string method = "tools/call";
    std::string named_tool = tool;
    auto pending = detail::client_impl::request(impl.get(), std::move(method), std::move(params), std::move(named_tool),
                                                std::move(options));
    auto result = co_await asio::co_spawn(io, std::move(pending), asio::use_awaitable);
    auto const* obj = result.if_object();
    auto const* content = obj ? obj->if_contains("content") : nullptr;
    if (!obj || (content && !content->is_array()))
        throw mcp_error(errc::protocol_error, impl->config_.name,
                        detail::server_label(impl->config_.name) + " answered the call of tool '" + tool +
                            "' with a malformed result: " + json::serialize(result),
                        tool);
    call_result out;
    if (content) out.content = content->get_array();
    if (auto const* s = obj->if_contains("structuredContent")) out.structured_content = *s;
    if (auto const* e = obj->if_contains("isError"); e && e->is_bool()) out.is_error = e->get_bool();
    co_return out;
}

asio::awaitable<void> ping_on(std::shared_ptr<detail::client_impl> impl) {
    auto io = impl->io();
    std::string method = "ping";
    json::object params;
    std::string no_tool;
    call_options defaults;
    auto pending = detail::client_impl::request(impl.get(), std::move(method), std::move(params), std::move(no_tool),
                                                std::move(defaults));
    co_await asio::co_spawn(io, std::move(pending), asio::use_awaitable);
}

asio::awaitable<void> close_on(std::shared_ptr<detail::client_impl> impl) {
    auto io = impl->io();
    auto op = detail::client_impl::close(impl.get());
    co_await asio::co_spawn(io, std::move(op), asio::use_awaitable);
}

}  // namespace

asio::awaitable<client> client::connect(server_config config) {
    auto impl = std::make_shared<detail::client_impl>(std::move(config));
    return do_connect(std::move(impl));
}

asio::awaitable<client> client::do_connect(std::shared_ptr<detail::client_impl> impl) {
    auto io = impl->io();
    auto op = detail::client_impl::start(impl.get());
    co_await asio::co_spawn(io, std::move(op), asio::use_awaitable);
    co_return client(std::move(impl));
}

std::shared_ptr<detail::client_impl> const& client::impl() const {
    if (!impl_) throw mcp_error(errc::closed, std::string(), "an MCP client that was never connected was used");
    return impl_;
}

std::string const& client::name() const { return impl()->config_.name; }
server_config const& client::config() const { return impl()->config_; }
std::string const& client::protocol_version() const { return impl()->protocol_version_; }
json::object const& client::server_info() const { return impl()->server_info_; }
json::object const& client::capabilities() const { return impl()->capabilities_; }
std::string const& client::instructions() const { return impl()->instructions_; }
std::optional<int> client::pid() const { return impl()->transport_ ? impl_->transport_->pid() : std::nullopt; }
std::string client::stderr_tail() const { return impl()->transport_ ? impl_->transport_->stderr_tail() : std::string(); }
bool client::connected() const { return impl_ && impl_->connected_; }

std::vector<tool_info> client::tools() const {
    std::lock_guard lock(impl()->tools_mutex_);
    return impl_->tools_;
}

asio::awaitable<std::vector<tool_info>> client::list_tools() const { return list_tools_on(impl()); }

void client::on_tools_changed(std::function<void(std::vector<tool_info> const&)> callback) const {
    std::lock_guard lock(impl()->tools_mutex_);
    impl_->on_tools_changed_ = std::move(callback);
}

asio::awaitable<call_result> client::call_tool(std::string tool, json::object arguments, call_options options) const {
    return call_tool_on(impl(), std::move(tool), std::move(arguments), std::move(options));
}

asio::awaitable<call_result> client::call_tool(std::string tool, json::object arguments) const {
    return call_tool_on(impl(), std::move(tool), std::move(arguments), call_options());
}

asio::awaitable<void> client::ping() const { return ping_on(impl()); }

asio::awaitable<void> client::close() const { return close_on(impl()); }

namespace {

asio::awaitable<std::vector<client>> connect_each(std::vector<server_config> configs) {
    std::vector<client> out;
    std::exception_ptr failure;
    for (auto& c : configs) {
        try {
            auto op = client::connect(std::move(c));
            auto one = co_await std::move(op);
            out.push_back(std::move(one));
        } catch (...) {
            failure = std::current_exception();
            break;
        }
    }
    if (failure) {
        for (auto const& c : out) {
            auto op = c.close();
            co_await std::move(op);
        }
        std::rethrow_exception(failure);
    }
    co_return out;
}

}  // namespace

asio::awaitable<std::vector<client>> connect_all(std::vector<server_config> configs) {
    return connect_each(std::move(configs));
}

}  // namespace stategraph::mcp
