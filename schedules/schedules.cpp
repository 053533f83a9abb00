// The one place a target meets its schedule family.
#include "schedules.h"

#include <stdexcept>

namespace msda::schedules {

Family family(const Halide::Target &target) {
    if (target.has_feature(Halide::Target::OpenCL) || target.has_feature(Halide::Target::CUDA)) {
        return Family::gpu;
    }
    if (target.has_gpu_feature()) {
        throw std::runtime_error("msda has no schedule for the GPU target " + target.to_string() +
                                 ": its GPU schedule family serves OpenCL and CUDA");
    }
    const bool x86_64 = target.arch == Halide::Target::X86 && target.bits == 64;
    const bool arm_64 = target.arch == Halide::Target::ARM && target.bits == 64;
    if (!x86_64 && !arm_64) {
        throw std::runtime_error("msda has no schedule for target " + target.to_string() +
                                 ": its CPU schedule family serves x86-64 and 64-bit ARM");
    }
    return Family::cpu;
}

namespace {
const FamilySchedules &schedules_of(const Halide::Target &target) {
    switch (family(target)) {
    case Family::gpu: return kGpuSchedules;
    case Family::cpu: break;
    }
    return kCpuSchedules;
}
}  // namespace

InputRequirements input_requirements(const Halide::Target &target) { return schedules_of(target).requirements; }

void schedule_forward(const Halide::Target &target, ForwardPipeline &pipeline, const Specialization &sizes,
                       const Knobs &knobs) {
    schedules_of(target).forward(target, pipeline, sizes, knobs);
}

void schedule_grad_value(const Halide::Target &target, GradValuePipeline &pipeline, const Specialization &sizes,
                       const Knobs &knobs) {
    schedules_of(target).grad_value(target, pipeline, sizes, knobs);
}

void schedule_grad_sample(const Halide::Target &target, GradSamplePipeline &pipeline, const Specialization &sizes,
                       const Knobs &knobs) {
    schedules_of(target).grad_sample(target, pipeline, sizes, knobs);
}

void schedule_relayout(const Halide::Target &target, Halide::Func out, const Halide::Var &c, const Halide::Var &h,
                       const Halide::Var &row, const Halide::Var &b, const Knobs &knobs) {
    schedules_of(target).relayout(target, out, c, h, row, b, knobs);
}

}  // namespace msda::schedules
