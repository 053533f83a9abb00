// The sweep's kernels: one schedule (forward, grad_value or the per-sample
// gradients) of msda's generators, JIT-compiled in this process with a
// candidate's knobs or by one of Halide's autoschedulers, run on a
// problem's tensors, and checked against the float64 reference.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "Halide.h"
#include "knobs.h"
#include "problem.h"

namespace msda_sweep {

enum class Kernel { forward, grad_value, grad_sample };
const char *kernel_name(Kernel kernel);
const std::vector<Kernel> &all_kernels();

// How the CPU family walks the samples: by level for any N_l and N_p, by
// query for compile-time ones (Options::sample_order).
enum class Walk { by_level, by_query };
const char *walk_name(Walk walk);

// What is compiled: a kernel, walked one way, for a problem's C_h, N_l and
// N_p, with knobs (encoded, knobs.h) or an autoscheduler's schedule.
struct Variant {
    Kernel kernel = Kernel::forward;
    Walk walk = Walk::by_level;
    msda::schedules::Specialization sizes;
    std::string knobs;          // `knob:value,...` over the family defaults
    std::string autoscheduler;  // "" or Adams2019, Li2018, Mullapudi2016, Anderson2021
};

// Halide's autoschedulers, loaded once from the wheel's plugins
// (MSDA_SWEEP_HALIDE_LIB_DIR), with their parameters for this machine.
Halide::AutoschedulerParams autoscheduler_params(const std::string &name, int threads);

// This CPU's L2 in bytes (1 MiB where sysfs does not say).
std::int64_t l2_bytes_of_this_cpu();

// Where the library's automatic relayout stages a call on this CPU, as
// runtime/src/policy.cpp decides (more than one head, value larger than a
// core's L2, at least 4 samples a head for each row of value), it sums
// grad_value head-major, (B, N_h, L, C_h), whatever the walk, and its
// by-level forward and per-sample gradients read a head-major copy of
// value (its by-query walks read the caller's).
struct StagedLayouts {
    bool value_head_major = false, grad_value_head_major = false;
};
StagedLayouts staged_layouts(const msda_bench::Shape &shape, Walk walk);

// The tensors of a problem in the generators' order: value (c, h, row, b),
// spatial_shapes (2, N_l), level_start_index, the location planes and
// weights (p, l, h, q, b), grad_output (c, h, q, b); and the outputs.
// They lie as the library gives them to a kernel walking `walk`
// (staged_layouts): the same code either way, but not the same memory
// traffic.
class Tensors {
public:
    Tensors(const msda_bench::Problem &problem, Walk walk);
    const StagedLayouts layouts;
    const msda_bench::Problem &problem() const { return problem_; }
    Halide::Runtime::Buffer<> &named(const std::string &name);
    const std::vector<std::pair<std::string, Halide::Runtime::Buffer<>>> &buffers() const { return buffers_; }
    // The outputs back on the host (a device target's results).
    void sync_outputs();
    // 64-byte aligned, as the bench's and a framework's tensors are: a
    // std::vector's 16-byte aligned rows straddle an extra cache line
    // (docs/performance-log.md, 2026-12-07 night: the scatter timed up to
    // 1.3x slower so).
    msda_bench::Floats output, grad_value, grad_attention_weights, grad_sampling_locations;
    msda_bench::Floats value_copy;  // value head-major, where staged
    bool align_corners = false, border = false;  // the options (zeros padding where border is off)

private:
    msda_bench::Problem problem_;
    std::vector<std::pair<std::string, Halide::Runtime::Buffer<>>> buffers_;
};

// A kernel compiled for a target; run() calls it on a problem's tensors.
class Compiled {
public:
    Compiled(const Halide::Target &target, const Variant &variant);
    void run(Tensors &tensors) const;
    double compile_seconds() const { return compile_seconds_; }

private:
    Halide::Callable callable_;
    std::vector<std::string> arguments_;  // the argument names, in order
    double compile_seconds_ = 0;
};

// Compiles a variant ahead of time to an object file (targets this process
// cannot run: CUDA without a GPU), or to a static library with its runtime
// (`path`.a and .h: ARM, run under qemu), as function msda_sweep_candidate;
// throws what the compiler reports.
void compile_to_object(const Halide::Target &target, const Variant &variant, const std::string &path);
void compile_to_static_library(const Halide::Target &target, const Variant &variant, const std::string &prefix);

// Runs a compiled kernel on a problem's tensors (in this process, or under
// an emulator).
using Runner = std::function<void(Tensors &)>;

// The float64 reference's verdict on a compiled kernel, on a small problem
// of the variant's sizes with locations past every border: "" when every
// result is within float32's tolerance (1e-5 of the tensor's largest
// magnitude, SPEC.md), else what differs.
std::string check_against_reference(const Runner &run, const Variant &variant);

// The small problem the check runs (its shape: the variant's sizes, 3
// heads, 37 queries, small levels).
msda_bench::Problem check_problem(const Variant &variant);

}  // namespace msda_sweep
