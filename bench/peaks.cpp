#include "peaks.h"

#include <cstdio>
#include <initializer_list>

#if defined(__x86_64__)
#include "x86_cpu.h"
#endif

namespace msda_bench {

namespace {

#if defined(__x86_64__)
namespace x86 = msda::detail::x86;

const char *const kIntelManual =
    "Intel 64 and IA-32 Architectures Optimization Reference Manual: the cache-parameter and execution-port tables "
    "of its Haswell, Skylake, Skylake Server, Ice Lake and Golden Cove chapters";
const char *const kAmdGuide =
    "AMD Software Optimization Guides for family 17h (56305), family 19h (56665, Zen 3; 57647, Zen 4) and Zen 5 "
    "(58455): their load-store and floating-point unit chapters";

struct Family {
    const char *name;
    double fma, l1, l2;  // per cycle at the widest vectors the core runs
    const char *source;
};

// The probe runs the widest vectors the CPU executes of AVX-512, AVX2 with
// FMA and SSE2 (probe_kernels.h), so each entry is for those: SSE on the
// cores without AVX2.
//
// Intel family 6 by model. FMA: two 256-bit FMA units from Haswell on, two
// 512-bit ones on the Xeon Scalable cores (one on some Silver and Bronze
// parts, below the peak, never above it), one fused 512-bit unit on the
// client AVX-512 cores; before Haswell a multiply and an add port (4 lanes
// of SSE). L1: two loads a cycle of the vector width (three 256-bit on
// Golden Cove); L2 to L1 a 64-byte line a cycle from Haswell on.
const Family *intel_family(unsigned model, bool amx) {
    static const Family nehalem{"Nehalem / Westmere", 4, 16, 32, kIntelManual};
    static const Family sandy_bridge{"Sandy Bridge / Ivy Bridge", 4, 32, 32, kIntelManual};
    static const Family haswell{"Haswell / Broadwell / Skylake client", 16, 64, 64, kIntelManual};
    static const Family xeon_avx512{"Xeon Scalable (Skylake-SP to Granite Rapids)", 32, 128, 64, kIntelManual};
    static const Family client_avx512{"Sunny / Willow / Cypress Cove client", 16, 128, 64, kIntelManual};
    static const Family golden_cove{"Golden Cove and later client (P-cores)", 16, 96, 64, kIntelManual};
    // A hypervisor may report any model: AMX exists on the Xeon Scalable
    // cores from Sapphire Rapids on only.
    if (amx) return &xeon_avx512;
    const std::initializer_list<std::pair<std::initializer_list<unsigned>, const Family *>> models = {
        {{0x1a, 0x1e, 0x1f, 0x2e, 0x25, 0x2c, 0x2f}, &nehalem},
        {{0x2a, 0x2d, 0x3a, 0x3e}, &sandy_bridge},
        {{0x3c, 0x3f, 0x45, 0x46, 0x3d, 0x47, 0x4f, 0x56, 0x4e, 0x5e, 0x8e, 0x9e, 0xa5, 0xa6}, &haswell},
        {{0x55, 0x6a, 0x6c, 0x8f, 0xcf, 0xad, 0xae}, &xeon_avx512},
        {{0x7d, 0x7e, 0x8c, 0x8d, 0xa7}, &client_avx512},
        {{0x97, 0x9a, 0xb7, 0xba, 0xbf, 0xaa, 0xac, 0xc5, 0xc6, 0xbd}, &golden_cove},
    };
    for (const auto &[list, family] : models) {
        for (unsigned m : list) {
            if (m == model) return family;
        }
    }
    return nullptr;
}

// AMD by family: Zen and Zen+ have two 128-bit FMA pipes; Zen 2 and Zen 3
// two 256-bit ones; Zen 4 the same two 256-bit pipes, a 512-bit operation
// taking both; Zen 5 two 512-bit ones. L1: two loads a cycle of the
// vector width (Zen 4: two 256-bit or one 512-bit). L2 to L1: 32 bytes a
// cycle up to Zen 4, 64 on Zen 5.
const Family *amd_family(unsigned family, unsigned model, bool avx512) {
    static const Family zen{"Zen / Zen+", 8, 32, 32, kAmdGuide};
    static const Family zen2{"Zen 2", 16, 64, 32, kAmdGuide};
    static const Family zen3{"Zen 3", 16, 64, 32, kAmdGuide};
    static const Family zen4{"Zen 4", 16, 64, 32, kAmdGuide};
    static const Family zen5{"Zen 5", 32, 128, 64, kAmdGuide};
    if (family == 0x17) return model < 0x30 ? &zen : &zen2;
    if (family == 0x19) return avx512 ? &zen4 : &zen3;
    if (family == 0x1a) return &zen5;
    return nullptr;
}

// What no x86 core of an ISA is documented to exceed: two FMA units and
// two loads (three at 256 bits) a cycle of the widest vector.
Family generic(const std::string &isa) {
    const char *source = "the widest any x86 core with these vectors is documented to reach (Intel and AMD manuals)";
    if (isa == "avx512") return {"unknown x86-64 with AVX-512 (generic bound)", 32, 128, 64, source};
    if (isa == "avx2") return {"unknown x86-64 with AVX2 (generic bound)", 16, 96, 64, source};
    return {"unknown x86-64, SSE2 (generic bound)", 8, 48, 64, source};
}

#endif

std::string text(double x) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%.3g", x);
    return buffer;
}

}  // namespace

#if defined(__aarch64__)
// No table of ARM cores yet: a ceiling no 64-bit ARM core is documented to
// exceed with NEON (four 128-bit FMA pipes and three 128-bit loads a cycle:
// Neoverse V1 and V2; 64 bytes a cycle from L2), checked only from above,
// since ARM cores reach from a quarter of it (Cortex-A55) to all of it.
CorePeaks core_peaks(const std::string &) {
    return {"unknown 64-bit ARM, NEON (generic ceiling)", 16, 48, 64,
            "the widest any 64-bit ARM core with NEON is documented to reach (Arm Neoverse V1 and V2 software "
            "optimization guides)",
            false};
}
#else
CorePeaks core_peaks(const std::string &isa) {
    const x86::CpuWords words = x86::read_this_cpu();
    const x86::Signature cpu = x86::signature(words);
    const bool avx512 = (words.get(7).ebx >> 16) & 1;
    const bool amx = (words.get(7).edx >> 24) & 1;
    const Family *known = nullptr;
    if (cpu.vendor == "GenuineIntel" && cpu.family == 6) known = intel_family(cpu.model, amx);
    if (cpu.vendor == "AuthenticAMD") known = amd_family(cpu.family, cpu.model, avx512);
    const Family family = known != nullptr ? *known : generic(isa);
    return {family.name, family.fma, family.l1, family.l2, family.source};
}
#endif

ProbeVerdict check_probe(const MachineRates &rates) {
    ProbeVerdict verdict;
    verdict.peaks = core_peaks(rates.isa);
    const double cycles = rates.clock_hz * rates.threads;  // core-cycles a second, all threads
    auto add = [&](const char *name, double rate, double peak, const char *unit, bool check_low) {
        RateCheck check{name, cycles > 0 ? rate / cycles : 0, peak, unit, ""};
        if (peak > 0 && check.per_core_cycle > peak * kAbovePeakTolerance) {
            check.problem = std::string("impossible: ") + text(check.per_core_cycle) + " " + unit + " a core, above " +
                            verdict.peaks.microarchitecture + "'s peak of " + text(peak);
        } else if (peak > 0 && check_low && verdict.peaks.reached_by_every_core &&
                   check.per_core_cycle < peak * kFarBelowPeak) {
            check.problem = std::string("far below the peak: ") + text(check.per_core_cycle) + " " + unit +
                            " a core, under a third of " + verdict.peaks.microarchitecture + "'s " + text(peak) +
                            " (the probe did not reach this machine's limit)";
        }
        verdict.checks.push_back(check);
    };
    // The floor prices multiply-adds at the FMA rate and loads at the L1
    // rate: both are checked both ways. L2 is reported, and only checked
    // against its ceiling.
    add("FMA", rates.fma_flops_per_s, verdict.peaks.fma_per_cycle, "FMA/cycle", true);
    add("L1 loads", rates.l1_bytes_per_s, verdict.peaks.l1_bytes_per_cycle, "B/cycle", true);
    add("L2 loads", rates.l2_bytes_per_s, verdict.peaks.l2_bytes_per_cycle, "B/cycle", false);
    // No cache is faster than the one above it (10% for noise).
    auto below = [&](const char *name, double rate, const char *above_name, double above) {
        if (rate > 1.1 * above) {
            verdict.checks.push_back({name, 0, 0, "", std::string("impossible: faster than ") + above_name});
        }
    };
    below("L2 loads", rates.l2_bytes_per_s, "L1", rates.l1_bytes_per_s);
    below("L3 stream", rates.l3_bytes_per_s, "L2", rates.l2_bytes_per_s);
    below("DRAM stream", rates.dram_bytes_per_s, "L3", rates.l3_bytes_per_s);
    if (rates.clock_hz < 0.4e9 || rates.clock_hz > 7e9) {
        verdict.checks.push_back({"clock", rates.clock_hz / 1e9, 0, "GHz",
                                  "implausible clock of " + text(rates.clock_hz / 1e9) + " GHz"});
    }
    for (const RateCheck &check : verdict.checks) {
        if (check.problem.empty()) continue;
        verdict.refusal += (verdict.refusal.empty() ? "" : "; ") + check.name + " " + check.problem;
    }
    return verdict;
}

}  // namespace msda_bench
