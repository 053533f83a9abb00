// A LibTorch program linked with msda::torch: the operator with autograd,
// and the same tensors through msda's C++ API, which must agree bit for bit.
#include <torch/torch.h>

#include <cstdio>

#include <msda/msda.hpp>
#include <msda/torch.hpp>

int main() {
    torch::manual_seed(0);
    const torch::Tensor spatial_shapes = torch::tensor({4, 6, 2, 3}, torch::kInt64).view({2, 2});
    const torch::Tensor level_start_index = torch::tensor({0, 24}, torch::kInt64);
    const torch::Tensor value = torch::randn({2, 30, 4, 8}, torch::requires_grad());
    const torch::Tensor sampling_locations = torch::rand({2, 10, 4, 2, 4, 2}, torch::requires_grad());
    const torch::Tensor attention_weights =
        torch::softmax(torch::randn({2, 10, 4, 8}), -1).view({2, 10, 4, 2, 4}).requires_grad_();

    const torch::Tensor output = msda_torch::ms_deform_attn(value, spatial_shapes, level_start_index,
                                                            sampling_locations, attention_weights);
    output.square().sum().backward();

    torch::Tensor direct = torch::empty_like(output);
    msda::ForwardArgs args;
    args.value = msda_torch::tensor_view(value, "value");
    args.spatial_shapes = msda_torch::tensor_view(spatial_shapes, "spatial_shapes");
    args.level_start_index = msda_torch::tensor_view(level_start_index, "level_start_index");
    args.sampling_locations = msda_torch::tensor_view(sampling_locations, "sampling_locations");
    args.attention_weights = msda_torch::tensor_view(attention_weights, "attention_weights");
    args.output = msda_torch::tensor_view(direct, "output");
    msda::forward(args);

    const bool same = torch::equal(output.detach(), direct);
    const bool gradients = value.grad().defined() && sampling_locations.grad().defined() &&
                           attention_weights.grad().defined() && value.grad().isfinite().all().item<bool>();
    std::printf("msda::ms_deform_attn: output (%lld, %lld, %lld), %s the C++ API's, gradients %s\n",
                static_cast<long long>(output.size(0)), static_cast<long long>(output.size(1)),
                static_cast<long long>(output.size(2)), same ? "the same bits as" : "DIFFERENT from",
                gradients ? "computed" : "MISSING");
    return same && gradients ? 0 : 1;
}
