// Which of msda's 64-bit ARM targets a CPU can run, decided from the
// hardware capability words Linux gives every process (getauxval(AT_HWCAP)
// and AT_HWCAP2). A pure function of the words, tested on recorded words as
// well as run on this CPU; no Halide here (cpu_dispatch.cpp connects it to
// the generated code). The counterpart of x86_cpu.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msda_cpu_tiers.h"

namespace msda::detail::arm {

struct CpuWords {
    bool read = false;  // false where they could not be read (not aarch64 Linux)
    std::uint64_t hwcap = 0, hwcap2 = 0;
};

// The tiers msda compiles for 64-bit ARM, worst first
// (schedules/cpu_tiers.cmake); their names are those of MSDA_ARM_TARGET.
// arm-64: ARMv8-A with NEON (Advanced SIMD), Halide's arm-64-linux.
// arm_fp16: also ARMv8.2's half-precision arithmetic, scalar and vector
// (Halide's arm_fp16 feature), for float16 storage.
enum class Target {
#define MSDA_TIER(id, name) id,
    MSDA_FOR_EACH_ARM_TIER(MSDA_TIER)
#undef MSDA_TIER
};
#define MSDA_TIER(id, name) +1
constexpr int kTargetCount = 0 MSDA_FOR_EACH_ARM_TIER(MSDA_TIER);
#undef MSDA_TIER
const char *target_name(Target target);
std::optional<Target> parse_target(std::string_view name);

// The capabilities a target's code may use, by the names Linux's
// /proc/cpuinfo prints (fp, asimd, fphp, asimdhp), each tier's list
// including the tiers below it.
std::vector<std::string> required_features(Target target);
std::vector<std::string> missing_features(const CpuWords &words, Target target);
// The best tier whose every required capability the CPU has.
Target best_target(const CpuWords &words);

// "aarch64, hwcap 0x... (fp asimd ...)".
std::string describe_cpu(const CpuWords &words);

CpuWords read_this_cpu();

// "hwcap 0x00000000000000ff\nhwcap2 0x0000000000000000\n", and back;
// parse_words throws std::invalid_argument naming the bad line.
std::string format_words(const CpuWords &words);
CpuWords parse_words(std::string_view text);

}  // namespace msda::detail::arm
