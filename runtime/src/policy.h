// The run-time policies (docs/policies.md): every threshold the automatic
// relayout and sample order decide with, in one struct the sweep tunes,
// its defaults per CPU (sized against the running core's caches,
// cpu_caches()), and the decisions made with it. The cache boundaries are
// also free functions of the L2 they are measured against, which the tests
// compute their expectations with, on the running CPU's caches and on
// recorded ones (tests/cpu_caches/).
#pragma once

#include <msda/msda.hpp>

#include <cstdint>
#include <string>

#include "registry.h"

namespace msda::detail {

struct CpuCaches;
struct LevelTable;

namespace policy {

// Options::relayout (automatic): value is staged head-major only when it
// holds more bytes than a core's L2; a value that fits is read from there
// whatever its layout.
constexpr bool value_outgrows_l2(std::int64_t value_bytes, std::int64_t l2_bytes) {
    return value_bytes > l2_bytes;
}

// Options::sample_order (automatic), for the forward and the per-sample
// gradients: a by-level walk keeps one level of one head as its working
// set, and where that fits in half a core's L2 it beats by_query even for
// clustered samples (G's 60 x 40 levels, 2 MiB L2). These are the most
// bytes a head's largest level may hold and still walk by level.
constexpr std::int64_t by_level_slice_limit(std::int64_t l2_bytes) { return l2_bytes / 2; }

// Whether one head's largest level (largest_level_pixels = H x W of the
// level with the most pixels, over every level) outgrows a by-level walk:
// by_query may then win, if the queries' samples cluster.
constexpr bool level_outgrows_by_level_walk(std::int64_t largest_level_pixels, std::int64_t channels,
                                            std::int64_t element_bytes, std::int64_t l2_bytes) {
    return largest_level_pixels * channels * element_bytes > by_level_slice_limit(l2_bytes);
}

}  // namespace policy

// Every run-time threshold, with its default. A plan decides with the
// process's (process_policy()); the decisions it makes once are those that
// depend on its sizes and options alone (relayout), the per-call ones those
// that depend on the call's data (the sample order's probe).
struct Policy {
    // A core's L2 in bytes: the relayout stages a value larger than it, and
    // a by-level walk keeps a level up to half of it (policy:: above).
    std::int64_t l2_bytes = 2 << 20;
    // Options::relayout (automatic) stages value only when each head reads
    // every row of value at least this many times on average (N_q * N_l *
    // N_p samples per head against L rows): the copy must pay for itself.
    std::int64_t relayout_samples_per_row = 4;
    // Options::sample_order (automatic)'s probe: up to this many queries,
    // evenly spaced over the call's (batch, query) pairs, of which more
    // than half must have all their level-0 samples (every head and point)
    // within this many pixels of each other along each axis for the
    // samples to count as clustered.
    std::int64_t probe_queries = 32;
    double probe_neighbourhood_pixels = 16.0;

    // The defaults for the CPU whose caches these are.
    static Policy for_caches(const CpuCaches &caches);
};

// The policy with the knobs `overrides` sets: "knob=value,..." of l2_bytes
// (65536 to 2^30), relayout_samples_per_row (1 to 2^20), probe_queries (1 to
// 2^20) and probe_neighbourhood_pixels (0 to 10^6), the environment
// variable MSDA_POLICY's form (docs/knobs.md). Throws msda::Error naming
// MSDA_POLICY and the knob for anything else.
Policy with_overrides(Policy policy, const std::string &overrides);

// The policy of this process's CPU (cpu_caches()) with MSDA_POLICY's
// overrides, made once.
const Policy &process_policy();

// Whether a plan stages value head-major (Options::relayout).
bool stages_value(const ProblemSize &size, const Options &options, TargetFamily family, const Policy &policy);

// Options::sample_order for a call whose by-query variant exists and whose
// tensors it can read. any_level_size: automatic takes by_query for
// clustered samples whatever the size of the levels (grad_value's scatter:
// by query it was 0.89x by level on G local, whose 60 x 40 levels keep the
// forward and the per-sample gradients by level).
bool chooses_by_query(const TensorView &locations, const Options &options, const ProblemSize &size,
                      const LevelTable &levels, const Policy &policy, bool any_level_size);

}  // namespace msda::detail
