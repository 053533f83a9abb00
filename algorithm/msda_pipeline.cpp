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

// The compute type's zero.
Expr zero(const MsdaInputs &in) { return cast(in.compute, 0); }

// int32 fields of a corner table travel as the bits of its element type:
// a float32's, or the low half of a float64's.
Expr int_as_field(const MsdaInputs &in, const Expr &x) {
    return in.compute.bits() == 64 ? reinterpret(in.compute, cast<int64_t>(x)) : reinterpret(in.compute, x);
}
Expr field_as_int(const Expr &field) {
    return field.type().bits() == 64 ? cast<int32_t>(reinterpret<int64_t>(field)) : reinterpret<int32_t>(field);
}

Expr to_storage(const Type &storage, const Expr &x) {
    if (storage != Float(16)) return cast(storage, x);
    // A float32 NaN becomes a quiet float16 NaN of the same sign and top
    // payload bits (what F16C's vcvtps2ph gives): Halide's float16 rounding
    // on targets without F16C (x86-64's baseline) turned NaN into Inf.
    Expr bits = reinterpret<uint32_t>(x);
    Expr nan = reinterpret(Float(16), cast<uint16_t>(((bits >> 16) & 0x8000) | 0x7e00 | ((bits >> 13) & 0x3ff)));
    return select(is_nan(x), nan, cast(storage, x));
}

}  // namespace

Type compute_type_for(const Type &storage) { return storage == Float(64) ? Float(64) : Float(32); }

Func sample_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Func> *stages) {
    Expr height = in.spatial_shapes(0, v.l);
    Expr width = in.spatial_shapes(1, v.l);
    Expr start = in.level_start_index(v.l);
    const algebra::Stage stage = staging(v, stages);
    algebra::BilinearAxis x = algebra::bilinear_axis(in.locations_x(v.p, v.l, v.h, v.q, v.b), width,
                                                     in.align_corners, in.border, stage, "x",
                                                     in.floor_by_conversion);
    algebra::BilinearAxis y = algebra::bilinear_axis(in.locations_y(v.p, v.l, v.h, v.q, v.b), height,
                                                     in.align_corners, in.border, stage, "y",
                                                     in.floor_by_conversion);
    Expr counts = x.passes && y.passes;
    Func geometry("geometry");
    geometry(v.p, v.l, v.h, v.q, v.b) =
        Tuple(std::vector<Expr>{start + y.lower_read * width + x.lower_read, x.upper_read - x.lower_read,
               (y.upper_read - y.lower_read) * width, algebra::corner_mask(x, y), x.fraction, y.fraction,
               select(counts, in.attention_weights(v.p, v.l, v.h, v.q, v.b), zero(in)), x.gradient_scale,
               y.gradient_scale, x.lower_read_weight, x.upper_read_weight, y.lower_read_weight,
               y.upper_read_weight, select(counts, 1, 0)});
    return geometry;
}

Func nearest_geometry(const MsdaInputs &in, const MsdaVars &v, std::vector<Func> *stages) {
    Expr height = in.spatial_shapes(0, v.l);
    Expr width = in.spatial_shapes(1, v.l);
    Expr start = in.level_start_index(v.l);
    const algebra::Stage stage = staging(v, stages);
    algebra::NearestAxis x =
        algebra::nearest_axis(in.locations_x(v.p, v.l, v.h, v.q, v.b), width, in.nearest, stage, "x",
                              in.floor_by_conversion);
    algebra::NearestAxis y =
        algebra::nearest_axis(in.locations_y(v.p, v.l, v.h, v.q, v.b), height, in.nearest, stage, "y",
                              in.floor_by_conversion);
    Expr counts = x.counts && y.counts;
    Func geometry("geometry");
    geometry(v.p, v.l, v.h, v.q, v.b) =
        Tuple(start + y.index * width + x.index, select(counts, 1, 0),
              select(counts, in.attention_weights(v.p, v.l, v.h, v.q, v.b), zero(in)));
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
    vars.flat_rows = in.flat_rows;
}

// A corner's row as a table holds it: the forward's and the per-sample
// gradients', where flat_rows holds, times value's row stride (read_corner
// reads it as an element offset).
Expr table_row(const MsdaInputs &in, CornerTable table, const Expr &row) {
    if (table == CornerTable::scatter || !in.flat_rows.defined()) return row;
    return select(in.flat_rows, row * in.row_stride, row);
}

// GKA's table: one read, weighted by the attention weight.
std::vector<Expr> nearest_fields(const MsdaInputs &in, const Tuple &g, CornerTable table, const CornerLayout &layout) {
    std::vector<Expr> fields(layout.fields);
    fields[0] = int_as_field(in, table_row(in, table, clamp(g[kNearestRow], 0, in.rows - 1)));
    if (layout.weight >= 0) fields[layout.weight] = g[kNearestAttention];
    fields[layout.mask] = int_as_field(in, g[kNearestMask]);
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
        corners(field, v.p, v.l, v.h, v.q, v.b) = mux(field, nearest_fields(in, g, table, layout));
        return corners;
    }
    std::vector<Expr> fields(layout.fields);
    for (int corner = 0; corner < kCorners; corner++) {
        fields[corner] = int_as_field(in, table_row(in, table, geometry_read_row(g, in, corner)));
        if (layout.weight < 0) continue;
        Expr w = algebra::read_weight(g[kWeightX0], g[kWeightX1], g[kWeightY0], g[kWeightY1], corner);
        if (table == CornerTable::forward) {
            // A zero weight stays exactly zero (never a * 0, NaN for a = Inf).
            w = strict_float(select(w == 0.0f, zero(in), g[kAttention] * w));
        } else {
            // The scatter's a * w, as its contributions (a * w) * g use it;
            // exactly 0 for a sample that does not count (its w may be NaN).
            w = select(algebra::sample_counts(g[kCounts]), g[kAttention] * w, zero(in));
        }
        fields[layout.weight + corner] = w;
    }
    // The forward and the scatter read only whether a sample counts.
    fields[layout.mask] = int_as_field(in, table == CornerTable::sample ? g[kMask] : g[kCounts]);
    const std::pair<int, int> copied[] = {{layout.attention, kAttention}, {layout.fx, kFx}, {layout.fy, kFy},
                                          {layout.scale_x, kScaleX}, {layout.scale_y, kScaleY}};
    for (const auto &[at, from] : copied) {
        if (at >= 0) fields[at] = g[from];
    }
    corners(field, v.p, v.l, v.h, v.q, v.b) = mux(field, fields);
    return corners;
}

// value at channel c of head h of a corner's row. Where flat_rows holds,
// the table has the row times the row stride, and the read adds it to the
// channel: value(c + row * stride, h, 0, b) is the element value(c, h, row,
// b) (c's stride is 1), one load with no multiply. The promise is what
// bounds inference sees of that index (channels [0, C_h - 1]); the element
// read is in value's buffer, as the table's rows are clamped into
// [0, L - 1] and flat_rows keeps row * stride + c in an int32.
Expr read_corner(const MsdaInputs &in, const CornerEntry &corners, const Expr &corner, const Expr &c, const Expr &h,
                 const Expr &b) {
    Expr by_row = in.value(c, h, corners.row(corner, in), b);
    if (!in.flat_rows.defined()) return by_row;
    Expr offset = field_as_int(corners.field(corner));
    Expr by_offset = in.value(unsafe_promise_clamped(c + offset, 0, in.channels - 1), h, 0, b);
    return select(in.flat_rows, by_offset, by_row);
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
    return unsafe_promise_clamped(field_as_int(field(corner)), 0, in.rows - 1);
}
Expr CornerEntry::weight(const Expr &corner) const { return field(layout.weight + corner); }
Expr CornerEntry::mask() const { return field_as_int(field(layout.mask)); }
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
    Expr sample = corners.weight(0) * read_corner(in, corners, 0, v.c, v.h, v.b);
    for (int corner = 1; corner < f.layout.corners; corner++) {
        sample += corners.weight(corner) * read_corner(in, corners, corner, v.c, v.h, v.b);
    }
    f.accumulated = Func("accumulated");
    f.accumulated(v.c, v.h, v.q, v.b) = zero(in);
    f.sum_over.where(algebra::sample_counts(corners.mask()));
    f.accumulated(v.c, v.h, v.q, v.b) += sample;
    f.output = Func("output");
    f.output(v.c, v.h, v.q, v.b) = to_storage(in.storage, f.accumulated(v.c, v.h, v.q, v.b));
    return f;
}

namespace {

// One contribution (a * w) * g of a scatter over (corner, p, l, q): the row
// it goes to, its factors, and whether its sample counts.
struct Contribution {
    Expr row, weight, g, counts;
    Expr value() const { return weight * g; }
};

// The corner is a reduction variable: it indexes the table's fields. A
// corner outside the level is read at an inside one with half of its
// weight (sample_geometry), so every counting sample adds exactly a * w * g
// to the rows of its inside corners; a sample that does not count adds
// nothing (not 0 * g, which a non-finite g would turn into NaN).
// promise_bounds: the query is promised to lie in [0, N_q - 1] and the
// channel in [0, C_h - 1], which they do. Halide bounds the reads of a
// domain with a predicate (the sums that skip samples rather than add 0) by
// its schedule's splits, rounded up, whatever their GuardWithIf guards:
// without the promises the pipeline would ask for more queries, and (where
// the predicate reads grad_output, as the fixed-point sums' does) more
// channels of a head, than its inputs hold, and fail its bounds check. The
// guards keep every read inside them at run time.
Contribution contribution_of(const GradValuePipeline &f, const MsdaInputs &in, const RDom &scatter,
                             bool promise_bounds = false) {
    const MsdaVars &v = f.vars;
    Expr corner = scatter[0], p = scatter[1], l = scatter[2], q = scatter[3];
    const CornerEntry corners{f.corners, f.layout, {p, l, v.h, q, v.b}};
    Expr g_query = promise_bounds ? unsafe_promise_clamped(q, 0, in.queries - 1) : q;
    Expr g_channel = promise_bounds ? unsafe_promise_clamped(v.c, 0, in.channels - 1) : Expr(v.c);
    return {corners.row(corner, in), corners.weight(corner), f.grad_rows(g_channel, v.h, g_query, v.b),
            algebra::sample_counts(corners.mask())};
}

RDom scatter_domain(const GradValuePipeline &f, const MsdaInputs &in, const std::string &name) {
    return RDom(0, f.layout.corners, 0, in.points, 0, in.levels, 0, in.queries, name);
}

// 2^e as a float32, for e in [-126, 127].
Expr power_of_two(const Expr &e) { return reinterpret<float>((e + 127) << 23); }

// GradValueSum::fixed_point (see msda_pipeline.h).
//
// The scale: every finite contribution of batch element b is at most M =
// largest(b), and an element of grad_value gets at most K = corners * N_q *
// N_l * N_p of them. With K < 2^kb and M < 2^mb, e = 61 - kb - mb gives
// |sum| <= K * (M * 2^e + 1/2) < 2^61 + 2^48: no int64 sum overflows, and
// each contribution is rounded to a multiple of 2^-e, at most 2^-60 K M
// away. K is capped at 2^48 (no tensor of a call has more elements), so e
// lies in [61 - 49 - 128, 61 - 1 + 126] = [-116, 186]; 2^e is applied as
// two float32 factors 2^e1 * 2^e2, each in range, and the products are
// exact (powers of two) until the rounding to an integer.
void build_fixed_point_sum(GradValuePipeline &f, const MsdaInputs &in) {
    const MsdaVars &v = f.vars;
    FixedPointSum &s = f.fixed;
    const Expr largest_float = Float(32).max();

    s.samples = RDom(0, in.points, 0, in.levels, "bound_samples");
    Tuple geometry = f.geometry(s.samples.x, s.samples.y, v.h, v.q, v.b);
    Expr attention = geometry[in.op == Operator::gka ? int{kNearestAttention} : int{kAttention}];  // 0 unless it counts
    s.attention_bound = Func("attention_bound");
    s.attention_bound(v.h, v.q, v.b) = 0.0f;
    s.attention_bound(v.h, v.q, v.b) =
        max(s.attention_bound(v.h, v.q, v.b), select(is_finite(attention), abs(attention), 0.0f));
    s.channels = RDom(0, in.channels, "bound_channels");
    Expr g = f.grad_rows(s.channels, v.h, v.q, v.b);
    s.grad_bound = Func("grad_bound");
    s.grad_bound(v.h, v.q, v.b) = 0.0f;
    s.grad_bound(v.h, v.q, v.b) = max(s.grad_bound(v.h, v.q, v.b), select(is_finite(g), abs(g), 0.0f));
    s.bound = Func("bound");
    s.bound(v.h, v.q, v.b) = min(s.attention_bound(v.h, v.q, v.b) * s.grad_bound(v.h, v.q, v.b), largest_float);

    s.over = RDom(0, in.heads, 0, in.queries, "over");
    s.largest = Func("largest");
    s.largest(v.b) = 0.0f;
    s.largest(v.b) = max(s.largest(v.b), s.bound(s.over.x, s.over.y, v.b));

    Expr count = cast<int64_t>(f.layout.corners) * cast<int64_t>(in.queries) * cast<int64_t>(in.levels) *
                 cast<int64_t>(in.points);
    Expr count_bits = 64 - cast<int32_t>(count_leading_zeros(min(count, Expr(int64_t{1} << 48))));
    Expr largest_bits = (reinterpret<int32_t>(s.largest(v.b)) >> 23) - 126;  // largest(b) < 2^largest_bits
    s.exponent = Func("exponent");
    s.exponent(v.b) = 61 - count_bits - largest_bits;
    Expr e = s.exponent(v.b), e1 = e / 2, e2 = e - e1;

    s.finite_scatter = scatter_domain(f, in, "finite_scatter");
    const Contribution finite = contribution_of(f, in, s.finite_scatter, true);
    s.finite_scatter.where(finite.counts && is_finite(finite.value()));
    s.sums = Func("sums");
    s.sums(v.c, v.h, f.row, v.b) = cast<int64_t>(0);
    s.sums(v.c, v.h, finite.row, v.b) +=
        cast<int64_t>(round(strict_float(finite.value() * power_of_two(e1) * power_of_two(e2))));

    s.nonfinite_scatter = scatter_domain(f, in, "nonfinite_scatter");
    const Contribution nonfinite = contribution_of(f, in, s.nonfinite_scatter, true);
    s.nonfinite_scatter.where(nonfinite.counts && !is_finite(nonfinite.value()));
    s.nonfinite = Func("nonfinite");
    s.nonfinite(v.c, v.h, f.row, v.b) = 0.0f;
    s.nonfinite(v.c, v.h, nonfinite.row, v.b) += nonfinite.value();

    Expr others = s.nonfinite(v.c, v.h, f.row, v.b);
    Expr scaled_back =
        strict_float(cast<float>(s.sums(v.c, v.h, f.row, v.b)) * power_of_two(-e1) * power_of_two(-e2));
    f.grad_value = Func("grad_value");
    f.grad_value(v.c, v.h, f.row, v.b) =
        select(others == 0.0f, scaled_back, is_nan(others), reinterpret<float>(Expr(0x7fc00000)), others);
}

}  // namespace

GradValuePipeline build_grad_value(const MsdaInputs &in, const Func &grad_output, GradValueSum sum) {
    GradValuePipeline f;
    bind_vars(f.vars, in);
    const MsdaVars &v = f.vars;
    f.geometry = operator_geometry(in, v, &f.geometry_stages);
    f.layout = CornerLayout::of(CornerTable::scatter, in.op);
    f.corners = corner_table(in, v, f.geometry, f.field, CornerTable::scatter);
    f.grad_rows = grad_rows(grad_output, v);
    f.sum = sum;
    if (sum != GradValueSum::float32 && in.compute != Float(32)) {
        throw std::invalid_argument("msda: the atomic and fixed-point grad_value sums are for float32 arithmetic");
    }
    if (sum == GradValueSum::fixed_point) {
        build_fixed_point_sum(f, in);
    } else {
        f.scatter = scatter_domain(f, in, "scatter");
        const Contribution contribution =
            contribution_of(f, in, f.scatter, sum == GradValueSum::float32_atomic);
        f.grad_value = Func("grad_value");
        if (sum == GradValueSum::float32_atomic) {
            f.scatter.where(contribution.counts);
            f.atomic_sums = Func("atomic_sums");
            f.atomic_sums(v.c, v.h, f.row, v.b) = zero(in);
            f.atomic_sums(v.c, v.h, contribution.row, v.b) += contribution.value();
            f.grad_value(v.c, v.h, f.row, v.b) = f.atomic_sums(v.c, v.h, f.row, v.b);
        } else {
            // A sample that does not count adds +0: its table weight is 0
            // and its g is masked to 0 (never 0 * NaN), the same bits as
            // adding select(counts, w * g, 0) where the product and the add
            // are not contracted into an FMA. The mask is the sample's, not
            // the corner's, so a schedule's unrolled corners share it.
            f.grad_value(v.c, v.h, f.row, v.b) = zero(in);
            f.grad_value(v.c, v.h, contribution.row, v.b) +=
                contribution.weight * select(contribution.counts, contribution.g, zero(in));
        }
    }
    if (in.storage != in.compute) {
        f.stored = Func("grad_value_stored");
        f.stored(v.c, v.h, f.row, v.b) = to_storage(in.storage, f.grad_value(v.c, v.h, f.row, v.b));
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
    f.corner_dots(corner, v.p, v.l, v.h, v.q, v.b) = zero(in);
    f.grad_rows = grad_rows(grad_output, v);
    Expr g = f.grad_rows(f.channel, v.h, v.q, v.b);
    f.corner_dots(corner, v.p, v.l, v.h, v.q, v.b) += g * read_corner(in, corners, corner, f.channel, v.h, v.b);
    auto dot_of = [&](int k) { return f.corner_dots(k, v.p, v.l, v.h, v.q, v.b); };

    f.grads = Func("grads");
    if (in.op == Operator::gka) {
        // GKA: grad_attention_weights = <g, V> at the sample's row, 0 for a
        // sample that does not count; locations get no gradient.
        Expr grad_attention = select(algebra::sample_counts(mask), dot_of(0), zero(in));
        f.grads(v.p, v.l, v.h, v.q, v.b) = Tuple(to_storage(in.storage, grad_attention));
        return f;
    }
    Expr fx = corners.field(f.layout.fx), fy = corners.field(f.layout.fy);
    Expr dot[kCorners];
    for (int corner = 0; corner < kCorners; corner++) {
        dot[corner] = select(algebra::corner_is_inside(mask, corner), dot_of(corner), zero(in));
    }

    // Each result is rounded once, to the storage type of the tensor it is
    // the gradient of. Strict float arithmetic: each result is the same
    // operations in the same order whichever gradients a pipeline computes
    // (no multiply-add contracted one way beside the other gradients and
    // another way alone), so its bits do not depend on what else is asked.
    std::vector<Expr> results;
    if (which != SampleGradients::sampling_locations) {
        Expr grad_attention = zero(in);
        for (int corner = 0; corner < kCorners; corner++) {
            grad_attention += algebra::corner_weight(fx, fy, corner) * dot[corner];
        }
        results.push_back(to_storage(in.storage, strict_float(grad_attention)));
    }
    if (which != SampleGradients::attention_weights) {
        Expr counts = algebra::sample_counts(mask);
        results.push_back(to_storage(in.locations_storage,
                               select(counts, strict_float(attention * algebra::d_sample_dx(dot, fy) *
                                                           corners.field(f.layout.scale_x)),
                                      zero(in))));
        results.push_back(to_storage(in.locations_storage,
                               select(counts, strict_float(attention * algebra::d_sample_dy(dot, fx) *
                                                           corners.field(f.layout.scale_y)),
                                      zero(in))));
    }
    f.grads(v.p, v.l, v.h, v.q, v.b) = results.size() == 1 ? Tuple(results[0]) : Tuple(results);
    return f;
}

}  // namespace msda
