#pragma once
/// @file run_context.hpp
/// @brief What a served run's nodes read of the caller's per-run options: LangGraph's runtime
/// `context` and `config.configurable`, sent with the run over HTTP.
///
/// A run's `context` is merged over its assistant's `context`, and its `config.configurable` over
/// the assistant's (the checkpoint address keys left out: they choose the checkpoint, not what the
/// nodes see). The nodes read them with `ctx.runtime<stategraph::server::served_context>()`, or,
/// when the graph is served with a typed context (`assistant_options::context =
/// context_of<T>()`), the context as a `T` with `ctx.runtime<T>()`: a described struct read under
/// the merge rule of `json_shape.hpp` (members left out keep `T{}`'s values), checked when the run
/// is created (an unknown member or a value that does not fit is a 422 naming it, before anything
/// is queued), and reported as the assistant's `context_schema`.
///
/// Thread safety: a `context_reader` is immutable once made and may be shared by every run.

#include <stategraph/json_shape.hpp>
#include <stategraph/run_config.hpp>

#include <boost/json/object.hpp>

#include <memory>
#include <string>
#include <typeinfo>

namespace stategraph::server {

/// @brief The per-run options a served run's nodes read as `ctx.runtime<served_context>()` (a
/// graph served without a typed context).
struct served_context {
    boost::json::object context;      ///< the assistant's `context`, the run's merged over it
    boost::json::object configurable; ///< the assistant's `config.configurable`, the run's merged over it
};

/// @brief How a run's merged `context` becomes the typed object its nodes read (see
/// `context_of<T>()`).
struct context_reader {
    /// Reads the merged context; throws `graph_error` (`invalid_input`) or `unknown_member_error`
    /// naming the member that does not fit.
    std::shared_ptr<const void> (*read)(const boost::json::object& context) = nullptr;
    const std::type_info* type = nullptr; ///< what `ctx.runtime<T>()` asks for
    boost::json::object schema;           ///< the JSON Schema of the context (`context_schema`)
};

/// @brief The typed context reader of `T`, a described struct: `assistant_options{.context =
/// context_of<my_context>()}`; the nodes read `ctx.runtime<my_context>()`.
/// @tparam T a struct described with `BOOST_DESCRIBE_STRUCT`, default-constructible.
template <class T>
std::shared_ptr<const context_reader> context_of() {
    static_assert(detail::is_described_struct_v<T>,
                  "context_of<T>(): T must be a struct described with BOOST_DESCRIBE_STRUCT(T, (), (members...)); "
                  "the run's context JSON is read into its members");
    auto r = std::make_shared<context_reader>();
    r->read = [](const boost::json::object& context) -> std::shared_ptr<const void> {
        return std::make_shared<const T>(read_json<T>(boost::json::value(context), errc::invalid_input, "context"));
    };
    r->type = &typeid(T);
    r->schema = json_schema_of<T>();
    return r;
}

/// @brief A run's context as its nodes see it: the typed object (or the `served_context`) and the
/// `runtime_context` referring to it (valid while this lives).
class run_context {
public:
    /// @brief The context of a run: read through `reader` when there is one, else as a
    /// `served_context` holding both objects.
    /// @throws what `reader->read` throws (the context does not fit the type).
    /// @param reader the assistant's typed reader, or null.
    /// @param context the run's merged `context`.
    /// @param configurable the run's merged `config.configurable`.
    run_context(const context_reader* reader, boost::json::object context, boost::json::object configurable) {
        if (reader) {
            object_ = reader->read(context);
            runtime_ = {object_.get(), reader->type};
        } else {
            auto s = std::make_shared<served_context>();
            s->context = std::move(context);
            s->configurable = std::move(configurable);
            object_ = s;
            runtime_ = {object_.get(), &typeid(served_context)};
        }
    }
    /// @brief What `run_config::runtime` is set to for the run.
    runtime_context runtime() const noexcept { return runtime_; }

private:
    std::shared_ptr<const void> object_;
    runtime_context runtime_;
};

} // namespace stategraph::server
