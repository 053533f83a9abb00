// The one place a target meets its schedule family.
#include "schedules.h"

#include <stdexcept>

namespace msda::schedules {

Family family(const Halide::Target &target) {
    if (target.has_gpu_feature()) {
        throw std::runtime_error("msda has no schedule for the GPU target " + target.to_string() +
                                 " yet (its GPU schedule family does not exist)");
    }
    const bool x86_64 = target.arch == Halide::Target::X86 && target.bits == 64;
    const bool arm_64 = target.arch == Halide::Target::ARM && target.bits == 64;
    if (!x86_64 && !arm_64) {
        throw std::runtime_error("msda has no schedule for target " + target.to_string() +
                                 ": its CPU schedule family serves x86-64 and 64-bit ARM");
    }
    return Family::cpu;
}

void schedule_forward(const Halide::Target &target, ForwardPipeline &pipeline, const Tunables &tunables) {
    switch (family(target)) {
    case Family::cpu: return cpu::schedule_forward(target, pipeline, tunables);
    }
}

void schedule_grad_value(const Halide::Target &target, GradValuePipeline &pipeline, const Tunables &tunables) {
    switch (family(target)) {
    case Family::cpu: return cpu::schedule_grad_value(target, pipeline, tunables);
    }
}

void schedule_grad_sample(const Halide::Target &target, GradSamplePipeline &pipeline, const Tunables &tunables) {
    switch (family(target)) {
    case Family::cpu: return cpu::schedule_grad_sample(target, pipeline, tunables);
    }
}

void schedule_relayout(const Halide::Target &target, Halide::Func out, const Halide::Var &c, const Halide::Var &h,
                       const Halide::Var &row, const Halide::Var &b) {
    switch (family(target)) {
    case Family::cpu: return cpu::schedule_relayout(target, out, c, h, row, b);
    }
}

}  // namespace msda::schedules
