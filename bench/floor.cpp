// The floor model (derived in bench/README.md, "The floor"): the least time
// any gather-style implementation of MSDA (or GKA) could take for a shape, a
// location distribution and an operator on this machine, from the rates the
// probe measures (floor_probe.cpp).
#include "floor.h"

#include "peaks.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace msda_bench {

const char *operator_name(Operator op) {
    switch (op) {
        case Operator::forward: return "forward";
        case Operator::backward: return "backward";
        case Operator::forward_backward: return "forward_backward";
    }
    return "?";
}

namespace {

// Random rows a sample fetches from each of value and grad_value: its four
// bilinear corners (MSDA), or the one row GKA reads.
double corners(const Shape &shape) { return shape.attention == Attention::gka ? 1.0 : 4.0; }

// Random-row fetches counted per grad_value corner in the backward. The
// scatter-add reads the row and writes it back; the write hits the line the
// read just brought in, so the row is fetched once. (Measured here, a random
// read-modify-write of a row costs 1.0x to 3.4x a random read, from the
// largest level to the smallest; counting it as two reads would overstate
// the large levels, so a lower bound counts one.)
constexpr double kGradValueFetches = 1.0;

// What one operator must do, at the least, for a shape: S samples of C
// channels, each reading its four corner rows (GKA: its one row) of C
// elements of `element_bytes` bytes (4 float32, 2 float16 / bfloat16; the
// arithmetic is float32 whatever the storage).
struct Work {
    double fmas = 0;        // float32 FMAs
    double loaded = 0;      // bytes loaded into registers
    double compulsory = 0;  // bytes every tensor takes to read or write once
    double footprint = 0;   // bytes of the distinct tensors the call touches (what must fit in L3)
    double value_rows = 0;  // corner rows of value fetched per sample
    double grad_rows = 0;   // corner rows of grad_value fetched per sample
};

Work forward_work(const Shape &shape, double element_bytes, double value_fraction) {
    const double samples = static_cast<double>(shape.samples());
    const double row = static_cast<double>(shape.channels);  // elements per corner row
    Work work;
    // out += (a * w_k) * V_k for the four corners k: one FMA a channel and
    // corner (the weights premultiplied, once per sample, not per channel).
    // GKA: out += a * V, one row.
    const double rows = corners(shape);
    work.fmas = samples * rows * row;
    work.loaded = samples * rows * row * element_bytes;
    work.compulsory = forward_bytes(shape, element_bytes, value_fraction);
    work.footprint = work.compulsory;
    work.value_rows = rows;
    return work;
}

Work backward_work(const Shape &shape, double element_bytes, double value_fraction) {
    const double samples = static_cast<double>(shape.samples());
    const double row = static_cast<double>(shape.channels);
    Work work;
    // d_k = <g, V_k> for the four corners (grad_attention_weights and both
    // location gradients are scalar combinations of the d_k and the weights),
    // then grad_value[k] += (a * w_k) * g: 4C + 4C FMAs. GKA: d = <g, V>
    // (grad_attention_weights) and grad_value += a * g, C + C FMAs.
    const double rows = corners(shape);
    work.fmas = samples * 2.0 * rows * row;
    // The four value rows (GKA: one), and as many grad_value rows read back
    // for the scatter-add (their stores are not counted).
    work.loaded = samples * 2.0 * rows * row * element_bytes;
    work.compulsory = backward_bytes(shape, element_bytes, value_fraction);
    work.footprint = work.compulsory;
    work.value_rows = rows;
    work.grad_rows = rows * kGradValueFetches;
    return work;
}

Work operator_work(const Shape &shape, Operator op, double element_bytes, double value_fraction) {
    if (op == Operator::forward) return forward_work(shape, element_bytes, value_fraction);
    if (op == Operator::backward) return backward_work(shape, element_bytes, value_fraction);
    const Work f = forward_work(shape, element_bytes, value_fraction);
    const Work b = backward_work(shape, element_bytes, value_fraction);
    // The backward touches every tensor of the forward but the output, so
    // the pair's footprint is the backward's and the output's.
    const double output =
        element_bytes * static_cast<double>(shape.batch * shape.queries * shape.heads * shape.channels);
    Work work;
    work.fmas = f.fmas + b.fmas;
    work.loaded = f.loaded + b.loaded;
    work.compulsory = f.compulsory + b.compulsory;
    work.footprint = b.footprint + output;
    work.value_rows = f.value_rows + b.value_rows;
    work.grad_rows = f.grad_rows + b.grad_rows;
    return work;
}

}  // namespace

FloorModel::FloorModel(int threads)
    : rates_(probe_machine(threads)), verdict_(std::make_unique<ProbeVerdict>(check_probe(rates_))) {}

FloorModel::~FloorModel() = default;

double FloorModel::row_rate(long long rows, long long row_stride_bytes, long long row_bytes) {
    const auto key = std::make_tuple(rows, row_stride_bytes, row_bytes);
    auto found = row_rates_.find(key);
    if (found != row_rates_.end()) return found->second;
    const double rate = random_row_rate(rows, row_stride_bytes, row_bytes, rates_.threads);
    row_rates_.emplace(key, rate);
    return rate;
}

Floor FloorModel::floor(const Shape &shape, Distribution distribution, Operator op, double element_bytes,
                        double value_fraction) {
    if (!verdict_->refusal.empty()) return {0, "none"};
    const Work work = operator_work(shape, op, element_bytes, value_fraction);
    // The compulsory bytes come from the fastest level of the hierarchy
    // that holds every tensor the call touches: a benchmark loop calls the
    // operator again and again on the same tensors, so a working set that
    // fits a level stays there between calls (the threads' L1s or L2s
    // together, the L3, else DRAM). The footprint is priced from what the
    // call reads (value's touched rows) and writes, and each level's rate is
    // never taken below the next one's, whatever the noise of a probe.
    const double threads = rates_.threads;
    struct CacheLevel {
        double bytes, rate;
        const char *name;
    };
    const double dram_rate = rates_.dram_bytes_per_s;
    const double l3_rate = std::max(rates_.l3_bytes_per_s, dram_rate);
    const double l2_rate = std::max(rates_.l2_bytes_per_s, l3_rate);
    const double l1_rate = std::max(rates_.l1_bytes_per_s, l2_rate);
    const CacheLevel cache_levels[] = {{rates_.l1_bytes * threads, l1_rate, "L1"},
                            {rates_.l2_bytes * threads, l2_rate, "L2"},
                            {rates_.l3_bytes, l3_rate, "L3"}};
    double memory_rate = dram_rate;
    const char *memory_level = "DRAM";
    for (const CacheLevel &level : cache_levels) {
        if (level.bytes > 0 && work.footprint <= level.bytes) {
            memory_rate = level.rate;
            memory_level = level.name;
            break;
        }
    }
    // Each bound on its own is a time the operator cannot beat; the floor is
    // the largest, named after the limit that sets it (the first on a tie).
    std::vector<std::pair<double, const char *>> bounds = {
        {work.fmas / rates_.fma_flops_per_s, "compute"},
        {work.loaded / rates_.l1_bytes_per_s, "L1"},
        {work.compulsory / memory_rate, memory_level},
    };
    if (distribution == Distribution::uniform && !shape.levels.empty()) {
        // Uniform locations: every corner is a random row of its level's
        // slice of value for one head, fetched at the rate the probe
        // measures for that geometry (rows of C elements in the storage
        // dtype). The rows are packed (one head's rows side by side, as in
        // the BNLC layout and in the head-major copy msda stages, see
        // Options::relayout): no implementation needs them farther apart,
        // and BLNC's N_h * C apart is slower. Each level gets S / N_l
        // samples.
        const double samples_per_level =
            static_cast<double>(shape.samples()) / static_cast<double>(shape.levels.size());
        const long long row_bytes = static_cast<long long>(static_cast<double>(shape.channels) * element_bytes);
        const long long stride = row_bytes;
        double latency = 0;
        for (const Level &level : shape.levels) {
            const double rate = row_rate(static_cast<long long>(level.height * level.width), stride, row_bytes);
            latency += samples_per_level * (work.value_rows + work.grad_rows) / rate;
        }
        bounds.emplace_back(latency, "latency");
    }
    Floor result;
    for (const auto &[seconds, name] : bounds) {
        if (seconds > result.seconds) result = {seconds, name};
    }
    if (result.bound.empty()) result.bound = bounds.front().second;
    return result;
}

}  // namespace msda_bench
