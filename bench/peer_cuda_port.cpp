// The cuda_port peer: the algorithm of Deformable DETR's CUDA kernels
// (ms_deformable_im2col_bilinear for the forward, ms_deformable_col2im_bilinear
// for the backward) ported plainly to C++ and OpenMP, the way one would port
// them without redesigning anything:
//   - forward: one task per (b, q, h), statically scheduled; each task walks
//     its (l, p) samples, and for a sample inside the zeros-mode gate
//     interpolates the C_h channels, one channel at a time over the four
//     corners with the kernel's corner-inside checks, and accumulates
//     attention * sample into its output row;
//   - backward: the same tasks and the same walk; per sample it reduces
//     grad_attention_weights and the two location gradients over the channels
//     and scatters attention * corner weight * grad_output into grad_value
//     with atomic adds (tasks of different queries share value rows).
// Plain scalar code with the kernels' pointer arithmetic: no intrinsics, no
// tiling, no layout changes; -O3 is free to vectorize what it can.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "peers.h"

namespace msda_bench {

namespace {

// Where one sample falls on its level: the lower corner, the interpolation
// weights and the pointer offsets of the four corners (CUDA's h_low_ptr_offset
// and friends), or inside = false when the gate rejects it.
struct Sample {
    bool inside = false;
    std::int64_t h_low = 0, w_low = 0, h_high = 0, w_high = 0;
    float lh = 0.0f, lw = 0.0f, hh = 0.0f, hw = 0.0f;  // fractions and their complements
    std::int64_t h_low_offset = 0, h_high_offset = 0, w_low_offset = 0, w_high_offset = 0;
};

// loc_w, loc_h normalized to [0, 1]; align_corners = false: h_im = y*H - 0.5.
// The gate -1 < w_im < W, -1 < h_im < H also rejects NaN and infinities.
inline Sample locate(float loc_w, float loc_h, std::int64_t height, std::int64_t width, std::int64_t row_stride,
                     std::int64_t column_stride) {
    Sample s;
    const float h_im = loc_h * static_cast<float>(height) - 0.5f;
    const float w_im = loc_w * static_cast<float>(width) - 0.5f;
    if (!(h_im > -1.0f && w_im > -1.0f && h_im < static_cast<float>(height) && w_im < static_cast<float>(width)))
        return s;
    s.inside = true;
    const float h_floor = std::floor(h_im), w_floor = std::floor(w_im);
    s.h_low = static_cast<std::int64_t>(h_floor);
    s.w_low = static_cast<std::int64_t>(w_floor);
    s.h_high = s.h_low + 1;
    s.w_high = s.w_low + 1;
    s.lh = h_im - h_floor;
    s.lw = w_im - w_floor;
    s.hh = 1.0f - s.lh;
    s.hw = 1.0f - s.lw;
    s.h_low_offset = s.h_low * row_stride;
    s.h_high_offset = s.h_low_offset + row_stride;
    s.w_low_offset = s.w_low * column_stride;
    s.w_high_offset = s.w_low_offset + column_stride;
    return s;
}

// What both kernels read: the problem's sizes and its input tensors.
struct Inputs {
    struct Sizes {
        std::int64_t queries, heads, channels, levels, points, value_length;
        // value is (B, L, N_h, C_h): one pixel row of the map is N_h * C_h floats.
        std::int64_t column_stride;
        std::int64_t tasks;  // one per (b, q, h)
    } sizes;
    struct Tensors {
        const float *value, *sampling_locations, *attention_weights;
        const std::int32_t *spatial_shapes, *level_start_index;
    } tensors;

    explicit Inputs(const Problem &p)
        : sizes{p.shape.queries,
                p.shape.heads,
                p.shape.channels,
                static_cast<std::int64_t>(p.shape.levels.size()),
                p.shape.points,
                p.shape.value_length(),
                p.shape.heads * p.shape.channels,
                p.shape.batch * p.shape.queries * p.shape.heads},
          tensors{p.value.data(), p.sampling_locations.data(), p.attention_weights.data(), p.spatial_shapes.data(),
                  p.level_start_index.data()} {}
};

class CudaPortPeer final : public Peer {
public:
    CudaPortPeer(const Problem &problem, int threads)
        : problem_(problem), threads_(std::max(threads, 1)) {
        const Shape &shape = problem_.shape;
        output_.resize(shape.batch * shape.queries * shape.heads * shape.channels);
        grad_value_.resize(problem_.value.size());
        grad_sampling_locations_.resize(problem_.sampling_locations.size());
        grad_attention_weights_.resize(problem_.attention_weights.size());
    }

    const char *name() const override { return "cuda_port"; }

    void forward() override {
        const Inputs in(problem_);
        // Plain locals, not structured bindings: clang 14 cannot capture
        // those in an OpenMP region.
        const std::int64_t queries = in.sizes.queries, heads = in.sizes.heads, channels = in.sizes.channels,
                           levels = in.sizes.levels, points = in.sizes.points, value_length = in.sizes.value_length,
                           column_stride = in.sizes.column_stride, tasks = in.sizes.tasks;
        const float *const value = in.tensors.value, *const sampling_locations = in.tensors.sampling_locations,
                           *const attention_weights = in.tensors.attention_weights;
        const std::int32_t *const spatial_shapes = in.tensors.spatial_shapes,
                           *const level_start_index = in.tensors.level_start_index;
        float *const output = output_.data();

#pragma omp parallel for schedule(static) num_threads(threads_)
        for (std::int64_t task = 0; task < tasks; ++task) {
            // task = (b * N_q + q) * N_h + h, so the task's samples and its
            // output row are contiguous at task * (N_l * N_p) and task * C_h.
            const std::int64_t b = task / (queries * heads);
            const std::int64_t h = task % heads;
            const float *loc_ptr = sampling_locations + task * levels * points * 2;
            const float *attn_ptr = attention_weights + task * levels * points;
            float *const out_ptr = output + task * channels;
            for (std::int64_t c = 0; c < channels; ++c) out_ptr[c] = 0.0f;

            for (std::int64_t l = 0; l < levels; ++l) {
                const std::int64_t height = spatial_shapes[2 * l], width = spatial_shapes[2 * l + 1];
                const std::int64_t row_stride = width * column_stride;
                // value[b, start_l, h, 0]: the level's base for this head.
                const float *const value_ptr =
                    value + (b * value_length + level_start_index[l]) * column_stride + h * channels;
                for (std::int64_t p = 0; p < points; ++p, loc_ptr += 2, ++attn_ptr) {
                    const Sample s = locate(loc_ptr[0], loc_ptr[1], height, width, row_stride, column_stride);
                    if (!s.inside) continue;
                    const float weight = *attn_ptr;
                    const float w1 = s.hh * s.hw, w2 = s.hh * s.lw, w3 = s.lh * s.hw, w4 = s.lh * s.lw;
                    for (std::int64_t c = 0; c < channels; ++c) {
                        float v1 = 0.0f, v2 = 0.0f, v3 = 0.0f, v4 = 0.0f;
                        if (s.h_low >= 0 && s.w_low >= 0)
                            v1 = value_ptr[s.h_low_offset + s.w_low_offset + c];
                        if (s.h_low >= 0 && s.w_high <= width - 1)
                            v2 = value_ptr[s.h_low_offset + s.w_high_offset + c];
                        if (s.h_high <= height - 1 && s.w_low >= 0)
                            v3 = value_ptr[s.h_high_offset + s.w_low_offset + c];
                        if (s.h_high <= height - 1 && s.w_high <= width - 1)
                            v4 = value_ptr[s.h_high_offset + s.w_high_offset + c];
                        out_ptr[c] += weight * (w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4);
                    }
                }
            }
        }
    }

    // The backward needs nothing beyond the inputs.
    void prepare_backward() override {}

    void backward() override {
        const Inputs in(problem_);
        // Plain locals, not structured bindings: clang 14 cannot capture
        // those in an OpenMP region.
        const std::int64_t queries = in.sizes.queries, heads = in.sizes.heads, channels = in.sizes.channels,
                           levels = in.sizes.levels, points = in.sizes.points, value_length = in.sizes.value_length,
                           column_stride = in.sizes.column_stride, tasks = in.sizes.tasks;
        const float *const value = in.tensors.value, *const sampling_locations = in.tensors.sampling_locations,
                           *const attention_weights = in.tensors.attention_weights;
        const std::int32_t *const spatial_shapes = in.tensors.spatial_shapes,
                           *const level_start_index = in.tensors.level_start_index;
        const float *const grad_output = problem_.grad_output.data();
        float *const grad_value = grad_value_.data();
        float *const grad_sampling_locations = grad_sampling_locations_.data();
        float *const grad_attention_weights = grad_attention_weights_.data();

        // grad_value is scattered into, so it starts from zero; the other two
        // gradients are written once per sample below.
        const std::int64_t grad_value_size = static_cast<std::int64_t>(grad_value_.size());
#pragma omp parallel for schedule(static) num_threads(threads_)
        for (std::int64_t i = 0; i < grad_value_size; ++i) grad_value[i] = 0.0f;

#pragma omp parallel for schedule(static) num_threads(threads_)
        for (std::int64_t task = 0; task < tasks; ++task) {
            const std::int64_t b = task / (queries * heads);
            const std::int64_t h = task % heads;
            const std::int64_t sample_base = task * levels * points;
            const float *loc_ptr = sampling_locations + sample_base * 2;
            const float *attn_ptr = attention_weights + sample_base;
            float *grad_loc_ptr = grad_sampling_locations + sample_base * 2;
            float *grad_attn_ptr = grad_attention_weights + sample_base;
            const float *const top_grad = grad_output + task * channels;

            for (std::int64_t l = 0; l < levels; ++l) {
                const std::int64_t height = spatial_shapes[2 * l], width = spatial_shapes[2 * l + 1];
                const std::int64_t row_stride = width * column_stride;
                const std::int64_t level_base =
                    (b * value_length + level_start_index[l]) * column_stride + h * channels;
                const float *const value_ptr = value + level_base;
                float *const grad_value_ptr = grad_value + level_base;
                for (std::int64_t p = 0; p < points;
                     ++p, loc_ptr += 2, ++attn_ptr, grad_loc_ptr += 2, ++grad_attn_ptr) {
                    const Sample s = locate(loc_ptr[0], loc_ptr[1], height, width, row_stride, column_stride);
                    if (!s.inside) {
                        grad_loc_ptr[0] = 0.0f;
                        grad_loc_ptr[1] = 0.0f;
                        *grad_attn_ptr = 0.0f;
                        continue;
                    }
                    const float weight = *attn_ptr;
                    const float w1 = s.hh * s.hw, w2 = s.hh * s.lw, w3 = s.lh * s.hw, w4 = s.lh * s.lw;
                    // Sums over the channels of g * S, g * dS/dh_im, g * dS/dw_im
                    // (the CUDA kernel reduces the same per-channel terms across
                    // its threads).
                    float grad_attn = 0.0f, grad_h = 0.0f, grad_w = 0.0f;
                    for (std::int64_t c = 0; c < channels; ++c) {
                        const float g = top_grad[c];
                        const float top_grad_value = weight * g;
                        float grad_h_weight = 0.0f, grad_w_weight = 0.0f;
                        float v1 = 0.0f, v2 = 0.0f, v3 = 0.0f, v4 = 0.0f;
                        if (s.h_low >= 0 && s.w_low >= 0) {
                            const std::int64_t ptr1 = s.h_low_offset + s.w_low_offset + c;
                            v1 = value_ptr[ptr1];
                            grad_h_weight -= s.hw * v1;
                            grad_w_weight -= s.hh * v1;
#pragma omp atomic
                            grad_value_ptr[ptr1] += w1 * top_grad_value;
                        }
                        if (s.h_low >= 0 && s.w_high <= width - 1) {
                            const std::int64_t ptr2 = s.h_low_offset + s.w_high_offset + c;
                            v2 = value_ptr[ptr2];
                            grad_h_weight -= s.lw * v2;
                            grad_w_weight += s.hh * v2;
#pragma omp atomic
                            grad_value_ptr[ptr2] += w2 * top_grad_value;
                        }
                        if (s.h_high <= height - 1 && s.w_low >= 0) {
                            const std::int64_t ptr3 = s.h_high_offset + s.w_low_offset + c;
                            v3 = value_ptr[ptr3];
                            grad_h_weight += s.hw * v3;
                            grad_w_weight -= s.lh * v3;
#pragma omp atomic
                            grad_value_ptr[ptr3] += w3 * top_grad_value;
                        }
                        if (s.h_high <= height - 1 && s.w_high <= width - 1) {
                            const std::int64_t ptr4 = s.h_high_offset + s.w_high_offset + c;
                            v4 = value_ptr[ptr4];
                            grad_h_weight += s.lw * v4;
                            grad_w_weight += s.lh * v4;
#pragma omp atomic
                            grad_value_ptr[ptr4] += w4 * top_grad_value;
                        }
                        grad_attn += g * (w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4);
                        grad_h += g * grad_h_weight;
                        grad_w += g * grad_w_weight;
                    }
                    // d(w_im)/d(loc_x) = W, d(h_im)/d(loc_y) = H.
                    *grad_attn_ptr = grad_attn;
                    grad_loc_ptr[0] = static_cast<float>(width) * weight * grad_w;
                    grad_loc_ptr[1] = static_cast<float>(height) * weight * grad_h;
                }
            }
        }
    }

    Results results() const override {
        return {output_, grad_value_, grad_sampling_locations_, grad_attention_weights_};
    }

private:
    const Problem &problem_;
    const int threads_;
    Floats output_, grad_value_, grad_sampling_locations_, grad_attention_weights_;
};

}  // namespace

std::unique_ptr<Peer> make_cuda_port_peer(const Problem &problem, int threads) {
    return std::make_unique<CudaPortPeer>(problem, threads);
}

}  // namespace msda_bench
