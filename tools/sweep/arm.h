// `msda sweep --target arm`: a candidate compiled ahead of time for 64-bit
// ARM, linked by the cross compiler with arm_runner.cpp, and run under
// qemu-aarch64 on the reference check's problems: compile success and
// correctness, not time.
#pragma once

#include <string>

#include "kernels.h"

namespace msda_sweep {

// Whether the cross compiler and qemu are on PATH; if not, why.
bool arm_emulation_available(std::string &why);

class EmulatedArm {
public:
    // Compiles and links the candidate in `folder` (its own scratch folder).
    EmulatedArm(const Halide::Target &target, const Variant &variant, const std::string &folder);
    // Hands the tensors to the runner under qemu and reads its outputs back;
    // throws what the runner or qemu reports.
    void run(Tensors &tensors) const;
    double compile_seconds() const { return compile_seconds_; }

private:
    std::string folder_;
    double compile_seconds_ = 0;
};

}  // namespace msda_sweep
