// The machine's limits, measured by a small probe, and the floor they imply
// for each benchmark: the least time any implementation could take for a
// shape, a location distribution and an operator on this machine. Derived in
// bench/README.md.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "problem.h"

namespace msda_bench {

// Rates for `threads` threads running together (sums over threads).
struct MachineRates {
    int threads = 1;
    const char *isa = "";           // the vectors the probe's loops used (probe_kernels.h)
    double clock_hz = 0;            // the core clock during the probe (the fastest uninterrupted chain of adds)
    double fma_flops_per_s = 0;     // float32 fused multiply-adds per second (each counts 1)
    double l1_bytes_per_s = 0;      // loads from an L1-resident buffer
    double l2_bytes_per_s = 0;      // loads from an L2-resident buffer
    double l3_bytes_per_s = 0;      // streaming reads of a buffer that fits in L3 but not in L2
    double dram_bytes_per_s = 0;    // streaming reads of a buffer far larger than the caches
    double latency_ns = 0;          // one dependent load, random lines of a large buffer
    double l3_bytes = 0;            // the L3's size as the system reports it; 0 if unknown
    double l1_bytes = 0, l2_bytes = 0;  // one core's L1d and L2, as the system reports them; 0 if unknown
};

// Measures the rates above (takes a second or two).
MachineRates probe_machine(int threads);

// Rows per second that `threads` threads fetch when each reads `row_bytes`
// contiguous bytes at the start of random rows (independent loads, as many
// in flight as the core allows) of a table of `rows` rows `row_stride_bytes`
// apart: the rate at which a sampler can fetch corners of one level's slice
// of value when it visits them in random order.
double random_row_rate(long long rows, long long row_stride_bytes, long long row_bytes, int threads);

enum class Operator { forward, backward, forward_backward };
const char *operator_name(Operator);

struct Floor {
    double seconds = 0;  // 0: none (the probe failed its check)
    std::string bound;   // which limit sets it: "compute", "L1", "L3", "DRAM", "latency"; "none"
};

// The floor for every (shape, distribution, operator), with the machine
// probed once and random-row rates cached per (level, shape geometry).
struct ProbeVerdict;

class FloorModel {
public:
    explicit FloorModel(int threads);
    ~FloorModel();
    const MachineRates &rates() const { return rates_; }
    // The probe's rates against the core's documented peaks (peaks.h).
    // When they fail the check, floor() returns no floor (seconds 0, bound
    // "none").
    const ProbeVerdict &verdict() const { return *verdict_; }
    // `element_bytes`: the storage size of value, attention_weights, output
    // and their gradients (4 float32, 2 float16 / bfloat16; problem.h's
    // forward_bytes). The arithmetic is float32 in every case, so the compute
    // bound does not depend on it; the loaded and compulsory bytes and the
    // corner rows (C elements) do.
    // `value_fraction`: the share of value's rows the problem's samples
    // read (problem.h's touched_value_fraction; 1 counts all of value).
    Floor floor(const Shape &shape, Distribution distribution, Operator op, double element_bytes = 4.0,
                double value_fraction = 1.0);

private:
    double row_rate(long long rows, long long row_stride_bytes, long long row_bytes);
    MachineRates rates_;
    std::unique_ptr<ProbeVerdict> verdict_;
    std::map<std::tuple<long long, long long, long long>, double> row_rates_;
};

}  // namespace msda_bench
