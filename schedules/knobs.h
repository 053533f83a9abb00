// What a schedule may vary without touching the math, apart from what a
// variant specialises (docs/knobs.md lists every knob with its range).
//
// A Specialization is part of a variant's identity: the compile-time sizes
// it was generated for (they change which calls it can serve). Knobs only
// change how the same computation is laid out in loops, so any knob value in
// range computes the operator for every call the variant serves; a sweep
// (`msda sweep`) varies them, and the build ships the winners per CPU class
// and device (schedules/tuned.cmake).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "Halide.h"

namespace msda::schedules {

// Problem specialisation: the compile-time sizes of a variant.
struct Specialization {
    int channels = 0;  // compile-time C_h, or 0 for any C_h
    // Compile-time N_l and N_p (both or neither; 0: run-time). The CPU family
    // then walks the samples query by query, a (query, head)'s N_l * N_p
    // samples as one vector; otherwise head by head, level by level over
    // runs of queries.
    int levels = 0, points = 0;
};

// The schedule families; family() (schedules.h) maps a target to one.
enum class Family { cpu, gpu };

// Every knob of every family. 0 in a cache budget or a width means "from the
// target" (the family default, see knob_specs()).
struct Knobs {
    // CPU family.
    int vector_width = 0;      // floats a vector: 0 is the target's natural width
    int query_tile = 16;       // queries a tile of the by-level tables; tasks hold whole tiles
    int tasks_per_batch = 16;  // parallel tasks a batch element's queries are split into
    int l1_bytes = 0;          // the L1d budget: the relayout's block of rows (0: the family's core)
    int l2_bytes = 0;          // the L2 budget: the by-level scatter's run of queries (0: the family's core)
    int fill_rows = 256;       // rows a task of grad_value's zero fill and of the half-precision rounding
    int dot_lanes = 0;         // lanes of the corner dots' partial sums (0: the vector width; GKA at most 8)
    int point_sums = 0;        // by-query forward: running sums the points take turns in (0: one per point)
    int specialize_usual = 1;  // forward: a second copy of the loops for align_corners and border off
    int flat_rows = 1;         // forward, per-sample gradients: value's rows addressed by int32 element offsets from the corner table
    int unroll_channels = 1;   // unroll a channel loop of whole vectors (compile-time C_h)
    int points_inner = 0;      // by-level forward: points innermost in a tile (1) or queries (0)
    int table_stages = 0;      // by-query walks: the geometry's stages stored per (query, head) (1) or inlined (0)
    int table_lanes = 0;       // by-query walks: lanes of the corner table's vectors (0: the target's natural width)
    int scatter_levels = 0;    // by-query scatter: each level of a (batch, head) slice a parallel task, levels outermost (1)
    // GPU family.
    int channel_threads = 32;     // threads of a block along channels
    int query_threads = 8;        // queries of a forward (and atomic scatter) block
    int sample_threads = 64;      // threads (one query each) of a per-sample gradients block
    int row_threads = 8;          // rows of a block of the zero fill and the rounding
    int channels_per_thread = 4;  // CUDA: channels a thread of the forward and the scatters computes
    int bound_threads = 128;      // fixed-point sum: threads (one (head, query) each) of a bounds block
    int chunk = 1024;             // fixed-point sum: bounds one block takes the largest of
    int reduction_lanes = 32;     // fixed-point sum: threads that share each level of that maximum

    // The cache budgets with the family's core filled in where 0.
    int l1_budget(const Halide::Target &target) const;
    int l2_budget(const Halide::Target &target) const;
};

// One knob: its name, family, range, whether its values are powers of two
// (0 allowed where it means "from the target"), and what it does.
struct KnobSpec {
    const char *name;
    Family family;
    int Knobs::*field;
    int low, high;
    bool power_of_two;
    bool zero_means_target;
    const char *what;
};
const std::vector<KnobSpec> &knob_specs();
const KnobSpec *find_knob(std::string_view name);

// Sets one knob, checking its name and range; throws std::invalid_argument
// with the knob's name and range.
void set_knob(Knobs &knobs, std::string_view name, int value);

// The knob values of a target, from the `knobs` generator parameter:
// entries separated by '/', each `CLASS@knob:value,knob:value`, where CLASS
// is a Halide target feature (avx2, avx512_skylake, avx512_zen4, arm_fp16,
// opencl, cuda),
// `base` (any target) or `all` (applied last, over every class). The first
// entry (other than `all`) whose CLASS the target has applies; a target
// without one keeps the family defaults. Throws std::invalid_argument for
// an unknown class, knob or a value out of range.
Knobs knobs_for_target(const Halide::Target &target, std::string_view encoded);

// `knob:value,...` of the knobs that differ from the defaults, for an entry
// of the `knobs` parameter and for reports; "" when none does.
std::string encode_knobs(const Knobs &knobs);
// `knob=value ...`, the form schedules/tuned.cmake and the sweep's CSV use.
std::string describe_knobs(const Knobs &knobs);

}  // namespace msda::schedules
