// The plain C interface (msda.h) over the C++ API. Every entry point catches
// everything: C callers and FFI never see an exception, they get MSDA_ERROR
// and read the message from msda_last_error() on the same thread.
#include "msda/msda.h"

#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <type_traits>

#include "msda/diagnostics.hpp"
#include "msda/msda.hpp"

// The handle behind the opaque msda_plan*.
struct msda_plan {
    msda::Plan plan;
};

namespace {

// Each thread keeps the message of its own last failure. If storing the
// message itself runs out of memory, a fixed text stands in for it.
thread_local std::string last_error_message;
thread_local const char *last_error_fallback = nullptr;

void clear_error() noexcept {
    last_error_message.clear();
    last_error_fallback = nullptr;
}

void set_error(const char *message) noexcept {
    try {
        last_error_message = message;
        last_error_fallback = nullptr;
    } catch (...) {
        last_error_fallback = "msda: out of memory while reporting an error";
    }
}

static_assert(MSDA_ERROR == static_cast<int>(msda::ErrorKind::runtime) &&
              MSDA_ERROR_TYPE == static_cast<int>(msda::ErrorKind::type) &&
              MSDA_ERROR_VALUE == static_cast<int>(msda::ErrorKind::value));

// Runs `body`, turning whatever it throws into a message and a status: an
// msda::Error's kind (msda_status has ErrorKind's values), else MSDA_ERROR.
template <typename Body>
msda_status guarded(Body &&body) noexcept {
    try {
        body();
        clear_error();
        return MSDA_OK;
    } catch (const msda::Error &error) {
        set_error(error.what());
        return static_cast<msda_status>(error.kind());
    } catch (const std::bad_alloc &) {
        set_error("msda: out of memory");
    } catch (const std::exception &error) {
        try {
            set_error((std::string("msda: internal error: ") + error.what()).c_str());
        } catch (...) {
            set_error("msda: internal error");
        }
    } catch (...) {
        set_error("msda: unknown internal error");
    }
    return MSDA_ERROR;
}

// Messages read like the C++ API's: "msda: <argument>: <what was expected>".
[[noreturn]] void fail(const std::string &argument, const std::string &what) {
    throw msda::ValueError("msda: " + argument + ": " + what);
}

template <typename T>
const T &require(const T *pointer, const char *argument) {
    if (pointer == nullptr) {
        fail(argument, "null pointer");
    }
    return *pointer;
}

// A C enum field's code as the caller stored it. C lets an enum object hold
// any int; in C++ loading a value outside the enum's range is undefined (and
// UBSan stops at it), so the field's bytes are read as its underlying
// integer.
template <typename Enum>
int code_of(const Enum &field) {
    std::underlying_type_t<Enum> code;
    std::memcpy(&code, &field, sizeof code);
    return static_cast<int>(code);
}

msda::DType to_dtype(const msda_dtype &dtype, const char *what) {
    const int code = code_of(dtype);
    if (code < static_cast<int>(MSDA_F32) || code > static_cast<int>(MSDA_I64)) {
        fail(what, "unknown dtype code " + std::to_string(code));
    }
    return static_cast<msda::DType>(code);
}

// A versioned struct as the caller laid it out: its first struct_size bytes
// (0: this layout) over `defaults`, refused when it is larger than this
// library's or smaller than `minimum` (the first fields every layout has).
template <typename Struct>
Struct versioned(const unsigned char *bytes, std::size_t size, const Struct &defaults, const char *name,
                 const char *type, std::size_t minimum) {
    if (size == 0) size = sizeof(Struct);
    if (size > sizeof(Struct)) {
        fail(std::string(name) + ".struct_size",
             "is " + std::to_string(size) + ", larger than the " + std::to_string(sizeof(Struct)) + " bytes of " +
                 type + " this library reads (was the caller built against a newer msda.h?)");
    }
    if (size < minimum) {
        fail(std::string(name) + ".struct_size", "is " + std::to_string(size) + "; every " + type + " holds at least " +
                                                     std::to_string(minimum) + " bytes");
    }
    Struct result = defaults;
    std::memcpy(&result, bytes, size);
    result.struct_size = sizeof(Struct);
    return result;
}

std::size_t size_field(const unsigned char *bytes) {
    std::size_t size = 0;
    std::memcpy(&size, bytes, sizeof size);
    return size;
}

constexpr std::size_t kTensorMinimum = offsetof(msda_tensor, strides) + sizeof(msda_tensor::strides);

// The caller's tensors of one argument struct: each of the size
// value.struct_size says, one after the other.
class TensorArray {
public:
    explicit TensorArray(const void *args) : bytes_(static_cast<const unsigned char *>(args)) {
        stride_ = size_field(bytes_);
        if (stride_ == 0) stride_ = sizeof(msda_tensor);
        versioned(bytes_, stride_, msda_tensor{}, "value", "msda_tensor", kTensorMinimum);
    }
    msda_tensor at(std::size_t index, const char *name) const {
        const unsigned char *bytes = bytes_ + index * stride_;
        const std::size_t own = size_field(bytes);
        if (own != 0 && own != stride_) {
            fail(std::string(name) + ".struct_size",
                 "is " + std::to_string(own) + ", but value's is " + std::to_string(stride_) +
                     "; the tensors of one call have one layout");
        }
        msda_tensor defaults{};
        defaults.device_type = MSDA_DEVICE_TYPE_CPU;
        return versioned(bytes, stride_, defaults, name, "msda_tensor", kTensorMinimum);
    }

private:
    const unsigned char *bytes_;
    std::size_t stride_ = 0;
};

msda::TensorView to_view(const msda_tensor &tensor, const char *name) {
    msda::TensorView view;
    view.data = tensor.data;
    view.rank = tensor.rank;
    const bool absent = tensor.data == nullptr && tensor.rank == 0;
    // An absent tensor's dtype is never read, so whatever it holds is fine.
    view.dtype = absent ? msda::DType::f32 : to_dtype(tensor.dtype, name);
    for (int axis = 0; axis < MSDA_MAX_RANK; ++axis) {
        view.shape[axis] = tensor.shape[axis];
        view.strides[axis] = tensor.strides[axis];
    }
    // 0, as in a zeroed struct, is the host; other codes go through as they
    // are, so the call names the tensor whose code it does not know.
    view.device_type = tensor.device_type == 0 ? msda::DeviceType::cpu
                                               : static_cast<msda::DeviceType>(tensor.device_type);
    view.device_id = tensor.device_id;
    view.byte_offset = tensor.byte_offset;
    return view;
}

template <typename Enum>
Enum to_enum(int code, int last, const char *what) {
    if (code < 0 || code > last) {
        fail(std::string("options.") + what, "unknown value " + std::to_string(code));
    }
    return static_cast<Enum>(code);
}

msda::Options to_options(const msda_options &given) {
    const msda_options options = versioned(reinterpret_cast<const unsigned char *>(&given), given.struct_size,
                                           msda_default_options(), "options", "msda_options",
                                           offsetof(msda_options, op) + sizeof(msda_operator));
    msda::Options result;
    result.op = to_enum<msda::Operator>(code_of(options.op), MSDA_OP_GKA, "op");
    result.rounding = to_enum<msda::Rounding>(code_of(options.rounding), MSDA_ROUNDING_NEAREST, "rounding");
    result.value_layout =
        to_enum<msda::ValueLayout>(code_of(options.value_layout), MSDA_BNLC, "value_layout");
    result.locations_layout = to_enum<msda::LocationsLayout>(code_of(options.locations_layout),
                                                             MSDA_B2QHLP, "locations_layout");
    result.align_corners = options.align_corners != 0;
    result.padding_mode =
        to_enum<msda::PaddingMode>(code_of(options.padding_mode), MSDA_PADDING_BORDER, "padding_mode");
    result.grad_value = options.grad_value != 0;
    result.grad_sampling_locations = options.grad_sampling_locations != 0;
    result.grad_attention_weights = options.grad_attention_weights != 0;
    result.relayout = to_enum<msda::Relayout>(code_of(options.relayout), MSDA_RELAYOUT_NEVER, "relayout");
    result.sample_order =
        to_enum<msda::SampleOrder>(code_of(options.sample_order), MSDA_SAMPLE_ORDER_BY_QUERY, "sample_order");
    result.device = to_enum<msda::Device>(code_of(options.device), MSDA_DEVICE_CUDA, "device");
    result.deterministic = options.atomic_grad_value == 0;
    result.device_context.context = options.device_context.context;
    result.device_context.queue = options.device_context.queue;
    return result;
}

// The inputs both operators take, converted from either C argument struct.
template <typename Args>
void convert_inputs(const TensorArray &tensors, Args &result) {
    result.value = to_view(tensors.at(0, "value"), "value");
    result.spatial_shapes = to_view(tensors.at(1, "spatial_shapes"), "spatial_shapes");
    result.level_start_index = to_view(tensors.at(2, "level_start_index"), "level_start_index");
    result.sampling_locations = to_view(tensors.at(3, "sampling_locations"), "sampling_locations");
    result.attention_weights = to_view(tensors.at(4, "attention_weights"), "attention_weights");
}

msda::ForwardArgs to_forward_args(const msda_forward_args &args) {
    const TensorArray tensors(&args);
    msda::ForwardArgs result;
    convert_inputs(tensors, result);
    // The forward's sixth tensor is its output (the backward's grad_output).
    result.output = to_view(tensors.at(5, "output"), "output");
    return result;
}

msda::BackwardArgs to_backward_args(const msda_backward_args &args) {
    const TensorArray tensors(&args);
    msda::BackwardArgs result;
    convert_inputs(tensors, result);
    result.grad_output = to_view(tensors.at(5, "grad_output"), "grad_output");
    result.grad_value = to_view(tensors.at(6, "grad_value"), "grad_value");
    result.grad_sampling_locations = to_view(tensors.at(7, "grad_sampling_locations"), "grad_sampling_locations");
    result.grad_attention_weights = to_view(tensors.at(8, "grad_attention_weights"), "grad_attention_weights");
    return result;
}

msda::ProblemSize to_problem_size(const msda_problem_size &size) {
    msda::ProblemSize result;
    result.batch = size.batch;
    result.value_length = size.value_length;
    result.heads = size.heads;
    result.channels = size.channels;
    result.levels = size.levels;
    result.queries = size.queries;
    result.points = size.points;
    result.dtype = to_dtype(size.dtype, "size.dtype");
    result.locations_dtype = to_dtype(size.locations_dtype, "size.locations_dtype");
    return result;
}

}  // namespace

extern "C" {

msda_options msda_default_options(void) {
    const msda::Options defaults;
    msda_options options;
    std::memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.op = static_cast<msda_operator>(defaults.op);
    options.rounding = static_cast<msda_rounding>(defaults.rounding);
    options.value_layout = static_cast<msda_value_layout>(defaults.value_layout);
    options.locations_layout = static_cast<msda_locations_layout>(defaults.locations_layout);
    options.align_corners = defaults.align_corners ? 1 : 0;
    options.padding_mode = static_cast<msda_padding_mode>(defaults.padding_mode);
    options.grad_value = defaults.grad_value ? 1 : 0;
    options.grad_sampling_locations = defaults.grad_sampling_locations ? 1 : 0;
    options.relayout = static_cast<msda_relayout>(defaults.relayout);
    options.sample_order = static_cast<msda_sample_order>(defaults.sample_order);
    options.device = static_cast<msda_device>(defaults.device);
    options.atomic_grad_value = defaults.deterministic ? 0 : 1;
    options.device_context.context = defaults.device_context.context;
    options.device_context.queue = defaults.device_context.queue;
    options.grad_attention_weights = defaults.grad_attention_weights ? 1 : 0;
    return options;
}

msda_tensor msda_contiguous(void *data, msda_dtype dtype, int rank, const int64_t *shape) {
    msda_tensor tensor;
    std::memset(&tensor, 0, sizeof tensor);
    tensor.struct_size = sizeof tensor;
    tensor.device_type = MSDA_DEVICE_TYPE_CPU;
    tensor.data = data;
    tensor.dtype = dtype;
    // A rank this function cannot describe is kept as given, so that the call
    // the tensor is passed to reports it by name.
    tensor.rank = rank;
    if (rank < 0 || rank > MSDA_MAX_RANK || shape == nullptr) {
        return tensor;
    }
    int64_t stride = 1;
    for (int axis = rank - 1; axis >= 0; --axis) {
        tensor.shape[axis] = shape[axis];
        tensor.strides[axis] = stride;
        // Saturated where the dense strides do not fit 64 bits (the call
        // refuses the tensor by name), as TensorView::contiguous.
        if (axis > 0 && __builtin_mul_overflow(stride, shape[axis], &stride)) stride = INT64_MAX;
    }
    return tensor;
}

msda_status msda_forward(const msda_forward_args *args, const msda_options *options) {
    return guarded([&] {
        const msda::ForwardArgs cpp_args = to_forward_args(require(args, "args"));
        const msda::Options cpp_options = to_options(require(options, "options"));
        msda::forward(cpp_args, cpp_options);
    });
}

msda_status msda_backward(const msda_backward_args *args, const msda_options *options) {
    return guarded([&] {
        const msda::BackwardArgs cpp_args = to_backward_args(require(args, "args"));
        const msda::Options cpp_options = to_options(require(options, "options"));
        msda::backward(cpp_args, cpp_options);
    });
}

msda_status msda_plan_create(const msda_problem_size *size, const msda_options *options,
                             msda_plan **plan) {
    if (plan != nullptr) {
        *plan = nullptr;
    }
    return guarded([&] {
        if (plan == nullptr) {
            fail("plan", "null pointer (where the new plan's handle goes)");
        }
        const msda::ProblemSize cpp_size = to_problem_size(require(size, "size"));
        const msda::Options cpp_options = to_options(require(options, "options"));
        // Owned until handed out, so a throwing constructor leaks nothing.
        auto handle = std::make_unique<msda_plan>(msda_plan{msda::Plan(cpp_size, cpp_options)});
        *plan = handle.release();
    });
}

void msda_plan_destroy(msda_plan *plan) { delete plan; }

size_t msda_plan_workspace_size(const msda_plan *plan) {
    size_t bytes = 0;
    guarded([&] { bytes = require(plan, "plan").plan.workspace_size(); });
    return bytes;
}

msda_status msda_plan_forward(const msda_plan *plan, const msda_forward_args *args,
                              void *workspace, size_t workspace_bytes) {
    return guarded([&] {
        const msda::Plan &cpp_plan = require(plan, "plan").plan;
        const msda::ForwardArgs cpp_args = to_forward_args(require(args, "args"));
        cpp_plan.forward(cpp_args, workspace, workspace_bytes);
    });
}

msda_status msda_plan_backward(const msda_plan *plan, const msda_backward_args *args,
                               void *workspace, size_t workspace_bytes) {
    return guarded([&] {
        const msda::Plan &cpp_plan = require(plan, "plan").plan;
        const msda::BackwardArgs cpp_args = to_backward_args(require(args, "args"));
        cpp_plan.backward(cpp_args, workspace, workspace_bytes);
    });
}

void msda_set_num_threads(int threads) {
    guarded([&] { msda::set_num_threads(threads); });
}

size_t msda_cached_workspace_bytes(void) {
    size_t bytes = 0;
    guarded([&] { bytes = msda::cached_workspace_bytes(); });
    return bytes;
}

void msda_release_cached_workspace(void) {
    guarded([] { msda::release_cached_workspace(); });
}

const char *msda_version(void) { return msda::version(); }

const char *msda_cpu_target(void) {
    // Decided once per process; kept for the pointer's lifetime.
    static const std::string selected = [] {
        try {
            return msda::cpu_dispatch().selected;
        } catch (...) {
            return std::string();
        }
    }();
    return selected.c_str();
}

msda_status msda_opencl_queue(void **context, void **queue, void **device) {
    return guarded([&] {
        const msda::OpenClQueue own = msda::opencl_queue();
        if (context != nullptr) *context = own.context;
        if (queue != nullptr) *queue = own.queue;
        if (device != nullptr) *device = own.device;
    });
}

msda_status msda_release_opencl_context(void *queue) {
    return guarded([&] { msda::release_opencl_context(queue); });
}

msda_status msda_release_cuda_context(void *context) {
    return guarded([&] { msda::release_cuda_context(context); });
}

int msda_abi_version(void) { return 1; }

const char *msda_last_error(void) {
    return last_error_fallback != nullptr ? last_error_fallback : last_error_message.c_str();
}

}  // extern "C"
