// The public entry points: validate everything, then run the generated code.
#include <msda/msda.hpp>

#include <memory>
#include <new>

#include "dispatch.h"

namespace msda {

ProblemSize ProblemSize::of(const ForwardArgs &args, const Options &options) {
    return detail::check_forward(args, options, detail::Outputs::if_present).size;
}

ProblemSize ProblemSize::of(const BackwardArgs &args, const Options &options) {
    return detail::check_backward(args, options, detail::Outputs::if_present).size;
}

Plan::Plan(const ProblemSize &size, const Options &options) : size_(size), options_(options) {
    detail::check_plan(size, options);
    // Fails now, not at the first call, if this build lacks a needed variant.
    detail::select_kernels(size, options);
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

}  // namespace

void Plan::forward(const ForwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    detail::CheckedCall call = detail::check_forward(args, options_);
    detail::check_matches_plan(size_, call.size);
    check_workspace(*this, workspace, workspace_bytes);
    detail::run_forward(detail::select_kernels(size_, options_), args, options_, call, workspace);
}

void Plan::backward(const BackwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    detail::CheckedCall call = detail::check_backward(args, options_);
    detail::check_matches_plan(size_, call.size);
    check_workspace(*this, workspace, workspace_bytes);
    detail::run_backward(detail::select_kernels(size_, options_), args, options_, call, workspace);
}

// The one-shot calls validate once, then run what a plan would, with a
// workspace of their own when the plan needs one.
namespace {

// A one-shot call's own workspace (64-byte aligned, like the regions in it).
struct FreeWorkspace {
    void operator()(std::byte *memory) const { ::operator delete[](memory, std::align_val_t{64}); }
};
std::unique_ptr<std::byte[], FreeWorkspace> allocate_workspace(std::size_t bytes) {
    std::unique_ptr<std::byte[], FreeWorkspace> workspace;
    if (bytes > 0) {
        workspace.reset(new (std::align_val_t{64}, std::nothrow) std::byte[bytes]);
        if (!workspace) {
            detail::fail("workspace", "could not allocate the " + std::to_string(bytes) +
                                          " bytes of scratch memory the call needs");
        }
    }
    return workspace;
}

}  // namespace

void forward(const ForwardArgs &args, const Options &options) {
    detail::CheckedCall call = detail::check_forward(args, options);
    detail::check_plan(call.size, options);
    const detail::Kernels kernels = detail::select_kernels(call.size, options);
    auto workspace = allocate_workspace(detail::workspace_layout(call.size, options).forward_bytes());
    detail::run_forward(kernels, args, options, call, workspace.get());
}

void backward(const BackwardArgs &args, const Options &options) {
    detail::CheckedCall call = detail::check_backward(args, options);
    detail::check_plan(call.size, options);
    const detail::Kernels kernels = detail::select_kernels(call.size, options);
    auto workspace = allocate_workspace(detail::workspace_bytes(call.size, options));
    detail::run_backward(kernels, args, options, call, workspace.get());
}

void set_num_threads(int threads) { detail::set_threads(threads); }

}  // namespace msda
