// What one core can do per cycle, as the vendors' manuals give it, and the
// check of the probe's rates against it: a floor derived from a rate above
// the peak (impossible) or far below it (a probe that did not reach the
// machine's limit) is not a bound, and the bench refuses to report one.
#pragma once

#include <string>
#include <vector>

#include "floor.h"

namespace msda_bench {

struct CorePeaks {
    std::string microarchitecture;  // what the cpuid words identify, or the generic bound used
    // At the vector width the probe ran (MachineRates::isa):
    double fma_per_cycle = 0;       // float32 lane multiply-adds
    double l1_bytes_per_cycle = 0;  // loads from L1
    double l2_bytes_per_cycle = 0;  // L2 to L1
    std::string source;
    // Whether every core these peaks stand for reaches them, so that a rate
    // far below one is a probe that missed the machine's limit (false for
    // a ceiling over cores of many widths: checked from above only).
    bool reached_by_every_core = true;
};

// The peaks of the CPU this runs on, for the probe's ISA.
CorePeaks core_peaks(const std::string &isa);

// The probe's rates per core and cycle (MachineRates::clock_hz; one thread a
// core), each beside its peak, and whether they are fit to derive a floor.
struct RateCheck {
    std::string name;  // "FMA", "L1 loads", ...
    double per_core_cycle = 0;
    double peak = 0;   // 0: none documented
    std::string unit;  // "FMA/cycle", "B/cycle"
    std::string problem;  // empty when the rate is plausible
};
struct ProbeVerdict {
    CorePeaks peaks;
    std::vector<RateCheck> checks;
    std::string refusal;  // why no floor may be derived; empty when every check passed
};
ProbeVerdict check_probe(const MachineRates &rates);

// A rate below this share of its peak did not reach the machine's limit.
constexpr double kFarBelowPeak = 1.0 / 3.0;
// Timing noise allowed above a peak before a rate counts as impossible.
constexpr double kAbovePeakTolerance = 1.05;

}  // namespace msda_bench
