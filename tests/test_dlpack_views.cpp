// msda/dlpack.hpp without any framework: DLTensors built by hand over this
// test's memory become views of it (strides, compact strides, byte_offset),
// msda's forward and backward on those views match the double reference,
// and what msda cannot read is refused with the tensor's name. The torch
// exporter's tensors are tests/test_dlpack.cpp's (label torch); this suite
// runs wherever libmsda does (the arm label too).
#include <msda/dlpack.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "msda_reference.h"

namespace {

// A DLTensor over `data` with the given shape and strides (in elements;
// empty: compact row-major, DLPack's null strides).
struct HandMade {
    HandMade(void *data, DLDataType type, std::vector<std::int64_t> shape_, std::vector<std::int64_t> strides_ = {})
        : shape(std::move(shape_)), strides(std::move(strides_)) {
        tensor.data = data;
        tensor.device = {kDLCPU, 0};
        tensor.ndim = static_cast<std::int32_t>(shape.size());
        tensor.dtype = type;
        tensor.shape = shape.data();
        tensor.strides = strides.empty() ? nullptr : strides.data();
        tensor.byte_offset = 0;
    }
    std::vector<std::int64_t> shape, strides;
    DLTensor tensor{};
};

constexpr DLDataType kFloat32{kDLFloat, 32, 1};
constexpr DLDataType kInt64{kDLInt, 64, 1};

TEST(DLPackViews, ByteOffsetAndCompactStridesAreHonoured) {
    std::vector<float> storage(24);
    HandMade made(storage.data(), kFloat32, {2, 3, 2});
    made.tensor.byte_offset = 8 * sizeof(float);
    const msda::TensorView view = msda::from_dlpack(made.tensor, "value");
    EXPECT_EQ(view.data, storage.data() + 8);
    EXPECT_EQ(view.dtype, msda::DType::f32);
    ASSERT_EQ(view.rank, 3);
    EXPECT_EQ(view.shape[0], 2);
    EXPECT_EQ(view.shape[2], 2);
    EXPECT_EQ(view.strides[0], 6);
    EXPECT_EQ(view.strides[1], 2);
    EXPECT_EQ(view.strides[2], 1);

    HandMade strided(storage.data(), {kDLBfloat, 16, 1}, {3, 4}, {1, 3});
    const msda::TensorView transposed = msda::from_dlpack(strided.tensor, "value");
    EXPECT_EQ(transposed.dtype, msda::DType::bf16);
    EXPECT_EQ(transposed.strides[0], 1);
    EXPECT_EQ(transposed.strides[1], 3);
}

double max_abs(const std::vector<double> &values) {
    double largest = 0;
    for (const double v : values) largest = std::max(largest, std::abs(v));
    return largest;
}

// SPEC's float32 rule: max abs error <= 1e-5 * the reference's largest magnitude.
void expect_close(const std::vector<float> &actual, const std::vector<double> &expected, const char *name) {
    ASSERT_EQ(actual.size(), expected.size()) << name;
    const double tolerance = 1e-5 * std::max(1.0, max_abs(expected));
    double worst = 0;
    for (std::size_t i = 0; i < actual.size(); ++i) worst = std::max(worst, std::abs(actual[i] - expected[i]));
    EXPECT_LE(worst, tolerance) << name;
}

// Forward and backward through DLPack views: value stored head-major (B,
// N_h, L, C_h) and viewed as (B, L, N_h, C_h) through its strides, the rest
// compact; the results against the double reference.
// An OpenCL tensor's data is its cl_mem: the view keeps it, with the
// byte offset into it and the device (nothing is dereferenced here).
TEST(DLPackViews, OpenClTensorsKeepTheirHandleAndOffset) {
    int handle_stand_in = 0;
    HandMade made(&handle_stand_in, kFloat32, {2, 3}, {1, 2});
    made.tensor.device = {kDLOpenCL, 0};
    made.tensor.byte_offset = 12;
    const msda::TensorView view = msda::from_dlpack(made.tensor, "value");
    EXPECT_EQ(view.data, &handle_stand_in);
    EXPECT_EQ(view.device_type, msda::DeviceType::opencl);
    EXPECT_EQ(view.device_id, 0);
    EXPECT_EQ(view.byte_offset, 12);
    EXPECT_EQ(view.strides[0], 1);
    EXPECT_EQ(view.strides[1], 2);
    made.tensor.device = {kDLCPU, 0};
    const msda::TensorView host = msda::from_dlpack(made.tensor, "value");
    EXPECT_EQ(host.device_type, msda::DeviceType::cpu);
    EXPECT_EQ(host.byte_offset, 0);
    EXPECT_EQ(host.data, reinterpret_cast<char *>(&handle_stand_in) + 12);
}

TEST(DLPackViews, ForwardAndBackwardOnViewsMatchTheReference) {
    msda::reference::Problem problem;
    problem.batch = 2, problem.queries = 5, problem.heads = 2, problem.channels = 4, problem.points = 3;
    problem.levels = {{4, 6}, {2, 3}};
    const std::int64_t B = problem.batch, Q = problem.queries, H = problem.heads, C = problem.channels,
                       P = problem.points, N = 2, L = problem.value_length();
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f), signed_unit(-1.0f, 1.0f);

    // value in head-major memory; the reference reads (B, L, N_h, C_h).
    std::vector<float> value_memory(B * H * L * C);
    for (float &v : value_memory) v = signed_unit(rng);
    problem.value.resize(value_memory.size());
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t l = 0; l < L; ++l)
            for (std::int64_t h = 0; h < H; ++h)
                for (std::int64_t c = 0; c < C; ++c)
                    problem.value[((b * L + l) * H + h) * C + c] = value_memory[((b * H + h) * L + l) * C + c];
    std::vector<float> locations(B * Q * H * N * P * 2), weights(B * Q * H * N * P);
    for (float &v : locations) v = unit(rng) * 1.2f - 0.1f;  // some outside the image
    for (float &v : weights) v = unit(rng);
    problem.sampling_locations.assign(locations.begin(), locations.end());
    problem.attention_weights.assign(weights.begin(), weights.end());
    std::vector<std::int64_t> shapes = {4, 6, 2, 3}, starts = {0, 24};

    std::vector<float> output(B * Q * H * C, std::nanf("")), grad_output(output.size());
    for (float &v : grad_output) v = signed_unit(rng);
    std::vector<float> grad_value(value_memory.size(), std::nanf("")), grad_locations(locations.size(), std::nanf("")),
        grad_weights(weights.size(), std::nanf(""));

    const std::vector<std::int64_t> value_shape = {B, L, H, C}, value_strides = {H * L * C, C, L * C, 1};
    HandMade value(value_memory.data(), kFloat32, value_shape, value_strides);
    HandMade spatial_shapes(shapes.data(), kInt64, {N, 2}), level_start_index(starts.data(), kInt64, {N});
    HandMade sampling_locations(locations.data(), kFloat32, {B, Q, H, N, P, 2});
    HandMade attention_weights(weights.data(), kFloat32, {B, Q, H, N, P});
    HandMade out(output.data(), kFloat32, {B, Q, H * C}), grad_out(grad_output.data(), kFloat32, {B, Q, H * C});
    HandMade grad_v(grad_value.data(), kFloat32, value_shape, value_strides);
    HandMade grad_l(grad_locations.data(), kFloat32, {B, Q, H, N, P, 2});
    HandMade grad_w(grad_weights.data(), kFloat32, {B, Q, H, N, P});

    msda::ForwardArgs forward;
    forward.value = msda::from_dlpack(value.tensor, "value");
    forward.spatial_shapes = msda::from_dlpack(spatial_shapes.tensor, "spatial_shapes");
    forward.level_start_index = msda::from_dlpack(level_start_index.tensor, "level_start_index");
    forward.sampling_locations = msda::from_dlpack(sampling_locations.tensor, "sampling_locations");
    forward.attention_weights = msda::from_dlpack(attention_weights.tensor, "attention_weights");
    forward.output = msda::from_dlpack(out.tensor, "output");
    ASSERT_NO_THROW(msda::forward(forward));
    expect_close(output, msda::reference::forward(problem), "output");

    msda::BackwardArgs backward;
    backward.value = forward.value;
    backward.spatial_shapes = forward.spatial_shapes;
    backward.level_start_index = forward.level_start_index;
    backward.sampling_locations = forward.sampling_locations;
    backward.attention_weights = forward.attention_weights;
    backward.grad_output = msda::from_dlpack(grad_out.tensor, "grad_output");
    backward.grad_value = msda::from_dlpack(grad_v.tensor, "grad_value");
    backward.grad_sampling_locations = msda::from_dlpack(grad_l.tensor, "grad_sampling_locations");
    backward.grad_attention_weights = msda::from_dlpack(grad_w.tensor, "grad_attention_weights");
    ASSERT_NO_THROW(msda::backward(backward));
    const msda::reference::Gradients expected =
        msda::reference::backward(problem, std::vector<double>(grad_output.begin(), grad_output.end()));
    std::vector<float> grad_value_blnc(grad_value.size());
    for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t l = 0; l < L; ++l)
            for (std::int64_t h = 0; h < H; ++h)
                for (std::int64_t c = 0; c < C; ++c)
                    grad_value_blnc[((b * L + l) * H + h) * C + c] = grad_value[((b * H + h) * L + l) * C + c];
    expect_close(grad_value_blnc, expected.value, "grad_value");
    expect_close(grad_locations, expected.sampling_locations, "grad_sampling_locations");
    expect_close(grad_weights, expected.attention_weights, "grad_attention_weights");
}

void expect_refused(const DLTensor &tensor, const std::string &expected_text) {
    try {
        msda::from_dlpack(tensor, "value");
        ADD_FAILURE() << "accepted; expected an error saying \"" << expected_text << "\"";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find(expected_text), std::string::npos) << error.what();
    }
}

TEST(DLPackViews, WhatMsdaCannotReadIsRefused) {
    std::vector<float> storage(6);
    const HandMade made(storage.data(), kFloat32, {2, 3});
    const DLTensor good = made.tensor;

    DLTensor tensor = good;
    tensor.device = {kDLROCM, 1};
    expect_refused(tensor, "msda: value: is in ROCm memory (DLPack device type 10, id 1)");
    tensor = good;
    tensor.device = {kDLVulkan, 0};
    expect_refused(tensor, "is in Vulkan memory");
    tensor = good;
    tensor.device = {kDLOpenCL, 0};
    tensor.byte_offset = 6;
    expect_refused(tensor, "its byte_offset 6 into its cl_mem is not a multiple of its 4-byte elements");
    tensor = good;
    tensor.dtype = {kDLFloat, 32, 4};
    expect_refused(tensor, "has 4 lanes per element");
    tensor = good;
    tensor.dtype = {kDLUInt, 8, 1};
    expect_refused(tensor, "has DLPack dtype uint8");
    tensor = good;
    tensor.dtype = {kDLComplex, 64, 1};
    expect_refused(tensor, "has DLPack dtype complex64");
    tensor = good;
    tensor.ndim = 7;
    expect_refused(tensor, "has 7 dimensions; msda's tensors have at most 6");
    tensor = good;
    tensor.shape = nullptr;
    expect_refused(tensor, "has a null shape array");
    tensor = good;
    std::int64_t negative[2] = {2, -3};
    tensor.shape = negative;
    expect_refused(tensor, "dimension 1 has extent -3");
    tensor = good;
    std::int64_t huge[2] = {std::int64_t{1} << 40, std::int64_t{1} << 40};
    tensor.shape = huge;
    expect_refused(tensor, "its shape's element count overflows 64 bits");
    tensor = good;
    tensor.byte_offset = 2;
    expect_refused(tensor, "is not aligned to its 4-byte elements");
    tensor = good;
    tensor.data = nullptr;
    expect_refused(tensor, "has elements and null data");
    EXPECT_THROW(msda::from_dlpack(static_cast<const DLManagedTensor *>(nullptr), "value"), msda::Error);

    // Pinned host memory is host memory; an empty tensor may have null data.
    tensor = good;
    tensor.device = {kDLCUDAHost, 0};
    EXPECT_EQ(msda::from_dlpack(tensor, "value").data, storage.data());
    EXPECT_EQ(msda::from_dlpack(tensor, "value").device_type, msda::DeviceType::cpu);
    tensor = good;
    std::int64_t empty[2] = {2, 0};
    tensor.shape = empty;
    tensor.data = nullptr;
    EXPECT_EQ(msda::from_dlpack(tensor, "value").data, nullptr);
}

// CUDA memory (managed included) is a view on the CUDA device, its data the
// device address of the first element (any device pointer: the view does
// not dereference it; the call checks it with the driver).
TEST(DLPackViews, CudaMemoryIsACudaView) {
    std::vector<float> storage(6);
    HandMade made(storage.data(), kFloat32, {2, 3});
    for (const DLDeviceType type : {kDLCUDA, kDLCUDAManaged}) {
        DLTensor tensor = made.tensor;
        tensor.device = {type, 3};
        tensor.byte_offset = 8;
        const msda::TensorView view = msda::from_dlpack(tensor, "value");
        EXPECT_EQ(view.device_type, msda::DeviceType::cuda);
        EXPECT_EQ(view.device_id, 3);
        EXPECT_EQ(view.data, storage.data() + 2);
        EXPECT_EQ(view.byte_offset, 0);
        EXPECT_EQ(view.shape[1], 3);
        tensor.byte_offset = 6;
        expect_refused(tensor, "is not aligned to its 4-byte elements");
    }
}

}  // namespace
