// The CPU family's schedules (x86-64 and 64-bit ARM): the loop structure is
// the same on both, and what depends on the target comes from it (the
// vector width, natural_vector_size) or from the knobs (knobs.h: tile and
// task sizes, the cache budgets its blocks are sized against, loop orders,
// unrolling), whose values per CPU class a sweep chooses. Work is split into parallel tasks over runs of
// queries (forward, per-sample gradients) or over (batch, head) slices of grad_value
// (the scatter), and vectorised over channels, with a guarded tail when C_h
// is not a multiple of the vector width. Two walks of the samples
// (Options::sample_order): by level (head by head, level by level over
// tiles of queries, the per-sample tables vectorised across a tile's
// queries) for any sizes, and by query (query by query, a (query, head)'s
// levels and points in dense vectors, Knobs::table_lanes lanes each) for
// compile-time N_l and N_p. README's
// Performance section says where each one's time goes.
#include "schedules.h"

#include <algorithm>

namespace msda::schedules::cpu {

using namespace Halide;

namespace {

int vector_width(const Target &target, const Knobs &knobs) {
    return knobs.vector_width > 0 ? knobs.vector_width : target.natural_vector_size<float>();
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

// The packed corner table of a tile of queries: the geometry's stages
// first, then the table's fields from them (the geometry itself inlined),
// unrolled so each computes only what it needs, in one buffer of (query,
// field, sample). Their buffers are allocated once per task.
void corner_table_per_tile(Func corners, const std::vector<Func> &stages, const Var &field,
                           const MsdaVars &v, const LoopLevel &tile, const LoopLevel &task, int width,
                           int queries, int fields) {
    for (Func stage : stages) {
        per_sample_table_per_tile(stage, v, tile, width);
        stage.hoist_storage(task);
    }
    corners.hoist_storage(task);
    corners.compute_at(tile)
        .bound(field, 0, fields)
        .bound_storage(v.q, queries)
        .reorder_storage(v.q, field, v.p, v.l, v.h, v.b)
        .reorder(v.q, field, v.p, v.l, v.h, v.b)
        .vectorize(v.q, width, TailStrategy::GuardWithIf)
        .unroll(field);
}

// A pass over a value-shaped Func (c, h, row, b) in memory order: whole rows
// (every head), blocks of rows per parallel task (Knobs::fill_rows).
void in_memory_order(Func f, const MsdaVars &v, const Var &row, int width, int channels, const Knobs &knobs) {
    Var block("block"), rows("rows"), task("task");
    f.reorder(v.c, v.h, row, v.b)
        .split(row, block, rows, knobs.fill_rows, TailStrategy::GuardWithIf)
        .fuse(block, v.b, task)
        .parallel(task);
    vectorize_channels(f, v.c, width, channels);
}

}  // namespace

namespace {

// The largest power of two <= n (n >= 1).
int power_of_two_at_most(int n) {
    int p = 1;
    while (p * 2 <= n) p *= 2;
    return p;
}

// Queries whose rows of grad_output the scatter keeps at hand while it walks
// the levels: a sixteenth of the L2 budget (Knobs::l2_bytes) for a head's
// rows at C_h = 32 (1024 queries, 128 KiB, for x86-64's 2 MiB). The runs
// change only when rows are loaded: each row's contributions come in query
// order whatever their length.
int queries_per_run(int l2_bytes) { return power_of_two_at_most(std::max(1, l2_bytes / 16 / (32 * 4))); }

}  // namespace

// Queries per parallel task: a whole number of tiles, about
// 1/Knobs::tasks_per_batch (16) of a batch element's queries, so each thread
// walks long runs of neighbouring queries (their corners share cache lines)
// and there are tasks enough to balance.
Expr queries_per_task(const MsdaVars &v, const Knobs &knobs) {
    const int tile = knobs.query_tile, tasks = knobs.tasks_per_batch;
    return max(1, (v.queries + tasks * tile - 1) / (tasks * tile)) * tile;
}

namespace {

// The lanes of a by-query corner table's vectors (Knobs::table_lanes).
int table_lanes(const Target &target, const Knobs &knobs) {
    return knobs.table_lanes > 0 ? knobs.table_lanes : target.natural_vector_size<float>();
}

// The geometry's stages and the corner table of one (query, head) of a
// by-query walk (forward, per-sample gradients, scatter), computed at
// `head`: each field a vector over (p, l) (compile-time N_p and N_l), dense
// as the per-sample inputs lie, Knobs::table_lanes lanes a vector (whole
// levels' points; all N_l * N_p at once where that many lanes or more), of
// `levels` levels at a time (N_l, or 1 for a walk with the levels outside
// the queries). The stages are stored first only where Knobs::table_stages
// asks (inlined, LLVM shares what the fields have in common; stored, their
// bools travel as bytes). Their buffers are allocated once per task.
void tables_per_query_head(const Target &target, Func corners, const std::vector<Func> &geometry_stages,
                           const Var &field, const MsdaVars &v, const LoopLevel &head, const LoopLevel &task,
                           int fields, const Specialization &sizes, const Knobs &knobs, int levels) {
    const int table_levels = std::min(levels, std::max(1, table_lanes(target, knobs) / sizes.points));
    const std::vector<Func> stages = knobs.table_stages ? geometry_stages : std::vector<Func>{};
    for (Func stage : stages) {
        stage.compute_at(head).hoist_storage(task).vectorize(v.p);
        if (levels > 1) stage.vectorize(v.l);
    }
    corners.compute_at(head)
        .hoist_storage(task)
        .bound(field, 0, fields)
        .reorder_storage(v.p, v.l, field, v.h, v.q, v.b)
        .reorder(v.p, v.l, field, v.h, v.q, v.b)
        .vectorize(v.p);
    if (levels == 1) {
        // One level at a time: its points are the vector.
    } else if (table_levels == 1) {
        corners.unroll(v.l);
    } else if (table_levels > 1 && table_levels < levels) {
        // The last block shifted inwards where the levels are not a
        // multiple (it recomputes a level, and reads no input beyond them).
        Var level_block("level_block"), level("level");
        corners.split(v.l, level_block, level, table_levels, TailStrategy::ShiftInwards)
            .vectorize(level)
            .unroll(level_block);
    } else {
        corners.vectorize(v.l);
    }
    corners.unroll(field);
}

// The forward's copies of its loops: one where value's rows are addressed
// by element offsets (MsdaInputs::flat_rows; the other copy, for values too
// large for int32 offsets, multiplies each row by the stride), and inside
// it a second copy for align_corners and border both off, where the
// geometry's selects on them fold away (the forward 4-5% faster; the
// backward's passes did not gain, so they have one copy).
void specialize_forward(ForwardPipeline &f, const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    const bool usual = v.usual_sampling.defined() && knobs.specialize_usual;
    if (v.flat_rows.defined()) {
        Stage flat = f.output.specialize(v.flat_rows);
        if (usual) flat.specialize(v.usual_sampling);
    } else if (usual) {
        f.output.specialize(v.usual_sampling);
    }
}

// The forward with compile-time N_l and N_p: one task per run of queries of
// one batch element; inside it, query by query, and for each query head by
// head, so the locations and weights are read as they lie in memory (a
// query's whole row), output is written row by row, and value is read in
// its own layout (no head-major copy: a query's heads sample the same
// neighbourhood, whose rows hold every head). A (query, head)'s N_l * N_p
// samples go through the geometry and the corner table in dense vectors
// (tables_per_query_head); their
// sums over channels stay in registers until output is written.
void schedule_forward_by_query(const Target &target, ForwardPipeline &f, const Specialization &sizes, const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, knobs);
    Var chunk("chunk"), query("query"), task("task");
    if (sizes.channels > 0) f.output.bound(v.c, 0, sizes.channels);
    f.output.split(v.q, chunk, query, queries_per_task(v, knobs), TailStrategy::GuardWithIf)
        .reorder(v.c, v.h, query, chunk, v.b)
        .fuse(chunk, v.b, task)
        .parallel(task);
    vectorize_channels(f.output, v.c, width, sizes.channels);

    const LoopLevel head(f.output, v.h);
    const bool whole_vectors = sizes.channels > 0 && sizes.channels % width == 0 && knobs.unroll_channels;
    // The tables and the copies of the loops (specialize_forward): the last
    // of either walk.
    const auto tables_and_usual_copy = [&] {
        tables_per_query_head(target, f.corners, f.geometry_stages, f.field, v, head, LoopLevel(f.output, task),
                              f.layout.fields, sizes, knobs, sizes.levels);
        specialize_forward(f, knobs);
    };
    // The running sums the points take turns adding into (Knobs::point_sums):
    // one per point, fewer, or one.
    const int points = sizes.points, asked = knobs.point_sums == 0 ? points : std::min(knobs.point_sums, points);
    const int sums = points % asked == 0 ? asked : points;
    if (sums == 1) {
        // One sum for every sample of the (query, head), in (level, point)
        // order.
        f.accumulated.compute_at(head);
        vectorize_channels(f.accumulated, v.c, width, sizes.channels);
        Stage accumulate = f.accumulated.update();
        accumulate.reorder(v.c, f.sum_over.x, f.sum_over.y).unroll(f.sum_over.x).unroll(f.sum_over.y);
        vectorize_channels(accumulate, v.c, width, sizes.channels);
        if (whole_vectors) {
            f.accumulated.unroll(v.c);
            accumulate.unroll(v.c);
        }
        tables_and_usual_copy();
        return;
    }
    // Several running sums (rfactor), point p adding into sum p % sums, each
    // over the levels, then the sums added: a sample's multiply-adds chain
    // into its sum, so the sums' chains overlap (one sum for all sixteen
    // samples made the forward wait on multiply-add latency), while all of
    // them and a sample's weights stay in registers (a sum per point at
    // C_h = 32 is sixteen AVX2 vectors, and spilled).
    Var point("point");
    RVar turn("turn"), sum_of("sum_of");
    Func by_point = sums == points ? f.accumulated.update().rfactor(f.sum_over.x, point)
                                   : f.accumulated.update()
                                         .split(f.sum_over.x, turn, sum_of, sums)
                                         .rfactor(sum_of, point);
    f.accumulated.compute_at(head);
    vectorize_channels(f.accumulated, v.c, width, sizes.channels);
    Stage accumulate = f.accumulated.update();
    const RVar sums_added = sums == points ? RVar(f.sum_over.x) : sum_of;
    accumulate.reorder(v.c, sums_added).unroll(sums_added);
    vectorize_channels(accumulate, v.c, width, sizes.channels);
    by_point.compute_at(head).bound(point, 0, sums).reorder_storage(v.c, point).reorder(v.c, point);
    vectorize_channels(by_point, v.c, width, sizes.channels);
    by_point.unroll(point);
    Stage by_point_update = by_point.update();
    if (sums == points) {
        by_point_update.reorder(v.c, point, f.sum_over.y).unroll(point);
    } else {
        by_point_update.reorder(v.c, point, turn, f.sum_over.y).unroll(point).unroll(turn);
    }
    vectorize_channels(by_point_update, v.c, width, sizes.channels);
    if (whole_vectors) {
        f.accumulated.unroll(v.c);
        accumulate.unroll(v.c);
        by_point.unroll(v.c);
        by_point_update.unroll(v.c);
    }
    tables_and_usual_copy();
}

// The corner dot products of each sample in one pass over the channels:
// partial sums are kept per vector lane (rfactor), a full vector per
// corner, then the lanes of several dots are reduced together as one vector
// reduction (a shuffle tree they share): the four corners', and with a
// compile-time N_p the corners' of all points of a level (one reduction per
// corner took about twice the instructions, eight lanes twice the
// multiply-adds, and all points together made the backward 4% faster than
// one sample's corners). The dots are computed at `at`, their samples
// walked in `order` (innermost first: p, then l or q).
void corner_dots_by_lanes(GradSamplePipeline &f, const Specialization &sizes, const Knobs &knobs, int width, const LoopLevel &at,
                          const std::vector<VarOrRVar> &order) {
    const MsdaVars &v = f.vars;
    RVar channel_outer("channel_outer"), channel_lane("channel_lane");
    Var lane("lane");
    // GKA's one dot a sample: eight lanes, reduced as scalars (sixteen
    // lanes in a vector reduction made its per-sample pass 1.5x slower).
    const bool one_corner = f.layout.corners == 1;
    const int lanes = knobs.dot_lanes > 0 ? knobs.dot_lanes : one_corner ? std::min(width, 8) : width;
    Func partial = f.corner_dots.update()
                       .split(f.channel.x, channel_outer, channel_lane, lanes, TailStrategy::GuardWithIf)
                       .rfactor(channel_lane, lane);
    f.corner_dots.compute_at(at).bound(f.corner, 0, f.layout.corners);
    std::vector<VarOrRVar> loops = {channel_lane, f.corner};
    loops.insert(loops.end(), order.begin(), order.end());
    Stage reduce = f.corner_dots.update();
    reduce.reorder(loops);
    if (one_corner) {
        reduce.unroll(channel_lane);
    } else {
        f.corner_dots.vectorize(f.corner);
        reduce.atomic().vectorize(channel_lane).vectorize(f.corner);
    }
    partial.reorder_storage(lane, f.corner, v.p).reorder(lane, f.corner, v.p).vectorize(lane).unroll(f.corner);
    partial.update().reorder(lane, f.corner, v.p, channel_outer).vectorize(lane).unroll(f.corner);
    if (sizes.points > 0 && !one_corner) {
        f.corner_dots.bound(v.p, 0, sizes.points).vectorize(v.p);
        reduce.vectorize(v.p);
        partial.compute_at(f.corner_dots, order.at(1).var).unroll(v.p);
        partial.update().unroll(v.p);
    } else {
        partial.compute_at(f.corner_dots, v.p);
    }
    if (sizes.channels > 0 && sizes.channels % lanes == 0 && knobs.unroll_channels) {
        partial.update().unroll(channel_outer);
    }
}

// The per-sample gradients with compile-time N_l and N_p, walked as the
// by-query forward walks: query by query, head by head, a (query, head)'s
// samples in dense vectors through the geometry, the corner table
// (tables_per_query_head) and the gradients' arithmetic, value read in its own
// layout.
void schedule_grad_sample_by_query(const Target &target, GradSamplePipeline &f, const Specialization &sizes, const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, knobs);
    Var chunk("chunk"), query("query"), task("task");
    f.grads.bound(v.p, 0, sizes.points)
        .bound(v.l, 0, sizes.levels)
        .split(v.q, chunk, query, queries_per_task(v, knobs), TailStrategy::GuardWithIf)
        .reorder(v.p, v.l, v.h, query, chunk, v.b)
        .fuse(chunk, v.b, task)
        .parallel(task)
        .vectorize(v.p)
        .vectorize(v.l);
    const LoopLevel head(f.grads, v.h);
    corner_dots_by_lanes(f, sizes, knobs, width, head, {v.p, v.l});
    // As the forward's tables.
    tables_per_query_head(target, f.corners, f.geometry_stages, f.field, v, head, LoopLevel(f.grads, task),
                          f.layout.fields, sizes, knobs, sizes.levels);
    if (v.flat_rows.defined()) f.grads.specialize(v.flat_rows);
    // The (query, head)'s row of grad_output.
    f.grad_rows.compute_at(head);
    vectorize_channels(f.grad_rows, v.c, width, sizes.channels);
}

}  // namespace

void schedule_forward(const Target &target, ForwardPipeline &f, const Specialization &sizes, const Knobs &knobs) {
    if (sizes.points > 0) {
        schedule_forward_by_query(target, f, sizes, knobs);
        return;
    }
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, knobs);
    Var chunk("chunk"), rest("rest"), task("task");

    if (sizes.channels > 0) f.output.bound(v.c, 0, sizes.channels);
    // One task per run of queries of one batch element; inside it, one head
    // at a time.
    f.output.split(v.q, chunk, rest, queries_per_task(v, knobs), TailStrategy::GuardWithIf)
        .reorder(v.c, rest, v.h, chunk, v.b)
        .fuse(chunk, v.b, task)
        .parallel(task);
    vectorize_channels(f.output, v.c, width, sizes.channels);

    // The sums of one head over the task's queries, level by level: one
    // level's slice of one head is the working set while its samples are
    // gathered (it fits in L2 where the whole head would not). Inside a
    // tile, point by point over its queries: consecutive samples add into
    // different queries' sums, so their multiply-adds do not wait on each
    // other (points innermost, Knobs::points_inner, the sums staying in
    // registers per query, was 3-9% slower).
    f.accumulated.compute_at(f.output, v.h);
    vectorize_channels(f.accumulated, v.c, width, sizes.channels);
    Stage accumulate = f.accumulated.update();
    RVar point = f.sum_over.x, level = f.sum_over.y;
    Var query_tile("query_tile"), query("query");
    accumulate.split(v.q, query_tile, query, knobs.query_tile, TailStrategy::GuardWithIf);
    if (knobs.points_inner) {
        accumulate.reorder(v.c, point, query, query_tile, level);
    } else {
        accumulate.reorder(v.c, query, point, query_tile, level);
    }
    vectorize_channels(accumulate, v.c, width, sizes.channels);
    if (sizes.channels > 0 && sizes.channels % width == 0 && knobs.unroll_channels) {
        f.accumulated.unroll(v.c);
        accumulate.unroll(v.c);
    }

    // The corners of one (tile, level)'s samples, vectorised across queries:
    // the channel loop then only loads rows, weights and the mask.
    const LoopLevel at_tile(f.accumulated, query_tile);
    corner_table_per_tile(f.corners, f.geometry_stages, f.field, v, at_tile, LoopLevel(f.output, task), width,
                          knobs.query_tile, f.layout.fields);
    specialize_forward(f, knobs);
}

void schedule_grad_value(const Target &target, GradValuePipeline &f, const Specialization &sizes, const Knobs &knobs) {
    if (f.sum != GradValueSum::float32) {
        throw std::runtime_error("msda's CPU family sums grad_value in float32 in a fixed order (target " +
                                 target.to_string() + "): each task owns its slice, without atomics");
    }
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, knobs);
    Var slice("slice");
    if (sizes.channels > 0) f.grad_value.bound(v.c, 0, sizes.channels);

    // Zero-fill, then scatter. Each scatter task owns the grad_value rows of
    // one (batch, head) slice and visits samples in a fixed order, so results
    // are bitwise identical for any thread count, without atomics.
    // The zero-fill walks memory in order: whole rows (every head), blocks of
    // rows per task.
    in_memory_order(f.grad_value, v, f.row, width, sizes.channels, knobs);

    Stage scatter = f.grad_value.update();
    RVar corner = f.scatter[0], point = f.scatter[1], level = f.scatter[2], query = f.scatter[3];
    if (sizes.points > 0) {
        // Compile-time N_l and N_p: per slice, query by query, as the
        // by-query forward walks; a query's samples in dense vectors through
        // the geometry and the corner table (dense loads of its locations and
        // weights, no gathers), then its samples' corners added into the
        // slice's rows, every level and point unrolled. Each row's
        // contributions come in the same order as by level (a row belongs to
        // one level): the same bits.
        //
        // Knobs::scatter_levels: each level of a slice is a parallel task
        // of its own, and the level loop is outside the queries: a task's
        // working set is one level's rows of one head (contiguous in a
        // head-major grad_value), and a slice makes N_l tasks. The tasks own
        // disjoint rows, which Halide cannot prove: every read of a level's
        // sample lies in that level (sample_geometry, nearest_geometry;
        // those of samples that do not count too), and the runtime checks
        // that level_start_index is the exclusive prefix sum of the levels'
        // sizes and that they add up to L, so no two levels share a row.
        // The reads are clamped into [0, L - 1] whatever the tables: inputs
        // that break this promise could only sum wrongly, never reach
        // outside grad_value.
        LoopLevel task(f.grad_value, slice);
        if (knobs.scatter_levels) {
            RVar level_task("level_task");
            scatter.allow_race_conditions()
                .reorder(v.c, corner, point, query, level, v.h, v.b)
                .fuse(v.h, v.b, slice)
                .fuse(level, slice, level_task)
                .parallel(level_task)
                .unroll(point);
            task = LoopLevel(f.grad_value, level_task);
        } else {
            scatter.reorder(v.c, corner, point, level, query, v.h, v.b).fuse(v.h, v.b, slice).parallel(slice);
            scatter.unroll(point).unroll(level);
        }
        const LoopLevel at_query(f.grad_value, query);
        tables_per_query_head(target, f.corners, f.geometry_stages, f.field, v, at_query, task, f.layout.fields,
                              sizes, knobs, knobs.scatter_levels ? 1 : sizes.levels);
        f.grad_rows.compute_at(at_query);
    } else {
        // Per slice, runs of queries; inside a run, level by level (one
        // level's slice of one head is the working set of the
        // read-modify-writes), over tiles of queries. The run's rows of
        // grad_output are loaded once, all together (their loads overlap),
        // and stay in L2 for every level.
        RVar run("run"), rest("rest"), query_tile("query_tile"), query_inner("query_inner");
        scatter.split(query, run, rest, queries_per_run(knobs.l2_budget(target)), TailStrategy::GuardWithIf)
            .split(rest, query_tile, query_inner, knobs.query_tile, TailStrategy::GuardWithIf)
            .reorder(v.c, corner, point, query_inner, query_tile, level, run, v.h, v.b)
            .fuse(v.h, v.b, slice)
            .parallel(slice);
        corner_table_per_tile(f.corners, f.geometry_stages, f.field, v, LoopLevel(f.grad_value, query_tile),
                              LoopLevel(f.grad_value, slice), width, knobs.query_tile, f.layout.fields);
        f.grad_rows.compute_at(f.grad_value, run).hoist_storage(LoopLevel(f.grad_value, slice));
    }
    vectorize_channels(scatter, v.c, width, sizes.channels);
    vectorize_channels(f.grad_rows, v.c, width, sizes.channels);
    // Unrolled corners pick their fields statically.
    scatter.unroll(corner);
    if (sizes.channels > 0 && sizes.channels % width == 0 && knobs.unroll_channels) {
        f.grad_value.unroll(v.c);
        scatter.unroll(v.c);
    }

    // Half-precision storage: the float32 sums rounded once, in memory order.
    if (f.stored.defined()) {
        if (sizes.channels > 0) f.stored.bound(v.c, 0, sizes.channels);
        in_memory_order(f.stored, v, f.row, width, sizes.channels, knobs);
    }
}

void schedule_grad_sample(const Target &target, GradSamplePipeline &f, const Specialization &sizes, const Knobs &knobs) {
    if (sizes.points > 0) {
        schedule_grad_sample_by_query(target, f, sizes, knobs);
        return;
    }
    const MsdaVars &v = f.vars;
    const int width = vector_width(target, knobs);
    Var chunk("chunk"), rest("rest"), query_tile("query_tile"), query("query"), task("task");

    // Runs of queries per task, one head at a time, level by level (one
    // level's slice of one head is the working set of the corner reads),
    // over tiles of queries. The gradients' arithmetic is vectorised across
    // the tile's queries; the dot products before it are per sample.
    f.grads.split(v.q, chunk, rest, queries_per_task(v, knobs), TailStrategy::GuardWithIf)
        .split(rest, query_tile, query, knobs.query_tile, TailStrategy::GuardWithIf)
        .reorder(query, v.p, query_tile, v.l, v.h, chunk, v.b)
        .fuse(chunk, v.b, task)
        .parallel(task)
        .vectorize(query);

    // The dots stay stored corners-innermost, as they are computed (stored
    // queries-innermost, for dense reads by the gradients, the backward
    // was 1.1x slower: each sample's dots are then written lane by lane).
    corner_dots_by_lanes(f, sizes, knobs, width, LoopLevel(f.grads, query_tile), {v.p, v.q});

    corner_table_per_tile(f.corners, f.geometry_stages, f.field, v, LoopLevel(f.grads, query_tile),
                          LoopLevel(f.grads, task), width, knobs.query_tile, f.layout.fields);
    // The run's rows of grad_output for the head, loaded once for all levels.
    f.grad_rows.compute_at(f.grads, v.h).hoist_storage(LoopLevel(f.grads, task));
    vectorize_channels(f.grad_rows, v.c, width, sizes.channels);
    if (v.flat_rows.defined()) f.grads.specialize(v.flat_rows);
}

void schedule_relayout(const Target &target, Func out, const Var &c, const Var &h, const Var &row, const Var &b,
                       const Knobs &knobs) {
    // Blocks of rows per task; inside a block, head by head: a block's rows
    // of every head (a third of the L1d budget, Knobs::l1_bytes, for 8 x 32
    // channels of float32: 16 rows, 16 KiB, on both families) stay in L1 whichever of the two layouts is
    // head-major, so both sides are read and written in whole cache lines.
    Var block("block"), rows("rows"), task("task");
    const int width = target.natural_vector_size(out.type());
    const int block_rows = power_of_two_at_most(std::max(1, knobs.l1_budget(target) / 3 / (8 * 32 * 4)));
    out.split(row, block, rows, block_rows, TailStrategy::GuardWithIf)
        .reorder(c, rows, h, block, b)
        .fuse(block, b, task)
        .parallel(task);
    vectorize_channels(out, c, width, 0);
}

}  // namespace msda::schedules::cpu

namespace msda::schedules {
// The by-query walk reads each query's N_l * N_p samples in dense vectors:
// their (l, p) block must be dense.
const FamilySchedules kCpuSchedules = {&cpu::schedule_forward, &cpu::schedule_grad_value, &cpu::schedule_grad_sample,
                                       &cpu::schedule_relayout, {.dense_samples = true, .flat_rows = true}};
}  // namespace msda::schedules
