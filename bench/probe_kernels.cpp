// The probe's inner loops for one vector ISA: bench/CMakeLists.txt compiles
// this file once per ISA of the family it builds for: on x86-64 three
// times, with MSDA_PROBE_ISA 3 (AVX-512: -mavx512f -mfma), 2 (AVX2: -mavx2
// -mfma) and 1 (SSE2, the x86-64 baseline); on 64-bit ARM once, with 4
// (NEON, which every aarch64 core has, its multiply-adds fused). Each
// defines its own kProbeKernels*. Every loop keeps its accumulators in
// registers (the ISA's vector registers minus the operands: 32 zmm, 16 ymm
// or xmm, 32 NEON q registers), since a spill to the stack would measure
// the spill instead of the machine.
#include <algorithm>
#include <cstring>

#include "probe_kernels.h"

#ifndef MSDA_PROBE_ISA
#error "MSDA_PROBE_ISA must be 1 (SSE2), 2 (AVX2), 3 (AVX-512) or 4 (NEON)"
#endif

namespace msda_bench {
namespace {

#if MSDA_PROBE_ISA == 3
constexpr int kVectorBytes = 64;
constexpr int kChains = 16;       // multiply-add chains: 16 of 32 zmm registers
constexpr int kAccumulators = 16;  // load sums
#define MSDA_PROBE_KERNELS kProbeKernelsAvx512
#define MSDA_PROBE_NAME "avx512"
#elif MSDA_PROBE_ISA == 2
constexpr int kVectorBytes = 32;
constexpr int kChains = 12;  // 12 of 16 ymm registers, two hold the operands
constexpr int kAccumulators = 8;
#define MSDA_PROBE_KERNELS kProbeKernelsAvx2
#define MSDA_PROBE_NAME "avx2"
#elif MSDA_PROBE_ISA == 4
constexpr int kVectorBytes = 16;
constexpr int kChains = 24;  // 24 of 32 q registers: two hold the operands
constexpr int kAccumulators = 16;
#define MSDA_PROBE_KERNELS kProbeKernelsNeon
#define MSDA_PROBE_NAME "neon"
#else
constexpr int kVectorBytes = 16;
constexpr int kChains = 12;
constexpr int kAccumulators = 8;
#define MSDA_PROBE_KERNELS kProbeKernelsSse2
#define MSDA_PROBE_NAME "sse2"
#endif

// The register class of a vector in an asm operand.
#if defined(__aarch64__)
#define MSDA_VECTOR_REGISTER "+w"
#else
#define MSDA_VECTOR_REGISTER "+x"
#endif

typedef float Vec __attribute__((vector_size(kVectorBytes)));
// Rows may start anywhere a float can.
typedef float VecU __attribute__((vector_size(kVectorBytes), aligned(4)));
typedef float Vec16 __attribute__((vector_size(16), aligned(4)));
constexpr int kLanes = kVectorBytes / 4;

float horizontal_sum(Vec v) {
    float sum = 0.0f;
    for (int i = 0; i < kLanes; ++i) sum += v[i];
    return sum;
}

Vec splat(float x) { return Vec{} + x; }

// The chains as named variables, not an array: GCC keeps an array of this
// size (a KiB of zmm) on the stack and the kernel then measures the stack.
#define MSDA_CHAINS_12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#if MSDA_PROBE_ISA == 3
#define MSDA_CHAINS(X) MSDA_CHAINS_12(X) X(12) X(13) X(14) X(15)
#elif MSDA_PROBE_ISA == 4
#define MSDA_CHAINS(X) \
    MSDA_CHAINS_12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#else
#define MSDA_CHAINS(X) MSDA_CHAINS_12(X)
#endif
#define MSDA_COUNT(i) +1
static_assert(0 MSDA_CHAINS(MSDA_COUNT) == kChains);

// acc = acc * m + a converges to a / (1 - m): the values stay normal and
// finite however long it runs. Contracted to one FMA where the ISA has it
// (-ffp-contract=fast).
__attribute__((noinline)) float fma_kernel(long long iterations, float seed) {
    const Vec m = splat(0.999f), a = splat(0.001f);
#define MSDA_START(i) Vec acc##i = splat(seed + static_cast<float>(i));
#define MSDA_STEP(i) acc##i = acc##i * m + a;
#define MSDA_ADD(i) total += acc##i;
    MSDA_CHAINS(MSDA_START)
    for (long long n = 0; n < iterations; ++n) {
        // Keeps the compiler from collapsing rounds of the loop.
        __asm__ volatile("" : MSDA_VECTOR_REGISTER(acc0));
        MSDA_CHAINS(MSDA_STEP)
    }
    Vec total = {};
    MSDA_CHAINS(MSDA_ADD)
    return horizontal_sum(total);
}

__attribute__((noinline)) float sum_kernel(const char *bytes, std::size_t size, long long passes) {
    const Vec *data = reinterpret_cast<const Vec *>(bytes);
    const std::size_t count = size / sizeof(Vec);
    Vec acc[kAccumulators] = {};
    for (long long p = 0; p < passes; ++p) {
        // The compiler must assume the data changed: each pass loads again.
        __asm__ volatile("" : "+r"(data));
        for (std::size_t i = 0; i + kAccumulators <= count; i += kAccumulators) {
#pragma GCC unroll 16
            for (int j = 0; j < kAccumulators; ++j) acc[j] += data[i + j];
        }
    }
    Vec total = {};
    for (const Vec &v : acc) total += v;
    return horizontal_sum(total);
}

// Rows of RowBytes (a multiple of the vector), 8 rows a round, fully
// unrolled.
template <int RowBytes>
__attribute__((noinline)) float sum_rows_fixed(const char *base, const std::int64_t *offsets, std::size_t count) {
    constexpr int kChunks = RowBytes / kVectorBytes;
    Vec acc[kAccumulators] = {};
    std::size_t i = 0;
    for (; i + 8 <= count; i += 8) {
#pragma GCC unroll 8
        for (int r = 0; r < 8; ++r) {
            const VecU *row = reinterpret_cast<const VecU *>(base + offsets[i + r]);
#pragma GCC unroll 16
            for (int c = 0; c < kChunks; ++c) acc[(r * kChunks + c) % kAccumulators] += row[c];
        }
    }
    for (; i < count; ++i) {
        const VecU *row = reinterpret_cast<const VecU *>(base + offsets[i]);
        for (int c = 0; c < kChunks; ++c) acc[c % kAccumulators] += row[c];
    }
    Vec total = {};
    for (const Vec &v : acc) total += v;
    return horizontal_sum(total);
}

// Any row size: whole vectors, the last one ending at the row's end
// (overlapping the one before), so that exactly the row's bytes are read.
__attribute__((noinline)) float sum_rows_any(const char *base, const std::int64_t *offsets, std::size_t count,
                                             std::size_t row_bytes) {
    Vec acc[4] = {};
    float scalar = 0.0f;
    for (std::size_t i = 0; i < count; ++i) {
        const char *row = base + offsets[i];
        Vec &a = acc[i % 4];
        if (row_bytes >= sizeof(Vec)) {
            for (std::size_t b = 0; b < row_bytes; b += sizeof(Vec))
                a += *reinterpret_cast<const VecU *>(row + std::min(b, row_bytes - sizeof(Vec)));
        } else if (row_bytes >= sizeof(Vec16)) {
            Vec16 part = {};
            for (std::size_t b = 0; b < row_bytes; b += sizeof(Vec16))
                part += *reinterpret_cast<const Vec16 *>(row + std::min(b, row_bytes - sizeof(Vec16)));
            for (int k = 0; k < 4; ++k) a[k] += part[k];
        } else {
            for (std::size_t b = 0; b + sizeof(float) <= row_bytes; b += sizeof(float)) {
                float x;
                std::memcpy(&x, row + b, sizeof(float));
                scalar += x;
            }
        }
    }
    return horizontal_sum(acc[0] + acc[1] + acc[2] + acc[3]) + scalar;
}

float sum_rows(const char *base, const std::int64_t *offsets, std::size_t count, std::size_t row_bytes) {
    switch (row_bytes) {
        case 64: return sum_rows_fixed<64>(base, offsets, count);
        case 128: return sum_rows_fixed<128>(base, offsets, count);
        case 192: return sum_rows_fixed<192>(base, offsets, count);
        case 256: return sum_rows_fixed<256>(base, offsets, count);
        default: return sum_rows_any(base, offsets, count, row_bytes);
    }
}

}  // namespace

extern const ProbeKernels MSDA_PROBE_KERNELS = {MSDA_PROBE_NAME,   kVectorBytes, &fma_kernel,
                                                kChains * kLanes,  &sum_kernel,  &sum_rows};

}  // namespace msda_bench
