// The operators' schemas, the C++ functions that call them through the
// dispatcher, and the tensor checks every kernel shares. The kernels are
// registered per dispatch key: cpu_kernels.cpp (CPU), cuda_kernels.cpp
// (CUDA, with a CUDA-enabled LibTorch), meta_kernels.cpp (Meta: shapes only),
// autograd.cpp (Autograd).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <string>
#include <initializer_list>
#include <utility>

#include "msda/torch.hpp"
#include "operators.h"

TORCH_LIBRARY(msda, m) {
    m.def("ms_deform_attn(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
          "Tensor sampling_locations, Tensor attention_weights, *, str value_layout=\"BLNC\", "
          "str locations_layout=\"BQHLP2\", bool align_corners=False, str padding_mode=\"zeros\", str target=\"cpu\") -> Tensor");
    m.def("ms_deform_attn_backward(Tensor grad_output, Tensor value, Tensor spatial_shapes, "
          "Tensor level_start_index, Tensor sampling_locations, Tensor attention_weights, *, "
          "str value_layout=\"BLNC\", str locations_layout=\"BQHLP2\", bool align_corners=False, "
          "str padding_mode=\"zeros\", bool[3] output_mask=[True, True, True], str target=\"cpu\") "
          "-> (Tensor grad_value, Tensor grad_sampling_locations, Tensor grad_attention_weights)");
    m.def("geometric_kernel_attention(Tensor value, Tensor spatial_shapes, Tensor level_start_index, "
          "Tensor sampling_locations, Tensor attention_weights, *, str rounding=\"floor\", str target=\"cpu\") -> Tensor");
    m.def("geometric_kernel_attention_backward(Tensor grad_output, Tensor value, Tensor spatial_shapes, "
          "Tensor level_start_index, Tensor sampling_locations, Tensor attention_weights, *, "
          "str rounding=\"floor\", bool[2] output_mask=[True, True], str target=\"cpu\") "
          "-> (Tensor grad_value, Tensor grad_attention_weights)");
}

namespace msda_torch {

namespace detail {

namespace {

template <class Signature>
c10::TypedOperatorHandle<Signature> find_operator(const char *name) {
    return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

const char *dtype_text(at::ScalarType type) { return c10::toString(type); }

}  // namespace

const c10::TypedOperatorHandle<MsdaForwardSignature> &msda_forward_op() {
    static const auto op = find_operator<MsdaForwardSignature>(kMsdaForward);
    return op;
}
const c10::TypedOperatorHandle<MsdaBackwardSignature> &msda_backward_op() {
    static const auto op = find_operator<MsdaBackwardSignature>(kMsdaBackward);
    return op;
}
const c10::TypedOperatorHandle<GkaForwardSignature> &gka_forward_op() {
    static const auto op = find_operator<GkaForwardSignature>(kGkaForward);
    return op;
}
const c10::TypedOperatorHandle<GkaBackwardSignature> &gka_backward_op() {
    static const auto op = find_operator<GkaBackwardSignature>(kGkaBackward);
    return op;
}

namespace {

// The enumerator `text` names among `choices`, else a c10::ValueError
// listing them.
template <class Enum>
Enum choice_of(const char *op, const char *what, c10::string_view text,
               std::initializer_list<std::pair<const char *, Enum>> choices) {
    std::string names;
    std::size_t index = 0;
    for (const auto &[name, value] : choices) {
        if (text == name) return value;
        const char *separator = index == 0 ? "" : index + 1 == choices.size() ? " or " : ", ";
        names += std::string(separator) + "\"" + name + "\"";
        ++index;
    }
    TORCH_CHECK_VALUE(false, op, ": ", what, " must be ", names, ", got \"", text, "\"");
}

}  // namespace

namespace {

// "cpu": msda's CPU code; "opencl", "cuda": its OpenCL or CUDA code, the
// host tensors copied to the device and the results back (Options::device).
msda::Device device_of(const char *op, c10::string_view target) {
    return choice_of<msda::Device>(
        op, "target", target,
        {{"cpu", msda::Device::cpu}, {"opencl", msda::Device::opencl}, {"cuda", msda::Device::cuda}});
}

}  // namespace

msda::Options msda_options(const char *op, c10::string_view value_layout, c10::string_view locations_layout,
                           bool align_corners, c10::string_view padding_mode, c10::string_view target) {
    msda::Options options;
    options.op = msda::Operator::msda;
    options.device = device_of(op, target);
    options.value_layout = choice_of<msda::ValueLayout>(op, "value_layout", value_layout,
                                     {{"BLNC", msda::ValueLayout::BLNC}, {"BNLC", msda::ValueLayout::BNLC}});
    options.locations_layout =
        choice_of<msda::LocationsLayout>(op, "locations_layout", locations_layout,
                  {{"BQHLP2", msda::LocationsLayout::BQHLP2}, {"B2QHLP", msda::LocationsLayout::B2QHLP}});
    options.padding_mode = choice_of<msda::PaddingMode>(op, "padding_mode", padding_mode,
                                     {{"zeros", msda::PaddingMode::zeros}, {"border", msda::PaddingMode::border}});
    options.align_corners = align_corners;
    return options;
}

msda::Options gka_options(const char *op, c10::string_view rounding, c10::string_view target) {
    msda::Options options;
    options.op = msda::Operator::gka;
    options.device = device_of(op, target);
    options.rounding =
        choice_of<msda::Rounding>(op, "rounding", rounding, {{"floor", msda::Rounding::floor}, {"nearest", msda::Rounding::nearest}});
    options.grad_sampling_locations = false;
    return options;
}

void check_storage_dtype(const at::Tensor &tensor, const char *op, const char *name) {
    TORCH_CHECK_VALUE(tensor.defined(), op, ": ", name, " is an undefined tensor");
    const at::ScalarType type = tensor.scalar_type();
    TORCH_CHECK_TYPE(type == at::kFloat || type == at::kHalf || type == at::kBFloat16 || type == at::kDouble, op,
                     ": ", name, " is ", dtype_text(type),
                     "; msda stores float32, float16, bfloat16 or float64 (convert it, for example with .float())");
}

at::Tensor with_dense_dim(const at::Tensor &tensor, int64_t dim) {
    if (tensor.dim() <= dim || tensor.size(dim) <= 1 || tensor.stride(dim) == 1) return tensor;
    return tensor.contiguous();
}

void use_torch_threads() {
    const int wanted = at::get_num_threads();
    if (msda::num_threads() != wanted) msda::set_num_threads(wanted);
}

}  // namespace detail

at::Tensor ms_deform_attn(const at::Tensor &value, const at::Tensor &spatial_shapes,
                          const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                          const at::Tensor &attention_weights, c10::string_view value_layout,
                          c10::string_view locations_layout, bool align_corners, c10::string_view padding_mode,
                          c10::string_view target) {
    return detail::msda_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                          attention_weights, value_layout, locations_layout, align_corners,
                                          padding_mode, target);
}

at::Tensor geometric_kernel_attention(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                      const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                      const at::Tensor &attention_weights, c10::string_view rounding,
                                      c10::string_view target) {
    return detail::gka_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                         attention_weights, rounding, target);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward(
    const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view value_layout, c10::string_view locations_layout,
    bool align_corners, c10::string_view padding_mode, std::array<bool, 3> output_mask, c10::string_view target) {
    return detail::msda_backward_op().call(grad_output, value, spatial_shapes, level_start_index,
                                           sampling_locations, attention_weights, value_layout,
                                           locations_layout, align_corners, padding_mode, output_mask, target);
}

std::tuple<at::Tensor, at::Tensor> geometric_kernel_attention_backward(
    const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view rounding, std::array<bool, 2> output_mask,
    c10::string_view target) {
    return detail::gka_backward_op().call(grad_output, value, spatial_shapes, level_start_index,
                                          sampling_locations, attention_weights, rounding, output_mask, target);
}

msda::TensorView tensor_view(const at::Tensor &tensor, const char *name) {
    // A wrong tensor is a ValueError, a wrong dtype a TypeError (msda's
    // kinds, as calling_msda maps them).
    TORCH_CHECK_VALUE(tensor.defined(), "msda: ", name, " is an undefined tensor");
    TORCH_CHECK_VALUE(tensor.device().is_cpu() || tensor.device().is_cuda(), "msda: ", name, " is on ",
                      tensor.device().str(), "; msda reads tensors in host or CUDA memory (move it with .cpu())");
    TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, "msda: ", name, " has layout ", tensor.layout(),
                      "; msda reads strided (dense) tensors (convert it with .to_dense())");
    TORCH_CHECK_VALUE(tensor.dim() <= msda::kMaxRank, "msda: ", name, " has ", tensor.dim(),
                      " dimensions; msda's tensors have at most ", msda::kMaxRank);
    msda::TensorView view;
    switch (tensor.scalar_type()) {
    case at::kFloat: view.dtype = msda::DType::f32; break;
    case at::kHalf: view.dtype = msda::DType::f16; break;
    case at::kBFloat16: view.dtype = msda::DType::bf16; break;
    case at::kDouble: view.dtype = msda::DType::f64; break;
    case at::kInt: view.dtype = msda::DType::i32; break;
    case at::kLong: view.dtype = msda::DType::i64; break;
    default:
        TORCH_CHECK_TYPE(false, "msda: ", name, " is ", c10::toString(tensor.scalar_type()),
                         "; msda's tensors are float32, float16, bfloat16 or float64, and int32 or int64 for "
                         "spatial_shapes and level_start_index");
    }
    // A conjugate or negative view would need its bit resolved first; torch
    // sets those bits only on complex tensors, which are refused above.
    view.data = tensor.data_ptr();
    if (tensor.device().is_cuda()) {
        view.device_type = msda::DeviceType::cuda;
        view.device_id = tensor.device().index();
    }
    view.rank = static_cast<int>(tensor.dim());
    for (int d = 0; d < view.rank; ++d) {
        view.shape[d] = tensor.size(d);
        view.strides[d] = tensor.stride(d);
    }
    return view;
}

}  // namespace msda_torch
