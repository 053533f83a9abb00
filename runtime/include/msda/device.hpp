// msda's device contexts: what a call on OpenCL or CUDA runs on, msda's own
// OpenCL queue, and how to release what msda keeps for a context the caller
// is about to destroy. docs/opencl.md and docs/cuda.md hold each device's
// contract (what a call waits for, what it copies).
#pragma once

namespace msda {

// The context and queue (or stream) a call on a device runs on; both null:
// msda's own. msda retains neither: the caller keeps them alive during the
// call, and for a Plan while it keeps device buffers there.
// - OpenCL: queue is a cl_command_queue (in order); the call's device and
//   context are the queue's (context, if set, must be the queue's). Null:
//   msda's own queue (opencl_queue()).
// - CUDA: context is a CUcontext, queue a CUstream (a stream of that
//   context, or CU_STREAM_LEGACY / CU_STREAM_PER_THREAD). context null: the
//   stream's context, else the primary context of the call's device (the
//   one the CUDA runtime API and PyTorch use). queue null: msda's own use
//   of the context's default stream, which a call on device tensors waits
//   for before it returns; a stream given: the work is enqueued there and a
//   call on device tensors returns without waiting.
// - The CPU: both must be null.
struct DeviceContext {
    void *context = nullptr;
    void *queue = nullptr;
};

// msda's own OpenCL context and queue (created on first use as Halide's
// OpenCL runtime creates its own: the first platform, its device with the
// most compute units; HL_OCL_PLATFORM_NAME, HL_OCL_DEVICE_TYPE and
// HL_GPU_DEVICE choose another): calls without a DeviceContext run there,
// so device tensors for such calls are cl_mem of this context. The handles
// stay msda's (do not release them). Throws msda::Error when there is no
// OpenCL device or this build has no OpenCL code.
struct OpenClQueue {
    void *context = nullptr;  // cl_context
    void *queue = nullptr;    // cl_command_queue
    void *device = nullptr;   // cl_device_id
};
OpenClQueue opencl_queue();

// msda compiles its OpenCL kernels once per context and keeps them. Before
// destroying a context it has run on, give msda one of its queues here: msda
// waits for that queue, then releases what it compiled for the context.
void release_opencl_context(void *queue);

// msda compiles its CUDA kernels once per context and keeps them, with the
// device memory Halide's CUDA runtime keeps for reuse there. Before
// destroying a context msda has run in, give it here: msda waits for the
// context's work, then releases both.
void release_cuda_context(void *context);

}  // namespace msda
