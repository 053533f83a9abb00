// msda's CUDA: the devices this machine has, as the CUDA driver
// (libcuda.so.1, the NVIDIA driver's library) reports them; the context and
// stream each call runs on, given to Halide's CUDA runtime through its
// acquire/release/stream hooks; what a device pointer is; and the few copies
// msda makes itself (cuda.h). The driver is loaded at run time, as Halide's
// CUDA runtime loads it, so libmsda needs no CUDA to load and a machine
// without a driver gets a reason. Only the driver API entry points and
// constants used here are declared.
#include "cuda.h"

#include <HalideRuntime.h>
#if MSDA_CUDA
#include <HalideRuntimeCuda.h>
#endif
#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <msda/diagnostics.hpp>

#include "errors.h"

namespace msda {

namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void *;
using CUstream = void *;
using CUdeviceptr = std::uint64_t;

constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kComputeCapabilityMinor = 76;
constexpr CUresult kNoDevice = 100;          // CUDA_ERROR_NO_DEVICE
constexpr int kPointerMemoryType = 2;        // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerIsManaged = 8;         // CU_POINTER_ATTRIBUTE_IS_MANAGED
constexpr int kPointerDeviceOrdinal = 9;     // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kPointerRangeStart = 11;       // CU_POINTER_ATTRIBUTE_RANGE_START_ADDR
constexpr int kPointerRangeSize = 12;        // CU_POINTER_ATTRIBUTE_RANGE_SIZE
constexpr unsigned kMemoryTypeDevice = 2;    // CU_MEMORYTYPE_DEVICE
// The stream handles CUDA defines for the default streams (CU_STREAM_LEGACY,
// CU_STREAM_PER_THREAD): they name no context of their own.
constexpr std::uintptr_t kLegacyStream = 1, kPerThreadStream = 2;

// The driver's entry points, loaded once and kept for the process.
struct Driver {
    std::string error;  // why there is none
    CUresult (*init)(unsigned) = nullptr;
    CUresult (*driver_version)(int *) = nullptr;
    CUresult (*device_count)(int *) = nullptr;
    CUresult (*device_get)(CUdevice *, int) = nullptr;
    CUresult (*device_name)(char *, int, CUdevice) = nullptr;
    CUresult (*device_attribute)(int *, int, CUdevice) = nullptr;
    CUresult (*device_memory)(std::size_t *, CUdevice) = nullptr;
    CUresult (*primary_context_retain)(CUcontext *, CUdevice) = nullptr;
    CUresult (*context_push)(CUcontext) = nullptr;
    CUresult (*context_pop)(CUcontext *) = nullptr;
    CUresult (*context_device)(CUdevice *) = nullptr;
    CUresult (*context_synchronize)() = nullptr;
    CUresult (*stream_context)(CUstream, CUcontext *) = nullptr;
    CUresult (*stream_synchronize)(CUstream) = nullptr;
    CUresult (*pointer_attribute)(void *, int, CUdeviceptr) = nullptr;
    CUresult (*copy_to_host)(void *, CUdeviceptr, std::size_t, CUstream) = nullptr;
    CUresult (*copy_to_device)(CUdeviceptr, const void *, std::size_t, CUstream) = nullptr;
    CUresult (*error_string)(CUresult, const char **) = nullptr;
    CUresult initialized = -1;  // cuInit's result
};

template <typename Function>
void load(void *library, const char *name, Function &function, std::string &missing) {
    function = reinterpret_cast<Function>(dlsym(library, name));
    if (function == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
}

const Driver &driver() {
    static const Driver loaded = [] {
        Driver d;
        void *library = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (library == nullptr) library = dlopen("libcuda.so", RTLD_LAZY | RTLD_LOCAL);
        if (library == nullptr) {
            d.error = "no CUDA driver (libcuda.so.1, from the NVIDIA driver) could be loaded";
            return d;
        }
        std::string missing;
        load(library, "cuInit", d.init, missing);
        load(library, "cuDriverGetVersion", d.driver_version, missing);
        load(library, "cuDeviceGetCount", d.device_count, missing);
        load(library, "cuDeviceGet", d.device_get, missing);
        load(library, "cuDeviceGetName", d.device_name, missing);
        load(library, "cuDeviceGetAttribute", d.device_attribute, missing);
        load(library, "cuDeviceTotalMem_v2", d.device_memory, missing);
        load(library, "cuDevicePrimaryCtxRetain", d.primary_context_retain, missing);
        load(library, "cuCtxPushCurrent_v2", d.context_push, missing);
        load(library, "cuCtxPopCurrent_v2", d.context_pop, missing);
        load(library, "cuCtxGetDevice", d.context_device, missing);
        load(library, "cuCtxSynchronize", d.context_synchronize, missing);
        load(library, "cuStreamGetCtx", d.stream_context, missing);
        load(library, "cuStreamSynchronize", d.stream_synchronize, missing);
        load(library, "cuPointerGetAttribute", d.pointer_attribute, missing);
        load(library, "cuMemcpyDtoHAsync_v2", d.copy_to_host, missing);
        load(library, "cuMemcpyHtoDAsync_v2", d.copy_to_device, missing);
        load(library, "cuGetErrorString", d.error_string, missing);
        if (!missing.empty()) {
            d.error = "libcuda.so.1 lacks the CUDA driver API's entry points (" + missing + ")";
            return d;
        }
        d.initialized = d.init(0);
        return d;
    }();
    return loaded;
}

// The driver, initialized, or msda::Error saying why there is none.
const Driver &loaded_driver() {
    const Driver &d = driver();
    if (!d.error.empty()) throw Error("msda: CUDA: no CUDA device to run on: " + d.error);
    return d;
}

std::string error_text(CUresult result) {
    const char *text = nullptr;
    const Driver &d = driver();
    if (d.error_string != nullptr && d.error_string(result, &text) == 0 && text != nullptr) {
        return "CUDA error " + std::to_string(result) + ", " + text;
    }
    return "CUDA error " + std::to_string(result);
}

}  // namespace

CudaReport cuda_devices() {
    CudaReport report;
    const Driver &d = driver();
    if (!d.error.empty()) {
        report.error = d.error;
        return report;
    }
    int version = 0;
    if (d.driver_version(&version) == 0) {
        report.driver_version = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
    }
    int devices = 0;
    if (d.initialized == kNoDevice || (d.initialized == 0 && d.device_count(&devices) == 0 && devices == 0)) {
        report.error = "the CUDA driver found no device";
        return report;
    }
    if (d.initialized != 0) {
        report.error = "cuInit failed with " + error_text(d.initialized);
        return report;
    }
    for (int ordinal = 0; ordinal < devices; ++ordinal) {
        CUdevice device = 0;
        if (d.device_get(&device, ordinal) != 0) continue;
        CudaDevice entry;
        char text[256] = {};
        if (d.device_name(text, sizeof text - 1, device) == 0) entry.name = text;
        d.device_attribute(&entry.compute_major, kComputeCapabilityMajor, device);
        d.device_attribute(&entry.compute_minor, kComputeCapabilityMinor, device);
        std::size_t bytes = 0;
        if (d.device_memory(&bytes, device) == 0) entry.memory_bytes = static_cast<std::int64_t>(bytes);
        report.devices.push_back(entry);
    }
    if (report.devices.empty()) report.error = "the CUDA driver's devices could not be read";
    return report;
}

namespace detail {

void require_cuda_device() {
    static std::mutex mutex;
    static bool found = false;  // a device does not go away within a process
    std::lock_guard<std::mutex> lock(mutex);
    if (found) return;
    const CudaReport report = cuda_devices();
    if (report.devices.empty()) throw Error("msda: CUDA: no CUDA device to run on: " + report.error);
    found = true;
}

}  // namespace detail

}  // namespace msda

namespace msda::detail::cuda {

namespace {

// The device ordinal host tensors run on without a context or stream
// given: HL_GPU_DEVICE, as Halide's runtime reads it, else 0.
int default_device() {
    const char *chosen = std::getenv("HL_GPU_DEVICE");
    if (chosen == nullptr || *chosen == '\0') return 0;
    char *end = nullptr;
    const long ordinal = std::strtol(chosen, &end, 10);
    if (*end != '\0' || ordinal < 0 || ordinal > 1 << 20) {
        throw Error(std::string("msda: CUDA: HL_GPU_DEVICE is \"") + chosen + "\", expected a device ordinal");
    }
    return static_cast<int>(ordinal);
}

// Each device's primary context, retained once and kept for the process.
CUcontext primary_context(int ordinal) {
    static std::mutex mutex;
    static std::vector<std::pair<int, CUcontext>> retained;
    const Driver &d = loaded_driver();
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto &[device, context] : retained) {
        if (device == ordinal) return context;
    }
    int count = 0;
    if (d.initialized != 0 || d.device_count(&count) != 0 || ordinal >= count) {
        const CudaReport report = cuda_devices();
        throw Error("msda: CUDA: no CUDA device " + std::to_string(ordinal) + " to run on: " +
                    (report.error.empty() ? "the driver has " + std::to_string(report.devices.size()) + " devices"
                                          : report.error));
    }
    CUdevice device = 0;
    CUcontext context = nullptr;
    CUresult result = d.device_get(&device, ordinal);
    if (result == 0) result = d.primary_context_retain(&context, device);
    if (result != 0) {
        throw Error("msda: CUDA: retaining device " + std::to_string(ordinal) + "'s primary context failed with " +
                    error_text(result));
    }
    retained.emplace_back(ordinal, context);
    return context;
}

// The device of a context.
int context_device(CUcontext context, const char *name) {
    const Driver &d = loaded_driver();
    CUdevice device = -1;
    CUresult result = d.context_push(context);
    if (result == 0) {
        result = d.context_device(&device);
        CUcontext popped = nullptr;
        d.context_pop(&popped);
    }
    if (result != 0) fail(name, "is no CUDA context (" + error_text(result) + ")");
    return device;
}

bool names_its_context(const void *stream) {
    const std::uintptr_t handle = reinterpret_cast<std::uintptr_t>(stream);
    return handle != 0 && handle != kLegacyStream && handle != kPerThreadStream;
}

// The context current while a copy is enqueued.
class Current {
public:
    explicit Current(const Stream &stream) : ok_(loaded_driver().context_push(stream.context) == 0) {}
    ~Current() {
        CUcontext popped = nullptr;
        if (ok_) driver().context_pop(&popped);
    }
    bool ok() const { return ok_; }

private:
    bool ok_;
};

}  // namespace

Stream call_stream(const DeviceContext &given, int device) {
    const Driver &d = loaded_driver();
    install_hooks();
    Stream stream;
    stream.stream = given.queue;
    stream.own = given.queue == nullptr;
    if (given.context != nullptr) {
        stream.context = given.context;
    } else if (names_its_context(given.queue)) {
        const CUresult result = d.stream_context(given.queue, &stream.context);
        if (result != 0) fail("options.device_context.queue", "is no CUDA stream (" + error_text(result) + ")");
    }
    if (stream.context != nullptr) {
        stream.device = context_device(stream.context, given.context ? "options.device_context.context"
                                                                            : "options.device_context.queue's context");
        if (device >= 0 && device != stream.device) {
            fail(given.context ? "options.device_context.context" : "options.device_context.queue",
                 "is on CUDA device " + std::to_string(stream.device) + ", but the call's tensors are on device " +
                     std::to_string(device));
        }
    } else {
        stream.device = device >= 0 ? device : default_device();
        stream.context = primary_context(stream.device);
    }
    if (given.context != nullptr && names_its_context(given.queue)) {
        CUcontext of_stream = nullptr;
        const CUresult result = d.stream_context(given.queue, &of_stream);
        if (result != 0) fail("options.device_context.queue", "is no CUDA stream (" + error_text(result) + ")");
        if (of_stream != stream.context) {
            fail("options.device_context.queue", "belongs to another CUDA context than options.device_context.context");
        }
    }
    return stream;
}

Memory memory(const void *pointer, const char *tensor) {
    const Driver &d = loaded_driver();
    const CUdeviceptr address = reinterpret_cast<std::uintptr_t>(pointer);
    unsigned memory_type = 0;
    int managed = 0;
    CUresult result = d.pointer_attribute(&memory_type, kPointerMemoryType, address);
    if (result == 0) result = d.pointer_attribute(&managed, kPointerIsManaged, address);
    if (result != 0) {
        fail(tensor, "its data is no CUDA memory (cuPointerGetAttribute failed with " + error_text(result) +
                         "); a CUDA tensor's data is a device pointer");
    }
    if (memory_type != kMemoryTypeDevice && managed == 0) {
        fail(tensor, "its data is host memory the CUDA driver knows (pinned or registered); a CUDA tensor's data "
                     "is device memory");
    }
    Memory m;
    CUdeviceptr base = 0;
    std::size_t size = 0;
    result = d.pointer_attribute(&base, kPointerRangeStart, address);
    if (result == 0) result = d.pointer_attribute(&size, kPointerRangeSize, address);
    if (result == 0) result = d.pointer_attribute(&m.device, kPointerDeviceOrdinal, address);
    if (result != 0) fail(tensor, "its allocation could not be read (" + error_text(result) + ")");
    m.base = base;
    m.size = size;
    return m;
}

namespace {

// A copy enqueued on the call's stream, then waited for (the host memory is
// the caller's again only once it is done).
template <class Copy>
int blocking(const Stream &stream, std::size_t bytes, Copy copy) {
    if (bytes == 0) return 0;
    const Current current(stream);
    if (!current.ok()) return -1;
    const CUresult result = copy(driver());
    return result != 0 ? result : driver().stream_synchronize(stream.stream);
}

}  // namespace

int read(const Stream &stream, std::uint64_t address, std::size_t bytes, void *host) {
    return blocking(stream, bytes, [&](const Driver &d) { return d.copy_to_host(host, address, bytes, stream.stream); });
}

int write(const Stream &stream, std::uint64_t address, std::size_t bytes, const void *host) {
    return blocking(stream, bytes,
                    [&](const Driver &d) { return d.copy_to_device(address, host, bytes, stream.stream); });
}

int synchronize(const Stream &stream) {
    const Current current(stream);
    if (!current.ok()) return -1;
    return driver().stream_synchronize(stream.stream);
}

int wrap(void *user_context, halide_buffer_t *buffer, std::uint64_t address) {
#if MSDA_CUDA
    return halide_cuda_wrap_device_ptr(user_context, buffer, address);
#else
    (void)user_context, (void)buffer, (void)address;
    return -1;
#endif
}

void detach(void *user_context, halide_buffer_t *buffer) {
#if MSDA_CUDA
    halide_cuda_detach_device_ptr(user_context, buffer);
#else
    (void)user_context, (void)buffer;
#endif
}

}  // namespace msda::detail::cuda

namespace msda {

void release_cuda_context(void *context) {
#if MSDA_CUDA
    if (context == nullptr) detail::fail("context", "is null; give the CUcontext msda ran in");
    const Driver &d = loaded_driver();
    detail::cuda::install_hooks();
    detail::install_error_handler();
    CUresult result = d.context_push(context);
    if (result == 0) {
        result = d.context_synchronize();
        CUcontext popped = nullptr;
        d.context_pop(&popped);
    }
    if (result != 0) {
        throw Error("msda: release_cuda_context: waiting for the context failed with " + error_text(result));
    }
    detail::CallContext call;
    call.context = context;
    halide_device_release(&call, halide_cuda_device_interface());
    if (!call.message.empty()) throw Error("msda: release_cuda_context failed: " + call.message);
#else
    (void)context;
    throw Error("msda: release_cuda_context: this build has no CUDA code (it was configured with MSDA_CUDA=OFF)");
#endif
}

}  // namespace msda

#if MSDA_CUDA
// Halide's CUDA runtime asks for its context and stream through these hooks
// around each of its operations (kernel launch, copy, allocation). msda's
// replace its default ones, which would create a context of Halide's own: a
// call's generated code gets the call's CallContext as user_context, which
// names the call's context and stream (cuda::call_stream); Halide's own
// calls without one (a module's finalizer) get device 0's primary context.
// CUDA contexts may be current in several threads at once, so, unlike
// OpenCL's hooks, these take no lock.
namespace {

int acquire_context(void *user_context, void **context, bool create) {
    const auto *call = static_cast<const msda::detail::CallContext *>(user_context);
    if (call != nullptr && call->context != nullptr) {
        *context = call->context;
        return 0;
    }
    if (!create) {
        *context = nullptr;
        return 0;
    }
    try {
        *context = msda::detail::cuda::call_stream(msda::DeviceContext{}, -1).context;
        return 0;
    } catch (const msda::Error &error) {
        if (user_context != nullptr) static_cast<msda::detail::CallContext *>(user_context)->message += error.what();
        return -1;  // halide_error_code_generic_error
    }
}

int release_context(void *) { return 0; }

int get_stream(void *user_context, void *, void **stream) {
    const auto *call = static_cast<const msda::detail::CallContext *>(user_context);
    *stream = call != nullptr ? call->queue : nullptr;
    return 0;
}

}  // namespace

namespace msda::detail::cuda {
void install_hooks() {
    static std::once_flag once;
    std::call_once(once, [] {
        halide_set_cuda_acquire_context(&acquire_context);
        halide_set_cuda_release_context(&release_context);
        halide_set_cuda_get_stream(&get_stream);
    });
}
}  // namespace msda::detail::cuda
#else
namespace msda::detail::cuda {
void install_hooks() {}
}  // namespace msda::detail::cuda
#endif
