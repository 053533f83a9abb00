// The CPU decides which compiled target runs: msda installs its own
// halide_can_use_target_features before the first generated call, answering
// from the decision of x86_cpu.h (the CPU's cpuid and xgetbv words) and
// MSDA_X86_TARGET, or on ARM of arm_cpu.h (AT_HWCAP) and MSDA_ARM_TARGET,
// never from Halide's default, which accepts avx512_zen4 code on any CPU it
// does not recognise as a Zen 4.
#pragma once

#include <msda/msda.hpp>

namespace msda::detail {

// Installs the choice (once per process, thread-safe) and throws msda::Error
// when no compiled code may run here: MSDA_X86_TARGET names a target this
// CPU cannot run (the message names what it lacks), or is not a target name.
// Every call runs this before its first generated function.
void require_runnable_target();

// The thread count the generated code uses (set_threads' last count, or
// Halide's default: HL_NUM_THREADS, else one per core).
void set_threads(int threads);
int threads();

}  // namespace msda::detail
