// Tensors as Halide buffers: a layout is only a permutation of strides, so
// every tensor, whatever its layout, becomes one buffer over the caller's
// memory (or, on a device, its handle and byte offset), dims innermost first.
#pragma once

#include <HalideRuntime.h>

#include <cstdint>
#include <initializer_list>

#include <msda/msda.hpp>

namespace msda::detail {

// The host address of a host tensor's first element.
inline char *host_address(const TensorView &t) { return static_cast<char *>(t.data) + t.byte_offset; }
// The host address `offset` elements past a host tensor's first element.
inline void *element(const TensorView &t, std::int64_t offset) {
    return host_address(t) + offset * static_cast<std::int64_t>(dtype_size(t.dtype));
}

// The elements a tensor's strides reach from its first one: [low, high].
struct Reach {
    std::int64_t low = 0, high = 0;
};
Reach reach_of(const TensorView &t);

// A halide_buffer_t over caller memory. For a device tensor, host is null
// and device_handle is its memory (a cl_mem, a CUDA address), with the byte
// offset of the buffer's element 0 there (its backend hands them to the
// generated code).
struct HalideBuffer {
    halide_buffer_t buffer{};
    halide_dimension_t dims[kMaxRank]{};
    void *device_handle = nullptr;
    std::int64_t device_offset = 0;

    HalideBuffer(void *data, halide_type_t type, int dimensions) {
        buffer.host = static_cast<std::uint8_t *>(data);
        buffer.type = type;
        buffer.dimensions = dimensions;
        buffer.dim = dims;
    }
    // A dimension of extent 1 gets stride 1: its stride is never used, and
    // the generated code requires stride 1 on its dense (channel) dimension,
    // which frameworks leave arbitrary when it has extent 1.
    void set(int d, std::int64_t extent, std::int64_t stride) {
        dims[d].min = 0;
        dims[d].extent = static_cast<std::int32_t>(extent);
        dims[d].stride = extent == 1 ? 1 : static_cast<std::int32_t>(stride);
    }
    // The dim pointer is refreshed here because a copy still points at the
    // original's array.
    halide_buffer_t *get() {
        buffer.dim = dims;
        return &buffer;
    }
};

constexpr halide_type_t kFloat32{halide_type_float, 32, 1};
constexpr halide_type_t kInt32{halide_type_int, 32, 1};

// The Halide type of a storage dtype.
inline halide_type_t halide_type(DType dtype) {
    switch (dtype) {
    case DType::f16: return {halide_type_float, 16, 1};
    case DType::bf16: return {halide_type_bfloat, 16, 1};
    case DType::f64: return {halide_type_float, 64, 1};
    default: return kFloat32;
    }
}

// A Halide buffer over a tensor's memory starting `offset` elements past its
// first element: host memory, or (device) its handle and byte offset.
inline HalideBuffer buffer_at(const TensorView &t, std::int64_t offset, int dimensions) {
    if (t.device_type == DeviceType::cpu) return HalideBuffer(element(t, offset), halide_type(t.dtype), dimensions);
    HalideBuffer result(nullptr, halide_type(t.dtype), dimensions);
    result.device_handle = t.data;
    result.device_offset = t.byte_offset + offset * static_cast<std::int64_t>(dtype_size(t.dtype));
    return result;
}

// A tensor as a Halide buffer whose dimension d is the tensor's
// dimension order[d], starting `offset` elements into the data.
inline HalideBuffer permuted(const TensorView &t, std::initializer_list<int> order, std::int64_t offset = 0) {
    HalideBuffer result = buffer_at(t, offset, static_cast<int>(order.size()));
    int d = 0;
    for (int source : order) result.set(d++, t.shape[source], t.strides[source]);
    return result;
}

// value and grad_value: (c, h, row, b).
inline HalideBuffer value_buffer(const TensorView &t, ValueLayout layout) {
    return layout == ValueLayout::BLNC ? permuted(t, {3, 2, 1, 0}) : permuted(t, {3, 1, 2, 0});
}

// One plane (0: x, 1: y) of sampling_locations or its gradient: (p, l, h, q, b).
inline HalideBuffer location_plane(const TensorView &t, LocationsLayout layout, int plane) {
    if (layout == LocationsLayout::BQHLP2) return permuted(t, {4, 3, 2, 1, 0}, plane * t.strides[5]);
    return permuted(t, {5, 4, 3, 2, 0}, plane * t.strides[1]);
}

// attention_weights and its gradient: (p, l, h, q, b).
inline HalideBuffer weight_buffer(const TensorView &t) { return permuted(t, {4, 3, 2, 1, 0}); }

// output and grad_output, (B, N_q, N_h*C_h) head-major: (c, h, q, b).
inline HalideBuffer head_major_buffer(const TensorView &t, std::int64_t heads, std::int64_t channels) {
    HalideBuffer result = buffer_at(t, 0, 4);
    result.set(0, channels, t.strides[2]);
    result.set(1, heads, channels * t.strides[2]);
    result.set(2, t.shape[1], t.strides[1]);
    result.set(3, t.shape[0], t.strides[0]);
    return result;
}

// A value-shaped buffer (c, h, row, b), dense over workspace memory:
// head-major (B, N_h, L, C_h), or in BLNC order (B, L, N_h, C_h).
inline HalideBuffer workspace_value_buffer(void *data, halide_type_t type, const ProblemSize &size,
                                           bool head_major) {
    HalideBuffer result(data, type, 4);
    const std::int64_t row = head_major ? size.channels : size.heads * size.channels;
    const std::int64_t head = head_major ? size.value_length * size.channels : size.channels;
    result.set(0, size.channels, 1);
    result.set(1, size.heads, head);
    result.set(2, size.value_length, row);
    result.set(3, size.batch, size.batch == 1 ? 1 : size.value_length * size.heads * size.channels);
    return result;
}

// Whether the rows of one head are closer together than the heads of one
// row: true for BNLC, and for BLNC with one head.
inline bool is_head_major(const HalideBuffer &value) {
    return value.dims[1].extent == 1 || value.dims[1].stride > value.dims[2].stride;
}

// The elements [low, high] a Halide buffer's strides reach from element 0.
inline Reach buffer_reach(const halide_buffer_t &buffer) {
    Reach reach;
    for (int d = 0; d < buffer.dimensions; d++) {
        const std::int64_t extent_reach = std::int64_t{buffer.dim[d].extent - 1} * buffer.dim[d].stride;
        (extent_reach < 0 ? reach.low : reach.high) += extent_reach;
    }
    return reach;
}

// Calls `visit` with the element offset (from element 0) of every element
// of a buffer (dimension: its outermost, dimensions - 1), or of a tensor.
template <typename Visit>
void for_each_element(const halide_buffer_t &buffer, int dimension, std::int64_t offset, Visit &visit) {
    if (dimension < 0) {
        visit(offset);
        return;
    }
    const halide_dimension_t &dim = buffer.dim[dimension];
    for (std::int32_t i = 0; i < dim.extent; i++) {
        for_each_element(buffer, dimension - 1, offset + std::int64_t{i} * dim.stride, visit);
    }
}
template <typename Visit>
void for_each_element(const TensorView &t, Visit visit) {
    std::int64_t index[kMaxRank] = {};
    const std::int64_t count = t.numel();
    for (std::int64_t n = 0; n < count; n++) {
        std::int64_t offset = 0;
        for (int d = 0; d < t.rank; d++) offset += index[d] * t.strides[d];
        visit(offset);
        for (int d = t.rank - 1; d >= 0 && ++index[d] == t.shape[d]; d--) index[d] = 0;
    }
}

}  // namespace msda::detail
