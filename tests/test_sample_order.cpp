// Options::sample_order: the forward (float32 and half precision), the
// backward's per-sample gradients and grad_value's scatter walked query by
// query (the variants compiled for C_h = 32 and (N_l, N_p) of (4, 4),
// (3, 4), (4, 8)) are held to the double reference on
// every kind of sampling location and option flag, agree with the by-level
// walk on non-finite inputs value class for value class (grad_value bit for
// bit), are deterministic across thread counts, and are chosen exactly where
// msda.hpp says: where they exist for the tensors, and (automatic) where
// levels are large and the queries' samples cluster.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <msda/msda.h>

#include "c_api_views.h"
#include "core_grid.h"
#include "policy.h"
#include "test_util.h"

namespace {

using msda::SampleOrder;
using msda::testing::expect_inputs_unchanged;
using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::matches_reference;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using msda::testing::Random;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

msda::Options with_order(msda::Options options, SampleOrder order) {
    options.sample_order = order;
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

// A problem of this shape whose (N_l, N_p[, 2]) blocks are dense, as the
// by-query walk requires (outer strides padded as the shape says).
ProblemSpec spec_of(const ByQueryShape &shape) {
    ProblemSpec spec;
    spec.name = shape.name;
    spec.batch = shape.batch;
    spec.queries = shape.queries;
    spec.heads = shape.heads;
    spec.channels = 32;
    spec.points = shape.points;
    spec.levels = shape.levels;
    spec.padding = shape.padding;
    spec.dense_sample_blocks = true;
    return spec;
}

// Every shape meets every kind of location; value layout, align_corners,
// padding mode and the index dtypes rotate (locations stay BQHLP2, which
// the by-query walk requires).
std::vector<ProblemSpec> by_query_grid() {
    std::vector<ProblemSpec> cases;
    int index = 0;
    for (const ByQueryShape &shape : by_query_shapes()) {
        for (Locations kind : msda::testing::kLocationKinds) {
            ProblemSpec spec = spec_of(shape);
            spec.name = std::string(shape.name) + "_" + msda::testing::locations_name(kind);
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

// Forward then backward (every gradient) in the given order, through the
// one-shot calls.
void run_both(LibraryTensors &tensors, const msda::Options &options) {
    msda::forward(tensors.forward_args(), options);
    msda::backward(tensors.backward_args(), options);
}

void run_forward(LibraryTensors &tensors, const msda::Options &options) {
    msda::forward(tensors.forward_args(), options);
}

class ByQueryGrid : public ::testing::TestWithParam<ProblemSpec> {};

// Both orders against the reference, every output and gradient; grad_value
// (one scatter whatever the order) bitwise the same in both.
TEST_P(ByQueryGrid, MatchesTheReferenceAndTheByLevelWalk) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::Options by_query = with_order(spec.options, SampleOrder::by_query);
    const msda::Options by_level = with_order(spec.options, SampleOrder::by_level);
    LibraryTensors query_walk(data), level_walk(data);
    ASSERT_EQ(msda::sample_order(query_walk.forward_args(), by_query), SampleOrder::by_query);
    // The backward's by-query walk exists for (4, 4) and (4, 8) only.
    const SampleOrder backward_order = spec.levels.size() == 3 ? SampleOrder::by_level : SampleOrder::by_query;
    ASSERT_EQ(msda::sample_order(query_walk.backward_args(), by_query), backward_order);
    ASSERT_EQ(msda::sample_order(level_walk.forward_args(), by_level), SampleOrder::by_level);
    ASSERT_EQ(msda::sample_order(level_walk.backward_args(), by_level), SampleOrder::by_level);
    ASSERT_NO_THROW(run_both(query_walk, by_query));
    ASSERT_NO_THROW(run_both(level_walk, by_level));

    msda::testing::expect_matches_reference(data, msda::testing::canonical_results(query_walk));
    msda::testing::expect_matches_reference(data, msda::testing::canonical_results(level_walk));
    EXPECT_TRUE(
        msda::testing::bitwise_equal("grad_value", query_walk.grad_value.bytes(), level_walk.grad_value.bytes()));
    msda::testing::expect_nothing_written_outside_views(query_walk);
    expect_inputs_unchanged(query_walk, data);
}

// The same bits for 1 and 2 threads, and through a plan with its workspace.
TEST_P(ByQueryGrid, IsDeterministic) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::Options options = with_order(spec.options, SampleOrder::by_query);
    LibraryTensors one_thread(data), two_threads(data), planned(data);
    msda::set_num_threads(1);
    ASSERT_NO_THROW(run_both(one_thread, options));
    msda::set_num_threads(2);
    ASSERT_NO_THROW(run_both(two_threads, options));
    msda::set_num_threads(0);
    const msda::Plan plan(msda::ProblemSize::of(planned.backward_args(), options), options);
    std::vector<std::byte> workspace(plan.workspace_size());
    ASSERT_NO_THROW(plan.forward(planned.forward_args(), workspace.data(), workspace.size()));
    ASSERT_NO_THROW(plan.backward(planned.backward_args(), workspace.data(), workspace.size()));
    msda::testing::expect_same_bits(one_thread, two_threads);
    msda::testing::expect_same_bits(one_thread, planned);
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

// The running CPU's L2 (msda::cpu_dispatch(): sysfs, or MSDA_CPU_CACHES).
std::int64_t l2_bytes() { return msda::cpu_dispatch().l2_cache_bytes; }

// Whether automatic's by-level limit (policy.h, the dispatch's own
// definition) lets a problem's largest level, float32 and 32 channels, walk
// by query on this CPU.
bool outgrows_by_level_walk(const ProblemSpec &spec) {
    std::int64_t largest = 0;
    for (const msda::reference::Level &level : spec.levels) largest = std::max(largest, level.height * level.width);
    return msda::detail::policy::level_outgrows_by_level_walk(largest, spec.channels, 4, l2_bytes());
}

// A problem whose largest level holds more than half a core's L2 of one
// head's value (96 x 96 x 32 float32, 1.1 MiB, on cores of up to 2 MiB of
// L2; larger squares on larger ones), where automatic may take by_query.
ProblemSpec large_levels() {
    ProblemSpec spec = detr_like();
    spec.name = "large_levels";
    spec.batch = 1;
    spec.heads = 2;
    std::int64_t side = 96;
    while (side * side * spec.channels * 4 <= msda::detail::policy::by_level_slice_limit(l2_bytes())) side += 16;
    spec.levels = {{side, side}, {side / 2, side / 2}, {side / 4, side / 4}, {side / 8, side / 8}};
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
TEST(AutomaticSampleOrder, FollowsTheClusteringOfTheSamples) {
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
        const SampleOrder expected = clustered ? SampleOrder::by_query : SampleOrder::by_level;
        EXPECT_EQ(msda::sample_order(automatic.forward_args()), expected);
        EXPECT_EQ(msda::sample_order(automatic.backward_args()), expected);
        ASSERT_NO_THROW(run_both(automatic, {}));
        ASSERT_NO_THROW(run_both(forced, with_order({}, expected)));
        msda::testing::expect_same_bits(automatic, forced);
    }
}

// Clustered samples on small levels (DETR-like, 24 x 32 at most): the
// forward and the per-sample gradients stay by_level, grad_value's scatter
// walks by query (msda.hpp); every result has the by_level walk's bits, and
// grad_value the reference's values.
TEST(AutomaticSampleOrder, SmallClusteredLevelsKeepTheByLevelBits) {
    ProblemSpec spec = detr_like(48);
    spec.dense_sample_blocks = true;
    const ProblemData data(spec);
    const std::vector<float> locations = clustered_locations(spec, 4.0, 15);
    LibraryTensors automatic(data), level_walk(data);
    automatic.sampling_locations.set_canonical(locations);
    level_walk.sampling_locations.set_canonical(locations);
    ASSERT_FALSE(outgrows_by_level_walk(spec)) << "a core of " << l2_bytes() << " bytes of L2";
    EXPECT_EQ(msda::sample_order(automatic.backward_args()), SampleOrder::by_level);
    ASSERT_NO_THROW(run_both(automatic, {}));
    ASSERT_NO_THROW(run_both(level_walk, with_order({}, SampleOrder::by_level)));
    msda::testing::expect_same_bits(automatic, level_walk);
    ProblemData clustered = data;
    clustered.sampling_locations = locations;
    const msda::reference::Gradients reference =
        msda::reference::backward(clustered.reference_problem(), clustered.grad_output_double());
    EXPECT_TRUE(matches_reference("grad_value", automatic.grad_value.canonical(), reference.value, 1e-5, 0));
}

// The probe's threshold: 16 pixels along each axis at level 0.
TEST(AutomaticSampleOrder, ClustersAreSixteenPixelsWide) {
    ProblemSpec spec = large_levels();
    const ProblemData data(spec);
    LibraryTensors tensors(data);
    tensors.sampling_locations.set_canonical(clustered_locations(spec, 15.0, 12));
    EXPECT_EQ(msda::sample_order(tensors.forward_args()), SampleOrder::by_query);
    tensors.sampling_locations.set_canonical(clustered_locations(spec, 40.0, 12));
    EXPECT_EQ(msda::sample_order(tensors.forward_args()), SampleOrder::by_level);
}

// A query with a non-finite level-0 location is not clustered: with three
// queries in four holding a NaN or an Inf there (the probed ones among
// them), automatic is by_level.
TEST(AutomaticSampleOrder, NonFiniteLocationsAreNotClustered) {
    ProblemSpec spec = large_levels();
    const ProblemData data(spec);
    std::vector<float> locations = clustered_locations(spec, 4.0, 13);
    const std::size_t per_query = 2 * spec.heads * spec.levels.size() * spec.points;
    for (std::size_t query = 0; query < locations.size() / per_query; query++) {
        if (query % 4 != 1) locations[query * per_query + (query % 3)] = query % 2 ? kNaN : kInf;
    }
    LibraryTensors tensors(data);
    tensors.sampling_locations.set_canonical(locations);
    EXPECT_EQ(msda::sample_order(tensors.forward_args()), SampleOrder::by_level);
}

// Clustered samples on levels of at most half a core's L2 a head (the
// running CPU's, msda::cpu_dispatch(), against policy.h's limit, the one
// the dispatch decides with; DETR-like's 24 x 32 largest level: 96 KiB)
// stay by_level; one row of 91 more is by_query (with a 2 MiB L2: 90 x 91 x
// 32 float32 is 1023.75 KiB, 91 x 91 1035 KiB). Whatever the L2, the rows
// of 91 pixels are the largest level: the others are a half, a quarter and
// an eighth of it (a 512 KiB L2 took 48 x 48 of a fixed pyramid past the
// limit before level 0 was).
TEST(AutomaticSampleOrder, SmallLevelsStayByLevel) {
    const std::int64_t limit = msda::detail::policy::by_level_slice_limit(l2_bytes());
    const std::int64_t fitting = limit / (91 * 32 * 4);  // rows of 91 pixels that fit
    ASSERT_GE(fitting, 8) << "a core of " << l2_bytes() << " bytes of L2";
    for (std::int64_t height : {std::int64_t{0}, fitting, fitting + 1}) {
        ProblemSpec spec = height == 0 ? detr_like() : large_levels();
        if (height > 0) spec.levels = {{height, 91}, {height / 2, 45}, {height / 4, 22}, {height / 8, 11}};
        spec.queries = 16;
        SCOPED_TRACE(spec.levels[0].height);
        EXPECT_EQ(outgrows_by_level_walk(spec), height == fitting + 1);
        const ProblemData data(spec);
        LibraryTensors tensors(data);
        tensors.sampling_locations.set_canonical(clustered_locations(spec, 4.0, 14));
        EXPECT_EQ(msda::sample_order(tensors.forward_args()),
                  height == fitting + 1 ? SampleOrder::by_query : SampleOrder::by_level);
    }
}

// by_query where no by-query variant serves the call, or the tensors do not
// lie as it needs: the forward is by_level (and still correct).
TEST(ForcedSampleOrder, FallsBackToByLevelWhereByQueryDoesNotExist) {
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
        msda::Options options = with_order(c.spec.options, SampleOrder::by_query);
        EXPECT_EQ(msda::sample_order(tensors.forward_args(), options), SampleOrder::by_level);
        ASSERT_NO_THROW(run_forward(tensors, options));
        msda::BackwardArgs backward = tensors.backward_args();
        if (options.op == msda::Operator::gka) backward.grad_sampling_locations = {};
        EXPECT_EQ(msda::sample_order(backward, options), SampleOrder::by_level);
        ASSERT_NO_THROW(msda::backward(backward, options));
    }
    // The same tensors as the first case but C_h = 32: by_query exists.
    const ProblemData data(base);
    const msda::Options by_query = with_order({}, SampleOrder::by_query);
    LibraryTensors tensors(data);
    EXPECT_EQ(msda::sample_order(tensors.forward_args(), by_query), SampleOrder::by_query);
    EXPECT_EQ(msda::sample_order(tensors.backward_args(), by_query), SampleOrder::by_query);
    // Each per-sample gradient alone walks by query too (a by-query variant
    // serves each set of them a call may ask for), and only its own view
    // need be dense.
    for (bool locations : {true, false}) {
        msda::Options one = by_query;
        (locations ? one.grad_attention_weights : one.grad_sampling_locations) = false;
        msda::BackwardArgs backward = tensors.backward_args();
        (locations ? backward.grad_attention_weights : backward.grad_sampling_locations) = {};
        EXPECT_EQ(msda::sample_order(backward, one), SampleOrder::by_query);
        EXPECT_EQ(msda::sample_order(tensors.forward_args(), one), SampleOrder::by_query);
    }
    // Gradient views whose (l, p) blocks are padded: the backward is by_level.
    const std::int64_t levels = static_cast<std::int64_t>(base.levels.size());
    tensors.grad_attention_weights = msda::testing::StridedTensor(
        {base.batch, base.queries, base.heads, levels, base.points}, {}, 1);
    EXPECT_EQ(msda::sample_order(tensors.backward_args(), by_query), SampleOrder::by_level);
    ASSERT_NO_THROW(msda::backward(tensors.backward_args(), by_query));
}

// Half precision with float32 locations: the forward walks by query (its
// by-query variants exist for float16 and bfloat16 storage), the backward by
// level; both held to SPEC's half-precision tolerances against the
// reference, on every by-query shape and kind of location.
TEST(ForcedSampleOrder, HalfPrecisionForwardWalksByQuery) {
    int index = 0;
    for (const ByQueryShape &shape : by_query_shapes()) {
        for (msda::DType dtype : {msda::DType::f16, msda::DType::bf16}) {
            ProblemSpec spec = spec_of(shape);
            spec.dtype = dtype;
            spec.locations = index % 2 ? Locations::outside : Locations::pixel_centres;
            spec.options = msda::testing::options_for((index * 5) % 16 & ~2);
            spec.seed = 7500 + index++;
            SCOPED_TRACE(spec.describe() + (dtype == msda::DType::f16 ? " f16" : " bf16"));
            const ProblemData data(spec);
            LibraryTensors tensors(data);
            const msda::Options by_query = with_order(spec.options, SampleOrder::by_query);
            EXPECT_EQ(msda::sample_order(tensors.forward_args(), by_query), SampleOrder::by_query);
            EXPECT_EQ(msda::sample_order(tensors.backward_args(), by_query), SampleOrder::by_level);
            ASSERT_NO_THROW(run_both(tensors, by_query));
            msda::testing::expect_matches_reference(data, msda::testing::canonical_results(tensors),
                                                    dtype == msda::DType::f16 ? 5e-3 : 2e-2);
            msda::testing::expect_nothing_written_outside_views(tensors);
            expect_inputs_unchanged(tensors, data);
        }
    }
}

// grad_value's scatter decides its order apart from the per-sample
// gradients: asked for alone (sample_order, which answers for the
// per-sample gradients, says by_level), or beside one of them (which then
// walks by query too), it walks by query where its variant exists, and
// gives the reference's values and the by-level walk's bits.
TEST(ForcedSampleOrder, GradValueWithoutBothPerSampleGradients) {
    for (const ByQueryShape &shape : by_query_shapes()) {
        if (shape.levels.size() == 3) continue;  // no by-query scatter for (3, 4)
        ProblemSpec spec = spec_of(shape);
        spec.locations = Locations::outside;
        const ProblemData data(spec);
        const msda::reference::Gradients reference =
            msda::reference::backward(data.reference_problem(), data.grad_output_double());
        for (int asked = 0; asked < 3; asked++) {
            SCOPED_TRACE(std::string(shape.name) + ", also asked: " +
                         (asked == 0 ? "nothing" : asked == 1 ? "grad_attention_weights" : "grad_sampling_locations"));
            LibraryTensors query_walk(data), level_walk(data);
            msda::Options options;
            options.grad_attention_weights = asked == 1;
            options.grad_sampling_locations = asked == 2;
            for (LibraryTensors *tensors : {&query_walk, &level_walk}) {
                msda::BackwardArgs args = tensors->backward_args();
                if (!options.grad_attention_weights) args.grad_attention_weights = {};
                if (!options.grad_sampling_locations) args.grad_sampling_locations = {};
                const SampleOrder order = tensors == &query_walk ? SampleOrder::by_query : SampleOrder::by_level;
                ASSERT_EQ(msda::sample_order(args, with_order(options, order)),
                          asked == 0 ? SampleOrder::by_level : order);
                ASSERT_NO_THROW(msda::backward(args, with_order(options, order)));
            }
            EXPECT_TRUE(matches_reference("grad_value", query_walk.grad_value.canonical(), reference.value, 1e-5, 0));
            EXPECT_TRUE(msda::testing::bitwise_equal("grad_value", query_walk.grad_value.bytes(),
                                                     level_walk.grad_value.bytes()));
            msda::testing::expect_nothing_written_outside_views(query_walk);
        }
    }
}

// The same class of value (NaN, the same Inf, finite) at every element of a
// and b, which hold some non-finite ones, and finite elements within the
// float32 tolerance of b's largest finite magnitude.
void expect_same_classes(const std::string &name, const std::vector<float> &a, const std::vector<float> &b) {
    SCOPED_TRACE(name);
    ASSERT_EQ(a.size(), b.size());
    double largest = 0;
    std::int64_t non_finite = 0;
    for (float x : b) {
        if (std::isfinite(x)) largest = std::max(largest, static_cast<double>(std::abs(x)));
        non_finite += std::isfinite(x) ? 0 : 1;
    }
    EXPECT_GT(non_finite, 0) << "the injected values reach some elements";
    std::int64_t mismatches = 0;
    for (std::size_t i = 0; i < a.size(); i++) {
        const bool same = std::isnan(b[i])   ? std::isnan(a[i])
                          : std::isinf(b[i]) ? a[i] == b[i]
                                             : std::abs(static_cast<double>(a[i]) - b[i]) <= 1e-5 * largest;
        if (!same && mismatches++ < 5) ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
    EXPECT_EQ(mismatches, 0);
}

// Non-finite values, weights, locations and output gradients: both orders
// give the same class of value at every element of output and the
// per-sample gradients, and the same bits of grad_value but for a NaN's
// sign (an x86 instruction's NaN result takes the sign of whichever NaN
// operand comes first, and the two walks' code may order a sum's operands
// differently: the sanitizer tree's did).
TEST(ForcedSampleOrder, NonFiniteInputsAgreeWithTheByLevelWalk) {
    ProblemSpec spec = detr_like(40);
    spec.locations = Locations::non_finite;
    ProblemData data(spec);
    for (std::size_t i = 0; i < data.value.size(); i += 997) data.value[i] = i % 2 ? kInf : kNaN;
    for (std::size_t i = 5; i < data.attention_weights.size(); i += 101) {
        data.attention_weights[i] = i % 3 ? -kInf : kNaN;
    }
    for (std::size_t i = 3; i < data.grad_output.size(); i += 211) data.grad_output[i] = i % 2 ? kInf : kNaN;
    LibraryTensors query_walk(data), level_walk(data);
    ASSERT_NO_THROW(run_both(query_walk, with_order({}, SampleOrder::by_query)));
    ASSERT_NO_THROW(run_both(level_walk, with_order({}, SampleOrder::by_level)));
    expect_same_classes("output", query_walk.output.canonical(), level_walk.output.canonical());
    expect_same_classes("grad_sampling_locations", query_walk.grad_sampling_locations.canonical(),
                        level_walk.grad_sampling_locations.canonical());
    expect_same_classes("grad_attention_weights", query_walk.grad_attention_weights.canonical(),
                        level_walk.grad_attention_weights.canonical());
    const std::vector<float> a = query_walk.grad_value.canonical(), b = level_walk.grad_value.canonical();
    ASSERT_EQ(a.size(), b.size());
    std::size_t nans = 0, different = 0;
    for (std::size_t i = 0; i < a.size(); i++) {
        if (std::isnan(a[i]) && std::isnan(b[i])) {
            nans++;
        } else if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0 && different++ < 5) {
            ADD_FAILURE() << "grad_value element " << i << ": " << a[i] << " vs " << b[i];
        }
    }
    EXPECT_EQ(different, 0u);
    EXPECT_GT(nans, 0u) << "the problem was meant to give grad_value NaNs";
}

// The C API carries the order: its by_query and by_level forward and
// backward give the C++ API's bits for the same order.
TEST(SampleOrderOption, TheCApiCarriesTheOrder) {
    ProblemSpec spec = detr_like(24);
    const ProblemData data(spec);
    for (SampleOrder order : {SampleOrder::by_query, SampleOrder::by_level}) {
        LibraryTensors cpp(data), c(data);
        ASSERT_NO_THROW(run_both(cpp, with_order({}, order)));
        msda_options c_options = msda_default_options();
        c_options.sample_order = static_cast<msda_sample_order>(order);
        const msda_forward_args c_forward = msda::testing::to_c(c.forward_args());
        const msda_backward_args c_backward = msda::testing::to_c(c.backward_args());
        ASSERT_EQ(msda_forward(&c_forward, &c_options), MSDA_OK) << msda_last_error();
        ASSERT_EQ(msda_backward(&c_backward, &c_options), MSDA_OK) << msda_last_error();
        msda::testing::expect_same_bits(c, cpp);
    }
}

// An unknown order is an error naming the option, in both APIs.
TEST(SampleOrderOption, UnknownValuesAreErrors) {
    const ProblemData data(detr_like(4));
    LibraryTensors tensors(data);
    msda::Options options;
    options.sample_order = static_cast<SampleOrder>(3);
    try {
        msda::forward(tensors.forward_args(), options);
        ADD_FAILURE() << "no error";
    } catch (const msda::Error &error) {
        EXPECT_NE(std::string(error.what()).find("sample_order"), std::string::npos) << error.what();
    }
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));

    msda_options c_options = msda_default_options();
    EXPECT_EQ(c_options.sample_order, MSDA_SAMPLE_ORDER_AUTOMATIC);
    c_options.sample_order = static_cast<msda_sample_order>(-1);
    const msda_forward_args c_args = msda::testing::to_c(tensors.forward_args());
    EXPECT_NE(msda_forward(&c_args, &c_options), MSDA_OK);
    EXPECT_NE(std::string(msda_last_error()).find("sample_order"), std::string::npos) << msda_last_error();
    EXPECT_TRUE(tensors.output.all_hold(msda::testing::kSentinel));
}

}  // namespace
