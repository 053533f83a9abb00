// The GPU side of msda_gpu_bench, compiled by nvcc (cuda_device.cu): device
// memory, streams and event timing through the CUDA runtime, and the
// classic baseline: multi-scale deformable attention as the public CUDA
// kernels compute it (Deformable DETR's and mmcv's im2col / col2im), written
// here as plain CUDA C++. The forward is a thread per (b, q, h, c) summing
// its samples; the backward a thread per (b, q, h, c) that scatters into
// grad_value with atomic adds and sums its (b, q, h)'s per-sample gradients
// over the channels in shared memory. align_corners = false, zeros padding,
// float32, value BLNC and locations BQHLP2 (the setting those kernels have).
// No CUDA type appears here, so the host code compiles without CUDA's
// headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace msda_bench::cuda {

// Why no CUDA device can be used (empty when one can), and its name.
std::string unavailable();
std::string device_name();

// Device memory of `bytes` (cudaMalloc), freed with the object.
class Buffer {
public:
    explicit Buffer(std::size_t bytes);
    Buffer(const Buffer &) = delete;
    Buffer &operator=(const Buffer &) = delete;
    ~Buffer();
    void *get() const { return memory_; }
    std::size_t bytes() const { return bytes_; }
    void upload(const void *host);    // all bytes, blocking
    void download(void *host) const;  // all bytes, blocking (after the device's work)

private:
    void *memory_ = nullptr;
    std::size_t bytes_ = 0;
};

// A stream of the device's primary context (cudaStreamNonBlocking).
class Stream {
public:
    Stream();
    Stream(const Stream &) = delete;
    Stream &operator=(const Stream &) = delete;
    ~Stream();
    void *get() const { return stream_; }
    void synchronize() const;

private:
    void *stream_ = nullptr;
};

// The median of `rounds` timings (ms) of `call`, each between two events
// recorded on `stream` just before and after it (a call's host work is
// inside), after `warmup` untimed calls.
double median_ms(const Stream &stream, int warmup, int rounds, const std::function<void()> &call);

// The classic kernels' tensors (device pointers) and sizes. spatial_shapes
// and level_start_index are int64 on the device, as the PyTorch operators
// take them.
struct ClassicArgs {
    const float *value = nullptr;
    const std::int64_t *spatial_shapes = nullptr, *level_start_index = nullptr;
    const float *sampling_locations = nullptr, *attention_weights = nullptr;
    float *output = nullptr;
    const float *grad_output = nullptr;
    float *grad_value = nullptr, *grad_sampling_locations = nullptr, *grad_attention_weights = nullptr;
    std::int64_t batch = 0, value_length = 0, heads = 0, channels = 0, levels = 0, queries = 0, points = 0;
    // false: each pixel coordinate location * size - 0.5 is one fma, as nvcc
    // builds the classic kernels (timed so). true: a rounded multiply and a
    // rounded subtract, as msda computes it; the agreement check's setting,
    // since a location whose two roundings differ in the last bit can fall in
    // the neighbouring pixel cell, where its location gradient jumps.
    bool rounded_coordinates = false;
};

// Enqueued on `stream`. The backward zeroes grad_value first (its scatter
// adds into it), as the operators' col2im does.
void classic_forward(const ClassicArgs &args, const Stream &stream);
void classic_backward(const ClassicArgs &args, const Stream &stream);

}  // namespace msda_bench::cuda
