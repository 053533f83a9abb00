// The Autograd kernels: the forward runs below autograd through the
// dispatcher (whatever device key serves the tensors), the backward calls
// the backward operator with only the gradients autograd needs. msda's
// backward is not itself differentiable: gradients computed under
// create_graph carry a node that fails, with a message, if they are
// differentiated again.
#include <ATen/core/LegacyTypeDispatch.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <memory>
#include <string>

#include "operators.h"

namespace msda_torch::detail {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Forward inputs, in the schemas' order.
enum Input { kValue = 0, kSpatialShapes, kLevelStartIndex, kSamplingLocations, kAttentionWeights };

// What once_differentiable does in Python, connected: under create_graph,
// the gradients become outputs of a node that raises when it is reached,
// and that node's inputs are the gradients and everything they were
// computed from (`inputs`). Differentiating a gradient with respect to any
// of those reaches the node and raises; with the gradients alone as its
// inputs (Python's once_differentiable), autograd.grad would find the
// forward's inputs unused and return None for them.
variable_list not_differentiable_again(const variable_list &grads, const variable_list &inputs, const char *op) {
    if (!at::GradMode::is_enabled()) return grads;
    bool any_requires_grad = false;
    for (const at::Tensor &input : inputs) any_requires_grad = any_requires_grad || (input.defined() && input.requires_grad());
    if (!any_requires_grad) return grads;
    variable_list node_inputs;
    for (const at::Tensor &grad : grads) node_inputs.push_back(grad.defined() ? grad.detach() : grad);
    node_inputs.insert(node_inputs.end(), inputs.begin(), inputs.end());
    auto error = std::make_shared<torch::autograd::DelayedError>(
        std::string(op) + ": msda's backward is not differentiable (no double backward)",
        static_cast<int>(node_inputs.size()));
    variable_list outputs = error->apply(std::move(node_inputs));
    outputs.resize(grads.size());
    return outputs;
}

variable_list with_saved(variable_list saved, const at::Tensor &grad_output) {
    saved.push_back(grad_output);
    return saved;
}

class MsdaFunction : public torch::autograd::Function<MsdaFunction> {
public:
    static at::Tensor forward(AutogradContext *ctx, const at::Tensor &value, const at::Tensor &spatial_shapes,
                              const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                              const at::Tensor &attention_weights, c10::string_view value_layout,
                              c10::string_view locations_layout, bool align_corners,
                              c10::string_view padding_mode, c10::string_view target) {
        at::Tensor output;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            output = msda_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                            attention_weights, value_layout, locations_layout, align_corners,
                                            padding_mode, target);
        }
        ctx->save_for_backward({value, spatial_shapes, level_start_index, sampling_locations, attention_weights});
        ctx->saved_data["value_layout"] = std::string(value_layout);
        ctx->saved_data["locations_layout"] = std::string(locations_layout);
        ctx->saved_data["align_corners"] = align_corners;
        ctx->saved_data["padding_mode"] = std::string(padding_mode);
        ctx->saved_data["target"] = std::string(target);
        return output;
    }

    static variable_list backward(AutogradContext *ctx, variable_list grad_outputs) {
        const variable_list saved = ctx->get_saved_variables();
        const std::array<bool, 3> wanted = {ctx->needs_input_grad(kValue), ctx->needs_input_grad(kSamplingLocations),
                                            ctx->needs_input_grad(kAttentionWeights)};
        std::tuple<at::Tensor, at::Tensor, at::Tensor> grads;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            grads = msda_backward_op().call(
                grad_outputs[0], saved[kValue], saved[kSpatialShapes], saved[kLevelStartIndex],
                saved[kSamplingLocations], saved[kAttentionWeights], ctx->saved_data["value_layout"].toStringRef(),
                ctx->saved_data["locations_layout"].toStringRef(), ctx->saved_data["align_corners"].toBool(),
                ctx->saved_data["padding_mode"].toStringRef(), wanted, ctx->saved_data["target"].toStringRef());
        }
        variable_list result = not_differentiable_again(
            {std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)}, with_saved(saved, grad_outputs[0]),
            kMsdaForward);
        // One gradient per forward argument, the strings and flags included.
        return {result[0], at::Tensor(), at::Tensor(), result[1], result[2],
                at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
};

class GkaFunction : public torch::autograd::Function<GkaFunction> {
public:
    static at::Tensor forward(AutogradContext *ctx, const at::Tensor &value, const at::Tensor &spatial_shapes,
                              const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                              const at::Tensor &attention_weights, c10::string_view rounding,
                              c10::string_view target) {
        at::Tensor output;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            output = gka_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                           attention_weights, rounding, target);
        }
        ctx->save_for_backward({value, spatial_shapes, level_start_index, sampling_locations, attention_weights});
        ctx->saved_data["rounding"] = std::string(rounding);
        ctx->saved_data["target"] = std::string(target);
        return output;
    }

    static variable_list backward(AutogradContext *ctx, variable_list grad_outputs) {
        const variable_list saved = ctx->get_saved_variables();
        const std::array<bool, 2> wanted = {ctx->needs_input_grad(kValue), ctx->needs_input_grad(kAttentionWeights)};
        std::tuple<at::Tensor, at::Tensor> grads;
        {
            at::AutoDispatchBelowADInplaceOrView below_autograd;
            grads = gka_backward_op().call(grad_outputs[0], saved[kValue], saved[kSpatialShapes],
                                           saved[kLevelStartIndex], saved[kSamplingLocations],
                                           saved[kAttentionWeights], ctx->saved_data["rounding"].toStringRef(),
                                           wanted, ctx->saved_data["target"].toStringRef());
        }
        variable_list result = not_differentiable_again({std::get<0>(grads), std::get<1>(grads)},
                                                        with_saved(saved, grad_outputs[0]), kGkaForward);
        // GKA has no location gradient (SPEC.md): sampling_locations gets none.
        return {result[0], at::Tensor(), at::Tensor(), at::Tensor(), result[1], at::Tensor(), at::Tensor()};
    }
};

at::Tensor ms_deform_attn_autograd(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                   const at::Tensor &level_start_index, const at::Tensor &sampling_locations,
                                   const at::Tensor &attention_weights, c10::string_view value_layout,
                                   c10::string_view locations_layout, bool align_corners,
                                   c10::string_view padding_mode, c10::string_view target) {
    if (!torch::autograd::compute_requires_grad(value, sampling_locations, attention_weights)) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return msda_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                      attention_weights, value_layout, locations_layout, align_corners,
                                      padding_mode, target);
    }
    return MsdaFunction::apply(value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
                               value_layout, locations_layout, align_corners, padding_mode, target);
}

at::Tensor geometric_kernel_attention_autograd(const at::Tensor &value, const at::Tensor &spatial_shapes,
                                               const at::Tensor &level_start_index,
                                               const at::Tensor &sampling_locations,
                                               const at::Tensor &attention_weights, c10::string_view rounding,
                                               c10::string_view target) {
    if (!torch::autograd::compute_requires_grad(value, attention_weights)) {
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        return gka_forward_op().call(value, spatial_shapes, level_start_index, sampling_locations,
                                     attention_weights, rounding, target);
    }
    return GkaFunction::apply(value, spatial_shapes, level_start_index, sampling_locations, attention_weights,
                              rounding, target);
}

}  // namespace

}  // namespace msda_torch::detail

TORCH_LIBRARY_IMPL(msda, Autograd, m) {
    using namespace msda_torch::detail;
    m.impl("ms_deform_attn", &ms_deform_attn_autograd);
    m.impl("geometric_kernel_attention", &geometric_kernel_attention_autograd);
    // The backward operators are not differentiable: every Autograd key
    // (AutogradMeta too, which has no fallthrough of its own in LibTorch
    // 1.13) passes them to the device's kernel.
    m.impl("ms_deform_attn_backward", torch::CppFunction::makeFallthrough());
    m.impl("geometric_kernel_attention_backward", torch::CppFunction::makeFallthrough());
}
