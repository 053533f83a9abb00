// GKA (SPEC: GKA) against its double reference (reference/gka_reference):
// the core grid's shapes, layouts and index dtypes, with absolute pixel
// coordinates that are integers, exact ties (k + 0.5), fractions, out of
// range on both sides, NaN and +-Inf, and huge; both roundings; float32 and
// the half-precision dtypes. Also: forward and backward read and write the
// same row, bitwise determinism, and the errors GKA adds.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core_grid.h"
#include "gka_reference.h"
#include "test_util.h"

namespace {

using msda::DType;
using msda::testing::bitwise_equal;
using msda::testing::canonical_results;
using msda::testing::expect_inputs_unchanged;
using msda::testing::kSentinel;
using msda::testing::LibraryResults;
using msda::testing::LibraryTensors;
using msda::testing::matches_reference;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using msda::testing::Random;
using msda::reference::GkaRounding;

enum class Coordinates { integer, tie, fraction, outside, non_finite, huge };
constexpr Coordinates kCoordinateKinds[] = {Coordinates::integer,   Coordinates::tie,        Coordinates::fraction,
                                            Coordinates::outside,   Coordinates::non_finite, Coordinates::huge};

const char *coordinates_name(Coordinates kind) {
    switch (kind) {
        case Coordinates::integer: return "integer";
        case Coordinates::tie: return "tie";
        case Coordinates::fraction: return "fraction";
        case Coordinates::outside: return "outside";
        case Coordinates::non_finite: return "non_finite";
        case Coordinates::huge: return "huge";
    }
    return "?";
}

// One pixel coordinate along an axis of `size` pixels.
float draw(Random &random, Coordinates kind, std::int64_t size) {
    const float extent = static_cast<float>(size);
    switch (kind) {
        case Coordinates::integer: return static_cast<float>(random.integer(0, size - 1));
        case Coordinates::tie: return static_cast<float>(random.integer(-1, size - 1)) + 0.5f;
        case Coordinates::fraction: return random.uniform(0.0f, extent);
        case Coordinates::outside: return random.uniform(-extent - 2.0f, 2.0f * extent + 2.0f);
        case Coordinates::non_finite: {
            const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                                      -std::numeric_limits<float>::infinity()};
            return random.integer(0, 2) == 0 ? specials[random.integer(0, 2)] : random.uniform(-1.0f, extent);
        }
        case Coordinates::huge: {
            const float far[] = {3e9f, -3e9f, 1e30f, -1e30f, std::numeric_limits<float>::max(),
                                 -std::numeric_limits<float>::max(), 16777217.0f, -16777217.0f};
            return random.integer(0, 1) ? far[random.integer(0, 7)] : random.uniform(-1.0f, extent);
        }
    }
    return 0.0f;
}

struct GkaCase {
    ProblemSpec spec;
    Coordinates coordinates = Coordinates::fraction;
    msda::Rounding rounding = msda::Rounding::floor;
    std::string name;
};

void PrintTo(const GkaCase &c, std::ostream *out) { *out << c.name << ": " << c.spec.describe(); }

// The problem's inputs, with absolute pixel coordinates of the case's kind
// (rounded to the locations' storage dtype, as the library will see them).
ProblemData gka_data(const GkaCase &c) {
    ProblemData data(c.spec);
    Random random(c.spec.seed + 7);
    const std::int64_t levels = static_cast<std::int64_t>(c.spec.levels.size());
    for (std::int64_t sample = 0; sample < c.spec.samples(); sample++) {
        const auto &level = c.spec.levels[(sample / c.spec.points) % levels];
        data.sampling_locations[2 * sample] = draw(random, c.coordinates, level.width);
        data.sampling_locations[2 * sample + 1] = draw(random, c.coordinates, level.height);
    }
    data.sampling_locations = msda::testing::stored(std::move(data.sampling_locations), c.spec.locations_dtype);
    return data;
}

msda::Options gka_options(const GkaCase &c) {
    msda::Options options = c.spec.options;  // layouts; align_corners and padding do not apply
    options.op = msda::Operator::gka;
    options.rounding = c.rounding;
    return options;
}

GkaRounding reference_rounding(msda::Rounding rounding) {
    return rounding == msda::Rounding::nearest ? GkaRounding::nearest : GkaRounding::floor;
}

// Backward arguments without the location gradient GKA does not have.
msda::BackwardArgs gka_backward_args(const LibraryTensors &tensors) {
    msda::BackwardArgs args = tensors.backward_args();
    args.grad_sampling_locations = {};
    return args;
}

double tolerance(DType dtype) { return dtype == DType::f32 ? 1e-5 : dtype == DType::f16 ? 5e-3 : 2e-2; }

std::vector<GkaCase> gka_grid() {
    std::vector<GkaCase> cases;
    int index = 0;
    for (ProblemSpec spec : msda::testing::grid()) {
        // grid() pairs each shape with six location kinds; GKA pairs the
        // same shapes with its six coordinate kinds.
        GkaCase c;
        c.coordinates = kCoordinateKinds[index % 6];
        c.rounding = (index / 6 + index) % 2 ? msda::Rounding::nearest : msda::Rounding::floor;
        // Every fifth case in a half-precision dtype, locations alternating
        // between float32 and the same dtype.
        if (index % 5 == 2) {
            spec.dtype = (index / 5) % 2 ? DType::bf16 : DType::f16;
            spec.locations_dtype = (index / 10) % 2 ? spec.dtype : DType::f32;
        }
        c.name = spec.name + "_" + coordinates_name(c.coordinates) +
                 (c.rounding == msda::Rounding::nearest ? "_nearest" : "_floor") + "_" +
                 msda::dtype_name(spec.dtype) + "_locations_" + msda::dtype_name(spec.locations_dtype);
        c.spec = spec;
        cases.push_back(c);
        index++;
    }
    return cases;
}

class GkaGrid : public ::testing::TestWithParam<GkaCase> {};

TEST_P(GkaGrid, MatchesReference) {
    const GkaCase &c = GetParam();
    SCOPED_TRACE(c.name + ": " + c.spec.describe());
    const ProblemData data = gka_data(c);
    LibraryTensors tensors(data);
    const msda::Options options = gka_options(c);
    ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
    ASSERT_NO_THROW(msda::backward(gka_backward_args(tensors), options));

    const msda::reference::Problem problem = data.reference_problem();
    const GkaRounding rounding = reference_rounding(c.rounding);
    const std::vector<double> output = msda::reference::gka_forward(problem, rounding);
    const msda::reference::GkaGradients grads =
        msda::reference::gka_backward(problem, data.grad_output_double(), rounding);
    const LibraryResults results = canonical_results(tensors);
    const double relative = tolerance(c.spec.dtype);
    const double floor = c.spec.dtype == DType::f16 ? std::ldexp(1.0, -25) : 0.0;
    EXPECT_TRUE(matches_reference("output", results.output, output, relative, floor));
    EXPECT_TRUE(matches_reference("grad_value", results.grad_value, grads.value, relative, floor));
    EXPECT_TRUE(matches_reference("grad_attention_weights", results.grad_attention_weights, grads.attention_weights,
                                  relative, floor));
    // No location gradient: its tensor was not passed and is untouched.
    EXPECT_TRUE(tensors.grad_sampling_locations.all_hold(kSentinel));
    EXPECT_TRUE(tensors.output.outside_view_holds(kSentinel));
    EXPECT_TRUE(tensors.grad_value.outside_view_holds(kSentinel));
    EXPECT_TRUE(tensors.grad_attention_weights.outside_view_holds(kSentinel));
    expect_inputs_unchanged(tensors, data);
}

INSTANTIATE_TEST_SUITE_P(Grid, GkaGrid, ::testing::ValuesIn(gka_grid()),
                         [](const ::testing::TestParamInfo<GkaCase> &info) { return info.param.name; });

// ----------------------------------------------------------------------------

ProblemSpec small_spec() {
    ProblemSpec spec;
    spec.name = "gka_small";
    spec.batch = 2;
    spec.queries = 30;
    spec.heads = 3;
    spec.channels = 32;
    spec.points = 4;
    spec.levels = {{7, 5}, {3, 4}, {2, 2}};
    spec.seed = 91;
    return spec;
}

// The vendor's forward truncates while its backward rounds to nearest; here
// both read the same row. Every value row holds its own index in channel 0
// and the weights are 1, so the forward's output names the row each sample
// read; with grad_output 1, the backward's grad_value must be nonzero
// exactly at those rows.
TEST(Gka, ForwardAndBackwardUseTheSameRow) {
    for (msda::Rounding rounding : {msda::Rounding::floor, msda::Rounding::nearest}) {
        SCOPED_TRACE(rounding == msda::Rounding::nearest ? "nearest" : "floor");
        ProblemSpec spec = small_spec();
        spec.batch = 1;
        spec.heads = 1;
        spec.channels = 1;
        spec.points = 1;
        spec.queries = 200;
        spec.levels = {{9, 11}};
        GkaCase c{spec, Coordinates::tie, rounding, "same_row"};
        ProblemData data = gka_data(c);
        for (std::size_t row = 0; row < data.value.size(); row++) data.value[row] = static_cast<float>(row);
        std::fill(data.attention_weights.begin(), data.attention_weights.end(), 1.0f);
        std::fill(data.grad_output.begin(), data.grad_output.end(), 1.0f);
        LibraryTensors tensors(data);
        const msda::Options options = gka_options(c);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
        ASSERT_NO_THROW(msda::backward(gka_backward_args(tensors), options));
        const std::vector<float> read = tensors.output.canonical();
        const std::vector<float> scattered = tensors.grad_value.canonical();
        std::vector<float> expected(scattered.size(), 0.0f);
        for (float row : read) expected.at(static_cast<std::size_t>(row)) += 1.0f;
        EXPECT_TRUE(bitwise_equal("grad_value", scattered, expected));
    }
}

// Ties go to the even neighbour with `nearest`, down with `floor`; out of
// range and infinite coordinates clamp; NaN reads nothing.
TEST(Gka, RoundingAndClampingOfSingleSamples) {
    struct Probe {
        float x;
        float expected_floor, expected_nearest;  // the row read, -1 for none
    };
    const float inf = std::numeric_limits<float>::infinity();
    const Probe probes[] = {{0.5f, 0, 0},  {1.5f, 1, 2},   {2.5f, 2, 2},     {2.49f, 2, 2}, {2.51f, 2, 3},
                            {-0.5f, 0, 0}, {-7.0f, 0, 0},  {9.5f, 5, 5},     {inf, 5, 5},   {-inf, 0, 0},
                            {4.999f, 4, 5}, {5.0f, 5, 5}, {std::nanf(""), -1, -1}};
    for (const Probe &probe : probes) {
        for (msda::Rounding rounding : {msda::Rounding::floor, msda::Rounding::nearest}) {
            SCOPED_TRACE(::testing::Message() << "x = " << probe.x << ", "
                                              << (rounding == msda::Rounding::nearest ? "nearest" : "floor"));
            ProblemSpec spec = small_spec();
            spec.batch = spec.queries = spec.heads = spec.channels = spec.points = 1;
            spec.levels = {{1, 6}};
            ProblemData data(spec);
            data.sampling_locations = {probe.x, 0.0f};
            data.value = {10.0f, 11.0f, 12.0f, 13.0f, 14.0f, 15.0f};
            data.attention_weights = {1.0f};
            LibraryTensors tensors(data);
            msda::Options options;
            options.op = msda::Operator::gka;
            options.rounding = rounding;
            ASSERT_NO_THROW(msda::forward(tensors.forward_args(), options));
            const float column = rounding == msda::Rounding::nearest ? probe.expected_nearest : probe.expected_floor;
            EXPECT_EQ(tensors.output.canonical().at(0), column < 0 ? 0.0f : 10.0f + column);
        }
    }
}

// Bitwise the same for 1, 2 and the default number of threads, repeated.
TEST(Gka, BackwardIsDeterministic) {
    const ProblemSpec spec = small_spec();
    GkaCase c{spec, Coordinates::outside, msda::Rounding::nearest, "deterministic"};
    const ProblemData data = gka_data(c);
    std::vector<std::uint8_t> first_value, first_weights;
    for (int threads : {1, 2, 0, 1}) {
        msda::set_num_threads(threads);
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::backward(gka_backward_args(tensors), gka_options(c)));
        if (first_value.empty()) {
            first_value = tensors.grad_value.bytes();
            first_weights = tensors.grad_attention_weights.bytes();
            continue;
        }
        EXPECT_TRUE(bitwise_equal("grad_value", tensors.grad_value.bytes(), first_value)) << threads << " threads";
        EXPECT_TRUE(bitwise_equal("grad_attention_weights", tensors.grad_attention_weights.bytes(), first_weights));
    }
    msda::set_num_threads(0);
}

// GKA's own errors: a location gradient asked for, and options out of range.
TEST(Gka, Errors) {
    const ProblemData data(small_spec());
    LibraryTensors tensors(data);
    msda::Options options;
    options.op = msda::Operator::gka;
    try {
        msda::backward(tensors.backward_args(), options);  // grad_sampling_locations present
        ADD_FAILURE() << "a location gradient for GKA was accepted";
    } catch (const msda::Error &error) {
        EXPECT_EQ(std::string(error.what()).rfind("msda: grad_sampling_locations:", 0), 0u) << error.what();
    }
    EXPECT_TRUE(tensors.grad_value.all_hold(kSentinel));
    EXPECT_TRUE(tensors.grad_attention_weights.all_hold(kSentinel));

    msda::Options bad_op;
    bad_op.op = static_cast<msda::Operator>(7);
    msda::Options bad_rounding = options;
    bad_rounding.rounding = static_cast<msda::Rounding>(-1);
    for (const msda::Options &bad : {bad_op, bad_rounding}) {
        try {
            msda::forward(tensors.forward_args(), bad);
            ADD_FAILURE() << "bad options were accepted";
        } catch (const msda::Error &error) {
            EXPECT_EQ(std::string(error.what()).rfind("msda: options:", 0), 0u) << error.what();
        }
    }
    EXPECT_TRUE(tensors.output.all_hold(kSentinel));
}

}  // namespace
