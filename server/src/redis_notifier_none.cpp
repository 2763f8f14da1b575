// open_redis_notifier when stategraph is built without Redis (STATEGRAPH_WITH_REDIS off).

#include <stategraph/server/redis_notifier.hpp>

namespace stategraph::server {

std::shared_ptr<notifier> open_redis_notifier(redis_notifier_options options) {
    throw notifier_error(notifier_errc::not_built,
                         "open_redis_notifier(" + options.url + "): this stategraph was built without Redis "
                         "(configure with -DSTATEGRAPH_WITH_REDIS=ON and hiredis installed: libhiredis-dev)");
}

} // namespace stategraph::server
