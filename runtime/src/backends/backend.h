// The seam every device plugs into. A backend is one device's way of
// holding a call's tensors: the context and queue a call runs on, what a
// device tensor's memory is and whether it holds the tensor, blocking reads
// and writes, handing memory to the generated code (and taking it back),
// waiting for the device, the device buffers a plan keeps, and releasing
// what msda keeps for a context. The host CPU is a backend too. Validation
// and execution call this interface and never name a device; a new Halide
// device adds a file here, one line in backends.h and its family's
// target list (docs/architecture.md).
#pragma once

#include <msda/msda.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "registry.h"

struct halide_buffer_t;

namespace msda::detail {

struct HalideBuffer;

// The context and queue a call runs on, as its backend resolved them: an
// OpenCL context, queue and device, a CUDA context and stream with its
// device ordinal; nothing for the CPU.
struct Queue {
    void *context = nullptr;
    void *queue = nullptr;
    void *device = nullptr;
    int ordinal = 0;
    bool own = false;  // msda's own: a call on device tensors waits for it before returning
};

// What the generated code gets as its user_context: the call's own error
// messages (Halide's error handler appends to them, so concurrent calls
// never mix them and nothing is printed or aborted) and the context and
// queue the backend's Halide hooks hand to Halide's device runtime (null:
// the backend's own).
struct CallContext {
    std::string message;
    void *context = nullptr;
    void *queue = nullptr;
};
// Installs the error handler that fills CallContext::message (once).
void install_error_handler();

// Where a tensor's bytes lie, for the aliasing checks: `root` names the
// address space (null: the process's, or a CUDA device's unified one; an
// OpenCL buffer that is no sub-buffer), `base` is the first element's byte
// address in it.
struct MemorySpan {
    const void *root = nullptr;
    std::uint64_t base = 0;
};

// The device buffers a plan keeps between its calls on host tensors.
class DevicePool {
public:
    virtual ~DevicePool() = default;
};

// One generated function's call: its buffers (the first `inputs` read, the
// rest written) and the function, which the backend runs once the buffers
// are on its device, given the call's context.
struct BoundCall {
    const Variant &variant;
    const Queue &queue;
    DevicePool *pool;  // the plan's, or null
    HalideBuffer *const *buffers;
    std::size_t count, inputs;
    void (*run)(const void *closure, CallContext &context);
    const void *closure;
};

class Backend {
public:
    virtual ~Backend() = default;
    // The Options::device that selects it, the DLPack code of its tensors,
    // its name in messages ("OpenCL") and the target family it runs.
    virtual Device device() const = 0;
    virtual DeviceType tensor_type() const = 0;
    virtual const char *name() const = 0;
    virtual const char *option_name() const = 0;  // Device's enumerator: "opencl"
    virtual TargetFamily family() const = 0;

    // The call's context and queue from Options::device_context; ordinal is
    // the device tensors' device_id, or -1 for host tensors. Throws
    // msda::Error saying why there is none.
    virtual Queue resolve(const DeviceContext &given, int ordinal) const = 0;
    // Where a device tensor's bytes lie (MemorySpan).
    virtual MemorySpan span(const TensorView &t, const char *name) const = 0;
    // Throws msda::Error naming the tensor unless its memory holds every
    // element and belongs to the queue's context or device.
    virtual void check_memory(const TensorView &t, const char *name, const Queue &queue) const = 0;
    // Blocking transfers between host memory and bytes [offset, offset +
    // bytes) of a device tensor's memory (`memory` its data), after the
    // queue's earlier work; the device's error code, 0 on success.
    virtual int read(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes,
                     void *host) const = 0;
    virtual int write(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes,
                      const void *host) const = 0;
    // Hands the buffers to the generated code on the device, runs it, brings
    // host tensors' results back and waits where the call must, then
    // detaches and frees whatever the call made, however it ended.
    virtual void run(const BoundCall &call) const = 0;
    // Whether grad_value's deterministic sum must take the serial scatter
    // (a device without the 64-bit integer atomics of the fixed-point sum).
    virtual bool needs_serial_scatter(const Queue &) const { return false; }
    // Whether the device computes float64 storage (an OpenCL device needs
    // cl_khr_fp64).
    virtual bool computes_float64(const Queue &) const { return true; }
    // The pool of device buffers a plan keeps, or null where the backend
    // keeps none.
    virtual std::shared_ptr<DevicePool> make_pool() const { return nullptr; }
};

// Rewrites bytes [begin, begin + bytes) of a device tensor's memory in
// place: read (after the queue's earlier work), changed by `edit` (given
// their host copy), written back. The device's error code, 0 on success.
template <typename Edit>
int rewrite_span(const Backend &backend, const Queue &queue, void *memory, std::uint64_t begin, std::size_t bytes,
                 Edit edit) {
    std::vector<std::byte> span(bytes);
    int error = backend.read(queue, memory, begin, span.size(), span.data());
    if (error != 0) return error;
    edit(span.data());
    return backend.write(queue, memory, begin, span.size(), span.data());
}

// backend_for(Device) and backend_of(DeviceType): backends.h, which
// registers each backend.

}  // namespace msda::detail
