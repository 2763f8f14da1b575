// map_reduce: one Send per chunk (map), results collected by a reducer, summed once (reduce).
//
//                     +--> count(chunk 0) --+
//   START --> split --+--> count(chunk 1) --+--> total (deferred) --> END
//                     +--> count(chunk 2) --+
//             fan_out: split's router returns one send("count", chunk) per line
//
// Why not `join("count"_n) >> "total"_n`: a join waits for named nodes reached by static edges.
// The counts are Send tasks, created at run time by a router, so compile() cannot prove a join on
// them ever fires and rejects it when it has other sources (join_never_fires). What works:
// - every count appends to `corpus::counts` (a reducer is required: the Sends run in one
//   superstep, and two plain writes to one field in a step are an error);
// - the edge count -> total triggers `total` once, in the step after all the counts ran;
// - `defer` makes total wait until nothing else is pending, so it still runs once if other
//   branches of different lengths run beside the counts (without it, it would run per branch).
#include <stategraph/dsl/dsl.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include <iostream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

namespace sg = stategraph;
using namespace sg::dsl;

// [snippet map_reduce_state]
struct corpus {
    std::string text;
    std::vector<std::string> chunks;
    std::vector<int> counts; // one per chunk, appended by the Sends in the order they finish
    int total = 0;
};
BOOST_DESCRIBE_STRUCT(corpus, (), (text, chunks, counts, total))
auto reducers(sg::for_state<corpus>) { return sg::reducers{sg::reduce<&corpus::counts>(sg::append)}; }

struct chunk { // a Send's payload: what one `count` task reads instead of the state
    int index = 0;
    std::string text;
};
BOOST_DESCRIBE_STRUCT(chunk, (), (index, text))
// [end]

sg::update<corpus> split(const corpus& c) {
    std::vector<std::string> lines;
    std::istringstream in(c.text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return sg::update<corpus>{}.set<&corpus::chunks>(std::move(lines));
}
// [snippet map_reduce_router]
std::vector<sg::send> one_per_chunk(const corpus& c) {
    std::vector<sg::send> sends;
    for (int i = 0; i < static_cast<int>(c.chunks.size()); ++i) sends.emplace_back("count", chunk{i, c.chunks[i]});
    return sends;
}
// [end]
sg::update<corpus> count(const chunk& piece) {
    std::istringstream words(piece.text);
    int n = 0;
    for (std::string w; words >> w;) ++n;
    std::cout << "count(chunk " << piece.index << "): " << n << " words\n";
    return sg::update<corpus>{}.set<&corpus::counts>({n});
}
sg::update<corpus> total(const corpus& c) {
    return sg::update<corpus>{}.set<&corpus::total>(std::accumulate(c.counts.begin(), c.counts.end(), 0));
}

int main() {
    // clang-format off
// [snippet map_reduce_graph]
    auto app = graph<corpus>("word_count",
        "split"_n = split,  "count"_n = count,  "total"_n = total | defer,
        start >> "split"_n >> fan_out(one_per_chunk, {"count"_n}),
        "count"_n >> "total"_n >> end).compile();
// [end]
    // clang-format on

    auto input = sg::update<corpus>{}.set<&corpus::text>("the quick brown fox\njumps over\nthe lazy dog today");
    boost::asio::io_context io;
    auto done = boost::asio::co_spawn(io, app.invoke(std::move(input)), boost::asio::use_future);
    io.run();
    const corpus result = done.get().values;

    std::cout << "total: " << result.total << " words in " << result.counts.size() << " chunks\n";
    return result.total == 10 && result.counts.size() == 3 ? 0 : 1;
}
