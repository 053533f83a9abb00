// Which of msda's x86-64 targets a CPU can run, decided from its cpuid and
// xgetbv words alone. A pure function of the words, so that it is tested on
// words recorded on real CPUs (tests/cpuid/) as well as run on this one; no
// Halide here (cpu_dispatch.cpp connects it to the generated code).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "msda_cpu_tiers.h"

namespace msda::detail::x86 {

// What one cpuid instruction returned for (leaf, subleaf).
struct CpuidLeaf {
    std::uint32_t leaf = 0, subleaf = 0;
    std::uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
};

// The words the decision reads: cpuid leaves as the CPU returned them, and
// XCR0 (the register state the OS saves and restores) as xgetbv returned it.
struct CpuWords {
    std::vector<CpuidLeaf> leaves;
    // Absent when xgetbv could not run (no OSXSAVE) or was not recorded;
    // then no AVX state counts as enabled.
    std::optional<std::uint64_t> xcr0;

    // What cpuid returns for a leaf, zeros for a leaf above the CPU's
    // highest basic or extended leaf or not recorded.
    CpuidLeaf get(std::uint32_t leaf, std::uint32_t subleaf = 0) const;
};

// The tiers msda compiles for x86-64, worst first (schedules/cpu_tiers.cmake:
// x86_64, avx2, avx512_skylake, avx512_zen4). Their names are those of
// MSDA_X86_TARGET.
enum class Target {
#define MSDA_TIER(id, name) id,
    MSDA_FOR_EACH_X86_TIER(MSDA_TIER)
#undef MSDA_TIER
};
#define MSDA_TIER(id, name) +1
constexpr int kTargetCount = 0 MSDA_FOR_EACH_X86_TIER(MSDA_TIER);
#undef MSDA_TIER
const char *target_name(Target target);
std::optional<Target> parse_target(std::string_view name);

// The CPU features the code of a target may contain, by name (as in the
// Intel SDM's cpuid tables, and iced-x86's CpuidFeature names where those
// exist), each tier's list including the tiers below it.
std::vector<std::string> required_features(Target target);
// Those of required_features(target) that this CPU lacks; empty when it can
// run the target's code.
std::vector<std::string> missing_features(const CpuWords &words, Target target);
// The best tier whose every required feature the CPU has.
Target best_target(const CpuWords &words);

// Vendor, family, model and stepping (cpuid leaf 0 and 1, the extended
// family and model folded in as the vendors' manuals say).
struct Signature {
    std::string vendor;  // "GenuineIntel", "AuthenticAMD", ...
    unsigned family = 0, model = 0, stepping = 0;
};
Signature signature(const CpuWords &words);

// "GenuineIntel family 0x6 model 0x8f stepping 8: Intel(R) Xeon(R) ...".
std::string describe_cpu(const CpuWords &words);

// The words of the CPU this runs on (every leaf the decision and
// describe_cpu read); on a CPU that is not x86-64, no leaves.
CpuWords read_this_cpu();

// The recorded format (tests/cpuid/*.txt): one line per leaf,
//   leaf 0x00000007 sub 0: eax=00000000 ebx=219c07ab ecx=0040069c edx=88000010
// and "xgetbv 0: eax=00000207 edx=00000000"; lines starting with # are
// comments. parse_words throws std::invalid_argument naming the bad line.
std::string format_words(const CpuWords &words);
CpuWords parse_words(std::string_view text);

}  // namespace msda::detail::x86
