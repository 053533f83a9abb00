// The sampling algebra of SPEC.md, written once as small functions over
// Halide Exprs. MSDA's forward and backward (and, later, GKA) build their
// pipelines from these pieces, so a fix to the math lands in one place.
#pragma once

#include "Halide.h"

namespace msda::algebra {

using Halide::Expr;

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
};

// normalized: the stored location (any float, NaN and Inf included).
// size: the level's extent along this axis (int32, >= 1).
// align_corners, border: bool Exprs (run-time flags or constants).
inline BilinearAxis bilinear_axis(const Expr &normalized, const Expr &size,
                                  const Expr &align_corners, const Expr &border) {
    using namespace Halide;
    Expr extent = cast<float>(size);
    Expr last = extent - 1.0f;
    // The transform is evaluated with strict float semantics so that it is
    // one multiply and one subtract, never a fused multiply-add: the double
    // reference rounds it the same way, so both agree on which pixel cell a
    // location falls in, also for locations exactly on pixel centres.
    Expr coordinate = strict_float(select(align_corners, normalized * last,
                                          normalized * extent - 0.5f));
    Expr finite = is_finite(normalized);

    // The zeros-mode gate of the CUDA kernel: -1 < x < size.
    Expr in_gate = coordinate > -1.0f && coordinate < extent;
    Expr passes = finite && (border || in_gate);

    // Border mode clamps first (torch grid_sample's border padding). A
    // location that fails is replaced by 0 before any float-to-int
    // conversion, so NaN or huge values never reach one.
    Expr safe = select(passes, coordinate, 0.0f);
    safe = select(border, clamp(safe, 0.0f, last), clamp(safe, -1.0f, extent));
    Expr lower_f = floor(safe);
    Expr lower = cast<int32_t>(lower_f);
    Expr fraction = safe - lower_f;

    Expr lower_inside = lower >= 0 && lower <= size - 1;
    Expr upper_inside = lower + 1 <= size - 1;

    // grid_sample's rule in border mode: a clamped coordinate (borders
    // included) has zero gradient.
    Expr unclamped = coordinate > 0.0f && coordinate < last;
    Expr scale = select(align_corners, last, extent);
    Expr gradient_scale = select(passes && (!border || unclamped), scale, 0.0f);
    return {lower, fraction, lower_inside, upper_inside, passes, gradient_scale};
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

inline Expr corner_is_inside(const Expr &mask, int corner) {
    return (mask & corner_bit(corner)) != 0;
}

// The bilinear weight of one corner: (1-fy)(1-fx), (1-fy)fx, fy(1-fx), fy fx.
// Evaluated with strict float semantics: under fast-math, a target without
// FMA was seen rewriting w*d into d - fx*d, which cancels catastrophically
// when fx is within an ulp of 1 (locations on the zeros gate's edge).
inline Expr corner_weight(const Expr &fx, const Expr &fy, int corner) {
    Expr wx = (corner & 1) ? fx : 1.0f - fx;
    Expr wy = (corner & 2) ? fy : 1.0f - fy;
    return Halide::strict_float(wy * wx);
}

// The value row of a corner, relative to the row of corner 0; clamped into
// [0, rows - 1] so the read is in bounds whatever the mask says.
inline Expr corner_row(const Expr &row0, const Expr &width, const Expr &rows, int corner) {
    Expr row = row0 + ((corner & 1) ? 1 : 0) + ((corner & 2) ? width : Expr(0));
    return Halide::clamp(row, 0, rows - 1);
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
