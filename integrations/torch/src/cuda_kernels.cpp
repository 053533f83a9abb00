// The operators' CUDA kernels (built against a CUDA-enabled LibTorch, see
// integrations/torch/CMakeLists.txt): kernels.cpp on tensors in CUDA memory,
// msda's work enqueued on the stream torch has current on their device, so
// it is ordered with torch's own kernels there (docs/cuda.md: the call
// returns without waiting). Outputs are allocated on that device by torch's
// allocator; msda's scratch comes from its own (Halide's) on the same
// stream.
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>

#include "kernels.h"

namespace msda_torch::detail {
namespace {

msda::Options on_the_current_stream(msda::Options options, const at::Tensor &value) {
    void *stream = c10::cuda::getCurrentCUDAStream(value.device().index()).stream();
    // torch's default stream is CUDA's legacy default stream, whose handle
    // is 0; msda reads a null stream as its own, which it waits for, so
    // the legacy stream is named by its handle (CU_STREAM_LEGACY).
    if (stream == nullptr) stream = reinterpret_cast<void *>(std::uintptr_t{1});
    options.device_context.queue = stream;
    return options;
}

}  // namespace
}  // namespace msda_torch::detail

TORCH_LIBRARY_IMPL(msda, CUDA, m) {
    msda_torch::detail::KernelsOn<&msda_torch::detail::on_the_current_stream>::register_in(m);
}
