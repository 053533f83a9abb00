#include "schedules.h"

namespace msda::schedules {

namespace {
[[noreturn]] void no_schedule(const Halide::Target &target) {
    throw std::runtime_error("msda has no schedule for target " + target.to_string() +
                             " yet (x86 only so far)");
}
}  // namespace

void schedule_forward(const Halide::Target &target, ForwardPipeline &pipeline,
                      const Tunables &tunables) {
    if (target.arch != Halide::Target::X86) no_schedule(target);
    x86::schedule_forward(target, pipeline, tunables);
}

void schedule_grad_value(const Halide::Target &target, GradValuePipeline &pipeline,
                         const Tunables &tunables) {
    if (target.arch != Halide::Target::X86) no_schedule(target);
    x86::schedule_grad_value(target, pipeline, tunables);
}

void schedule_grad_sample(const Halide::Target &target, GradSamplePipeline &pipeline,
                          const Tunables &tunables) {
    if (target.arch != Halide::Target::X86) no_schedule(target);
    x86::schedule_grad_sample(target, pipeline, tunables);
}

void schedule_relayout(const Halide::Target &target, Halide::Func out, const Halide::Var &c,
                       const Halide::Var &h, const Halide::Var &row, const Halide::Var &b) {
    if (target.arch != Halide::Target::X86) no_schedule(target);
    x86::schedule_relayout(target, out, c, h, row, b);
}

}  // namespace msda::schedules
