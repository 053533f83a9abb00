// Samples within an ulp of the zeros gate's edge carry a weight of ~1e-7:
// their gradients must still be accurate relative to their own size, not
// only to the largest gradient. A fast-math rewrite of the bilinear lerp once
// cancelled catastrophically here on targets without FMA; the suite runs
// under every compiled target (see api.cmake).
#include <gtest/gtest.h>

#include <msda/msda.hpp>
#include <msda_reference.h>

#include <cmath>
#include <vector>

namespace {

TEST(GateEdgeAccuracy, SamplesAnUlpInsideTheGateKeepTheirRelativeAccuracy) {
    const std::int64_t height = 4, width = 8, channels = 4;
    const float x_inside_right = std::nextafter(8.0f / 7.0f, 0.0f);  // x = 7.9999995 (align_corners)
    const float x_inside_left = std::nextafter(-1.0f / 7.0f, 0.0f);  // x = -0.99999994
    const float y_inside_top = std::nextafter(-1.0f / 3.0f, 0.0f);   // y = -0.99999994
    const std::vector<std::pair<float, float>> locations = {
        {x_inside_right, 0.5f}, {x_inside_left, 0.5f}, {0.5f, y_inside_top}, {x_inside_left, y_inside_top}};

    msda::reference::Problem problem;
    problem.batch = 1;
    problem.queries = static_cast<std::int64_t>(locations.size());
    problem.heads = 1;
    problem.channels = channels;
    problem.points = 1;
    problem.levels = {{height, width}};
    problem.align_corners = true;
    std::vector<float> value(height * width * channels), sampling, weights, grad_output;
    for (std::size_t i = 0; i < value.size(); i++) value[i] = std::sin(0.37f * i) + 1.5f;
    for (auto [u, v] : locations) {
        sampling.push_back(u);
        sampling.push_back(v);
        weights.push_back(1.0f);
        for (int c = 0; c < channels; c++) grad_output.push_back(1.0f);
    }
    problem.value.assign(value.begin(), value.end());
    problem.sampling_locations.assign(sampling.begin(), sampling.end());
    problem.attention_weights.assign(weights.begin(), weights.end());
    const msda::reference::Gradients expected =
        msda::reference::backward(problem, std::vector<double>(grad_output.begin(), grad_output.end()));

    const std::int64_t queries = problem.queries;
    std::int32_t shapes[2] = {static_cast<std::int32_t>(height), static_cast<std::int32_t>(width)};
    std::int32_t starts[1] = {0};
    std::vector<float> grad_value(value.size()), grad_locations(sampling.size()), grad_weights(weights.size());
    msda::BackwardArgs args;
    args.value = msda::TensorView::contiguous(value.data(), msda::DType::f32, {1, height * width, 1, channels});
    args.spatial_shapes = msda::TensorView::contiguous(shapes, msda::DType::i32, {1, 2});
    args.level_start_index = msda::TensorView::contiguous(starts, msda::DType::i32, {1});
    args.sampling_locations =
        msda::TensorView::contiguous(sampling.data(), msda::DType::f32, {1, queries, 1, 1, 1, 2});
    args.attention_weights = msda::TensorView::contiguous(weights.data(), msda::DType::f32, {1, queries, 1, 1, 1});
    args.grad_output = msda::TensorView::contiguous(grad_output.data(), msda::DType::f32, {1, queries, channels});
    args.grad_value = msda::TensorView::contiguous(grad_value.data(), msda::DType::f32, {1, height * width, 1, channels});
    args.grad_sampling_locations =
        msda::TensorView::contiguous(grad_locations.data(), msda::DType::f32, {1, queries, 1, 1, 1, 2});
    args.grad_attention_weights =
        msda::TensorView::contiguous(grad_weights.data(), msda::DType::f32, {1, queries, 1, 1, 1});
    msda::Options options;
    options.align_corners = true;
    msda::backward(args, options);

    for (std::int64_t q = 0; q < queries; q++) {
        SCOPED_TRACE("query " + std::to_string(q));
        const double weight = expected.attention_weights[q];
        ASSERT_NE(weight, 0.0) << "the sample must pass the gate";
        EXPECT_NEAR(grad_weights[q], weight, 1e-5 * std::abs(weight));
        for (int axis = 0; axis < 2; axis++) {
            const double location = expected.sampling_locations[2 * q + axis];
            EXPECT_NEAR(grad_locations[2 * q + axis], location, 1e-5 * std::abs(location) + 1e-12);
        }
    }
}

}  // namespace
