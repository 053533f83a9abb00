// The GPU family's schedules (OpenCL, and later CUDA): the same pipelines as
// the CPU family's, with the loops that are independent mapped to blocks and
// threads and every reduction run in one thread, in a fixed order. Nothing
// adds into memory another thread writes, so there are no atomics and every
// result has the same bits from run to run (grad_value's atomic variant,
// Tunables::atomic, is the one exception, asked for by name):
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

// Threads of a block along channels, and queries of a forward block.
constexpr int kChannelThreads = 32;
constexpr int kQueryThreads = 8;
// Threads of a block of the per-sample gradients (one query each).
constexpr int kSampleThreads = 64;
// Rows of a block of the zero-fill and of the half-precision rounding.
constexpr int kRowThreads = 8;

// A value-shaped pure Func (c, h, row, b) over blocks of rows and channels.
void rows_and_channels(Func f, const MsdaVars &v, const Var &row) {
    Var co("co"), ci("ci"), ro("ro"), ri("ri"), hb("hb");
    f.split(v.c, co, ci, kChannelThreads, TailStrategy::GuardWithIf)
        .split(row, ro, ri, kRowThreads, TailStrategy::GuardWithIf)
        .reorder(ci, ri, co, ro, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(co, ro, hb)
        .gpu_threads(ci, ri);
}

}  // namespace

void schedule_forward(const Target &, ForwardPipeline &f, const Tunables &) {
    const MsdaVars &v = f.vars;
    Var co("co"), ci("ci"), qo("qo"), qi("qi"), hb("hb");
    f.output.split(v.c, co, ci, kChannelThreads, TailStrategy::GuardWithIf)
        .split(v.q, qo, qi, kQueryThreads, TailStrategy::GuardWithIf)
        .reorder(ci, qi, co, qo, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(co, qo, hb)
        .gpu_threads(ci, qi);
    // Each thread's sum over its samples, in registers.
    f.accumulated.compute_at(f.output, ci);
}

void schedule_grad_value(const Target &, GradValuePipeline &f, const Tunables &tunables) {
    const MsdaVars &v = f.vars;
    rows_and_channels(f.grad_value, v, f.row);
    Var co("co"), ci("ci"), hb("hb");
    RVar corner = f.scatter[0], point = f.scatter[1], level = f.scatter[2], query = f.scatter[3];
    if (tunables.atomic) {
        // Options::deterministic = false: a thread per (query, channel) of
        // a head, adding its samples' corners into grad_value with float
        // atomics, in whatever order the threads run.
        RVar qo("qo"), qi("qi");
        f.grad_value.update()
            .atomic()
            .split(query, qo, qi, kQueryThreads, TailStrategy::GuardWithIf)
            .split(v.c, co, ci, kChannelThreads, TailStrategy::GuardWithIf)
            .reorder(corner, point, level, ci, qi, co, qo, v.h, v.b)
            .fuse(v.h, v.b, hb)
            .gpu_blocks(co, qo, hb)
            .gpu_threads(ci, qi);
    } else {
        // The scatter: one thread per column (c, h, b) of grad_value, the
        // whole reduction domain (corner, p, l, q) serial inside it, query
        // outermost.
        f.grad_value.update()
            .split(v.c, co, ci, kChannelThreads, TailStrategy::GuardWithIf)
            .reorder(corner, point, level, query, ci, co, v.h, v.b)
            .fuse(v.h, v.b, hb)
            .gpu_blocks(co, hb)
            .gpu_threads(ci);
    }
    if (f.stored.defined()) rows_and_channels(f.stored, v, f.row);
}

void schedule_grad_sample(const Target &, GradSamplePipeline &f, const Tunables &) {
    const MsdaVars &v = f.vars;
    Var qo("qo"), qi("qi"), hb("hb");
    f.grads.split(v.q, qo, qi, kSampleThreads, TailStrategy::GuardWithIf)
        .reorder(v.p, v.l, qi, qo, v.h, v.b)
        .fuse(v.h, v.b, hb)
        .gpu_blocks(qo, hb)
        .gpu_threads(qi);
    // A sample's corner dots, each a serial sum over the channels.
    f.corner_dots.compute_at(f.grads, v.p).bound(f.corner, 0, f.layout.corners).unroll(f.corner);
    f.corner_dots.update().reorder(f.channel.x, f.corner).unroll(f.corner);
}

void schedule_relayout(const Target &target, Func, const Var &, const Var &, const Var &, const Var &) {
    throw std::runtime_error("msda's GPU family has no relayout (target " + target.to_string() +
                             "): its kernels read value in the layout given");
}

}  // namespace msda::schedules::gpu

namespace msda::schedules {
const FamilySchedules kGpuSchedules = {&gpu::schedule_forward, &gpu::schedule_grad_value, &gpu::schedule_grad_sample,
                                   &gpu::schedule_relayout};
}  // namespace msda::schedules
