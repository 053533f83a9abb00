// The operators' kernels, shared by every dispatch key: the same code for
// tensors on the CPU and on a CUDA device (kernels.cpp), each key
// registering them with its Placement (cpu_kernels.cpp, cuda_kernels.cpp).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <array>
#include <tuple>

#include "operators.h"

namespace msda_torch::detail {

// What a dispatch key adds to a call's options, given its value tensor (the
// CUDA kernels: the stream torch has current on value's device).
using Placement = msda::Options (*)(msda::Options options, const at::Tensor &value);

at::Tensor ms_deform_attn(Placement place, const at::Tensor &value, const at::Tensor &spatial_shapes,
                          const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                          const at::Tensor &attention_weights, c10::string_view value_layout,
                          c10::string_view locations_layout, bool align_corners, c10::string_view padding_mode,
                          c10::string_view target);
std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward(
    Placement place, const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view value_layout, c10::string_view locations_layout,
    bool align_corners, c10::string_view padding_mode, std::array<bool, 3> output_mask, c10::string_view target);
at::Tensor geometric_kernel_attention(Placement place, const at::Tensor &value, const at::Tensor &spatial_shapes,
                                      const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                      const at::Tensor &attention_weights, c10::string_view rounding,
                                      c10::string_view target);
std::tuple<at::Tensor, at::Tensor> geometric_kernel_attention_backward(
    Placement place, const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view rounding, std::array<bool, 2> output_mask,
    c10::string_view target);

// The four kernels of one Placement, in the shapes the dispatcher calls.
template <Placement place>
struct KernelsOn {
    static at::Tensor msda_forward(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                   const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                   const at::Tensor &attention_weights, c10::string_view value_layout,
                                   c10::string_view locations_layout, bool align_corners,
                                   c10::string_view padding_mode, c10::string_view target) {
        return ms_deform_attn(place, value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
                              value_layout, locations_layout, align_corners, padding_mode, target);
    }
    static std::tuple<at::Tensor, at::Tensor, at::Tensor> msda_backward(
        const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
        const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
        const at::Tensor &attention_weights, c10::string_view value_layout, c10::string_view locations_layout,
        bool align_corners, c10::string_view padding_mode, std::array<bool, 3> output_mask,
        c10::string_view target) {
        return ms_deform_attn_backward(place, grad_output, value, spatial_shapes, level_start_index,
                                       sampling_locations, attention_weights, value_layout, locations_layout,
                                       align_corners, padding_mode, output_mask, target);
    }
    static at::Tensor gka_forward(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                  const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                  const at::Tensor &attention_weights, c10::string_view rounding,
                                  c10::string_view target) {
        return geometric_kernel_attention(place, value, spatial_shapes, level_start_index, sampling_locations,
                                          attention_weights, rounding, target);
    }
    static std::tuple<at::Tensor, at::Tensor> gka_backward(
        const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
        const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
        const at::Tensor &attention_weights, c10::string_view rounding, std::array<bool, 2> output_mask,
        c10::string_view target) {
        return geometric_kernel_attention_backward(place, grad_output, value, spatial_shapes, level_start_index,
                                                   sampling_locations, attention_weights, rounding, output_mask,
                                                   target);
    }

    template <class Library>
    static void register_in(Library &m) {
        m.impl("ms_deform_attn", &msda_forward);
        m.impl("ms_deform_attn_backward", &msda_backward);
        m.impl("geometric_kernel_attention", &gka_forward);
        m.impl("geometric_kernel_attention_backward", &gka_backward);
    }
};

}  // namespace msda_torch::detail
