// Validation of a call's tensors, before any work. Every failure throws
// msda::Error("msda: <tensor>: <what was expected>").
#pragma once

#include <msda/msda.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda.h"
#include "opencl.h"

namespace msda::detail {

[[noreturn]] void fail(const std::string &tensor, const std::string &what);

// A level table's column: up to kInline entries in the object itself (the
// checks of a call with up to 64 levels allocate nothing: Plan's promise),
// more on the heap.
class LevelColumn {
public:
    static constexpr std::size_t kInline = 128;
    void resize(std::size_t n) {
        size_ = n;
        if (n > kInline) heap_.resize(n);
    }
    std::size_t size() const { return size_; }
    std::int32_t *data() { return size_ > kInline ? heap_.data() : inline_.data(); }
    const std::int32_t *data() const { return size_ > kInline ? heap_.data() : inline_.data(); }
    std::int32_t &operator[](std::size_t i) { return data()[i]; }
    std::int32_t operator[](std::size_t i) const { return data()[i]; }

private:
    std::array<std::int32_t, kInline> inline_{};
    std::vector<std::int32_t> heap_;
    std::size_t size_ = 0;
};

// spatial_shapes and level_start_index as the generated code reads them:
// int32, shapes as (H, W) pairs.
struct LevelTable {
    LevelColumn shapes;  // 2 * N_l: H_0, W_0, H_1, W_1, ...
    LevelColumn starts;  // N_l
};

struct CheckedCall {
    ProblemSize size;
    LevelTable levels;
    // Where the call computes: Options::device for host tensors, OpenCL or
    // CUDA for tensors on such a device (device_tensors), on `queue` (OpenCL)
    // or `stream` (CUDA).
    Device device = Device::cpu;
    bool device_tensors = false;
    opencl::Queue queue;
    cuda::Stream stream;
    opencl::Pool *pool = nullptr;  // a Plan's device buffers for host tensors, or null
};

// The options a checked call runs with: the caller's, on the call's device.
inline Options run_options(const CheckedCall &call, Options options) {
    options.device = call.device;
    return options;
}

// Throws msda::Error, saying why, when no CUDA device can run a call.
void require_cuda_device();

// The host address of a host tensor's first element.
inline char *host_address(const TensorView &t) { return static_cast<char *>(t.data) + t.byte_offset; }

// The elements a tensor's strides reach from its first one: [low, high].
struct Reach {
    std::int64_t low = 0, high = 0;
};
Reach reach_of(const TensorView &t);

// Outputs::required for a call; Outputs::if_present to size a call before
// its outputs exist (ProblemSize::of), checking only the outputs given.
enum class Outputs { required, if_present };
CheckedCall check_forward(const ForwardArgs &args, const Options &options,
                          Outputs outputs = Outputs::required);
CheckedCall check_backward(const BackwardArgs &args, const Options &options,
                           Outputs outputs = Outputs::required);

// Sizes and options a plan can be made for (dtype support, ranges).
void check_plan(const ProblemSize &size, const Options &options);
// The call's sizes against the plan's; names the first tensor that differs.
void check_matches_plan(const ProblemSize &plan, const ProblemSize &call);

}  // namespace msda::detail
