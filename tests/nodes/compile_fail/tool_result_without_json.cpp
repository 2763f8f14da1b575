// Mistake (issue 26): a tool returning a struct of its own that Boost.JSON cannot convert. It
// failed deep inside Boost.JSON with "No suitable tag_invoke overload found for the type";
// now tool(...) names the two ways to give the type a conversion.
// expect: static assertion failed: stategraph::nodes::tool: the function's result type has no conversion to JSON
#include <stategraph/nodes/tool.hpp>

#include <boost/describe/class.hpp>
#include <boost/json/object.hpp>

#include <string>

namespace nodes = stategraph::nodes;

struct order_status {
    std::string id;
    std::string where;
};
#ifdef STATEGRAPH_FIXED
BOOST_DESCRIBE_STRUCT(order_status, (), (id, where))
#endif

int main() {
    auto lookup = [](boost::json::object const& args) {
        return order_status{std::string(args.at("id").as_string()), "in transit"};
    };
    nodes::tool status("order_status", "Where an order is", nullptr, lookup);
    (void)status;
}
