// The operators' kernels, whatever device the tensors are on: torch tensors
// become msda views in place (a copy only where msda needs a contiguous
// channel dimension), outputs are allocated at the sizes msda validated on
// the inputs' device, and msda's one-shot calls run (their workspace comes
// from msda's cache, reused across calls). Each dispatch key registers them
// with its Placement (cpu_kernels.cpp, cuda_kernels.cpp).
#include "kernels.h"

#include <ATen/ops/empty.h>

#include "msda/torch.hpp"

namespace msda_torch::detail {

namespace {

// value's C_h and grad_output's N_h*C_h are the dimensions msda needs dense.
constexpr int64_t kValueChannelDim = 3;
constexpr int64_t kOutputChannelDim = 2;

struct Inputs {
    at::Tensor value;  // channels dense
    msda::TensorView value_view, spatial_shapes, level_start_index, sampling_locations, attention_weights;

    // The inputs' views in a ForwardArgs or a BackwardArgs.
    template <class Args>
    Args args() const {
        Args args;
        args.value = value_view;
        args.spatial_shapes = spatial_shapes;
        args.level_start_index = level_start_index;
        args.sampling_locations = sampling_locations;
        args.attention_weights = attention_weights;
        return args;
    }
};

Inputs inputs_of(const char *op, const at::Tensor &value, const at::Tensor &spatial_shapes,
                 const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                 const at::Tensor &attention_weights) {
    check_storage_dtype(value, op, "value");
    check_storage_dtype(sampling_locations, op, "sampling_locations");
    check_storage_dtype(attention_weights, op, "attention_weights");
    Inputs inputs;
    inputs.value = with_dense_dim(value, kValueChannelDim);
    inputs.value_view = tensor_view(inputs.value, "value");
    inputs.spatial_shapes = tensor_view(spatial_shapes, "spatial_shapes");
    inputs.level_start_index = tensor_view(level_start_index, "level_start_index");
    inputs.sampling_locations = tensor_view(sampling_locations, "sampling_locations");
    inputs.attention_weights = tensor_view(attention_weights, "attention_weights");
    return inputs;
}

at::Tensor forward(const char *op, Placement place, msda::Options options, const at::Tensor &value,
                   const at::Tensor &spatial_shapes, const at::Tensor &level_start_index,
                   const at::Tensor &sampling_locations, const at::Tensor &attention_weights) {
    options = place(options, value);
    const Inputs inputs =
        inputs_of(op, value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
    msda::ForwardArgs args = inputs.args<msda::ForwardArgs>();
    const msda::ProblemSize size = calling_msda([&] { return msda::ProblemSize::of(args, options); });
    at::Tensor output = at::empty({size.batch, size.queries, size.heads * size.channels}, value.options());
    args.output = tensor_view(output, "output");
    use_torch_threads();
    calling_msda([&] { msda::forward(args, options); });
    return output;
}

// The gradients in `wanted` (value, sampling_locations, attention_weights),
// each with the sizes and dtype of its tensor; the others undefined.
std::array<at::Tensor, 3> backward(const char *op, Placement place, msda::Options options,
                                   std::array<bool, 3> wanted, const at::Tensor &grad_output,
                                   const at::Tensor &value, const at::Tensor &spatial_shapes,
                                   const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                   const at::Tensor &attention_weights) {
    options = place(options, value);
    const Inputs inputs =
        inputs_of(op, value, spatial_shapes, level_start_index, sampling_locations, attention_weights);
    check_storage_dtype(grad_output, op, "grad_output");
    const at::Tensor dense_grad_output = with_dense_dim(grad_output, kOutputChannelDim);
    options.grad_value = wanted[0];
    options.grad_sampling_locations = wanted[1];
    options.grad_attention_weights = wanted[2];
    msda::BackwardArgs args = inputs.args<msda::BackwardArgs>();
    args.grad_output = tensor_view(dense_grad_output, "grad_output");
    calling_msda([&] { msda::ProblemSize::of(args, options); });

    std::array<at::Tensor, 3> grads;
    const at::Tensor *of[3] = {&value, &sampling_locations, &attention_weights};
    msda::TensorView *views[3] = {&args.grad_value, &args.grad_sampling_locations, &args.grad_attention_weights};
    static const char *const names[3] = {"grad_value", "grad_sampling_locations", "grad_attention_weights"};
    for (int i = 0; i < 3; ++i) {
        if (!wanted[i]) continue;
        grads[i] = at::empty(of[i]->sizes(), of[i]->options());
        *views[i] = tensor_view(grads[i], names[i]);
    }
    if (wanted[0] || wanted[1] || wanted[2]) {
        use_torch_threads();
        calling_msda([&] { msda::backward(args, options); });
    }
    return grads;
}

}  // namespace

at::Tensor ms_deform_attn(Placement place, const at::Tensor &value, const at::Tensor &spatial_shapes,
                          const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                          const at::Tensor &attention_weights, c10::string_view value_layout,
                          c10::string_view locations_layout, bool align_corners, c10::string_view padding_mode,
                          c10::string_view target) {
    const msda::Options options =
        msda_options(kMsdaForward, value_layout, locations_layout, align_corners, padding_mode, target);
    return forward(kMsdaForward, place, options, value, spatial_shapes, level_start_index, sampling_locations,
                   attention_weights);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> ms_deform_attn_backward(
    Placement place, const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view value_layout, c10::string_view locations_layout,
    bool align_corners, c10::string_view padding_mode, std::array<bool, 3> output_mask, c10::string_view target) {
    const msda::Options options =
        msda_options(kMsdaBackward, value_layout, locations_layout, align_corners, padding_mode, target);
    auto grads = backward(kMsdaBackward, place, options, output_mask, grad_output, value, spatial_shapes,
                          level_start_index, sampling_locations, attention_weights);
    return {grads[0], grads[1], grads[2]};
}

at::Tensor geometric_kernel_attention(Placement place, const at::Tensor &value, const at::Tensor &spatial_shapes,
                                      const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                      const at::Tensor &attention_weights, c10::string_view rounding,
                                      c10::string_view target) {
    return forward(kGkaForward, place, gka_options(kGkaForward, rounding, target), value, spatial_shapes,
                   level_start_index, sampling_locations, attention_weights);
}

std::tuple<at::Tensor, at::Tensor> geometric_kernel_attention_backward(
    Placement place, const at::Tensor &grad_output, const at::Tensor &value, const at::Tensor &spatial_shapes,
    const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
    const at::Tensor &attention_weights, c10::string_view rounding, std::array<bool, 2> output_mask,
    c10::string_view target) {
    auto grads = backward(kGkaBackward, place, gka_options(kGkaBackward, rounding, target),
                          {output_mask[0], false, output_mask[1]}, grad_output, value, spatial_shapes,
                          level_start_index, sampling_locations, attention_weights);
    return {grads[0], grads[2]};
}

}  // namespace msda_torch::detail
