// The tiered saver (stategraph::tiered, `COMPONENTS tiered`) as a package user links it. Given a
// Redis URL and a PostgreSQL conninfo it checks that Redis in front of PostgreSQL can be made (the
// PostgreSQL saver connects when made); then a tiered saver over two in-memory savers stores a
// checkpoint and reads it back from the back once the front lost the thread.
// Usage: consumer_tiered [redis-url postgres-conninfo]
#include <stategraph/checkpoint/memory_saver.hpp>
#include <stategraph/checkpoint/postgres_saver.hpp>
#include <stategraph/checkpoint/redis_saver.hpp>
#include <stategraph/checkpoint/tiered_saver.hpp>

#include <stategraph/run_sync.hpp>

#include <iostream>
#include <memory>

namespace cp = stategraph::checkpoint;

/// Redis (connects lazily) in front of PostgreSQL (connects now).
std::shared_ptr<cp::saver> on_servers(const char* redis_url, const char* conninfo) {
    cp::redis_options ro;
    ro.url = redis_url;
    cp::postgres_options po;
    po.conninfo = conninfo;
    return std::make_shared<cp::tiered_saver>(std::make_shared<cp::redis_saver>(ro),
                                              std::make_shared<cp::postgres_saver>(po));
}

int main(int argc, char** argv) {
    if (argc == 3) (void)on_servers(argv[1], argv[2]);

    auto front = std::make_shared<cp::memory_saver>();
    auto back = std::make_shared<cp::memory_saver>();
    cp::tiered_saver s(front, back);
    cp::checkpoint c;
    c.id = cp::new_checkpoint_id();
    c.step = 0;
    c.source = "input";
    c.versions["n"] = c.id;
    c.values["n"] = 7;
    c.frontier = boost::json::array{};
    stategraph::run_sync(s.put("t", "", c));
    const bool both = stategraph::run_sync(front->holds_thread("t")) && stategraph::run_sync(back->holds_thread("t"));
    stategraph::run_sync(front->delete_thread("t"));
    auto got = stategraph::run_sync(s.get("t", "", std::nullopt));
    if (!both || !got || got->cp.values.at("n") != 7) {
        std::cout << "consumer_tiered: wrong answer\n";
        return 1;
    }
    std::cout << "consumer_tiered: ok\n";
    return 0;
}
