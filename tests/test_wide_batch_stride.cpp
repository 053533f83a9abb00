// A batch element of more than 2^31 - 1 elements: the batch stride does not
// fit a Halide buffer's 32-bit stride, so the runtime runs one call per batch
// element. The tensors are views into a sparse 16 GiB mapping: only the pages
// the problem touches are ever committed.
#include <gtest/gtest.h>

#include <msda/msda.hpp>
#include <msda_reference.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "sparse_memory.h"

namespace {

constexpr std::int64_t kWideStride = (std::int64_t{1} << 31) + 64;  // elements

using msda::testing::SparseMemory;

TEST(WideBatchStride, ForwardAndBackwardMatchTheReferenceWhenTheBatchStrideExceeds32Bits) {
    const std::int64_t batch = 2, heads = 2, channels = 3, queries = 5, points = 2;
    const std::vector<msda::reference::Level> levels = {{3, 4}, {2, 2}};
    const std::int64_t length = 16, level_count = 2;
    const std::int64_t per_batch = length * heads * channels;

    const std::size_t bytes = batch * kWideStride * sizeof(float);
    SparseMemory value_memory(bytes), grad_value_memory(bytes);
    ASSERT_NE(value_memory.as<float>(), nullptr) << "could not reserve the sparse mapping";
    ASSERT_NE(grad_value_memory.as<float>(), nullptr) << "could not reserve the sparse mapping";

    msda::reference::Problem problem;
    problem.batch = batch;
    problem.queries = queries;
    problem.heads = heads;
    problem.channels = channels;
    problem.points = points;
    problem.levels = levels;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-0.1f, 1.1f);
    std::vector<float> locations(batch * queries * heads * level_count * points * 2);
    std::vector<float> weights(batch * queries * heads * level_count * points);
    std::vector<float> grad_output(batch * queries * heads * channels);
    for (float &x : locations) x = uniform(rng);
    for (float &x : weights) x = uniform(rng);
    for (float &x : grad_output) x = uniform(rng);
    for (std::int64_t b = 0; b < batch; b++) {
        for (std::int64_t i = 0; i < per_batch; i++) {
            float x = uniform(rng);
            value_memory.as<float>()[b * kWideStride + i] = x;
            problem.value.push_back(x);
        }
    }
    problem.sampling_locations.assign(locations.begin(), locations.end());
    problem.attention_weights.assign(weights.begin(), weights.end());

    std::int32_t shapes[4] = {3, 4, 2, 2}, starts[2] = {0, 12};
    std::vector<float> output(grad_output.size(), -1.0f);
    std::vector<float> grad_locations(locations.size()), grad_weights(weights.size());
    const msda::TensorView value = msda::TensorView::strided(
        value_memory.as<float>(), msda::DType::f32, {batch, length, heads, channels},
        {kWideStride, heads * channels, channels, 1});
    msda::ForwardArgs forward;
    forward.value = value;
    forward.spatial_shapes = msda::TensorView::contiguous(shapes, msda::DType::i32, {2, 2});
    forward.level_start_index = msda::TensorView::contiguous(starts, msda::DType::i32, {2});
    forward.sampling_locations = msda::TensorView::contiguous(
        locations.data(), msda::DType::f32, {batch, queries, heads, level_count, points, 2});
    forward.attention_weights = msda::TensorView::contiguous(
        weights.data(), msda::DType::f32, {batch, queries, heads, level_count, points});
    forward.output =
        msda::TensorView::contiguous(output.data(), msda::DType::f32, {batch, queries, heads * channels});
    msda::forward(forward);

    msda::BackwardArgs backward;
    backward.value = value;
    backward.spatial_shapes = forward.spatial_shapes;
    backward.level_start_index = forward.level_start_index;
    backward.sampling_locations = forward.sampling_locations;
    backward.attention_weights = forward.attention_weights;
    backward.grad_output = msda::TensorView::contiguous(grad_output.data(), msda::DType::f32,
                                                        {batch, queries, heads * channels});
    backward.grad_value = msda::TensorView::strided(grad_value_memory.as<float>(), msda::DType::f32,
                                                    {batch, length, heads, channels},
                                                    {kWideStride, heads * channels, channels, 1});
    backward.grad_sampling_locations = msda::TensorView::contiguous(
        grad_locations.data(), msda::DType::f32, {batch, queries, heads, level_count, points, 2});
    backward.grad_attention_weights = msda::TensorView::contiguous(
        grad_weights.data(), msda::DType::f32, {batch, queries, heads, level_count, points});
    msda::backward(backward);

    const std::vector<double> expected_output = msda::reference::forward(problem);
    const msda::reference::Gradients expected = msda::reference::backward(
        problem, std::vector<double>(grad_output.begin(), grad_output.end()));
    for (std::size_t i = 0; i < output.size(); i++) EXPECT_NEAR(output[i], expected_output[i], 1e-5);
    for (std::int64_t b = 0; b < batch; b++) {
        for (std::int64_t i = 0; i < per_batch; i++) {
            EXPECT_NEAR(grad_value_memory.as<float>()[b * kWideStride + i],
                        expected.value[b * per_batch + i], 1e-5);
        }
    }
    for (std::size_t i = 0; i < grad_locations.size(); i++) {
        EXPECT_NEAR(grad_locations[i], expected.sampling_locations[i], 1e-4);
    }
    for (std::size_t i = 0; i < grad_weights.size(); i++) {
        EXPECT_NEAR(grad_weights[i], expected.attention_weights[i], 1e-5);
    }
}

}  // namespace
