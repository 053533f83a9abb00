// The sweep's search space (which knobs matter to a kernel, and the values
// each may take), the random and evolutionary moves through it, and
// schedules/tuned.cmake, the file the build reads the winners from.
#pragma once

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels.h"

namespace msda_sweep {

// The knobs a kernel's schedule reads on the given walks and family, each
// with the values the sweep tries.
struct Space {
    std::map<std::string, std::vector<int>> values;

    // The defaults: every knob the kernel reads, over a range around its
    // default. `natural_width` is the target's natural vector width (a
    // vector_width of that value is written as 0, its default).
    static Space for_kernel(Kernel kernel, const std::set<Walk> &walks, msda::schedules::Family family, bool cuda,
                            int natural_width);
    // Lines `knob value value ...` of a --space file replace a knob's
    // values (a knob the kernel does not read is ignored); '#' starts a
    // comment. Throws for an unknown knob or a value out of its range.
    void override_from(const std::string &path);

    // A candidate with every knob drawn at random.
    msda::schedules::Knobs random(std::mt19937_64 &rng, const msda::schedules::Knobs &base) const;
    // One or two knobs of `parent` changed to other values of the space.
    msda::schedules::Knobs mutate(std::mt19937_64 &rng, const msda::schedules::Knobs &parent) const;
};

// One row of schedules/tuned.cmake: msda_tuned(CLASS SCHEDULE knob=value ...).
struct TunedRow {
    std::string klass, schedule, settings, comment;
};
std::vector<TunedRow> read_tuned(const std::string &path);
// The header comment of the file (every line before its first row).
std::string tuned_header(const std::string &path);
// Rewrites the file with `rows` (the header kept).
void write_tuned(const std::string &path, const std::string &header, const std::vector<TunedRow> &rows);

// Knobs from `knob=value ...` over the family defaults (knobs.h: set_knob's
// checks).
msda::schedules::Knobs knobs_from_settings(const std::string &settings);

}  // namespace msda_sweep
