// Schedules for the MSDA pipelines, one implementation per target family.
// The generators call these entry points; they pick the family's schedule
// from the target, so generators/ holds no target-specific code.
#pragma once

#include "Halide.h"
#include "msda_pipeline.h"

namespace msda::schedules {

// What a sweep may vary without touching code (generator parameters).
struct Tunables {
    int channels = 0;       // compile-time C_h, or 0 for any C_h
    int query_tile = 16;    // queries per parallel task / per geometry batch
    int vector_width = 0;   // floats per vector, 0 = the target's natural width
    // Compile-time N_l and N_p (0: run-time). The forward then walks the
    // samples query by query, all heads of a query in turn, each head's
    // N_l * N_p samples as one vector; otherwise head by head, level by
    // level over runs of queries.
    int levels = 0, points = 0;
};

void schedule_forward(const Halide::Target &target, ForwardPipeline &pipeline,
                      const Tunables &tunables);
void schedule_grad_value(const Halide::Target &target, GradValuePipeline &pipeline,
                         const Tunables &tunables);
void schedule_grad_sample(const Halide::Target &target, GradSamplePipeline &pipeline,
                          const Tunables &tunables);

// A value-shaped copy out(c, h, row, b) = in(c, h, row, b) between layouts.
void schedule_relayout(const Halide::Target &target, Halide::Func out, const Halide::Var &c,
                       const Halide::Var &h, const Halide::Var &row, const Halide::Var &b);

// What a family's schedules need of the inputs and outputs beyond what the
// pipelines themselves constrain; the generators declare their buffers
// accordingly.
struct InputRequirements {
    // A compile-time N_l and N_p also fixes the (l, p) strides of the
    // per-sample tensors (sampling_locations, attention_weights and their
    // gradients) to their canonical, dense order.
    bool dense_samples = false;
};
InputRequirements input_requirements(const Halide::Target &target);

// The schedule families; family() maps a target to one.
enum class Family { cpu, gpu };
Family family(const Halide::Target &target);

// One family's schedules: cpu.cpp (x86-64 and 64-bit ARM) and gpu.cpp
// (OpenCL and CUDA: blocks and threads) define theirs.
struct FamilySchedules {
    void (*forward)(const Halide::Target &, ForwardPipeline &, const Tunables &);
    void (*grad_value)(const Halide::Target &, GradValuePipeline &, const Tunables &);
    void (*grad_sample)(const Halide::Target &, GradSamplePipeline &, const Tunables &);
    void (*relayout)(const Halide::Target &, Halide::Func, const Halide::Var &, const Halide::Var &,
                     const Halide::Var &, const Halide::Var &);
    InputRequirements requirements;
};
extern const FamilySchedules kCpuSchedules, kGpuSchedules;

}  // namespace msda::schedules
