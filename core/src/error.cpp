#include <stategraph/core/error.hpp>

namespace stategraph {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::ok: return "ok";
    case errc::unknown_node: return "unknown_node";
    case errc::duplicate_node: return "duplicate_node";
    case errc::no_entry_point: return "no_entry_point";
    case errc::unreachable_node: return "unreachable_node";
    case errc::no_path_to_end: return "no_path_to_end";
    case errc::unmapped_route: return "unmapped_route";
    case errc::join_never_fires: return "join_never_fires";
    case errc::missing_path_map: return "missing_path_map";
    case errc::duplicate_route: return "duplicate_route";
    case errc::undescribed_field: return "undescribed_field";
    case errc::invalid_concurrent_update: return "invalid_concurrent_update";
    case errc::recursion_limit: return "recursion_limit";
    case errc::node_failed: return "node_failed";
    case errc::invalid_route: return "invalid_route";
    case errc::invalid_input: return "invalid_input";
    case errc::node_timeout: return "node_timeout";
    case errc::thread_not_found: return "thread_not_found";
    case errc::nothing_to_resume: return "nothing_to_resume";
    case errc::resume_type_mismatch: return "resume_type_mismatch";
    case errc::unknown_interrupt_id: return "unknown_interrupt_id";
    case errc::checkpoint_not_found: return "checkpoint_not_found";
    case errc::corrupt_checkpoint: return "corrupt_checkpoint";
    case errc::thread_busy: return "thread_busy";
    case errc::graph_drift: return "graph_drift";
    case errc::storage_failure: return "storage_failure";
    case errc::no_checkpointer: return "no_checkpointer";
    case errc::schema_too_new: return "schema_too_new";
    case errc::lease_lost: return "lease_lost";
    case errc::thread_exists: return "thread_exists";
    case errc::key_mismatch: return "key_mismatch";
    case errc::no_store: return "no_store";
    }
    return "unknown_error";
}

namespace {
class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "stategraph"; }
    std::string message(int v) const override { return to_string(static_cast<errc>(v)); }
};
} // namespace

const std::error_category& stategraph_category() noexcept {
    static const category c;
    return c;
}

static std::string join_problems(const std::vector<graph_problem>& problems) {
    std::string out = "graph does not compile: " + std::to_string(problems.size()) + " problem" +
                      (problems.size() == 1 ? "" : "s");
    for (const auto& p : problems) out += "\n  [" + std::string(to_string(p.code)) + "] " + p.message;
    return out;
}

// Out of line, so that the exceptions' vtables and destructors are compiled here once, not in
// every program that throws or catches them.
graph_error::graph_error(errc code, const std::string& what, std::vector<std::string> names)
    : std::system_error(make_error_code(code), what), names_(std::move(names)) {}
graph_error::graph_error(const graph_error&) = default;
graph_error& graph_error::operator=(const graph_error&) = default;
graph_error::~graph_error() = default;
compile_error::compile_error(const compile_error&) = default;
compile_error& compile_error::operator=(const compile_error&) = default;
compile_error::~compile_error() = default;
invalid_update_error::~invalid_update_error() = default;
recursion_limit_error::~recursion_limit_error() = default;
thread_error::~thread_error() = default;
checkpoint_error::~checkpoint_error() = default;
drift_error::~drift_error() = default;
node_error::node_error(std::string node, std::exception_ptr inner, const std::string& what)
    : graph_error(errc::node_failed, what, {node}), node_(std::move(node)), inner_(std::move(inner)) {}
node_error::node_error(const node_error&) = default;
node_error& node_error::operator=(const node_error&) = default;
node_error::~node_error() = default;

compile_error::compile_error(std::vector<graph_problem> problems)
    : graph_error(problems.empty() ? errc::ok : problems.front().code, join_problems(problems),
                  problems.empty() ? std::vector<std::string>{} : problems.front().nodes),
      problems_(std::move(problems)) {}

} // namespace stategraph
