// Options::forward_order: the forward walked query by query (the variants
// compiled for C_h = 32 and (N_l, N_p) of (4, 4), (3, 4), (4, 8)) is held to
// the double reference on every kind of sampling location and option flag,
// agrees with the by-level walk on non-finite inputs value class for value
// class, is deterministic across thread counts, and is chosen exactly where
// msda.hpp says: where it exists for the tensors, and (automatic) where
// levels are large and the queries' samples cluster.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <msda/msda.h>

#include "c_api_views.h"
#include "core_grid.h"
#include "test_util.h"

namespace {

using msda::ForwardOrder;
using msda::testing::expect_inputs_unchanged;
using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::matches_reference;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using msda::testing::Random;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

msda::Options with_order(msda::Options options, ForwardOrder order) {
    options.forward_order = order;
    return options;
}

// Problems the by-query variants serve: C_h = 32 and their (N_l, N_p), levels
// with H or W = 1, padded outer strides, batches of 1 to 3.
struct ByQueryShape {
    const char *name;
    std::int64_t batch, queries, heads, points;
    std::vector<msda::reference::Level> levels;
    std::int64_t padding;
};

const std::vector<ByQueryShape> &by_query_shapes() {
    static const std::vector<ByQueryShape> shapes = {
        {"l4p4", 2, 37, 3, 4, {{9, 11}, {5, 6}, {3, 3}, {2, 2}}, 0},
        {"l4p4_thin_levels_padded", 3, 5, 1, 4, {{1, 7}, {1, 3}, {4, 1}, {1, 1}}, 2},
        {"l3p4_padded", 1, 50, 2, 4, {{8, 8}, {4, 4}, {2, 2}}, 1},
        {"l4p8", 1, 21, 8, 8, {{7, 5}, {4, 3}, {2, 2}, {1, 1}}, 0},
    };
    return shapes;
}

// Every shape meets every kind of location; value layout, align_corners,
// padding mode and the index dtypes rotate (locations stay BQHLP2, which
// the by-query walk requires).
std::vector<ProblemSpec> by_query_grid() {
    std::vector<ProblemSpec> cases;
    int index = 0;
    for (const ByQueryShape &shape : by_query_shapes()) {
        for (Locations kind : msda::testing::kLocationKinds) {
            ProblemSpec spec;
            spec.name = std::string(shape.name) + "_" + msda::testing::locations_name(kind);
            spec.batch = shape.batch;
            spec.queries = shape.queries;
            spec.heads = shape.heads;
            spec.channels = 32;
            spec.points = shape.points;
            spec.levels = shape.levels;
            spec.padding = shape.padding;
            spec.dense_sample_blocks = true;
            spec.locations = kind;
            spec.options = msda::testing::options_for((index * 5) % 16 & ~2);
            spec.shapes_dtype = index % 2 ? msda::DType::i64 : msda::DType::i32;
            spec.start_dtype = (index / 2) % 2 ? msda::DType::i64 : msda::DType::i32;
            spec.seed = 7000 + index++;
            cases.push_back(spec);
        }
    }
    return cases;
}

// One forward in the given order, through the one-shot call.
void run_forward(LibraryTensors &tensors, const msda::Options &options) {
    msda::forward(tensors.forward_args(), options);
}

class ByQueryGrid : public ::testing::TestWithParam<ProblemSpec> {};

TEST_P(ByQueryGrid, MatchesTheReferenceAndTheByLevelWalk) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::Options by_query = with_order(spec.options, ForwardOrder::by_query);
    const msda::Options by_level = with_order(spec.options, ForwardOrder::by_level);
    LibraryTensors query_walk(data), level_walk(data);
    ASSERT_EQ(msda::forward_order(query_walk.forward_args(), by_query), ForwardOrder::by_query);
    ASSERT_EQ(msda::forward_order(level_walk.forward_args(), by_level), ForwardOrder::by_level);
    ASSERT_NO_THROW(run_forward(query_walk, by_query));
    ASSERT_NO_THROW(run_forward(level_walk, by_level));

    const std::vector<double> expected = msda::reference::forward(data.reference_problem());
    EXPECT_TRUE(matches_reference("output (by_query)", query_walk.output.canonical(), expected));
    EXPECT_TRUE(matches_reference("output (by_level)", level_walk.output.canonical(), expected));
    EXPECT_TRUE(query_walk.output.outside_view_holds(msda::testing::kSentinel));
    expect_inputs_unchanged(query_walk, data);
}

// The same bits for 1 and 2 threads, and through a plan with its workspace.
TEST_P(ByQueryGrid, IsDeterministic) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::Options options = with_order(spec.options, ForwardOrder::by_query);
    LibraryTensors one_thread(data), two_threads(data), planned(data);
    msda::set_num_threads(1);
    ASSERT_NO_THROW(run_forward(one_thread, options));
    msda::set_num_threads(2);
    ASSERT_NO_THROW(run_forward(two_threads, options));
    msda::set_num_threads(0);
    const msda::Plan plan(msda::ProblemSize::of(planned.forward_args(), options), options);
    std::vector<std::byte> workspace(plan.workspace_size());
    ASSERT_NO_THROW(plan.forward(planned.forward_args(), workspace.data(), workspace.size()));
    EXPECT_TRUE(msda::testing::bitwise_equal("output", one_thread.output.bytes(), two_threads.output.bytes()));
    EXPECT_TRUE(msda::testing::bitwise_equal("output", one_thread.output.bytes(), planned.output.bytes()));
}

INSTANTIATE_TEST_SUITE_P(Grid, ByQueryGrid, ::testing::ValuesIn(by_query_grid()),
                         [](const ::testing::TestParamInfo<ProblemSpec> &info) { return info.param.name; });

// A DETR-like problem: 4 levels, 4 points, 8 heads of 32 channels.
ProblemSpec detr_like(std::int64_t queries = 64) {
    ProblemSpec spec;
    spec.name = "detr_like";
    spec.batch = 2;
    spec.queries = queries;
    spec.heads = 8;
    spec.channels = 32;
    spec.points = 4;
    spec.levels = {{24, 32}, {12, 16}, {6, 8}, {3, 4}};
    return spec;
}

// A problem whose largest level holds more than 1 MiB of one head's value
// (96 x 96 x 32 float32: 1.1 MiB), where automatic may take by_query.
ProblemSpec large_levels() {
    ProblemSpec spec = detr_like();
    spec.name = "large_levels";
    spec.batch = 1;
    spec.heads = 2;
    spec.levels = {{96, 96}, {48, 48}, {24, 24}, {12, 12}};
    return spec;
}

// Locations (canonical BQHLP2 order) where each query's samples lie within
// `spread` pixels of a random centre at every level.
std::vector<float> clustered_locations(const ProblemSpec &spec, double spread, std::uint64_t seed) {
    Random random(seed);
    std::vector<float> locations;
    for (std::int64_t b = 0; b < spec.batch; b++) {
        for (std::int64_t q = 0; q < spec.queries; q++) {
            const float cx = random.uniform(0.1f, 0.9f), cy = random.uniform(0.1f, 0.9f);
            for (std::int64_t h = 0; h < spec.heads; h++) {
                for (const auto &level : spec.levels) {
                    for (std::int64_t p = 0; p < spec.points; p++) {
                        const float dx = random.uniform(-0.5f, 0.5f) * static_cast<float>(spread);
                        const float dy = random.uniform(-0.5f, 0.5f) * static_cast<float>(spread);
                        locations.push_back(cx + dx / static_cast<float>(level.width));
                        locations.push_back(cy + dy / static_cast<float>(level.height));
                    }
                }
            }
        }
    }
    return locations;
}

// automatic is by_query for clustered samples (all within 4 pixels), with
// the by_query bits; by_level for samples scattered over the levels (the
// grid's `inside` kind), with the by_level bits.
TEST(AutomaticForwardOrder, FollowsTheClusteringOfTheSamples) {
    ProblemSpec spec = large_levels();
    const ProblemData data(spec);
    for (bool clustered : {true, false}) {
        SCOPED_TRACE(clustered ? "clustered" : "scattered");
        LibraryTensors automatic(data), forced(data);
        if (clustered) {
            const std::vector<float> locations = clustered_locations(spec, 4.0, 11);
            automatic.sampling_locations.set_canonical(locations);
            forced.sampling_locations.set_canonical(locations);
        }
        const ForwardOrder expected = clustered ? ForwardOrder::by_query : ForwardOrder::by_level;
        EXPECT_EQ(msda::forward_order(automatic.forward_args()), expected);
        ASSERT_NO_THROW(run_forward(automatic, {}));
        ASSERT_NO_THROW(run_forward(forced, with_order({}, expected)));
        EXPECT_TRUE(msda::testing::bitwise_equal("output", automatic.output.bytes(), forced.output.bytes()));
    }
}

// The probe's threshold: 16 pixels along each axis at level 0.
TEST(AutomaticForwardOrder, ClustersAreSixteenPixelsWide) {
    ProblemSpec spec = large_levels();
    const ProblemData data(spec);
    LibraryTensors tensors(data);
    tensors.sampling_locations.set_canonical(clustered_locations(spec, 15.0, 12));
    EXPECT_EQ(msda::forward_order(tensors.forward_args()), ForwardOrder::by_query);
    tensors.sampling_locations.set_canonical(clustered_locations(spec, 40.0, 12));
    EXPECT_EQ(msda::forward_order(tensors.forward_args()), ForwardOrder::by_level);
}

// A query with a non-finite level-0 location is not clustered: with three
// queries in four holding a NaN or an Inf there (the probed ones among
// them), automatic is by_level.
TEST(AutomaticForwardOrder, NonFiniteLocationsAreNotClustered) {
    ProblemSpec spec = large_levels();
    const ProblemData data(spec);
    std::vector<float> locations = clustered_locations(spec, 4.0, 13);
    const std::size_t per_query = 2 * spec.heads * spec.levels.size() * spec.points;
    for (std::size_t query = 0; query < locations.size() / per_query; query++) {
        if (query % 4 != 1) locations[query * per_query + (query % 3)] = query % 2 ? kNaN : kInf;
    }
    LibraryTensors tensors(data);
    tensors.sampling_locations.set_canonical(locations);
    EXPECT_EQ(msda::forward_order(tensors.forward_args()), ForwardOrder::by_level);
}

// Clustered samples on levels of at most 1 MiB a head (DETR-like's 24 x 32
// largest level: 96 KiB; 90 x 91 x 32 float32: 1023.75 KiB) stay by_level;
// 91 x 91 (1035 KiB) is by_query.
TEST(AutomaticForwardOrder, SmallLevelsStayByLevel) {
    for (std::int64_t height : {0, 90, 91}) {
        ProblemSpec spec = height == 0 ? detr_like() : large_levels();
        if (height > 0) spec.levels[0] = {height, 91};
        spec.queries = 16;
        SCOPED_TRACE(spec.levels[0].height);
        const ProblemData data(spec);
        LibraryTensors tensors(data);
        tensors.sampling_locations.set_canonical(clustered_locations(spec, 4.0, 14));
        EXPECT_EQ(msda::forward_order(tensors.forward_args()),
                  height == 91 ? ForwardOrder::by_query : ForwardOrder::by_level);
    }
}

// by_query where no by-query variant serves the call, or the tensors do not
// lie as it needs: the forward is by_level (and still correct).
TEST(ForcedForwardOrder, FallsBackToByLevelWhereByQueryDoesNotExist) {
    struct Case {
        const char *name;
        ProblemSpec spec;
    };
    std::vector<Case> cases;
    ProblemSpec base = detr_like(24);
    cases.push_back({"channels_64", base});
    cases.back().spec.channels = 64;
    cases.push_back({"five_points", base});
    cases.back().spec.points = 5;
    cases.push_back({"two_levels", base});
    cases.back().spec.levels.resize(2);
    cases.push_back({"b2qhlp_locations", base});
    cases.back().spec.options.locations_layout = msda::LocationsLayout::B2QHLP;
    cases.push_back({"strided_samples", base});
    cases.back().spec.per_sample_innermost_stride = 2;
    cases.push_back({"bf16", base});
    cases.back().spec.dtype = msda::DType::bf16;
    cases.push_back({"bf16_locations", base});
    cases.back().spec.dtype = msda::DType::bf16;
    cases.back().spec.locations_dtype = msda::DType::bf16;
    cases.push_back({"padded_sample_blocks", base});
    cases.back().spec.padding = 1;
    cases.push_back({"gka", base});
    cases.back().spec.options.op = msda::Operator::gka;
    cases.push_back({"no_queries", base});
    cases.back().spec.queries = 0;
    for (Case &c : cases) {
        SCOPED_TRACE(c.name);
        const ProblemData data(c.spec);
        LibraryTensors tensors(data);
        const msda::Options options = with_order(c.spec.options, ForwardOrder::by_query);
        EXPECT_EQ(msda::forward_order(tensors.forward_args(), options), ForwardOrder::by_level);
        ASSERT_NO_THROW(run_forward(tensors, options));
    }
    // The same tensors as the first case but C_h = 32: by_query exists.
    const ProblemData data(base);
    LibraryTensors tensors(data);
    EXPECT_EQ(msda::forward_order(tensors.forward_args(), with_order({}, ForwardOrder::by_query)),
              ForwardOrder::by_query);
}

// Non-finite values, weights and locations: both orders give the same class
// of value (NaN, the same Inf, finite) at every output element, and finite
// elements within the float32 tolerance of each other.
TEST(ForcedForwardOrder, NonFiniteInputsAgreeWithTheByLevelWalk) {
    ProblemSpec spec = detr_like(40);
    spec.locations = Locations::non_finite;
    ProblemData data(spec);
    for (std::size_t i = 0; i < data.value.size(); i += 997) data.value[i] = i % 2 ? kInf : kNaN;
    for (std::size_t i = 5; i < data.attention_weights.size(); i += 101) {
        data.attention_weights[i] = i % 3 ? -kInf : kNaN;
    }
    LibraryTensors query_walk(data), level_walk(data);
    ASSERT_NO_THROW(run_forward(query_walk, with_order({}, ForwardOrder::by_query)));
    ASSERT_NO_THROW(run_forward(level_walk, with_order({}, ForwardOrder::by_level)));
    const std::vector<float> a = query_walk.output.canonical(), b = level_walk.output.canonical();
    ASSERT_EQ(a.size(), b.size());
    double largest = 0;
    std::int64_t non_finite = 0;
    for (float x : b) {
        if (std::isfinite(x)) largest = std::max(largest, static_cast<double>(std::abs(x)));
        non_finite += std::isfinite(x) ? 0 : 1;
    }
    EXPECT_GT(non_finite, 0) << "the injected values reach some outputs";
    for (std::size_t i = 0; i < a.size(); i++) {
        SCOPED_TRACE("output[" + std::to_string(i) + "]");
        if (std::isnan(b[i])) {
            EXPECT_TRUE(std::isnan(a[i])) << a[i];
        } else if (std::isinf(b[i])) {
            EXPECT_EQ(a[i], b[i]);
        } else {
            EXPECT_NEAR(a[i], b[i], 1e-5 * largest);
        }
    }
}

// The C API carries the order: its by_query and by_level calls give the C++
// API's bits for the same order.
TEST(ForwardOrderOption, TheCApiCarriesTheOrder) {
    ProblemSpec spec = detr_like(24);
    const ProblemData data(spec);
    for (ForwardOrder order : {ForwardOrder::by_query, ForwardOrder::by_level}) {
        LibraryTensors cpp(data), c(data);
        ASSERT_NO_THROW(run_forward(cpp, with_order({}, order)));
        msda_options c_options = msda_default_options();
        c_options.forward_order = static_cast<msda_forward_order>(order);
        const msda_forward_args c_args = msda::testing::to_c(c.forward_args());
        ASSERT_EQ(msda_forward(&c_args, &c_options), MSDA_OK) << msda_last_error();
        EXPECT_TRUE(msda::testing::bitwise_equal("output", c.output.bytes(), cpp.output.bytes()));
    }
}

// An unknown order is an error naming the option, in both APIs.
TEST(ForwardOrderOption, UnknownValuesAreErrors) {
    const ProblemData data(detr_like(4));
    LibraryTensors tensors(data);
    msda::Options options;
    options.forward_order = static_cast<ForwardOrder>(3);
    try {
        msda::forward(tensors.forward_args(), options);
        ADD_FAILURE() << "no error";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find("forward_order"), std::string::npos) << error.what();
    }
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));

    msda_options c_options = msda_default_options();
    EXPECT_EQ(c_options.forward_order, MSDA_FORWARD_ORDER_AUTOMATIC);
    c_options.forward_order = static_cast<msda_forward_order>(-1);
    const msda_forward_args c_args = msda::testing::to_c(tensors.forward_args());
    EXPECT_NE(msda_forward(&c_args, &c_options), MSDA_OK);
    EXPECT_NE(std::string(msda_last_error()).find("forward_order"), std::string::npos) << msda_last_error();
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));
}

}  // namespace
