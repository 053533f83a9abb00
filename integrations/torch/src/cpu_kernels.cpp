// The operators' CPU kernels: kernels.cpp on host tensors, with the call's
// options as the schema's arguments give them.
#include <torch/library.h>

#include "kernels.h"

namespace msda_torch::detail {
namespace {
msda::Options on_the_host(msda::Options options, const at::Tensor &) { return options; }
}  // namespace
}  // namespace msda_torch::detail

TORCH_LIBRARY_IMPL(msda, CPU, m) { msda_torch::detail::KernelsOn<&msda_torch::detail::on_the_host>::register_in(m); }
