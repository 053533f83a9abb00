// msda's operators for LibTorch (libmsda_torch.so, CMake target msda::torch).
//
// Loading the library registers, in torch's dispatcher:
//   msda::ms_deform_attn, msda::geometric_kernel_attention   (the forwards)
//   msda::ms_deform_attn_backward, msda::geometric_kernel_attention_backward
// each with a CPU kernel, and the two forwards with an Autograd kernel that
// calls the backwards. Python reaches the same operators through
// torch.ops.load_library (python/msda_torch). The functions below call the
// dispatcher, so a tensor that requires grad gets its gradient through them.
//
// target: "cpu" (msda's CPU code), "opencl" or "cuda" (its OpenCL or CUDA
// code, on msda's OpenCL device or Halide's CUDA device: the CPU tensors
// are copied to it and the results back, as msda::Options::device; float32
// only). Debian's LibTorch has no OpenCL or CUDA device of its own, so the
// tensors are CPU tensors either way.
//
// Tensors keep their own strides and dtypes (float32, float16, bfloat16,
// float64 storage, the last on CPU tensors; int32 or int64 spatial_shapes and level_start_index): msda reads
// them in place, and copies only a value or grad_output whose channels are
// not contiguous (msda needs stride 1 there). The operator runs on torch's
// intra-op thread count (at::get_num_threads()). Every error is a c10::Error
// (RuntimeError in Python) carrying msda's message; a wrong dtype is a
// c10::TypeError, an unknown layout or mode name a c10::ValueError.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <array>
#include <tuple>

#include <msda/msda.hpp>

namespace msda_torch {

// MSDA (SPEC.md): value (B, L, N_h, C_h) "BLNC" or (B, N_h, L, C_h) "BNLC";
// sampling_locations (B, N_q, N_h, N_l, N_p, 2) "BQHLP2" or
// (B, 2, N_q, N_h, N_l, N_p) "B2QHLP"; padding_mode "zeros" or "border".
// Returns (B, N_q, N_h * C_h) in value's dtype.
at::Tensor ms_deform_attn(const at::Tensor &value, const at::Tensor &spatial_shapes,
                          const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                          const at::Tensor &attention_weights, c10::string_view value_layout = "BLNC",
                          c10::string_view locations_layout = "BQHLP2", bool align_corners = false,
                          c10::string_view padding_mode = "zeros", c10::string_view target = "cpu");

// GKA: sampling_locations are absolute pixel coordinates; rounding "floor"
// or "nearest" (half to even). There is no location gradient: a
// sampling_locations that requires grad gets none (None in Python).
at::Tensor geometric_kernel_attention(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                      const at::Tensor &level_start_index,
                                      const at::Tensor &sampling_locations,
                                      const at::Tensor &attention_weights,
                                      c10::string_view rounding = "floor", c10::string_view target = "cpu");

// The backwards, for engines with their own autograd. output_mask says which
// gradients to compute (grad_value, grad_sampling_locations,
// grad_attention_weights); those not asked for come back undefined.
std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward(
    const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view value_layout = "BLNC",
    c10::string_view locations_layout = "BQHLP2", bool align_corners = false,
    c10::string_view padding_mode = "zeros", std::array<bool, 3> output_mask = {true, true, true},
    c10::string_view target = "cpu");
// (grad_value, grad_attention_weights).
std::tuple<at::Tensor, at::Tensor> geometric_kernel_attention_backward(
    const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view rounding = "floor",
    std::array<bool, 2> output_mask = {true, true}, c10::string_view target = "cpu");

// The view msda's C++ API reads a CPU or CUDA tensor through: its data
// pointer (on CUDA, with the device's index), dtype, sizes and strides,
// with no copy (for msda::Plan with torch tensors). `name` goes into the
// error for a tensor msda cannot take (another device, a dtype msda has no
// code for, a sparse layout, more than 6 dimensions).
msda::TensorView tensor_view(const at::Tensor &tensor, const char *name = "tensor");

}  // namespace msda_torch
