// The public entry points: a call's tensors checked, then the prepared
// functions run. A Plan prepares once; a one-shot call is a plan used once.
#include <msda/msda.hpp>

#include <memory>
#include <cstring>
#include <mutex>
#include <optional>
#include <new>
#include <utility>
#include <vector>

#include "execute.h"
#include "cpu_dispatch.h"
#include "scratch.h"

namespace msda {

class Plan::Prepared : public detail::Prepared {
public:
    using detail::Prepared::Prepared;
};

namespace detail {

namespace {

// A level table on the call's device, read back into `memory` (a dense copy
// of its span) so validation reads it from the host.
TensorView host_table(const TensorView &t, LevelTableKind kind, const CheckedCall &call,
                      std::vector<std::byte> &memory) {
    if (!t.present() || t.device_type == DeviceType::cpu || t.numel() == 0) return t;
    check_table_view(t, kind, call);
    const char *name = table_name(kind);
    const Reach reach = reach_of(t);
    const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype));
    memory.resize(static_cast<std::size_t>((reach.high - reach.low + 1) * size));
    const std::uint64_t begin = static_cast<std::uint64_t>(t.byte_offset + reach.low * size);
    const int error = call.backend->read(call.queue, t.data, begin, memory.size(), memory.data());
    if (error != 0) {
        const std::string device = call.backend->name();
        fail(name, "reading it back from the " + device + " device failed with " + device + " error " +
                       std::to_string(error));
    }
    TensorView host = t;
    host.device_type = DeviceType::cpu;
    host.device_id = 0;
    host.data = memory.data();
    host.byte_offset = -reach.low * size;
    return host;
}

// A call's checks: its device and backend, the backend's queue, the level
// tables in host memory, then every tensor.
template <typename Args>
CheckedCall check(const Args &args, const Options &options, Outputs outputs) {
    CheckedCall call = locate_call(args, options);
    call.queue = call.backend->resolve(options.device_context, call.ordinal);
    std::vector<std::byte> shapes, starts;
    const HostTables tables{host_table(args.spatial_shapes, LevelTableKind::spatial_shapes, call, shapes),
                            host_table(args.level_start_index, LevelTableKind::level_start_index, call, starts)};
    check_call(args, options, tables, call, outputs);
    if (call.size.dtype == DType::f64 && !call.backend->computes_float64(call.queue)) {
        const std::string device = call.backend->name();
        throw TypeError("msda: value: float64 storage, and the " + device + " device of this call has no float64 "
                        "arithmetic (an OpenCL device reports it as cl_khr_fp64); use Device::cpu");
    }
    return call;
}

}  // namespace

CheckedCall check_forward(const ForwardArgs &args, const Options &options, Outputs outputs) {
    return check(args, options, outputs);
}

CheckedCall check_backward(const BackwardArgs &args, const Options &options, Outputs outputs) {
    return check(args, options, outputs);
}

}  // namespace detail

ProblemSize ProblemSize::of(const ForwardArgs &args, const Options &options) {
    return detail::check_forward(args, options, detail::Outputs::if_present).size;
}

ProblemSize ProblemSize::of(const BackwardArgs &args, const Options &options) {
    return detail::check_backward(args, options, detail::Outputs::if_present).size;
}

namespace {

template <typename Args>
SampleOrder order_of(const Args &args, const detail::CheckedCall &call, const Options &options) {
    const detail::Prepared prepared(call.size, detail::run_options(call, options));
    return detail::walks_by_query(prepared, args, call) ? SampleOrder::by_query : SampleOrder::by_level;
}

}  // namespace

SampleOrder sample_order(const ForwardArgs &args, const Options &options) {
    return order_of(args, detail::check_forward(args, options, detail::Outputs::if_present), options);
}

SampleOrder sample_order(const BackwardArgs &args, const Options &options) {
    return order_of(args, detail::check_backward(args, options, detail::Outputs::if_present), options);
}

Plan::Plan(const ProblemSize &size, const Options &options)
    : size_(size), options_(options),
      prepared_(std::make_shared<const Prepared>(size, options, detail::Prepared::Buffers::kept)) {}

std::size_t Plan::workspace_size() const { return prepared_->workspace.bytes(); }

namespace {

void check_workspace(std::size_t needed, const void *workspace, std::size_t bytes) {
    if (bytes < needed) {
        detail::fail("workspace", std::to_string(bytes) + " bytes given, the plan needs " + std::to_string(needed));
    }
    if (needed > 0 && workspace == nullptr) {
        detail::fail("workspace", "null, the plan needs " + std::to_string(needed) + " bytes");
    }
}

// A plan's code is for one device: device tensors need a plan made for
// their device.
void check_plan_device(const detail::Prepared &plan, const detail::CheckedCall &call) {
    if (call.backend == plan.backend) return;
    const std::string device = call.backend->name();
    const char *article = device.front() == 'O' ? "an " : "a ";
    const std::string where = call.device_tensors ? "is on " + (article + device) + " device" : "is a host tensor";
    detail::fail("value", where + ", but the plan was made for Device::" + plan.backend->option_name() +
                              (call.device_tensors ? std::string(" (make it with Device::") +
                                                         call.backend->option_name() + ")"
                                                   : ""));
}

template <typename Args>
detail::CheckedCall checked_for_plan(const detail::Prepared &plan, const Args &args, const Options &options,
                                     const void *workspace, std::size_t workspace_bytes, std::size_t needed) {
    detail::CheckedCall call = detail::check(args, options, detail::Outputs::required);
    detail::check_matches_plan(plan.size, call.size);
    check_plan_device(plan, call);
    check_workspace(needed, workspace, workspace_bytes);
    call.pool = plan.pool.get();
    return call;
}

}  // namespace

void Plan::forward(const ForwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    const detail::CheckedCall call =
        checked_for_plan(*prepared_, args, options_, workspace, workspace_bytes, prepared_->workspace.bytes());
    detail::run_forward(*prepared_, args, call, workspace);
}

void Plan::backward(const BackwardArgs &args, void *workspace, std::size_t workspace_bytes) const {
    const detail::CheckedCall call =
        checked_for_plan(*prepared_, args, options_, workspace, workspace_bytes, prepared_->workspace.bytes());
    detail::run_backward(*prepared_, args, call, workspace);
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
            detail::fail("workspace",
                         "could not allocate the " + std::to_string(bytes) + " bytes of scratch memory the call needs");
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

// A one-shot call's plan: this thread's last one when the sizes and options
// are the same bytes (padding that differs only misses), else a new one.
// A plan keeps no device buffers here, so reusing it changes nothing but
// the time the call takes.
const detail::Prepared &one_shot_plan(const ProblemSize &size, const Options &options) {
    thread_local std::optional<detail::Prepared> last;
    if (!last || std::memcmp(&last->size, &size, sizeof size) != 0 ||
        std::memcmp(&last->options, &options, sizeof options) != 0) {
        last.reset();
        last.emplace(size, options);
    }
    return *last;
}

void forward(const ForwardArgs &args, const Options &options) {
    const detail::CheckedCall call = detail::check(args, options, detail::Outputs::required);
    const detail::Prepared &prepared = one_shot_plan(call.size, detail::run_options(call, options));
    const LentWorkspace workspace(prepared.workspace.forward_bytes());
    detail::run_forward(prepared, args, call, workspace.get());
}

void backward(const BackwardArgs &args, const Options &options) {
    const detail::CheckedCall call = detail::check(args, options, detail::Outputs::required);
    const detail::Prepared &prepared = one_shot_plan(call.size, detail::run_options(call, options));
    const LentWorkspace workspace(prepared.workspace.bytes());
    detail::run_backward(prepared, args, call, workspace.get());
}

std::size_t cached_workspace_bytes() { return workspace_cache().bytes(); }

void release_cached_workspace() {
    workspace_cache().release();
    detail::release_scratch();
}

void set_num_threads(int threads) { detail::set_threads(threads); }

}  // namespace msda
