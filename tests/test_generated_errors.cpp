// Failures inside the generated code come back to the caller as msda::Error
// carrying Halide's message, never as an abort. Validation makes them
// unreachable through the public API, so this test drives the execution layer
// directly with a plan that does not fit the tensors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <msda/msda.hpp>

#include <vector>

#include "execute.h"

namespace {

using ::testing::HasSubstr;

TEST(GeneratedCodeErrors, ABufferThatBreaksTheVariantsConstraintsThrowsError) {
    // Tensors with C_h = 16, run through the variant compiled for C_h = 32.
    const std::int64_t channels = 16;
    std::vector<float> value(4 * channels, 1.0f), locations = {0.5f, 0.5f}, weights = {1.0f};
    std::vector<float> output(channels, -7.0f);
    std::int32_t shapes[2] = {2, 2}, starts[1] = {0};
    msda::ForwardArgs args;
    args.value = msda::TensorView::contiguous(value.data(), msda::DType::f32, {1, 4, 1, channels});
    args.spatial_shapes = msda::TensorView::contiguous(shapes, msda::DType::i32, {1, 2});
    args.level_start_index = msda::TensorView::contiguous(starts, msda::DType::i32, {1});
    args.sampling_locations =
        msda::TensorView::contiguous(locations.data(), msda::DType::f32, {1, 1, 1, 1, 1, 2});
    args.attention_weights =
        msda::TensorView::contiguous(weights.data(), msda::DType::f32, {1, 1, 1, 1, 1});
    args.output = msda::TensorView::contiguous(output.data(), msda::DType::f32, {1, 1, channels});
    msda::Options options;

    msda::detail::CheckedCall call = msda::detail::check_forward(args, options);
    msda::ProblemSize planned = call.size;
    planned.channels = 32;
    const msda::detail::Prepared prepared(planned, options);
    ASSERT_EQ(prepared.kernels.forward->channels, 32) << "this build has no C_h = 32 forward variant";

    try {
        msda::detail::run_forward(prepared, args, call, nullptr);
        FAIL() << "the C_h = 32 variant accepted a C_h = 16 value";
    } catch (const msda::Error &error) {
        EXPECT_THAT(error.what(), HasSubstr("generated code for forward failed"));
        EXPECT_THAT(error.what(), HasSubstr("beyond the max"));  // Halide's own bounds message
    }
    for (float x : output) EXPECT_EQ(x, -7.0f);
}

}  // namespace
