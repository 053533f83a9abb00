// CUDA's backend: a call's context and stream, its tensors' device memory
// described and checked, and the generated code's buffers handed over. A
// device tensor's address goes to the generated code as it is (validation
// checked that its allocation holds every element); host tensors are
// marked so the generated code copies them to the device, their device
// memory coming from Halide's CUDA runtime (which keeps freed blocks for
// reuse on the same stream), and their results copied back once the call
// has succeeded.
#include "backends/backends.h"
#include "backends/cuda.h"
#include "backends/device_call.h"
#include "errors.h"

namespace msda {
namespace detail {
void require_cuda_device();
}

namespace detail {

namespace {

cuda::Stream stream_of(const Queue &queue) { return {queue.context, queue.queue, queue.ordinal, queue.own}; }

class CudaCall final : public DeviceCall {
public:
    explicit CudaCall(const BoundCall &call) : DeviceCall(call) {
        context_.context = call.queue.context;
        context_.queue = call.queue.queue;
    }
    ~CudaCall() {
        release_buffers([](void *context, halide_buffer_t *raw) { cuda::detach(context, raw); });
    }

    void execute() {
        // Device tensors' addresses wrapped, host tensors marked.
        for (std::size_t i = 0; i < count(); ++i) {
            HalideBuffer &b = buffer(i);
            if (b.device_handle == nullptr) {
                mark_host_copy(b.get(), is_input(i));
                continue;
            }
            device_tensors_ = true;
            const std::uint64_t address =
                reinterpret_cast<std::uintptr_t>(b.device_handle) + static_cast<std::uint64_t>(b.device_offset);
            const int result = cuda::wrap(&context_, b.get(), address);
            if (result != 0) fail_with("handing a device pointer to", result, context_.message);
            wrapped_.push_back(i);
        }
        run();
        // Host tensors' results in the caller's memory; on msda's own use of
        // the stream, the device's work done.
        copy_results_to_host([](std::size_t) { return false; });
        if (device_tensors_ && call_.queue.own) {
            const int error = cuda::synchronize(stream_of(call_.queue));
            if (error != 0) fail_with("waiting for", error, "cuStreamSynchronize failed");
        }
        completed_ = true;
    }
};

class CudaBackend final : public Backend {
public:
    Device device() const override { return Device::cuda; }
    DeviceType tensor_type() const override { return DeviceType::cuda; }
    const char *name() const override { return "CUDA"; }
    const char *option_name() const override { return "cuda"; }
    TargetFamily family() const override { return TargetFamily::cuda; }

    Queue resolve(const DeviceContext &given, int ordinal) const override {
        require_cuda_device();
        const cuda::Stream stream = cuda::call_stream(given, ordinal);
        Queue queue;
        queue.context = stream.context;
        queue.queue = stream.stream;
        queue.ordinal = stream.device;
        queue.own = stream.own;
        return queue;
    }

    MemorySpan span(const TensorView &t, const char *) const override {
        return {nullptr, reinterpret_cast<std::uintptr_t>(t.data) + static_cast<std::uint64_t>(t.byte_offset)};
    }

    // A CUDA tensor's elements within its allocation, on the call's device,
    // at addresses its dtype's alignment allows (after validation's
    // addressing checks).
    void check_memory(const TensorView &t, const char *name, const Queue &queue) const override {
        if (t.numel() == 0) return;  // nothing is read or written (an engine's empty tensor may have no memory)
        const char *first = static_cast<const char *>(t.data) + t.byte_offset;
        const cuda::Memory memory = cuda::memory(first, name);
        if (memory.device != queue.ordinal) {
            fail(name, "its memory is on CUDA device " + std::to_string(memory.device) + ", but its device_id is " +
                           std::to_string(t.device_id) + " and the call runs on device " +
                           std::to_string(queue.ordinal));
        }
        const std::uint64_t size = dtype_size(t.dtype);
        const std::uint64_t address = reinterpret_cast<std::uintptr_t>(first);
        if (address % size != 0) {
            fail(name, "its first element is at device address " + std::to_string(address) +
                           ", not a multiple of " + std::to_string(size) + " (its dtype's size)");
        }
        const Reach reach = reach_of(t);
        const std::uint64_t begin = address + reach.low * size, end = address + (reach.high + 1) * size;
        if (begin < memory.base || end > memory.base + memory.size) {
            fail(name, "its elements lie at bytes [" + std::to_string(begin - memory.base) + ", " +
                           std::to_string(end - memory.base) + ") of its CUDA allocation, which holds " +
                           std::to_string(memory.size) + " bytes");
        }
    }

    int read(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, void *host) const override {
        return cuda::read(stream_of(queue), reinterpret_cast<std::uintptr_t>(memory) + offset, bytes, host);
    }
    int write(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes,
              const void *host) const override {
        return cuda::write(stream_of(queue), reinterpret_cast<std::uintptr_t>(memory) + offset, bytes, host);
    }

    void run(const BoundCall &call) const override { CudaCall(call).execute(); }
};

}  // namespace

const Backend &cuda_backend() {
    static const CudaBackend backend;
    return backend;
}

}  // namespace detail
}  // namespace msda
