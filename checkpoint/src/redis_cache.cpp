// The Redis saver's node cache (cache_get, cache_put, cache_clear) and the graph shapes shared by
// all threads (put_graph, get_graph).
#include "redis_saver_impl.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

namespace stategraph::checkpoint {

asio::awaitable<std::optional<boost::json::value>> redis_saver::impl::cache_get_op(std::string ns, std::string key) {
    command cmd{"GET", cache_key(ns, key)};

    auto r = co_await one(std::move(cmd), no_thread);
    if (r.is_nil()) co_return std::nullopt;
    try {
        const auto text = codec::unseal(r.str, {ns, key});
        boost::system::error_code ec;
        auto v = boost::json::parse(text, ec);
        if (ec) throw codec::corrupt("bad JSON: " + ec.message());
        co_return v;
    } catch (const codec::corrupt& e) {
        throw checkpoint_error(errc::corrupt_checkpoint,
                               "node cache: the entry " + quote(key) + " of namespace " + quote(ns) +
                                   " cannot be read: " + e.what(),
                               {ns, key});
    }
}

asio::awaitable<void> redis_saver::impl::cache_put_op(std::string ns, std::string key, std::string bytes,
                                                      std::chrono::milliseconds ttl) {
    command set{"SET", cache_key(ns, key), std::move(bytes)};
    if (ttl.count() > 0) {
        set.push_back("PX");
        set.push_back(std::to_string(ttl.count()));
    }
    std::vector<command> cmds{command{"MULTI"}, std::move(set), command{"SADD", cache_index(ns), key},
                              command{"SADD", cache_namespaces(), ns}, command{"EXEC"}};
    co_await all(std::move(cmds), no_thread);
}

asio::awaitable<std::size_t> redis_saver::impl::cache_clear_op(std::vector<std::string> namespaces) {
    if (namespaces.empty()) {
        command cmd{"SMEMBERS", cache_namespaces()};

        auto r = co_await one(std::move(cmd), no_thread);
        for (const auto& m : r.elements) namespaces.push_back(m.str);
    }
    std::size_t count = 0;
    for (const auto& ns : namespaces) {
        command cmd{"SMEMBERS", cache_index(ns)};

        auto keys = co_await one(std::move(cmd), no_thread);
        // Entries that expired on their own still count: they are in the namespace's index.
        count += keys.elements.size();
        std::vector<std::string> names;
        for (const auto& k : keys.elements) names.push_back(cache_key(ns, k.str));
        std::vector<command> cmds{command{"MULTI"}};
        add_chunked(cmds, command{"DEL"}, names, 1);
        cmds.push_back(command{"DEL", cache_index(ns)});
        cmds.push_back(command{"SREM", cache_namespaces(), ns});
        cmds.push_back(command{"EXEC"});
        co_await all(std::move(cmds), no_thread);
    }
    co_return count;
}

asio::awaitable<void> redis_saver::impl::put_graph_op(std::string signature, std::string bytes) {
    command cmd{"HSETNX", graphs_key(), signature, std::move(bytes)};

    co_await one(std::move(cmd), no_thread);
    std::lock_guard lock(mutex);
    graphs_sent[signature] = std::chrono::steady_clock::now();
}

bool redis_saver::impl::graph_sent_lately(const std::string& signature) {
    std::lock_guard lock(mutex);
    auto it = graphs_sent.find(signature);
    return it != graphs_sent.end() && std::chrono::steady_clock::now() - it->second < graph_resend;
}

asio::awaitable<std::optional<std::vector<std::string>>> redis_saver::impl::get_graph_op(std::string signature) {
    command cmd{"HGET", graphs_key(), signature};

    auto r = co_await one(std::move(cmd), no_thread);
    if (r.is_nil()) co_return std::nullopt;
    try {
        const auto plain = codec::unseal(r.str, {graph_channel, signature});
        co_return codec::shape_from(plain, signature);
    } catch (const codec::corrupt& e) {
        throw checkpoint_error(errc::corrupt_checkpoint, "graph " + signature + ": " + e.what(), {signature});
    }
}

asio::awaitable<std::optional<boost::json::value>> redis_saver::cache_get(std::string ns, std::string key) {
    auto op = impl_->cache_get_op(std::move(ns), std::move(key));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::cache_put(std::string ns, std::string key, boost::json::value value,
                                             std::chrono::milliseconds ttl) {
    auto bytes = codec::seal(boost::json::serialize(value), {ns, key});
    auto op = impl_->cache_put_op(std::move(ns), std::move(key), std::move(bytes), ttl);
    co_await impl_->call(op);
}

asio::awaitable<std::size_t> redis_saver::cache_clear(std::vector<std::string> namespaces) {
    auto op = impl_->cache_clear_op(std::move(namespaces));
    co_return co_await impl_->call(op);
}

asio::awaitable<void> redis_saver::put_graph(std::string signature, std::vector<std::string> shape) {
    if (impl_->graph_sent_lately(signature)) co_return; // a round trip per call saved
    auto bytes = codec::seal(codec::encode_shape(shape, signature), {graph_channel, signature});
    auto op = impl_->put_graph_op(std::move(signature), std::move(bytes));
    co_await impl_->call(op);
}

asio::awaitable<std::optional<std::vector<std::string>>> redis_saver::get_graph(std::string signature) {
    auto op = impl_->get_graph_op(std::move(signature));
    co_return co_await impl_->call(op);
}

} // namespace stategraph::checkpoint
