// The public entry points: validate everything, then run the generated code.
#include <msda/msda.hpp>

#include <memory>
#include <mutex>
#include <new>
#include <utility>

#include "cpu_dispatch.h"
#include "dispatch.h"
#include "scratch.h"

namespace msda {

ProblemSize ProblemSize::of(const ForwardArgs &args, const Options &options) {
    return detail::check_forward(args, options, detail::Outputs::if_present).size;
}

ProblemSize ProblemSize::of(const BackwardArgs &args, const Options &options) {
    return detail::check_backward(args, options, detail::Outputs::if_present).size;
}

SampleOrder sample_order(const ForwardArgs &args, const Options &options) {
    const detail::CheckedCall call = detail::check_forward(args, options, detail::Outputs::if_present);
    const Options run = detail::run_options(call, options);
    return detail::walks_by_query(detail::select_kernels(call.size, run), args, run, call) ? SampleOrder::by_query
                                                                                           : SampleOrder::by_level;
}

SampleOrder sample_order(const BackwardArgs &args, const Options &options) {
    const detail::CheckedCall call = detail::check_backward(args, options, detail::Outputs::if_present);
    const Options run = detail::run_options(call, options);
    return detail::walks_by_query(detail::select_kernels(call.size, run), args, run, call) ? SampleOrder::by_query
                                                                                           : SampleOrder::by_level;
}

Plan::Plan(const ProblemSize &size, const Options &options) : size_(size), options_(options) {
    detail::check_plan(size, options);
    // Fails now, not at the first call, if this build lacks a needed variant.
    detail::select_kernels(size, options);
    if (options.device == Device::opencl) device_buffers_ = std::make_shared<detail::opencl::Pool>();
}

std::size_t Plan::workspace_size() const { return detail::workspace_bytes(size_, options_); }

namespace {

void check_workspace(const Plan &plan, const void *workspace, std::size_t bytes) {
    const std::size_t needed = plan.workspace_size();
    if (bytes < needed) {
        detail::fail("workspace", std::to_string(bytes) + " bytes given, the plan needs " +
                                      std::to_string(needed));
    }
    if (needed > 0 && workspace == nullptr) {
        detail::fail("workspace", "null, the plan needs " + std::to_string(needed) + " bytes");
    }
}

const char *device_name(Device device) {
    return device == Device::opencl ? "opencl" : device == Device::cuda ? "cuda" : "cpu";
}

// A plan's code is for one device: OpenCL and CUDA tensors need a plan
// made with Device::opencl or Device::cuda.
void check_plan_device(const Plan &plan, const detail::CheckedCall &call) {
    if (call.device != plan.options().device) {
        const char *where = !call.device_tensors            ? "is a host tensor"
                            : call.device == Device::cuda ? "is on a CUDA device"
                                                          : "is on an OpenCL device";
        detail::fail("value", std::string(where) +
                                  ", but the plan was made for Device::" + device_name(plan.options().device) +
                                  (call.device_tensors ? std::string(" (make it with Device::") +
                                                             device_name(call.device) + ")"
                                                       : ""));
    }
}

}  // namespace

void Plan::forward(const ForwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    detail::CheckedCall call = detail::check_forward(args, options_);
    detail::check_matches_plan(size_, call.size);
    check_plan_device(*this, call);
    check_workspace(*this, workspace, workspace_bytes);
    call.pool = device_buffers_.get();
    detail::run_forward(detail::select_kernels(size_, options_), args, options_, call, workspace);
}

void Plan::backward(const BackwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    detail::CheckedCall call = detail::check_backward(args, options_);
    detail::check_matches_plan(size_, call.size);
    check_plan_device(*this, call);
    check_workspace(*this, workspace, workspace_bytes);
    call.pool = device_buffers_.get();
    detail::run_backward(detail::select_kernels(size_, options_), args, options_, call, workspace);
}

// The one-shot calls validate once, then run what a plan would, with a
// workspace of their own when the plan needs one: the process keeps the
// largest one a finished call used and lends it to the next call that fits
// in it, so repeated calls do not map, fault in and zero fresh pages every
// time (a G-sized staging workspace is 59 MiB: that cost 18% of the call).
// A call finding it lent out (another thread's call) allocates its own.
namespace {

// Any alignment: the calls place their regions on the block's first 64-byte
// boundary themselves (Plan::workspace_size() counts the slack).
struct Block {
    std::unique_ptr<std::byte[]> memory;
    std::size_t bytes = 0;
};

class WorkspaceCache {
public:
    // A block of at least `bytes`: the cached one if it is free and large
    // enough, else a new one (a cached block too small is freed first).
    Block take(std::size_t bytes) {
        Block block;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            std::swap(block, cached_);
        }
        if (block.bytes >= bytes) return block;
        block = {};  // too small (or none): freed before the new one is allocated
        block.memory.reset(new (std::nothrow) std::byte[bytes]);
        if (!block.memory) {
            detail::fail("workspace", "could not allocate the " + std::to_string(bytes) +
                                          " bytes of scratch memory the call needs");
        }
        block.bytes = bytes;
        return block;
    }

    // Keeps the larger of the returned and the cached block.
    void give_back(Block block) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (block.bytes > cached_.bytes) std::swap(block, cached_);
    }

    std::size_t bytes() {
        std::lock_guard<std::mutex> lock(mutex_);
        return cached_.bytes;
    }

    void release() {
        Block released;
        std::lock_guard<std::mutex> lock(mutex_);
        std::swap(released, cached_);
    }

private:
    std::mutex mutex_;
    Block cached_;
};

WorkspaceCache &workspace_cache() {
    static WorkspaceCache cache;
    return cache;
}

// A one-shot call's workspace, returned to the cache however the call ends.
class LentWorkspace {
public:
    explicit LentWorkspace(std::size_t bytes) {
        if (bytes > 0) block_ = workspace_cache().take(bytes);
    }
    ~LentWorkspace() {
        if (block_.bytes > 0) workspace_cache().give_back(std::move(block_));
    }
    LentWorkspace(const LentWorkspace &) = delete;
    LentWorkspace &operator=(const LentWorkspace &) = delete;
    void *get() const { return block_.memory.get(); }

private:
    Block block_;
};

}  // namespace

void forward(const ForwardArgs &args, const Options &options) {
    detail::CheckedCall call = detail::check_forward(args, options);
    const Options run = detail::run_options(call, options);
    detail::check_plan(call.size, run);
    const detail::Kernels kernels = detail::select_kernels(call.size, run);
    const LentWorkspace workspace(detail::workspace_layout(call.size, run).forward_bytes());
    detail::run_forward(kernels, args, run, call, workspace.get());
}

void backward(const BackwardArgs &args, const Options &options) {
    detail::CheckedCall call = detail::check_backward(args, options);
    const Options run = detail::run_options(call, options);
    detail::check_plan(call.size, run);
    const detail::Kernels kernels = detail::select_kernels(call.size, run);
    const LentWorkspace workspace(detail::workspace_bytes(call.size, run));
    detail::run_backward(kernels, args, run, call, workspace.get());
}

std::size_t cached_workspace_bytes() { return workspace_cache().bytes(); }

void release_cached_workspace() {
    workspace_cache().release();
    detail::release_scratch();
}

void set_num_threads(int threads) { detail::set_threads(threads); }

}  // namespace msda
