// What the kernels of msda's torch operators share: the dispatcher's names
// and typed handles, the operators' options, and the checks that turn a
// tensor or an msda failure into torch's errors.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <c10/util/string_view.h>

#include <array>
#include <tuple>

#include <msda/msda.hpp>

namespace msda_torch::detail {

inline constexpr const char *kMsdaForward = "msda::ms_deform_attn";
inline constexpr const char *kMsdaBackward = "msda::ms_deform_attn_backward";
inline constexpr const char *kGkaForward = "msda::geometric_kernel_attention";
inline constexpr const char *kGkaBackward = "msda::geometric_kernel_attention_backward";

// Each ends with its `target` ("cpu" or "opencl").
using MsdaForwardSignature = at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                        const at::Tensor &, const at::Tensor &, c10::string_view,
                                        c10::string_view, bool, c10::string_view, c10::string_view);
using MsdaBackwardSignature = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &, const at::Tensor &,
    const at::Tensor &, c10::string_view, c10::string_view, bool, c10::string_view, std::array<bool, 3>,
    c10::string_view);
using GkaForwardSignature = at::Tensor(const at::Tensor &, const at::Tensor &, const at::Tensor &,
                                       const at::Tensor &, const at::Tensor &, c10::string_view, c10::string_view);
using GkaBackwardSignature = std::tuple<at::Tensor, at::Tensor>(const at::Tensor &, const at::Tensor &,
                                                                const at::Tensor &, const at::Tensor &,
                                                                const at::Tensor &, const at::Tensor &,
                                                                c10::string_view, std::array<bool, 2>,
                                                                c10::string_view);

// The operators as the dispatcher holds them (found once, on first use).
const c10::TypedOperatorHandle<MsdaForwardSignature> &msda_forward_op();
const c10::TypedOperatorHandle<MsdaBackwardSignature> &msda_backward_op();
const c10::TypedOperatorHandle<GkaForwardSignature> &gka_forward_op();
const c10::TypedOperatorHandle<GkaBackwardSignature> &gka_backward_op();

// The options the schemas' strings name; an unknown name is a c10::ValueError.
msda::Options msda_options(const char *op, c10::string_view value_layout, c10::string_view locations_layout,
                           bool align_corners, c10::string_view padding_mode, c10::string_view target);
msda::Options gka_options(const char *op, c10::string_view rounding, c10::string_view target);

// A floating tensor msda stores in: float32, float16 or bfloat16, else a
// c10::TypeError naming the operator, the tensor and its dtype.
void check_storage_dtype(const at::Tensor &tensor, const char *op, const char *name);

// `tensor` itself when its dimension `dim` has stride 1 (or extent 1), the
// only stride msda requires; a contiguous copy otherwise.
at::Tensor with_dense_dim(const at::Tensor &tensor, int64_t dim);

// msda's thread count follows torch's intra-op pool.
void use_torch_threads();

// Runs `work`, turning msda::Error into torch's error of the same kind, with
// msda's message: c10::TypeError (Python's TypeError) for a dtype,
// c10::ValueError for a shape, stride, value or option, c10::Error
// (RuntimeError) for a failure while running.
template <class Work>
decltype(auto) calling_msda(Work &&work) {
    try {
        return work();
    } catch (const msda::Error &error) {
        TORCH_CHECK_TYPE(error.kind() != msda::ErrorKind::type, error.what());
        TORCH_CHECK_VALUE(error.kind() != msda::ErrorKind::value, error.what());
        TORCH_CHECK(false, error.what());
    }
}

}  // namespace msda_torch::detail
