// The generated code against the double reference (SPEC: MSDA forward, MSDA
// backward, Precision). Every case stores its inputs as float32, gives the
// reference the same values widened to double, runs the library through
// views whose strides realise the case's layouts, and holds output and all
// three gradients to SPEC's f32 rule: max abs error <= 1e-5 * the largest
// magnitude of the reference tensor.
//
// The grid (core_grid.h) pairs axes instead of multiplying them out: every
// problem shape meets every kind of sampling location, and the four option
// flags and the two index dtypes rotate through all their combinations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "core_grid.h"
#include "test_util.h"

namespace {

using msda::testing::bitwise_equal;
using msda::testing::kPoison;
using msda::testing::kSentinel;
using msda::testing::LibraryTensors;
using msda::testing::Locations;
using msda::testing::matches_reference;
using msda::testing::ProblemData;
using msda::testing::ProblemSpec;
using msda::testing::StridedTensor;
using Level = msda::reference::Level;
using msda::testing::canonical_results;
using msda::testing::combination_of;
using msda::testing::expect_inputs_unchanged;
using msda::testing::expect_matches_reference;
using msda::testing::expect_nothing_written_outside_views;
using msda::testing::LibraryResults;
using msda::testing::grid;
using msda::testing::kLocationKinds;
using msda::testing::options_for;

// The locations a case promises are really there: most coordinates aimed at
// a pixel centre or at the gate land on it exactly.
void expect_locations_as_described(const ProblemData &data) {
    if (data.spec.locations != Locations::pixel_centres && data.spec.locations != Locations::gate_boundary)
        return;
    EXPECT_GE(data.exact_hits * 4, data.exact_attempts * 3)
        << data.exact_hits << " of " << data.exact_attempts << " coordinates exactly where they were aimed";
}

class ForwardBackwardGrid : public ::testing::TestWithParam<ProblemSpec> {};

TEST_P(ForwardBackwardGrid, MatchesReference) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    expect_locations_as_described(data);

    LibraryTensors tensors(data);
    ASSERT_NO_THROW(msda::forward(tensors.forward_args(), spec.options));
    ASSERT_NO_THROW(msda::backward(tensors.backward_args(), spec.options));
    const LibraryResults one_shot = canonical_results(tensors);
    expect_matches_reference(data, one_shot);
    expect_nothing_written_outside_views(tensors);
    expect_inputs_unchanged(tensors, data);
}

// The two-phase API runs the same code: sizes read back from the call's
// tensors, a plan, its workspace, and bit-identical results.
TEST_P(ForwardBackwardGrid, PlanMatchesOneShot) {
    const ProblemSpec &spec = GetParam();
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);

    LibraryTensors one_shot(data);
    ASSERT_NO_THROW(msda::forward(one_shot.forward_args(), spec.options));
    ASSERT_NO_THROW(msda::backward(one_shot.backward_args(), spec.options));

    LibraryTensors planned(data);
    msda::ProblemSize size;
    ASSERT_NO_THROW(size = msda::ProblemSize::of(planned.forward_args(), spec.options));
    EXPECT_EQ(size.batch, spec.batch);
    EXPECT_EQ(size.value_length, spec.value_length());
    EXPECT_EQ(size.heads, spec.heads);
    EXPECT_EQ(size.channels, spec.channels);
    EXPECT_EQ(size.levels, static_cast<std::int64_t>(spec.levels.size()));
    EXPECT_EQ(size.queries, spec.queries);
    EXPECT_EQ(size.points, spec.points);
    EXPECT_EQ(size.dtype, msda::DType::f32);
    EXPECT_EQ(size.locations_dtype, msda::DType::f32);

    msda::ProblemSize backward_size;
    ASSERT_NO_THROW(backward_size = msda::ProblemSize::of(planned.backward_args(), spec.options));
    EXPECT_EQ(backward_size.batch, size.batch);
    EXPECT_EQ(backward_size.value_length, size.value_length);
    EXPECT_EQ(backward_size.heads, size.heads);
    EXPECT_EQ(backward_size.channels, size.channels);
    EXPECT_EQ(backward_size.levels, size.levels);
    EXPECT_EQ(backward_size.queries, size.queries);
    EXPECT_EQ(backward_size.points, size.points);

    const msda::Plan plan(size, spec.options);
    std::vector<std::byte> workspace(plan.workspace_size());
    ASSERT_NO_THROW(plan.forward(planned.forward_args(), workspace.data(), workspace.size()));
    ASSERT_NO_THROW(plan.backward(planned.backward_args(), workspace.data(), workspace.size()));

    msda::testing::expect_same_bits(planned, one_shot);
}

INSTANTIATE_TEST_SUITE_P(Grid, ForwardBackwardGrid, ::testing::ValuesIn(grid()),
                         [](const ::testing::TestParamInfo<ProblemSpec> &info) { return info.param.name; });

// The grid really covers every value of every axis (a guard against someone
// trimming the tables above).
TEST(ForwardBackwardGridCoverage, EveryAxisValueAppears) {
    const std::vector<ProblemSpec> cases = grid();
    auto has = [&](auto predicate) {
        for (const ProblemSpec &spec : cases) {
            if (predicate(spec)) return true;
        }
        return false;
    };
    for (std::int64_t channels : {1, 3, 8, 17, 32, 64, 256, 71, 1025}) {
        EXPECT_TRUE(has([&](const ProblemSpec &s) { return s.channels == channels; })) << "C_h " << channels;
    }
    // A single head of a C_h that is a multiple of no tile, in both value
    // layouts, with samples (the GPU family's over-read of a head's
    // channels showed only there).
    for (std::int64_t channels : {1, 3, 17, 71, 1025}) {
        for (msda::ValueLayout layout : {msda::ValueLayout::BLNC, msda::ValueLayout::BNLC}) {
            EXPECT_TRUE(has([&](const ProblemSpec &s) {
                return s.heads == 1 && s.channels == channels && s.samples() > 0 && s.options.value_layout == layout;
            })) << "one head of C_h " << channels << ", value " << (layout == msda::ValueLayout::BLNC ? "BLNC" : "BNLC");
        }
    }
    for (std::int64_t queries : {0, 1, 300}) {
        EXPECT_TRUE(has([&](const ProblemSpec &s) { return s.queries == queries; })) << "N_q " << queries;
    }
    for (std::int64_t batch : {0, 1, 3}) {
        EXPECT_TRUE(has([&](const ProblemSpec &s) { return s.batch == batch; })) << "B " << batch;
    }
    EXPECT_TRUE(has([](const ProblemSpec &s) { return s.levels.size() == 6; }));
    EXPECT_TRUE(has([](const ProblemSpec &s) { return s.points == 17; }));
    EXPECT_TRUE(
        has([](const ProblemSpec &s) { return s.heads > 16 && s.levels.size() > 16 && s.points > 16; }));
    EXPECT_TRUE(has([](const ProblemSpec &s) { return s.padding > 0; }));
    EXPECT_TRUE(has([](const ProblemSpec &s) {
        for (const Level &level : s.levels) {
            if (level.height == 1 && level.width > 1) return true;
        }
        return false;
    }));
    EXPECT_TRUE(has([](const ProblemSpec &s) {
        for (const Level &level : s.levels) {
            if (level.width == 1 && level.height > 1) return true;
        }
        return false;
    }));
    for (int combination = 0; combination < 16; combination++) {
        EXPECT_TRUE(has([&](const ProblemSpec &s) {
            return s.samples() > 0 && combination_of(s.options) == combination;
        })) << "flag combination "
            << combination;
    }
    for (Locations kind : kLocationKinds) {
        for (int first = 0; first < 4; first++) {
            for (int second = first + 1; second < 4; second++) {
                for (int values = 0; values < 4; values++) {
                    const int wanted = ((values & 1) << first) | ((values >> 1) << second);
                    const int mask = (1 << first) | (1 << second);
                    EXPECT_TRUE(has([&](const ProblemSpec &s) {
                        return s.samples() > 0 && s.locations == kind &&
                               (combination_of(s.options) & mask) == wanted;
                    })) << msda::testing::locations_name(kind)
                        << " never meets flags " << first << "=" << (values & 1) << ", " << second << "="
                        << (values >> 1);
                }
            }
        }
    }
    for (msda::DType shapes : {msda::DType::i32, msda::DType::i64}) {
        for (msda::DType starts : {msda::DType::i32, msda::DType::i64}) {
            EXPECT_TRUE(has([&](const ProblemSpec &s) {
                return s.shapes_dtype == shapes && s.start_dtype == starts;
            })) << msda::dtype_name(shapes)
                << " spatial_shapes with " << msda::dtype_name(starts) << " level_start_index";
        }
    }
}

// The per-sample tensors (sampling_locations, attention_weights and their
// gradients) have no channel dimension, so any stride is a valid layout,
// the innermost one included.
TEST(ForwardBackwardStrides, PerSampleTensorsWithNonUnitInnermostStride) {
    for (int combination : {0, 3, 6, 13}) {
        ProblemSpec spec;
        spec.name = "strided_per_sample";
        spec.batch = 2;
        spec.queries = 19;
        spec.heads = 2;
        spec.channels = combination % 2 ? 32 : 5;
        spec.points = 3;
        spec.levels = {{4, 6}, {2, 3}};
        spec.options = options_for(combination);
        spec.locations = Locations::outside;
        spec.padding = 1;
        spec.per_sample_innermost_stride = 3;
        spec.seed = 77 + combination;
        SCOPED_TRACE(spec.describe());
        const ProblemData data(spec);
        LibraryTensors tensors(data);
        ASSERT_NO_THROW(msda::forward(tensors.forward_args(), spec.options));
        ASSERT_NO_THROW(msda::backward(tensors.backward_args(), spec.options));
        expect_matches_reference(data, canonical_results(tensors));
        expect_nothing_written_outside_views(tensors);
        expect_inputs_unchanged(tensors, data);
    }
}

// spatial_shapes and level_start_index are tensors like the others: any
// strides, either index dtype.
TEST(ForwardBackwardStrides, StridedLevelTables) {
    ProblemSpec spec;
    spec.name = "strided_level_tables";
    spec.batch = 2;
    spec.queries = 11;
    spec.heads = 2;
    spec.channels = 8;
    spec.points = 3;
    spec.levels = {{4, 6}, {2, 3}, {1, 5}};
    spec.options = options_for(5);
    spec.locations = Locations::outside;
    spec.seed = 555;
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::reference::Problem problem = data.reference_problem();
    const std::vector<double> output = msda::reference::forward(problem);
    const msda::reference::Gradients gradients =
        msda::reference::backward(problem, data.grad_output_double());
    // Column-major spatial_shapes: all heights, then all widths; starts at
    // every third element.
    const std::int64_t n_l = 3;
    std::vector<std::int64_t> shapes64 = {4, 2, 1, 6, 3, 5};
    std::vector<std::int32_t> shapes32(shapes64.begin(), shapes64.end());
    std::vector<std::int64_t> starts64 = {0, -7, -7, 24, -7, -7, 30, -7, -7};
    std::vector<std::int32_t> starts32(starts64.begin(), starts64.end());
    for (bool wide : {false, true}) {
        SCOPED_TRACE(wide ? "int64 tables" : "int32 tables");
        LibraryTensors tensors(data);
        const msda::DType dtype = wide ? msda::DType::i64 : msda::DType::i32;
        const void *shapes = wide ? static_cast<const void *>(shapes64.data()) : shapes32.data();
        const void *starts = wide ? static_cast<const void *>(starts64.data()) : starts32.data();
        msda::ForwardArgs forward = tensors.forward_args();
        msda::BackwardArgs backward = tensors.backward_args();
        forward.spatial_shapes = backward.spatial_shapes =
            msda::TensorView::strided(shapes, dtype, {n_l, 2}, {1, n_l});
        forward.level_start_index = backward.level_start_index =
            msda::TensorView::strided(starts, dtype, {n_l}, {3});
        ASSERT_NO_THROW(msda::forward(forward, spec.options));
        ASSERT_NO_THROW(msda::backward(backward, spec.options));
        EXPECT_TRUE(matches_reference("output", tensors.output.canonical(), output));
        EXPECT_TRUE(matches_reference("grad_value", tensors.grad_value.canonical(), gradients.value));
        EXPECT_TRUE(matches_reference("grad_sampling_locations", tensors.grad_sampling_locations.canonical(),
                                      gradients.sampling_locations));
        EXPECT_TRUE(matches_reference("grad_attention_weights", tensors.grad_attention_weights.canonical(),
                                      gradients.attention_weights));
    }
}

// SPEC: "inside it, a corner outside [0, W_l-1] x [0, H_l-1] reads 0", and
// "Nothing ever reads ... outside the tensors". A corner just past the
// bottom edge of level 0 lies, in row arithmetic, in level 1. Here level 1
// holds only NaN and Inf and its own samples are all NaN locations, so any
// corner read as 0 * V instead of 0 (or any sample of level 1 that counts)
// poisons the results. Level 0's samples crowd its edges: outside [0, 1],
// on the gate, and on the last pixel centres (where border mode puts a
// zero-weight corner past the edge).
// One level holds NaN and Inf and is never sampled (its locations are NaN);
// corners of the other level that fall outside it, at any edge, must read 0
// and never a clamped row of the poisoned level. Level 1 poisoned catches
// spills past level 0's bottom and right edges; level 0 poisoned catches
// spills past level 1's top and left edges.
TEST(ForwardBackwardQuarantine, NonFiniteValuesInAnotherLevelNeverLeak) {
    for (int combination = 0; combination < 16; combination++) {
        for (Locations kind : {Locations::outside, Locations::gate_boundary, Locations::pixel_centres}) {
          for (std::int64_t poisoned_level : {0, 1}) {
            ProblemSpec spec;
            spec.name = "quarantine";
            spec.batch = 2;
            spec.queries = 23;
            spec.heads = 2;
            spec.channels = combination % 3 == 0 ? 32 : 7;
            spec.points = 4;
            spec.levels = {{3, 4}, {2, 5}};
            spec.options = options_for(combination);
            spec.locations = kind;
            spec.seed = 300 + combination;
            SCOPED_TRACE(spec.describe() + " poisoned level " + std::to_string(poisoned_level));
            ProblemData data(spec);
            const std::int64_t level0_rows = 3 * 4, rows = spec.value_length();
            const std::int64_t first = poisoned_level == 0 ? 0 : level0_rows;
            const std::int64_t end = poisoned_level == 0 ? level0_rows : rows;
            const std::int64_t row_size = spec.heads * spec.channels;
            for (std::int64_t b = 0; b < spec.batch; b++) {
                for (std::int64_t row = first; row < end; row++) {
                    for (std::int64_t i = 0; i < row_size; i++) {
                        data.value[(b * rows + row) * row_size + i] =
                            i % 2 ? std::numeric_limits<float>::infinity()
                                  : std::numeric_limits<float>::quiet_NaN();
                    }
                }
            }
            for (std::int64_t sample = 0; sample < spec.samples(); sample++) {
                if ((sample / spec.points) % 2 == poisoned_level) {
                    data.sampling_locations[2 * sample] = std::numeric_limits<float>::quiet_NaN();
                }
            }
            LibraryTensors tensors(data);
            ASSERT_NO_THROW(msda::forward(tensors.forward_args(), spec.options));
            ASSERT_NO_THROW(msda::backward(tensors.backward_args(), spec.options));
            expect_matches_reference(data, canonical_results(tensors));
            expect_nothing_written_outside_views(tensors);
          }
        }
    }
}

// SPEC: "A caller may ask for any subset of the three gradients; what is not
// asked for is not computed." Each of the 7 non-empty subsets, once with the
// unasked views present (they must keep the sentinel) and once absent.
class OnlyWhatIsAskedFor : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(OnlyWhatIsAskedFor, EverySubsetOfGradients) {
    ProblemSpec spec;
    spec.name = "subsets";
    spec.batch = 2;
    spec.queries = 40;
    spec.heads = 2;
    spec.channels = GetParam();
    spec.points = 3;
    spec.levels = {{5, 7}, {3, 2}, {1, 4}};
    spec.options = options_for(7);  // BNLC, B2QHLP, align_corners, zeros
    spec.locations = Locations::outside;
    spec.seed = 4242;
    SCOPED_TRACE(spec.describe());
    const ProblemData data(spec);
    const msda::reference::Problem problem = data.reference_problem();
    const msda::reference::Gradients expected = msda::reference::backward(problem, data.grad_output_double());

    for (int subset = 1; subset < 8; subset++) {
        for (bool absent : {false, true}) {
            msda::Options options = spec.options;
            options.grad_value = (subset & 1) != 0;
            options.grad_sampling_locations = (subset & 2) != 0;
            options.grad_attention_weights = (subset & 4) != 0;
            SCOPED_TRACE(::testing::Message()
                         << "grad_value=" << options.grad_value
                         << " grad_sampling_locations=" << options.grad_sampling_locations
                         << " grad_attention_weights=" << options.grad_attention_weights
                         << (absent ? " (unasked views absent)" : " (unasked views present)"));
            LibraryTensors tensors(data);
            msda::BackwardArgs args = tensors.backward_args();
            if (absent) {
                if (!options.grad_value) args.grad_value = {};
                if (!options.grad_sampling_locations) args.grad_sampling_locations = {};
                if (!options.grad_attention_weights) args.grad_attention_weights = {};
            }
            ASSERT_NO_THROW(msda::backward(args, options));

            if (options.grad_value) {
                EXPECT_TRUE(matches_reference("grad_value", tensors.grad_value.canonical(), expected.value));
                EXPECT_TRUE(tensors.grad_value.outside_view_holds(kSentinel));
            } else {
                EXPECT_TRUE(tensors.grad_value.all_hold(kSentinel)) << "grad_value was written";
            }
            if (options.grad_sampling_locations) {
                EXPECT_TRUE(matches_reference("grad_sampling_locations",
                                              tensors.grad_sampling_locations.canonical(),
                                              expected.sampling_locations));
                EXPECT_TRUE(tensors.grad_sampling_locations.outside_view_holds(kSentinel));
            } else {
                EXPECT_TRUE(tensors.grad_sampling_locations.all_hold(kSentinel))
                    << "grad_sampling_locations was written";
            }
            if (options.grad_attention_weights) {
                EXPECT_TRUE(matches_reference("grad_attention_weights",
                                              tensors.grad_attention_weights.canonical(),
                                              expected.attention_weights));
                EXPECT_TRUE(tensors.grad_attention_weights.outside_view_holds(kSentinel));
            } else {
                EXPECT_TRUE(tensors.grad_attention_weights.all_hold(kSentinel))
                    << "grad_attention_weights was written";
            }
            expect_inputs_unchanged(tensors, data);
        }
    }
}

// SPEC: "each gradient's bits are the same whichever other gradients are
// asked for." Every subset against all three, bit for bit, on this suite's
// device: by level, and (Deformable DETR's C_h 32, N_l 4, N_p 4, dense
// BQHLP2 locations) with the samples walked by query, where the CPU has
// code that walks them so for both per-sample gradients together.
TEST_P(OnlyWhatIsAskedFor, EachGradientHasTheSameBitsWhateverElseIsAskedFor) {
    for (const auto order : {msda::SampleOrder::by_level, msda::SampleOrder::by_query}) {
        ProblemSpec spec;
        spec.name = "same_bits";
        spec.batch = 2;
        spec.queries = 40;
        spec.heads = 2;
        spec.channels = GetParam();
        spec.points = 4;
        spec.levels = {{5, 7}, {3, 2}, {1, 4}, {2, 2}};
        spec.options.device = msda::testing::test_device();
        spec.options.sample_order = order;
        spec.dense_sample_blocks = true;
        spec.locations = Locations::inside;
        spec.seed = 4343;
        SCOPED_TRACE(spec.describe() + (order == msda::SampleOrder::by_query ? " by_query" : " by_level"));
        const ProblemData data(spec);
        LibraryTensors all(data);
        ASSERT_NO_THROW(msda::backward(all.backward_args(), spec.options));
        for (int subset = 1; subset < 7; subset++) {
            msda::Options options = spec.options;
            options.grad_value = (subset & 1) != 0;
            options.grad_sampling_locations = (subset & 2) != 0;
            options.grad_attention_weights = (subset & 4) != 0;
            SCOPED_TRACE("subset " + std::to_string(subset));
            LibraryTensors tensors(data);
            ASSERT_NO_THROW(msda::backward(tensors.backward_args(), options));
            if (options.grad_value) EXPECT_EQ(tensors.grad_value.bytes(), all.grad_value.bytes());
            if (options.grad_sampling_locations) {
                EXPECT_EQ(tensors.grad_sampling_locations.bytes(), all.grad_sampling_locations.bytes());
            }
            if (options.grad_attention_weights) {
                EXPECT_EQ(tensors.grad_attention_weights.bytes(), all.grad_attention_weights.bytes());
            }
        }
    }
}

// 17: the generic code; 32 and 64: the compile-time-specialised code.
INSTANTIATE_TEST_SUITE_P(Channels, OnlyWhatIsAskedFor, ::testing::Values(17, 32, 64),
                         [](const ::testing::TestParamInfo<std::int64_t> &info) {
                             return "c" + std::to_string(info.param);
                         });

}  // namespace
