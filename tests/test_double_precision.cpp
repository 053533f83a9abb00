// float64 storage (SPEC: Precision): value, sampling_locations,
// attention_weights, grad_output, output and every gradient in float64,
// computed in float64 (the test recipes of Deformable DETR, mmcv and detrex
// run the operator in double). Held against the double references
// (reference/, with the pixel transform in double: Problem::float64) at a
// relative error of 1e-9, which float32 arithmetic (about 1e-7) cannot meet:
// MSDA and GKA, forward and backward, every padding mode and both roundings,
// locations that float32 cannot hold. Also: a value float32 would round is
// carried through exactly, staging value (Options::relayout) and threads
// give the same bits, and the dtype rules float64 adds. The opencl and cuda
// labels run the same cases on those devices (MSDA_TEST_DEVICE; relayout
// and threads do not apply there); test_opencl.cpp has a device without
// float64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gka_reference.h"
#include "msda_reference.h"
#include "test_util.h"

namespace {

using msda::DType;
using msda::TensorView;
using msda::reference::GkaRounding;

constexpr double kTolerance = 1e-9;

struct Case {
    std::string name;
    std::int64_t batch, queries, heads, channels, points;
    std::vector<msda::reference::Level> levels;
    msda::Operator op = msda::Operator::msda;
    bool align_corners = false, border = false;
    msda::Rounding rounding = msda::Rounding::floor;
};

void PrintTo(const Case &c, std::ostream *out) { *out << c.name; }

std::vector<Case> cases() {
    const std::vector<msda::reference::Level> two = {{5, 7}, {3, 2}}, three = {{6, 4}, {3, 3}, {1, 1}};
    std::vector<Case> list = {
        {"small", 2, 5, 3, 4, 2, two},
        {"c32", 1, 9, 2, 32, 4, three},
        {"c71", 1, 4, 1, 71, 3, two},
        {"one_pixel", 2, 3, 2, 3, 2, {{1, 1}}},
    };
    const std::size_t msda_cases = list.size();
    for (std::size_t i = 0; i < msda_cases; i++) {
        Case aligned = list[i], border = list[i], both = list[i];
        aligned.name += "_align_corners", aligned.align_corners = true;
        border.name += "_border", border.border = true;
        both.name += "_align_corners_border", both.align_corners = both.border = true;
        list.insert(list.end(), {aligned, border, both});
    }
    for (std::size_t i = 0; i < msda_cases; i++) {
        for (msda::Rounding rounding : {msda::Rounding::floor, msda::Rounding::nearest}) {
            Case gka = list[i];
            gka.name = "gka_" + gka.name + (rounding == msda::Rounding::floor ? "_floor" : "_nearest");
            gka.op = msda::Operator::gka;
            gka.rounding = rounding;
            list.push_back(gka);
        }
    }
    return list;
}

// The inputs in full double precision (no float32 holds them), canonical
// layouts. MSDA locations fall inside, on the border of and outside each
// level, a few on pixel centres; GKA's are pixel coordinates, ties among
// them.
struct Data {
    msda::reference::Problem problem;
    std::vector<double> grad_output;
    std::vector<std::int32_t> shapes, starts;
};

Data make_data(const Case &c, std::uint32_t seed) {
    std::mt19937_64 engine(seed);
    auto uniform = [&engine](double low, double high) { return std::uniform_real_distribution<double>(low, high)(engine); };
    Data d;
    msda::reference::Problem &p = d.problem;
    p.batch = c.batch, p.queries = c.queries, p.heads = c.heads, p.channels = c.channels, p.points = c.points;
    p.levels = c.levels;
    p.align_corners = c.align_corners;
    p.border = c.border;
    p.float64 = true;
    const std::int64_t levels = static_cast<std::int64_t>(c.levels.size());
    for (std::size_t l = 0; l < c.levels.size(); l++) {
        d.shapes.push_back(static_cast<std::int32_t>(c.levels[l].height));
        d.shapes.push_back(static_cast<std::int32_t>(c.levels[l].width));
        d.starts.push_back(static_cast<std::int32_t>(p.level_start(l)));
    }
    p.value.resize(static_cast<std::size_t>(c.batch * p.value_length() * c.heads * c.channels));
    for (double &v : p.value) v = uniform(-1.0, 1.0);
    const std::int64_t samples = c.batch * c.queries * c.heads * levels * c.points;
    p.attention_weights.resize(static_cast<std::size_t>(samples));
    for (double &a : p.attention_weights) a = uniform(0.0, 1.0);
    p.sampling_locations.resize(static_cast<std::size_t>(2 * samples));
    for (std::int64_t s = 0; s < samples; s++) {
        const auto &level = c.levels[static_cast<std::size_t>((s / c.points) % levels)];
        for (int axis = 0; axis < 2; axis++) {
            const double size = static_cast<double>(axis == 0 ? level.width : level.height);
            double &location = p.sampling_locations[static_cast<std::size_t>(2 * s + axis)];
            if (c.op == msda::Operator::gka) {
                // A third ties (k + 0.5), the rest anywhere from -1 to size.
                location = s % 3 == 0 ? std::floor(uniform(-1.0, size)) + 0.5 : uniform(-1.0, size);
            } else {
                // A fifth on pixel centres, the rest from -0.2 to 1.2.
                location = s % 5 == 0 ? (std::floor(uniform(0.0, size)) + 0.5) / size : uniform(-0.2, 1.2);
            }
        }
    }
    d.grad_output.resize(static_cast<std::size_t>(c.batch * c.queries * c.heads * c.channels));
    for (double &g : d.grad_output) g = uniform(-1.0, 1.0);
    return d;
}

// The library's tensors for Data: inputs as given, results filled with a
// sentinel they must overwrite.
struct Tensors {
    Data data;
    std::vector<double> output, grad_value, grad_locations, grad_weights;
    std::int64_t levels;
    const Case &c;

    Tensors(const Case &which, std::uint32_t seed) : data(make_data(which, seed)), c(which) {
        levels = static_cast<std::int64_t>(c.levels.size());
        output.assign(data.grad_output.size(), -12345.5);
        grad_value.assign(data.problem.value.size(), -12345.5);
        grad_locations.assign(data.problem.sampling_locations.size(), -12345.5);
        grad_weights.assign(data.problem.attention_weights.size(), -12345.5);
    }
    TensorView view(const std::vector<double> &t, std::initializer_list<std::int64_t> shape) const {
        return TensorView::contiguous(t.data(), DType::f64, shape);
    }
    TensorView value() const {
        return view(data.problem.value, {c.batch, data.problem.value_length(), c.heads, c.channels});
    }
    TensorView locations(const std::vector<double> &t) const {
        return view(t, {c.batch, c.queries, c.heads, levels, c.points, 2});
    }
    TensorView weights(const std::vector<double> &t) const {
        return view(t, {c.batch, c.queries, c.heads, levels, c.points});
    }
    TensorView query_shaped(const std::vector<double> &t) const {
        return view(t, {c.batch, c.queries, c.heads * c.channels});
    }
    msda::ForwardArgs forward_args() {
        msda::ForwardArgs args;
        args.value = value();
        args.spatial_shapes = TensorView::contiguous(data.shapes.data(), DType::i32, {levels, 2});
        args.level_start_index = TensorView::contiguous(data.starts.data(), DType::i32, {levels});
        args.sampling_locations = locations(data.problem.sampling_locations);
        args.attention_weights = weights(data.problem.attention_weights);
        args.output = query_shaped(output);
        return args;
    }
    msda::BackwardArgs backward_args() {
        const msda::ForwardArgs f = forward_args();
        msda::BackwardArgs args;
        args.value = f.value;
        args.spatial_shapes = f.spatial_shapes;
        args.level_start_index = f.level_start_index;
        args.sampling_locations = f.sampling_locations;
        args.attention_weights = f.attention_weights;
        args.grad_output = query_shaped(data.grad_output);
        args.grad_value = value_shaped(grad_value);
        if (c.op == msda::Operator::msda) args.grad_sampling_locations = locations(grad_locations);
        args.grad_attention_weights = weights(grad_weights);
        return args;
    }
    TensorView value_shaped(const std::vector<double> &t) const {
        return view(t, {c.batch, data.problem.value_length(), c.heads, c.channels});
    }
    msda::Options options() const {
        msda::Options o;
        o.device = msda::testing::test_device();
        o.op = c.op;
        o.rounding = c.rounding;
        if (c.op == msda::Operator::msda) {
            o.align_corners = c.align_corners;
            o.padding_mode = c.border ? msda::PaddingMode::border : msda::PaddingMode::zeros;
        } else {
            o.grad_sampling_locations = false;
        }
        return o;
    }
    void run(const msda::Options &o) {
        msda::forward(forward_args(), o);
        msda::backward(backward_args(), o);
    }
};

// SPEC's measure: max |actual - expected| / max |expected|; the largest of a
// case's results goes to `worst`.
::testing::AssertionResult close(const char *name, const std::vector<double> &actual,
                                 const std::vector<double> &expected, double *worst) {
    if (actual.size() != expected.size()) return ::testing::AssertionFailure() << name << ": size mismatch";
    double largest = 0.0, error = 0.0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < actual.size(); i++) {
        largest = std::max(largest, std::abs(expected[i]));
        const double e = std::abs(actual[i] - expected[i]);
        if (!(e <= error)) error = e, at = i;  // a NaN is the worst
    }
    const double relative = largest > 0.0 ? error / largest : error;
    *worst = std::max(*worst, relative);
    if (relative <= kTolerance) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << name << "[" << at << "] = " << actual[at] << ", the reference "
                                         << expected[at] << ": relative error " << relative << " > " << kTolerance;
}

class DoublePrecision : public ::testing::TestWithParam<Case> {};

TEST_P(DoublePrecision, MatchesTheDoubleReference) {
    const Case &c = GetParam();
    double worst_error = 0.0;
    struct Report {
        const double &worst;
        ~Report() { std::printf("largest relative error against the reference: %.3g\n", worst); }
    } report{worst_error};
    Tensors t(c, 17);
    ASSERT_NO_THROW(t.run(t.options()));
    const msda::reference::Problem &p = t.data.problem;
    if (c.op == msda::Operator::gka) {
        const GkaRounding rounding = c.rounding == msda::Rounding::floor ? GkaRounding::floor : GkaRounding::nearest;
        const msda::reference::GkaGradients g = msda::reference::gka_backward(p, t.data.grad_output, rounding);
        EXPECT_TRUE(close("output", t.output, msda::reference::gka_forward(p, rounding), &worst_error));
        EXPECT_TRUE(close("grad_value", t.grad_value, g.value, &worst_error));
        EXPECT_TRUE(close("grad_attention_weights", t.grad_weights, g.attention_weights, &worst_error));
        return;
    }
    const msda::reference::Gradients g = msda::reference::backward(p, t.data.grad_output);
    EXPECT_TRUE(close("output", t.output, msda::reference::forward(p), &worst_error));
    EXPECT_TRUE(close("grad_value", t.grad_value, g.value, &worst_error));
    EXPECT_TRUE(close("grad_sampling_locations", t.grad_locations, g.sampling_locations, &worst_error));
    EXPECT_TRUE(close("grad_attention_weights", t.grad_weights, g.attention_weights, &worst_error));
}

// value staged head-major (with grad_value summed in float64 in the
// workspace and copied back) or read in place, 1 or 2 threads, one-shot or
// planned, Options::deterministic false (float64 has no float atomics on
// any device): the same bits.
TEST_P(DoublePrecision, StagingThreadsAndPlansGiveTheSameBits) {
    const Case &c = GetParam();
    Tensors never(c, 5), always(c, 5), two_threads(c, 5), planned(c, 5), nondeterministic(c, 5);
    msda::Options o = never.options();
    o.relayout = msda::Relayout::never;
    const int threads = msda::num_threads();
    msda::set_num_threads(1);
    ASSERT_NO_THROW(never.run(o));
    o.relayout = msda::Relayout::always;
    ASSERT_NO_THROW(always.run(o));
    const msda::Plan plan(msda::ProblemSize::of(planned.backward_args(), o), o);
    std::vector<std::byte> workspace(plan.workspace_size());
    ASSERT_NO_THROW(plan.forward(planned.forward_args(), workspace.data(), workspace.size()));
    ASSERT_NO_THROW(plan.backward(planned.backward_args(), workspace.data(), workspace.size()));
    msda::set_num_threads(2);
    ASSERT_NO_THROW(two_threads.run(o));
    msda::set_num_threads(threads);
    o.deterministic = false;
    ASSERT_NO_THROW(nondeterministic.run(o));
    for (const Tensors *other : {&always, &two_threads, &planned, &nondeterministic}) {
        EXPECT_EQ(0, std::memcmp(never.output.data(), other->output.data(), 8 * never.output.size()));
        EXPECT_EQ(0, std::memcmp(never.grad_value.data(), other->grad_value.data(), 8 * never.grad_value.size()));
        EXPECT_EQ(0, std::memcmp(never.grad_locations.data(), other->grad_locations.data(),
                                 8 * never.grad_locations.size()));
        EXPECT_EQ(0, std::memcmp(never.grad_weights.data(), other->grad_weights.data(), 8 * never.grad_weights.size()));
    }
}

INSTANTIATE_TEST_SUITE_P(Cases, DoublePrecision, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case> &info) { return info.param.name; });

// One sample on a pixel centre with attention 1 reads the value as stored:
// 1 + 2^-40 (no float32 holds it) comes back exactly, and its gradient too.
TEST(DoublePrecisionExact, AValueFloat32CannotHoldComesThroughExactly) {
    Case c{"exact", 1, 1, 1, 2, 1, {{2, 2}}};
    Tensors t(c, 1);
    const double exact = 1.0 + std::ldexp(1.0, -40);
    std::fill(t.data.problem.value.begin(), t.data.problem.value.end(), exact);
    t.data.problem.attention_weights = {1.0};
    t.data.problem.sampling_locations = {0.25, 0.75};  // the centre of pixel (x 0, y 1)
    t.data.grad_output = {exact, 0.0};
    ASSERT_NO_THROW(t.run(t.options()));
    EXPECT_EQ(t.output[0], exact);
    EXPECT_EQ(t.output[1], exact);
    EXPECT_EQ(t.grad_weights[0], exact * exact);  // float32 would give 1
    const std::size_t row = 2 * 2;  // pixel (x 0, y 1): row 2, 2 channels
    EXPECT_EQ(t.grad_value[row], exact);
    EXPECT_EQ(t.grad_value[row + 1], 0.0);
}

// float64 storage takes float64 locations, and one dtype for the rest.
TEST(DoublePrecisionErrors, DtypeRules) {
    Case c{"errors", 1, 2, 1, 4, 1, {{2, 3}}};
    Tensors t(c, 3);
    std::vector<float> floats(t.data.problem.sampling_locations.size(), 0.5f);
    msda::ForwardArgs args = t.forward_args();
    args.sampling_locations = TensorView::contiguous(floats.data(), DType::f32, {1, 2, 1, 1, 1, 2});
    try {
        msda::forward(args);
        ADD_FAILURE() << "float32 locations with float64 value were accepted";
    } catch (const msda::TypeError &error) {
        EXPECT_NE(std::string(error.what()).find("sampling_locations: expected dtype float64 (the dtype of value), "
                                                 "got float32"),
                  std::string::npos)
            << error.what();
    }
    args = t.forward_args();
    args.attention_weights = TensorView::contiguous(floats.data(), DType::f32, {1, 2, 1, 1, 1});
    EXPECT_THROW(msda::forward(args), msda::TypeError);
    EXPECT_EQ(t.output[0], -12345.5);  // nothing written

    msda::ProblemSize size = msda::ProblemSize::of(t.forward_args());
    EXPECT_EQ(size.dtype, DType::f64);
    EXPECT_EQ(size.locations_dtype, DType::f64);
    size.locations_dtype = DType::f32;
    EXPECT_THROW(msda::Plan plan(size), msda::TypeError);
}

}  // namespace
