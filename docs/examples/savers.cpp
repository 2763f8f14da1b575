// The saver set-ups of docs/savers.md, compiled (CTest builds this file when stategraph::tiered,
// and so the Redis and PostgreSQL savers, are built; nothing here runs: each constructor connects).
#include <stategraph/stategraph.hpp>
#include <stategraph/checkpoint/redis_saver.hpp>
// [snippet postgres_include]
#include <stategraph/checkpoint/postgres_saver.hpp>
// [end]
// [snippet tiered_include]
#include <stategraph/checkpoint/tiered_saver.hpp>
// [end]

#include <chrono>
#include <memory>
#include <string>

namespace sg = stategraph;

struct chat {
    std::string text;
};
BOOST_DESCRIBE_STRUCT(chat, (), (text))

void redis() {
    // [snippet redis_options]
    stategraph::checkpoint::redis_options o;
    o.url = "redis://127.0.0.1:6379/0";            // host, port, database
    o.key_prefix = "myapp";                         // every key starts with "myapp:"
    o.thread_ttl = std::chrono::hours(24 * 7);      // optional: a thread idle for a week disappears
    stategraph::checkpoint::redis_saver saver(o);
    // [end]
}

void postgres() {
    // [snippet postgres_options]
    stategraph::checkpoint::postgres_options o;
    o.conninfo = "postgresql://app@db.internal:5432/chat";   // any libpq connection string
    o.schema = "stategraph";       // made if missing; several applications can share a database
    o.pool_size = 4;               // connections at most; more concurrent calls wait for one
    o.lease_ttl = std::chrono::seconds(30);
    o.retry_for = std::chrono::seconds(10);   // how long a call retries an unreachable server
    auto saver = std::make_shared<stategraph::checkpoint::postgres_saver>(o);   // connects and migrates
    // [end]
}

void tiered(sg::state_graph<chat>& graph) {
    // [snippet tiered_options]
    namespace cp = stategraph::checkpoint;
    cp::redis_options r;
    r.url = "redis://127.0.0.1:6379/0";
    r.thread_ttl = std::chrono::hours(24);          // Redis may forget idle threads: PostgreSQL keeps them
    cp::postgres_options p;
    p.conninfo = "postgresql://app@db.internal:5432/chat";
    auto saver = std::make_shared<cp::tiered_saver>(std::make_shared<cp::redis_saver>(r),    // front
                                                    std::make_shared<cp::postgres_saver>(p)); // back
    auto app = graph.compile({.checkpointer = saver});
    // [end]
}
