// The operators' shape-only kernels (the Meta dispatch key), which FakeTensor
// tracing, torch.compile and torch.export run instead of the computation:
// each checks what can be checked without data (the options' names, the
// dtypes, the ranks) and returns empty tensors of the outputs' sizes and
// dtypes. The real kernels check the rest (the level table's values).
// Registered from C++, so they serve LibTorch 1.13 and torch 2.x alike; under
// torch 2.x the sizes may be symbolic and stay so.
// torch/library.h first: it completes c10::IValue, which ATen/ops/empty.h
// alone leaves incomplete under clang in C++20.
#include <torch/library.h>
#include <torch/version.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

#include "operators.h"

namespace msda_torch::detail {

namespace {

#if TORCH_VERSION_MAJOR >= 2
using Size = c10::SymInt;
Size size_of(const at::Tensor &tensor, int64_t dim) { return tensor.sym_size(dim); }
at::Tensor empty_of(const std::vector<Size> &sizes, const at::TensorOptions &options) {
    return at::empty_symint(sizes, options);
}
#else
using Size = int64_t;
Size size_of(const at::Tensor &tensor, int64_t dim) { return tensor.size(dim); }
at::Tensor empty_of(const std::vector<Size> &sizes, const at::TensorOptions &options) {
    return at::empty(sizes, options);
}
#endif

void check_rank(const char *op, const at::Tensor &tensor, const char *name, int64_t rank) {
    TORCH_CHECK_VALUE(tensor.defined(), op, ": ", name, " is an undefined tensor");
    TORCH_CHECK_VALUE(tensor.dim() == rank, "msda: ", name, ": rank is ", tensor.dim(), ", expected ", rank);
}

void check_index(const char *op, const at::Tensor &tensor, const char *name, int64_t rank) {
    check_rank(op, tensor, name, rank);
    TORCH_CHECK_TYPE(tensor.scalar_type() == at::kInt || tensor.scalar_type() == at::kLong, "msda: ", name,
                     ": expected dtype int32 or int64, got ", c10::toString(tensor.scalar_type()));
}

// Checks the forward's inputs as far as their metadata goes.
void check_inputs(const char *op, const at::Tensor &value,
                  const at::Tensor &spatial_shapes, const at::Tensor &level_start_index,
                  const at::Tensor &sampling_locations, const at::Tensor &attention_weights) {
    check_rank(op, value, "value", 4);
    check_index(op, spatial_shapes, "spatial_shapes", 2);
    check_index(op, level_start_index, "level_start_index", 1);
    check_rank(op, sampling_locations, "sampling_locations", 6);
    check_rank(op, attention_weights, "attention_weights", 5);
    check_storage_dtype(value, op, "value");
    check_storage_dtype(sampling_locations, op, "sampling_locations");
    check_storage_dtype(attention_weights, op, "attention_weights");
    TORCH_CHECK_TYPE(attention_weights.scalar_type() == value.scalar_type(), "msda: attention_weights: expected dtype ",
                     c10::toString(value.scalar_type()), " (the dtype of value), got ",
                     c10::toString(attention_weights.scalar_type()));
    // As the runtime's validation: float32 or value's dtype, and float64
    // with float64.
    const bool f64 = value.scalar_type() == at::kDouble;
    const bool f32_locations = sampling_locations.scalar_type() == at::kFloat && !f64;
    TORCH_CHECK_TYPE(f32_locations || sampling_locations.scalar_type() == value.scalar_type(),
                     "msda: sampling_locations: expected dtype ",
                     f64 ? "Double (the dtype of value)"
                         : std::string("float32 or the dtype of value (") + c10::toString(value.scalar_type()) + ")",
                     ", got ", c10::toString(sampling_locations.scalar_type()));
}

// (B, N_q, N_h * C_h) in value's dtype.
at::Tensor output_of(const msda::Options &options, const at::Tensor &value, const at::Tensor &sampling_locations) {
    const bool blnc = options.value_layout == msda::ValueLayout::BLNC;
    const int64_t queries_dim = options.locations_layout == msda::LocationsLayout::BQHLP2 ? 1 : 2;
    return empty_of({size_of(value, 0), size_of(sampling_locations, queries_dim),
                     size_of(value, blnc ? 2 : 1) * size_of(value, 3)},
                    value.options());
}

at::Tensor msda_forward(const at::Tensor &value, const at::Tensor &spatial_shapes,
                        const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                        const at::Tensor &attention_weights, c10::string_view value_layout,
                        c10::string_view locations_layout, bool align_corners, c10::string_view padding_mode,
                        c10::string_view target) {
    const msda::Options options =
        msda_options(kMsdaForward, value_layout, locations_layout, align_corners, padding_mode, target);
    check_inputs(kMsdaForward, value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights);
    return output_of(options, value, sampling_locations);
}

// Each wanted gradient like its tensor; the others undefined.
std::array<at::Tensor, 3> gradients(const char *op, std::array<bool, 3> wanted, const at::Tensor &grad_output,
                                    const at::Tensor &value, const at::Tensor &sampling_locations,
                                    const at::Tensor &attention_weights) {
    check_rank(op, grad_output, "grad_output", 3);
    check_storage_dtype(grad_output, op, "grad_output");
    TORCH_CHECK_TYPE(grad_output.scalar_type() == value.scalar_type(), "msda: grad_output: expected dtype ",
                     c10::toString(value.scalar_type()), " (the dtype of value), got ",
                     c10::toString(grad_output.scalar_type()));
    const at::Tensor *of[3] = {&value, &sampling_locations, &attention_weights};
    std::array<at::Tensor, 3> grads;
    for (int i = 0; i < 3; ++i) {
        if (wanted[i]) grads[i] = at::empty_like(*of[i], at::MemoryFormat::Contiguous);
    }
    return grads;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> msda_backward(
    const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view value_layout, c10::string_view locations_layout,
    bool align_corners, c10::string_view padding_mode, std::array<bool, 3> output_mask, c10::string_view target) {
    msda_options(kMsdaBackward, value_layout, locations_layout, align_corners, padding_mode, target);  // checked
    check_inputs(kMsdaBackward, value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights);
    auto grads = gradients(kMsdaBackward, output_mask, grad_output, value, sampling_locations, attention_weights);
    return {grads[0], grads[1], grads[2]};
}

at::Tensor gka_forward(const at::Tensor &value, const at::Tensor &spatial_shapes, const at::Tensor &level_start_index,
                       const at::Tensor &sampling_locations, const at::Tensor &attention_weights,
                       c10::string_view rounding, c10::string_view target) {
    const msda::Options options = gka_options(kGkaForward, rounding, target);
    check_inputs(kGkaForward, value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights);
    return output_of(options, value, sampling_locations);
}

std::tuple<at::Tensor, at::Tensor> gka_backward(const at::Tensor &grad_output, const at::Tensor &value,
                                                const at::Tensor &spatial_shapes,
                                                const at::Tensor &level_start_index,
                                                const at::Tensor &sampling_locations,
                                                const at::Tensor &attention_weights, c10::string_view rounding,
                                                std::array<bool, 2> output_mask, c10::string_view target) {
    gka_options(kGkaBackward, rounding, target);  // its names checked
    check_inputs(kGkaBackward, value, spatial_shapes, level_start_index, sampling_locations,
                 attention_weights);
    auto grads = gradients(kGkaBackward, {output_mask[0], false, output_mask[1]}, grad_output, value,
                           sampling_locations, attention_weights);
    return {grads[0], grads[2]};
}

}  // namespace

}  // namespace msda_torch::detail

TORCH_LIBRARY_IMPL(msda, Meta, m) {
    using namespace msda_torch::detail;
    m.impl("ms_deform_attn", &msda_forward);
    m.impl("ms_deform_attn_backward", &msda_backward);
    m.impl("geometric_kernel_attention", &gka_forward);
    m.impl("geometric_kernel_attention_backward", &gka_backward);
}
