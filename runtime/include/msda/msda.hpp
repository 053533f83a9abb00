// msda: multi-scale deformable attention, compiled ahead of time from Halide
// pipelines. This is the core C++ API: errors, dtypes, tensors, options,
// arguments, Plan, forward and backward. Device contexts are in
// <msda/device.hpp> (included), diagnostics (the CPU report, devices,
// compiled variants) in <msda/diagnostics.hpp>. See README.md and the SPEC
// for what each operator computes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <msda/device.hpp>

namespace msda {

// Every failure is reported as msda::Error, whose message names the tensor
// and what was expected; nothing is written to outputs when validation
// fails. Its kind says which failure it is, as Python's exception types do:
//   type     a tensor of the wrong dtype (msda::TypeError)
//   value    a bad shape, stride, value or option (msda::ValueError)
//   runtime  a failure while running: no device, generated code or a device
//            call failing, memory (msda::Error itself)
// The C API returns the same kinds as MSDA_ERROR_TYPE, MSDA_ERROR_VALUE and
// MSDA_ERROR; the torch operators raise TypeError, ValueError and
// RuntimeError.
enum class ErrorKind : int { runtime = 1, type = 2, value = 3 };

class Error : public std::runtime_error {
public:
    explicit Error(const std::string &message, ErrorKind kind = ErrorKind::runtime)
        : std::runtime_error(message), kind_(kind) {}
    ErrorKind kind() const noexcept { return kind_; }

private:
    ErrorKind kind_;
};

class TypeError : public Error {
public:
    explicit TypeError(const std::string &message) : Error(message, ErrorKind::type) {}
};

class ValueError : public Error {
public:
    explicit ValueError(const std::string &message) : Error(message, ErrorKind::value) {}
};

enum class DType : int { f32 = 0, f16 = 1, bf16 = 2, f64 = 3, i32 = 4, i64 = 5 };
const char *dtype_name(DType);
std::size_t dtype_size(DType);

constexpr int kMaxRank = 6;

// Where a tensor's memory is, in DLPack's device type codes. cpu: host
// memory. cuda: CUDA device memory (a device pointer, CUdeviceptr, as
// cudaMalloc, cuMemAlloc or an engine's allocator gives it; managed memory
// too). opencl: an OpenCL buffer (cl_mem).
enum class DeviceType : std::int32_t { cpu = 1, cuda = 2, opencl = 4 };

// A non-owning view of a strided tensor. Strides are in elements, not bytes.
// A view with data == nullptr and rank == 0 is "absent" (used for gradients
// that were not asked for).
//
// Host memory: data + byte_offset is the address of the first element (the
// one at index 0 in every dimension). CUDA: the same, a device address.
// OpenCL: data is the cl_mem and byte_offset says where the first element
// is in the memory it names. All tensors of one call are on one device (one
// device_type and device_id), except that spatial_shapes and
// level_start_index may always be host tensors (see Options::device).
struct TensorView {
    void *data = nullptr;
    DType dtype = DType::f32;
    int rank = 0;
    std::int64_t shape[kMaxRank] = {};
    std::int64_t strides[kMaxRank] = {};
    DeviceType device_type = DeviceType::cpu;
    std::int32_t device_id = 0;  // DLPack's device_id: CUDA's device ordinal; OpenCL: 0, the
                                 // device of the call's queue
    std::int64_t byte_offset = 0;

    // This view on a device: data becomes the device pointer (CUDA) or
    // handle (a cl_mem).
    TensorView on_device(DeviceType type, std::int32_t id = 0, std::int64_t offset_bytes = 0) const {
        TensorView view = *this;
        view.device_type = type;
        view.device_id = id;
        view.byte_offset = offset_bytes;
        return view;
    }

    // A row-major (C-contiguous) view.
    static TensorView contiguous(const void *data, DType dtype,
                                 std::initializer_list<std::int64_t> shape);
    // A view with explicit strides (in elements).
    static TensorView strided(const void *data, DType dtype,
                              std::initializer_list<std::int64_t> shape,
                              std::initializer_list<std::int64_t> strides);
    // The element count (saturating at INT64_MAX for shapes that overflow).
    std::int64_t numel() const;
    bool present() const { return data != nullptr || rank != 0; }
};

// value: BLNC = (B, L, N_h, C_h); BNLC = (B, N_h, L, C_h).
enum class ValueLayout : int { BLNC = 0, BNLC = 1 };
// sampling_locations: BQHLP2 = (B, N_q, N_h, N_l, N_p, 2);
//                     B2QHLP = (B, 2, N_q, N_h, N_l, N_p).
enum class LocationsLayout : int { BQHLP2 = 0, B2QHLP = 1 };
enum class PaddingMode : int { zeros = 0, border = 1 };
// The operator: MSDA's bilinear samples at normalized locations, or GKA
// (geometric kernel attention): absolute pixel coordinates, one value row a
// sample, no location gradient.
enum class Operator : int { msda = 0, gka = 1 };
// How GKA turns a pixel coordinate into an index: floor (mx_driving's
// forward) or to nearest, ties to even (the original GKT).
enum class Rounding : int { floor = 0, nearest = 1 };

// Whether value is first copied head-major into the plan's workspace (and
// grad_value summed there), which calls that sample every row of a BLNC
// value many times run faster with. automatic: msda decides
// (docs/policies.md); always: whenever value is BLNC with 2 or more heads
// (and a head's copy, L * C_h elements, within 2^31 - 1); never. Results are
// bitwise the same either way.
enum class Relayout : int { automatic = 0, always = 1, never = 2 };

// How the forward, the backward's per-sample gradients and grad_value's
// scatter walk the samples: by_level (head by head, level by level; serves
// every call) or by_query (query by query; compiled for MSDA with C_h = 32,
// float32 locations and (N_l, N_p) of (4, 4), (3, 4) or (4, 8), dense
// per-sample blocks; where it does not exist, calls walk by level).
// automatic: msda decides (docs/policies.md). Both are deterministic;
// grad_value has the same bits in both (but for a NaN's sign), the other
// results may differ in the last bits (multiply-adds contracted
// differently).
enum class SampleOrder : int { automatic = 0, by_level = 1, by_query = 2 };

// Where a call computes, for host tensors. cpu: this library's CPU code.
// opencl: its OpenCL code (the GPU schedule family) on the OpenCL device of
// the call's queue (Options::device_context): the host tensors are copied to
// the device as the call starts and its results copied back before it
// returns, so they are in the output tensors when it returns; the device
// memory is freed then (a Plan keeps it for its next call).
// Tensors on an OpenCL device (TensorView::device_type) always run the
// OpenCL code, whatever this says: see docs/opencl.md for how they are
// addressed, and what is done when such a call returns. spatial_shapes and
// level_start_index may be host tensors or on the call's device; there they
// are read back (a blocking read on the call's queue) to validate the call.
// OpenCL computes float32 storage, and float64 on devices with cl_khr_fp64
// (the call fails naming the dtype otherwise); samples are walked by level and value is never staged
// (relayout and sample_order do not apply); every result has the same bits
// from run to run.
// cuda: its CUDA code (the same GPU family, compiled to PTX for compute
// capability 8.6, which the CUDA driver compiles for its GPU on first use)
// on the device of Options::device_context's context or stream, else device
// HL_GPU_DEVICE (0 when unset): host tensors are copied to the device and
// back as for opencl. Tensors on a CUDA device always run the CUDA code, on
// their device (docs/cuda.md: the context, the stream and what is done when
// a call returns); float32 and float64; deterministic unless
// Options::deterministic is false (float64 is always deterministic). Without a CUDA driver or device a call
// fails saying so (cuda_devices()).
enum class Device : int { cpu = 0, opencl = 1, cuda = 2 };

struct Options {
    Operator op = Operator::msda;
    Rounding rounding = Rounding::floor;  // GKA only
    ValueLayout value_layout = ValueLayout::BLNC;
    LocationsLayout locations_layout = LocationsLayout::BQHLP2;
    bool align_corners = false;              // MSDA only
    PaddingMode padding_mode = PaddingMode::zeros;  // MSDA only
    // Which gradients backward computes. What is not asked for is neither
    // computed nor written, and its view may be absent. GKA has no location
    // gradient: grad_sampling_locations is not computed, and its view must
    // be absent.
    bool grad_value = true;
    bool grad_sampling_locations = true;
    bool grad_attention_weights = true;
    Relayout relayout = Relayout::automatic;
    SampleOrder sample_order = SampleOrder::automatic;
    Device device = Device::cpu;
    // false: on OpenCL and CUDA, grad_value is summed with float atomic
    // adds, in an order that changes from run to run (results within the
    // SPEC's tolerance, not bitwise reproducible). true (the default): in
    // fixed point, with integer atomic adds whose order cannot change the
    // bits (docs/cuda.md). The CPU code is deterministic whatever this says.
    bool deterministic = true;
    // The context and queue (or stream) of a call on OpenCL or CUDA
    // (<msda/device.hpp>); both null: msda's own.
    DeviceContext device_context;
};

// The tensors of one forward call. Shapes are those of the chosen layouts;
// output is (B, N_q, N_h * C_h), head-major.
struct ForwardArgs {
    TensorView value;
    TensorView spatial_shapes;     // (N_l, 2) int32 or int64, rows (H, W)
    TensorView level_start_index;  // (N_l,) int32 or int64
    TensorView sampling_locations;
    TensorView attention_weights;  // (B, N_q, N_h, N_l, N_p)
    TensorView output;
};

// The tensors of one backward call. Each gradient has the shape and layout of
// the tensor it is the gradient of.
struct BackwardArgs {
    TensorView value;
    TensorView spatial_shapes;
    TensorView level_start_index;
    TensorView sampling_locations;
    TensorView attention_weights;
    TensorView grad_output;  // (B, N_q, N_h * C_h)
    TensorView grad_value;
    TensorView grad_sampling_locations;
    TensorView grad_attention_weights;
};

// The sizes a plan is made for. spatial_shapes and level_start_index are
// data, read at run time; only their count (levels) is part of the plan.
struct ProblemSize {
    std::int64_t batch = 0;          // B
    std::int64_t value_length = 0;   // L = sum of H_l * W_l
    std::int64_t heads = 0;          // N_h
    std::int64_t channels = 0;       // C_h
    std::int64_t levels = 0;         // N_l
    std::int64_t queries = 0;        // N_q
    std::int64_t points = 0;         // N_p
    DType dtype = DType::f32;            // value, weights, output, grads
    DType locations_dtype = DType::f32;  // sampling_locations

    // The sizes of a call's tensors, validated as the call would validate
    // them. Outputs (output, the asked-for gradients) may be absent, so the
    // sizes can be learnt, with the inputs checked, before allocating them.
    static ProblemSize of(const ForwardArgs &, const Options & = {});
    static ProblemSize of(const BackwardArgs &, const Options & = {});
};

// Two-phase use for engines that manage their own memory: make a plan once
// for given sizes and options, ask how much workspace it needs, then run it
// as often as needed with caller-provided workspace. A plan is immutable and
// may be run from several threads at once (each with its own workspace).
// A plan for Device::opencl keeps the device buffers its calls on host
// tensors copy them into, and reuses them call after call (copies of a plan
// share them); they are released with the last copy.
// On the CPU a plan's calls allocate no heap memory once warm: the generated
// code's scratch blocks (a few per task, tens of KiB) are kept in a
// process-wide pool and reused. With set_num_threads(1) only the first
// forward and the first backward of given sizes allocate; with more
// threads a call allocates only when more of its tasks run at once than in
// any call before (tests/test_plan_allocations.cpp counts them).
class Plan {
public:
    Plan(const ProblemSize &size, const Options &options = {});

    // Bytes of scratch memory a call needs (0 when none is needed): value
    // staged head-major (Options::relayout) and grad_value's sums (float32
    // for half precision; in the storage dtype when value is staged), at any pointer alignment. The same
    // workspace serves forward and backward.
    std::size_t workspace_size() const;

    // Validates the tensors against the plan, then runs. The workspace must
    // hold workspace_size() bytes (it may be null when that is 0).
    void forward(const ForwardArgs &args, void *workspace = nullptr,
                 std::size_t workspace_bytes = 0) const;
    void backward(const BackwardArgs &args, void *workspace = nullptr,
                  std::size_t workspace_bytes = 0) const;

    const ProblemSize &size() const { return size_; }
    const Options &options() const { return options_; }

private:
    // What the plan prepared: the functions it runs, its workspace layout,
    // its policy decisions and its device buffers (shared by copies).
    class Prepared;
    ProblemSize size_;
    Options options_;
    std::shared_ptr<const Prepared> prepared_;
};

// One-shot calls: plan, take a workspace, run. The workspace comes from a
// process-wide cache (the largest block a finished one-shot call used, lent
// to the next call it fits; a call that finds it lent out allocates its
// own). Calls with a Plan never touch the cache.
void forward(const ForwardArgs &args, const Options &options = {});
void backward(const BackwardArgs &args, const Options &options = {});

// The order a forward call, or a backward call's per-sample gradients, with
// these tensors and options walk the samples in, by_level or by_query: what
// automatic decides, and whether by_query is available to them
// (SampleOrder). Validates the inputs as the call does; outputs may be
// absent (an absent gradient view is not dense, so the backward's answer
// needs the views the call will get). A call with no queries or no batch is
// by_level.
SampleOrder sample_order(const ForwardArgs &args, const Options &options = {});
SampleOrder sample_order(const BackwardArgs &args, const Options &options = {});

// The bytes the one-shot calls' cache holds now (0 when it holds none or its
// block is lent out), and a way to free it (it is reallocated by the next
// one-shot call that needs a workspace). release_cached_workspace also frees
// the generated code's kept scratch blocks (see Plan).
std::size_t cached_workspace_bytes();
void release_cached_workspace();

// Threads the generated code may use (0 = one per core, the default).
// Results do not depend on it: backward is bitwise reproducible.
void set_num_threads(int threads);
// The threads it uses now: the count set, else HL_NUM_THREADS when that
// is set, else one per core (at most 256).
int num_threads();

// The library's version, "major.minor.patch".
const char *version();

}  // namespace msda
