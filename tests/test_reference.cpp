// The double-precision reference checked on its own: forward values computed
// by hand from SPEC.md on tiny levels, then all three gradients of the
// backward against central finite differences of the forward. Everything else
// in the test suite trusts the reference, so it is checked here first.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "msda_reference.h"

namespace {

using msda::reference::backward;
using msda::reference::forward;
using msda::reference::Gradients;
using msda::reference::Level;
using msda::reference::pixel_coordinate;
using msda::reference::Problem;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Flat offsets into the canonical layouts, written here again from the header
// rather than shared with the reference, so that a layout mistake there shows.
std::size_t value_index(const Problem &problem, std::int64_t b, std::int64_t row, std::int64_t h,
                        std::int64_t c) {
    return static_cast<std::size_t>(
        ((b * problem.value_length() + row) * problem.heads + h) * problem.channels + c);
}
std::size_t weight_index(const Problem &problem, std::int64_t b, std::int64_t q, std::int64_t h,
                         std::int64_t l, std::int64_t p) {
    const auto level_count = static_cast<std::int64_t>(problem.levels.size());
    return static_cast<std::size_t>(
        (((b * problem.queries + q) * problem.heads + h) * level_count + l) * problem.points + p);
}
std::size_t location_index(const Problem &problem, std::int64_t b, std::int64_t q, std::int64_t h,
                           std::int64_t l, std::int64_t p, int axis) {
    return 2 * weight_index(problem, b, q, h, l, p) + static_cast<std::size_t>(axis);
}
std::size_t output_index(const Problem &problem, std::int64_t b, std::int64_t q, std::int64_t h,
                         std::int64_t c) {
    // Head-major within a query: h * C_h + c.
    const std::int64_t query_row = b * problem.queries + q;
    return static_cast<std::size_t>(query_row * problem.heads * problem.channels +
                                    h * problem.channels + c);
}

// A problem with every tensor sized and zero-filled.
Problem make_problem(std::int64_t batch, std::int64_t queries, std::int64_t heads,
                     std::int64_t channels, std::int64_t points, std::vector<Level> levels) {
    Problem problem;
    problem.batch = batch;
    problem.queries = queries;
    problem.heads = heads;
    problem.channels = channels;
    problem.points = points;
    problem.levels = std::move(levels);
    const auto samples = static_cast<std::size_t>(batch * queries * heads * points *
                                                  static_cast<std::int64_t>(problem.levels.size()));
    problem.value.assign(
        static_cast<std::size_t>(batch * problem.value_length() * heads * channels), 0.0);
    problem.sampling_locations.assign(2 * samples, 0.0);
    problem.attention_weights.assign(samples, 0.0);
    return problem;
}

// One level, one head, one channel, one point with attention weight 1: the
// output is the interpolated sample itself. `pixels` is the level row-major.
Problem single_sample(Level level, std::vector<double> pixels, double u, double v,
                      bool align_corners = false, bool border = false) {
    Problem problem = make_problem(1, 1, 1, 1, 1, {level});
    problem.value = std::move(pixels);
    problem.sampling_locations = {u, v};
    problem.attention_weights = {1.0};
    problem.align_corners = align_corners;
    problem.border = border;
    return problem;
}

double sample_value(const Problem &problem) { return forward(problem).at(0); }

// The normalised location of a pixel coordinate along an axis of `size`
// pixels, for align_corners = false (the inverse of SPEC's transform).
double normalized_location(double coordinate, std::int64_t size) {
    return (coordinate + 0.5) / static_cast<double>(size);
}

// A 2x3 level whose pixel (y, x) holds 1 + 3y + x:
//   1 2 3
//   4 5 6
const Level kTwoByThree{2, 3};
const std::vector<double> kTwoByThreePixels = {1, 2, 3, 4, 5, 6};

// The float32 coordinate rounding leaves ~1e-7 px of error on these values.
constexpr double kHandTolerance = 1e-6;

// --- pixel_coordinate -------------------------------------------------------

TEST(ReferencePixelCoordinate, MapsLikeTheSpec) {
    EXPECT_EQ(pixel_coordinate(0.0, 3, false), -0.5);
    EXPECT_EQ(pixel_coordinate(0.5, 4, false), 1.5);
    EXPECT_EQ(pixel_coordinate(1.0, 3, false), 2.5);
    EXPECT_EQ(pixel_coordinate(0.0, 3, true), 0.0);
    EXPECT_EQ(pixel_coordinate(1.0, 3, true), 2.0);
    EXPECT_EQ(pixel_coordinate(0.5, 5, true), 2.0);
    EXPECT_EQ(pixel_coordinate(0.9, 1, true), 0.0);
}

TEST(ReferencePixelCoordinate, RoundsThroughFloat32) {
    // In double, 1e-9 * 1 - 0.5 is -0.499999999; in float32, 1e-9 is far
    // below half an ulp of 0.5, so the generated code gets exactly -0.5.
    EXPECT_EQ(pixel_coordinate(1e-9, 1, false), -0.5);
    // 0.1 is rounded to float, then the product, then the difference. Each
    // step is exact in double, so rounding it to float is the float32 op
    // (and no float expression here can be contracted into an FMA).
    const double location = static_cast<float>(0.1);
    const double product = static_cast<float>(location * 7.0);
    const double expected = static_cast<float>(product - 0.5);
    EXPECT_EQ(pixel_coordinate(0.1, 7, false), expected);
    EXPECT_NE(pixel_coordinate(0.1, 7, false), 0.1 * 7.0 - 0.5);
    // Every result is a float32 value.
    std::mt19937_64 random(7);
    std::uniform_real_distribution<double> location_distribution(-2.0, 2.0);
    for (int i = 0; i < 1000; i++) {
        const double coordinate = pixel_coordinate(location_distribution(random), 97, i % 2 == 0);
        EXPECT_EQ(coordinate, static_cast<double>(static_cast<float>(coordinate)));
    }
}

TEST(ReferencePixelCoordinate, FiniteLocationsCanOverflowToInfinity) {
    EXPECT_EQ(pixel_coordinate(1e39, 4, false), kInf);
    EXPECT_EQ(pixel_coordinate(-1e39, 4, true), -kInf);
}

// --- forward, by hand -------------------------------------------------------

TEST(ReferenceForward, PixelCentresReturnThePixel) {
    for (std::int64_t y = 0; y < 2; y++) {
        for (std::int64_t x = 0; x < 3; x++) {
            const Problem problem =
                single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(x, 3),
                              normalized_location(y, 2));
            EXPECT_NEAR(sample_value(problem), kTwoByThreePixels[y * 3 + x], kHandTolerance)
                << "pixel (" << y << ", " << x << ")";
        }
    }
}

TEST(ReferenceForward, MidpointsAverageTheirNeighbours) {
    // Between (0,0) and (0,1).
    EXPECT_NEAR(sample_value(single_sample(kTwoByThree, kTwoByThreePixels,
                                           normalized_location(0.5, 3), normalized_location(0, 2))),
                1.5, kHandTolerance);
    // Between (0,1) and (1,1).
    EXPECT_NEAR(sample_value(single_sample(kTwoByThree, kTwoByThreePixels,
                                           normalized_location(1, 3), normalized_location(0.5, 2))),
                3.5, kHandTolerance);
    // Centre of (0,1) (0,2) (1,1) (1,2).
    EXPECT_NEAR(
        sample_value(single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(1.5, 3),
                                   normalized_location(0.5, 2))),
        (2 + 3 + 5 + 6) / 4.0, kHandTolerance);
    // A quarter of the way: x = 0.25, y = 0.75 gives
    // (0.25 * 0.75) * 1 + (0.25 * 0.25) * 2 + (0.75 * 0.75) * 4 + (0.75 * 0.25) * 5.
    EXPECT_NEAR(
        sample_value(single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(0.25, 3),
                                   normalized_location(0.75, 2))),
        0.1875 * 1 + 0.0625 * 2 + 0.5625 * 4 + 0.1875 * 5, kHandTolerance);
}

TEST(ReferenceForward, ZerosPaddingGateDropsSamplesOutsideMinusOneToSize) {
    // x = -1.1, x = 3.1, y = -1.1, y = 2.1: all fail -1 < x < W, -1 < y < H.
    EXPECT_EQ(sample_value(single_sample(kTwoByThree, kTwoByThreePixels,
                                         normalized_location(-1.1, 3), normalized_location(0, 2))),
              0.0);
    EXPECT_EQ(sample_value(single_sample(kTwoByThree, kTwoByThreePixels,
                                         normalized_location(3.1, 3), normalized_location(0, 2))),
              0.0);
    EXPECT_EQ(sample_value(single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(1, 3),
                                         normalized_location(-1.1, 2))),
              0.0);
    EXPECT_EQ(sample_value(single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(1, 3),
                                         normalized_location(2.1, 2))),
              0.0);
    // Just inside the gate only the nearest pixel contributes, with a small weight.
    EXPECT_NEAR(
        sample_value(single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(-0.9, 3),
                                   normalized_location(0, 2))),
        0.1 * 1, kHandTolerance);
}

TEST(ReferenceForward, ZerosPaddingReadsZeroForCornersOutsideTheLevel) {
    // u = 0 is x = -0.5: corner x0 = -1 reads 0, x0 + 1 = 0 has weight 0.5.
    EXPECT_NEAR(
        sample_value(single_sample(kTwoByThree, kTwoByThreePixels, 0.0, normalized_location(0, 2))),
        0.5 * 1, kHandTolerance);
    // u = 1 is x = 2.5: only the corner x0 = 2 is inside.
    EXPECT_NEAR(
        sample_value(single_sample(kTwoByThree, kTwoByThreePixels, 1.0, normalized_location(1, 2))),
        0.5 * 6, kHandTolerance);
    // (u, v) = (0, 0): only pixel (0, 0), with weight 0.25.
    EXPECT_NEAR(sample_value(single_sample(kTwoByThree, kTwoByThreePixels, 0.0, 0.0)), 0.25 * 1,
                kHandTolerance);
    // (u, v) = (1, 1): only pixel (1, 2), with weight 0.25.
    EXPECT_NEAR(sample_value(single_sample(kTwoByThree, kTwoByThreePixels, 1.0, 1.0)), 0.25 * 6,
                kHandTolerance);
}

TEST(ReferenceForward, CornersOutsideTheLevelAreSkippedNotMultipliedByZero) {
    // x = 2 exactly on the right edge: the zero-weight corner x0 + 1 = 3 would
    // be row y*3 + 3, the next image row; a NaN there must not leak in.
    std::vector<double> pixels = kTwoByThreePixels;
    pixels[3] = kNaN;  // pixel (1, 0)
    const Problem problem =
        single_sample(kTwoByThree, pixels, normalized_location(2, 3), normalized_location(0, 2));
    EXPECT_NEAR(sample_value(problem), 3.0, kHandTolerance);

    // The last pixel of a level: corners past it would be the next level's
    // rows, which hold Inf.
    Problem two_levels = make_problem(1, 1, 1, 1, 1, {Level{1, 2}, Level{1, 2}});
    two_levels.value = {7, 8, kInf, kInf};
    two_levels.sampling_locations = {normalized_location(1, 2), normalized_location(0, 1), kNaN,
                                     kNaN};
    two_levels.attention_weights = {1.0, 1.0};
    EXPECT_NEAR(forward(two_levels).at(0), 8.0, kHandTolerance);
    two_levels.border = true;
    two_levels.sampling_locations = {5.0, 5.0, kNaN, kNaN};
    EXPECT_NEAR(forward(two_levels).at(0), 8.0, kHandTolerance);
}

TEST(ReferenceForward, BorderPaddingClampsFirst) {
    auto border_sample = [](double u, double v) {
        return sample_value(single_sample(kTwoByThree, kTwoByThreePixels, u, v, false, true));
    };
    EXPECT_NEAR(border_sample(0.0, 0.0), 1.0, kHandTolerance);   // (-0.5, -0.5) -> (0, 0)
    EXPECT_NEAR(border_sample(1.0, 1.0), 6.0, kHandTolerance);   // (2.5, 1.5) -> (2, 1)
    EXPECT_NEAR(border_sample(-5.0, 5.0), 4.0, kHandTolerance);  // -> (0, 1)
    EXPECT_NEAR(border_sample(1.2, normalized_location(0.5, 2)), 4.5, kHandTolerance);   // x -> 2
    EXPECT_NEAR(border_sample(normalized_location(0.5, 3), -3.0), 1.5, kHandTolerance);  // y -> 0
    // A finite location whose coordinate overflows still clamps.
    EXPECT_NEAR(border_sample(1e39, -1e39), 3.0, kHandTolerance);
    // ... while in zeros mode it fails the gate.
    EXPECT_EQ(sample_value(single_sample(kTwoByThree, kTwoByThreePixels, 1e39, 0.5)), 0.0);
}

TEST(ReferenceForward, AlignCornersMapsZeroAndOneToTheEdgePixels) {
    auto aligned_sample = [](double u, double v) {
        return sample_value(single_sample(kTwoByThree, kTwoByThreePixels, u, v, true, false));
    };
    EXPECT_NEAR(aligned_sample(0.0, 0.0), 1.0, kHandTolerance);
    EXPECT_NEAR(aligned_sample(1.0, 0.0), 3.0, kHandTolerance);
    EXPECT_NEAR(aligned_sample(0.0, 1.0), 4.0, kHandTolerance);
    EXPECT_NEAR(aligned_sample(1.0, 1.0), 6.0, kHandTolerance);
    EXPECT_NEAR(aligned_sample(0.5, 0.0), 2.0, kHandTolerance);
    EXPECT_NEAR(aligned_sample(0.25, 0.5), (1.5 + 4.5) / 2, kHandTolerance);
    // Past the edge, the zeros gate still applies in pixel units.
    EXPECT_NEAR(aligned_sample(1.25, 0.0), 0.5 * 3, kHandTolerance);  // x = 2.5
    EXPECT_EQ(aligned_sample(1.6, 0.0), 0.0);                         // x = 3.2
}

TEST(ReferenceForward, LevelsOneRowHigh) {
    const Level row{1, 4};
    const std::vector<double> pixels = {10, 20, 30, 40};
    // y = v - 0.5: the centre row is exact, off-centre the lone row is
    // partially weighted in zeros mode and clamped in border mode.
    EXPECT_NEAR(sample_value(single_sample(row, pixels, normalized_location(1.5, 4), 0.5)), 25.0,
                kHandTolerance);
    EXPECT_NEAR(sample_value(single_sample(row, pixels, normalized_location(1, 4), 0.25)),
                0.75 * 20, kHandTolerance);
    EXPECT_NEAR(sample_value(single_sample(row, pixels, normalized_location(1, 4), 0.75)),
                0.75 * 20, kHandTolerance);
    EXPECT_NEAR(
        sample_value(single_sample(row, pixels, normalized_location(1, 4), 0.75, false, true)),
        20.0, kHandTolerance);
    // align_corners: y = v * 0 is always row 0.
    EXPECT_NEAR(sample_value(single_sample(row, pixels, 1.0 / 3.0, 0.9, true, false)), 20.0,
                kHandTolerance);
    EXPECT_NEAR(sample_value(single_sample(row, pixels, 1.0 / 3.0, -7.0, true, false)), 20.0,
                kHandTolerance);
}

TEST(ReferenceForward, LevelsOneColumnWide) {
    const Level column{3, 1};
    const std::vector<double> pixels = {1, 2, 4};
    EXPECT_NEAR(sample_value(single_sample(column, pixels, 0.5, normalized_location(1.5, 3))), 3.0,
                kHandTolerance);
    // x = 0.4: the corner x0 + 1 = 1 is outside.
    EXPECT_NEAR(sample_value(single_sample(column, pixels, 0.9, normalized_location(2, 3))),
                0.6 * 4, kHandTolerance);
    EXPECT_NEAR(
        sample_value(single_sample(column, pixels, 0.9, normalized_location(2, 3), false, true)),
        4.0, kHandTolerance);
    EXPECT_NEAR(sample_value(single_sample(column, pixels, 0.0, 0.5, true, false)), 2.0,
                kHandTolerance);
    // align_corners on a one-pixel axis: even an overflowing location is x = 0.
    EXPECT_NEAR(sample_value(single_sample(column, pixels, 1e39, 0.5, true, true)), 2.0,
                kHandTolerance);
    // In zeros mode the same location fails the gate, as in the generated
    // code: float32 overflow gives Inf * 0 = NaN, and NaN is never inside.
    EXPECT_EQ(sample_value(single_sample(column, pixels, 1e39, 0.5, true, false)), 0.0);
}

TEST(ReferenceForward, SumsLevelsAndPointsWithAttentionWeights) {
    // Level 0 is 2x3 (pixels 1..6), level 1 is 1x2 (pixels 100, 200).
    Problem problem = make_problem(1, 1, 1, 1, 2, {kTwoByThree, Level{1, 2}});
    problem.value = {1, 2, 3, 4, 5, 6, 100, 200};
    auto place = [&](std::int64_t level, std::int64_t point, double u, double v, double weight) {
        problem.sampling_locations[location_index(problem, 0, 0, 0, level, point, 0)] = u;
        problem.sampling_locations[location_index(problem, 0, 0, 0, level, point, 1)] = v;
        problem.attention_weights[weight_index(problem, 0, 0, 0, level, point)] = weight;
    };
    place(0, 0, normalized_location(2, 3), normalized_location(1, 2), 0.5);    // pixel 6
    place(0, 1, normalized_location(0.5, 3), normalized_location(0, 2), 2.0);  // 1.5
    place(1, 0, normalized_location(0.5, 2), 0.5, -0.25);                      // 150
    place(1, 1, 2.0, 0.5, 3.0);                                                // outside: 0
    EXPECT_NEAR(forward(problem).at(0), 0.5 * 6 + 2.0 * 1.5 - 0.25 * 150 + 3.0 * 0.0,
                kHandTolerance * 100);
}

TEST(ReferenceForward, PlacesHeadsAndChannelsAtHeadTimesChannelsPlusChannel) {
    // B = 2, N_q = 2, N_h = 2, C_h = 3 on one 2x2 level. value(b, row, h, c)
    // = 1000 b + 100 row + 10 h + c, so every read is identifiable.
    Problem problem = make_problem(2, 2, 2, 3, 1, {Level{2, 2}});
    for (std::int64_t b = 0; b < 2; b++)
        for (std::int64_t row = 0; row < 4; row++)
            for (std::int64_t h = 0; h < 2; h++)
                for (std::int64_t c = 0; c < 3; c++)
                    problem.value[value_index(problem, b, row, h, c)] =
                        1000.0 * b + 100.0 * row + 10.0 * h + c;
    // Query q, head h looks at pixel row (q + 2h) % 4, weight 1 + h.
    for (std::int64_t b = 0; b < 2; b++)
        for (std::int64_t q = 0; q < 2; q++)
            for (std::int64_t h = 0; h < 2; h++) {
                const std::int64_t row = (q + 2 * h) % 4;
                problem.sampling_locations[location_index(problem, b, q, h, 0, 0, 0)] =
                    normalized_location(static_cast<double>(row % 2), 2);
                problem.sampling_locations[location_index(problem, b, q, h, 0, 0, 1)] =
                    normalized_location(static_cast<double>(row / 2), 2);
                problem.attention_weights[weight_index(problem, b, q, h, 0, 0)] = 1.0 + h;
            }
    const std::vector<double> output = forward(problem);
    ASSERT_EQ(output.size(), 2u * 2u * 6u);
    for (std::int64_t b = 0; b < 2; b++)
        for (std::int64_t q = 0; q < 2; q++)
            for (std::int64_t h = 0; h < 2; h++)
                for (std::int64_t c = 0; c < 3; c++) {
                    const std::int64_t row = (q + 2 * h) % 4;
                    const double expected = (1.0 + h) * (1000.0 * b + 100.0 * row + 10.0 * h + c);
                    EXPECT_NEAR(output[output_index(problem, b, q, h, c)], expected, 1e-3)
                        << "b " << b << " q " << q << " h " << h << " c " << c;
                }
}

TEST(ReferenceForward, EmptyBatchOrQueriesGiveEmptyOutput) {
    EXPECT_TRUE(forward(make_problem(0, 3, 2, 4, 1, {Level{2, 2}})).empty());
    const Problem no_queries = make_problem(2, 0, 2, 4, 1, {Level{2, 2}});
    EXPECT_TRUE(forward(no_queries).empty());
    const Gradients gradients = backward(no_queries, {});
    EXPECT_EQ(gradients.value, std::vector<double>(no_queries.value.size(), 0.0));
}

TEST(ReferenceBackward, RejectsGradOutputOfTheWrongSize) {
    const Problem problem = single_sample(kTwoByThree, kTwoByThreePixels, 0.5, 0.5);
    EXPECT_THROW(backward(problem, {}), std::invalid_argument);
    EXPECT_THROW(backward(problem, {1.0, 2.0}), std::invalid_argument);
}

// --- non-finite locations ---------------------------------------------------

class ReferenceNonFinite : public testing::TestWithParam<bool> {};

TEST_P(ReferenceNonFinite, ContributesNothingAndGetsZeroGradient) {
    const bool border = GetParam();
    const double non_finite[] = {kNaN, kInf, -kInf};
    for (const double bad : non_finite) {
        for (int bad_axis = 0; bad_axis < 2; bad_axis++) {
            // Point 0 is non-finite along one axis; point 1 is a normal
            // sample of pixel (0, 1) whose contribution must survive.
            Problem problem = make_problem(1, 1, 1, 2, 2, {kTwoByThree});
            for (std::int64_t row = 0; row < 6; row++)
                for (std::int64_t c = 0; c < 2; c++)
                    problem.value[value_index(problem, 0, row, 0, c)] = 1.0 + row + 10.0 * c;
            problem.border = border;
            problem.sampling_locations = {normalized_location(0.5, 3), normalized_location(0.5, 2),
                                          normalized_location(1, 3), normalized_location(0, 2)};
            problem.sampling_locations[static_cast<std::size_t>(bad_axis)] = bad;
            problem.attention_weights = {3.0, 0.5};

            const std::vector<double> output = forward(problem);
            EXPECT_NEAR(output.at(0), 0.5 * 2.0, kHandTolerance);
            EXPECT_NEAR(output.at(1), 0.5 * 12.0, kHandTolerance);

            const Gradients gradients = backward(problem, {1.0, -2.0});
            EXPECT_EQ(gradients.sampling_locations[0], 0.0);
            EXPECT_EQ(gradients.sampling_locations[1], 0.0);
            EXPECT_EQ(gradients.attention_weights[0], 0.0);
            // Only the finite sample's pixel (0, 1) receives grad_value.
            for (std::int64_t row = 0; row < 6; row++)
                for (std::int64_t c = 0; c < 2; c++) {
                    const double expected = row == 1 ? 0.5 * (c == 0 ? 1.0 : -2.0) : 0.0;
                    EXPECT_NEAR(gradients.value[value_index(problem, 0, row, 0, c)], expected,
                                kHandTolerance)
                        << "row " << row << " c " << c;
                }
            EXPECT_NEAR(gradients.attention_weights[1], 1.0 * 2.0 - 2.0 * 12.0, kHandTolerance);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Padding, ReferenceNonFinite, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool> &info) {
                             return std::string(info.param ? "Border" : "Zeros");
                         });

// --- backward, by hand ------------------------------------------------------

TEST(ReferenceBackward, LocationGradientScalesBySizeOrSizeMinusOne) {
    // On the 2x3 level dS/dx = 1 and dS/dy = 3 everywhere inside. With a = 2
    // and g = 1: grad_u = 2 * 1 * W (or W - 1), grad_v = 2 * 3 * H (or H - 1).
    for (const bool align_corners : {false, true}) {
        const double u = align_corners ? 0.3 : normalized_location(0.9, 3);
        const double v = align_corners ? 0.4 : normalized_location(0.4, 2);
        Problem problem = single_sample(kTwoByThree, kTwoByThreePixels, u, v, align_corners);
        problem.attention_weights = {2.0};
        const Gradients gradients = backward(problem, {1.0});
        EXPECT_NEAR(gradients.sampling_locations[0], 2.0 * 1.0 * (align_corners ? 2 : 3), 1e-9)
            << "align_corners " << align_corners;
        EXPECT_NEAR(gradients.sampling_locations[1], 2.0 * 3.0 * (align_corners ? 1 : 2), 1e-9)
            << "align_corners " << align_corners;
        // grad_attention_weights = <g, S> with g = 1, and the output is a * S.
        EXPECT_NEAR(2.0 * gradients.attention_weights[0], sample_value(problem), 1e-9);
    }
}

TEST(ReferenceBackward, ExactlyOnAPixelUsesTheCellToItsRight) {
    // x = 1 exactly: x0 = 1, fx = 0, so dS/dx = V(0,2) - V(0,1), not V(0,1) - V(0,0).
    std::vector<double> pixels = {1, 2, 10, 4, 5, 6};
    const Problem problem =
        single_sample(kTwoByThree, pixels, normalized_location(1, 3), normalized_location(0, 2));
    EXPECT_EQ(pixel_coordinate(problem.sampling_locations[0], 3, false), 1.0);
    EXPECT_EQ(pixel_coordinate(problem.sampling_locations[1], 2, false), 0.0);
    const Gradients gradients = backward(problem, {1.0});
    EXPECT_NEAR(gradients.sampling_locations[0], (10.0 - 2.0) * 3, 1e-9);
}

TEST(ReferenceBackward, BorderClampedCoordinatesHaveNoGradientBordersIncluded) {
    auto location_gradients = [](double u, double v) {
        const Problem problem = single_sample(kTwoByThree, kTwoByThreePixels, u, v, false, true);
        return backward(problem, {1.0}).sampling_locations;
    };
    // x = -0.5 clamped, y = 0.4 free.
    std::vector<double> clamped_x = location_gradients(0.0, normalized_location(0.4, 2));
    EXPECT_EQ(clamped_x[0], 0.0);
    EXPECT_NEAR(clamped_x[1], 3.0 * 2, 1e-9);
    // x exactly 0 and exactly W - 1 = 2: on the border counts as clamped.
    ASSERT_EQ(pixel_coordinate(normalized_location(0, 3), 3, false), 0.0);
    ASSERT_EQ(pixel_coordinate(normalized_location(2, 3), 3, false), 2.0);
    EXPECT_EQ(location_gradients(normalized_location(0, 3), normalized_location(0.4, 2))[0], 0.0);
    EXPECT_EQ(location_gradients(normalized_location(2, 3), normalized_location(0.4, 2))[0], 0.0);
    // Just inside, the gradient is back.
    EXPECT_NEAR(location_gradients(normalized_location(1.9, 3), normalized_location(0.4, 2))[0],
                3.0, 1e-9);
    // y beyond H - 1, x free.
    std::vector<double> clamped_y = location_gradients(normalized_location(0.7, 3), 1.0);
    EXPECT_NEAR(clamped_y[0], 3.0, 1e-9);
    EXPECT_EQ(clamped_y[1], 0.0);
    // In zeros mode the same edge samples do have a gradient: at x = -0.5 only
    // the corner x0 + 1 = 0 is inside, so dS/dx = V(0,0) - 0 along that row.
    const Problem zeros =
        single_sample(kTwoByThree, kTwoByThreePixels, 0.0, normalized_location(0, 2));
    EXPECT_NEAR(backward(zeros, {1.0}).sampling_locations[0], 1.0 * 3, 1e-9);
}

TEST(ReferenceBackward, ZerosGateExcludesItsEdges) {
    // x = -1 exactly (u = -0.5 / W, exact in float32) reads nothing either
    // way, but only an open gate also gives it no gradient: inside, the
    // corner x0 + 1 = 0 would make dS/dx = V(0,0).
    ASSERT_EQ(pixel_coordinate(-0.5 / 3, 3, false), -1.0);
    ASSERT_EQ(pixel_coordinate(-0.5 / 2, 2, false), -1.0);
    const Problem on_x_edge =
        single_sample(kTwoByThree, kTwoByThreePixels, -0.5 / 3, normalized_location(0.5, 2));
    EXPECT_EQ(sample_value(on_x_edge), 0.0);
    EXPECT_EQ(backward(on_x_edge, {1.0}).sampling_locations[0], 0.0);
    const Problem on_y_edge =
        single_sample(kTwoByThree, kTwoByThreePixels, normalized_location(0.5, 3), -0.5 / 2);
    EXPECT_EQ(sample_value(on_y_edge), 0.0);
    EXPECT_EQ(backward(on_y_edge, {1.0}).sampling_locations[1], 0.0);
    // A hair inside the gate, the gradient is there: dS/dx = V(0,0) at y = 0.
    const Problem inside =
        single_sample(kTwoByThree, kTwoByThreePixels, -0.49 / 3, normalized_location(0, 2));
    EXPECT_NEAR(backward(inside, {1.0}).sampling_locations[0], 1.0 * 3, 1e-9);
}

TEST(ReferenceBackward, GradValueScattersIntoInsideCornersOnly) {
    // x = -0.5, y = 0.5 (fx = fy = 0.5) with a = 2, g = 3: corners (0,-1) and
    // (1,-1) are outside; (0,0) and (1,0) each get 2 * 0.25 * 3.
    Problem problem =
        single_sample(kTwoByThree, kTwoByThreePixels, 0.0, normalized_location(0.5, 2));
    problem.attention_weights = {2.0};
    const Gradients gradients = backward(problem, {3.0});
    const std::vector<double> expected = {1.5, 0, 0, 1.5, 0, 0};
    for (std::size_t row = 0; row < 6; row++)
        EXPECT_NEAR(gradients.value[row], expected[row], 1e-9) << "row " << row;
}

// --- backward against finite differences ------------------------------------

struct FiniteDifferenceCase {
    bool align_corners;
    bool border;
    std::uint64_t seed;
};

void PrintTo(const FiniteDifferenceCase &config, std::ostream *stream) {
    *stream << "align_corners " << config.align_corners << " border " << config.border << " seed "
            << config.seed;
}

std::string case_name(const testing::TestParamInfo<FiniteDifferenceCase> &info) {
    return std::string(info.param.align_corners ? "AlignCorners" : "HalfPixel") +
           (info.param.border ? "Border" : "Zeros") + "Seed" + std::to_string(info.param.seed);
}

// Locations live on a grid of 2^-12 and the location step is 2^-10: then
// u +- step, and u * size (size < 2^6), are exact in float32, so
// pixel_coordinate's float rounding adds no error and the central difference
// of a function that is linear inside a pixel cell is exact up to double
// rounding.
constexpr double kLocationGrid = 1.0 / 4096.0;
constexpr double kLocationStep = 1.0 / 1024.0;

// A location along an axis of `size` pixels whose coordinate stays at least
// `margin` px from every integer, so from every cell edge, the zeros gate
// edges -1 and size, and the clamp edges 0 and size - 1: the forward is
// differentiable there, and a step of kLocationStep stays in one cell. About
// a third land outside [0, 1], beyond the gate or the clamp.
double differentiable_location(std::mt19937_64 &random, std::int64_t size, bool align_corners) {
    constexpr double margin = 0.05;
    std::uniform_int_distribution<int> grid_points(static_cast<int>(-0.3 / kLocationGrid),
                                                   static_cast<int>(1.3 / kLocationGrid));
    for (;;) {
        const double location = grid_points(random) * kLocationGrid;
        // A one-pixel axis with align_corners maps every location to 0: the
        // forward is constant along it and any location is fine.
        if (align_corners && size == 1) return location;
        const double coordinate = pixel_coordinate(location, size, align_corners);
        if (std::abs(coordinate - std::round(coordinate)) >= margin) return location;
    }
}

// B = 2, N_q = 3, N_h = 2, C_h = 3, N_p = 2 over a 4x5, a 1x3 and a 3x1
// level; values, weights and grad_output O(1).
struct RandomProblem {
    Problem problem;
    std::vector<double> grad_output;
};

RandomProblem random_problem(const FiniteDifferenceCase &config) {
    std::mt19937_64 random(config.seed);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    RandomProblem result;
    Problem &problem = result.problem;
    problem = make_problem(2, 3, 2, 3, 2, {Level{4, 5}, Level{1, 3}, Level{3, 1}});
    problem.align_corners = config.align_corners;
    problem.border = config.border;
    for (double &value : problem.value)
        value = unit(random);
    for (double &weight : problem.attention_weights)
        weight = unit(random);
    for (std::int64_t b = 0; b < problem.batch; b++)
        for (std::int64_t q = 0; q < problem.queries; q++)
            for (std::int64_t h = 0; h < problem.heads; h++)
                for (std::int64_t l = 0; l < 3; l++)
                    for (std::int64_t p = 0; p < problem.points; p++) {
                        const Level &level = problem.levels[static_cast<std::size_t>(l)];
                        problem.sampling_locations[location_index(problem, b, q, h, l, p, 0)] =
                            differentiable_location(random, level.width, config.align_corners);
                        problem.sampling_locations[location_index(problem, b, q, h, l, p, 1)] =
                            differentiable_location(random, level.height, config.align_corners);
                    }
    result.grad_output.resize(forward(problem).size());
    for (double &g : result.grad_output)
        g = unit(random);
    return result;
}

// <grad_output, forward(problem)>: its gradient is what backward returns.
double loss(const Problem &problem, const std::vector<double> &grad_output) {
    const std::vector<double> output = forward(problem);
    double total = 0.0;
    for (std::size_t i = 0; i < output.size(); i++)
        total += grad_output[i] * output[i];
    return total;
}

// Central difference of the loss along one element of one of the problem's
// tensors, chosen by `tensor`.
double central_difference(Problem problem, const std::vector<double> &grad_output,
                          std::vector<double> Problem::*tensor, std::size_t element, double step) {
    const double original = (problem.*tensor)[element];
    (problem.*tensor)[element] = original + step;
    const double above = loss(problem, grad_output);
    (problem.*tensor)[element] = original - step;
    const double below = loss(problem, grad_output);
    return (above - below) / (2.0 * step);
}

class ReferenceFiniteDifferences : public testing::TestWithParam<FiniteDifferenceCase> {
  protected:
    void SetUp() override {
        random_ = random_problem(GetParam());
        gradients_ = backward(random_.problem, random_.grad_output);
    }
    RandomProblem random_;
    Gradients gradients_;
};

// The loss is linear in value and in the attention weights, so their central
// differences are exact up to rounding of O(1) sums.
constexpr double kLinearTolerance = 1e-9;
constexpr double kLinearStep = 1e-3;

TEST_P(ReferenceFiniteDifferences, GradValue) {
    const Problem &problem = random_.problem;
    ASSERT_EQ(gradients_.value.size(), problem.value.size());
    int nonzero = 0;
    for (std::size_t i = 0; i < problem.value.size(); i++) {
        const double numeric =
            central_difference(problem, random_.grad_output, &Problem::value, i, kLinearStep);
        EXPECT_NEAR(gradients_.value[i], numeric, kLinearTolerance) << "value element " << i;
        nonzero += numeric != 0.0;
    }
    // Many pixels are read by some sample; a test where none were would prove little.
    EXPECT_GT(nonzero, static_cast<int>(problem.value.size()) / 4);
}

TEST_P(ReferenceFiniteDifferences, GradAttentionWeights) {
    const Problem &problem = random_.problem;
    ASSERT_EQ(gradients_.attention_weights.size(), problem.attention_weights.size());
    int nonzero = 0;
    for (std::size_t i = 0; i < problem.attention_weights.size(); i++) {
        const double numeric = central_difference(problem, random_.grad_output,
                                                  &Problem::attention_weights, i, kLinearStep);
        EXPECT_NEAR(gradients_.attention_weights[i], numeric, kLinearTolerance)
            << "attention weight " << i;
        nonzero += numeric != 0.0;
    }
    EXPECT_GT(nonzero, static_cast<int>(problem.attention_weights.size()) / 4);
}

TEST_P(ReferenceFiniteDifferences, GradSamplingLocations) {
    const Problem &problem = random_.problem;
    ASSERT_EQ(gradients_.sampling_locations.size(), problem.sampling_locations.size());
    int nonzero = 0, zero = 0;
    for (std::size_t i = 0; i < problem.sampling_locations.size(); i++) {
        const double numeric = central_difference(problem, random_.grad_output,
                                                  &Problem::sampling_locations, i, kLocationStep);
        EXPECT_NEAR(gradients_.sampling_locations[i], numeric, 1e-9 + 1e-9 * std::abs(numeric))
            << "sampling location element " << i << " (axis " << i % 2 << ")";
        (numeric != 0.0 ? nonzero : zero)++;
    }
    // Both kinds must occur: samples that move the output, and samples beyond
    // the gate or clamped (or on a constant align_corners axis).
    EXPECT_GT(nonzero, static_cast<int>(problem.sampling_locations.size()) / 4);
    EXPECT_GT(zero, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, ReferenceFiniteDifferences,
    testing::Values(FiniteDifferenceCase{false, false, 1}, FiniteDifferenceCase{false, true, 2},
                    FiniteDifferenceCase{true, false, 3}, FiniteDifferenceCase{true, true, 4},
                    FiniteDifferenceCase{false, false, 5}, FiniteDifferenceCase{true, true, 6}),
    case_name);

// The location step above is chosen so that float32 rounding vanishes; on
// arbitrary locations (not on the grid) a step of 1e-3 must still agree to
// about 1e-4 relative, the error being float32 rounding of u and x.
TEST(ReferenceFiniteDifferencesOffGrid, GradSamplingLocations) {
    for (const bool align_corners : {false, true})
        for (const bool border : {false, true}) {
            RandomProblem random = random_problem({align_corners, border, 11});
            std::mt19937_64 jitter(12);
            std::uniform_real_distribution<double> offset(-0.4 * kLocationGrid,
                                                          0.4 * kLocationGrid);
            for (double &location : random.problem.sampling_locations)
                location += offset(jitter);
            const Gradients gradients = backward(random.problem, random.grad_output);
            for (std::size_t i = 0; i < random.problem.sampling_locations.size(); i++) {
                const double numeric = central_difference(random.problem, random.grad_output,
                                                          &Problem::sampling_locations, i, 1e-3);
                EXPECT_NEAR(gradients.sampling_locations[i], numeric,
                            1e-9 + 2e-4 * std::abs(numeric))
                    << "element " << i << " align_corners " << align_corners << " border "
                    << border;
            }
        }
}

}  // namespace
