// Tensor copies shared by the LibTorch peers (peer_grid_sample.cpp,
// peer_gka_torch.cpp). Compiled only with LibTorch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "problem.h"

namespace msda_bench {

// A float32 tensor of `sizes` holding a copy of `data` (the Problem's memory
// is never handed to torch, so nothing can write through to it).
inline torch::Tensor copy_of(const Floats &data, std::vector<std::int64_t> sizes) {
    return torch::from_blob(const_cast<float *>(data.data()), sizes, torch::kFloat32).clone();
}

// Copies a tensor (any strides) out row-major; empty when it is undefined.
inline Floats to_vector(const torch::Tensor &tensor) {
    if (!tensor.defined()) return {};
    const torch::Tensor contiguous = tensor.detach().to(torch::kFloat32).contiguous();
    Floats data(static_cast<std::size_t>(contiguous.numel()));
    if (!data.empty()) std::memcpy(data.data(), contiguous.data_ptr<float>(), data.size() * sizeof(float));
    return data;
}

}  // namespace msda_bench
