// open_postgres_run_store when stategraph is built without PostgreSQL (STATEGRAPH_WITH_POSTGRES off).

#include <stategraph/server/run_store.hpp>

namespace stategraph::server {

std::shared_ptr<run_store> open_postgres_run_store(postgres_run_store_options) {
    throw std::invalid_argument("open_postgres_run_store: this stategraph was built without PostgreSQL "
                                "(configure with -DSTATEGRAPH_WITH_POSTGRES=ON and libpq installed)");
}

} // namespace stategraph::server
