#include "space.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace msda_sweep {

using msda::schedules::Family;
using msda::schedules::Knobs;

Space Space::for_kernel(Kernel kernel, const std::set<Walk> &walks, Family family, bool cuda, int natural_width) {
    Space space;
    auto &v = space.values;
    if (family == Family::gpu) {
        v["channel_threads"] = {8, 16, 32, 64, 128};
        if (kernel == Kernel::grad_sample) {
            v.clear();
            v["sample_threads"] = {16, 32, 64, 128, 256};
            return space;
        }
        v["query_threads"] = {1, 2, 4, 8, 16, 32};
        if (cuda) v["channels_per_thread"] = {1, 2, 4, 8};
        if (kernel == Kernel::grad_value) {
            v["row_threads"] = {1, 2, 4, 8, 16, 32};
            v["bound_threads"] = {32, 64, 128, 256, 512};
            v["chunk"] = {256, 512, 1024, 2048, 4096};
            v["reduction_lanes"] = {8, 16, 32};
        }
        return space;
    }
    // The vector widths around the natural one (the natural one is 0), for
    // the channel loops and the by-query tables.
    std::vector<int> widths;
    for (int width : {4, 8, 16, 32}) widths.push_back(width == natural_width ? 0 : width);
    v["vector_width"] = widths;
    v["unroll_channels"] = {0, 1};
    const bool by_level = walks.count(Walk::by_level) > 0, by_query = walks.count(Walk::by_query) > 0;
    // Never fewer tasks than the family's default: the tuned values ship to
    // every CPU of the class, whatever its core count, and a sweep on 2
    // cores would trade away the parallelism of larger machines (2 tasks a
    // batch element measured 1.26x faster on this 2-core VM's M0 forward).
    const std::vector<int> tasks_per_batch = {16, 32, 64, 128};
    switch (kernel) {
    case Kernel::forward:
        v["query_tile"] = {4, 8, 16, 32, 64};
        v["tasks_per_batch"] = tasks_per_batch;
        v["specialize_usual"] = {0, 1};
        v["flat_rows"] = {0, 1};
        if (by_query) {
            v["point_sums"] = {0, 1, 2};
            v["table_lanes"] = widths;
            v["table_stages"] = {0, 1};
        }
        if (by_level) v["points_inner"] = {0, 1};
        break;
    case Kernel::grad_value:
        v["fill_rows"] = {32, 64, 128, 256, 512, 1024, 4096};
        if (by_query) {
            v["table_lanes"] = widths;
            v["table_stages"] = {0, 1};
            v["scatter_levels"] = {0, 1};
        }
        if (by_level) {
            v["query_tile"] = {4, 8, 16, 32, 64};
            v["l2_bytes"] = {262144, 524288, 1048576, 0, 4194304};
        }
        break;
    case Kernel::grad_sample:
        v["query_tile"] = {4, 8, 16, 32, 64};
        v["tasks_per_batch"] = tasks_per_batch;
        v["dot_lanes"] = {0, 4, 8, 16};
        v["flat_rows"] = {0, 1};
        if (by_query) {
            v["table_lanes"] = widths;
            v["table_stages"] = {0, 1};
        }
        break;
    }
    return space;
}

void Space::override_from(const std::string &path) {
    std::ifstream in(path);
    if (!in) throw std::invalid_argument("msda sweep: --space " + path + ": cannot read it");
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
        number++;
        line = line.substr(0, line.find('#'));
        std::istringstream words(line);
        std::string knob;
        if (!(words >> knob)) continue;
        const std::string where = path + ":" + std::to_string(number) + ": ";
        if (!msda::schedules::find_knob(knob)) throw std::invalid_argument(where + "no knob named " + knob);
        std::vector<int> list;
        std::string word;
        while (words >> word) {
            std::size_t used = 0;
            int value = 0;
            try {
                value = std::stoi(word, &used);
            } catch (const std::exception &) {
                used = 0;
            }
            if (used != word.size()) throw std::invalid_argument(where + "\"" + word + "\" is not a whole number");
            Knobs probe;
            msda::schedules::set_knob(probe, knob, value);  // checks the range
            list.push_back(value);
        }
        if (list.empty()) throw std::invalid_argument(where + knob + " has no values");
        if (values.count(knob)) values[knob] = list;
    }
}

namespace {
void set(Knobs &knobs, const std::string &name, int value) { msda::schedules::set_knob(knobs, name, value); }
int get(const Knobs &knobs, const std::string &name) { return knobs.*(msda::schedules::find_knob(name)->field); }
}  // namespace

Knobs Space::random(std::mt19937_64 &rng, const Knobs &base) const {
    Knobs knobs = base;
    for (const auto &[name, list] : values) {
        set(knobs, name, list[std::uniform_int_distribution<std::size_t>(0, list.size() - 1)(rng)]);
    }
    return knobs;
}

Knobs Space::mutate(std::mt19937_64 &rng, const Knobs &parent) const {
    Knobs child = parent;
    std::vector<std::string> names;
    for (const auto &[name, list] : values) {
        if (list.size() > 1) names.push_back(name);
    }
    if (names.empty()) return child;
    const int changes = std::uniform_int_distribution<int>(0, 9)(rng) < 7 ? 1 : 2;
    for (int i = 0; i < changes; i++) {
        const std::string &name = names[std::uniform_int_distribution<std::size_t>(0, names.size() - 1)(rng)];
        const std::vector<int> &list = values.at(name);
        // Mostly a neighbour of the current value (the knobs' values are
        // ordered), sometimes any other.
        std::size_t at = 0;
        while (at < list.size() && list[at] != get(child, name)) at++;
        std::size_t next;
        if (at < list.size() && std::uniform_int_distribution<int>(0, 2)(rng) > 0) {
            const bool up = (at == 0) || (at + 1 < list.size() && std::uniform_int_distribution<int>(0, 1)(rng));
            next = up ? at + 1 : at - 1;
        } else {
            next = std::uniform_int_distribution<std::size_t>(0, list.size() - 1)(rng);
        }
        set(child, name, list[std::min(next, list.size() - 1)]);
    }
    return child;
}

Knobs knobs_from_settings(const std::string &settings) {
    Knobs knobs;
    std::istringstream words(settings);
    std::string word;
    while (words >> word) {
        const std::size_t equals = word.find('=');
        if (equals == std::string::npos) throw std::invalid_argument("msda sweep: \"" + word + "\" is not knob=value");
        set(knobs, word.substr(0, equals), std::stoi(word.substr(equals + 1)));
    }
    return knobs;
}

std::vector<TunedRow> read_tuned(const std::string &path) {
    std::vector<TunedRow> rows;
    std::ifstream in(path);
    std::string line, comment;
    while (std::getline(in, line)) {
        if (line.rfind("msda_tuned(", 0) == 0) {
            const std::size_t close = line.rfind(')');
            std::istringstream words(line.substr(11, close - 11));
            TunedRow row;
            words >> row.klass >> row.schedule;
            std::getline(words, row.settings);
            row.settings.erase(0, row.settings.find_first_not_of(' '));
            row.comment = comment;
            rows.push_back(row);
            comment.clear();
        } else if (line.rfind("# msda sweep", 0) == 0) {
            comment = line;
        }
    }
    return rows;
}

std::string tuned_header(const std::string &path) {
    std::ifstream in(path);
    std::string line, header;
    while (std::getline(in, line)) {
        if (line.rfind("msda_tuned(", 0) == 0 || line.rfind("# msda sweep", 0) == 0) break;
        header += line + "\n";
    }
    return header;
}

void write_tuned(const std::string &path, const std::string &header, const std::vector<TunedRow> &rows) {
    std::ostringstream text;
    text << header;
    if (!header.empty() && header.substr(header.size() - 2) != "\n\n" && !rows.empty()) text << "\n";
    for (const TunedRow &row : rows) {
        if (!row.comment.empty()) text << row.comment << "\n";
        text << "msda_tuned(" << row.klass << " " << row.schedule << " " << row.settings << ")\n";
    }
    const std::string temporary = path + ".tmp";
    {
        std::ofstream out(temporary);
        out << text.str();
        if (!out) throw std::runtime_error("msda sweep: cannot write " + temporary);
    }
    std::rename(temporary.c_str(), path.c_str());
}

}  // namespace msda_sweep
