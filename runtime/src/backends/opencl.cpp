// msda's OpenCL: the platforms and devices this machine has, as the ICD
// loader (libOpenCL.so.1, Debian's ocl-icd-libopencl1) reports them; the
// queue each call runs on, given to Halide's OpenCL runtime through its
// acquire/release hooks; and the few buffer operations msda does itself
// (opencl.h). The loader is opened at run time, as Halide's OpenCL runtime
// opens it, so libmsda needs no OpenCL at link time and a machine without it
// gets a reason instead of a failure to load. Only the entry points and
// constants of the OpenCL 1.2 API used here are declared.
#include "opencl.h"

#include <HalideRuntime.h>
#if MSDA_OPENCL
#include <HalideRuntimeOpenCL.h>
#endif
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "errors.h"
#include <msda/diagnostics.hpp>

namespace msda {

namespace {

using cl_int = std::int32_t;
using cl_uint = std::uint32_t;
using cl_platform_id = struct opaque_platform *;
using cl_device_id = struct opaque_device *;
using cl_device_type = std::uint64_t;
using cl_mem = void *;
using cl_queue = void *;

constexpr cl_uint kPlatformName = 0x0902;
constexpr cl_uint kPlatformVersion = 0x0901;
constexpr cl_uint kDeviceType = 0x1000;
constexpr cl_uint kDeviceName = 0x102B;
constexpr cl_uint kDeviceVersion = 0x102F;
constexpr cl_uint kDeviceExtensions = 0x1030;
constexpr cl_uint kDeviceMemBaseAddrAlign = 0x1019;
constexpr cl_uint kQueueContext = 0x1090;
constexpr cl_uint kQueueDevice = 0x1091;
constexpr cl_uint kQueueProperties = 0x1093;
constexpr std::uint64_t kQueueOutOfOrder = 1;
constexpr cl_uint kMemSize = 0x1102;
constexpr cl_uint kMemContext = 0x1106;
constexpr cl_uint kMemAssociatedMemObject = 0x1107;
constexpr cl_uint kMemOffset = 0x1108;
constexpr cl_uint kBufferCreateTypeRegion = 0x1220;
constexpr cl_device_type kDeviceTypeAll = 0xFFFFFFFF;
constexpr cl_int kDeviceNotFound = -1;
constexpr cl_int kPlatformNotFoundKhr = -1001;

using GetPlatformIds = cl_int (*)(cl_uint, cl_platform_id *, cl_uint *);
using GetPlatformInfo = cl_int (*)(cl_platform_id, cl_uint, std::size_t, void *, std::size_t *);
using GetDeviceIds = cl_int (*)(cl_platform_id, cl_device_type, cl_uint, cl_device_id *, cl_uint *);
using GetDeviceInfo = cl_int (*)(cl_device_id, cl_uint, std::size_t, void *, std::size_t *);
using GetObjectInfo = cl_int (*)(void *, cl_uint, std::size_t, void *, std::size_t *);
using CreateSubBuffer = cl_mem (*)(cl_mem, std::uint64_t, cl_uint, const void *, cl_int *);
using ReleaseMemObject = cl_int (*)(cl_mem);
using EnqueueRead = cl_int (*)(cl_queue, cl_mem, cl_uint, std::size_t, std::size_t, void *, cl_uint, const void *,
                               void *);
using EnqueueWrite = cl_int (*)(cl_queue, cl_mem, cl_uint, std::size_t, std::size_t, const void *, cl_uint,
                                const void *, void *);
using Finish = cl_int (*)(cl_queue);
using CreateBuffer = cl_mem (*)(void *, std::uint64_t, std::size_t, void *, cl_int *);

// The ICD loader's entry points, loaded once and kept for the process.
struct Library {
    std::string error;  // why there is none
    GetPlatformIds platform_ids = nullptr;
    GetPlatformInfo platform_info = nullptr;
    GetDeviceIds device_ids = nullptr;
    GetDeviceInfo device_info = nullptr;
    GetObjectInfo mem_info = nullptr, queue_info = nullptr;
    CreateSubBuffer create_sub_buffer = nullptr;
    ReleaseMemObject release_mem = nullptr;
    EnqueueRead enqueue_read = nullptr;
    EnqueueWrite enqueue_write = nullptr;
    Finish finish = nullptr;
    CreateBuffer create_buffer = nullptr;
};

template <typename Function>
void load(void *handle, const char *name, Function &function, std::string &missing) {
    function = reinterpret_cast<Function>(dlsym(handle, name));
    if (function == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
}

const Library &library() {
    static const Library loaded = [] {
        Library l;
        void *handle = dlopen("libOpenCL.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (handle == nullptr) handle = dlopen("libOpenCL.so", RTLD_LAZY | RTLD_LOCAL);
        if (handle == nullptr) {
            l.error = "no OpenCL ICD loader (libOpenCL.so.1) could be loaded (apt install ocl-icd-libopencl1 and a "
                      "driver, e.g. pocl-opencl-icd)";
            return l;
        }
        std::string missing;
        load(handle, "clGetPlatformIDs", l.platform_ids, missing);
        load(handle, "clGetPlatformInfo", l.platform_info, missing);
        load(handle, "clGetDeviceIDs", l.device_ids, missing);
        load(handle, "clGetDeviceInfo", l.device_info, missing);
        load(handle, "clGetMemObjectInfo", l.mem_info, missing);
        load(handle, "clGetCommandQueueInfo", l.queue_info, missing);
        load(handle, "clCreateSubBuffer", l.create_sub_buffer, missing);
        load(handle, "clReleaseMemObject", l.release_mem, missing);
        load(handle, "clEnqueueReadBuffer", l.enqueue_read, missing);
        load(handle, "clEnqueueWriteBuffer", l.enqueue_write, missing);
        load(handle, "clFinish", l.finish, missing);
        load(handle, "clCreateBuffer", l.create_buffer, missing);
        if (!missing.empty()) l.error = "libOpenCL.so.1 lacks OpenCL 1.2 entry points (" + missing + ")";
        return l;
    }();
    return loaded;
}

const Library &loaded_library() {
    const Library &l = library();
    if (!l.error.empty()) throw Error("msda: OpenCL: " + l.error);
    return l;
}

template <typename Get, typename Handle>
std::string text_info(Get get, Handle handle, cl_uint what) {
    std::size_t size = 0;
    if (get(handle, what, 0, nullptr, &size) != 0 || size == 0) return "";
    std::string text(size, '\0');
    if (get(handle, what, size, text.data(), nullptr) != 0) return "";
    while (!text.empty() && (text.back() == '\0' || text.back() == ' ')) text.pop_back();
    return text;
}

std::string type_name(cl_device_type type) {
    if (type & 2) return "CPU";
    if (type & 4) return "GPU";
    if (type & 8) return "accelerator";
    return "other";
}

}  // namespace

OpenClReport opencl_devices() {
    OpenClReport report;
    const Library &l = library();
    if (!l.error.empty()) {
        report.error = l.error;
        return report;
    }
    const GetPlatformIds platform_ids = l.platform_ids;
    const GetPlatformInfo platform_info = l.platform_info;
    const GetDeviceIds device_ids = l.device_ids;
    const GetDeviceInfo device_info = l.device_info;
    cl_uint count = 0;
    const cl_int listed = platform_ids(0, nullptr, &count);
    if (listed == kPlatformNotFoundKhr || (listed == 0 && count == 0)) {
        report.error = "the OpenCL ICD loader found no platform (no driver installed: apt install pocl-opencl-icd "
                       "for the CPU one)";
    } else if (listed != 0) {
        report.error = "clGetPlatformIDs failed with OpenCL error " + std::to_string(listed);
    }
    std::vector<cl_platform_id> platforms(count);
    if (count > 0 && listed == 0 && platform_ids(count, platforms.data(), nullptr) == 0) {
        for (cl_platform_id platform : platforms) {
            const std::string platform_name = text_info(platform_info, platform, kPlatformName);
            const std::string platform_version = text_info(platform_info, platform, kPlatformVersion);
            cl_uint devices = 0;
            const cl_int found = device_ids(platform, kDeviceTypeAll, 0, nullptr, &devices);
            if (found == kDeviceNotFound || devices == 0) continue;
            std::vector<cl_device_id> ids(devices);
            if (device_ids(platform, kDeviceTypeAll, devices, ids.data(), nullptr) != 0) continue;
            for (cl_device_id id : ids) {
                OpenClDevice device;
                device.platform = platform_name;
                device.platform_version = platform_version;
                device.name = text_info(device_info, id, kDeviceName);
                device.version = text_info(device_info, id, kDeviceVersion);
                cl_device_type type = 0;
                device_info(id, kDeviceType, sizeof type, &type, nullptr);
                device.type = type_name(type);
                const std::string extensions = text_info(device_info, id, kDeviceExtensions);
                device.fp16 = extensions.find("cl_khr_fp16") != std::string::npos;
                report.devices.push_back(device);
            }
        }
        if (report.devices.empty() && report.error.empty()) report.error = "no OpenCL platform has a device";
    }
    return report;
}

namespace {

template <typename T>
cl_int info(GetObjectInfo get, void *object, cl_uint what, T &value) {
    return get(object, what, sizeof value, &value, nullptr);
}

}  // namespace

}  // namespace msda

#if MSDA_OPENCL
// Halide's OpenCL runtime (linked into libmsda from msda_halide_runtime):
// its loader and the function its own hook creates its context with, which
// msda's hook below calls for msda's own context so that HL_OCL_PLATFORM_NAME,
// HL_OCL_DEVICE_TYPE and HL_GPU_DEVICE choose the device as Halide documents.
struct _cl_context;
struct _cl_command_queue;
namespace Halide::Runtime::Internal::OpenCL {
int load_libopencl(void *user_context);
int create_opencl_context(void *user_context, _cl_context **context, _cl_command_queue **queue);
// One of the entry points load_libopencl fills in (null until it has run;
// it must run once only).
extern void *clCreateContext;
}  // namespace Halide::Runtime::Internal::OpenCL
#endif

namespace msda::detail::opencl {

namespace {

// msda's own context and queue, made once (a failure is retried by the
// next call), and kept for the process.
struct Own {
    std::mutex mutex;
    Queue queue;
};

Own &own() {
    static Own state;
    return state;
}

// Halide's OpenCL runtime with the ICD loader's entry points, loaded once,
// before any of msda's OpenCL calls reaches it (it would load them itself,
// unguarded, from each thread that finds them missing); false with the
// reason in `message` when they cannot be loaded.
bool halide_loaded(std::string &message) {
#if MSDA_OPENCL
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (Halide::Runtime::Internal::OpenCL::clCreateContext != nullptr) return true;
    install_error_handler();
    CallContext context;
    const int result = Halide::Runtime::Internal::OpenCL::load_libopencl(&context);
    if (result == 0) return true;
    message = "Halide's OpenCL runtime could not load the ICD loader (Halide error " + std::to_string(result) +
              "): " + (context.message.empty() ? "no message" : context.message);
    return false;
#else
    message = "this build has no OpenCL code (it was configured with MSDA_OPENCL=OFF)";
    return false;
#endif
}

// msda's own queue; `message` says why there is none (then it is null).
Queue own_queue(std::string &message) {
    Own &state = own();
    std::lock_guard<std::mutex> lock(state.mutex);
    if (state.queue.queue != nullptr) return state.queue;
#if MSDA_OPENCL
    const Library &l = library();
    if (!l.error.empty()) {
        message = l.error;
        return {};
    }
    if (!halide_loaded(message)) return {};
    CallContext context;
    _cl_context *cl_context = nullptr;
    _cl_command_queue *cl_queue = nullptr;
    const int result = Halide::Runtime::Internal::OpenCL::create_opencl_context(&context, &cl_context, &cl_queue);
    if (result != 0 || cl_queue == nullptr) {
        message = "no OpenCL device to run on (Halide error " + std::to_string(result) +
                  "): " + (context.message.empty() ? "no message" : context.message);
        const OpenClReport report = opencl_devices();
        if (!report.error.empty()) message += "; " + report.error;
        return {};
    }
    Queue made{cl_context, cl_queue, nullptr, true};
    info(l.queue_info, made.queue, kQueueDevice, made.device);
    state.queue = made;
    return made;
#else
    message = "this build has no OpenCL code (it was configured with MSDA_OPENCL=OFF)";
    return {};
#endif
}

// One lock for every use of Halide's OpenCL runtime state (its kernels are
// shared objects whose arguments are set, then enqueued), as its own hook
// serializes them. Whether this thread holds it: Halide releases after a
// failed acquire too, and a few of its error paths return without
// releasing, so the hooks and release_leftover_lock go by this flag.
std::mutex &runtime_lock() {
    static std::mutex lock;
    return lock;
}
thread_local bool holds_runtime_lock = false;

}  // namespace

Queue call_queue(const DeviceContext &given) {
    if (given.queue == nullptr) {
        if (given.context != nullptr) {
            fail("options.device_context.context", "is set without a queue; OpenCL takes the queue, whose context it is");
        }
        std::string message;
        const Queue queue = own_queue(message);
        if (queue.queue == nullptr) throw Error("msda: OpenCL: " + message);
        return queue;
    }
    const Library &l = loaded_library();
    std::string message;
    if (!halide_loaded(message)) throw Error("msda: OpenCL: " + message);
    Queue queue;
    queue.queue = given.queue;
    std::uint64_t properties = 0;
    const cl_int error = info(l.queue_info, queue.queue, kQueueContext, queue.context);
    if (error != 0 || info(l.queue_info, queue.queue, kQueueDevice, queue.device) != 0 ||
        info(l.queue_info, queue.queue, kQueueProperties, properties) != 0) {
        fail("options.device_context.queue", "is no OpenCL command queue (clGetCommandQueueInfo failed with OpenCL error " +
                                         std::to_string(error) + ")");
    }
    if (properties & kQueueOutOfOrder) {
        fail("options.device_context.queue",
             "is an out-of-order queue; msda orders its work by the queue, so it needs an in-order one");
    }
    if (given.context != nullptr && given.context != queue.context) {
        fail("options.device_context.context", "is not the context of options.device_context.queue");
    }
    return queue;
}

Memory memory(void *handle, const char *tensor) {
    const Library &l = loaded_library();
    Memory m;
    void *parent = nullptr;
    std::size_t size = 0, offset = 0;
    const cl_int error = info(l.mem_info, handle, kMemSize, size);
    if (error != 0 || info(l.mem_info, handle, kMemContext, m.context) != 0 ||
        info(l.mem_info, handle, kMemAssociatedMemObject, parent) != 0 ||
        info(l.mem_info, handle, kMemOffset, offset) != 0) {
        fail(tensor, "its data is no OpenCL buffer (clGetMemObjectInfo failed with OpenCL error " +
                         std::to_string(error) + "); an OpenCL tensor's data is its cl_mem");
    }
    m.size = size;
    m.root = parent != nullptr ? parent : handle;
    m.root_offset = parent != nullptr ? offset : 0;
    return m;
}

std::uint64_t base_alignment(const Queue &queue) {
    cl_uint bits = 0;
    if (loaded_library().device_info(static_cast<cl_device_id>(queue.device), kDeviceMemBaseAddrAlign, sizeof bits,
                                     &bits, nullptr) != 0 ||
        bits < 8) {
        return 4096;  // the largest any device asks for
    }
    return bits / 8;
}

namespace {

std::atomic<bool> pretending_no_int64_atomics{false}, pretending_no_fp64{false};

// Whether the queue's device lists the extension. A device's extensions do
// not change: each device is asked once.
bool has_extension(const Queue &queue, const char *extension) {
    static std::mutex mutex;
    static std::vector<std::pair<void *, std::string>> known;
    std::lock_guard<std::mutex> lock(mutex);
    const std::string *extensions = nullptr;
    for (const auto &[device, listed] : known) {
        if (device == queue.device) extensions = &listed;
    }
    if (extensions == nullptr) {
        known.emplace_back(queue.device, text_info(loaded_library().device_info,
                                                   static_cast<cl_device_id>(queue.device), kDeviceExtensions));
        extensions = &known.back().second;
    }
    // Names are separated by spaces; none is a prefix of another here.
    return extensions->find(extension) != std::string::npos;
}

}  // namespace

bool has_int64_atomics(const Queue &queue) {
    return !pretending_no_int64_atomics && has_extension(queue, "cl_khr_int64_base_atomics");
}

void pretend_no_int64_atomics(bool pretend) { pretending_no_int64_atomics = pretend; }

bool has_fp64(const Queue &queue) { return !pretending_no_fp64 && has_extension(queue, "cl_khr_fp64"); }

void pretend_no_fp64(bool pretend) { pretending_no_fp64 = pretend; }

void *sub_buffer(void *root, std::uint64_t origin, std::uint64_t bytes, std::int32_t &error) {
    const std::size_t region[2] = {static_cast<std::size_t>(origin), static_cast<std::size_t>(bytes)};
    error = 0;
    // Flags 0: the parent's access flags.
    return loaded_library().create_sub_buffer(root, 0, kBufferCreateTypeRegion, region, &error);
}

void release(void *memory) {
    if (memory != nullptr) loaded_library().release_mem(memory);
}

std::int32_t read(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, void *host) {
    if (bytes == 0) return 0;
    return loaded_library().enqueue_read(queue.queue, memory, 1, offset, bytes, host, 0, nullptr, nullptr);
}

std::int32_t write(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, const void *host) {
    if (bytes == 0) return 0;
    return loaded_library().enqueue_write(queue.queue, memory, 1, offset, bytes, host, 0, nullptr, nullptr);
}

std::int32_t finish(const Queue &queue) { return loaded_library().finish(queue.queue); }

void release_leftover_lock() {
    if (holds_runtime_lock) {
        holds_runtime_lock = false;
        runtime_lock().unlock();
    }
}

Pool::~Pool() {
    for (const Free &buffer : free_) release(buffer.memory);
}

void *Pool::take(const Queue &queue, std::uint64_t bytes) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (std::size_t i = 0; i < free_.size(); ++i) {
            if (free_[i].context == queue.context && free_[i].bytes == bytes) {
                void *memory = free_[i].memory;
                free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(i));
                return memory;
            }
        }
    }
    constexpr std::uint64_t kReadWrite = 1;
    cl_int error = 0;
    void *memory = loaded_library().create_buffer(queue.context, kReadWrite, static_cast<std::size_t>(bytes), nullptr,
                                                  &error);
    return error == 0 ? memory : nullptr;
}

void Pool::give(const Queue &queue, void *memory, std::uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back({queue.context, bytes, memory});
}

std::size_t Pool::free_buffers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return free_.size();
}

int wrap(void *user_context, halide_buffer_t *buffer, void *memory) {
#if MSDA_OPENCL
    return halide_opencl_wrap_cl_mem(user_context, buffer, reinterpret_cast<std::uintptr_t>(memory));
#else
    (void)user_context, (void)buffer, (void)memory;
    return -1;
#endif
}

void detach(void *user_context, halide_buffer_t *buffer) {
#if MSDA_OPENCL
    halide_opencl_detach_cl_mem(user_context, buffer);
#else
    (void)user_context, (void)buffer;
#endif
}

}  // namespace msda::detail::opencl

namespace msda {

OpenClQueue opencl_queue() {
    const detail::opencl::Queue queue = detail::opencl::call_queue(DeviceContext{});
    return {queue.context, queue.queue, queue.device};
}

void release_opencl_context(void *queue) {
#if MSDA_OPENCL
    DeviceContext given;
    given.queue = queue;
    const detail::opencl::Queue checked = detail::opencl::call_queue(given);
    const std::int32_t finished = detail::opencl::finish(checked);
    if (finished != 0) {
        throw Error("msda: release_opencl_context: waiting for the queue failed with OpenCL error " +
                    std::to_string(finished));
    }
    detail::install_error_handler();
    detail::CallContext context;
    context.context = checked.context;
    context.queue = checked.queue;
    halide_device_release(&context, halide_opencl_device_interface());
    detail::opencl::release_leftover_lock();  // its error paths return holding it
    if (!context.message.empty()) throw Error("msda: release_opencl_context failed: " + context.message);
#else
    (void)queue;
    throw Error("msda: release_opencl_context: this build has no OpenCL code (it was configured with MSDA_OPENCL=OFF)");
#endif
}

}  // namespace msda

#if MSDA_OPENCL
// Halide's OpenCL runtime asks for its context and queue through these
// hooks around each of its operations (kernel launch, copy, allocation).
// msda's replace its default ones: a call's generated code gets the call's
// CallContext as user_context, which names the caller's queue when
// Options::device_context gave one; otherwise (and for Halide's own calls
// without a user_context) msda's own. Halide's operations are serialized
// by one lock, taken here and released by the matching release.
extern "C" int halide_acquire_cl_context(void *user_context, void **context, void **queue, bool create) {
    using namespace msda::detail;
    opencl::runtime_lock().lock();
    opencl::holds_runtime_lock = true;
    const auto *call = static_cast<const CallContext *>(user_context);
    if (call != nullptr && call->queue != nullptr) {
        *context = call->context;
        *queue = call->queue;
        return 0;
    }
    opencl::Own &state = opencl::own();
    if (!create) {
        std::lock_guard<std::mutex> lock(state.mutex);
        *context = state.queue.context;
        *queue = state.queue.queue;
        return 0;
    }
    std::string message;
    const opencl::Queue own = opencl::own_queue(message);
    if (own.queue == nullptr) {
        if (user_context != nullptr) static_cast<CallContext *>(user_context)->message += message;
        opencl::release_leftover_lock();  // Halide may or may not release after a failed acquire
        return -1;                        // halide_error_code_generic_error
    }
    *context = own.context;
    *queue = own.queue;
    return 0;
}

extern "C" int halide_release_cl_context(void *) {
    msda::detail::opencl::release_leftover_lock();
    return 0;
}
#endif
