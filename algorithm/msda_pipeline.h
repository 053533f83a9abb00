// MSDA's forward and backward pipelines, built from the sampling algebra.
// This file holds the algorithm only; each target family schedules the Funcs
// it returns (schedules/).
#pragma once

#include "Halide.h"

namespace msda {

// The operator a pipeline computes: MSDA's bilinear samples, or GKA's
// nearest-pixel ones (absolute pixel coordinates, one value row a sample).
enum class Operator { msda, gka };

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
    Halide::Expr heads, batch;  // N_h, B
    Halide::Expr channels;
    Halide::Expr align_corners, border;  // bool run-time flags (MSDA)
    Operator op = Operator::msda;
    Halide::Expr nearest;  // bool run-time flag (GKA): round half to even, else floor
    // How results are stored: outputs and the gradients of value and
    // attention_weights in `storage`, the gradient of sampling_locations in
    // `locations_storage`. The Funcs above read `compute` (widened on load).
    Halide::Type storage = Halide::Float(32), locations_storage = Halide::Float(32);
    // The arithmetic's type: float32, or float64 for float64 storage (whose
    // locations are float64 too): compute_type_for.
    Halide::Type compute = Halide::Float(32);
    // Optional (a bool run-time condition, which a schedule must specialize
    // on where it is defined): the forward and the per-sample gradients
    // address value's rows by element offset, row * row_stride, computed once per corner in its
    // table, instead of multiplying each corner's row by the stride in the
    // channel loop. The condition holds where every such offset plus a
    // channel fits in an int32.
    Halide::Expr flat_rows;
    Halide::Expr row_stride;  // value's stride between rows, in elements
    // Floors from float-to-int conversions (algebra::floor_as_int), for
    // targets whose floor is a library call (x86 without SSE4.1): the same
    // values.
    bool floor_by_conversion = false;
};

// The type a pipeline computes in for a storage type: float64 for float64,
// float32 for the rest (half precision is widened to float32).
Halide::Type compute_type_for(const Halide::Type &storage);

// The loop variables shared by all pipelines.
struct MsdaVars {
    Halide::Var c{"c"}, h{"h"}, q{"q"}, b{"b"}, p{"p"}, l{"l"};
    Halide::Expr queries;  // N_q, for schedules that size their tasks by it
    // MSDA's usual sampling (align_corners and border both off), a run-time
    // condition a schedule may specialize on; undefined for GKA.
    Halide::Expr usual_sampling;
    // MsdaInputs::flat_rows, where defined: schedules specialize on it.
    Halide::Expr flat_rows;
};

// Per-sample geometry of MSDA's bilinear samples, one Tuple per (p, l, h, q, b):
//   [0] row_base   int32 value row corner 0 is read from (before clamping)
//   [1] step_x     int32 row step from a corner's read to its x neighbour's (0 or 1)
//   [2] step_y     int32 row step to the y neighbour's read (0 or W)
//   [3] mask       int32 bit mask of the corners inside the level; 0 exactly
//                  when the sample does not count (a counting sample always
//                  has a corner inside)
//   [4] fx, [5] fy fractions of the bilinear weights
//   [6] attention  the attention weight, 0 for a sample that does not count
//                  (so a non-finite weight there cannot turn 0 into NaN)
//   [7] scale_x, [8] scale_y  d(pixel coordinate)/d(location), 0 when clamped
//   [9..12] wx0, wx1, wy0, wy1  the axes' read weights
//   [13] counts    int32 1 when the sample counts, else 0
// Corners are read so that every read of a counting sample is inside its
// level (algebra::BilinearAxis::lower_read): a corner inside the level is
// read at its own row; the dots and weights of corners outside it are
// masked or split, never multiplied by a zero they stand for.
// stages, when given, receives the per-sample Funcs the geometry is derived
// from (see algebra::Stage); a schedule computes them where the geometry is.
Halide::Func sample_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Halide::Func> *stages = nullptr);

// Per-sample geometry of GKA's nearest-pixel samples, one Tuple per
// (p, l, h, q, b): [0] the value row read (clamped into the level), [1] the
// mask (1 when the sample counts, 0 when a coordinate is NaN), [2] the
// attention weight, 0 for a sample that does not count.
Halide::Func nearest_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Halide::Func> *stages = nullptr);
enum NearestField { kNearestRow, kNearestMask, kNearestAttention };
enum GeometryField {
    kRowBase, kStepX, kStepY, kMask, kFx, kFy, kAttention, kScaleX, kScaleY,
    kWeightX0, kWeightX1, kWeightY0, kWeightY1, kCounts
};
// The row corner `corner` of a geometry Tuple is read from.
Halide::Expr geometry_read_row(const Halide::Tuple &geometry, const MsdaInputs &in, int corner);

// The corners of every sample (four for MSDA, one for GKA), ready for the
// channel loop, packed into one float Func over (field, p, l, h, q, b) so a
// schedule can keep a tile of it in one small buffer. Each pipeline's table
// holds only the fields it reads (Halide computes every field of a table).
// MSDA's tables:
//   forward: 0-3 the rows the corners are read from (clamped into [0, L-1],
//            int32 bits; where MsdaInputs::flat_rows holds, those rows
//            times value's row stride), 4-7 their read weights times the attention weight,
//            8 1 when the sample counts, else 0 (int32 bits)
//   scatter: the same with the read weights times the attention weight
//            unguarded (a * w, NaN for a = Inf and w = 0, as a * w * g is)
//   sample:  0-3 the rows (as the forward's), 4 the mask, 5 the attention weight, 6-7 the
//            fractions fx, fy, 8-9 the gradient scales
// GKA's tables have one corner: forward and scatter 0 the row, 1 the
// attention weight (0 for a sample that does not count), 2 the mask; sample
// 0 the row, 1 the mask, 2 the attention weight. The mask is nonzero
// exactly when the sample counts (for GKA: neither coordinate is NaN).
// Read a table through CornerEntry.
enum class CornerTable { forward, scatter, sample };
struct CornerLayout {
    int corners = 4;  // rows are fields [0, corners)
    int weight = -1, mask = -1, attention = -1, fx = -1, fy = -1, scale_x = -1, scale_y = -1;
    int fields = 0;
    static CornerLayout of(CornerTable table, Operator op);
};
Halide::Func corner_table(const MsdaInputs &in, const MsdaVars &v, const Halide::Func &geometry,
                          const Halide::Var &field, CornerTable table);

// One sample's entries of a corner table. The corner may be a constant or
// an Expr (a reduction variable).
struct CornerEntry {
    const Halide::Func &table;
    CornerLayout layout;
    std::vector<Halide::Expr> sample;  // (p, l, h, q, b)
    Halide::Expr row(const Halide::Expr &corner, const MsdaInputs &in) const;  // promised in [0, L-1]
    Halide::Expr weight(const Halide::Expr &corner) const;
    Halide::Expr mask() const;
    Halide::Expr attention() const;
    Halide::Expr field(const Halide::Expr &index) const;
};

// value(c, h, row, b) at a corner's row (by its element offset where
// MsdaInputs::flat_rows holds, see table_row).
Halide::Expr read_corner(const MsdaInputs &in, const CornerEntry &corners, const Halide::Expr &corner,
                         const Halide::Expr &c, const Halide::Expr &h, const Halide::Expr &b);

struct ForwardPipeline {
    MsdaVars vars;
    Halide::Func geometry;     // sample_geometry
    std::vector<Halide::Func> geometry_stages;
    Halide::Func corners;      // corner_table
    Halide::Var field{"field"};  // the corner table's first dimension
    CornerLayout layout;
    Halide::Func accumulated;  // (c, h, q, b): the sum over (l, p), an update with RDom sum_over
    Halide::Func output;       // (c, h, q, b), the sums rounded to the storage type
    Halide::RDom sum_over;     // (p, l)
};
ForwardPipeline build_forward(const MsdaInputs &in);

// How grad_value's contributions are summed.
//   float32: in float32, each element's contributions in the order the
//     schedule walks them (the CPU family's slices, the GPU family's column
//     walk); a sample that does not count adds 0.
//   float32_atomic: in float32, by atomic adds in no fixed order (the GPU
//     family's Options::deterministic = false); a sample that does not count
//     adds nothing (a predicate, not an added 0, so each update compiles to
//     an atomic add).
//   fixed_point: each finite contribution is scaled by 2^e and rounded to an
//     int64, and the int64s are summed. Integer addition is exact, so any
//     order, atomics included, gives the same bits; the sum is then scaled
//     back and rounded once to float32. e is chosen per call from a bound on
//     every finite contribution, so that no element's sum can overflow. The
//     non-finite contributions (+-Inf, NaN) are summed apart in float32,
//     where addition restricted to them is order-independent too (NaN if any
//     is NaN or both infinities occur, else that infinity); an element that
//     gets one is that sum, NaN written as one canonical NaN.
enum class GradValueSum { float32, float32_atomic, fixed_point };

// The stages of a fixed-point sum (GradValueSum::fixed_point).
struct FixedPointSum {
    // (h, q, b): the largest |a| of a query's head's counting samples and
    // the largest |g| of its channels, finite ones only, and their product
    // clamped to the largest float: no finite contribution a * w * g of the
    // query's head is larger (|w| <= 1).
    Halide::Func attention_bound, grad_bound, bound;
    Halide::RDom samples;   // (p, l), for attention_bound
    Halide::RDom channels;  // (c), for grad_bound
    // (b): the largest bound of a batch element, whose grad_value its
    // contributions alone reach: its sums are scaled by 2^exponent(b).
    Halide::Func largest;
    Halide::RDom over;  // (h, q)
    Halide::Func exponent;  // (b) int32, in [-116, 186]
    // (c, h, row, b): the int64 sums of the finite contributions, scaled,
    // and the float32 sums of the non-finite ones (0 where there are none).
    Halide::Func sums, nonfinite;
    Halide::RDom finite_scatter, nonfinite_scatter;  // (corner, p, l, q), as GradValuePipeline::scatter
};

// grad_value(c, h, row, b) = sum of a * w_corner * g over every sample whose
// corner is that row. The update's reduction domain is (corner, p, l, q), so
// a schedule that parallelises over pure variables only (c, h, b) owns
// disjoint slices and is deterministic.
struct GradValuePipeline {
    MsdaVars vars;
    Halide::Var row{"row"};
    Halide::Func geometry;
    std::vector<Halide::Func> geometry_stages;
    Halide::Func corners;     // corner_table
    Halide::Var field{"field"};
    CornerLayout layout;
    Halide::Func grad_rows;   // (c, h, q, b): grad_output, as read (a schedule may stage it)
    // (c, h, row, b) in the compute type. GradValueSum::float32: zero, then one
    // scatter update over `scatter`; float32_atomic: a copy of atomic_sums;
    // fixed_point: pure, from `fixed`.
    Halide::Func grad_value;
    Halide::RDom scatter;     // (corner, p, l, q); the float32 sums only
    // float32_atomic: zero, then the scatter update. Summed apart from
    // grad_value because the store and the load of an update of a
    // pipeline's output buffer reach code generation as two index
    // expressions, which makes an atomic update a compare-and-swap loop
    // instead of an atomic add.
    Halide::Func atomic_sums;
    GradValueSum sum = GradValueSum::float32;
    FixedPointSum fixed;      // fixed_point only
    // grad_value rounded to the storage type, when that is not the compute
    // type (undefined otherwise): the sums are made in float32 and rounded
    // once. float64 storage is summed in float64 (GradValueSum::float32
    // then names the ordered sum; the other two are float32 only).
    Halide::Func stored;
};
GradValuePipeline build_grad_value(const MsdaInputs &in, const Halide::Func &grad_output,
                                   GradValueSum sum = GradValueSum::float32);

// The per-sample gradients: grad_attention_weights = <g, S> and the location
// gradients a * <g, dS/dx> * sx, a * <g, dS/dy> * sy, all from the four
// corner dot products <g, V_corner>.
struct GradSamplePipeline {
    MsdaVars vars;
    Halide::Var field{"field"};
    Halide::Func corners;  // corner_table
    CornerLayout layout;
    Halide::Func geometry;
    std::vector<Halide::Func> geometry_stages;
    Halide::Func grad_rows;    // (c, h, q, b): grad_output, as read (a schedule may stage it)
    Halide::Var corner{"corner"};
    Halide::Func corner_dots;  // (corner, p, l, h, q, b): <g, V> at the corner's read, a reduction over channel
    Halide::RDom channel;      // (c)
    Halide::Func grads;        // (p, l, h, q, b) -> Tuple of the asked-for gradients, stored types
};
enum class SampleGradients { both, attention_weights, sampling_locations };
GradSamplePipeline build_grad_sample(const MsdaInputs &in, const Halide::Func &grad_output,
                                     SampleGradients which);

}  // namespace msda
