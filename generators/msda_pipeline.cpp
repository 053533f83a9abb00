#include "msda_pipeline.h"

#include "sampling.h"

namespace msda {

using namespace Halide;
using algebra::kCorners;

namespace {

// Materialises per-sample intermediates as Funcs a schedule computes where
// the geometry is (see algebra::Stage), collecting them in `stages`.
algebra::Stage staging(const MsdaVars &v, std::vector<Func> *stages) {
    if (!stages) return algebra::no_stage;
    return [&v, stages](const Expr &value, const std::string &name) {
        Func f(name);
        f(v.p, v.l, v.h, v.q, v.b) = value;
        stages->push_back(f);
        return f(v.p, v.l, v.h, v.q, v.b);
    };
}

}  // namespace

Func sample_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Func> *stages) {
    Expr height = in.spatial_shapes(0, v.l);
    Expr width = in.spatial_shapes(1, v.l);
    Expr start = in.level_start_index(v.l);
    const algebra::Stage stage = staging(v, stages);
    algebra::BilinearAxis x = algebra::bilinear_axis(in.locations_x(v.p, v.l, v.h, v.q, v.b), width,
                                                     in.align_corners, in.border, stage, "x");
    algebra::BilinearAxis y = algebra::bilinear_axis(in.locations_y(v.p, v.l, v.h, v.q, v.b), height,
                                                     in.align_corners, in.border, stage, "y");
    Expr counts = x.passes && y.passes;
    Func geometry("geometry");
    geometry(v.p, v.l, v.h, v.q, v.b) =
        Tuple(std::vector<Expr>{start + y.lower_read * width + x.lower_read, x.upper_read - x.lower_read,
               (y.upper_read - y.lower_read) * width, algebra::corner_mask(x, y), x.fraction, y.fraction,
               select(counts, in.attention_weights(v.p, v.l, v.h, v.q, v.b), 0.0f), x.gradient_scale,
               y.gradient_scale, x.lower_read_weight, x.upper_read_weight, y.lower_read_weight,
               y.upper_read_weight});
    return geometry;
}

Func nearest_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Func> *stages) {
    Expr height = in.spatial_shapes(0, v.l);
    Expr width = in.spatial_shapes(1, v.l);
    Expr start = in.level_start_index(v.l);
    const algebra::Stage stage = staging(v, stages);
    algebra::NearestAxis x =
        algebra::nearest_axis(in.locations_x(v.p, v.l, v.h, v.q, v.b), width, in.nearest, stage, "x");
    algebra::NearestAxis y =
        algebra::nearest_axis(in.locations_y(v.p, v.l, v.h, v.q, v.b), height, in.nearest, stage, "y");
    Expr counts = x.counts && y.counts;
    Func geometry("geometry");
    geometry(v.p, v.l, v.h, v.q, v.b) =
        Tuple(start + y.index * width + x.index, select(counts, 1, 0),
              select(counts, in.attention_weights(v.p, v.l, v.h, v.q, v.b), 0.0f));
    return geometry;
}

namespace {

// The geometry of the operator's samples.
Func operator_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Func> *stages) {
    return in.op == Operator::gka ? nearest_geometry(in, v, stages) : sample_geometry(in, v, stages);
}

}  // namespace

Expr geometry_read_row(const Tuple &geometry, const MsdaInputs &in, int corner) {
    return algebra::read_row(geometry[kRowBase], geometry[kStepX], geometry[kStepY], in.rows, corner);
}

CornerLayout CornerLayout::of(CornerTable table, Operator op) {
    CornerLayout layout;
    if (op == Operator::gka) {
        layout.corners = 1;
        switch (table) {
        case CornerTable::forward:
        case CornerTable::scatter:
            layout.weight = 1, layout.mask = 2, layout.fields = 3;
            break;
        case CornerTable::sample:
            layout.mask = 1, layout.attention = 2, layout.fields = 3;
            break;
        }
        return layout;
    }
    switch (table) {
    case CornerTable::forward:
    case CornerTable::scatter:  // the same fields; corner_table guards the forward's weights
        layout.weight = 4, layout.mask = 8, layout.fields = 9;
        break;
    case CornerTable::sample:
        layout.mask = 4, layout.attention = 5, layout.fx = 6, layout.fy = 7, layout.scale_x = 8, layout.scale_y = 9;
        layout.fields = 10;
        break;
    }
    return layout;
}

namespace {

// The run-time sizes and conditions a schedule may use (see MsdaVars).
void bind_vars(MsdaVars &vars, const MsdaInputs &in) {
    vars.queries = in.queries;
    if (in.op == Operator::msda) vars.usual_sampling = !in.align_corners && !in.border;
}

// GKA's table: one read, weighted by the attention weight.
std::vector<Expr> nearest_fields(const MsdaInputs &in, const Tuple &g, const CornerLayout &layout) {
    std::vector<Expr> fields(layout.fields);
    fields[0] = reinterpret<float>(clamp(g[kNearestRow], 0, in.rows - 1));
    if (layout.weight >= 0) fields[layout.weight] = g[kNearestAttention];
    fields[layout.mask] = reinterpret<float>(g[kNearestMask]);
    if (layout.attention >= 0) fields[layout.attention] = g[kNearestAttention];
    return fields;
}

}  // namespace

Func corner_table(const MsdaInputs &in, const MsdaVars &v, const Func &geometry, const Var &field,
                  CornerTable table) {
    const CornerLayout layout = CornerLayout::of(table, in.op);
    Tuple g = geometry(v.p, v.l, v.h, v.q, v.b);
    Func corners("corners");
    if (in.op == Operator::gka) {
        corners(field, v.p, v.l, v.h, v.q, v.b) = mux(field, nearest_fields(in, g, layout));
        return corners;
    }
    std::vector<Expr> fields(layout.fields);
    for (int corner = 0; corner < kCorners; corner++) {
        fields[corner] = reinterpret<float>(geometry_read_row(g, in, corner));
        if (layout.weight < 0) continue;
        Expr w = algebra::read_weight(g[kWeightX0], g[kWeightX1], g[kWeightY0], g[kWeightY1], corner);
        if (table == CornerTable::forward) {
            // A zero weight stays exactly zero (never a * 0, NaN for a = Inf).
            w = strict_float(select(w == 0.0f, 0.0f, g[kAttention] * w));
        } else {
            // The scatter's a * w, as its contributions (a * w) * g use it.
            w = g[kAttention] * w;
        }
        fields[layout.weight + corner] = w;
    }
    fields[layout.mask] = reinterpret<float>(g[kMask]);
    const std::pair<int, int> copied[] = {{layout.attention, kAttention}, {layout.fx, kFx}, {layout.fy, kFy},
                                          {layout.scale_x, kScaleX}, {layout.scale_y, kScaleY}};
    for (const auto &[at, from] : copied) {
        if (at >= 0) fields[at] = g[from];
    }
    corners(field, v.p, v.l, v.h, v.q, v.b) = mux(field, fields);
    return corners;
}

Expr CornerEntry::field(const Expr &index) const {
    std::vector<Expr> args = {index};
    args.insert(args.end(), sample.begin(), sample.end());
    return table(args);
}

// Rows travel as float bits: the compiler cannot bound them from the table,
// so it does not clamp every load again; the promise carries the clamp the
// table applied.
Expr CornerEntry::row(const Expr &corner, const MsdaInputs &in) const {
    return unsafe_promise_clamped(reinterpret<int32_t>(field(corner)), 0, in.rows - 1);
}
Expr CornerEntry::weight(const Expr &corner) const { return field(layout.weight + corner); }
Expr CornerEntry::mask() const { return reinterpret<int32_t>(field(layout.mask)); }
Expr CornerEntry::attention() const { return field(layout.attention); }

namespace {

// grad_output as the backward pipelines read it: a Func of its own, so a
// schedule can stage a run of rows before the samples that use them.
Func grad_rows(const Func &grad_output, const MsdaVars &v) {
    Func rows("grad_rows");
    rows(v.c, v.h, v.q, v.b) = grad_output(v.c, v.h, v.q, v.b);
    return rows;
}

}  // namespace

ForwardPipeline build_forward(const MsdaInputs &in) {
    ForwardPipeline f;
    bind_vars(f.vars, in);
    const MsdaVars &v = f.vars;
    f.geometry = operator_geometry(in, v, &f.geometry_stages);
    f.layout = CornerLayout::of(CornerTable::forward, in.op);
    f.corners = corner_table(in, v, f.geometry, f.field, CornerTable::forward);
    f.sum_over = RDom(0, in.points, 0, in.levels, "sum_over");
    Expr p = f.sum_over.x, l = f.sum_over.y;

    // a * S = sum over corners of (a * w) * V, with a * w in the table. Every
    // read of a counting sample is inside its level (the reads and weights of
    // corners outside it are redirected and split, see sample_geometry), so
    // only a sample that does not count is left out, as a whole (the sum's
    // domain excludes it, a branch rather than a mask per sample): its reads
    // are meaningless, and must not become 0 * NaN. Folding a into the weights
    // equals a * S for every finite a (up to rounding) and for a = +-Inf
    // whenever S has one sign; an infinite attention weight on a sample whose
    // corners have values of both signs gives NaN where a * S would be Inf.
    const CornerEntry corners{f.corners, f.layout, {p, l, v.h, v.q, v.b}};
    Expr sample = corners.weight(0) * in.value(v.c, v.h, corners.row(0, in), v.b);
    for (int corner = 1; corner < f.layout.corners; corner++) {
        sample += corners.weight(corner) * in.value(v.c, v.h, corners.row(corner, in), v.b);
    }
    f.accumulated = Func("accumulated");
    f.accumulated(v.c, v.h, v.q, v.b) = 0.0f;
    f.sum_over.where(algebra::sample_counts(corners.mask()));
    f.accumulated(v.c, v.h, v.q, v.b) += sample;
    f.output = Func("output");
    f.output(v.c, v.h, v.q, v.b) = cast(in.storage, f.accumulated(v.c, v.h, v.q, v.b));
    return f;
}

GradValuePipeline build_grad_value(const MsdaInputs &in, const Func &grad_output) {
    GradValuePipeline f;
    bind_vars(f.vars, in);
    const MsdaVars &v = f.vars;
    f.geometry = operator_geometry(in, v, &f.geometry_stages);
    f.layout = CornerLayout::of(CornerTable::scatter, in.op);
    f.corners = corner_table(in, v, f.geometry, f.field, CornerTable::scatter);
    f.scatter = RDom(0, f.layout.corners, 0, in.points, 0, in.levels, 0, in.queries, "scatter");
    Expr corner = f.scatter[0], p = f.scatter[1], l = f.scatter[2], q = f.scatter[3];

    // The corner is a reduction variable: it indexes the table's fields. A
    // corner outside the level is read at an inside one with half of its
    // weight (sample_geometry), so every counting sample adds exactly a * w
    // * g to the rows of its inside corners; a sample that does not count
    // adds nothing (not 0 * g, which a non-finite g would turn into NaN).
    const CornerEntry corners{f.corners, f.layout, {p, l, v.h, q, v.b}};
    f.grad_rows = grad_rows(grad_output, v);
    Expr contribution = corners.weight(corner) * f.grad_rows(v.c, v.h, q, v.b);
    f.grad_value = Func("grad_value");
    f.grad_value(v.c, v.h, f.row, v.b) = 0.0f;
    f.grad_value(v.c, v.h, corners.row(corner, in), v.b) +=
        select(algebra::sample_counts(corners.mask()), contribution, 0.0f);
    if (in.storage != Float(32)) {
        f.stored = Func("grad_value_stored");
        f.stored(v.c, v.h, f.row, v.b) = cast(in.storage, f.grad_value(v.c, v.h, f.row, v.b));
    }
    return f;
}

GradSamplePipeline build_grad_sample(const MsdaInputs &in, const Func &grad_output,
                                     SampleGradients which) {
    GradSamplePipeline f;
    bind_vars(f.vars, in);
    const MsdaVars &v = f.vars;
    f.geometry = operator_geometry(in, v, &f.geometry_stages);
    f.layout = CornerLayout::of(CornerTable::sample, in.op);
    f.channel = RDom(0, in.channels, "channel");

    // <g, V> at the corners' reads (four for MSDA, one for GKA) in one pass
    // over the channels, with no mask in the channel loop: every read is in
    // bounds. An MSDA corner outside
    // the level is read at an inside one (sample_geometry), so its dot is
    // then replaced by the 0 it stands for (not g * 0, which a non-finite g
    // would turn into NaN); a sample that does not count has all four
    // replaced.
    f.corners = corner_table(in, v, f.geometry, f.field, CornerTable::sample);
    const CornerEntry corners{f.corners, f.layout, {v.p, v.l, v.h, v.q, v.b}};
    Expr mask = corners.mask(), attention = corners.attention();
    f.corner_dots = Func("corner_dots");
    const Var &corner = f.corner;
    f.corner_dots(corner, v.p, v.l, v.h, v.q, v.b) = 0.0f;
    f.grad_rows = grad_rows(grad_output, v);
    Expr g = f.grad_rows(f.channel, v.h, v.q, v.b);
    f.corner_dots(corner, v.p, v.l, v.h, v.q, v.b) += g * in.value(f.channel, v.h, corners.row(corner, in), v.b);
    auto dot_of = [&](int k) { return f.corner_dots(k, v.p, v.l, v.h, v.q, v.b); };

    f.grads = Func("grads");
    if (in.op == Operator::gka) {
        // GKA: grad_attention_weights = <g, V> at the sample's row, 0 for a
        // sample that does not count; locations get no gradient.
        Expr grad_attention = select(algebra::sample_counts(mask), dot_of(0), 0.0f);
        f.grads(v.p, v.l, v.h, v.q, v.b) = Tuple(cast(in.storage, grad_attention));
        return f;
    }
    Expr fx = corners.field(f.layout.fx), fy = corners.field(f.layout.fy);
    Expr dot[kCorners];
    for (int corner = 0; corner < kCorners; corner++) {
        dot[corner] = select(algebra::corner_is_inside(mask, corner), dot_of(corner), 0.0f);
    }

    // Each result is rounded once, to the storage type of the tensor it is
    // the gradient of.
    std::vector<Expr> results;
    if (which != SampleGradients::sampling_locations) {
        Expr grad_attention = 0.0f;
        for (int corner = 0; corner < kCorners; corner++) {
            grad_attention += algebra::corner_weight(fx, fy, corner) * dot[corner];
        }
        results.push_back(cast(in.storage, grad_attention));
    }
    if (which != SampleGradients::attention_weights) {
        Expr counts = algebra::sample_counts(mask);
        results.push_back(cast(in.locations_storage,
                               select(counts, attention * algebra::d_sample_dx(dot, fy) *
                                                  corners.field(f.layout.scale_x), 0.0f)));
        results.push_back(cast(in.locations_storage,
                               select(counts, attention * algebra::d_sample_dy(dot, fx) *
                                                  corners.field(f.layout.scale_y), 0.0f)));
    }
    f.grads(v.p, v.l, v.h, v.q, v.b) = results.size() == 1 ? Tuple(results[0]) : Tuple(results);
    return f;
}

}  // namespace msda
