// Execution: what a plan prepared once (its functions, workspace layout and
// policy decisions), and the forward and backward calls that run it on a
// checked call's tensors.
#pragma once

#include <msda/msda.hpp>

#include <cstddef>
#include <memory>

#include "backends/backend.h"
#include "policy.h"
#include "registry.h"
#include "validate.h"

namespace msda::detail {

// Scratch memory a plan's calls need, one region after the other: value
// copied head-major (Options::relayout), then the float32 sums of grad_value
// when it is stored in half precision or summed head-major.
// Offsets are from the workspace's first 64-byte boundary: a workspace that
// holds anything has kAlignment - 1 bytes more, so the regions start on cache
// lines (and the staged rows fill whole lines) whatever pointer the caller
// passes (a std::vector's data is 16-byte aligned).
struct Workspace {
    static constexpr std::size_t kAlignment = 64;
    std::size_t value_copy = 0;  // bytes at offset 0, a multiple of kAlignment
    std::size_t sums = 0;        // bytes at offset sums_offset()
    std::size_t sums_offset() const { return value_copy; }
    std::size_t forward_bytes() const { return padded(value_copy); }
    std::size_t bytes() const { return padded(value_copy + sums); }
    static std::size_t padded(std::size_t bytes) { return bytes == 0 ? 0 : bytes + kAlignment - 1; }
};
Workspace workspace_layout(const ProblemSize &size, const Options &options, TargetFamily family,
                           const Policy &policy);

// A prepared call: the checked sizes and options, the backend of
// Options::device, the functions it runs, its workspace layout (with the
// relayout decided) and, for a Plan, the device buffers it keeps. Made
// once; the calls that run it validate their tensors and run.
struct Prepared {
    enum class Buffers { none, kept };
    Prepared(const ProblemSize &size, const Options &options, Buffers buffers = Buffers::none);

    ProblemSize size;
    Options options;
    const Backend *backend;
    const Policy *policy;
    Kernels kernels;
    Workspace workspace;
    std::shared_ptr<DevicePool> pool;  // Buffers::kept, where the backend keeps any
};

// Whether a call walks its samples query by query (Options::sample_order):
// the forward, or the backward's per-sample gradients (grad_value's scatter
// decides its own order the same way, from its own variant and whatever the
// size of the levels; its bits are the same in both). It does when a
// by-query variant serves the plan's sizes, the call's per-sample tensors
// have dense (l, p) blocks, and by_query was asked for, or (automatic) one
// head's largest level outgrows a by-level walk and a probe finds the
// queries' samples clustered (Policy).
bool walks_by_query(const Prepared &prepared, const ForwardArgs &args, const CheckedCall &call);
bool walks_by_query(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &call);

void run_forward(const Prepared &prepared, const ForwardArgs &args, const CheckedCall &call, void *workspace);
void run_backward(const Prepared &prepared, const BackwardArgs &args, const CheckedCall &call, void *workspace);

}  // namespace msda::detail

namespace msda::detail {

// The call layer's checks (plan.cpp): the call's device and backend
// (validation), its queue (the backend), the level tables read back where
// they are on the device (the backend), then every tensor (validation).
CheckedCall check_forward(const ForwardArgs &args, const Options &options, Outputs outputs = Outputs::required);
CheckedCall check_backward(const BackwardArgs &args, const Options &options, Outputs outputs = Outputs::required);

}  // namespace msda::detail
