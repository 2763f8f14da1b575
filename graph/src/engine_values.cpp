// The state and updates as JSON (the one state <-> JSON conversion), the `values`, `tasks`,
// `checkpoints` and `debug` records a run streams, and the delta a subgraph run returns.

#include "engine_internal.hpp"

namespace stategraph::detail::engine {

namespace {

/// Now, as LangGraph's debug events print it: "2026-11-24T02:00:58.012Z".
std::string utc_timestamp() {
    const auto now = std::chrono::system_clock::now();
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    const std::time_t t = std::chrono::system_clock::to_time_t(now);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char buf[80];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                  tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
    return buf;
}

} // namespace

/// A `tasks` or `checkpoints` record, streamed as itself and, for `debug`, in LangGraph's debug
/// envelope (`type` is "task", "task_result" or "checkpoint").
void emit_record(const call_env& env, const run_state& r, stream_mode mode, const char* type, std::int64_t step,
                 const std::string& node, boost::json::object payload) {
    const bool plain = env.wants(mode), debug = env.wants(stream_mode::debug);
    if (!plain && !debug) return;
    stream_event e;
    e.ns = r.ns_path;
    e.step = step;
    e.node = node;
    if (plain) {
        e.mode = mode;
        e.data = debug ? boost::json::value(payload) : boost::json::value(std::move(payload));
        env.on_event(e);
    }
    if (debug) {
        e.mode = stream_mode::debug;
        e.data = boost::json::object{{"step", step}, {"type", type}, {"timestamp", utc_timestamp()}, {"payload", std::move(payload)}};
        env.on_event(e);
    }
}

/// The JSON of an update: its fields by name; a reducer field it overwrites as
/// `{"__overwrite__": value}` (LangGraph's wire form).
boost::json::object update_json(const state_table& st, const update_box& u) {
    boost::json::object o;
    if (!u) return o;
    const auto fields = u.fields();
    const auto overwrites = u.overwrites();
    for (std::size_t i = 0; i < st.n; ++i) {
        if (!fields.test(i)) continue;
        auto v = st.to_json(u.values(), i, {});
        if (overwrites.test(i) && !st.last_value[i]) o[st.names[i]] = wrap_overwrite(std::move(v));
        else o[st.names[i]] = std::move(v);
    }
    return o;
}

/// Reads field `i` of update `u` from its JSON (an overwrite's wire form marks it overwritten).
void read_update_field(const state_table& st, update_box& u, std::size_t i, const boost::json::value& v, errc code,
                       const std::string& where) {
    if (const boost::json::value* inner = st.last_value[i] ? nullptr : overwritten_value(v)) {
        st.from_json(u.values(), i, *inner, code, where);
        st.mark_overwrite(u.get(), i);
    } else {
        st.from_json(u.values(), i, v, code, where);
        st.mark(u.get(), i);
    }
}

/// What a `values` event shows: the graph's output schema at the top level when it declares one
/// (as LangGraph streams its output keys), else the whole state.
boost::json::object values_json(const graph_core& g, const run_state& r) {
    if (g.output && r.ns_path.empty()) return g.output->write(r.saved.state.get(), r.path);
    return state_json(*g.st, r.saved.state.get());
}

void emit_values(const call_env& env, run_state& r, const field_mask* changed) {
    const auto& g = env.g;
    if (g.output && r.ns_path.empty()) { // the output schema: its own JSON, not cached
        stream_event e{stream_mode::values, r.ns_path, r.saved.step, "", values_json(g, r)};
        env.on_event(e);
        return;
    }
    const auto& st = *g.st;
    const void* state = r.saved.state.get();
    boost::json::object& cache = r.values_cache;
    if (!changed || !r.values_cached) {
        cache = state_json(st, state);
    } else {
        for (std::size_t i = 0; i < st.n; ++i) // assigning an existing key keeps its position
            if (changed->test(i)) cache[st.names[i]] = st.to_json(state, i, {});
    }
    // The event holds the cache while the handler reads it (a const reference, synchronously),
    // then gives it back; a handler that throws leaves it to be rebuilt.
    r.values_cached = false;
    stream_event e{stream_mode::values, r.ns_path, r.saved.step, "", boost::json::value(std::move(cache))};
    env.on_event(e);
    cache = std::move(e.data.as_object());
    r.values_cached = true;
}

/// Adds `u`'s fields to the run's delta (a subgraph's output).
void track(const state_table& st, run_state& r, const update_box& u) {
    if (!r.track_delta || !u) return;
    if (!r.saved.delta) r.saved.delta = update_box(st);
    st.apply_copy(r.saved.delta.values(), u.get());
    const auto fields = u.fields();
    const auto overwrites = u.overwrites();
    for (std::size_t i = 0; i < st.n; ++i) {
        // A field the subgraph overwrote is overwritten in the parent too (with what the
        // subgraph holds after its later writes).
        if (overwrites.test(i)) st.mark_overwrite(r.saved.delta.get(), i);
        else if (fields.test(i)) st.mark(r.saved.delta.get(), i);
    }
}

/// An append list overwritten since its last save is saved whole next time, not as a delta.
void forget_saved_sizes(run_state& r, const field_mask& overwritten) {
    if (overwritten.none()) return;
    for (std::size_t i = 0; i < r.writer.saved_size.size(); ++i)
        if (overwritten.test(i)) r.writer.saved_size[i] = std::size_t(-1);
}

} // namespace stategraph::detail::engine

namespace stategraph::detail {

// The one state <-> JSON conversion (declared in detail/engine.hpp; json_graph exposes it).
boost::json::object state_json(const state_table& st, const void* s) {
    boost::json::object o;
    if (!s) return o;
    for (std::size_t i = 0; i < st.n; ++i) o[st.names[i]] = st.to_json(s, i, {});
    return o;
}

update_box update_from_json(const state_table& st, const boost::json::object& o, errc code, const std::string& where) {
    update_box u(st);
    for (const auto& [k, v] : o) {
        int i = st.index_of(k);
        if (i < 0) {
            auto near = nearest_name(std::string(k), st.names);
            throw graph_error(code, where + ": unknown field '" + std::string(k) + "'" +
                                        (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                              {std::string(k)});
        }
        read_update_field(st, u, static_cast<std::size_t>(i), v, code, where);
    }
    return u;
}

update_box merge_update_from_json(const state_table& st, const boost::json::object& o, const void* current, errc code,
                                  const std::string& where) {
    update_box u(st);
    for (const auto& [k, v] : o) {
        int i = st.index_of(k);
        if (i < 0) {
            auto near = nearest_name(std::string(k), st.names);
            throw unknown_member_error(code,
                                       where + ": unknown field '" + std::string(k) + "'" +
                                           (near.empty() ? "" : " (did you mean '" + near + "'?)"),
                                       std::string(k), st.type_name);
        }
        const auto f = static_cast<std::size_t>(i);
        if (const boost::json::value* inner = st.last_value[f] ? nullptr : overwritten_value(v)) {
            st.from_json(u.values(), f, *inner, code, where);
            st.mark_overwrite(u.get(), f);
        } else {
            st.merge_json(u.values(), current, f, v, code, where);
            st.mark(u.get(), f);
        }
    }
    return u;
}

update_box read_input(const graph_core& g, const boost::json::object& in, const std::type_info* type, const void* current,
                      errc code, const std::string& where) {
    if (g.input) {
        if (type && std::type_index(*type) != g.input->type)
            throw graph_error(errc::invalid_input,
                              where + ": the graph's input schema is " + g.input->type_name + ", not " +
                                  boost::core::demangle(type->name()),
                              {g.input->type_name});
        return g.input->read(in, current, code, where);
    }
    if (type)
        throw graph_error(errc::invalid_input,
                          where + ": the graph declares no input schema (state_graph::input_schema<I>); send an "
                                  "update<S> or the state's fields",
                          {boost::core::demangle(type->name())});
    return merge_update_from_json(*g.st, in, current, code, where);
}

boost::json::object output_of(const graph_core& g, const void* state, const std::vector<std::string>& path) {
    if (g.output) return g.output->write(state, path);
    return state_json(*g.st, state);
}

} // namespace stategraph::detail
