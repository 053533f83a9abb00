// The machine probe's inner loops, compiled once per vector ISA
// (probe_kernels.cpp, built three times on x86-64 and once on ARM by
// bench/CMakeLists.txt) so that the
// probe measures with the widest vectors the CPU it runs on executes,
// whatever CPU built it. probe_kernels() picks them from the CPU's own
// feature bits (GCC's __builtin_cpu_supports, which also checks that the OS
// saves the registers); on ARM it is NEON, which every aarch64 core runs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msda_bench {

struct ProbeKernels {
    const char *isa;        // "avx512", "avx2" or "sse2"; "neon" on ARM
    int vector_bytes;       // of the loads and FMAs: 64, 32 or 16
    // `iterations` rounds of independent multiply-adds on float32 vectors
    // (fused where the ISA has FMA: AVX2, AVX-512 and NEON; a multiply and
    // an add on SSE2), fmas_per_iteration lane-operations a round.
    float (*fma)(long long iterations, float seed);
    long long fmas_per_iteration;
    // Sums `bytes` (a multiple of 16 vectors) at `data`, `passes` times.
    float (*sum)(const char *data, std::size_t bytes, long long passes);
    // Sums the first row_bytes bytes of the rows at base + offsets[i].
    float (*sum_rows)(const char *base, const std::int64_t *offsets, std::size_t count, std::size_t row_bytes);
};

// The widest the CPU runs.
const ProbeKernels &probe_kernels();

// One per ISA of the family (probe_kernels.cpp).
#if defined(__aarch64__)
extern const ProbeKernels kProbeKernelsNeon;
#else
extern const ProbeKernels kProbeKernelsAvx512, kProbeKernelsAvx2, kProbeKernelsSse2;
#endif

}  // namespace msda_bench
