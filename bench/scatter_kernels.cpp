// msda_scatter_probe's two grad_value sums (scatter_kernels.h), built once
// per ISA: MSDA_SCATTER_ISA 1 (sse2) or 2 (avx2) on x86-64, 4 (NEON) on ARM.
// Plain loops over the 32 channels, which the compiler vectorizes for the
// ISA it is given; -ffp-contract=off keeps each w * g a product rounded
// before it is added, in both.
#include <cstring>

#include "scatter_kernels.h"

namespace msda_bench {

namespace {

constexpr int kChannels = 32;

void read_modify_write(const SliceContributions &slice, const float *grad_output, std::int64_t grad_stride,
                       float *grad_value, std::int64_t value_stride) {
    for (std::int64_t r = 0; r < slice.rows; ++r) {
        std::memset(grad_value + r * value_stride, 0, kChannels * sizeof(float));
    }
    for (std::size_t i = 0; i < slice.count; ++i) {
        float *out = grad_value + slice.row[i] * value_stride;
        const float *g = grad_output + slice.query[i] * grad_stride;
        const float w = slice.weight[i];
        for (int c = 0; c < kChannels; ++c) out[c] += w * g[c];
    }
}

void sort_and_gather(const SliceContributions &slice, const float *grad_output, std::int64_t grad_stride,
                     float *grad_value, std::int64_t value_stride, void *work) {
    const std::int64_t rows = slice.rows;
    auto *start = static_cast<std::int32_t *>(work);  // rows + 1: where each row's run begins
    std::int32_t *cursor = start + rows + 1;           // rows + 1: the next free place of each run
    auto *query = cursor + rows + 1;
    auto *weight = reinterpret_cast<float *>(query + slice.count);
    std::memset(cursor, 0, (rows + 1) * sizeof(std::int32_t));
    for (std::size_t i = 0; i < slice.count; ++i) ++cursor[slice.row[i] + 1];
    start[0] = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
        start[r + 1] = start[r] + cursor[r + 1];
        cursor[r] = start[r];
    }
    for (std::size_t i = 0; i < slice.count; ++i) {
        const std::int32_t at = cursor[slice.row[i]]++;
        query[at] = slice.query[i];
        weight[at] = slice.weight[i];
    }
    for (std::int64_t r = 0; r < rows; ++r) {
        float sum[kChannels] = {};
        for (std::int32_t k = start[r]; k < start[r + 1]; ++k) {
            const float *g = grad_output + static_cast<std::int64_t>(query[k]) * grad_stride;
            const float w = weight[k];
            for (int c = 0; c < kChannels; ++c) sum[c] += w * g[c];
        }
        std::memcpy(grad_value + r * value_stride, sum, sizeof(sum));
    }
}

}  // namespace

#if MSDA_SCATTER_ISA == 4
extern const ScatterKernels kScatterKernelsNeon = {"neon", &read_modify_write, &sort_and_gather};
#elif MSDA_SCATTER_ISA == 2
extern const ScatterKernels kScatterKernelsAvx2 = {"avx2", &read_modify_write, &sort_and_gather};
#else
extern const ScatterKernels kScatterKernelsSse2 = {"sse2", &read_modify_write, &sort_and_gather};
#endif

}  // namespace msda_bench
