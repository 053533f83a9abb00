#include "dispatch.h"

#include <HalideRuntime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "cpu_caches.h"
#include "cpu_dispatch.h"
#include "opencl.h"
#include "policy.h"
#include "scratch.h"
#include "msda_variants.h"

namespace msda::detail {

namespace {

constexpr Variant kVariants[] = {
#define MSDA_VARIANT(name, family, kind, channels, dtype, locations, op, levels, points)                  \
    {#name, TargetFamily::family, Kind::kind, channels, DType::dtype, DType::locations, Operator::op, levels, \
     points, &name},
    MSDA_FOR_EACH_VARIANT(MSDA_VARIANT)
#undef MSDA_VARIANT
};

// A library holds the code of the CPU family it runs on, and OpenCL and
// CUDA code (whose host side is that CPU's), nothing else.
constexpr bool all_of_library_family() {
    for (const Variant &variant : kVariants) {
        if (variant.family != kLibraryFamily && !is_gpu(variant.family)) return false;
    }
    return true;
}
static_assert(all_of_library_family(),
              "msda_variants.h lists a variant of another CPU family than this library's");

// A kind's name in msda_variants.h (and msda::compiled_variants).
const char *kind_id(Kind kind) {
    switch (kind) {
    case Kind::forward: return "forward";
    case Kind::grad_value: return "grad_value";
    case Kind::grad_value_atomic: return "grad_value_atomic";
    case Kind::grad_value_serial: return "grad_value_serial";
    case Kind::grad_sample: return "grad_sample";
    case Kind::grad_attention_weights: return "grad_attention_weights";
    case Kind::grad_sampling_locations: return "grad_sampling_locations";
    case Kind::relayout: return "relayout";
    }
    return "unknown";
}

// What a kind computes, for messages.
const char *kind_name(Kind kind) {
    return kind == Kind::grad_sample ? "grad_attention_weights and grad_sampling_locations" : kind_id(kind);
}

void collect_error(void *user_context, const char *message) {
    if (user_context != nullptr) static_cast<CallContext *>(user_context)->message += message;
}

void install_runtime_hooks() {
    install_error_handler();
    require_runnable_target();
}

// A halide_buffer_t over caller memory, dims innermost first. For a tensor
// on an OpenCL device, host is null and device_handle is its cl_mem, with
// the byte offset of the buffer's element 0 there (DeviceCall hands them to
// the generated code).
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[kMaxRank]{};
    void *device_handle = nullptr;
    std::int64_t device_offset = 0;

    HalideBuffer(void *data, halide_type_t type, int dimensions) {
        buffer.host = static_cast<std::uint8_t *>(data);
        buffer.type = type;
        buffer.dimensions = dimensions;
        buffer.dim = dims;
    }
    // A dimension of extent 1 gets stride 1: its stride is never used, and
    // the generated code requires stride 1 on its dense (channel) dimension,
    // which frameworks leave arbitrary when it has extent 1.
    void set(int d, std::int64_t extent, std::int64_t stride) {
        dims[d].min = 0;
        dims[d].extent = static_cast<std::int32_t>(extent);
        dims[d].stride = extent == 1 ? 1 : static_cast<std::int32_t>(stride);
    }
    // The dim pointer is refreshed here because a copy still points at the
    // original's array.
    halide_buffer_t *get() {
        buffer.dim = dims;
        return &buffer;
    }
};

const halide_type_t kFloat32{halide_type_float, 32, 1};
const halide_type_t kInt32{halide_type_int, 32, 1};

// The Halide type of a storage dtype.
halide_type_t halide_type(DType dtype) {
    switch (dtype) {
    case DType::f16: return {halide_type_float, 16, 1};
    case DType::bf16: return {halide_type_bfloat, 16, 1};
    default: return kFloat32;
    }
}

// The host address `offset` elements past a host tensor's first element.
void *element(const TensorView &t, std::int64_t offset) {
    return host_address(t) + offset * static_cast<std::int64_t>(dtype_size(t.dtype));
}

bool on_device(const TensorView &t) { return t.device_type != DeviceType::cpu; }

// A Halide buffer over a tensor's memory starting `offset` elements past its
// first element: host memory, or (device) its handle and byte offset.
HalideBuffer buffer_at(const TensorView &t, std::int64_t offset, int dimensions) {
    if (!on_device(t)) return HalideBuffer(element(t, offset), halide_type(t.dtype), dimensions);
    HalideBuffer result(nullptr, halide_type(t.dtype), dimensions);
    result.device_handle = t.data;
    result.device_offset = t.byte_offset + offset * static_cast<std::int64_t>(dtype_size(t.dtype));
    return result;
}

// A tensor as a Halide buffer whose dimension d is the tensor's
// dimension order[d], starting `offset` elements into the data.
HalideBuffer permuted(const TensorView &t, std::initializer_list<int> order,
                      std::int64_t offset = 0) {
    HalideBuffer result = buffer_at(t, offset, static_cast<int>(order.size()));
    int d = 0;
    for (int source : order) {
        result.set(d++, t.shape[source], t.strides[source]);
    }
    return result;
}

// value and grad_value: (c, h, row, b).
HalideBuffer value_buffer(const TensorView &t, ValueLayout layout) {
    return layout == ValueLayout::BLNC ? permuted(t, {3, 2, 1, 0}) : permuted(t, {3, 1, 2, 0});
}

// One plane (0: x, 1: y) of sampling_locations or its gradient: (p, l, h, q, b).
HalideBuffer location_plane(const TensorView &t, LocationsLayout layout, int plane) {
    if (layout == LocationsLayout::BQHLP2) {
        return permuted(t, {4, 3, 2, 1, 0}, plane * t.strides[5]);
    }
    return permuted(t, {5, 4, 3, 2, 0}, plane * t.strides[1]);
}

// attention_weights and its gradient: (p, l, h, q, b).
HalideBuffer weight_buffer(const TensorView &t) { return permuted(t, {4, 3, 2, 1, 0}); }

// output and grad_output, (B, N_q, N_h*C_h) head-major: (c, h, q, b).
HalideBuffer head_major_buffer(const TensorView &t, std::int64_t heads, std::int64_t channels) {
    HalideBuffer result = buffer_at(t, 0, 4);
    result.set(0, channels, t.strides[2]);
    result.set(1, heads, channels * t.strides[2]);
    result.set(2, t.shape[1], t.strides[1]);
    result.set(3, t.shape[0], t.strides[0]);
    return result;
}

// The inputs every generated function takes first, and the checked call
// (on a GPU family, the queue or stream it runs on).
struct CommonInputs {
    HalideBuffer value, spatial_shapes, level_start_index, locations_x, locations_y, weights;
    bool align_corners, border, nearest;
    const CheckedCall &call;

    // The level table is only read by the generated code.
    CommonInputs(const TensorView &value_view, const TensorView &locations,
                 const TensorView &attention_weights, const CheckedCall &checked,
                 const Options &options)
        : value(value_buffer(value_view, options.value_layout)),
          spatial_shapes(const_cast<std::int32_t *>(checked.levels.shapes.data()), kInt32, 2),
          level_start_index(const_cast<std::int32_t *>(checked.levels.starts.data()), kInt32, 1),
          locations_x(location_plane(locations, options.locations_layout, 0)),
          locations_y(location_plane(locations, options.locations_layout, 1)),
          weights(weight_buffer(attention_weights)),
          align_corners(options.align_corners),
          border(options.padding_mode == PaddingMode::border),
          nearest(options.rounding == Rounding::nearest),
          call(checked) {
        const std::int64_t level_count = static_cast<std::int64_t>(checked.levels.starts.size());
        spatial_shapes.set(0, 2, 1);
        spatial_shapes.set(1, level_count, 2);
        level_start_index.set(0, level_count, 1);
    }
};

// Runs a generated function with a fresh error context; a failure becomes
// an msda::Error carrying Halide's message.
template <typename Function, typename... Args>
void invoke(const Variant &variant, CallContext &context, Function function, Args... args) {
    install_runtime_hooks();
    int result = function(&context, args...);
    if (result != 0) {
        throw Error(std::string("msda: generated code for ") + kind_name(variant.kind) +
                    " failed (Halide error " + std::to_string(result) + "): " +
                    (context.message.empty() ? "no message" : context.message));
    }
}

// The variant's function, if its declaration is `Function`.
template <typename Function>
Function function_of(const Variant &variant, std::size_t outputs) {
    const Function *function = std::get_if<Function>(&variant.function);
    if (function == nullptr) {
        throw Error(std::string("msda: internal error: the generated code for ") + kind_name(variant.kind) +
                    " does not take the " + std::to_string(outputs) + " buffers this call passes");
    }
    return *function;
}

// The elements [low, high] a Halide buffer's strides reach from element 0.
Reach buffer_reach(const halide_buffer_t &buffer) {
    Reach reach;
    for (int d = 0; d < buffer.dimensions; d++) {
        const std::int64_t extent_reach = std::int64_t{buffer.dim[d].extent - 1} * buffer.dim[d].stride;
        (extent_reach < 0 ? reach.low : reach.high) += extent_reach;
    }
    return reach;
}

// Calls `visit` with the element offset (from element 0) of every element.
template <typename Visit>
void for_each_element(const halide_buffer_t &buffer, int dimension, std::int64_t offset, Visit &visit) {
    if (dimension < 0) {
        visit(offset);
        return;
    }
    const halide_dimension_t &dim = buffer.dim[dimension];
    for (std::int32_t i = 0; i < dim.extent; i++) {
        for_each_element(buffer, dimension - 1, offset + std::int64_t{i} * dim.stride, visit);
    }
}

// Rewrites bytes [begin, begin + bytes) of a device tensor's memory (a
// cl_mem, or a CUDA allocation with `memory` its address) in place: read
// (after the call's earlier work on its queue or stream), changed by `edit`
// (given their host copy), written back. The OpenCL or CUDA error, 0 on
// success.
template <typename Edit>
std::int32_t rewrite_span(const CheckedCall &call, void *memory, std::uint64_t begin, std::size_t bytes,
                          Edit edit) {
    std::vector<std::byte> span(bytes);
    const bool cuda = call.device == Device::cuda;
    const std::uint64_t address = reinterpret_cast<std::uintptr_t>(memory) + begin;
    std::int32_t error = cuda ? cuda::read(call.stream, address, span.size(), span.data())
                              : opencl::read(call.queue, memory, begin, span.size(), span.data());
    if (error != 0) return error;
    edit(span.data());
    return cuda ? cuda::write(call.stream, address, span.size(), span.data())
                : opencl::write(call.queue, memory, begin, span.size(), span.data());
}

// Marks a buffer the generated code reads as changed on the host (so it is
// copied to the device), and one it writes as not.
void mark_host_copy(halide_buffer_t *raw, bool input) {
    if (input) {
        raw->flags |= halide_buffer_flag_host_dirty;
    } else {
        raw->flags &= ~static_cast<std::uint64_t>(halide_buffer_flag_host_dirty);
    }
}

// A GPU-family call. Host tensors (Options::device): every input is marked
// as changed on the host, so the generated code copies it to the device,
// and once the call has succeeded its results are copied back into the
// caller's memory (their elements only); the device buffers are a Plan's
// (given back to it as the call ends) or the generated code's own (freed
// however the call ends). Tensors on the device: a cl_mem is handed to the
// generated code as it is where the buffer's element 0 is at offset 0 and
// no other buffer of the call shares its parent; as a sub-buffer of its
// span where the offset is a multiple of the device's base address
// alignment (OpenCL's rule for sub-buffers); otherwise through host memory: an input's span is read back
// (then copied to the device by the generated code), an output's results
// come back to host memory and are written into its elements in the
// cl_mem, whose other bytes keep what they held. On CUDA a device tensor's
// address is handed over as it is (the allocation checked to hold every
// element), and host tensors' device memory comes from Halide's CUDA
// runtime, which keeps freed blocks for reuse on the same stream.
// buffers[0, inputs) are read, the rest written.
class DeviceCall {
public:
    DeviceCall(const Variant &variant, const CheckedCall &call, std::vector<HalideBuffer *> buffers,
               std::size_t inputs)
        : variant_(variant), cuda_(variant.family == TargetFamily::cuda), call_(call), buffers_(std::move(buffers)),
          inputs_(inputs) {
        if (cuda_) {
            context_.cu_context = call_.stream.context;
            context_.cu_stream = call_.stream.stream;
        } else {
            context_.cl_context = call_.queue.own ? nullptr : call_.queue.context;
            context_.cl_queue = call_.queue.own ? nullptr : call_.queue.queue;
        }
    }
    DeviceCall(const DeviceCall &) = delete;
    DeviceCall &operator=(const DeviceCall &) = delete;
    ~DeviceCall() { release(); }

    CallContext &context() { return context_; }

    // Before the call: each buffer's memory on the device, or marked to be
    // copied there.
    void prepare() {
        if (cuda_) {
            prepare_cuda();
            return;
        }
        // Each device buffer's parent: OpenCL leaves a kernel's writes
        // undefined where it also reaches the same memory through a buffer
        // and its sub-buffer, so a cl_mem goes to the kernels as it is only
        // when no other tensor of the call shares its parent.
        std::vector<opencl::Memory> memories(buffers_.size());
        std::vector<void *> roots(buffers_.size(), nullptr);
        for (std::size_t i = 0; i < buffers_.size(); ++i) {
            if (buffers_[i]->device_handle != nullptr) {
                memories[i] = opencl::memory(buffers_[i]->device_handle, variant_.name);
                roots[i] = memories[i].root;
            }
        }
        for (std::size_t i = 0; i < buffers_.size(); ++i) {
            HalideBuffer &b = *buffers_[i];
            halide_buffer_t *raw = b.get();
            const bool input = i < inputs_;
            if (b.device_handle == nullptr) {
                mark_host_copy(raw, input);
                const Reach reach = buffer_reach(*raw);
                if (call_.pool != nullptr && reach.low == 0) {
                    const std::uint64_t bytes = static_cast<std::uint64_t>((reach.high + 1) * raw->type.bytes());
                    if (void *memory = call_.pool->take(call_.queue, bytes)) {
                        pooled_.push_back({memory, bytes});
                        wrap(i, memory);
                    }
                }
                continue;
            }
            device_tensors_ = true;
            const Reach reach = buffer_reach(*raw);
            const std::int64_t element = raw->type.bytes();
            const bool alone = std::count(roots.begin(), roots.end(), roots[i]) == 1;
            if (reach.low == 0 && b.device_offset == 0 && alone) {
                wrap(i, b.device_handle);
                continue;
            }
            const opencl::Memory &memory = memories[i];
            const std::uint64_t origin = memory.root_offset + static_cast<std::uint64_t>(b.device_offset);
            if (reach.low == 0 && origin % opencl::base_alignment(call_.queue) == 0) {
                // Exactly its elements' span: sub-buffers of one parent
                // that the call writes never overlap (validation).
                std::int32_t error = 0;
                void *sub = opencl::sub_buffer(memory.root, origin,
                                               static_cast<std::uint64_t>((reach.high + 1) * element), error);
                if (sub != nullptr) {
                    subs_.push_back(sub);
                    wrap(i, sub);
                    continue;
                }
            }
            stage(i, reach, input);
        }
    }

    // CUDA: device tensors' addresses wrapped, host tensors marked.
    void prepare_cuda() {
        for (std::size_t i = 0; i < buffers_.size(); ++i) {
            HalideBuffer &b = *buffers_[i];
            if (b.device_handle == nullptr) {
                mark_host_copy(b.get(), i < inputs_);
                continue;
            }
            device_tensors_ = true;
            const std::uint64_t address =
                reinterpret_cast<std::uintptr_t>(b.device_handle) + static_cast<std::uint64_t>(b.device_offset);
            const int result = cuda::wrap(&context_, b.get(), address);
            if (result != 0) fail_with("handing a device pointer to", result, context_.message);
            wrapped_.push_back(i);
        }
    }

    // After the call succeeded: host tensors' results in the caller's
    // memory, staged results in their cl_mem; on msda's own queue or
    // stream, the device's work done.
    void finish() {
        for (std::size_t i = inputs_; i < buffers_.size(); ++i) {
            if (buffers_[i]->device_handle != nullptr && !is_staged(i)) continue;
            const int result = halide_copy_to_host(&context_, buffers_[i]->get());
            if (result != 0) fail_with("copying the results of", result, context_.message);
        }
        for (Staged &staged : staged_) {
            if (staged.buffer < inputs_) continue;
            write_back(staged);
        }
        if (device_tensors_ && cuda_ && call_.stream.own) {
            const int error = cuda::synchronize(call_.stream);
            if (error != 0) fail_with("waiting for", error, "cuStreamSynchronize failed");
        } else if (device_tensors_ && !cuda_ && call_.queue.own) {
            const std::int32_t error = opencl::finish(call_.queue);
            if (error != 0) fail_with("waiting for", error, "clFinish failed");
        }
        completed_ = true;
    }

private:
    // A device tensor brought through host memory: the bytes of its span,
    // which starts at `begin` in its cl_mem.
    struct Staged {
        std::size_t buffer;
        std::uint64_t begin;
        std::int64_t first;  // element 0's offset in memory, in bytes
        std::vector<std::byte> memory;
    };

    [[noreturn]] void fail_with(const char *what, int code, const std::string &message) {
        throw Error(std::string("msda: ") + what + " " + kind_name(variant_.kind) + " on " +
                    family_name(variant_.family) + " failed (error " + std::to_string(code) +
                    "): " + (message.empty() ? "no message" : message));
    }

    bool is_staged(std::size_t i) const {
        for (const Staged &staged : staged_) {
            if (staged.buffer == i) return true;
        }
        return false;
    }

    void wrap(std::size_t i, void *memory) {
        const int result = opencl::wrap(&context_, buffers_[i]->get(), memory);
        if (result != 0) fail_with("handing a cl_mem to", result, context_.message);
        wrapped_.push_back(i);
    }

    void stage(std::size_t i, const Reach &reach, bool input) {
        HalideBuffer &b = *buffers_[i];
        halide_buffer_t *raw = b.get();
        const std::int64_t element = raw->type.bytes();
        Staged staged{i, static_cast<std::uint64_t>(b.device_offset + reach.low * element), -reach.low * element, {}};
        staged.memory.resize(static_cast<std::size_t>((reach.high - reach.low + 1) * element));
        if (input) {
            const std::int32_t error =
                opencl::read(call_.queue, b.device_handle, staged.begin, staged.memory.size(), staged.memory.data());
            if (error != 0) fail_with("reading an input of", error, "clEnqueueReadBuffer failed");
        }
        staged_.push_back(std::move(staged));
        Staged &kept = staged_.back();
        raw->host = reinterpret_cast<std::uint8_t *>(kept.memory.data() + kept.first);
        mark_host_copy(raw, input);
    }

    // A staged output's elements into its cl_mem: the span as it is now
    // (after the call's kernels), its elements replaced, written back.
    void write_back(const Staged &staged) {
        HalideBuffer &b = *buffers_[staged.buffer];
        const std::size_t element = b.get()->type.bytes();
        const std::int32_t error =
            rewrite_span(call_, b.device_handle, staged.begin, staged.memory.size(), [&](std::byte *now) {
                auto copy = [&](std::int64_t offset) {
                    const std::size_t at =
                        static_cast<std::size_t>(staged.first + offset * static_cast<std::int64_t>(element));
                    std::memcpy(now + at, staged.memory.data() + at, element);
                };
                for_each_element(*b.get(), b.get()->dimensions - 1, 0, copy);
            });
        if (error != 0) fail_with("writing an output of", error, "reading or writing its span failed");
    }

    // Every buffer as it was: wrapped cl_mem detached, whatever Halide
    // allocated freed, sub-buffers released, staged host memory dropped.
    void release() {
        CallContext context = context_;
        for (std::size_t i : wrapped_) {
            if (cuda_) {
                cuda::detach(&context, buffers_[i]->get());
            } else {
                opencl::detach(&context, buffers_[i]->get());
            }
        }
        wrapped_.clear();
        for (HalideBuffer *buffer : buffers_) {
            halide_buffer_t *raw = buffer->get();
            if (raw->device != 0) halide_device_free(&context, raw);
            // Even where the free failed: the next call of this backward
            // hands the same buffer over afresh.
            raw->device = 0;
            raw->device_interface = nullptr;
            raw->flags = 0;
            if (buffer->device_handle != nullptr) raw->host = nullptr;
        }
        if (cuda_) return;
        for (void *sub : subs_) opencl::release(sub);
        subs_.clear();
        // A failed call may leave kernels running on the plan's buffers:
        // they are given back for the next call once the queue is done.
        if (!completed_ && !pooled_.empty()) opencl::finish(call_.queue);
        for (const auto &[memory, bytes] : pooled_) call_.pool->give(call_.queue, memory, bytes);
        pooled_.clear();
        opencl::release_leftover_lock();
    }

    const Variant &variant_;
    const bool cuda_;  // the CUDA family, else OpenCL
    const CheckedCall &call_;
    std::vector<HalideBuffer *> buffers_;
    std::size_t inputs_;
    CallContext context_;
    std::vector<std::size_t> wrapped_;
    std::vector<void *> subs_;
    std::vector<std::pair<void *, std::uint64_t>> pooled_;  // a Plan's buffers taken, and their sizes
    std::vector<Staged> staged_;
    bool device_tensors_ = false;
    bool completed_ = false;
};

template <typename... Extras>
void call(const Variant &variant, CommonInputs &in, Extras &...extras) {
    const auto function = function_of<PipelineFunction<sizeof...(Extras)>>(variant, sizeof...(Extras));
    auto run = [&](CallContext &context) {
        invoke(variant, context, function, in.value.get(), in.spatial_shapes.get(), in.level_start_index.get(),
               in.locations_x.get(), in.locations_y.get(), in.weights.get(), in.align_corners, in.border,
               in.nearest, extras.get()...);
    };
    if (!is_gpu(variant.family)) {
        CallContext context;
        run(context);
        return;
    }
    // After the six common inputs: a backward's grad_output (read), then its
    // results; a forward's output.
    const std::size_t inputs = variant.kind == Kind::forward ? 6 : 7;
    DeviceCall device(variant, in.call,
                      {&in.value, &in.spatial_shapes, &in.level_start_index, &in.locations_x, &in.locations_y,
                       &in.weights, &extras...},
                      inputs);
    device.prepare();
    run(device.context());
    device.finish();
}

// The copy between a value-shaped tensor's layouts (msda_relayout).
void call_relayout(DType dtype, HalideBuffer &from, HalideBuffer &to) {
    const Variant *copy = nullptr;
    for (const Variant &variant : kVariants) {
        if (variant.kind == Kind::relayout && variant.dtype == dtype) copy = &variant;
    }
    if (copy == nullptr) throw Error(std::string("msda: this build has no relayout for ") + dtype_name(dtype));
    CallContext context;
    invoke(*copy, context, function_of<RelayoutFunction>(*copy, 1), from.get(), to.get());
}

// A value-shaped buffer (c, h, row, b), dense over workspace memory:
// head-major (B, N_h, L, C_h), or in BLNC order (B, L, N_h, C_h).
HalideBuffer workspace_value_buffer(void *data, halide_type_t type, const ProblemSize &size, bool head_major) {
    HalideBuffer result(data, type, 4);
    const std::int64_t row = head_major ? size.channels : size.heads * size.channels;
    const std::int64_t head = head_major ? size.value_length * size.channels : size.channels;
    result.set(0, size.channels, 1);
    result.set(1, size.heads, head);
    result.set(2, size.value_length, row);
    result.set(3, size.batch, size.batch == 1 ? 1 : size.value_length * size.heads * size.channels);
    return result;
}

// Whether the rows of one head are closer together than the heads of one
// row: true for BNLC, and for BLNC with one head.
bool is_head_major(const HalideBuffer &value) {
    return value.dims[1].extent == 1 || value.dims[1].stride > value.dims[2].stride;
}

// Calls `visit` with the element offset of each of a tensor's elements.
template <typename Visit>
void for_each_element(const TensorView &t, Visit visit) {
    std::int64_t index[kMaxRank] = {};
    const std::int64_t count = t.numel();
    for (std::int64_t n = 0; n < count; n++) {
        std::int64_t offset = 0;
        for (int d = 0; d < t.rank; d++) offset += index[d] * t.strides[d];
        visit(offset);
        for (int d = t.rank - 1; d >= 0 && ++index[d] == t.shape[d]; d--) index[d] = 0;
    }
}

// grad_value when there is nothing to scatter (N_q == 0): all zeros (+0 in
// every storage dtype). On the device: its span read, its elements zeroed,
// written back.
void fill_zeros(const TensorView &t, const CheckedCall &checked) {
    const std::int64_t size = static_cast<std::int64_t>(dtype_size(t.dtype));
    if (!on_device(t)) {
        for_each_element(t, [&](std::int64_t offset) { std::memset(element(t, offset), 0, size); });
        return;
    }
    if (t.numel() == 0) return;
    const Reach reach = reach_of(t);
    const std::int32_t error = rewrite_span(
        checked, t.data, static_cast<std::uint64_t>(t.byte_offset + reach.low * size),
        static_cast<std::size_t>((reach.high - reach.low + 1) * size), [&](std::byte *span) {
            for_each_element(t, [&](std::int64_t offset) {
                std::memset(span + (offset - reach.low) * size, 0, static_cast<std::size_t>(size));
            });
        });
    if (error != 0) {
        const std::string gpu = checked.device == Device::cuda ? "CUDA" : "OpenCL";
        throw Error("msda: grad_value: zeroing it on the " + gpu + " device failed with " + gpu + " error " +
                    std::to_string(error));
    }
}

// Halide's buffer strides are 32-bit. When a tensor's batch stride is wider
// (one batch element of more than 2^31 - 1 elements), or the workspace's
// value-shaped buffers' would be (workspace_value_buffer: a batch element
// of value past 2^31 - 1 elements, whatever the caller's strides), `run`
// serves the call once per batch element, each tensor a view of extent 1
// whose batch stride is unused, and this returns true; otherwise it returns
// false.
template <typename Args, typename Run>
bool split_wide_batches(const Args &args, const CheckedCall &call,
                        std::initializer_list<TensorView Args::*> tensors, Run run) {
    constexpr std::int64_t limit = std::numeric_limits<std::int32_t>::max();
    const ProblemSize &size = call.size;
    bool fits = size.batch <= 1 || size.value_length * size.heads * size.channels <= limit;
    for (TensorView Args::*tensor : tensors) {
        const TensorView &t = args.*tensor;
        fits = fits && !(t.present() && (t.strides[0] > limit || t.strides[0] < -limit));
    }
    if (fits) return false;
    CheckedCall element_call = call;
    element_call.size.batch = 1;
    for (std::int64_t b = 0; b < call.size.batch; b++) {
        Args element = args;
        for (TensorView Args::*tensor : tensors) {
            TensorView &t = element.*tensor;
            if (!t.present()) continue;
            // Host tensors and device tensors alike: their first element
            // is byte_offset past data.
            t.byte_offset += b * t.strides[0] * static_cast<std::int64_t>(dtype_size(t.dtype));
            t.shape[0] = 1;
            t.strides[0] = 0;
        }
        run(element, element_call);
    }
    return true;
}

}  // namespace

void install_error_handler() {
    static std::once_flag once;
    std::call_once(once, [] {
        halide_set_error_handler(&collect_error);
        install_scratch_allocator();
    });
}

const char *family_name(TargetFamily family) {
    switch (family) {
    case TargetFamily::x86: return "x86";
    case TargetFamily::arm: return "arm";
    case TargetFamily::opencl: return "opencl";
    case TargetFamily::cuda: return "cuda";
    }
    return "unknown";
}

const Variant &select_variant(Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    const Variant *generic = nullptr, *channels = nullptr;
    bool family_built = false;
    for (const Variant &variant : kVariants) {
        family_built = family_built || variant.family == family;
        if (variant.family != family || variant.kind != kind || variant.op != op || variant.dtype != size.dtype ||
            variant.locations_dtype != size.locations_dtype) {
            continue;
        }
        if (variant.points != 0) {
            // The CPU family's are by-query walks (by_query_variant); the GPU
            // family's serve exactly their compile-time C_h, N_l and N_p.
            if (is_gpu(family) && variant.channels == size.channels && variant.levels == size.levels &&
                variant.points == size.points) {
                return variant;
            }
            continue;
        }
        if (variant.channels == size.channels) channels = &variant;
        if (variant.channels == 0) generic = &variant;
    }
    if (channels != nullptr) return *channels;
    const std::string gpu = family == TargetFamily::cuda ? "CUDA" : "OpenCL";
    if (generic == nullptr && !family_built && is_gpu(family)) {
        throw Error("msda: Options::device asks for " + gpu + ", and this build has no " + gpu +
                    " code (it was configured with MSDA_" + (family == TargetFamily::cuda ? "CUDA" : "OPENCL") +
                    "=OFF)");
    }
    if (generic == nullptr && is_gpu(family)) {
        throw Error("msda: the " + gpu + " code computes float32 storage and float32 locations only; this call has " +
                    dtype_name(size.dtype) + " storage and " + dtype_name(size.locations_dtype) +
                    " locations (use Device::cpu for half precision)");
    }
    if (generic == nullptr) {
        throw Error(std::string("msda: this build has no generated code for ") +
                    (op == Operator::gka ? "GKA " : "") + kind_name(kind) + " with " + dtype_name(size.dtype) +
                    " storage and " + dtype_name(size.locations_dtype) + " locations");
    }
    return *generic;
}

namespace {

// The family's by-query variant of this kind for the sizes (compile-time
// C_h, N_l and N_p all matching), or null (the GPU family walks by level:
// its compile-time sizes are select_variant's).
const Variant *by_query_variant(Kind kind, const ProblemSize &size, Operator op, TargetFamily family) {
    if (is_gpu(family)) return nullptr;
    for (const Variant &variant : kVariants) {
        if (variant.family == family && variant.kind == kind && variant.op == op &&
            variant.dtype == size.dtype && variant.locations_dtype == size.locations_dtype && variant.points != 0 &&
            variant.channels == size.channels && variant.levels == size.levels && variant.points == size.points) {
            return &variant;
        }
    }
    return nullptr;
}

}  // namespace

Kernels select_kernels(const ProblemSize &size, const Options &options) {
    // Plans and calls fail here, before any work, when no compiled code may
    // run on this CPU.
    require_runnable_target();
    Kernels kernels;
    const Operator op = options.op;
    // GKA has no location gradient (validation requires its view absent).
    const bool locations = options.grad_sampling_locations && op == Operator::msda;
    const TargetFamily family = options.device == Device::opencl ? TargetFamily::opencl
                                : options.device == Device::cuda ? TargetFamily::cuda
                                                                 : kLibraryFamily;
    kernels.forward = &select_variant(Kind::forward, size, op, family);
    kernels.forward_by_query = by_query_variant(Kind::forward, size, op, family);
    if (options.grad_value) {
        // The float-atomic scatter only where it was asked for and exists.
        const bool atomic = !options.deterministic && is_gpu(family);
        kernels.grad_value = &select_variant(atomic ? Kind::grad_value_atomic : Kind::grad_value, size, op, family);
        if (!atomic && family == TargetFamily::opencl) {
            kernels.grad_value_serial = &select_variant(Kind::grad_value_serial, size, op, family);
        }
        kernels.grad_value_by_query = by_query_variant(Kind::grad_value, size, op, family);
    }
    // The per-sample gradients asked for, in one pass; by query where a
    // variant walks so for exactly this set (each set has one, or none has,
    // so a gradient walks the same way whatever else is asked).
    const Kind per_sample = options.grad_attention_weights && locations ? Kind::grad_sample
                            : options.grad_attention_weights           ? Kind::grad_attention_weights
                                                                       : Kind::grad_sampling_locations;
    if (options.grad_attention_weights || locations) {
        kernels.grad_sample = &select_variant(per_sample, size, op, family);
        kernels.grad_sample_by_query = by_query_variant(per_sample, size, op, family);
    }
    return kernels;
}

namespace {

// Whether a plan stages value head-major (see Options::relayout).
bool stages_value(const ProblemSize &size, const Options &options) {
    if (options.relayout == Relayout::never || options.value_layout != ValueLayout::BLNC || size.heads < 2 ||
        options.device != Device::cpu) {
        return false;  // the GPU family reads value as given
    }
    // The copy's head stride (L * C_h elements) must fit a Halide buffer's
    // 32-bit stride: past it the kernels read the caller's value, even with
    // Relayout::always.
    if (size.value_length * size.channels > std::numeric_limits<std::int32_t>::max()) return false;
    if (options.relayout == Relayout::always) return true;
    const std::int64_t bytes = size.batch * size.value_length * size.heads * size.channels *
                               static_cast<std::int64_t>(dtype_size(size.dtype));
    // Validated sizes: each factor fits 32 bits, so the product fits 64.
    const std::int64_t samples_per_head = size.queries * size.levels * size.points;
    return policy::value_outgrows_l2(bytes, cpu_caches().l2) && samples_per_head >= 4 * size.value_length;
}

}  // namespace

Workspace workspace_layout(const ProblemSize &size, const Options &options) {
    // Validated sizes: value is addressable, so these products fit.
    const std::size_t elements = static_cast<std::size_t>(size.batch * size.value_length * size.heads * size.channels);
    Workspace workspace;
    const bool staged = stages_value(size, options);
    constexpr std::size_t kAlignment = Workspace::kAlignment;
    if (staged) workspace.value_copy = (elements * dtype_size(size.dtype) + kAlignment - 1) / kAlignment * kAlignment;
    if (options.grad_value && (size.dtype != DType::f32 || staged)) workspace.sums = elements * sizeof(float);
    return workspace;
}

std::size_t workspace_bytes(const ProblemSize &size, const Options &options) {
    return workspace_layout(size, options).bytes();
}

namespace {

// The kernels' value: the caller's, or its head-major copy in the workspace
// when the plan stages one and value is not head-major already.
void stage_value(CommonInputs &in, const ProblemSize &size, const Workspace &layout, void *workspace) {
    if (layout.value_copy == 0 || is_head_major(in.value)) return;
    HalideBuffer copy = workspace_value_buffer(workspace, halide_type(size.dtype), size, true);
    call_relayout(size.dtype, in.value, copy);
    in.value = copy;
}

// The workspace's first 64-byte boundary (see Workspace).
void *aligned_workspace(void *workspace) {
    const std::uintptr_t address = reinterpret_cast<std::uintptr_t>(workspace);
    const std::uintptr_t skip = (Workspace::kAlignment - address % Workspace::kAlignment) % Workspace::kAlignment;
    return workspace == nullptr ? nullptr : static_cast<char *>(workspace) + skip;
}

// Whether a (B, N_q, N_h, N_l, N_p[, 2]) tensor's (l, p) dimensions lie as
// a by-query variant requires (msda_generators.cpp): the location planes
// (BQHLP2, x and y interleaved) with strides (2 N_p, 2), the weights with
// (N_p, 1).
bool dense_locations(const TensorView &t, const ProblemSize &size, const Options &options) {
    return options.locations_layout == LocationsLayout::BQHLP2 && t.strides[4] == 2 &&
           t.strides[3] == 2 * size.points;
}
bool dense_weights(const TensorView &t, const ProblemSize &size) {
    return t.strides[4] == 1 && t.strides[3] == size.points;
}

// The automatic order's probe: whether most of up to kProbes queries, evenly
// spaced over the call's (batch, query) pairs, have all their level-0 samples
// (every head and point) within kNeighbourhood pixels of each other along
// each axis. A query with a non-finite level-0 location does not count as
// clustered. Reads float32 BQHLP2 locations (a by-query variant exists for
// the call: its locations are float32, dense_locations holds).
bool queries_sample_neighbourhoods(const TensorView &locations, const ProblemSize &size,
                                   const LevelTable &levels) {
    constexpr std::int64_t kProbes = 32;
    constexpr double kNeighbourhood = 16.0;
    const double height = levels.shapes[0], width = levels.shapes[1];
    const float *data = reinterpret_cast<const float *>(host_address(locations));
    const std::int64_t pairs = size.batch * size.queries;
    const std::int64_t probes = std::min(kProbes, pairs);
    std::int64_t clustered = 0;
    for (std::int64_t i = 0; i < probes; i++) {
        const std::int64_t pair = i * (pairs / probes);
        const std::int64_t b = pair / size.queries, q = pair % size.queries;
        double min_x = 0, max_x = 0, min_y = 0, max_y = 0;
        bool finite = true;
        for (std::int64_t h = 0; h < size.heads && finite; h++) {
            for (std::int64_t p = 0; p < size.points; p++) {
                const float *xy = data + b * locations.strides[0] + q * locations.strides[1] +
                                  h * locations.strides[2] + p * locations.strides[4];
                const double x = xy[0] * width, y = xy[locations.strides[5]] * height;
                if (!std::isfinite(x) || !std::isfinite(y)) {
                    finite = false;
                    break;
                }
                const bool first = h == 0 && p == 0;
                min_x = first ? x : std::min(min_x, x), max_x = first ? x : std::max(max_x, x);
                min_y = first ? y : std::min(min_y, y), max_y = first ? y : std::max(max_y, y);
            }
        }
        if (finite && max_x - min_x <= kNeighbourhood && max_y - min_y <= kNeighbourhood) clustered++;
    }
    return 2 * clustered > probes;
}

// One forward call in the order decided for the whole call.
void forward_in_order(const Kernels &kernels, const ForwardArgs &args, const Options &options,
                      const CheckedCall &checked, void *workspace, bool by_query) {
    const ProblemSize &size = checked.size;
    if (split_wide_batches(args, checked,
                           {&ForwardArgs::value, &ForwardArgs::sampling_locations,
                            &ForwardArgs::attention_weights, &ForwardArgs::output},
                           [&](const ForwardArgs &element, const CheckedCall &element_call) {
                               forward_in_order(kernels, element, options, element_call, workspace, by_query);
                           })) {
        return;
    }
    CommonInputs in(args.value, args.sampling_locations, args.attention_weights, checked, options);
    HalideBuffer output = head_major_buffer(args.output, size.heads, size.channels);
    if (by_query) {
        // Reads value in the caller's layout (see schedule_forward_by_query).
        call(*kernels.forward_by_query, in, output);
        return;
    }
    stage_value(in, size, workspace_layout(size, options), workspace);
    call(*kernels.forward, in, output);
}

// Options::sample_order for a call whose by-query variant exists and whose
// tensors it can read. any_level_size: automatic takes by_query for
// clustered samples whatever the size of the levels (grad_value's scatter:
// by query it was 0.89x by level on G local, whose 60 x 40 levels keep the
// forward and the per-sample gradients by level).
bool chooses_by_query(const TensorView &locations, const Options &options, const CheckedCall &checked,
                      bool any_level_size = false) {
    if (options.sample_order == SampleOrder::by_query) return true;
    if (options.sample_order == SampleOrder::by_level) return false;
    if (any_level_size) return queries_sample_neighbourhoods(locations, checked.size, checked.levels);
    std::int64_t largest_level = 0;
    for (std::size_t l = 0; l < checked.levels.starts.size(); l++) {
        largest_level = std::max<std::int64_t>(
            largest_level, std::int64_t{checked.levels.shapes[2 * l]} * checked.levels.shapes[2 * l + 1]);
    }
    return policy::level_outgrows_by_level_walk(largest_level, checked.size.channels,
                                                static_cast<std::int64_t>(dtype_size(checked.size.dtype)),
                                                cpu_caches().l2) &&
           queries_sample_neighbourhoods(locations, checked.size, checked.levels);
}

// Whether a call served by this by-query variant (null: none) walks by
// query: its per-sample inputs lie as the variant needs and the order asked
// for (or decided, see chooses_by_query) is by_query.
bool takes_by_query(const Variant *variant, const TensorView &locations, const TensorView &weights,
                    const Options &options, const CheckedCall &checked, bool any_level_size = false) {
    const ProblemSize &size = checked.size;
    return variant != nullptr && size.batch > 0 && size.queries > 0 && dense_locations(locations, size, options) &&
           dense_weights(weights, size) && chooses_by_query(locations, options, checked, any_level_size);
}

// Whether grad_value's scatter walks by query (the same bits either way).
bool scatters_by_query(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                       const CheckedCall &checked) {
    return takes_by_query(kernels.grad_value_by_query, args.sampling_locations, args.attention_weights, options,
                          checked, true);
}

}  // namespace

bool walks_by_query(const Kernels &kernels, const ForwardArgs &args, const Options &options,
                    const CheckedCall &checked) {
    return takes_by_query(kernels.forward_by_query, args.sampling_locations, args.attention_weights, options,
                          checked);
}

bool walks_by_query(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                    const CheckedCall &checked) {
    const ProblemSize &size = checked.size;
    // The asked-for gradients' blocks must be dense (an absent one is not).
    const Kind kind = kernels.grad_sample_by_query != nullptr ? kernels.grad_sample_by_query->kind : Kind::grad_sample;
    return kernels.grad_sample_by_query != nullptr &&
           (kind == Kind::grad_attention_weights || dense_locations(args.grad_sampling_locations, size, options)) &&
           (kind == Kind::grad_sampling_locations || dense_weights(args.grad_attention_weights, size)) &&
           takes_by_query(kernels.grad_sample_by_query, args.sampling_locations, args.attention_weights, options,
                          checked);
}

void run_forward(const Kernels &kernels, const ForwardArgs &args, const Options &options,
                 const CheckedCall &checked, void *workspace) {
    if (checked.size.batch == 0 || checked.size.queries == 0) return;  // output is empty
    forward_in_order(kernels, args, options, checked, aligned_workspace(workspace),
                     walks_by_query(kernels, args, options, checked));
}

namespace {

// One backward call, its per-sample gradients in the order decided for the
// whole call.
void backward_in_order(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                       const CheckedCall &checked, void *workspace, bool by_query, bool scatter_by_query) {
    const ProblemSize &size = checked.size;
    if (split_wide_batches(args, checked,
                           {&BackwardArgs::value, &BackwardArgs::sampling_locations,
                            &BackwardArgs::attention_weights, &BackwardArgs::grad_output,
                            &BackwardArgs::grad_value, &BackwardArgs::grad_sampling_locations,
                            &BackwardArgs::grad_attention_weights},
                           [&](const BackwardArgs &element, const CheckedCall &element_call) {
                               backward_in_order(kernels, element, options, element_call, workspace, by_query,
                                                 scatter_by_query);
                           })) {
        return;
    }
    CommonInputs in(args.value, args.sampling_locations, args.attention_weights, checked, options);
    HalideBuffer grad_output = head_major_buffer(args.grad_output, size.heads, size.channels);
    const Workspace layout = workspace_layout(size, options);

    if (kernels.grad_value != nullptr) {
        const Variant &scatter = scatter_by_query                      ? *kernels.grad_value_by_query
                                 : kernels.grad_value_serial != nullptr &&
                                           !opencl::has_int64_atomics(checked.queue)
                                     ? *kernels.grad_value_serial
                                     : *kernels.grad_value;
        HalideBuffer grad_value = value_buffer(args.grad_value, options.value_layout);
        void *sums_memory = static_cast<char *>(workspace) + layout.sums_offset();
        if (layout.value_copy > 0 && !is_head_major(grad_value)) {
            // Summed head-major in float32, then copied (float32) or rounded
            // once (half precision) into grad_value.
            HalideBuffer sums = workspace_value_buffer(sums_memory, kFloat32, size, true);
            if (size.dtype == DType::f32) {
                call(scatter, in, grad_output, sums);
                call_relayout(DType::f32, sums, grad_value);
            } else {
                call(scatter, in, grad_output, sums, grad_value);
            }
        } else if (size.dtype == DType::f32) {
            call(scatter, in, grad_output, grad_value);
        } else {
            // Half storage: the sums in float32 in the workspace, (c, h, row,
            // b) dense, then rounded once into grad_value.
            HalideBuffer sums = workspace_value_buffer(sums_memory, kFloat32, size, false);
            call(scatter, in, grad_output, sums, grad_value);
        }
    }
    if (kernels.grad_sample == nullptr) return;
    // A by-query variant (of the per-sample gradients asked for) reads value
    // in the caller's layout (see schedule_grad_sample_by_query).
    const Variant &per_sample = by_query ? *kernels.grad_sample_by_query : *kernels.grad_sample;
    if (!by_query) stage_value(in, size, layout, workspace);
    if (per_sample.kind == Kind::grad_attention_weights) {
        HalideBuffer weights = weight_buffer(args.grad_attention_weights);
        call(per_sample, in, grad_output, weights);
        return;
    }
    HalideBuffer x = location_plane(args.grad_sampling_locations, options.locations_layout, 0);
    HalideBuffer y = location_plane(args.grad_sampling_locations, options.locations_layout, 1);
    if (per_sample.kind == Kind::grad_sampling_locations) {
        call(per_sample, in, grad_output, x, y);
        return;
    }
    HalideBuffer weights = weight_buffer(args.grad_attention_weights);
    call(per_sample, in, grad_output, weights, x, y);
}

}  // namespace

void run_backward(const Kernels &kernels, const BackwardArgs &args, const Options &options,
                  const CheckedCall &checked, void *workspace) {
    const ProblemSize &size = checked.size;
    if (size.batch == 0) return;  // every tensor is empty
    if (size.queries == 0) {
        if (kernels.grad_value != nullptr) fill_zeros(args.grad_value, checked);
        return;
    }
    backward_in_order(kernels, args, options, checked, aligned_workspace(workspace),
                      walks_by_query(kernels, args, options, checked),
                      scatters_by_query(kernels, args, options, checked));
}

}  // namespace msda::detail

namespace msda {

std::vector<CompiledVariant> compiled_variants() {
    std::vector<CompiledVariant> list;
    for (const detail::Variant &variant : detail::kVariants) {
        list.push_back({variant.name, detail::family_name(variant.family), detail::kind_id(variant.kind), variant.op,
                        variant.dtype, variant.locations_dtype, variant.channels, variant.levels, variant.points});
    }
    return list;
}

}  // namespace msda
