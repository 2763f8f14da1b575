#pragma once
/// @file error.hpp
/// @brief The typed errors of stategraph: one `errc` enumerator per kind of failure, an
/// `std::error_category` ("stategraph"), and exception types that carry the code plus the
/// node, field or thread names involved.

#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <stategraph/core/detail/names.hpp>

namespace stategraph {

/// @brief Every kind of error stategraph reports. Each enumerator is documented and tested.
enum class errc {
    ok = 0,
    // -- compile(): structural problems of a graph ----------------------------------------
    unknown_node = 1,      ///< an edge, route or breakpoint names a node that was never added
    duplicate_node,        ///< a node name was added twice, or uses a reserved name
    no_entry_point,        ///< nothing leaves START
    unreachable_node,      ///< a node cannot be reached from START
    no_path_to_end,        ///< a node has no way to reach END
    unmapped_route,        ///< a router's result value has no target in its path map
    join_never_fires,      ///< a join edge can never fire: one of its sources can be skipped
    missing_path_map,      ///< a conditional edge declares neither a path map nor its targets
    duplicate_route,       ///< a route value is mapped to two targets in one conditional edge
    undescribed_field,     ///< a route reads a state member that BOOST_DESCRIBE_STRUCT does not list
    // -- running a graph ------------------------------------------------------------------
    invalid_concurrent_update = 20, ///< two nodes wrote one last-value field in one step
    recursion_limit,       ///< the run needed more supersteps than its recursion limit
    node_failed,           ///< a node threw (after its retry policy gave up)
    invalid_route,         ///< a router or Command returned a name that is not a node
    invalid_input,         ///< the input or a Send payload does not fit the node or state
    node_timeout,          ///< a node attempt ran past its retry policy's time limit
    // -- threads, interrupts and checkpoints ---------------------------------------------
    thread_not_found = 40, ///< no checkpoint exists for the thread id
    nothing_to_resume,     ///< a resume was sent but no interrupt is pending on the thread
    resume_type_mismatch,  ///< a resume value does not convert to the type the node asked for
    unknown_interrupt_id,  ///< a resume map names an interrupt id that is not pending
    // 44 was `ambiguous_resume`, never raised: one plain resume value answers every pending
    // interrupt (as in LangGraph), and a resume map names its interrupts (unknown_interrupt_id).
    checkpoint_not_found = 45, ///< the checkpoint id does not exist on the thread
    corrupt_checkpoint,    ///< a stored checkpoint or write cannot be read back
    thread_busy,           ///< another process holds the thread (SQLite lease)
    graph_drift,           ///< the thread's checkpoints were written by a different graph
    storage_failure,       ///< the checkpointer could not write (disk full, read-only, ...)
    no_checkpointer,       ///< the call needs a checkpointer and the graph has none
    schema_too_new,        ///< the database was written by a newer stategraph
    lease_lost,            ///< this process's lease on the thread was taken over: its write was refused
    thread_exists,         ///< the target thread of `copy_thread` already has checkpoints or writes
    key_mismatch,          ///< the store is encrypted with another key, or a key was given for an unencrypted store, or none for an encrypted one
    no_store,              ///< a node asked for the long-term memory store (`ctx.store()`) and the run has none
};

/// @brief The category of `errc`, named "stategraph".
const std::error_category& stategraph_category() noexcept;

/// @brief An `std::error_code` of `e` in `stategraph_category()` (found by ADL).
/// @param e the code.
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), stategraph_category()}; }

/// @brief Short name of an error kind, such as "invalid_concurrent_update".
/// @param e the code. Thread safety: pure; any thread.
const char* to_string(errc e) noexcept;

/// @brief Base of every exception stategraph throws: a `std::system_error` with an `errc`
/// code, plus the names (nodes, fields, thread ids) the message talks about.
/// Thread safety: an immutable exception object; copies may be read from any thread.
class graph_error : public std::system_error {
public:
    /// @param code the kind of error (`code()` compares equal to it; `kind()` returns it).
    /// @param what the message, naming what went wrong and where.
    /// @param names the node, field or thread names involved, most relevant first.
    graph_error(errc code, const std::string& what, std::vector<std::string> names = {});
    graph_error(const graph_error&);
    graph_error& operator=(const graph_error&);
    ~graph_error() override;
    errc kind() const noexcept { return static_cast<errc>(code().value()); }
    /// @brief The node, field or thread names involved, most relevant first.
    const std::vector<std::string>& names() const noexcept { return names_; }

private:
    std::vector<std::string> names_;
};

/// @brief One problem `compile()` found in a graph.
struct graph_problem {
    errc code;
    std::string message;
    std::vector<std::string> nodes;
};

/// @brief Thrown by `compile()`: every problem of the graph at once.
class compile_error : public graph_error {
public:
    /// @param problems every problem found; the message lists them, `code()` is the first one's.
    explicit compile_error(std::vector<graph_problem> problems);
    compile_error(const compile_error&);
    compile_error& operator=(const compile_error&);
    ~compile_error() override;
    const std::vector<graph_problem>& problems() const noexcept { return problems_; }

private:
    std::vector<graph_problem> problems_;
};

/// @brief Thrown when two parallel nodes write one last-value field in the same superstep.
struct invalid_update_error : graph_error {
    using graph_error::graph_error;
    ~invalid_update_error() override;
};
/// @brief Thrown when a run exceeds its recursion limit.
struct recursion_limit_error : graph_error {
    using graph_error::graph_error;
    ~recursion_limit_error() override;
};
/// @brief Thrown when a node fails; `nested()` holds the node's own exception.
class node_error : public graph_error {
public:
    /// @param node the failed node's name.
    /// @param inner the node's own exception (`nested()`, `rethrow_nested()`).
    /// @param what the message.
    node_error(std::string node, std::exception_ptr inner, const std::string& what);
    node_error(const node_error&);
    node_error& operator=(const node_error&);
    ~node_error() override;
    const std::string& node() const noexcept { return node_; }
    std::exception_ptr nested() const noexcept { return inner_; }
    [[noreturn]] void rethrow_nested() const { std::rethrow_exception(inner_); }

private:
    std::string node_;
    std::exception_ptr inner_;
};
/// @brief Thrown for problems with threads, interrupts and resumes.
struct thread_error : graph_error {
    using graph_error::graph_error;
    ~thread_error() override;
};
/// @brief Thrown by checkpointers (storage, corruption, busy threads).
struct checkpoint_error : graph_error {
    using graph_error::graph_error;
    ~checkpoint_error() override;
};
/// @brief Thrown when a thread's checkpoint was written by a different graph shape.
struct drift_error : graph_error {
    using graph_error::graph_error;
    ~drift_error() override;
};

// Compatibility, for now: the name-suggestion helpers live in <stategraph/core/detail/names.hpp>
// (included above); callers that still reach them through this header and unqualified as
// stategraph::nearest_name keep working. Include detail/names.hpp directly in new code; this
// include and these using-declarations go once no caller relies on them.
using detail::edit_distance;
using detail::nearest_name;

} // namespace stategraph

template <> struct std::is_error_code_enum<stategraph::errc> : std::true_type {};
