// The core grid of problems that the generated code is held to the double
// reference on (test_forward_backward for float32, test_half_precision for
// the half-precision dtypes).
//
// The grid pairs axes instead of multiplying them out: every problem shape
// meets every kind of sampling location, and the four option flags (value
// layout, locations layout, align_corners, padding_mode) and the two index
// dtypes rotate through all their combinations across the cases.
#pragma once

#include <array>
#include <limits>
#include <cmath>
#include <string>
#include <vector>

#include "test_util.h"

namespace msda::testing {

using Level = msda::reference::Level;

// Sizes of one problem; options and locations come from the rotation.
struct Shape {
    const char *name;
    std::int64_t batch, queries, heads, channels, points;
    std::vector<Level> levels;
    std::int64_t padding;
};

// Every C_h of the brief (32 and 64 run compile-time-specialised code, the
// rest the generic code), single heads of C_h 1, 3, 17, 71 and 1025, levels
// with H or W = 1, 6 and 17 levels, up to 18 points, N_q in {0, 1, 300}, B
// in {0, 1, 3}, and padded strides on the outer dimensions of every tensor.
inline const std::vector<Shape> &shapes() {
    // clang-format off
    static const std::vector<Shape> all = {
        {"c1_one_pixel", 1, 1, 1, 1, 1, {{1, 1}}, 0},
        {"c3_lines", 3, 7, 2, 3, 2, {{1, 5}, {4, 1}, {1, 1}}, 0},
        {"c8_pyramid_q300", 1, 300, 2, 8, 4, {{8, 8}, {4, 4}, {2, 2}, {1, 1}}, 0},
        {"c17_p17_padded", 3, 33, 3, 17, 17, {{6, 7}, {3, 3}}, 2},
        {"c32_detr_q300", 2, 300, 4, 32, 4, {{16, 16}, {8, 8}, {4, 4}, {2, 2}}, 0},
        {"c64_six_levels_padded", 1, 45, 2, 64, 3, {{9, 5}, {5, 3}, {3, 2}, {2, 1}, {1, 1}, {1, 4}}, 3},
        {"c256", 1, 20, 1, 256, 2, {{4, 8}, {2, 3}}, 0},
        {"c32_b3_q1_padded", 3, 1, 2, 32, 5, {{5, 3}, {3, 5}, {1, 2}}, 5},
        {"c64_b3_q1", 3, 1, 1, 64, 1, {{2, 2}}, 0},
        {"c17_six_levels_p17_q300", 1, 300, 2, 17, 17, {{4, 4}, {2, 8}, {8, 2}, {1, 1}, {3, 3}, {1, 16}}, 0},
        {"c256_padded", 2, 9, 2, 256, 3, {{3, 4}, {2, 2}}, 1},
        // No caps: more heads, levels and points than the vendors' 16.
        {"c3_h17_l17_p18", 1, 5, 17, 3, 18,
         {{1, 1}, {1, 2}, {2, 1}, {2, 2}, {1, 3}, {3, 1}, {2, 3}, {3, 2}, {3, 3},
          {1, 4}, {4, 1}, {2, 4}, {4, 2}, {1, 5}, {5, 1}, {1, 1}, {2, 2}}, 0},
        {"c32_no_queries", 2, 0, 2, 32, 4, {{4, 4}, {2, 2}}, 0},
        {"c8_no_batch", 0, 10, 2, 8, 2, {{3, 3}}, 0},
        {"c3_nothing", 0, 0, 1, 3, 1, {{2, 2}}, 0},
        // One head whose C_h is a multiple of no tile (the GPU family's
        // blocks of 32 channels read past the last channel here, where no
        // next head's channels lie beyond it), many levels and points.
        {"c3_one_head_l7p9", 2, 9, 1, 3, 9, {{3, 4}, {1, 6}, {5, 1}, {2, 2}, {1, 1}, {4, 3}, {2, 5}}, 1},
        {"c17_one_head_l5p6", 1, 13, 1, 17, 6, {{6, 5}, {3, 3}, {2, 1}, {1, 2}, {1, 1}}, 0},
        {"c71_one_head_padded", 2, 21, 1, 71, 5, {{5, 4}, {3, 2}, {1, 3}, {2, 2}}, 2},
        {"c1025_one_head", 1, 6, 1, 1025, 3, {{3, 3}, {2, 1}, {1, 2}}, 0},
    };
    // clang-format on
    return all;
}

inline constexpr std::array<Locations, 6> kLocationKinds = {Locations::inside,        Locations::outside,
                                                     Locations::pixel_centres, Locations::gate_boundary,
                                                     Locations::non_finite,    Locations::far_outside};

// The 16 combinations of the four option flags, by index (bit 0: value
// layout, 1: locations layout, 2: align_corners, 3: padding_mode).
inline msda::Options options_for(int combination) {
    msda::Options options;
    options.device = test_device();
    options.value_layout = (combination & 1) ? msda::ValueLayout::BNLC : msda::ValueLayout::BLNC;
    options.locations_layout =
        (combination & 2) ? msda::LocationsLayout::B2QHLP : msda::LocationsLayout::BQHLP2;
    options.align_corners = (combination & 4) != 0;
    options.padding_mode = (combination & 8) ? msda::PaddingMode::border : msda::PaddingMode::zeros;
    return options;
}

inline int combination_of(const msda::Options &options) {
    return (options.value_layout == msda::ValueLayout::BNLC ? 1 : 0) |
           (options.locations_layout == msda::LocationsLayout::B2QHLP ? 2 : 0) |
           (options.align_corners ? 4 : 0) | (options.padding_mode == msda::PaddingMode::border ? 8 : 0);
}

inline std::vector<ProblemSpec> grid() {
    std::vector<ProblemSpec> cases;
    int index = 0;
    for (std::size_t s = 0; s < shapes().size(); s++) {
        const Shape &shape = shapes()[s];
        for (std::size_t k = 0; k < kLocationKinds.size(); k++, index++) {
            ProblemSpec spec;
            spec.name = std::string(shape.name) + "_" + msda::testing::locations_name(kLocationKinds[k]);
            spec.batch = shape.batch;
            spec.queries = shape.queries;
            spec.heads = shape.heads;
            spec.channels = shape.channels;
            spec.points = shape.points;
            spec.levels = shape.levels;
            spec.padding = shape.padding;
            spec.locations = kLocationKinds[k];
            // 3 * shape + kind: every kind of location meets every value of
            // every pair of flags, and all 16 combinations occur.
            spec.options = options_for(static_cast<int>(3 * s + k) % 16);
            spec.shapes_dtype = (index / 2) % 2 ? msda::DType::i64 : msda::DType::i32;
            spec.start_dtype = (index / 3) % 2 ? msda::DType::i64 : msda::DType::i32;
            spec.seed = 1000 + index;
            cases.push_back(spec);
        }
    }
    return cases;
}

// What one library run produced, canonical order, plus the raw storage for
// bitwise comparisons.
struct LibraryResults {
    std::vector<float> output, grad_value, grad_sampling_locations, grad_attention_weights;
};

inline LibraryResults canonical_results(const LibraryTensors &tensors) {
    return {tensors.output.canonical(), tensors.grad_value.canonical(),
            tensors.grad_sampling_locations.canonical(), tensors.grad_attention_weights.canonical()};
}

// Every output of two runs of one problem, compared as stored.
inline void expect_same_bits(const LibraryTensors &a, const LibraryTensors &b) {
    EXPECT_TRUE(bitwise_equal("output", a.output.bytes(), b.output.bytes()));
    EXPECT_TRUE(bitwise_equal("grad_value", a.grad_value.bytes(), b.grad_value.bytes()));
    EXPECT_TRUE(bitwise_equal("grad_sampling_locations", a.grad_sampling_locations.bytes(),
                              b.grad_sampling_locations.bytes()));
    EXPECT_TRUE(bitwise_equal("grad_attention_weights", a.grad_attention_weights.bytes(),
                              b.grad_attention_weights.bytes()));
}

// The gaps of padded strides and the guard bands around every view still
// hold the sentinel: nothing was read-modified-written outside a tensor.
inline void expect_nothing_written_outside_views(const LibraryTensors &tensors) {
    EXPECT_TRUE(tensors.output.outside_view_holds(kSentinel)) << "output";
    EXPECT_TRUE(tensors.grad_value.outside_view_holds(kSentinel)) << "grad_value";
    EXPECT_TRUE(tensors.grad_sampling_locations.outside_view_holds(kSentinel)) << "grad_sampling_locations";
    EXPECT_TRUE(tensors.grad_attention_weights.outside_view_holds(kSentinel)) << "grad_attention_weights";
}

// Inputs are read-only: bit for bit what was stored, gaps untouched. (Their
// gaps hold NaN, so a read outside a view would also show in the results.)
inline void expect_inputs_unchanged(const LibraryTensors &tensors, const ProblemData &data) {
    EXPECT_TRUE(bitwise_equal("value", tensors.value.canonical(), data.value));
    EXPECT_TRUE(
        bitwise_equal("sampling_locations", tensors.sampling_locations.canonical(), data.sampling_locations));
    EXPECT_TRUE(
        bitwise_equal("attention_weights", tensors.attention_weights.canonical(), data.attention_weights));
    EXPECT_TRUE(bitwise_equal("grad_output", tensors.grad_output.canonical(), data.grad_output));
    EXPECT_TRUE(tensors.value.outside_view_holds(kPoison)) << "value";
    EXPECT_TRUE(tensors.sampling_locations.outside_view_holds(kPoison)) << "sampling_locations";
    EXPECT_TRUE(tensors.attention_weights.outside_view_holds(kPoison)) << "attention_weights";
    EXPECT_TRUE(tensors.grad_output.outside_view_holds(kPoison)) << "grad_output";
}

// tolerance: SPEC's relative error for the storage dtype. A float16 tensor
// is also allowed half of float16's smallest spacing (2^-25, its rounding
// error below 2^-14): a tensor whose largest value is under about 1e-5
// cannot be held to 5e-3 of it by any float16 result.
inline void expect_matches_reference(const ProblemData &data, const LibraryResults &results,
                                     double tolerance = 1e-5) {
    const msda::DType dtype = data.spec.dtype, locations = data.spec.locations_dtype;
    const double floor = dtype == msda::DType::f16 ? std::ldexp(1.0, -25) : 0.0;
    const double locations_floor = locations == msda::DType::f16 ? std::ldexp(1.0, -25) : 0.0;
    const msda::reference::Problem problem = data.reference_problem();
    const std::vector<double> output = msda::reference::forward(problem);
    const msda::reference::Gradients gradients =
        msda::reference::backward(problem, data.grad_output_double());
    EXPECT_TRUE(matches_reference("output", results.output, output, tolerance, floor));
    EXPECT_TRUE(matches_reference("grad_value", results.grad_value, gradients.value, tolerance, floor));
    EXPECT_TRUE(matches_reference("grad_sampling_locations", results.grad_sampling_locations,
                                  gradients.sampling_locations, tolerance, locations_floor));
    EXPECT_TRUE(matches_reference("grad_attention_weights", results.grad_attention_weights,
                                  gradients.attention_weights, tolerance, floor));
}

// The GPU families' colliding problem: hundreds of contributions per
// grad_value row (10 value rows per (batch, head)), samples outside the
// maps, every call on `device`.
inline ProblemSpec colliding_on(msda::Device device, const std::string &name) {
    ProblemSpec spec;
    spec.name = name;
    spec.batch = 2;
    spec.queries = 300;
    spec.heads = 4;
    spec.channels = 19;
    spec.points = 4;
    spec.levels = {{2, 2}, {1, 3}, {3, 1}};
    spec.locations = Locations::outside;
    spec.options.device = device;
    return spec;
}

// The GPU family's deterministic grad_value is summed in fixed point, each
// contribution scaled by a power of two chosen per call from the largest
// one a counting sample can make: held to the reference where the
// contributions are all tiny (scales past 2^127), spread over sixty orders
// of magnitude (negative scales), and where samples that do not count (NaN
// locations) carry huge attention weights, which must not set the scale.
inline void expect_fixed_point_sums_hold(msda::Device device) {
    const char *cases[] = {"tiny", "spread", "huge_weights_that_do_not_count"};
    for (int c = 0; c < 3; ++c) {
        ProblemSpec spec = colliding_on(device, std::string("fixed_point_") + cases[c]);
        spec.seed = 71 + c;
        spec.locations = Locations::inside;
        ProblemData data(spec);
        for (std::size_t i = 0; i < data.attention_weights.size(); ++i) {
            float &a = data.attention_weights[i];
            if (c == 0) a *= 1e-30f;
            if (c == 1) a *= std::pow(10.0f, static_cast<float>(static_cast<int>(i % 61) - 30));
            if (c == 2 && i % 7 == 0) {
                a = 3e38f;
                data.sampling_locations[2 * i] = std::numeric_limits<float>::quiet_NaN();
            }
        }
        if (c == 0) {
            for (float &g : data.grad_output) g *= 1e-5f;
        }
        SCOPED_TRACE(data.spec.describe());
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
        expect_matches_reference(data, canonical_results(tensors));
    }
}

// One head of a C_h that is a multiple of no tile of the GPU family's (1,
// 3, 17, 71, 1025), through both value layouts, both locations layouts,
// align_corners and both padding modes, on `device` with grad_value summed
// `deterministic`ally or by atomics: the reference's results, nothing
// written outside the views. (grad_value's fixed-point sums asked for a
// whole block of 32 channels past a lone head's last one, and failed
// Halide's bounds check.)
inline void expect_lone_heads_hold(msda::Device device, bool deterministic) {
    for (const std::int64_t channels : {1, 3, 17, 71, 1025}) {
        for (const int combination : {0, 1 | 4, 2 | 8, 1 | 2 | 4 | 8}) {
            ProblemSpec spec;
            spec.name = "lone_head_c" + std::to_string(channels);
            spec.batch = 2;
            spec.queries = 9;
            spec.heads = 1;
            spec.channels = channels;
            spec.points = 3;
            spec.levels = {{4, 5}, {2, 3}, {1, 1}};
            spec.padding = 1;
            spec.locations = combination % 2 ? Locations::outside : Locations::inside;
            spec.options = options_for(combination);
            spec.options.device = device;
            spec.options.deterministic = deterministic;
            spec.seed = static_cast<std::uint64_t>(500 + 16 * channels + combination);
            const ProblemData data(spec);
            SCOPED_TRACE(data.spec.describe() + (deterministic ? " deterministic" : " atomic"));
            LibraryTensors tensors(data);
            ASSERT_NO_THROW(msda::forward(tensors.forward_args(), data.spec.options));
            ASSERT_NO_THROW(msda::backward(tensors.backward_args(), data.spec.options));
            expect_matches_reference(data, canonical_results(tensors));
            expect_nothing_written_outside_views(tensors);
        }
    }
}

// A GPU family (spec.options.device) refuses half-precision storage with
// its message ("the OpenCL code computes float32 storage ..."), and writes
// nothing.
inline void expect_half_precision_refused(ProblemSpec spec, const std::string &family) {
    for (const msda::DType dtype : {msda::DType::f16, msda::DType::bf16}) {
        spec.dtype = dtype;
        const ProblemData data(spec);
        LibraryTensors tensors(data);
        const std::vector<std::uint8_t> before = tensors.output.bytes();
        try {
            msda::forward(tensors.forward_args(), data.spec.options);
            ADD_FAILURE() << msda::dtype_name(dtype) << " accepted";
        } catch (const msda::Error &error) {
            EXPECT_NE(std::string(error.what()).find("the " + family + " code computes float32 storage"),
                      std::string::npos)
                << error.what();
        }
        EXPECT_EQ(tensors.output.bytes(), before);
    }
}

}  // namespace msda::testing
