#include <stategraph/core/detail/spawned.hpp>

#include <iostream>

namespace stategraph::detail {

std::string report_to::line(const std::string& what, std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return what + " stopped on an error: " + x.what();
    } catch (...) {
        return what + " stopped on an error of unknown type";
    }
}

void report_to::report(const std::string& what, std::exception_ptr e, const std::function<void(const std::string&)>& log) {
    const std::string text = line(what, e);
    if (log) {
        try {
            log(text);
            return;
        } catch (...) { // a logger's failure is its own: the line still goes to standard error
        }
    }
    std::cerr << "stategraph: " << text << '\n';
}

} // namespace stategraph::detail
