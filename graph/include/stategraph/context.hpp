#pragma once
/// @file context.hpp
/// @brief `context`: what a node can do besides reading the state: interrupt for a human,
/// stream custom events, and see where it runs (node, step, thread, attempt).

#include <stategraph/error.hpp>
#include <stategraph/stream.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/core/demangle.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value_from.hpp>
#include <boost/json/value_to.hpp>

#include <map>
#include <string>
#include <vector>

namespace stategraph {

namespace checkpoint { class saver; }

/// @brief One pending interrupt: its id (stable across re-runs of the task), the node that
/// raised it, and its payload.
struct interrupt_info {
    std::string id;
    std::string node;
    boost::json::value value;
};

/// @brief Thrown inside a node by `interrupt()` when no answer is available yet. The engine
/// catches it; nodes should not (if they must catch everything, rethrow this type).
struct interrupt_signal {
    std::vector<interrupt_info> interrupts;
};

namespace detail {
/// Per-task scratch pad: the answers to this task's interrupt calls, by position.
struct task_scratch {
    std::string task_id;
    std::vector<boost::json::value> resume;   ///< answers, by interrupt call index
    std::size_t counter = 0;                  ///< interrupt calls made so far in this attempt
    // Resume meant for a subgraph run by this task (passed through unchanged).
    const struct resume_pass* child_resume = nullptr;
};
struct resume_pass {
    bool has_plain = false;
    boost::json::value plain;
    std::map<std::string, boost::json::value> by_id;
};
std::string interrupt_id(const std::string& task_id, std::size_t index);
} // namespace detail

/// @brief Passed to nodes that take it as their second parameter.
/// Not thread safe: it belongs to one task attempt.
class context {
public:
    /// @brief The node's name.
    const std::string& node() const noexcept { return node_; }
    /// @brief The superstep the node runs in (LangGraph's checkpoint step numbering).
    std::int64_t step() const noexcept { return step_; }
    /// @brief The thread id of the run ("" without a checkpointer).
    const std::string& thread_id() const noexcept { return *thread_id_; }
    /// @brief The checkpoint namespace ("" at the top level; "node:task" in a subgraph).
    const std::string& ns() const noexcept { return *ns_; }
    /// @brief 1 for the first attempt, 2 for the first retry, ...
    int attempt() const noexcept { return attempt_; }
    /// @brief The executor the run uses.
    const boost::asio::any_io_executor& executor() const noexcept { return executor_; }

    /// @brief Pauses the run for a human. Returns the answer given on resume, converted to `T`;
    /// without an answer the node stops here, and it runs again from its start when the thread
    /// is resumed (earlier interrupt calls then return their stored answers, by position).
    /// @throws thread_error(resume_type_mismatch) when the answer does not convert to `T`.
    template <class T = boost::json::value, class P>
    boost::asio::awaitable<T> interrupt(P payload) {
        co_return interrupt_now<T>(payload);
    }

    /// @brief The same as `interrupt`, for plain (non-coroutine) nodes.
    template <class T = boost::json::value, class P>
    T interrupt_now(const P& payload) {
        std::size_t index = scratch_->counter++;
        if (index < scratch_->resume.size()) {
            const auto& answer = scratch_->resume[index];
            if constexpr (std::is_same_v<T, boost::json::value>) {
                return answer;
            } else {
                auto r = boost::json::try_value_to<T>(answer);
                if (!r)
                    throw thread_error(errc::resume_type_mismatch,
                                       "node '" + node_ + "' expected a resume value of type " +
                                           boost::core::demangle(typeid(T).name()) + " but got " +
                                           boost::json::serialize(answer),
                                       {node_});
                return std::move(*r);
            }
        }
        throw interrupt_signal{{interrupt_info{detail::interrupt_id(scratch_->task_id, index), node_,
                                               boost::json::value_from(payload)}}};
    }

    /// @brief Streams a custom event (stream mode `custom`).
    template <class T>
    void write(const T& event) {
        if (sink_ && *sink_ && has_mode(modes_, stream_mode::custom)) {
            stream_event e;
            e.mode = stream_mode::custom;
            e.ns = *ns_path_;
            e.step = step_;
            e.node = node_;
            e.data = boost::json::value_from(event);
            (*sink_)(e);
        }
    }

    // -- engine side ------------------------------------------------------------------------
    struct init {
        std::string node;
        std::int64_t step;
        const std::string* thread_id;
        const std::string* ns;
        const std::vector<std::string>* ns_path;
        int attempt;
        boost::asio::any_io_executor executor;
        detail::task_scratch* scratch;
        const stream_handler* sink;
        stream_mode modes;
        checkpoint::saver* saver;
        int recursion_limit;
    };
    explicit context(init i)
        : node_(std::move(i.node)), step_(i.step), thread_id_(i.thread_id), ns_(i.ns), ns_path_(i.ns_path),
          attempt_(i.attempt), executor_(std::move(i.executor)), scratch_(i.scratch), sink_(i.sink),
          modes_(i.modes), saver_(i.saver), recursion_limit_(i.recursion_limit) {}

    detail::task_scratch& scratch() noexcept { return *scratch_; }
    checkpoint::saver* saver() const noexcept { return saver_; }
    const stream_handler* sink() const noexcept { return sink_; }
    stream_mode modes() const noexcept { return modes_; }
    const std::vector<std::string>& ns_path() const noexcept { return *ns_path_; }
    int recursion_limit() const noexcept { return recursion_limit_; }

private:
    std::string node_;
    std::int64_t step_;
    const std::string* thread_id_;
    const std::string* ns_;
    const std::vector<std::string>* ns_path_;
    int attempt_;
    boost::asio::any_io_executor executor_;
    detail::task_scratch* scratch_;
    const stream_handler* sink_;
    stream_mode modes_;
    checkpoint::saver* saver_;
    int recursion_limit_;
};

} // namespace stategraph
