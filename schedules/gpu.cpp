// The GPU family's schedules (OpenCL, and later CUDA): the same pipelines as
// the CPU family's, with the loops that are independent mapped to blocks and
// threads and every reduction run in one thread, in a fixed order. Nothing
// adds into memory another thread writes, so there are no atomics and every
// result has the same bits from run to run (grad_value's atomic variant,
// GradValueSum::float32_atomic, is the one exception, asked for by name):
//   - the forward: a block per (tile of queries, head, batch element) and
//     tile of channels, a thread per (query, channel), each summing its
//     samples in (level, point) order;
//   - grad_value: a thread per (channel, head, batch element) column of
//     grad_value, each walking every sample of its head, query by query, so
//     each row's contributions come in (query, point, corner) order, as in
//     the CPU family's scatter;
//   - the per-sample gradients: a thread per (query, head, batch element),
//     each walking its samples and, for each, the channels.
// The per-sample geometry and corner tables are inlined where they are read.
#include "schedules.h"

namespace msda::schedules::gpu {

using namespace Halide;

namespace {

// The block shapes are knobs (knobs.h: channel_threads, query_threads,
// sample_threads, row_threads, channels_per_thread on CUDA, and the
// fixed-point sum's bound_threads, chunk and reduction_lanes), defaults
// 32, 8, 64, 8, 4, 128, 1024 and 32.

// A value-shaped pure Func (c, h, row, b) over blocks of rows and channels.
void rows_and_channels(Func f, const MsdaVars &v, const Var &row, const Knobs &knobs) {
    Var co("co"), ci("ci"), ro("ro"), ri("ri"), hb("hb");
    f.split(v.c, co, ci, knobs.channel_threads, TailStrategy::GuardWithIf)
        .split(row, ro, ri, knobs.row_threads, TailStrategy::GuardWithIf)
        .reorder(ci, ri, co, ro, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(co, ro, hb)
        .gpu_threads(ci, ri);
}

// With a compile-time N_l and N_p (a variant's levels and points), an
// update's loops over a query's samples, unrolled.
void unroll_compile_time_samples(Stage update, const RVar &point, const RVar &level) {
    if (Internal::is_const(point.extent()) && Internal::is_const(level.extent())) {
        update.unroll(point).unroll(level);
    }
}

}  // namespace

void schedule_forward(const Target &target, ForwardPipeline &f, const Specialization &, const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    Var co("co"), ci("ci"), qo("qo"), qi("qi"), hb("hb");
    if (target.has_feature(Target::CUDA)) {
        // A thread sums knobs.channels_per_thread neighbouring channels of its
        // query (unrolled): a sample's geometry is computed once for them,
        // and each corner's loads are independent, in flight together.
        Var unit("unit");
        f.output.split(v.c, co, ci, knobs.channel_threads * knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .split(ci, ci, unit, knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .split(v.q, qo, qi, knobs.query_threads * knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .reorder(unit, ci, qi, co, qo, v.h, v.b)
            .fuse(v.h, v.b, hb)
            .gpu_blocks(co, qo, hb)
            .gpu_threads(ci, qi)
            .unroll(unit);
        f.accumulated.compute_at(f.output, ci).unroll(v.c);
        f.accumulated.update().reorder(v.c, f.sum_over.x, f.sum_over.y).unroll(v.c);
        unroll_compile_time_samples(f.accumulated.update(), f.sum_over.x, f.sum_over.y);
        return;
    }
    f.output.split(v.c, co, ci, knobs.channel_threads, TailStrategy::GuardWithIf)
        .split(v.q, qo, qi, knobs.query_threads, TailStrategy::GuardWithIf)
        .reorder(ci, qi, co, qo, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(co, qo, hb)
        .gpu_threads(ci, qi);
    // Each thread's sum over its samples, in registers.
    f.accumulated.compute_at(f.output, ci);
}

// A sample's corner table, computed once per sample at `at` (each field
// unrolled into a register): the corners' rows and weights are then read
// from it, so a scatter's store and its load use the same index and the
// update compiles to an atomic add (inlined, the table is rebuilt for the
// row and for each read, and the add becomes a compare-and-swap loop).
void table_per_sample(Func corners, const Var &field, const LoopLevel &at, int fields) {
    corners.compute_at(at).bound(field, 0, fields).unroll(field);
}

// A scatter update over (corner, p, l, q) into a value-shaped Func, atomic:
// a thread per (query, channel) of a head, adding its samples' corners in
// whatever order the threads run. `corners` is the table it reads (the
// pipeline's, or a clone of it for this Func).
void atomic_scatter(const Target &target, Func into, const RDom &scatter, const MsdaVars &v, Func corners,
                    const Var &field, int fields, const Knobs &knobs) {
    RVar corner = scatter[0], point = scatter[1], level = scatter[2], query = scatter[3];
    Var co("co"), ci("ci"), hb("hb"), unit("unit");
    RVar qo("qo"), qi("qi");
    Stage update = into.update();
    update.atomic();
    if (target.has_feature(Target::CUDA)) {
        // knobs.channels_per_thread channels a thread (unrolled): one corner table
        // for them.
        update.split(query, qo, qi, knobs.query_threads * knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .split(v.c, co, ci, knobs.channel_threads * knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .split(ci, ci, unit, knobs.channels_per_thread, TailStrategy::GuardWithIf)
            .reorder(unit, corner, point, level, ci, qi, co, qo, v.h, v.b)
            .unroll(unit);
        unroll_compile_time_samples(update, point, level);
    } else {
        update.split(query, qo, qi, knobs.query_threads, TailStrategy::GuardWithIf)
            .split(v.c, co, ci, knobs.channel_threads, TailStrategy::GuardWithIf)
            .reorder(corner, point, level, ci, qi, co, qo, v.h, v.b);
    }
    update.fuse(v.h, v.b, hb).gpu_blocks(co, qo, hb).gpu_threads(ci, qi);
    table_per_sample(corners, field, LoopLevel(into, point), fields);
}

// A max over the RVar `all` of a reduction's update, in two levels inside a
// block per pure point: each of knobs.reduction_lanes threads takes every knobs.reduction_lanes-th term,
// then one thread takes the max of theirs. Returns the per-thread Func.
Func max_in_block(const Target &target, Stage update, const RVar &all, const std::string &name,
                  const Knobs &knobs) {
    RVar outer(name + "_outer"), lane_term(name + "_lane_term");
    Var lane(name + "_lane");
    Func lanes = update.split(all, outer, lane_term, knobs.reduction_lanes, TailStrategy::GuardWithIf).rfactor(lane_term, lane);
    if (target.has_feature(Target::CUDA)) {
        // Warp shuffles instead of shared memory for the last level.
        lanes.gpu_lanes(lane);
        lanes.update().gpu_lanes(lane);
    } else {
        lanes.gpu_threads(lane);
        lanes.update().gpu_threads(lane);
    }
    return lanes;
}

// GradValueSum::fixed_point: the bounds, a thread per (head, query); each
// batch element's largest bound in two kernels of block-wise maxima (over
// chunks of knobs.chunk bounds, then over the chunks); the zeroed sums; the two
// scatters (integer atomic adds; float atomic adds of the non-finite
// contributions alone), a thread per (query, channel) as the float32 atomic
// scatter; grad_value from the sums.
void schedule_fixed_point(const Target &target, GradValuePipeline &f, const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    FixedPointSum &s = f.fixed;
    Var hq("hq"), o("o"), i("i");
    s.bound.compute_root()
        .fuse(v.h, v.q, hq)
        .split(hq, o, i, knobs.bound_threads, TailStrategy::GuardWithIf)
        .gpu_blocks(o, v.b)
        .gpu_threads(i);
    s.attention_bound.compute_at(s.bound, i);
    s.grad_bound.compute_at(s.bound, i);

    RVar heads_queries("heads_queries"), chunk("chunk"), term("term");
    Var u("u");
    Stage largest = s.largest.update();
    largest.fuse(s.over.x, s.over.y, heads_queries);
    Func chunks = largest.split(heads_queries, chunk, term, knobs.chunk, TailStrategy::GuardWithIf).rfactor(chunk, u);
    chunks.compute_root().gpu_blocks(u, v.b);
    Func chunk_lanes = max_in_block(target, chunks.update(), term, "chunk", knobs);
    chunks.update().gpu_blocks(u, v.b);
    chunk_lanes.compute_at(chunks, u);
    s.largest.compute_root().gpu_blocks(v.b);
    Func largest_lanes = max_in_block(target, s.largest.update(), chunk, "largest", knobs);
    s.largest.update().gpu_blocks(v.b);
    largest_lanes.compute_at(s.largest, v.b);

    for (Func sum : {s.sums, s.nonfinite}) {
        sum.compute_root();
        rows_and_channels(sum, v, f.row, knobs);
    }
    atomic_scatter(target, s.sums, s.finite_scatter, v, f.corners, f.field, f.layout.fields, knobs);
    atomic_scatter(target, s.nonfinite, s.nonfinite_scatter, v, f.corners.clone_in(s.nonfinite), f.field,
                   f.layout.fields, knobs);
    rows_and_channels(f.grad_value, v, f.row, knobs);
}

void schedule_grad_value(const Target &target, GradValuePipeline &f, const Specialization &, const Knobs &knobs) {
    if (f.sum == GradValueSum::fixed_point) {
        schedule_fixed_point(target, f, knobs);
        return;
    }
    const MsdaVars &v = f.vars;
    rows_and_channels(f.grad_value, v, f.row, knobs);
    Var co("co"), ci("ci"), hb("hb");
    RVar corner = f.scatter[0], point = f.scatter[1], level = f.scatter[2], query = f.scatter[3];
    if (f.sum == GradValueSum::float32_atomic) {
        // Options::deterministic = false: float atomic adds.
        f.atomic_sums.compute_root();
        rows_and_channels(f.atomic_sums, v, f.row, knobs);
        atomic_scatter(target, f.atomic_sums, f.scatter, v, f.corners, f.field, f.layout.fields, knobs);
    } else {
        // The scatter: one thread per column (c, h, b) of grad_value, the
        // whole reduction domain (corner, p, l, q) serial inside it, query
        // outermost.
        f.grad_value.update()
            .split(v.c, co, ci, knobs.channel_threads, TailStrategy::GuardWithIf)
            .reorder(corner, point, level, query, ci, co, v.h, v.b)
            .fuse(v.h, v.b, hb)
            .gpu_blocks(co, hb)
            .gpu_threads(ci);
        table_per_sample(f.corners, f.field, LoopLevel(f.grad_value, point), f.layout.fields);
    }
    if (f.stored.defined()) rows_and_channels(f.stored, v, f.row, knobs);
}

void schedule_grad_sample(const Target &, GradSamplePipeline &f, const Specialization &sizes,
                          const Knobs &knobs) {
    const MsdaVars &v = f.vars;
    Var qo("qo"), qi("qi"), hb("hb");
    f.grads.split(v.q, qo, qi, knobs.sample_threads, TailStrategy::GuardWithIf)
        .reorder(v.p, v.l, qi, qo, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(qo, hb)
        .gpu_threads(qi);
    // A sample's corner dots, each a serial sum over the channels.
    f.corner_dots.compute_at(f.grads, v.p).bound(f.corner, 0, f.layout.corners).unroll(f.corner);
    f.corner_dots.update().reorder(f.channel.x, f.corner).unroll(f.corner);
    // A compile-time N_l and N_p: each query's samples unrolled.
    if (sizes.points > 0) f.grads.unroll(v.p).unroll(v.l);
}

void schedule_relayout(const Target &target, Func, const Var &, const Var &, const Var &, const Var &, const Knobs &) {
    throw std::runtime_error("msda's GPU family has no relayout (target " + target.to_string() +
                             "): its kernels read value in the layout given");
}

}  // namespace msda::schedules::gpu

namespace msda::schedules {

namespace {

using namespace Halide;

// Inside CUDA kernels, each strict_float add, subtract or multiply of
// float32 or float64 (Halide's strict_add, strict_sub and strict_mul
// intrinsics, which lowering leaves in the code) becomes a call of NVVM's
// round-to-nearest intrinsic (llvm.nvvm.{add,mul}.rn.{f,d}), which LLVM and
// ptxas keep as one rounded operation. A subtract is an add of the operand
// times -1 (exact, signed zeros included; a constant is negated here).
// Vector operations are done lane by lane.
class CudaRoundedArithmetic : public Internal::IRMutator {
    using IRMutator::visit;
    bool in_kernel = false;

    static Expr rounded(const std::string &op, const Type &t, const Expr &a, const Expr &b) {
        if (t.is_vector()) {
            std::vector<Expr> lanes;
            for (int i = 0; i < t.lanes(); i++) {
                lanes.push_back(rounded(op, t.element_of(), Internal::Shuffle::make_extract_element(a, i),
                                        Internal::Shuffle::make_extract_element(b, i)));
            }
            return Internal::Shuffle::make_concat(lanes);
        }
        const std::string name = "llvm.nvvm." + op + ".rn." + (t.bits() == 64 ? "d" : "f");
        return Internal::Call::make(t, name, {a, b}, Internal::Call::PureExtern);
    }

    Internal::Stmt visit(const Internal::For *op) override {
        const bool kernel = op->device_api == DeviceAPI::CUDA;
        const bool outer = in_kernel;
        in_kernel = in_kernel || kernel;
        Internal::Stmt result = IRMutator::visit(op);
        in_kernel = outer;
        return result;
    }

    Expr visit(const Internal::Call *op) override {
        Expr mutated = IRMutator::visit(op);
        const auto *call = mutated.as<Internal::Call>();
        if (!in_kernel || !call) return mutated;
        const Type t = call->type;
        if (!t.is_float() || (t.bits() != 32 && t.bits() != 64)) return mutated;
        const auto &args = call->args;
        if (call->is_intrinsic(Internal::Call::strict_mul)) return rounded("mul", t, args[0], args[1]);
        if (call->is_intrinsic(Internal::Call::strict_add)) return rounded("add", t, args[0], args[1]);
        if (call->is_intrinsic(Internal::Call::strict_sub)) {
            const std::optional<double> constant = Internal::as_const_float(args[1]);
            Expr negated = constant ? Internal::make_const(t, -*constant)
                                    : rounded("mul", t, args[1], Internal::make_const(t, -1.0));
            return rounded("add", t, args[0], negated);
        }
        return mutated;
    }
};

}  // namespace

void finish_pipeline(const Target &target, Pipeline pipeline) {
    if (target.has_feature(Target::CUDA)) pipeline.add_custom_lowering_pass(new CudaRoundedArithmetic);
}

// The kernels read the per-sample tensors with any strides.
const FamilySchedules kGpuSchedules = {&gpu::schedule_forward, &gpu::schedule_grad_value, &gpu::schedule_grad_sample,
                                       &gpu::schedule_relayout, {.dense_samples = false}};
}  // namespace msda::schedules
