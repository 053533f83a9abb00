// The sampling algebra of SPEC.md, written once as small functions over
// Halide Exprs: the bilinear sampler of MSDA and the nearest-pixel sampler of
// GKA. Both operators' forward and backward build their pipelines from these
// pieces, so a fix to the math lands in one place.
#pragma once

#include <functional>
#include <string>

#include "Halide.h"

namespace msda::algebra {

using Halide::Expr;

// Where a pipeline may materialise an intermediate value (as a Func computed
// once per sample), so the several results derived from it do not each
// recompute it: Halide evaluates every element of a Tuple separately. The
// default returns the Expr itself.
using Stage = std::function<Expr(const Expr &value, const std::string &name)>;
inline Expr no_stage(const Expr &value, const std::string &) { return value; }

// One axis of a bilinear sample: where its two corners are, how much each
// weighs, whether each lies inside the level, and the chain-rule factor from
// the normalized location to this axis' pixel coordinate.
struct BilinearAxis {
    Expr lower;           // int32 index of the lower corner; bounded for any input
    Expr fraction;        // weight of the upper corner (the lower one has 1 - fraction)
    Expr lower_inside;    // bool: the lower corner lies in [0, size - 1]
    Expr upper_inside;    // bool: the upper corner lies in [0, size - 1]
    Expr passes;          // bool: finite, and inside the zeros-mode gate (-1, size)
    Expr gradient_scale;  // d(pixel coordinate)/d(normalized location); 0 where clamped
    // Where the two corners are read, and with which weights, so that no
    // corner outside the level needs a mask: it is read at the axis' other
    // corner (inside the level), and that corner's weight is split evenly
    // between the two reads. Halving is exact, and (w/2)V + (w/2)V is wV
    // also for V = +-Inf (a zero weight on the duplicate would give NaN);
    // a zero w gives NaN for non-finite V, as w * V does. For a sample that
    // does not pass, the reads are in range but meaningless: callers mask
    // such samples as a whole.
    Expr lower_read, upper_read;                // int32, in [0, size - 1] for a sample that passes
    Expr lower_read_weight, upper_read_weight;  // sum to the weight of the inside corners
};

// floor(x) as an int32, for a finite x in (-2^31, 2^31), from two
// conversions: x truncated towards zero, less one where that lies above x
// (a negative x with a fraction). Exact: the truncation is, and comparing it
// with x converts it back exactly or (beyond 2^24, where every float is a
// whole number) to x itself. x86 without SSE4.1 has no floor instruction,
// and Halide calls libm's floorf for each lane; this is four instructions a
// vector and no call.
inline Expr floor_as_int(const Expr &x) {
    using namespace Halide;
    Expr truncated = cast<int32_t>(x);
    return truncated - select(cast(x.type(), truncated) > x, 1, 0);
}

// normalized: the stored location (any float, NaN and Inf included).
// size: the level's extent along this axis (int32, >= 1).
// align_corners, border: bool Exprs (run-time flags or constants).
// stage: materialises the location, the clamped coordinate and its cell
// (named after `axis`), which everything else is derived from.
// floor_by_conversion: take the floor from float-to-int conversions (see
// floor_as_int) instead of Halide's floor, for targets where that is a call.
inline BilinearAxis bilinear_axis(Expr normalized, const Expr &size, const Expr &align_corners,
                                  const Expr &border, const Stage &stage = no_stage,
                                  const std::string &axis = "x", bool floor_by_conversion = false) {
    using namespace Halide;
    normalized = stage(normalized, "location_" + axis);
    // Computed in the location's type: float32, or float64 for float64
    // storage (the literals below widen to it).
    const Type type = normalized.type();
    const Expr zero = cast(type, 0);
    Expr extent = cast(type, size);
    Expr last = extent - 1.0f;
    // The transform is evaluated with strict float semantics so that it is
    // one multiply and one subtract, never a fused multiply-add: the double
    // reference rounds it the same way, so both agree on which pixel cell a
    // location falls in, also for locations exactly on pixel centres.
    Expr coordinate = strict_float(select(align_corners, normalized * last,
                                          normalized * extent - 0.5f));
    Expr finite = is_finite(normalized);

    // The zeros-mode gate of the CUDA kernel: -1 < x < size. Only a finite
    // coordinate is inside it (the comparisons are false for NaN and the
    // infinities), so zeros mode needs no separate finiteness test.
    Expr in_gate = coordinate > -1.0f && coordinate < extent;
    Expr passes = select(border, finite, in_gate);

    // Border mode clamps first (torch grid_sample's border padding). A
    // location that fails is replaced by 0 before any float-to-int
    // conversion, so NaN or huge values never reach one. A coordinate that
    // passes the zeros-mode gate is in (-1, size) already.
    passes = stage(passes, "passes_" + axis);
    Expr safe = stage(select(passes, select(border, clamp(coordinate, zero, last), coordinate), zero),
                      "coordinate_" + axis);
    Expr lower = stage(floor_by_conversion ? floor_as_int(safe) : cast<int32_t>(floor(safe)), "cell_" + axis);
    // The same float as floor(safe): |safe| < 2^31, and an int32 below 2^24
    // converts exactly (above it, safe is a whole number and lower is safe).
    Expr lower_f = floor_by_conversion ? cast(type, lower) : floor(safe);
    Expr fraction = safe - lower_f;

    // safe < size (zeros) or <= size - 1 (border): lower <= size - 1.
    Expr lower_inside = lower >= 0;
    Expr upper_inside = lower + 1 <= size - 1;

    // grid_sample's rule in border mode: a clamped coordinate (borders
    // included) has zero gradient.
    Expr unclamped = coordinate > 0.0f && coordinate < last;
    Expr scale = select(align_corners, last, extent);
    Expr gradient_scale = select(passes && (!border || unclamped), scale, zero);

    Expr both_inside = lower_inside && upper_inside;
    Expr lower_weight = strict_float(1.0f - fraction);
    Expr half = strict_float(select(lower_inside, lower_weight, fraction) * 0.5f);
    BilinearAxis result{lower, fraction, lower_inside, upper_inside, passes, gradient_scale};
    result.lower_read = select(lower_inside, lower, lower + 1);
    result.upper_read = select(upper_inside, lower + 1, lower);
    result.lower_read_weight = select(both_inside, lower_weight, half);
    result.upper_read_weight = select(both_inside, fraction, half);
    return result;
}

// One axis of a nearest-pixel sample (GKA): the pixel index the sample
// reads, r(coordinate) clamped into [0, size - 1], where r is floor or, when
// `nearest` is true, rounding half to even. An infinite coordinate clamps
// like any other out-of-range one; a NaN one does not count (`counts` is
// false, and the index is 0, in range).
struct NearestAxis {
    Expr index;   // int32, in [0, size - 1]
    Expr counts;  // bool: the coordinate is not NaN
};

// coordinate: absolute pixel coordinate (any float, NaN and Inf included).
// size: the level's extent along this axis (int32, >= 1).
// nearest: bool Expr (run-time flag or constant).
// floor_by_conversion: as bilinear_axis's (rounding then adds one where the
// fraction is above a half, or a half above an odd floor).
inline NearestAxis nearest_axis(Expr coordinate, const Expr &size, const Expr &nearest,
                                const Stage &stage = no_stage, const std::string &axis = "x",
                                bool floor_by_conversion = false) {
    using namespace Halide;
    coordinate = stage(coordinate, "location_" + axis);
    Expr counts = !is_nan(coordinate);
    // Clamped in float first (so Inf and huge values never reach an integer
    // conversion), rounded, then clamped again as an integer: a level wider
    // than 2^24 has no exact float for size - 1.
    const Type type = coordinate.type();  // float32, or float64 for float64 storage
    Expr safe = select(counts, clamp(coordinate, cast(type, 0), cast(type, size - 1)), cast(type, 0));
    if (floor_by_conversion) {
        Expr down = floor_as_int(safe);
        Expr fraction = safe - cast(type, down);  // exact, as bilinear_axis's
        Expr half = cast(type, 0.5f);
        Expr up = fraction > half || (fraction == half && (down & 1) == 1);
        return {clamp(select(nearest && up, down + 1, down), 0, size - 1), counts};
    }
    Expr rounded = select(nearest, round(safe), floor(safe));  // Halide's round: ties to even
    return {clamp(cast<int32_t>(rounded), 0, size - 1), counts};
}

// The four corners of a bilinear sample are numbered corner = 2 * ky + kx,
// (ky, kx) in {0, 1}^2: 0 = (y0, x0), 1 = (y0, x0 + 1), 2 = (y0 + 1, x0),
// 3 = (y0 + 1, x0 + 1).
constexpr int kCorners = 4;

inline Expr corner_bit(int corner) { return Expr(1 << corner); }

// A bit mask of the corners that lie inside the level, for a sample that
// passes; 0 for one that does not.
inline Expr corner_mask(const BilinearAxis &x, const BilinearAxis &y) {
    using namespace Halide;
    Expr mask = Expr(0);
    for (int corner = 0; corner < kCorners; corner++) {
        Expr x_in = (corner & 1) ? x.upper_inside : x.lower_inside;
        Expr y_in = (corner & 2) ? y.upper_inside : y.lower_inside;
        mask = mask | select(x_in && y_in, corner_bit(corner), 0);
    }
    return select(x.passes && y.passes, mask, 0);
}

// Written as an equality with the bit, which the simplifier keeps as is, so
// select(inside, V, 0) keeps V on its true side (a zero-masked load on
// targets that have one).
inline Expr corner_is_inside(const Expr &mask, int corner) {
    return (mask & corner_bit(corner)) == corner_bit(corner);
}

// Whether a sample counts, from its corner mask (written so that
// select(counts, x, 0) keeps x on its true side).
inline Expr sample_counts(const Expr &mask) { return mask > 0; }

// The bilinear weight of one corner: (1-fy)(1-fx), (1-fy)fx, fy(1-fx), fy fx.
// Evaluated with strict float semantics: under fast-math, a target without
// FMA was seen rewriting w*d into d - fx*d, which cancels catastrophically
// when fx is within an ulp of 1 (locations on the zeros gate's edge).
inline Expr corner_weight(const Expr &fx, const Expr &fy, int corner) {
    Expr wx = (corner & 1) ? fx : 1.0f - fx;
    Expr wy = (corner & 2) ? fy : 1.0f - fy;
    return Halide::strict_float(wy * wx);
}

// The value row a corner is read from: the row of corner 0's read plus
// the axes' steps between reads (0 or 1 along x, 0 or W along y), clamped
// into [0, rows - 1] so the read is in bounds whatever the sample.
inline Expr read_row(const Expr &base, const Expr &step_x, const Expr &step_y, const Expr &rows, int corner) {
    Expr row = base + ((corner & 1) ? step_x : Expr(0)) + ((corner & 2) ? step_y : Expr(0));
    return Halide::clamp(row, 0, rows - 1);
}

// The weight a corner is read with (see BilinearAxis::lower_read_weight).
inline Expr read_weight(const Expr &wx0, const Expr &wx1, const Expr &wy0, const Expr &wy1, int corner) {
    return Halide::strict_float(((corner & 2) ? wy1 : wy0) * ((corner & 1) ? wx1 : wx0));
}

// The analytic derivatives of the interpolated sample S with respect to the
// pixel coordinates, from the four corner values (or their dot products with
// grad_output; corners outside the level count as 0):
//   dS/dx = (1-fy)(V01 - V00) + fy(V11 - V10)
//   dS/dy = (1-fx)(V10 - V00) + fx(V11 - V01)
// Strict for the same reason as corner_weight: a lerp must not be rewritten
// into a form that cancels when the fraction is within an ulp of 0 or 1.
inline Expr d_sample_dx(const Expr corner[kCorners], const Expr &fy) {
    return Halide::strict_float((1.0f - fy) * (corner[1] - corner[0]) +
                                fy * (corner[3] - corner[2]));
}
inline Expr d_sample_dy(const Expr corner[kCorners], const Expr &fx) {
    return Halide::strict_float((1.0f - fx) * (corner[2] - corner[0]) +
                                fx * (corner[3] - corner[1]));
}

}  // namespace msda::algebra
