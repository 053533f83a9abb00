// x86 schedules. Work is split into parallel tasks over query tiles (forward,
// per-sample gradients) or over (batch, head) slices of grad_value (the
// scatter), and vectorised over channels, with a guarded tail when C_h is not
// a multiple of the vector width. These are the straightforward shapes;
// tuning against benchmarks and the machine's floor is still to come. A
// profile of the demo shows all three kernels waiting on corner-row loads
// (and grad_value's read-modify-writes), not on arithmetic.
#include "schedules.h"

namespace msda::schedules::x86 {

using namespace Halide;

namespace {

int vector_width(const Target &target, const Tunables &tunables) {
    return tunables.vector_width > 0 ? tunables.vector_width : target.natural_vector_size<float>();
}

// Vectorises a stage over channels: whole vectors when C_h is a compile-time
// multiple of the width, otherwise with a guarded (masked) tail, so any C_h
// >= 1 runs.
void vectorize_channels(Stage stage, const Var &c, int width, int channels) {
    if (channels > 0 && channels % width == 0) {
        stage.vectorize(c, width);
    } else if (channels > 0 && channels < width) {
        stage.vectorize(c, channels);
    } else {
        stage.vectorize(c, width, TailStrategy::GuardWithIf);
    }
}

// A per-sample table (geometry or corners) for a whole tile of queries,
// computed once per tile, vectorised across queries and stored
// queries-innermost so those vectors are dense.
void per_sample_table_per_tile(Func table, const MsdaVars &v, const LoopLevel &tile, int width) {
    table.compute_at(tile)
        .reorder_storage(v.q, v.p, v.l, v.h, v.b)
        .reorder(v.q, v.p, v.l, v.h, v.b)
        .vectorize(v.q, width, TailStrategy::GuardWithIf);
}

}  // namespace

void schedule_forward(const Target &target, ForwardPipeline &f, const Tunables &tunables) {
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, tunables);
    Var query_tile("query_tile"), query("query"), task("task");

    if (tunables.channels > 0) f.output.bound(v.c, 0, tunables.channels);
    // One task per tile of queries of one batch element; heads inside, so
    // the geometry of a tile is computed once and stays in cache.
    f.output.split(v.q, query_tile, query, tunables.query_tile, TailStrategy::GuardWithIf)
        .reorder(v.c, v.h, query, query_tile, v.b)
        .fuse(query_tile, v.b, task)
        .parallel(task);
    vectorize_channels(f.output, v.c, width, tunables.channels);

    // The sum over (level, point). With a compile-time C_h it is one head's
    // channels, small enough to live in registers; otherwise all heads of one
    // query, so the buffer is allocated once per query rather than per head.
    if (tunables.channels > 0) {
        f.accumulated.compute_at(f.output, v.h);
    } else {
        f.accumulated.compute_at(f.output, query);
    }
    vectorize_channels(f.accumulated, v.c, width, tunables.channels);
    Stage accumulate = f.accumulated.update();
    accumulate.reorder(v.c, f.sum_over.x, f.sum_over.y, v.h);
    vectorize_channels(accumulate, v.c, width, tunables.channels);
    if (tunables.channels > 0 && tunables.channels % width == 0) {
        f.accumulated.unroll(v.c);
        accumulate.unroll(v.c);
    }

    // The corners of the tile's samples: the channel loop then only loads
    // rows, weights and the mask.
    per_sample_table_per_tile(f.corners, v, LoopLevel(f.output, task), width);
}

void schedule_grad_value(const Target &target, GradValuePipeline &f, const Tunables &tunables) {
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, tunables);
    Var slice("slice");
    if (tunables.channels > 0) f.grad_value.bound(v.c, 0, tunables.channels);

    // Zero-fill, then scatter. Each task owns the grad_value rows of one
    // (batch, head) slice and visits samples in a fixed order, so results
    // are bitwise identical for any thread count, without atomics.
    f.grad_value.fuse(v.h, v.b, slice).parallel(slice);
    vectorize_channels(f.grad_value, v.c, width, tunables.channels);

    Stage scatter = f.grad_value.update();
    RVar corner = f.scatter[0], point = f.scatter[1], level = f.scatter[2], query = f.scatter[3];
    RVar query_tile("query_tile"), query_inner("query_inner");
    scatter.split(query, query_tile, query_inner, tunables.query_tile, TailStrategy::GuardWithIf)
        .reorder(v.c, corner, point, level, query_inner, query_tile, v.h, v.b)
        .fuse(v.h, v.b, slice)
        .parallel(slice);
    vectorize_channels(scatter, v.c, width, tunables.channels);
    // Unrolled corners pick their row, weight and mask bit statically.
    scatter.unroll(corner);

    per_sample_table_per_tile(f.corners, v, LoopLevel(f.grad_value, query_tile), width);
}

void schedule_grad_sample(const Target &target, GradSamplePipeline &f, const Tunables &tunables) {
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, tunables);
    Var query_tile("query_tile"), query("query"), task("task");

    f.grads.split(v.q, query_tile, query, tunables.query_tile, TailStrategy::GuardWithIf)
        .reorder(v.p, v.l, v.h, query, query_tile, v.b)
        .fuse(query_tile, v.b, task)
        .parallel(task);

    // Four dot products over channels per sample, in one pass: partial sums
    // are kept per vector lane (rfactor), then each is reduced across lanes
    // once. Everything lives per sample, in registers.
    RVar channel_outer("channel_outer"), channel_lane("channel_lane");
    Var lane("lane");
    Func partial = f.corner_dots.update()
                       .split(f.channel.x, channel_outer, channel_lane, width, TailStrategy::GuardWithIf)
                       .rfactor(channel_lane, lane);
    f.corner_dots.compute_at(f.grads, v.p);
    f.corner_dots.update().unroll(channel_lane);
    partial.compute_at(f.grads, v.p).vectorize(lane);
    partial.update().reorder(lane, channel_outer).vectorize(lane);

    per_sample_table_per_tile(f.geometry, v, LoopLevel(f.grads, task), width);
}

}  // namespace msda::schedules::x86
