// The CUDA target (label cuda): the GPU family compiled to PTX, on the CUDA
// device Halide's CUDA runtime picks. Where there is one: the forward and
// both backward modes against the reference, the default backward's bits
// from run to run, half precision refused. Where there is none (no driver,
// no device: this machine, and CI), CudaMissing runs instead: a call fails
// saying so and writes nothing; the others report SKIPPED with the reason.
#include <gtest/gtest.h>

#include <msda/diagnostics.hpp>
#include <msda/msda.hpp>

#include <string>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

namespace {

using msda::testing::LibraryTensors;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;

#define MSDA_REQUIRE_CUDA()                                                                               \
    do {                                                                                                  \
        if (const std::string why = msda::testing::cuda_unavailable(); !why.empty()) GTEST_SKIP() << why; \
    } while (0)

// With padded strides, so the results' gaps are checked too.
ProblemSpec colliding() {
    ProblemSpec spec = msda::testing::colliding_on(msda::Device::cuda, "colliding_cuda");
    spec.padding = 1;
    return spec;
}

TEST(Cuda, BothBackwardModesMatchTheReference) {
    MSDA_REQUIRE_CUDA();
    for (const bool deterministic : {true, false}) {
        for (const bool border : {false, true}) {
            ProblemSpec spec = colliding();
            spec.options.deterministic = deterministic;
            spec.options.padding_mode = border ? msda::PaddingMode::border : msda::PaddingMode::zeros;
            spec.options.value_layout = border ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
            const ProblemData data(spec);
            SCOPED_TRACE(data.spec.describe() + (deterministic ? " deterministic" : " atomic"));
            LibraryTensors tensors(data);
            ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
            ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
            msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors));
            msda::testing::expect_nothing_written_outside_views(tensors);
        }
    }
}

// A lone head's channels, in both grad_value modes.
TEST(Cuda, LoneHeadsHoldInBothBackwardModes) {
    MSDA_REQUIRE_CUDA();
    msda::testing::expect_lone_heads_hold(msda::Device::cuda, true);
    msda::testing::expect_lone_heads_hold(msda::Device::cuda, false);
}

TEST(Cuda, TheDefaultBackwardIsBitwiseReproducible) {
    MSDA_REQUIRE_CUDA();
    const ProblemData data(colliding());
    LibraryTensors first(data);
    ASSERT_NO_THROW(msda::forward(first.forward_args(), data.spec.options));
    ASSERT_NO_THROW(msda::backward(first.backward_args(), data.spec.options));
    for (int run = 1; run < 4; ++run) {
        SCOPED_TRACE("run " + std::to_string(run));
        LibraryTensors again(data);
        ASSERT_NO_THROW(msda::forward(again.forward_args(), data.spec.options));
        ASSERT_NO_THROW(msda::backward(again.backward_args(), data.spec.options));
        msda::testing::expect_same_bits(again, first);
    }
}

TEST(Cuda, FixedPointSumsHoldAtEveryScale) {
    MSDA_REQUIRE_CUDA();
    msda::testing::expect_fixed_point_sums_hold(msda::Device::cuda);
}

TEST(Cuda, HalfPrecisionIsRefusedAndNothingIsWritten) {
    MSDA_REQUIRE_CUDA();
    msda::testing::expect_half_precision_refused(colliding(), "CUDA");
}

// No driver or no device: cuda_devices says why, and a call fails with
// that reason before anything runs.
TEST(CudaMissing, ACallFailsClearlyAndWritesNothing) {
    if (!msda::testing::cuda_built()) GTEST_SKIP() << "this build has no CUDA code (MSDA_CUDA=OFF)";
    const msda::CudaReport report = msda::cuda_devices();
    if (!report.devices.empty()) GTEST_SKIP() << "this machine has a CUDA device (" << report.devices[0].name << ")";
    EXPECT_FALSE(report.error.empty());
    const ProblemData data(colliding());
    LibraryTensors tensors(data);
    const std::vector<std::uint8_t> before = tensors.output.bytes();
    for (int call = 0; call < 2; ++call) {
        try {
            msda::forward(tensors.forward_args(), data.spec.options);
            ADD_FAILURE() << "a forward ran on CUDA without a device";
        } catch (const msda::Error &error) {
            EXPECT_EQ(std::string(error.what()), "msda: CUDA: no CUDA device to run on: " + report.error);
        }
    }
    EXPECT_EQ(tensors.output.bytes(), before);
}

}  // namespace
