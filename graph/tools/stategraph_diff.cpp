// stategraph-diff OLD NEW [--summary]
//
//   old.json ─┐
//             ├─ diff_graphs ──> DOT of NEW: + added (green), - removed (red, dashed), ~ changed (amber)
//   new.json ─┘              └─> --summary: the text a review comment can quote
//
// Reads two graph descriptions written by `stategraph::write_json` (or `global_supervisor dot
// --format json`). Exit status as diff(1): 0 same graph, 1 different, 2 bad input.
#include <stategraph/graph_description.hpp>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

stategraph::topology load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read '" + path + "'");
    std::ostringstream text;
    text << in.rdbuf();
    try {
        return stategraph::read_json(text.str());
    } catch (const stategraph::description_error& e) {
        throw std::runtime_error(path + ": " + e.what());
    }
}

} // namespace

int main(int argc, char** argv) {
    std::vector<std::string> files;
    bool summary = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--summary") summary = true;
        else if (a == "-h" || a == "--help") {
            std::cout << "usage: stategraph-diff OLD.json NEW.json [--summary]\n"
                         "  writes a Graphviz DOT drawing of NEW with the changes marked (or, with --summary,\n"
                         "  a text summary); exit status 0 when the graphs are the same, 1 when they differ, 2 on error\n";
            return 0;
        } else files.push_back(a);
    }
    if (files.size() != 2) {
        std::cerr << "stategraph-diff: expected OLD.json NEW.json (see --help)\n";
        return 2;
    }
    try {
        auto old_graph = load(files[0]), new_graph = load(files[1]);
        auto d = stategraph::diff_graphs(old_graph, new_graph);
        if (summary) std::cout << stategraph::diff_summary(d);
        else stategraph::write_diff_dot(std::cout, old_graph, new_graph);
        return d.empty() ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "stategraph-diff: " << e.what() << "\n";
        return 2;
    }
}
