// Validation of a call's tensors, before any work, with no device I/O: the
// tensors' sizes, dtypes, strides and memory (through their backend's
// description of it), and the level tables' contents once the call layer
// has them in host memory. Every failure throws
// msda::Error("msda: <tensor>: <what was expected>").
#pragma once

#include <msda/msda.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/backend.h"
#include "buffers.h"
#include "errors.h"

namespace msda::detail {

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
    // Where the call computes: Options::device for host tensors, the
    // device of its tensors otherwise (device_tensors), on `queue`.
    Device device = Device::cpu;
    const Backend *backend = nullptr;
    bool device_tensors = false;
    int ordinal = -1;  // the device tensors' device_id, -1 for host tensors
    Queue queue;
    DevicePool *pool = nullptr;  // a Plan's device buffers for host tensors, or null
};

// The options a checked call runs with: the caller's, on the call's device.
inline Options run_options(const CheckedCall &call, Options options) {
    options.device = call.device;
    return options;
}

// The level tables as host tensors: the caller's, or their elements read
// back from the device by the call layer.
struct HostTables {
    TensorView spatial_shapes, level_start_index;
};

// Outputs::required for a call; Outputs::if_present to size a call before
// its outputs exist (ProblemSize::of), checking only the outputs given.
enum class Outputs { required, if_present };

// First: the options, and the device every tensor is on (the call's
// backend; its queue is the call layer's to resolve).
CheckedCall locate_call(const ForwardArgs &args, const Options &options);
CheckedCall locate_call(const BackwardArgs &args, const Options &options);
// The level tables, and their names in messages.
enum class LevelTableKind { spatial_shapes, level_start_index };
const char *table_name(LevelTableKind kind);
// A level table on the call's device, before it is read back: its rank,
// dtype and memory.
void check_table_view(const TensorView &t, LevelTableKind kind, const CheckedCall &call);
// Then everything else, with the level tables in host memory.
void check_call(const ForwardArgs &args, const Options &options, const HostTables &tables, CheckedCall &call,
                Outputs outputs);
void check_call(const BackwardArgs &args, const Options &options, const HostTables &tables, CheckedCall &call,
                Outputs outputs);

// Sizes and options a plan can be made for (dtype support, ranges).
void check_plan(const ProblemSize &size, const Options &options);
// The call's sizes against the plan's; names the first tensor that differs.
void check_matches_plan(const ProblemSize &plan, const ProblemSize &call);

}  // namespace msda::detail
