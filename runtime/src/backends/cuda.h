// msda's own use of CUDA, beside Halide's CUDA runtime: the context and
// stream a call runs on (the caller's, or the device's primary context and
// msda's own use of its default stream), given to Halide's runtime through
// its acquire/release/stream hooks; what a device pointer is (its
// allocation's range and device); and the blocking copies that read level
// tables on the device and zero grad_value there. The driver
// (libcuda.so.1) is opened at run time, as Halide's runtime opens it, so
// libmsda needs no CUDA to load.
#pragma once

#include <msda/msda.hpp>

#include "backends/backend.h"

#include <cstddef>
#include <cstdint>

struct halide_buffer_t;

namespace msda::detail::cuda {

// The context and stream a call runs on.
struct Stream {
    void *context = nullptr;  // CUcontext
    void *stream = nullptr;   // CUstream; null: the context's legacy default stream
    int device = 0;           // the context's device ordinal
    bool own = false;         // no stream given: calls on device tensors wait for it
};

// The call's context and stream. `device`: the ordinal of the call's device
// tensors, or -1 for host tensors (Device::cuda), which run on the device
// of Options::device_context's context or stream when one is given, else
// on HL_GPU_DEVICE's (0 when it is unset). The context is
// the given context, else the given stream's, else the device's
// primary context (the one the CUDA runtime API and PyTorch use). Throws
// msda::Error saying why there is none (no driver, no device, a stream of
// another context).
Stream call_stream(const DeviceContext &given, int device);

// What a device pointer is: the allocation it lies in (bytes [base, base +
// size)) and that allocation's device. Throws msda::Error naming the
// tensor when `pointer` is no CUDA device memory.
struct Memory {
    std::uint64_t base = 0, size = 0;
    int device = -1;
};
Memory memory(const void *pointer, const char *tensor);

// Blocking copies on the call's stream (they wait for its earlier work);
// the CUDA error code, 0 on success.
int read(const Stream &stream, std::uint64_t address, std::size_t bytes, void *host);
int write(const Stream &stream, std::uint64_t address, std::size_t bytes, const void *host);
int synchronize(const Stream &stream);

// Installs msda's hooks into Halide's CUDA runtime (once; call_stream does).
void install_hooks();

// Halide's CUDA runtime: a device pointer handed to a buffer, and taken back
// (a Halide error code; without CUDA code in the build, an error).
int wrap(void *user_context, halide_buffer_t *buffer, std::uint64_t address);
void detach(void *user_context, halide_buffer_t *buffer);

}  // namespace msda::detail::cuda
