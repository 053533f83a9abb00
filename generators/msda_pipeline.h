// MSDA's forward and backward pipelines, built from the sampling algebra.
// This file holds the algorithm only; each target family schedules the Funcs
// it returns (schedules/).
#pragma once

#include "Halide.h"

namespace msda {

// The tensors every MSDA pipeline reads, as the generators declare them.
// Dimension orders (innermost first):
//   value              (c, h, row, b)      any layout is a stride permutation
//   spatial_shapes     (k, l)              k = 0: H, k = 1: W
//   level_start_index  (l)
//   locations_x, _y    (p, l, h, q, b)     the x and y planes of sampling_locations
//   attention_weights  (p, l, h, q, b)
struct MsdaInputs {
    Halide::Func value, spatial_shapes, level_start_index;
    Halide::Func locations_x, locations_y, attention_weights;
    Halide::Expr rows;    // L, value's row count
    Halide::Expr levels;  // N_l
    Halide::Expr points;  // N_p
    Halide::Expr queries; // N_q
    Halide::Expr channels;
    Halide::Expr align_corners, border;  // bool run-time flags
};

// The loop variables shared by all pipelines.
struct MsdaVars {
    Halide::Var c{"c"}, h{"h"}, q{"q"}, b{"b"}, p{"p"}, l{"l"};
};

// Per-sample geometry, one Tuple per (p, l, h, q, b):
//   [0] row0       int32 row of corner 0 (before clamping)
//   [1] width      int32 W of the sample's level
//   [2] mask       int32 bit mask of the corners inside the level; 0 exactly
//                  when the sample does not count (a counting sample always
//                  has a corner inside)
//   [3] fx, [4] fy fractions of the bilinear weights
//   [5] attention  the attention weight, 0 for a sample that does not count
//                  (so a non-finite weight there cannot turn 0 into NaN)
//   [6] scale_x, [7] scale_y  d(pixel coordinate)/d(location), 0 when clamped
Halide::Func sample_geometry(const MsdaInputs &in, const MsdaVars &v);
enum GeometryField { kRow0, kWidth, kMask, kFx, kFy, kAttention, kScaleX, kScaleY };

// The four corners of every sample, ready for the channel loop, one Tuple per
// (p, l, h, q, b): [0..3] the corners' value rows (clamped into [0, L-1]),
// [4..7] their bilinear weights, [8] the mask of corners inside the level,
// [9] the attention weight (0 for a sample that does not count).
Halide::Func corner_table(const MsdaInputs &in, const MsdaVars &v, const Halide::Func &geometry);
constexpr int kCornerRow = 0, kCornerWeight = 4, kCornerMask = 8, kCornerAttention = 9;

struct ForwardPipeline {
    MsdaVars vars;
    Halide::Func geometry;     // sample_geometry
    Halide::Func corners;      // corner_table
    Halide::Func accumulated;  // (c, h, q, b): the sum over (l, p), an update with RDom sum_over
    Halide::Func output;       // (c, h, q, b)
    Halide::RDom sum_over;     // (p, l)
};
ForwardPipeline build_forward(const MsdaInputs &in);

// grad_value(c, h, row, b) = sum of a * w_corner * g over every sample whose
// corner is that row. The update's reduction domain is (corner, p, l, q), so
// a schedule that parallelises over pure variables only (c, h, b) owns
// disjoint slices and is deterministic.
struct GradValuePipeline {
    MsdaVars vars;
    Halide::Var row{"row"};
    Halide::Func geometry;
    Halide::Func corners;     // corner_table
    Halide::Func grad_value;  // (c, h, row, b): zero, then one scatter update
    Halide::RDom scatter;     // (corner, p, l, q)
};
GradValuePipeline build_grad_value(const MsdaInputs &in, const Halide::Func &grad_output);

// The per-sample gradients: grad_attention_weights = <g, S> and the location
// gradients a * <g, dS/dx> * sx, a * <g, dS/dy> * sy, all from the four
// corner dot products <g, V_corner>.
struct GradSamplePipeline {
    MsdaVars vars;
    Halide::Func geometry;
    Halide::Func corner_dots;  // (p, l, h, q, b) -> Tuple of 4 dots, a reduction over channel
    Halide::RDom channel;      // (c)
    Halide::Func grads;        // (p, l, h, q, b) -> Tuple of the asked-for gradients
};
enum class SampleGradients { both, attention_weights, sampling_locations };
GradSamplePipeline build_grad_sample(const MsdaInputs &in, const Halide::Func &grad_output,
                                     SampleGradients which);

}  // namespace msda
