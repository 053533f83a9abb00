#include "msda_pipeline.h"

#include "sampling.h"

namespace msda {

using namespace Halide;
using algebra::kCorners;

Func sample_geometry(const MsdaInputs &in, const MsdaVars &v) {
    Expr height = in.spatial_shapes(0, v.l);
    Expr width = in.spatial_shapes(1, v.l);
    Expr start = in.level_start_index(v.l);
    algebra::BilinearAxis x = algebra::bilinear_axis(in.locations_x(v.p, v.l, v.h, v.q, v.b),
                                                     width, in.align_corners, in.border);
    algebra::BilinearAxis y = algebra::bilinear_axis(in.locations_y(v.p, v.l, v.h, v.q, v.b),
                                                     height, in.align_corners, in.border);
    Expr counts = x.passes && y.passes;
    Func geometry("geometry");
    geometry(v.p, v.l, v.h, v.q, v.b) =
        Tuple(start + y.lower * width + x.lower, width, algebra::corner_mask(x, y), x.fraction,
              y.fraction, select(counts, in.attention_weights(v.p, v.l, v.h, v.q, v.b), 0.0f),
              x.gradient_scale, y.gradient_scale);
    return geometry;
}

Func corner_table(const MsdaInputs &in, const MsdaVars &v, const Func &geometry) {
    Tuple g = geometry(v.p, v.l, v.h, v.q, v.b);
    std::vector<Expr> rows, weights;
    for (int corner = 0; corner < kCorners; corner++) {
        rows.push_back(algebra::corner_row(g[kRow0], g[kWidth], in.rows, corner));
        weights.push_back(algebra::corner_weight(g[kFx], g[kFy], corner));
    }
    std::vector<Expr> table = rows;
    table.insert(table.end(), weights.begin(), weights.end());
    table.push_back(g[kMask]);
    table.push_back(g[kAttention]);
    Func corners("corners");
    corners(v.p, v.l, v.h, v.q, v.b) = Tuple(table);
    return corners;
}

namespace {

// The value a corner contributes: V at the corner's row, or 0 when the corner
// lies outside the level (never 0 * V, so non-finite values elsewhere in the
// value tensor cannot leak into the sample).
Expr corner_value(const MsdaInputs &in, const Expr &row, const Expr &mask, const Expr &c,
                  const Expr &h, const Expr &b, int corner) {
    return select(algebra::corner_is_inside(mask, corner), in.value(c, h, row, b), 0.0f);
}

}  // namespace

ForwardPipeline build_forward(const MsdaInputs &in) {
    ForwardPipeline f;
    const MsdaVars &v = f.vars;
    f.geometry = sample_geometry(in, v);
    f.corners = corner_table(in, v, f.geometry);
    f.sum_over = RDom(0, in.points, 0, in.levels, "sum_over");
    Expr p = f.sum_over.x, l = f.sum_over.y;

    // a * S, with S interpolated first, as the CUDA kernel does.
    Tuple corners = f.corners(p, l, v.h, v.q, v.b);
    Expr sample = 0.0f;
    for (int corner = 0; corner < kCorners; corner++) {
        sample += corners[kCornerWeight + corner] *
                  corner_value(in, corners[kCornerRow + corner], corners[kCornerMask], v.c, v.h,
                               v.b, corner);
    }
    f.accumulated = Func("accumulated");
    f.accumulated(v.c, v.h, v.q, v.b) = 0.0f;
    f.accumulated(v.c, v.h, v.q, v.b) += corners[kCornerAttention] * sample;
    f.output = Func("output");
    f.output(v.c, v.h, v.q, v.b) = f.accumulated(v.c, v.h, v.q, v.b);
    return f;
}

GradValuePipeline build_grad_value(const MsdaInputs &in, const Func &grad_output) {
    GradValuePipeline f;
    const MsdaVars &v = f.vars;
    f.geometry = sample_geometry(in, v);
    f.corners = corner_table(in, v, f.geometry);
    f.scatter = RDom(0, kCorners, 0, in.points, 0, in.levels, 0, in.queries, "scatter");
    Expr corner = f.scatter[0], p = f.scatter[1], l = f.scatter[2], q = f.scatter[3];

    // The corner is a reduction variable, so its row, weight and mask are
    // selected from the four per-corner entries.
    Tuple corners = f.corners(p, l, v.h, q, v.b);
    std::vector<Expr> rows, weights, inside;
    for (int k = 0; k < kCorners; k++) {
        rows.push_back(corners[kCornerRow + k]);
        weights.push_back(corners[kCornerWeight + k]);
        inside.push_back(algebra::corner_is_inside(corners[kCornerMask], k));
    }
    Expr contribution = corners[kCornerAttention] * mux(corner, weights) * grad_output(v.c, v.h, q, v.b);
    f.grad_value = Func("grad_value");
    f.grad_value(v.c, v.h, f.row, v.b) = 0.0f;
    f.grad_value(v.c, v.h, mux(corner, rows), v.b) += select(mux(corner, inside), contribution, 0.0f);
    return f;
}

GradSamplePipeline build_grad_sample(const MsdaInputs &in, const Func &grad_output,
                                     SampleGradients which) {
    GradSamplePipeline f;
    const MsdaVars &v = f.vars;
    f.geometry = sample_geometry(in, v);
    f.channel = RDom(0, in.channels, "channel");

    // <g, V_corner> for the four corners in one pass over the channels; a
    // corner outside the level adds nothing (not g * 0, which a non-finite g
    // would turn into NaN).
    Tuple geometry = f.geometry(v.p, v.l, v.h, v.q, v.b);
    Expr mask = geometry[kMask], fx = geometry[kFx], fy = geometry[kFy];
    Expr attention = geometry[kAttention];
    f.corner_dots = Func("corner_dots");
    f.corner_dots(v.p, v.l, v.h, v.q, v.b) = Tuple(0.0f, 0.0f, 0.0f, 0.0f);
    Expr g = grad_output(f.channel, v.h, v.q, v.b);
    std::vector<Expr> updated;
    for (int corner = 0; corner < kCorners; corner++) {
        Expr row = algebra::corner_row(geometry[kRow0], geometry[kWidth], in.rows, corner);
        Expr product = select(algebra::corner_is_inside(mask, corner),
                              g * in.value(f.channel, v.h, row, v.b), 0.0f);
        updated.push_back(f.corner_dots(v.p, v.l, v.h, v.q, v.b)[corner] + product);
    }
    f.corner_dots(v.p, v.l, v.h, v.q, v.b) = Tuple(updated);

    Tuple dots = f.corner_dots(v.p, v.l, v.h, v.q, v.b);
    Expr dot[kCorners] = {dots[0], dots[1], dots[2], dots[3]};

    std::vector<Expr> results;
    if (which != SampleGradients::sampling_locations) {
        Expr grad_attention = 0.0f;
        for (int corner = 0; corner < kCorners; corner++) {
            grad_attention += algebra::corner_weight(fx, fy, corner) * dot[corner];
        }
        results.push_back(grad_attention);
    }
    if (which != SampleGradients::attention_weights) {
        Expr counts = mask != 0;
        results.push_back(select(
            counts, attention * algebra::d_sample_dx(dot, fy) * geometry[kScaleX], 0.0f));
        results.push_back(select(
            counts, attention * algebra::d_sample_dy(dot, fx) * geometry[kScaleY], 0.0f));
    }
    f.grads = Func("grads");
    f.grads(v.p, v.l, v.h, v.q, v.b) = results.size() == 1 ? Tuple(results[0]) : Tuple(results);
    return f;
}

}  // namespace msda
