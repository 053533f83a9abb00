// msda's own use of OpenCL, beside Halide's OpenCL runtime: the queue a call
// runs on (the caller's, or msda's own context and queue), what a cl_mem is
// (its size, context and parent), and the blocking reads and writes that
// bring small or unaddressable device tensors through host memory. The ICD
// loader is opened at run time (libOpenCL.so.1), as Halide's runtime opens
// it, so libmsda needs no OpenCL to load.
#pragma once

#include <msda/msda.hpp>

#include "backends/backend.h"

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

struct halide_buffer_t;

namespace msda::detail::opencl {

// The queue a call runs on, with its context and device (own: msda's own,
// opencl_queue(), which calls on device tensors finish before they return).
using Queue = detail::Queue;

// The caller's queue (checked: a valid, in-order queue, whose context is
// given.context where that is set), else msda's own, created on first use.
// Throws msda::Error saying why there is none.
Queue call_queue(const DeviceContext &given);

// What a cl_mem is: its size in bytes, its context, and the buffer it is a
// sub-buffer of (itself when it is none) with its offset there.
struct Memory {
    std::uint64_t size = 0;
    void *context = nullptr;
    void *root = nullptr;
    std::uint64_t root_offset = 0;
};
// Throws msda::Error naming the tensor when `handle` is no OpenCL buffer.
Memory memory(void *handle, const char *tensor);

// The alignment a sub-buffer's origin needs on the queue's device, in bytes.
std::uint64_t base_alignment(const Queue &queue);

// Whether the queue's device has 64-bit integer atomics
// (cl_khr_int64_base_atomics), which the deterministic grad_value's
// fixed-point sum needs (without them, a call runs the serial scatter).
bool has_int64_atomics(const Queue &queue);
// For tests: every device treated as lacking them (true), or as it is.
void pretend_no_int64_atomics(bool pretend);

// Whether the queue's device computes in float64 (cl_khr_fp64), which
// float64 storage needs (without it, such a call is refused).
bool has_fp64(const Queue &queue);
// For tests: every device treated as lacking it (true), or as it is.
void pretend_no_fp64(bool pretend);

// A sub-buffer of `root` (no sub-buffer itself) at an aligned origin, or
// nullptr with the OpenCL error in `error`.
void *sub_buffer(void *root, std::uint64_t origin, std::uint64_t bytes, std::int32_t &error);
void release(void *memory);

// Blocking transfers on the queue (they wait for its earlier work); the
// OpenCL error code, 0 on success.
std::int32_t read(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, void *host);
std::int32_t write(const Queue &queue, void *memory, std::uint64_t offset, std::size_t bytes, const void *host);
std::int32_t finish(const Queue &queue);

// Unlocks the lock msda's acquire hook takes around Halide's OpenCL
// operations, if this thread still holds it (after a Halide error path that
// returns without releasing).
void release_leftover_lock();

// Device buffers a Plan keeps between its calls on host tensors: a call
// takes one per host tensor (a buffer of exactly the size it needs, made
// when none is free), the generated code copies the tensor into it, and the
// call gives it back as it ends. Released with the plan.
class Pool final : public DevicePool {
public:
    Pool() = default;
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;
    ~Pool() override;
    // A buffer of `bytes` in the queue's context, or null (no memory).
    void *take(const Queue &queue, std::uint64_t bytes);
    void give(const Queue &queue, void *memory, std::uint64_t bytes);
    std::size_t free_buffers();

private:
    struct Free {
        void *context;
        std::uint64_t bytes;
        void *memory;
    };
    std::mutex mutex_;
    std::vector<Free> free_;
};

// Halide's OpenCL runtime: a cl_mem handed to a buffer, and taken back (a
// Halide error code; without OpenCL code in the build, an error).
int wrap(void *user_context, halide_buffer_t *buffer, void *memory);
void detach(void *user_context, halide_buffer_t *buffer);

}  // namespace msda::detail::opencl
