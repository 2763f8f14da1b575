// The category of notifier_errc (<stategraph/server/notifier.hpp>), built with or without Redis.

#include <stategraph/server/notifier.hpp>

namespace stategraph::server {

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "stategraph.server.notifier"; }
    std::string message(int v) const override {
        switch (static_cast<notifier_errc>(v)) {
        case notifier_errc::not_built: return "not built";
        case notifier_errc::bad_url: return "bad URL";
        case notifier_errc::unreachable: return "unreachable";
        }
        return "unknown notifier error";
    }
};

} // namespace

const std::error_category& notifier_category() noexcept {
    static const category c;
    return c;
}

} // namespace stategraph::server
