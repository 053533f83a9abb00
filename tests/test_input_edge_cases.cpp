// Inputs at the edges of what the API accepts: ranks outside 0..6, channel
// dimensions of extent 1 with arbitrary strides (as frameworks leave them),
// and non-finite attention weights or grad_output, which must not leak out
// of samples that do not count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <msda/msda.h>
#include <msda/msda.hpp>
#include <msda_reference.h>

#include "c_api_views.h"
#include "test_util.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace {

using ::testing::HasSubstr;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// The suite's device (the opencl and cuda labels run these cases there).
msda::Options on_test_device() {
    msda::Options options;
    options.device = msda::testing::test_device();
    return options;
}

// One level of H x W, one head, C_h channels, one point per query.
struct SmallProblem {
    std::int64_t height, width, channels, queries;
    std::vector<float> value, locations, weights, grad_output;
    std::int32_t shapes[2], starts[1] = {0};

    SmallProblem(std::int64_t h, std::int64_t w, std::int64_t c, std::int64_t q)
        : height(h), width(w), channels(c), queries(q), value(h * w * c), locations(2 * q),
          weights(q, 1.0f), grad_output(q * c, 1.0f) {
        shapes[0] = static_cast<std::int32_t>(h);
        shapes[1] = static_cast<std::int32_t>(w);
        for (std::size_t i = 0; i < value.size(); i++) value[i] = 0.5f + 0.25f * static_cast<float>(i % 7);
    }

    msda::reference::Problem reference(bool align_corners = false) const {
        msda::reference::Problem p;
        p.batch = 1;
        p.queries = queries;
        p.heads = 1;
        p.channels = channels;
        p.points = 1;
        p.levels = {{height, width}};
        p.value.assign(value.begin(), value.end());
        p.sampling_locations.assign(locations.begin(), locations.end());
        p.attention_weights.assign(weights.begin(), weights.end());
        p.align_corners = align_corners;
        return p;
    }

    msda::ForwardArgs forward_args(std::vector<float> &output) {
        msda::ForwardArgs a;
        a.value = msda::TensorView::contiguous(value.data(), msda::DType::f32, {1, height * width, 1, channels});
        a.spatial_shapes = msda::TensorView::contiguous(shapes, msda::DType::i32, {1, 2});
        a.level_start_index = msda::TensorView::contiguous(starts, msda::DType::i32, {1});
        a.sampling_locations =
            msda::TensorView::contiguous(locations.data(), msda::DType::f32, {1, queries, 1, 1, 1, 2});
        a.attention_weights = msda::TensorView::contiguous(weights.data(), msda::DType::f32, {1, queries, 1, 1, 1});
        a.output = msda::TensorView::contiguous(output.data(), msda::DType::f32, {1, queries, channels});
        return a;
    }
};

// Equal as IEEE values where the reference is not finite (NaN to NaN, Inf to
// the same Inf), and within the SPEC tolerance of the largest finite
// magnitude elsewhere.
void expect_matches(const std::string &name, const std::vector<float> &actual,
                    const std::vector<double> &expected) {
    ASSERT_EQ(actual.size(), expected.size()) << name;
    double largest = 0;
    for (double x : expected) {
        if (std::isfinite(x)) largest = std::max(largest, std::abs(x));
    }
    for (std::size_t i = 0; i < actual.size(); i++) {
        SCOPED_TRACE(name + "[" + std::to_string(i) + "]");
        if (std::isnan(expected[i])) {
            EXPECT_TRUE(std::isnan(actual[i])) << actual[i];
        } else if (std::isinf(expected[i])) {
            EXPECT_EQ(actual[i], static_cast<float>(expected[i]));
        } else {
            EXPECT_NEAR(actual[i], expected[i], 1e-5 * largest + 1e-12);
        }
    }
}

TEST(RankOutsideTheLimit, IsAnErrorNamingTheTensorForAnyRank) {
    SmallProblem problem(2, 2, 1, 1);
    std::vector<float> output(1, -3.0f);
    for (int rank : {7, 1 << 26, -1}) {
        msda::ForwardArgs args = problem.forward_args(output);
        args.attention_weights.rank = rank;
        try {
            msda::forward(args);
            FAIL() << "rank " << rank << " was accepted";
        } catch (const msda::Error &error) {
            EXPECT_THAT(error.what(), HasSubstr("msda: attention_weights: rank"));
        }
    }
    // Through the C API, whose tensors carry the rank unchecked.
    std::int64_t shape[MSDA_MAX_RANK] = {1, 1, 1};
    msda_forward_args c_args = msda::testing::to_c(problem.forward_args(output));
    c_args.output = msda_contiguous(output.data(), MSDA_F32, 1 << 26, shape);
    msda_options options = msda_default_options();
    EXPECT_EQ(msda_forward(&c_args, &options), MSDA_ERROR_VALUE);
    EXPECT_THAT(msda_last_error(), HasSubstr("msda: output: rank"));
    EXPECT_EQ(output[0], -3.0f);
}

TEST(ExtentOneChannels, AnyStrideOnAChannelDimensionOfExtentOneIsAccepted) {
    // C_h = 1 and N_h * C_h = 1: the channel stride is meaningless, and
    // frameworks leave it arbitrary.
    SmallProblem problem(2, 3, 1, 2);
    problem.locations = {0.3f, 0.6f, 0.9f, 0.1f};
    problem.grad_output = {0.5f, -2.0f};
    std::vector<float> output(2, -3.0f), grad_value(6, -3.0f), grad_locations(4), grad_weights(2);
    msda::ForwardArgs forward = problem.forward_args(output);
    forward.value = msda::TensorView::strided(problem.value.data(), msda::DType::f32, {1, 6, 1, 1}, {6, 1, 1, 3});
    forward.output = msda::TensorView::strided(output.data(), msda::DType::f32, {1, 2, 1}, {2, 1, 5});
    msda::forward(forward, on_test_device());
    msda::BackwardArgs backward{forward.value,
                                forward.spatial_shapes,
                                forward.level_start_index,
                                forward.sampling_locations,
                                forward.attention_weights,
                                msda::TensorView::strided(problem.grad_output.data(), msda::DType::f32,
                                                          {1, 2, 1}, {2, 1, 7}),
                                msda::TensorView::strided(grad_value.data(), msda::DType::f32,
                                                          {1, 6, 1, 1}, {6, 1, 1, 9}),
                                msda::TensorView::contiguous(grad_locations.data(), msda::DType::f32,
                                                             {1, 2, 1, 1, 1, 2}),
                                msda::TensorView::contiguous(grad_weights.data(), msda::DType::f32,
                                                             {1, 2, 1, 1, 1})};
    msda::backward(backward, on_test_device());

    const msda::reference::Problem reference = problem.reference();
    expect_matches("output", output, msda::reference::forward(reference));
    const msda::reference::Gradients expected = msda::reference::backward(
        reference, std::vector<double>(problem.grad_output.begin(), problem.grad_output.end()));
    expect_matches("grad_value", grad_value, expected.value);
    expect_matches("grad_sampling_locations", grad_locations, expected.sampling_locations);
    expect_matches("grad_attention_weights", grad_weights, expected.attention_weights);
}

TEST(NonFiniteWeightsAndGradients, LeakNothingFromSamplesThatDoNotCount) {
    // Each query is one case; the reference decides every expected value.
    SmallProblem problem(2, 2, 2, 6);
    problem.locations = {
        kNaN, 0.5f,    // NaN location, attention Inf: contributes nothing
        5.0f, 5.0f,    // outside the zeros gate, attention NaN: nothing
        5.0f, -4.0f,   // outside the gate, grad_output Inf: zero gradients
        0.25f, 0.75f,  // a pixel centre, attention Inf: a * S = Inf
        0.6f, 0.4f,    // an ordinary sample, grad_output NaN: NaN where it reaches
        0.6f, 0.4f,    // an ordinary sample, all finite
    };
    problem.weights = {kInf, kNaN, 1.0f, kInf, 0.5f, 0.75f};
    problem.grad_output = {1.0f, 1.0f, 1.0f, 1.0f, kInf, -kInf, 1.0f, 2.0f, kNaN, 1.0f, 0.5f, 1.0f};
    // The NaN grad_output goes to its own query 4; grad_value rows it reaches
    // become NaN in the reference as well.
    std::vector<float> output(problem.queries * problem.channels, -3.0f);
    msda::ForwardArgs forward = problem.forward_args(output);
    msda::forward(forward, on_test_device());
    const msda::reference::Problem reference = problem.reference();
    expect_matches("output", output, msda::reference::forward(reference));

    std::vector<float> grad_value(problem.value.size()), grad_locations(problem.locations.size()),
        grad_weights(problem.weights.size());
    msda::BackwardArgs backward{forward.value,
                                forward.spatial_shapes,
                                forward.level_start_index,
                                forward.sampling_locations,
                                forward.attention_weights,
                                msda::TensorView::contiguous(problem.grad_output.data(), msda::DType::f32,
                                                             {1, problem.queries, problem.channels}),
                                msda::TensorView::contiguous(grad_value.data(), msda::DType::f32,
                                                             {1, 4, 1, problem.channels}),
                                msda::TensorView::contiguous(grad_locations.data(), msda::DType::f32,
                                                             {1, problem.queries, 1, 1, 1, 2}),
                                msda::TensorView::contiguous(grad_weights.data(), msda::DType::f32,
                                                             {1, problem.queries, 1, 1, 1})};
    msda::backward(backward, on_test_device());
    const msda::reference::Gradients expected = msda::reference::backward(
        reference, std::vector<double>(problem.grad_output.begin(), problem.grad_output.end()));
    expect_matches("grad_value", grad_value, expected.value);
    expect_matches("grad_sampling_locations", grad_locations, expected.sampling_locations);
    expect_matches("grad_attention_weights", grad_weights, expected.attention_weights);
    // The samples that do not count (queries 0-2) get exact zeros.
    for (int q = 0; q < 3; q++) {
        EXPECT_EQ(grad_weights[q], 0.0f) << "query " << q;
        EXPECT_EQ(grad_locations[2 * q], 0.0f) << "query " << q;
        EXPECT_EQ(grad_locations[2 * q + 1], 0.0f) << "query " << q;
    }
}

}  // namespace
