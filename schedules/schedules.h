// Schedules for the MSDA pipelines, one implementation per target family.
// The generators call these entry points; they pick the family's schedule
// from the target, so generators/ holds no target-specific code.
#pragma once

#include "Halide.h"
#include "knobs.h"
#include "msda_pipeline.h"

namespace msda::schedules {

void schedule_forward(const Halide::Target &target, ForwardPipeline &pipeline,
                      const Specialization &sizes, const Knobs &knobs);
void schedule_grad_value(const Halide::Target &target, GradValuePipeline &pipeline,
                         const Specialization &sizes, const Knobs &knobs);
void schedule_grad_sample(const Halide::Target &target, GradSamplePipeline &pipeline,
                          const Specialization &sizes, const Knobs &knobs);

// A value-shaped copy out(c, h, row, b) = in(c, h, row, b) between layouts.
void schedule_relayout(const Halide::Target &target, Halide::Func out, const Halide::Var &c,
                       const Halide::Var &h, const Halide::Var &row, const Halide::Var &b, const Knobs &knobs);

// What a target's code generation needs of a pipeline beyond its schedule,
// added to it once scheduled (by the generators, so also in `msda sweep`).
// On CUDA, the float32/float64 adds and multiplies that the algorithm marks
// strict_float, inside the kernels, become PTX's .rn instructions: Halide's
// PTX back end lets LLVM fuse a multiply and an add into fma whatever
// strict_float says, and ptxas fuses an add.f32 without .rn too, so
// x * W - 0.5 came out as one fma (one rounding, not two) and a location on a
// pixel centre landed a hair off it (grad_sampling_locations nonzero on a
// border-clamped coordinate). Other targets: nothing.
void finish_pipeline(const Halide::Target &target, Halide::Pipeline pipeline);

// What a family's schedules need of the inputs and outputs beyond what the
// pipelines themselves constrain; the generators declare their buffers
// accordingly.
struct InputRequirements {
    // A compile-time N_l and N_p also fixes the (l, p) strides of the
    // per-sample tensors (sampling_locations, attention_weights and their
    // gradients) to their canonical, dense order.
    bool dense_samples = false;
    // The forward's schedules specialize on MsdaInputs::flat_rows (value's
    // rows addressed by element offsets from the corner table) where the
    // knobs ask for it (Knobs::flat_rows).
    bool flat_rows = false;
};
InputRequirements input_requirements(const Halide::Target &target);

// The schedule family of a target (knobs.h: Family).
Family family(const Halide::Target &target);

// One family's schedules: cpu.cpp (x86-64 and 64-bit ARM) and gpu.cpp
// (OpenCL and CUDA: blocks and threads) define theirs.
struct FamilySchedules {
    void (*forward)(const Halide::Target &, ForwardPipeline &, const Specialization &, const Knobs &);
    void (*grad_value)(const Halide::Target &, GradValuePipeline &, const Specialization &, const Knobs &);
    void (*grad_sample)(const Halide::Target &, GradSamplePipeline &, const Specialization &, const Knobs &);
    void (*relayout)(const Halide::Target &, Halide::Func, const Halide::Var &, const Halide::Var &,
                     const Halide::Var &, const Halide::Var &, const Knobs &);
    InputRequirements requirements;
};
extern const FamilySchedules kCpuSchedules, kGpuSchedules;

}  // namespace msda::schedules
