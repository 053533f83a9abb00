// What the OpenCL target adds to the suites it shares with the CPU (the
// opencl label runs those with MSDA_TEST_DEVICE=opencl): a backward with
// hundreds of contributions per grad_value row gives the same bits run after
// run; a plan's reused device buffers give the one-shot call's bits; the
// float-atomic backward matches the reference; half precision and an unknown device are refused with clear errors
// and nothing is written; without an OpenCL platform a call fails with a
// message that says so (test opencl_without_platform_is_an_error).
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core_grid.h"
#include "backends/opencl.h"
#include "test_util.h"

namespace {

using msda::testing::LibraryTensors;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

ProblemSpec colliding() { return msda::testing::colliding_on(msda::Device::opencl, "colliding_opencl"); }

TEST(OpenCl, BackwardIsBitwiseReproducible) {
    MSDA_REQUIRE_OPENCL();
    const ProblemData data(colliding());
    std::vector<std::uint8_t> first_value, first_weights, first_locations, first_output;
    for (int run = 0; run < 4; ++run) {
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
        if (run == 0) {
            first_output = tensors.output.bytes();
            first_value = tensors.grad_value.bytes();
            first_weights = tensors.grad_attention_weights.bytes();
            first_locations = tensors.grad_sampling_locations.bytes();
            ASSERT_NE(LibraryTensors(data).grad_value.bytes(), first_value);  // it wrote
            continue;
        }
        SCOPED_TRACE("run " + std::to_string(run));
        EXPECT_EQ(tensors.output.bytes(), first_output);
        EXPECT_EQ(tensors.grad_value.bytes(), first_value);
        EXPECT_EQ(tensors.grad_attention_weights.bytes(), first_weights);
        EXPECT_EQ(tensors.grad_sampling_locations.bytes(), first_locations);
    }
}

// Options::deterministic = false: grad_value by float atomics, within the
// SPEC's tolerance of the reference (its bits may change between runs).
TEST(OpenCl, AtomicBackwardMatchesTheReference) {
    MSDA_REQUIRE_OPENCL();
    for (const bool border : {false, true}) {
        ProblemSpec spec = colliding();
        spec.options.deterministic = false;
        spec.options.padding_mode = border ? msda::PaddingMode::border : msda::PaddingMode::zeros;
        spec.options.value_layout = border ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
        const ProblemData data(spec);
        SCOPED_TRACE(data.spec.describe());
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
        msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors));
    }
}

// A lone head's channels, in every grad_value mode: fixed point (the
// default), float atomics, and the serial scatter of devices without 64-bit
// integer atomics.
TEST(OpenCl, LoneHeadsHoldInEveryBackwardMode) {
    MSDA_REQUIRE_OPENCL();
    msda::testing::expect_lone_heads_hold(msda::Device::opencl, true);
    msda::testing::expect_lone_heads_hold(msda::Device::opencl, false);
    msda::detail::opencl::pretend_no_int64_atomics(true);
    msda::testing::expect_lone_heads_hold(msda::Device::opencl, true);
    msda::detail::opencl::pretend_no_int64_atomics(false);
}

// A plan for Device::opencl keeps the device buffers of its calls on host
// tensors and reuses them: each call's results, with whatever an earlier
// call left in those buffers, are the one-shot call's bits, and the
// backward's match the reference; forward and backward alternate so the
// buffers of one are the other's next time.
TEST(OpenCl, APlanReusesItsDeviceBuffersCallAfterCall) {
    MSDA_REQUIRE_OPENCL();
    ProblemSpec spec = colliding();
    spec.padding = 2;
    const ProblemData data(spec);
    LibraryTensors one_shot(data);
    ASSERT_NO_THROW(msda::forward(one_shot.forward_args(), data.spec.options));
    ASSERT_NO_THROW(msda::backward(one_shot.backward_args(), data.spec.options));
    const msda::Plan plan(msda::ProblemSize::of(one_shot.forward_args(), data.spec.options), data.spec.options);
    for (int run = 0; run < 3; ++run) {
        SCOPED_TRACE("run " + std::to_string(run));
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(plan.forward(tensors.forward_args()));
        ASSERT_NO_THROW(plan.backward(tensors.backward_args()));
        msda::testing::expect_same_bits(tensors, one_shot);
        msda::testing::expect_nothing_written_outside_views(tensors);
        if (run == 0) msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors));
    }
}

TEST(OpenCl, FixedPointSumsHoldAtEveryScale) {
    MSDA_REQUIRE_OPENCL();
    msda::testing::expect_fixed_point_sums_hold(msda::Device::opencl);
}

// A device without 64-bit integer atomics (cl_khr_int64_base_atomics)
// gets the serial deterministic scatter: the reference's results, the same
// bits run to run.
TEST(OpenCl, DevicesWithoutInt64AtomicsGetTheSerialScatter) {
    MSDA_REQUIRE_OPENCL();
    msda::detail::opencl::pretend_no_int64_atomics(true);
    const ProblemData data(colliding());
    std::vector<std::uint8_t> first;
    for (int run = 0; run < 2; ++run) {
        LibraryTensors tensors(data);
        EXPECT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
        EXPECT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
        if (run == 0) {
            msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors));
            first = tensors.grad_value.bytes();
        } else {
            EXPECT_EQ(tensors.grad_value.bytes(), first);
        }
    }
    msda::detail::opencl::pretend_no_int64_atomics(false);
}

TEST(OpenCl, HalfPrecisionIsRefusedAndNothingIsWritten) {
    MSDA_REQUIRE_OPENCL();
    msda::testing::expect_half_precision_refused(colliding(), "OpenCL");
}

// A device without float64 arithmetic (no cl_khr_fp64) refuses a float64
// call with a TypeError naming value and the extension, and writes nothing.
// (The float64 cases themselves run under the opencl label:
// test_double_precision.)
TEST(OpenCl, ADeviceWithoutFloat64RefusesIt) {
    MSDA_REQUIRE_OPENCL();
    std::vector<double> value(8, 0.5), locations = {0.25, 0.75}, weights = {1.0}, output = {-1.0, -1.0};
    std::vector<std::int32_t> shapes = {2, 2}, starts = {0};
    msda::ForwardArgs args;
    args.value = msda::TensorView::contiguous(value.data(), msda::DType::f64, {1, 4, 1, 2});
    args.spatial_shapes = msda::TensorView::contiguous(shapes.data(), msda::DType::i32, {1, 2});
    args.level_start_index = msda::TensorView::contiguous(starts.data(), msda::DType::i32, {1});
    args.sampling_locations = msda::TensorView::contiguous(locations.data(), msda::DType::f64, {1, 1, 1, 1, 1, 2});
    args.attention_weights = msda::TensorView::contiguous(weights.data(), msda::DType::f64, {1, 1, 1, 1, 1});
    args.output = msda::TensorView::contiguous(output.data(), msda::DType::f64, {1, 1, 2});
    msda::Options options;
    options.device = msda::Device::opencl;
    msda::detail::opencl::pretend_no_fp64(true);
    try {
        msda::forward(args, options);
        ADD_FAILURE() << "a float64 call ran on a device without cl_khr_fp64";
    } catch (const msda::TypeError &error) {
        const std::string message = error.what();
        EXPECT_NE(message.find("msda: value: float64 storage"), std::string::npos) << message;
        EXPECT_NE(message.find("cl_khr_fp64"), std::string::npos) << message;
    }
    msda::detail::opencl::pretend_no_fp64(false);
    EXPECT_EQ(output, (std::vector<double>{-1.0, -1.0}));
}

TEST(OpenCl, AnUnknownDeviceIsRefused) {
    const ProblemData data(colliding());
    LibraryTensors tensors(data);
    msda::Options options = data.spec.options;
    options.device = static_cast<msda::Device>(7);
    try {
        msda::forward(tensors.forward_args(), options);
        ADD_FAILURE() << "device 7 accepted";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find("device must be cpu, opencl or cuda"), std::string::npos) << error.what();
    }
}

// Run with OCL_ICD_VENDORS pointing nowhere (tests/opencl.cmake): the ICD
// loader finds no platform, msda_opencl_devices says so, and a call fails
// saying so (Halide's OpenCL error and the loader's reason) instead of
// crashing or writing output.
TEST(OpenClMissing, ACallFailsClearly) {
    if (std::getenv("MSDA_EXPECT_NO_OPENCL") == nullptr) GTEST_SKIP() << "run by opencl_without_platform_is_an_error";
    const msda::OpenClReport report = msda::opencl_devices();
    EXPECT_TRUE(report.devices.empty());
    EXPECT_FALSE(report.error.empty());
    if (!msda::testing::opencl_built()) GTEST_SKIP() << "this build has no OpenCL code (MSDA_OPENCL=OFF)";
    const ProblemData data(colliding());
    LibraryTensors tensors(data);
    const std::vector<std::uint8_t> before = tensors.output.bytes();
    try {
        msda::forward(tensors.forward_args(), data.spec.options);
        ADD_FAILURE() << "a forward ran on OpenCL without a platform";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find("msda: OpenCL: no OpenCL device to run on"), std::string::npos)
            << error.what();
        EXPECT_NE(std::string(error.what()).find("found no platform"), std::string::npos) << error.what();
    }
    EXPECT_EQ(tensors.output.bytes(), before);
}

}  // namespace
