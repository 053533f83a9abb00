// The two ways msda_scatter_probe sums grad_value (scatter_probe.cpp),
// compiled once per vector ISA of the family (sse2 and avx2 on x86-64, NEON
// on ARM) with -ffp-contract=off, so that both sum each element in the same
// order with the same roundings and their results can be compared bit for
// bit. Both take one (batch, head) slice's contributions w * g[q] to value
// rows, in the order msda's by-query scatter adds them (query, level, point,
// corner), and C_h = 32.
#pragma once

#include <cstddef>
#include <cstdint>

namespace msda_bench {

// One slice's contributions: contribution i adds weight[i] * g(query[i]) to
// row[i]. g(q) is the C_h = 32 floats at grad_output + q * grad_stride; row r
// of the slice is the 32 floats at grad_value + r * value_stride.
struct SliceContributions {
    const std::int32_t *row, *query;
    const float *weight;
    std::size_t count;
    std::int64_t rows;  // L
};

struct ScatterKernels {
    const char *isa;
    // grad_value's rows zeroed, then each contribution added into its row
    // in turn (a read-modify-write of the row), as msda's CPU scatter does.
    void (*read_modify_write)(const SliceContributions &slice, const float *grad_output, std::int64_t grad_stride,
                              float *grad_value, std::int64_t value_stride);
    // The contributions sorted by row with a stable counting sort (their
    // order within a row kept), then each row summed in registers from 0 and
    // written once; a row no contribution reaches is written as zeros.
    // `work` holds 2 * (rows + 1) int32 and count int32 and floats (scratch).
    void (*sort_and_gather)(const SliceContributions &slice, const float *grad_output, std::int64_t grad_stride,
                            float *grad_value, std::int64_t value_stride, void *work);
};

constexpr std::size_t scatter_work_bytes(std::int64_t rows, std::size_t count) {
    return (2 * (static_cast<std::size_t>(rows) + 1)) * sizeof(std::int32_t) +
           count * (sizeof(std::int32_t) + sizeof(float));
}

// The widest the CPU runs.
const ScatterKernels &scatter_kernels();

#if defined(__aarch64__)
extern const ScatterKernels kScatterKernelsNeon;
#else
extern const ScatterKernels kScatterKernelsAvx2, kScatterKernelsSse2;
#endif

}  // namespace msda_bench
