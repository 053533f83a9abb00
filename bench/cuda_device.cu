// See cuda_device.h. The baseline's kernels follow the classic algorithm:
// the bilinear sample of a corner set, the zeros-mode gate -1 < x < W,
// -1 < y < H, grad_value by atomicAdd, and the location and attention
// gradients of a (b, q, h) summed over its channels in shared memory.
#include "cuda_device.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace msda_bench::cuda {

namespace {

void check(cudaError_t result, const char *what) {
    if (result != cudaSuccess) {
        throw std::runtime_error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(result));
    }
}

cudaStream_t native(const Stream &stream) { return static_cast<cudaStream_t>(stream.get()); }

constexpr int kThreads = 256;

// One level's bilinear sample of value's (b, h) column c, rows of `row`
// floats, at pixel coordinates (y, x) already inside the gate. Corners
// outside the level read 0.
__device__ float sample(const float *column, int height, int width, int row, float y, float x) {
    const int y0 = static_cast<int>(floorf(y)), x0 = static_cast<int>(floorf(x));
    const int y1 = y0 + 1, x1 = x0 + 1;
    const float ly = y - y0, lx = x - x0, hy = 1.0f - ly, hx = 1.0f - lx;
    float v00 = 0, v01 = 0, v10 = 0, v11 = 0;
    if (y0 >= 0 && x0 >= 0) v00 = column[(y0 * width + x0) * row];
    if (y0 >= 0 && x1 <= width - 1) v01 = column[(y0 * width + x1) * row];
    if (y1 <= height - 1 && x0 >= 0) v10 = column[(y1 * width + x0) * row];
    if (y1 <= height - 1 && x1 <= width - 1) v11 = column[(y1 * width + x1) * row];
    return hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11;
}

// A location's pixel coordinate, location * size - 0.5. As the classic
// kernels are built (nvcc's default --fmad=true) the multiply and subtract
// fuse into one fma; `rounded` rounds each, as msda computes it (SPEC.md).
template <bool rounded>
__device__ float pixel(float location, int size) {
    if constexpr (rounded) {
        return __fsub_rn(__fmul_rn(location, static_cast<float>(size)), 0.5f);
    } else {
        return location * size - 0.5f;
    }
}

// A thread per (b, q, h, c).
template <bool rounded>
__global__ void forward_kernel(ClassicArgs a) {
    const std::int64_t index = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::int64_t total = a.batch * a.queries * a.heads * a.channels;
    if (index >= total) return;
    const std::int64_t c = index % a.channels;
    const std::int64_t h = index / a.channels % a.heads;
    const std::int64_t q = index / (a.channels * a.heads) % a.queries;
    const std::int64_t b = index / (a.channels * a.heads * a.queries);
    const int row = static_cast<int>(a.heads * a.channels);
    const std::int64_t sample0 = ((b * a.queries + q) * a.heads + h) * a.levels * a.points;
    float sum = 0;
    for (std::int64_t l = 0; l < a.levels; ++l) {
        const int height = static_cast<int>(a.spatial_shapes[2 * l]), width = static_cast<int>(a.spatial_shapes[2 * l + 1]);
        const float *column = a.value + (b * a.value_length + a.level_start_index[l]) * row + h * a.channels + c;
        for (std::int64_t p = 0; p < a.points; ++p) {
            const std::int64_t s = sample0 + l * a.points + p;
            const float x = pixel<rounded>(a.sampling_locations[2 * s], width);
            const float y = pixel<rounded>(a.sampling_locations[2 * s + 1], height);
            if (y > -1 && x > -1 && y < height && x < width) {
                sum += a.attention_weights[s] * sample(column, height, width, row, y, x);
            }
        }
    }
    a.output[index] = sum;
}

// A thread per (b, q, h, c); a block holds whole (b, q, h) groups of
// `channels` threads, whose per-sample partial gradients are summed in
// shared memory by the group's first thread.
template <bool rounded>
__global__ void backward_kernel(ClassicArgs a, int groups) {
    extern __shared__ float partial[];  // 3 per thread: attention, x, y
    const int group = threadIdx.x / a.channels;
    const int c = threadIdx.x % a.channels;
    const std::int64_t slot = static_cast<std::int64_t>(blockIdx.x) * groups + group;  // (b, q, h)
    const bool active = group < groups && slot < a.batch * a.queries * a.heads;
    const std::int64_t h = slot % a.heads, b = slot / (a.heads * a.queries);
    const int row = static_cast<int>(a.heads * a.channels);
    const float g = active ? a.grad_output[slot * a.channels + c] : 0.0f;
    for (std::int64_t l = 0; l < a.levels; ++l) {
        const int height = static_cast<int>(a.spatial_shapes[2 * l]), width = static_cast<int>(a.spatial_shapes[2 * l + 1]);
        const std::int64_t column = (b * a.value_length + a.level_start_index[l]) * row + h * a.channels + c;
        for (std::int64_t p = 0; p < a.points; ++p) {
            const std::int64_t s = slot * a.levels * a.points + l * a.points + p;
            float d_attention = 0, d_x = 0, d_y = 0;
            if (active) {
                const float x = pixel<rounded>(a.sampling_locations[2 * s], width);
                const float y = pixel<rounded>(a.sampling_locations[2 * s + 1], height);
                if (y > -1 && x > -1 && y < height && x < width) {
                    const float weight = a.attention_weights[s];
                    const float weighted = weight * g;
                    const int y0 = static_cast<int>(floorf(y)), x0 = static_cast<int>(floorf(x));
                    const int y1 = y0 + 1, x1 = x0 + 1;
                    const float ly = y - y0, lx = x - x0, hy = 1.0f - ly, hx = 1.0f - lx;
                    float value_sum = 0, slope_y = 0, slope_x = 0;
                    auto corner = [&](int cy, int cx, float w, float dy, float dx) {
                        if (cy < 0 || cx < 0 || cy > height - 1 || cx > width - 1) return;
                        const std::int64_t at = column + static_cast<std::int64_t>(cy * width + cx) * row;
                        const float v = a.value[at];
                        value_sum += w * v;
                        slope_y += dy * v;
                        slope_x += dx * v;
                        atomicAdd(a.grad_value + at, w * weighted);
                    };
                    corner(y0, x0, hy * hx, -hx, -hy);
                    corner(y0, x1, hy * lx, -lx, hy);
                    corner(y1, x0, ly * hx, hx, -ly);
                    corner(y1, x1, ly * lx, lx, ly);
                    d_attention = g * value_sum;
                    d_x = width * slope_x * weighted;
                    d_y = height * slope_y * weighted;
                }
            }
            partial[3 * threadIdx.x] = d_attention;
            partial[3 * threadIdx.x + 1] = d_x;
            partial[3 * threadIdx.x + 2] = d_y;
            __syncthreads();
            if (active && c == 0) {
                float sums[3] = {0, 0, 0};
                for (int k = 0; k < a.channels; ++k) {
                    for (int j = 0; j < 3; ++j) sums[j] += partial[3 * (threadIdx.x + k) + j];
                }
                a.grad_attention_weights[s] = sums[0];
                a.grad_sampling_locations[2 * s] = sums[1];
                a.grad_sampling_locations[2 * s + 1] = sums[2];
            }
            __syncthreads();
        }
    }
}

}  // namespace

std::string unavailable() {
    int count = 0;
    const cudaError_t result = cudaGetDeviceCount(&count);
    if (result != cudaSuccess) return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(result);
    if (count == 0) return "no CUDA device";
    return "";
}

std::string device_name() {
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
    return std::string(properties.name) + " (compute capability " + std::to_string(properties.major) + "." +
           std::to_string(properties.minor) + ", " + std::to_string(properties.multiProcessorCount) + " SMs)";
}

Buffer::Buffer(std::size_t bytes) : bytes_(bytes) { check(cudaMalloc(&memory_, std::max<std::size_t>(bytes, 4)), "cudaMalloc"); }
Buffer::~Buffer() { cudaFree(memory_); }
void Buffer::upload(const void *host) { check(cudaMemcpy(memory_, host, bytes_, cudaMemcpyHostToDevice), "cudaMemcpy"); }
void Buffer::download(void *host) const {
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    check(cudaMemcpy(host, memory_, bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy");
}

Stream::Stream() {
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    stream_ = stream;
}
Stream::~Stream() { cudaStreamDestroy(static_cast<cudaStream_t>(stream_)); }
void Stream::synchronize() const { check(cudaStreamSynchronize(native(*this)), "cudaStreamSynchronize"); }

double median_ms(const Stream &stream, int warmup, int rounds, const std::function<void()> &call) {
    for (int i = 0; i < warmup; ++i) call();
    stream.synchronize();
    cudaEvent_t start = nullptr, stop = nullptr;
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
    std::vector<double> times;
    for (int i = 0; i < rounds; ++i) {
        check(cudaEventRecord(start, native(stream)), "cudaEventRecord");
        call();
        check(cudaEventRecord(stop, native(stream)), "cudaEventRecord");
        check(cudaEventSynchronize(stop), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
        times.push_back(ms);
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

void classic_forward(const ClassicArgs &args, const Stream &stream) {
    const std::int64_t total = args.batch * args.queries * args.heads * args.channels;
    const unsigned blocks = static_cast<unsigned>((total + kThreads - 1) / kThreads);
    const auto kernel = args.rounded_coordinates ? forward_kernel<true> : forward_kernel<false>;
    if (blocks > 0) kernel<<<blocks, kThreads, 0, native(stream)>>>(args);
    check(cudaGetLastError(), "the classic forward's launch");
}

void classic_backward(const ClassicArgs &args, const Stream &stream) {
    if (args.channels > 1024) throw std::runtime_error("the classic backward takes C_h <= 1024");
    check(cudaMemsetAsync(args.grad_value, 0,
                          static_cast<std::size_t>(args.batch * args.value_length * args.heads * args.channels) *
                              sizeof(float),
                          native(stream)),
          "cudaMemsetAsync");
    const int groups = static_cast<int>(std::max<std::int64_t>(1, kThreads / args.channels));
    const int threads = static_cast<int>(groups * args.channels);
    const std::int64_t slots = args.batch * args.queries * args.heads;
    const unsigned blocks = static_cast<unsigned>((slots + groups - 1) / groups);
    const auto kernel = args.rounded_coordinates ? backward_kernel<true> : backward_kernel<false>;
    if (blocks > 0) kernel<<<blocks, threads, 3 * threads * sizeof(float), native(stream)>>>(args, groups);
    check(cudaGetLastError(), "the classic backward's launch");
}

}  // namespace msda_bench::cuda
